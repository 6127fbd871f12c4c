"""Downloads for analysts: every source and derived table as files under site/data/.

Per table: `<table>.csv` (UTF-8 with BOM, comma, dot decimal), `<table>.xlsx` (Russian
headers, typed cells, a data dictionary sheet), `<table>.parquet` and `<table>.metadata.json`;
all tables together in `gpu-finetune.duckdb`. Names are stable (no content hash), and every
file but the DuckDB one is byte-identical across builds of the same sources.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import io
import itertools
import json
import os
import struct
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO

import duckdb
import polars as pl
import xlsxwriter
import xlsxwriter.worksheet

from pipeline.combine import Catalog, lineage
from pipeline.frame_memo import frame_digest
from pipeline.parallel import once, start_map
from pipeline.publish import datapackage, xlsx_rows
from pipeline.render.format import FORMULA_PREFIXES
from pipeline.schema import ALL_TABLES, DUCKDB_TYPES, MONEY_UNITS, TABLES_BY_NAME, TYPE_NAMES_RU, Field, Table, ddl
from pipeline.words import labels

DATABASE = "gpu-finetune.duckdb"
# The oldest DuckDB storage format that keeps what the file uses (tables, NOT NULL, comments): every
# DuckDB from 1.0 on opens it, and so do the R, JDBC and DBeaver clients that lag behind the Python
# package. The default is the writer's own newest format, which older clients refuse. The file has no
# primary keys: DuckDB 1.0.0 refuses a file with a key index written by a newer DuckDB, even in this
# format ("Serialization Error ... field id: 103"); write_database checks the keys' uniqueness instead.
DATABASE_STORAGE = "v1.0.0"
# One DuckDB thread writes the file, in at most DATABASE_MEMORY. With two, each thread filled row groups
# of its own and closing the file rewrote them, leaving the first ones' blocks unused inside it (40 %
# of them): at 10^7 rows a 1,018 MB file, 32 s of CPU and 2.8 GB more memory while closing, against
# 623 MB and 19 s on one thread. Without the limit DuckDB keeps the blocks it wrote until the file is
# closed: 0.8 GB more at 10^7 rows, 0.3 GB with it (docs/operations.md, "Sixth round").
DATABASE_MEMORY = "256MB"
# DuckDB tries each compression method on every column segment and keeps the smallest. FSST (for text)
# is rarely kept: at 10^6 and 10^7 rows the file has the same size without it, but trying it was 7-8 %
# of the file's CPU (22.1 against 23.9 s at 10^7 rows; docs/operations.md, "Twentieth round"). The
# real catalog's file kept it for five short text columns, now stored another way in a file of the same size.
# Set once connected (DATABASE_SETTINGS): DuckDB 2.0 ignores it, silently, in the connection's config.
DATABASE_UNTRIED_COMPRESSION = "fsst"
DATABASE_CONFIG = {"storage_compatibility_version": DATABASE_STORAGE, "threads": 1, "memory_limit": DATABASE_MEMORY}
DATABASE_SETTINGS = f"SET disabled_compression_methods = '{DATABASE_UNTRIED_COMPRESSION}'"
DATABASE_OLDEST_READER = "1.0.0"  # tested by bench/duckdb_readers.py with exactly this version
FORMATS = ("csv", "xlsx", "parquet")
# The largest table offered as XLSX; a larger one is offered as CSV and Parquet only, and the data page
# says so. A sheet could hold 1,048,575 rows (plus the header), but XlsxWriter writes cell by cell in
# Python (about 40 s for a million rows) and Excel opens such a sheet slowly: past 100 000 rows the
# CSV and Parquet files serve an analyst better.
EXCEL_MAX_ROWS = 100_000
# From this many rows a sheet's rows are made as whole columns (xlsx_rows.prepare_arrow, in the
# workbook child, from the Arrow table the build process hands it); below it the child writes the
# tuples the build process made a cell at a time, about 1 µs a cell more than writing prepared rows.
PREPARE_ROWS = 5_000

# What each table without a reference_id column of its own is made from: its sources are the
# references of those tables. A source table's is typed here; a derived table's is what its step
# of combine.py reads (combine.lineage).
SOURCE_MADE_FROM = {"legacy_offer_jobs": ("legacy_offers",)}
MADE_FROM = SOURCE_MADE_FROM | {
    name: inputs for name, inputs in lineage().items() if "reference_id" not in TABLES_BY_NAME[name].columns
}

# Excel number formats; Excel shows them with the reader's locale ("1 200,0" in Russian).
GB_FORMAT = "#,##0.0"
RUB_FORMAT = '#,##0" ₽"'
INT_FORMAT = "#,##0"
DATE_FORMAT = "dd.mm.yyyy"
MAX_WIDTH = 60


def any_too_large(catalog: Catalog) -> bool:
    """Whether a table has more rows than a workbook takes (its CSV is then downloads.Streamed)."""
    return any(catalog.height(t.name) > EXCEL_MAX_ROWS for t in ALL_TABLES)


def file_names(table: Table, rows: int) -> dict[str, str]:
    """Format -> file name of a table's downloads; no workbook above EXCEL_MAX_ROWS rows."""
    return {fmt: f"{table.name}.{fmt}" for fmt in FORMATS if fmt != "xlsx" or rows <= EXCEL_MAX_ROWS}


@dataclass
class TableFiles:
    """A table's CSV bytes, the CSV it would have without the spreadsheet guard where that matters
    (_typed_apostrophes) and, once written, its Parquet bytes, for the frame whose Arrow IPC bytes
    hash to `key` (frame_memo.frame_digest): the same IPC bytes are the same frame, so the same files."""

    key: str
    csv: bytes
    typed: str
    parquet: bytes | None = None


def table_files(table: Table, frame: pl.DataFrame, kept: dict[str, TableFiles] | None) -> TableFiles:
    """The table's TableFiles: the kept one when its frame is the same, else made now. With `kept` None
    (a process that keeps nothing for a next build) it is made now, without its key: the frame's digest
    is an Arrow IPC copy of it hashed (0.09 s of the build's own path at 10^5 rows)."""
    if kept is None:
        return TableFiles("", csv_bytes(table, frame), _typed_apostrophes(frame, table))
    key = frame_digest(frame)
    files = kept.get(table.name)
    if files is None or files.key != key:
        files = TableFiles(key, csv_bytes(table, frame), _typed_apostrophes(frame, table))
    return files


def start_workbooks(  # noqa: PLR0913
    catalog: Catalog,
    kept: dict[tuple, bytes] | None = None,
    made_with: str = "",
    read: bool = True,
    files: dict[str, TableFiles] | None = None,
) -> Workbooks:
    """Start making the workbooks in a forked child while this process goes on (a build renders
    meanwhile); the returned Workbooks has every table's TableFiles (its CSV) at once, and calling it
    gives them with the XLSX bytes.
    `files` (pipeline.warm: the last build's, by table) keeps the CSV and Parquet bytes of a table
    whose frame did not change, so that an edit in `just serve` serialises only the tables it changed;
    None in a process that makes one build (nothing is kept, and no frame's digest is taken).

    The workbooks are the slow part of writing, so each is made only when its table's cells changed:
    a warm process (`just serve`) keeps each in `kept` (pipeline.warm: the last build's, by table and
    content), and, when `made_with` names what else the bytes depend on (build_inputs: the pipeline's
    code and the templates), a new process takes it from the user cache (WORKBOOK_NAMESPACE); `read`
    False (build --force) makes every one anew, and still stores it. This process joins the child on
    the ones not begun when it asks for them.
    """
    kept = {} if kept is None else kept
    stamp = data_date(catalog)
    texts, workbooks, missing = {}, {}, {}
    for table in ALL_TABLES:
        if catalog.height(table.name) > EXCEL_MAX_ROWS:
            continue  # no workbook; its CSV is made when it is written (iter_downloads), not held
        frame = published_frame(catalog, table)
        texts[table.name] = made = table_files(table, frame, files)
        # The workbook holds the text as it is (a string cell is never a formula): keyed on the
        # CSV, and on the text itself where the CSV cannot tell an added "'" from one typed.
        workbooks[table.name] = key = (table.name, _digest(made.csv), stamp, _digest(made.typed), made_with)
        if key not in kept and (stored := _stored_workbook(key) if made_with and read else None) is not None:
            kept[key] = stored
        if key not in kept:
            missing[key] = (table, *sheet_inputs(table, frame), stamp)
    if files is not None:
        files.clear()  # only this build's tables: an editing session does not pile up old bytes
        files.update(texts)
    weights = [len(job[2]) * len(job[0].fields) + 50 for job in missing.values()]
    making = start_map(_xlsx_job, list(missing.values()), weights, alone=True, read_early=True)

    def finish() -> tuple[dict[str, bytes], dict[str, bytes]]:
        made = dict(zip(missing, making(), strict=True))
        if made_with:
            for key, book in made.items():
                _store_workbook(key, book)
        now = {key: made[key] if key in made else kept[key] for key in workbooks.values()}
        kept.clear()  # only this build's: an editing session does not pile up old workbooks
        kept.update(now)
        return texts, {name: now[key] for name, key in workbooks.items()}

    return Workbooks(texts, finish)


class Workbooks:
    """What start_workbooks started: `texts`, each table's TableFiles (its CSV), made already; the call
    waits for the workbooks (once) and gives (texts, XLSX bytes by table)."""

    def __init__(self, texts: dict[str, TableFiles], finish: Callable[[], tuple[dict, dict[str, bytes]]]) -> None:
        self.texts, self._finish = texts, once(finish)

    def __call__(self) -> tuple[dict[str, TableFiles], dict[str, bytes]]:
        return self._finish()


WORKBOOK_NAMESPACE = "workbook"  # pipeline.cache: a table's XLSX bytes, by its cells and what made them
WORKBOOK_FORMAT = "xlsx/2"
WORKBOOKS_KEPT = 256  # entries the user cache keeps (the newest): about ten builds' worth of edits


def made_with(inputs: dict[str, str]) -> str:
    """What a workbook's bytes depend on besides its table, from a build's inputs (fingerprint.inputs):
    the pipeline's code (the writer, the registry's labels), the templates (labels.toml names the
    dictionary sheet's headers), XlsxWriter's version and ISA-L's (python-isal's: its deflate, _Deflater)."""
    import isal

    from pipeline import cache

    return cache.make_key(
        WORKBOOK_FORMAT, inputs["code"], inputs["templates"], xlsxwriter.__version__, isal.__version__
    )


def _workbook_cache_key(key: tuple) -> str:
    from pipeline import cache

    name, csv, stamp, typed, made = key
    return cache.make_key(WORKBOOK_FORMAT, name, csv, stamp.isoformat(), typed, made)


def _stored_workbook(key: tuple) -> bytes | None:
    """The workbook the user cache holds under `key`, if its entry verifies (pipeline.cache) and is a zip."""
    from pipeline import cache

    book = cache.Cache().get(WORKBOOK_NAMESPACE, _workbook_cache_key(key))
    return book if book is not None and book.startswith(b"PK\x03\x04") else None


def _store_workbook(key: tuple, book: bytes) -> None:
    from pipeline import cache

    store = cache.Cache()
    if store.put(WORKBOOK_NAMESPACE, _workbook_cache_key(key), book):
        store.prune(WORKBOOK_NAMESPACE, WORKBOOKS_KEPT)


def published_frame(catalog: Catalog, table: Table) -> pl.DataFrame:
    """The table's columns in the schema's order (in_order)."""
    return in_order(catalog[table.name], table)


def published_pieces(catalog: Catalog, table: Table) -> Iterator[pl.DataFrame]:
    """published_frame in pieces, one after the other (Catalog.pieces: server_fit's and recommendations'
    rows made piece by piece, never held whole; any other table as its one frame)."""
    return (in_order(piece, table) for piece in catalog.pieces(table.name))


def in_order(frame: pl.DataFrame, table: Table) -> pl.DataFrame:
    """`frame` with the table's columns in the schema's order: the frame itself when it has just those
    (a polars select costs a query plan, and a build asks for every table several times)."""
    return frame if frame.columns == list(table.columns) else frame.select(table.columns)


def csv_bytes(table: Table, frame: pl.DataFrame) -> bytes:
    """The table's CSV download: UTF-8 with a BOM (Excel), ISO dates, spreadsheet-safe text cells.
    Written as bytes: polars' text result is its bytes decoded, which the file would encode again."""
    buffer = io.BytesIO()
    write_csv(table, frame, buffer)
    return buffer.getvalue()


def write_csv(table: Table, frame: pl.DataFrame, file: BinaryIO | str) -> None:
    """csv_bytes, written to a binary file or to the file at a path."""
    spreadsheet_safe_frame(frame, table).write_csv(file, include_bom=True, date_format="%Y-%m-%d")


def write_csv_pieces(table: Table, pieces: Callable[[], Iterator[pl.DataFrame]], file: BinaryIO | str) -> None:
    """write_csv of the frames `pieces()` gives, one after the other, as one file: the same bytes as
    write_csv of them concatenated (the header and the BOM once)."""
    _write_pieces(pieces(), table, file, None)


def _one_or_more(pieces: Iterator[pl.DataFrame]) -> tuple[pl.DataFrame, Iterator[pl.DataFrame] | None]:
    """(the first piece, None) when there is one piece, else (the first, every piece again from it)."""
    first, second = next(pieces), next(pieces, None)
    return first, None if second is None else itertools.chain((first, second), pieces)


class Streamed:
    """A download too large to hold as bytes (the CSV of a table over EXCEL_MAX_ROWS rows: 4 GB at
    10^7 rows, and its bytes were copied once more by BytesIO): `write(target)` writes it straight
    into its file, given by path (paths.write_file: polars then writes without calling back into
    Python, which a build's download thread would pay for at every chunk; staging.write_tree hashes
    the file once written) or as a binary file. bytes() makes it in memory."""

    def __init__(self, write: Callable[[BinaryIO | str], None]) -> None:
        self.write = write

    def __bytes__(self) -> bytes:
        buffer = io.BytesIO()
        self.write(buffer)
        return buffer.getvalue()


def csv_text(table: Table, frame: pl.DataFrame) -> str:
    """csv_bytes as text."""
    return csv_bytes(table, frame).decode("utf-8")


def _digest(text: str | bytes) -> str:
    return hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


def download_paths(catalog: Catalog) -> list[str]:
    """The name of every download under site/data/ (known before any of them is made)."""
    names = [DATABASE, datapackage.NAME]
    for table in ALL_TABLES:
        names += [*file_names(table, catalog.height(table.name)).values(), f"{table.name}.metadata.json"]
    return names


def iter_downloads(
    catalog: Catalog, workbooks: Workbooks | None = None, release: dict | None = None, together: bool = False
) -> Iterator[tuple[str, bytes]]:
    """Every table as CSV, XLSX, Parquet and metadata.json, then datapackage.json, as (name under
    site/data/, bytes), one file at a time: a build writes each as it comes and holds no more than
    one table's files (all but the DuckDB file, see write_database). Every Parquet file comes before
    the CSV of a table too large for a workbook (a Streamed one, the longest to write): the DuckDB
    file, keyed on the Parquet files' hashes, can be begun meanwhile (staging.Downloads). With
    `together` (a build whose DuckDB file waits for no hash) such a table's CSV comes first, in its
    turn, and is made in one pass with its Parquet file (write_csv_and_parquet: each of its pieces is
    made once, not once a file), which follows it. `workbooks`: what start_workbooks(catalog)
    returned, if the build started them early; `release` the current release
    (pipeline/publish/releases.py), whose version and date datapackage.json carries."""
    workbooks = workbooks or start_workbooks(catalog)
    texts = dict(workbooks.texts)  # the workbooks are asked for last: a build's child makes them meanwhile
    licence = datapackage.data_licence()
    metadata_of: dict[str, dict] = {}
    known: dict = {}  # what the tables' sidecars share (table_metadata)
    streamed = []
    for table in ALL_TABLES:
        made = texts.pop(table.name, None)
        if made is not None:
            yield f"{table.name}.csv", made.csv
            parquet = made_parquet(made, catalog, table)
        elif together:  # too large for a workbook: its CSV, then its Parquet file, from one pass
            pieces = partial(published_pieces, catalog, table)
            sink: list[bytes] = []
            yield f"{table.name}.csv", Streamed(partial(write_csv_and_parquet, table, pieces, sink=sink))
            parquet = sink.pop() if sink else parquet_of_pieces(pieces())  # (the CSV not written: a pass of its own)
        else:  # too large for a workbook: written in pieces where the table is made in pieces
            pieces = partial(published_pieces, catalog, table)
            streamed.append((f"{table.name}.csv", Streamed(partial(write_csv_pieces, table, pieces))))
            parquet = parquet_of_pieces(pieces())
        yield f"{table.name}.parquet", parquet
        del made, parquet
        metadata_of[table.name] = metadata = table_metadata(table, catalog, licence, known)
        yield f"{table.name}.metadata.json", (json.dumps(metadata, ensure_ascii=False, indent=2) + "\n").encode()
    yield from streamed
    _, books = workbooks()
    for table in ALL_TABLES:
        if table.name in books:
            yield f"{table.name}.xlsx", books.pop(table.name)
    yield (
        datapackage.NAME,
        datapackage.package_bytes(
            metadata_of,
            licence,
            data_date(catalog).strftime("%Y-%m-%dT%H:%M:%SZ"),
            datapackage.package_text(),
            release,
        ),
    )


def parquet_bytes(frame: pl.DataFrame) -> bytes:
    """A table's Parquet download."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer, compression="zstd", statistics=True)
    return buffer.getvalue()


def parquet_of_pieces(pieces: Iterator[pl.DataFrame]) -> bytes:
    """parquet_bytes of a table given in pieces: one piece as polars writes it; several, each a row
    group of one file (pyarrow's writer, the same compression and statistics), never held together."""
    sink: list[bytes] = []
    _write_pieces(pieces, None, None, sink)
    return sink[0]


def write_csv_and_parquet(
    table: Table, pieces: Callable[[], Iterator[pl.DataFrame]], file: BinaryIO | str, sink: list[bytes]
) -> None:
    """write_csv_pieces into `file` and parquet_of_pieces appended to `sink`, in one pass over the
    pieces: each piece is made once for both (at 10^7 rows a pass over recommendations' and
    server_fit's pieces is 3.6 s of CPU). The same bytes as the two made apart."""
    _write_pieces(pieces(), table, file, sink)


def _write_pieces(
    pieces: Iterator[pl.DataFrame], table: Table | None, csv: BinaryIO | str | None, parquet: list[bytes] | None
) -> None:
    """The pieces' CSV into `csv` (a path or a binary file; `table`'s) and their Parquet bytes appended
    to `parquet`, either or both, in one pass: one piece is written as a frame is (write_csv,
    parquet_bytes); several as one file each, the Parquet file a row group a piece."""
    first, every = _one_or_more(pieces)
    if every is None:
        if csv is not None:
            write_csv(table, first, csv)
        if parquet is not None:
            parquet.append(parquet_bytes(first))
        return
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(csv, "wb")) if isinstance(csv, str | os.PathLike) else csv
        writer = None
        if parquet is not None:
            schema = first.to_arrow().schema
            writer = stack.enter_context(pq.ParquetWriter(buffer, schema, compression="zstd", write_statistics=True))
        for n, piece in enumerate(every):
            if writer is not None:
                writer.write_table(piece.to_arrow(), row_group_size=piece.height or None)
            if out is not None:
                safe = spreadsheet_safe_frame(piece, table)
                safe.write_csv(out, include_bom=n == 0, include_header=n == 0, date_format="%Y-%m-%d")
    if parquet is not None:
        parquet.append(buffer.getvalue())


def made_parquet(made: TableFiles, catalog: Catalog, table: Table) -> bytes:
    """The Parquet bytes of a table whose TableFiles `made` holds (made from its published_frame when not
    yet, and kept there: start_workbooks' `files`, what a warm process keeps). The frame is asked for
    only then: server_fit's is made when asked (Catalog.fits). Written from a clone (the same columns,
    no copy): the DuckDB file's thread makes them while the pages query the catalog's frames, and
    polars 1.28 (the declared floor) borrows a frame exclusively while it writes it: the pages' query
    of the same frame then fails ("Already mutably borrowed")."""
    if made.parquet is None:
        made.parquet = parquet_bytes(published_frame(catalog, table).clone())
    return made.parquet


def write_database(  # noqa: PLR0913
    path: Path,
    catalog: Catalog,
    replace: list[Table] | None = None,
    dropped: tuple[str, ...] = (),
    connected: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    earlier: Callable[[Table], tuple[Iterator[pl.DataFrame], int] | None] | None = None,
) -> list[str]:
    """All tables in one new DuckDB file at `path` (which safe_path gave; it must not exist).

    With `replace`, `path` is instead a verified copy of an earlier build's file whose other tables
    hold what this build's would (database_keys says which): only the tables in `replace` are made
    again, and those named in `dropped` removed. A table in `replace` for which `earlier` gives the
    rows the copy holds (the previous build's, in pieces, and their count) is updated in place where
    few of its rows changed (database_update); the others are dropped, the drop committed, so that
    their blocks are reused (else the file of a 10^7-row build after one price edit was twice the
    size of a forced build's), and written anew. Returns the names of the tables updated in place.
    DuckDB's own I/O errors (a full disk) are raised as OSError, like every other write. `connected`
    is given the connection before anything is written (a build that stops interrupts it from
    another thread: staging._Database)."""
    if replace is None and (os.path.lexists(path) or os.path.lexists(f"{path}.wal")):
        raise FileExistsError(errno.EEXIST, "the database file exists already", str(path))
    try:
        con = duckdb.connect(str(path), config=DATABASE_CONFIG)
        con.execute(DATABASE_SETTINGS)
        if connected is not None:
            connected(con)
        # One transaction: committing each CREATE, INSERT and COMMENT on its own took most of a second.
        con.execute("BEGIN TRANSACTION")
        xlsx = labels()["xlsx"]
        updated = [t.name for t in replace or () if _updated_in_place(con, catalog, t, earlier)]
        remade = [t for t in (ALL_TABLES if replace is None else replace) if t.name not in updated]
        if replace is not None and (remade or dropped):
            for name in (*(t.name for t in remade), *dropped):
                con.execute(f'DROP TABLE IF EXISTS "{name}"')
            con.execute("COMMIT")
            con.execute("CHECKPOINT")
            con.execute("BEGIN TRANSACTION")
        for table in remade:
            con.execute(f'DROP TABLE IF EXISTS "{table.name}"')
            con.execute(ddl(table, primary_key=False))
            con.register("frame", arrow_for_database(catalog, table))
            con.execute(f'INSERT INTO "{table.name}" SELECT * FROM frame')
            con.unregister("frame")
            con.execute(comment_sql(table, xlsx))  # one call: a call per statement cost more than the statements
        con.execute("COMMIT")
        con.close()
    except duckdb.Error as exc:
        # A full disk comes as an IOException or, at COMMIT, as a TransactionException that says so.
        text = str(exc)
        io = isinstance(exc, duckdb.IOException) or "Could not write file" in text or "No space left" in text
        if not io:
            raise
        codes = {"No space left": errno.ENOSPC, "Read-only": errno.EROFS, "Permission denied": errno.EACCES}
        code = next((c for words, c in codes.items() if words in text), errno.EIO)
        raise OSError(code, os.strerror(code), str(path)) from exc
    return updated


def _updated_in_place(con, catalog: Catalog, table: Table, earlier) -> bool:
    """Whether `table` of the file was updated in place (write_database): `earlier` gives the rows the
    file holds, at most database_update.UPDATE_MAX_SHARE of them changed, and writing them rewrites at
    most UPDATE_MAX_REWRITE of the table's column segments."""
    from pipeline.publish import database_update

    held = earlier(table) if earlier is not None else None
    if held is None:
        return False
    rows, count = held
    if count != catalog.height(table.name):  # (a row added near the end would be found only there)
        return False
    limit = int(count * database_update.UPDATE_MAX_SHARE)
    found = database_update.changed_rows(rows, published_pieces(catalog, table), limit)
    if found is None:
        return False
    share = database_update.rewritten_share(*found, len(table.columns), count)
    if share > database_update.UPDATE_MAX_REWRITE:
        return False
    database_update.update_in_place(con, table.name, *found, arrow_for_duckdb)
    return True


def arrow_for_database(catalog: Catalog, table: Table):
    """What a table's INSERT reads: its one frame (arrow_for_duckdb, its primary key checked), or its
    pieces (server_fit's or recommendations', one row per job x server by construction) as one stream of
    Arrow batches, made as DuckDB reads them. One INSERT of them all: an INSERT per piece in the file's
    one transaction held every piece until COMMIT (1 GB at 10^7 rows of server_fit), and a COMMIT per
    piece left 8 % of the file's blocks unused."""
    first, every = _one_or_more(published_pieces(catalog, table))
    if every is None:
        unique_keys(first, table)
        return arrow_for_duckdb(first)
    import pyarrow

    schema = arrow_for_duckdb(first.clear()).schema
    batches = (b for piece in every for b in arrow_for_duckdb(piece).to_batches())
    return pyarrow.RecordBatchReader.from_batches(schema, batches)


def arrow_for_duckdb(frame: pl.DataFrame):
    """The frame as an Arrow table for DuckDB: its text as string views, polars' own, handed over
    without a copy, where pyarrow has them (16 and later; DuckDB reads them from 1.2). Arrow's large
    strings (polars' default, and pyarrow 15's only kind) copy every text column: at 10^7 rows of
    recommendations, 1 GB more while the file is written. Taken from a clone: to_arrow aligns the
    chunks of the frame it is called on, in place, and the catalog's frame is the one the Parquet file
    (whose row groups follow its chunks) is written from, meanwhile, by the downloads' thread."""
    import pyarrow

    frame = frame.clone()  # a new frame of the same columns: no copy
    return frame.to_arrow(compat_level=pl.CompatLevel.newest()) if hasattr(pyarrow, "string_view") else frame.to_arrow()


def database_keys(parquet_hashes: dict[str, str], tables: tuple[Table, ...] = ALL_TABLES) -> dict[str, str]:
    """Per table (of `tables`), what its part of the DuckDB file is made from: its rows (the hash of
    its Parquet download, written from the same frame), its DDL and comments, and the DuckDB that
    writes it. Two builds with a table's key equal would put the same table into the file."""
    xlsx = labels()["xlsx"]  # read once: labels() reads and unpacks the whole file on each call
    return {
        t.name: hashlib.sha256(
            "\0".join(
                (
                    duckdb.__version__,
                    DATABASE_STORAGE,
                    parquet_hashes[t.name],
                    ddl(t, primary_key=False),
                    comment_sql(t, xlsx),
                )
            ).encode()
        ).hexdigest()
        for t in tables
    }


def duckdb_version() -> str:
    """The DuckDB that writes the database file (the data page says which)."""
    return duckdb.__version__


def unique_keys(frame: pl.DataFrame, table: Table) -> None:
    """The table's primary key is unique (the file itself declares no key): a ValueError, a bug, if not.

    Each key is hashed to 64 bits and the hashes sorted: equal neighbours are the only rows whose keys
    may be equal, and only those are compared. (is_duplicated on the keys themselves held a hash table
    of 10^7 rows' keys: 1.8 GB and 3.6 s for server_fit at 10^7 rows.)"""
    keys = frame.select(table.primary_key)
    hashes = keys.hash_rows().sort().to_numpy()
    same = hashes[1:] == hashes[:-1]
    if not same.any():
        return
    # As a UInt64 Series: a numpy array of hashes from 2^63 up was taken as another integer type (a TypeError).
    shared = pl.Series(hashes[1:][same], dtype=pl.UInt64)
    suspects = keys.with_row_index("__row_number").filter(keys.hash_rows().is_in(shared.implode()))
    duplicated = suspects.select(table.primary_key).is_duplicated()
    if duplicated.any():
        first = frame.row(suspects.filter(duplicated)["__row_number"][0], named=True)
        key = {k: first[k] for k in table.primary_key}
        raise ValueError(f"{table.name}: the primary key {key} is not unique; the DuckDB file would hold it twice")


def write_downloads(data_dir: Path, catalog: Catalog, workbooks: Workbooks | None = None) -> None:
    """Every download into a new folder `data_dir`, each file through paths.write_file."""
    from pipeline.publish.paths import safe_path, write_file

    data_dir.mkdir(parents=True, exist_ok=True)
    for name, content in iter_downloads(catalog, workbooks):
        write_file(data_dir, name, content)
    write_database(safe_path(data_dir, DATABASE), catalog)


def _typed_apostrophes(frame: pl.DataFrame, table: Table) -> str:
    """The frame as CSV when a text cell starts with "'" (its safe CSV could be that of another text), else ""."""
    text = [f.name for f in table.fields if f.type in ("str", "id")]
    if (
        frame.height
        and text
        and frame.select(pl.any_horizontal(pl.col(c).str.starts_with("'").any() for c in text)).item()
    ):
        return frame.write_csv()
    return ""


def spreadsheet_safe_frame(frame: pl.DataFrame, table: Table) -> pl.DataFrame:
    """Text cells a spreadsheet would run as a formula get a leading ' (format.spreadsheet_safe, vectorised).
    Only the CSV downloads carry it: XLSX cells are typed, and Parquet and DuckDB keep the text as it is.
    Only the columns that have such a cell are made again: each made again is a copy of the column
    (at 10^7 rows the eight text columns of recommendations were 1.3 GB more while its CSV was written)."""
    text = [f.name for f in table.fields if f.type in ("str", "id")]
    if not text or not frame.height:
        return frame
    risky = {c: pl.any_horizontal(pl.col(c).str.starts_with(p) for p in FORMULA_PREFIXES) for c in text}
    found = frame.select(risky[c].any().alias(c) for c in text).row(0, named=True)
    return frame.with_columns(
        pl.when(risky[c]).then(pl.lit("'") + pl.col(c)).otherwise(pl.col(c)).alias(c) for c in text if found[c]
    )


def data_date(catalog: Catalog) -> dt.datetime:
    """The latest date in the data: the XLSX 'created/modified' stamp, the same for every build of the same sources."""
    dates = [
        catalog[t.name][f.name].max()
        for t in ALL_TABLES
        for f in t.fields
        if f.type == "date" and catalog[t.name].height
    ]
    latest = max((d for d in dates if d is not None), default=dt.date(2000, 1, 1))
    return dt.datetime.combine(latest, dt.time())


# --- XLSX -------------------------------------------------------------------------------------


def number_format(field: Field) -> str | None:
    """The Excel number format of a column, by its type and unit (GB, roubles, whole numbers, dates); None for text."""
    if field.type == "float" and field.unit == "gb":
        return GB_FORMAT
    if field.type in ("int", "float") and field.unit in MONEY_UNITS:
        return RUB_FORMAT
    if field.type == "int":
        return INT_FORMAT
    if field.type == "date":
        return DATE_FORMAT
    return None  # General: other numbers as they are


def column_width(field: Field, frame: pl.DataFrame) -> float:
    """A workbook column's width in characters: its header or its longest text, whichever is wider,
    plus 2, at most MAX_WIDTH."""
    header = len(field.label_ru or field.name)
    if field.type in ("str", "id") and frame.height:
        longest = frame[field.name].str.len_chars().max() or 0
    elif field.type == "date":
        longest = 10
    else:
        longest = 12
    return min(max(header, longest) + 2, MAX_WIDTH)


def sheet_inputs(table: Table, frame: pl.DataFrame) -> tuple[list[float], xlsx_rows.Prepared | list[tuple]]:
    """What a workbook needs from the frame (so no polars runs in the workbook child): column widths
    and the data rows, as tuples for the child to write a cell at a time (a table of fewer than
    PREPARE_ROWS rows), or as the frame's Arrow table, which the child makes into sheet XML a column
    at a time (xlsx_rows.ArrowRows: most of a second at 10^5 rows, off the build process's path)."""
    widths = [column_width(f, frame) for f in table.fields]
    if frame.height < PREPARE_ROWS:
        return widths, frame.rows()
    kinds = [xlsx_rows.KINDS.get(f.type, xlsx_rows.NUMBER) for f in table.fields]
    probe = xlsxwriter.Workbook(os.devnull)  # never closed: only its formats' indexes are asked for
    bold, column_formats = _formats(probe, table)
    bold._get_xf_index()  # first, as the header row is written before the data rows
    styles = xlsx_rows.styles(kinds, column_formats)
    # A clone: to_arrow aligns the chunks of the frame it is called on, in place, and the Parquet file
    # written from the catalog's frame follows its chunks (its row groups).
    return widths, xlsx_rows.ArrowRows(in_order(frame, table).clone().to_arrow(), kinds, styles)


def _formats(wb: xlsxwriter.Workbook, table: Table) -> tuple:
    """The header's bold Format and each column's number Format (None: General), added to `wb` in
    the order workbook_bytes adds them (their indexes in the file follow that order)."""
    bold = wb.add_format({"bold": True, "font_name": "Calibri", "font_size": 11})
    formats = {fmt: wb.add_format({"num_format": fmt}) for fmt in map(number_format, table.fields) if fmt}
    return bold, [formats.get(number_format(f)) for f in table.fields]


def _xlsx_job(job: tuple) -> bytes:
    return workbook_bytes(*job)


def workbook_bytes(
    table: Table,
    widths: list[float],
    rows: xlsx_rows.ArrowRows | xlsx_rows.Prepared | list[tuple],
    stamp: dt.datetime,
) -> bytes:
    """One workbook: the table on a sheet named after it (Russian headers, typed cells), and its dictionary."""
    if isinstance(rows, xlsx_rows.ArrowRows):
        rows = rows.rows()
    prepared = isinstance(rows, xlsx_rows.Prepared)
    # Prepared rows are never text in the workbook (only their mark; _LevelZip deflates them from their
    # Arrow buffer into the archive): its parts are small, and made in memory.
    wb, contents = _workbook(in_memory=prepared or len(rows) < IN_MEMORY_ROWS)
    wb.prepared = rows if prepared else None
    # `created` pins docProps/core.xml (its default is now); the archive's entries are dated below.
    wb.set_properties({"author": "gpu-finetune-reference", "title": table.title_ru, "created": stamp})
    bold, column_formats = _formats(wb, table)
    ws = wb.add_worksheet(table.name)
    ws.freeze_panes(1, 0)
    for i, width in enumerate(widths):
        ws.set_column(i, i, width)
    ws.autofilter(0, 0, len(rows), len(table.fields) - 1)
    for i, f in enumerate(table.fields):
        ws.write_string(0, i, f.label_ru or f.name, bold)
    # The data rows a row at a time, as XlsxWriter writes them cell by cell (xlsx_rows): text is always
    # a string cell (never a formula or a URL), written as it is, without the CSV's "'".
    kinds = [xlsx_rows.KINDS.get(f.type, xlsx_rows.NUMBER) for f in table.fields]
    if prepared:
        xlsx_rows.write_prepared(ws, rows, column_formats, marked=True)
    else:
        xlsx_rows.write_rows(ws, rows, kinds, column_formats)

    xlsx = labels()["xlsx"]
    words = wb.add_worksheet(xlsx["sheet"])
    words.freeze_panes(1, 0)
    headers = xlsx["headers"]
    for i, width in enumerate((24, 32, 20, 16, 12, 100)):
        words.set_column(i, i, width)
    for i, h in enumerate(headers):
        words.write_string(0, i, h, bold)
    wrap = wb.add_format({"text_wrap": True, "valign": "top"})
    for r, f in enumerate(table.fields, 1):
        required = xlsx["yes"] if f.required else xlsx["no"]
        values = (f.name, f.label_ru, TYPE_NAMES_RU[f.type], f.unit_label, required, describe(f, xlsx))
        for c, value in enumerate(values):
            words.write_string(r, c, value, wrap)
    wb.close()
    return _pinned_zip(contents(), stamp)


# A sheet of fewer rows than this is made in memory: its rows and XML parts go to no temporary file
# (the files, their text codec and their removal were a third of the real catalog's 32 workbooks' CPU:
# docs/operations.md). A larger sheet's are files, so that its XML (132 MB at 10^5 rows) is never held
# several times over; in memory it was no faster.
IN_MEMORY_ROWS = 5_000


def _workbook(in_memory: bool = False) -> tuple[xlsxwriter.Workbook, Callable[[], bytes]]:
    """A new workbook in XlsxWriter's constant_memory mode (rows written as they come, strings inline)
    and the function that gives its bytes once closed. In memory (`in_memory`, for a small sheet), or
    in a private temporary folder, which that function removes (memory stays flat whatever the
    table's size)."""
    if in_memory:
        buffer = io.BytesIO()
        wb = _Workbook(buffer, {"constant_memory": True})
        wb.in_memory = True  # set after __init__, which turns constant_memory off for in_memory
        wb.worksheet_class = _MemorySheet
        return wb, buffer.getvalue
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="gpu-finetune-xlsx-")
    path = os.path.join(folder, "book.xlsx")

    def contents() -> bytes:
        try:
            with open(path, "rb") as f:
                return f.read()
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    return _Workbook(path, {"constant_memory": True, "tmpdir": folder}), contents


class _MemorySheet(xlsxwriter.worksheet.Worksheet):
    """A constant_memory worksheet whose rows go to a string buffer instead of a temporary text file:
    the same XML (XlsxWriter copies the file's text into the sheet as it is)."""

    def _initialize(self, init_data) -> None:
        super()._initialize({**init_data, "constant_memory": False})  # no temporary file
        if init_data["constant_memory"]:
            self.constant_memory = True
            self.row_data_fh = self.fh = io.StringIO()

    def _opt_close(self) -> None:  # a file handle is closed when the workbook is; the buffer is kept
        pass

    def _opt_reopen(self) -> None:
        pass

    def _write_optimized_sheet_data(self) -> None:
        if self.dim_rowmin is None:  # as XlsxWriter's: no data, an empty element
            self._xml_empty_tag("sheetData")
            return
        self._xml_start_tag("sheetData")
        self.fh.write(self.row_data_fh.getvalue())
        self.row_data_fh = None
        self._xml_end_tag("sheetData")


ZIP_LEVEL = 1  # ISA-L's level (0-3) for a workbook's parts (_Deflater; XlsxWriter's: zlib's default, 6)


class _Deflater:
    """A raw deflate stream made by ISA-L (python-isal), three to four times as fast as zlib's level 1
    for 4 % more bytes (a sheet of 10^5 rows, 132 MB of XML: 0.11 s against 0.40 s; docs/operations.md),
    in zipfile's compressor interface. ISA-L's output depends on how its input is cut into calls
    (zlib's does not), so the input goes to it in blocks of exactly BLOCK bytes, whatever the writes:
    an entry's bytes depend on its content alone (tests/test_downloads.py)."""

    BLOCK = 1 << 20

    def __init__(self) -> None:
        from isal import isal_zlib

        self._stream = isal_zlib.compressobj(ZIP_LEVEL, isal_zlib.DEFLATED, -15)
        self._pending = bytearray()

    def compress(self, data) -> bytes:
        view, out = memoryview(data).cast("B"), []
        if self._pending:
            take = min(len(view), self.BLOCK - len(self._pending))
            self._pending += view[:take]
            view = view[take:]
            if len(self._pending) < self.BLOCK:
                return b""
            out.append(self._stream.compress(self._pending))
            self._pending = bytearray()
        whole = len(view) - len(view) % self.BLOCK
        out += [self._stream.compress(view[start : start + self.BLOCK]) for start in range(0, whole, self.BLOCK)]
        self._pending += view[whole:]
        return b"".join(out)

    def flush(self) -> bytes:
        out = self._stream.compress(self._pending) if self._pending else b""
        self._pending = bytearray()
        return out + self._stream.flush()


class DeflateZip(zipfile.ZipFile):
    """ZipFile whose deflated entries are made by _Deflater at ZIP_LEVEL (what every workbook is written
    with), whatever compresslevel an entry is given."""

    def _open_to_write(self, zinfo: zipfile.ZipInfo, force_zip64: bool = False):
        dest = super()._open_to_write(zinfo, force_zip64)
        if zinfo.compress_type == zipfile.ZIP_DEFLATED and getattr(dest, "_compressor", None) is not None:
            dest._compressor = _Deflater()
        return dest


class _LevelZip(DeflateZip):
    """DeflateZip for XlsxWriter, also for an entry given as a ZipInfo (XlsxWriter's in memory).
    `prepared`: the rows a sheet's xlsx_rows.MARK stands for, deflated in its place (_write_spliced)."""

    def __init__(self, *args, prepared: xlsx_rows.Prepared | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.prepared = prepared

    def writestr(self, zinfo_or_arcname, data, compress_type=None, compresslevel=None) -> None:
        if self.prepared is not None and isinstance(data, bytes) and xlsx_rows.MARK.encode() in data:
            head, tail = data.split(xlsx_rows.MARK.encode())
            self._write_spliced(zinfo_or_arcname, (head, self.prepared.data(), tail), compress_type)
            return
        super().writestr(zinfo_or_arcname, data, compress_type, compresslevel)

    def _write_spliced(self, zinfo: zipfile.ZipInfo, parts: tuple, compress_type) -> None:
        """writestr(zinfo, b"".join(parts)) without joining them: ZipFile deflates what it is given a
        write at a time into one stream, whose bytes do not depend on how the content is cut (_Deflater)."""
        if compress_type is not None:
            zinfo.compress_type = compress_type
        zinfo.file_size = sum(len(part) for part in parts)  # as writestr sets it: whether the entry is ZIP64
        with self._lock, self.open(zinfo, mode="w") as dest:
            for part in parts:
                dest.write(part)


class _Workbook(xlsxwriter.Workbook):
    """XlsxWriter's Workbook, its parts deflated by _Deflater: a sheet of 10^5 rows of 33 columns
    (132 MB of XML) is zipped in 0.11 s instead of 2.2 s at zlib's default level, into 18.3 MB instead
    of 13.3 MB (measured: docs/operations.md). XlsxWriter has no option for it: its module's ZipFile is
    _LevelZip while the workbook is stored (by one thread: a build writes its workbooks in one child).
    `prepared`: the rows its sheet's mark stands for (workbook_bytes)."""

    prepared: xlsx_rows.Prepared | None = None

    def _store_workbook(self) -> None:
        module = sys.modules[xlsxwriter.Workbook.__module__]
        original = module.ZipFile
        module.ZipFile = partial(_LevelZip, prepared=self.prepared)
        try:
            super()._store_workbook()
        finally:
            module.ZipFile = original


def describe(field: Field, xlsx: dict | None = None) -> str:
    """The column's description with its allowed values and the column it refers to (labels.toml [xlsx])."""
    xlsx = xlsx or labels()["xlsx"]
    text = field.description_ru
    if field.allowed:
        text += xlsx["allowed"].format(values=", ".join(field.allowed))
    if field.references:
        text += xlsx["references"].format(target=field.references)
    return text


def _pinned_zip(data: bytes, stamp: dt.datetime) -> bytes:
    """The same archive with every entry dated `stamp` (XlsxWriter dates them 1980-01-01).

    Each entry's deflated bytes are copied as they are: they are what deflating its content again
    would give (the same deflater, level (ZIP_LEVEL) and method), so the archive is the one DeflateZip.writestr
    would write for that content, at half the cost (tests/test_downloads.py compares the two)."""
    date_time = (max(stamp.year, 1980), stamp.month, stamp.day, 0, 0, 0)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, DeflateZip(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for entry in src.infolist():
            if entry.compress_type != zipfile.ZIP_DEFLATED or entry.file_size * 1.05 > zipfile.ZIP64_LIMIT:
                info = zipfile.ZipInfo(entry.filename, date_time=date_time)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                dst.writestr(info, src.read(entry.filename))
                continue
            # The entry's local header: 30 bytes, then its name and extra field, then the data.
            name_length, extra_length = struct.unpack_from("<HH", data, entry.header_offset + 26)
            start = entry.header_offset + 30 + name_length + extra_length
            info = zipfile.ZipInfo(entry.filename, date_time=date_time)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.flag_bits = 0
            info.file_size, info.compress_size, info.CRC = entry.file_size, entry.compress_size, entry.CRC
            info.header_offset = dst.fp.tell()
            dst.fp.write(info.FileHeader(False))
            dst.fp.write(data[start : start + entry.compress_size])
            dst.filelist.append(info)
            dst.NameToInfo[info.filename] = info
            dst.start_dir = dst.fp.tell()
            dst._didModify = True
    return out.getvalue()


# --- metadata.json and DuckDB comments -----------------------------------------------------------


def table_metadata(table: Table, catalog: Catalog, licence: dict | None = None, known: dict | None = None) -> dict:
    """The sidecar: the table's schema from the registry, its row count, the sources its rows rest on,
    and the data licence (site_templates/site.toml). `known`: what one build's sidecars share, filled
    on first use (each table's reference ids, the references by id), so that the tables a derived
    table is made from are read once, not once per table made from them."""
    licence = licence or datapackage.data_licence()
    known = {} if known is None else known
    if "references" not in known:
        known["references"] = {r["reference_id"]: r for r in catalog["references"].iter_rows(named=True)}
    ids = sorted(reference_ids(table, catalog, known.setdefault("ids", {})))
    rows = known["references"]
    return {
        "table": table.name,
        "title_ru": table.title_ru,
        "description_ru": table.description_ru,
        "kind": table.kind,
        "primary_key": list(table.primary_key),
        "row_count": catalog.height(table.name),
        "made_from": list(MADE_FROM.get(table.name, ())),
        "files": file_names(table, catalog.height(table.name)),
        "columns": [
            {
                "name": f.name,
                "label_ru": f.label_ru,
                "type": f.type,
                "duckdb_type": DUCKDB_TYPES[f.type],
                "unit": f.unit_label or None,
                "required": f.required,
                "description_ru": f.description_ru,
                "allowed": list(f.allowed),
                "references": f.references or None,
            }
            for f in table.fields
        ],
        "sources": [
            {
                "id": rid,
                "title": rows[rid]["title"],
                "url": rows[rid]["url"],
                "checked_on": rows[rid]["checked_on"].isoformat(),
            }
            for rid in ids
        ],
        "licence": {"id": licence["id"], "title": licence["title"], "url": licence["url"]},
    }


def reference_ids(table: Table, catalog: Catalog, known: dict[str, set[str]] | None = None) -> set[str]:
    """The references behind a table's rows: its own `reference_id` cells, or those of the tables it is
    made from. `known`: the sets found so far, by table (filled here)."""
    known = {} if known is None else known
    if table.name not in known:
        if "reference_id" in table.columns:
            found = set(catalog[table.name]["reference_id"].drop_nulls().unique().to_list())
        else:
            found = {
                r for name in MADE_FROM.get(table.name, ()) for r in reference_ids(TABLES_BY_NAME[name], catalog, known)
            }
        known[table.name] = found
    return known[table.name]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def comment_sql(table: Table, xlsx: dict | None = None) -> str:
    """The data dictionary inside the database too (duckdb_tables() / duckdb_columns() `comment`):
    the COMMENT statements of one table, as one string; `xlsx`: labels()["xlsx"], when the caller
    has it (a call per table read the labels file each time)."""
    xlsx = labels()["xlsx"] if xlsx is None else xlsx
    statements = [f'COMMENT ON TABLE "{table.name}" IS {_quote(table.title_ru + ". " + table.description_ru)}']
    statements += [
        f'COMMENT ON COLUMN "{table.name}"."{f.name}" IS {_quote(f"{f.label_ru}. {describe(f, xlsx)}")}'
        for f in table.fields
    ]
    return ";\n".join(statements)
