"""The cross-table rules' queries remembered by the files they read (pipeline/validate/query_memo.py):
a warm process gets exactly the problems, checks and warnings a cold one gets, and asks DuckDB again
only about the tables an edit changed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from conftest import edit_csv
from pipeline.load import connect, read_sources
from pipeline.problems import Validation
from pipeline.validate import cross_table_rules
from pipeline.validate.query_memo import MemoConnection, QueryStore

TODAY = dt.date(2026, 12, 5)


class Counting:
    """A DuckDB connection that records the text of every query it runs."""

    def __init__(self, con) -> None:
        self.con, self.asked = con, []

    def execute(self, query, params=None):
        self.asked.append(query)
        return self.con.execute(query, params) if params else self.con.execute(query)

    def sql(self, query, params=None):
        self.asked.append(query)
        return self.con.sql(query, params=params)

    def get_table_names(self, query):
        return self.con.get_table_names(query)


def rules(sources: Path, store: QueryStore | None) -> tuple[Validation, list[str]]:
    """The rules' Validation of `sources`, with the store's memo (or none), and the queries run."""
    digests: dict[str, str] = {}
    frames, _, _ = read_sources(sources, digests)
    con = Counting(connect(frames))
    by_table = {name: digests[f"{name}.csv"] for name in frames}
    asked = con if store is None else MemoConnection(con, by_table, store)
    out = Validation(build_date=TODAY)
    cross_table_rules(asked, sources, set(frames), TODAY, out)
    if store is not None:
        store.cut_back()
    return out, con.asked


def as_text(v: Validation) -> tuple[list[str], list, list[str]]:
    return [str(p) for p in v.problems], v.checks, [str(w) for w in v.warnings]


def test_a_warm_process_gets_what_a_cold_one_gets_and_asks_only_about_the_edit(sources):
    store = QueryStore()
    cold, everything = rules(sources, None)
    warm, first = rules(sources, store)
    assert as_text(warm) == as_text(cold) and not cold.problems and len(cold.checks) > 30
    assert len(first) > len(everything)  # one query per table where the cold rules ask about all at once
    again, none = rules(sources, store)
    assert as_text(again) == as_text(cold) and none == []  # nothing changed: nothing asked

    # An edit that breaks a foreign key and a name in servers.csv: only queries reading it run again.
    edit_csv(sources / "servers.csv", ",h200-sxm,", ",h300,")
    cold, _ = rules(sources, None)
    warm, asked = rules(sources, store)
    assert as_text(warm) == as_text(cold)
    assert any("h300" in p for p in as_text(cold)[0])
    assert asked and all("servers" in q for q in asked)

    # And back: the answers of the first build are gone (only the last build's are kept), so they run again.
    edit_csv(sources / "servers.csv", ",h300,", ",h200-sxm,")
    warm, asked = rules(sources, store)
    cold, _ = rules(sources, None)
    assert as_text(warm) == as_text(cold) and not cold.problems and asked


def test_a_query_on_anything_but_a_source_file_is_always_asked(sources):
    frames, _, _ = read_sources(sources, digests := {})
    raw = connect(frames)
    raw.execute("CREATE TABLE other AS SELECT 1 AS x")
    con = Counting(raw)
    memo = MemoConnection(con, {name: digests[f"{name}.csv"] for name in frames}, QueryStore())
    for _ in range(2):
        assert memo.sql("SELECT x FROM other").fetchall() == [(1,)]
        assert memo.execute("SELECT count(*) FROM typed_gpus WHERE gpu_id <> ?", ["h300"]).fetchone()[0] >= 11
    raw.execute("UPDATE other SET x = 2")
    assert memo.sql("SELECT x FROM other").fetchall() == [(2,)]
    # the typed view is resolved to raw_gpus, a source file: asked once; `other` every time
    run = [q for q in con.asked if not q.startswith("SELECT json_serialize_sql")]  # (the parse: once per text)
    assert run.count("SELECT x FROM other") == 3 and len(run) == 4
    assert memo.sql("SELECT _line, 'x' AS c FROM raw_gpus ORDER BY 1 LIMIT 1").columns == ["_line", "c"]
    # a table function, or a name that is neither a source table nor a CTE of the query: always asked
    store = memo.store
    assert store.tables["SELECT x FROM other"] is None
    assert memo._tables("SELECT * FROM range(3)") is None
    assert memo._tables("WITH t AS (SELECT 1) SELECT * FROM t, raw_gpus JOIN typed_servers USING (gpu_id)") == {
        "gpus",
        "servers",
    }
