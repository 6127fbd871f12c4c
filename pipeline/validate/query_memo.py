"""The cross-table rules' queries, remembered by the bytes of the tables they read.

A DuckDB query costs a millisecond or two whatever it reads, and the rules and warnings ask about a
hundred of them: a fifth of a second, every build. In a warm process (`just serve`) an edit changes
one file, so most answers are those of the last build. `MemoConnection` stands in for the connection
the rules are given: each query's rows are kept by its text, its parameters and the SHA-256 of each
source file it reads (the tables DuckDB's own parser names in it: raw_<table> and its typed view
typed_<table>, load.connect); a query that reads anything else is always run. The answers kept are the last build's
(`Warm.queries`), so an editing session does not pile them up. A process that ends keeps them on disk
instead (pipeline.validation_cache, `validation-queries`: `to_data` and `from_data`), so that the next
build in a new process, after a one-price edit, asks again only about the tables that changed.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import duckdb

RAW, TYPED = "raw_", "typed_"  # load.connect: a table of each file's text and its typed view


@dataclass
class Result:
    """What a rule reads of a query: its column names and rows (DuckDB's fetchall and fetchone)."""

    columns: list[str]
    rows: list[tuple]

    def fetchall(self) -> list[tuple]:
        return list(self.rows)

    def fetchone(self) -> tuple | None:
        return self.rows[0] if self.rows else None


@dataclass
class QueryStore:
    """What a warm process keeps: each query's tables (by its text) and the last build's answers."""

    tables: dict[str, frozenset[str] | None] = field(default_factory=dict)
    answers: dict[tuple, Result] = field(default_factory=dict)
    used: set[tuple] = field(default_factory=set)

    def cut_back(self) -> None:
        """Keep only the answers the last build asked for."""
        self.answers = {k: v for k, v in self.answers.items() if k in self.used}
        self.used = set()


class MemoConnection:
    """`sql` and `execute` of a DuckDB connection, answered from `store` when every table the query
    reads is a source table whose file's SHA-256 is in `digests` (table name -> digest) and unchanged."""

    remembers = True  # validate._rows_by_part asks about each table apart

    def __init__(self, con: duckdb.DuckDBPyConnection, digests: dict[str, str], store: QueryStore) -> None:
        self.con, self.digests, self.store = con, digests, store

    def sql(self, query: str, params: list | None = None) -> Result:
        return self.execute(query, params)

    def execute(self, query: str, params: list | None = None) -> Result:
        key = self._key(query, params)
        if key is not None and key in self.store.answers:
            self.store.used.add(key)
            return self.store.answers[key]
        relation = self.con.execute(query, params) if params else self.con.execute(query)
        result = Result([d[0] for d in relation.description], relation.fetchall())
        if key is not None:
            self.store.answers[key] = result
            self.store.used.add(key)
        return result

    def _key(self, query: str, params: list | None) -> tuple | None:
        if query not in self.store.tables:
            self.store.tables[query] = self._tables(query)
        tables = self.store.tables[query]
        if tables is None or not tables <= self.digests.keys():
            return None  # it reads something other than a source file: always asked
        return (query, tuple(params or ()), tuple(self.digests[t] for t in sorted(tables)))

    def _tables(self, query: str) -> frozenset[str] | None:
        """The source tables `query` reads (raw_<name> or its typed_<name> view), by DuckDB's own
        parse of it (json_serialize_sql); None when it reads anything else (another table, a table
        function such as read_csv) or does not parse."""
        tree = json.loads(self.con.execute("SELECT json_serialize_sql(?)", [query]).fetchone()[0])
        if tree.get("error"):
            return None
        tables, ctes = set(), set()
        for node in _nodes(tree):
            ctes.update(entry["key"] for entry in node.get("cte_map", {}).get("map", []))
            if node.get("type") == "TABLE_FUNCTION":
                return None
            if node.get("type") == "BASE_TABLE":
                tables.add((node.get("schema_name") or "", node["table_name"]))
        names = set()
        for schema, name in tables:
            if schema == "" and name in ctes:
                continue
            source = name.removeprefix(RAW) if name.startswith(RAW) else name.removeprefix(TYPED)
            if schema not in ("", "main") or source == name:
                return None
            names.add(source)
        return frozenset(names)


def to_data(store: QueryStore) -> dict:
    """The store as JSON data: each query's tables and the answers the last build asked for (a date
    becomes {"date": "YYYY-MM-DD"}); TypeError when a value is of another type."""
    return {
        "tables": [[query, None if tables is None else sorted(tables)] for query, tables in store.tables.items()],
        "answers": [
            [query, _values(params), list(digests), list(result.columns), [_values(row) for row in result.rows]]
            for (query, params, digests), result in store.answers.items()
        ],
    }


def stored(data, answers: bool = True) -> QueryStore:
    """A store from what was kept on disk (to_data's data, or None): empty where it is not of that shape;
    without the answers unless `answers` (build --force reads only which tables each query reads)."""
    try:
        store = QueryStore() if data is None else from_data(data)
    except (ValueError, TypeError):  # not a list where one belongs, a row of the wrong length
        store = QueryStore()
    if not answers:
        store.answers = {}
    return store


def from_data(data) -> QueryStore:
    """A store from to_data's JSON data; ValueError when any part of it is not of that shape."""
    if not isinstance(data, dict) or set(data) != {"tables", "answers"}:
        raise ValueError("not a query store")
    store = QueryStore()
    for query, tables in data["tables"]:
        if not isinstance(query, str) or not (tables is None or _strings(tables)):
            raise ValueError("malformed tables")
        store.tables[query] = None if tables is None else frozenset(tables)
    for query, params, digests, columns, rows in data["answers"]:
        if not (isinstance(query, str) and _strings(digests) and _strings(columns) and isinstance(rows, list)):
            raise ValueError("malformed answer")
        key = (query, _typed(params), tuple(digests))
        store.answers[key] = Result(list(columns), [_typed(row) for row in rows])
    return store


def _strings(items) -> bool:
    return isinstance(items, list) and all(isinstance(item, str) for item in items)


_JSON_VALUES = (str, int, float, bool, type(None))


def _values(values) -> list:
    out = []
    for value in values:
        if type(value) is dt.date:
            out.append({"date": value.isoformat()})
        elif type(value) in _JSON_VALUES:
            out.append(value)
        else:
            raise TypeError(f"a {type(value).__name__} in a query's answer")
    return out


def _typed(values) -> tuple:
    if not isinstance(values, list):
        raise ValueError("not a row")
    out = []
    for value in values:
        if isinstance(value, dict):
            if set(value) != {"date"} or not isinstance(value["date"], str):
                raise ValueError("malformed value")
            out.append(dt.date.fromisoformat(value["date"]))
        elif type(value) in _JSON_VALUES:
            out.append(value)
        else:
            raise ValueError("malformed value")
    return tuple(out)


def _nodes(tree) -> Iterator[dict]:
    """Every object of a parse tree (json_serialize_sql's JSON)."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
