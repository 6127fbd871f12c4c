"""The held-out check (issue 14): the first-principles estimator against published measurements that are
not in sources/measurements.csv (`python bench/heldout.py`, `--json` for machine use).

Each row of bench/heldout_measurements.csv is turned into a row of `python -m pipeline estimate --batch`
and scored through that same code path (`estimate_cli.run_batch`, in this one process, with the catalog
validated from sources/ as the command does). The reading compared is the one the row's metric names:
`allocated` (and torchtune's `active`) with the estimator's allocated peak, `reserved` (and PEFT's
`reserved_delta`) with the reserved one, `nvidia_smi`, an unnamed metric (`unknown`) and `fits_on` (the card
a setup just fits) with the whole card. Figures are per metric kind (allocated, reserved, card, fits_on), per
metric kind and sharding mode, and per method: rows, median absolute error, share within ±25 % (the issue's
done-when asks for a median of at most 10 % and 85 % within ±25 % for each metric kind), median signed
error, and the worst rows with their signed errors. Runs that ran out of memory (outcome `oom`, metric
`fits_on`, measured_value the card's memory) have no error; they are counted apart: how many of them the
estimator says do not fit (its whole card above the card's memory, the rule of the calibration table's
`predicts_oom`), and which it says fit. Then, for the calibration set itself (sources/measurements.csv), the
first-principles estimator in sample and leaving one source out (issue 36: each source document's rows predicted with
every fitted constant fitted on the other documents), per metric kind, method, sharding and loss path. Nothing is
asserted: a benchmark is not a test.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from pipeline.estimate.calibration import METRIC_KIND, METRIC_KINDS  # noqa: E402
from pipeline.estimate.calibration import UNIT_BYTES as CALIBRATION_UNIT_BYTES  # noqa: E402

DEFAULT_CSV = REPO / "bench" / "heldout_measurements.csv"
WITHIN = 0.25
WORST = 5

# The columns of the held-out file: measurements.csv's setup and measurement columns, plus the source.
COLUMNS = (
    "measurement_id",
    "model_id",
    "method_id",
    "optimizer",
    "seq_len",
    "micro_batch",
    "grad_accum",
    "gpus",
    "sharding",
    "offload",
    "grad_checkpointing",
    "flash_attention",
    "lora_rank",
    "lora_targets",
    "loss",
    "framework",
    "extra_techniques",
    "gpu_id",
    "outcome",
    "metric",
    "measured_value",
    "measured_unit",
    "source_url",
    "quote",
    "note",
)
# The columns copied as they are into a --batch row (the file's name on the left, the batch column's on the right).
SETUP_COLUMNS = {
    "model_id": "model",
    "method_id": "method",
    "optimizer": "optimizer",
    "seq_len": "seq_len",
    "micro_batch": "micro_batch",
    "grad_accum": "grad_accum",
    "gpus": "gpus",
    "sharding": "sharding",
    "offload": "offload",
    "grad_checkpointing": "grad_checkpointing",
    "flash_attention": "flash_attention",
    "lora_rank": "lora_rank",
    "lora_targets": "lora_targets",
    "loss": "loss",
}
# extra_techniques the estimator models, each a boolean batch column; every one not listed is set false, so a
# row never takes the typical setup's value of a technique by accident.
TECHNIQUES = (
    "lora_dropout",
    "double_quant",
    "quantized_lm_head",
    "lora_lm_head",
    "frozen_fp32",
    "optimizer_in_backward",
    "quant_inputs_held",
)
# The reading of the estimate each metric measures, and the metric kind it is summarised under.
READING = {
    "allocated": "allocated",
    "active": "allocated",
    "reserved": "reserved",
    "reserved_delta": "reserved",
    "nvidia_smi": "whole_card",
    "unknown": "whole_card",
    "fits_on": "whole_card",
}
# The metric kinds are the accuracy page's (pipeline.estimate.calibration), so the two group alike.
KIND, KINDS, UNIT_BYTES = METRIC_KIND, METRIC_KINDS, CALIBRATION_UNIT_BYTES


class HeldoutError(Exception):
    """A held-out file the scorer cannot read: the message says where and why."""


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a held-out file, checked for the columns, a known metric and unit and a positive value."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HeldoutError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise HeldoutError(f"{path}:1: the columns must be {', '.join(COLUMNS)}")
    rows, seen = [], set()
    for row in reader:
        where = f"{path}:{reader.line_num}"
        if None in row:
            raise HeldoutError(f"{where}: more cells than the header has columns")
        if row["measurement_id"] in seen:
            raise HeldoutError(f"{where}: measurement_id {row['measurement_id']!r} given twice")
        seen.add(row["measurement_id"])
        _check_row(row, where)
        rows.append(row)
    return rows


def _check_row(row: Mapping[str, str], where: str) -> None:
    """A known metric and unit, a value, modelled techniques and a source; HeldoutError naming `where`."""
    if row["metric"] not in READING:
        raise HeldoutError(f"{where}: metric {row['metric']!r}; expected one of {', '.join(READING)}")
    if row["measured_unit"] not in UNIT_BYTES:
        raise HeldoutError(f"{where}: measured_unit {row['measured_unit']!r}; expected GB or GiB")
    if row["outcome"] not in ("value", "oom"):
        raise HeldoutError(f"{where}: outcome {row['outcome']!r}; expected value or oom")
    if row["outcome"] == "oom" and row["metric"] != "fits_on":
        raise HeldoutError(f"{where}: an oom row's metric is fits_on (measured_value: the card's memory)")
    try:
        value = float(row["measured_value"])
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise HeldoutError(f"{where}: measured_value {row['measured_value']!r} is not a positive number")
    unknown = [t for t in techniques(row) if t not in TECHNIQUES]
    if unknown:
        raise HeldoutError(f"{where}: extra_techniques {', '.join(unknown)} not modelled by the estimator")
    if not row["source_url"] or not row["quote"]:
        raise HeldoutError(f"{where}: source_url and quote are required")


def techniques(row: Mapping[str, str]) -> list[str]:
    return [t for t in (row.get("extra_techniques") or "").split(",") if t]


def batch_row(row: Mapping[str, str]) -> dict[str, str]:
    """The `estimate --batch` row of a held-out row."""
    out = {batch: row[column] for column, batch in SETUP_COLUMNS.items()}
    listed = set(techniques(row))
    out |= {t: "true" if t in listed else "false" for t in TECHNIQUES}
    return out


def measured_gb(row: Mapping[str, str]) -> float:
    return float(row["measured_value"]) * UNIT_BYTES[row["measured_unit"]] / 10**9


def predict(rows: list[dict[str, str]], sources: Path) -> list[dict[str, str]]:
    """Each row's `estimate --batch` output row, in order (run in this process through estimate_cli.run_batch)."""
    from pipeline.__main__ import parser
    from pipeline.tools import estimate_cli

    with tempfile.TemporaryDirectory(prefix="heldout-") as tmp:
        path = Path(tmp) / "setups.csv"
        columns = [*SETUP_COLUMNS.values(), *TECHNIQUES]
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, columns, lineterminator="\n")
            writer.writeheader()
            writer.writerows(batch_row(r) for r in rows)
        argv = ["estimate", "--batch", str(path), "--sources", str(sources)]
        args = parser(argv, prog="heldout").parse_args(argv)
        catalog = estimate_cli._load(args.sources)
        text, problems = estimate_cli.run_batch(catalog, path, args)
    if problems:
        raise HeldoutError("the estimator refused rows:\n" + "\n".join(problems))
    out = list(csv.DictReader(io.StringIO(text)))
    if len(out) != len(rows):
        raise HeldoutError(f"the estimator scored {len(out)} of {len(rows)} rows")
    return out


def records(rows: list[dict[str, str]], predicted: list[dict[str, str]]) -> list[dict]:
    """One record per row with a value: id, model, method, sharding, metric kind, measured and predicted GB and
    the signed error."""
    out = []
    for row, p in zip(rows, predicted, strict=True):
        if row["outcome"] != "value":
            continue
        measured = measured_gb(row)
        estimate = float(p[READING[row["metric"]]])
        out.append(
            {
                "measurement_id": row["measurement_id"],
                "model_id": row["model_id"],
                "method_id": row["method_id"],
                "sharding": row["sharding"],
                "loss": row["loss"] or "hf",
                "metric_kind": KIND[row["metric"]],
                "measured_gb": measured,
                "predicted_gb": estimate,
                "error": (estimate - measured) / measured,
            }
        )
    return out


def oom_records(rows: list[dict[str, str]], predicted: list[dict[str, str]]) -> list[dict]:
    """One record per run that ran out of memory: id, method, sharding, the card's GB, the estimate's whole
    card and whether the estimator says it does not fit (above the card, as calibration's predicts_oom)."""
    out = []
    for row, p in zip(rows, predicted, strict=True):
        if row["outcome"] != "oom":
            continue
        card, estimate = measured_gb(row), float(p["whole_card"])
        out.append(
            {
                "measurement_id": row["measurement_id"],
                "method_id": row["method_id"],
                "sharding": row["sharding"],
                "card_gb": card,
                "predicted_gb": estimate,
                "predicts_oom": estimate > card,
            }
        )
    return out


def oom_stats(recs: list[dict]) -> dict:
    """Runs out of memory, how many the estimator says do not fit, the share, and the ids it says fit."""
    said = sum(r["predicts_oom"] for r in recs)
    return {
        "rows": len(recs),
        "predicted": said,
        "share": said / len(recs) if recs else None,
        "missed": sorted(r["measurement_id"] for r in recs if not r["predicts_oom"]),
    }


def stats(group: Iterable[Mapping], worst: int = WORST, within: float = WITHIN) -> dict:
    """Rows, median absolute error, share within ±`within`, median signed error and the `worst` rows."""
    group = list(group)
    errors = [r["error"] for r in group]
    ranked = sorted(group, key=lambda r: (-abs(r["error"]), r["measurement_id"]))
    return {
        "rows": len(errors),
        "median_abs_error": median(abs(e) for e in errors) if errors else None,
        "within_25": sum(abs(e) <= within for e in errors) / len(errors) if errors else None,
        "median_error": median(errors) if errors else None,
        "worst": [{"measurement_id": r["measurement_id"], "error": r["error"]} for r in ranked[:worst]],
    }


def summary(recs: list[dict], worst: int = WORST, ooms: list[dict] | None = None) -> dict:
    """The figures of all rows, per metric kind, per metric kind and sharding mode, and per method (only the
    groups that have rows, in order)."""
    methods = sorted({r["method_id"] for r in recs})
    shardings = sorted({r["sharding"] for r in recs})
    return {
        "all": stats(recs, worst),
        "metric_kind": {
            k: stats([r for r in recs if r["metric_kind"] == k], worst)
            for k in KINDS
            if any(r["metric_kind"] == k for r in recs)
        },
        "kind_sharding": {
            f"{k} {s}": stats(group, worst)
            for k in KINDS
            for s in shardings
            if (group := [r for r in recs if r["metric_kind"] == k and r["sharding"] == s])
        },
        "method": {m: stats([r for r in recs if r["method_id"] == m], worst) for m in methods},
        "loss": {
            loss: stats([r for r in recs if r.get("loss", "hf") == loss], worst)
            for loss in sorted({r.get("loss", "hf") for r in recs})
        },
        "rows": recs,
        "oom": oom_stats(ooms or []),
        "oom_rows": ooms or [],
    }


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.1f} %"


def render(result: dict) -> str:
    lines = [f"{'group':<22} {'rows':>4} {'median |e|':>11} {'within 25':>10} {'median e':>10}  worst (signed)"]

    def line(name: str, s: dict) -> str:
        worst = ", ".join(f"{w['measurement_id']} {w['error'] * 100:+.0f} %" for w in s["worst"][:3])
        return (
            f"{name:<22} {s['rows']:>4} {abs(s['median_abs_error']) * 100:>9.1f} % {s['within_25'] * 100:>8.0f} % "
            f"{_pct(s['median_error']):>10}  {worst}"
        )

    lines.append(line("all", result["all"]))
    lines += [line(f"kind {k}", s) for k, s in result["metric_kind"].items()]
    lines += [line(f"kind {k}", s) for k, s in result["kind_sharding"].items()]
    lines += [line(f"method {m}", s) for m, s in result["method"].items()]
    lines += [line(f"loss {m}", s) for m, s in result.get("loss", {}).items()]
    oom = result["oom"]
    if oom["rows"]:
        lines.append(
            f"out of memory: {oom['rows']} runs, the estimator says {oom['predicted']} do not fit "
            f"({oom['share'] * 100:.0f} %); says fit: {', '.join(oom['missed']) or 'none'}"
        )
    lines.append("")
    lines.append(f"{'measurement_id':<42} {'kind':<9} {'measured':>9} {'estimate':>9} {'error':>9}")
    for r in sorted(result["rows"], key=lambda r: r["measurement_id"]):
        lines.append(
            f"{r['measurement_id']:<42} {r['metric_kind']:<9} {r['measured_gb']:>7.2f} GB {r['predicted_gb']:>6.2f} GB "
            f"{_pct(r['error']):>9}"
        )
    return "\n".join(lines)


def calibration_out_of_sample(sources: Path) -> list[dict]:
    """The calibration set's figures in sample and leaving one source out (the catalog's calibration_out_of_sample:
    every fitted constant fitted again without the source document of the rows scored)."""
    from pipeline.tools import estimate_cli

    table = estimate_cli._load(sources)["calibration_out_of_sample"]
    return table.sort("sort_order").to_dicts()


def render_out_of_sample(rows: list[dict]) -> str:
    """The calibration set in sample and out of sample, side by side, per metric kind, method, sharding, loss path."""
    head = f"{'calibration set':<26} {'rows':>4} {'in: |e|':>8} {'in: ±25':>8} {'out: |e|':>9} {'out: ±25':>9} {'out: e':>8}"
    lines = ["", "sources/measurements.csv, in sample vs leave one source out (calibration_out_of_sample)", head]

    def pct(value: float | None, signed: bool = False) -> str:
        if value is None:
            return "—"
        return f"{value * 100:+.1f} %" if signed else f"{value * 100:.1f} %"

    for r in rows:
        name = "all" if r["dimension"] == "all" else f"{r['dimension']} {r['group_id']}"
        lines.append(
            f"{name:<26} {r['rows']:>4} {pct(r['in_sample_median_abs_error']):>8} {pct(r['in_sample_within_25']):>8} "
            f"{pct(r['out_of_sample_median_abs_error']):>9} {pct(r['out_of_sample_within_25']):>9} "
            f"{pct(r['out_of_sample_median_error'], signed=True):>8}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="the held-out file (default: %(default)s)")
    ap.add_argument("--sources", type=Path, default=REPO / "sources", help="the sources folder (default: %(default)s)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    try:
        rows = read_rows(args.csv)
        predicted = predict(rows, args.sources)
        result = summary(records(rows, predicted), ooms=oom_records(rows, predicted))
        result["calibration_out_of_sample"] = calibration_out_of_sample(args.sources)
    except HeldoutError as exc:
        print(f"heldout: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(render(result) + render_out_of_sample(result["calibration_out_of_sample"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
