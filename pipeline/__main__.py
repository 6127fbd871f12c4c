"""Command line: `python -m pipeline build|check|serve|diff|estimate|publish|release` (`--help` on each)."""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pipeline import parallel
from pipeline.errors import ConfigError, DataError, TemplateError

EXIT_INVALID_DATA = 2  # invalid sources or templates, or an --out the build must not replace
EXIT_ENVIRONMENT = 3  # the machine: a full disk, a read-only or immutable folder, a missing permission
EXIT_USAGE = 64  # a mistyped command line (sysexits EX_USAGE): never 2, which means invalid data
EXIT_CODES = """exit codes:
  0  built, or nothing changed since the last build
  1  an internal error (a bug: the traceback says where)
  2  invalid sources or templates (a report names file, line, column, value and rule), or an
     --out folder the build must not replace; nothing was written
  3  an environment problem (full disk, read-only or immutable folder, missing permission) or an
     unusable setting (SOURCE_DATE_EPOCH, SITE_BASE_URL); the previous output was left as it was
  64 a wrong command line (an unknown option or a bad value, a --base-url that is neither an
     http(s) address nor a path from /); nothing was done
  130 interrupted (Ctrl-C); the previous output was left as it was
every command's codes: the table "Exit codes" of docs/operations.md"""
CHECK_EXIT_CODES = """exit codes:
  0  every check passed (warnings may be printed)
  1  an internal error (a bug)
  2  invalid sources or articles (a report names file, line, column, value and rule)
  3  an environment or configuration problem (a folder that cannot be read, an unusable SOURCE_DATE_EPOCH)
  64 a wrong command line
  130 interrupted (Ctrl-C)"""
SERVE_EXIT_CODES = """exit codes:
  0  stopped with Ctrl-C or SIGTERM (a failed rebuild is shown in the page, the server goes on)
  1  an internal error (a bug)
  2  an --out folder the build must not replace
  3  an environment or configuration problem, or the address and port are taken or not this machine's
  64 a wrong command line (a --port outside 0-65535, a bad --base-url)"""
DIFF_EXIT_CODES = """exit codes:
  0  nothing changed
  1  an internal error (a bug: the traceback says where)
  3  the folders could not be compared (one is missing, or a file is unreadable or not a build's)
  4  something changed (the report lists it)
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


class VersionAction(argparse.Action):
    """`--version`, read from the installed package's metadata only when it is asked for
    (importlib.metadata costs more than a build that has nothing to do)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {version()}")
        parser.exit()


def version() -> str:
    """The installed package's version (`--version`)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("gpu-finetune-reference")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def print_warnings(warnings) -> None:
    """Warnings on stderr, grouped (messages.toml words): the build goes on."""
    from pipeline.messages import grouped_warnings, message

    if warnings:
        print(message("report.warnings_header", count=len(warnings)), file=sys.stderr)
        for line in grouped_warnings(warnings):
            print(f"  {line}", file=sys.stderr)


ESTIMATE_HELP = "memory of one training setup from first principles, and what it fits"
PUBLISH_HELP = "publish the built site to S3-compatible storage (only what changed)"
RELEASE_HELP = "record the build as a numbered, dated release of the data (before publishing)"


# The garbage collector's thresholds in a command's own process. A build keeps most of what it makes
# until it ends, and with Python's default (700, 10, 10) the collector ran 400-700 times in one build,
# three times over every object: 0.13 s of CPU on the real catalog, 0.21 s at 10^5 rows and 0.37 s at
# 10^6, all on the build's own path. With these: 20-30 young collections, no full one, 0.06-0.09 s
# (docs/operations.md, "Twentieth round"). A full collection still comes every two million objects
# kept, for `serve`, which lives on.
GC_THRESHOLDS = (10_000, 20, 10)


def own_process() -> None:
    """A command's own process: GC_THRESHOLDS, and one OpenBLAS thread unless the environment names
    another count. No command multiplies matrices, but OpenBLAS (NumPy's, loaded with polars and
    DuckDB) otherwise starts a thread per core when it loads, which spun for 0.1 s of CPU beside the
    build's own start (`perf`; docs/operations.md, "Twenty-third round"). Set by the entry points
    before anything imports NumPy, never by main(), which tests and other programs call in their own
    process."""
    gc.set_threshold(*GC_THRESHOLDS)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def as_command(function: Callable[[], int]) -> int:
    """function() as a command's own process runs it: own_process(), then on a deep stack
    (parallel.on_deep_stack). The entry points, and the bench's tools that measure what a command pays."""
    own_process()
    return parallel.on_deep_stack(function)


def cli() -> None:
    """The installed command `gpu-reference` (pyproject [project.scripts]): the same as `python -m pipeline`."""
    sys.exit(as_command(lambda: main(prog="gpu-reference")))


def parser(argv: list[str] | None, prog: str) -> Parser:
    """The command line: build, check, serve, diff, estimate, publish, each with its options and exit codes."""
    parser = Parser(
        prog=prog,
        description="GPU fine-tuning reference: build the site.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction, help="show the installed version and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    add_build(commands)
    add_check(commands)
    add_serve(commands)
    add_diff(commands)
    words = sys.argv[1:] if argv is None else argv
    # The estimate and publish parsers import their tools (polars; mimetypes): only when it may be the command.
    if may_be("estimate", words):
        from pipeline.tools import estimate_cli

        estimate_cli.add_parser(commands)
    else:
        commands.add_parser("estimate", help=ESTIMATE_HELP)
    if may_be("publish", words):
        from pipeline.tools import publish_s3

        publish_s3.add_parser(commands, argparse.RawDescriptionHelpFormatter, PUBLISH_HELP)
    else:
        commands.add_parser("publish", help=PUBLISH_HELP)
    if may_be("release", words):
        from pipeline.tools import release

        release.add_parser(commands, argparse.RawDescriptionHelpFormatter, RELEASE_HELP)
    else:
        commands.add_parser("release", help=RELEASE_HELP)
    return parser


COMMANDS = ("build", "check", "serve", "diff", "estimate", "publish", "release")


def may_be(command: str, words: list[str]) -> bool:
    """Whether `command` may be the one asked for: named, or no command named at all (help, a typo)."""
    return command in words or not any(w in COMMANDS for w in words)


def add_build(commands) -> None:
    """`build`: its options."""
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
        type=base_url_option,
        help="where the site will be served: an http(s) address or a path from the root, e.g. "
        "https://example.org/gpu/ or /gpu/ (default: $SITE_BASE_URL or /); used for canonical links, Open Graph, "
        "sitemap.xml, robots.txt and 404.html — other links are relative",
    )
    b.add_argument(
        "--force", action="store_true", help="rebuild everything and write every file anew, even if nothing changed"
    )
    b.add_argument("--quiet", action="store_true", help="print only problems, warnings and the summary line")


def add_check(commands) -> None:
    """`check`: its options."""
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


def add_serve(commands) -> None:
    """`serve`: its options."""
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
    s.add_argument(
        "--port", type=port_option, default=8000, help="port, 0 to 65535 (default: 8000; 0 picks a free one)"
    )
    s.add_argument(
        "--bind",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="address to listen on (default: 127.0.0.1, this machine only; 0.0.0.0 for a container or a shared VM)",
    )
    s.add_argument(
        "--base-url",
        type=base_url_option,
        help="the base URL the builds are made for, as in build (default: $SITE_BASE_URL or /)",
    )
    s.add_argument("--quiet", action="store_true", help="print only rebuilds and problems, no stage times")


def add_diff(commands) -> None:
    """`diff`: its options."""
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


def base_url_option(text: str) -> str:
    """--base-url: an http(s) address or a path from the root (pipeline.render.site_links.check_base_url)."""
    from pipeline.render.site_links import check_base_url

    try:
        return check_base_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def port_option(text: str) -> int:
    """--port: a whole number from 0 to 65535."""
    from pipeline.messages import message

    value = text.strip()
    if not value.isascii() or not value.isdigit() or int(value) > 65535:
        raise argparse.ArgumentTypeError(message("config.port", value=text))
    return int(value)


def env_base_url() -> str:
    """The base URL when --base-url is not given: $SITE_BASE_URL, checked like the option (exit 3), or /."""
    from pipeline.messages import message
    from pipeline.render.site_links import check_base_url

    value = os.environ.get("SITE_BASE_URL") or "/"
    try:
        return check_base_url(value)
    except ValueError as exc:
        raise ConfigError(message("config.base_url_env", reason=exc)) from None


def main(argv: list[str] | None = None, prog: str = "python -m pipeline") -> int:
    """`python -m pipeline …`: parse the arguments and run the command; returns the exit code.
    A setting that cannot be used (ConfigError: a variable, a config file, an address) is one line, exit 3."""
    args = parser(argv, prog).parse_args(argv)
    try:
        if args.command in ("build", "serve") and args.base_url is None:
            args.base_url = env_base_url()
        return run_parsed(args)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_ENVIRONMENT


def run_parsed(args: argparse.Namespace) -> int:
    """The command of parsed arguments; its exit code."""
    if args.command == "estimate":
        from pipeline.tools import estimate_cli

        return estimate_cli.run(args)
    if args.command == "publish":
        from pipeline.tools import publish_s3

        return publish_s3.run(args)
    if args.command == "release":
        from pipeline.tools import release

        return release.run(args)

    if args.command == "diff":
        from pipeline.tools.diff import run

        return run(args.out, args.against, as_json=args.json)

    return run_command(args)


def run_command(args: argparse.Namespace) -> int:
    """build, check or serve, with the report and the exit code of every way they can end."""
    from pipeline.build import build, check

    started = time.perf_counter()
    out = getattr(args, "out", None)
    interrupted = watch_interrupt()
    try:
        if args.command == "serve":
            from pipeline.fingerprint import build_date
            from pipeline.publish import outdir
            from pipeline.tools.serve import serve

            build_date()  # an unusable SOURCE_DATE_EPOCH stops serve at once (exit 3), not every rebuild
            outdir.writable(outdir.check_output(args.out, args.sources))
            return serve(args.sources, args.out, args.port, args.base_url, quiet=args.quiet, bind=args.bind)
        if args.command == "check":
            checks = check(args.sources, on_warnings=print_warnings)
            from pipeline.messages import message

            print(message("report.check_passed", sources=args.sources, checks=checks))
            return 0

        from pipeline.messages import stage_line

        def progress(stage: str, seconds: float) -> None:
            if not args.quiet:
                print(f"  {stage_line(stage, seconds)}", file=sys.stderr, flush=True)

        summary = build(args.sources, args.out, args.base_url, force=args.force, progress=progress)
    except (DataError, TemplateError) as exc:
        from pipeline.messages import message
        from pipeline.problems import format_report

        print(format_report(exc.problems), file=sys.stderr)
        stopped = (
            message(STOPPED_BUILD[out_state(args.out)], out=args.out)
            if args.command == "build"
            else message("report.stopped_check")
        )
        print(stopped, file=sys.stderr)
        return EXIT_INVALID_DATA
    except Exception as exc:
        if interrupted and not isinstance(exc, ConfigError):  # what a Ctrl-C broke on its way (a half-done import)
            return say_interrupted(out)
        code = failure_code(exc, out)
        if code is None:
            raise
        return code
    except KeyboardInterrupt:
        return say_interrupted(out)
    return report(args, summary, started)


def say_interrupted(out: Path | None) -> int:
    """Ctrl-C: one line, exit 130."""
    from pipeline.messages import message

    if out is None:
        line = message("report.interrupted_nothing")
    else:
        line = message("report.interrupted_absent" if out_state(out) == ABSENT else "report.interrupted", out=out)
    print(line, file=sys.stderr)
    return 130


ABSENT = 2  # out_state: the folder is not there
STOPPED_BUILD = ("report.stopped_build", "report.stopped_build_kept", "report.stopped_build_absent")  # by out_state


def out_state(out: Path) -> int:
    """What a stopped build left at `out`, for the line that says so: 0 an earlier build (its
    build-state.json), 1 another folder (empty, or a fresh clone's output/ with its README), ABSENT
    nothing at all (a first build stopped: saying the folder "is unchanged" would speak of one that
    never was). A stopped build never creates, changes or removes `out`."""
    if not os.path.lexists(out):
        return ABSENT
    return 0 if (Path(out) / "build-state.json").is_file() else 1


def failure_code(exc: Exception, out: Path | None) -> int | None:
    """The line and exit code of a refused --out, an unsafe path or a problem of the machine; None for a bug."""
    from pipeline.messages import message
    from pipeline.publish.outdir import OutputRefused
    from pipeline.publish.paths import UnsafePath

    if isinstance(exc, OutputRefused):
        print(message("report.refused", reason=exc), file=sys.stderr)
        return EXIT_INVALID_DATA
    if isinstance(exc, UnsafePath):
        which = "report.unsafe_path_absent" if out and out_state(out) == ABSENT else "report.unsafe_path"
        stopped = message(which, reason=exc, out=out) if out else None
        print(stopped or message("report.unsafe_path_nothing", reason=exc), file=sys.stderr)
        return EXIT_INVALID_DATA
    if isinstance(exc, OSError):
        print(environment_message(exc, out), file=sys.stderr)
        return EXIT_ENVIRONMENT
    return None


def watch_interrupt() -> list[int]:
    """A list that gets an entry when Ctrl-C (SIGINT) arrives, which still raises KeyboardInterrupt: an
    error raised after it (a library that reports a half-imported module as "not installed") is the
    interrupt's consequence, reported as the interrupt (exit 130), not as a bug."""
    import signal
    import threading

    seen: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        return seen

    def on_interrupt(signum, frame):
        seen.append(signum)
        raise KeyboardInterrupt

    on_interrupt.watches = True  # type: ignore[attr-defined]
    current = signal.getsignal(signal.SIGINT)
    if current is signal.default_int_handler or getattr(current, "watches", False):
        signal.signal(signal.SIGINT, on_interrupt)
    return seen


def report(args: argparse.Namespace, summary: dict, started: float) -> int:
    """The summary line of a build (and its warnings)."""
    from pipeline.messages import message

    if summary["unchanged"]:
        print(message("report.unchanged", out=args.out, seconds=_seconds(time.perf_counter() - started, 2)))
        return 0
    print_warnings(summary["warnings"])
    rows = ", ".join(f"{name} {n}" for name, n in summary["rows"].items())
    files = summary["files"]
    if summary.get("leftover"):
        print(message("report.leftover", path=summary["leftover"]), file=sys.stderr)
    print(
        message(
            "report.built",
            out=args.out,
            pages=summary["pages"],
            rendered=len(summary["rendered"]),
            markdown=summary["markdown"],
            rows=rows,
            written=files["written"],
            kept=files["kept"],
            seconds=_seconds(time.perf_counter() - started, 1),
        )
    )
    return 0


def _seconds(seconds: float, places: int) -> str:
    """Seconds as a Russian reader writes them: a decimal comma."""
    return f"{seconds:.{places}f}".replace(".", ",")


def environment_message(exc: OSError, out: Path | None) -> str:
    """One line for a problem of the machine: what happened, where, what to do."""
    import errno

    from pipeline.messages import message
    from pipeline.publish.paths import os_error_code

    where = exc.filename or (str(out) if out else "")
    where = f" ({where}" + (f" -> {exc.filename2}" if exc.filename2 else "") + ")" if where else ""
    code = os_error_code(exc)
    immutable = message("outdir.immutable")
    if code in (errno.ENOSPC, errno.EDQUOT):
        what, todo = message("environment.disk_full"), message("environment.disk_full_todo")
    elif code == errno.EROFS:
        what, todo = message("environment.read_only"), message("environment.read_only_todo")
    elif code in (errno.EACCES, errno.EPERM):
        what = message("environment.no_permission") if exc.strerror != immutable else immutable
        todo = message("environment.no_permission_todo")
    elif code == errno.ENAMETOOLONG:
        what, todo = message("environment.name_too_long"), message("environment.name_too_long_todo")
    else:
        what, todo = (exc.strerror or str(exc)).rstrip("."), message("environment.other_todo")
    kept = message("environment.absent" if out_state(out) == ABSENT else "environment.kept", out=out) if out else ""
    return message("environment.line", what=what, where=where, todo=todo, kept=kept)


if __name__ == "__main__":
    sys.exit(as_command(main))
