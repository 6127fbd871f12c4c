"""Accuracy out of sample (issue 36): leave one source document out, fit on the others, score the one left out."""

from __future__ import annotations

from statistics import median

import polars as pl
import pytest

from pipeline.estimate import calibration
from pipeline.estimate import first_principles as memory


def test_leave_one_source_out_fits_on_the_other_sources_only():
    rows = [
        {"reference_id": "a", "x": 1.0, "y": 2.0},
        {"reference_id": "a", "x": 2.0, "y": 4.0},
        {"reference_id": "b", "x": 1.0, "y": 3.0},
        {"reference_id": "c", "x": 1.0, "y": 5.0},
    ]
    seen = []

    def fit(training):
        seen.append(sorted({r["reference_id"] for r in training}))
        return median(r["y"] / r["x"] for r in training)

    predicted = calibration.leave_one_source_out(rows, fit, lambda ratio, r: ratio * r["x"])
    # a: fitted on b and c (ratios 3, 5: median 4); b: on a, c (2, 2, 5: 2); c: on a, b (2, 2, 3: 2).
    assert predicted == [4.0, 8.0, 2.0, 2.0]
    assert seen == [["b", "c"], ["a", "c"], ["a", "b"]]  # one fit per source, never on its own rows


def _calibrated(rows: list[tuple]) -> pl.DataFrame:
    columns = ("in_summary", "metric_kind", "method_id", "sharding", "loss", "first_principles_error")
    frame = pl.DataFrame([dict(zip(columns, r[:-1], strict=True)) for r in rows])
    return frame.with_columns(pl.Series("first_principles_loso_error", [r[-1] for r in rows]))


def test_out_of_sample_table_groups_in_and_out_of_sample_side_by_side():
    calibrated = _calibrated(
        [
            (True, "allocated", "lora", "ddp", "hf", 0.10, 0.10),
            (True, "allocated", "lora", "ddp", "chunked", -0.20, -0.20),
            (True, "reserved", "full_amp", "zero3", "hf", 0.05, 0.30),
            (True, "reserved", "full_amp", "zero3", "hf", -0.05, -0.40),
            (False, "card", "lora", "ddp", "hf", 0.90, 0.90),  # not in the summary
        ]
    )
    table = calibration.out_of_sample(calibrated, 0.25)
    got = {
        (r["dimension"], r["group_id"]): (
            r["rows"],
            r["in_sample_median_abs_error"],
            r["in_sample_within_25"],
            r["out_of_sample_median_abs_error"],
            r["out_of_sample_within_25"],
            r["out_of_sample_median_error"],
        )
        for r in table.iter_rows(named=True)
    }
    assert got == {
        ("all", "all"): (4, pytest.approx(0.075), 1.0, pytest.approx(0.25), 0.5, pytest.approx(-0.05)),
        ("metric_kind", "allocated"): (2, pytest.approx(0.15), 1.0, pytest.approx(0.15), 1.0, pytest.approx(-0.05)),
        ("metric_kind", "reserved"): (2, pytest.approx(0.05), 1.0, pytest.approx(0.35), 0.0, pytest.approx(-0.05)),
        ("method", "full_amp"): (2, pytest.approx(0.05), 1.0, pytest.approx(0.35), 0.0, pytest.approx(-0.05)),
        ("method", "lora"): (2, pytest.approx(0.15), 1.0, pytest.approx(0.15), 1.0, pytest.approx(-0.05)),
        ("sharding", "ddp"): (2, pytest.approx(0.15), 1.0, pytest.approx(0.15), 1.0, pytest.approx(-0.05)),
        ("sharding", "zero3"): (2, pytest.approx(0.05), 1.0, pytest.approx(0.35), 0.0, pytest.approx(-0.05)),
        ("loss", "hf"): (3, pytest.approx(0.05), 1.0, pytest.approx(0.30), pytest.approx(1 / 3), pytest.approx(0.10)),
        ("loss", "chunked"): (1, pytest.approx(0.20), 1.0, pytest.approx(0.20), 1.0, pytest.approx(-0.20)),
    }
    # Fewer than five rows: no percentiles, no range factors.
    assert table["low_factor"].null_count() == table.height


def test_every_allocated_row_is_the_same_out_of_sample(catalog):
    # Only the allocator's cache is fitted, and allocated memory has none: those predictions cannot move.
    cal = catalog["calibration"].filter(
        (pl.col("metric_kind") == "allocated") & pl.col("first_principles_gb").is_not_null()
    )
    assert cal.height > 20
    assert cal["first_principles_loso_gb"].to_list() == cal["first_principles_gb"].to_list()


def test_a_reserved_row_is_predicted_with_the_fragmentation_fitted_without_its_source(catalog):
    cal = catalog["calibration"]
    used = cal.filter(pl.col("in_summary") & (pl.col("metric_kind") == "reserved"))
    sources = used["reference_id"].unique().sort().to_list()
    assert len(sources) >= 2
    measurements = {r["measurement_id"]: r for r in catalog["measurements"].iter_rows(named=True)}
    archs = memory.model_architectures(catalog["models"])
    grid = calibration.FITTED["allocator_fragmentation"][1]
    left_out = sources[0]
    training = [measurements[i] for i in used.filter(pl.col("reference_id") != left_out)["measurement_id"]]
    fitted, _ = calibration._best(
        grid, calibration._grid_errors("allocator_fragmentation", grid, training, archs, catalog.constants)
    )
    row = used.filter(pl.col("reference_id") == left_out).row(0, named=True)
    m = measurements[row["measurement_id"]]
    c = dict(catalog.constants) | {"allocator_fragmentation": fitted}
    expected = memory.estimate(archs[m["model_id"]], calibration.setup_from_row(m), c).gb()["reserved"]
    assert row["first_principles_loso_gb"] == pytest.approx(expected, rel=1e-12)
    assert row["first_principles_loso_error"] == pytest.approx((expected - row["measured_gb"]) / row["measured_gb"])


def test_out_of_sample_table_recomputes_from_the_calibration_rows(catalog):
    cal = catalog["calibration"].filter(pl.col("in_summary"))
    table = catalog["calibration_out_of_sample"]
    assert set(table["dimension"]) == {"all", "metric_kind", "method", "sharding", "loss"}
    for r in table.iter_rows(named=True):
        column = {"method": "method_id"}.get(r["dimension"], r["dimension"])
        part = cal if r["dimension"] == "all" else cal.filter(pl.col(column) == r["group_id"])
        outside = part["first_principles_loso_error"].to_list()
        assert r["rows"] == len(outside) > 0
        assert r["out_of_sample_median_abs_error"] == pytest.approx(median(abs(e) for e in outside))
        assert r["in_sample_median_abs_error"] == pytest.approx(median(abs(e) for e in part["first_principles_error"]))
    whole = table.filter(pl.col("dimension") == "all").row(0, named=True)
    spread = catalog["estimator_range"].filter(pl.col("scope") == "all").row(0, named=True)
    assert (whole["low_factor"], whole["high_factor"]) == (spread["low_factor"], spread["high_factor"])


def test_accuracy_page_shows_in_and_out_of_sample(built):
    page = (built / "site/accuracy.html").read_text(encoding="utf-8").replace("\xa0", " ")
    assert 'id="out-of-sample"' in page and 'id="loss"' in page
    table = pl.read_csv(built / "site/data/calibration_out_of_sample.csv")
    whole = table.filter(pl.col("dimension") == "all").row(0, named=True)
    shown = f"{whole['out_of_sample_median_abs_error'] * 100:.0f}"
    assert f"Вне выборки оценка из первых принципов ошибается в среднем на {shown} %" in page
