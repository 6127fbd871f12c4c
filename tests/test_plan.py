"""The plan an engineer would sign (issue 35), on small inline catalogs with exact values: headroom
refuses a fit at the point estimate only, a server's cards are all used, several servers only over a
declared network, and the link words as each server has them."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.estimate import first_principles as memory
from pipeline.estimate import recommend, step_time, table_rule
from pipeline.schema import ESTIMATOR_RANGE, SERVERS
from pipeline.words import labels

C = {"nccl_buffers_gb": 0.57, "nccl_buffers_large_group_gb": 0.72}


def servers(*rows: dict) -> pl.DataFrame:
    base = {f.name: None for f in SERVERS.fields}
    full = [base | {"display_name": r["server_id"], "platform": "x", "reference_id": "catalog"} | r for r in rows]
    return pl.DataFrame(full, schema=SERVERS.polars_schema)


def plan(catalog, model_id: str, method_id: str, catalog_servers: pl.DataFrame, spread=None) -> list[dict]:
    methods = catalog["methods"].filter(pl.col("method_id") == method_id)
    c, gpus = catalog.constants, catalog["gpus"]
    table = recommend.recommendations(catalog["models"], methods, catalog_servers, gpus, c, spread)
    return table.filter(pl.col("model_id") == model_id).to_dicts()


def per_card_gb(catalog, model_id: str, method_id: str, cards: int) -> float:
    arch = memory.model_architectures(catalog["models"])[model_id]
    return (
        memory.estimate(arch, memory.typical_setup(method_id, catalog.constants, cards), catalog.constants).total / 1e9
    )


def test_headroom_is_the_upper_range_plus_the_reserve():
    spreads = {recommend.ONE_GPU: (0.9, 1.1), recommend.SHARDED: (0.8, 1.25)}
    assert recommend.reserve_gb(1, C) == 0.0
    assert recommend.reserve_gb(2, C) == 0.0
    assert recommend.reserve_gb(4, C) == pytest.approx(0.15, abs=1e-12)
    assert recommend.upper_gb(60.0, 1, spreads) == pytest.approx(66.0, abs=1e-12)
    assert recommend.upper_gb(60.0, 4, spreads) == 75.0
    # 64 GB on one card: up to 70.4 <= 80 fits; 64 GB on each of 4 cards: up to 80 + 0.15 > 80 does not
    assert recommend.fits_with_headroom(64.0, 1, 80, spreads, C)
    assert not recommend.fits_with_headroom(64.0, 4, 80, spreads, C)
    assert recommend.fits_with_headroom(63.0, 4, 80, spreads, C)  # 78.75 + 0.15
    # without a measured range, the point estimate plus the reserve
    assert recommend.fits_with_headroom(79.85, 4, 80, {}, C) and not recommend.fits_with_headroom(79.9, 4, 80, {}, C)


def test_plan_spreads_take_the_range_of_the_kind_of_setup():
    def frame(rows):
        return pl.DataFrame(
            [
                {"scope": s, "sort_order": i, "rows": 9, "error_p10": None, "error_median": None, "error_p90": None}
                | {"low_factor": lo, "high_factor": hi}
                for i, (s, lo, hi) in enumerate(rows)
            ],
            schema=ESTIMATOR_RANGE.polars_schema,
        )

    both = frame([("all", 0.8, 1.2), ("card_one_gpu", 0.95, 1.05), ("card_sharded", 0.9, 1.3)])
    assert recommend.plan_spreads(both) == {"card_one_gpu": (0.95, 1.05), "card_sharded": (0.9, 1.3)}
    # too few whole-card readings of a kind: the range over all rows
    few = frame([("all", 0.8, 1.2), ("card_one_gpu", None, None), ("card_sharded", 0.9, 1.3)])
    assert recommend.plan_spreads(few) == {"card_one_gpu": (0.8, 1.2), "card_sharded": (0.9, 1.3)}
    assert recommend.plan_spreads(frame([("all", None, None)])) == {}


def test_place_says_where_a_job_goes():
    assert recommend.place(4, None, None, False, False) == ("does_not_fit", None)
    assert recommend.place(4, 3, 4, False, True) == ("one_chassis", 1)
    assert recommend.place(4, 4, 5, False, False) == ("tight", 1)  # fits 4 cards only at the point estimate
    assert recommend.place(4, 4, 4, False, False) == ("tight", 1)  # all 4 cards over the upper end
    assert recommend.place(2, 3, 5, False, False) == ("needs_network", 3)
    assert recommend.place(2, 3, 5, True, False) == ("several_chassis", 3)
    assert recommend.place(2, 3, None, True, False) == ("does_not_fit", None)
    # over a declared network several chassis with headroom beat one that holds the job only at the estimate
    assert recommend.place(1, 1, 2, True, False) == ("several_chassis", 2)
    assert recommend.place(1, 1, 2, False, False) == ("tight", 1)


def test_headroom_refuses_a_fit_at_the_point_estimate_only(catalog):
    """A 4-card server where the job fits at the estimate but its upper range does not: a risk (`tight`),
    never the recommendation; an 8-card server of the same card holds it with headroom."""
    at4 = per_card_gb(catalog, "generic-13b", "full_amp", 4)
    at8 = per_card_gb(catalog, "generic-13b", "full_amp", 8)
    assert at4 <= 80 < at4 * 1.2 + 0.15 and at8 * 1.2 + 0.15 <= 80
    box = {"gpu_id": "h100-pcie", "interconnect": "pcie"}
    rows = plan(
        catalog,
        "generic-13b",
        "full_amp",
        servers(
            box | {"server_id": "four", "gpu_count": 4, "price_rub_month": 1_000_000},
            box | {"server_id": "eight", "gpu_count": 8, "price_rub_month": 2_000_000},
        ),
        (0.9, 1.2),
    )
    got = [(r["rank"], r["server_id"], r["reason"], r["recommended"], r["gpus_per_job"], r["cost_rub"]) for r in rows]
    assert got == [(1, "eight", "one_chassis", True, 8, 2_000_000.0), (2, "four", "tight", False, 4, 1_000_000.0)]
    tight = rows[1]
    assert tight["per_gpu_memory_gb"] == pytest.approx(at4, rel=1e-12)
    assert tight["per_gpu_memory_high_gb"] == pytest.approx(at4 * 1.2, rel=1e-12)
    assert tight["memory_reserve_gb"] == pytest.approx(0.15, abs=1e-12)
    assert tight["headroom_gb"] == pytest.approx(80 - at4 * 1.2 - 0.15, rel=1e-12) and tight["headroom_gb"] < 0
    assert rows[0]["headroom_gb"] == pytest.approx(80 - at8 * 1.2 - 0.15, rel=1e-12) and rows[0]["headroom_gb"] >= 0


def test_a_four_card_server_is_used_with_four_cards(catalog):
    """A job that fits one card still takes all four cards of the rented server: memory per card, time
    and cost on four."""
    rows = plan(
        catalog,
        "generic-7b",
        "lora",
        servers(
            {"server_id": "four", "gpu_id": "h100-pcie", "gpu_count": 4, "interconnect": "pcie", "price_rub_hour": 1000}
        ),
    )
    (row,) = rows
    assert (row["reason"], row["servers_count"], row["gpus_per_job"], row["gpus_per_server"]) == (
        "one_chassis",
        1,
        4,
        4,
    )
    assert row["per_gpu_memory_gb"] == pytest.approx(per_card_gb(catalog, "generic-7b", "lora", 4), rel=1e-12)
    arch = memory.model_architectures(catalog["models"])["generic-7b"]
    setup = memory.typical_setup("lora", catalog.constants, 4)
    gpu = catalog["gpus"].filter(pl.col("gpu_id") == "h100-pcie").row(0, named=True)
    server = {"gpu_count": 4, "interconnect": "pcie", "network": None}
    t = step_time.server_time(arch, setup, gpu, 1e9, catalog.constants, server)
    assert (row["hours"], row["hours_compute"], row["hours_communication"]) == (
        t.hours,
        t.hours_compute,
        t.hours_communication,
    )
    assert row["hours"] == pytest.approx(row["hours_compute"] + row["hours_communication"], rel=1e-12)
    assert row["time_link"] == "pcie" and row["efficiency"] == t.efficiency
    assert row["cost_rub"] == pytest.approx(row["hours"] * 1000, rel=1e-12)
    assert row["link"] == "pcie"


def test_no_multi_server_plan_without_a_network(catalog):
    """70B LoRA needs two H200: on one-card servers that is two chassis; without a declared network the
    plan is not recommended and has no total price; with one it is, priced for both chassis."""
    one = {"server_id": "one", "gpu_id": "h200-nvl", "gpu_count": 1, "interconnect": "pcie", "price_rub_month": 100_000}
    (row,) = plan(catalog, "generic-70b", "lora", servers(one))
    got = (row["reason"], row["recommended"], row["servers_count"], row["gpus_per_job"], row["link"], row["cost_rub"])
    assert got == ("needs_network", False, 2, 2, None, None)
    assert row["cost_basis"] is None and row["months_billed"] is None
    (row,) = plan(catalog, "generic-70b", "lora", servers(one | {"network": "infiniband-ndr"}))
    got = (row["reason"], row["recommended"], row["servers_count"], row["link"], row["cost_rub"], row["cost_basis"])
    assert got == ("several_chassis", True, 2, "infiniband-ndr", 200_000.0, "month")


def test_no_total_price_for_several_servers_without_a_network():
    table = pl.DataFrame(
        {"server_id": ["a", "a", "b"], "servers": [1, 3, 3], "cost_rub": [10.0, 30.0, 30.0]},
    )
    catalog_servers = servers(
        {"server_id": "a", "gpu_id": "h100-pcie", "gpu_count": 8, "interconnect": "pcie"},
        {"server_id": "b", "gpu_id": "h100-sxm", "gpu_count": 8, "interconnect": "nvswitch", "network": "ib"},
    )
    assert recommend.without_network_price(table, catalog_servers)["cost_rub"].to_list() == [10.0, None, 30.0]


def test_the_link_is_the_servers_and_its_words_never_require_nvlink(catalog):
    """Each server's link as it has it: NVSwitch, an NVLink bridge, PCIe, Infinity Fabric; one card needs
    none. The words a plan shows for them never say «обязательно»."""
    rows = plan(
        catalog,
        "generic-70b",
        "lora",
        servers(
            {"server_id": "hgx", "gpu_id": "h200-sxm", "gpu_count": 8, "interconnect": "nvswitch"},
            {"server_id": "bridge", "gpu_id": "h200-nvl", "gpu_count": 4, "interconnect": "nvlink-bridge"},
            {"server_id": "pcie-h100", "gpu_id": "h100-pcie", "gpu_count": 8, "interconnect": "pcie"},
            {"server_id": "pcie-rtx", "gpu_id": "rtx-pro-6000", "gpu_count": 8, "interconnect": "pcie"},
            {"server_id": "amd", "gpu_id": "mi300x", "gpu_count": 8, "interconnect": "infinity-fabric"},
            {"server_id": "b300", "gpu_id": "b300", "gpu_count": 1, "interconnect": "pcie"},
        ),
    )
    got = {r["server_id"]: (r["link"], r["gpu_has_nvlink"]) for r in rows}
    assert got == {
        "hgx": ("nvswitch", True),
        "bridge": ("nvlink-bridge", True),
        "pcie-h100": ("pcie", True),  # the card takes a bridge; this server has none
        "pcie-rtx": ("pcie", False),
        "amd": ("infinity-fabric", False),
        "b300": ("one_card", True),
    }
    words = labels()["entities"]["reco"]
    shown = {
        "nvswitch": words["link_nvswitch"],
        "nvlink-bridge": words["link_nvlink-bridge"],
        "pcie": words["link_pcie"],
        "pcie_only": words["link_pcie_only"],
        "infinity-fabric": words["link_infinity-fabric"],
        "one_card": words["link_one_card"],
    }
    assert all("обязательно" not in w for w in shown.values())
    assert (
        shown["pcie"].startswith("PCIe")
        and "NVSwitch" in shown["nvswitch"]
        and "Infinity Fabric" in shown["infinity-fabric"]
    )


def test_a_card_with_infinity_fabric_is_not_said_to_need_nvlink():
    estimates = pl.DataFrame(
        {"model_id": ["m"], "method_id": ["full_amp"], "memory_gb": [300.0], "memory_high_gb": [450.0]}
    )
    gpus = pl.DataFrame(
        {
            "gpu_id": ["mi300x", "h100-sxm", "l40s"],
            "memory_gb": [192.0, 80.0, 48.0],
            "interconnect": ["infinity-fabric", "nvlink", "pcie"],
        }
    )
    fit = table_rule.gpu_fit(estimates, gpus).sort("gpu_id")
    assert fit.select("gpu_id", "cards", "nvlink_need").rows() == [
        ("h100-sxm", 4, "required"),
        ("l40s", 7, "pcie_only"),
        ("mi300x", 2, "other_link"),
    ]


def test_a_memory_note_quotes_the_memory_of_its_row():
    from pipeline.render.views.articles import memory_note

    note = "NVIDIA указывает 270 ГБ, производители — 288 ГБ; справочник считает по {memory_gb} ГБ."
    assert memory_note({"memory_gb": 288.0, "memory_note_ru": note}).endswith("справочник считает по 288 ГБ.")
    assert memory_note({"memory_gb": 270.0, "memory_note_ru": note}).endswith("справочник считает по 270 ГБ.")
    assert memory_note({"memory_gb": 80.0, "memory_note_ru": None}) is None


def test_a_tie_on_cost_is_decided_by_time_and_said(catalog):
    """Two servers at the same monthly price for a job shorter than a month: the faster one ranks first, and
    both rows say they tie on cost."""
    box = {"gpu_count": 2, "interconnect": "pcie", "price_rub_month": 585_000}
    rows = plan(
        catalog,
        "generic-7b",
        "lora",
        servers(
            box | {"server_id": "a-pcie", "gpu_id": "h100-pcie"},
            box | {"server_id": "b-sxm", "gpu_id": "h100-sxm", "interconnect": "nvswitch"},
        ),
    )
    got = [(r["rank"], r["server_id"], r["cost_rub"], r["tied_on_cost"]) for r in rows]
    assert got == [(1, "b-sxm", 585_000.0, True), (2, "a-pcie", 585_000.0, True)]
    assert rows[0]["hours"] < rows[1]["hours"]
    assert labels()["entities"]["reco"]["tied"] == "при той же цене быстрее других"


def test_diff_warns_of_a_new_price_without_a_new_check_date_and_names_plan_changes():
    from pipeline.tools.diff import plan_changes, stale_prices

    old = {("s",): {"price_rub_month": "100", "price_checked_on": "2026-10-12"}}
    same_date = {("s",): {"price_rub_month": "200", "price_checked_on": "2026-10-12"}}
    new_date = {("s",): {"price_rub_month": "200", "price_checked_on": "2026-12-01"}}
    assert stale_prices(same_date, old) == [{"key": ["s"], "date": "2026-10-12"}]
    assert stale_prices(new_date, old) == [] and stale_prices(old, old) == []

    def reco(server, recommended="true"):
        return {
            ("m", "lora", server): {
                "model_id": "m",
                "method_id": "lora",
                "rank": "1",
                "server_id": server,
                "recommended": recommended,
            }
        }

    assert plan_changes(reco("b"), reco("a")) == [{"key": ["m", "lora"], "old": "a", "new": "b"}]
    assert plan_changes(reco("a", "false"), reco("a")) == [{"key": ["m", "lora"], "old": "a", "new": ""}]
    assert plan_changes(reco("a"), reco("a")) == []
