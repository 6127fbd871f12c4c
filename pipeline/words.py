"""The words people read come from site_templates/labels.toml (Python holds none): read on each call, so
that a warm process (`just serve`) shows an edited word at its next rebuild."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pipeline import TEMPLATES


def labels(templates: Path | None = None) -> dict:
    """site_templates/labels.toml as a dict of sections."""
    return tomllib.loads(((templates or TEMPLATES) / "labels.toml").read_text(encoding="utf-8"))
