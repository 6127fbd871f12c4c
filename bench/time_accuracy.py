"""The time model against published throughput (issue 34): `python bench/time_accuracy.py [--json]`.

Validates sources/ as a build does, makes the `time_calibration` and `time_summary` tables
(pipeline/estimate/time_accuracy.py) and prints, for each reading (the constants as declared, one speed
factor fitted on every row, the same factor fitted on the other sources only), the rows, median |error|,
share within ±25 % and signed median error, overall and per GPU, method and link; then every row. The
issue's target: leave-one-source-out median |error| at most 20 %, at least 70 % of rows within ±25 %.
Nothing is asserted: a benchmark is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

TARGET_MEDIAN, TARGET_WITHIN = 0.20, 0.70


def figures(sources: Path = REPO / "sources") -> dict:
    """The summary and the rows of the time model's check, as plain data."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    from pipeline.build import load_and_validate
    from pipeline.combine import combine

    catalog = combine(load_and_validate(sources)[0])
    return {
        "summary": catalog["time_summary"].to_dicts(),
        "rows": catalog["time_calibration"].to_dicts(),
    }


def overall(figs: dict, reading: str) -> dict:
    """The all-rows line of one reading."""
    return next(r for r in figs["summary"] if r["reading"] == reading and r["scope"] == "all")


def targets(figs: dict) -> list[dict]:
    """The issue's two targets, on the leave-one-source-out reading."""
    out = overall(figs, "out_of_sample")
    median, within = out["median_abs_error"], out["within_25"]
    return [
        {
            "target": "time model, leave-one-source-out median |error| <= 20 %",
            "figure": "—" if median is None else f"{median:.1%} on {out['rows']} rows",
            "verdict": "n/a" if median is None else ("met" if median <= TARGET_MEDIAN else "MISSED"),
        },
        {
            "target": "time model, leave-one-source-out within ±25 % >= 70 %",
            "figure": "—" if within is None else f"{within:.0%} of {out['rows']} rows",
            "verdict": "n/a" if within is None else ("met" if within >= TARGET_WITHIN else "MISSED"),
        },
    ]


def _pct(x) -> str:
    return "—" if x is None else f"{x:+.1%}"


def print_figures(figs: dict) -> None:
    print("Time model against published throughput (error = predicted hours / measured hours - 1)")
    print(f"  {'reading':<14} {'scope':<14} {'value':<16} {'rows':>4} {'median|e|':>10} {'±25 %':>6} {'median e':>9}")
    for r in figs["summary"]:
        within = "—" if r["within_25"] is None else f"{r['within_25']:.0%}"
        median_abs = "—" if r["median_abs_error"] is None else f"{r['median_abs_error']:.1%}"
        print(
            f"  {r['reading']:<14} {r['scope']:<14} {r['value']:<16} {r['rows']:>4} {median_abs:>10} "
            f"{within:>6} {_pct(r['median_error']):>9}"
        )
    print("\n  rows (measured and predicted tokens/s per GPU; errors declared / fitted / out of sample)")
    for r in figs["rows"]:
        used = "" if r["in_accuracy"] else "  (not in the figures)"
        print(
            f"  {r['run_id']:<32} {r['measured_tokens_per_second_per_gpu']:>9.0f} "
            f"{r['predicted_tokens_per_second_per_gpu']:>9.0f}  {_pct(r['error']):>8} {_pct(r['error_fitted']):>8} "
            f"{_pct(r['error_fitted_out_of_sample']):>8}{used}"
        )
    print("\n  targets (reported, not asserted)")
    for t in targets(figs):
        print(f"  {t['target']:<58} {t['figure']:<18} {t['verdict']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The time model against published throughput (not a test).")
    parser.add_argument("--sources", type=Path, default=REPO / "sources")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    figs = figures(args.sources)
    if args.json:
        print(json.dumps({**figs, "targets": targets(figs)}, indent=2, ensure_ascii=False, default=str))
    else:
        print_figures(figs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
