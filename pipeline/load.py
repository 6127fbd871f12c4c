"""Stage 1, loading: source CSV files -> raw string tables in DuckDB.

Every cell is kept as text here, with the line it came from, so that the
validation can name the exact place of each problem. Typing happens in
`typed_views` (TRY_CAST, for validation) and `create_core_tables` (strict,
once the data is known to be valid).
"""

from __future__ import annotations

import csv
import difflib
import io
import re
from pathlib import Path

import duckdb
import polars as pl

from pipeline.problems import Problem
from pipeline.schema import DUCKDB_TYPES, SOURCE_TABLES, Field, Table, ddl

LINE = "_line"


def display_path(sources_dir: Path, table: Table) -> str:
    """How a source file is named in reports: relative to the working directory when possible."""
    path = sources_dir / table.file
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# Text an editor's spreadsheet may put into a number: grouping spaces, a currency sign.
_SPACES = re.compile(r"(?<=\d)[ \u00a0\u202f\u2009](?=\d)")
_RUB = re.compile(r"\s*(?:₽|руб\.?|р\.)$", re.IGNORECASE)
_DECIMAL_COMMA = re.compile(r"^-?\d+,\d+$")
_RU_DATE = re.compile(r"^(\d{2})\.(\d{2})\.(\d{4})$")
_BOOLS = {"true": "true", "false": "false", "истина": "true", "ложь": "false"}


def normalise(field: Field, value: str) -> str:
    """The documented clean-ups of one cell (see sources/README.md); anything else is left for validation."""
    if field.type in ("int", "float"):
        value = _SPACES.sub("", value).replace("\u2212", "-")
        if "₽" in field.unit:
            value = _RUB.sub("", value)
        if field.type == "float" and _DECIMAL_COMMA.match(value):
            value = value.replace(",", ".")
    elif field.type == "bool":
        value = _BOOLS.get(value.lower(), value)
    elif field.type == "date":
        value = _RU_DATE.sub(r"\3-\2-\1", value)
    return value


def decode(data: bytes, shown: str) -> tuple[str | None, list[Problem], list[Problem]]:
    """Bytes of a source file -> text; (text, problems, notices)."""
    if data.startswith(b"PK\x03\x04"):
        return None, [Problem(shown, 0, "", None, "this is an Excel workbook, not CSV; use Save As -> CSV UTF-8")], []
    if b"\x00" in data:
        return None, [Problem(shown, 0, "", None, "binary file, not CSV text; save the table as CSV UTF-8")], []
    try:
        return data.decode("utf-8-sig"), [], []
    except UnicodeDecodeError:
        pass
    try:
        text = data.decode("cp1251")
    except UnicodeDecodeError as exc:
        return (
            None,
            [
                Problem(
                    shown,
                    0,
                    "",
                    None,
                    f"neither UTF-8 nor Windows-1251 text (byte {exc.start}); save the file as CSV UTF-8",
                )
            ],
            [],
        )
    notice = Problem(shown, 0, "", None, "read as Windows-1251 (Excel's Cyrillic encoding); CSV UTF-8 is preferred")
    return text, [], [notice]


def read_source(sources_dir: Path, table: Table) -> tuple[pl.DataFrame | None, list[Problem], list[Problem]]:
    """Read one CSV into a frame of strings (None for empty cells) plus a line column.

    Returns (frame, problems, notices); notices say which normalisation was applied.
    """
    shown = display_path(sources_dir, table)
    path = sources_dir / table.file
    if not path.is_file():
        return None, [Problem(shown, 0, "", None, "file is missing")], []
    text, problems, notices = decode(path.read_bytes(), shown)
    if text is None:
        return None, problems, notices
    first = next((line for line in text.splitlines() if line.strip()), "")
    delimiter = ";" if first.count(";") > first.count(",") else ","
    if delimiter == ";":
        notices.append(Problem(shown, 0, "", None, "read with ';' as the delimiter"))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows, line = [], 1
    for row in reader:
        if any(c.strip() for c in row):
            rows.append((line, row))
        line = reader.line_num + 1
    if not rows:
        return None, [Problem(shown, 0, "", None, "file is empty; it needs a header row")], notices
    (_, header), body = rows[0], rows[1:]
    header = [h.strip().lower() for h in header]
    for col in table.columns:
        if col not in header:
            problems.append(Problem(shown, 1, "", None, f'column "{col}" is missing from the header'))
    for col in header:
        if col not in table.columns:
            guess = difflib.get_close_matches(col, [c for c in table.columns if c not in header], n=1)
            hint = f'did you mean "{guess[0]}"?' if guess else f"expected: {', '.join(table.columns)}"
            problems.append(Problem(shown, 1, "", None, f'unknown column "{col}"; {hint}'))
    if len(set(header)) != len(header):
        problems.append(Problem(shown, 1, "", None, "a column name appears twice in the header"))
    if problems:
        return None, problems, notices
    columns: dict[str, list] = {c: [] for c in table.columns}
    lines = []
    for line, row in body:
        if len(row) != len(header):
            problems.append(Problem(shown, line, "", None, f"has {len(row)} cells, the header has {len(header)}"))
            continue
        cells = dict(zip(header, row, strict=True))
        for f in table.fields:
            value = normalise(f, cells[f.name].strip())
            columns[f.name].append(value if value else None)
        lines.append(line)
    frame = pl.DataFrame(
        {LINE: lines, **columns},
        schema={LINE: pl.Int64, **{c: pl.Utf8 for c in table.columns}},
    )
    return frame, problems, notices


def read_sources(sources_dir: Path) -> tuple[dict[str, pl.DataFrame], list[Problem], list[Problem]]:
    """Read every source table; returns the frames that could be read, all problems and all notices."""
    frames, problems, notices = {}, [], []
    for table in SOURCE_TABLES:
        frame, found, noticed = read_source(sources_dir, table)
        problems.extend(found)
        notices.extend(noticed)
        if frame is not None:
            frames[table.name] = frame
    return frames, problems, notices


def connect(frames: dict[str, pl.DataFrame]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with raw_<table> (text) and typed_<table> (TRY_CAST) views."""
    con = duckdb.connect()
    for name, frame in frames.items():
        con.register(f"raw_{name}", frame.to_arrow())
        table = next(t for t in SOURCE_TABLES if t.name == name)
        casts = ", ".join(f"TRY_CAST({f.name} AS {DUCKDB_TYPES[f.type]}) AS {f.name}" for f in table.fields)
        con.execute(f"CREATE VIEW typed_{name} AS SELECT {LINE}, {casts} FROM raw_{name}")
    return con


def create_core_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Strictly typed tables (DDL from the schema registry), filled from the validated views."""
    for table in SOURCE_TABLES:
        con.execute(ddl(table))
        cols = ", ".join(table.columns)
        con.execute(f'INSERT INTO "{table.name}" SELECT {cols} FROM typed_{table.name} ORDER BY {LINE}')
