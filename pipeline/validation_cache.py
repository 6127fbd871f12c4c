"""Validation outcomes remembered on disk, in the user cache folder (pipeline.cache), shared by
`build`, `check` and `estimate` and by every --out.

Two kinds of entry, each keyed by everything that determines it:

- **per table** (namespace `validation-table`): the Great Expectations outcomes of one table
  (its problems and check results), keyed by the table's cells (a SHA-256 of every raw cell,
  line numbers included), the suite's definition (the table's entry in the schema registry,
  the patterns and rules the suites are generated from, the code of pipeline/validate/__init__.py),
  the build date (the date checks) and the library versions. A new process runs GX only on the
  tables whose key is new: after a one-price edit, only servers.csv.
- **whole** (namespace `validation-all`): a passed validation of a whole sources folder (the
  cross-table rules and warnings included), keyed by the bytes of every source file that the
  validation read (the cross-table rules' inputs: hashed as read, never again after validating,
  so that a file saved meanwhile is validated next time), the pipeline's code, the build date
  and the library versions. A `check`, `estimate` or build of sources validated before reads it
  and runs no rule at all, before polars, DuckDB or Great Expectations are imported.

- **the rules' queries** (namespace `validation-queries`): the answers of the cross-table rules'
  DuckDB queries (pipeline/validate/query_memo.py), each kept by its text, its parameters and the
  SHA-256 of each source file it reads; one entry, the last validation's in a process that ends (`serve`
  reads it once and keeps its answers in memory), keyed by the pipeline's code, the build date and the
  library versions. A build in a new process after a one-price edit
  asks DuckDB again only about the queries that read servers.csv. `build --force` reads only which
  tables each query reads (DuckDB's parse of its text), not the answers.

Neither key names a folder: a copy of the sources anywhere (another checkout, a test's temporary
folder) finds the outcomes of the same content. What names a file (a problem, a warning) is stored
by the file's name in the sources folder and named as reports name it from the working directory
when read.

An entry is used only after checking it (pipeline.cache verifies the header, size and
SHA-256; here the payload must name the same key parts and have exactly the expected shape);
anything else is ignored and validation runs. `build --force` reads neither kind (it still
stores what it validated). Set GPU_FINETUNE_VALIDATION_CACHE=off to validate every time.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import os
from dataclasses import asdict, replace
from pathlib import Path

from pipeline import cache, fingerprint
from pipeline.problems import Problem, display_name

FORMAT = "validation/2"
TABLE_NAMESPACE = "validation-table"
WHOLE_NAMESPACE = "validation-all"
ENV_SWITCH = "GPU_FINETUNE_VALIDATION_CACHE"
LIBRARIES = ("great_expectations", "pandas", "numpy", "duckdb", "polars", "pydantic")
# True inside fresh(): entries are written, never read (a context variable: a flag of the call, not a cache).
_FRESH: contextvars.ContextVar[bool] = contextvars.ContextVar("validation_cache_fresh", default=False)


def enabled() -> bool:
    """Whether the cache is on: GPU_FINETUNE_VALIDATION_CACHE is not off, 0, no or false."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() not in ("off", "0", "no", "false")


def reading() -> bool:
    """Whether outcomes may be read from the cache now: it is on and this is not a fresh() block."""
    return enabled() and not _FRESH.get()


@contextlib.contextmanager
def fresh(active: bool = True):
    """Within this block no outcome is read from disk (build --force validates everything anew);
    what is validated is still stored."""
    token = _FRESH.set(True) if active else None
    try:
        yield
    finally:
        if token is not None:
            _FRESH.reset(token)


@functools.cache
def versions() -> list[str]:
    """The Python and library versions an outcome depends on (read from package metadata, no import):
    those of the running process, read once."""
    import importlib.metadata
    import platform

    found = [f"python={platform.python_version()}"]
    for package in LIBRARIES:
        try:
            found.append(f"{package}={importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{package}=none")
    return found


@functools.cache
def _code(kind: str) -> str:
    """The hash of the code an outcome depends on: pipeline/validate/ (per table) or the whole package;
    read once, as the code of the running process."""
    return fingerprint.tree_hash(
        fingerprint.PACKAGE / "validate" if kind == "validate" else fingerprint.PACKAGE, "*.py"
    )


def cells_hash(cells) -> str:
    """A SHA-256 of a table's raw rows (tuples of text cells and line numbers, None for empty)."""
    digest = hashlib.sha256()
    for row in cells:
        digest.update(json.dumps(row, ensure_ascii=False, default=str).encode("utf-8") + b"\n")
    return digest.hexdigest()


def suite_definition(table) -> str:
    """What the suites of `table` are generated from: its registry entry and the shared rules."""
    from pipeline import schema
    from pipeline.load import LINE

    parts = (
        repr(table),
        repr(schema.TYPE_PATTERNS),
        repr(schema.TYPE_NAMES_RU),
        repr(schema.HIDDEN_CHARACTERS),
        repr(schema.EARLIEST_DATE),
        LINE,
    )
    return cache.make_key(*parts)


# -- per table ---------------------------------------------------------------------------------


def _table_key(table, today, digest: str) -> tuple[str, list[str]]:
    parts = [FORMAT, "table", table.name, today.isoformat(), digest, suite_definition(table), _code("validate")]
    return cache.make_key(*parts, *versions()), parts


def table_outcome(table, shown: str, today, cells) -> tuple[tuple[str, list[str], str, str], tuple[list, list] | None]:
    """(the entry: key, key parts and how reports name the file; the stored (problems, checks) of this
    table or None when none verifies). The key is the table's content, not where its folder lies: a
    copy of the sources anywhere finds the outcomes of the same cells (problems are stored naming the
    file by its name in the sources folder and named as `shown` when read)."""
    from pipeline.problems import CheckResult

    key, parts = _table_key(table, today, cells_hash(cells))
    entry = (key, parts, table.file, shown)
    if not reading():
        return entry, None
    data = _read(TABLE_NAMESPACE, key, parts)
    if data is None:
        return entry, None
    try:
        problems = [replace(_problem(p, {table.file}), file=shown) for p in data["problems"]]
        checks = [_check(c, CheckResult, table.name) for c in data["checks"]]
    except (KeyError, TypeError, ValueError):
        return entry, None
    return entry, (problems, checks)


def store_table_outcome(entry: tuple[str, list[str], str, str], outcome: tuple[list, list]) -> None:
    """Remember one table's (problems, checks) under the entry table_outcome returned."""
    if not enabled():
        return
    key, parts, file, shown = entry
    problems, checks = outcome
    if any(p.file != shown for p in problems):
        return  # a problem of another file: not this table's outcome alone
    stored = [asdict(p) | {"file": file} for p in problems]
    _write(TABLE_NAMESPACE, key, parts, {"problems": stored, "checks": [asdict(c) for c in checks]})


# -- a whole sources folder ----------------------------------------------------------------------


def _csv_names(sources: Path) -> list[str]:
    """The CSV files directly in the sources folder (the tables and any other), by name."""
    return sorted(e.name for e in os.scandir(sources) if e.name.endswith(".csv"))


def _content(sources: Path, digests: dict[str, str] | None = None) -> str:
    """One hash of the sources' content: every CSV file's name and SHA-256, those in `digests` (the
    bytes a validation read) as given, the others as they are now. Not where the folder lies: a copy
    of the sources elsewhere has the same content. OSError when a file cannot be read."""
    digests = digests or {}
    names = sorted(set(_csv_names(sources)) | set(digests))
    with fingerprint.Digests(Path(sources)) as memo:
        found = [f"{name}\0{digests.get(name) or memo.of(Path(sources) / name)}" for name in names]
    return cache.make_key(*found)


def _whole_key(sources: Path, digests: dict[str, str] | None = None) -> tuple[str, list[str]]:
    parts = [FORMAT, "whole", _content(sources, digests), _code("package"), fingerprint.build_date().isoformat()]
    return cache.make_key(*parts, *versions()), parts


def _named(warnings: list[dict], sources: Path, stored: bool) -> list[dict]:
    """Warnings with their files named within the sources folder (stored: `servers.csv`), or as reports
    name them from the working directory (read back: `sources/servers.csv`)."""
    names = {display_name(sources, name): name for name in _csv_names(sources)}
    if not stored:
        names = {name: shown for shown, name in names.items()}
    return [w | {"file": names.get(w["file"], w["file"])} for w in warnings]


def _whole(sources: Path, digests: dict[str, str] | None = None) -> dict | None:
    """The stored, verified to_dict() of a passed validation of these exact sources (the bytes in
    `digests` for the files read), or None."""
    if not reading():
        return None
    try:
        key, parts = _whole_key(sources, digests)
        data = _read(WHOLE_NAMESPACE, key, parts)
        validation = data["validation"]
        if set(validation) != {"warnings", "checks", "build_date"}:
            return None
        if validation["build_date"] != fingerprint.build_date().isoformat():
            return None
        for w in validation["warnings"]:
            _problem(w, None)
        for c in validation["checks"]:
            _check(c, dict, None)
        return validation | {"warnings": _named(validation["warnings"], sources, stored=False)}
    except (KeyError, TypeError, ValueError, AttributeError, OSError):
        return None  # nothing stored, or an unreadable folder: validation runs and reports it


def remembered(sources: Path, digests: dict[str, str] | None = None):
    """The Validation of these exact sources when an earlier run passed them, else None; `digests`:
    the SHA-256 of the files as the caller read them (pipeline.load.read_sources), so that what is
    loaded is what was validated."""
    data = _whole(sources, digests)
    if data is None:
        return None
    from pipeline.problems import Validation

    return Validation.from_dict(data)


def remembered_summary(sources: Path) -> tuple[list[Problem], int] | None:
    """(warnings, number of checks) of a remembered validation, or None; light: hashes the source
    files and reads one cache entry, without importing polars, DuckDB or Great Expectations."""
    data = _whole(sources)
    if data is None:
        return None
    return [Problem(**w) for w in data["warnings"]], len(data["checks"])


def remember(sources: Path, validation, digests: dict[str, str] | None = None) -> None:
    """Store a passed validation of `sources` (one with problems is never stored) under the content
    it validated: `digests`, the SHA-256 of the bytes read (pipeline.load.read_sources), so that a file
    saved while it was validated is not remembered as validated."""
    if not enabled() or validation.problems:
        return
    try:
        key, parts = _whole_key(sources, digests)
        data = validation.to_dict()
        data["warnings"] = _named(data["warnings"], sources, stored=True)
    except OSError:
        return
    _write(WHOLE_NAMESPACE, key, parts, {"validation": data})


ARTICLES_NAMESPACE = "articles-checked"


def _articles_key(sources: Path, digests: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """A passed `check` of the articles holds for these sources (the whole key) and these templates."""
    key, parts = _whole_key(sources, digests)
    parts = [*parts, "articles", fingerprint.tree_hash(fingerprint.TEMPLATES)]
    return cache.make_key(*parts, *versions()), parts


def articles_passed(sources: Path) -> bool:
    """True when every article's claims were checked against these exact sources and templates."""
    if not reading():
        return False
    try:
        key, parts = _articles_key(sources)
    except OSError:
        return False
    data = _read(ARTICLES_NAMESPACE, key, parts)
    return isinstance(data, dict) and data.get("articles") == "passed"


def remember_articles(sources: Path, digests: dict[str, str] | None = None) -> None:
    """Store that every article's claims hold for these sources (as read: `digests`) and templates."""
    if not enabled():
        return
    try:
        key, parts = _articles_key(sources, digests)
    except OSError:
        return
    _write(ARTICLES_NAMESPACE, key, parts, {"articles": "passed"})


# -- the rules' queries --------------------------------------------------------------------------

QUERIES_NAMESPACE = "validation-queries"


def _queries_key(today) -> tuple[str, list[str]]:
    parts = [FORMAT, "queries", today.isoformat(), _code("package")]
    return cache.make_key(*parts, *versions()), parts


def stored_queries(today) -> dict | None:
    """The rules' queries as the last validation stored them (query_memo.to_data's data), None when
    the cache is off or no entry verifies."""
    if not enabled():
        return None
    key, parts = _queries_key(today)
    data = _read(QUERIES_NAMESPACE, key, parts)
    return None if data is None else data.get("store")


def store_queries(data: dict, today) -> None:
    """Keep the rules' queries (query_memo.to_data's data) for the next process."""
    if enabled():
        key, parts = _queries_key(today)
        _write(QUERIES_NAMESPACE, key, parts, {"store": data})


# -- entries -----------------------------------------------------------------------------------


def _read(namespace: str, key: str, parts: list[str]) -> dict | None:
    payload = cache.Cache().get(namespace, key)
    if payload is None:
        return None
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or data.get("parts") != parts or data.get("versions") != versions():
        return None  # a foreign entry (another key's payload under this name)
    return data


def _write(namespace: str, key: str, parts: list[str], payload: dict) -> None:
    data = {"parts": parts, "versions": versions(), **payload}
    cache.Cache().put(namespace, key, json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8"))


def _problem(data: dict, files: set[str] | None) -> Problem:
    if set(data) != {"file", "line", "column", "value", "rule", "omitted"}:
        raise ValueError("not a problem")
    if not isinstance(data["file"], str) or (files is not None and data["file"] not in files):
        raise ValueError("not a problem of this table")
    if not all(isinstance(data[k], int) for k in ("line", "omitted")) or not all(
        isinstance(data[k], str) for k in ("rule", "column")
    ):
        raise ValueError("malformed problem")
    if data["value"] is not None and not isinstance(data["value"], str):
        raise ValueError("malformed value")
    return Problem(**data)


def _check(data: dict, kind, table: str | None):
    """A check result as stored: of `table` and by GX (per table), or any passed one (table None)."""
    if set(data) != {"table", "column", "rule", "engine", "failures"}:
        raise ValueError("not a check")
    if not all(isinstance(data[k], str) for k in ("table", "column", "rule")) or not isinstance(data["failures"], int):
        raise ValueError("malformed check")
    if table is not None and (data["table"] != table or data["engine"] != "Great Expectations"):
        raise ValueError("not a check of this table")
    if table is None and (
        data["failures"] != 0 or data["engine"] not in ("Great Expectations", "DuckDB SQL", "Python")
    ):
        raise ValueError("not a passed check")
    return kind(**data)
