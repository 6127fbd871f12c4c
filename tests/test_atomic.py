"""Never half-written: a build killed at any point leaves output/ as the previous or the new complete
build; two builds of the same sources are byte-identical."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import faults as faults_module
import pytest

from conftest import ROOT, SOURCES, edit_csv

DATABASE = "site/data/gpu-finetune.duckdb"
FAULTS = ROOT / "tests" / "faults.py"


def snapshot(folder: Path) -> dict[str, str]:
    """Every file's hash; the DuckDB file by its tables' contents (its header holds a random id)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            rel = str(path.relative_to(folder))
            out[rel] = database_digest(path) if rel == DATABASE else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def database_digest(path: Path) -> str:
    con = duckdb.connect(str(path), read_only=True)
    digest = hashlib.sha256()
    for (table,) in con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall():
        digest.update(repr(con.execute(f'SELECT * FROM "{table}" ORDER BY ALL').fetchall()).encode())
    con.close()
    return digest.hexdigest()


class Build(subprocess.Popen):
    """A build process; its stderr goes to a file, read whole with stderr_text (no pipe to fill)."""

    def __init__(self, command: list[str], stderr_path: Path):
        self.stderr_path = stderr_path
        with open(stderr_path, "wb") as err:
            super().__init__(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)

    @property
    def stderr_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


def start_build(tmp: Path, sources: Path, out: Path, *extra: str, faults: dict | None = None) -> Build:
    """`python -m pipeline build` in a new process, with the faults of tests/faults.py injected (a process:
    a kill or a second build's wait on the lock is what is tested); stderr to a file in `tmp`."""
    args = ["build", "--sources", str(sources), "--out", str(out), *extra]
    command = [sys.executable, str(FAULTS), json.dumps(faults or {}), *args]
    return Build(command, tmp / f".stderr-{time.monotonic_ns()}.txt")


def beside(out: Path) -> list[str]:
    """What is in the output's parent folder besides the output, its lock file and the tests' stderr files."""
    skip = (out.name, f".{out.name}.lock")
    return sorted(p.name for p in out.parent.iterdir() if p.name not in skip and not p.name.startswith(".stderr-"))


@pytest.fixture(scope="module")
def builds(built, tmp_path_factory):
    """Snapshots of two complete builds: the real sources (A, the run's shared build) and the same with
    one price changed (B, built over a copy of A as an editor's next build is)."""
    from pipeline.build import build

    root = tmp_path_factory.mktemp("atomic")
    changed = root / "sources-b"
    shutil.copytree(SOURCES, changed)
    edit_csv(changed / "servers.csv", ",2373300,", ",2450000,")
    shutil.copytree(built, root / "out-a", symlinks=True)
    shutil.copytree(built, root / "out-b", symlinks=True)
    build(changed, root / "out-b")
    snapshots = {"a": snapshot(root / "out-a"), "b": snapshot(root / "out-b")}
    assert snapshots["a"] != snapshots["b"]
    return root, changed, snapshots


@pytest.mark.parametrize("point", ["staging", "swap", "cleanup"])
def test_kill_at_any_point_leaves_a_complete_build(builds, tmp_path, point):
    """A build killed (SIGKILL) while its pages are written (staging), when it is complete beside the
    output (swap), or once in place with the previous build not yet removed (cleanup) leaves the
    previous build (staging, swap) or the new one (cleanup), whole; what it left beside the output (a
    half-written folder, a complete one, the previous build) is removed by the next build, which
    completes: the states the kill can leave, each reached once."""
    from pipeline.build import build

    root, changed, snapshots = builds
    out = tmp_path / "output"
    shutil.copytree(root / "out-a", out)
    proc = start_build(tmp_path, changed, out, faults={"pause": point})
    assert proc.stdout.readline().strip() == f"paused at {point}", proc.stderr_text
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    expected = snapshots["b"] if point == "cleanup" else snapshots["a"]
    assert snapshot(out) == expected
    assert beside(out), "the killed build should have left its staging folder"
    build(changed, out)  # the next build clears what the killed one left beside output/ and completes
    assert snapshot(out) == snapshots["b"]
    assert beside(out) == []


def test_two_builds_are_identical(builds, tmp_path):
    from pipeline.build import build

    root, _, snapshots = builds
    build(SOURCES, tmp_path / "again", force=True)  # nothing taken from a cache or an earlier build
    again = tmp_path / "again"
    assert snapshot(again) == snapshots["a"]
    # Byte for byte, every file but the DuckDB database (whose header carries a random id).
    for rel in snapshots["a"]:
        if rel != DATABASE:
            assert (again / rel).read_bytes() == (root / "out-a" / rel).read_bytes(), rel


def test_build_is_what_validating_first_gives(builds, tmp_path):
    """Great Expectations runs while the build computes and renders: the output is that of
    validating, then computing, rendering and publishing one after the other."""
    from pipeline import fingerprint
    from pipeline.build import load_and_validate, published
    from pipeline.combine import combine
    from pipeline.publish.staging import publish
    from pipeline.render.page_memo import PageMemo
    from pipeline.render.site import Renderer

    root, _, snapshots = builds
    con, validation = load_and_validate(SOURCES)
    validation = published(validation, SOURCES)  # as the site names source files
    catalog = combine(con)
    inputs = fingerprint.inputs(SOURCES, "/")
    memo = PageMemo(inputs)  # the pages' records (nothing to take from: a first build)
    rendered = Renderer(catalog, validation, memo=memo, sources=SOURCES).render()
    state = {"inputs": inputs, "validation": validation.to_dict(), "pages": memo.now}
    publish(tmp_path / "sequential", rendered, catalog, state)
    assert snapshot(tmp_path / "sequential") == snapshots["a"]
    assert "проверок" in (tmp_path / "sequential" / "site" / "quality.html").read_text(encoding="utf-8")


def test_a_value_only_great_expectations_rejects_leaves_output_untouched(builds, tmp_path):
    """The rejected price still computes and renders (GX runs meanwhile); nothing is published."""
    from pipeline.build import load_and_validate
    from pipeline.problems import DataError, format_report

    root, _, snapshots = builds
    sources = tmp_path / "sources"
    shutil.copytree(SOURCES, sources)
    edit_csv(sources / "servers.csv", ",2373300,", ",-5,")
    out = tmp_path / "output"
    shutil.copytree(root / "out-a", out)
    proc = start_build(tmp_path.parent, sources, out)
    assert proc.wait(timeout=300) == 2
    with pytest.raises(DataError) as sequential:
        load_and_validate(sources)
    report = format_report(sequential.value.problems)
    assert "price_rub_month" in report and report in proc.stderr_text
    assert snapshot(out) == snapshots["a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".output.lock", "output", "sources"]  # no staging folder


@pytest.fixture(scope="module")
def url_builds(builds, tmp_path_factory):
    """Builds A (base URL /) and B (base URL /b/) of the same sources, B built over a copy of A (it
    reuses A's validation): the pair for the kill-at-every-step tests below."""
    from pipeline.build import build

    root, _, snapshots = builds
    b = tmp_path_factory.mktemp("url") / "output"
    shutil.copytree(root / "out-a", b)
    build(SOURCES, b, base_url="/b/")
    assert snapshot(b) != snapshots["a"]
    return root / "out-a", snapshots["a"], b, snapshot(b)


DEAD_PID = 4194303  # above Linux's pid_max: the "process" that left a folder with it in its name is not alive


def lay_out(a: Path, out: Path, layout: str) -> None:
    """Build A at `out`: a real folder, or a link to a build folder beside it (the layout where
    folders cannot be exchanged)."""
    if layout == "folder":
        shutil.copytree(a, out)
    else:
        shutil.copytree(a, out.parent / f".{out.name}.build-{DEAD_PID}-earlier")
        (out).symlink_to(f".{out.name}.build-{DEAD_PID}-earlier")


def beside_link(out: Path) -> list[str]:
    """beside(), less the build folder the output links to."""
    current = os.readlink(out) if out.is_symlink() else None
    return [name for name in beside(out) if name != current]


def put_b_in_place(staged: Path, out: Path, faults: dict, tmp: Path) -> int:
    """In a forked child with `faults`: what a build does once B is complete beside `out` (staging.Staging.swap's
    last steps: put_in_place, then remove_previous). Returns the child's exit code."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            faults_module.apply(faults, ["build", "--out", str(out)])
            from pipeline.publish import staging

            staging.remove_previous(staging.put_in_place(staged, out, {}))
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.parametrize("layout", ["folder", "link"])
def test_without_folder_exchange_a_kill_at_every_step_leaves_a_complete_build(url_builds, tmp_path, layout):
    """Where folders cannot be exchanged atomically (forced here), output/ is a link switched in one
    rename. A kill before or after each rename, link or removal beside output/ leaves a complete
    build there, old or new; the one exception is the move from a real folder to the link, between
    its two renames, and the next build puts the build back before anything else.

    The kills happen in a forked child at each step of putting the complete build B in place (the
    steps are counted as tests/faults.py counts them: 5 from a folder — the failed exchange, the new
    link, output/ renamed aside, the link renamed over it, the previous build removed — and 3 from a
    link); the next build's first act under the lock (outdir.tidy) then finds or puts back a complete
    build and removes what the killed one left."""
    from pipeline.publish import outdir

    a, old, b, new = url_builds
    points, k = [], 1
    while True:
        case = tmp_path / f"before-{k}"
        case.mkdir()
        out = case / "output"
        lay_out(a, out, layout)
        staged = case / f".output.build-{DEAD_PID}-b"
        shutil.copytree(b, staged)
        rc = put_b_in_place(staged, out, {"no_exchange": True, "kill_before": k}, case)
        if rc == 0:  # fewer than k steps: B went in place
            assert snapshot(out) == new and out.is_symlink() and beside_link(out) == []
            break
        assert rc == -signal.SIGKILL
        points.append((f"before step {k}", out))
        k += 1
    case = tmp_path / "after-last"
    case.mkdir()
    out = case / "output"
    lay_out(a, out, layout)
    staged = case / f".output.build-{DEAD_PID}-b"
    shutil.copytree(b, staged)
    assert put_b_in_place(staged, out, {"no_exchange": True, "kill_after": k - 1}, case) == -signal.SIGKILL
    points.append(("after the last step", out))
    assert len(points) == (6 if layout == "folder" else 4)

    missing = []
    for point, out in points:
        if os.path.lexists(out):
            assert snapshot(out) in (old, new), point
        else:
            missing.append(point)
        outdir.tidy(out)  # what the next build does first, under the lock
        assert os.path.lexists(out), point
        assert snapshot(out) in (old, new), point
        assert beside_link(out) == [], point
    # Moving from a folder to the link: output/ is renamed aside (step 3), then the link takes its
    # name (step 4). A kill between the two is the only moment without output/; the link to B is put back.
    assert missing == (["before step 4"] if layout == "folder" else [])
    if layout == "folder":
        assert snapshot(points[3][1]) == new


def test_no_exchange_first_build_makes_the_link(tmp_path, monkeypatch):
    """Where folders cannot be exchanged, a first build (no output/ yet) is put in place as a link."""
    from pipeline.publish import staging as publish

    monkeypatch.setattr(publish, "_exchange", lambda a, b: False)
    out = tmp_path / "output"
    staging = tmp_path / ".output.build-1-x"
    (staging / "site").mkdir(parents=True)
    (staging / "site" / "index.html").write_text("new", encoding="utf-8")
    assert publish.put_in_place(staging, out) is None
    assert os.readlink(out) == ".output.build-1-x"
    assert (out / "site" / "index.html").read_text(encoding="utf-8") == "new"
    # The next build replaces the link with one to its own folder and hands back the previous one.
    second = tmp_path / ".output.build-2-y"
    (second / "site").mkdir(parents=True)
    (second / "site" / "index.html").write_text("newer", encoding="utf-8")
    assert publish.put_in_place(second, out) == staging
    assert os.readlink(out) == ".output.build-2-y"
    assert (out / "site" / "index.html").read_text(encoding="utf-8") == "newer"


def test_two_builds_into_one_folder_take_turns(url_builds, tmp_path):
    """A second build of the same output folder waits for the first (a lock beside the folder), then
    builds on what the first published: here the same inputs, so it finds the first's build whole and
    current and has nothing to do."""
    from pipeline import fingerprint

    a, old, _, new = url_builds
    out = tmp_path / "output"
    shutil.copytree(a, out)
    first = start_build(tmp_path, SOURCES, out, "--base-url", "/b/", faults={"pause": "swap"})
    assert first.stdout.readline().strip() == "paused at swap", first.stderr_text  # complete beside output/, lock held
    second = start_build(tmp_path, SOURCES, out, "--base-url", "/b/")
    waiting = f"Папку {out} сейчас собирает другая сборка (процесс {first.pid}); ждём, пока она закончит…"
    deadline = time.monotonic() + 60
    while waiting not in second.stderr_text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert second.stderr_text.splitlines()[0] == waiting
    with pytest.raises(subprocess.TimeoutExpired):
        second.wait(timeout=2)
    assert snapshot(out) == old
    first.stdin.write("\n")
    first.stdin.flush()
    assert first.wait(timeout=300) == 0, first.stderr_text
    assert second.wait(timeout=300) == 0, second.stderr_text
    assert snapshot(out) == new
    state = fingerprint.read_state(out)
    assert state["inputs"]["base_url"] == "/b/" and fingerprint.intact(out, state)
    assert second.stdout.read().startswith(f"С прошлой сборки {out} ничего не изменилось")
    assert beside(out) == []


def test_serve_rebuild_waits_for_the_lock(url_builds, tmp_path, capfd):
    """`serve` rebuilds under the same lock: while another process holds it, the rebuild waits."""
    import threading

    from pipeline.tools.serve import EditorLoop

    a, old, _, _ = url_builds
    out = tmp_path / "output"
    shutil.copytree(a, out)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from pipeline.publish import outdir\n"
            "with outdir.locked(outdir.target(Path(sys.argv[1]))):\n"
            "    print('held', flush=True); sys.stdin.readline()",
            str(out),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    loop = EditorLoop(SOURCES, out, port=0, quiet=True)
    try:
        results = []
        rebuild = threading.Thread(target=lambda: results.append(loop.rebuild()))
        rebuild.start()
        rebuild.join(timeout=2)
        assert rebuild.is_alive() and results == []
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=60) == 0
        rebuild.join(timeout=120)
        assert results == [True]
    finally:
        loop.server.server_close()
    assert f"Папку {out} сейчас собирает другая сборка (процесс {holder.pid}); ждём" in capfd.readouterr().err
    assert snapshot(out) == old  # the same inputs: nothing to rebuild
