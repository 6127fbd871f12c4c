"""What articles may call: one table of helpers and one of tables, written out (no lookup by name).

site_templates/README.md documents each entry; an article reaches nothing else (render/site.py runs it in a
sandbox that allows exactly these). HTML page templates get their view objects from the Renderer.
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.render import format as fmt
from pipeline.render import russian
from pipeline.render.view import TableView
from pipeline.render.views.articles import Tables
from pipeline.render.views.comparison import Comparison
from pipeline.render.views.estimator import EstimatorTables


def article_helpers(t: Tables, e: EstimatorTables, cmp: Comparison) -> dict[str, dict[str, Callable]]:
    """The members of the helper objects `t`, `e`, `cmp`, `fmt` and `ru` an article may call."""
    return {
        "t": _table_helpers(t),
        "e": _estimator_helpers(e),
        "cmp": _comparison_helpers(cmp),
        "fmt": {
            "gb": fmt.gb,
            "number": fmt.number,
            "integer": fmt.integer,
        },
        "ru": {
            "count": russian.count,
            "plural": russian.plural,
            "noun_form": russian.noun_form,
            "value": russian.value,
            "claim": russian.claim,
            "calculator_url": russian.calculator_url,
        },
    }


def _table_helpers(t: Tables) -> dict[str, Callable]:
    """The members of `t`: the catalog's figures and rows."""
    return {
        "mem": t.mem,
        "mem_low": t.mem_low,
        "mem_high": t.mem_high,
        "tmin": t.tmin,
        "cards": t.cards,
        "cards_high": t.cards_high,
        "percent": t.percent,
        "anchor_sizes": t.anchor_sizes,
        "min_bytes": t.min_bytes,
        "const": t.const,
        "max_anchor_b": t.max_anchor_b,
        "model": t.model,
        "method": t.method,
        "gpu": t.gpu,
        "server": t.server,
        "legacy_row": t.legacy_row,
        "server_fit_row": t.server_fit_row,
    }


def _estimator_helpers(e: EstimatorTables) -> dict[str, Callable]:
    """The members of `e`: the estimator's accuracy."""
    return {
        "median_error": e.median_error,
        "within_25": e.within_25,
        "bias": e.bias,
        "rows_used": e.rows_used,
        "measurements_count": e.measurements_count,
        "part": e.part,
    }


def _comparison_helpers(cmp: Comparison) -> dict[str, Callable]:
    """The members of `cmp`: the estimators compared."""
    return {
        "gb": cmp.gb,
        "applies": cmp.applies,
        "part": cmp.part,
        "cards": cmp.cards,
        "ratio": cmp.ratio,
        "bytes_per_param": cmp.bytes_per_param,
        "fits": cmp.fits,
        "advice": cmp.advice,
        "advice_steps": cmp.advice_steps,
        "measured": cmp.measured,
        "predicted": cmp.predicted,
        "error": cmp.error,
        "error_abs": cmp.error_abs,
        "seq_len": cmp.seq_len,
        "link": cmp.link,
        "legacy_full_high_bytes": cmp.legacy_full_high_bytes,
        "legacy_qlora_gb": cmp.legacy_qlora_gb,
        "deepspeed_bytes_per_param": cmp.deepspeed_bytes_per_param,
        "within_percent": cmp.within_percent,
        "gib_in_gb": cmp.gib_in_gb,
        "bytes_per_gb": cmp.bytes_per_gb,
    }


def article_tables(t: Tables, e: EstimatorTables, cmp: Comparison) -> dict[str, Callable[..., TableView]]:
    """The tables of `table("kind", …)` in an article: kind -> the view function that makes it."""
    return {
        "methods": t.methods_table,
        "anchors": t.anchors_table,
        "memory": t.memory_table,
        "min": t.min_table,
        "cards": t.cards_table,
        "server_fit": t.server_fit_table,
        "rule_of_thumb": t.rule_of_thumb_table,
        "legacy_counts": t.legacy_counts_table,
        "legacy_offers": t.legacy_offers_table,
        "summary": e.summary_table,
        "calibration": e.calibration_table,
        "breakdown": e.breakdown_table,
        "pretraining": e.pretraining_table,
        "accuracy_breakdown": e.accuracy_breakdown_table,
        "range": e.range_table,
        "out_of_sample": e.out_of_sample_table,
        "constants": e.constants_table,
        "estimators": cmp.estimators_table,
        "setups": cmp.setups_table,
        "parts": cmp.parts_table,
        "measured": cmp.measured_table,
        "advice": cmp.advice_table,
    }
