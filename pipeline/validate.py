"""Stage 2, validation: Great Expectations suites per table plus cross-table rules.

The suites are generated from the schema registry. GX runs on pandas frames
fetched from DuckDB (its SQL path on DuckDB fails silently). Cross-table rules
run as DuckDB SQL and are reported in the same form.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipeline.load import LINE, display_path
from pipeline.problems import Problem
from pipeline.schema import SOURCE_TABLES, TABLES_BY_NAME, TYPE_NAMES_RU, TYPE_PATTERNS, Field, Table


@dataclass(frozen=True)
class Check:
    """One expectation and how to explain its failures."""

    table: str
    column: str  # "" for table-level checks
    on: str  # "raw" (text cells) or "typed" (cast values)
    expectation: object
    rule: str


def _num(x: float) -> str:
    return f"{x:.12g}"


def field_checks(table: Table, field: Field) -> list[Check]:
    """The expectations one declared field implies."""
    import great_expectations.expectations as gxe

    name, out = field.name, []
    if field.required:
        out.append(
            Check(table.name, name, "raw", gxe.ExpectColumnValuesToNotBeNull(column=name), "a value is required")
        )
    if field.type in TYPE_PATTERNS:
        rule = (
            "ids use lowercase latin letters and digits, joined by '-' or '_'"
            if field.type == "id"
            else f"expected {TYPE_NAMES_RU[field.type]} ({field.type}, e.g. {_example(field.type)})"
        )
        out.append(
            Check(
                table.name,
                name,
                "raw",
                gxe.ExpectColumnValuesToMatchRegex(column=name, regex=TYPE_PATTERNS[field.type]),
                rule,
            )
        )
    if field.allowed:
        out.append(
            Check(
                table.name,
                name,
                "raw",
                gxe.ExpectColumnValuesToBeInSet(column=name, value_set=list(field.allowed)),
                f"must be one of: {', '.join(field.allowed)}",
            )
        )
    if field.min is not None or field.max is not None:
        unit = f" {field.unit}" if field.unit else ""
        out.append(
            Check(
                table.name,
                name,
                "typed",
                gxe.ExpectColumnValuesToBeBetween(column=name, min_value=field.min, max_value=field.max),
                f"must be between {_num(field.min)} and {_num(field.max)}{unit}",
            )
        )
    if table.primary_key == (name,):
        out.append(
            Check(
                table.name,
                name,
                "raw",
                gxe.ExpectColumnValuesToBeUnique(column=name),
                "duplicate id; ids must be unique",
            )
        )
    return out


def _example(kind: str) -> str:
    return {"int": "96", "float": "141 or 835.5", "date": "2026-10-12", "bool": "true"}[kind]


def table_checks(table: Table) -> list[Check]:
    import great_expectations.expectations as gxe

    checks = [c for f in table.fields for c in field_checks(table, f)]
    if len(table.primary_key) > 1 and all(table.field(k).required for k in table.primary_key):
        checks.append(
            Check(
                table.name,
                "+".join(table.primary_key),
                "raw",
                gxe.ExpectCompoundColumnsToBeUnique(column_list=list(table.primary_key)),
                f"this combination of {', '.join(table.primary_key)} appears more than once",
            )
        )
    return checks


def _gx_context():
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx
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
    return gx, gx.get_context(mode="ephemeral", project_config=config)


def run_expectations(con: duckdb.DuckDBPyConnection, sources_dir: Path, names: list[str]) -> list[Problem]:
    """Run the generated GX suites on each loaded table; every failing cell becomes a Problem."""
    gx, context = _gx_context()
    source = context.data_sources.add_pandas(name="sources")
    problems = []
    for name in names:
        table = TABLES_BY_NAME[name]
        shown = display_path(sources_dir, table)
        for on in ("raw", "typed"):
            checks = [c for c in table_checks(table) if c.on == on]
            if not checks:
                continue
            frame = con.sql(f"SELECT * FROM {on}_{name}").df()
            batch = source.add_dataframe_asset(name=f"{on}_{name}").add_batch_definition_whole_dataframe("all")
            suite = context.suites.add(gx.ExpectationSuite(name=f"{on}_{name}"))
            for check in checks:
                suite.add_expectation(check.expectation)
            definition = context.validation_definitions.add(
                gx.ValidationDefinition(name=f"{on}_{name}", data=batch, suite=suite)
            )
            result = definition.run(
                batch_parameters={"dataframe": frame},
                result_format={"result_format": "COMPLETE", "unexpected_index_column_names": [LINE]},
            )
            for check, outcome in zip(checks, result.results, strict=True):
                if outcome.success:
                    continue
                problems.extend(_explain(check, outcome, shown, frame))
    return problems


def _explain(check: Check, outcome, shown: str, frame) -> list[Problem]:
    if outcome.exception_info and outcome.exception_info.get("raised_exception"):
        message = outcome.exception_info.get("exception_message")
        raise RuntimeError(f"validation of {shown} failed to run: {message}")
    rows = outcome.result.get("unexpected_index_list") or []
    out = []
    for row in rows:
        columns = check.column.split("+")
        texts = [_text(row.get(c)) for c in columns]
        value = None if all(t is None for t in texts) else "; ".join(t or "" for t in texts)
        out.append(Problem(shown, int(row[LINE]), ", ".join(columns), value, check.rule))
    if not rows:
        out.append(Problem(shown, 0, check.column, None, check.rule))
    return out


def _text(value) -> str | None:
    if value is None or value != value:  # NaN from pandas
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def foreign_key_problems(con: duckdb.DuckDBPyConnection, sources_dir: Path, names: set[str]) -> list[Problem]:
    problems = []
    for table in SOURCE_TABLES:
        if table.name not in names:
            continue
        for field in table.fields:
            if not field.references:
                continue
            target_name, target_col = field.references.split(".")
            if target_name not in names:
                continue
            target = TABLES_BY_NAME[target_name]
            rows = con.sql(
                f"SELECT {LINE}, {field.name} FROM raw_{table.name} WHERE {field.name} IS NOT NULL "
                f"AND {field.name} NOT IN (SELECT {target_col} FROM raw_{target_name} WHERE {target_col} IS NOT NULL) "
                f"ORDER BY {LINE}"
            ).fetchall()
            for line, value in rows:
                rule = f"no {target.title_ru.lower()} row with this id in {display_path(sources_dir, target)}"
                problems.append(Problem(display_path(sources_dir, table), line, field.name, value, rule))
    return problems


def anchor_problems(con: duckdb.DuckDBPyConnection, sources_dir: Path, names: set[str]) -> list[Problem]:
    """Every method has a value at every anchor size, and values grow with size."""
    if not {"memory_anchors", "methods"} <= names:
        return []
    shown = display_path(sources_dir, TABLES_BY_NAME["memory_anchors"])
    problems = []
    missing = con.sql(
        """
        SELECT m.method_id, s.params_b FROM (SELECT method_id FROM typed_methods WHERE method_id IS NOT NULL) m
        CROSS JOIN (SELECT DISTINCT params_b FROM typed_memory_anchors WHERE params_b IS NOT NULL) s
        WHERE NOT EXISTS (SELECT 1 FROM typed_memory_anchors a
                          WHERE a.method_id = m.method_id AND a.params_b = s.params_b)
        ORDER BY 1, 2
        """
    ).fetchall()
    for method_id, size in missing:
        problems.append(
            Problem(shown, 0, "method_id", method_id, f"no value at {size:g} B; every method needs every anchor size")
        )
    shrinking = con.sql(
        f"""
        SELECT {LINE}, method_id, params_b, memory_gb, prev_size, prev_memory FROM (
          SELECT *, lag(params_b) OVER w AS prev_size, lag(memory_gb) OVER w AS prev_memory
          FROM typed_memory_anchors WHERE memory_gb IS NOT NULL AND params_b IS NOT NULL
          WINDOW w AS (PARTITION BY method_id ORDER BY params_b))
        WHERE memory_gb < prev_memory ORDER BY {LINE}
        """
    ).fetchall()
    for line, method_id, size, memory, prev_size, prev_memory in shrinking:
        rule = (
            f"{method_id} at {size:g} B is less than at {prev_size:g} B ({prev_memory:g} GB); "
            "memory must not decrease with model size"
        )
        problems.append(Problem(shown, line, "memory_gb", f"{memory:g}", rule))
    return problems


def validate(con: duckdb.DuckDBPyConnection, sources_dir: Path, names: list[str]) -> list[Problem]:
    """All problems in the loaded tables: per-table expectations and cross-table rules."""
    loaded = set(names)
    return (
        run_expectations(con, sources_dir, names)
        + foreign_key_problems(con, sources_dir, loaded)
        + anchor_problems(con, sources_dir, loaded)
    )
