"""How two versions of a large table differ, counted by DuckDB a piece at a time: `diff` and `release`
compare the derived tables of two builds (10^7 rows of server_fit and recommendations at scale) with it,
never holding their rows in Python (at 10^6 rows that took 2.9 GB per table and build, at 10^7 more
memory than the machine has).

DuckDB runs in memory up to MEMORY_LIMIT and spills beyond it to a temporary folder of its own, removed
afterwards (its default for an in-memory database would be `.tmp` in the working directory).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

MEMORY_LIMIT = "1GB"
CSV_OPTIONS = "header = true, all_varchar = true, delim = ',', quote = '\"', escape = '\"', strict_mode = true"


@contextlib.contextmanager
def connection() -> Iterator:
    """An in-memory DuckDB connection that spills to a temporary folder, removed when it closes."""
    import duckdb

    with tempfile.TemporaryDirectory(prefix="gpu-finetune-compare-") as spill:
        con = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "temp_directory": spill})
        try:
            yield con
        finally:
            con.close()


def duckdb_error() -> type[Exception]:
    """DuckDB's base exception (a download it cannot read: a row of another width, a damaged Parquet file)."""
    import duckdb

    return duckdb.Error


def quoted(text: object) -> str:
    """A SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"


def ident(name: str) -> str:
    """A SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def csv_relation(path: Path) -> str:
    """The SQL that reads a download's CSV as text (its BOM skipped; a row of another width is an error)."""
    return f"read_csv({quoted(path)}, {CSV_OPTIONS})"


def parquet_relation(path: Path) -> str:
    """The SQL that reads a download's Parquet file."""
    return f"read_parquet({quoted(path)})"


def columns(con, relation: str) -> dict[str, str]:
    """A relation's columns and their DuckDB types, in order."""
    return {name: kind for name, kind, *_ in con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()}


def count_rows(con, relation: str) -> int:
    """How many rows a relation has."""
    return con.execute(f"SELECT count(*) FROM {relation}").fetchall()[0][0]


def count_changes(con, new: str, old: str, key: Sequence[str], values: Sequence[str]) -> dict:
    """Rows of `new` whose key `old` lacks (added), rows of `old` whose key `new` lacks (removed), rows
    of both whose `values` differ (changed), and which of `values` differ in any row (in `values`'
    order). A key column either lacks is a KeyError; a value column one lacks is NULL there; a column
    typed differently in the two (a pipeline that changed its type) is compared as text; NULL keys match.

    In two passes: the keys with a hash of each row's values (a narrow join: at 10^7 rows of
    recommendations 4 s, where joining every column took 24 s), then every column of the rows whose
    hashes differ, which decides (a change is missed only where two rows' 64-bit hashes collide)."""
    new_columns, old_columns = columns(con, new), columns(con, old)
    for column in key:
        if column not in new_columns or column not in old_columns:
            raise KeyError(column)
    values = [c for c in values if c not in key and (c in new_columns or c in old_columns)]

    def side(relation: str, present: dict[str, str]) -> str:
        picked = []
        for c in (*key, *values):
            column = ident(c) if new_columns.get(c) == old_columns.get(c) else f"CAST({ident(c)} AS VARCHAR)"
            picked.append(f"{column if c in present else 'NULL'} AS {ident(c)}")
        return f"SELECT {', '.join(picked)} FROM {relation}"

    keys = ", ".join(ident(k) for k in key)
    hashed = f"hash({', '.join(ident(c) for c in values)})" if values else "0"
    on = " AND ".join(f"n.{ident(k)} IS NOT DISTINCT FROM o.{ident(k)}" for k in key)
    sides = {
        name: f"({side(relation, present)})"
        for name, relation, present in (("n", new, new_columns), ("o", old, old_columns))
    }
    con.execute(
        "CREATE OR REPLACE TEMP TABLE __changed AS SELECT n.__h AS __new, o.__h AS __old, "
        + ", ".join(f"coalesce(n.{ident(k)}, o.{ident(k)}) AS {ident(k)}" for k in key)
        + f" FROM (SELECT {keys}, {hashed} AS __h FROM {sides['n']}) n"
        + f" FULL OUTER JOIN (SELECT {keys}, {hashed} AS __h FROM {sides['o']}) o ON {on}"
        + " WHERE n.__h IS DISTINCT FROM o.__h"
    )
    added, removed = con.execute(
        "SELECT count(*) FILTER (WHERE __old IS NULL), count(*) FILTER (WHERE __new IS NULL) FROM __changed"
    ).fetchall()[0]
    differs = [f"n.{ident(c)} IS DISTINCT FROM o.{ident(c)}" for c in values]
    match = " AND ".join(f"r.{ident(k)} IS NOT DISTINCT FROM d.{ident(k)}" for k in key)
    both = f"SELECT {keys} FROM __changed WHERE __new IS NOT NULL AND __old IS NOT NULL"
    rows = {name: f"(SELECT r.* FROM {relation} r SEMI JOIN ({both}) d ON {match})" for name, relation in sides.items()}
    found = con.execute(
        f"SELECT count(*) FILTER (WHERE {' OR '.join(differs) or 'false'})"
        + "".join(f", bool_or({d})" for d in differs)
        + f" FROM {rows['n']} n JOIN {rows['o']} o ON {on}"
    ).fetchall()[0]
    con.execute("DROP TABLE __changed")
    return {
        "changed": found[0],
        "added": added,
        "removed": removed,
        "columns": [c for c, changed in zip(values, found[1:], strict=True) if changed],
    }


def database_tables(path: Path) -> dict[str, tuple]:
    """Each table of a DuckDB file: (its columns and their types, its row count, the sum of its rows'
    hashes): equal for the same rows in any order, and read a piece at a time, where fetching every row
    into Python took more memory than the build that wrote the file. Two files that differ are told
    apart but for a collision of those 64-bit sums."""
    with connection() as con:
        con.execute(f"ATTACH {quoted(path)} AS db (READ_ONLY)")
        fields: dict[str, list] = {}
        for table, column, kind in con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE database_name = 'db' "
            "ORDER BY table_name, column_index"
        ).fetchall():
            fields.setdefault(table, []).append((column, kind))
        out = {}
        for table, listed in fields.items():
            hashed = ", ".join(ident(c) for c, _ in listed)
            rows, digest = con.execute(
                f"SELECT count(*), sum(hash({hashed})::HUGEINT) FROM db.main.{ident(table)}"
            ).fetchall()[0]
            out[table] = (tuple(listed), rows, digest)
        return out
