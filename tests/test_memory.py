"""The first-principles estimator, component by component, against hand-computed values.

Llama-3-8B (config.json: 32 layers, hidden 4096, MLP 14336, 32 heads, 8 KV heads, head 128,
vocabulary 128256, untied) has P = 8 030 261 248 parameters. Every expected number below is
worked out in the comment next to it from that architecture and the constants here (the
values of sources/constants.csv, repeated so that a formula change shows up here).
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline import memory
from pipeline.architecture import Architecture

ROOT = Path(__file__).resolve().parent.parent

C = {
    "activation_bytes": 2,
    "norm_input_bytes": 4,
    "eager_attention_score_bytes": 6,
    "logits_bytes": 12,
    "logits_chunked_bytes": 2,
    "dropout_mask_bytes": 1,
    "quant_block_size": 64,
    "quant_scale_bytes": 4,
    "adapter_bytes": 4,
    "zero3_gather_bytes_per_param": 4,
    "offload_cpu_buffer_factor": 1.5,
    "cuda_context_gb": 0.5,
    "allocator_reserve_factor": 0.1,
    "forward_flops_per_param_token": 2,
    "train_flops_per_param_token": 6,
}

LLAMA3_8B = Architecture(
    layers=32,
    hidden=4096,
    intermediate=14336,
    heads=32,
    kv_heads=8,
    head_dim=128,
    vocab=128256,
    tied_embeddings=False,
    gated_mlp=True,
)
P = 8_030_261_248
EMBEDDING = 128256 * 4096  # 525 336 576: the largest module, for ZeRO-3's gather
BASE = memory.Setup()  # full AMP, AdamW, seq 2048, micro-batch 1, one GPU, no checkpointing, flash


def test_constants_match_sources():
    rows = {r["constant_id"]: float(r["value"]) for r in csv.DictReader((ROOT / "sources/constants.csv").open())}
    assert {k: rows[k] for k in C} == C
    assert set(memory.CONSTANTS) <= set(rows)


def test_full_amp_llama3_8b_every_part():
    b = memory.estimate(LLAMA3_8B, BASE, C)
    assert b.weights == 2 * P == 16_060_522_496  # bf16 working weights
    assert b.gradients == 2 * P  # bf16 gradients
    assert b.optimizer == 12 * P == 96_363_134_976  # fp32 master 4 + momentum 4 + variance 4
    # Per token per layer: two fp32 norm inputs 8h = 32 768; q, k, v 2(4096 + 1024 + 1024) = 12 288;
    # gate, up, SiLU 3 x 2 x 14336 = 86 016; linear inputs (normed x twice, attention output,
    # down input) 2(4096 + 4096 + 4096 + 14336) = 53 248 -> 184 320 bytes; x 32 layers x 2048 tokens.
    assert b.activations == 184_320 * 32 * 2048 == 12_079_595_520
    assert b.logits == 2048 * 128256 * 12 == 3_152_019_456  # bf16 + fp32 log-probs + fp32 grad + bf16 grad
    assert b.tensors == 143_715_794_944
    assert b.overhead == pytest.approx(0.5e9 + 0.1 * 143_715_794_944, rel=1e-15)
    assert b.total == pytest.approx(158_587_374_438.4, rel=1e-15)
    assert b.reserved == pytest.approx(158_087_374_438.4, rel=1e-15)
    assert b.cpu == 0
    assert b.trainable_params == P


def test_checkpointing_keeps_layer_inputs_and_one_layer():
    b = memory.estimate(LLAMA3_8B, replace(BASE, grad_checkpointing=True), C)
    # 32 layer inputs of 2 x 4096 bytes plus one layer recomputed (184 320), per token.
    assert b.activations == 2048 * (32 * 2 * 4096 + 184_320) == 914_358_272


def test_eager_attention_adds_the_score_matrix():
    b = memory.estimate(LLAMA3_8B, replace(BASE, flash_attention=False), C)
    # + 6 bytes x 32 heads x 2048 keys per token per layer = 393 216.
    assert b.activations == (184_320 + 393_216) * 32 * 2048 == 37_849_399_296


def test_chunked_loss_keeps_only_bf16_logits():
    assert memory.estimate(LLAMA3_8B, replace(BASE, chunked_loss=True), C).logits == 2048 * 128256 * 2


def test_micro_batch_scales_activations_and_accumulation_does_not():
    one = memory.estimate(LLAMA3_8B, BASE, C)
    four = memory.estimate(LLAMA3_8B, replace(BASE, micro_batch=4), C)
    accumulated = memory.estimate(LLAMA3_8B, replace(BASE, grad_accum=16), C)
    assert four.activations == 4 * one.activations and four.logits == 4 * one.logits
    assert accumulated == one


@pytest.mark.parametrize(
    ("method", "optimizer", "optimizer_bytes"),
    [
        ("full_amp", "adamw", 12 * P),
        ("full_amp", "adamw_8bit", 6 * P),  # fp32 master 4 + two 1-byte states
        ("full_amp", "sgd", 8 * P),  # fp32 master 4 + momentum 4
        ("full_bf16", "adamw", 4 * P),  # two bf16 states, no master copy
        ("full_bf16", "sgd", 2 * P),
    ],
)
def test_optimizer_states(method, optimizer, optimizer_bytes):
    assert memory.estimate(LLAMA3_8B, replace(BASE, method=method, optimizer=optimizer), C).optimizer == optimizer_bytes


def test_zero_sharding_divides_what_each_stage_shards():
    n = 8
    z1 = memory.estimate(LLAMA3_8B, replace(BASE, gpus=n, sharding="zero1"), C)
    z2 = memory.estimate(LLAMA3_8B, replace(BASE, gpus=n, sharding="zero2"), C)
    z3 = memory.estimate(LLAMA3_8B, replace(BASE, gpus=n, sharding="zero3"), C)
    ddp = memory.estimate(LLAMA3_8B, replace(BASE, gpus=n), C)
    assert (ddp.weights, ddp.gradients, ddp.optimizer) == (2 * P, 2 * P, 12 * P)
    assert (z1.weights, z1.gradients, z1.optimizer) == (2 * P, 2 * P, 12 * P / 8)
    assert (z2.weights, z2.gradients, z2.optimizer) == (2 * P, 2 * P / 8, 12 * P / 8)
    # ZeRO-3 also shards the weights and gathers the largest layer (the embedding) at 4 bytes a parameter.
    assert z3.weights == 2 * P / 8 + 4 * EMBEDDING == 4_108_911_616
    assert z1.activations == ddp.activations  # data parallelism does not split activations


def test_offload_moves_optimizer_and_fp32_gradients_to_ram():
    b = memory.estimate(LLAMA3_8B, replace(BASE, gpus=8, sharding="zero2", offload="optimizer"), C)
    assert b.optimizer == 0
    assert b.gradients == 2 * P / 8
    assert b.cpu == (12 * P + 4 * P) * 1.5 == 192_726_269_952
    full = memory.estimate(LLAMA3_8B, replace(BASE, gpus=8, sharding="zero3", offload="full"), C)
    assert full.weights == 2 * P / 8 * 0 + 4 * EMBEDDING  # only the gathered layer stays on the card
    assert full.cpu == (12 * P + 4 * P + 2 * P) * 1.5


LORA_ALL_R16 = 32 * 16 * (8192 + 5120 + 5120 + 8192 + 3 * (4096 + 14336))  # q, k, v, o, gate, up, down


def test_lora_all_linear_rank_16():
    b = memory.estimate(LLAMA3_8B, replace(BASE, method="lora"), C)
    assert b.trainable_params == LORA_ALL_R16 == 41_943_040
    assert b.weights == 2 * P + 4 * LORA_ALL_R16  # frozen bf16 base + fp32 adapter
    assert b.gradients == 4 * LORA_ALL_R16
    assert b.optimizer == 8 * LORA_ALL_R16
    # Frozen base: the down projection's input is still kept because its adapter reads it; per token
    # per layer 32 768 + 12 288 + 86 016 (norms, q k v, gate up SiLU) + 53 248 (adapter inputs).
    assert b.activations == 184_320 * 32 * 2048


def test_lora_qv_keeps_fewer_inputs_and_dropout_copies_them():
    qv = memory.estimate(LLAMA3_8B, replace(BASE, method="lora", lora_targets="qv", lora_rank=8), C)
    assert qv.trainable_params == 32 * 8 * ((4096 + 4096) + (4096 + 1024)) == 3_407_872
    # No MLP input nor down input: 184 320 - 2(4096 + 14336) = 147 456.
    assert qv.activations == 147_456 * 32 * 2048
    dropped = memory.estimate(
        LLAMA3_8B, replace(BASE, method="lora", lora_targets="qv", lora_rank=8, lora_dropout=True), C
    )
    # Dropout keeps a bf16 copy and a 1-byte mask of the input of q and of v: 2 x 3 x 4096.
    assert dropped.activations == (147_456 + 24_576) * 32 * 2048


def test_qlora_4bit_weights_with_block_scales():
    b = memory.estimate(LLAMA3_8B, replace(BASE, method="qlora_4bit"), C)
    linear = P - 2 * EMBEDDING - (32 * 2 + 1) * 4096  # projections only; embeddings, head, norms stay bf16
    assert linear == 6_979_321_856
    assert b.weights == pytest.approx(linear * (0.5 + 4 / 64) + 2 * (P - linear) + 4 * LORA_ALL_R16, rel=1e-15)


def test_fp8_halves_linear_inputs_and_adds_fp8_weight_copies():
    b = memory.estimate(LLAMA3_8B, replace(BASE, fp8=True), C)
    linear = 6_979_321_856
    assert b.weights == 2 * P + linear
    assert b.activations == (184_320 - 53_248 / 2) * 32 * 2048


def test_moe_layer_counts_routed_experts_only():
    # Mixtral 8x7B: Llama 3 8B's layer shape with 8 experts of the same MLP width, 2 per token.
    mixtral = replace(LLAMA3_8B, vocab=32000, experts=8, experts_per_token=2, moe_intermediate=14336)
    dense_layer = memory.layer_activation_bytes(LLAMA3_8B, BASE, C, moe_layer=False)
    moe_layer = memory.layer_activation_bytes(mixtral, BASE, C, moe_layer=True)
    # Two experts' MLP activations (4 x 2 x 14336 more than one) plus two token copies (2 x 2 x 4096).
    assert moe_layer - dense_layer == 2 * 4 * 14336 + 2 * 2 * 4096


def test_invalid_combinations_are_named():
    assert memory.Setup(offload="optimizer").problems() == [
        "offload needs ZeRO sharding (zero1, zero2 or zero3): DeepSpeed offloads only sharded states"
    ]
    assert memory.Setup(sharding="zero2", offload="full").problems() == [
        "offloading the weights (offload = full) needs zero3"
    ]
    assert memory.Setup(method="lora", fp8=True).problems() == [
        "FP8 training applies to full fine-tuning; LoRA/QLoRA keep a 16-bit or quantised base"
    ]
    assert memory.Setup(seq_len=0, optimizer="adam").problems() == [
        "optimizer = 'adam': expected one of adamw, adamw_8bit, sgd",
        "seq_len = 0: must be at least 1",
    ]
    assert BASE.problems() == []


def test_deepspeed_model_states_formulas():
    assert memory.deepspeed_model_states(LLAMA3_8B, BASE) == 2 * P + 18 * P
    z2 = replace(BASE, gpus=8, sharding="zero2")
    assert memory.deepspeed_model_states(LLAMA3_8B, z2) == 2 * P + 18 * P / 8
    z3 = replace(BASE, gpus=8, sharding="zero3")
    assert memory.deepspeed_model_states(LLAMA3_8B, z3) == 4 * EMBEDDING + 18 * P / 8
    assert memory.deepspeed_model_states(LLAMA3_8B, replace(z3, offload="optimizer")) == 4 * EMBEDDING + 2 * P / 8
    assert memory.deepspeed_model_states(LLAMA3_8B, replace(BASE, method="lora")) is None


def test_training_flops_per_token():
    assert memory.training_flops_per_token(P, BASE, C) == 6 * P
    assert memory.training_flops_per_token(P, replace(BASE, method="lora"), C) == 4 * P  # no weight gradients
    assert memory.training_flops_per_token(P, replace(BASE, grad_checkpointing=True), C) == 8 * P  # forward again


def test_min_gpus_binary_search_is_the_first_that_fits():
    setup = replace(BASE, sharding="zero3")
    n = memory.min_gpus(LLAMA3_8B, setup, C, 80)
    assert memory.fits(memory.estimate(LLAMA3_8B, replace(setup, gpus=n), C), 80)
    assert not memory.fits(memory.estimate(LLAMA3_8B, replace(setup, gpus=n - 1), C), 80)
    assert memory.min_gpus(LLAMA3_8B, BASE, C, 80) is None  # ddp: adding cards does not help
    assert memory.min_gpus(LLAMA3_8B, BASE, C, 180) == 1


def test_validation_requires_every_estimator_constant():
    from pipeline.schema import REQUIRED_CONSTANTS

    assert set(memory.CONSTANTS) <= set(REQUIRED_CONSTANTS)
    assert {"forward_flops_per_param_token", "train_flops_per_param_token"} <= set(REQUIRED_CONSTANTS)
