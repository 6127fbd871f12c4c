"""Stage 4, combination: typed source tables -> every derived table, as one catalog."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from pipeline.estimate import calibration, first_principles, recommend, table_rule, training
from pipeline.schema import SOURCE_TABLES


@dataclass(frozen=True)
class Catalog:
    """Every source and derived table as polars frames, plus the rules' constants."""

    tables: dict[str, pl.DataFrame]
    constants: dict[str, float]

    def __getitem__(self, name: str) -> pl.DataFrame:
        return self.tables[name]


def combine(con: duckdb.DuckDBPyConnection) -> Catalog:
    """Read the typed tables and compute estimates, gpu_fit and server_fit."""
    tables = {t.name: con.sql(f'SELECT * FROM "{t.name}"').pl() for t in SOURCE_TABLES}
    constants = dict(tables["constants"].select("constant_id", "value").iter_rows())
    constants |= first_principles.typical_constants(tables["typical_setup"])  # the typical setup, as typical_<setting>
    estimates = table_rule.estimate_memory(tables["models"], tables["methods"], tables["memory_anchors"], constants)
    tables["estimates"] = estimates
    tables["gpu_fit"] = table_rule.gpu_fit(estimates, tables["gpus"])
    tables["server_fit"] = table_rule.server_fit(estimates, tables["servers"], tables["gpus"])
    calibrated = calibration.calibration(tables["measurements"], tables["models"], estimates, tables["gpus"], constants)
    tables["calibration"] = calibrated
    tables["calibration_summary"] = calibration.summary(calibrated, constants["calibration_within"])
    tables["calibration_breakdown"] = calibration.breakdown(calibrated, constants["calibration_within"])
    tables["estimator_range"] = calibration.estimator_range(calibrated)
    tables["estimator_constants"] = calibration.estimator_constants(
        calibrated, tables["measurements"], tables["models"], tables["constants"]
    )
    tables["pretraining"] = training.pretraining_table(
        tables["models"], tables["gpus"], tables["servers"], tables["legacy_gpu_counts"], constants
    )
    tables["recommendations"] = recommend.recommendations(
        tables["models"],
        tables["methods"],
        tables["servers"],
        tables["gpus"],
        constants,
        recommend.spread_of(tables["estimator_range"]),
    )
    tables["memory_breakdown"] = first_principles.memory_breakdown_table(
        tables["models"], tables["methods"], estimates, constants, recommend.job_gpus(tables["recommendations"])
    )
    return Catalog(tables, constants)
