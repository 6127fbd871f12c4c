"""The recommendation: for every model x method, every catalog server ranked (docs/rules.md, rule 11).

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

import inspect
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial

import polars as pl

from pipeline import lookups
from pipeline.estimate import first_principles as memory
from pipeline.estimate import training
from pipeline.schema import RECOMMENDATIONS

# Why a row is or is not recommended (the `reason` column).
REASONS = ("one_chassis", "several_chassis", "needs_network", "does_not_fit")


def job_cards(
    arch,
    setup: Callable[[int], memory.Setup],
    c: Mapping[str, object],
    gpu_memory_gb: float,
    total: Callable[[memory.Setup], float] | None = None,
) -> int | None:
    """Fewest cards of `gpu_memory_gb` a typical setup fits on (`setup(cards)` gives it on that many
    cards: one plainly, more with the multi-GPU sharding), or None. `total` gives a setup's peak
    bytes per card (memory.estimate's total; `jobs` passes one that remembers them per model and
    method, so the searches for a job's GPU sizes share their estimates)."""
    total = total or (lambda s: memory.estimate(arch, s, c).total)
    if total(setup(1)) <= gpu_memory_gb * memory.GB:  # memory.fits
        return 1
    found = fewest_cards(total, setup(2), gpu_memory_gb)
    return None if found is None else max(found, 2)


def fewest_cards(
    total: Callable[[memory.Setup], float], setup: memory.Setup, gpu_memory_gb: float, limit: int | None = None
) -> int | None:
    """memory.min_gpus's binary search with the estimate given as `total` (a setup's peak bytes per card)."""
    limit = _MIN_GPUS_LIMIT if limit is None else limit

    def fits(cards: int) -> bool:
        return total(replace(setup, gpus=cards)) <= gpu_memory_gb * memory.GB

    if setup.sharding == "ddp":
        return 1 if fits(1) else None
    low, high = 1, limit
    if not fits(high):
        return None
    while low < high:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid + 1
    return low


_MIN_GPUS_LIMIT = inspect.signature(memory.min_gpus).parameters["limit"].default


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
    80 % of published peaks lie between estimate x low and estimate x high), None with too few rows.

    The estimator runs once per model x method x GPU (`jobs`); what each server makes of a job (how
    many chassis, the link, the rent) is column arithmetic over the join with the servers."""
    tokens = float(c["typical_dataset_tokens_m"]) * 1e6 * float(c["typical_epochs"])
    utilization = float(c["default_utilization"])
    job = jobs(models, methods, servers, gpus, c, tokens, utilization)
    carried = servers.select(
        "server_id", "gpu_id", pl.col("gpu_count").alias("gpus_per_server"), "interconnect", "network",
        *training.PRICE_COLUMNS,
    )  # fmt: skip
    frame = (
        job.join(carried, on="gpu_id")
        .with_columns(
            servers_count=(pl.col("gpus_per_job") + pl.col("gpus_per_server") - 1) // pl.col("gpus_per_server")
        )
        .with_columns(
            **on_servers(c), tokens=pl.lit(tokens), utilization=pl.lit(utilization), **_measured_columns(spread)
        )
        .with_columns(recommended=pl.col("reason").is_in(["one_chassis", "several_chassis"]))
    )
    schema = {k: v for k, v in RECOMMENDATIONS.polars_schema.items() if k != "rank"}
    frame = frame.select(pl.col(k).cast(v) for k, v in schema.items())
    return rank(frame).select(RECOMMENDATIONS.columns)


def on_servers(c: Mapping[str, object]) -> dict[str, pl.Expr]:
    """What a server makes of a job, over rows of `jobs` joined with servers (with `servers_count`):
    the reason it is or is not recommended, the link the job runs over, the hours summed over the
    chassis' cards, and the rent (training.rental_terms) where the job fits."""
    count, cards, chassis = pl.col("gpus_per_server"), pl.col("gpus_per_job"), pl.col("servers_count")
    fits = cards.is_not_null()
    network = pl.col("network").fill_null("") != ""
    rent = training.rental_terms(pl.col("hours"), chassis, c)
    return {
        "reason": pl.when(~fits)
        .then(pl.lit("does_not_fit"))
        .when(chassis == 1)
        .then(pl.lit("one_chassis"))
        .when(network)
        .then(pl.lit("several_chassis"))
        .otherwise(pl.lit("needs_network")),
        "link": pl.when(~fits)
        .then(None)
        .when(cards == 1)
        .then(pl.lit("one_card"))
        .when(chassis == 1)
        .then(pl.col("interconnect"))
        .otherwise(pl.col("network")),
        "hours_all_cards": pl.col("hours") * cards / (chassis * count),
        **{name: pl.when(fits).then(expr) for name, expr in rent.items()},
    }


def jobs(  # noqa: PLR0913
    models: pl.DataFrame,
    methods: pl.DataFrame,
    servers: pl.DataFrame,
    gpus: pl.DataFrame,
    c: Mapping[str, object],
    tokens: float,
    utilization: float,
) -> pl.DataFrame:
    """One row per model x method x GPU that a catalog server carries: the fewest cards the job fits
    on (`job_cards`, null where none does), the first-principles memory per card and the draft hours."""
    archs = memory.model_architectures(models)
    used = set(servers["gpu_id"].to_list())
    gpu_rows = [g for g in gpus.sort("gpu_id").iter_rows(named=True) if g["gpu_id"] in used]
    method_ids = methods.sort("sort_order")["method_id"].to_list()
    setups: dict[tuple[str, int], memory.Setup] = {}  # the typical setup does not depend on the model

    def typical(method_id: str, cards: int) -> memory.Setup:
        if (method_id, cards) not in setups:
            setups[method_id, cards] = memory.typical_setup(method_id, c, cards)
        return setups[method_id, cards]

    rows = []
    for model_id in sorted(archs):
        arch = archs[model_id]
        for method_id in method_ids:
            setup = partial(typical, method_id)
            estimate = _remembering(arch, c)
            by_memory: dict[float, int | None] = {}  # the cards depend on the card's memory only
            by_cards: dict[int, tuple[float, float]] = {}  # memory per card and compute, on the cards
            for gpu in gpu_rows:
                size = float(gpu["memory_gb"])
                if size not in by_memory:
                    by_memory[size] = job_cards(arch, setup, c, size, lambda s, e=estimate: e(s).total)
                cards = by_memory[size]
                per_gpu = hours = None
                if cards is not None:
                    if cards not in by_cards:
                        on_cards = setup(cards)
                        by_cards[cards] = (
                            estimate(on_cards).total / memory.GB,
                            training.training_flops(arch, on_cards, tokens, c),
                        )
                    per_gpu, flops = by_cards[cards]
                    hours = memory.training_hours(flops, cards, training.peak_tflops(gpu, False), utilization)
                rows.append(
                    {
                        "model_id": model_id,
                        "method_id": method_id,
                        "gpu_id": gpu["gpu_id"],
                        "gpus_per_job": cards,
                        "per_gpu_memory_gb": per_gpu,
                        "gpu_memory_gb": size,
                        "gpu_has_nvlink": gpu["interconnect"] != "pcie",
                        "hours": hours,
                    }
                )
    return pl.DataFrame(rows, schema=JOB_SCHEMA)


def _remembering(arch, c: Mapping[str, object]) -> Callable[[memory.Setup], memory.Breakdown]:
    """memory.estimate for one model, each setup's computed once (a job's card searches share them)."""
    estimates: dict[memory.Setup, memory.Breakdown] = {}

    def estimate(setup: memory.Setup) -> memory.Breakdown:
        if setup not in estimates:
            estimates[setup] = memory.estimate(arch, setup, c)
        return estimates[setup]

    return estimate


# The columns of `jobs`, with the types the recommendations table gives them.
JOB_SCHEMA = {
    "model_id": pl.String,
    "method_id": pl.String,
    "gpu_id": pl.String,
    "gpus_per_job": pl.Int64,
    "per_gpu_memory_gb": pl.Float64,
    "gpu_memory_gb": pl.Float64,
    "gpu_has_nvlink": pl.Boolean,
    "hours": pl.Float64,
}


def _measured_columns(spread: tuple[float, float] | None) -> dict[str, pl.Expr]:
    """The per-card figure's measured range: where 80 % of published peaks lie around such an estimate
    (null where there is no figure or too few measurements)."""
    if spread is None:
        return {"per_gpu_memory_low_gb": pl.lit(None, pl.Float64), "per_gpu_memory_high_gb": pl.lit(None, pl.Float64)}
    low, high = measured_range(pl.col("per_gpu_memory_gb"), spread)
    return {"per_gpu_memory_low_gb": low, "per_gpu_memory_high_gb": high}


def measured_range(figure, spread: tuple[float, float]) -> tuple:
    """(low, high) around a first-principles figure (a number or a column): where 80 % of published
    peaks lie for such an estimate, by the (low, high) factors of `spread_of`."""
    return figure * spread[0], figure * spread[1]


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


# The lookups on its own tables live with the views' (pipeline/lookups.py); named here too.
best = lookups.best
spread_of = lookups.spread_of
