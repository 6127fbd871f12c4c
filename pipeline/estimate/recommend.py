"""The recommendation: for every model x method, every catalog server ranked (DESIGN.md rule 11).

The first-principles estimator in the site's typical setup (sources/typical_setup.csv) finds the
fewest cards of each server's GPU the job fits on (one card plainly, more with the typical
multi-GPU sharding). A job that fits in one chassis beats one that needs several; a job split
across chassis needs a declared inter-node network (servers.network), otherwise it is not
recommended. Time is the draft of rule 8 on the active parameters (MoE) with the cheaper LoRA
backward pass, on the cards the job uses, for the reference dataset of the typical setup; cost is
that time under the server's declared rental terms: an hourly price where the catalog has one,
otherwise whole months of the monthly price, at least the minimum term.

Pure: frames and constants in, one frame out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import polars as pl

from pipeline.estimate import first_principles as memory
from pipeline.estimate import training
from pipeline.schema import RECOMMENDATIONS

# Why a row is or is not recommended (the `reason` column).
REASONS = ("one_chassis", "several_chassis", "needs_network", "does_not_fit")


def job_cards(arch, method_id: str, c: Mapping[str, object], gpu_memory_gb: float) -> int | None:
    """Fewest cards of `gpu_memory_gb` the typical setup of `method_id` fits on, or None."""
    if memory.fits(memory.estimate(arch, memory.typical_setup(method_id, c, 1), c), gpu_memory_gb):
        return 1
    found = memory.min_gpus(arch, memory.typical_setup(method_id, c, 2), c, gpu_memory_gb)
    return None if found is None else max(found, 2)


# The cost rule lives with the other time and cost rules; recommend ranks by it.
rental_cost = training.rental_cost


def recommendations(  # noqa: PLR0913
    models: pl.DataFrame,
    methods: pl.DataFrame,
    servers: pl.DataFrame,
    gpus: pl.DataFrame,
    c: Mapping[str, object],
    spread: tuple[float, float] | None = None,
) -> pl.DataFrame:
    """The `recommendations` table: one row per model x method x server, ranked within model x method.
    `spread`: the factors of the first-principles estimate's measured range (estimator_range, all rows:
    80 % of published peaks lie between estimate x low and estimate x high), None with too few rows."""
    archs = memory.model_architectures(models)
    gpu_rows = {g["gpu_id"]: g for g in gpus.iter_rows(named=True)}
    tokens = float(c["typical_dataset_tokens_m"]) * 1e6 * float(c["typical_epochs"])
    utilization = float(c["default_utilization"])
    method_ids = methods.sort("sort_order")["method_id"].to_list()
    server_rows = servers.sort("server_id").to_dicts()
    rows = []
    for model_id in sorted(archs):
        arch = archs[model_id]
        for method_id in method_ids:
            cards_by_gpu: dict[str, tuple] = {}
            for server in server_rows:
                gpu = gpu_rows[server["gpu_id"]]
                if server["gpu_id"] not in cards_by_gpu:
                    cards = job_cards(arch, method_id, c, float(gpu["memory_gb"]))
                    per_gpu = hours = None
                    if cards is not None:
                        setup = memory.typical_setup(method_id, c, cards)
                        per_gpu = memory.estimate(arch, setup, c).total / memory.GB
                        flops = training.training_flops(arch, setup, tokens, c)
                        hours = memory.training_hours(flops, cards, training.peak_tflops(gpu, False), utilization)
                    cards_by_gpu[server["gpu_id"]] = (cards, per_gpu, hours)
                cards, per_gpu, hours = cards_by_gpu[server["gpu_id"]]
                row = _row(model_id, method_id, server, gpu, cards, per_gpu, hours, tokens, utilization, c)
                rows.append(row | measured_range(per_gpu, spread))
    frame = pl.DataFrame(rows, schema={k: v for k, v in RECOMMENDATIONS.polars_schema.items() if k != "rank"})
    return rank(frame).select(RECOMMENDATIONS.columns)


def measured_range(per_gpu: float | None, spread: tuple[float, float] | None) -> dict:
    """The per-card figure's measured range: where 80 % of published peaks lie around such an estimate."""
    low, high = (None, None) if per_gpu is None or spread is None else (per_gpu * spread[0], per_gpu * spread[1])
    return {"per_gpu_memory_low_gb": low, "per_gpu_memory_high_gb": high}


def spread_of(estimator_range: pl.DataFrame) -> tuple[float, float] | None:
    """(low, high) factors of estimator_range's row over all measurements, None where it has none."""
    row = estimator_range.filter(pl.col("scope") == "all").row(0, named=True)
    return None if row["low_factor"] is None or row["high_factor"] is None else (row["low_factor"], row["high_factor"])


def _row(model_id, method_id, server, gpu, cards, per_gpu, hours, tokens, utilization, c) -> dict:  # noqa: PLR0913
    count = server["gpu_count"]
    servers_count = None if cards is None else math.ceil(cards / count)
    if cards is None:
        reason = "does_not_fit"
    elif servers_count == 1:
        reason = "one_chassis"
    else:
        reason = "several_chassis" if server.get("network") else "needs_network"
    cost = basis = months = None
    hours_all = None
    if cards is not None:
        cost, basis, months = rental_cost(hours, servers_count, server, c)
        hours_all = hours * cards / (servers_count * count)
    link = None
    if cards is not None:
        link = "one_card" if cards == 1 else server["interconnect"] if servers_count == 1 else server.get("network")
    return {
        "model_id": model_id,
        "method_id": method_id,
        "server_id": server["server_id"],
        "recommended": reason in ("one_chassis", "several_chassis"),
        "reason": reason,
        "servers_count": servers_count,
        "gpus_per_job": cards,
        "gpu_id": server["gpu_id"],
        "gpus_per_server": count,
        "per_gpu_memory_gb": per_gpu,
        "gpu_memory_gb": float(gpu["memory_gb"]),
        "link": link,
        "gpu_has_nvlink": gpu["interconnect"] != "pcie",
        "tokens": tokens,
        "utilization": utilization,
        "hours": hours,
        "hours_all_cards": hours_all,
        "cost_basis": basis,
        "months_billed": months,
        "cost_rub": cost,
        "price_rub_month": server.get("price_rub_month"),
        "price_rub_hour": server.get("price_rub_hour"),
    }


def rank(frame: pl.DataFrame) -> pl.DataFrame:
    """Rank within model x method: recommended first; one chassis before several; then the cost
    (priced before on request), the time, and the server id for a stable order."""
    order = frame.sort(
        [
            pl.col("recommended").not_(),
            pl.col("servers_count").fill_null(1 << 30),
            pl.col("cost_rub").is_null(),
            pl.col("cost_rub"),
            pl.col("hours"),
            pl.col("server_id"),
        ],
        nulls_last=True,
    )
    return order.with_columns(rank=pl.int_range(1, pl.len() + 1).over("model_id", "method_id")).sort(
        "model_id", "method_id", "rank"
    )


def job_gpus(recommendations_frame: pl.DataFrame) -> dict[tuple[str, str], int]:
    """(model, method) -> the cards its rank-1 row uses (recommended or not: a job no single chassis
    holds still runs on the cards of its best option); jobs no card count holds are left out."""
    first = recommendations_frame.filter((pl.col("rank") == 1) & pl.col("gpus_per_job").is_not_null())
    return {(m, k): int(n) for m, k, n in first.select("model_id", "method_id", "gpus_per_job").iter_rows()}


def best(recommendations_frame: pl.DataFrame) -> pl.DataFrame:
    """The rank-1 row of every model x method that has a recommended server."""
    return recommendations_frame.filter((pl.col("rank") == 1) & pl.col("recommended"))
