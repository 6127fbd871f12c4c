"""Stage 2, validation: Great Expectations suites per table plus cross-table rules.

The suites are generated from the schema registry. GX runs on pandas frames
fetched from DuckDB (its SQL path on DuckDB fails silently). Cross-table rules
run as DuckDB SQL and are reported in the same form. Every check and its
outcome is kept, for the data-quality page.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb

from pipeline import architecture
from pipeline.fingerprint import build_date
from pipeline.load import LINE, display_path
from pipeline.problems import Problem
from pipeline.schema import (
    DUCKDB_TYPES,
    HIDDEN_CHARACTERS,
    RANKLESS_ADAPTERS,
    REQUIRED_CONSTANTS,
    SERVER_INTERCONNECTS,
    SOURCE_TABLES,
    TABLES_BY_NAME,
    TYPE_NAMES_RU,
    TYPE_PATTERNS,
    Field,
    Table,
)
from pipeline.workers import start_map


@dataclass(frozen=True)
class Check:
    """One expectation and how to explain its failures."""

    table: str
    column: str  # "" for table-level checks
    on: str  # "raw" (text cells) or "typed" (cast values)
    expectation: object
    rule: str


@dataclass(frozen=True)
class CheckResult:
    """What the data-quality page shows for one check."""

    table: str
    column: str
    rule: str
    engine: str  # "Great Expectations" or "DuckDB SQL"
    failures: int


@dataclass
class Validation:
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    build_date: dt.date = dt.date(1970, 1, 1)

    def to_dict(self) -> dict:
        """What a later build of the same sources reuses instead of validating again."""
        return {
            "warnings": [asdict(w) for w in self.warnings],
            "checks": [asdict(c) for c in self.checks],
            "build_date": self.build_date.isoformat(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Validation:
        return cls(
            warnings=[Problem(**w) for w in data["warnings"]],
            checks=[CheckResult(**c) for c in data["checks"]],
            build_date=dt.date.fromisoformat(data["build_date"]),
        )


def _num(x: float) -> str:
    return f"{x:.12g}"


def _example(kind: str) -> str:
    return {"id": "h200-sxm", "int": "96", "float": "141 or 835.5", "date": "2026-10-12", "bool": "true"}[kind]


def field_checks(table: Table, field: Field, today: dt.date) -> list[Check]:
    """The expectations one declared field implies."""
    import great_expectations.expectations as gxe

    name, out = field.name, []

    def add(on: str, expectation, rule: str) -> None:
        out.append(Check(table.name, name, on, expectation, rule))

    if field.required:
        add("raw", gxe.ExpectColumnValuesToNotBeNull(column=name), "a value is required")
    if field.type == "id":
        add(
            "raw",
            gxe.ExpectColumnValuesToMatchRegex(column=name, regex=TYPE_PATTERNS["id"]),
            "ids use lowercase latin letters and digits, joined by '-' or '_'",
        )
    elif field.type in TYPE_PATTERNS:
        add(
            "raw",
            gxe.ExpectColumnValuesToMatchRegex(column=name, regex=TYPE_PATTERNS[field.type]),
            f"expected {TYPE_NAMES_RU[field.type]} ({field.type}, e.g. {_example(field.type)})",
        )
    if field.type in ("str", "id"):
        add(
            "raw",
            gxe.ExpectColumnValueLengthsToBeBetween(column=name, max_value=field.max_length),
            f"longer than {field.max_length} characters",
        )
    if field.type == "str":
        add(
            "raw",
            gxe.ExpectColumnValuesToNotMatchRegex(column=name, regex=HIDDEN_CHARACTERS),
            "contains an invisible control or text-direction character; delete it",
        )
    if field.pattern:
        add("raw", gxe.ExpectColumnValuesToMatchRegex(column=name, regex=field.pattern), field.pattern_rule)
    if field.allowed:
        add(
            "raw",
            gxe.ExpectColumnValuesToBeInSet(column=name, value_set=list(field.allowed)),
            f"must be one of: {', '.join(field.allowed)}",
        )
    if field.min is not None or field.max is not None:
        unit = f" {field.unit}" if field.unit else ""
        add(
            "typed",
            gxe.ExpectColumnValuesToBeBetween(column=name, min_value=field.min, max_value=field.max),
            f"must be between {_num(field.min)} and {_num(field.max)}{unit}",
        )
    if field.type == "date":
        add(
            "typed",
            # pandas holds DATE columns as datetime64, so the bound is a datetime.
            gxe.ExpectColumnValuesToBeBetween(column=name, max_value=dt.datetime.combine(today, dt.time())),
            f"is in the future (the build date is {today.isoformat()})",
        )
    if table.primary_key == (name,):
        add("raw", gxe.ExpectColumnValuesToBeUnique(column=name), "duplicate id; ids must be unique")
    return out


def table_checks(table: Table, today: dt.date) -> list[Check]:
    import great_expectations.expectations as gxe

    checks = [
        Check(
            table.name,
            "",
            "raw",
            gxe.ExpectTableColumnsToMatchSet(column_set=[LINE, *table.columns], exact_match=True),
            "the header has exactly the declared columns, in any order",
        )
    ]
    checks += [c for f in table.fields for c in field_checks(table, f, today)]
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
    """One ephemeral GX context per process, analytics and progress bars off."""
    if _CONTEXT:
        return _CONTEXT[0]
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
    context = gx.get_context(mode="ephemeral", project_config=config)
    _SOURCE.append(context.data_sources.add_pandas(name="sources"))
    _CONTEXT.append((gx, context))
    return _CONTEXT[0]


_CONTEXT: list = []
_SUITES: dict = {}  # (table, on, build date) -> (validation definition, {expectation id: Check})


def _definition(table: Table, on: str, today: dt.date):
    """The GX validation definition for one table and one view, made once per process."""
    key = (table.name, on, today)
    if key not in _SUITES:
        gx, context = _gx_context()
        checks = [c for c in table_checks(table, today) if c.on == on]
        name = f"{on}_{table.name}_{today.isoformat()}"
        batch = _SOURCE[0].add_dataframe_asset(name=name).add_batch_definition_whole_dataframe("all")
        # Adding the expectations together is one store write, not one per expectation.
        suite = context.suites.add(gx.ExpectationSuite(name=name, expectations=[c.expectation for c in checks]))
        by_id = {e.id: check for e, check in zip(suite.expectations, checks, strict=True)}
        if None in by_id or len(by_id) != len(checks):
            raise RuntimeError(f"GX gave no distinct ids to the expectations of {name}")
        definition = context.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch, suite=suite))
        _SUITES[key] = (definition, by_id)
    return _SUITES[key]


_SOURCE: list = []  # the one pandas data source of the process's GX context


# Outcomes of the suites per table, keyed by the table's cells: a warm process (`just serve`)
# runs Great Expectations again only on the tables an edit changed.
_OUTCOMES: dict[tuple, tuple[list[Problem], list[CheckResult]]] = {}


def run_expectations(con, sources_dir: Path, names: list[str], today: dt.date, out: Validation) -> None:
    """Run the generated GX suites on each loaded table; every failing cell becomes a Problem."""
    start_expectations(con, sources_dir, names, today)(out)


def start_expectations(con, sources_dir: Path, names: list[str], today: dt.date) -> Callable[[Validation], None]:
    """run_expectations in two halves: the suites start in a forked child now; calling the result
    waits for them and adds their outcomes to a Validation, in table order."""
    keys, jobs = [], {}
    for name in names:
        table = TABLES_BY_NAME[name]
        shown = display_path(sources_dir, table)
        cells = con.sql(f"SELECT * FROM raw_{name}").fetchall()
        keys.append(key := (name, shown, today, tuple(cells)))
        if key not in _OUTCOMES:
            for on in ("raw", "typed"):
                jobs[key, on] = (table, on, shown, today, con.sql(f"SELECT * FROM {on}_{name}").df())
                if _CONTEXT:  # a warm process makes each suite once; the child inherits it
                    _definition(table, on, today)
    # GX is pure Python: the suites are shared between two cores (pipeline.workers).
    weights = [len(job[0].fields) * (1 + len(job[4]) / 2000) for job in jobs.values()]
    finish = start_map(_run_suite, list(jobs.values()), weights)

    def collect(out: Validation) -> None:
        found = dict(zip(jobs, finish(), strict=True))
        for key in dict.fromkeys(key for key, _ in jobs):
            _OUTCOMES[key] = tuple(found[key, "raw"][i] + found[key, "typed"][i] for i in (0, 1))
        for key in keys:
            problems, checks = _OUTCOMES[key]
            out.problems.extend(problems)
            out.checks.extend(checks)

    return collect


def _run_suite(job: tuple) -> tuple[list[Problem], list[CheckResult]]:
    table, on, shown, today, frame = job
    problems, checks = [], []
    definition, by_id = _definition(table, on, today)
    # Every expectation runs on every row either way; BOOLEAN_ONLY skips collecting the failing
    # rows, which is half of GX's time. A suite with a failure runs again to name them.
    result = definition.run(batch_parameters={"dataframe": frame}, result_format={"result_format": "BOOLEAN_ONLY"})
    if not result.success:
        result = definition.run(
            batch_parameters={"dataframe": frame},
            result_format={"result_format": "COMPLETE", "unexpected_index_column_names": [LINE]},
        )
    # GX does not keep the suite's order in its results: match them by expectation id.
    for outcome in result.results:
        check = by_id[outcome.expectation_config.id]
        found = [] if outcome.success else _explain(check, outcome, shown)
        problems.extend(found)
        checks.append(CheckResult(table.name, check.column, check.rule, "Great Expectations", len(found)))
    return problems, checks


def _explain(check: Check, outcome, shown: str) -> list[Problem]:
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
    if hasattr(value, "date") and hasattr(value, "hour"):  # pandas Timestamp of a DATE column
        return value.date().isoformat()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# -- cross-table rules in DuckDB SQL; each yields (line, column, value, rule) rows for one file --


def _sql_rule(out: Validation, con, sources_dir: Path, table: str, description: str, rows) -> None:
    shown = display_path(sources_dir, TABLES_BY_NAME[table])
    found = [Problem(shown, line or 0, column, value, rule) for line, column, value, rule in rows]
    out.problems.extend(found)
    out.checks.append(CheckResult(table, "", description, "DuckDB SQL", len(found)))


def castable(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """Values that look right but do not cast (2026-13-45, an integer too large)."""
    for name in sorted(names):
        table = TABLES_BY_NAME[name]
        rows = []
        for f in table.fields:
            if f.type not in TYPE_PATTERNS or f.type == "id":
                continue
            pattern = TYPE_PATTERNS[f.type]
            rows += con.execute(
                f"SELECT r.{LINE}, '{f.name}', r.{f.name}, 'not a valid {f.type}' FROM raw_{name} r "
                f"WHERE r.{f.name} IS NOT NULL AND regexp_full_match(r.{f.name}, ?) "
                f"AND TRY_CAST(r.{f.name} AS {DUCKDB_TYPES[f.type]}) IS NULL",
                [pattern],
            ).fetchall()
        _sql_rule(out, con, sources_dir, name, "values of the right form also convert to their type", rows)


def foreign_keys(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    for table in SOURCE_TABLES:
        for f in table.fields:
            if not f.references or table.name not in names:
                continue
            target_name, target_col = f.references.split(".")
            if target_name not in names:
                continue
            target = TABLES_BY_NAME[target_name]
            rule = f"no {target.title_ru.lower()} row with this id in {display_path(sources_dir, target)}"
            rows = con.execute(
                f"SELECT {LINE}, '{f.name}', {f.name}, ? FROM raw_{table.name} WHERE {f.name} IS NOT NULL "
                f"AND {f.name} NOT IN (SELECT {target_col} FROM raw_{target_name} WHERE {target_col} IS NOT NULL) "
                f"ORDER BY {LINE}",
                [rule],
            ).fetchall()
            _sql_rule(out, con, sources_dir, table.name, f"{f.name} exists in {target_name}.{target_col}", rows)


def anchor_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """Every method has a value at every anchor size; memory grows with size and follows the method order."""
    if not {"memory_anchors", "methods"} <= names:
        return
    missing = con.sql(
        """
        SELECT NULL, 'method_id', m.method_id,
               'no value at ' || s.params_b::VARCHAR || ' B; every method needs every anchor size'
        FROM (SELECT method_id FROM typed_methods WHERE method_id IS NOT NULL) m
        CROSS JOIN (SELECT DISTINCT params_b FROM typed_memory_anchors WHERE params_b IS NOT NULL) s
        WHERE NOT EXISTS (SELECT 1 FROM typed_memory_anchors a
                          WHERE a.method_id = m.method_id AND a.params_b = s.params_b)
        ORDER BY 3, s.params_b
        """
    ).fetchall()
    missing = [(line, col, value, rule.replace(".0 B", " B")) for line, col, value, rule in missing]
    _sql_rule(out, con, sources_dir, "memory_anchors", "every method has a value at every anchor size", missing)
    shrinking = con.sql(
        f"""
        SELECT {LINE}, 'memory_gb', memory_gb, method_id, params_b, prev_size, prev_memory FROM (
          SELECT *, lag(params_b) OVER w AS prev_size, lag(memory_gb) OVER w AS prev_memory
          FROM typed_memory_anchors WHERE memory_gb IS NOT NULL AND params_b IS NOT NULL
          WINDOW w AS (PARTITION BY method_id ORDER BY params_b))
        WHERE memory_gb < prev_memory ORDER BY {LINE}
        """
    ).fetchall()
    rows = [
        (
            line,
            col,
            _num(memory),
            f"{method} at {_num(size)} B is less than at {_num(prev_size)} B ({_num(prev_memory)} GB); "
            "memory must not decrease with model size",
        )
        for line, col, memory, method, size, prev_size, prev_memory in shrinking
    ]
    _sql_rule(out, con, sources_dir, "memory_anchors", "memory does not decrease with model size", rows)
    disorder = con.sql(
        f"""
        SELECT {LINE}, 'memory_gb', memory_gb, method_id, params_b, prev_method, prev_memory FROM (
          SELECT a.*, lag(a.method_id) OVER w AS prev_method, lag(a.memory_gb) OVER w AS prev_memory
          FROM typed_memory_anchors a JOIN typed_methods m USING (method_id)
          WHERE a.memory_gb IS NOT NULL AND a.params_b IS NOT NULL AND m.sort_order IS NOT NULL
          WINDOW w AS (PARTITION BY a.params_b ORDER BY m.sort_order))
        WHERE memory_gb < prev_memory ORDER BY {LINE}
        """
    ).fetchall()
    rows = [
        (
            line,
            col,
            _num(memory),
            f"at {_num(size)} B {method} needs less than {prev} ({_num(prev_memory)} GB); at each size memory "
            "must grow in the method order of methods.csv (sort_order)",
        )
        for line, col, memory, method, size, prev, prev_memory in disorder
    ]
    _sql_rule(out, con, sources_dir, "memory_anchors", "at each size, memory follows the method order", rows)


def model_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    if "models" not in names:
        return
    rows = con.sql(
        f"""SELECT {LINE}, 'active_params_b', active_params_b,
                   'active parameters exceed the total (' || params_b || ' B)'
            FROM typed_models WHERE active_params_b > params_b ORDER BY {LINE}"""
    ).fetchall()
    rows = [(line, col, _num(v), rule) for line, col, v, rule in rows]
    _sql_rule(out, con, sources_dir, "models", "MoE active parameters do not exceed the total", rows)


# How far the parameter count computed from a model's architecture may be from its stated one.
PARAMS_TOLERANCE = 0.02


def architecture_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """The architecture columns of models.csv hang together and give the stated parameter counts.

    The count is Python (pipeline/architecture.py), so these rules run over the typed rows
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
            rule = "the architecture columns go together: fill all of " + ", ".join(core) + " or none"
            found["complete"] += [(line, c, None, rule) for c in core if r[c] is None]
        moe = found["moe"]
        if (r["experts"] is None) != (r["experts_per_token"] is None):
            empty = "experts" if r["experts"] is None else "experts_per_token"
            moe.append((line, empty, None, "experts and experts_per_token go together: fill both or neither"))
        elif t["experts"] is not None and (t["experts_per_token"] or 0) > t["experts"]:
            rule = f"more experts per token than experts ({t['experts']})"
            moe.append((line, "experts_per_token", r["experts_per_token"], rule))
        if r["experts"] is not None and r["moe_intermediate_size"] is None:
            moe.append((line, "moe_intermediate_size", None, "a MoE model (experts filled) needs the expert width"))
        for c in ("moe_intermediate_size", "shared_experts", "dense_layers"):
            if r[c] is not None and r["experts"] is None and r["experts_per_token"] is None:
                moe.append((line, c, r[c], "only for MoE models: fill experts and experts_per_token too"))
        if r["attention_kind"] == "mla":
            rule = "MLA attention needs kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim and v_head_dim"
            found["mla"] += [(line, c, None, rule) for c in mla[1:] if r[c] is None]
        else:
            found["mla"] += [(line, c, r[c], "only for attention_kind mla") for c in mla if r[c] is not None]
        if len(filled) == len(core) and not any(p[0] == line for rows in found.values() for p in rows):
            found["count"] += _count_problems(line, t)
    rules = {
        "complete": "architecture columns are all filled or all empty",
        "moe": "MoE columns are consistent (experts with experts_per_token, no more per token than experts)",
        "mla": "MLA columns are filled exactly when attention_kind is mla",
        "count": f"parameters computed from the architecture agree with params_b and active_params_b "
        f"within {PARAMS_TOLERANCE:.0%}",
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
        if stated is None or abs(computed / 1e9 - stated) <= PARAMS_TOLERANCE * stated:
            continue
        if column == "active_params_b" and row["params_b"] is not None and stated > row["params_b"]:
            continue  # already reported by model_rules: active above the total
        off = (computed / 1e9 - stated) / stated
        rule = (
            f"the architecture gives {computed / 1e9:.4g} B ({computed} parameters), {off:+.1%} from the stated "
            f"{_num(stated)} B; they must agree within {PARAMS_TOLERANCE:.0%}"
        )
        out.append((line, column, _num(stated), rule))
    return out


def server_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    if not {"servers", "gpus"} <= names:
        return
    allowed = " OR ".join(
        f"(g.form_factor = '{ff}' AND s.interconnect IN ({', '.join(repr(i) for i in links)}))"
        for ff, links in SERVER_INTERCONNECTS.items()
    )
    rows = con.sql(
        f"""SELECT s.{LINE}, 'interconnect', s.interconnect,
                   'does not fit its GPU ' || g.gpu_id || ' (form factor ' || g.form_factor || ', link ' || g.interconnect || ')'
            FROM typed_servers s JOIN typed_gpus g USING (gpu_id)
            WHERE s.interconnect IS NOT NULL AND g.form_factor IS NOT NULL
              AND (NOT ({allowed}) OR (s.interconnect = 'nvlink-bridge' AND g.interconnect <> 'nvlink-bridge'))
            ORDER BY 1"""
    ).fetchall()
    _sql_rule(out, con, sources_dir, "servers", "server interconnect fits the GPU's form factor", rows)


def constant_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    if "constants" not in names:
        return
    present = {r[0] for r in con.sql("SELECT constant_id FROM raw_constants").fetchall()}
    rows = [
        (None, "constant_id", c, "this constant is used by the rules and must be present")
        for c in REQUIRED_CONSTANTS
        if c not in present
    ]
    _sql_rule(out, con, sources_dir, "constants", "every constant the rules use is present", rows)


def typical_setup_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """Every setting of the typical setup is present once, known, and of its kind (memory.TYPICAL_SETTINGS)."""
    if "typical_setup" not in names:
        return
    from pipeline.memory import typical_setup_problems

    rows = con.sql(f"SELECT {LINE}, setting_id, value FROM raw_typical_setup ORDER BY 1").fetchall()
    _sql_rule(
        out,
        con,
        sources_dir,
        "typical_setup",
        "every typical setting is present and valid",
        typical_setup_problems(rows),
    )


def measurement_rules(con, sources_dir: Path, names: set[str], out: Validation) -> None:
    """A peak is given exactly for measured rows, LoRA settings exactly for LoRA methods, and a peak fits its GPU."""
    if "measurements" not in names:
        return
    rows = con.sql(
        f"""SELECT {LINE}, 'measured_value', measured_value,
                   CASE WHEN outcome = 'value' THEN 'outcome is value: the measured peak is required'
                        ELSE 'outcome is oom: leave the measured peak empty' END
            FROM raw_measurements
            WHERE (outcome = 'value' AND measured_value IS NULL) OR (outcome = 'oom' AND measured_value IS NOT NULL)
            ORDER BY 1"""
    ).fetchall()
    _sql_rule(out, con, sources_dir, "measurements", "a measured peak is given exactly when the outcome is value", rows)
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
                             CASE WHEN m.family = 'full'
                                    THEN 'method ' || r.method_id || ' is full fine-tuning: leave {column} empty'
                                  WHEN {rankless}
                                    THEN '{" and ".join(RANKLESS_ADAPTERS)} adapters have no rank: leave {column} empty'
                                  ELSE 'method ' || r.method_id || ' is LoRA/QLoRA: {column} is required' END AS rule,
                             m.family IN ('lora', 'qlora') AND NOT ({rankless}) AS needed
                      FROM raw_measurements r JOIN raw_methods m USING (method_id))
                    WHERE needed <> ({column} IS NOT NULL)"""
            ).fetchall()
        rows = sorted((line, col, value, rule) for line, col, value, rule, _ in rows)
        _sql_rule(
            out, con, sources_dir, "measurements", "lora_rank and lora_targets are set exactly for LoRA/QLoRA", rows
        )
    if "gpus" in names:
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
                f"peak {_num(value)} {unit}"
                + (f" = {peak:.1f} GB" if unit == "GiB" else "")
                + f" is more than the memory of one {gpu} ({_num(memory)} GB)",
            )
            for line, value, unit, gpu, memory, peak in found
        ]
        _sql_rule(out, con, sources_dir, "measurements", "a measured peak fits in the memory of its GPU", rows)


def warnings(con, sources_dir: Path, names: set[str], today: dt.date) -> list[Problem]:
    """Problems that do not stop the build: stale checks, servers without a price."""
    if not {"constants", "references", "servers"} <= names:
        return []
    days = con.sql("SELECT value FROM typed_constants WHERE constant_id = 'stale_after_days'").fetchall()
    if not days or days[0][0] is None:
        return []
    limit = int(days[0][0])
    found = []
    for table, column in (("references", "checked_on"), ("servers", "price_checked_on")):
        shown = display_path(sources_dir, TABLES_BY_NAME[table])
        for line, value in con.execute(
            f"SELECT {LINE}, {column} FROM typed_{table} WHERE {column} < ? ORDER BY {LINE}",
            [today - dt.timedelta(days=limit)],
        ).fetchall():
            age = (today - value).days
            found.append(
                Problem(shown, line, column, value.isoformat(), f"checked {age} days ago (over {limit}); re-check it")
            )
    shown = display_path(sources_dir, TABLES_BY_NAME["servers"])
    for (line,) in con.sql(f"SELECT {LINE} FROM typed_servers WHERE price_rub_month IS NULL ORDER BY 1").fetchall():
        found.append(Problem(shown, line, "price_rub_month", None, 'no price; the site shows "по запросу"'))
    return found


def validate(con: duckdb.DuckDBPyConnection, sources_dir: Path, names: list[str]) -> Validation:
    """All problems in the loaded tables (per-table expectations and cross-table rules), warnings and checks."""
    return start_validation(con, sources_dir, names)[1]()


def start_validation(
    con: duckdb.DuckDBPyConnection, sources_dir: Path, names: list[str]
) -> tuple[Validation, Callable[[], Validation]]:
    """validate() in two halves, so that a build can compute and render meanwhile.

    Great Expectations starts in a forked child; the cross-table rules and the warnings run
    here. Returns what is known now (the rules' problems and checks, the warnings) and a
    function that waits for the suites and returns exactly what validate() returns.
    """
    today = build_date()
    loaded = set(names)
    expectations = start_expectations(con, sources_dir, names, today)
    early = Validation(build_date=today)
    try:
        for rule in (
            castable,
            foreign_keys,
            anchor_rules,
            model_rules,
            architecture_rules,
            server_rules,
            constant_rules,
            typical_setup_rules,
            measurement_rules,
        ):
            rule(con, sources_dir, loaded, early)
        early.warnings = warnings(con, sources_dir, loaded, today)
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
