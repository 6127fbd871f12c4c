"""Command line: `python -m pipeline build|check|serve|diff|estimate|publish` (`--help` on each)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

from pipeline.problems import DataError, Problem, TemplateError, format_report

EXIT_INVALID_DATA = 2  # invalid sources or templates, or an --out the build must not replace
EXIT_ENVIRONMENT = 3  # the machine: a full disk, a read-only or immutable folder, a missing permission
EXIT_USAGE = 64  # a mistyped command line (sysexits EX_USAGE): never 2, which means invalid data
EXIT_CODES = """exit codes:
  0  built, or nothing changed since the last build
  1  an internal error (a bug: the traceback says where)
  2  invalid sources or templates (a report names file, line, column, value and rule), or an
     --out folder the build must not replace; nothing was written
  3  an environment problem (full disk, read-only or immutable folder, missing permission);
     the previous output was left as it was
  64 a wrong command line (an unknown option or a bad value); nothing was done"""
CHECK_EXIT_CODES = """exit codes:
  0  every check passed (warnings may be printed)
  1  an internal error (a bug)
  2  invalid sources (a report names file, line, column, value and rule)
  3  an environment problem (a folder that cannot be read)
  64 a wrong command line"""
SERVE_EXIT_CODES = """exit codes:
  0  stopped with Ctrl-C or SIGTERM (a failed rebuild is shown in the page, the server goes on)
  1  an internal error (a bug)
  2  an --out folder the build must not replace
  3  an environment problem, or the address and port are taken or not allowed
  64 a wrong command line"""
DIFF_EXIT_CODES = """exit codes:
  0  nothing changed
  1  something changed (the report lists it)
  3  the folders could not be compared
  64 a wrong command line"""


class Parser(argparse.ArgumentParser):
    """argparse exits 2 on a mistyped option; here 2 means invalid data, so a usage error exits EXIT_USAGE."""

    def error(self, message: str):
        """Exit EXIT_USAGE; a value that an option's own rule refuses (a type marked `invalid_data`,
        as estimate's ranges) is invalid input and exits EXIT_INVALID_DATA, like a bad row of a file."""
        self.print_usage(sys.stderr)
        option = message.removeprefix("argument ").split(":", 1)[0].split("/")
        refused = [a for a in self._actions if set(a.option_strings) & set(option)]
        code = EXIT_INVALID_DATA if refused and getattr(refused[0].type, "invalid_data", False) else EXIT_USAGE
        self.exit(code, f"{self.prog}: error: {message}\n")


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("gpu-finetune-reference")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def load_and_validate(sources: Path):
    """Load the sources into DuckDB and validate them; raises DataError with every problem.

    Returns the connection (with typed tables) and the Validation (checks, warnings, notices).
    Sources validated before (pipeline.validation_cache) are loaded without validating again.
    """
    from pipeline import validation_cache

    remembered = validation_cache.remembered(sources)
    if remembered is not None:
        return load_validated_before(sources), remembered
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
    validation_cache.remember(sources, validation)
    return con, validation


def load_validated_before(sources: Path):
    """Load sources that an earlier build already validated (unchanged since): no GX run."""
    from pipeline.load import connect, create_core_tables, read_sources

    frames, problems, _ = read_sources(sources)
    problems += path_id_problems(frames, sources)
    if problems:
        raise DataError(problems)
    con = connect(frames)
    create_core_tables(con)
    return con


ID_RULE = "ids use lowercase latin letters and digits, joined by '-' or '_'"


def path_id_problems(frames: dict, sources: Path) -> list[Problem]:
    """Ids that would not be safe in a file name (the id rule, the length limit), found before
    anything is written: pages are rendered and written while the Great Expectations suites,
    which check the same rules, still run in a forked child."""
    import polars as pl

    from pipeline.load import LINE, display_path
    from pipeline.schema import ID_PATTERN, SOURCE_TABLES

    found = []
    for table in SOURCE_TABLES:
        frame = frames.get(table.name)
        for field in table.fields if frame is not None else ():
            if field.type != "id":
                continue
            column = pl.col(field.name)
            bad = frame.filter(
                column.is_not_null() & (~column.str.contains(ID_PATTERN) | (column.str.len_chars() > field.max_length))
            )
            for line, value in bad.select(LINE, field.name).iter_rows():
                too_long = len(value) > field.max_length
                rule = f"longer than {field.max_length} characters" if too_long else ID_RULE
                found.append(Problem(display_path(sources, table), line, field.name, value, rule))
    return found


def _source_names(sources: Path) -> dict[str, str]:
    """How reports name each source file (relative to the working directory) -> its name in `sources`."""
    from pipeline.load import display_path
    from pipeline.schema import SOURCE_TABLES

    return {display_path(sources, table): table.file for table in SOURCE_TABLES}


def published(validation, sources: Path):
    """The validation as the site shows it (quality.html, data.html) and build-state.json keeps it:
    source files named within the sources folder (`servers.csv`), never by a path of the build machine."""
    import dataclasses

    names = _source_names(sources)
    return dataclasses.replace(
        validation, warnings=[dataclasses.replace(w, file=names.get(w.file, w.file)) for w in validation.warnings]
    )


def shown(warnings: list[Problem], sources: Path) -> list[Problem]:
    """Published warnings as the terminal shows them: source files named from the working directory."""
    import dataclasses

    names = {name: path for path, name in _source_names(sources).items()}
    return [dataclasses.replace(w, file=names.get(w.file, w.file)) for w in warnings]


def build(sources: Path, out: Path, base_url: str = "/", force: bool = False, progress=None) -> dict:
    """Build `sources` into `out` (see _build): the output folder is checked first (outdir.check_output,
    outdir.writable), and the build holds the folder's lock, so that a second build of it waits."""
    from pipeline import outdir

    folder = outdir.check_output(out, sources)
    outdir.writable(folder)
    with outdir.locked(folder):
        outdir.tidy(folder)
        return _build(sources, folder, base_url, force, progress)


def _build(sources: Path, out: Path, base_url: str = "/", force: bool = False, progress=None) -> dict:
    """The whole pipeline; returns counts and stage times for the summary line.

    A build whose inputs (sources, templates, code, base URL, build date) are unchanged
    since the build in `out` is skipped; one with unchanged sources and code reuses that
    build's validation. Otherwise Great Expectations runs in a forked child while this
    process computes, renders and writes the new build beside `out`; the build is put in
    place (with its quality page, the one page that shows the checks) only once every check
    has passed, so the result, the report and the exit code are those of validating first.
    """
    from pipeline import fingerprint, site_links, validation_cache

    say = progress or (lambda stage, seconds: None)
    started = time.perf_counter()
    inputs = fingerprint.inputs(sources, base_url)
    if not force and fingerprint.is_current(out, inputs):
        return {"unchanged": True, "seconds": {"check": time.perf_counter() - started}}

    from pipeline.combine import combine
    from pipeline.downloads import start_workbooks
    from pipeline.load import connect, create_core_tables, read_sources
    from pipeline.publish import stage
    from pipeline.render import Renderer
    from pipeline.validate import Validation, start_validation

    seconds = {"imports": time.perf_counter() - started}
    say("imports", seconds["imports"])
    previous = fingerprint.read_state(out)
    same = all(previous.get("inputs", {}).get(k) == inputs[k] for k in ("sources", "code", "build_date"))

    def timed(stage_name: str, run):
        tick = time.perf_counter()
        result = run()
        seconds[stage_name] = time.perf_counter() - tick
        say(stage_name, seconds[stage_name])
        return result

    def start_loading():
        """load_and_validate, with the GX suites left running: (connection, validation so far, finish)."""
        frames, problems, notices = read_sources(sources)
        con = connect(frames)
        early, finish_suites = start_validation(con, sources, list(frames))

        def finish() -> Validation:
            validation = finish_suites()
            problems_all = problems + validation.problems
            if problems_all:
                raise DataError(problems_all)
            validation.warnings = sorted(notices) + validation.warnings
            validation_cache.remember(sources, validation)
            return validation

        unsafe = path_id_problems(frames, sources)
        if problems or early.problems or unsafe:
            finish()  # raises DataError with every problem, as load_and_validate does
            raise DataError(unsafe)  # (the suites check ids too: not reached unless they disagree)
        try:
            create_core_tables(con)  # strict casts: cells GX has yet to reject may fail here
        except Exception:
            finish()
            raise
        return con, Validation(warnings=sorted(notices) + early.warnings, build_date=early.build_date), finish

    def render(renderer):
        return renderer, renderer.render()

    finish = None
    remembered = None if force else validation_cache.remembered(sources)
    if same and "validation" in previous and not force:
        con = timed("load (validation reused)", lambda: load_validated_before(sources))
        validation = Validation.from_dict(previous["validation"])
    elif remembered is not None:  # these sources passed before, in this or another --out, build or check
        con = timed("load (validation remembered)", lambda: load_validated_before(sources))
        validation = published(remembered, sources)
    else:
        with validation_cache.fresh(force):  # --force validates every table anew
            con, validation, finish = timed("load, validation started", start_loading)
        validation = published(validation, sources)
    workbooks = None
    try:
        catalog = timed("compute", lambda: combine(con))
        workbooks = start_workbooks(catalog)  # made in a forked child while this process renders
        renderer, rendered = timed("render", lambda: render(Renderer(catalog, validation, base_url=base_url)))
        tick = time.perf_counter()
        staging = stage(out, rendered, catalog, skip=("quality.html",), workbooks=workbooks, force=force)
        writing = time.perf_counter() - tick
    except Exception:
        if workbooks is not None:
            with contextlib.suppress(Exception):
                workbooks()  # the child is waited for, not left behind (a warm process goes on)
        if finish is not None:
            finish()  # problems in the sources are reported before what they broke downstream
        raise
    try:
        if finish is not None:
            validation = published(timed("validation (rest)", finish), sources)
            rendered.site["quality.html"] = renderer.page("quality.html", "quality.html", validation=validation)
        state = {"inputs": inputs, "validation": validation.to_dict()}
        late = {name: rendered.site[name] for name in ("quality.html",) if name in rendered.site}
        tick = time.perf_counter()
        counts = staging.swap(state, late)
        seconds["write"] = writing + time.perf_counter() - tick  # before and after the wait
        say("write", seconds["write"])
    except BaseException:
        staging.discard()
        raise
    return {
        "unchanged": False,
        "warnings": shown(validation.warnings, sources)
        + rendered.warnings  # + the articles' removed markup
        + site_links.base_url_warning(base_url),
        "leftover": staging.leftover,
        "pages": sum(1 for name in rendered.site if name.endswith(".html")),
        "markdown": len(rendered.markdown),
        "rows": {t: catalog[t].height for t in ("estimates", "gpu_fit", "server_fit")},
        "files": counts,
        "seconds": seconds,
    }


def print_warnings(warnings) -> None:
    from pipeline.messages import grouped_warnings, message

    if warnings:
        print(message("warnings_header", count=len(warnings)), file=sys.stderr)
        for line in grouped_warnings(warnings):
            print(f"  {line}", file=sys.stderr)


ESTIMATE_HELP = "memory of one training setup from first principles, and what it fits"


def cli() -> None:
    """The installed command `gpu-reference` (pyproject [project.scripts]): the same as `python -m pipeline`."""
    sys.exit(main(prog="gpu-reference"))


def main(argv: list[str] | None = None, prog: str = "python -m pipeline") -> int:
    parser = Parser(
        prog=prog,
        description="GPU fine-tuning reference: build the site.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    b = commands.add_parser(
        "build",
        help="validate sources/, compute every table and write output/",
        description="Validate the sources, compute every table and write the output folder. The folder is "
        "replaced as a whole, so it must be absent, empty or an earlier build; one build per folder runs at a time.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    b.add_argument(
        "--force", action="store_true", help="rebuild everything and write every file anew, even if nothing changed"
    )
    b.add_argument("--quiet", action="store_true", help="print only problems, warnings and the summary line")
    c = commands.add_parser(
        "check",
        help="validate the sources only; write nothing",
        description="Validate the sources and print every problem at once; writes nothing.",
        epilog=CHECK_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument(
        "--sources", type=Path, default=Path("sources"), help="folder of source CSV files (default: sources)"
    )
    s = commands.add_parser(
        "serve",
        help="serve the site on 127.0.0.1, rebuild on every change, reload the page",
        description="Build, serve the site, rebuild on every change of the sources or templates and reload "
        "the open page, until Ctrl-C.",
        epilog=SERVE_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "--sources", type=Path, default=Path("sources"), help="folder of source CSV files (default: sources)"
    )
    s.add_argument("--out", type=Path, default=Path("output"), help="output folder (default: output)")
    s.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 picks a free one)")
    s.add_argument(
        "--bind",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="address to listen on (default: 127.0.0.1, this machine only; 0.0.0.0 for a container or a shared VM)",
    )
    s.add_argument(
        "--base-url",
        default=os.environ.get("SITE_BASE_URL", "/"),
        help="the base URL the builds are made for, as in build (default: $SITE_BASE_URL or /)",
    )
    s.add_argument("--quiet", action="store_true", help="print only rebuilds and problems, no stage times")
    d = commands.add_parser(
        "diff",
        help="what this build changes compared with the published one",
        description="What this build changes compared with the published one, in the editor's terms.",
        epilog=DIFF_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("--out", type=Path, default=Path("output"), help="this build's output folder (default: output)")
    d.add_argument(
        "--against",
        type=Path,
        default=Path(os.environ.get("PUBLISHED_DIR", "published")),
        help="the published build to compare with (default: $PUBLISHED_DIR or published, made by `just publish`)",
    )
    d.add_argument("--json", action="store_true", help="the report as JSON, for tools")
    words = sys.argv[1:] if argv is None else argv
    if "estimate" in words or not any(w in ("build", "check", "serve", "diff", "publish") for w in words):
        from pipeline import estimate_command  # (memory, polars): only when it may be the command

        estimate_command.add_parser(commands)
    else:
        commands.add_parser("estimate", help=ESTIMATE_HELP)
    from pipeline import publish_s3

    publish_s3.add_parser(commands, argparse.RawDescriptionHelpFormatter)
    args = parser.parse_args(argv)

    if args.command == "estimate":
        from pipeline import estimate_command

        return estimate_command.run(args)
    if args.command == "publish":
        return publish_s3.run(args)

    if args.command == "diff":
        from pipeline.diff import run

        return run(args.out, args.against, as_json=args.json)

    started = time.perf_counter()
    out = getattr(args, "out", None)
    try:
        if args.command == "serve":
            from pipeline import outdir
            from pipeline.serve import serve

            outdir.writable(outdir.check_output(args.out, args.sources))
            return serve(args.sources, args.out, args.port, args.base_url, quiet=args.quiet, bind=args.bind)
        if args.command == "check":
            from pipeline import validation_cache

            known = validation_cache.remembered_summary(args.sources)  # sources passed before: no rule runs
            if known is None or not validation_cache.articles_passed(args.sources):
                con, validation = load_and_validate(args.sources)
                print_warnings(validation.warnings)
                from pipeline.combine import combine
                from pipeline.render import check_articles

                check_articles(combine(con), validation)  # a claim of an article the data no longer supports
                validation_cache.remember_articles(args.sources)
                print(f"{args.sources}: all {len(validation.checks)} checks passed")
                return 0
            print_warnings(known[0])
            print(f"{args.sources}: all {known[1]} checks passed")
            return 0

        def progress(stage: str, seconds: float) -> None:
            if not args.quiet:
                print(f"  {stage}: {seconds:.2f} s", file=sys.stderr, flush=True)

        summary = build(args.sources, args.out, args.base_url, force=args.force, progress=progress)
    except (DataError, TemplateError) as exc:
        print(format_report(exc.problems), file=sys.stderr)
        from pipeline.messages import message

        stopped = message("stopped_build", out=args.out) if args.command == "build" else message("stopped_check")
        print(stopped, file=sys.stderr)
        return EXIT_INVALID_DATA
    except Exception as exc:
        from pipeline.outdir import OutputRefused
        from pipeline.paths import UnsafePath

        if isinstance(exc, OutputRefused):
            print(f"Refused: {exc}.", file=sys.stderr)
            return EXIT_INVALID_DATA
        if isinstance(exc, UnsafePath):
            print(f"The build stopped: {exc}; {out or 'nothing'} was left as it was.", file=sys.stderr)
            return EXIT_INVALID_DATA
        if isinstance(exc, OSError):
            print(environment_message(exc, out), file=sys.stderr)
            return EXIT_ENVIRONMENT
        raise
    except KeyboardInterrupt:
        print(f"Interrupted; {out or 'nothing'} was left as it was.", file=sys.stderr)
        return 130
    if summary["unchanged"]:
        print(f"Nothing changed since the last build of {args.out}; {time.perf_counter() - started:.2f} s")
        return 0
    print_warnings(summary["warnings"])
    rows = ", ".join(f"{name} {n}" for name, n in summary["rows"].items())
    files = summary["files"]
    if summary.get("leftover"):
        print(
            f"warning: could not remove the previous build at {summary['leftover']}; the next build will",
            file=sys.stderr,
        )
    print(
        f"Built {args.out}/site ({summary['pages']} pages) and {args.out}/markdown ({summary['markdown']} articles); "
        f"rows: {rows}; files: {files['written']} written, {files['kept']} unchanged; "
        f"{time.perf_counter() - started:.1f} s"
    )
    return 0


def environment_message(exc: OSError, out: Path | None) -> str:
    """One line for a problem of the machine: what happened, where, what to do."""
    import errno

    where = exc.filename or (str(out) if out else "")
    where = f" ({where}" + (f" -> {exc.filename2}" if exc.filename2 else "") + ")" if where else ""
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        what, todo = "the disk is full", "free some space there (or choose another --out) and build again"
    elif code == errno.EROFS:
        what, todo = "the file system is read-only", "remount it read-write or choose another --out"
    elif code in (errno.EACCES, errno.EPERM):
        what = "no permission to write there" if "immutable" not in str(exc.strerror) else str(exc.strerror)
        todo = "check the folder's owner, mode and flags (ls -ld, lsattr; chattr -i) or choose another --out"
    elif code == errno.ENAMETOOLONG:
        what, todo = "a file name is too long for this file system", "choose an --out with a shorter path"
    else:
        what, todo = (exc.strerror or str(exc)).rstrip("."), "fix that and build again"
    kept = f"; {out} was left as it was" if out else ""
    return f"Environment problem: {what}{where}: {todo}{kept}."


if __name__ == "__main__":
    sys.exit(main())
