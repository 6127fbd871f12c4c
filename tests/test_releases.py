"""Releases of the data: the version bump rule, the changelog, the history a build publishes (version and
date in datapackage.json, changelog, CITATION.cff, «Как цитировать»), and the release files kept at
data/releases/<version>/ on object storage. Small inline builds, except the checks of the shared build."""

import csv
import datetime as dt
import hashlib
import json

import pytest
from test_tools import objects, s3_server  # noqa: F401 (the fixture)

from conftest import SOURCES
from pipeline.problems import DataError
from pipeline.publish import releases
from pipeline.schema import TABLES_BY_NAME
from pipeline.tools import publish_s3
from pipeline.tools.release import Snapshot, Unpublished, bump, compare, next_version, release


def snap(columns: list[str], key: list[str], rows: list[list[str]]) -> Snapshot:
    return Snapshot(
        columns, key, {tuple(r[columns.index(k)] for k in key): dict(zip(columns, r, strict=True)) for r in rows}
    )


SERVERS = ["server_id", "gpu_id", "price_rub_month"]
BEFORE = {
    "servers": snap(SERVERS, ["server_id"], [["a", "h100", "1000000"], ["b", "h200", "2000000"]]),
    "server_fit": snap(
        ["model_id", "server_id", "price_rub_month"],
        ["model_id", "server_id"],
        [["m1", "a", "1000000"], ["m2", "a", "1000000"], ["m1", "b", "2000000"]],
    ),
}


def edited(**tables) -> dict[str, Snapshot]:
    return {**BEFORE, **tables}


ONE_PRICE = edited(
    servers=snap(SERVERS, ["server_id"], [["a", "h100", "1100000"], ["b", "h200", "2000000"]]),
    server_fit=snap(
        ["model_id", "server_id", "price_rub_month"],
        ["model_id", "server_id"],
        [["m1", "a", "1100000"], ["m2", "a", "1100000"], ["m1", "b", "2000000"]],
    ),
)
NO_GPU_COLUMN = edited(
    servers=snap(["server_id", "price_rub_month"], ["server_id"], [["a", "1000000"], ["b", "2000000"]])
)


@pytest.mark.parametrize(
    "after, part",
    [
        (BEFORE, None),
        (ONE_PRICE, "patch"),
        (edited(servers=snap(SERVERS, ["server_id"], [["a", "h100", "1000000"]])), "patch"),  # a row removed
        (edited(servers=snap([*SERVERS, "network"], ["server_id"], [["a", "h100", "1000000", "ib"]])), "minor"),
        ({**BEFORE, "gpus": snap(["gpu_id"], ["gpu_id"], [["h100"]])}, "minor"),  # a new table
        (NO_GPU_COLUMN, "major"),  # a removed column
        (edited(servers=snap(["server_id", "gpu", "price_rub_month"], ["server_id"], [])), "major"),  # renamed
        ({"servers": BEFORE["servers"]}, "major"),  # a removed table
    ],
)
def test_the_version_bump_rule(after, part):
    assert bump(compare(BEFORE, after)) == part


def test_next_version():
    assert next_version(None, "first") == "1.0.0"
    assert [next_version("1.4.2", p) for p in ("patch", "minor", "major")] == ["1.4.3", "1.5.0", "2.0.0"]
    assert next_version("1.9.9", "patch") == "1.9.10"


def test_the_changes_of_a_one_price_edit():
    """A source table's change is listed value by value; a derived table's is summed up in one line."""
    assert compare(BEFORE, ONE_PRICE) == [
        {
            "table_name": "servers",
            "change": "value_changed",
            "row_key": "a",
            "column_name": "price_rub_month",
            "old_value": "1000000",
            "new_value": "1100000",
            "rows": "1",
        },
        {
            "table_name": "server_fit",
            "change": "rows_changed",
            "row_key": "",
            "column_name": "price_rub_month",
            "old_value": "",
            "new_value": "",
            "rows": "2",
        },
    ]


def test_the_changes_of_a_removed_column():
    assert compare(BEFORE, NO_GPU_COLUMN) == [
        {
            "table_name": "servers",
            "change": "column_removed",
            "row_key": "",
            "column_name": "gpu_id",
            "old_value": "",
            "new_value": "",
            "rows": "2",
        }
    ]


def test_a_derived_tables_changes_are_counted_from_its_file_as_from_its_rows(tmp_path):
    """A derived table is read as its file and counted by DuckDB (pipeline/tools/table_changes.py), never
    row by row in Python: the same lines as from its rows in memory."""
    from pipeline.tools.release import read_build

    key = ["model_id", "server_id"]
    after = edited(
        server_fit=snap(  # (m1, a) repriced, (m1, b) gone, (m3, b) new
            ["model_id", "server_id", "price_rub_month"],
            key,
            [["m1", "a", "1100000"], ["m2", "a", "1000000"], ["m3", "b", "2000000"]],
        )
    )
    write_build(tmp_path / "old", BEFORE, "1.0.0")
    write_build(tmp_path / "new", after, "1.0.0")
    old, new = read_build(tmp_path / "old"), read_build(tmp_path / "new")
    assert new["server_fit"].rows is None and new["servers"].rows is not None
    from_files = compare(old, new)
    assert from_files == compare(BEFORE, after)
    assert [(c["change"], c["column_name"], c["rows"]) for c in from_files if c["table_name"] == "server_fit"] == [
        ("row_added", "", "1"),
        ("row_removed", "", "1"),
        ("rows_changed", "price_rub_month", "1"),
    ]


def write_build(out, tables: dict[str, Snapshot], version: str | None) -> None:
    """A build's data folder as `release` reads it: datapackage.json and one CSV per table."""
    data = out / "site" / "data"
    data.mkdir(parents=True)
    resources = []
    for name, table in tables.items():
        with (data / f"{name}.csv").open("w", encoding="utf-8-sig", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=table.columns, lineterminator="\n")
            writer.writeheader()
            writer.writerows(table.rows.values())
        fields = [{"name": c, "type": "string"} for c in table.columns]
        schema = {"fields": fields, "primaryKey": table.key}
        resources.append({"name": name, "path": f"{name}.csv", "schema": schema})
    package = {"resources": resources} | ({"version": version} if version else {})
    (data / "datapackage.json").write_text(json.dumps(package), encoding="utf-8")


def test_release_records_a_one_price_edit_and_then_a_removed_column(tmp_path):
    sources = tmp_path / "sources"
    sources.mkdir()
    write_build(tmp_path / "v1", BEFORE, None)
    first = release(sources, tmp_path / "v1", tmp_path / "nothing-published", dt.date(2026, 12, 1))
    assert (first["version"], first["change"]) == ("1.0.0", "first")
    assert [(c["table_name"], c["change"], c["rows"]) for c in first["changes"]] == [
        ("servers", "table_added", "2"),
        ("server_fit", "table_added", "3"),
    ]
    write_build(tmp_path / "published", BEFORE, "1.0.0")
    write_build(tmp_path / "v2", ONE_PRICE, "1.0.0")
    assert release(sources, tmp_path / "v2", tmp_path / "published", dt.date(2026, 12, 5))["version"] == "1.0.1"
    with pytest.raises(Unpublished):  # 1.0.1 is recorded, the published build is still 1.0.0
        release(sources, tmp_path / "v2", tmp_path / "published", dt.date(2026, 12, 5))

    write_build(tmp_path / "published2", ONE_PRICE, "1.0.1")
    removed = {**ONE_PRICE, "servers": snap(["server_id", "price_rub_month"], ["server_id"], [["a", "1100000"]])}
    write_build(tmp_path / "v3", removed, "1.0.1")
    third = release(sources, tmp_path / "v3", tmp_path / "published2", dt.date(2026, 12, 9))
    assert (third["version"], third["change"]) == ("2.0.0", "major")

    history = releases.read_history(sources)
    assert [(r["version"], r["released_on"], r["change"]) for r in history.releases] == [
        ("1.0.0", "2026-12-01", "first"),
        ("1.0.1", "2026-12-05", "patch"),
        ("2.0.0", "2026-12-09", "major"),
    ]
    assert history.kept(releases.Retention(12, 366)) == ["2.0.0", "1.0.1", "1.0.0"]
    assert history.kept(releases.Retention(2, 366)) == ["2.0.0", "1.0.1"]
    assert releases.changelog_csv(history).decode("utf-8-sig").splitlines() == [
        "version,released_on,table_name,change,row_key,column_name,old_value,new_value,rows",
        "2.0.0,2026-12-09,servers,column_removed,,gpu_id,,,2",
        "2.0.0,2026-12-09,servers,row_removed,b,,,,1",
        "1.0.1,2026-12-05,servers,value_changed,a,price_rub_month,1000000,1100000,1",
        "1.0.1,2026-12-05,server_fit,rows_changed,,price_rub_month,,,2",
        "1.0.0,2026-12-01,servers,table_added,,,,,2",
        "1.0.0,2026-12-01,server_fit,table_added,,,,,3",
    ]
    # Nothing changed since the published build: no release.
    write_build(tmp_path / "published3", removed, "2.0.0")
    assert release(sources, tmp_path / "v3", tmp_path / "published3", dt.date(2026, 12, 10)) is None


def test_release_against_the_last_releases_zip_when_the_published_folder_has_unreleased_data(tmp_path):
    """Published without `release`: the published folder already has the edit, so compared with it nothing
    changed; compared with the release itself (its zip as publish stores it, or unpacked) the edit is found."""
    sources = tmp_path / "sources"
    sources.mkdir()
    write_build(tmp_path / "v1", BEFORE, None)
    release(sources, tmp_path / "v1", None, dt.date(2026, 12, 1))
    write_build(tmp_path / "published", ONE_PRICE, "1.0.0")  # the edit, published under 1.0.0
    write_build(tmp_path / "v2", ONE_PRICE, "1.0.0")
    assert release(sources, tmp_path / "v2", tmp_path / "published", dt.date(2026, 12, 5)) is None

    write_build(tmp_path / "r1", BEFORE, "1.0.0")  # release 1.0.0 as publish zipped it
    data = tmp_path / "r1" / "site" / "data"
    files = {p.name: p.read_bytes() for p in data.iterdir()}
    archive = tmp_path / "gpu-finetune-data-1.0.0.zip"
    archive.write_bytes(releases.zip_bytes(files, "1.0.0", "2026-12-01"))
    from pipeline.tools.release import read_build

    zipped, unpacked, built = read_build(archive), read_build(data), read_build(tmp_path / "r1")
    assert zipped["servers"] == unpacked["servers"] == built["servers"]  # a source table: its rows
    derived = [s["server_fit"] for s in (zipped, unpacked, built)]  # a derived table: its files, for DuckDB
    assert [d.count() for d in derived] == [3, 3, 3] and not any(d.files.has_parquet for d in derived)
    copied = derived[0].files.data.path("server_fit.csv")  # the zip's member, copied out for DuckDB
    assert copied.read_bytes() == (data / "server_fit.csv").read_bytes() and copied.parent != data
    assert compare(zipped, unpacked) == compare(unpacked, built) == []
    made = release(sources, tmp_path / "v2", archive, dt.date(2026, 12, 5))
    assert (made["version"], made["change"]) == ("1.0.1", "patch")
    assert [(c["table_name"], c["change"], c["row_key"], c["old_value"], c["new_value"]) for c in made["changes"]] == [
        ("servers", "value_changed", "a", "1000000", "1100000"),
        ("server_fit", "rows_changed", "", "", ""),
    ]


def test_the_local_publish_warns_about_unreleased_data(tmp_path, capsys):
    """`just publish` (the folder copy) runs `release --check-unreleased` first: the same warning as publish
    to object storage, before the folder that `release` compares with takes the unreleased data."""
    from pipeline import ROOT
    from pipeline.__main__ import main

    args = ["release", "--check-unreleased", "--sources", str(tmp_path / "sources")]
    args += ["--citation", str(tmp_path / "CITATION.cff"), "--out", str(tmp_path / "v2")]
    args += ["--against", str(tmp_path / "published")]
    write_build(tmp_path / "v2", ONE_PRICE, "1.0.0")
    assert main(args) == 0  # nothing published yet: nothing to say
    write_build(tmp_path / "published", BEFORE, "1.0.0")
    assert main(args) == 0
    assert capsys.readouterr().err.startswith(
        "publish: предупреждение: данные изменились с выпуска 1.0.0 (таблицы: server_fit, servers), а нового выпуска нет"
    )
    write_build(tmp_path / "released", BEFORE, "1.0.1")  # another version: a release was made
    assert main([*args[:-1], str(tmp_path / "released")]) == 0
    write_build(tmp_path / "same", ONE_PRICE, "1.0.0")  # the same data: nothing changed
    assert main([*args[:-1], str(tmp_path / "same")]) == 0
    assert capsys.readouterr().err == ""
    assert not (tmp_path / "sources").exists() and not (tmp_path / "CITATION.cff").exists()  # records nothing
    recipe = (ROOT / "justfile").read_text(encoding="utf-8").split("\npublish *ARGS:", 1)[1].split("\n\n", 1)[0]
    assert 'release --check-unreleased --out output --against "$dest" || true' in recipe


def test_a_malformed_history_is_reported_by_file_line_and_column(tmp_path):
    folder = tmp_path / "releases"
    folder.mkdir()
    (folder / "releases.csv").write_text("version,released_on,change\n1.0,2026-12-01,first\n1.0.1,01.12.2026,patch\n")
    with pytest.raises(DataError) as raised:
        releases.read_history(tmp_path)
    assert [(p.file, p.line, p.column, p.value) for p in raised.value.problems] == [
        ("releases/releases.csv", 2, "version", "1.0"),
        ("releases/releases.csv", 3, "released_on", "01.12.2026"),
    ]


def test_citation_file_names_the_version_and_date():
    history = releases.History(({"version": "1.2.0", "released_on": "2026-12-05", "change": "minor"},))
    cite = releases.citation(history, "Данные «GPU»", "https://example.org/gpu", "CC-BY-4.0")
    assert cite["release_url"] == "https://example.org/gpu/data/releases/1.2.0/"
    text = releases.citation_cff(cite, "Справочник")
    assert 'title: "Данные «GPU»"' in text.splitlines()
    assert 'version: "1.2.0"' in text.splitlines() and 'date-released: "2026-12-05"' in text.splitlines()
    assert "license: CC-BY-4.0" in text.splitlines()
    assert releases.citation(releases.History(), "x", "/", "CC-BY-4.0") is None


# --- the shared build of the real catalog --------------------------------------------------------------


def test_the_build_publishes_the_current_release(built):
    history = releases.read_history(SOURCES)
    current = history.current
    data = built / "site" / "data"
    package = json.loads((data / "datapackage.json").read_text(encoding="utf-8"))
    assert (package["version"], package["x_released_on"]) == (current["version"], current["released_on"])
    assert (data / "changelog.csv").read_bytes() == releases.changelog_csv(history)
    cff = (data / "CITATION.cff").read_text(encoding="utf-8").splitlines()
    assert f'version: "{current["version"]}"' in cff and f'date-released: "{current["released_on"]}"' in cff
    page = (built / "site" / "data.html").read_text(encoding="utf-8").replace("\u00a0", " ")  # typeset
    shown = dt.date.fromisoformat(current["released_on"]).strftime("%d.%m.%Y")
    assert page.count("Как цитировать") == 1 + len(package["resources"])  # the data page and every table
    assert f"Версия {current['version']} от {shown}" in page
    assert f"Таблица «{TABLES_BY_NAME['servers'].title_ru}» (<code>servers</code>)" in page
    changelog = (built / "site" / "changelog.html").read_text(encoding="utf-8").replace("\u00a0", " ")
    assert f"<h2>Версия {current['version']} от {shown}</h2>" in changelog


def test_every_comparison_page_cites_its_table(built):
    """A comparison page is one table's page: its «Как цитировать» names that table, the version and the date."""
    current = releases.read_history(SOURCES).current
    shown = dt.date.fromisoformat(current["released_on"]).strftime("%d.%m.%Y")
    pages = sorted(p for p in (built / "site" / "compare").glob("*.html") if p.name != "index.html")
    cited = {}
    for page in pages:
        html = page.read_text(encoding="utf-8").replace("\u00a0", " ")
        assert html.count("<h2>Как цитировать</h2>") == 1, page.name
        assert f"Версия {current['version']} от {shown}." in html, page.name
        cited[page.name] = next(name for name in ("server_fit", "gpu_fit") if f"(<code>{name}</code>)" in html)
    assert cited == {"server-fit.html": "server_fit"} | {
        f"gpu-cards-{m}.html": "gpu_fit"
        for m in ("full_amp", "full_bf16", "lora", "qlora_2bit", "qlora_4bit", "qlora_8bit")
    }
    html = (built / "site" / "compare" / "server-fit.html").read_text(encoding="utf-8")
    assert f"Таблица «{TABLES_BY_NAME['server_fit'].title_ru}» (<code>server_fit</code>)" in html
    assert f"/data/releases/{current['version']}/server_fit.csv." in html


# --- release files on object storage -------------------------------------------------------------------


DAY = 86400.0


def test_snapshot_plan_copies_each_release_once_and_keeps_the_declared_number_and_time():
    local = {"data/a.csv": "x", "data/datapackage.json": "y", "index.html": "z"}
    keep = releases.Retention(releases=2, days=30)
    now = 1000 * DAY
    assert publish_s3.snapshot_plan(local, "1.0.0", {}, keep, now) == (["data/a.csv", "data/datapackage.json"], [])
    stored = {"data/releases/1.0.0/a.csv": now}
    assert publish_s3.snapshot_plan(local, "1.0.0", stored, keep, now) == (["data/datapackage.json"], [])
    # Four stored releases: 1.0.0 and 1.1.0 are past the newest two (with 2.0.0 published now), but 1.1.0
    # was stored 30 days ago (kept), 1.0.0 31 days ago (deleted, every file of it).
    stored = {
        "data/releases/1.0.0/a.csv": now - 31 * DAY,
        "data/releases/1.0.0/gpu-finetune-data-1.0.0.zip": now - 31 * DAY,
        "data/releases/1.1.0/a.csv": now - 30 * DAY,
        "data/releases/1.2.0/a.csv": now - 40 * DAY,
    }
    copy, drop = publish_s3.snapshot_plan(local, "2.0.0", stored, keep, now)
    assert copy == ["data/a.csv", "data/datapackage.json"]
    assert drop == ["data/releases/1.0.0/a.csv", "data/releases/1.0.0/gpu-finetune-data-1.0.0.zip"]


def test_the_retention_is_declared_in_site_toml():
    import tomllib

    from pipeline import TEMPLATES
    from pipeline.render.views.entities import config_problems

    config = tomllib.loads((TEMPLATES / "site.toml").read_text(encoding="utf-8"))
    assert releases.retention(config) == releases.Retention(releases=12, days=366) == releases.retention()
    for bad in (
        {},
        {"kept_releases": 12},
        {"kept_releases": 0, "kept_days": 366},
        {"kept_releases": 12, "kept_days": True},
    ):
        with pytest.raises(ValueError):
            releases.retention({"releases": bad})
    problems = [p for p in config_problems_of(config_problems, {**config, "releases": {"kept_releases": "12"}})]
    assert [(p.file, p.column) for p in problems] == [("site_templates/site.toml", "releases")]


def config_problems_of(check, config):
    """site.toml's problems with the real catalog's ids (only [releases] is wrong in the configs above)."""
    from types import SimpleNamespace

    import polars as pl

    ids = {
        "methods": pl.DataFrame(
            {
                "method_id": [m for m in config["index_methods"]]
                + [t[1] for t in [*config["compare_tasks"], config["calculator_opens_with"]]]
            }
        ),
        "models": pl.DataFrame(
            {"model_id": [t[0] for t in [*config["compare_tasks"], config["calculator_opens_with"]]]}
        ),
    }
    return check(SimpleNamespace(c=ids), config)


def test_a_release_zip_is_the_same_bytes_every_time_and_holds_every_file():
    import io
    import zipfile

    files = {"servers.csv": b"server_id\na\n", "servers.parquet": b"PAR1", "datapackage.json": b"{}"}
    made = releases.zip_bytes(files, "1.2.0", "2026-12-05")
    assert made == releases.zip_bytes(dict(reversed(files.items())), "1.2.0", "2026-12-05")
    assert releases.zip_path("1.2.0") == "data/releases/1.2.0/gpu-finetune-data-1.2.0.zip"
    with zipfile.ZipFile(io.BytesIO(made)) as archive:
        infos = archive.infolist()
        assert [i.filename for i in infos] == [
            "gpu-finetune-data-1.2.0/datapackage.json",
            "gpu-finetune-data-1.2.0/servers.csv",
            "gpu-finetune-data-1.2.0/servers.parquet",
        ]
        assert {i.date_time for i in infos} == {(2026, 12, 5, 0, 0, 0)}
        assert [i.compress_type for i in infos] == [zipfile.ZIP_DEFLATED, zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED]
        assert archive.read("gpu-finetune-data-1.2.0/servers.csv") == b"server_id\na\n"


def test_the_release_zip_is_written_a_piece_at_a_time_into_the_same_bytes(tmp_path):
    """publish writes the zip into a file from the build's files, a piece at a time (a 10^7-row catalog's
    data are 4.4 GB): the same bytes as zipping them whole in memory, the pieces never over 1 MiB."""
    import io
    import os
    import zipfile

    files = {
        "server_fit.csv": b"model_id,server_id\n" + os.urandom(3 << 20),  # three pieces and more, deflated
        "server_fit.parquet": os.urandom(1 << 20),  # stored
        "datapackage.json": b"{}",
    }
    read = []

    class Recorded(io.BytesIO):
        def read(self, size=-1):
            read.append(size)
            return super().read(size)

    target = tmp_path / "release.zip"
    with target.open("wb") as out:
        releases.write_zip(out, {n: (lambda d=d: Recorded(d)) for n, d in files.items()}, "1.2.0", "2026-12-05")
    whole = io.BytesIO()  # each file compressed whole, as zipfile's writestr does
    with zipfile.ZipFile(whole, "w") as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(f"gpu-finetune-data-1.2.0/{name}", date_time=(2026, 12, 5, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_STORED if name.endswith(".parquet") else zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name])
    assert target.read_bytes() == whole.getvalue() == releases.zip_bytes(files, "1.2.0", "2026-12-05")
    assert read and all(0 < size <= 1 << 20 for size in read)
    with zipfile.ZipFile(target) as archive:
        assert archive.read("gpu-finetune-data-1.2.0/server_fit.csv") == files["server_fit.csv"]


def test_two_releases_on_object_storage_keep_the_first_at_its_url(tmp_path, s3_server):  # noqa: F811
    endpoint, s3 = s3_server
    out = tmp_path / "output"

    def publish(version: str, price: str) -> None:
        files = {
            "data/servers.csv": f"server_id,price_rub_month\na,{price}\n".encode(),
            "data/datapackage.json": json.dumps({"version": version, "x_released_on": "2026-12-05"}).encode(),
            "data.html": f"<p>{version}</p>".encode(),
        }
        for name, content in files.items():
            (out / "site" / name).parent.mkdir(parents=True, exist_ok=True)
            (out / "site" / name).write_bytes(content)
        manifest = {name: hashlib.sha256(content).hexdigest() for name, content in files.items()}
        (out / "site" / "manifest.json").write_text(json.dumps({"files": manifest}))
        # Its own prefix: moto's servers in one test process share their buckets.
        publish_s3.publish(out, "s3://site/releases", endpoint_url=endpoint, say=lambda _: None)

    publish("1.0.0", "1000000")
    publish("1.0.1", "1100000")
    stored = objects(s3, "releases/data/")
    assert stored["releases/1.0.0/servers.csv"] == b"server_id,price_rub_month\na,1000000\n"
    assert stored["releases/1.0.1/servers.csv"] == b"server_id,price_rub_month\na,1100000\n"
    assert json.loads(stored["releases/1.0.0/datapackage.json"])["version"] == "1.0.0"
    head = s3.head_object(Bucket="site", Key="releases/data/releases/1.0.0/servers.csv")
    assert (head["ContentType"], head["CacheControl"]) == ("text/csv; charset=utf-8", publish_s3.IMMUTABLE)
    # Each release also as one zip of all its data files, at its stable URL.
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(stored["releases/1.0.0/gpu-finetune-data-1.0.0.zip"])) as archive:
        assert archive.namelist() == ["gpu-finetune-data-1.0.0/datapackage.json", "gpu-finetune-data-1.0.0/servers.csv"]
        assert archive.read("gpu-finetune-data-1.0.0/servers.csv") == b"server_id,price_rub_month\na,1000000\n"
    head = s3.head_object(Bucket="site", Key="releases/data/releases/1.0.1/gpu-finetune-data-1.0.1.zip")
    assert (head["ContentType"], head["CacheControl"]) == ("application/zip", publish_s3.IMMUTABLE)


@pytest.mark.parametrize("path", ["changelog.html", "data.html", "compare/server-fit.html"])
def test_the_changelog_and_the_citations_pass_axe(browser, site_server, path):
    from conftest import serious_axe_violations

    context = browser.new_context(locale="ru-RU")
    try:
        page = context.new_page()
        page.goto(site_server + path)
        assert page.locator("h2:text('Как цитировать')").count() == 1
        assert serious_axe_violations(page) == []
    finally:
        context.close()


def test_release_command_exit_codes(tmp_path, capsys):
    from pipeline.__main__ import main

    sources = tmp_path / "sources"
    citation = tmp_path / "CITATION.cff"
    args = ["release", "--sources", str(sources), "--date", "2026-12-05", "--citation", str(citation)]
    assert main([*args, "--out", str(tmp_path / "no-build"), "--against", str(tmp_path / "none")]) == 3
    assert "build first" in capsys.readouterr().err
    write_build(tmp_path / "v1", BEFORE, None)
    assert main([*args, "--out", str(tmp_path / "v1"), "--against", str(tmp_path / "none")]) == 0
    assert capsys.readouterr().out.startswith("release 1.0.0 (first) of 2026-12-05: 2 change(s) recorded in ")
    assert 'version: "1.0.0"' in citation.read_text(encoding="utf-8").splitlines()
    citation.write_text("stale\n", encoding="utf-8")  # nothing changed since the published 1.0.0: no release,
    write_build(tmp_path / "published", BEFORE, "1.0.0")  # but the citation is written again
    assert main([*args, "--out", str(tmp_path / "v1"), "--against", str(tmp_path / "published")]) == 0
    assert capsys.readouterr().out.startswith("release: nothing changed since ")
    assert 'version: "1.0.0"' in citation.read_text(encoding="utf-8").splitlines()
    write_build(tmp_path / "old", BEFORE, None)  # published before any release: 1.0.0 is not published yet
    write_build(tmp_path / "v2", ONE_PRICE, "1.0.0")
    assert main([*args, "--out", str(tmp_path / "v2"), "--against", str(tmp_path / "old")]) == 2
    assert "release 1.0.0 is recorded but the published build is of no release" in capsys.readouterr().err
    (sources / "releases" / "releases.csv").write_text("version,released_on,change\nv1,2026-12-05,first\n")
    assert main([*args, "--out", str(tmp_path / "v2"), "--against", str(tmp_path / "old")]) == 2
    assert "releases/releases.csv:2" in capsys.readouterr().err


# --- publish warns when the data changed but no release was made ----------------------------------------


def small_build(out, version: str | None, price: str) -> None:
    """A small site as `publish` reads it: one table's CSV, the data package naming it, one page."""
    package = {"resources": [{"name": "servers", "path": "servers.csv"}]}
    package |= {"version": version, "x_released_on": "2026-12-05"} if version else {}
    files = {
        "data/servers.csv": f"server_id,price_rub_month\na,{price}\n".encode(),
        "data/datapackage.json": json.dumps(package).encode(),
        "index.html": b"<p>x</p>",
    }
    for name, content in files.items():
        (out / "site" / name).parent.mkdir(parents=True, exist_ok=True)
        (out / "site" / name).write_bytes(content)
    manifest = {name: hashlib.sha256(content).hexdigest() for name, content in files.items()}
    (out / "site" / "manifest.json").write_text(json.dumps({"files": manifest}))


def test_unreleased_tables_are_the_changed_ones_under_the_published_version(tmp_path):
    small_build(tmp_path, "1.0.0", "1100000")
    local = json.loads((tmp_path / "site" / "manifest.json").read_text())["files"]
    remote = local | {"data/servers.csv": "0" * 64}
    site = tmp_path / "site"
    assert publish_s3.unreleased_tables(site, local, remote, "1.0.0") == ["servers"]
    assert publish_s3.unreleased_tables(site, local, local, "1.0.0") == []  # nothing changed
    assert publish_s3.unreleased_tables(site, local, remote, "0.9.0") == []  # a new release
    assert publish_s3.unreleased_tables(site, local, None, None) == []  # the first publish
    # The release's own record wins over the published site: the site already has the edit, the release not.
    released = {"servers.csv": "0" * 64, "datapackage.json": "1" * 64}
    assert publish_s3.unreleased_tables(site, local, local, "1.0.0", released) == ["servers"]
    released = {"servers.csv": local["data/servers.csv"]}
    assert publish_s3.unreleased_tables(site, local, remote, "1.0.0", released) == []


def test_publish_warns_when_the_data_changed_since_the_release(tmp_path, s3_server, capsys):  # noqa: F811
    from pipeline.__main__ import main

    endpoint, s3 = s3_server
    args = ["publish", "--to", "s3://site/unreleased", "--endpoint-url", endpoint, "--out", str(tmp_path)]
    small_build(tmp_path, "1.0.0", "1000000")
    assert main(args) == 0
    assert "publish:" not in capsys.readouterr().err
    small_build(tmp_path, "1.0.0", "1100000")  # a price edited, built, but not released
    assert main([*args, "--dry-run"]) == 0
    assert capsys.readouterr().err == (
        "publish: предупреждение: данные изменились с выпуска 1.0.0 (таблицы: servers), а нового выпуска нет — "
        "на сайте выйдут другие данные под тем же номером версии, и ссылки на выпуск 1.0.0 в цитатах перестанут "
        "соответствовать данным на страницах (архив выпуска в data/releases/1.0.0/ остаётся прежним). Запишите "
        "выпуск (python -m pipeline release), соберите заново (just build) и опубликуйте снова.\n"
    )
    assert main(args) == 0  # a warning: published all the same
    assert "данные изменились с выпуска 1.0.0" in capsys.readouterr().err
    release_copy = objects(s3, "unreleased/data/releases/1.0.0/")
    assert release_copy["servers.csv"] == b"server_id,price_rub_month\na,1000000\n"  # the release stays as it was
    # Its record: each file's SHA-256 as first published, which every later publish of 1.0.0 is compared with.
    first = hashlib.sha256(b"server_id,price_rub_month\na,1000000\n").hexdigest()
    record = json.loads(release_copy["manifest.json"])
    assert (record["version"], record["files"]["servers.csv"]) == ("1.0.0", first)
    assert sorted(record["files"]) == ["datapackage.json", "servers.csv"]
    assert main(args) == 0  # the site has the edit already, the release not: it still warns
    assert "данные изменились с выпуска 1.0.0 (таблицы: servers)" in capsys.readouterr().err
    # A release's zip lost (an interrupted first publish): never made again from data that are not the release's.
    s3.delete_object(Bucket="site", Key="unreleased/data/releases/1.0.0/gpu-finetune-data-1.0.0.zip")
    assert main(args) == 0
    assert "gpu-finetune-data-1.0.0.zip" not in objects(s3, "unreleased/data/releases/1.0.0/")
    capsys.readouterr()
    small_build(tmp_path, "1.0.1", "1100000")  # released: no warning
    assert main(args) == 0
    assert "publish:" not in capsys.readouterr().err


def test_the_release_zip_is_there_before_the_pages_that_link_it(tmp_path, s3_server, monkeypatch):  # noqa: F811
    endpoint, _ = s3_server
    real_client, written = publish_s3.client, []

    class Recording:
        def __init__(self, s3):
            self.s3 = s3

        def __getattr__(self, name):
            return getattr(self.s3, name)

        def upload_fileobj(self, f, bucket, key, **kwargs):
            written.append(key)
            return self.s3.upload_fileobj(f, bucket, key, **kwargs)

        def put_object(self, **kwargs):
            written.append(kwargs["Key"])
            return self.s3.put_object(**kwargs)

        def copy_object(self, **kwargs):
            written.append(kwargs["Key"])
            return self.s3.copy_object(**kwargs)

    monkeypatch.setattr(publish_s3, "client", lambda url: Recording(real_client(url)))
    small_build(tmp_path, "1.0.0", "1000000")
    publish_s3.publish(tmp_path, "s3://site/order", endpoint_url=endpoint, say=lambda _: None)
    order = [k.removeprefix("order/") for k in written if k != "order/manifest.retained.json"]
    # The data go up several at a time (in any order among themselves), then the release's snapshot, one
    # file after another, then the pages, and the manifest last.
    assert sorted(order[:2]) == ["data/datapackage.json", "data/servers.csv"]
    assert order[2:] == [
        "data/releases/1.0.0/manifest.json",
        "data/releases/1.0.0/datapackage.json",
        "data/releases/1.0.0/servers.csv",
        "data/releases/1.0.0/gpu-finetune-data-1.0.0.zip",
        "index.html",
        "manifest.json",
    ]


# --- the repository's CITATION.cff ------------------------------------------------------------------------


def test_the_repository_citation_is_the_latest_release():
    """CITATION.cff at the repository's root (GitHub's «Cite this repository») names the current release;
    `python -m pipeline release` rewrites it, and this fails when a release was recorded without it."""
    import tomllib

    from pipeline import ROOT, TEMPLATES

    config = tomllib.loads((TEMPLATES / "site.toml").read_text(encoding="utf-8"))
    expected = releases.repository_citation(releases.read_history(SOURCES), config)
    assert (ROOT / "CITATION.cff").read_text(encoding="utf-8") == expected, (
        "CITATION.cff is not the latest release's: python -m pipeline release rewrites it"
    )
    assert f'version: "{releases.read_history(SOURCES).current["version"]}"' in expected.splitlines()


def test_the_data_and_changelog_pages_link_the_release_zip(built):
    current = releases.read_history(SOURCES).current["version"]
    link = f'href="data/releases/{current}/gpu-finetune-data-{current}.zip" download'
    keep = releases.retention()
    for page in ("data.html", "changelog.html"):
        html = (built / "site" / page).read_text(encoding="utf-8")
        assert link in html
        said = f"из последних {keep.releases} и каждый выпуск — не меньше {keep.days} дней после публикации"
        assert said in html.replace("\u00a0", " "), page  # the retention site.toml declares


def test_every_table_links_to_its_citation(built):
    """Under every table of every page, after its downloads: «Как цитировать», the table's section of the
    data page, which holds its citation (the version and the date)."""
    import re

    site = built / "site"
    data_page = (site / "data.html").read_text(encoding="utf-8")
    captions = 0
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        for figure in re.findall(r'<figure class="data-table">.*?</figure>', html, flags=re.S):
            caption = re.search(r'<p class="source" data-pagefind-ignore="">.*?</p>', figure, flags=re.S).group(0)
            captions += 1
            first = re.search(r'data/([a-z_0-9]+)\.csv"', caption).group(1)
            assert re.search(rf'href="(\.\./)*data\.html#{first}">Как\s+цитировать</a>\.</p>$', caption), page
            section = data_page.split(f'<section id="{first}">', 1)[1].split("</section>", 1)[0]
            assert "Как цитировать" in section
    assert captions > 300


def test_a_derived_download_duckdb_cannot_read_is_exit_3_not_a_bug(tmp_path, capsys):
    """A derived table's CSV with a row of another width (counted by DuckDB, not read in Python): `release`
    cannot read the builds (exit 3, one line), and `--check-unreleased` says nothing (publish goes on)."""
    from pipeline.__main__ import main

    write_build(tmp_path / "published", BEFORE, "1.0.0")
    write_build(tmp_path / "output", ONE_PRICE, "1.0.0")
    fit = tmp_path / "output" / "site" / "data" / "server_fit.csv"
    fit.write_text(fit.read_text(encoding="utf-8-sig") + "m9,a\n", encoding="utf-8")
    sources = tmp_path / "sources"
    sources.mkdir()
    args = ["release", "--sources", str(sources), "--citation", str(tmp_path / "CITATION.cff")]
    args += ["--out", str(tmp_path / "output"), "--against", str(tmp_path / "published"), "--date", "2026-12-05"]
    (sources / "releases").mkdir()
    (sources / "releases" / "releases.csv").write_text("version,released_on,change\n1.0.0,2026-12-01,first\n")
    assert main(args) == 3
    err = capsys.readouterr().err
    assert err.startswith("release: cannot read the builds: ") and "Traceback" not in err
    assert main([*args, "--check-unreleased"]) == 0
    assert capsys.readouterr().err == ""
