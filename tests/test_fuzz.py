"""Fuzz: every source file mutated (bytes, cells, rows, columns, encodings, huge cells, links…) is
either accepted or refused cleanly.

Each case mutates one file of a copy of sources/ (tests/mutations.py, seeded: a failure names its
seed, and `python tests/mutations.py SEED` replays it), then runs `check` and `build` in this process
as the command line does. It asserts: exit code 0 or 2, no traceback, `check` and `build` report
the same problems, the previous output byte-identical when the build is refused, and nothing
written anywhere but the output folder. The cases run while one more, as long as the longest so far,
would end within a time budget (5 s in the suite, at least MIN_CASES cases: an accepted case is a whole
build, and ending only once the budget was spent ran to 9-13 s); PIPELINE_FUZZ_SECONDS, PIPELINE_FUZZ_CASES and PIPELINE_FUZZ_SEED run more
or others, e.g. `just fuzz` (five minutes) or overnight.
"""

import contextlib
import hashlib
import io
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from mutations import mutate, restore

from conftest import ROOT
from pipeline.__main__ import main
from pipeline.publish import outdir

BUDGET_SECONDS = float(os.environ.get("PIPELINE_FUZZ_SECONDS", "5"))
CASES = int(os.environ.get("PIPELINE_FUZZ_CASES", "200"))
FIRST_SEED = int(os.environ.get("PIPELINE_FUZZ_SEED", "20261012"))
MIN_CASES = 3  # run at least this many (and at least one accepted and one refused), however slow the machine


def tree(folder: Path, skip: tuple[Path, ...] = ()) -> dict[str, str]:
    """Every entry below `folder` (but `skip`) with a hash of its content: what a case may not change."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if any(path == s or s in path.parents for s in skip):
            continue
        if path.is_symlink():
            out[str(path.relative_to(folder))] = "link:" + os.readlink(path)
        elif path.is_file():
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[str(path.relative_to(folder))] = "dir"
    return out


def run(argv: list[str]) -> tuple[int, str]:
    """The command line in this process: exit code and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed), contextlib.redirect_stdout(printed):
        code = main(argv)
    return code, printed.getvalue()


def problems(report: str) -> list[str]:
    return [line for line in report.splitlines() if line.startswith("  ")]


def test_mutated_sources_are_accepted_or_refused_cleanly(tmp_path, built):
    out = tmp_path / "published" / "output"
    shutil.copytree(built, out, symlinks=True)  # the previous output: a build of the real sources
    work = restore(tmp_path / "work" / "sources")
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "index.html").write_text("not to be touched\n", encoding="utf-8")
    # Everything but the output, its lock file beside it (outdir.lock_path) and the sources.
    skip = (out, outdir.lock_path(out), work.parent)
    outside = tree(tmp_path, skip=skip)

    started, seen, longest = time.perf_counter(), {"accepted": 0, "refused": 0}, 0.0
    for seed in range(FIRST_SEED, FIRST_SEED + CASES):
        enough = seen["accepted"] + seen["refused"] >= MIN_CASES and seen["accepted"] and seen["refused"]
        if enough and time.perf_counter() - started + longest > BUDGET_SECONDS:
            break  # another case as long as the longest so far would overrun the budget
        case_started = time.perf_counter()
        restore(work)
        what = mutate(work, random.Random(seed))
        case = f"seed {seed} ({what}); replay: python tests/mutations.py {seed}"
        before = tree(out)
        try:
            check_code, check_report = run(["check", "--sources", str(work)])
            build_code, build_report = run(["build", "--quiet", "--sources", str(work), "--out", str(out)])
        except BaseException as exc:  # a traceback is the failure this test looks for
            raise AssertionError(f"{case}: {type(exc).__name__}: {exc}") from exc
        assert check_code in (0, 2) and build_code in (0, 2), f"{case}: exit {check_code}, {build_code}"
        assert "Traceback" not in check_report + build_report, case
        assert check_code == build_code, f"{case}: check {check_code}, build {build_code}\n{build_report}"
        if build_code == 2:
            seen["refused"] += 1
            assert problems(check_report) == problems(build_report), case
            assert tree(out) == before, f"{case}: the refused build changed the previous output"
        else:
            seen["accepted"] += 1
        assert tree(tmp_path, skip=skip) == outside, f"{case}: a file was written outside the output"
        longest = max(longest, time.perf_counter() - case_started)
    print(f"fuzz: {seen['accepted']} accepted, {seen['refused']} refused in {time.perf_counter() - started:.0f} s")
    assert seen["accepted"] and seen["refused"], seen


def test_mutated_sources_from_the_command_line(tmp_path):
    """The same in a process of its own, as an editor runs it: a clean refusal, no traceback, and no
    output folder made."""
    work = restore(tmp_path / "sources")
    what = mutate(work, random.Random(FIRST_SEED - 1))
    out = tmp_path / "output"
    result = subprocess.run(
        [sys.executable, "-m", "pipeline", "build", "--sources", str(work), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "GX_ANALYTICS_ENABLED": "False"},
        timeout=600,
    )
    assert result.returncode == 2, f"{what}: {result.stderr}"
    assert "Traceback" not in result.stderr
    assert {p.name for p in tmp_path.iterdir()} - {outdir.lock_path(out).name} == {"sources"}  # the lock is the build's
