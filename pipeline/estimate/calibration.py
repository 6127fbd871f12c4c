"""How far each way of estimating memory is from published measurements.

Four estimators predict the peak of every measured setup in `measurements.csv`:
the first-principles estimator (`first_principles.py`), the anchor-table rule (docs/rules.md,
rules 1-2), the earlier article's rule of thumb, and DeepSpeed's model-states formula (full
fine-tuning only). Each prediction is compared with what the measurement counts:
tensors for "allocated"/"active", the allocator's reservation for "reserved", the whole
card for nvidia-smi or an unnamed metric. Everything is in GB (10^9 bytes); GiB figures
are converted.
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import median, quantiles

import polars as pl

from pipeline.estimate import first_principles
from pipeline.schema import (
    CALIBRATION,
    CALIBRATION_BREAKDOWN,
    CALIBRATION_OUT_OF_SAMPLE,
    CALIBRATION_SUMMARY,
    ESTIMATOR_CONSTANTS_TABLE,
    ESTIMATOR_RANGE,
    FRAMEWORKS,
)

ESTIMATORS = ("first_principles", "table_rule", "rule_of_thumb", "deepspeed")

UNIT_BYTES = {"GB": first_principles.GB, "GiB": first_principles.GIB}

# Which reading of the breakdown each metric measures.
METRIC_PART = {
    "allocated": "allocated",
    "active": "allocated",
    "reserved": "reserved",
    "reserved_delta": "reserved",
    "nvidia_smi": "card",
    "unknown": "card",
    "fits_on": "card",
}
# The four kinds of metric the accuracy is summarised by.
METRIC_KIND = {
    "allocated": "allocated",
    "active": "allocated",
    "reserved": "reserved",
    "reserved_delta": "reserved",
    "nvidia_smi": "card",
    "unknown": "card",
    "fits_on": "fits_on",
}
METRIC_KINDS = ("allocated", "reserved", "card", "fits_on")

# The setup columns of measurements.csv: Setup's fields method through lora_targets, as named there (loss
# is read apart, an empty cell keeping the default; the fields after lora_targets come from extra_techniques).
SETUP_COLUMNS = first_principles.setup_fields({"method": "method_id"}, through="lora_targets", leave_out=("loss",))


# Techniques of extra_techniques the estimator models, as the Setup field they set.
MODELLED_TECHNIQUES = {
    "double_quant": "double_quant",
    "lora_dropout": "lora_dropout",
    "frozen_fp32": "frozen_fp32",
    "quantized_lm_head": "quantized_lm_head",
    "lora_lm_head": "lora_lm_head",
    "optimizer_in_backward": "optimizer_in_backward",
    "quant_inputs_held": "quant_inputs_held",
}


# The examples were shorter than seq_len by an unknown amount: no setup to estimate.
UNKNOWN_LENGTHS = "unknown_lengths"


def techniques(row: Mapping[str, object]) -> list[str]:
    """The techniques a measurements.csv row lists in `extra_techniques` (comma-separated ids), in order."""
    return [t for t in (row.get("extra_techniques") or "").split(",") if t]


def setup_from_row(row: Mapping[str, object]) -> first_principles.Setup:
    """The estimator's Setup of a measurements.csv row (empty LoRA cells keep the defaults)."""
    values = {k: row[k] for k in SETUP_COLUMNS if row.get(k) is not None}
    values["method"] = values.pop("method_id")
    if row.get("loss"):
        values["loss"] = row["loss"]
    for technique in techniques(row):
        if technique in MODELLED_TECHNIQUES:
            values[MODELLED_TECHNIQUES[technique]] = True
    return first_principles.Setup(**values)


def rule_of_thumb_gb(params_b: float, method_id: str, constants: Mapping[str, float]) -> float | None:
    """The earlier article's rule: full = 10 bytes per parameter, LoRA = 16-bit weights, QLoRA 4-bit
    from its three worked examples (7B, 13B, 70B; linear between them, proportional outside).
    It states nothing for 8- and 2-bit QLoRA."""
    if method_id.startswith("full"):
        return params_b * constants["legacy_full_bytes_per_param"]
    if method_id == "lora":
        return params_b * constants["legacy_lora_bytes_per_param"]
    if method_id != "qlora_4bit":
        return None
    points = [(7.0, constants["legacy_qlora_7b_gb"]), (13.0, constants["legacy_qlora_13b_gb"])]
    points.append((70.0, constants["legacy_qlora_70b_gb"]))
    if params_b <= points[0][0]:
        return points[0][1] * params_b / points[0][0]
    if params_b >= points[-1][0]:
        return points[-1][1] * params_b / points[-1][0]
    for (b0, m0), (b1, m1) in zip(points, points[1:], strict=False):
        if b0 <= params_b <= b1:
            return m0 + (m1 - m0) * (params_b - b0) / (b1 - b0)
    raise AssertionError("unreachable: points cover every size")


def _error(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or measured is None:
        return None
    return (predicted - measured) / measured


def _predictions(
    row: Mapping[str, object], arch, table: Mapping[tuple[str, str], float], params_b: float, constants
) -> tuple[dict[str, float | None], float | None]:
    """Each estimator's prediction of a measurement row in GB, and the first-principles whole card
    (None without an architecture)."""
    setup = setup_from_row(row)
    predicted = {}
    if arch is not None:
        parts = first_principles.estimate(arch, setup, constants).gb()
        predicted["first_principles"] = parts[METRIC_PART[row["metric"]]]
        states = first_principles.deepspeed_model_states(arch, setup)
        predicted["deepspeed"] = None if states is None else states / first_principles.GB
        total_gb = parts["total"]
    else:
        predicted["first_principles"] = predicted["deepspeed"] = total_gb = None
    predicted["table_rule"] = table.get((row["model_id"], row["method_id"]))
    predicted["rule_of_thumb"] = rule_of_thumb_gb(params_b, row["method_id"], constants)
    return predicted, total_gb


def _exclusions(row: Mapping[str, object], has_architecture: bool) -> list[str]:
    """Why a measurement row is left out of the summary (empty: it is in)."""
    reasons = []
    if row["outcome"] != "value":
        reasons.append("oom")
    if any(t not in MODELLED_TECHNIQUES and t != UNKNOWN_LENGTHS for t in techniques(row)):
        reasons.append("unmodelled")
    if UNKNOWN_LENGTHS in techniques(row):
        reasons.append(UNKNOWN_LENGTHS)
    if not has_architecture:
        reasons.append("no_architecture")
    return reasons


def _measured_gb(row: Mapping[str, object]) -> float | None:
    """The measured peak of a row in GB, None for an out-of-memory row."""
    if row["outcome"] != "value":
        return None
    return row["measured_value"] * UNIT_BYTES[row["measured_unit"]] / first_principles.GB


def _measurement_columns(row: Mapping[str, object], gpu_gb: Mapping[str, float]) -> dict[str, object]:
    """The columns of a calibration row that describe the measurement itself."""
    return {
        "measurement_id": row["measurement_id"],
        "model_id": row["model_id"],
        "method_id": row["method_id"],
        "gpu_id": row["gpu_id"],
        "gpu_memory_gb": gpu_gb.get(row["gpu_id"]),
        "outcome": row["outcome"],
        "metric": row["metric"],
        "metric_kind": METRIC_KIND[row["metric"]],
        "framework": row["framework"],
        "sharding": row["sharding"],
        "loss": row.get("loss") or first_principles.Setup().loss,
        "measured_value": row["measured_value"],
        "measured_unit": row["measured_unit"],
        "measured_gb": _measured_gb(row),
    }


def calibration(
    measurements: pl.DataFrame,
    models: pl.DataFrame,
    estimates: pl.DataFrame,
    gpus: pl.DataFrame,
    constants: Mapping[str, float],
) -> pl.DataFrame:
    """One row per measurement: the measured peak and each estimator's prediction and error, in GB."""
    archs = first_principles.model_architectures(models)
    params = dict(models.select("model_id", "params_b").iter_rows())
    table = {(m, k): v for m, k, v in estimates.select("model_id", "method_id", "memory_gb").iter_rows()}
    gpu_gb = dict(gpus.select("gpu_id", "memory_gb").iter_rows())
    rows = []
    for row in measurements.sort("measurement_id").iter_rows(named=True):
        arch = archs.get(row["model_id"])
        predicted, total_gb = _predictions(row, arch, table, params[row["model_id"]], constants)
        reasons = _exclusions(row, arch is not None)
        out = _measurement_columns(row, gpu_gb)
        for name in ESTIMATORS:
            out[f"{name}_gb"] = predicted[name]
            out[f"{name}_error"] = _error(predicted[name], out["measured_gb"])
        # An out-of-memory row is predicted right when the whole peak exceeds the card.
        oom = row["outcome"] == "oom" and total_gb is not None and out["gpu_memory_gb"] is not None
        out["predicts_oom"] = (total_gb > out["gpu_memory_gb"]) if oom else None
        out["in_summary"] = not reasons
        out["excluded_because"] = ",".join(reasons) or None
        out["reference_id"] = row["reference_id"]
        rows.append(out)
    _add_out_of_sample(rows, measurements, archs, constants)
    return pl.DataFrame(rows, schema=CALIBRATION.polars_schema)


# -- leave one source out --
def leave_one_source_out(rows: list[dict], fit, predict, source: str = "reference_id") -> list:
    """Out-of-sample predictions: for each source document (`row[source]`) `fit` is given the rows of every other
    source and returns what it fits; `predict(fitted, row)` then predicts each row of the left-out source with it.
    One prediction per row, in order; `fit` runs once per source."""
    fitted = {}
    for name in dict.fromkeys(r[source] for r in rows):
        fitted[name] = fit([r for r in rows if r[source] != name])
    return [predict(fitted[r[source]], r) for r in rows]


def _grid_errors(  # noqa: PLR0913
    constant: str,
    grid: tuple[float, ...],
    chosen: list[dict],
    archs: Mapping[str, first_principles.Architecture],
    constants: Mapping[str, float],
) -> list[list[float]]:
    """For each row of `chosen` (measurements.csv rows), its signed error at every value of `grid`."""
    out = []
    for row in chosen:
        measured = row["measured_value"] * UNIT_BYTES[row["measured_unit"]]
        setup, arch, part = setup_from_row(row), archs[row["model_id"]], METRIC_PART[row["metric"]]
        errors = []
        for value in grid:
            b = first_principles.estimate(arch, setup, dict(constants) | {constant: value})
            errors.append((getattr(b, part) - measured) / measured)
        out.append(errors)
    return out


def _best(grid: tuple[float, ...], errors: list[list[float]]) -> tuple[float, float] | None:
    """(the grid value with the smallest median absolute error over the rows of `errors`, that error); the
    smaller value on a tie; None without rows."""
    if not errors:
        return None
    best = None
    for i, value in enumerate(grid):
        score = median(abs(e[i]) for e in errors)
        if best is None or score < best[1] - 1e-12:
            best = (value, score)
    return best


def _fit_rows(kind: str, summary_ids: Mapping[str, str], measurements: pl.DataFrame) -> list[dict]:
    """The measurements.csv rows a constant fitted on metric kind `kind` is fitted on: the summary rows of that kind."""
    return [
        r
        for r in measurements.sort("measurement_id").iter_rows(named=True)
        if summary_ids.get(r["measurement_id"]) == kind
    ]


def _add_out_of_sample(
    rows: list[dict],
    measurements: pl.DataFrame,
    archs: Mapping[str, first_principles.Architecture],
    constants: Mapping[str, float],
) -> None:
    """Add to each calibration row the first-principles prediction with every fitted constant fitted again on the
    other sources' rows only (leave one source out): first_principles_loso_gb and _error. A source none of whose
    rows a fit uses gets what that fit gives on all its rows (which may differ from constants.csv's value)."""
    summary_ids = {r["measurement_id"]: r["metric_kind"] for r in rows if r["in_summary"]}
    by_id = {r["measurement_id"]: r for r in measurements.iter_rows(named=True)}
    grids = {}
    for constant, (kind, grid) in FITTED.items():
        chosen = _fit_rows(kind, summary_ids, measurements)
        errors = _grid_errors(constant, grid, chosen, archs, constants)
        grids[constant] = (grid, [(r["reference_id"], e) for r, e in zip(chosen, errors, strict=True)])

    def fit(training: list[dict]) -> dict[str, float]:
        sources = {r["reference_id"] for r in training}
        out = {}
        for constant, (grid, errors) in grids.items():
            best = _best(grid, [e for source, e in errors if source in sources])
            out[constant] = constants[constant] if best is None else best[0]
        return out

    def predict(fitted: dict[str, float], row: dict) -> float | None:
        if row["first_principles_gb"] is None:
            return None
        if all(constants[k] == v for k, v in fitted.items()):
            return row["first_principles_gb"]
        m = by_id[row["measurement_id"]]
        parts = first_principles.estimate(archs[m["model_id"]], setup_from_row(m), dict(constants) | fitted).gb()
        return parts[METRIC_PART[m["metric"]]]

    for row, predicted in zip(rows, leave_one_source_out(rows, fit, predict), strict=True):
        row["first_principles_loso_gb"] = predicted
        row["first_principles_loso_error"] = _error(predicted, row["measured_gb"])


def summary(calibrated: pl.DataFrame, within: float) -> pl.DataFrame:
    """Per estimator, over the rows in the summary it has a prediction for: count, median absolute
    percentage error, share within ±`within` (the issue's ±25 %), median signed error (bias)."""
    rows = []
    used = calibrated.filter(pl.col("in_summary"))
    for order, name in enumerate(ESTIMATORS, start=1):
        errors = [e for e in used[f"{name}_error"].to_list() if e is not None]
        rows.append(
            {
                "estimator": name,
                "sort_order": order,
                "rows": len(errors),
                "median_abs_error": median(abs(e) for e in errors) if errors else None,
                "within_25": sum(abs(e) <= within for e in errors) / len(errors) if errors else None,
                "median_error": median(errors) if errors else None,
            }
        )
    return pl.DataFrame(rows, schema=CALIBRATION_SUMMARY.polars_schema)


def _stats(errors: list[float], within: float) -> dict:
    return {
        "rows": len(errors),
        "median_abs_error": median(abs(e) for e in errors) if errors else None,
        "within_25": sum(abs(e) <= within for e in errors) / len(errors) if errors else None,
        "median_error": median(errors) if errors else None,
    }


# The groups of each dimension of the breakdown, in page order.
DIMENSIONS = {
    "metric_kind": METRIC_KINDS,
    "method": first_principles.METHODS,
    "sharding": first_principles.SHARDINGS,
    "framework": FRAMEWORKS,
    "loss": first_principles.LOSSES,
}


def breakdown(calibrated: pl.DataFrame, within: float) -> pl.DataFrame:
    """Per estimator and per group of one dimension (metric kind, method, sharding, framework, and framework
    and method together), over the summary rows it has a prediction for: the same figures as `summary`.
    Groups without rows are left out."""
    used = [r for r in calibrated.filter(pl.col("in_summary")).iter_rows(named=True)]
    for r in used:
        r["framework_method"] = f"{r['framework']}-{r['method_id']}"
    dimensions = DIMENSIONS | {
        "framework_method": tuple(f"{f}-{m}" for f in FRAMEWORKS for m in first_principles.METHODS)
    }
    rows, order = [], 0
    for name in ESTIMATORS:
        for dimension, groups in dimensions.items():
            column = "method_id" if dimension == "method" else dimension
            for group in groups:
                errors = [r[f"{name}_error"] for r in used if r[column] == group and r[f"{name}_error"] is not None]
                if not errors:
                    continue
                order += 1
                rows.append(
                    {"estimator": name, "dimension": dimension, "group_id": group, "sort_order": order}
                    | _stats(errors, within)
                )
    return pl.DataFrame(rows, schema=CALIBRATION_BREAKDOWN.polars_schema)


# Fewer summary rows than this give no percentiles: the range would be a guess.
RANGE_MIN_ROWS = 5


def _spread(errors: list[float]) -> dict:
    """The 10th and 90th percentiles of signed errors and the factors that turn an estimate E into the range the
    measurements fall in (E / (1 + p90) to E / (1 + p10) holds 80 % of them); None below RANGE_MIN_ROWS."""
    p10 = p90 = None
    if len(errors) >= RANGE_MIN_ROWS:
        cuts = quantiles(errors, n=10, method="inclusive")
        p10, p90 = cuts[0], cuts[-1]
    return {
        "error_p10": p10,
        "error_p90": p90,
        "low_factor": None if p90 is None else 1 / (1 + p90),
        "high_factor": None if p10 is None else 1 / (1 + p10),
    }


# The scopes of estimator_range: all rows, each metric kind, and the whole-card readings of one card and
# of a job sharded over several (ZeRO/FSDP) apart: the plan's headroom (recommend.plan_spreads) takes the
# upper end of the range measured for its own kind of setup.
PLAN_SCOPES = {"card_one_gpu": "ddp", "card_sharded": "sharded"}
RANGE_SCOPES = ("all", *METRIC_KINDS, *PLAN_SCOPES)


def _range_scope_filter(scope: str) -> pl.Expr:
    if scope == "all":
        return pl.lit(True)
    if scope in PLAN_SCOPES:
        one_gpu = pl.col("sharding") == "ddp"
        return (pl.col("metric_kind") == "card") & (one_gpu if PLAN_SCOPES[scope] == "ddp" else ~one_gpu)
    return pl.col("metric_kind") == scope


def estimator_range(calibrated: pl.DataFrame) -> pl.DataFrame:
    """The measured range of the first-principles estimator: the 10th and 90th percentiles of its signed error
    out of sample (each source's rows predicted with the constants fitted on the other sources:
    first_principles_loso_error) on the summary rows, in all and per metric kind, and the factors that turn an
    estimate E into the range the measurements fall in (E / (1 + p90) to E / (1 + p10) holds 80 % of the rows)."""
    used = calibrated.filter(pl.col("in_summary") & pl.col("first_principles_loso_error").is_not_null())
    rows = []
    for order, scope in enumerate(RANGE_SCOPES, start=1):
        part = used.filter(_range_scope_filter(scope))
        errors = part["first_principles_loso_error"].to_list()
        rows.append(
            {
                "scope": scope,
                "sort_order": order,
                "rows": len(errors),
                "error_median": median(errors) if errors else None,
            }
            | _spread(errors)
        )
    return pl.DataFrame(rows, schema=ESTIMATOR_RANGE.polars_schema)


# The groups of the out-of-sample table, in page order (the dimension "all" has one group, "all").
OUT_OF_SAMPLE_DIMENSIONS = {
    "all": ("all",),
    "metric_kind": METRIC_KINDS,
    "method": first_principles.METHODS,
    "sharding": first_principles.SHARDINGS,
    "loss": first_principles.LOSSES,
}
FIGURES = ("median_abs_error", "within_25", "median_error")


def out_of_sample(calibrated: pl.DataFrame, within: float) -> pl.DataFrame:
    """The `calibration_out_of_sample` table: per group of the summary rows (all, metric kind, method, sharding, loss
    path), the first-principles estimator in sample (first_principles_error: constants.csv as it is) and out of
    sample (first_principles_loso_error: each source document's rows predicted with every fitted constant fitted on
    the other documents only), with the out-of-sample 10th/90th percentiles and the range factors a plan's headroom
    can take. Groups without rows are left out."""
    used = [
        r
        for r in calibrated.filter(pl.col("in_summary")).iter_rows(named=True)
        if r["first_principles_error"] is not None and r["first_principles_loso_error"] is not None
    ]
    rows, order = [], 0
    for dimension, groups in OUT_OF_SAMPLE_DIMENSIONS.items():
        column = {"method": "method_id"}.get(dimension, dimension)
        for group in groups:
            part = [r for r in used if dimension == "all" or r[column] == group]
            if not part:
                continue
            order += 1
            outside = [r["first_principles_loso_error"] for r in part]
            inside_stats = _stats([r["first_principles_error"] for r in part], within)
            outside_stats = _stats(outside, within)
            spread = _spread(outside)
            rows.append(
                {"dimension": dimension, "group_id": group, "sort_order": order, "rows": len(part)}
                | {f"in_sample_{k}": inside_stats[k] for k in FIGURES}
                | {f"out_of_sample_{k}": outside_stats[k] for k in FIGURES}
                | {"out_of_sample_error_p10": spread["error_p10"], "out_of_sample_error_p90": spread["error_p90"]}
                | {"low_factor": spread["low_factor"], "high_factor": spread["high_factor"]}
            )
    return pl.DataFrame(rows, schema=CALIBRATION_OUT_OF_SAMPLE.polars_schema)


# Where each constant of the first-principles estimator comes from (see the accuracy page):
# derived from how the tensors are laid out or what the libraries' code does, assumed without any
# fitting, or fitted to the calibration rows of one metric kind.
CONSTANT_BASIS = {
    "activation_bytes": "derived",
    "norm_input_bytes": "derived",
    "eager_attention_score_bytes": "derived",
    "logits_bytes": "derived",
    "logits_chunked_bytes": "derived",
    "logits_inplace_bytes": "derived",
    "logits_legacy_bytes": "derived",
    "loss_chunks": "derived",
    "fused_loss_bytes_per_hidden": "derived",
    "dropout_mask_bytes": "derived",
    "quant_block_size": "derived",
    "quant_scale_bytes": "derived",
    "double_quant_scale_bytes": "derived",
    "double_quant_block_size": "derived",
    "adapter_bytes": "derived",
    "zero3_gather_bytes_per_param": "derived",
    "zero3_prefetch_units": "derived",
    "offload_cpu_buffer_factor": "derived",
    "cuda_context_gb": "assumed",
    "nccl_buffers_gb": "assumed",
    "allocator_fragmentation": "fitted",
    "forward_flops_per_param_token": "derived",
    "train_flops_per_param_token": "derived",
}
# Fitted constants: the metric kind whose calibration rows they are fitted on, and the grid searched.
FITTED = {"allocator_fragmentation": ("reserved", tuple(i / 20 for i in range(21)))}


def _fit(  # noqa: PLR0913
    constant: str,
    kind: str,
    grid: tuple[float, ...],
    calibrated: pl.DataFrame,
    measurements: pl.DataFrame,
    archs: Mapping[str, first_principles.Architecture],
    constants: Mapping[str, float],
) -> tuple[int, float | None, float | None]:
    """(rows, the grid value with the smallest median absolute error on them, that error)."""
    used = calibrated.filter(pl.col("in_summary")).select("measurement_id", "metric_kind").iter_rows()
    chosen = _fit_rows(kind, dict(used), measurements)
    best = _best(grid, _grid_errors(constant, grid, chosen, archs, constants))
    if best is None:
        return 0, None, None
    return len(chosen), best[0], best[1]


def estimator_constants(
    calibrated: pl.DataFrame, measurements: pl.DataFrame, models: pl.DataFrame, constants_table: pl.DataFrame
) -> pl.DataFrame:
    """Every constant of the first-principles estimator with its basis, and for a fitted one the rows it
    is fitted on and what the same fit gives on today's calibration rows."""
    constants = dict(constants_table.select("constant_id", "value").iter_rows())
    archs = first_principles.model_architectures(models)
    rows = []
    for constant_id in sorted(CONSTANT_BASIS):
        out = {
            "constant_id": constant_id,
            "value": constants[constant_id],
            "basis": CONSTANT_BASIS[constant_id],
            "fitted_on": None,
            "fit_rows": None,
            "refit_value": None,
            "refit_median_abs_error": None,
        }
        if constant_id in FITTED:
            kind, grid = FITTED[constant_id]
            n, value, error = _fit(constant_id, kind, grid, calibrated, measurements, archs, constants)
            out |= {"fitted_on": kind, "fit_rows": n, "refit_value": value, "refit_median_abs_error": error}
        rows.append(out)
    return pl.DataFrame(rows, schema=ESTIMATOR_CONSTANTS_TABLE.polars_schema)
