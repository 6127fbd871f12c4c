"""Seed 000's offers against the plan: the server the plan takes for each offer's task, and whether it
is the offer's own (the same / differs verdict of gpu-count's offers table).

Made from three tables every build publishes (legacy_offers, legacy_offer_jobs, recommendations), so
that `build` and `diff` can set a new build beside an earlier one from its downloads and report an
offer whose verdict an edit flipped. The offers table of the article (pipeline/render/views/articles.py)
takes its plan from `offer_plans` too: one answer.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import polars as pl

from pipeline import lookups

# The columns `offer_plans` reads, with their types, as read back from a build's CSV downloads.
_READ = {
    "legacy_offers": {"offer_id": pl.String, "task_ru": pl.String, "server_id": pl.String},
    "legacy_offer_jobs": {"offer_id": pl.String, "model_id": pl.String, "method_id": pl.String},
    "recommendations": {
        "model_id": pl.String,
        "method_id": pl.String,
        "rank": pl.Int64,
        "recommended": pl.Boolean,
        "server_id": pl.String,
        "gpus_per_job": pl.Int64,
        "per_gpu_memory_gb": pl.Float64,
    },
}


def offer_plans(
    legacy_offers: pl.DataFrame, legacy_offer_jobs: pl.DataFrame, recommendations: pl.DataFrame
) -> dict[str, dict | None]:
    """offer_id -> the plan's row for the offer (the rank-1 `recommendations` row of its most demanding
    job by the first-principles total, which then holds the smaller jobs too), None where the plan has
    no server for it; offers with a job the fine-tuning rules do not cover (pretraining) are left out."""
    best = lookups.best(recommendations)
    out: dict[str, dict | None] = {}
    for offer_id in legacy_offers["offer_id"].to_list():
        own = legacy_offer_jobs.filter(pl.col("offer_id") == offer_id)
        if own["method_id"].null_count():
            continue
        rows = best.join(own.select("model_id", "method_id"), on=["model_id", "method_id"])
        rows = rows.sort(pl.col("per_gpu_memory_gb") * pl.col("gpus_per_job"), descending=True, maintain_order=True)
        out[offer_id] = rows.row(0, named=True) if rows.height else None
    return out


def verdicts(legacy_offers: pl.DataFrame, legacy_offer_jobs: pl.DataFrame, recommendations: pl.DataFrame) -> dict:
    """offer_id -> {task, server (the offer's), plan (the plan's server or None), same (the verdict)}."""
    plans = offer_plans(legacy_offers, legacy_offer_jobs, recommendations)
    out = {}
    for offer in legacy_offers.iter_rows(named=True):
        if offer["offer_id"] in plans:
            plan = plans[offer["offer_id"]]
            server = plan["server_id"] if plan else None
            out[offer["offer_id"]] = {
                "task": offer["task_ru"],
                "server": offer["server_id"],
                "plan": server,
                "same": server == offer["server_id"],
            }
    return out


def read_verdicts(data_dir: Path) -> dict | None:
    """The verdicts of the build whose downloads are in `data_dir` (site/data/), None when it has none
    of the three tables (no build there yet, or one from before they were published)."""
    frames = {}
    for name, columns in _READ.items():
        frame = _read_download(data_dir, name, columns)
        if frame is None:
            return None
        frames[name] = frame
    return verdicts(frames["legacy_offers"], frames["legacy_offer_jobs"], frames["recommendations"])


def _read_download(data_dir: Path, name: str, columns: dict[str, pl.DataType]) -> pl.DataFrame | None:
    """`columns` of a table's download, typed, None when the build has neither its Parquet nor its CSV
    file or they lack a column. Of `recommendations` only the rows offer_plans reads (lookups.best:
    a job's rank-1 row, where it has a recommended server), read as they stream: at 10^7 rows its CSV
    (3 GB) read whole took 7.6 GB of memory and 21 s of CPU. From the Parquet file where there is one
    (written from the same frame, and read a column and a row group at a time), else from the CSV."""
    rows = pl.col("rank") == 1 if name == "recommendations" else None
    parquet, csv = data_dir / f"{name}.parquet", data_dir / f"{name}.csv"
    if parquet.is_file():
        with contextlib.suppress(pl.exceptions.PolarsError, OSError):
            return _typed(pl.scan_parquet(parquet), columns, rows)
    if not csv.is_file():
        return None
    scan = pl.scan_csv(csv, infer_schema=False, encoding="utf8-lossy")
    return _typed(scan.rename({c: c.lstrip("\ufeff") for c in scan.collect_schema().names()}), columns, rows)


def _typed(scan: pl.LazyFrame, columns: dict[str, pl.DataType], rows: pl.Expr | None) -> pl.DataFrame | None:
    """`columns` of `scan` with their types (a CSV's text typed: the downloads write booleans as true/false
    and blanks as empty), the rows `rows` selects; None when a column is missing."""
    schema = scan.collect_schema()
    if not set(columns) <= set(schema.names()):
        return None

    def typed(column: str, kind: pl.DataType) -> pl.Expr:
        if kind == pl.Boolean and schema[column] == pl.String:
            return pl.col(column) == "true"
        return pl.col(column).cast(kind, strict=False)

    frame = scan.select(typed(c, t) for c, t in columns.items())
    return (frame if rows is None else frame.filter(rows)).collect()


def flipped(before: dict | None, now: dict) -> list[dict]:
    """The offers (in `now`'s order) whose verdict differs from `before`'s."""
    if before is None:
        return []
    return [
        v | {"offer_id": k, "was": before[k]} for k, v in now.items() if k in before and before[k]["same"] != v["same"]
    ]


def flip_text(flip: dict, names: dict[str, str]) -> str:
    """One flipped verdict in an editor's words (messages.toml [verdicts]); servers by their `names`
    (server_id -> display_name; the id where the catalog no longer has it)."""
    from pipeline.messages import message
    from pipeline.words import labels

    words = labels()["legacy_offers_table"]

    def name(server_id: str | None) -> str:
        return names.get(server_id, server_id) if server_id else message("verdicts.no_plan")

    return message(
        "verdicts.flipped",
        task=flip["task"],
        server=name(flip["server"]),
        was=words["same" if flip["was"]["same"] else "differs"],
        now=words["same" if flip["same"] else "differs"],
        old=name(flip["was"]["plan"]),
        new=name(flip["plan"]),
    )
