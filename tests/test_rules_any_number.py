"""The rules that read the raw cells run whatever a numeric, date or flag cell holds.

Great Expectations' bounds refuse a zero or negative count, but the cross-table rules and the warnings
run beside them on the same raw cells (every problem at once), so each must survive any number in any
numeric cell: a rule that divides by a cell, or computes a model's size from its architecture, met a
zero there with a traceback (exit 1) instead of a list of problems (DuckDB 2 raises on a modulo by zero:
a throughput run with `nodes` 0; a model whose `params_b` is 0 beside its architecture). Every numeric,
date and flag column of every source table is set, in every row, to each value of its type below in
turn, in one loaded catalog (an UPDATE rolled back after each), and every rule runs on it; a rule that
raises is named with the column and the value (the whole `check`, column by column, found the same
three: docs/operations.md)."""

from __future__ import annotations

import datetime as dt

import pytest

from conftest import SOURCES
from pipeline.load import connect, read_sources
from pipeline.problems import Validation
from pipeline.schema import SOURCE_TABLES
from pipeline.validate import cross_table_rules
from pipeline.validate.query_memo import MemoConnection, QueryStore

# Per column type: the values at and beyond its edges (a date or flag that does not cast reads as NULL).
VALUES = {
    "int": ("0", "-1", "1e308"),
    "float": ("0", "-1", "1e308"),
    "date": ("0001-01-01", "9999-12-31", "2026-02-30"),
    "bool": ("ИСТИНА", "1"),
}
TYPED = [(t.name, f.name, f.type) for t in SOURCE_TABLES for f in t.fields if f.type in VALUES]
NAMES = {t.name for t in SOURCE_TABLES}


TODAY = dt.date(2026, 12, 7)


@pytest.fixture(scope="module")
def loaded():
    """The real catalog loaded once, and the rules' answers on it: each case runs the rules as a build
    does (query_memo.MemoConnection, by the tables' digests), so only the queries that read the edited
    table run again (0.1 s a run instead of 0.3 s)."""
    frames, problems, _ = read_sources(SOURCES)
    assert not problems
    con, store, digests = connect(frames), QueryStore(), {name: "as read" for name in NAMES}
    cross_table_rules(MemoConnection(con, digests, store), SOURCES, NAMES, TODAY, Validation())
    return con, store, digests


@pytest.mark.parametrize(("table", "column", "kind"), TYPED)
def test_every_rule_runs_whatever_a_typed_cell_holds(loaded, table, column, kind):
    (con, store, digests), failed = loaded, []
    for value in VALUES[kind]:
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(f'UPDATE raw_{table} SET "{column}" = ?', [value])
            edited = MemoConnection(con, digests | {table: f"{column} = {value}"}, store)
            cross_table_rules(edited, SOURCES, NAMES, TODAY, Validation())
        except Exception as exc:  # noqa: BLE001 (any error is the finding)
            failed.append(f"{table}.{column} = {value!r}: {type(exc).__name__}: {exc}"[:300])
        finally:
            con.execute("ROLLBACK")
    assert failed == []
