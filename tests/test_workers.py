"""pipeline.parallel.start_map: the same results as a plain loop, computed on two cores."""

import gc
import json
import os
import shutil
import signal
import sys
import threading
import time

import pytest

from conftest import SOURCES
from pipeline import parallel as workers
from pipeline.schema import ALL_TABLES

two_cores = pytest.mark.skipif((os.cpu_count() or 1) < 2 or workers.WORKERS < 2, reason="needs two cores")


def square(x: int) -> int:
    return x * x


def square_and_pid(x: int) -> tuple[int, int]:
    time.sleep(0.01)  # long enough for the child to start and take its share
    return x * x, os.getpid()


def test_same_results_as_a_loop_in_item_order():
    items = list(range(40))
    assert workers.start_map(square, items, weights=[i % 7 for i in items])() == [x * x for x in items]
    assert workers.start_map(square, [])() == []
    assert workers.start_map(square, [3])() == [9]


@two_cores
def test_the_work_is_shared_with_a_child_process():
    results = workers.start_map(square_and_pid, list(range(60)))()
    assert [r[0] for r in results] == [x * x for x in range(60)]
    assert len({pid for _, pid in results}) == 2


def collector_and_signals(x: int) -> tuple[int, bool, bool]:
    time.sleep(0.01)
    return os.getpid(), gc.isenabled(), signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())


@two_cores
def test_the_child_collects_no_garbage_and_ignores_ctrl_c_and_the_parent_gets_both_back(monkeypatch):
    """The collector is off before the fork (the child's after-fork steps allocate: a collection there ran
    the finalizers of DuckDB or Arrow handles and crashed), and Ctrl-C is held until the child ignores it."""
    parent, at_fork, real = os.getpid(), [], os.fork

    def fork() -> int:
        at_fork.append((gc.isenabled(), signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())))
        return real()

    monkeypatch.setattr(os, "fork", fork)
    results = workers.start_map(collector_and_signals, list(range(40)))()
    child = [(on, held) for pid, on, held in results if pid != parent]
    mine = [(on, held) for pid, on, held in results if pid == parent]
    assert child and set(child) == {(False, False)}  # SIGINT unblocked in the child once it is ignored
    assert mine and set(mine) == {(True, False)}
    assert gc.isenabled() and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    assert at_fork == [(False, True)]  # at the fork itself: no collection can start, no Ctrl-C can land


@two_cores
def test_what_the_child_could_not_do_is_done_here():
    parent = os.getpid()

    def dies_in_child(x: int) -> int:
        if os.getpid() != parent:
            os._exit(3)
        return x + 1

    assert workers.start_map(dies_in_child, list(range(30)))() == list(range(1, 31))


def test_an_error_is_raised_as_by_a_loop():
    def fails_on_seven(x: int) -> int:
        if x == 7:
            raise ValueError("seven")
        return x

    with pytest.raises(ValueError, match="seven"):
        workers.start_map(fails_on_seven, list(range(20)))()


@two_cores
def test_started_work_runs_in_the_child_while_this_process_does_something_else():
    finish = workers.start_map(square_and_pid, list(range(20)))
    time.sleep(1)  # the child takes every item meanwhile (20 × 0.01 s)
    results = finish()
    assert [r[0] for r in results] == [x * x for x in range(20)]
    assert {pid for _, pid in results} == {next(pid for _, pid in results if pid != os.getpid())}
    assert finish() is results  # asking again gives the same results


def test_started_work_gives_the_results_and_errors_of_a_loop():
    assert workers.start_map(square, list(range(30)))() == [x * x for x in range(30)]
    assert workers.start_map(square, [])() == []

    def fails_on_seven(x: int) -> int:
        if x == 7:
            raise ValueError("seven")
        return x

    finish = workers.start_map(fails_on_seven, list(range(20)))
    for _ in range(2):  # the same error each time it is asked
        with pytest.raises(ValueError, match="seven"):
            finish()


@two_cores
def test_alone_a_single_item_runs_in_the_child():
    finish = workers.start_map(square_and_pid, [6], alone=True)
    time.sleep(0.5)
    [(value, pid)] = finish()
    assert value == 36 and pid != os.getpid()
    [(_, here)] = workers.start_map(square_and_pid, [6])()  # without `alone`: here, when asked
    assert here == os.getpid()


def large_and_pid(x: int) -> tuple[bytes, int]:
    return bytes([x]) * (4 << 20), os.getpid()  # far more than a pipe holds (64 KiB)


def _children() -> dict[int, str]:
    """The state letter of each child of this process, by pid (/proc: Z for one that exited, unreaped)."""
    states = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                states[int(name)] = fields[0]
    return states


def _new_child_exited_within(before: dict[int, str], seconds: float) -> bool:
    """Whether the one child started since `before` (_children) has exited within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if [state for pid, state in _children().items() if pid not in before] == ["Z"]:
            return True
        time.sleep(0.02)
    return False


@two_cores
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_large_answer_read_early_is_taken_while_this_process_does_something_else():
    """`read_early`: a thread takes the child's answer as it is sent, so the child, its work done, exits
    before it is joined (the workbooks, 25 MB at 10^5 rows, no longer cross the pipe after the pages);
    without it the child waits, its answer filling the pipe, until joined. The results are the same."""
    before = _children()  # a browser a fixture started, say
    finish = workers.start_map(large_and_pid, [1, 2], alone=True, read_early=True)
    assert _new_child_exited_within(before, 10)  # not joined yet
    results = finish()
    assert [r[0][:2] for r in results] == [b"\x01\x01", b"\x02\x02"] and len(results[1][0]) == 4 << 20
    assert {pid for _, pid in results} != {os.getpid()} and _children().keys() == before.keys()
    finish = workers.start_map(large_and_pid, [1, 2], alone=True)
    assert not _new_child_exited_within(before, 1)  # blocked on the pipe until joined
    assert [r[0][:1] for r in finish()] == [b"\x01", b"\x02"] and _children().keys() == before.keys()


@two_cores
def test_a_process_that_does_not_join_in_waits_for_the_child():
    """`joins` false when asked: every item the child delivers is the child's, even asked at once (a
    parent that joined in would take most of them); what the child fails to deliver is computed here."""
    asked = []

    def joins() -> bool:
        asked.append(os.getpid())
        return False

    results = workers.start_map(square_and_pid, list(range(20)), joins=joins)()
    assert [r[0] for r in results] == [x * x for x in range(20)]
    assert os.getpid() not in {pid for _, pid in results} and asked == [os.getpid()]
    parent = os.getpid()

    def dies_in_child(x: int) -> int:
        if os.getpid() != parent:
            os._exit(3)
        return x + 1

    assert workers.start_map(dies_in_child, list(range(5)), joins=lambda: False)() == [1, 2, 3, 4, 5]
    here = {pid for _, pid in workers.start_map(square_and_pid, list(range(40)), joins=lambda: True)()}
    assert os.getpid() in here  # joining in: this process takes items too


CHECK_HERE = """
import sys
from pipeline.__main__ import main
try:
    code = main(["check", "--sources", sys.argv[1]])
except SystemExit as exc:
    code = exc.code
print("gx imported here:", "great_expectations" in sys.modules, "exit:", code)
"""


@two_cores
def test_check_imports_great_expectations_only_in_the_child(sources, tmp_path):
    """`check` of an edited table: this process, done with the rules long before the child has imported
    GX, waits for the child's suites instead of importing GX (a second of CPU) to take one of them."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    servers = sources / "servers.csv"
    servers.write_text(servers.read_text(encoding="utf-8").replace(",585000,", ",585001,", 1), encoding="utf-8")
    env = {**os.environ, "GPU_FINETUNE_CACHE_DIR": str(tmp_path / "cache"), "GX_ANALYTICS_ENABLED": "False"}
    done = subprocess.run(
        [sys.executable, "-c", CHECK_HERE, str(sources)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.stdout.splitlines()[-1] == "gx imported here: False exit: 0", done.stderr


def children() -> set[int]:
    """This process's living child processes (Linux /proc)."""
    found = set()
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            found |= {int(pid) for pid in f.read().split()}
    return found


@two_cores
@pytest.mark.parametrize("threaded", [False, True])
def test_a_failed_build_leaves_no_child_behind(tmp_path, sources, monkeypatch, threaded):
    """The workbooks and the charts start in children, and the downloads in a thread, before rendering:
    a render that fails still waits for them (a warm `just serve` process would otherwise pile up
    children) and removes the folder the downloads were being written to."""
    import threading

    from pipeline.build import build
    from pipeline.publish import downloads
    from pipeline.render.site import Renderer

    def broken(self, drawing=None):
        raise RuntimeError("a template bug")

    if threaded:  # tables over the workbook limit: the downloads' thread writes while the pages render
        monkeypatch.setattr(downloads, "EXCEL_MAX_ROWS", 40)

    monkeypatch.setattr(Renderer, "render", broken)
    before = children()
    with pytest.raises(RuntimeError, match="a template bug"):
        build(sources, tmp_path / "output")
    assert children() == before
    assert [t.name for t in threading.enumerate() if t.name == "downloads"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".output.lock", "sources"]


def _written(folder) -> dict[str, bytes]:
    """Every file below `folder` but the DuckDB file (whose header holds a random id)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix != ".duckdb"
    }


def test_downloads_written_by_a_thread_are_those_written_after_rendering(catalog, tmp_path, monkeypatch):
    """staging.Downloads writes the downloads in a thread when a table is too large for a workbook (the
    real catalog's are not); the files, their hashes, the counts and the DuckDB file's keys are those
    written without one. The thread begins the DuckDB file in a thread of its own: at once when there
    is no previous build to keep tables from (no hash yet), else once every Parquet file is written and
    before the large tables' CSVs; without the thread it is written last, in join()."""
    import threading

    import duckdb

    from pipeline.publish import downloads, staging

    assert not staging.Downloads.threaded(catalog)
    monkeypatch.setattr(downloads, "EXCEL_MAX_ROWS", 40)
    assert staging.Downloads.threaded(catalog)
    begun, write_database = [], staging._write_database

    def seen(folder, catalog, hashes, previous, *rest):
        begun.append((threading.current_thread().name, None if hashes is None else sorted(hashes)))
        niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return write_database(folder, catalog, hashes, previous, *rest)

    def writing(*args):
        niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return write(*args)

    niceness, write = [], staging.Downloads._write
    monkeypatch.setattr(staging, "_write_database", seen)
    monkeypatch.setattr(staging.Downloads, "_write", lambda self, *args: writing(self, *args))
    here = os.getpriority(os.PRIO_PROCESS, 0)
    parquet = {f"site/data/{t.name}.parquet" for t in ALL_TABLES}
    made = {}
    for threaded, force in ((True, True), (False, True), (True, False)):
        monkeypatch.setattr(staging.Downloads, "threaded", staticmethod(lambda catalog, on=threaded: on))
        out = tmp_path / f"out-{threaded}-{force}"
        out.mkdir()  # without force, a previous build (an empty one: nothing in it is kept)
        written = staging.Downloads(out, catalog, force=force)
        assert (written._thread is not None) is threaded
        written.join()
        name, hashes = begun.pop()
        assert name == ("database" if threaded else "MainThread")
        # the downloads' and the DuckDB file's threads yield the cores to the pages (parallel.in_background)
        nicer = min(19, here + workers.BACKGROUND_NICE) if threaded else here
        assert niceness == [nicer, nicer] and os.getpriority(os.PRIO_PROCESS, 0) == here
        niceness.clear()
        if force and threaded:
            assert hashes is None  # begun before any file was written
        else:
            assert parquet <= set(hashes) and ("site/data/server_fit.csv" in hashes) is not threaded  # over 40 rows
        with duckdb.connect(str(written.folder / staging.DATABASE_PATH), read_only=True) as con:
            rows = dict(con.sql("SELECT table_name, estimated_size FROM duckdb_tables()").fetchall())
        made[threaded, force] = (_written(written.folder), written.hashes, written.counts, written.database, rows)
    assert made[True, True] == made[False, True] == made[True, False]
    files = made[True, True][0]
    assert "site/data/server_fit.xlsx" not in files and "site/data/gpus.xlsx" in files  # 40 rows at most
    assert made[True, True][4]["server_fit"] == catalog["server_fit"].height
    assert made[True, True][3]["keys"] == staging._keys(made[True, True][1])


def test_a_small_catalogs_duckdb_file_is_begun_before_the_pages_render(catalog, tmp_path, monkeypatch):
    """Without the downloads' thread (the real catalog: every table fits a workbook), Downloads begins
    a thread of its own that makes the Parquet files and then the DuckDB file, keyed on their hashes,
    so that both are made while the pages render (the build's thread makes no Parquet file); with one
    worker (PIPELINE_WORKERS=1) the file is written last, in join(). Both ways, with and without a
    previous build to keep tables from, give the same files, hashes, counts, keys and tables; the
    switch interval is short until join()."""
    import threading

    import duckdb

    from pipeline import parallel
    from pipeline.publish import downloads, staging

    assert not staging.Downloads.threaded(catalog)
    begun, write_database = [], staging._write_database

    def seen(folder, catalog, hashes, previous, *rest):
        begun.append((threading.current_thread().name, dict(hashes), previous is not None))
        return write_database(folder, catalog, hashes, previous, *rest)

    monkeypatch.setattr(staging, "_write_database", seen)
    made_in, made_parquet = [], staging.made_parquet
    monkeypatch.setattr(
        staging, "made_parquet", lambda *args: made_in.append(threading.current_thread().name) or made_parquet(*args)
    )
    parquet = {f"site/data/{t.name}.parquet" for t in ALL_TABLES}
    made = {}
    for count, force in ((2, True), (1, True), (2, False), (1, False)):
        monkeypatch.setattr(parallel, "WORKERS", count)
        out = tmp_path / f"out-{force}"
        if not force and not out.is_dir():
            out.mkdir()
        before = sys.getswitchinterval()
        monkeypatch.setattr(parallel, "WORKERS", 1)  # the workbooks made here: no fork beside other tests' threads
        workbooks = downloads.start_workbooks(catalog)
        monkeypatch.setattr(parallel, "WORKERS", count)
        written = staging.Downloads(out, catalog, workbooks, force=force)
        if count > 1:  # begun now, before any download is written
            assert written._database.thread.ident is not None  # started
            assert sys.getswitchinterval() == min(before, staging.THREAD_SWITCH_SECONDS)
        written.join()
        assert sys.getswitchinterval() == before
        name, hashes, kept = begun.pop()
        if count > 1:  # in its own thread, the Parquet files first, keyed on their hashes
            assert name == "database" and set(hashes) == parquet and kept is not force
            assert made_in == ["database"] * len(ALL_TABLES)
        else:
            assert name == "MainThread" and made_in == []
        made_in.clear()
        assert not begun
        with duckdb.connect(str(written.folder / staging.DATABASE_PATH), read_only=True) as con:
            rows = dict(con.sql("SELECT table_name, estimated_size FROM duckdb_tables()").fetchall())
        made[count, force] = (_written(written.folder), written.hashes, written.counts, written.database, rows)
        if not force:  # the next one keeps what this one wrote: the folder becomes the previous build
            shutil.rmtree(out)
            written.folder.rename(out)
            (out / "build-state.json").write_text(json.dumps({"database_tables": written.database["keys"]}))
        else:
            shutil.rmtree(written.folder)
    assert made[2, True] == made[1, True]
    assert made[2, True][4]["server_fit"] == catalog["server_fit"].height
    assert made[2, False][:2] == made[1, False][:2] == made[2, True][:2]  # files and hashes
    assert made[1, False][2] == {"kept": len(made[1, False][1]) - 1, "written": 1}  # the DuckDB file is a new copy
    assert made[2, False][3]["keys"] == made[2, True][3]["keys"] == staging._keys(made[2, True][1])
    assert made[1, False][3]["made"] == []  # the second build with a previous one kept every table
    assert made[2, False][4] == made[1, False][4] == made[2, True][4]


def test_an_early_duckdb_file_is_stopped_when_the_build_fails(catalog, tmp_path, monkeypatch):
    """discard() after a failure interrupts the DuckDB file begun early and removes the folder."""
    from pipeline import parallel
    from pipeline.publish import downloads, staging

    monkeypatch.setattr(parallel, "WORKERS", 1)  # the workbooks made here: no fork
    workbooks = downloads.start_workbooks(catalog)
    monkeypatch.setattr(parallel, "WORKERS", 2)
    stopped, stop = [], staging._Database.stop
    monkeypatch.setattr(staging._Database, "stop", lambda self: stopped.append(self) or stop(self))
    written = staging.Downloads(tmp_path / "output", catalog, workbooks, force=True)
    assert written._database is not None
    written.discard()
    assert stopped == [written._database] and not written._database.thread.is_alive()
    assert list(tmp_path.iterdir()) == []


def test_the_switch_interval_is_short_while_the_downloads_thread_runs(catalog, tmp_path, monkeypatch):
    """While the downloads' thread runs (DuckDB and the hashing take the GIL back often), Python hands
    the GIL over after THREAD_SWITCH_SECONDS; join(), or discard() after a failure, puts the interval
    back, once."""
    import sys

    from pipeline.publish import staging

    monkeypatch.setattr(staging.Downloads, "_run", lambda self, *args: None)
    monkeypatch.setattr(sys, "getswitchinterval", lambda: 0.004)
    set_to = []
    monkeypatch.setattr(sys, "setswitchinterval", set_to.append)
    short = staging.THREAD_SWITCH_SECONDS
    for threaded, ends in ((True, ("join", "discard")), (True, ("discard",)), (False, ("join", "discard"))):
        monkeypatch.setattr(staging.Downloads, "threaded", staticmethod(lambda catalog, on=threaded: on))
        set_to.clear()
        written = staging.Downloads(tmp_path / "out", catalog, force=True)
        assert set_to == ([short] if threaded else [])
        for end in ends:
            getattr(written, end)()
        assert set_to == ([short, 0.004] if threaded else [])


def test_an_error_in_the_downloads_thread_is_raised_by_join_and_discard_removes_the_folder(
    catalog, tmp_path, monkeypatch
):
    """A full disk while the thread writes the DuckDB file: join() raises that OSError in the build's
    thread (the build then exits 3), and discard() leaves nothing beside the output folder."""
    import errno

    from pipeline.publish import downloads, staging

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(downloads, "EXCEL_MAX_ROWS", 40)
    monkeypatch.setattr(staging, "write_database", full)
    written = staging.Downloads(tmp_path / "output", catalog, force=True)
    assert written._thread is not None
    with pytest.raises(OSError) as raised:
        written.join()
    assert raised.value.errno == errno.ENOSPC
    assert written.folder.is_dir()  # what was written is there until discarded
    written.discard()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("threaded", [False, True])
def test_a_build_holds_no_page_while_it_waits_for_the_downloads(tmp_path, sources, monkeypatch, threaded):
    """Once the pages are written into the new build's folder their text is dropped (Rendered.drop):
    while the build waits for the downloads it holds only quality.html (written last, at the swap);
    the summary still counts every page, and the pages on disk are whole."""
    from pipeline.build import build
    from pipeline.publish import downloads, staging

    if threaded:  # tables over the workbook limit: the downloads' thread writes while the pages render
        monkeypatch.setattr(downloads, "EXCEL_MAX_ROWS", 40)
    seen, stage, join = {}, staging.stage, staging.Downloads.join

    def staged(out, rendered, *args, **kwargs):
        seen["rendered"] = rendered
        return stage(out, rendered, *args, **kwargs)

    def joined(self):
        rendered = seen["rendered"]
        seen["held"] = sorted(name for name, text in {**rendered.site, **rendered.markdown}.items() if text is not None)
        return join(self)

    monkeypatch.setattr(staging, "stage", staged)
    monkeypatch.setattr(staging.Downloads, "join", joined)
    result = build(sources, tmp_path / "output")
    assert seen["held"] == ["quality.html"]
    site, pages = tmp_path / "output" / "site", [name for name in seen["rendered"].site if name.endswith(".html")]
    assert result["pages"] == len(pages) > 100
    assert all((site / name).is_file() for name in pages)
    assert (site / "index.html").read_text(encoding="utf-8").rstrip().endswith("</html>")


def test_a_stopped_build_interrupts_the_duckdb_file_instead_of_waiting_for_it(catalog, tmp_path, monkeypatch):
    """The DuckDB file's thread hands its connection over (write_database's `connected`): stop()
    interrupts what DuckDB is doing (at 10^7 rows a failed build would otherwise wait 30 s for the file)
    and waits for the thread; join() would raise the interruption, stop() does not."""
    import duckdb

    from pipeline.publish import staging

    def endless(path, catalog, replace=None, dropped=(), connected=None):
        con = duckdb.connect(str(path))
        connected(con)
        con.execute("SELECT sum(a.range * b.range) FROM range(10_000_000) a, range(1000) b").fetchall()  # 30 s or so

    monkeypatch.setattr(staging, "write_database", endless)
    database = staging._Database(tmp_path, catalog, None, None)
    time.sleep(0.3)  # the query runs
    assert database.thread.is_alive()
    started = time.monotonic()
    database.stop()
    assert not database.thread.is_alive() and time.monotonic() - started < 10
    assert isinstance(database.error, duckdb.InterruptException)
    with pytest.raises(duckdb.InterruptException):
        database.join({})


def test_a_stop_between_two_statements_interrupts_the_next(catalog, tmp_path, monkeypatch):
    """DuckDB's interrupt reaches only a query that runs: stop() sends it again until the thread ends,
    so a query begun after it (the file's thread was between two statements) is interrupted too."""
    import duckdb

    from pipeline.publish import staging

    between = threading.Event()

    def two(path, catalog, replace=None, dropped=(), connected=None):
        con = duckdb.connect(str(path))
        connected(con)
        con.execute("SELECT 1").fetchall()
        between.set()
        time.sleep(0.5)  # stop() comes now, while nothing runs
        con.execute("SELECT sum(a.range * b.range) FROM range(10_000_000) a, range(1000) b").fetchall()

    monkeypatch.setattr(staging, "write_database", two)
    database = staging._Database(tmp_path, catalog, None, None)
    assert between.wait(10)
    started = time.monotonic()
    database.stop()
    assert not database.thread.is_alive() and time.monotonic() - started < 10
    assert isinstance(database.error, duckdb.InterruptException)


def test_an_update_interrupted_by_a_stopping_build_is_not_written_anew(built, tmp_path, monkeypatch):
    """A copy that DuckDB cannot update is written anew, but not when the build is stopping: the
    interruption is the stop's (at 10^7 rows the file anew would take 30 s)."""
    import duckdb

    from pipeline.publish import staging

    _, files = staging._previous_state(built)
    hashes = dict(files) | {"site/data/servers.parquet": "0" * 64}  # servers' table to make again
    written = []

    def interrupted(path, catalog, replace=None, dropped=(), connected=None, earlier=None):  # noqa: PLR0913
        if replace is not None:
            raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")
        written.append("anew")

    monkeypatch.setattr(staging, "write_database", interrupted)
    monkeypatch.setattr(staging, "_record_digest", lambda path: None)
    stopping = threading.Event()
    try:
        staging._write_database(tmp_path / "a", None, hashes, built, None, stopping)
    except duckdb.InterruptException:
        pytest.fail("not stopping: the copy is written anew")
    if written != ["anew"]:
        pytest.skip("no copy was taken (no extended attributes here): nothing to update")
    stopping.set()
    with pytest.raises(duckdb.InterruptException):
        staging._write_database(tmp_path / "b", None, hashes, built, None, stopping)
    assert written == ["anew"]


def test_stopping_a_duckdb_file_already_written_is_no_error(catalog, tmp_path, monkeypatch):
    """A build that fails once its DuckDB file is written (its connection closed): discard() stops the
    file's thread, which has nothing left to interrupt; the build's own error is the one reported."""
    import duckdb

    from pipeline.publish import staging

    def written(path, catalog, replace=None, dropped=(), connected=None):
        con = duckdb.connect(str(path))
        connected(con)
        con.close()

    monkeypatch.setattr(staging, "write_database", written)
    database = staging._Database(tmp_path, catalog, None, None)
    database.thread.join()
    database.stop()
    assert database.error is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own niceness is Linux's")
def test_a_background_thread_runs_nicer_and_the_main_thread_never_does():
    """parallel.in_background makes the calling thread BACKGROUND_NICE nicer than the main thread (at
    most 19), that thread alone, and a thread it starts no nicer; in the main thread it does nothing (a
    process that lives on could not undo it)."""
    import threading

    here = os.getpriority(os.PRIO_PROCESS, 0)
    seen = []

    def background(then=None):
        workers.in_background()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        if then:
            inner = threading.Thread(target=then)  # inherits this thread's niceness
            inner.start()
            inner.join()

    thread = threading.Thread(target=background, args=(background,))
    thread.start()
    thread.join()
    assert seen == [min(19, here + workers.BACKGROUND_NICE)] * 2
    workers.in_background()
    assert os.getpriority(os.PRIO_PROCESS, 0) == here


@pytest.mark.parametrize(("given", "threads"), [(None, "1"), ("3", "3")])
def test_a_command_s_own_process_collects_less_often_and_main_leaves_the_caller_s_collector_alone(given, threads):
    """`python -m pipeline` (and the installed `gpu-reference`) set GC_THRESHOLDS before the command runs,
    and one OpenBLAS thread unless the environment names a count (kept as given); main(), which tests
    and other programs call in their own process, leaves their collector as it was."""
    import subprocess

    from pipeline.__main__ import GC_THRESHOLDS, main

    code = (
        "import atexit, gc, json, os, runpy, sys\n"
        "atexit.register(lambda: print(json.dumps([list(gc.get_threshold()), os.environ.get('OPENBLAS_NUM_THREADS')])))\n"
        "sys.argv = ['pipeline', '--help']\n"
        "runpy.run_module('pipeline', run_name='__main__')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env |= {"OPENBLAS_NUM_THREADS": given} if given else {}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [list(GC_THRESHOLDS), threads]
    assert GC_THRESHOLDS != gc.get_threshold()
    before = gc.get_threshold()
    with pytest.raises(SystemExit):
        main(["--help"])
    assert gc.get_threshold() == before


def _swinging(depth: int) -> int:
    return _swinging(depth - 1) if depth else 0


def _faults_of_swinging_calls() -> int:
    """Minor page faults while the call depth swings between 100 and 400 frames (about 10-40 KiB of
    CPython's data stack, so across the end of a 16 KiB chunk), 200 times."""
    import resource

    who = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)  # this thread's (Linux)
    before = resource.getrusage(who).ru_minflt
    for _ in range(200):
        for depth in range(100, 400, 7):
            _swinging(depth)
    return resource.getrusage(who).ru_minflt - before


@pytest.mark.skipif(sys.version_info < (3, 11), reason="frames in a chunked data stack since CPython 3.11")
def test_calls_on_the_deep_stack_do_not_map_and_unmap_the_data_stack():
    """Calls whose depth swings across the end of a data stack chunk map, fault in and unmap a chunk at
    every crossing; made from on_deep_stack's frame (every command's, from its entry point), they find
    room in the chunk that frame opened."""
    from pipeline.parallel import on_deep_stack

    assert _faults_of_swinging_calls() > 5_000  # thousands of crossings, a few pages each
    assert on_deep_stack(_faults_of_swinging_calls) < 200  # the deep chunk's pages, touched once


@pytest.mark.skipif(sys.version_info < (3, 11), reason="frames in a chunked data stack since CPython 3.11")
def test_serve_imports_great_expectations_and_rebuilds_on_a_deep_stack(tmp_path, monkeypatch):
    """`serve`'s threads that import Great Expectations (warm_up) and make every rebuild after the first
    (watch_loop) run from on_deep_stack's frame, as the command's main thread does."""
    from pipeline.tools.serve import EditorLoop

    faults = {}
    monkeypatch.setattr(EditorLoop, "warm_up", lambda self: faults.update(warm_up=_faults_of_swinging_calls()))
    monkeypatch.setattr(EditorLoop, "watch_loop", lambda self, seen: faults.update(watch=_faults_of_swinging_calls()))
    EditorLoop(SOURCES, tmp_path / "out", port=0, quiet=True).start(build_first=False).stop()
    assert faults.keys() == {"warm_up", "watch"}
    assert max(faults.values()) < 200
