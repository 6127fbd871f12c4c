"""Where a build spends CPU and memory, by stage (`python bench/profile_build.py SOURCES [--rows N]`).

One forced build in one process and one thread (PIPELINE_WORKERS=1, so Great Expectations, the
workbooks, the charts, the plans and a large catalog's downloads run here and cProfile sees them) under cProfile; the time of each part is the cumulative time
of the functions that do it, summed from the profile, so the parts may overlap (typography is part
of rendering). cProfile's clock is the wall clock (a CPU-time clock costs a system call per function
call, which makes the run several times slower): run it on an otherwise idle machine, and read the
parts beside the whole process's CPU, printed first. Memory: the process's resident set and its peak so far (VmRSS, VmHWM of /proc/self/status)
as each stage of the build ends, with the CPU time this process spent since the previous one (the
stages as the build reports them; "write" is reported last but its first part, the pages and
downloads, runs before "validation (rest)"). Pagefind runs in a child process: its CPU is the children's CPU
(getrusage). `--rows N` first makes a synthetic catalog of about N server_fit rows (bench/synth.py)
in SOURCES; `--profile FILE` keeps the raw profile (read it with `python -m pstats FILE`).

    python bench/synth.py /tmp/s1e5 --rows 100000 && python bench/profile_build.py /tmp/s1e5
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

# (what, [(file suffix, function name), ...]): the functions whose cumulative time is that part.
PARTS = [
    ("import of Great Expectations", [("validate/__init__.py", "_import_gx")]),
    (
        "validation (SQL rules, GX suites, import)",
        [("validate/__init__.py", "start_validation"), ("validate/__init__.py", "finish")],
    ),
    ("combination (derived tables)", [("pipeline/combine.py", "combine")]),
    ("  of which recommendations", [("estimate/recommend.py", "recommendations")]),
    ("rendering (pages, Markdown)", [("render/site.py", "render")]),
    ("  of which entity and comparison pages", [("render/site.py", "entity_pages")]),
    ("  of which typography", [("render/russian.py", "typograph")]),
    ("  of which charts", [("render/charts.py", "pages")]),
    ("downloads: CSV", [("publish/downloads.py", "csv_bytes"), ("publish/downloads.py", "csv_text")]),
    ("downloads: XLSX", [("publish/downloads.py", "workbook_bytes")]),
    ("downloads: Parquet", [("polars/dataframe/frame.py", "write_parquet")]),
    ("downloads: metadata.json", [("publish/downloads.py", "table_metadata")]),
    ("downloads: DuckDB file", [("publish/downloads.py", "write_database")]),
    ("  of which its key check", [("publish/downloads.py", "unique_keys")]),
    (
        "search: pages cut and handed to Pagefind",
        [("publish/search.py", "indexed_text"), ("publish/search.py", "_send")],
    ),
    ("writing and hashing files", [("publish/staging.py", "write_tree")]),
]


def _status() -> dict[str, int]:
    """VmRSS and VmHWM of this process, bytes."""
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024
    return found


def cumulative(stats: pstats.Stats, functions: list[tuple[str, str]]) -> float:
    return sum(
        ct
        for (path, _, name), (_, _, _, ct, _) in stats.stats.items()
        if any(path.endswith(suffix) and name == fn for suffix, fn in functions)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", type=Path)
    parser.add_argument("--rows", type=int, help="first write a synthetic catalog of about N server_fit rows there")
    parser.add_argument("--profile", type=Path, help="keep the raw cProfile output here")
    args = parser.parse_args(argv)
    if args.rows:
        import synth

        synth.generate_rows(args.sources, args.rows)
    os.environ["PIPELINE_WORKERS"] = "1"
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    work = Path(tempfile.mkdtemp(prefix="gpu-profile-"))
    os.environ["GPU_FINETUNE_CACHE_DIR"] = str(work / "cache")
    from pipeline.build import build

    memory: list[tuple[str, float, float, int, int]] = []
    cpu_at = [time.process_time()]

    def progress(stage: str, seconds: float) -> None:
        m, now = _status(), time.process_time()
        memory.append((stage, seconds, now - cpu_at[0], m["VmRSS"], m["VmHWM"]))
        cpu_at[0] = now

    profile = cProfile.Profile()  # wall clock: a CPU-time timer costs a system call per function call
    started, cpu = time.perf_counter(), time.process_time()
    try:
        profile.enable()
        build(args.sources, work / "out", force=True, progress=progress)
        profile.disable()
    finally:
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        shutil.rmtree(work, ignore_errors=True)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    stats = pstats.Stats(profile)
    total = stats.total_tt
    if args.profile:
        stats.dump_stats(args.profile)
    print(
        f"build: {wall:.1f} s wall, {cpu:.1f} s CPU in this process (under cProfile), "
        f"{children.ru_utime + children.ru_stime:.1f} s CPU in children (Pagefind)"
    )
    print(f"{'part':<42} {'s':>7} {'share':>6}")
    for what, functions in PARTS:
        seconds = cumulative(stats, functions)
        print(f"{what:<42} {seconds:>7.2f} {seconds / total:>6.0%}")
    print(f"\n{'stage ended':<34} {'s':>6} {'CPU s':>6} {'RSS MiB':>8} {'peak MiB':>9}")
    for stage, seconds, cpu_s, rss, hwm in memory:
        print(f"{stage:<34} {seconds:>6.2f} {cpu_s:>6.2f} {rss / 2**20:>8.0f} {hwm / 2**20:>9.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
