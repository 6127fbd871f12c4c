"""Random edits of a source folder, each built three ways that must write the same thing.

Work proportional to the change (issue 37) takes what it can from the previous build: validation
outcomes, derived tables by lineage, pages by digest, workbooks, the DuckDB file's unchanged tables.
This tool checks that it never takes too much, for edits nobody listed in advance. Each step makes one
seeded edit of a copy of the sources (`edit`: a number scaled, a text changed, an optional cell
emptied, a row deleted, duplicated or moved, a hostile mutation of tests/mutations.py, a file put
back as it was), then builds:

- a warm chain: one `Warm` for every step, as `serve` keeps it, which also renders some pages ahead of
  the rest (`Renderer.preview`, as `serve` does for the pages open in a browser: the home page, the
  calculator, the charts, an article, the models' index, the first model, method, GPU and server);
- a new-process chain: `python -m pipeline build` into the previous step's output, as an editor runs
  it after an edit;
- a forced build into a new folder.

An edit all three accept must leave both chains with the forced build's files, byte for byte (the
DuckDB file by its tables, comments and rows: its header holds a random id), and each page shown ahead
must be the page written; an edit the forced build refuses (exit 2) must be refused by both chains
too, their outputs untouched, and the next edit then starts from the last accepted sources. A step
where they differ, or where a build stops with a traceback (exit 1), is a bug: the tool names the files,
or the build and what it raised, goes on, and exits 1 at the end. The same seed replays the same edits.

    python bench/edit_sweep.py --steps 40 --seed 1           # the real catalog
    python bench/edit_sweep.py --rows 100000 --steps 10      # a synthetic catalog (bench/synth.py)
    just sweep                                               # five minutes (--seconds 300)
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tests"))  # mutations.py, the fuzz test's seeded mutator

import mutations  # noqa: E402

DATABASE = "site/data/gpu-finetune.duckdb"
# The pages the warm chain renders ahead, as `serve` does for the pages open in a browser
# (Renderer.preview), besides the first model, method, GPU and server of the sources as they are.
AHEAD = ("index.html", "calculator.html", "charts.html", "gpu-count.html", "models/index.html")
ENTITY_FILES = {"models": "models.csv", "methods": "methods.csv", "gpus": "gpus.csv", "servers": "servers.csv"}
# Each kind's weight: plausible edits most often, a hostile one now and then (mostly refused).
KINDS = ("number",) * 4 + ("text", "blank", "delete", "duplicate", "move", "hostile", "revert")
FACTORS = (0.5, 0.9, 1.1, 1.25, 2)
TEXT_COLUMNS = ("display_name", "name", "short_name", "title", "publisher")


def read_rows(path: Path) -> list[list[str]]:
    """A CSV file's rows, its header first (mutations.read_rows); none for a file that is not UTF-8 CSV
    (a hostile edit the build accepted, such as a file saved in cp1251, which the loader reads: no other
    edit is made to it)."""
    try:
        return mutations.read_rows(path)
    except (UnicodeDecodeError, csv.Error, OSError):
        return []


def scaled(value: str, factor: float) -> str:
    """`value` times `factor`, written as the sources write numbers: an integer stays an integer (one
    more or less where the product rounds back to it), any other number gets four significant
    digits, never in exponent notation."""
    if value.lstrip("-").isdigit():  # never the same integer: 1 x 1.1 is 2, 1 x 0.9 is 0
        number = int(value)
        result = round(number * factor)
        return str(result if result != number else number + (1 if factor > 1 else -1))
    x = float(value) * factor
    decimals = 3 - math.floor(math.log10(abs(x))) if x else 0
    return f"{x:.{max(decimals, 0)}f}".rstrip("0").rstrip(".") if decimals > 0 else str(round(x))


def _is_number(text: str) -> bool:
    """A number as the sources write one: no spaces around it, not NaN nor an infinity."""
    finite = text.lower().lstrip("+-") not in ("nan", "inf", "infinity")
    return mutations.is_number(text) and text.strip() == text and finite


def edit(sources: Path, original: dict[str, bytes], rng: random.Random) -> str:
    """One seeded edit of a file of `sources` (`original`: each CSV file's bytes as the sweep began);
    says what it did, or "nothing" when the chosen row had nothing of that kind."""
    kind = rng.choice(KINDS)
    changed = sorted(n for n, data in original.items() if _bytes(sources / n) != data)
    if kind == "revert" and changed:
        name = rng.choice(changed)
        (sources / name).unlink(missing_ok=True)  # a link a hostile edit made is replaced, not written through
        (sources / name).write_bytes(original[name])
        return f"revert {name}"
    if kind == "hostile":
        return f"hostile {mutations.mutate(sources, rng)}"
    name = rng.choice(sorted(original))
    rows = read_rows(sources / name)
    if len(rows) < 2:
        return "nothing"
    done = _edit_row(kind if kind != "revert" else "number", rows, rng)
    if done:
        mutations.write_rows(sources / name, rows)
    return f"{done} in {name}" if done else "nothing"


def _edit_row(kind: str, rows: list[list[str]], rng: random.Random) -> str | None:
    """`kind` done to a random data row of `rows` in place; what was done, or None."""
    header, i = rows[0], rng.randrange(1, len(rows))
    row = rows[i]
    if kind == "delete":
        del rows[i]
        return f"line {i + 1} ({row[0]}) deleted"
    if kind == "duplicate":
        rows.insert(i + 1, [f"{row[0]}-copy", *row[1:]])
        return f"line {i + 1} ({row[0]}) duplicated as {row[0]}-copy"
    if kind == "move":
        rows.insert(rng.randrange(1, len(rows)), rows.pop(i))
        return f"line {i + 1} ({row[0]}) moved"
    if kind == "number":
        columns = [j for j in range(1, len(row)) if _is_number(row[j])]
    elif kind == "text":
        columns = [j for j in range(len(row)) if row[j] and (header[j].endswith("_ru") or header[j] in TEXT_COLUMNS)]
    else:  # blank: a cell of a column that some other row leaves empty
        columns = [j for j in range(1, len(row)) if row[j] and any(not r[j] for r in rows[1:] if len(r) > j)]
    if not columns:
        return None
    j = rng.choice(columns)
    before = row[j]
    row[j] = scaled(before, rng.choice(FACTORS)) if kind == "number" else f"{before} (правка)" if kind == "text" else ""
    return f"line {i + 1} ({row[0]}), {header[j]}: {_short(before)!r} -> {_short(row[j])!r}"


def _bytes(path: Path) -> bytes | None:
    """A file's bytes; None where a hostile edit left no regular file (a link to a device, a folder)."""
    return path.read_bytes() if path.is_file() else None


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None


def _short(text: str, most: int = 40) -> str:
    return text if len(text) <= most else f"{text[: most - 11]}…{text[-10:]}"


def site_files(out: Path) -> dict[str, str]:
    """Every file of a build with its SHA-256, but its state file and the DuckDB file (database_content)."""
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != "build-state.json" and str(p.relative_to(out)) != DATABASE
    }


def database_content(out: Path) -> dict[str, object]:
    """Every table's name, comment, columns (types, comments) and rows of a build's DuckDB file."""
    import duckdb

    with duckdb.connect(str(out / DATABASE), read_only=True) as con:
        tables = con.sql("SELECT table_name, comment FROM duckdb_tables() ORDER BY table_name").fetchall()
        columns = con.sql(
            "SELECT table_name, column_index, column_name, data_type, comment FROM duckdb_columns() ORDER BY ALL"
        ).fetchall()
        rows = {name: con.sql(f'SELECT * FROM "{name}"').fetchall() for name, _ in tables}
    return {"tables": tables, "columns": columns, "rows": rows}


def differences(out: Path, forced: Path) -> list[str]:
    """What `out` holds that the forced build `forced` does not: the names of the files that differ,
    or the DuckDB file; empty when they agree."""
    mine, theirs = site_files(out), site_files(forced)
    files = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
    if files:
        return [f"{len(files)} files differ: {', '.join(files[:6])}{' …' if len(files) > 6 else ''}"]
    databases = (out / DATABASE).is_file(), (forced / DATABASE).is_file()
    if databases[0] != databases[1]:
        return ["the DuckDB file is in one build only"]
    same = not databases[0] or database_content(out) == database_content(forced)
    return [] if same else ["the DuckDB file's content differs"]


class Sweep:
    """The three builds of every step, over one copy of the sources in `work`."""

    def __init__(self, sources: Path, work: Path) -> None:
        from pipeline.warm import Warm

        self.sources, self.work, self.accepted = work / "sources", work, work / "accepted"
        shutil.copytree(sources, self.sources)
        shutil.copytree(sources, self.accepted)  # the last sources that built
        self.original = {p.name: p.read_bytes() for p in sorted(self.sources.glob("*.csv"))}
        self.warm, self.warm_out, self.process_out = Warm(lives_on=True), work / "warm", work / "process"
        for out in (self.warm_out, self.process_out):  # both chains start from a forced build
            built, why = self._in_process(out, force=True, warm=self.warm if out == self.warm_out else None)
            if not built:
                raise SystemExit(f"edit_sweep: the sources given do not build: {why or 'refused (exit 2)'}")

    def _in_process(self, out: Path, force: bool = False, warm=None, preview=None) -> tuple[bool | None, str]:
        """A build in this process: True, False when it refuses the sources (exit 2's errors), or None
        when it raises anything else (exit 1: a bug), with what it raised."""
        from pipeline.build import build
        from pipeline.errors import DataError, TemplateError

        try:
            build(self.sources, out, force=force, warm=warm, preview=preview)
        except (DataError, TemplateError):
            return False, ""
        except Exception as exc:  # noqa: BLE001 (reported as the bug it is; the sweep goes on)
            return None, f"{type(exc).__name__}: {exc}"[:600]
        return True, ""

    def _ahead(self) -> tuple[object, dict[str, str]]:
        """build's `preview` as `serve` passes it, for AHEAD and the first entity of each kind: it
        renders them ahead of the rebuild, into the dict returned beside it."""
        pages = list(AHEAD)
        for kind, name in ENTITY_FILES.items():
            rows = read_rows(self.sources / name) if (self.sources / name).is_file() else []
            if len(rows) > 1 and rows[1]:
                pages.append(f"{kind}/{rows[1][0]}.html")
        shown: dict[str, str] = {}

        def preview(renderer):
            for page in pages:
                text = renderer.preview(page)
                if text is not None:
                    shown[page] = text
            return lambda: None

        return preview, shown

    def _new_process(self) -> tuple[bool | None, str]:
        """`python -m pipeline build` into the new-process chain's output: accepted, refused, or None
        (any other exit: a bug), with the end of what it printed."""
        command = [sys.executable, "-m", "pipeline", "build", "--sources", str(self.sources)]
        done = subprocess.run(
            [*command, "--out", str(self.process_out), "--quiet"], cwd=ROOT, capture_output=True, text=True
        )
        return {0: True, 2: False}.get(done.returncode), done.stderr[-600:]

    def step(self, n: int) -> tuple[list[str], bool]:
        """Build the sources as they are now three ways: what disagrees (empty when nothing does), and
        whether the forced build accepted them."""
        before = {"warm": site_files(self.warm_out), "new process": site_files(self.process_out)}
        forced = self.work / f"forced-{n % 2}"
        shutil.rmtree(forced, ignore_errors=True)
        accepted, raised = self._in_process(forced, force=True)
        preview, shown = self._ahead()
        warm, warm_raised = self._in_process(self.warm_out, warm=self.warm, preview=preview)
        process, printed = self._new_process()
        problems = [] if accepted is not None else [f"forced: a traceback (exit 1): {raised}"]
        accepted = bool(accepted)
        chains = (("warm", warm, self.warm_out, warm_raised), ("new process", process, self.process_out, printed))
        for chain, got, out, said in chains:
            if got is None:
                problems.append(f"{chain}: a traceback or an exit code other than 0 or 2: {said}")
            elif got != accepted:
                problems.append(
                    f"{chain}: {'accepted' if got else 'refused'} what the forced build {'refused' if got else 'accepted'}"
                )
            elif not accepted and site_files(out) != before[chain]:
                problems.append(f"{chain}: a refused build changed its output")
            elif accepted:
                problems.extend(f"{chain}: {d}" for d in differences(out, forced))
        if accepted:  # the pages shown ahead are the pages written
            ahead = [p for p, text in shown.items() if _read(self.warm_out / "site" / p) != text]
            problems.extend(f"warm: the page shown ahead is not the one written: {p}" for p in ahead)
        # The next edit starts from the last sources that built (a hostile edit may add or link files).
        keep, drop = (self.sources, self.accepted) if accepted else (self.accepted, self.sources)
        shutil.rmtree(drop)
        shutil.copytree(keep, drop, symlinks=True)
        return problems, accepted


def run(sources: Path, steps: int, seconds: float, seed: int, work: Path) -> int:  # noqa: PLR0913
    """`steps` seeded edits (fewer when `seconds` run out first), each built three ways; the number of
    steps where the builds disagreed."""
    rng, sweep = random.Random(seed), Sweep(sources, work)
    started, bad, longest, done = time.perf_counter(), 0, 0.0, 0
    for n in range(steps):
        if n and time.perf_counter() - started + longest > seconds:
            break
        at = time.perf_counter()
        what = "nothing"
        while what == "nothing":  # the chosen row had nothing of that kind: choose again
            what = edit(sweep.sources, sweep.original, rng)
        problems, accepted = sweep.step(n)
        longest = max(longest, time.perf_counter() - at)
        bad, done = bad + bool(problems), done + 1
        print(
            f"{n:4d} {'BAD' if problems else 'ok '} {time.perf_counter() - at:5.1f} s  {'built' if accepted else 'refused'}: {what}",
            flush=True,
        )
        for problem in problems:
            print(f"       {problem}", flush=True)
    print(f"seed {seed}: {done} edits, {bad} where the builds disagreed", flush=True)
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=Path, default=ROOT / "sources", help="the folder to copy and edit")
    parser.add_argument("--rows", type=int, help="first write a synthetic catalog of about this many server_fit rows")
    parser.add_argument("--steps", type=int, default=1000, help="edits to make (at most)")
    parser.add_argument(
        "--seconds", type=float, default=float("inf"), help="stop before an edit that would run past this"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="work in this new folder and keep it (the default: a temporary one)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="edit-sweep-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    os.environ["GPU_FINETUNE_CACHE_DIR"] = str(work / "cache")  # never the user's cache
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    sources = args.sources
    try:
        if args.rows:
            import synth

            sources = work / "synthetic"
            synth.generate_rows(sources, args.rows, args.sources)
        return 1 if run(sources, args.steps, args.seconds, args.seed, work) else 0
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
