"""The memory estimator against its calibration set (issue 36): `python bench/memory_accuracy.py [--json]`.

Reads the catalog's `calibration_out_of_sample` table (the validated sources, as `python -m pipeline estimate`
keeps them cached) and prints, per metric kind, then per method, sharding and loss path, the first-principles
estimator in sample (constants.csv as it is) and leaving one source out (each source document's rows predicted
with every fitted constant fitted on the other documents) side by side: rows, median |error|, share within
±25 % and the signed median. The issue's targets, on the out-of-sample reading, for every metric kind with at
least 10 runs: median |error| at most 10 %, at least 85 % within ±25 %. `just bench` prints the same section.
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

TARGET_MEDIAN, TARGET_WITHIN, TARGET_MIN_ROWS = 0.10, 0.85, 10


def figures(sources: Path = REPO / "sources") -> dict:
    """The rows of calibration_out_of_sample, in page order, as plain data."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    from pipeline.tools import estimate_cli

    table = estimate_cli._load(sources)["calibration_out_of_sample"]
    return {"groups": table.sort("sort_order").to_dicts()}


def targets(figs: dict) -> list[dict]:
    """The issue's two targets for each metric kind with at least TARGET_MIN_ROWS runs, out of sample; a kind with
    fewer runs is reported as not applicable."""
    out = []
    for g in figs["groups"]:
        if g["dimension"] != "metric_kind":
            continue
        kind, rows = g["group_id"], g["rows"]
        median, within = g["out_of_sample_median_abs_error"], g["out_of_sample_within_25"]
        applies = rows >= TARGET_MIN_ROWS
        out.append(
            {
                "target": f"memory ({kind}), leave-one-source-out median |error| <= 10 %",
                "figure": f"{median:.1%} on {rows} rows",
                "verdict": ("met" if median <= TARGET_MEDIAN else "MISSED") if applies else "n/a (< 10 rows)",
            }
        )
        out.append(
            {
                "target": f"memory ({kind}), leave-one-source-out within ±25 % >= 85 %",
                "figure": f"{within:.0%} of {rows} rows",
                "verdict": ("met" if within >= TARGET_WITHIN else "MISSED") if applies else "n/a (< 10 rows)",
            }
        )
    return out


def _pct(x, signed: bool = False) -> str:
    if x is None:
        return "—"
    return f"{x:+.1%}" if signed else f"{x:.1%}"


def print_figures(figs: dict) -> None:
    print("Memory estimator against sources/measurements.csv: in sample | leave one source out")
    head = f"  {'group':<24} {'rows':>4}  {'median|e|':>9} {'±25 %':>6} {'median e':>8}  |"
    print(head + f"  {'median|e|':>9} {'±25 %':>6} {'median e':>8}  range ×")
    for g in figs["groups"]:
        name = "all" if g["dimension"] == "all" else f"{g['dimension'].replace('metric_kind', 'kind')} {g['group_id']}"
        factors = "—" if g["low_factor"] is None else f"{g['low_factor']:.2f}–{g['high_factor']:.2f}"
        print(
            f"  {name:<24} {g['rows']:>4}  {_pct(g['in_sample_median_abs_error']):>9} "
            f"{_pct(g['in_sample_within_25']):>6} {_pct(g['in_sample_median_error'], True):>8}  |"
            f"  {_pct(g['out_of_sample_median_abs_error']):>9} {_pct(g['out_of_sample_within_25']):>6} "
            f"{_pct(g['out_of_sample_median_error'], True):>8}  {factors}"
        )
    print("\n  targets (reported, not asserted)")
    for t in targets(figs):
        print(f"  {t['target']:<62} {t['figure']:<18} {t['verdict']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The memory estimator in and out of sample (not a test).")
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
