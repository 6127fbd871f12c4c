"""The message catalogue: every text the command line shows an editor, in Russian, from
site_templates/messages.toml. One lookup, `message(key, **slots)`; an unknown key or slot is a bug."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

CATALOGUE = Path(__file__).resolve().parent.parent / "site_templates" / "messages.toml"


@lru_cache(maxsize=1)
def catalogue() -> dict[str, str]:  # noqa: D103
    return tomllib.loads(CATALOGUE.read_text(encoding="utf-8"))


def message(key: str, **slots) -> str:  # noqa: D103
    return catalogue()[key].format(**slots)


def grouped_warnings(warnings) -> list[str]:
    """The warnings as lines, the same warning on several rows of one file given once with its rows
    and count (five servers without a price: one line, not five)."""
    groups: dict[tuple, list] = {}
    for w in warnings:
        groups.setdefault((w.file, w.column, str(w.value), w.rule), []).append(w)
    lines = []
    for (file, column, _, rule), items in groups.items():
        if len(items) == 1 or not all(w.line for w in items):
            lines += [str(w) for w in items]
            continue
        where = f"{file}: {column}" if column else file
        rows = ", ".join(str(w.line) for w in items)
        lines.append(message("warning_repeated", where=where, rule=rule, lines=rows, count=len(items)))
    return lines
