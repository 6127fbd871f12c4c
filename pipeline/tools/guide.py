"""The ids an editor needs, generated into site_templates/README.md from sources/ (never stale).

`python -m pipeline.tools.guide` (or `just guide`) rewrites the block between the two markers of the guide;
a test fails when the block differs from the sources, so the guide and the data never disagree.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from pipeline import ROOT  # the checkout: sources/ and site_templates/ beside pipeline/
from pipeline.messages import message

GUIDE = ROOT / "site_templates" / "README.md"
START, END = "<!-- ids: generated from sources/ by `just guide` -->", "<!-- /ids -->"

# (file, id column, name column, the catalogue's heading, helper that takes the id)
TABLES = (
    ("models.csv", "model_id", "display_name", "guide.models", 't.model("…")'),
    ("methods.csv", "method_id", "name_ru", "guide.methods", 't.method("…")'),
    ("gpus.csv", "gpu_id", "name", "guide.gpus", 't.gpu("…")'),
    ("servers.csv", "server_id", "display_name", "guide.servers", 't.server("…")'),
    ("legacy_gpu_counts.csv", "row_id", "task_ru", "guide.legacy_rows", 't.legacy_row("…")'),
    ("constants.csv", "constant_id", "description_ru", "guide.constants", 't.const("…")'),
)


def _rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f))


def _cell(text: str) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def ids_markdown(sources: Path = ROOT / "sources") -> str:
    """The block of the guide: per table, every id with its name, and the helper that takes it."""
    parts = [START]
    for file, key, name, heading, helper in TABLES:
        rows = _rows(sources / file)
        parts.append("\n" + message("guide.heading", heading=message(heading), file=file, helper=helper))
        parts.append("\n" + message("guide.columns") + "\n|---|---|")
        parts += [f"| `{_cell(r[key])}` | {_cell(r.get(name, ''))} |" for r in rows]
    parts.append("\n" + END)
    return "\n".join(parts)


def updated(text: str, sources: Path = ROOT / "sources") -> str:
    """The guide's text with the part between its markers replaced by the ids now in `sources`."""
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return head + ids_markdown(sources) + tail


def main() -> int:
    """Rewrite the editors' guide's list of ids from sources/; exit 2 when the guide lost its markers."""
    text = GUIDE.read_text(encoding="utf-8")
    if START not in text or END not in text:
        print(message("guide.no_markers", guide=GUIDE, start=START, end=END), file=sys.stderr)
        return 2
    GUIDE.write_text(updated(text), encoding="utf-8")
    print(message("guide.written", guide=GUIDE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
