"""Optimizer states by what each optimizer stores (issue 36), against the published runs that use them.

torchao's README (torchao/optim, reference `torchao-optim`) fine-tunes Llama2-7B in pure bf16 with torchtune on
one A100 and reports the peak allocated memory of four AdamW implementations: fused PyTorch 51.6, bitsandbytes
8-bit 39.3, torchao 8-bit 39.1 and torchao 4-bit 33.2 (GiB). The runs peak at the optimizer step (weights,
gradients, states), so their differences are the differences of the states alone: two bf16 states (4 bytes per
parameter) against bitsandbytes' two uint8 states and an fp32 scale per 256 (2.03125) and torchao's 4-bit codes
with an fp32 scale per 128 (1.0625). Before issue 36 every optimizer's states were halved in full_bf16, which gave
8-bit AdamW 1 byte per parameter: 33.7 GB against the 42.2 GB measured.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import LLAMA2_7B
from pipeline.estimate import first_principles as memory

ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30

P = 6_738_415_616  # LLAMA2_7B's parameters (conftest)
# models.csv's mistral-7b (v0.3: vocabulary 32768).
MISTRAL_7B = replace(LLAMA2_7B, intermediate=14336, kv_heads=8, vocab=32768)


def _constants() -> dict[str, float]:
    with (ROOT / "sources" / "constants.csv").open(encoding="utf-8") as f:
        return {r["constant_id"]: float(r["value"]) for r in csv.DictReader(f)}


def _measured(measurement_id: str) -> float:
    """A measurements.csv row's value in GiB."""
    with (ROOT / "sources" / "measurements.csv").open(encoding="utf-8") as f:
        row = next(r for r in csv.DictReader(f) if r["measurement_id"] == measurement_id)
    assert row["measured_unit"] == "GiB" and row["metric"] == "allocated"
    return float(row["measured_value"])


def _torchao_run(optimizer: str) -> memory.Breakdown:
    setup = memory.Setup(
        method="full_bf16", optimizer=optimizer, seq_len=2048, micro_batch=2, grad_checkpointing=True, loss="chunked"
    )
    return memory.estimate(LLAMA2_7B, setup, _constants())


def test_parameter_count_of_llama2_7b():
    from pipeline.estimate.architecture import parameter_counts

    assert parameter_counts(LLAMA2_7B).total == P


@pytest.mark.parametrize(
    ("optimizer", "state_bytes"),
    [("adamw_fused", 4), ("adamw_8bit", 2 * (1 + 4 / 256)), ("adamw_4bit", 2 * (0.5 + 4 / 128))],
)
def test_full_bf16_states_are_what_the_optimizer_stores(optimizer, state_bytes):
    b = _torchao_run(optimizer)
    assert b.optimizer == pytest.approx(state_bytes * P, rel=1e-12)
    # Weights, gradients and states, at the step or at the end of the backward pass (the same bytes): the peak
    # whatever the (unknown) lengths of the examples, as long as the saved activations stay below the gradients.
    assert b.backward_peak <= b.step_peak
    assert b.allocated == pytest.approx((2 + 2 + state_bytes) * P, rel=1e-12)


@pytest.mark.parametrize(
    ("measurement_id", "optimizer"),
    [
        ("torchao-llama2-7b-full-bf16-bnb-8bit", "adamw_8bit"),
        ("torchao-llama2-7b-full-bf16-ao-8bit", "adamw_8bit"),
        ("torchao-llama2-7b-full-bf16-ao-4bit", "adamw_4bit"),
    ],
)
def test_saving_against_fused_adamw_matches_torchao_table(measurement_id, optimizer):
    fused_measured = _measured("torchao-llama2-7b-full-bf16-adamw-fused")
    saved_measured = (fused_measured - _measured(measurement_id)) * GIB
    saved = _torchao_run("adamw_fused").allocated - _torchao_run(optimizer).allocated
    # 12.3 / 12.5 / 18.4 GiB measured against 13.27 / 13.27 / 19.79 GB estimated.
    assert saved == pytest.approx(saved_measured, rel=0.02)


@pytest.mark.parametrize(
    "measurement_id",
    [
        "torchao-llama2-7b-full-bf16-adamw-fused",
        "torchao-llama2-7b-full-bf16-bnb-8bit",
        "torchao-llama2-7b-full-bf16-ao-8bit",
        "torchao-llama2-7b-full-bf16-ao-4bit",
    ],
)
def test_torchao_runs_within_five_percent(measurement_id):
    optimizer = {"adamw-fused": "adamw_fused", "ao-4bit": "adamw_4bit"}.get(
        measurement_id.removeprefix("torchao-llama2-7b-full-bf16-"), "adamw_8bit"
    )
    measured = _measured(measurement_id) * GIB
    assert abs(_torchao_run(optimizer).allocated / measured - 1) < 0.05


def test_the_halved_8bit_states_of_before_missed_the_run_by_a_fifth():
    # 8-bit AdamW at 1 byte per parameter (the bug) left the estimate 21 % under the 39.3 GiB (42.2 GB) measured.
    measured = _measured("torchao-llama2-7b-full-bf16-bnb-8bit") * GIB
    halved = (2 + 2 + 1) * P
    assert halved / measured - 1 == pytest.approx(-0.2016, abs=5e-4)
    assert abs(_torchao_run("adamw_8bit").allocated / measured - 1) < 0.04


def _axolotl_pr708(micro_batch: int, method: str = "qlora_4bit") -> memory.Breakdown:
    """axolotl PR #708's Mistral-7B QLoRA (bench/heldout_measurements.csv): 8-bit AdamW, r=32 on every linear
    layer with dropout, double quantisation, 8192 tokens packed per sequence, checkpointing, transformers 4.34."""
    setup = memory.Setup(
        method=method,
        optimizer="adamw_8bit",
        seq_len=8192,
        micro_batch=micro_batch,
        grad_accum=4,
        grad_checkpointing=True,
        loss="hf_legacy",
        lora_rank=32,
        lora_dropout=True,
        double_quant=method == "qlora_4bit",
    )
    return memory.estimate(MISTRAL_7B, setup, _constants())


def test_qlora_8bit_adamw_fits_a_4090_at_micro_batch_2_not_4():
    # The PR: micro-batch 4 ran out of memory on a 24 GB RTX 4090, 2 fits.
    assert _axolotl_pr708(2).card < 24e9 < _axolotl_pr708(4).card


@pytest.mark.parametrize("method", ["lora", "qlora_4bit"])
def test_8bit_adamw_on_adapters_is_two_bytes_and_a_scale(method):
    b = _axolotl_pr708(2, method)
    trainable = b.trainable_params
    assert trainable == 32 * 32 * (4096 * 2 + 4096 + 1024 + 4096 + 1024 + 4096 + 4096 + 3 * (4096 + 14336))
    assert b.optimizer == pytest.approx(2 * (1 + 4 / 256) * trainable, rel=1e-12)
