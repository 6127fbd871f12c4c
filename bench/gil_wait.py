"""How long the DuckDB file takes beside a busy Python thread, at several GIL switch intervals.

`python bench/gil_wait.py SOURCES` (`--rows N` first writes a synthetic catalog of about N server_fit
rows there with bench/synth.py) computes the catalog once, then writes the DuckDB download as a build
writes it (`downloads.write_database`): alone, and beside a thread that runs pure Python (as the
rendering does while the downloads' thread writes), with each switch interval in `--intervals`. DuckDB
takes the GIL after each of its tasks (to check for Ctrl-C), so beside such a thread it waits up to
the interval each time (staging.THREAD_SWITCH_SECONDS is the one a build uses). A benchmark: it
reports, it asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

import synth  # noqa: E402  (bench/synth.py, beside this file)


def catalog_of(sources: Path):
    """The build's catalog of `sources` (loaded, validated, computed), as bench/time_accuracy.py makes it."""
    from pipeline.build import load_and_validate
    from pipeline.combine import combine

    return combine(load_and_validate(sources)[0])


def write_beside(catalog, path: Path, busy: bool) -> tuple[float, float]:
    """(wall, CPU of the writing thread) of write_database, beside a busy Python thread or alone."""
    from pipeline.publish.downloads import write_database

    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    spinner = threading.Thread(target=spin, daemon=True)
    if busy:
        spinner.start()
    started, cpu = time.perf_counter(), time.thread_time()
    try:
        write_database(path, catalog)
    finally:
        stop.set()
        if busy:
            spinner.join()
    return time.perf_counter() - started, time.thread_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", type=Path)
    parser.add_argument("--rows", type=int, help="write a synthetic catalog of about this many server_fit rows first")
    parser.add_argument("--intervals", default="0.005,0.002,0.001,0.0005", help="switch intervals, seconds")
    args = parser.parse_args(argv)
    if args.rows:
        synth.generate_rows(args.sources, args.rows)
    catalog = catalog_of(args.sources)
    print(f"server_fit rows: {catalog['server_fit'].height:,}")
    default = sys.getswitchinterval()
    with tempfile.TemporaryDirectory() as work:
        runs = [("alone", default, False)] + [
            ("beside a busy Python thread", float(s), True) for s in args.intervals.split(",")
        ]
        for i, (label, interval, busy) in enumerate(runs):
            sys.setswitchinterval(interval)
            wall, cpu = write_beside(catalog, Path(work) / f"{i}.duckdb", busy)
            print(f"{label:<28} switch {interval * 1000:5.1f} ms: {wall:6.2f} s wall, {cpu:5.2f} s CPU")
    sys.setswitchinterval(default)
    return 0


if __name__ == "__main__":
    sys.exit(main())
