"""Stage 1, loading: source CSV files -> raw string tables in DuckDB.

Every cell is kept as text here, with the line it came from, so that the
validation can name the exact place of each problem. Typing happens in
`typed_views` (TRY_CAST, for validation) and `create_core_tables` (strict,
once the data is known to be valid).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import duckdb
import polars as pl

from pipeline.problems import Problem
from pipeline.schema import DUCKDB_TYPES, SOURCE_TABLES, Table, ddl

LINE = "_line"


def display_path(sources_dir: Path, table: Table) -> str:
    """How a source file is named in reports: relative to the working directory when possible."""
    path = sources_dir / table.file
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def read_source(sources_dir: Path, table: Table) -> tuple[pl.DataFrame | None, list[Problem]]:
    """Read one CSV into a frame of strings (None for empty cells) plus a line column."""
    shown = display_path(sources_dir, table)
    path = sources_dir / table.file
    if not path.exists():
        return None, [Problem(shown, 0, "", None, "file is missing")]
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, [Problem(shown, 0, "", None, f"not UTF-8 text (byte {exc.start}); save the file as CSV UTF-8")]
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = [(n, row) for n, row in enumerate(reader, start=1) if any(c.strip() for c in row)]
    if not rows:
        return None, [Problem(shown, 0, "", None, "file is empty; it needs a header row")]
    (_, header), body = rows[0], rows[1:]
    header = [h.strip() for h in header]
    problems = []
    for col in table.columns:
        if col not in header:
            problems.append(Problem(shown, 1, "", None, f'column "{col}" is missing from the header'))
    for col in header:
        if col not in table.columns:
            problems.append(
                Problem(shown, 1, "", None, f'unknown column "{col}"; expected: {", ".join(table.columns)}')
            )
    if len(set(header)) != len(header):
        problems.append(Problem(shown, 1, "", None, "a column name appears twice in the header"))
    if problems:
        return None, problems
    columns: dict[str, list] = {c: [] for c in table.columns}
    lines = []
    for line, row in body:
        if len(row) != len(header):
            problems.append(Problem(shown, line, "", None, f"has {len(row)} cells, the header has {len(header)}"))
            continue
        cells = dict(zip(header, row, strict=True))
        for col in table.columns:
            value = cells[col].strip()
            columns[col].append(value if value else None)
        lines.append(line)
    frame = pl.DataFrame(
        {LINE: lines, **columns},
        schema={LINE: pl.Int64, **{c: pl.Utf8 for c in table.columns}},
    )
    return frame, problems


def read_sources(sources_dir: Path) -> tuple[dict[str, pl.DataFrame], list[Problem]]:
    """Read every source table; returns the frames that could be read and all problems."""
    frames, problems = {}, []
    for table in SOURCE_TABLES:
        frame, found = read_source(sources_dir, table)
        problems.extend(found)
        if frame is not None:
            frames[table.name] = frame
    return frames, problems


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
