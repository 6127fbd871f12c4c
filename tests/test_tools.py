"""The downloads in the analysts' real tools, the install, the command line, and the publish to S3.

DuckDB 1.0.0 opens the database file (a throwaway venv), `frictionless validate` passes the
Data Package and reports a broken foreign key, LibreOffice under a Russian profile reads the XLSX
numbers as numbers (and the CSV only with an English import language, as the data page says), the
package installs without the checkout's templates, and `publish --to s3://` is run against moto's
S3 server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from conftest import IN_CI, ROOT
from pipeline.__main__ import EXIT_USAGE, main
from pipeline.publish.downloads import DATABASE_OLDEST_READER
from pipeline.schema import ALL_TABLES, TABLES_BY_NAME

UV = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))


def run_cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "GX_ANALYTICS_ENABLED": "False", **kwargs.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args], capture_output=True, text=True, cwd=ROOT, env=env, **kwargs
    )


# --- DuckDB ----------------------------------------------------------------------------------------


def registry_reachable() -> bool:
    try:
        with socket.create_connection(("pypi.org", 443), timeout=5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def duckdb1(tmp_path_factory) -> Path:
    """A Python with the oldest DuckDB the docs promise (1.0.0: the clients R, JDBC and DBeaver lag behind
    the Python package); bench/duckdb_readers.py opens the file with the newest one too."""
    venv = tmp_path_factory.mktemp("duckdb1") / "venv"
    if UV:
        made = subprocess.run([UV, "venv", "-q", str(venv)], capture_output=True, text=True)
        install = [
            UV,
            "pip",
            "install",
            "-q",
            "--python",
            str(venv / "bin" / "python"),
            f"duckdb=={DATABASE_OLDEST_READER}",
        ]
    else:
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
        install = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"duckdb=={DATABASE_OLDEST_READER}"]
    assert made.returncode == 0, made.stderr
    done = subprocess.run(install, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        if not registry_reachable():
            pytest.skip(
                "the package registry is unreachable: cannot install the oldest DuckDB to open the file with it"
            )
        raise AssertionError(done.stderr)
    return venv / "bin" / "python"


@pytest.mark.ci_tools  # its own CI step (.ci/run), beside the suite: it installs DuckDB 1.x into a venv
def test_duckdb_1x_opens_the_database_with_its_comments(built, duckdb1):
    script = """
import json, sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
tables = {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for (n,) in con.execute("SHOW TABLES").fetchall()}
comment = con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'gpus'").fetchone()[0]
print(json.dumps({"version": duckdb.__version__, "tables": tables, "comment": comment}))
"""
    database = built / "site" / "data" / "gpu-finetune.duckdb"
    done = subprocess.run([str(duckdb1), "-c", script, str(database)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["version"] == DATABASE_OLDEST_READER
    manifest = {
        t.name: json.loads((built / "site" / "data" / f"{t.name}.metadata.json").read_text()) for t in ALL_TABLES
    }
    assert seen["tables"] == {name: m["row_count"] for name, m in manifest.items()}
    gpus = TABLES_BY_NAME["gpus"]
    assert seen["comment"] == f"{gpus.title_ru}. {gpus.description_ru}"


# --- Frictionless Data Package, licence, the data page --------------------------------------------------


def test_datapackage_validates_and_reports_a_broken_foreign_key(built, tmp_path):
    from frictionless import Package

    data = built / "site" / "data"
    package = json.loads((data / "datapackage.json").read_text(encoding="utf-8"))
    assert [r["name"] for r in package["resources"]] == [t.name for t in ALL_TABLES]
    assert package["title"] == "Память GPU для дообучения языковых моделей: данные справочника"  # site.toml
    servers = next(r for r in package["resources"] if r["name"] == "servers")
    assert servers["schema"]["primaryKey"] == ["server_id"]
    assert {"fields": "gpu_id", "reference": {"resource": "gpus", "fields": "gpu_id"}} in servers["schema"][
        "foreignKeys"
    ]
    price = next(f for f in servers["schema"]["fields"] if f["name"] == "price_rub_month")
    assert price["type"] == "integer" and price["unit"] == TABLES_BY_NAME["servers"].field("price_rub_month").unit_label
    assert package["licenses"] == [
        {
            "name": "CC-BY-4.0",
            "title": "Creative Commons Attribution 4.0 International",
            "path": "https://creativecommons.org/licenses/by/4.0/",
        }
    ]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "frictionless"), "validate", "--json", "datapackage.json"],
        capture_output=True,
        text=True,
        cwd=data,
    )
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["valid"], done.stdout[:2000]
    assert len(report["tasks"]) == len(ALL_TABLES)

    # The same package over a servers.csv whose GPU is not in gpus.csv: the foreign key is reported.
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    text = (copy / "servers.csv").read_text(encoding="utf-8-sig").splitlines()
    first = text[1].split(",")
    gpu_column = text[0].split(",").index("gpu_id")
    first[gpu_column] = "h999"
    text[1] = ",".join(first)
    (copy / "servers.csv").write_text("\ufeff" + "\n".join(text) + "\n", encoding="utf-8")
    report = Package(str(copy / "datapackage.json")).validate()
    assert not report.valid
    errors = [e for task in report.tasks for e in task.errors]
    assert [e.type for e in errors] == ["foreign-key"]


def test_typed_loading_as_the_data_page_says(built):
    import pandas as pd
    from frictionless import Package

    data = built / "site" / "data"
    models = pd.read_csv(data / "models.csv", dtype_backend="numpy_nullable")
    table = TABLES_BY_NAME["models"]
    for field in table.fields:
        kind = str(models[field.name].dtype)
        expected = {"int": "Int64", "float": "Float64", "bool": "boolean"}.get(field.type)
        if expected:
            assert kind == expected or (expected == "Float64" and kind == "Int64"), (field.name, kind)
    servers = Package(str(data / "datapackage.json")).get_resource("servers").to_pandas()
    assert str(servers["price_rub_month"].dtype) == "Int64"
    assert str(servers["price_checked_on"].dtype).startswith("datetime64")


def test_licence_in_every_sidecar_and_on_the_data_page(built):
    from pipeline.publish.datapackage import data_licence

    licence = data_licence()
    for table in ALL_TABLES:
        meta = json.loads((built / "site" / "data" / f"{table.name}.metadata.json").read_text(encoding="utf-8"))
        assert meta["licence"] == {"id": licence["id"], "title": licence["title"], "url": licence["url"]}
    page = (built / "site" / "data.html").read_text(encoding="utf-8")
    assert f'<a href="{licence["url"]}" rel="license">{licence["title_ru"]}</a>' in page.replace("\xa0", " ")  # typeset
    assert "Открывается в Excel с русской локалью" not in page
    assert (
        '<td class="prose" data-label="Файл"><strong>XLSX</strong></td>' in page
        and 'href="data/datapackage.json"' in page
    )
    assert "MIT License" in (ROOT / "LICENSE").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("calculator_opens_with", ["nope", "lora"], [("nope", "rules.config_no_model")]),
        ("calculator_opens_with", ["m", "nope"], [("nope", "rules.config_no_method")]),
        ("calculator_opens_with", ["nope", "x"], [("nope", "rules.config_no_model"), ("x", "rules.config_no_method")]),
        ("calculator_opens_with", "m", [("m", "rules.config_job")]),
        ("calculator_opens_with", ["m"], [(["m"], "rules.config_job")]),
        ("calculator_opens_with", ["m", 1], [(["m", 1], "rules.config_job")]),
        ("calculator_opens_with", None, [(None, "rules.config_job")]),  # the key is missing
        ("compare_tasks", [["m", "lora"], ["m"]], [(["m"], "rules.config_job")]),
        ("compare_tasks", [["m", "nope"]], [("nope", "rules.config_no_method")]),
        ("compare_tasks", "m", [("m", "rules.config_jobs")]),
        ("index_methods", "lora", [("lora", "rules.config_ids")]),
        ("index_methods", ["lora", "nope"], [("nope", "rules.config_no_method")]),
        ("gpu_card_counts", [1, 0], [([1, 0], "rules.config_counts")]),
        ("gpu_card_counts", [], [([], "rules.config_counts")]),
        ("gpu_card_counts", ["8"], [(["8"], "rules.config_counts")]),
    ],
)
def test_site_settings_that_name_the_catalog_are_checked(key, value, expected):
    """site.toml's settings of ids and counts: each wrong one is reported by key and value, every
    problem at once (a typo in calculator_opens_with or a task of one id stopped the build with a
    traceback)."""
    from pipeline.messages import message
    from pipeline.render.views.entities import config_problems

    class Tables:
        c = {"methods": {"method_id": ["lora"]}, "models": {"model_id": ["m"]}}

    site = {"index_methods": ["lora"], "compare_tasks": [["m", "lora"]], "table_page_rows": 100}
    site |= {"calculator_opens_with": ["m", "lora"], "gpu_card_counts": [1, 2, 4, 8]}
    site["data_licence"] = {"id": "CC0-1.0", "title": "CC0", "title_ru": "CC0", "url": "https://example.org/"}
    site["data_package"] = {"title": "Данные", "description": "Таблицы"}
    site["releases"] = {"kept_releases": 12, "kept_days": 366}
    assert config_problems(Tables(), site) == []
    if value is None:
        del site[key]
    else:
        site[key] = value
    problems = config_problems(Tables(), site)
    assert [(p.file, p.column, p.value, p.rule) for p in problems] == [
        ("site_templates/site.toml", key, found, message(rule)) for found, rule in expected
    ]


def test_a_licence_without_its_fields_stops_the_build_with_a_report(tmp_path):
    from pipeline.render.views.entities import config_problems

    class Tables:
        c = {"methods": {"method_id": ["lora"]}, "models": {"model_id": ["m"]}}

    site = {"index_methods": [], "compare_tasks": [], "table_page_rows": 100, "data_licence": {"id": "CC0-1.0"}}
    site["calculator_opens_with"], site["gpu_card_counts"] = ["m", "lora"], [1, 2]
    site["data_package"] = {"title": "Данные", "description": "  "}
    site["releases"] = {"kept_releases": 12, "kept_days": 366}
    problems = config_problems(Tables(), site)
    assert [(p.column, p.value) for p in problems] == [
        ("data_licence.title", None),
        ("data_licence.title_ru", None),
        ("data_licence.url", None),
        ("data_package.description", "  "),
    ]


# --- LibreOffice under a Russian profile -------------------------------------------------------------------

SOFFICE = shutil.which("soffice") or shutil.which("libreoffice")
NS = {
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
}
RUSSIAN_PROFILE = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema">
<item oor:path="/org.openoffice.Setup/L10N"><prop oor:name="ooLocale" oor:op="fuse"><value>ru-RU</value></prop></item>
<item oor:path="/org.openoffice.Setup/L10N"><prop oor:name="ooSetupSystemLocale" oor:op="fuse"><value>ru-RU</value></prop></item>
<item oor:path="/org.openoffice.Office.Linguistic/General"><prop oor:name="DefaultLocale" oor:op="fuse"><value>ru-RU</value></prop></item>
</oor:items>
"""


def sheet_cells(path: Path) -> list[list[tuple[str | None, str]]]:
    """The first sheet of a flat ODS file: per row, each cell's (value type, value)."""
    sheet = ET.parse(path).getroot().find(".//table:table", NS)
    rows = []
    for row in sheet.iter(f"{{{NS['table']}}}table-row"):
        cells = []
        for cell in row:
            repeated = min(int(cell.get(f"{{{NS['table']}}}number-columns-repeated", "1")), 100)
            kind = cell.get(f"{{{NS['office']}}}value-type")
            value = cell.get(f"{{{NS['office']}}}value") or "".join(t.strip() for t in cell.itertext())
            cells += [(kind, value)] * repeated
        rows.append(cells)
    return rows


def convert(files: list[Path], out: Path, profile: Path, infilter: str | None = None) -> None:
    command = [SOFFICE, f"-env:UserInstallation={profile.as_uri()}", "--headless", "--norestore"]
    command += [f"--infilter={infilter}"] if infilter else []
    command += ["--convert-to", "fods", "--outdir", str(out), *map(str, files)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=600, env={**os.environ, "LANG": "ru_RU.UTF-8"}
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="session")
def libreoffice_ru(tmp_path_factory):
    if SOFFICE is None:
        if IN_CI:
            pytest.fail("LibreOffice is mandatory in CI: .ci/run installs libreoffice-calc-nogui")
        pytest.skip(
            "LibreOffice is not installed (apt-get install libreoffice-calc-nogui): cannot open the downloads in it"
        )
    profile = tmp_path_factory.mktemp("lo-profile")
    (profile / "user").mkdir()
    (profile / "user" / "registrymodifications.xcu").write_text(RUSSIAN_PROFILE, encoding="utf-8")
    return profile


NUMERIC = ("int", "float")


@pytest.mark.ci_tools  # its own CI step (.ci/run), beside the suite: LibreOffice takes tens of seconds
def test_libreoffice_russian_reads_xlsx_numbers_as_numbers_and_csv_only_with_an_english_import(
    built, libreoffice_ru, tmp_path
):
    data = built / "site" / "data"
    # The tables with dot-decimal numbers in their CSV (the case a Russian profile gets wrong), and every XLSX.
    tables = [t for t in ALL_TABLES if (data / f"{t.name}.xlsx").exists()]
    convert([data / f"{t.name}.xlsx" for t in tables], tmp_path / "xlsx", libreoffice_ru)
    convert([data / f"{t.name}.csv" for t in tables], tmp_path / "csv-ru", libreoffice_ru, "CSV:44,34,76,1")
    convert([data / f"{t.name}.csv" for t in tables], tmp_path / "csv-en", libreoffice_ru, "CSV:44,34,76,1,,1033")
    dot_decimals_as_text = 0
    for table in tables:
        xlsx = sheet_cells(tmp_path / "xlsx" / f"{table.name}.fods")
        csv_ru = sheet_cells(tmp_path / "csv-ru" / f"{table.name}.fods")
        csv_en = sheet_cells(tmp_path / "csv-en" / f"{table.name}.fods")
        assert [v for _, v in xlsx[0][: len(table.fields)]] == [f.label_ru or f.name for f in table.fields]
        for i, field in enumerate(table.fields):
            if field.type not in NUMERIC:
                continue
            for r in range(1, len(csv_en)):
                raw = csv_ru[r][i][1] if i < len(csv_ru[r]) else ""
                if not raw:
                    continue  # an empty cell: no value
                got = xlsx[r][i]
                assert got[0] in ("float", "currency", "percentage"), (table.name, field.name, r, got)
                assert csv_en[r][i][0] == "float", (table.name, field.name, r, csv_en[r][i])
                assert float(got[1]) == pytest.approx(float(csv_en[r][i][1]), rel=1e-12)
                if "." in raw:
                    dot_decimals_as_text += csv_ru[r][i][0] == "string"
    # What the data page warns about: a Russian import turns dot decimals into text.
    assert dot_decimals_as_text > 0


# --- the command line and the install ----------------------------------------------------------------------


def test_version_usage_errors_and_exit_codes_in_every_help(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("python -m pipeline ")
    for args in (["build", "--sorces", "x"], ["nope"], ["serve", "--port", "many"], ["publish"]):
        with pytest.raises(SystemExit) as done:
            main(args)
        assert done.value.code == EXIT_USAGE, args
    capsys.readouterr()
    for command in ("build", "check", "serve", "diff", "estimate", "publish", "release"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert "exit codes:" in text and "\n  64 " in text, command
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = capsys.readouterr().out
    assert "--bind ADDRESS" in text and "--base-url" in text


def test_a_wheel_holds_the_templates_and_the_command(tmp_path):
    """What a non-editable install (pip install ., pipx, uv tool install) gets: built from a copy of the checkout."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("pipeline", "site_templates"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    build = "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", build, str(tmp_path)], capture_output=True, text=True, cwd=source)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {p.relative_to(ROOT).as_posix() for p in (ROOT / "site_templates").rglob("*") if p.is_file()}
    assert templates <= names, sorted(templates - names)
    assert "pipeline/__main__.py" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "gpu-reference = pipeline.__main__:cli" in zipfile.ZipFile(wheel).read(entry).decode()
    assert any(n.endswith("licenses/LICENSE") for n in names)


def test_serve_binds_the_address_it_is_given(tmp_path, built):
    from pipeline.tools.serve import EditorLoop

    out = tmp_path / "output"
    shutil.copytree(built, out, symlinks=True)
    loop = EditorLoop(ROOT / "sources", out, 0, "/", quiet=True, bind="0.0.0.0")
    try:
        assert loop.server.server_address[0] == "0.0.0.0"
        assert loop.url.startswith("http://127.0.0.1:")
    finally:
        loop.server.server_close()


# --- publish to S3 -----------------------------------------------------------------------------------------


@pytest.fixture
def s3_server(monkeypatch):
    """moto's S3 server on 127.0.0.1 (a free port) with a bucket `site`; yields (endpoint URL, client)."""
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    import boto3

    endpoint = f"http://127.0.0.1:{port}"
    s3 = boto3.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket="site")
    try:
        yield endpoint, s3
    finally:
        server.stop()


def objects(s3, prefix: str) -> dict[str, bytes]:
    keys = [
        o["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="site", Prefix=prefix)
        for o in page.get("Contents", [])
    ]
    return {k.removeprefix(prefix): s3.get_object(Bucket="site", Key=k)["Body"].read() for k in keys}


def etags(s3, prefix: str) -> dict[str, str]:
    """Every stored object's ETag (the MD5 of its bytes, for one not uploaded in parts), from the listing
    alone: reading each object back through moto is most of what a test of a whole site would cost."""
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket="site", Prefix=prefix)
    return {o["Key"].removeprefix(prefix): o["ETag"].strip('"') for page in pages for o in page.get("Contents", [])}


def stored_as_built(s3, prefix: str, site: Path, names) -> None:
    """Each of `names` is stored under `prefix` byte for byte as in `site` (by MD5; a multipart upload's
    ETag is not one, so such an object is read back)."""
    import hashlib

    stored = etags(s3, prefix)
    for name in names:
        local = (site / name).read_bytes()
        if "-" in stored[name]:
            assert s3.get_object(Bucket="site", Key=prefix + name)["Body"].read() == local, name
        else:
            assert stored[name] == hashlib.md5(local).hexdigest(), name  # noqa: S324 (S3's ETag)


def test_publish_to_s3_uploads_what_changed_deletes_what_it_published_and_lists_urls_to_purge(
    built, tmp_path, s3_server, capsys
):
    endpoint, s3 = s3_server
    out = tmp_path / "output"
    shutil.copytree(built, out, symlinks=True)
    site = out / "site"
    manifest = json.loads((site / "manifest.json").read_text())["files"]
    args = ["publish", "--to", "s3://site/gpu/", "--out", str(out), "--endpoint-url", endpoint]
    args += ["--base-url", "https://example.org/gpu/"]

    s3.put_object(Bucket="site", Key="gpu/someone-elses.txt", Body=b"not ours")
    assert main(args) == 0
    first = capsys.readouterr().out
    assert f"published: {len(manifest)} uploaded, 0 deleted; 0 URL(s) to purge:" in first
    published = etags(s3, "gpu/")
    releases = {k for k in published if k.startswith("data/releases/")}  # tests/test_releases.py
    assert releases and all(k.startswith("data/releases/1.") for k in releases)
    published = {k: v for k, v in published.items() if k not in releases}
    assert set(published) == set(manifest) | {"manifest.json", "manifest.retained.json", "someone-elses.txt"}
    stored_as_built(s3, "gpu/", site, [*manifest, "manifest.json"])  # every file, byte for byte

    def head(name):
        meta = s3.head_object(Bucket="site", Key=f"gpu/{name}")
        return meta["ContentType"], meta["CacheControl"]

    css = next(n for n in manifest if n.startswith("style.") and n.endswith(".css"))
    assert head(css) == ("text/css; charset=utf-8", "public, max-age=31536000, immutable")
    assert head("index.html") == ("text/html; charset=utf-8", "public, max-age=300, must-revalidate")
    assert head("data/gpus.csv") == ("text/csv; charset=utf-8", "public, max-age=300, must-revalidate")
    assert head("data/gpus.xlsx")[0] == "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    assert head("manifest.json") == ("application/json", "no-cache")

    # Nothing changed: only the manifest goes up again.
    assert main(args) == 0
    assert "published: 0 uploaded, 0 deleted; 0 URL(s) to purge:" in capsys.readouterr().out

    # A rebuild that changed a page and the style, removed a page and added a data file.
    import hashlib

    def put(name: str, content: bytes) -> None:
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(content)
        manifest[name] = hashlib.sha256(content).hexdigest()

    put("gpus/index.html", b"<!doctype html><title>new</title>")
    (site / css).unlink()
    del manifest[css]
    put("style.0123456789.css", b"body{}")
    (site / "sources.html").unlink()
    del manifest["sources.html"]
    put("data/new_table.csv", b"a\n1\n")
    (site / "manifest.json").write_text(json.dumps({"files": manifest}))

    from pipeline.tools import publish_s3

    first_manifest = s3.get_object(Bucket="site", Key="gpu/manifest.json")["Body"].read()
    todo = publish_s3.plan(manifest, json.loads(first_manifest)["files"])
    assert todo.upload == ["data/new_table.csv", "style.0123456789.css", "gpus/index.html", "manifest.json"]
    assert todo.delete == sorted([css, "sources.html"])
    assert main(args) == 0
    report = capsys.readouterr().out.splitlines()
    assert report[-7:] == [  # the old style stays for pages a CDN still caches (test_publish_retention.py)
        "published: 3 uploaded, 1 deleted; 3 URL(s) to purge:",
        "https://example.org/gpu/gpus/index.html",
        "https://example.org/gpu/gpus/",
        "https://example.org/gpu/sources.html",
        "kept, not purged: 1 file(s) of an earlier release that cached pages may still load;",
        "deleted by the first publish at least one release and 7 days after they left the site:",
        f"  {css}",
    ]
    # The release's copy stays as its record lists it: a file added since is not put into it.
    stored = etags(s3, "gpu/data/releases/")
    assert stored and not any(k.endswith("/new_table.csv") for k in stored)
    now = {k for k in etags(s3, "gpu/") if not k.startswith("data/releases/")}
    assert now == set(manifest) | {"manifest.json", "manifest.retained.json", "someone-elses.txt", css}
    stored_as_built(s3, "gpu/", site, ["gpus/index.html", "style.0123456789.css", "data/new_table.csv"])
    assert objects(s3, "gpu/someone-elses.txt") == {"": b"not ours"}  # never published by us: never deleted


def test_publish_refuses_a_bad_target_and_reports_an_unreachable_storage(built, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    bad = run_cli("publish", "--to", "https://example.org/", "--out", str(built))
    assert bad.returncode == 2 and "expected s3://bucket" in bad.stderr and "Traceback" not in bad.stderr
    missing = run_cli("publish", "--to", "s3://site", "--out", str(tmp_path / "nothing"))
    assert missing.returncode == 2 and "build first" in missing.stderr
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there
    down = run_cli(
        "publish",
        "--to",
        "s3://site",
        "--out",
        str(built),
        "--endpoint-url",
        f"http://127.0.0.1:{port}",
        env={"AWS_MAX_ATTEMPTS": "1"},
    )
    assert down.returncode == 3 and "Traceback" not in down.stderr, down.stderr
    assert down.stderr.startswith("publish: s3://site: ")


# --- search ------------------------------------------------------------------------------------------------


def test_search_index_is_built_and_listed_in_the_manifest(built):
    site = built / "site"
    manifest = json.loads((site / "manifest.json").read_text())["files"]
    index = sorted(n for n in manifest if n.startswith("pagefind/"))
    assert "pagefind/pagefind.js" in index and "pagefind/pagefind-entry.json" in index
    assert any(n.endswith(".pf_fragment") for n in index) and any(n.endswith(".pf_meta") for n in index)
    assert not any("pagefind-ui" in n for n in index)  # the ready-made UIs are not published
    entry = json.loads((site / "pagefind" / "pagefind-entry.json").read_text())
    assert list(entry["languages"]) == ["ru"]
    page = (site / "gpus" / "index.html").read_text(encoding="utf-8")
    assert '<form class="site-search" role="search" action="../search.html" method="get">' in page
    assert '<main id="main" data-pagefind-body>' in page


def test_search_finds_a_gpu_a_model_and_a_server_by_name_and_works_without_javascript(browser, site_server):

    page = browser.new_page()
    try:
        page.goto(site_server + "gpus/index.html")
        page.fill("#site-search-q", "H100")
        page.press("#site-search-q", "Enter")
        page.wait_for_url("**/search.html?q=H100")
        page.wait_for_selector("#search-results li a", timeout=30_000)
        links = page.eval_on_selector_all("#search-results li a", "els => els.map(e => e.getAttribute('href'))")
        assert any(link.startswith(site_server + "gpus/h100") for link in links), links
        assert page.text_content("#search-status").startswith("По запросу «H100» найден")
        assert page.input_value("#search-q") == "H100"
        page.goto(site_server + "search.html?q=" + "Llama 3.1 8B")
        page.wait_for_selector("#search-results li a", timeout=30_000)
        links = page.eval_on_selector_all("#search-results li a", "els => els.map(e => e.getAttribute('href'))")
        assert site_server + "models/llama-3-1-8b.html" in links, links
        page.goto(site_server + "search.html?q=zzzqqq")
        page.wait_for_function("document.getElementById('search-status').textContent.includes('ничего не нашлось')")
    finally:
        page.close()
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(site_server + "methods/index.html")
        page.fill("#site-search-q", "H100")
        page.press("#site-search-q", "Enter")
        page.wait_for_url("**/search.html?q=H100")
        hrefs = page.eval_on_selector_all("main a", "els => els.map(e => e.getAttribute('href'))")
        for index in ("models/index.html", "methods/index.html", "gpus/index.html", "servers/index.html"):
            assert index in hrefs
    finally:
        context.close()


def test_browser_tests_are_marked_and_skipped_with_the_reason_outside_ci():
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["CHROMIUM"] = "/nonexistent/chromium"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "tests/test_browser.py"]
    skipped = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert skipped.returncode == 0, skipped.stdout[-2000:]
    assert "browser test skipped: $CHROMIUM=/nonexistent/chromium does not exist" in skipped.stdout
    assert " passed" not in skipped.stdout and " skipped" in skipped.stdout.splitlines()[-1]
    deselected = subprocess.run([*command, "-m", "not browser"], capture_output=True, text=True, cwd=ROOT, env=env)
    assert deselected.returncode == 5  # every test there is deselected: none ran


class _Store:
    """upload_fileobj as a store's client has it, noting when each upload began and ended; the first
    `together` uploads wait for each other (a barrier), so they pass only when sent at once."""

    def __init__(self, together: int = 0, failing: str | None = None) -> None:
        import threading

        self.events: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.barrier = threading.Barrier(together, timeout=10) if together else None
        self.waited, self.together, self.failing = 0, together, failing

    def note(self, what: str, name: str) -> None:
        with self.lock:
            self.events.append((what, name))

    def upload_fileobj(self, f, bucket, key, ExtraArgs):  # noqa: N803 (boto3's name)
        name = key.removeprefix("gpu/")
        assert bucket == "site" and f.read() == name.encode() and ExtraArgs["ContentType"]
        self.note("begin", name)
        with self.lock:
            wait, self.waited = self.waited < self.together, self.waited + 1
        if wait:
            self.barrier.wait()
        if name == self.failing:
            raise OSError(f"refused {name}")
        self.note("end", name)


def _site(tmp_path, names):
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(name.encode())
    return tmp_path


def test_publish_uploads_a_kind_several_at_once_and_the_next_kind_only_after_it(tmp_path):
    from pipeline.tools import publish_s3

    data = [f"data/t{i}.csv" for i in range(12)] + ["style.0123456789.css"]
    pages = [f"models/m{i}.html" for i in range(12)] + ["index.html"]
    todo = publish_s3.plan({n: "x" for n in data + pages}, None)
    store = _Store(together=publish_s3.UPLOAD_THREADS)  # the first eight wait for each other
    site = _site(tmp_path, todo.upload)

    made = publish_s3.upload_in_order(store, "site", "gpu/", site, todo.upload, lambda: store.note("snapshot", ""))
    assert made is None
    order = [what for what, _ in store.events]
    assert sorted(name for what, name in store.events if what == "end") == sorted(todo.upload)
    snapshot = order.index("snapshot")
    firsts = {name: store.events.index(("begin", name)) for name in todo.upload}
    lasts = {name: store.events.index(("end", name)) for name in todo.upload}
    assert max(lasts[n] for n in data) < snapshot < min(firsts[n] for n in pages)  # data, the release, pages
    assert max(lasts[n] for n in pages) < firsts["manifest.json"] == len(store.events) - 2  # the manifest last


def test_publish_sends_nothing_of_a_later_kind_after_a_failed_upload(tmp_path):
    from pipeline.tools import publish_s3

    todo = publish_s3.plan({"data/a.csv": "x", "data/b.csv": "x", "index.html": "x"}, None)
    store = _Store(failing="data/b.csv")
    site = _site(tmp_path, todo.upload)
    with pytest.raises(OSError, match="refused data/b.csv"):
        publish_s3.upload_in_order(store, "site", "gpu/", site, todo.upload, lambda: store.note("snapshot", ""))
    assert {name for _, name in store.events} == {"data/a.csv", "data/b.csv"}  # no snapshot, page or manifest
