"""Run `python -m pipeline ...` with faults injected from outside the pipeline's code.

    python tests/faults.py '<spec as JSON>' build --sources S --out O

or, from a test, `apply(spec, args)` in a forked child that runs no polars (polars' thread pool does
not survive a fork): what a build does beside the output folder, killed at each step.

The spec (every key optional):
- "pause": "staging" | "swap" | "cleanup": print "paused at <point>" and wait for a line on stdin
  (a test then kills the process or lets it go on). staging: the pages are written, the downloads
  not yet; swap: the build is complete beside the output, not yet in place; cleanup: it is in place,
  the previous build not yet removed.
- "no_exchange": true: the system has no atomic exchange of two folders (macOS, some file systems).
- "kill_before": N: SIGKILL just before the N-th rename, symlink or removal beside the output
  folder (1-based); "kill_after": N, just after it.
- "fail_open": {"under": DIR, "errno": E}: opening a file for writing in the folder DIR fails with
  errno E; with "deeper": true, in any folder below DIR instead (a build's staging folder).
- "fail_write": {"after_bytes": N, "errno": E}: writes to regular files fail with E once N bytes were written.
- "fail_rename": {"errno": E}: renames and exchanges beside the output folder fail with E.
- "duckdb_full": true: DuckDB reports a full disk when it creates its file.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    spec = json.loads(sys.argv[1])
    args = sys.argv[2:]
    apply(spec, args)
    from pipeline.__main__ import main as pipeline_main

    return pipeline_main(args)


def apply(spec: dict, args: list[str]) -> None:  # noqa: C901
    """Inject the faults of `spec` into this process, for the command line `args` (see the module)."""
    out = Path(os.path.abspath(args[args.index("--out") + 1])) if "--out" in args else ROOT / "output"
    beside = str(out.parent)

    import pipeline.publish.staging as publish

    def pause(point: str) -> None:
        print(f"paused at {point}", flush=True)
        sys.stdin.readline()

    if spec.get("pause") == "staging":
        iter_downloads = publish.iter_downloads

        def paused_downloads(*a, **k):
            pause("staging")
            return iter_downloads(*a, **k)

        publish.iter_downloads = paused_downloads
    if spec.get("pause") in ("swap", "cleanup"):
        put_in_place = publish.put_in_place
        point = spec["pause"]

        def paused_put_in_place(*a, **k):
            if point == "swap":
                pause("swap")
            result = put_in_place(*a, **k)
            if point == "cleanup":
                pause("cleanup")
            return result

        publish.put_in_place = paused_put_in_place
    if spec.get("no_exchange"):
        publish._exchange = lambda a, b: False

    def near(*paths) -> bool:
        """A path beside the output folder: the folder itself or one of the build's side names."""
        for p in paths:
            if isinstance(p, (str, os.PathLike)):
                p = os.path.abspath(p)
                if os.path.dirname(p) == beside and (p == str(out) or os.path.basename(p).startswith(f".{out.name}.")):
                    return True
        return False

    calls = {"n": 0}
    kill_before, kill_after = spec.get("kill_before"), spec.get("kill_after")

    def counted(function):
        def wrapper(*a, **k):
            if not near(*a):
                return function(*a, **k)
            calls["n"] += 1
            if calls["n"] == kill_before:
                os.kill(os.getpid(), signal.SIGKILL)
            result = function(*a, **k)
            if calls["n"] == kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        return wrapper

    if kill_before or kill_after:
        os.rename, os.replace, os.symlink = counted(os.rename), counted(os.replace), counted(os.symlink)
        shutil.rmtree = counted(shutil.rmtree)
        publish._exchange = counted(publish._exchange)

    if "fail_rename" in spec:
        code = spec["fail_rename"]["errno"]

        def refusing(function):
            def wrapper(*a, **k):
                if near(*a):
                    raise OSError(code, os.strerror(code), str(a[0]), None, str(a[1]) if len(a) > 1 else None)
                return function(*a, **k)

            return wrapper

        os.rename, os.replace = refusing(os.rename), refusing(os.replace)
        publish._exchange = refusing(publish._exchange)

    if "fail_open" in spec:
        under, code, deeper = spec["fail_open"]["under"], spec["fail_open"]["errno"], spec["fail_open"].get("deeper")
        real_open = os.open

        def failing_open(path, flags, *a, **k):
            folder = os.path.dirname(os.path.abspath(path))
            hit = folder.startswith(under.rstrip("/") + "/") if deeper else folder == under
            if hit and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                raise OSError(code, os.strerror(code), str(path))
            return real_open(path, flags, *a, **k)

        os.open = failing_open

    if "fail_write" in spec:
        limit, code = spec["fail_write"]["after_bytes"], spec["fail_write"]["errno"]
        real_write, written = os.write, {"n": 0}

        def failing_write(fd, data):
            if stat.S_ISREG(os.fstat(fd).st_mode):
                written["n"] += len(data)
                if written["n"] > limit:
                    raise OSError(code, os.strerror(code))
            return real_write(fd, data)

        os.write = failing_write

    if spec.get("duckdb_full"):
        import duckdb

        import pipeline.publish.downloads as downloads

        class FullDuckDB:
            @staticmethod
            def connect(*a, **k):
                raise duckdb.TransactionException(
                    f'TransactionContext Error: Failed to commit: Could not write file "{a[0]}": No space left on device'
                )

            Error, IOException, __version__ = duckdb.Error, duckdb.IOException, duckdb.__version__

        downloads.duckdb = FullDuckDB


if __name__ == "__main__":
    sys.exit(main())
