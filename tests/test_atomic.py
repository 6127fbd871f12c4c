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


def test_build_is_what_validating_first_gives(builds, tmp_path):
    """Great Expectations runs while the build computes and renders: the output is that of
    validating, then computing, rendering and publishing one after the other."""
    from pipeline import fingerprint
    from pipeline.__main__ import load_and_validate
    from pipeline.combine import combine
    from pipeline.publish import publish
    from pipeline.render import Renderer

    root, _, snapshots = builds
    con, validation = load_and_validate(SOURCES)
    catalog = combine(con)
    state = {"inputs": fingerprint.inputs(SOURCES, "/"), "validation": validation.to_dict()}
    publish(tmp_path / "sequential", Renderer(catalog, validation).render(), catalog, state)
    assert snapshot(tmp_path / "sequential") == snapshots["a"]
    assert "проверок" in (tmp_path / "sequential" / "site" / "quality.html").read_text(encoding="utf-8")


def test_a_value_only_great_expectations_rejects_leaves_output_untouched(builds, tmp_path):
    """The rejected price still computes and renders (GX runs meanwhile); nothing is published."""
    from pipeline.__main__ import load_and_validate
    from pipeline.problems import DataError, format_report

    root, _, snapshots = builds
    sources = tmp_path / "sources"
    shutil.copytree(SOURCES, sources)
    edit_csv(sources / "servers.csv", ",2373300,", ",-5,")
    out = tmp_path / "output"
    shutil.copytree(root / "out-a", out)
    proc = start_build(sources, out)
    assert proc.wait(timeout=300) == 2
    with pytest.raises(DataError) as sequential:
        load_and_validate(sources)
    report = format_report(sequential.value.problems)
    assert "price_rub_month" in report and report in proc.stderr.read()
    assert snapshot(out) == snapshots["a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["output", "sources"]  # no staging folder left
