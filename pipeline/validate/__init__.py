"""Stage 2, validation: Great Expectations suites per table plus cross-table rules.

The suites are generated from the schema registry. GX runs on pandas frames
fetched from DuckDB (its SQL path on DuckDB fails silently). Cross-table rules
run as DuckDB SQL and are reported in the same form. Every check and its
outcome is kept, for the data-quality page.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import importlib.util
import os
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import duckdb

from pipeline import TEMPLATES
from pipeline.estimate import architecture
from pipeline.fingerprint import build_date
from pipeline.load import (
    BITS_IN_NAME,
    GB_IN_NAME,
    LINE,
    NOT_IN_WORD,
    PARAMS_IN_NAME,
    SERVER_NAME,
    display_path,
    typed_sql,
)
from pipeline.messages import message
from pipeline.parallel import Early, start_map
from pipeline.problems import CheckResult, Problem, Validation, capped
from pipeline.render import russian as ru
from pipeline.schema import (
    CONSTANT_BOUNDS,
    CONSTANT_RELATIONS,
    EARLIEST_DATE,
    HIDDEN_CHARACTERS,
    NAME_TOLERANCE,
    PRICE_PER_GB_SPREAD,
    RANKLESS_ADAPTERS,
    REQUIRED_CONSTANTS,
    RESERVED_NAMES,
    SERVER_INTERCONNECTS,
    SOURCE_TABLES,
    TABLES_BY_NAME,
    TYPE_NAMES_RU,
    TYPE_PATTERNS,
    Bounds,
    Field,
    Table,
)
from pipeline.warm import Warm
from pipeline.words import labels


@dataclass(frozen=True)
class Check:
    """One expectation and how to explain its failures."""

    table: str
    column: str  # "" for table-level checks
    on: str  # "raw" (text cells) or "typed" (cast values)
    expectation: object
    rule: str


HIDDEN_RULE = message("rules.hidden")


def _num(x: float) -> str:
    return f"{x:.12g}"


def _example(kind: str) -> str:
    return {
        "id": "h200-sxm",
        "int": "96",
        "float": message("rules.example_float"),
        "date": "2026-10-12",
        "bool": "true",
    }[kind]


def field_checks(table: Table, field: Field, today: dt.date) -> list[Check]:
    """The expectations one declared field implies."""
    import great_expectations.expectations as gxe

    found = [*_text_expectations(field), *_value_expectations(field, today)]
    if table.primary_key == (field.name,):
        found.append(("raw", gxe.ExpectColumnValuesToBeUnique(column=field.name), message("rules.duplicate_id")))
    return [Check(table.name, field.name, on, expectation, rule) for on, expectation, rule in found]


def _text_expectations(field: Field) -> list[tuple]:
    """(view, expectation, rule) of a field's text: present, of its type's form, not too long, without hidden
    characters, of its own pattern, one of its allowed values."""
    import great_expectations.expectations as gxe

    name, out = field.name, []
    if field.required:
        out.append(("raw", gxe.ExpectColumnValuesToNotBeNull(column=name), message("rules.required")))
    if field.type == "id":
        rule = message("rules.id_pattern")
        out.append(("raw", gxe.ExpectColumnValuesToMatchRegex(column=name, regex=TYPE_PATTERNS["id"]), rule))
    elif field.type in TYPE_PATTERNS:
        rule = message("rules.type", type_name=TYPE_NAMES_RU[field.type], example=_example(field.type))
        out.append(("raw", gxe.ExpectColumnValuesToMatchRegex(column=name, regex=TYPE_PATTERNS[field.type]), rule))
    if field.type in ("str", "id"):
        rule = message("rules.too_long", max=field.max_length)
        out.append(("raw", gxe.ExpectColumnValueLengthsToBeBetween(column=name, max_value=field.max_length), rule))
    if field.type == "str":
        out.append(("raw", gxe.ExpectColumnValuesToNotMatchRegex(column=name, regex=HIDDEN_CHARACTERS), HIDDEN_RULE))
    if field.pattern:
        expectation = gxe.ExpectColumnValuesToMatchRegex(column=name, regex=field.pattern)
        out.append(("raw", expectation, field.pattern_rule))
    if field.allowed:
        rule = message("rules.allowed", values=", ".join(field.allowed))
        out.append(("raw", gxe.ExpectColumnValuesToBeInSet(column=name, value_set=list(field.allowed)), rule))
    return out


def _value_expectations(field: Field, today: dt.date) -> list[tuple]:
    """(view, expectation, rule) of a field's typed value: within its bounds; a date neither in the future
    nor before EARLIEST_DATE."""
    import great_expectations.expectations as gxe

    name, out = field.name, []
    if field.min is not None or field.max is not None:
        unit = f" {field.unit_label}" if field.unit else ""
        rule = message("rules.between", low=_num(field.min), high=_num(field.max), unit=unit)
        out.append(
            ("typed", gxe.ExpectColumnValuesToBeBetween(column=name, min_value=field.min, max_value=field.max), rule)
        )
    if field.type == "date":
        # pandas holds DATE columns as datetime64, so the bound is a datetime.
        latest, earliest = (dt.datetime.combine(day, dt.time()) for day in (today, EARLIEST_DATE))
        rule = message("rules.future", today=today.isoformat())
        out.append(("typed", gxe.ExpectColumnValuesToBeBetween(column=name, max_value=latest), rule))
        rule = message("rules.too_early", earliest=EARLIEST_DATE.isoformat())
        out.append(("typed", gxe.ExpectColumnValuesToBeBetween(column=name, min_value=earliest), rule))
    return out


def table_checks(table: Table, today: dt.date) -> list[Check]:
    """Every expectation the registry implies for one table: its header, its row count, each field's checks, its key."""
    import great_expectations.expectations as gxe

    checks = [
        Check(
            table.name,
            "",
            "raw",
            gxe.ExpectTableColumnsToMatchSet(column_set=[LINE, *table.columns], exact_match=True),
            message("rules.header"),
        )
    ]
    if table.min_rows:
        checks.append(
            Check(
                table.name,
                "",
                "raw",
                gxe.ExpectTableRowCountToBeBetween(min_value=table.min_rows),
                message("rules.no_rows"),
            )
        )
    checks += [c for f in table.fields for c in field_checks(table, f, today)]
    if len(table.primary_key) > 1 and all(table.field(k).required for k in table.primary_key):
        checks.append(
            Check(
                table.name,
                "+".join(table.primary_key),
                "raw",
                gxe.ExpectCompoundColumnsToBeUnique(column_list=list(table.primary_key)),
                message("rules.duplicate_key", columns=", ".join(table.primary_key)),
            )
        )
    return checks


# Modules that `import great_expectations` loads for what these suites never use: scipy.stats and
# altair for the KL-divergence expectation and its chart (imported at the top of its module), boto3
# and botocore for S3 stores (imported where installed). Together about a third of GX's import.
_DEFERRED_FOR_GX = ("scipy.stats", "altair", "jsonschema")
_ABSENT_FOR_GX = ("boto3", "botocore")


class _Deferred(types.ModuleType):
    """A stand-in for a module, imported for real on first use of one of its attributes.

    (importlib.util.LazyLoader would load it at once: the import system reads a module's __spec__.)"""

    def __getattr__(self, attribute: str):
        real = self.__dict__.get("_real")
        if real is None:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
            real = self._real = importlib.import_module(self.__name__)
        return getattr(real, attribute)


def _import_gx():
    """great_expectations, imported without its unused heavy dependencies: scipy.stats and altair are
    imported on first use (_Deferred; these suites never make it), and GX finds boto3 not installed
    (its own fallback: no S3 stores). Later imports of these modules, anywhere, work as usual."""
    if "great_expectations" in sys.modules:  # imported before (by this function or elsewhere)
        _shortcuts()
        return sys.modules["great_expectations"]
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    for name in _DEFERRED_FOR_GX:
        if name not in sys.modules and importlib.util.find_spec(name) is not None:
            sys.modules[name] = module = _Deferred(name)
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)  # find_spec imported the parent
    absent = [name for name in _ABSENT_FOR_GX if name not in sys.modules]
    try:
        sys.modules.update(dict.fromkeys(absent))  # None: "import boto3" raises ImportError
        import great_expectations
    finally:
        for name in absent:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
    _shortcuts()
    return great_expectations


def _shortcuts() -> None:
    """GX's own work per expectation made cheaper, with the same results (each is left out where GX's
    code differs from the one it was written for): an expectation's configuration read once per call
    (_fewer_configurations, _runtime_from_one_configuration), its type's name converted once
    (_once_per_name), and a metric's id made once per content (_ids_by_content). Together they halve a
    suite's run (docs/architecture.md, what GX costs)."""
    import great_expectations.expectations.expectation as module
    from great_expectations.core.id_dict import IDDict

    _fewer_configurations(module.Expectation)
    _runtime_from_one_configuration(module.Expectation)
    _once_per_name(module)
    _ids_by_content(IDDict)


def _once_per_name(module) -> None:
    """GX converts an expectation's class name to its type (snake case) with two regular expressions
    every time it builds the expectation's configuration, a dozen times per expectation and run: the
    answer for a name never changes, so it is kept (functools.lru_cache)."""
    import functools

    from great_expectations import util

    if getattr(module, "camel_to_snake", None) is util.camel_to_snake:
        module.camel_to_snake = functools.lru_cache(maxsize=4096)(util.camel_to_snake)


def _fewer_configurations(gx_expectation) -> None:
    """Make GX's Expectation read its configuration once per call of _get_domain_kwargs and
    _get_success_kwargs, not once per key: `configuration` rebuilds it from the pydantic fields
    each time (about a third of a suite's run). The results are the same (the originals, kept as
    __wrapped__, look every key up in the same configuration); a GX whose methods differ from the
    ones this was written for is left alone."""
    original_domain, original_success = gx_expectation._get_domain_kwargs, gx_expectation._get_success_kwargs
    if hasattr(original_domain, "__wrapped__") or not _is_gx_code(_GX_KWARGS_CODE, original_domain, original_success):
        return

    def _get_domain_kwargs(self) -> dict:
        kwargs = self.configuration.kwargs
        return {key: kwargs.get(key, self._get_default_value(key)) for key in self.domain_keys}

    def _get_success_kwargs(self) -> dict:
        return _success_kwargs(self, self.configuration.kwargs)

    _get_domain_kwargs.__wrapped__, _get_success_kwargs.__wrapped__ = original_domain, original_success
    gx_expectation._get_domain_kwargs, gx_expectation._get_success_kwargs = _get_domain_kwargs, _get_success_kwargs


def _success_kwargs(expectation, kwargs: dict) -> dict:
    """What GX's _get_success_kwargs gives, found in `kwargs` (one configuration's): the success keys,
    then the domain keys, each a default where the configuration lacks it."""
    found = {key: kwargs.get(key, expectation._get_default_value(key)) for key in expectation.success_keys}
    found.update((key, kwargs.get(key, expectation._get_default_value(key))) for key in expectation.domain_keys)
    return found


def _runtime_from_one_configuration(gx_expectation) -> None:
    """GX's _get_runtime_kwargs reads the expectation's configuration once for the success and domain
    keys and once or twice more for each runtime key (_get_success_kwarg): three to five rebuilds of
    it per call. This one reads it once and gives the same dict, in the same order: each key as
    _get_success_kwargs and _get_success_kwarg would find it in that configuration, a field's default
    for a runtime key it lacks, and GX's own _get_success_kwarg (which warns) for a key that is neither.
    A GX whose method differs from the one this was written for is left alone."""
    original = gx_expectation._get_runtime_kwargs
    if hasattr(original, "__wrapped__") or original.__code__.co_names != _GX_RUNTIME_NAMES:
        return
    if not hasattr(gx_expectation._get_success_kwargs, "__wrapped__"):
        return  # _fewer_configurations left GX's own: its keys may be found otherwise than read here
    parse_result_format, success_kwarg = original.__globals__["parse_result_format"], gx_expectation._get_success_kwarg
    shortcut = gx_expectation._get_success_kwargs  # _fewer_configurations's, whose keys this reads as it does

    def runtime_kwarg(self, kwargs: dict, key: str):
        if key in kwargs:
            return kwargs[key]
        field = self.__fields__.get(key)
        if field is not None:
            return field.default if not field.required else None
        return success_kwarg(self, key)

    def _get_runtime_kwargs(self, runtime_configuration: dict | None = None) -> dict:
        if type(self)._get_success_kwargs is not shortcut:  # a class of its own: GX's way
            return original(self, runtime_configuration)
        runtime_configuration = runtime_configuration or {}
        kwargs = self.configuration.kwargs
        runtime = {key: runtime_configuration.get(key, runtime_kwarg(self, kwargs, key)) for key in self.runtime_keys}
        runtime.update(_success_kwargs(self, kwargs))
        runtime["result_format"] = parse_result_format(runtime["result_format"])
        return runtime

    _get_runtime_kwargs.__wrapped__ = original
    gx_expectation._get_runtime_kwargs = _get_runtime_kwargs


# GX 1.x's _get_runtime_kwargs, as _runtime_from_one_configuration replaces it (the names its code uses).
_GX_RUNTIME_NAMES = ("_get_success_kwargs", "runtime_keys", "update", "parse_result_format")


def _ids_by_content(id_dict) -> None:
    """GX names each metric it needs by the MD5 of its arguments as JSON (IDDict.to_id: a JSON-safe
    copy, a dump, a digest), about forty times per expectation and run, for under two hundred
    distinct argument sets over the real catalog's suites. The id is kept by the arguments' exact
    content: their types and values (a float by its repr, so that 0.0 and -0.0, 1 and 1.0 and True
    stay apart), the keys in their order. Arguments of any other type (a date) are given to GX's own
    method, and so are calls with explicit keys; at most ID_CACHE_SIZE ids are kept."""
    original = id_dict.to_id
    if hasattr(original, "__wrapped__") or not _is_gx_code((_GX_TO_ID_NAMES,), original):
        return
    kept: dict = {}

    def to_id(self, id_keys=None, id_ignore_keys=None):
        if id_keys is not None or id_ignore_keys is not None:
            return original(self, id_keys, id_ignore_keys)
        try:
            key = (type(self), _content_key(dict(self)))
        except _NotPlain:
            return original(self)
        found = kept.get(key)
        if found is None:
            found = original(self)
            if len(kept) < ID_CACHE_SIZE:
                kept[key] = found
        return found

    to_id.__wrapped__ = original
    id_dict.to_id = to_id


ID_CACHE_SIZE = 100_000
_GX_TO_ID_NAMES = ("keys", "_id_ignore_keys", "convert_to_json_serializable", "hashlib", "md5", "json", "dumps")
_PLAIN_TYPES = (str, int, bool, type(None))


class _NotPlain(Exception):
    """A value whose JSON form _content_key cannot vouch for."""


def _content_key(value) -> tuple:
    """`value` as a key that equals another's only when GX's JSON of the two is the same (see _ids_by_content)."""
    kind = type(value)
    if kind in _PLAIN_TYPES:
        return (kind, value)
    if kind is float:
        return (kind, repr(value))
    if kind is list or kind is tuple:
        return (kind, tuple(_content_key(v) for v in value))
    if kind is dict:
        return (kind, tuple((_content_key(k), _content_key(v)) for k, v in value.items()))
    raise _NotPlain


# GX 1.x's two methods, as _fewer_configurations replaces them (their code's names and constants).
_GX_KWARGS_CODE = (
    ("configuration", "kwargs", "get", "_get_default_value", "domain_keys", "set", "keys"),
    ("_get_domain_kwargs", "configuration", "kwargs", "get", "_get_default_value", "success_keys", "update"),
)


def _is_gx_code(expected: tuple[tuple[str, ...], ...], *functions) -> bool:
    """Whether each function's code (with the functions defined in it) uses every name of its entry
    in `expected`: GX's code as a shortcut was written for."""
    import inspect

    names = []
    for function in functions:
        code = function.__code__
        names.append(code.co_names + tuple(n for c in code.co_consts if inspect.iscode(c) for n in c.co_names))
    return all(set(want) <= set(found) for want, found in zip(expected, names, strict=True))


def _gx_context(warm: Warm):
    """(gx, the batch definition every suite runs on): one ephemeral GX context per warm process, made on
    first use, with in-memory stores, analytics and progress bars off, and one pandas data frame asset
    whose batch is the whole frame passed to each run."""
    if warm.gx is not None:
        return warm.gx
    gx = _import_gx()
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    context = gx.get_context(mode="ephemeral", project_config=config)
    asset = context.data_sources.add_pandas(name="sources").add_dataframe_asset(name="tables")
    warm.gx = (gx, asset.add_batch_definition_whole_dataframe("whole frame"))
    return warm.gx


def _definition(table: Table, on: str, today: dt.date, warm: Warm):
    """(GX expectation suite, {expectation id: Check}, batch definition) for one table and one view, made
    once per warm process (kept in warm.suites by table, view and build date). The suite is not saved
    in the context's store: it is run as it is (_run_suite), so saving it would only cost a copy."""
    key = (table.name, on, today)
    if key not in warm.suites:
        gx, batch = _gx_context(warm)
        checks = [c for c in table_checks(table, today) if c.on == on]
        name = f"{on}_{table.name}_{today.isoformat()}"
        suite = gx.ExpectationSuite(name=name, expectations=[c.expectation for c in checks])
        for number, expectation in enumerate(suite.expectations):
            expectation.id = str(number)  # (the store would give each an id) GX's results are not in order
        by_id = {e.id: check for e, check in zip(suite.expectations, checks, strict=True)}
        if None in by_id or len(by_id) != len(checks):
            raise RuntimeError(f"GX did not keep the ids of the expectations of {suite.name}")
        warm.suites[key] = (suite, by_id, batch)
    return warm.suites[key]


def prepare_suites(warm: Warm) -> None:
    """Make Great Expectations' context and every source table's suites in `warm` now (a process that
    lives on does this while it waits for the first edit: pipeline/tools/serve.py)."""
    today = build_date()
    for table in SOURCE_TABLES:
        for on in ("raw", "typed"):
            _definition(table, on, today, warm)


def start_expectations(  # noqa: PLR0913
    con, sources_dir: Path, names: list[str], today: dt.date, warm: Warm, child: Early | None = None
) -> Callable[[Validation], None]:
    """Run the generated GX suites on each loaded table (every failing cell becomes a Problem): they start in
    a forked child now; calling the result waits for them and adds their outcomes to a Validation, in table order.
    `child` (build's, `early_validation`): a child forked before the sources were read, which has imported
    Great Expectations meanwhile; it is sent the tables as Arrow (`_run_shipped`), and this process then
    never imports pandas.

    The outcomes per table are kept in warm.outcomes, keyed by the table's cells: a warm process
    (`just serve`) runs Great Expectations again only on the tables an edit changed (and a new
    process only on those no process validated before: pipeline.validation_cache)."""
    from pipeline import validation_cache

    outcomes = warm.outcomes
    keys, jobs, entries = [], {}, {}
    shipped = child is not None and child.pid is not None and not warm.lives_on
    for name in names:
        table = TABLES_BY_NAME[name]
        shown = display_path(sources_dir, table)
        cells = con.sql(f"SELECT * FROM raw_{name}").fetchall()
        keys.append(key := (name, shown, today, tuple(cells)))
        if key not in outcomes:
            # outcomes remembered on disk by a process that validated these cells before
            entries[key], stored = validation_cache.table_outcome(table, shown, today, cells)
            if stored is not None:
                outcomes[key] = stored
                continue
            jobs |= _table_jobs(con, key, warm, shipped)
    if shipped and jobs:  # to the early child, every one
        finish = child.map(_run_shipped, list(jobs.values()))
    else:
        # GX is pure Python: the suites are shared between two cores (pipeline.parallel).
        weights = [len(job[0].fields) * (1 + len(job[3]) / 2000) for job in jobs.values()]
        # This process takes suites the child has not begun only where GX is imported here already (a
        # warm process): importing it for them costs a second of CPU, more than the suites it would take.
        joins = lambda: "great_expectations" in sys.modules  # noqa: E731
        finish = start_map(_run_suite, list(jobs.values()), weights, joins=joins)
    if child is not None:
        child.close()  # not sent any table (every outcome was known): killed

    def collect(out: Validation) -> None:
        found = dict(zip(jobs, finish(), strict=True))
        for key in dict.fromkeys(key for key, _ in jobs):
            outcomes[key] = tuple(found[key, "raw"][i] + found[key, "typed"][i] for i in (0, 1))
            validation_cache.store_table_outcome(entries[key], outcomes[key])
        for key in keys:
            problems, checks = outcomes[key]
            out.problems.extend(problems)
            out.checks.extend(checks)
        for key in set(outcomes) - set(keys):  # only this build's: edits do not pile up old outcomes
            del outcomes[key]

    return collect


def _table_jobs(con, key: tuple, warm: Warm, shipped: bool) -> dict[tuple, tuple]:
    """One table's two suites (raw and typed) by (key, view): `_run_suite`'s jobs with the pandas frames
    of its views, or, `shipped`, `_run_shipped`'s with their Arrow tables (the early child makes the
    frames; this process then never imports pandas). The typed suite names a failing cell by its raw
    text, not by the cast value (1e+308)."""
    name, shown, today, _ = key
    if shipped:
        raw = con.sql(f"SELECT * FROM raw_{name}").to_arrow_table()
        typed = con.sql(f"SELECT * FROM typed_{name}").to_arrow_table()
        return {
            (key, "raw"): (name, "raw", shown, today, raw, None),
            (key, "typed"): (name, "typed", shown, today, typed, raw),
        }
    table = TABLES_BY_NAME[name]
    raw = con.sql(f"SELECT * FROM raw_{name}").df()
    typed = con.sql(f"SELECT * FROM typed_{name}").df()
    jobs = {}
    # In a process that lives on (`serve`), GX and the suites are made here, before the fork: the child
    # inherits them and this process keeps them for the next build. Otherwise the process that runs a
    # suite makes it: the child imports GX while this process computes (this one never imports it to take
    # a suite the child has not begun: see start_expectations).
    for on, frame, texts in (("raw", raw, None), ("typed", typed, raw)):
        definition = partial(_definition, table, on, today, warm)
        if warm.lives_on:
            definition()  # kept in warm.suites: the call in _run_suite finds it
        jobs[key, on] = (table, on, shown, frame, texts, definition)
    return jobs


# What `_run_shipped` runs with: a Warm (its Great Expectations context and suites) and the DuckDB
# connection that makes the Arrow tables into pandas frames. Made by prepare_shipped in the early child,
# and on first use in a process that runs the suites itself because its child failed: one context per
# process, not one per suite.
_SHIPPED: dict[str, object] = {}


def _shipped() -> tuple[Warm, duckdb.DuckDBPyConnection]:
    if "duck" not in _SHIPPED:
        _SHIPPED["warm"], _SHIPPED["duck"] = Warm(), duckdb.connect()
    return _SHIPPED["warm"], _SHIPPED["duck"]


def prepare_shipped() -> None:
    """In the early child (pipeline.parallel.Early), while the build reads the sources: import Great
    Expectations (and pandas with it), DuckDB and Arrow, and open the connection `_run_shipped` uses."""
    import pyarrow  # noqa: F401 (the tables arrive as Arrow)

    _import_gx()
    _shipped()


def _run_shipped(job: tuple) -> tuple[list[Problem], list[CheckResult]]:
    """_run_suite on a table sent as Arrow (name, view, shown, date, its Arrow table, the raw table's for a
    typed suite): DuckDB makes the pandas frames from it, as `.df()` makes them in the build process
    from the same view (DuckDB's types go through Arrow and back unchanged; tests/test_early.py
    compares the outcomes). In the build process itself (the child failed) with the connection and
    suites `_shipped` makes there once."""
    name, on, shown, today, frame, raw = job
    warm, duck = _shipped()
    table = TABLES_BY_NAME[name]
    texts = None if raw is None else duck.from_arrow(raw).df()
    definition = partial(_definition, table, on, today, warm)
    return _run_suite((table, on, shown, duck.from_arrow(frame).df(), texts, definition))


def _run_suite(job: tuple) -> tuple[list[Problem], list[CheckResult]]:
    table, on, shown, frame, raw, definition = job
    suite, by_id, batch = definition()  # first: it imports GX as _import_gx does, deferring what it can
    from great_expectations.validator.v1_validator import Validator

    problems, checks = [], []

    def run(result_format: dict):
        # The suite runs directly on the frame: no validation definition, no result stored in the context.
        validator = Validator(
            batch_definition=batch, batch_parameters={"dataframe": frame}, result_format=result_format
        )
        return validator.validate_expectation_suite(suite)

    # Every expectation runs on every row either way; BOOLEAN_ONLY skips collecting the failing
    # rows, which is half of GX's time. A suite with a failure runs again to name them.
    result = run({"result_format": "BOOLEAN_ONLY"})
    if not result.success:
        result = run({"result_format": "COMPLETE", "unexpected_index_column_names": [LINE]})
    # The cells' text by line, for a typed suite's failures (made once, only when something failed).
    texts = raw.set_index(LINE).to_dict("index") if raw is not None and not result.success else {}
    # GX does not keep the suite's order in its results: match them by expectation id.
    for outcome in result.results:
        check = by_id[outcome.expectation_config.id]
        found = [] if outcome.success else _explain(check, outcome, shown, texts)
        problems.extend(found)
        checks.append(CheckResult(table.name, check.column, check.rule, "Great Expectations", len(found)))
    return problems, checks


def _explain(check: Check, outcome, shown: str, cell_texts: dict | None = None) -> list[Problem]:
    if outcome.exception_info and outcome.exception_info.get("raised_exception"):
        message = outcome.exception_info.get("exception_message")
        raise RuntimeError(f"validation of {shown} failed to run: {message}")
    rows = outcome.result.get("unexpected_index_list") or []
    out = []
    for row in rows:
        columns = check.column.split("+")
        cells = (cell_texts or {}).get(int(row[LINE]), row)
        texts = [_text(cells.get(c)) for c in columns]
        value = None if all(t is None for t in texts) else "; ".join(t or "" for t in texts)
        out.append(Problem(shown, int(row[LINE]), ", ".join(columns), value, check.rule))
    if not rows:
        out.append(Problem(shown, 0, check.column, None, check.rule))
    return out


def _text(value) -> str | None:
    if value is None or value != value:  # NaN from pandas
        return None
    if hasattr(value, "date") and hasattr(value, "hour"):  # pandas Timestamp of a DATE column
        return value.date().isoformat()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# -- cross-table rules in DuckDB SQL; each yields (line, column, value, rule) rows for one file --


def _sql_rule(out: Validation, con, sources_dir: Path, table: str, description: str, rows) -> None:  # noqa: PLR0913
    shown = display_path(sources_dir, TABLES_BY_NAME[table])
    found = [Problem(shown, line or 0, column, value, rule) for line, column, value, rule in rows]
    out.problems.extend(found)
    out.checks.append(CheckResult(table, "", description, "DuckDB SQL", len(found)))


def _rows_by_part(con, parts: list[tuple[str, str, list]]) -> dict[int, list[tuple]]:
    """The rows of several SELECTs (each `(table, sql, parameters)`, selecting line, column, value,
    rule): part number -> its rows by line. Each DuckDB query costs a millisecond or two whatever it
    reads, and these rules ask one question per column of every table: all parts run as one query, or,
    where the connection remembers answers (query_memo), one query per table, so that a warm process
    asks again only about the tables an edit changed."""
    found: dict[int, list[tuple]] = {i: [] for i in range(len(parts))}
    apart = getattr(con, "remembers", False)
    for table in dict.fromkeys(table if apart else "" for table, _, _ in parts):
        mine = [(i, q, values) for i, (t, q, values) in enumerate(parts) if not apart or t == table]
        sql = " UNION ALL ".join(f"SELECT {i} AS part, * FROM ({q})" for i, q, _ in mine)
        for row in con.execute(f"{sql} ORDER BY 1, 2", [v for _, _, values in mine for v in values]).fetchall():
            found[row[0]].append(row[1:])
    return found


def castable(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """Values that look right but do not cast (2026-13-45, an integer too large)."""
    parts = [
        (
            name,
            f"SELECT r.{LINE}, '{f.name}', r.{f.name}, ? FROM raw_{name} r "
            f"WHERE r.{f.name} IS NOT NULL AND regexp_full_match(r.{f.name}, ?) "
            f"AND {typed_sql(f, 'r.' + f.name)} IS NULL",
            [message("rules.not_valid_type", type_name=TYPE_NAMES_RU[f.type]), TYPE_PATTERNS[f.type]],
        )
        for name in sorted(names)
        for f in TABLES_BY_NAME[name].fields
        if f.type in TYPE_PATTERNS and f.type != "id"
    ]
    found = _rows_by_part(con, parts)
    for name in sorted(names):
        rows = [row for i, (table, _, _) in enumerate(parts) if table == name for row in found[i]]
        _sql_rule(out, con, sources_dir, name, message("checks.castable"), rows)


def reserved_ids(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """No id is the name of one of the site's own pages (schema.RESERVED_NAMES): a GPU `index` would
    replace gpus/index.html."""
    reserved = sorted(RESERVED_NAMES)
    rule = message("rules.reserved_id", names=", ".join(reserved))
    parts = [
        (
            name,
            f"SELECT {LINE}, '{f.name}', {f.name}, ? FROM raw_{name} WHERE {f.name} IN ({', '.join('?' * len(reserved))})",
            [rule, *reserved],
        )
        for name in sorted(names)
        for f in TABLES_BY_NAME[name].fields
        if f.type == "id"
    ]
    found = _rows_by_part(con, parts)
    for name in sorted(names):
        rows = [row for i, (table, _, _) in enumerate(parts) if table == name for row in found[i]]
        if rows:
            _sql_rule(out, con, sources_dir, name, message("checks.reserved_id"), rows)


def foreign_keys(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """Every id that names a row of another table must be one of that table's ids (registry `references`)."""
    parts, checks = [], []
    for table in SOURCE_TABLES:
        for f in table.fields:
            if not f.references or table.name not in names:
                continue
            target_name, target_col = f.references.split(".")
            if target_name not in names:
                continue
            target = TABLES_BY_NAME[target_name]
            rule = message("rules.foreign_key", table=target.title_ru, path=display_path(sources_dir, target))
            parts.append(
                (
                    table.name,
                    f"SELECT {LINE}, '{f.name}', {f.name}, ? FROM raw_{table.name} WHERE {f.name} IS NOT NULL "
                    f"AND {f.name} NOT IN (SELECT {target_col} FROM raw_{target_name} WHERE {target_col} IS NOT NULL)",
                    [rule],
                )
            )
            checks.append(message("checks.foreign_key", column=f.name, target=f"{target_name}.{target_col}"))
    found = _rows_by_part(con, parts)
    for i, ((table, _, _), description) in enumerate(zip(parts, checks, strict=True)):
        _sql_rule(out, con, sources_dir, table, description, found[i])


def anchor_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """Every method has a value at every anchor size; memory grows with size and follows the method order."""
    if not {"memory_anchors", "methods"} <= names:
        return
    missing = con.sql(
        """
        SELECT NULL, 'method_id', m.method_id, s.params_b
        FROM (SELECT method_id FROM typed_methods WHERE method_id IS NOT NULL) m
        CROSS JOIN (SELECT DISTINCT params_b FROM typed_memory_anchors WHERE params_b IS NOT NULL) s
        WHERE NOT EXISTS (SELECT 1 FROM typed_memory_anchors a
                          WHERE a.method_id = m.method_id AND a.params_b = s.params_b)
        ORDER BY 3, s.params_b
        """
    ).fetchall()
    missing = [
        (line, col, value, message("rules.anchor_missing", size=_num(size))) for line, col, value, size in missing
    ]
    _sql_rule(out, con, sources_dir, "memory_anchors", message("checks.anchor_sizes"), missing)
    # Memory grows with the size, method by method.
    shrinking = _memory_falls(con, "typed_memory_anchors a", "a.method_id", "a.params_b", "a.params_b")
    rows = [
        (
            line,
            "memory_gb",
            _num(memory),
            message(
                "rules.anchor_shrinks",
                method=method,
                size=_num(size),
                prev_size=_num(prev_size),
                prev_memory=_num(prev_memory),
            ),
        )
        for line, memory, method, size, prev_size, prev_memory in shrinking
    ]
    _sql_rule(out, con, sources_dir, "memory_anchors", message("checks.anchor_growth"), rows)
    # At every size, memory does not fall from one method to the next in the methods' order.
    disorder = _memory_falls(
        con,
        "typed_memory_anchors a JOIN typed_methods m USING (method_id)",
        "a.params_b",
        "m.sort_order",
        "a.method_id",
    )
    rows = [
        (
            line,
            "memory_gb",
            _num(memory),
            message("rules.anchor_order", size=_num(size), method=method, prev=prev, prev_memory=_num(prev_memory)),
        )
        for line, memory, method, size, prev, prev_memory in disorder
    ]
    _sql_rule(out, con, sources_dir, "memory_anchors", message("checks.anchor_order"), rows)


def _memory_falls(con, source: str, partition: str, order: str, previous: str) -> list[tuple]:
    """Anchor rows (alias `a` in `source`) whose memory is below the previous row's in the window
    (partition, order), rows with an empty size, memory or order aside: (line, memory, method, size,
    the previous row's `previous`, the previous row's memory)."""
    return con.sql(
        f"""
        SELECT {LINE}, memory_gb, method_id, params_b, prev, prev_memory FROM (
          SELECT a.*, lag({previous}) OVER w AS prev, lag(a.memory_gb) OVER w AS prev_memory
          FROM {source} WHERE a.memory_gb IS NOT NULL AND a.params_b IS NOT NULL AND {order} IS NOT NULL
          WINDOW w AS (PARTITION BY {partition} ORDER BY {order}))
        WHERE memory_gb < prev_memory ORDER BY {LINE}
        """
    ).fetchall()


def model_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """A model's active parameters (mixture of experts) are at most its total."""
    if "models" not in names:
        return
    rows = con.sql(
        f"""SELECT {LINE}, 'active_params_b', active_params_b, params_b
            FROM typed_models WHERE active_params_b > params_b ORDER BY {LINE}"""
    ).fetchall()
    rows = [
        (line, col, _num(v), message("rules.active_above_total", total=_num(total))) for line, col, v, total in rows
    ]
    _sql_rule(out, con, sources_dir, "models", message("checks.active_params"), rows)


def gpu_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """A separate source for a card's FP8 figure is given only with that figure."""
    if "gpus" not in names:
        return
    rows = con.sql(
        f"""SELECT {LINE}, 'fp8_reference_id', fp8_reference_id FROM typed_gpus
            WHERE fp8_reference_id IS NOT NULL AND fp8_dense_tflops IS NULL ORDER BY {LINE}"""
    ).fetchall()
    rows = [(line, col, value, message("rules.fp8_reference_alone")) for line, col, value in rows]
    _sql_rule(out, con, sources_dir, "gpus", message("checks.fp8_reference"), rows)


# How far the parameter count computed from a model's architecture may be from its stated one.
PARAMS_TOLERANCE = 0.02


def architecture_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """The architecture columns of models.csv hang together and give the stated parameter counts.

    The count is Python (pipeline/estimate/architecture.py), so these rules run over the typed rows
    in Python and report in the same form as the SQL rules.
    """
    if "models" not in names:
        return
    shown = display_path(sources_dir, TABLES_BY_NAME["models"])
    raw = _rows(con, "raw_models")
    typed = {r[LINE]: r for r in _rows(con, "typed_models")}
    core = [*architecture.CORE_COLUMNS, "arch_reference_id"]
    mla = list(architecture.MLA_COLUMNS)
    found: dict[str, list] = {"complete": [], "moe": [], "mla": [], "count": []}
    for r in raw:
        line, t = r[LINE], typed[r[LINE]]
        filled = [c for c in core if r[c] is not None]
        if filled and len(filled) < len(core):
            rule = message("rules.arch_together", columns=", ".join(core))
            found["complete"] += [(line, c, None, rule) for c in core if r[c] is None]
        moe = found["moe"]
        if (r["experts"] is None) != (r["experts_per_token"] is None):
            empty = "experts" if r["experts"] is None else "experts_per_token"
            moe.append((line, empty, None, message("rules.experts_together")))
        elif t["experts"] is not None and (t["experts_per_token"] or 0) > t["experts"]:
            rule = message("rules.experts_per_token", experts=t["experts"])
            moe.append((line, "experts_per_token", r["experts_per_token"], rule))
        if r["experts"] is not None and r["moe_intermediate_size"] is None:
            moe.append((line, "moe_intermediate_size", None, message("rules.moe_width")))
        for c in ("moe_intermediate_size", "shared_experts", "dense_layers"):
            if r[c] is not None and r["experts"] is None and r["experts_per_token"] is None:
                moe.append((line, c, r[c], message("rules.moe_only")))
        if r["attention_kind"] == "mla":
            rule = message("rules.mla_needs")
            found["mla"] += [(line, c, None, rule) for c in mla[1:] if r[c] is None]
        else:
            found["mla"] += [(line, c, r[c], message("rules.mla_only")) for c in mla if r[c] is not None]
        if len(filled) == len(core) and not any(p[0] == line for rows in found.values() for p in rows):
            found["count"] += _count_problems(line, t)
    rules = {
        "complete": message("checks.arch_complete"),
        "moe": message("checks.arch_moe"),
        "mla": message("checks.arch_mla"),
        "count": message("checks.arch_params", tolerance=f"{PARAMS_TOLERANCE:.0%}".replace("%", "\u00a0%")),
    }
    for key, description in rules.items():
        problems = [Problem(shown, line, col, value, rule) for line, col, value, rule in found[key]]
        out.problems.extend(problems)
        out.checks.append(CheckResult("models", "", description, "Python", len(problems)))


def _rows(con, view: str) -> list[dict]:
    result = con.sql(f"SELECT * FROM {view} ORDER BY {LINE}")
    return [dict(zip(result.columns, row, strict=True)) for row in result.fetchall()]


def _count_problems(line: int, row: dict) -> list[tuple]:
    """params_b and active_params_b against the counts computed from the row's architecture."""
    if any(row[c] is None for c in architecture.CORE_COLUMNS):
        return []  # a cell that did not cast is already reported
    counts = architecture.parameter_counts(architecture.architecture_from_row(row))
    out = []
    for column, computed in (("params_b", counts.total), ("active_params_b", counts.active)):
        stated = row[column]
        if stated is None or stated <= 0 or abs(computed / 1e9 - stated) <= PARAMS_TOLERANCE * stated:
            continue  # no size, or one its own bound refuses (its column's check reports it)
        if column == "active_params_b" and row["params_b"] is not None and stated > row["params_b"]:
            continue  # already reported by model_rules: active above the total
        off = (computed / 1e9 - stated) / stated
        rule = message(
            "rules.params_off",
            computed=f"{computed / 1e9:.4g}".replace(".", ","),
            parameters=_rub(computed),
            off=f"{off:+.1%}".replace(".", ",").replace("-", "\u2212").replace("%", "\u00a0%"),
            stated=_num(stated),
            tolerance=f"{PARAMS_TOLERANCE:.0%}".replace("%", "\u00a0%"),
        )
        out.append((line, column, _num(stated), rule))
    return out


def server_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """A server's interconnect is one its GPU's form factor allows, and its rental terms hold together:
    a minimum term only with a monthly price, an hourly price not above the monthly one."""
    if not {"servers", "gpus"} <= names:
        return
    allowed = " OR ".join(
        f"(g.form_factor = '{ff}' AND s.interconnect IN ({', '.join(repr(i) for i in links)}))"
        for ff, links in SERVER_INTERCONNECTS.items()
    )
    rows = con.sql(
        f"""SELECT s.{LINE}, 'interconnect', s.interconnect, g.gpu_id, g.form_factor, g.interconnect
            FROM typed_servers s JOIN typed_gpus g USING (gpu_id)
            WHERE s.interconnect IS NOT NULL AND g.form_factor IS NOT NULL
              AND (NOT ({allowed}) OR (s.interconnect = 'nvlink-bridge' AND g.interconnect <> 'nvlink-bridge'))
            ORDER BY 1"""
    ).fetchall()
    rows = [
        (line, col, value, message("rules.interconnect", gpu=gpu, form_factor=form_factor, link=link))
        for line, col, value, gpu, form_factor, link in rows
    ]
    _sql_rule(out, con, sources_dir, "servers", message("checks.interconnect"), rows)
    terms = con.sql(
        f"""SELECT {LINE}, 'min_term_months', CAST(min_term_months AS VARCHAR), NULL
            FROM typed_servers WHERE min_term_months IS NOT NULL AND price_rub_month IS NULL
            UNION ALL
            SELECT {LINE}, 'price_rub_hour', CAST(price_rub_hour AS VARCHAR), price_rub_month
            FROM typed_servers WHERE price_rub_hour IS NOT NULL AND price_rub_month IS NOT NULL
              AND price_rub_hour > price_rub_month
            ORDER BY 1"""
    ).fetchall()
    terms = [
        (
            line,
            col,
            value,
            message("rules.min_term")
            if monthly is None
            else message("rules.hourly_above_monthly", monthly=_rub(monthly)),
        )
        for line, col, value, monthly in terms
    ]
    _sql_rule(out, con, sources_dir, "servers", message("checks.rental_terms"), terms)


def constant_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """Every declared constant is present and within its bounds (schema.CONSTANT_BOUNDS), and the
    relations between constants hold (schema.CONSTANT_RELATIONS)."""
    if "constants" not in names:
        return
    present = {r[0] for r in con.sql("SELECT constant_id FROM raw_constants").fetchall()}
    rows = [
        (None, "constant_id", c, message("rules.constant_required")) for c in REQUIRED_CONSTANTS if c not in present
    ]
    read = template_constants()
    rows += [
        (None, "constant_id", c, message("rules.constant_read", templates=", ".join(read[c])))
        for c in sorted(read)
        if c not in present and c not in REQUIRED_CONSTANTS
    ]
    _sql_rule(out, con, sources_dir, "constants", message("checks.constants_present"), rows)
    values = _constant_rows(con)
    rows = []
    for constant_id, (line, value) in values.items():
        bounds = CONSTANT_BOUNDS.get(constant_id)
        if bounds is not None and value is not None and not _within(bounds, value):
            rule = f"{constant_id} {_describe(bounds)}"  # the constant, then its bounds in words
            rows.append((line, "value", _num(value), rule))
    _sql_rule(out, con, sources_dir, "constants", message("checks.constants_bounds"), sorted(rows))
    rows = []
    for left, op, right in CONSTANT_RELATIONS:
        (line, a), (_, b) = values.get(left, (None, None)), values.get(right, (None, None))
        if a is not None and b is not None and not _RELATIONS[op](a, b):
            rule = message(_RELATION_WORDS[op], left=left, right=right, value=_num(b))
            rows.append((line, "value", _num(a), rule))
    _sql_rule(out, con, sources_dir, "constants", message("checks.constants_relations"), sorted(rows))


# How templates and articles read a constant: t.const("…") (articles), constants.… / constants["…"] (pages).
_TEMPLATE_CONSTANT = re.compile(
    r"""\bt\.const\(\s*["']([a-z0-9_]+)["']|\bconstants\s*\[\s*["']([a-z0-9_]+)["']|\bconstants\.([a-z0-9_]+)\b"""
)


def template_constants(templates: Path | None = None) -> dict[str, list[str]]:
    """Constant id -> the templates and articles that read it (their `t.const("…")` and `constants.…`), for
    `check`. The typical setup's `typical_…` values come from typical_setup.csv, not constants.csv."""
    templates = templates or TEMPLATES
    found: dict[str, list[str]] = {}
    for path in sorted(templates.rglob("*")):
        if path.suffix not in (".html", ".md") or path.parent.name == "static" or path.name == "README.md":
            continue
        for match in _TEMPLATE_CONSTANT.finditer(path.read_text(encoding="utf-8")):
            constant = next(group for group in match.groups() if group)
            name = f"site_templates/{path.relative_to(templates).as_posix()}"
            if not constant.startswith("typical_") and name not in found.setdefault(constant, []):
                found[constant].append(name)
    return found


_RELATIONS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b}
_RELATION_WORDS = {"<": "rules.relation_less", "<=": "rules.relation_at_most"}
# The rule of a measurement's LoRA setting, by the kind of its method.
LORA_RULES = {"full": "rules.lora_full", "rankless": "rules.lora_rankless", "lora": "rules.lora_required"}


def _constant_rows(con) -> dict[str, tuple[int, float | None]]:
    """constant_id -> (line, typed value) of constants.csv (the first row of a duplicated id)."""
    rows = con.sql(f"SELECT constant_id, {LINE}, value FROM typed_constants ORDER BY {LINE}").fetchall()
    found: dict[str, tuple[int, float | None]] = {}
    for constant_id, line, value in rows:
        found.setdefault(constant_id, (line, value))
    return found


def _within(b: Bounds, x: float) -> bool:
    return (
        (b.gt is None or x > b.gt)
        and (b.ge is None or x >= b.ge)
        and (b.lt is None or x < b.lt)
        and (b.le is None or x <= b.le)
        and (not b.integer or float(x).is_integer())
    )


def _describe(b: Bounds) -> str:
    """The bounds in words (rules.bounds…): above 0 and below 1; a whole number from 1 to 4096."""
    if b.gt is not None:
        low = message("rules.bounds_above", value=_num(b.gt))
    else:
        low = message("rules.bounds_at_least", value=_num(b.ge)) if b.ge is not None else ""
    if b.lt is not None:
        high = message("rules.bounds_below", value=_num(b.lt))
    else:
        high = message("rules.bounds_at_most", value=_num(b.le)) if b.le is not None else ""
    if b.integer and b.ge is not None and b.le is not None:
        return message("rules.bounds_whole_range", low=_num(b.ge), high=_num(b.le))
    what = message("rules.bounds_whole") if b.integer else ""
    limits = message("rules.bounds_and").join(x for x in (low, high) if x)
    return message("rules.bounds", what=what, limits=limits).rstrip()


def valid_constants(con) -> dict[str, float]:
    """The constants that are present and within their bounds: what the warnings may compute with."""
    return {
        c: v
        for c, (_, v) in _constant_rows(con).items()
        if v is not None and (c not in CONSTANT_BOUNDS or _within(CONSTANT_BOUNDS[c], v))
    }


# -- plausibility: numbers that a name states, and figures that cannot be -----------------------

# How far a named model's size may be from the one in its marketing name before a warning:
# "Llama 3.2 1B" has 1.24 B parameters, "Mixtral 8x7B" 46.7 B.
NAMED_SIZE_FACTOR = 1.5
# Anchor memory per parameter beyond which the editor is asked to check the figure (bytes per
# parameter; full fine-tuning in mixed precision takes about 17 in LLaMA-Factory's table).
ANCHOR_USUAL_BYTES_PER_PARAM = 40


def _number(text: str) -> float:
    return float(text.replace(",", "."))


def _near(stated: float, actual: float, tolerance: float = NAME_TOLERANCE) -> bool:
    return abs(stated - actual) <= tolerance * max(abs(actual), 1e-12)


def _valid(table: str, column: str, value) -> bool:
    """A typed value its own field's rules accept: the cross-field rules leave the others to them."""
    f = TABLES_BY_NAME[table].field(column)
    return value is not None and (f.min is None or value >= f.min) and (f.max is None or value <= f.max)


def _bounds(table: str, column: str) -> tuple[float, float]:
    f = TABLES_BY_NAME[table].field(column)
    return f.min, f.max


def _tokens(*texts: str | None) -> set[str]:
    return {t for text in texts if text for t in NOT_IN_WORD.split(text.lower()) if t}


def name_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """Names that state a number agree with it: a GPU's memory, a server's GPU count, GPU and
    memory, a generic model's size, a method's bits."""
    _record_rules(
        out,
        con,
        sources_dir,
        names,
        (
            ({"gpus"}, "gpus", message("checks.gpu_names"), _gpu_name_rows),
            ({"servers", "gpus"}, "servers", message("checks.server_names"), _server_name_rows),
            ({"models"}, "models", message("checks.model_names"), _model_name_rows),
            ({"methods"}, "methods", message("checks.method_names"), _method_name_rows),
        ),
    )


def _record_rules(out: Validation, con, sources_dir: Path, names: set[str], rules: tuple) -> None:
    """Each rule, given as (the tables it needs, the table it reports on, its description, the function of
    the connection that returns its rows), run when its tables are loaded, its rows recorded in `out`."""
    for needs, table, description, found in rules:
        if needs <= names:
            _sql_rule(out, con, sources_dir, table, description, found(con))


def _gpu_name_rows(con) -> list[tuple]:
    """A GPU's name or short name stating a memory other than its memory_gb."""
    rows = []
    for r in _rows(con, "typed_gpus"):
        for column in ("name", "short_name"):
            for m in GB_IN_NAME.finditer(r[column] or ""):
                if _valid("gpus", "memory_gb", r["memory_gb"]) and not _near(_number(m.group(1)), r["memory_gb"]):
                    rule = message("rules.name_memory", stated=m.group(0), memory=_num(r["memory_gb"]))
                    rows.append((r[LINE], column, r[column], rule))
    return rows


def _server_name_rows(con) -> list[tuple]:
    """A server's name ("8 × H200 141GB") stating another GPU count, GPU memory or GPU model than its row."""
    gpus = {r["gpu_id"]: r for r in _rows(con, "typed_gpus")}
    rows = []
    for r in _rows(con, "typed_servers"):
        m = SERVER_NAME.match(r["display_name"] or "")
        if m:
            rows += _server_name_problems(r, m, gpus.get(r["gpu_id"]))
    return sorted(rows)


def _server_name_problems(r: dict, m: re.Match, gpu: dict | None) -> list[tuple]:
    """The rows of one server whose name matched SERVER_NAME (`m`); `gpu` is its GPU's row, if known."""
    count, part = int(m.group(1)), re.sub(r"\([^)]*\)\s*$", "", m.group(2)).strip()
    name, rows = r["display_name"], []
    if _valid("servers", "gpu_count", r["gpu_count"]) and count != r["gpu_count"]:
        rule = message("rules.name_gpu_count", count=count, gpu_count=r["gpu_count"])
        rows.append((r[LINE], "display_name", name, rule))
    if gpu is None:
        return rows
    for g in GB_IN_NAME.finditer(part):
        if _valid("gpus", "memory_gb", gpu["memory_gb"]) and not _near(_number(g.group(1)), gpu["memory_gb"]):
            rule = message("rules.name_gpu_memory", stated=g.group(0), gpu=gpu["gpu_id"], memory=_num(gpu["memory_gb"]))
            rows.append((r[LINE], "display_name", name, rule))
    model = next((t for t in _tokens(GB_IN_NAME.sub("", part)) if any(ch.isdigit() for ch in t)), None)
    if model and model not in _tokens(gpu["name"], gpu["short_name"], gpu["gpu_id"]):
        rule = message("rules.name_gpu_model", model=model.upper(), gpu=gpu["gpu_id"], name=gpu["name"])
        rows.append((r[LINE], "display_name", name, rule))
    return rows


def _model_name_rows(con) -> list[tuple]:
    """A generic model's name or short name stating another size than its params_b."""
    rows = []
    for r in _rows(con, "typed_models"):
        if r["kind"] != "generic" or not _valid("models", "params_b", r["params_b"]):
            continue
        for column in ("display_name", "short_name"):
            stated = _stated_params(r[column])
            if stated is not None and not _near(stated, r["params_b"]):
                rule = message("rules.name_params", stated=_num(stated), params=_num(r["params_b"]))
                rows.append((r[LINE], column, r[column], rule))
    return rows


def _method_name_rows(con) -> list[tuple]:
    """A method whose id does not give its family, or whose names or family do not fit its bits."""
    rows = []
    for r in _rows(con, "typed_methods"):
        rows += _method_id_problems(r)
        if _valid("methods", "bits", r["bits"]):
            rows += _method_bits_problems(r)
    return sorted(rows)


def _method_id_problems(r: dict) -> list[tuple]:
    """The first-principles estimator (memory.Setup) reads the kind and the QLoRA bits from the id."""
    method_id, rows = r["method_id"] or "", []
    kind = "full" if method_id.startswith("full") else "qlora" if method_id.startswith("qlora") else "lora"
    if r["family"] in ("full", "lora", "qlora") and kind != r["family"]:
        rule = message("rules.family_kind", family=r["family"])
        rows.append((r[LINE], "method_id", method_id, rule))
    if kind == "qlora" and not re.fullmatch(r"qlora_\d{1,2}bit", method_id):
        rule = message("rules.qlora_bits_id")
        rows.append((r[LINE], "method_id", method_id, rule))
    return rows


def _method_bits_problems(r: dict) -> list[tuple]:
    """Bits stated in a method's id or names other than its bits, and bits its family cannot have."""
    rows = []
    for column in ("method_id", "name_ru", "short_name_ru", "name_en"):
        for m in BITS_IN_NAME.finditer(r[column] or ""):
            if int(m.group(1)) != r["bits"]:
                rule = message("rules.bits_in_name", column=column, stated=m.group(0))
                rows.append((r[LINE], "bits", str(r["bits"]), rule))
    family_bits = {"qlora": r["bits"] <= 8, "lora": r["bits"] >= 16, "full": r["bits"] >= 16}
    if not family_bits.get(r["family"], True):
        rule = message("rules.qlora_bits") if r["family"] == "qlora" else message("rules.base_bits", family=r["family"])
        rows.append((r[LINE], "bits", str(r["bits"]), rule))
    return rows


def _stated_params(name: str | None) -> float | None:
    m = PARAMS_IN_NAME.search(name or "")
    if not m:
        return None
    return (int(m.group(1)) if m.group(1) else 1) * _number(m.group(2))


def catalog_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """Figures that cannot be and rows the rules need: anchor memory below the weights alone, an
    offer without jobs, the cards of seed 000's pretraining rows, a shape for the generic sizes, the
    server of a comparison setup."""
    _record_rules(
        out,
        con,
        sources_dir,
        names,
        (
            ({"memory_anchors", "methods"}, "memory_anchors", message("checks.anchor_weights"), _below_weights_rows),
            ({"legacy_offers", "legacy_offer_jobs"}, "legacy_offers", message("checks.offer_jobs"), _offer_rows),
            ({"legacy_gpu_counts", "gpus"}, "legacy_gpu_counts", message("checks.pretraining"), _pretraining_rows),
            ({"models"}, "models", message("checks.model_shape"), _model_shape_rows),
            ({"comparison_setups"}, "comparison_setups", message("checks.comparison_server"), _setup_server_rows),
        ),
    )


def _below_weights_rows(con) -> list[tuple]:
    """Anchor memory below what the weights alone take at the method's bits."""
    found = con.sql(
        f"""SELECT a.{LINE}, a.memory_gb, a.method_id, a.params_b, m.bits
            FROM typed_memory_anchors a JOIN typed_methods m USING (method_id)
            WHERE a.memory_gb < a.params_b * m.bits / 8 AND m.bits BETWEEN ? AND ?
              AND a.params_b BETWEEN ? AND ? AND a.memory_gb BETWEEN ? AND ? ORDER BY 1""",
        params=[
            *_bounds("methods", "bits"),
            *_bounds("memory_anchors", "params_b"),
            *_bounds("memory_anchors", "memory_gb"),
        ],
    ).fetchall()
    return [
        (
            line,
            "memory_gb",
            _num(memory),
            message("rules.below_weights", method=method, size=_num(size), weights=_num(size * bits / 8), bits=bits),
        )
        for line, memory, method, size, bits in found
    ]


def _offer_rows(con) -> list[tuple]:
    """An offer without a job in legacy_offer_jobs.csv."""
    return con.sql(
        f"""SELECT {LINE}, 'offer_id', offer_id, ?
            FROM raw_legacy_offers WHERE offer_id IS NOT NULL
              AND offer_id NOT IN (SELECT offer_id FROM raw_legacy_offer_jobs WHERE offer_id IS NOT NULL)
            ORDER BY 1""",
        params=[message("rules.offer_no_jobs")],
    ).fetchall()


def _setup_server_rows(con) -> list[tuple]:
    """A comparison setup on a server's cards (server, servers, advice) without its server, or one on one
    card with a server (which it would not use)."""
    return con.sql(
        f"""SELECT {LINE}, 'server_id', server_id, CASE WHEN scale = 'card' THEN ? ELSE ? END
            FROM raw_comparison_setups
            WHERE (scale = 'card' AND server_id IS NOT NULL)
               OR (scale IN ('server', 'servers', 'advice') AND server_id IS NULL)
            ORDER BY 1""",
        params=[message("rules.setup_card_server"), message("rules.setup_needs_server")],
    ).fetchall()


def _pretraining_rows(con) -> list[tuple]:
    """The pretraining rows (an empty method_id): present, one per model, and their cards in gpus.csv."""
    from pipeline.estimate.training import PRETRAINING_GPUS

    gpus = {r[0] for r in con.sql("SELECT gpu_id FROM raw_gpus").fetchall()}
    pretraining = con.sql(
        f"SELECT {LINE} FROM raw_legacy_gpu_counts WHERE method_id IS NULL ORDER BY 1 LIMIT 1"
    ).fetchall()
    rows = [
        (pretraining[0][0], "method_id", None, message("rules.pretraining_gpu", gpu=g))
        for g in PRETRAINING_GPUS
        if pretraining and g not in gpus
    ]
    # the pretraining table has one row per model and card
    rows += [
        (line, col, value, message("rules.pretraining_twice", first=first))
        for line, col, value, first in con.sql(
            f"""SELECT {LINE}, 'model_id', model_id, first
            FROM (SELECT *, first_value({LINE}) OVER (PARTITION BY model_id ORDER BY {LINE}) AS first
                  FROM raw_legacy_gpu_counts WHERE method_id IS NULL AND model_id IS NOT NULL)
            WHERE {LINE} <> first ORDER BY 1"""
        ).fetchall()
    ]
    if not pretraining and con.sql("SELECT count(*) FROM raw_legacy_gpu_counts").fetchall()[0][0]:
        rule = message("rules.pretraining_none")
        rows.append((None, "method_id", None, rule))
    return rows


def _model_shape_rows(con) -> list[tuple]:
    """Models without architecture columns take the shape of a named dense gated model: there must be one."""
    models = _rows(con, "typed_models")
    shaped = [r for r in models if all(r[c] is not None for c in architecture.CORE_COLUMNS)]
    shapes = [r for r in shaped if r["experts"] is None and r["mlp_kind"] == "gated"]
    rows = []
    if len(shaped) < len(models) and not shapes:
        first = next(r for r in models if r not in shaped)
        rule = message("rules.no_shape")
        rows.append((first[LINE], "layers", None, rule))
    return rows


def typical_setup_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """Every setting of the typical setup is present once, known, and of its kind (memory.TYPICAL_SETTINGS)."""
    if "typical_setup" not in names:
        return
    from pipeline.estimate.first_principles import typical_setup_problems

    rows = con.sql(f"SELECT {LINE}, setting_id, value FROM raw_typical_setup ORDER BY 1").fetchall()
    _sql_rule(
        out,
        con,
        sources_dir,
        "typical_setup",
        message("checks.typical_setup"),
        typical_setup_problems(rows),
    )


def measurement_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """A peak is given exactly for measured rows, LoRA settings exactly for LoRA methods, and a peak fits its GPU."""
    if "measurements" not in names:
        return
    rows = con.sql(
        f"""SELECT {LINE}, 'measured_value', measured_value,
                   CASE WHEN outcome = 'value' THEN ? ELSE ? END
            FROM raw_measurements
            WHERE (outcome = 'value' AND measured_value IS NULL) OR (outcome = 'oom' AND measured_value IS NOT NULL)
            ORDER BY 1""",
        params=[message("rules.peak_required"), message("rules.peak_empty")],
    ).fetchall()
    _sql_rule(out, con, sources_dir, "measurements", message("checks.peak_outcome"), rows)
    if "methods" in names:
        # IA3 and prompt tuning run as "lora" (a frozen 16-bit base) but have no rank or target layers.
        rankless = " OR ".join(
            f"list_contains(string_split(coalesce(r.extra_techniques, ''), ','), '{a}')" for a in RANKLESS_ADAPTERS
        )
        rows = []
        for column in ("lora_rank", "lora_targets"):
            rows += con.sql(
                f"""SELECT * FROM (
                      SELECT r.{LINE}, '{column}', r.{column},
                             CASE WHEN m.family = 'full' THEN 'full' WHEN {rankless} THEN 'rankless'
                                  ELSE 'lora' END AS rule, r.method_id,
                             m.family IN ('lora', 'qlora') AND NOT ({rankless}) AS needed
                      FROM raw_measurements r JOIN raw_methods m USING (method_id))
                    WHERE needed <> ({column} IS NOT NULL)"""
            ).fetchall()
        adapters = message("rules.bounds_and").join(RANKLESS_ADAPTERS)
        rows = sorted(
            (line, col, value, message(LORA_RULES[kind], method=method, column=col, adapters=adapters))
            for line, col, value, kind, method, _ in rows
        )
        _sql_rule(out, con, sources_dir, "measurements", message("checks.lora_settings"), rows)
    if "gpus" in names:
        _peak_fits_rule(con, sources_dir, out)


def throughput_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """A measured run's layout holds together: its cards spread evenly over its servers, one card is
    `one_card` and only it, and a network is given exactly when there are several servers."""
    if "throughput" not in names:
        return
    # These rules read the raw cells, whatever the column checks find: a zero `nodes` (refused by its own
    # bound) must not stop them, and DuckDB 2 raises on a modulo by zero where DuckDB 1 gave NULL.
    rows = con.sql(
        f"""SELECT * FROM (
              SELECT {LINE}, 'nodes', nodes, ? FROM raw_throughput
              WHERE TRY_CAST(gpus AS BIGINT) % NULLIF(TRY_CAST(nodes AS BIGINT), 0) <> 0
              UNION ALL
              SELECT {LINE}, 'link', link, ? FROM raw_throughput
              WHERE (TRY_CAST(gpus AS BIGINT) = 1) <> (link = 'one_card')
              UNION ALL
              SELECT {LINE}, 'network_gbps', network_gbps, ? FROM raw_throughput
              WHERE (TRY_CAST(nodes AS BIGINT) > 1) <> (network_gbps IS NOT NULL))
            ORDER BY 1""",
        params=[message("rules.run_nodes"), message("rules.run_one_card"), message("rules.run_network")],
    ).fetchall()
    _sql_rule(out, con, sources_dir, "throughput", message("checks.run_layout"), rows)


def _peak_fits_rule(con, sources_dir: Path, out: Validation) -> None:
    """A measured peak is no larger than its GPU's memory (GiB converted to GB)."""
    found = con.sql(
        f"""SELECT {LINE}, measured_value, measured_unit, gpu_id, memory_gb, peak_gb FROM (
              SELECT r.*, g.memory_gb,
                     r.measured_value * CASE r.measured_unit WHEN 'GiB' THEN {2**30 / 1e9} ELSE 1 END AS peak_gb
              FROM typed_measurements r JOIN typed_gpus g USING (gpu_id))
            WHERE peak_gb > memory_gb ORDER BY 1"""
    ).fetchall()
    rows = [
        (
            line,
            "measured_value",
            _num(value),
            message(
                "rules.peak_too_big",
                value=_num(value),
                unit=unit,
                converted=message("rules.peak_converted", peak=f"{peak:.1f}".replace(".", ","))
                if unit == "GiB"
                else "",
                gpu=gpu,
                memory=_num(memory),
            ),
        )
        for line, value, unit, gpu, memory, peak in found
    ]
    _sql_rule(out, con, sources_dir, "measurements", message("checks.peak_fits"), rows)


def warnings(con, sources_dir: Path, names: set[str], today: dt.date) -> list[Problem]:
    """Problems that do not stop the build: stale checks, servers without a price, and values that are
    possible but unusual (outside a field's or a constant's usual range, a price far from the others
    per GB, a named model far from the size in its name). They use only constants within their bounds."""
    constants = valid_constants(con) if "constants" in names else {}

    def shown(table: str) -> str:
        return display_path(sources_dir, TABLES_BY_NAME[table])

    limit = constants.get("stale_after_days")
    found = [] if limit is None else _stale_warnings(con, names, today, int(limit), shown)
    if "servers" in names:
        found += _unpriced_warnings(con, shown("servers"))
    found += _unusual_warnings(con, names, shown)
    if "constants" in names:
        found += _constant_warnings(con, constants, shown("constants"))
    if {"servers", "gpus"} <= names:
        found += _price_warnings(con, shown("servers"))
    if "models" in names:
        found += _named_size_warnings(con, shown("models"))
    if "memory_anchors" in names:
        found += _anchor_bytes_warnings(con, shown("memory_anchors"))
    return found


def _stale_warnings(con, names: set[str], today: dt.date, limit: int, shown: Callable[[str], str]) -> list[Problem]:
    """A reference or a price checked more than `limit` days before the build date."""
    found = []
    for table, column in (("references", "checked_on"), ("servers", "price_checked_on")):
        if table not in names:
            continue
        for line, value in con.execute(
            f"SELECT {LINE}, {column} FROM typed_{table} WHERE {column} < ? ORDER BY {LINE}",
            [today - dt.timedelta(days=limit)],
        ).fetchall():
            age = (today - value).days
            rule = message("warnings.stale", age=ru.shown(age), limit=ru.shown(limit))
            found.append(Problem(shown(table), line, column, value.isoformat(), rule))
    return found


def _unpriced_warnings(con, shown: str) -> list[Problem]:
    """A server without a monthly price (the site says "on request")."""
    found = []
    for (line,) in con.sql(f"SELECT {LINE} FROM typed_servers WHERE price_rub_month IS NULL ORDER BY 1").fetchall():
        rule = message("warnings.no_price", on_request=labels()["common"]["price_on_request"])
        found.append(Problem(shown, line, "price_rub_month", None, rule))
    return found


def _unusual_warnings(con, names: set[str], shown: Callable[[str], str]) -> list[Problem]:
    """A value outside its field's usual range (Field.usual)."""
    found = []
    for table in SOURCE_TABLES:
        if table.name not in names:
            continue
        for f in table.fields:
            if f.usual is None:
                continue
            low, high = f.usual
            unit = f" {f.unit_label}" if f.unit else ""
            rule = message("warnings.unusual", low=_num(low), high=_num(high), unit=unit)
            for line, value in con.execute(
                f"SELECT {LINE}, {f.name} FROM typed_{table.name} WHERE {f.name} < ? OR {f.name} > ? ORDER BY 1",
                [low, high],
            ).fetchall():
                found.append(Problem(shown(table.name), line, f.name, _num(value), rule))
    return found


def _constant_warnings(con, constants: dict[str, float], shown: str) -> list[Problem]:
    """A constant no rule or page uses, and a valid constant outside its usual range (Bounds.usual)."""
    found = []
    for constant_id, (line, value) in _constant_rows(con).items():
        bounds = CONSTANT_BOUNDS.get(constant_id)
        if bounds is None and constant_id not in REQUIRED_CONSTANTS:
            rule = message("warnings.unused_constant")
            found.append(Problem(shown, line, "constant_id", constant_id, rule))
        elif bounds and bounds.usual and value is not None and constant_id in constants:
            low, high = bounds.usual
            if not low <= value <= high:
                rule = message("warnings.unusual_constant", constant=constant_id, low=_num(low), high=_num(high))
                found.append(Problem(shown, line, "value", _num(value), rule))
    return found


def _named_size_warnings(con, shown: str) -> list[Problem]:
    """A named model whose size is more than NAMED_SIZE_FACTOR times off the size in its name."""
    found = []
    for r in _rows(con, "typed_models"):
        if r["kind"] != "named" or not r["params_b"] or r["params_b"] <= 0:
            continue
        stated = _stated_params(r["display_name"])
        if stated and not 1 / NAMED_SIZE_FACTOR <= stated / r["params_b"] <= NAMED_SIZE_FACTOR:
            rule = message("warnings.name_params", stated=_num(stated), params=_num(r["params_b"]))
            found.append(Problem(shown, r[LINE], "params_b", _num(r["params_b"]), rule))
    return found


def _anchor_bytes_warnings(con, shown: str) -> list[Problem]:
    """Anchor memory of more than ANCHOR_USUAL_BYTES_PER_PARAM bytes per parameter."""
    found = []
    for line, memory, size in con.sql(
        f"""SELECT {LINE}, memory_gb, params_b FROM typed_memory_anchors
            WHERE params_b > 0 AND memory_gb / params_b > {ANCHOR_USUAL_BYTES_PER_PARAM} ORDER BY 1"""
    ).fetchall():
        rule = message("warnings.anchor_bytes", per_param=ru.shown(round(memory / size)))
        found.append(Problem(shown, line, "memory_gb", _num(memory), rule))
    return found


def _rub(x: float) -> str:
    return f"{x:,.0f}".replace(",", " ")


def _price_warnings(con, shown: str) -> list[Problem]:
    """A price per GB of GPU memory more than PRICE_PER_GB_SPREAD times off the priced servers' median."""
    priced = con.sql(
        f"""SELECT s.{LINE}, s.price_rub_month, s.price_rub_month / (s.gpu_count * g.memory_gb)
            FROM typed_servers s JOIN typed_gpus g USING (gpu_id)
            WHERE s.price_rub_month IS NOT NULL AND s.gpu_count > 0 AND g.memory_gb > 0 ORDER BY 1"""
    ).fetchall()
    if len(priced) < 3:
        return []
    per_gb = sorted(p for _, _, p in priced)
    median = (
        per_gb[len(per_gb) // 2] if len(per_gb) % 2 else (per_gb[len(per_gb) // 2 - 1] + per_gb[len(per_gb) // 2]) / 2
    )
    out = []
    for line, price, p in priced:
        if not median / PRICE_PER_GB_SPREAD <= p <= median * PRICE_PER_GB_SPREAD:
            rule = message(
                "warnings.price_per_gb",
                per_gb=_rub(p),
                median=_rub(median),
                spread=ru.shown(PRICE_PER_GB_SPREAD),
            )
            out.append(Problem(shown, line, "price_rub_month", str(price), rule))
    return out


def cross_table_rules(con, sources_dir: Path, names: set[str], today: dt.date, out: Validation) -> None:
    """Every cross-table rule's problems and checks, and the warnings, added to `out`."""
    for rule in (
        castable,
        reserved_ids,
        foreign_keys,
        anchor_rules,
        model_rules,
        gpu_rules,
        architecture_rules,
        server_rules,
        constant_rules,
        typical_setup_rules,
        measurement_rules,
        throughput_rules,
        name_rules,
        catalog_rules,
    ):
        rule(con, sources_dir, names, out)
    out.warnings = capped(warnings(con, sources_dir, names, today))


def _rules_connection(con, names: list[str], warm: Warm, digests: dict[str, str] | None, today: dt.date):
    """What the rules query: given the files' digests, a MemoConnection whose answers are kept in
    warm.queries (a process that lives on) and on disk (validation_cache: the last validation's, for
    the next process); `con` itself without digests, or in a process that ends with the cache off."""
    if digests is None:
        return con
    from pipeline import validation_cache
    from pipeline.validate import query_memo

    if warm.queries is None:
        if not (warm.lives_on or validation_cache.enabled()):
            return con
        warm.queries = query_memo.stored(validation_cache.stored_queries(today), validation_cache.reading())
    by_table = {n: digests[TABLES_BY_NAME[n].file] for n in names if TABLES_BY_NAME[n].file in digests}
    return query_memo.MemoConnection(con, by_table, warm.queries)


def run_rules(  # noqa: PLR0913
    con,
    sources_dir: Path,
    names: list[str],
    today: dt.date,
    warm: Warm,
    digests: dict[str, str] | None,
    out: Validation,
) -> None:
    """The cross-table rules and the warnings, into `out`; with the files' digests, a query whose
    files are unchanged is answered as the last validation answered it (_rules_connection), and this
    validation's answers are kept for the next: in `warm`, and on disk by a process that ends (a
    process that lives on reads them from disk once, and writing them at every edit cost 0.03 s)."""
    asked = _rules_connection(con, names, warm, digests, today)
    cross_table_rules(asked, sources_dir, set(names), today, out)
    if warm.queries is None:
        return
    warm.queries.cut_back()
    if not warm.lives_on:
        from pipeline import validation_cache
        from pipeline.validate.query_memo import to_data

        with contextlib.suppress(TypeError):  # an answer JSON cannot hold: nothing is kept
            validation_cache.store_queries(to_data(warm.queries), today)


def validate(
    con: duckdb.DuckDBPyConnection, sources_dir: Path, names: list[str], warm: Warm | None = None
) -> Validation:
    """All problems in the loaded tables (per-table expectations and cross-table rules), warnings and checks."""
    return start_validation(con, sources_dir, names, warm)[1]()


def start_validation(  # noqa: PLR0913
    con: duckdb.DuckDBPyConnection,
    sources_dir: Path,
    names: list[str],
    warm: Warm | None = None,
    digests: dict[str, str] | None = None,
    child: Early | None = None,
) -> tuple[Validation, Callable[[], Validation]]:
    """validate() in two halves, so that a build can compute and render meanwhile.

    Great Expectations starts in a forked child; the cross-table rules and the warnings run
    here. Returns what is known now (the rules' problems and checks, the warnings) and a
    function that waits for the suites and returns exactly what validate() returns.
    `digests`: the SHA-256 of each source file as read (load.read_sources); with them, the rules'
    queries on unchanged files are answered as the last validation answered them (run_rules: kept in
    a process that lives on, `serve`, and on disk for the next process). `child`: as start_expectations'.
    """
    today = build_date()
    warm = Warm() if warm is None else warm
    expectations = start_expectations(con, sources_dir, names, today, warm, child)
    early = Validation(build_date=today)
    try:
        run_rules(con, sources_dir, names, today, warm, digests, early)
    except BaseException:
        expectations(Validation())  # ran first in validate(): its error, if any, is the one raised
        raise

    def finish() -> Validation:
        out = Validation(build_date=today)
        expectations(out)
        out.problems += early.problems
        out.checks += early.checks
        out.warnings = list(early.warnings)
        return out

    return early, finish
