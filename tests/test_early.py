"""The early child (pipeline.parallel.Early): a build that has not loaded DuckDB forks the child that runs
Great Expectations before it reads the sources, and sends it the tables as Arrow (validate._run_shipped);
what it validates is what the build process's own frames give (docs/architecture.md, "Where Great
Expectations is imported")."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict

import pytest

from conftest import ROOT, SOURCES, edit_csv
from pipeline import parallel


def _where(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _fail() -> None:
    raise RuntimeError("not ready")


two_cores = pytest.mark.skipif(
    parallel.WORKERS < 2 or (os.cpu_count() or 1) < 2, reason="one core (or PIPELINE_WORKERS=1): no child is forked"
)


@two_cores
def test_an_early_child_runs_the_map_it_is_sent():
    child = parallel.Early(lambda: None)
    assert child.pid is not None
    items = list(range(50_000))  # more than a pipe holds: written by a thread while the child reads
    assert child.map(_where, items)() == [(x * x, child.pid) for x in items]
    child.close()  # after a map: nothing to do
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # reaped by the join


def _nothing_in(fd: int) -> bool:
    """Whether nothing has been written into a pipe (its read end, `fd`)."""
    return not select.select([fd], [], [], 0)[0]


@two_cores
def test_an_early_child_runs_its_map_while_a_later_child_holds_the_map_s_pipe():
    """A child forked while the map's pipe is open (a build's workbook child) holds its write end until it
    exits. The early child reads the map's length and then that much, not up to the end of the pipe, so
    it runs the map while that child is still there (reading to the end, it ran once the holder had
    written that it was leaving and exited, 20 s later)."""
    leaving_read, leaving_write = os.pipe()
    child = parallel.Early(lambda: None)
    holder = os.fork()
    if holder == 0:  # holds every descriptor of this process, the map's pipe among them
        time.sleep(20)
        os.write(leaving_write, b"x")
        os._exit(0)
    try:
        assert child.map(_nothing_in, [leaving_read])() == [True]
    finally:
        os.kill(holder, signal.SIGKILL)
        os.waitpid(holder, 0)
        os.close(leaving_read)
        os.close(leaving_write)


@two_cores
def test_what_a_failed_early_child_did_not_deliver_is_computed_here():
    child = parallel.Early(_fail)
    assert child.pid is not None
    assert child.map(_where, [1, 2, 3])() == [(1, os.getpid()), (4, os.getpid()), (9, os.getpid())]


@two_cores
def test_an_early_child_never_sent_a_map_is_killed_and_reaped():
    child = parallel.Early(lambda: None)
    child.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)
    assert child.map(_where, [4])() == [(16, os.getpid())]  # closed: computed here


def test_a_process_that_has_loaded_duckdb_is_not_one_to_fork_early():
    import duckdb  # noqa: F401

    assert parallel.Early.usable() is False


def _messy(tmp_path):
    sources = tmp_path / "sources"
    shutil.copytree(SOURCES, sources)
    edit_csv(sources / "servers.csv", ",2373300,", ",23x3300,")  # a price that is not a number
    edit_csv(
        sources / "gpus.csv", "h100-pcie,NVIDIA H100 PCIe 80GB,H100 PCIe,NVIDIA,80,", "h100-pcie,,H100 PCIe,NVIDIA,0,"
    )
    return sources


def test_the_suites_on_arrow_give_what_they_give_on_the_build_process_frames(tmp_path):
    """Every table's raw and typed suites, clean and failing (a price that is not a number, a GPU with
    no name and no memory, which its typed suite names by the cell's text): the outcomes from the Arrow tables (made into frames by another DuckDB connection) are
    those from the frames of the connection that loaded them, problem for problem."""
    from pipeline.build import load_and_validate  # noqa: F401 (the sources' loading, as a build does it)
    from pipeline.fingerprint import build_date
    from pipeline.load import connect, display_path, read_sources
    from pipeline.schema import TABLES_BY_NAME
    from pipeline.validate import _run_shipped, _run_suite, _table_jobs
    from pipeline.warm import Warm

    sources = _messy(tmp_path)
    frames, _, _ = read_sources(sources, {})
    con, warm, today = connect(frames), Warm(), build_date()
    failing = set()
    for name in frames:
        shown = display_path(sources, TABLES_BY_NAME[name])
        key = (name, shown, today, ())
        plain, shipped = _table_jobs(con, key, warm, False), _table_jobs(con, key, warm, True)
        for view in ("raw", "typed"):
            expected = _run_suite(plain[key, view])
            assert _run_shipped(shipped[key, view]) == expected, (name, view)
            if expected[0]:
                failing.add((name, view))
    assert failing == {("servers", "raw"), ("gpus", "raw"), ("gpus", "typed")}


SCRIPT = """
import json, sys
from dataclasses import asdict
from pathlib import Path
import pipeline.parallel as parallel
made = []
original = parallel.Early.__init__
def recording(self, prepare):
    original(self, prepare)
    made.append(self.pid)
parallel.Early.__init__ = recording
from pipeline import fingerprint
from pipeline.build import Clock, load_inputs
from pipeline.errors import DataError
from pipeline.warm import Warm
sources = Path(sys.argv[1])
try:
    _, _, pending, _ = load_inputs(sources, None, fingerprint.inputs(sources, "/"), Clock(None), Warm())
    validation, problems = pending().to_dict(), None
except DataError as exc:
    validation, problems = None, [asdict(p) for p in exc.problems]
print(json.dumps({"early": made, "validation": validation, "problems": problems}))
"""


def _new_process_validation(sources, cache) -> dict:
    """A forced build's loading and validation (build.load_inputs), in a new process: what it forked early,
    the validation's to_dict() or the problems."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), GPU_FINETUNE_CACHE_DIR=str(cache))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(sources)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@two_cores
@pytest.mark.slow
def test_a_new_process_validates_in_the_early_child_what_this_one_validates(tmp_path):
    """A new process forks the early child before it reads the sources (its pid recorded) and gets the
    validation this process gets without one (every check, in order)."""
    from pipeline.build import load_and_validate

    ran = _new_process_validation(SOURCES, tmp_path / "cache")
    assert len(ran["early"]) == 1 and ran["early"][0] is not None and ran["problems"] is None
    assert ran["validation"] == load_and_validate(SOURCES)[1].to_dict()


@two_cores
@pytest.mark.slow
def test_messy_sources_fail_in_a_new_process_with_this_ones_problems(tmp_path):
    """The same messy sources, validated by the early child of a new process and here: the same problems."""
    from pipeline.build import load_and_validate
    from pipeline.errors import DataError

    messy = _messy(tmp_path)
    ran = _new_process_validation(messy, tmp_path / "cache")
    with pytest.raises(DataError) as here:
        load_and_validate(messy)
    assert ran["early"][0] is not None and ran["problems"] == [asdict(p) for p in here.value.problems]


@two_cores
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_ctrl_c_stops_the_build_and_its_early_child(tmp_path):
    """Ctrl-C while the early child imports Great Expectations: the build exits 130 and the child (which
    ignores Ctrl-C, the parent's to handle) ends with it."""
    import signal
    import time
    from pathlib import Path

    env = dict(os.environ, GPU_FINETUNE_CACHE_DIR=str(tmp_path / "cache"))
    command = [sys.executable, "-m", "pipeline", "build", "--sources", str(SOURCES), "--out", str(tmp_path / "out")]
    build = subprocess.Popen([*command, "--force"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    children = Path(f"/proc/{build.pid}/task/{build.pid}/children")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and build.poll() is None and not children.read_text().split():
        time.sleep(0.01)
    [child] = [int(c) for c in children.read_text().split()][:1]
    build.send_signal(signal.SIGINT)
    assert build.wait(timeout=30) == 130 and "Прервано" in build.stderr.read()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and Path(f"/proc/{child}").exists():
        if "State:\tZ" in Path(f"/proc/{child}/status").read_text():
            break
        time.sleep(0.05)
    status = Path(f"/proc/{child}/status")
    assert not status.exists() or "State:\tZ" in status.read_text()
    assert not (tmp_path / "out").exists()
