"""The calculator's data: what site_templates/static/calculator.js needs, as one JSON document.

The page recomputes the rules of docs/rules.md in the browser, so every input of those rules
(anchors, constants, GPU and server memory, prices) comes from here and none is typed in JS.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import asdict

from pipeline import lookups
from pipeline.combine import Catalog
from pipeline.estimate import first_principles, step_time
from pipeline.estimate.architecture import CONFIG_KEYS, PLAIN_MLP_TYPES, TIED_BY_DEFAULT, architecture_from_row
from pipeline.estimate.table_rule import NVLINK_CARDS, RELATIVE_TOLERANCE
from pipeline.render import russian

# The constants the page uses; the rest of constants.csv serves the articles.
CONSTANTS = (
    "anchor_size_tolerance",
    "range_low_factor",
    "range_high_factor",
    "adamw_weight_bytes",
    "adamw_grad_bytes",
    "adamw_optimizer_bytes",
    "train_flops_per_param_token",
    "hours_per_month",
)

# The first-principles estimator's constants (pipeline/estimate/first_principles.py), for the advanced mode.
ESTIMATOR_CONSTANTS = (
    *first_principles.CONSTANTS,
    "forward_flops_per_param_token",
    "train_flops_per_param_token",
    "hours_per_month",
    "nccl_buffers_large_group_gb",  # recommend.reserve_gb, the plan's headroom
    *step_time.TIME_CONSTANTS,  # the time model
    *step_time.NETWORK_CONSTANTS,
)


def _number(value):
    """Whole floats as ints, so that the JSON reads "70" rather than "70.0"."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _dense_references(models) -> list[str]:
    """The models a custom size borrows its shape from, in the order first_principles.architecture_for_size
    scans them; the page does the same."""
    named = {}
    for row in models.iter_rows(named=True):
        arch = architecture_from_row(row)
        if arch is not None:
            named[row["model_id"]] = arch
    return first_principles.shape_references(named)


def _measured_range(catalog: Catalog) -> dict | None:
    """The factors of estimator_range's row over all measurements (lookups.spread_of), None where it has none."""
    spread = lookups.spread_of(catalog["estimator_range"])
    return None if spread is None else {"low_factor": spread[0], "high_factor": spread[1]}


def estimator_data(catalog: Catalog) -> dict:
    """What the advanced mode needs: every model's architecture (synthetic for the generic sizes,
    as first_principles.model_architectures makes them), the estimator's options, Setup's defaults, constants."""
    architectures = first_principles.model_architectures(catalog["models"])
    return {
        "architectures": {model_id: asdict(arch) for model_id, arch in sorted(architectures.items())},
        "dense_references": _dense_references(catalog["models"]),
        # first_principles.borrowed_shapes: the named model whose shape each generic size takes (the page names it).
        "borrowed_shapes": first_principles.borrowed_shapes(catalog["models"]),
        # How architecture_from_config reads a Hugging Face config.json: the page parses a pasted one the same way.
        "config": {
            "keys": {name: list(keys) for name, keys in CONFIG_KEYS.items()},
            "plain_mlp_types": sorted(PLAIN_MLP_TYPES),
            "tied_by_default": sorted(TIED_BY_DEFAULT),
        },
        "options": {
            "optimizers": list(first_principles.OPTIMIZERS),
            "shardings": list(first_principles.SHARDINGS),
            "offloads": list(first_principles.OFFLOADS),
            "lora_targets": list(first_principles.LORA_TARGETS),
            "losses": list(first_principles.LOSSES),
            # first_principles.optimizer_state_bytes: states per parameter, bits each (null: the weights' width), scale block.
            "optimizer_states": {
                name: {"states": spec.states, "bits": spec.bits, "block": spec.block}
                for name, spec in first_principles.OPTIMIZER_STATES.items()
            },
            "foreach_temporary": sorted(first_principles.FOREACH_TEMPORARY),
            "paged": sorted(first_principles.PAGED),
        },
        # The advanced mode opens with the site's typical setup (sources/typical_setup.csv).
        "setup_defaults": asdict(first_principles.typical_setup("full_amp", catalog.constants)),
        "typical_multi_gpu_sharding": catalog.constants[first_principles.TYPICAL_PREFIX + "multi_gpu_sharding"],
        # first_principles.typical_setup on more than one card, so that the page ranks servers as recommend.py does.
        "typical_multi_gpu_offload": first_principles.typical_setup("full_amp", catalog.constants, 2).offload,
        # recommend.recommendations' reference dataset: tokens x epochs.
        "typical_tokens": float(catalog.constants[first_principles.TYPICAL_PREFIX + "dataset_tokens_m"])
        * 1e6
        * float(catalog.constants[first_principles.TYPICAL_PREFIX + "epochs"]),
        "typical_lora_dropout": bool(catalog.constants[first_principles.TYPICAL_PREFIX + "lora_dropout"]),
        # recommend.spread_of: the factors of the first-principles estimate's measured range (null: too few rows).
        "measured_range": _measured_range(catalog),
        # lookups.plan_spreads (recommend.py's headroom): the measured range per kind of setup the plan's headroom uses.
        "plan_spreads": {
            kind: {"low_factor": low, "high_factor": high}
            for kind, (low, high) in lookups.plan_spreads(catalog["estimator_range"]).items()
        },
        "constants": {name: _number(catalog.constants[name]) for name in dict.fromkeys(ESTIMATOR_CONSTANTS)},
        # The time model's fixed parts (step_time.py) and what the published runs cover (lookups.time_band).
        "time": time_data(catalog),
        # Byte widths of data types (units, not tunable constants) and GB, as first_principles.py has them.
        "units": {
            "fp32": first_principles.FP32,
            "bf16": first_principles.BF16,
            "fp8": first_principles.FP8,
            "gb": _number(first_principles.GB),
        },
        "min_gpus_limit": inspect.signature(first_principles.min_gpus).parameters["limit"].default,
    }


def time_data(catalog: Catalog) -> dict:
    """step_time's links, network rates and byte widths, and the time figures' band and coverage."""
    band = lookups.time_band(catalog["time_summary"], catalog["time_calibration"])
    return {
        "server_links": step_time.SERVER_LINKS,
        "card_links": step_time.CARD_LINKS,
        "network_rate_constants": step_time.NETWORK_RATE_CONSTANTS,
        "gradient_bytes": step_time.GRADIENT_BYTES,
        "stored_weight_bytes": step_time.STORED_WEIGHT_BYTES,
        "band": {
            "low": band.low,
            "high": band.high,
            "gpus": sorted(band.gpus),
            "links": sorted(band.links),
            "speed": band.speed,
        },
    }


# The servers' columns the calculator reads, under their own names.
SERVER_KEYS = (
    "gpu_id",
    "gpu_count",
    "server_memory_gb",
    "price_rub_month",
    "price_rub_hour",
    "min_term_months",
    "interconnect",
    "network",
)


def _records(frame, **keys) -> list[dict]:
    """The rows of `frame` as the script reads them: key -> a column (whole floats as ints), or
    (column, function) for a value made from it; a column the frame lacks gives None."""
    out = []
    for r in frame.iter_rows(named=True):
        record = {}
        for key, source in keys.items():
            column, made = source if isinstance(source, tuple) else (source, _number)
            record[key] = made(r.get(column))
        out.append(record)
    return out


def calculator_data(catalog: Catalog) -> dict:
    """Anchors, methods, models, GPUs, servers with prices, the rules' constants and the estimator's data."""
    anchors = catalog["memory_anchors"].sort("method_id", "params_b")
    methods = catalog["methods"].sort("sort_order", "method_id")
    models = catalog["models"].sort("params_b", "model_id")
    gpus = catalog["gpus"].sort("memory_gb", "gpu_id")
    memory = catalog["server_memory"].select("server_id", "server_memory_gb")
    servers = catalog["servers"].join(memory, on="server_id").sort("server_memory_gb", "server_id")
    return {
        "anchors": {
            method_id: [[_number(p), _number(m)] for p, m in rows.select("params_b", "memory_gb").iter_rows()]
            for (method_id,), rows in anchors.group_by("method_id", maintain_order=True)
        },
        "methods": _records(
            methods,
            id="method_id",
            name="name_ru",
            short_name="short_name_ru",
            theoretical_min_applies=("theoretical_min_applies", bool),
        ),
        "models": _records(models, id="model_id", name="display_name", family="family", params_b="params_b"),
        "gpus": _records(
            gpus,
            id="gpu_id",
            name="short_name",
            memory_gb="memory_gb",
            bf16_dense_tflops="bf16_dense_tflops",
            fp8_dense_tflops="fp8_dense_tflops",
            link_gbs="link_gbs",
            has_nvlink=("interconnect", lambda interconnect: interconnect in NVLINK_CARDS),
            interconnect=("interconnect", str),
        ),
        "servers": _records(
            servers,
            id="server_id",
            name="display_name",
            **{key: key for key in SERVER_KEYS},
        ),
        "constants": {name: _number(catalog.constants[name]) for name in CONSTANTS},
        # Not a rule constant but the float tolerance of estimate.ceil_div, so that counts match at boundaries.
        "ceil_relative_tolerance": RELATIVE_TOLERANCE,
        # The CLDR plural rules and noun forms, for "{count:noun}" slots in the scripts' texts.
        "plural": russian.plural_data(),
        "estimator": estimator_data(catalog),
    }


def calculator_json(catalog: Catalog) -> str:
    """The JSON file the page fetches (data/calculator.json): compact, stable key order."""
    return json.dumps(calculator_data(catalog), ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


def constant_notes(catalog: Catalog) -> dict[str, dict]:
    """For each constant: its Russian description and the reference it cites (title, url, checked_on)."""
    refs = {r["reference_id"]: r for r in catalog["references"].iter_rows(named=True)}
    return {
        r["constant_id"]: {"description": r["description_ru"], **refs[r["reference_id"]]}
        for r in catalog["constants"].iter_rows(named=True)
    }
