"""Downloads for analysts: every table read back from CSV, XLSX, Parquet, DuckDB and metadata.json equals the catalog."""

import dataclasses
import datetime as dt
import io
import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import duckdb
import openpyxl
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from conftest import SOURCES, edit_csv
from pipeline.build import build
from pipeline.combine import Catalog
from pipeline.publish.downloads import DATABASE, spreadsheet_safe_frame
from pipeline.render.format import spreadsheet_safe
from pipeline.schema import ALL_TABLES, DUCKDB_TYPES, TABLES_BY_NAME, Table
from pipeline.words import labels

DICTIONARY_SHEET = labels()["xlsx"]["sheet"]
TABLES = [pytest.param(t, id=t.name) for t in ALL_TABLES]
FORMULA = '=HYPERLINK("http://evil.example/x","y")'


def data(built: Path) -> Path:
    return built / "site" / "data"


def expected(catalog, table: Table, safe: bool = False) -> pl.DataFrame:
    frame = catalog[table.name].select(table.columns)
    return spreadsheet_safe_frame(frame, table) if safe else frame


@pytest.mark.parametrize("table", TABLES)
def test_csv_reads_back_with_polars_and_duckdb(built, catalog, table):
    path = data(built) / f"{table.name}.csv"
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf" + table.columns[0].encode())
    want = expected(catalog, table, safe=True)
    assert_frame_equal(pl.read_csv(path, schema=table.polars_schema), want)
    columns = {f.name: DUCKDB_TYPES[f.type] for f in table.fields}
    got = duckdb.sql(f"SELECT * FROM read_csv('{path}', header = true, columns = {columns})").pl()
    assert_frame_equal(got, want)


@pytest.mark.parametrize("table", TABLES)
def test_parquet_reads_back_with_polars_and_duckdb(built, catalog, table):
    path = data(built) / f"{table.name}.parquet"
    want = expected(catalog, table)
    got = pl.read_parquet(path)
    assert got.schema == table.polars_schema
    assert_frame_equal(got, want)
    assert_frame_equal(duckdb.sql(f"SELECT * FROM '{path}'").pl(), want)


@pytest.mark.parametrize("table", TABLES)
def test_duckdb_file_holds_every_table(built, catalog, table):
    con = duckdb.connect(str(data(built) / DATABASE), read_only=True)
    try:
        assert_frame_equal(
            con.sql(f'SELECT * FROM "{table.name}"').pl(), expected(catalog, table), check_row_order=False
        )
        comments = dict(
            con.execute(
                "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = ?", [table.name]
            ).fetchall()
        )
    finally:
        con.close()
    assert all(comments[f.name].startswith(f.label_ru + ". ") for f in table.fields)


def xlsx_value(field, value):
    """What the catalog value should read back as from openpyxl."""
    if value is not None and field.type == "date":
        return dt.datetime.combine(value, dt.time())
    if value is not None and field.type == "float":
        # openpyxl writes 16 significant digits (Excel itself computes with 15).
        return float(f"{value:.16g}")
    return value


def expected_format(field) -> str:
    if field.type == "float" and field.unit == "gb":
        return "#,##0.0"
    if field.unit in ("rub", "rub_per_month"):
        return '#,##0" ₽"'
    return {"int": "#,##0", "date": "dd.mm.yyyy"}.get(field.type, "General")


@pytest.mark.parametrize("table", TABLES)
def test_xlsx_reads_back_with_openpyxl(built, catalog, table):
    wb = openpyxl.load_workbook(data(built) / f"{table.name}.xlsx")
    assert wb.sheetnames == [table.name, DICTIONARY_SHEET]
    ws = wb[table.name]
    assert ws.freeze_panes == "A2"
    rows = list(ws.iter_rows())
    assert [c.value for c in rows[0]] == [f.label_ru for f in table.fields]
    want = expected(catalog, table)  # the text as it is: no CSV apostrophe in a typed cell
    assert len(rows) - 1 == want.height
    for cells, row in zip(rows[1:], want.iter_rows(), strict=True):
        assert [c.value for c in cells] == [xlsx_value(f, v) for f, v in zip(table.fields, row, strict=True)]
        for cell, field, value in zip(cells, table.fields, row, strict=True):
            if value is None:
                continue
            if field.type in ("str", "id"):
                assert cell.data_type == "s"
            elif field.type == "bool":
                assert cell.data_type == "b"
            else:
                assert cell.data_type in ("n", "d") and cell.number_format == expected_format(field), field.name
    words = [[c.value for c in r] for r in wb[DICTIONARY_SHEET].iter_rows()]
    assert words[0] == ["Столбец", "Заголовок", "Тип", "Единица", "Обязателен", "Описание"]
    assert [r[:2] for r in words[1:]] == [[f.name, f.label_ru] for f in table.fields]


def test_xlsx_number_formats_of_the_derived_tables(built):
    ws = openpyxl.load_workbook(data(built) / "server_fit.xlsx")["server_fit"]
    header = [c.value for c in ws[1]]
    row = {h: c for h, c in zip(header, ws[2], strict=True)}
    assert row["Память, ГБ"].number_format == "#,##0.0"
    assert isinstance(row["Память, ГБ"].value, float)
    assert row["Серверов, шт."].number_format == "#,##0"
    prices = [r[header.index("Цена сервера, ₽/мес")] for r in ws.iter_rows(min_row=2)]
    assert {c.number_format for c in prices if c.value is not None} == {'#,##0" ₽"'}
    assert all(isinstance(c.value, int) for c in prices if c.value is not None)


@pytest.mark.parametrize("table", TABLES)
def test_metadata_describes_the_table(built, catalog, table):
    path = data(built) / f"{table.name}.metadata.json"
    meta = json.loads(path.read_text(encoding="utf-8"))
    assert list(meta) == [
        "table",
        "title_ru",
        "description_ru",
        "kind",
        "primary_key",
        "row_count",
        "made_from",
        "files",
        "columns",
        "sources",
        "licence",
    ]
    assert meta["licence"]["id"] == "CC-BY-4.0"  # site_templates/site.toml [data_licence]
    assert meta["table"] == table.name and meta["kind"] == table.kind and meta["title_ru"] == table.title_ru
    assert meta["primary_key"] == list(table.primary_key)
    assert meta["row_count"] == catalog[table.name].height
    assert meta["files"] == {fmt: f"{table.name}.{fmt}" for fmt in ("csv", "xlsx", "parquet")}
    for name in meta["files"].values():
        assert (data(built) / name).is_file()
    assert [c["name"] for c in meta["columns"]] == table.columns
    for column, field in zip(meta["columns"], table.fields, strict=True):
        assert column["label_ru"] == field.label_ru != ""
        assert column["type"] == field.type and column["required"] == field.required
        assert column["unit"] == (field.unit_label or None) and column["allowed"] == list(field.allowed)
        assert column["description_ru"] == field.description_ru
    references = {r["reference_id"]: r for r in catalog["references"].iter_rows(named=True)}
    assert meta["sources"], table.name
    for source in meta["sources"]:
        ref = references[source["id"]]
        assert source == {
            "id": ref["reference_id"],
            "title": ref["title"],
            "url": ref["url"],
            "checked_on": ref["checked_on"].isoformat(),
        }
    ids = [s["id"] for s in meta["sources"]]
    assert ids == sorted(ids)
    if "reference_id" in table.columns:
        assert set(ids) == set(catalog[table.name]["reference_id"].drop_nulls())


def test_derived_tables_name_the_sources_of_their_inputs(built, catalog):
    def ids(name):
        return {
            s["id"] for s in json.loads((data(built) / f"{name}.metadata.json").read_text(encoding="utf-8"))["sources"]
        }

    anchors = set(catalog["memory_anchors"]["reference_id"])
    assert anchors | set(catalog["models"]["reference_id"]) | set(catalog["methods"]["reference_id"]) <= ids(
        "estimates"
    )
    assert ids("estimates") | set(catalog["gpus"]["reference_id"]) == ids("gpu_fit")
    assert ids("estimates") | set(catalog["servers"]["reference_id"]) | set(catalog["gpus"]["reference_id"]) == ids(
        "server_fit"
    )
    assert ids("legacy_offer_jobs") == set(catalog["legacy_offers"]["reference_id"])


def test_every_download_is_linked_from_the_data_page(built):
    html = (
        (built / "site" / "data.html").read_text(encoding="utf-8").replace("\u00a0", " ")
    )  # typeset: NBSP before units
    for table in ALL_TABLES:
        for ext in ("csv", "xlsx", "parquet", "metadata.json"):
            assert f'href="data/{table.name}.{ext}"' in html, (table.name, ext)
        for field in table.fields:
            assert f"<td>{field.label_ru}</td>" in html, field.name
    assert 'href="data/gpu-finetune.duckdb"' in html


def test_every_field_has_a_russian_label():
    for table in ALL_TABLES:
        labels = [f.label_ru for f in table.fields]
        assert all(labels) and len(set(labels)) == len(labels), table.name


@pytest.mark.parametrize("text", ["=1+1", "+7 499", "-5", "@SUM(A1)", "\tx", "\rx", "H100", "", None, "'=x"])
def test_vectorised_neutralising_matches_spreadsheet_safe(text):
    table = TABLES_BY_NAME["references"]
    frame = pl.DataFrame({"title": [text]}, schema={"title": pl.String})
    got = spreadsheet_safe_frame(frame, Table("t", (table.field("title"),), ("title",)))
    assert got["title"].to_list() == [spreadsheet_safe(text)]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-downloads")
    sources = root / "sources"
    shutil.copytree(SOURCES, sources)
    edit_csv(
        sources / "gpus.csv",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition,RTX PRO 6000,",
        f'NVIDIA RTX PRO 6000 Blackwell Server Edition,"{FORMULA.replace(chr(34), chr(34) * 2)}",',
    )
    build(sources, root / "output")
    return data(root / "output")


def test_formula_becomes_a_string_in_xlsx_and_numbers_stay_numbers(hostile):
    ws = openpyxl.load_workbook(hostile / "gpus.xlsx")["gpus"]
    header = [c.value for c in ws[1]]
    row = next(r for r in ws.iter_rows(min_row=2) if r[0].value == "rtx-pro-6000")
    cell = row[header.index("Краткое название")]
    assert cell.value == FORMULA and cell.data_type == "s"  # the text itself, in a string cell
    memory = row[header.index("Память, ГБ")]
    assert memory.value == 96.0 and memory.data_type == "n" and memory.number_format == "#,##0.0"
    # No formula anywhere in the workbook's XML; the text is an inline string cell, as it is.
    with zipfile.ZipFile(hostile / "gpus.xlsx") as z:
        assert all(b"<f>" not in z.read(n) and b"<f " not in z.read(n) for n in z.namelist())
        sheet = z.read("xl/worksheets/sheet1.xml").decode("utf-8")
    assert 't="inlineStr"><is><t>=HYPERLINK("http://evil.example/x","y")</t></is></c>' in sheet
    assert "<t>'=HYPERLINK" not in sheet


def test_a_typed_apostrophe_gets_its_own_workbook():
    """The CSV of "=x" and of "'=x" is the same ("'=x"): a warm process must not reuse one's workbook for the other."""
    from pipeline.publish.downloads import _typed_apostrophes

    table = TABLES_BY_NAME["references"]
    frame = pl.DataFrame({"title": ["=x"]})
    typed = pl.DataFrame({"title": ["'=x"]})
    one = Table("t", (table.field("title"),), ("title",))
    assert spreadsheet_safe_frame(frame, one).write_csv() == spreadsheet_safe_frame(typed, one).write_csv()
    assert _typed_apostrophes(frame, one) == ""
    assert _typed_apostrophes(typed, one) == "title\n'=x\n"


def test_formula_is_neutralised_in_csv_but_kept_in_parquet(hostile):
    csv = pl.read_csv(hostile / "gpus.csv", schema=TABLES_BY_NAME["gpus"].polars_schema).filter(
        pl.col("gpu_id") == "rtx-pro-6000"
    )
    assert csv["short_name"].to_list() == ["'" + FORMULA] and csv["memory_gb"].to_list() == [96.0]
    parquet = pl.read_parquet(hostile / "gpus.parquet").filter(pl.col("gpu_id") == "rtx-pro-6000")
    assert parquet["short_name"].to_list() == [FORMULA]


def test_downloads_are_byte_identical_across_builds(built, catalog, tmp_path):
    build(SOURCES, tmp_path / "again")
    again = data(tmp_path / "again")
    names = sorted(p.name for p in data(built).iterdir() if p.name != DATABASE)
    assert names == sorted(p.name for p in again.iterdir() if p.name != DATABASE)
    assert len([n for n in names if n.endswith(".xlsx")]) == len(ALL_TABLES)
    for name in names:
        assert (again / name).read_bytes() == (data(built) / name).read_bytes(), name
    # The workbook's own dates are the latest date in the data, not the time of the build.
    latest = max(catalog["references"]["checked_on"].max(), catalog["servers"]["price_checked_on"].max())
    with zipfile.ZipFile(again / "server_fit.xlsx") as z:
        assert {i.date_time for i in z.infolist()} == {(latest.year, latest.month, latest.day, 0, 0, 0)}
    props = openpyxl.load_workbook(again / "server_fit.xlsx").properties
    assert props.created == props.modified == dt.datetime.combine(latest, dt.time())


def test_tables_beyond_excel_rows_get_no_xlsx(tmp_path, catalog, monkeypatch):
    from pipeline.publish import downloads

    monkeypatch.setattr(downloads, "EXCEL_MAX_ROWS", 3000)  # server_fit has 2 700 rows, gpu_fit 4 050
    downloads.write_downloads(tmp_path, catalog)
    assert (tmp_path / "server_fit.xlsx").is_file()
    assert not (tmp_path / "gpu_fit.xlsx").exists()
    assert (tmp_path / "gpu_fit.csv").is_file() and (tmp_path / "gpu_fit.parquet").is_file()
    meta = json.loads((tmp_path / "gpu_fit.metadata.json").read_text(encoding="utf-8"))
    assert meta["files"] == {"csv": "gpu_fit.csv", "parquet": "gpu_fit.parquet"}


def test_downloads_are_made_one_at_a_time_and_large_csvs_are_not_held(built, catalog, monkeypatch):
    """iter_downloads gives the files one by one (a build writes each as it comes), and a table too
    large for a workbook is not turned into CSV before its turn: start_workbooks keeps no text of it.
    Its CSV comes after every Parquet file (the DuckDB file, keyed on them, is begun meanwhile)."""
    from pipeline.publish import downloads

    monkeypatch.setattr(downloads, "EXCEL_MAX_ROWS", 40)
    texts, books = downloads.start_workbooks(catalog)()
    large = {t.name for t in ALL_TABLES if catalog[t.name].height > 40}
    assert "server_fit" in large and "gpus" not in large
    assert set(texts) == {t.name for t in ALL_TABLES} - large == set(books)
    from pipeline.publish.releases import read_history

    stream = downloads.iter_downloads(catalog, release=read_history(SOURCES).current)  # the build's release
    name, content = next(stream)
    assert (ALL_TABLES[0].name, name) == ("references", "references.parquet")  # 160 rows: its CSV comes later
    made = [(name, content), *stream]
    order = [name for name, _ in made]
    last_parquet = max(order.index(f"{t.name}.parquet") for t in ALL_TABLES)
    assert min(order.index(f"{name}.csv") for name in large) == last_parquet + 2  # after its metadata.json
    assert all(
        order.index(f"{t.name}.csv") < order.index(f"{t.name}.parquet") for t in ALL_TABLES if t.name not in large
    )
    files = {name: bytes(content) for name, content in made}  # a Streamed CSV made here
    for table in ALL_TABLES:
        frame = catalog[table.name].select(table.columns)
        assert files[f"{table.name}.csv"] == downloads.csv_text(table, frame).encode("utf-8")
        if table.name not in large:
            assert texts[table.name].csv == files[f"{table.name}.csv"]
        assert (f"{table.name}.xlsx" in files) is (table.name not in large)
    made = dict(downloads.iter_downloads(catalog))
    assert isinstance(made["gpus.csv"], bytes)  # held: it has a workbook
    assert isinstance(made["server_fit.csv"], downloads.Streamed)  # too large for one: written as it is made
    assert list(files)[-1] == "datapackage.json"
    # the same bytes as the build's own files
    for name in ("server_fit.csv", "gpus.csv", "datapackage.json"):
        assert files[name] == (built / "site" / "data" / name).read_bytes()


def test_a_new_process_takes_unchanged_workbooks_from_the_user_cache(catalog, monkeypatch, tmp_path):
    """start_workbooks makes only the workbooks the user cache does not hold for these cells and this
    code and templates (made_with): a build in a new process after a one-price edit makes those of the
    tables the price changed. An entry that does not verify is made again; --force (read=False) reads none."""
    from pipeline.publish import downloads

    monkeypatch.setenv("GPU_FINETUNE_CACHE_DIR", str(tmp_path))
    asked, start_map = [], downloads.start_map

    def recorded(function, items, *args, **kwargs):
        asked.append(sorted(job[0].name for job in items))
        return start_map(function, items, *args, **kwargs)

    monkeypatch.setattr(downloads, "start_map", recorded)
    books = sorted(t.name for t in ALL_TABLES if catalog[t.name].height <= downloads.EXCEL_MAX_ROWS)
    _, first = downloads.start_workbooks(catalog, {}, "code-a")()
    _, again = downloads.start_workbooks(catalog, {}, "code-a")()  # an empty `kept`: a new process
    assert asked == [books, []] and again == first and len(books) == 32
    entry = sorted((tmp_path / downloads.WORKBOOK_NAMESPACE).iterdir())[0]
    entry.write_bytes(entry.read_bytes()[:-1])  # truncated: it no longer verifies
    _, repaired = downloads.start_workbooks(catalog, {}, "code-a")()
    assert len(asked[2]) == 1 and repaired == first
    downloads.start_workbooks(catalog, {}, "code-b")()  # other code or templates
    downloads.start_workbooks(catalog, {}, "code-a", read=False)()  # build --force
    downloads.start_workbooks(catalog)()  # a caller that names nothing it was made with
    assert asked[3:] == [books, books, books]
    inputs = {"code": "c", "templates": "t"}
    assert downloads.made_with(inputs) != downloads.made_with(inputs | {"templates": "t2"})  # labels.toml edited
    servers = catalog["servers"].with_columns(pl.col("price_rub_month") + 1000)
    changed = dataclasses.replace(catalog, tables=catalog.tables | {"servers": servers})
    downloads.start_workbooks(changed, {}, "code-a")()
    assert asked[6] == ["server_fit", "servers"]  # server_fit, made from the servers (Catalog.fits), has their prices
    import isal

    made = downloads.made_with(inputs)
    monkeypatch.setattr(isal, "__version__", f"{isal.__version__}.1")
    assert downloads.made_with(inputs) != made  # another python-isal may deflate the same parts otherwise


def test_a_parquet_file_is_written_from_a_clone_of_the_catalogs_frame(catalog, monkeypatch):
    """made_parquet writes a table's Parquet file from a clone of the catalog's frame (the same rows):
    the DuckDB file's thread makes them while the pages query those frames, and polars 1.28, the
    declared floor, borrows a frame exclusively while it writes it (the query failed: "Already
    mutably borrowed")."""
    from pipeline.publish import downloads

    written, parquet_bytes = [], downloads.parquet_bytes
    monkeypatch.setattr(downloads, "parquet_bytes", lambda frame: written.append(frame) or parquet_bytes(frame))
    table = TABLES_BY_NAME["references"]
    made = downloads.TableFiles("", b"", "")
    assert downloads.made_parquet(made, catalog, table) == parquet_bytes(catalog["references"]) == made.parquet
    assert written[0] is not catalog["references"] and written[0].equals(catalog["references"])


def test_a_warm_process_serialises_only_the_tables_that_changed(catalog, monkeypatch):
    """`files` (Warm.table_files) keeps each table's CSV and Parquet bytes by its frame's content: the
    next build takes them as they are for an unchanged table and makes them again for a changed one."""
    from pipeline.publish import downloads

    files: dict = {}
    first = dict(downloads.iter_downloads(catalog, downloads.start_workbooks(catalog, {}, files=files)))
    gpus, servers = files["gpus"], files["servers"]
    assert (gpus.csv, gpus.parquet) == (first["gpus.csv"], first["gpus.parquet"])
    made = []
    monkeypatch.setattr(downloads, "csv_bytes", lambda table, frame: made.append(table.name) or b"")
    priced = catalog["servers"].with_columns(pl.col("price_rub_month") + 1000)
    changed = dataclasses.replace(catalog, tables=catalog.tables | {"servers": priced})
    again = dict(downloads.iter_downloads(changed, downloads.start_workbooks(changed, {}, files=files)))
    # the changed table and server_fit, made from it (Catalog.fits), with its prices; none too large to keep
    assert made == ["servers", "server_fit"]
    assert files["gpus"] is gpus and again["gpus.parquet"] is gpus.parquet  # the very bytes, not made again
    assert files["servers"] is not servers and again["servers.parquet"] != first["servers.parquet"]
    assert set(files) == {t.name for t in ALL_TABLES}  # only this build's tables


def test_a_process_that_keeps_nothing_takes_no_frame_digest_for_its_tables(catalog, monkeypatch):
    """A build in a process that makes no next build (files None) makes the same CSV bytes without
    hashing each frame's Arrow copy, which only a kept TableFiles is compared by."""
    from pipeline.publish import downloads

    kept: dict = {}
    with_files, _ = downloads.start_workbooks(catalog, {}, files=kept)()
    hashed = []
    digest = downloads.frame_digest
    monkeypatch.setattr(downloads, "frame_digest", lambda frame: hashed.append(frame.height) or digest(frame))
    alone, _ = downloads.start_workbooks(catalog, {}, files=None)()
    assert hashed == []
    assert {n: (f.csv, f.typed) for n, f in alone.items()} == {n: (f.csv, f.typed) for n, f in with_files.items()}
    assert set(kept) == set(alone) and all(f.key for f in kept.values()) and not any(f.key for f in alone.values())


def test_the_cache_keeps_only_the_newest_entries_of_a_namespace(tmp_path):
    from pipeline import cache

    store = cache.Cache(tmp_path)
    keys = [cache.make_key(str(i)) for i in range(5)]
    for i, key in enumerate(keys):
        assert store.put("workbook", key, b"PK" + bytes([i]))
        stamp = 1_700_000_000 + i
        os.utime(tmp_path / "workbook" / f"{key}.bin", (stamp, stamp))
    store.prune("workbook", 2)
    assert sorted(p.name for p in (tmp_path / "workbook").iterdir()) == sorted(f"{k}.bin" for k in keys[3:])
    assert store.get("workbook", keys[4]) == b"PK\x04" and store.get("workbook", keys[0]) is None
    store.prune("absent", 2)  # a namespace never written: nothing to do, no error


def _sheet_xml(write, rows: list[tuple], kinds: list[str], tmp_path, name: str) -> dict[str, bytes]:
    """Every part of a constant_memory workbook whose data rows `write` writes, unzipped."""
    import zipfile

    import xlsxwriter

    path = tmp_path / f"{name}.xlsx"
    wb = xlsxwriter.Workbook(str(path), {"constant_memory": True, "tmpdir": str(tmp_path)})
    wb.set_properties({"created": dt.datetime(2026, 1, 2)})
    ws = wb.add_worksheet("t")
    number, date = wb.add_format({"num_format": "#,##0.0"}), wb.add_format({"num_format": "dd.mm.yyyy"})
    formats = [number if k == "number" else date if k == "date" else None for k in kinds]
    for c in range(len(kinds)):
        ws.write_string(0, c, f"h{c}", wb.add_format({"bold": True}))
    write(ws, rows, kinds, formats)
    wb.close()
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def test_the_row_writer_gives_xlsxwriters_bytes(tmp_path):
    """xlsx_rows.write_rows writes the sheet XlsxWriter writes cell by cell (constant_memory): text with
    markup, spaces, control characters and "_x0041_", long text, numbers, dates, booleans, empty cells
    and rows."""
    from pipeline.publish import xlsx_rows

    def cell_by_cell(ws, rows, kinds, formats):
        for r, row in enumerate(rows, 1):
            for c, v in enumerate(row):
                if v is None:
                    continue
                kind, fmt = kinds[c], formats[c]
                if kind == "text":
                    ws.write_string(r, c, v)
                elif kind == "bool":
                    ws.write_boolean(r, c, v)
                elif kind == "date":
                    ws.write_datetime(r, c, v, fmt)
                else:
                    ws.write_number(r, c, v, fmt)

    texts = ["plain", "a & b <c> \"d\"", " lead", "trail ", "tab\there", "ctl\x01\x1f", "_x0041_ x", "<r>rich</r>",
             "новая\nстрока", "", "ё" * 20000, "\ufffe"]  # fmt: skip
    numbers = [0, 1, -7, 2**53, 1.5, 1e-300, 1e20, 123456789.123456789, -0.0, 3.0]
    rows = []
    for i in range(240):
        rows.append(
            (
                texts[i % len(texts)] if i % 7 else None,
                numbers[i % len(numbers)],
                dt.date(2020, 1, 1) + dt.timedelta(days=i) if i % 5 else None,
                bool(i % 2) if i % 3 else None,
                f"id-{i}",
            )
        )
    rows[17] = (None,) * 5  # an empty row
    rows.append((None,) * 5)  # and an empty last row
    kinds = ["text", "number", "date", "bool", "text"]
    expected = _sheet_xml(cell_by_cell, rows, kinds, tmp_path, "cells")
    got = _sheet_xml(xlsx_rows.write_rows, rows, kinds, tmp_path, "rows")
    assert got == expected
    assert b"_x005F_x0041_" in got["xl/worksheets/sheet1.xml"]


def test_the_row_writer_refuses_nan_as_xlsxwriter_does(tmp_path):
    from pipeline.publish import xlsx_rows

    with pytest.raises(TypeError, match="NAN/INF not supported"):
        _sheet_xml(xlsx_rows.write_rows, [(1.0,), (float("nan"),)], ["number"], tmp_path, "nan")


def test_the_prepared_rows_are_the_row_writers_bytes(tmp_path):
    """xlsx_rows.prepare_arrow (whole Arrow columns) writes the sheet write_rows writes: numbers of every
    kind, dates, booleans, escaped text and text with spaces at an edge, empty cells and rows; and
    ArrowRows, what the workbook child is given, makes those rows."""
    import polars as pl

    from pipeline.publish import xlsx_rows

    texts = ["plain", 'a & b <c> "d"', " lead", "trail ", "tab\there", "новая\nстрока", "", "ё" * 300, "x\u00a0"]
    numbers = [0.0, 1.0, -7.5, 2.0**53, 1e-300, 1e20, 123456789.123456789, 3.0]
    rows = []
    for i in range(300):
        rows.append(
            (
                texts[i % len(texts)] if i % 7 else None,
                numbers[i % len(numbers)],
                dt.date(2020, 1, 1) + dt.timedelta(days=i) if i % 5 else None,
                bool(i % 2) if i % 3 else None,
                f"id-{i}",
                i * 10**15 if i % 4 else None,
            )
        )
    rows[17] = (None,) * 6  # an empty row
    rows.append((None,) * 6)  # and an empty last row
    kinds = ["text", "number", "date", "bool", "text", "number"]
    schema = {"t": pl.Utf8, "n": pl.Float64, "d": pl.Date, "b": pl.Boolean, "i": pl.Utf8, "k": pl.Int64}
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    made = []

    def from_prepared(ws, rows, kinds, formats):
        for cell in ws.table[0].values():  # the header's Format is asked for its index first, as it is written first
            cell.format._get_xf_index()
        made.append(xlsx_rows.ArrowRows(frame.to_arrow(), kinds, xlsx_rows.styles(kinds, formats)).rows())
        xlsx_rows.write_prepared(ws, made[0], formats)

    expected = _sheet_xml(xlsx_rows.write_rows, rows, kinds, tmp_path, "rows")
    assert _sheet_xml(from_prepared, rows, kinds, tmp_path, "prepared") == expected
    assert isinstance(made[0], xlsx_rows.Prepared) and len(made[0]) == 301 and made[0].last == 300


@pytest.mark.parametrize(
    "value, dtype, kind",
    [
        ("ctl\x01", "str", "text"),
        ("_x0041_", "str", "text"),
        ("<r>rich</r>", "str", "text"),
        (float("nan"), "float", "number"),
        (-0.0, "float", "number"),
        (float("inf"), "float", "number"),
        ("7", "str", "number"),
        ("2026-01-01", "str", "date"),
    ],
)
def test_a_cell_for_xlsxwriter_leaves_the_table_to_the_row_writer(value, dtype, kind):
    import polars as pl

    from pipeline.publish import xlsx_rows

    types = {"str": pl.Utf8, "float": pl.Float64}
    plain = "x" if dtype == "str" else 1.0
    frame = pl.DataFrame({"c": [plain, value, None]}, schema={"c": types[dtype]})
    assert xlsx_rows.prepare_arrow(frame.to_arrow(), [kind], [""]) is None
    assert repr(xlsx_rows.ArrowRows(frame.to_arrow(), [kind], [""]).rows()) == repr(frame.rows())  # for write_rows
    if kind == "text" or dtype == "float":  # the plain cell alone is prepared
        assert xlsx_rows.prepare_arrow(frame.head(1).to_arrow(), [kind], [""]) is not None


def test_a_zero_beside_a_negative_zero_is_left_to_the_row_writer():
    """-0.0 next to 0.0 (which a dictionary of the column's values may merge): the row writer's cell."""
    import polars as pl

    from pipeline.publish import xlsx_rows

    frame = pl.DataFrame({"c": [0.0, -0.0, 2.0]})
    assert xlsx_rows.prepare_arrow(frame.to_arrow(), ["number"], [""]) is None


def test_every_table_made_in_the_workbook_child_from_arrow_is_the_row_writers_workbook(catalog, monkeypatch):
    """sheet_inputs hands a table of PREPARE_ROWS rows or more to the workbook child as its Arrow table
    (xlsx_rows.ArrowRows, no polars in the child); the workbook is byte for byte the one written from
    the rows a cell at a time, for every table of the catalog (every type of column)."""
    from pipeline.publish import downloads, xlsx_rows

    monkeypatch.setattr(downloads, "PREPARE_ROWS", 2)
    stamp = downloads.data_date(catalog)
    for table in ALL_TABLES:
        frame = downloads.published_frame(catalog, table)
        widths, rows = downloads.sheet_inputs(table, frame)
        assert isinstance(rows, xlsx_rows.ArrowRows) is (frame.height >= 2), table.name
        assert isinstance(rows, list) or isinstance(rows.rows(), xlsx_rows.Prepared), table.name
        book = downloads.workbook_bytes(table, widths, rows, stamp)
        assert book == downloads.workbook_bytes(table, widths, frame.rows(), stamp), table.name


def test_a_large_sheets_rows_are_made_with_the_systems_allocator(catalog, monkeypatch):
    """ArrowRows.rows makes the rows' XML with the system's allocator (mimalloc, pyarrow's default,
    faults its freed pages in again, zeroed), and leaves the default allocator as it was."""
    import pyarrow as pa

    from pipeline.publish import downloads, xlsx_rows

    table = TABLES_BY_NAME["gpu_fit"]
    frame = downloads.published_frame(catalog, table)
    kinds = [xlsx_rows.KINDS.get(f.type, xlsx_rows.NUMBER) for f in table.fields]
    default, prepare = pa.default_memory_pool(), xlsx_rows.prepare_arrow
    making = []  # the allocator pyarrow's functions take while the rows are made
    monkeypatch.setattr(
        xlsx_rows, "prepare_arrow", lambda *args: making.append(pa.default_memory_pool().backend_name) or prepare(*args)
    )
    prepared = xlsx_rows.ArrowRows(frame.to_arrow(), kinds, [""] * len(kinds)).rows()
    assert isinstance(prepared, xlsx_rows.Prepared) and prepared.row.nbytes > 100_000
    assert making == ["system"] != [default.backend_name]
    assert pa.default_memory_pool().backend_name == default.backend_name


def test_a_large_prepared_sheet_is_deflated_from_its_rows_into_the_row_writers_workbook(catalog, monkeypatch):
    """A sheet of prepared rows (xlsx_rows.Prepared) is never text: its mark in the sheet's XML is
    replaced, as the archive is written, by the rows' bytes deflated from their Arrow buffer. The
    workbook is byte for byte the one the row writer makes through XlsxWriter's files, for a sheet of
    several megabytes (many deflate blocks) whose columns are full, partly empty or empty, and no
    temporary file is made for it."""
    import tempfile

    from pipeline.publish import downloads, xlsx_rows

    table = TABLES_BY_NAME["recommendations"]
    frame = downloads.published_frame(catalog, table)
    frame = pl.concat([frame] * (-(-20_000 // frame.height))).with_columns(
        pl.when(pl.int_range(pl.len()) % 3 == 0).then(pl.lit("ёлка & <b>")).otherwise(pl.col("link")).alias("link")
    )
    assert frame.height >= 20_000 and frame["hours"].null_count() and frame["link"].null_count() < frame.height
    stamp = downloads.data_date(catalog)
    widths, rows = downloads.sheet_inputs(table, frame)
    with_files = downloads.workbook_bytes(table, widths, frame.rows(), stamp)

    def no_file(*args, **kwargs):
        raise AssertionError("a temporary file for a prepared sheet")

    monkeypatch.setattr(tempfile, "mkstemp", no_file)
    monkeypatch.setattr(tempfile, "mkdtemp", no_file)
    prepared = rows.rows()
    assert isinstance(prepared, xlsx_rows.Prepared) and len(prepared.data()) > 5_000_000
    assert downloads.workbook_bytes(table, widths, prepared, stamp) == with_files
    with zipfile.ZipFile(io.BytesIO(with_files)) as z:
        assert z.read("xl/worksheets/sheet1.xml").count(b"<row ") == frame.height + 1


def test_a_small_sheet_made_in_memory_is_the_workbook_made_with_files(catalog, monkeypatch):
    """A sheet of fewer than IN_MEMORY_ROWS rows is made without a temporary file (its rows and parts in
    memory): byte for byte the workbook XlsxWriter makes through its files, for every table."""
    import tempfile

    from pipeline.publish import downloads

    stamp = downloads.data_date(catalog)
    inputs = {t.name: downloads.sheet_inputs(t, downloads.published_frame(catalog, t)) for t in ALL_TABLES}
    monkeypatch.setattr(downloads, "IN_MEMORY_ROWS", 0)
    with_files = {t.name: downloads.workbook_bytes(t, *inputs[t.name], stamp) for t in ALL_TABLES}

    def no_file(*args, **kwargs):
        raise AssertionError("a temporary file for a workbook made in memory")

    monkeypatch.setattr(downloads, "IN_MEMORY_ROWS", 10**9)
    monkeypatch.setattr(tempfile, "mkstemp", no_file)
    monkeypatch.setattr(tempfile, "mkdtemp", no_file)
    for table in ALL_TABLES:
        assert downloads.workbook_bytes(table, *inputs[table.name], stamp) == with_files[table.name], table.name


def test_handing_a_sheet_to_the_workbook_child_leaves_the_frame_as_it_was(catalog, monkeypatch):
    """sheet_inputs and arrow_for_duckdb take the frame's Arrow table without aligning the frame's own
    chunks (polars' to_arrow does that in place): the Parquet file written from the same frame has the
    same row groups whether or not its workbook was made in this build (a workbook can come from the
    cache), and whenever the DuckDB file's thread reads it."""
    import polars as pl

    from pipeline.publish import downloads

    monkeypatch.setattr(downloads, "PREPARE_ROWS", 2)
    table = TABLES_BY_NAME["models"]
    frame = downloads.published_frame(catalog, table)
    frame = pl.concat([frame.head(3), frame.slice(3)], rechunk=False)
    name = table.fields[1].name
    frame = frame.with_columns(pl.Series(name, frame[name].to_list(), dtype=frame.schema[name]))  # chunks not aligned
    chunks = frame.n_chunks("all")
    assert len(set(chunks)) == 2
    before = downloads.parquet_bytes(frame)
    downloads.sheet_inputs(table, frame)
    assert frame.n_chunks("all") == chunks and downloads.parquet_bytes(frame) == before
    assert downloads.arrow_for_duckdb(frame).num_rows == frame.height  # nor does the DuckDB file's thread
    assert frame.n_chunks("all") == chunks and downloads.parquet_bytes(frame) == before


def _pinned_zip_by_deflating_again(data: bytes, stamp: dt.datetime) -> bytes:
    """downloads._pinned_zip as it was: every entry inflated and deflated again by writestr (with the
    deflater and level the workbooks are deflated with)."""
    import io

    from pipeline.publish.downloads import ZIP_LEVEL, DeflateZip

    date_time = (max(stamp.year, 1980), stamp.month, stamp.day, 0, 0, 0)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, DeflateZip(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            info = zipfile.ZipInfo(name, date_time=date_time)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            dst.writestr(info, src.read(name), compresslevel=ZIP_LEVEL)
    return out.getvalue()


def test_a_workbook_part_is_deflated_the_same_however_its_content_is_cut():
    """ISA-L's deflate depends on how its input is cut into calls; _Deflater feeds it whole blocks, so
    a part written in one piece (XlsxWriter's writestr) or in several (a sheet's prepared rows spliced
    in) gives the same bytes, which inflate to the content."""
    import random
    import zlib

    from pipeline.publish.downloads import _Deflater

    rng = random.Random(7)
    words = [f'<c r="A{i}" s="3"><v>{i * 7919 % 1000}</v></c>'.encode() for i in range(600_000)]
    data = b"".join(rng.choice(words) for _ in range(120_000))  # several of _Deflater.BLOCK
    assert len(data) > 3 * _Deflater.BLOCK

    def deflated(parts) -> bytes:
        deflater = _Deflater()
        return b"".join(deflater.compress(part) for part in parts) + deflater.flush()

    whole = deflated([data])
    assert zlib.decompress(whole, -15) == data
    for cuts in ([1], [_Deflater.BLOCK - 1, _Deflater.BLOCK + 5], sorted(rng.sample(range(1, len(data)), 9))):
        edges = [0, *cuts, len(data)]
        parts = [memoryview(data)[a:b] for a, b in zip(edges, edges[1:], strict=False)]
        assert deflated(parts) == whole, cuts
    assert deflated([b""]) == deflated([]) and zlib.decompress(deflated([]), -15) == b""


def test_pinning_the_dates_copies_the_deflated_bytes_of_the_same_archive(catalog, tmp_path):
    """_pinned_zip copies each entry's deflated bytes: the archive is byte for byte the one deflating
    again gives, for every table's workbook (small and large sheets, the dictionary, styles)."""
    from pipeline.publish import downloads

    stamp = downloads.data_date(catalog)
    for table in ALL_TABLES:
        frame = catalog[table.name].select(table.columns)
        widths, rows = downloads.sheet_inputs(table, frame)
        wb, contents = downloads._workbook()
        wb.set_properties({"created": stamp})
        ws = wb.add_worksheet(table.name)
        ws.write_string(0, 0, "h")
        for r in range(1, 2000):  # a part big enough to be deflated in several blocks
            ws.write_string(r, 0, f"строка {r * 7919 % 1000}")
        wb.close()
        raw = contents()
        assert downloads._pinned_zip(raw, stamp) == _pinned_zip_by_deflating_again(raw, stamp), table.name
        book = downloads.workbook_bytes(table, widths, rows, stamp)
        assert _pinned_zip_by_deflating_again(book, stamp) == book, table.name


def test_a_table_too_large_to_hold_is_written_as_it_is_made_and_listed_with_its_hash(catalog, tmp_path, monkeypatch):
    """A table over EXCEL_MAX_ROWS rows: its CSV goes straight into its file (downloads.Streamed), the
    same bytes as csv_bytes, and the manifest has their SHA-256 (the build is intact)."""
    import hashlib

    from pipeline import fingerprint
    from pipeline.publish import downloads

    monkeypatch.setattr(downloads, "EXCEL_MAX_ROWS", 40)
    out = tmp_path / "out"
    build(SOURCES, out, force=True)
    assert fingerprint.intact(out, fingerprint.read_state(out))
    table = TABLES_BY_NAME["server_fit"]
    written = (out / "site" / "data" / "server_fit.csv").read_bytes()
    assert written == downloads.csv_bytes(table, catalog["server_fit"].select(table.columns))
    manifest = json.loads((out / "site" / "manifest.json").read_text(encoding="utf-8"))["files"]
    assert manifest["data/server_fit.csv"] == hashlib.sha256(written).hexdigest()
    assert not (out / "site" / "data" / "server_fit.xlsx").exists()


@pytest.mark.parametrize("collisions", [(), (0,), (2**64 - 1,), (0, 2**63, 2**64 - 1)])
def test_a_duplicated_primary_key_never_reaches_the_duckdb_file(catalog, monkeypatch, collisions):
    """unique_keys compares only the rows whose 64-bit key hashes are equal (sorted neighbours): a real
    duplicate is named, rows whose hashes collide but whose keys differ pass, whatever the hashes (a
    mix of hashes below and from 2^63 once raised a TypeError)."""
    from pipeline.publish import downloads

    table = TABLES_BY_NAME["server_fit"]
    frame = catalog["server_fit"].select(table.columns)
    if collisions:  # the rows share these few hashes: every key is compared exactly
        monkeypatch.setattr(
            pl.DataFrame,
            "hash_rows",
            lambda self, *a, **k: pl.Series(
                [collisions[i % len(collisions)] for i in range(self.height)], dtype=pl.UInt64
            ),
        )
    downloads.unique_keys(frame, table)  # the catalog's keys are unique
    twice = pl.concat([frame, frame.slice(7, 1)])
    key = {k: frame.row(7, named=True)[k] for k in table.primary_key}
    with pytest.raises(ValueError, match=re.escape(f"server_fit: the primary key {key} is not unique")):
        downloads.unique_keys(twice, table)


def test_the_duckdb_file_holds_the_same_tables_whether_text_comes_as_views_or_as_copies(catalog, tmp_path, monkeypatch):
    """arrow_for_duckdb hands polars' text over as Arrow string views where pyarrow has them, and as
    large strings (a copy) where it does not (pyarrow 15, the declared floor): the file is the same."""
    import pyarrow

    from pipeline.publish import downloads

    table = TABLES_BY_NAME["server_fit"]
    frame = catalog["server_fit"].select(table.columns)
    assert pyarrow.types.is_string_view(downloads.arrow_for_duckdb(frame).schema.field("model_id").type)
    held = {}
    for views in (True, False):
        if not views:
            monkeypatch.delattr(pyarrow, "string_view")
            assert pyarrow.types.is_large_string(downloads.arrow_for_duckdb(frame).schema.field("model_id").type)
        path = tmp_path / f"views-{views}.duckdb"
        downloads.write_database(path, catalog)
        with duckdb.connect(str(path), read_only=True) as con:
            held[views] = {
                t.name: (
                    con.sql(
                        f"SELECT column_name, data_type FROM information_schema.columns WHERE table_name = '{t.name}' ORDER BY ordinal_position"
                    ).fetchall(),
                    con.sql(f'SELECT count(*), sum(hash(columns(*))) FROM "{t.name}"').fetchall(),
                )
                for t in ALL_TABLES
            }
    assert held[True] == held[False]
    assert held[True]["server_fit"][1][0][0] == catalog["server_fit"].height


def test_the_duckdb_file_of_a_large_table_has_no_unused_blocks(catalog, tmp_path):
    """The DuckDB file is written by one DuckDB thread (downloads.DATABASE_CONFIG; with two, a 10^6-row
    build's file was 117 MB instead of 66 MB, 40 % of its blocks unused). A table of three row groups'
    worth of rows, made from the real recommendations, keeps its order and leaves no free block."""
    from pipeline.publish import downloads

    table = TABLES_BY_NAME["recommendations"]
    small = catalog["recommendations"].select(table.columns)
    copies = -(-300_000 // small.height)
    frame = pl.concat([small] * copies).with_columns(
        server_id=pl.col("server_id") + "-" + (pl.int_range(pl.len()) // small.height).cast(pl.String)
    )
    path = tmp_path / "large.duckdb"
    downloads.write_database(path, Catalog({table.name: frame}, {}), replace=[table])
    with duckdb.connect(str(path), read_only=True) as con:
        [(_, _, _, total, used, free, *_)] = con.sql("PRAGMA database_size").fetchall()
        ids = con.sql("SELECT server_id FROM recommendations").fetchall()
    assert (free, used) == (0, total)
    assert [i for (i,) in ids] == frame["server_id"].to_list()


def test_the_duckdb_file_does_not_try_fsst_on_its_text(catalog, tmp_path, monkeypatch):
    """Trying FSST on every text segment was 7-8 % of the DuckDB file's CPU for a file of the same size
    (downloads.DATABASE_UNTRIED_COMPRESSION). Distinct long texts with a shared stem, which FSST wins on
    when tried (checked here with none disabled), are stored another way; the rows are
    the same."""
    from pipeline.publish import downloads

    table = TABLES_BY_NAME["recommendations"]
    small = catalog["recommendations"].select(table.columns)
    frame = pl.concat([small] * -(-20_000 // small.height)).with_columns(
        server_id="сервер каталога с длинным общим названием, номер " + pl.int_range(pl.len()).cast(pl.String)
    )
    kinds, settings = {}, downloads.DATABASE_SETTINGS
    for tried in (False, True):
        path = tmp_path / f"{tried}.duckdb"
        monkeypatch.setattr(
            downloads, "DATABASE_SETTINGS", "SET disabled_compression_methods = ''" if tried else settings
        )
        downloads.write_database(path, Catalog({table.name: frame}, {}), replace=[table])
        with duckdb.connect(str(path), read_only=True) as con:
            info = "SELECT DISTINCT compression FROM pragma_storage_info('recommendations') WHERE column_name = 'server_id'"
            kinds[tried] = {kind for (kind,) in con.sql(info).fetchall()}
            assert [i for (i,) in con.sql("SELECT server_id FROM recommendations").fetchall()] == frame[
                "server_id"
            ].to_list()
    assert "FSST" in kinds[True]
    assert "FSST" not in kinds[False]
