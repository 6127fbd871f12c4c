"""Lookups on derived tables that the stages and the views share: rows picked out of a table, no
figure computed. The estimators (pipeline/estimate/) and rendering (pipeline/render/) both read them
here, so that the filter behind "the recommendation" or "the measured range" is written once."""

from __future__ import annotations

import polars as pl


def best(recommendations_frame: pl.DataFrame) -> pl.DataFrame:
    """The rank-1 row of every model x method that has a recommended server."""
    return recommendations_frame.filter((pl.col("rank") == 1) & pl.col("recommended"))


def spread_of(estimator_range: pl.DataFrame) -> tuple[float, float] | None:
    """(low, high) factors of estimator_range's row over all measurements, None where it has none."""
    row = estimator_range.filter(pl.col("scope") == "all").row(0, named=True)
    return None if row["low_factor"] is None or row["high_factor"] is None else (row["low_factor"], row["high_factor"])
