"""Lookups on derived tables that the stages and the views share: rows picked out of a table, no
figure computed. The estimators (pipeline/estimate/) and rendering (pipeline/render/) both read them
here, so that the filter behind "the recommendation" or "the measured range" is written once."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl


def best(recommendations_frame: pl.DataFrame) -> pl.DataFrame:
    """The rank-1 row of every model x method that has a recommended server."""
    return recommendations_frame.filter((pl.col("rank") == 1) & pl.col("recommended"))


def spread_of(estimator_range: pl.DataFrame) -> tuple[float, float] | None:
    """(low, high) factors of estimator_range's row over all measurements, None where it has none."""
    row = estimator_range.filter(pl.col("scope") == "all").row(0, named=True)
    return None if row["low_factor"] is None or row["high_factor"] is None else (row["low_factor"], row["high_factor"])


# The kinds of setup whose whole-card readings have their own measured range (estimator_range's scopes).
ONE_GPU, SHARDED = "card_one_gpu", "card_sharded"


def plan_spreads(estimator_range: pl.DataFrame) -> dict[str, tuple[float, float]]:
    """The (low, high) factors of the measured range the plan's headroom uses, per kind of setup (one card
    / sharded): estimator_range's whole-card rows of that kind, else its row over all measurements; a kind
    with neither is left out (no measured range: the point estimate plus the reserve). The one place the
    plan reads its error figures: point it at out-of-sample figures here."""
    rows = {r["scope"]: r for r in estimator_range.iter_rows(named=True)}
    fallback = spread_of(estimator_range)
    out = {}
    for kind in (ONE_GPU, SHARDED):
        row = rows.get(kind)
        if row is not None and row["low_factor"] is not None and row["high_factor"] is not None:
            out[kind] = (row["low_factor"], row["high_factor"])
        elif fallback is not None:
            out[kind] = fallback
    return out


@dataclass(frozen=True)
class TimeBand:
    """What the published throughput says about a time figure: the speed factor the site applies to the
    model (measured ÷ predicted tokens/s, the median over the runs), the (low, high) factors between which
    the measured time of 80 % of the runs lies when that factor is fitted on the other sources only
    (time_summary's out_of_sample reading over all rows; None with too few rows), and the cards and links
    the runs in the accuracy figures cover."""

    low: float | None = None
    high: float | None = None
    gpus: frozenset[str] = frozenset()
    links: frozenset[str] = frozenset()
    speed: float = 1.0

    def hours(self, model_hours: float) -> float:
        """A time of the model as the site shows it: divided by the speed factor."""
        return model_hours / self.speed

    def measured(self, gpu_id: str, link: str) -> bool:
        """Whether a run on this card and this link (step_time's: one_card, nvswitch, nvlink-bridge, pcie,
        between_servers) is covered: some measured run used the card, and some the link."""
        return gpu_id in self.gpus and link in self.links


def time_band(time_summary: pl.DataFrame, time_calibration: pl.DataFrame) -> TimeBand:
    """The TimeBand of the time model's figures (time_summary, time_calibration)."""
    row = time_summary.filter((pl.col("reading") == "out_of_sample") & (pl.col("scope") == "all"))
    low, high, speed = (
        (None, None, None)
        if row.is_empty()
        else row.select("hours_low_factor", "hours_high_factor", "speed_factor").row(0)
    )
    used = time_calibration.filter(pl.col("in_accuracy"))
    covered = frozenset(used["gpu_id"].to_list()), frozenset(used["link"].to_list())
    return TimeBand(low, high, *covered, speed or 1.0)
