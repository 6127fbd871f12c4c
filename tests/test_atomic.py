"""Never half-written: a build killed at any point leaves output/ as the previous or the new complete
build; two builds of the same sources are byte-identical."""

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from conftest import ROOT, SOURCES, edit_csv

DATABASE = "site/data/gpu-finetune.duckdb"


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


def start_build(sources: Path, out: Path, pause: str | None = None) -> subprocess.Popen:
    env = dict(os.environ, PIPELINE_TEST_PAUSE=pause or "")
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline", "build", "--sources", str(sources), "--out", str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Snapshots of two complete builds: the real sources (A) and the same with one price changed (B)."""
    root = tmp_path_factory.mktemp("atomic")
    changed = root / "sources-b"
    shutil.copytree(SOURCES, changed)
    edit_csv(changed / "servers.csv", ",2373300,", ",2450000,")
    snapshots = {}
    for name, sources in (("a", SOURCES), ("b", changed)):
        proc = start_build(sources, root / f"out-{name}")
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
        snapshots[name] = snapshot(root / f"out-{name}")
    assert snapshots["a"] != snapshots["b"]
    return root, changed, snapshots


@pytest.mark.parametrize("point", ["staging", "swap", "cleanup"])
def test_kill_at_any_point_leaves_a_complete_build(builds, tmp_path, point):
    root, changed, snapshots = builds
    out = tmp_path / "output"
    shutil.copytree(root / "out-a", out)
    proc = start_build(changed, out, pause=point)
    assert proc.stdout.readline().strip() == f"paused at {point}"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    expected = snapshots["b"] if point == "cleanup" else snapshots["a"]
    assert snapshot(out) == expected
    # The next build clears what the killed one left beside output/ and completes.
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "output"]
    assert leftovers, "the killed build should have left its staging folder"
    proc = start_build(changed, out)
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    assert snapshot(out) == snapshots["b"]
    assert [p.name for p in tmp_path.iterdir()] == ["output"]


def test_two_builds_are_identical(builds, tmp_path):
    root, _, snapshots = builds
    proc = start_build(SOURCES, tmp_path / "again")
    assert proc.wait(timeout=300) == 0
    again = tmp_path / "again"
    assert snapshot(again) == snapshots["a"]
    # Byte for byte, every file but the DuckDB database (whose header carries a random id).
    for rel in snapshots["a"]:
        if rel != DATABASE:
            assert (again / rel).read_bytes() == (root / "out-a" / rel).read_bytes(), rel
