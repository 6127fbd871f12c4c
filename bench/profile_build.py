"""Where a build spends CPU and memory, part by part (`python bench/profile_build.py SOURCES [--rows N]`).

A build's parts run one after the other in this one process (PIPELINE_WORKERS=1: Great Expectations,
the workbooks and the plans run here, nothing beside them), each timed with the process's CPU clock
(`time.process_time`: every thread of the process, polars' and DuckDB's included, which a profiler
of Python frames does not see) and Pagefind, a child process, with the children's clock:

- phases, in a build's order: the imports, validation (reading the sources, loading them into
  DuckDB, the SQL rules, Great Expectations' import and its suites), combination (each derived table,
  the plans apart), the rows of server_fit and recommendations made when asked, rendering, each
  download format, the DuckDB file, search, writing the pages; with each phase's resident memory at
  its end and its peak during it (VmRSS, and VmHWM reset before it through /proc/self/clear_refs);
- parts within a phase ("of which"): the CPU of the functions that do them, summed over their calls
  (`Timed`), e.g. typography within rendering or the key check within the DuckDB file.

The phases add up to a forced build's work (which makes the large tables' rows once for their CSV
and Parquet files, in one pass, and once more for the DuckDB file, as here), spread over two cores
and several processes (`bench/cpu_tree.py` shows how), plus one pass over those rows that only the
profile makes, to time it ("rows of server_fit and recommendations, made once"). Validation runs on an empty private user cache, so every suite runs. `--rows N` first makes a
synthetic catalog of about N server_fit rows (bench/synth.py) in SOURCES; `--profile FILE` also
keeps a cProfile of the whole run (`python -m pstats FILE`; its clock is the wall clock, and it
makes Python code several times slower).

    python bench/synth.py /tmp/s1e5 --rows 100000 && python bench/profile_build.py /tmp/s1e5
"""

from __future__ import annotations

import argparse
import cProfile
import os
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]


def _status() -> dict[str, int]:
    """VmRSS and VmHWM of this process, bytes."""
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024
    return found


def _reset_peak() -> None:
    """Start VmHWM again from the resident set now (Linux: /proc/self/clear_refs, 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Timed:
    """CPU seconds and calls of functions by label, summed over calls (the outermost call of a label
    counts: a function that calls itself, or another of the same label, is not counted twice)."""

    def __init__(self) -> None:
        self.cpu: Counter = Counter()
        self.calls: Counter = Counter()
        self._depth: Counter = Counter()

    def wrap(self, label: str, function: Callable) -> Callable:
        def timed(*args, **kwargs):
            self.calls[label] += 1
            self._depth[label] += 1
            started = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self._depth[label] -= 1
                if not self._depth[label]:
                    self.cpu[label] += time.process_time() - started

        timed.__wrapped__ = function
        return timed

    def patch(self, label: str, owner, name: str) -> None:
        """Time owner.name (a module's function or a class's method) wherever the pipeline's modules
        hold it: a module that imported it by name holds the same object."""
        original = getattr(owner, name)
        wrapped = self.wrap(label, original)
        setattr(owner, name, wrapped)
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("pipeline"):
                for attribute, value in list(vars(module).items()):
                    if value is original:
                        setattr(module, attribute, wrapped)


_V, _R, _D = "validation", "rendering", "downloads (every table)"
_LOAD, _DL = "pipeline.load", "pipeline.publish.downloads"
# (phase, label, module, owner in it or None, function): the parts within the phases ("of which"), in
# the order printed; a label may name several functions.
PARTS = [
    (_V, "reading the sources", _LOAD, None, "read_sources"),
    (_V, "loading into DuckDB", _LOAD, None, "connect"),
    (_V, "loading into DuckDB", _LOAD, None, "create_core_tables"),
    (_V, "SQL rules", "pipeline.validate", None, "run_rules"),
    (_V, "Great Expectations: import", "pipeline.validate", None, "_import_gx"),
    (_V, "Great Expectations: suites", "pipeline.validate", None, "_run_suite"),
    ("combination", "the plans (models x methods x server kinds)", "pipeline.estimate.recommend", None, "plan_table"),
    (_R, "entity and comparison pages", "pipeline.render.site", "Renderer", "entity_pages"),
    (_R, "their contexts", "pipeline.render.site", "Renderer", "entity_context"),
    (_R, "tables (html_table)", "pipeline.render.site", None, "html_table"),
    (_R, "typography", "pipeline.render.russian", None, "typograph"),
    (_R, "page memo digests", "pipeline.render.page_memo", "PageMemo", "digest"),
    (_R, "articles", "pipeline.render.site", "Renderer", "render_article"),
    (_R, "charts", "pipeline.render.charts", None, "pages"),
    (_D, "a large table's CSV and Parquet, one pass", _DL, None, "write_csv_and_parquet"),
    (_D, "CSV", _DL, None, "csv_bytes"),
    (_D, "CSV", _DL, None, "write_csv_pieces"),
    (_D, "XLSX: rows prepared", _DL, None, "sheet_inputs"),
    (_D, "XLSX: workbooks written", _DL, None, "workbook_bytes"),
    (_D, "Parquet", _DL, None, "parquet_bytes"),
    (_D, "Parquet", _DL, None, "parquet_of_pieces"),
    (_D, "metadata.json, datapackage.json", _DL, None, "table_metadata"),
    ("the DuckDB file", "the DuckDB file's key check", _DL, None, "unique_keys"),
    ("search (Pagefind)", "pages cut for the index", "pipeline.publish.search", None, "indexed_text"),
]
# Each phase's labels, in the order printed.
OF: dict[str, list[str]] = {}
for _phase, _label, *_ in PARTS:
    if _label not in OF.setdefault(_phase, []):
        OF[_phase].append(_label)
# label -> the label whose CPU its first call includes, printed without it (the suites import Great
# Expectations when the first of them runs).
NESTED = {"Great Expectations: suites": "Great Expectations: import"}


class Phases:
    """Each phase's CPU (this process, and its children), resident memory at its end and peak during it."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float, int, int]] = []

    @contextmanager
    def phase(self, name: str):
        _reset_peak()
        cpu, children = time.process_time(), _children_cpu()
        yield
        m = _status()
        self.rows.append((name, time.process_time() - cpu, _children_cpu() - children, m["VmRSS"], m["VmHWM"]))


def run(sources: Path, work: Path, timed: Timed, phases: Phases) -> None:
    """A forced build's work, phase by phase (see the module's text)."""
    with phases.phase("imports (the pipeline, polars, DuckDB, Jinja)"):
        import importlib

        from pipeline.build import load_and_validate
        from pipeline.combine import STEPS, combine
        from pipeline.publish import downloads, search, staging
        from pipeline.render.page_memo import PageMemo
        from pipeline.render.site import Renderer

        for _, label, module, owner, name in PARTS:
            found = importlib.import_module(module)
            timed.patch(label, getattr(found, owner) if owner else found, name)
    with phases.phase("validation"):
        con, validation = load_and_validate(sources)
    with phases.phase("combination"):
        for step in STEPS:
            object.__setattr__(step, "make", timed.wrap(f"step {step.name}", step.make))
        catalog = combine(con)
    with phases.phase("rows of server_fit and recommendations, made once"):
        for name in ("server_fit", "recommendations"):
            for _ in catalog.pieces(name):
                pass
    with phases.phase("rendering"):
        renderer = Renderer(catalog, validation, memo=PageMemo({}, None, Path("site")))
        rendered = renderer.render()
    with phases.phase("downloads (every table)"):
        files = {}
        for name, data in downloads.iter_downloads(catalog, together=True):  # as a forced build
            if isinstance(data, downloads.Streamed):
                data.write(str(work / name))
            else:
                files[name] = data
        del files
    with phases.phase("the DuckDB file"):
        downloads.write_database(work / downloads.DATABASE, catalog)
    with phases.phase("search (Pagefind)"):
        indexer = search.Indexer(stream=False)
        for path, html in rendered.site.items():
            if isinstance(html, str):
                indexer.add(path, html)
        indexer.finish({f"site/{p}": c for p, c in rendered.site.items()})()
    with phases.phase("writing and hashing the pages"):
        staging.write_tree(work / "site", rendered.site, None, {})


def report(timed: Timed, phases: Phases, steps: list[str]) -> None:
    total = sum(cpu + children for _, cpu, children, _, _ in phases.rows)
    print(f"{'phase / of which':<54} {'CPU s':>7} {'share':>6} {'RSS MiB':>8} {'peak MiB':>9}")
    for name, cpu, children, rss, hwm in phases.rows:
        seconds = cpu + children
        extra = f" (of which {children:.2f} s in child processes)" if children >= 0.01 else ""
        print(f"{name:<54} {seconds:>7.2f} {seconds / total:>6.0%} {rss / 2**20:>8.0f} {hwm / 2**20:>9.0f}{extra}")
        labels = OF.get(name, [])
        if name == "combination":
            labels = [f"step {s}" for s in steps if timed.cpu[f"step {s}"] >= 0.005] + labels
        for label in labels:
            nested = NESTED.get(label)
            if timed.calls[label]:
                seconds = timed.cpu[label] - (timed.cpu[nested] if nested else 0)
                shown = label + (f" (without the {nested.rpartition(': ')[2]})" if nested else "")
                print(f"  {shown:<52} {seconds:>7.2f} {seconds / total:>6.0%}")
    print(f"{'all phases':<54} {total:>7.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", type=Path)
    parser.add_argument("--rows", type=int, help="first write a synthetic catalog of about N server_fit rows there")
    parser.add_argument("--profile", type=Path, help="also keep a cProfile of the whole run here")
    args = parser.parse_args(argv)
    if args.rows:
        import synth

        synth.generate_rows(args.sources, args.rows)
    os.environ["PIPELINE_WORKERS"] = "1"
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    work = Path(tempfile.mkdtemp(prefix="gpu-profile-"))
    os.environ["GPU_FINETUNE_CACHE_DIR"] = str(work / "cache")
    timed, phases = Timed(), Phases()
    profile = cProfile.Profile() if args.profile else None
    started = time.perf_counter()
    try:
        if profile is not None:
            profile.enable()
        run(args.sources, work, timed, phases)
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.profile)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    from pipeline.combine import STEPS

    print(f"{args.sources}: the parts of a forced build one after the other, {time.perf_counter() - started:.1f} s")
    report(timed, phases, [step.name for step in STEPS])
    return 0


if __name__ == "__main__":
    os.environ["PIPELINE_WORKERS"] = "1"  # before pipeline.parallel reads it (main sets it too)
    from pipeline.__main__ import as_command

    sys.exit(as_command(main))  # as a command's process runs (garbage collector, OpenBLAS, data stack)
