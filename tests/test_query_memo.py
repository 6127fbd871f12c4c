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


def disk_rules(sources: Path) -> tuple[Validation, list[str]]:
    """The rules as a build in a new process runs them (validate.run_rules with a fresh Warm): the
    answers of the last validation come from the user cache; and the queries run."""
    from pipeline.validate import run_rules
    from pipeline.warm import Warm

    digests: dict[str, str] = {}
    frames, _, _ = read_sources(sources, digests)
    con = Counting(connect(frames))
    out = Validation(build_date=TODAY)
    run_rules(con, sources, list(frames), TODAY, Warm(), digests, out)
    return out, con.asked


def test_a_new_process_asks_only_about_the_files_changed_since_the_last_validation(sources, tmp_path, monkeypatch):
    from pipeline import validation_cache

    monkeypatch.setenv("GPU_FINETUNE_CACHE_DIR", str(tmp_path / "cache"))
    cold, _ = rules(sources, None)
    first, per_table = disk_rules(sources)
    assert as_text(first) == as_text(cold) and len(per_table) > 30
    again, none = disk_rules(sources)
    assert as_text(again) == as_text(cold) and none == []  # every answer (and parse) from the disk

    edit_csv(sources / "servers.csv", ",h200-sxm,", ",h300,")
    cold, plain = rules(sources, None)
    edited, asked = disk_rules(sources)
    assert as_text(edited) == as_text(cold) and any("h300" in p for p in as_text(cold)[0])
    assert asked and all("servers" in q for q in asked)

    with validation_cache.fresh():  # build --force: which tables a query reads is known, no answer is taken
        forced, asked = disk_rules(sources)
    assert as_text(forced) == as_text(cold) and not any("json_serialize_sql" in q for q in asked)
    assert len(asked) == len(per_table) - sum("json_serialize_sql" in q for q in per_table)
    monkeypatch.setenv(validation_cache.ENV_SWITCH, "off")
    off, asked = disk_rules(sources)
    assert as_text(off) == as_text(cold) and asked == plain  # the connection itself: all tables at once


def test_the_stored_answers_are_json_and_read_back_exactly_or_not_at_all():
    from pipeline.validate.query_memo import Result, from_data, to_data

    store = QueryStore(
        tables={"SELECT 1": frozenset({"servers", "gpus"}), "SELECT 2": None},
        answers={
            ("SELECT 1", ("a", 2, dt.date(2026, 1, 2)), ("d1", "d2")): Result(
                ["x", "y"], [(1, "б", None, 0.1, True, dt.date(2025, 12, 31)), (2**70, "", None, -0.0, False, None)]
            )
        },
    )
    data = to_data(store)
    import json

    back = from_data(json.loads(json.dumps(data)))
    assert back.tables == store.tables and back.answers == store.answers
    [row] = [r for r in back.answers.values()]
    assert [type(v) for v in row.rows[0]] == [int, str, type(None), float, bool, dt.date]
    for broken in (
        {"tables": []},
        {"tables": [["q", [1]]], "answers": []},
        {"tables": [], "answers": [["q", [], [], [], [[{"x": 1}]]]]},
    ):
        try:
            from_data(broken)
        except (ValueError, TypeError):
            continue
        raise AssertionError(broken)
    with_object = QueryStore(answers={("q", (), ()): Result(["x"], [(object(),)])})
    try:
        to_data(with_object)
    except TypeError:
        pass
    else:
        raise AssertionError("an object was written")


def test_a_process_that_lives_on_remembers_even_with_the_cache_off(sources, tmp_path, monkeypatch):
    from pipeline import validation_cache
    from pipeline.validate import run_rules
    from pipeline.warm import Warm

    monkeypatch.setenv("GPU_FINETUNE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(validation_cache.ENV_SWITCH, "off")
    warm = Warm(lives_on=True)
    asked = []
    for _ in range(2):
        digests: dict[str, str] = {}
        frames, _, _ = read_sources(sources, digests)
        con = Counting(connect(frames))
        run_rules(con, sources, list(frames), TODAY, warm, digests, Validation(build_date=TODAY))
        asked.append(con.asked)
    assert len(asked[0]) > 30 and asked[1] == []
    assert not (tmp_path / "cache").exists()  # nothing written with the cache off, nor by a process that lives on


def test_a_process_that_lives_on_reads_the_answers_once_and_writes_none(sources, tmp_path, monkeypatch):
    from pipeline.validate import run_rules
    from pipeline.warm import Warm

    monkeypatch.setenv("GPU_FINETUNE_CACHE_DIR", str(tmp_path / "cache"))
    disk_rules(sources)  # a process that ends writes the answers
    [entry] = (tmp_path / "cache").rglob("*.bin")
    written = entry.read_bytes()
    digests: dict[str, str] = {}
    frames, _, _ = read_sources(sources, digests)
    con = Counting(connect(frames))
    run_rules(con, sources, list(frames), TODAY, Warm(lives_on=True), digests, Validation(build_date=TODAY))
    assert con.asked == [] and entry.read_bytes() == written
