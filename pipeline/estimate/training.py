"""Training time and cost (docs/estimator.md, "Training time") and pretraining plans.

Pure functions. Time is the time model's (step_time: compute + the communication compute does not hide);
cost follows the server's rental terms (`rental_cost`): hours x the hourly price, or whole months of the
monthly price.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import polars as pl

from pipeline.estimate import first_principles, step_time
from pipeline.estimate.architecture import Architecture, parameter_counts
from pipeline.schema import PRETRAINING


def training_flops(arch: Architecture, setup: first_principles.Setup, tokens: float, c: Mapping[str, float]) -> float:
    """Compute of training on `tokens` tokens (tokens x epochs): per-token FLOPs of the active parameters."""
    active = parameter_counts(arch).active
    return first_principles.training_flops_per_token(active, setup, c) * tokens


def rental_cost(hours: float, servers_count: int, server: Mapping[str, object], c: Mapping[str, object]):
    """(cost in ₽, basis, months billed) of `hours` on `servers_count` servers under the row's rental terms
    (`rental_terms`, evaluated on one row)."""
    row = pl.DataFrame(
        {
            "hours": [float(hours)],
            "servers_count": [int(servers_count)],
            **{k: [server.get(k)] for k in PRICE_COLUMNS},
        },
        schema={"hours": pl.Float64, "servers_count": pl.Int64, **dict.fromkeys(PRICE_COLUMNS, pl.Int64)},
    )
    cost, basis, months = row.select(**rental_terms(pl.col("hours"), pl.col("servers_count"), c)).row(0)
    return (int(cost) if basis == "month" else cost), basis, months  # whole months of an integer price


PRICE_COLUMNS = ("price_rub_hour", "price_rub_month", "min_term_months")  # servers.csv's rental terms


def rental_terms(hours: pl.Expr, servers_count: pl.Expr, c: Mapping[str, object]) -> dict[str, pl.Expr]:
    """`cost_rub`, `cost_basis` and `months_billed` of `hours` on `servers_count` servers, over rows that
    carry servers.csv's PRICE_COLUMNS: the one cost rule, for a table (recommendations) or one row.

    An hourly price bills the hours; a monthly price bills whole months (of hours_per_month hours),
    at least min_term_months (one month when the row states none) — never the monthly price / 720
    for a job shorter than a month. No price: (None, "on_request", None).
    """
    hourly, monthly = pl.col("price_rub_hour"), pl.col("price_rub_month")
    term = pl.col("min_term_months").fill_null(1)
    # strict=False: an absurd time (a constant at the edge of its bounds) gives no month count, not an error
    months = pl.max_horizontal(term, (hours / float(c["hours_per_month"]) - 1e-9).ceil().cast(pl.Int64, strict=False))
    by_month = monthly.is_null().not_() & hourly.is_null()
    return {
        "cost_rub": pl.when(hourly.is_not_null())
        .then(hours * hourly * servers_count)
        .when(monthly.is_not_null())
        .then((months * monthly * servers_count).cast(pl.Float64)),
        "cost_basis": pl.when(hourly.is_not_null())
        .then(pl.lit("hour"))
        .when(monthly.is_not_null())
        .then(pl.lit("month"))
        .otherwise(pl.lit("on_request")),
        "months_billed": pl.when(by_month).then(months),
    }


@dataclass(frozen=True)
class Pretraining:
    """A pretraining run: how many cards memory needs, how many the deadline needs, and what it costs."""

    tokens: float
    flops: float
    efficiency: float  # share of the BF16 peak the compute reaches (step_time.efficiency)
    cards_for_memory: int | None  # fewest cards the model states fit on with ZeRO-3
    cards_for_time: int  # fewest cards whose compute alone finishes within the target duration
    cards: int | None  # whole servers holding the larger of the two (and, with a network, finishing in time)
    memory_per_card_gb: float | None
    hours: float | None  # compute + exposed communication; None across servers with no declared network
    hours_compute: float | None
    hours_communication: float | None
    servers: int | None
    cost_rub: float | None


PRETRAINING_SETUP = first_principles.Setup(method="full_amp", sharding="zero3", grad_checkpointing=True, seq_len=4096)


def pretraining(  # noqa: PLR0913
    arch: Architecture,
    gpu: Mapping[str, object],
    c: Mapping[str, float],
    days: float,
    tokens_per_param: float | None = None,
    setup: first_principles.Setup | None = None,
    server: Mapping[str, object] | None = None,
    speed: float = 1.0,
) -> Pretraining:
    """Plan pretraining from scratch: tokens = tokens_per_param x parameters (20, Chinchilla, by default).

    The memory side assumes full mixed-precision training sharded with ZeRO-3 and checkpointing (the usual
    way to pretrain at scale). The time side: the fewest cards whose compute (at step_time's efficiency)
    finishes within `days`; the job then takes whole servers (all the cards of each), and its time is the
    time model's on them — raised, server by server, until compute and exposed communication together finish
    in time. Across servers that declare no network there is no time and no price (rule 11). Times are the
    model's divided by `speed`, the published runs' speed factor (lookups.TimeBand.speed).
    """
    setup = setup or PRETRAINING_SETUP
    tokens = (tokens_per_param or c["tokens_per_param"]) * parameter_counts(arch).total
    flops = step_time.flops_per_token(arch, setup, c) * tokens
    peak = float(gpu["bf16_dense_tflops"])
    share = step_time.efficiency(setup, c, peak)
    target = days * 24 * 3600
    rate = peak * 1e12 * share * speed  # FLOP/s of one card, as the site's times count it
    for_time = max(1, math.ceil(flops / (target * rate) * (1 - 1e-9)))
    for_memory = first_principles.min_gpus(arch, setup, c, float(gpu["memory_gb"]))
    if for_memory is None:
        return Pretraining(tokens, flops, share, None, for_time, None, None, None, None, None, None, None)
    per_server = int(server["gpu_count"]) if server else 1
    servers = math.ceil(max(for_memory, for_time) / per_server)
    t = _pretraining_time(arch, setup, gpu, tokens, c, server, servers)
    for _ in range(_GROW_STEPS):  # communication makes the first count too few: grow to finish in time
        if t is None or t.hours / speed * 3600 <= target * (1 + 1e-9):
            break
        servers = max(servers + 1, math.ceil(servers * t.hours / speed * 3600 / target))
        t = _pretraining_time(arch, setup, gpu, tokens, c, server, servers)
    cards = servers * per_server
    per_card = first_principles.estimate(arch, replace(setup, gpus=cards), c).total / first_principles.GB
    hours = None if t is None else t.hours / speed
    cost = None if server is None or hours is None else rental_cost(hours, servers, server, c)[0]
    return Pretraining(
        tokens,
        flops,
        share,
        for_memory,
        for_time,
        cards,
        per_card,
        hours,
        flops / (cards * rate) / 3600 if t is None else t.hours_compute / speed,
        None if t is None else t.hours_communication / speed,
        servers if server else None,
        cost,
    )


_GROW_STEPS = 20


def _pretraining_time(arch, setup, gpu, tokens, c, server, servers: int) -> step_time.TrainingTime | None:  # noqa: PLR0913
    """The time model on `servers` servers (on `servers` cards of the card's own link without a server)."""
    if server is None:
        on = replace(setup, gpus=servers)
        t = step_time.training_time(arch, on, gpu, tokens, c, step_time.CARD_LINKS.get(gpu["interconnect"], "pcie"))
        return t if math.isfinite(t.hours) else None
    on = replace(setup, gpus=servers * int(server["gpu_count"]))
    return step_time.server_time(arch, on, gpu, tokens, c, server, servers)


# Seed 000's pretraining rows: its "H100 80GB" and "H200 141GB" columns are the catalog's ESC8000A cards.
PRETRAINING_GPUS = {"h100-pcie": "h100_cards_text", "h200-nvl": "h200_cards_text"}


def pretraining_table(  # noqa: PLR0913
    models: pl.DataFrame,
    gpus: pl.DataFrame,
    servers: pl.DataFrame,
    legacy_gpu_counts: pl.DataFrame,
    c: Mapping[str, float],
    speed: float = 1.0,
) -> pl.DataFrame:
    """The `pretraining` table: seed 000's pretraining rows (7B, 13B, 70B on H100 and H200) recomputed
    with the stated assumptions, costed on the largest priced catalog server with that card."""
    archs = first_principles.model_architectures(models)
    seed = legacy_gpu_counts.filter(pl.col("method_id").is_null())
    gpu_rows = {g["gpu_id"]: g for g in gpus.iter_rows(named=True)}
    rows = []
    for row in seed.sort("sort_order").iter_rows(named=True):
        for gpu_id, seed_column in PRETRAINING_GPUS.items():
            gpu = gpu_rows[gpu_id]
            priced = servers.filter((pl.col("gpu_id") == gpu_id) & pl.col("price_rub_month").is_not_null())
            server = (
                priced.sort("gpu_count", "server_id", descending=[True, False]).row(0, named=True)
                if priced.height
                else None
            )
            days = c["pretraining_target_days"]
            p = pretraining(archs[row["model_id"]], gpu, c, days, server=server, speed=speed)
            rows.append(
                {
                    "model_id": row["model_id"],
                    "gpu_id": gpu_id,
                    "tokens": p.tokens,
                    "flops": p.flops,
                    "target_days": days,
                    "efficiency": p.efficiency,
                    "cards_for_memory": p.cards_for_memory,
                    "cards_for_time": p.cards_for_time,
                    "cards": p.cards,
                    "memory_per_card_gb": p.memory_per_card_gb,
                    "days": None if p.hours is None else p.hours / 24,
                    "days_compute": None if p.hours_compute is None else p.hours_compute / 24,
                    "days_communication": None if p.hours_communication is None else p.hours_communication / 24,
                    "server_id": None if server is None else server["server_id"],
                    "servers": p.servers,
                    "cost_rub": p.cost_rub,
                    "seed_cards_text": row[seed_column],
                }
            )
    return pl.DataFrame(rows, schema=PRETRAINING.polars_schema)
