"""The cross-table rules' queries, remembered by the bytes of the tables they read.

A DuckDB query costs a millisecond or two whatever it reads, and the rules and warnings ask about a
hundred of them: a fifth of a second, every build. In a warm process (`just serve`) an edit changes
one file, so most answers are those of the last build. `MemoConnection` stands in for the connection
the rules are given: each query's rows are kept by its text, its parameters and the SHA-256 of each
source file it reads (the tables DuckDB's own parser names in it: raw_<table> and its typed view
typed_<table>, load.connect); a query that reads anything else is always run. The answers kept are the last build's
(`Warm.queries`), so an editing session does not pile them up.
"""

from __future__ import annotations

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
