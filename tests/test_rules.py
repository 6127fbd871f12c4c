"""The estimation rules of docs/rules.md, on small inline catalogs and on the seed's worked checks."""

import polars as pl
import pytest

from conftest import RULE_CONSTANTS as CONSTANTS
from pipeline.estimate import table_rule as estimate
from pipeline.render.format import gb


def small_estimates(sizes: list[float]) -> pl.DataFrame:
    models = pl.DataFrame({"model_id": [f"m{i}" for i in range(len(sizes))], "params_b": sizes})
    methods = pl.DataFrame({"method_id": ["lora", "full_amp"], "theoretical_min_applies": [False, True]})
    anchors = pl.DataFrame(
        {
            "method_id": ["lora"] * 3 + ["full_amp"] * 3,
            "params_b": [10.0, 20.0, 40.0] * 2,
            "memory_gb": [20.0, 40.0, 100.0, 150.0, 300.0, 600.0],
        }
    )
    return estimate.estimate_memory(models, methods, anchors, CONSTANTS)


def test_interpolation_edges():
    e = small_estimates([5, 10, 15, 30, 40, 80]).filter(pl.col("method_id") == "lora").sort("params_b")
    assert e["memory_gb"].to_list() == [10.0, 20.0, 30.0, 70.0, 100.0, 200.0]
    assert e["basis"].to_list() == ["below_range", "anchor", "interpolated", "interpolated", "anchor", "extrapolated"]
    assert e["extrapolated"].to_list() == [False, False, False, False, False, True]


@pytest.mark.parametrize(
    ("tolerance", "bases"),
    [
        (0.01, ["below_range", "anchor", "anchor", "anchor", "anchor", "extrapolated"]),
        (0.0, ["below_range", "below_range", "anchor", "anchor", "extrapolated", "extrapolated"]),
    ],
)
def test_a_size_within_the_tolerance_of_the_end_anchors_is_theirs(monkeypatch, tolerance, bases):
    # 40,3 B is 0,75 % above the largest anchor (40): not an extrapolation; 40,5 B (1,25 %) is.
    monkeypatch.setitem(CONSTANTS, "anchor_size_tolerance", tolerance)
    e = small_estimates([9.8, 9.95, 10, 40, 40.3, 40.5]).filter(pl.col("method_id") == "lora").sort("params_b")
    assert e["basis"].to_list() == bases
    assert e["extrapolated"].to_list() == [b == "extrapolated" for b in bases]
    # the memory still scales with the size beyond the anchor
    assert e["memory_gb"].to_list() == pytest.approx([19.6, 19.9, 20, 100, 100.75, 101.25])


def test_range_and_theoretical_minimum():
    e = small_estimates([15]).sort("method_id")
    assert e.select("method_id", "memory_gb", "memory_low_gb", "memory_high_gb", "theoretical_min_gb").rows() == [
        ("full_amp", 225.0, pytest.approx(157.5), 337.5, 240.0),
        ("lora", 30.0, 21.0, 45.0, None),
    ]


def test_anchor_sizes_are_data_not_code():
    # The same model, with and without an extra anchor column, gets a different estimate.
    models = pl.DataFrame({"model_id": ["m"], "params_b": [100.0]})
    methods = pl.DataFrame({"method_id": ["lora"], "theoretical_min_applies": [False]})
    anchors = pl.DataFrame({"method_id": ["lora", "lora"], "params_b": [7.0, 70.0], "memory_gb": [16.0, 160.0]})
    before = estimate.estimate_memory(models, methods, anchors, CONSTANTS)
    extra = pl.concat([anchors, pl.DataFrame({"method_id": ["lora"], "params_b": [110.0], "memory_gb": [240.0]})])
    after = estimate.estimate_memory(models, methods, extra, CONSTANTS)
    assert before["memory_gb"].to_list() == [pytest.approx(160 * 100 / 70)]
    assert after["memory_gb"].to_list() == [pytest.approx(160 + 80 * 30 / 40)]
    assert after["basis"].to_list() == ["interpolated"]


@pytest.mark.parametrize(
    "cards, cards_high, need",
    [(1, 1, "no"), (1, 2, "recommended"), (2, 3, "required"), (2, 2, "required")],
)
def test_nvlink_need(cards, cards_high, need):
    frame = pl.DataFrame({"c": [cards], "h": [cards_high]})
    assert frame.select(need=estimate.nvlink_need(pl.col("c"), pl.col("h")))["need"].to_list() == [need]


def test_server_fit_statuses_and_servers_needed():
    estimates = pl.DataFrame(
        {
            "model_id": ["a", "b", "c"],
            "method_id": ["x"] * 3,
            "memory_gb": [100.0, 100.0, 500.0],
            "memory_high_gb": [150.0, 200.0, 750.0],
        }
    )
    gpus = pl.DataFrame({"gpu_id": ["g"], "memory_gb": [80.0]})
    servers = pl.DataFrame({"server_id": ["s"], "gpu_id": ["g"], "gpu_count": [2], "price_rub_month": [1000]})
    fit = estimate.server_fit(estimates, servers, gpus)
    assert fit.select("model_id", "server_memory_gb", "fit", "servers_needed", "servers_needed_high").rows() == [
        ("a", 160.0, "yes", 1, 1),
        ("b", 160.0, "estimate_only", 1, 2),
        ("c", 160.0, "no", 4, 5),
    ]


def test_exact_multiples_do_not_round_up():
    # 0.1 + 0.2 is 0.30000000000000004 in floating point: exactly 3 cards of 0.1 GB, not 4.
    estimates = pl.DataFrame(
        {"model_id": ["m"], "method_id": ["x"], "memory_gb": [0.1 + 0.2], "memory_high_gb": [0.45000000000000007]}
    )
    fit = estimate.gpu_fit(estimates, pl.DataFrame({"gpu_id": ["g"], "memory_gb": [0.1]}))
    assert fit.select("cards", "cards_high").rows() == [(3, 5)]


def test_fit_and_server_counts_agree_at_the_boundary():
    estimates = pl.DataFrame(
        {"model_id": ["m"], "method_id": ["x"], "memory_gb": [0.1 + 0.2], "memory_high_gb": [0.45]}
    )
    servers = pl.DataFrame({"server_id": ["s"], "gpu_id": ["g"], "gpu_count": [3], "price_rub_month": [1]})
    fit = estimate.server_fit(estimates, servers, pl.DataFrame({"gpu_id": ["g"], "memory_gb": [0.1]}))
    assert fit.select("fit", "servers_needed", "servers_needed_high").rows() == [("estimate_only", 1, 2)]


# -- the seed article's own figures (docs/rules.md, after rule 11) --

SEED_MEMORY = {
    "generic-8b": {"qlora_4bit": "6,9", "qlora_8bit": "11,4", "lora": "18,3", "full_bf16": "68,6", "full_amp": "137,1"},
    "generic-32b": {"qlora_4bit": "25,2", "qlora_8bit": "42", "lora": "68,8", "full_bf16": "315", "full_amp": "630"},
    "generic-70b": {"qlora_4bit": "48", "qlora_8bit": "80", "lora": "160", "full_bf16": "600", "full_amp": "1\xa0200"},
}


@pytest.mark.parametrize("model_id", sorted(SEED_MEMORY))
def test_seed_memory_figures(catalog, model_id):
    rows = catalog["estimates"].filter(pl.col("model_id") == model_id)
    shown = {r["method_id"]: gb(r["memory_gb"]) for r in rows.iter_rows(named=True)}
    assert {m: shown[m] for m in SEED_MEMORY[model_id]} == SEED_MEMORY[model_id]


@pytest.mark.parametrize(
    "model_id, method_id, gpu_id, cards",
    [
        ("generic-70b", "lora", "rtx-pro-6000", (2, 3)),
        ("generic-70b", "lora", "h200-sxm", (2, 2)),
        ("generic-70b", "full_amp", "h200-sxm", (9, 13)),
        ("generic-70b", "full_amp", "rtx-pro-6000", (13, 19)),
        ("generic-32b", "full_amp", "rtx-pro-6000", (7, 10)),
        ("generic-32b", "full_amp", "h200-sxm", (5, 7)),
        ("generic-8b", "full_amp", "h200-sxm", (1, 2)),
    ],
)
def test_seed_card_counts(catalog, model_id, method_id, gpu_id, cards):
    row = catalog["gpu_fit"].filter(
        (pl.col("model_id") == model_id) & (pl.col("method_id") == method_id) & (pl.col("gpu_id") == gpu_id)
    )
    assert row.select("cards", "cards_high").rows() == [cards]


def test_seed_theoretical_minimum(catalog):
    rows = catalog["estimates"].filter(pl.col("method_id") == "full_amp")
    tmin = {r["model_id"]: r["theoretical_min_gb"] for r in rows.iter_rows(named=True)}
    assert (tmin["generic-8b"], tmin["generic-32b"], tmin["generic-70b"]) == (128.0, 512.0, 1120.0)
    assert catalog["estimates"].filter(pl.col("method_id") == "lora")["theoretical_min_gb"].null_count() == rows.height


def test_seed_server_fit_8x_rtx_pro_6000(catalog):
    row = catalog["server_fit"].filter(
        (pl.col("model_id") == "generic-32b")
        & (pl.col("method_id") == "full_amp")
        & (pl.col("server_id") == "rtx-pro-6000-8x")
    )
    assert row.select("server_memory_gb", "memory_gb", "memory_high_gb", "fit").rows() == [
        (768.0, 630.0, 945.0, "estimate_only")
    ]


def test_every_combination_appears_once(catalog):
    n = {name: catalog[name].height for name in ("models", "methods", "gpus", "servers")}
    assert catalog["estimates"].height == n["models"] * n["methods"]
    assert catalog["gpu_fit"].height == n["models"] * n["methods"] * n["gpus"]
    assert catalog["server_fit"].height == n["models"] * n["methods"] * n["servers"]
    assert catalog["server_fit"].select("model_id", "method_id", "server_id").is_unique().all()
