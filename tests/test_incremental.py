"""Incremental output: an unchanged build is skipped, unchanged files keep their times (they are
linked, not rewritten), and site/manifest.json lists every file with its content hash."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import SOURCES, edit_csv
from pipeline.build import build


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


# Pages whose context holds an object the template calls (the estimator's tables): rendered every time.
UNSEEN_PAGES = ["accuracy.html", "pretraining.html"]


def test_one_price_renders_only_the_pages_that_show_it(two_builds, tmp_path):
    """Pages by dependency (pipeline.render.page_memo): after one price changed, Jinja renders the
    pages whose inputs changed (and those whose inputs no digest sees), and the site is byte for byte
    the site a forced build of the same sources writes."""
    out, first, before, _, _, changed, after = two_builds
    pages = sorted(rel.removeprefix("site/") for rel in after if rel.endswith(".html"))
    assert first["rendered"] == pages and len(pages) == 102  # with changelog.html (sources/releases/)
    rewritten = {rel.removeprefix("site/") for rel in after if rel.endswith(".html") and before[rel] != after[rel]}
    # quality.html is rendered once with the checks done before the suites finish, then with all of them
    # (unless these sources were validated before, by any test of the run: the outcome is remembered)
    assert set(changed["rendered"]) | {"quality.html"} == rewritten | set(UNSEEN_PAGES) | {"quality.html"}
    assert "servers/esc8000a-8x-h100.html" in rewritten and "gpus/h200-sxm.html" not in changed["rendered"]
    assert len(changed["rendered"]) < len(pages) * 2 // 3
    forced = tmp_path / "forced"
    build(out.parent / "sources", forced, force=True)
    assert {r: d for r, d in hashes(forced).items() if r != "build-state.json"} == {
        r: d for r, d in hashes(out).items() if r != "build-state.json"
    }


def test_one_price_makes_again_only_its_tables_in_the_database(two_builds):
    import duckdb

    from pipeline import fingerprint
    from pipeline.publish.downloads import comment_sql
    from pipeline.schema import ALL_TABLES

    out, first, *_, changed, _ = two_builds
    assert first["database"] == [t.name for t in ALL_TABLES]
    assert changed["database"] == ["servers", "server_fit", "recommendations", "server_memory"]  # the rest: kept
    assert sorted(fingerprint.read_state(out)["database_tables"]) == sorted(t.name for t in ALL_TABLES)
    con = duckdb.connect(str(out / "site" / "data" / "gpu-finetune.duckdb"), read_only=True)
    assert sorted(r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()) == sorted(
        t.name for t in ALL_TABLES
    )
    for table in ALL_TABLES:  # every table, made again or kept, holds the rows of its Parquet download
        parquet = str(out / "site" / "data" / f"{table.name}.parquet")
        rows = f'SELECT * FROM "{table.name}"'
        apart = f"SELECT count(*) FROM (({rows} EXCEPT ALL FROM read_parquet($p)) UNION ALL (FROM read_parquet($p) EXCEPT ALL {rows}))"
        assert con.execute(apart, {"p": parquet}).fetchone() == (0,), table.name
        comment = con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = ?", [table.name]).fetchone()[0]
        assert comment_sql(table).startswith(f'COMMENT ON TABLE "{table.name}" IS \'{comment}')
    con.close()


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
    assert len(summary["warnings"]) == 6  # the five servers without a price, and the relative --base-url
    quality = (out / "site" / "quality.html").read_text(encoding="utf-8")
    assert "пройдена" in quality and "ошибок:" not in quality


@pytest.fixture(scope="module")
def base_build(tmp_path_factory):
    """A build of the real sources and its files' hashes, to copy and damage."""
    root = tmp_path_factory.mktemp("damage")
    sources = root / "sources"
    shutil.copytree(SOURCES, sources)
    build(sources, root / "output")
    return sources, root / "output", hashes(root / "output")


def hashes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "gpu-finetune.duckdb"
    }


def assert_manifest_right(out: Path) -> None:
    from pipeline import fingerprint

    site = out / "site"
    manifest = json.loads((site / "manifest.json").read_text(encoding="utf-8"))["files"]
    manifest.pop("data/gpu-finetune.duckdb")
    for rel, digest in manifest.items():
        assert hashlib.sha256((site / rel).read_bytes()).hexdigest() == digest, rel
    assert fingerprint.intact(out, fingerprint.read_state(out))


def damage(out: Path) -> None:
    page = out / "site" / "gpus" / "h100-pcie.html"
    page.write_bytes(b"X" * page.stat().st_size)  # same size: only the bytes tell
    (out / "markdown" / "gpu-count.md").write_text("CORRUPTED", encoding="utf-8")
    csv = out / "site" / "data" / "gpus.csv"
    csv.write_bytes(csv.read_bytes()[:100])
    (out / "site" / "planted.html").write_text("not ours", encoding="utf-8")


@pytest.mark.parametrize("force", [False, True])
def test_damage_in_the_previous_build_is_repaired(base_build, tmp_path, force, monkeypatch):
    from pipeline import fingerprint

    sources, built, expected = base_build
    out = tmp_path / "output"
    shutil.copytree(built, out)
    # the remembered hashes are trusted at once (fingerprint.Digests), so only the files' status tells
    monkeypatch.setattr(fingerprint.Digests, "racy_window", lambda self, ctime: 0)
    assert build(sources, out)["unchanged"] is True  # an undamaged copy: nothing to do
    damage(out)
    inodes = {rel: st[1] for rel, st in stats(out).items()}
    summary = build(sources, out, force=force)
    assert summary["unchanged"] is False  # the no-change check read the files and found the damage
    assert hashes(out) == expected
    assert_manifest_right(out)
    if force:  # every file written anew, none linked from the damaged build
        assert summary["files"]["kept"] == 0
        assert all(st[1] != inodes.get(rel) for rel, st in stats(out).items())
    else:  # the three damaged files and the DuckDB file (always written); the rest linked
        assert summary["files"]["written"] == 4
        assert summary["files"]["kept"] == len(expected) + 1 - 4
        # the damaged page does not verify, so it is rendered again; so are the pages no digest sees
        assert summary["rendered"] == [*UNSEEN_PAGES[:1], "gpus/h100-pcie.html", *UNSEEN_PAGES[1:]]
    assert build(sources, out)["unchanged"] is True


def test_a_damaged_database_is_rebuilt(base_build, tmp_path):
    import duckdb

    sources, built, _ = base_build
    out = tmp_path / "output"
    shutil.copytree(built, out)  # copy2 keeps the extended attribute with the file's hash
    database = out / "site" / "data" / "gpu-finetune.duckdb"
    data = bytearray(database.read_bytes())
    data[len(data) // 2] ^= 0xFF
    database.write_bytes(bytes(data))
    summary = build(sources, out)
    assert summary["unchanged"] is False
    from pipeline.schema import ALL_TABLES

    # its bytes are not those recorded, so no table of it is reused: the file is written anew
    assert summary["database"] == [t.name for t in ALL_TABLES]
    con = duckdb.connect(str(database), read_only=True)
    assert con.execute("SELECT count(*) FROM server_fit").fetchone() == (2700,)
    con.close()
    assert build(sources, out)["unchanged"] is True


def _edited_copy(base_build, tmp_path, price: str):
    """(sources, out): copies of the base build's sources, with servers.csv's 2373300 made `price`, and of
    its output."""
    _, built, _ = base_build
    sources, out = tmp_path / "sources", tmp_path / "output"
    shutil.copytree(base_build[0], sources)
    shutil.copytree(built, out)
    edit_csv(sources / "servers.csv", ",2373300,", f",{price},")
    return sources, out


def test_the_database_is_written_anew_when_nothing_can_be_kept(base_build, tmp_path, monkeypatch):
    from pipeline.fingerprint import STATE
    from pipeline.publish import staging
    from pipeline.schema import ALL_TABLES

    sources, out = _edited_copy(base_build, tmp_path, "2373301")
    state = json.loads((out / STATE).read_text(encoding="utf-8"))
    state["database_tables"] = {t.name: "another duckdb" for t in ALL_TABLES}  # as after a DuckDB upgrade
    (out / STATE).write_text(json.dumps(state), encoding="utf-8")
    copied = []
    monkeypatch.setattr(staging, "_copy_intact", lambda source, copy: copied.append(source) or False)
    assert build(sources, out)["database"] == [t.name for t in ALL_TABLES] and copied == []  # no copy was taken


def test_the_database_is_written_anew_when_its_copy_cannot_be_updated(base_build, tmp_path, monkeypatch):
    import duckdb

    from pipeline.publish import staging
    from pipeline.schema import ALL_TABLES

    sources, out = _edited_copy(base_build, tmp_path, "2373302")
    write_database, asked = staging.write_database, []

    def refused(path, catalog, replace=None, dropped=(), connected=None, earlier=None):  # noqa: PLR0913
        if replace is not None:
            asked.append([t.name for t in replace])
            raise duckdb.CatalogException("a copy DuckDB cannot update")
        return write_database(path, catalog, connected=connected)

    monkeypatch.setattr(staging, "write_database", refused)
    everything = [t.name for t in ALL_TABLES]
    assert build(sources, out)["database"] == everything  # the copy could not be updated: written anew
    assert asked == [["servers", "server_fit", "recommendations", "server_memory"]]
    con = duckdb.connect(str(out / "site" / "data" / "gpu-finetune.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone() == (len(everything),)
    con.close()


def test_a_context_is_pickled_as_pickle_pickles_it_or_refused():
    """page_memo.context_bytes: the bytes of pickle (no memo) for plain values and pipeline dataclasses,
    so the records of earlier builds still match; None for anything else (a function, a str subclass)."""
    import datetime as dt
    import io
    import pickle

    from markupsafe import Markup

    from pipeline.render import page_memo
    from pipeline.render.russian import Shown
    from pipeline.render.view import Link, TableView

    view = TableView(["a", "b"], [[Link("x", "m/x.html"), "1 200"], [Link("x", "m/x.html"), Markup("<b>2</b>")]], ["r"])
    context = {"view": view, "when": dt.date(2026, 1, 2), "n": [1, 2.5, None, True], "kinds": (str, int)}
    buffer = io.BytesIO()
    plain = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    plain.fast = True
    plain.dump(("page.html", context))
    assert page_memo.context_bytes("page.html", context) == buffer.getvalue()
    assert page_memo.context_bytes("page.html", {"f": len}) is None
    assert page_memo.context_bytes("page.html", {"n": Shown("5")}) is None
