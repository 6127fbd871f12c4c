"""The loss path as an input (issue 36): each family against the published run that exposes it, i.e. a run whose
logits and loss buffers are a large part of the peak, so that the wrong family would miss it by far."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest

from pipeline.estimate import calibration
from pipeline.estimate import first_principles as memory

GIB = 2**30


def _row(catalog, measurement_id: str) -> tuple[dict, dict]:
    cal = catalog["calibration"].filter(pl.col("measurement_id") == measurement_id).row(0, named=True)
    m = catalog["measurements"].filter(pl.col("measurement_id") == measurement_id).row(0, named=True)
    return cal, m


def _error_with(catalog, m: dict, measured_gb: float, loss: str) -> float:
    arch = memory.model_architectures(catalog["models"])[m["model_id"]]
    b = memory.estimate(arch, replace(calibration.setup_from_row(m), loss=loss), catalog.constants)
    return getattr(b, calibration.METRIC_PART[m["metric"]]) / 1e9 / measured_gb - 1


@pytest.mark.parametrize(
    ("measurement_id", "loss", "bound"),
    [
        # torchtune's ladder, packed 2 x 4096 tokens of Llama 3.2 3B, whole logits: −8 % out of sample.
        ("torchtune-3b-ladder-26", "hf", 0.10),
        # Unsloth's benchmark, Hugging Face + FA2 on transformers 4.46-4.48: 28 454 tokens of Llama 3.1 8B fit in
        # 80 GB; the logits are two thirds of the estimate: +12.5 %.
        ("unsloth-bench-hf-llama-3-1-8b-80gb", "hf_legacy", 0.15),
    ],
)
def test_a_run_dominated_by_its_loss_path_is_met_only_with_that_path(catalog, measurement_id, loss, bound):
    cal, m = _row(catalog, measurement_id)
    assert cal["loss"] == loss and cal["in_summary"]
    assert abs(cal["first_principles_loso_error"]) < bound
    # The paths that keep no whole fp32 logits would miss the run by far: it exposes the path.
    for other in ("chunked", "fused", "unsloth"):
        assert _error_with(catalog, m, cal["measured_gb"], other) < -0.15


def test_chunked_loss_saving_matches_torchtunes_ladder(catalog):
    # Rows 27 and 28 differ only in the chunked cross-entropy (both compiled, so neither is in the summary): the step
    # saved 51.0 − 42.9 = 8.1 GiB (8.7 GB). The estimator's eager rule saves 12 − 5 = 7 bytes per token × vocabulary
    # (every chunk's fp32 log-probabilities stay for the backward pass: 4, plus one chunk in eight of the other fp32
    # buffers): 7.35 GB, 85 % of it; torch.compile, which torchtune applies to each chunk's upcast and loss, keeps
    # less than eager code, and the estimator does not model compiled code.
    before, m27 = _row(catalog, "torchtune-3b-ladder-27")
    after, m28 = _row(catalog, "torchtune-3b-ladder-28")
    assert (m27["loss"], m28["loss"]) == ("hf", "chunked")
    measured = (m27["measured_value"] - m28["measured_value"]) * GIB
    arch = memory.model_architectures(catalog["models"])["llama-3-2-3b"]
    setup = replace(calibration.setup_from_row(m28), torch_compile=False)
    saved = (
        memory.estimate(arch, replace(setup, loss="hf"), catalog.constants).allocated
        - memory.estimate(arch, setup, catalog.constants).allocated
    )
    assert saved == pytest.approx(7 * 2 * 4096 * 128256, rel=1e-12)
    assert saved / measured == pytest.approx(0.85, abs=0.01)


def test_the_calibration_rows_carry_their_loss_path(catalog):
    cal = catalog["calibration"]
    measured = dict(catalog["measurements"].select("measurement_id", "loss").iter_rows())
    assert cal["loss"].to_list() == [measured[i] or "hf" for i in cal["measurement_id"]]
    groups = catalog["calibration_out_of_sample"].filter(pl.col("dimension") == "loss")["group_id"].to_list()
    assert groups == ["hf", "hf_legacy", "chunked", "fused"]  # no summary row runs Unsloth's kernel yet


def test_fused_loss_against_ms_swifts_liger_pair(catalog):
    # ms-swift's liger example: Qwen2.5-7B, full, ZeRO-3 on 4 cards, 8192 packed tokens, the same command with and
    # without use_liger_kernel: 42 and 54 GB a card. Liger's fused output layer and loss keep no tokens x vocabulary
    # tensor: the run with it is met with `fused` only, the run without it with `hf`.
    with_liger, m = _row(catalog, "swift-liger-qwen2-5-7b-full-8k-liger")
    without, m_hf = _row(catalog, "swift-liger-qwen2-5-7b-full-8k-hf")
    assert (with_liger["loss"], without["loss"]) == ("fused", "hf")
    assert abs(with_liger["first_principles_loso_error"]) < 0.05
    assert abs(without["first_principles_loso_error"]) < 0.10
    # The whole fp32 logits of hf would miss it by far (chunked keeps 5 bytes per token x vocabulary: +9 %).
    for other in ("hf", "hf_legacy"):
        assert _error_with(catalog, m, with_liger["measured_gb"], other) > 0.25
    assert _error_with(catalog, m_hf, without["measured_gb"], "fused") < -0.2
