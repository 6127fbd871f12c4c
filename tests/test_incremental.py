"""Incremental output: an unchanged build is skipped, unchanged files keep their times (they are
linked, not rewritten), and site/manifest.json lists every file with its content hash."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import SOURCES, edit_csv
from pipeline.__main__ import build


def stats(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_ino) for p in folder.rglob("*") if p.is_file()
    }


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory):
    """output/ built from the real sources, then rebuilt after one price changed."""
    root = tmp_path_factory.mktemp("incremental")
    sources = root / "sources"
    shutil.copytree(SOURCES, sources)
    out = root / "output"
    first = build(sources, out)
    before = stats(out)
    again = build(sources, out)
    after_again = stats(out)
    edit_csv(sources / "servers.csv", ",2373300,", ",2450000,")
    changed = build(sources, out)
    return out, first, before, again, after_again, changed, stats(out)


def test_unchanged_inputs_skip_the_build(two_builds):
    out, first, before, again, after_again, *_ = two_builds
    assert first["unchanged"] is False and first["files"]["kept"] == 0
    assert again == {"unchanged": True, "seconds": again["seconds"]}
    assert after_again == before


def test_one_price_rewrites_only_what_shows_it(two_builds):
    out, first, before, _, _, changed, after = two_builds
    rewritten = sorted(rel for rel in after if before.get(rel) != after[rel])
    assert changed["files"]["written"] == len(rewritten) and changed["files"]["kept"] == len(after) - len(rewritten)
    for rel in (
        "servers/esc8000a-8x-h100.html",
        "servers/index.html",
        "data/servers.csv",
        "data/server_fit.parquet",
        "manifest.json",
    ):
        assert f"site/{rel}" in rewritten, rel
    for rel in (
        "site/gpus/h200-sxm.html",
        "site/methods/lora.html",
        "site/data/gpus.csv",
        "site/data/gpus.xlsx",
        "markdown/finetune-memory.md",
    ):
        assert rel not in rewritten, rel
    assert "site/data/gpu-finetune.duckdb" in rewritten  # it holds the servers table
    assert changed["files"]["written"] < changed["files"]["kept"]


def test_manifest_lists_every_file_with_its_hash(two_builds):
    out = two_builds[0]
    site = out / "site"
    manifest = json.loads((site / "manifest.json").read_text(encoding="utf-8"))["files"]
    files = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file() and p.name != "manifest.json")
    assert sorted(manifest) == files
    database = manifest.pop("data/gpu-finetune.duckdb")
    for rel, digest in manifest.items():
        assert hashlib.sha256((site / rel).read_bytes()).hexdigest() == digest, rel
    # The DuckDB file (whose header holds a random id) is listed by what it holds: the Parquet files' hashes.
    parquet = "".join(digest for rel, digest in sorted(manifest.items()) if rel.endswith(".parquet"))
    assert database == hashlib.sha256(f"duckdb:{parquet}".encode()).hexdigest()


def test_template_change_reuses_validation(tmp_path):
    sources = tmp_path / "sources"
    shutil.copytree(SOURCES, sources)
    out = tmp_path / "output"
    build(sources, out)
    state = json.loads((out / "build-state.json").read_text(encoding="utf-8"))
    state["inputs"]["templates"] = "an edit of a template"
    (out / "build-state.json").write_text(json.dumps(state), encoding="utf-8")
    stages = []
    summary = build(sources, out, progress=lambda stage, seconds: stages.append(stage))
    assert stages == ["imports", "load (validation reused)", "compute", "render", "write"]
    assert len(summary["warnings"]) == 5
    quality = (out / "site" / "quality.html").read_text(encoding="utf-8")
    assert "пройдена" in quality and "ошибок:" not in quality
