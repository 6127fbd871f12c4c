"""The CPU of making a catalog's pages alone, in one process: what compares with a static site generator.

    python bench/render_cpu.py SOURCES

Loads and computes the catalog (validation is read from the user cache when a build validated the
same sources before), then times `Renderer.render()` (every page, article, chart and asset; the page
memo records each page as a build's does) with the process's CPU clock, and prints one JSON line:
{"render_cpu": s, "pages": n}. No file is written. bench/whole.py runs it after each synthetic build,
beside Hugo rendering as many pages of the same shape (`hugo_site`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]


def render_cpu(sources: Path) -> dict:
    from pipeline.build import load_and_validate
    from pipeline.combine import combine
    from pipeline.render.page_memo import PageMemo
    from pipeline.render.site import Renderer

    con, validation = load_and_validate(sources)
    catalog = combine(con)
    renderer = Renderer(catalog, validation, memo=PageMemo({}, None, Path("site")))
    started = time.process_time()
    rendered = renderer.render()
    cpu = time.process_time() - started
    return {"render_cpu": cpu, "pages": sum(1 for name in rendered.site if name.endswith(".html"))}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 64
    print(json.dumps(render_cpu(Path(args[0]))))
    return 0


if __name__ == "__main__":
    from pipeline.__main__ import as_command

    sys.exit(as_command(main))  # as a command's process runs (garbage collector, OpenBLAS, data stack)
