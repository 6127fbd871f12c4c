"""The memory section of `just bench` (bench/memory_accuracy.py): in sample and leave one source out per metric
kind, and the issue's targets on the out-of-sample reading (issue 36)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
try:
    import memory_accuracy
finally:
    sys.path.pop(0)


def _group(kind: str, rows: int, median: float, within: float) -> dict:
    return {
        "dimension": "metric_kind",
        "group_id": kind,
        "rows": rows,
        "in_sample_median_abs_error": median / 2,
        "in_sample_within_25": 1.0,
        "in_sample_median_error": -median / 2,
        "out_of_sample_median_abs_error": median,
        "out_of_sample_within_25": within,
        "out_of_sample_median_error": -median,
        "low_factor": 0.9,
        "high_factor": 1.2,
    }


FIGS = {
    "groups": [
        {**_group("all", 60, 0.05, 0.9), "dimension": "all"},
        _group("allocated", 45, 0.109, 0.93),
        _group("card", 10, 0.10, 0.85),
        _group("reserved", 9, 0.30, 0.2),
        {**_group("zero3", 7, 0.5, 0.1), "dimension": "sharding"},
    ]
}


def test_targets_per_metric_kind_on_the_out_of_sample_reading() -> None:
    assert [(t["target"], t["figure"], t["verdict"]) for t in memory_accuracy.targets(FIGS)] == [
        ("memory (allocated), leave-one-source-out median |error| <= 10 %", "10.9% on 45 rows", "MISSED"),
        ("memory (allocated), leave-one-source-out within ±25 % >= 85 %", "93% of 45 rows", "met"),
        ("memory (card), leave-one-source-out median |error| <= 10 %", "10.0% on 10 rows", "met"),
        ("memory (card), leave-one-source-out within ±25 % >= 85 %", "85% of 10 rows", "met"),
        ("memory (reserved), leave-one-source-out median |error| <= 10 %", "30.0% on 9 rows", "n/a (< 10 rows)"),
        ("memory (reserved), leave-one-source-out within ±25 % >= 85 %", "20% of 9 rows", "n/a (< 10 rows)"),
    ]


def test_the_section_prints_both_readings_side_by_side(capsys) -> None:
    memory_accuracy.print_figures(FIGS)
    lines = capsys.readouterr().out.splitlines()
    allocated = next(line for line in lines if line.strip().startswith("kind allocated"))
    assert allocated.split() == [
        "kind", "allocated", "45", "5.5%", "100.0%", "-5.5%", "|", "10.9%", "93.0%", "-10.9%", "0.90–1.20"
    ]  # fmt: skip
    assert any(line.strip().startswith("sharding zero3") for line in lines)
