"""A large table of the DuckDB file updated in place where an edit changed a few of its rows.

A build after an edit works on a verified copy of the previous build's DuckDB file and makes again only
the tables whose rows, DDL or comments changed (staging._write_database). Making a table again is a DROP
and an INSERT of every row: at 10^7 rows of server_fit and recommendations, one price edit spent about
20 s of the file's thread on them, for the 7,746 rows of each that the price changed, and the file
grew to twice its size (the dropped tables' blocks are free only once the DROP is committed).

Here the new rows are compared, piece by piece, with the previous build's rows of the same table (its
Parquet download, whose bytes have the hash the previous build recorded, and from whose frame that
build's DuckDB table was written: the same rows in the same order). Where the two have the same
columns and row count, at most UPDATE_MAX_SHARE of the rows differ and writing them rewrites at most
UPDATE_MAX_REWRITE of the table's column segments, only those rows are written,
by position (`rowid`, which is a table's row number in DuckDB while no row is deleted, and this file's
tables never lose one), and only the columns that differ in any of them. The table then holds,
row for row and in order, what a forced build writes (tests/test_database_update.py;
the edit sweep compares the two files' rows in order). Comparing is exact: floats by their bits, so
0.0 and -0.0, or two NaNs, are told apart as the file would store them.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Iterator

import polars as pl

# Tables from this many rows are compared with the previous build's rows; a smaller one is made again
# whole, which costs about as little as the comparison (the real catalog's largest table has 2,700 rows).
UPDATE_MIN_ROWS = 50_000
# Beyond this share of changed rows the table is made again whole: the comparison stops there.
UPDATE_MAX_SHARE = 0.1
# DuckDB writes an updated column anew in each row group (ROW_GROUP_ROWS rows) an update touched, when
# it checkpoints, before the old blocks are free: an update that rewrites much of a table leaves the
# file that much larger than a forced build's. Beyond this share of the table's column segments
# (changed columns / columns x touched row groups / row groups) it is made again whole instead, its
# blocks freed first. One price edit at 10^6 rows: server_fit's one column, updated in place;
# recommendations, whose re-ranked rows change in every column, made again where they fall in many
# row groups: over twelve successive edits the file stayed within 66-82 MB (66 MB forced, 124 MB after
# any edit before); updated in place whatever that rewrote, it grew to 116-130 MB (docs/operations.md,
# "Twenty-seventh round").
UPDATE_MAX_REWRITE = 0.25
ROW_GROUP_ROWS = 122_880  # DuckDB's row group size (its default, which write_database keeps)
POSITION = "__row_position__"  # the changed rows' row numbers, in the frame the UPDATE reads


class _Mismatch(Exception):
    """The two versions differ in row count or columns: no update in place."""


def _aligned(old: Iterable[pl.DataFrame], new: Iterable[pl.DataFrame]) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
    """(old rows, new piece) of the same positions and length, for each new piece; the old rows come in
    pieces of other lengths (the previous Parquet file's row groups). _Mismatch when the counts differ."""
    old, held = iter(old), []
    have = 0
    for piece in new:
        while have < piece.height:
            more = next(old, None)
            if more is None:
                raise _Mismatch
            held.append(more)
            have += more.height
        rows = held[0] if len(held) == 1 else pl.concat(held, how="vertical", rechunk=False)
        yield rows.slice(0, piece.height), piece
        rest = rows.slice(piece.height)
        held, have = ([rest] if rest.height else []), rest.height
    if have or any(more.height for more in old):
        raise _Mismatch


def _comparable(column: pl.Series) -> pl.Series:
    """The column as values equal exactly when the file would store the same: a float as its bits."""
    if column.dtype in (pl.Float64, pl.Float32):
        import pyarrow as pa

        bits = pa.int64() if column.dtype == pl.Float64 else pa.int32()
        return pl.Series(column.name, column.rechunk().to_arrow().view(bits))
    return column


def changed_rows(
    old: Iterable[pl.DataFrame], new: Iterable[pl.DataFrame], limit: int
) -> tuple[pl.DataFrame, list[str]] | None:
    """The rows of `new` that differ from the row at the same position of `old` (a table's rows in
    order, each in pieces of any lengths), with their row number in POSITION, and the columns that
    differ in any of them, in the table's order; None when the two differ in row count or columns, or
    more than `limit` rows differ (the comparison stops there)."""
    found, columns, count, changed_count = [], set(), 0, 0
    try:
        for before, piece in _aligned(old, new):
            piece = piece.clone()  # another thread may be writing the same frame's Parquet file
            if before.schema != piece.schema:
                return None
            differs = {name: _comparable(before[name]).ne_missing(_comparable(piece[name])) for name in piece.columns}
            columns |= {name for name, mask in differs.items() if mask.any()}
            rows = functools.reduce(operator.or_, differs.values()) if differs else pl.Series([], dtype=pl.Boolean)
            changed = piece.with_columns(pl.int_range(count, count + piece.height, dtype=pl.Int64).alias(POSITION))
            found.append(changed.filter(rows))
            count, changed_count = count + piece.height, changed_count + found[-1].height
            if changed_count > limit:
                return None
    except _Mismatch:
        return None
    if not found:
        return None
    order = [name for name in found[0].columns if name in columns]
    return pl.concat(found, how="vertical"), order


def rewritten_share(changed: pl.DataFrame, columns: list[str], width: int, height: int) -> float:
    """The share of a table's column segments (`width` columns, `height` rows) that writing `changed`
    (changed_rows') over it rewrites: the changed columns in the row groups its rows fall in."""
    if not columns or not changed.height:
        return 0.0
    groups = -(-height // ROW_GROUP_ROWS)
    touched = (changed[POSITION] // ROW_GROUP_ROWS).n_unique()
    return len(columns) / width * touched / groups


def update_in_place(con, name: str, changed: pl.DataFrame, columns: list[str], arrow) -> None:
    """Write `changed` (changed_rows': the new rows with their row numbers) over the rows of table
    `name` at those numbers, only `columns`, in the connection's open transaction; `arrow` turns a frame
    into what DuckDB reads (downloads.arrow_for_duckdb)."""
    if not columns:
        return
    con.register("changed_rows", arrow(changed.select(*columns, POSITION)))
    sets = ", ".join(f'"{c}" = changed_rows."{c}"' for c in columns)
    con.execute(f'UPDATE "{name}" SET {sets} FROM changed_rows WHERE "{name}".rowid = changed_rows."{POSITION}"')
    con.unregister("changed_rows")
