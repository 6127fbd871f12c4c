"""Command line: `python -m pipeline build [--sources DIR] [--out DIR]`, `python -m pipeline check`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from pipeline.problems import DataError, format_report

EXIT_INVALID_DATA = 2


def load_and_validate(sources: Path):
    """Load the sources into DuckDB and validate them; raises DataError with every problem.

    Returns the connection (with typed tables) and the Validation (checks, warnings, notices).
    """
    from pipeline.load import connect, create_core_tables, read_sources
    from pipeline.validate import validate

    frames, problems, notices = read_sources(sources)
    con = connect(frames)
    validation = validate(con, sources, list(frames))
    problems += validation.problems
    if problems:
        raise DataError(problems)
    validation.warnings = sorted(notices) + validation.warnings
    create_core_tables(con)
    return con, validation


def build(sources: Path, out: Path, base_url: str = "/") -> dict:
    """The whole pipeline; returns counts for the summary line."""
    from pipeline.combine import combine
    from pipeline.publish import publish
    from pipeline.render import Renderer

    con, validation = load_and_validate(sources)
    catalog = combine(con)
    rendered = Renderer(catalog, validation, base_url=base_url).render()
    publish(out, rendered, catalog)
    pages = sum(1 for name in rendered.site if name.endswith(".html"))
    return {
        "warnings": validation.warnings,
        "pages": pages,
        "markdown": len(rendered.markdown),
        "rows": {t: catalog[t].height for t in ("estimates", "gpu_fit", "server_fit")},
    }


def print_warnings(warnings) -> None:
    if warnings:
        print(f"{len(warnings)} warning(s), the build goes on:", file=sys.stderr)
        for w in warnings:
            print(f"  {w}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline", description="GPU fine-tuning reference: build the site."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    b = commands.add_parser("build", help="validate sources/, compute every table and write output/")
    b.add_argument(
        "--sources", type=Path, default=Path("sources"), help="folder of source CSV files (default: sources)"
    )
    b.add_argument("--out", type=Path, default=Path("output"), help="output folder (default: output)")
    b.add_argument(
        "--base-url",
        default=os.environ.get("SITE_BASE_URL", "/"),
        help="where the site will be served, e.g. https://example.org/gpu/ (default: $SITE_BASE_URL or /); "
        "used for canonical links, Open Graph, sitemap.xml, robots.txt and 404.html — other links are relative",
    )
    c = commands.add_parser("check", help="validate the sources only; write nothing")
    c.add_argument(
        "--sources", type=Path, default=Path("sources"), help="folder of source CSV files (default: sources)"
    )
    args = parser.parse_args(argv)

    from pipeline.render import TemplateError

    started = time.perf_counter()
    try:
        if args.command == "check":
            _, validation = load_and_validate(args.sources)
            print_warnings(validation.warnings)
            print(f"{args.sources}: all {len(validation.checks)} checks passed")
            return 0
        summary = build(args.sources, args.out, args.base_url)
        print_warnings(summary["warnings"])
    except (DataError, TemplateError) as exc:
        print(format_report(exc.problems), file=sys.stderr)
        print(
            f"The build stopped; {args.out if args.command == 'build' else 'nothing'} was left as it was.",
            file=sys.stderr,
        )
        return EXIT_INVALID_DATA
    rows = ", ".join(f"{name} {n}" for name, n in summary["rows"].items())
    print(
        f"Built {args.out}/site ({summary['pages']} pages) and {args.out}/markdown ({summary['markdown']} articles); "
        f"rows: {rows}; {time.perf_counter() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
