"""The time model against published measured throughput (sources/throughput.csv).

`time_calibration`: one row per measured run with the model's tokens per second for the same setup, and
the error of the hours it would give: predicted hours ÷ measured hours − 1 (positive: the model says the
run takes longer than it did). Three readings: the model as declared in constants.csv; the same with one
speed factor fitted on every row (median of measured ÷ predicted: in sample); and with that factor
fitted on the other sources only (leave one source out: the error a reader should expect on a setup no
source covers). `time_summary`: median |error|, share within ±calibration_within and the signed median, overall and per
GPU, method and link. A source is the publisher of the row's reference (two reports of one project are
one source).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

import polars as pl

from pipeline.estimate import first_principles, step_time
from pipeline.schema import TIME_CALIBRATION, TIME_SUMMARY


def run_setup(row: Mapping[str, object]) -> first_principles.Setup:
    """The Setup of a throughput row (selective checkpointing recomputes no matmul: counted as none;
    torch.compile from its techniques)."""
    return first_principles.Setup(
        method=str(row["method_id"]),
        seq_len=int(row["seq_len"]),
        micro_batch=int(row["micro_batch"]),
        grad_accum=int(row["grad_accum"]),
        gpus=int(row["gpus"]),
        sharding=str(row["sharding"]),
        grad_checkpointing=row["checkpointing"] == "full",
        fp8=row["precision"] == "fp8",
        torch_compile="torch_compile" in (row.get("extra_techniques") or "").split(","),
    )


def predicted(row: Mapping[str, object], arch, gpu: Mapping[str, object], c: Mapping[str, float]):
    """The time model's TrainingTime for a throughput row's setup (on a million tokens)."""
    return step_time.training_time(
        arch,
        run_setup(row),
        gpu,
        1e6,
        c,
        link=str(row["link"]),
        nodes=int(row["nodes"]),
        network_gbps=row["network_gbps"],
    )


def method_family(method_id: str) -> str:
    """full, lora or qlora: the accuracy figures' method groups."""
    return "full" if method_id.startswith("full") else "qlora" if method_id.startswith("qlora") else "lora"


def time_calibration(
    throughput: pl.DataFrame, models: pl.DataFrame, gpus: pl.DataFrame, references: pl.DataFrame, c: Mapping
) -> pl.DataFrame:
    """The `time_calibration` table (see the module's docstring)."""
    archs = first_principles.model_architectures(models)
    gpu_rows = {g["gpu_id"]: g for g in gpus.iter_rows(named=True)}
    publisher = {r["reference_id"]: r["publisher"] or r["reference_id"] for r in references.iter_rows(named=True)}
    rows = []
    for row in throughput.sort("run_id").iter_rows(named=True):
        t = predicted(row, archs[row["model_id"]], gpu_rows[row["gpu_id"]], c)
        per_gpu = float(row["tokens_per_second"]) / (int(row["gpus"]) if row["per"] == "job" else 1)
        model_per_gpu = t.tokens_per_second / int(row["gpus"])
        rows.append(
            {
                "run_id": row["run_id"],
                "source": publisher.get(row["reference_id"], row["reference_id"]),
                "gpu_id": row["gpu_id"],
                "method_family": method_family(row["method_id"]),
                "link": "between_servers" if int(row["nodes"]) > 1 else row["link"],
                "in_accuracy": bool(row["in_accuracy"]),
                "measured_tokens_per_second_per_gpu": per_gpu,
                "predicted_tokens_per_second_per_gpu": model_per_gpu,
                "communication_share": t.step_seconds_exposed / (t.step_seconds_compute + t.step_seconds_exposed),
                "error": per_gpu and model_per_gpu and per_gpu / model_per_gpu - 1,
            }
        )
    frame = pl.DataFrame(rows, schema={k: v for k, v in TIME_CALIBRATION.polars_schema.items() if "fitted" not in k})
    ratio = (pl.col("measured_tokens_per_second_per_gpu") / pl.col("predicted_tokens_per_second_per_gpu")).alias("r")
    used = frame.filter(pl.col("in_accuracy")).with_columns(ratio)
    everywhere = _median(used["r"].to_list())
    by_source = {
        s: _median(used.filter(pl.col("source") != s)["r"].to_list()) for s in frame["source"].unique().to_list()
    }
    return frame.with_columns(
        error_fitted=(1 + pl.col("error")) / everywhere - 1 if everywhere else pl.lit(None, pl.Float64),
        error_fitted_out_of_sample=(1 + pl.col("error"))
        / pl.col("source").replace_strict(by_source, default=None, return_dtype=pl.Float64)
        - 1,
    ).select(TIME_CALIBRATION.columns)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


READINGS = {"declared": "error", "fitted": "error_fitted", "out_of_sample": "error_fitted_out_of_sample"}


def speed_factor(calibration: pl.DataFrame) -> float | None:
    """The one speed factor the site's times apply to the model: the median of measured ÷ predicted tokens
    per second over the rows in the accuracy figures (the `fitted` reading's; its out-of-sample error is the
    `out_of_sample` reading's). None without rows."""
    used = calibration.filter(pl.col("in_accuracy"))
    return _median([1 + e for e in used["error"].to_list() if e is not None])


def time_summary(calibration: pl.DataFrame, within: float) -> pl.DataFrame:
    """The `time_summary` table: per reading and scope (all rows, a GPU, a method family, a link) the
    rows, median |error|, share within ±`within` (calibration_within, the memory figures' band), signed
    median and the range factors, over the rows in the accuracy figures; `speed_factor` the factor that
    reading applies to the model (1 as declared; fitted on every row for the other two)."""
    used = calibration.filter(pl.col("in_accuracy"))
    fitted = speed_factor(calibration)
    scopes = [("all", "all", used)]
    for column in ("gpu_id", "method_family", "link"):
        for value in sorted(used[column].unique().to_list()):
            scopes.append((column, value, used.filter(pl.col(column) == value)))
    rows = []
    for order, (reading, column) in enumerate(READINGS.items()):
        for kind, value, part in scopes:
            errors = [e for e in part[column].to_list() if e is not None]
            rows.append(
                {
                    "reading": reading,
                    "scope": kind,
                    "value": value,
                    "sort_order": order,
                    "rows": len(errors),
                    "median_abs_error": _median([abs(e) for e in errors]),
                    "within_25": sum(abs(e) <= within for e in errors) / len(errors) if errors else None,
                    "median_error": _median(errors),
                    **dict(zip(("hours_low_factor", "hours_high_factor"), hours_range(errors), strict=True)),
                    "speed_factor": 1.0 if reading == "declared" else fitted,
                }
            )
    return pl.DataFrame(rows, schema=TIME_SUMMARY.polars_schema)


def hours_range(errors: list[float]) -> tuple[float | None, float | None]:
    """(low, high) factors on a predicted time between which the measured time of at least 80 % of the
    rows lies: measured ÷ predicted hours (1 ÷ (1 + error)) sorted, the values at ranks ⌊0.1·n⌋ and
    ⌈0.9·n⌉ − 1 (at most a tenth of the rows below, at most a tenth above); None with fewer than five rows."""
    if len(errors) < 5:  # noqa: PLR2004
        return None, None
    ratios = sorted(1 / (1 + e) for e in errors)
    n = len(ratios)
    return ratios[math.floor(0.1 * n)], ratios[math.ceil(0.9 * n) - 1]
