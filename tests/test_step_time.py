"""Training time = compute + exposed communication (pipeline/estimate/step_time.py), on small inline cases."""

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from pipeline import lookups
from pipeline.estimate import step_time, time_accuracy
from pipeline.estimate.architecture import Architecture, lora_trainable_params, parameter_counts
from pipeline.estimate.first_principles import Setup

# Round constants, so that every expected figure below is arithmetic a reader can redo.
C = {
    "achieved_efficiency": 0.5,
    "achieved_efficiency_peak_tflops": 1000,
    "achieved_efficiency_low": 0.5,
    "achieved_efficiency_low_peak_tflops": 100,
    "lora_efficiency_factor": 0.8,
    "qlora_efficiency_factor": 0.5,
    "fp8_speedup": 1.25,
    "compile_speedup": 1.1,
    "nvlink_busbw_share": 0.8,
    "nvlink_bridge_busbw_share": 0.4,
    "nvlink_bridge_max_gpus": 4,
    "pcie_busbw_gbs": 40,
    "network_busbw_share": 0.75,
    "comm_overlap": 1,
    "forward_flops_per_param_token": 2,
    "train_flops_per_param_token": 6,
}
# An SXM-like card: 1 000 TFLOPS BF16, NVLink 1 000 GB/s both ways (500 one way).
GPU = {"bf16_dense_tflops": 1000, "link_gbs": 1000}
# A 1.0 B-parameter dense model (no attention term: one-token sequences keep the compute to 6·P).
DENSE = Architecture(
    layers=4, hidden=4096, intermediate=16384, heads=32, kv_heads=32, head_dim=128, vocab=32000,
    tied_embeddings=False, gated_mlp=False,
)  # fmt: skip
P = parameter_counts(DENSE).total
ATTENTION_1 = 2 * 1 * 4096 * 4 * 3  # attention FLOPs per token at a one-token context: 2·s·d per layer, × 3
FULL_8 = Setup(method="full_amp", seq_len=1, micro_batch=1024, grad_accum=1, gpus=8, sharding="zero3")


def test_the_dense_model_has_the_parameters_the_cases_assume() -> None:
    assert P == 1_067_487_232


def test_busbw_of_each_link() -> None:
    assert step_time.busbw_gbs(GPU, "nvswitch", 8, 1, None, C) == 400  # 500 one way × 0.8
    assert step_time.busbw_gbs(GPU, "nvlink-bridge", 4, 1, None, C) == 200
    assert step_time.busbw_gbs(GPU, "nvlink-bridge", 8, 1, None, C) == 40  # beyond one bridge: over PCIe
    assert step_time.busbw_gbs(GPU, "pcie", 8, 1, None, C) == 40
    assert step_time.busbw_gbs({"bf16_dense_tflops": 100}, "nvswitch", 8, 1, None, C) == 40  # no NVLink: PCIe
    assert step_time.busbw_gbs(GPU, "nvswitch", 1, 1, None, C) is None
    # 2 servers of 8: a GPU's share of 400 Gbit/s is 6.25 GB/s, worth 15 ring hops per network crossing.
    assert step_time.busbw_gbs(GPU, "nvswitch", 16, 2, 400, C) == pytest.approx(6.25 * 15 * 0.75)
    assert step_time.busbw_gbs(GPU, "nvswitch", 16, 2, 6400, C) == 400  # the network outruns NVLink


def test_two_servers_need_a_declared_network() -> None:
    with pytest.raises(ValueError, match="2 servers need a declared network"):
        step_time.training_time(DENSE, replace(FULL_8, gpus=16), GPU, 1e9, C, link="nvswitch", nodes=2)


def test_same_job_on_nvswitch_pcie_and_two_servers() -> None:
    # Per step: 8 × 1 024 tokens × 6·P FLOPs over 8 cards at 500 TFLOP/s each.
    compute = 1024 * (6 * P + ATTENTION_1) / 500e12
    # ZeRO-3, full training: weights gathered twice in bf16 (4·P bytes), gradients scattered (2·P), × 7/8.
    moved = 6 * P * 7 / 8
    on = {}
    for name, link, cards, nodes, network in (
        ("nvswitch", "nvswitch", 8, 1, None),
        ("pcie", "pcie", 8, 1, None),
        ("servers", "nvswitch", 16, 2, 400),
    ):
        setup = replace(FULL_8, gpus=cards)
        on[name] = step_time.training_time(DENSE, setup, GPU, 1024 * cards * 1000, C, link, nodes, network)
    assert on["nvswitch"].step_seconds_compute == pytest.approx(compute)  # 0.013134 s
    assert on["nvswitch"].step_seconds_communication == pytest.approx(moved / 400e9)  # 0.014029 s
    assert on["nvswitch"].step_seconds_exposed == pytest.approx(moved / 400e9 - compute)
    assert on["pcie"].step_seconds_communication == pytest.approx(moved / 40e9)  # ten times slower
    assert on["pcie"].hours_communication == pytest.approx(1000 * (moved / 40e9 - compute) / 3600)
    assert on["pcie"].hours_compute == on["nvswitch"].hours_compute == pytest.approx(1000 * compute / 3600)
    assert on["pcie"].dominant == "communication"
    moved_16 = 6 * P * 15 / 16
    assert on["servers"].step_seconds_communication == pytest.approx(moved_16 / (70.3125e9))
    assert on["servers"].link == "between_servers"
    assert on["nvswitch"].tokens_per_second == pytest.approx(8 * 1024 / (moved / 400e9))


def test_one_card_moves_nothing() -> None:
    t = step_time.training_time(DENSE, replace(FULL_8, gpus=1, sharding="ddp"), GPU, 1024 * 100, C)
    assert (t.step_seconds_communication, t.hours_communication, t.busbw_gbs) == (0, 0, None)
    assert t.hours == pytest.approx(100 * 1024 * (6 * P + ATTENTION_1) / 500e12 / 3600)


def test_fp8_speeds_up_only_a_card_with_an_fp8_figure() -> None:
    fp8 = replace(FULL_8, gpus=1, sharding="ddp", fp8=True)
    bf16_hours = 100 * 1024 * (6 * P + ATTENTION_1) / 500e12 / 3600  # 50 % of 1 000 TFLOPS
    with_fp8 = step_time.training_time(DENSE, fp8, GPU | {"fp8_dense_tflops": 2000}, 1024 * 100, C)
    assert with_fp8.hours == pytest.approx(bf16_hours / 1.25)  # fp8_speedup
    for without in (GPU, GPU | {"fp8_dense_tflops": None}):  # no FP8 on the card: its BF16 time
        assert step_time.training_time(DENSE, fp8, without, 1024 * 100, C).hours == pytest.approx(bf16_hours)


def test_lora_under_zero3_still_gathers_the_frozen_weights() -> None:
    lora = replace(FULL_8, method="lora", lora_rank=16, lora_targets="all")
    adapters = lora_trainable_params(DENSE, 16, "all")
    assert step_time.step_bytes(DENSE, lora) == 4 * P + 2 * adapters
    assert step_time.step_bytes(DENSE, FULL_8) == 6 * P
    qlora = replace(lora, method="qlora_4bit")
    assert step_time.step_bytes(DENSE, qlora) == 2 * 0.5 * P + 2 * adapters  # 4-bit weights gathered
    # DDP moves only what is trained: the adapters' gradients, all-reduced once per step.
    assert step_time.step_bytes(DENSE, replace(lora, sharding="ddp")) == 2 * 2 * adapters
    t = step_time.training_time(DENSE, lora, GPU, 1e9, C, "pcie")
    assert t.step_seconds_communication == pytest.approx((4 * P + 2 * adapters) * 7 / 8 / 40e9)
    # LoRA: 4·P per token (no weight gradients) at 0.5 × 0.8 of the peak.
    assert t.flops_per_token == 4 * P + ATTENTION_1 and t.efficiency == 0.4


def test_zero2_scatters_every_micro_batch_and_gathers_once() -> None:
    setup = replace(FULL_8, sharding="zero2", grad_accum=4)
    assert step_time.step_bytes(DENSE, setup) == 4 * 2 * P + 2 * P
    assert step_time.step_bytes(DENSE, replace(setup, sharding="zero3")) == 4 * 6 * P


def test_moe_computes_on_active_and_moves_all_parameters() -> None:
    moe = replace(DENSE, experts=8, experts_per_token=2, moe_intermediate=16384)
    counts = parameter_counts(moe)
    assert (counts.total, counts.active) == (4_825_714_688, 1_604_489_216)  # 4 MoE layers of 8 experts, 2 active
    t = step_time.training_time(moe, FULL_8, GPU, 1e9, C, "nvswitch")
    assert t.flops_per_token == 6 * counts.active + ATTENTION_1
    assert t.step_seconds_communication == pytest.approx(6 * counts.total * 7 / 8 / 400e9)


def test_checkpointing_recomputes_the_forward_pass_and_attention_grows_with_context() -> None:
    plain = replace(FULL_8, seq_len=1, micro_batch=1)
    assert step_time.flops_per_token(DENSE, plain, C) == 6 * P + ATTENTION_1
    recompute = replace(plain, grad_checkpointing=True)
    assert step_time.flops_per_token(DENSE, recompute, C) == 8 * P + 2 * 1 * 4096 * 4 * 4
    # Causal attention: 2 · seq · heads·head_dim per layer forward, the backward twice that.
    long = replace(plain, seq_len=32768)
    assert step_time.attention_flops_per_token(DENSE, long) == 2 * 32768 * 4096 * 4 * 3


def test_fp8_and_qlora_change_the_efficiency() -> None:
    assert step_time.efficiency(replace(FULL_8, fp8=True), C, 1000) == 0.625
    assert step_time.efficiency(replace(FULL_8, method="qlora_4bit"), C, 1000) == 0.2
    c = C | {"achieved_efficiency_low": 0.6, "achieved_efficiency": 0.4}
    assert step_time.peak_efficiency(100, c) == 0.6 and step_time.peak_efficiency(2000, c) == 0.4
    assert step_time.peak_efficiency(316.22776601683796, c) == pytest.approx(0.5)  # halfway in log(peak)


def test_time_calibration_on_an_inline_run() -> None:
    run = {
        "run_id": "a", "model_id": "m", "method_id": "full_amp", "precision": "bf16", "gpu_id": "g", "gpus": 8,
        "nodes": 1, "link": "nvswitch", "network_gbps": None, "sharding": "zero3", "micro_batch": 1024,
        "grad_accum": 1, "seq_len": 1, "checkpointing": "none",
    }  # fmt: skip
    t = time_accuracy.predicted(run, DENSE, GPU, C)
    assert t.tokens_per_second == pytest.approx(8 * 1024 / (6 * P * 7 / 8 / 400e9))


def test_time_summary_counts_the_rows_in_the_accuracy_figures() -> None:
    calibration = pl.DataFrame(
        {
            "run_id": ["a", "b", "c", "d"],
            "source": ["s1", "s1", "s2", "s2"],
            "gpu_id": ["g", "g", "g", "h"],
            "method_family": ["full", "lora", "full", "full"],
            "link": ["nvswitch"] * 4,
            "in_accuracy": [True, True, True, False],
            "measured_tokens_per_second_per_gpu": [1.0] * 4,
            "predicted_tokens_per_second_per_gpu": [1.0] * 4,
            "communication_share": [0.0] * 4,
            "error": [0.1, -0.3, 0.2, 5.0],
            "error_fitted": [0.0, -0.4, 0.1, 4.0],
            "error_fitted_out_of_sample": [0.3, 0.0, -0.2, 4.0],
        }
    )
    summary = time_accuracy.time_summary(calibration, 0.25)
    overall = summary.filter(pl.col("scope") == "all").sort("sort_order")
    assert overall.select("reading", "rows", "median_abs_error", "within_25", "median_error").rows() == [
        ("declared", 3, 0.2, 2 / 3, 0.1),
        ("fitted", 3, 0.1, 2 / 3, 0.0),
        ("out_of_sample", 3, 0.2, 2 / 3, 0.0),
    ]
    by_method = summary.filter((pl.col("reading") == "declared") & (pl.col("scope") == "method_family"))
    assert by_method.select("value", "rows").rows() == [("full", 2), ("lora", 1)]


def test_the_gpu_bench_imports_without_torch_and_writes_a_throughput_row() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    try:
        import throughput_cuda
    finally:
        sys.path.pop(0)
    from pipeline.schema import THROUGHPUT

    args = throughput_cuda.parse(["--config", "c.json", "--model-id", "llama-3-1-8b", "--gpu-id", "h200-sxm"])
    row = throughput_cuda.throughput_row(args, 12345.67, 1, "NVIDIA H200")
    assert tuple(row) == throughput_cuda.COLUMNS == tuple(THROUGHPUT.columns)
    assert (row["run_id"], row["link"], row["sharding"], row["tokens_per_second"]) == (
        "own-llama-3-1-8b-full-bf16-1xh200-sxm-s2048", "one_card", "ddp", 12345.7,
    )  # fmt: skip
    assert "torch" not in vars(throughput_cuda)  # torch is imported only to measure


def test_hours_range_leaves_at_most_a_tenth_of_the_rows_on_each_side() -> None:
    assert time_accuracy.hours_range([0, 0, 0, 0, 1]) == (0.5, 1.0)  # ratios 0.5, 1, 1, 1, 1: none outside
    errors = [1 / r - 1 for r in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5)]  # 11 rows
    assert time_accuracy.hours_range(errors) == pytest.approx((0.6, 1.4))  # one row below, one above
    assert time_accuracy.hours_range([0, 0, 0, 1]) == (None, None)  # too few rows


def test_published_runs_lie_within_the_range_the_accuracy_page_states(catalog) -> None:
    """The site's time (the model ÷ the speed factor, lookups.TimeBand) against every run of the accuracy
    figures, each scored with the factor fitted without its own source: at least 80 % of the measured
    times lie in the range the pages print."""
    from pipeline import lookups

    band = lookups.time_band(catalog["time_summary"], catalog["time_calibration"])
    rows = catalog["time_calibration"].filter(pl.col("in_accuracy"))
    ratios = [1 / (1 + e) for e in rows["error_fitted_out_of_sample"].to_list()]  # measured / shown hours
    inside = [band.low <= r <= band.high for r in ratios]
    assert rows.height >= 5 and band.speed == time_accuracy.speed_factor(catalog["time_calibration"])
    assert sum(inside) >= 0.8 * len(inside)
    measured = rows["measured_tokens_per_second_per_gpu"] / rows["predicted_tokens_per_second_per_gpu"]
    assert band.speed == pytest.approx(measured.median(), rel=1e-12)


def _estimate(catalog, *words: str) -> dict:
    """`python -m pipeline estimate …`'s --json result, in this process on the shared catalog."""
    from pipeline.__main__ import parser
    from pipeline.tools import estimate_cli

    args = parser(["estimate", *words], "python -m pipeline").parse_args(["estimate", *words])
    return estimate_cli.result(catalog, args)


def test_cli_time_key_on_a_config_model_over_pcie(catalog) -> None:
    from pipeline.estimate.first_principles import model_architectures, typical_setup

    out = _estimate(
        catalog, "--model", "qwen3-30b-a3b", "--method", "full_amp", "--gpu", "h200-nvl", "--gpus", "5",
        "--link", "pcie", "--tokens", "1e9",
    )  # fmt: skip
    t = out["time"]
    arch = model_architectures(catalog["models"])["qwen3-30b-a3b"]
    setup = typical_setup("full_amp", catalog.constants, 5)
    gpu = catalog["gpus"].filter(pl.col("gpu_id") == "h200-nvl").row(0, named=True)
    expected = step_time.training_time(arch, setup, gpu, 1e9, catalog.constants, "pcie")
    assert (t["cards"], t["nodes"], t["link"], t["sharding"], t["busbw_gbs"]) == (5, 1, "pcie", "zero3", 37.6)
    band = lookups.time_band(catalog["time_summary"], catalog["time_calibration"])  # the site's speed factor
    assert t["speed_factor"] == band.speed > 1
    assert t["hours"] == band.hours(expected.hours) and t["hours_compute"] == band.hours(expected.hours_compute)
    assert t["hours_communication"] == band.hours(expected.hours_communication) > 10 * t["hours_compute"]
    assert t["hours_low"] == t["hours"] * band.low and t["hours_high"] == t["hours"] * band.high
    assert t["measured"] is False  # no published run on H200 NVL over PCIe: the time is a draft
    assert t["dominant"] == "communication" and set(step_time.TIME_CONSTANTS) == set(t["constants"])


def test_cli_time_of_a_moe_given_by_its_counts_on_two_servers(catalog) -> None:
    words = ("--params-b", "30", "--active-params-b", "3", "--method", "lora", "--gpu", "h100-sxm", "--gpus", "16")
    t = _estimate(catalog, *words, "--nodes", "2", "--network", "3200", "--tokens", "1e9")["time"]
    dense = _estimate(catalog, *words[:2], *words[4:], "--nodes", "2", "--network", "3200", "--tokens", "1e9")["time"]
    assert (t["nodes"], t["link"]) == (2, "between_servers")
    assert t["flops_per_token"] < dense["flops_per_token"] / 5  # compute on 3 B active, not 30 B
    assert t["step_seconds_communication"] == dense["step_seconds_communication"]  # traffic on all 30 B


def test_cli_two_servers_without_a_network_are_refused(catalog) -> None:
    from pipeline.tools import estimate_cli

    words = ("--params-b", "8", "--gpu", "h100-sxm", "--gpus", "16", "--nodes", "2", "--tokens", "1e9")
    with pytest.raises(estimate_cli.UsageError, match="2 servers need a declared network.*give --network"):
        _estimate(catalog, *words)
    with pytest.raises(estimate_cli.UsageError, match="--nodes is for the time estimate"):
        _estimate(catalog, "--params-b", "8", "--gpus", "16", "--nodes", "2")


def test_throughput_layout_rules_name_row_column_and_rule(tmp_path) -> None:
    import shutil

    from pipeline.load import connect, read_source
    from pipeline.schema import THROUGHPUT
    from pipeline.validate import Validation, throughput_rules

    shutil.copy(Path(__file__).resolve().parent.parent / "sources" / "throughput.csv", tmp_path)
    path = tmp_path / "throughput.csv"
    text = path.read_text(encoding="utf-8")
    text = text.replace("torchtitan-8b-fsdp-128xh100,llama-3-1-8b,full_bf16,bf16,h100-sxm,128,16,nvswitch,3200,",
                        "torchtitan-8b-fsdp-128xh100,llama-3-1-8b,full_bf16,bf16,h100-sxm,128,12,nvswitch,,")  # fmt: skip
    text = text.replace("torchtune-8b-lora-4090,llama-3-1-8b,lora,bf16,rtx-4090,1,1,one_card,",
                        "torchtune-8b-lora-4090,llama-3-1-8b,lora,bf16,rtx-4090,1,1,pcie,")  # fmt: skip
    path.write_text(text, encoding="utf-8")
    frame, problems, _ = read_source(tmp_path, THROUGHPUT)
    assert problems == []
    out = Validation()
    throughput_rules(connect({"throughput": frame}), tmp_path, {"throughput"}, out)
    found = sorted((p.line, p.column, p.value) for p in out.problems)
    lines = {line.split(",", 1)[0]: n for n, line in enumerate(text.splitlines(), 1)}
    assert found == sorted(
        [
            (lines["torchtitan-8b-fsdp-128xh100"], "nodes", "12"),
            (lines["torchtitan-8b-fsdp-128xh100"], "network_gbps", None),
            (lines["torchtune-8b-lora-4090"], "link", "pcie"),
        ],
        key=lambda r: (r[0], r[1]),
    )


def test_the_bench_reports_the_issue_targets_on_the_out_of_sample_reading() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    try:
        import time_accuracy as bench
    finally:
        sys.path.pop(0)
    line = {"scope": "all", "value": "all", "rows": 19}
    figs = {
        "summary": [
            {**line, "reading": "declared", "median_abs_error": 0.05, "within_25": 1.0},
            {**line, "reading": "out_of_sample", "median_abs_error": 0.21, "within_25": 0.7},
        ]
    }
    assert [(t["figure"], t["verdict"]) for t in bench.targets(figs)] == [
        ("21.0% on 19 rows", "MISSED"),
        ("70% of 19 rows", "met"),
    ]


def test_a_time_is_measured_only_where_runs_in_the_figures_cover_the_card_and_the_link() -> None:
    """lookups.TimeBand.measured: a card over PCIe leaves the draft once a run in the accuracy figures used
    that card and some run used PCIe; a run left out of the figures (CPU offload, unknown padding) covers
    nothing, and an NVLink bridge without a run stays a draft."""
    summary = pl.DataFrame(
        {
            "reading": ["out_of_sample"],
            "scope": ["all"],
            "hours_low_factor": [0.75],
            "hours_high_factor": [1.25],
            "speed_factor": [1.2],
        }
    )
    calibration = pl.DataFrame(
        {
            "gpu_id": ["rtx-4090", "a100-80gb", "l40s"],
            "link": ["pcie", "nvswitch", "pcie"],
            "in_accuracy": [True, True, False],
        }
    )
    band = lookups.time_band(summary, calibration)
    assert (band.low, band.high, band.speed) == (0.75, 1.25, 1.2)
    assert [band.measured(g, link) for g, link in [("rtx-4090", "pcie"), ("a100-80gb", "pcie"), ("l40s", "pcie"),
            ("rtx-4090", "nvlink-bridge"), ("a100-80gb", "nvswitch")]] == [True, True, False, False, True]  # fmt: skip


def test_cli_time_on_catalog_servers_follows_the_plan_rules(catalog) -> None:
    """--server: across servers with no declared network there is no time (as in the plan); with one
    declared in the catalog, its rate (one port per card) times the job without --network."""
    from pipeline.estimate.first_principles import model_architectures, typical_setup
    from pipeline.tools import estimate_cli

    words = ("--model", "llama-2-70b", "--method", "full_amp", "--server", "esc8000a-8x-h200", "--tokens", "1e9")
    out = _estimate(catalog, *words)
    assert out["time"] == {
        "gpu_id": "h200-nvl",
        "server_id": "esc8000a-8x-h200",
        "cards": 16,
        "nodes": 2,
        "hours": None,
    }
    assert "Time: none: 2 servers esc8000a-8x-h200 needed (16 GPUs)" in estimate_cli.render(out)

    joined = pl.col("server_id") == "esc8000a-8x-h200"
    servers = catalog["servers"].with_columns(
        network=pl.when(joined).then(pl.lit("infiniband-ndr")).otherwise("network")
    )
    networked = replace(catalog, tables=catalog.tables | {"servers": servers})
    t = _estimate(networked, *words)["time"]
    server = servers.filter(joined).row(0, named=True)
    assert step_time.server_network_gbps(server, catalog.constants) == 400 * 8
    arch = model_architectures(catalog["models"])["llama-2-70b"]
    gpu = catalog["gpus"].filter(pl.col("gpu_id") == "h200-nvl").row(0, named=True)
    setup = typical_setup("full_amp", catalog.constants, 16)
    expected = step_time.server_time(arch, setup, gpu, 1e9, catalog.constants, server, 2)
    band = lookups.time_band(catalog["time_summary"], catalog["time_calibration"])
    assert (t["nodes"], t["link"], t["hours"]) == (2, "between_servers", band.hours(expected.hours))
