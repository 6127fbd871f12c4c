"""`python -m pipeline diff`: what a build changes against the published one, in the editor's terms."""

import json
import os
import shutil
import subprocess
import sys

import polars as pl
import pytest

from conftest import ROOT, SOURCES, edit_csv
from pipeline.__main__ import main
from pipeline.build import build
from pipeline.tools.diff import diff, format_text

NBSP = "\u00a0"  # the group separator of Russian numbers, as on the site

# The published build had one more GPU and a server with it; this build drops both,
# changes a price and adds a model.
EXTRA_GPU = "mi355x,AMD Instinct MI355X,MI355X,AMD,288,8000,2300,4600,,infinity-fabric,1075,oam,,amd-mi325x\n"
EXTRA_SERVER = "mi355x-8x,8 × MI355X,AMD MI355X 8-GPU,mi355x,8,infinity-fabric,4100000,2026-10-12,,,,catalog\n"
NEW_MODEL = "phi-4-mini,Phi-4 Mini (3.8B),Phi-4 Mini,Phi,named,3.84,,MIT,hf-phi-4" + "," * 23 + "\n"


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """(published output, new output): two builds of edited copies of sources/."""
    root = tmp_path_factory.mktemp("diff")
    old_sources, new_sources = root / "old-sources", root / "new-sources"
    shutil.copytree(SOURCES, old_sources)
    shutil.copytree(SOURCES, new_sources)
    with (old_sources / "gpus.csv").open("a", encoding="utf-8") as f:
        f.write(EXTRA_GPU)
    with (old_sources / "servers.csv").open("a", encoding="utf-8") as f:
        f.write(EXTRA_SERVER)
    edit_csv(new_sources / "servers.csv", ",8,pcie,2373300,", ",8,pcie,2450000,")
    with (new_sources / "models.csv").open("a", encoding="utf-8") as f:
        f.write(NEW_MODEL)
    build(old_sources, root / "published")
    build(new_sources, root / "output")
    return root / "published", root / "output"


def test_changed_values_by_entity(builds):
    published, output = builds
    report = diff(output, published)
    price = f"Цена 8 × H100 80GB (ESC8000A): 2{NBSP}373{NBSP}300 → 2{NBSP}450{NBSP}000 ₽/мес"
    assert [v["text"] for v in report["values"]] == [price]
    assert report["values"][0] | {"text": ""} == {
        "table": "servers",
        "key": ["esc8000a-8x-h100"],
        "column": "price_rub_month",
        "old": "2373300",
        "new": "2450000",
        "text": "",
    }


def test_added_and_removed_entities(builds):
    published, output = builds
    report = diff(output, published)
    assert [a["text"] for a in report["added"]] == ["Модель: Phi-4 Mini (3.8B) (phi-4-mini)"]
    assert [r["text"] for r in report["removed"]] == [
        "Видеокарта: AMD Instinct MI355X (mi355x)",
        "Сервер: 8 × MI355X (mi355x-8x)",
    ]


def test_derived_tables_are_summarised(builds):
    published, output = builds
    derived = {d["table"]: d for d in diff(output, published)["derived"]}
    # A new model and a removed GPU. The removed GPU's server leaves server_memory. The new price of the
    # 8 x H100 server leaves the pretraining table as it was: its H100 runs span many such servers with no
    # declared network between them, so they have no total price (issue 35).
    assert set(derived) == {
        "estimates",
        "gpu_fit",
        "server_fit",
        "memory_breakdown",
        "recommendations",
        "server_memory",
    }
    assert derived["server_memory"]["removed"] == 1
    assert derived["recommendations"]["added"] > 0  # the new model gets its rows
    assert derived["estimates"]["added"] > 0 and derived["estimates"]["removed"] == 0
    assert derived["gpu_fit"]["removed"] > 0  # the GPU's rows
    assert derived["server_fit"]["columns"] == ["price_rub_month"]


def test_changed_pages_and_downloads(builds):
    published, output = builds
    report = diff(output, published)
    assert "servers/esc8000a-8x-h100.html" in report["pages"]["changed"]
    assert "servers/index.html" in report["pages"]["changed"]
    assert report["pages"]["added"] == ["models/phi-4-mini.html"]
    assert report["pages"]["removed"] == ["gpus/mi355x.html", "servers/mi355x-8x.html"]
    downloads = report["downloads"]["changed"]
    for name in ("servers", "models", "gpus", "server_fit", "gpu_fit", "estimates"):
        assert f"data/{name}.csv" in downloads
    assert "data/methods.csv" not in downloads and "data/references.csv" not in downloads
    assert "data/gpu-finetune.duckdb" in downloads  # compared by its tables, not its bytes


def test_text_report_for_editors(builds):
    published, output = builds
    lines = format_text(diff(output, published)).splitlines()
    assert lines[0] == f"Изменения сборки {output} по сравнению с {published}"
    assert "Изменённые значения (1):" in lines
    assert f"  Цена 8 × H100 80GB (ESC8000A): 2{NBSP}373{NBSP}300 → 2{NBSP}450{NBSP}000 ₽/мес" in lines
    assert "Добавлено (1):" in lines and "  Модель: Phi-4 Mini (3.8B) (phi-4-mini)" in lines
    assert "  Сервер: 8 × MI355X (mi355x-8x)" in lines
    assert "  servers/esc8000a-8x-h100.html" in lines
    assert "  models/phi-4-mini.html (новый)" in lines
    assert "  gpus/mi355x.html (удалён)" in lines


def test_exit_codes(builds, tmp_path, capsys):
    published, output = builds
    assert main(["diff", "--out", str(output), "--against", str(published)]) == 4
    assert "Цена 8 × H100 80GB (ESC8000A)" in capsys.readouterr().out
    assert main(["diff", "--out", str(output), "--against", str(output)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "Изменений нет."
    assert main(["diff", "--out", str(output), "--against", str(tmp_path / "missing")]) == 3
    assert "missing/site" in capsys.readouterr().err
    (tmp_path / "not-a-build" / "site").mkdir(parents=True)  # a folder with site/ but no downloads
    assert main(["diff", "--out", str(tmp_path / "not-a-build"), "--against", str(published)]) == 3
    assert f"нет папки {tmp_path / 'not-a-build' / 'site' / 'data'}" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # 64 is the command line's own: a wrong option (2 is invalid data)
        main(["diff", "--no-such-option"])
    assert usage.value.code == 64


@pytest.mark.parametrize(
    "damage, error",
    [
        (lambda p: p.write_text("not,a,models,table\n1,2,3,4\n", encoding="utf-8"), "KeyError: 'model_id'"),
        (lambda p: p.write_bytes(b"model_id\n\xff\xfe\n"), "UnicodeDecodeError: 'utf-8' codec can't decode"),
    ],
)
def test_an_unreadable_build_is_an_error_not_a_change(builds, tmp_path, capsys, damage, error):
    published, output = builds
    copy = tmp_path / "copy"
    shutil.copytree(output, copy)
    damage(copy / "site" / "data" / "models.csv")
    assert main(["diff", "--out", str(copy), "--against", str(published)]) == 3
    err = capsys.readouterr().err
    assert f"не удалось сравнить {copy} и {published}: {error}" in err and "Traceback" not in err


def run_diff(env: dict, *args: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONIOENCODING", "PYTHONUTF8"))}
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "diff", *args], cwd=ROOT, env=base | env, capture_output=True, check=False
    )


# The C locale without Python's UTF-8 mode and locale coercion: stdout is ASCII, as on a terminal without Cyrillic.
ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


def test_diff_prints_under_a_locale_without_cyrillic(builds):
    published, output = builds
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; print(sys.stdout.encoding)"],
        env={k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONIOENCODING"))}
        | ASCII_LOCALE,
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "ascii"
    done = run_diff(ASCII_LOCALE, "--out", str(output), "--against", str(published))
    assert done.returncode == 4, done.stderr
    text = done.stdout.decode("ascii")  # nothing else in it
    price = "\\u0426\\u0435\\u043d\\u0430 8 \\xd7 H100 80GB (ESC8000A): 2\\xa0373\\xa0300 \\u2192 2\\xa0450\\xa0000"
    assert price in text
    assert text.encode("ascii").decode("unicode_escape") == format_text(diff(output, published)) + "\n"
    assert b"use a UTF-8 locale" in done.stderr and b"Traceback" not in done.stderr
    # Latin-1 (LANG=en_US.ISO-8859-1): what it has is written as it is, Cyrillic as escapes.
    latin = run_diff({"PYTHONIOENCODING": "iso8859-1"}, "--out", str(output), "--against", str(published))
    assert latin.returncode == 4 and b"Traceback" not in latin.stderr
    assert "\\u0426\\u0435\\u043d\\u0430 8 \xd7 H100" in latin.stdout.decode("latin-1")


def test_json_under_a_locale_without_cyrillic_is_the_same_json(builds):
    published, output = builds
    done = run_diff(ASCII_LOCALE, "--out", str(output), "--against", str(published), "--json")
    assert done.returncode == 4
    assert json.loads(done.stdout.decode("ascii")) == json.loads(json.dumps(diff(output, published)))


def test_a_reader_that_stops_early_is_no_error(builds):
    """`diff | head -1`: the pipe closes before the report is written; no traceback, the exit code stands."""
    published, output = builds
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "diff", "--out", str(output), "--against", str(published)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 4
    assert b"Traceback" not in err and b"BrokenPipe" not in err


def test_json_for_tools(builds, capsys):
    published, output = builds
    assert main(["diff", "--out", str(output), "--against", str(published), "--json"]) == 4
    report = json.loads(capsys.readouterr().out)
    assert report["changed"] is True
    assert report["pages"]["added"] == ["models/phi-4-mini.html"]


def test_database_is_compared_by_its_tables(builds, tmp_path):
    """The DuckDB file's header holds a random id: a rewritten copy with the same tables is no change."""
    import duckdb

    _, output = builds
    copy = tmp_path / "copy"
    shutil.copytree(output, copy)
    database = copy / "site" / "data" / "gpu-finetune.duckdb"
    database.unlink()
    con = duckdb.connect()
    con.execute(f"ATTACH '{output / 'site' / 'data' / 'gpu-finetune.duckdb'}' AS original (READ_ONLY)")
    con.execute(f"ATTACH '{database}' AS rewritten")
    con.execute("COPY FROM DATABASE original TO rewritten")
    con.close()
    assert database.read_bytes() != (output / "site" / "data" / "gpu-finetune.duckdb").read_bytes()
    assert diff(copy, output)["changed"] is False


def test_derived_summary_lines(builds):
    published, output = builds
    lines = format_text(diff(output, published)).splitlines()
    assert "  Оценки памяти: добавлено строк: 6" in lines
    # Every model x method row of the repriced server changes, the removed server's rows go, the new
    # model adds a row per method and server.
    old = pl.read_csv(published / "site" / "data" / "server_fit.csv")
    per_server = old.filter(pl.col("server_id") == "esc8000a-8x-h100").height
    added = 6 * (old["server_id"].n_unique() - 1)
    assert per_server == old.filter(pl.col("server_id") == "mi355x-8x").height == 6 * 45
    assert (
        f"  Серверы под задачу: изменено строк: {per_server}, добавлено строк: {added}, удалено строк: {per_server} "
        "(столбцы: Цена сервера)"
    ) in lines


def test_files_are_compared_a_piece_at_a_time(tmp_path, monkeypatch):
    """_same reads two files a piece at a time (a 10^7-row build's CSV is 3 GB): equal bytes are the
    same, and a difference anywhere, in the last piece too, or in the size, is found; no read asks for
    more than a piece."""
    from pipeline.tools import diff as tool

    asked = []

    class Recorded:  # a file opened by _same: what each read asks for
        def __init__(self, path, mode):
            self.file = open(path, mode)  # noqa: SIM115 (closed by __exit__)

        def read(self, size=-1):
            asked.append(size)
            return self.file.read(size)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

    monkeypatch.setattr(tool, "COMPARED_BYTES", 1000)
    monkeypatch.setattr(tool, "open", Recorded, raising=False)
    data = bytes(range(1, 256)) * 20  # 5,100 bytes: six pieces, the last one short
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_bytes(data)
    for other, same in ((data, True), (data[:-1] + b"\0", False), (b"\0" + data[1:], False), (data + b"x", False)):
        b.write_bytes(other)
        assert tool._same(a, b) is same
    a.write_bytes(b"")
    b.write_bytes(b"")
    assert tool._same(a, b)
    assert asked and all(0 <= size <= 1000 for size in asked)


def _copy(output, target):
    shutil.copytree(output, target)
    return target


def test_derived_tables_are_counted_by_duckdb_never_read_into_python(builds, monkeypatch):
    """Only the source tables (a catalog's few thousand rows) are read row by row; the derived ones
    (10^7 rows of server_fit and recommendations) are counted by DuckDB a piece at a time."""
    from pipeline.tools import diff as tool

    published, output = builds
    read = []
    original = tool.read_table
    monkeypatch.setattr(tool, "read_table", lambda out, table: read.append(table.name) or original(out, table))
    report = tool.diff(output, published)
    sources = {t.name for t in tool.ALL_TABLES if t.kind == "source"}
    assert set(read) == sources and len(read) == 2 * len(sources)
    assert "server_fit" in {d["table"] for d in report["derived"]}


def test_the_csvs_give_the_summary_the_parquet_files_give(builds, tmp_path):
    """A build without Parquet files (one from before they were published) is compared through its
    CSVs, as text: the same counts, columns and plans as through the Parquet files."""
    published, output = builds
    copy = _copy(output, tmp_path / "no-parquet")
    for parquet in (copy / "site" / "data").glob("*.parquet"):
        parquet.unlink()
    through_parquet, through_csv = diff(output, published), diff(copy, published)
    assert through_csv["derived"] == through_parquet["derived"] and through_csv["derived"]
    assert through_csv["plans"] == through_parquet["plans"]
    assert {d["table"]: d["changed"] for d in through_csv["derived"]}["server_fit"] == 6 * 45


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_plan_change_is_found_in_the_recommendations(builds, tmp_path, kind):
    """The plan of a job is the rank-1 row of recommendations: a changed server there is named, read
    from the Parquet files or, in a build without them, from the CSVs."""
    _, output = builds
    copy = _copy(output, tmp_path / "replanned")
    data = copy / "site" / "data"
    rows = pl.read_parquet(data / "recommendations.parquet")
    job = (pl.col("model_id") == "generic-8b") & (pl.col("method_id") == "lora") & (pl.col("rank") == 1)
    planned = rows.filter(job)["server_id"].to_list()
    replanned = rows.with_columns(pl.when(job).then(pl.lit("another-server")).otherwise("server_id").alias("server_id"))
    if kind == "csv":
        for parquet in data.glob("*.parquet"):
            parquet.unlink()
        replanned.write_csv(data / "recommendations.csv")
    else:
        replanned.write_parquet(data / "recommendations.parquet")
    assert [(p["key"], p["old"], p["new"]) for p in diff(copy, output)["plans"]] == [
        (["generic-8b", "lora"], planned[0], "another-server")
    ]


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_damaged_derived_download_is_an_error_not_a_change(builds, tmp_path, capsys, kind):
    published, output = builds
    copy = _copy(output, tmp_path / "damaged")
    data = copy / "site" / "data"
    if kind == "csv":  # compared through the CSVs: a row with a cell too few
        for parquet in data.glob("*.parquet"):
            parquet.unlink()
        lines = (data / "server_fit.csv").read_text(encoding="utf-8").splitlines(keepends=True)
        lines[5] = lines[5].rsplit(",", 1)[0] + "\n"
        (data / "server_fit.csv").write_text("".join(lines), encoding="utf-8")
    else:
        (data / "server_fit.parquet").write_bytes(b"PAR1 not a Parquet file")
    assert main(["diff", "--out", str(copy), "--against", str(published)]) == 3
    err = capsys.readouterr().err
    assert f"не удалось сравнить {copy} и {published}:" in err and "Traceback" not in err


def test_a_column_stored_as_text_in_one_build_compares_by_its_text(builds, tmp_path):
    """A column whose type differs between the builds' Parquet files (a pipeline that changed it) is
    compared as text: the same numbers are no change."""
    import pyarrow.parquet as pq

    _, output = builds
    copy = _copy(output, tmp_path / "as-text")
    path = copy / "site" / "data" / "server_fit.parquet"
    table = pq.read_table(path)
    at = table.schema.get_field_index("price_rub_month")
    pq.write_table(table.set_column(at, "price_rub_month", table["price_rub_month"].cast("string")), path)
    assert "server_fit" not in {d["table"] for d in diff(copy, output)["derived"]}


def test_database_tables_differ_by_a_value_not_by_row_order(builds, tmp_path):
    """The DuckDB file is compared by each table's columns, row count and the sum of its rows' hashes."""
    import duckdb

    _, output = builds
    original = output / "site" / "data" / "gpu-finetune.duckdb"
    for name, change, same in (
        ("shuffled", "CREATE OR REPLACE TABLE servers AS SELECT * FROM servers ORDER BY server_id DESC", True),
        (
            "edited",
            "UPDATE servers SET price_rub_month = price_rub_month + 1 WHERE server_id = 'xfusion-2x-h100'",
            False,
        ),
        ("dropped", "DROP TABLE methods", False),
    ):
        copy = tmp_path / f"{name}.duckdb"
        shutil.copy(original, copy)
        con = duckdb.connect(str(copy))
        con.execute(change)
        con.close()
        from pipeline.tools.table_changes import database_tables

        assert (database_tables(copy) == database_tables(original)) is same, name


def test_count_changes_on_small_tables():
    """table_changes.count_changes, exactly: added, removed and changed rows by key (a NULL key matches a
    NULL key), the changed columns in the order given, a column one side lacks as NULL there, a column
    typed differently compared as text."""
    from pipeline.tools import table_changes

    new = "(SELECT * FROM (VALUES ('a', 1, 'x', 10), ('b', 2, 'y', 20), (NULL, 3, 'z', 30), ('d', 4, 'w', 40)) t(k, v, s, n))"
    old = "(SELECT * FROM (VALUES ('a', 1, 'x', '10'), ('b', 5, 'y', '20'), (NULL, 3, 'z', '30'), ('c', 6, 'u', '60')) t(k, v, s, n))"
    with table_changes.connection() as con:
        assert table_changes.count_changes(con, new, old, ["k"], ["n", "v", "s", "gone"]) == {
            "changed": 1,  # b's v; n is 10 against '10': the same text
            "added": 1,  # d
            "removed": 1,  # c
            "columns": ["v"],
        }
        lacking = "(SELECT k, v, n FROM " + old + ")"  # s missing: NULL there, so every row's s changed
        assert table_changes.count_changes(con, new, lacking, ["k"], ["v", "s"])["columns"] == ["v", "s"]
        assert table_changes.count_changes(con, new, new, ["k"], ["v", "s", "n"]) == {
            "changed": 0,
            "added": 0,
            "removed": 0,
            "columns": [],
        }
        with pytest.raises(KeyError):
            table_changes.count_changes(con, new, "(SELECT v FROM " + old + ")", ["k"], ["v"])


def test_release_counts_the_derived_tables_from_parquet_as_from_the_csvs(builds, tmp_path):
    """`release` reads a derived table's Parquet files where both builds have them, else its CSVs (a
    build without Parquet files on one side): the same changes either way."""
    from pipeline.tools.release import compare, read_build

    published, output = builds
    copy = _copy(output, tmp_path / "csv-only")
    for parquet in (copy / "site" / "data").glob("*.parquet"):
        parquet.unlink()
    assert read_build(output)["server_fit"].files.has_parquet and not read_build(copy)["server_fit"].files.has_parquet
    via_parquet = compare(read_build(published), read_build(output))
    assert compare(read_build(published), read_build(copy)) == via_parquet
    fit = [(c["change"], c["column_name"], c["rows"]) for c in via_parquet if c["table_name"] == "server_fit"]
    servers = pl.read_csv(published / "site" / "data" / "server_fit.csv")["server_id"].n_unique()
    new_model, per_server = 6 * (servers - 1), 6 * 45  # as test_derived_summary_lines counts them
    assert fit == [
        ("row_added", "", str(new_model)),
        ("row_removed", "", str(per_server)),
        ("rows_changed", "price_rub_month", str(per_server)),
    ]
