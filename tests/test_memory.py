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

from conftest import LLAMA3_8B
from pipeline.estimate import first_principles as memory
from pipeline.estimate.architecture import Architecture

ROOT = Path(__file__).resolve().parent.parent

C = {
    "activation_bytes": 2,
    "norm_input_bytes": 4,
    "eager_attention_score_bytes": 6,
    "logits_bytes": 12,
    "logits_chunked_bytes": 4,
    "logits_inplace_bytes": 2,
    "logits_legacy_bytes": 16,
    "loss_chunks": 8,
    "fused_loss_bytes_per_hidden": 6,
    "dropout_mask_bytes": 1,
    "quant_block_size": 64,
    "quant_scale_bytes": 4,
    "adapter_bytes": 4,
    "zero3_gather_bytes_per_param": 4,
    "zero3_prefetch_units": 1,
    "offload_cpu_buffer_factor": 1.5,
    "cuda_context_gb": 0.5,
    "nccl_buffers_gb": 0.57,
    "allocator_fragmentation": 0.25,
    "forward_flops_per_param_token": 2,
    "train_flops_per_param_token": 6,
}

P = 8_030_261_248  # LLAMA3_8B's parameters (conftest)
EMBEDDING = 128256 * 4096  # 525 336 576: the largest module, for ZeRO-3's gather
EIGHT_BIT_ADAMW = 2 * (1 + 4 / 256)  # bitsandbytes: two uint8 states + one fp32 absmax per block of 256, per parameter
BASE = memory.Setup()  # full AMP, AdamW, seq 2048, micro-batch 1, one GPU, no checkpointing, flash


def test_constants_match_sources():
    rows = {r["constant_id"]: float(r["value"]) for r in csv.DictReader((ROOT / "sources/constants.csv").open())}
    assert {k: rows[k] for k in C} == C
    assert set(memory.CONSTANTS) <= set(rows)


# Activations of Llama 3 8B per token per layer (full fine-tuning, flash attention): two fp32 norm
# inputs 8h = 32 768; q, k, v 2(4096 + 1024 + 1024) = 12 288; gate, up, SiLU 3 x 2 x 14336 = 86 016;
# linear inputs (normed x twice, attention output, down input) 2(4096 + 4096 + 4096 + 14336) = 53 248.
LAYER = 184_320
ACTIVATIONS = LAYER * 32 * 2048  # 12 079 595 520
LOGITS = 2048 * 128256 * 12  # 3 152 019 456: bf16 logits, fp32 upcast, log-softmax, its gradient


def test_full_amp_llama3_8b_peaks_at_the_optimizer_step():
    b = memory.estimate(LLAMA3_8B, BASE, C)
    assert memory.activation_bytes(LLAMA3_8B, BASE, C) == ACTIVATIONS == 12_079_595_520
    assert memory.logits_bytes(LLAMA3_8B, BASE, C) == LOGITS
    # Backward: bf16 weights 2P + fp32 master and states 12P + the larger end of the pass:
    # activations and loss buffers (15 231 614 976) or all the new bf16 gradients (2P = 16 060 522 496).
    assert b.backward_peak == 14 * P + 2 * P == 128_484_179_968
    # The step: weights, gradients, states and foreach AdamW's temporary of one fp32 state per parameter.
    assert b.step_peak == (2 + 2 + 12 + 4) * P == 160_605_224_960
    assert b.phase == "optimizer_step"
    assert (b.weights, b.gradients, b.optimizer, b.activations, b.logits) == (2 * P, 2 * P, 12 * P, 0, 0)
    assert b.buffers == 4 * P  # the step's temporary
    assert b.allocated == b.step_peak
    # Only the temporary is freed and re-made at the step; the backward pass reserved less (128.5 + 0.25 x 15.2 GB).
    assert b.cache == pytest.approx(0.25 * 4 * P, rel=1e-15)
    assert b.reserved == pytest.approx(160_605_224_960 + 8_030_261_248, rel=1e-15)
    assert b.card == pytest.approx(b.reserved + 0.5e9, rel=1e-15)  # one process, no NCCL
    assert b.total == b.card and b.cpu == 0 and b.trainable_params == P


def test_fused_adamw_and_8bit_adamw_have_no_step_temporary():
    fused = memory.estimate(LLAMA3_8B, replace(BASE, optimizer="adamw_fused"), C)
    assert fused.step_peak == 16 * P and fused.buffers == 0
    eight = memory.estimate(LLAMA3_8B, replace(BASE, optimizer="adamw_8bit"), C)
    assert eight.optimizer == (4 + EIGHT_BIT_ADAMW) * P  # fp32 master 4 + two 1-byte states and their scales
    assert eight.step_peak == (2 + 2 + 4 + EIGHT_BIT_ADAMW) * P


def test_micro_batch_does_not_move_a_step_bound_peak():
    # With checkpointing, 8B full fine-tuning peaks at the step: micro-batch 4 and 8 give the same figure.
    four = memory.estimate(LLAMA3_8B, replace(BASE, grad_checkpointing=True, micro_batch=4), C)
    eight = memory.estimate(LLAMA3_8B, replace(BASE, grad_checkpointing=True, micro_batch=8), C)
    assert four.phase == eight.phase == "optimizer_step"
    assert four.allocated == eight.allocated == 20 * P


def test_long_sequences_move_the_peak_to_the_backward_pass():
    b = memory.estimate(LLAMA3_8B, replace(BASE, seq_len=16384, micro_batch=2), C)
    tokens = 16384 * 2
    assert b.phase == "backward"
    assert b.activations == LAYER * 32 * tokens and b.logits == tokens * 128256 * 12
    assert b.gradients == 0  # no accumulation: the gradients appear as the activations are freed
    assert b.allocated == 14 * P + LAYER * 32 * tokens + tokens * 128256 * 12
    assert b.cache == pytest.approx(0.25 * (LAYER * 32 * tokens + tokens * 128256 * 12), rel=1e-15)


def test_accumulated_gradients_stay_through_the_backward_pass():
    b = memory.estimate(LLAMA3_8B, replace(BASE, seq_len=16384, micro_batch=2, grad_accum=4), C)
    tokens = 16384 * 2
    assert b.gradients == 2 * P
    assert b.backward_peak == 16 * P + LAYER * 32 * tokens + tokens * 128256 * 12


def test_checkpointing_keeps_layer_inputs_and_one_layer():
    setup = replace(BASE, grad_checkpointing=True)
    # 32 layer inputs of 2 x 4096 bytes plus one layer recomputed (184 320), per token.
    assert memory.activation_bytes(LLAMA3_8B, setup, C) == 2048 * (32 * 2 * 4096 + LAYER) == 914_358_272


def test_eager_attention_adds_the_score_matrix():
    # + 6 bytes x 32 heads x 2048 keys per token per layer = 393 216.
    setup = replace(BASE, flash_attention=False)
    assert memory.activation_bytes(LLAMA3_8B, setup, C) == (LAYER + 393_216) * 32 * 2048 == 37_849_399_296


@pytest.mark.parametrize(
    ("loss", "expected"),
    [
        ("hf", 2048 * 128256 * 12),
        ("hf_legacy", 2048 * 128256 * 16),  # + the shifted fp32 copy
        # every chunk's log-probabilities kept for the backward pass (log_softmax saves its result), the other fp32
        # buffers one chunk in eight
        ("chunked", 2048 * 128256 * (4 + 8 / 8)),
        ("fused", 2048 * 4096 * 6),  # no tokens x vocabulary tensor: a chunk about tokens x hidden
        ("unsloth", 2048 * 128256 * 2),  # Unsloth's kernel: the bf16 logits only, the gradient written into them
    ],
)
def test_loss_implementations(loss, expected):
    assert memory.logits_bytes(LLAMA3_8B, replace(BASE, loss=loss), C) == pytest.approx(expected, rel=1e-15)


GEMMA2_9B = Architecture(42, 3584, 14336, 16, 8, 256, 256000, True, True, logit_softcapping=True)


@pytest.mark.parametrize(
    ("loss", "per_element"),
    [
        ("hf", 12 + 2),  # + the bf16 output of tanh(logits / cap), kept for the backward pass
        ("hf_legacy", 16 + 2),
        ("chunked", 4 + 2 + 8 / 8),  # LitGPT and torchtune cap every chunk: all the tanh outputs are kept
        ("unsloth", 2),  # capped inside Unsloth's kernel
    ],
)
def test_gemma_2_soft_capping_keeps_the_tanh_output(loss, per_element):
    setup = replace(BASE, loss=loss, seq_len=16384)
    assert memory.logits_bytes(GEMMA2_9B, setup, C) == pytest.approx(16384 * 256000 * per_element, rel=1e-15)
    fused = replace(setup, loss="fused")
    assert memory.logits_bytes(GEMMA2_9B, fused, C) == 16384 * 3584 * 6  # Liger caps inside its kernel too


def test_micro_batch_scales_activations_and_accumulation_does_not_change_the_step():
    one = replace(BASE, method="lora")
    four = replace(one, micro_batch=4)
    assert memory.activation_bytes(LLAMA3_8B, four, C) == 4 * memory.activation_bytes(LLAMA3_8B, one, C)
    assert memory.logits_bytes(LLAMA3_8B, four, C) == 4 * memory.logits_bytes(LLAMA3_8B, one, C)
    assert memory.estimate(LLAMA3_8B, replace(BASE, grad_accum=16), C).step_peak == 20 * P


@pytest.mark.parametrize(
    ("method", "optimizer", "optimizer_bytes"),
    [
        ("full_amp", "adamw", 12 * P),
        ("full_amp", "adamw_8bit", (4 + EIGHT_BIT_ADAMW) * P),  # fp32 master 4 + two 1-byte states, scales
        ("full_amp", "sgd", 8 * P),  # fp32 master 4 + momentum 4
        ("full_bf16", "adamw", 4 * P),  # two bf16 states, no master copy
        ("full_bf16", "sgd", 2 * P),
        # bitsandbytes' and torchao's quantised states do not follow the weights: two uint8 states and an fp32
        # absmax per 256 numbers in pure bf16 too (the bug of issue 36 halved them to 1 byte).
        ("full_bf16", "adamw_8bit", EIGHT_BIT_ADAMW * P),
        ("full_bf16", "paged_adamw_8bit", EIGHT_BIT_ADAMW * P),
        ("full_bf16", "paged_adamw", 8 * P),  # bitsandbytes' 32-bit states are float32 whatever the weights
        ("full_bf16", "adamw_4bit", 2 * (0.5 + 4 / 128) * P),  # torchao: 4-bit codes, fp32 scale per 128
        ("full_bf16", "adafactor", 0),  # factored second moment: rows + columns, counted as none
        ("full_amp", "adafactor", 4 * P),  # the fp32 master copy stays
        ("full_bf16", "lion", 2 * P),  # one bf16 momentum
        ("full_bf16", "lion_8bit", (1 + 4 / 256) * P),
        ("lora", "adamw_8bit", EIGHT_BIT_ADAMW * 41_943_040),  # LORA_ALL_R16 adapters (below)
        ("qlora_4bit", "adamw_8bit", EIGHT_BIT_ADAMW * 41_943_040),
        ("lora", "adamw", 8 * 41_943_040),  # two fp32 states of the fp32 adapters
    ],
)
def test_optimizer_states(method, optimizer, optimizer_bytes):
    assert memory.estimate(LLAMA3_8B, replace(BASE, method=method, optimizer=optimizer), C).optimizer == optimizer_bytes


def test_paged_optimizer_states_are_outside_the_allocator():
    b = memory.estimate(LLAMA3_8B, replace(BASE, method="lora", optimizer="paged_adamw"), C)
    assert b.paged == b.optimizer == 8 * LORA_ALL_R16
    assert b.allocated == b.weights + b.gradients + b.activations + b.logits + b.buffers
    # CUDA unified memory moves them to RAM when the card is short: they are not part of what must fit.
    assert b.card == pytest.approx(b.reserved + 0.5e9, rel=1e-15)


# One Llama 3 8B decoder layer: attention 4096(4096 + 1024 + 1024 + 4096) = 41 943 040, MLP
# 3 x 4096 x 14336 = 176 160 768, two norms 8192 -> 218 112 000. The root unit: embedding and head
# 2 x 525 336 576 plus the final norm 4096 = 1 050 677 248.
UNIT, ROOT_UNIT = 218_112_000, 1_050_677_248


def test_zero_sharding_divides_what_each_stage_shards():
    n = 8
    z1 = memory.estimate(LLAMA3_8B, replace(BASE, gpus=n, sharding="zero1"), C)
    z2 = memory.estimate(LLAMA3_8B, replace(BASE, gpus=n, sharding="zero2"), C)
    z3 = memory.estimate(LLAMA3_8B, replace(BASE, gpus=n, sharding="zero3"), C)
    # The step: weights, gradients, states and the foreach temporary (4P), each divided where sharded.
    assert z1.step_peak == 2 * P + 2 * P + (12 + 4) * P / 8
    assert z2.step_peak == 2 * P + (2 + 12 + 4) * P / 8
    assert z3.step_peak == (2 + 2 + 12 + 4) * P / 8
    assert (z2.weights, z2.optimizer) == (2 * P, 12 * P / 8)
    assert (z3.weights, z3.optimizer) == (2 * P / 8, 12 * P / 8)
    assert memory.parameter_counts(LLAMA3_8B).total == ROOT_UNIT + 32 * UNIT
    # ZeRO-3's buffers in the backward pass: the root unit and two gathered layers in bf16, and one
    # layer's unsharded bf16 gradient before its reduce-scatter.
    live = 2 * ROOT_UNIT + 2 * 2 * UNIT + 2 * UNIT
    assert z3.phase == "backward"
    assert z3.buffers == live == 3_410_026_496
    assert z3.backward_peak == 14 * P / 8 + live + ACTIVATIONS + LOGITS
    # Eight processes talk over NCCL: its buffers join the CUDA context.
    assert z3.context == 0.5e9 + 0.57e9


def test_ddp_keeps_gradient_buckets_beside_the_gradients():
    ddp = memory.estimate(LLAMA3_8B, replace(BASE, gpus=8), C)
    assert ddp.step_peak == (2 + 2 + 12 + 4 + 2) * P  # + DDP's bf16 bucket copy of the gradients
    assert memory.estimate(LLAMA3_8B, BASE, C).step_peak == 20 * P  # one card: no DDP


def test_offload_moves_optimizer_and_fp32_gradients_to_ram():
    b = memory.estimate(LLAMA3_8B, replace(BASE, gpus=8, sharding="zero2", offload="optimizer"), C)
    assert b.optimizer == 0
    assert b.cpu == (12 * P + 4 * P) * 1.5 == 192_726_269_952
    assert b.step_peak == 2 * P + 2 * P / 8  # the step runs on the CPU
    full = memory.estimate(LLAMA3_8B, replace(BASE, gpus=8, sharding="zero3", offload="full"), C)
    assert full.weights == 0  # only the gathered units stay on the card, as buffers
    assert full.buffers == 3_410_026_496
    assert full.cpu == (12 * P + 4 * P + 2 * P) * 1.5


LORA_ALL_R16 = 32 * 16 * (8192 + 5120 + 5120 + 8192 + 3 * (4096 + 14336))  # q, k, v, o, gate, up, down


def test_lora_all_linear_rank_16():
    b = memory.estimate(LLAMA3_8B, replace(BASE, method="lora"), C)
    assert b.trainable_params == LORA_ALL_R16 == 41_943_040
    assert b.weights == 2 * P + 4 * LORA_ALL_R16  # frozen bf16 base + fp32 adapter
    assert b.optimizer == 8 * LORA_ALL_R16
    # Frozen base: the down projection's input is still kept because its adapter reads it.
    assert b.activations == LAYER * 32 * 2048
    assert b.phase == "backward" and b.gradients == 0  # adapter gradients appear as activations go
    assert b.allocated == 2 * P + 12 * LORA_ALL_R16 + ACTIVATIONS + LOGITS


def test_lora_targets_and_head_adapter():
    qv = replace(BASE, method="lora", lora_targets="qv", lora_rank=8)
    assert memory.estimate(LLAMA3_8B, qv, C).trainable_params == 32 * 8 * (8192 + 5120) == 3_407_872
    qkv = replace(qv, lora_targets="qkv")
    assert memory.estimate(LLAMA3_8B, qkv, C).trainable_params == 32 * 8 * (8192 + 2 * 5120) == 4_718_592
    # No MLP input nor down input: 184 320 - 2(4096 + 14336) = 147 456.
    assert memory.activation_bytes(LLAMA3_8B, qv, C) == 147_456 * 32 * 2048
    # Dropout keeps a bf16 copy and a 1-byte mask of the input of q and of v: 2 x 3 x 4096; the adapters read those
    # copies and the frozen matmuls keep no input, so the attention input itself (2 x 4096) is no longer kept.
    dropped = replace(qv, lora_dropout=True)
    assert memory.activation_bytes(LLAMA3_8B, dropped, C) == (147_456 - 8_192 + 24_576) * 32 * 2048
    head = replace(qv, lora_lm_head=True)
    assert memory.estimate(LLAMA3_8B, head, C).trainable_params == 3_407_872 + 8 * (4096 + 128256)
    # The head's adapter reads the final norm's output: 2 x 4096 bytes per token more.
    assert memory.activation_bytes(LLAMA3_8B, head, C) == (147_456 * 32 + 8192) * 2048


def test_adapters_behind_dropout_keep_their_copies_not_the_inputs():
    # LoRA on every linear layer without dropout keeps the inputs the adapters read: the attention input, the MLP
    # input and the down projection's input (2 x (4096 + 4096 + 14336) bytes per token and layer).
    plain = replace(BASE, method="lora")
    assert memory.layer_activation_bytes(LLAMA3_8B, plain, C, moe_layer=False) == LAYER == 184_320
    # With dropout each adapter reads its own dropped copy (bf16 + a 1-byte mask) of q, k, v, o, gate, up and down's
    # inputs: 3 x (3 x 4096 + 4096 + 2 x 4096 + 14336); the frozen matmuls keep no input, the attention kernel
    # still keeps its output (o's input).
    dropped = replace(plain, lora_dropout=True)
    copies = 3 * (3 * 4096 + 4096 + 2 * 4096 + 14336)
    assert (
        memory.layer_activation_bytes(LLAMA3_8B, dropped, C, moe_layer=False)
        == 184_320 - 2 * (4096 + 4096 + 14336) + copies
        == 256_000
    )
    # bitsandbytes' 4-bit matmul keeps the input of every quantised layer whatever the adapter reads.
    qlora = replace(dropped, method="qlora_4bit")
    assert memory.layer_activation_bytes(LLAMA3_8B, qlora, C, moe_layer=False) == 184_320 + copies


LINEAR = 6_979_321_856  # projections only: P - 2 x embedding - (32 x 2 + 1) x 4096 norms


def test_qlora_weights_saved_inputs_and_dequantised_weight():
    setup = replace(BASE, method="qlora_4bit", lora_targets="qv", lora_rank=8)
    b = memory.estimate(LLAMA3_8B, setup, C)
    assert LINEAR == P - 2 * EMBEDDING - (32 * 2 + 1) * 4096
    trainable = 3_407_872
    assert b.weights == pytest.approx(LINEAR * (0.5 + 4 / 64) + 2 * (P - LINEAR) + 4 * trainable, rel=1e-15)
    # bitsandbytes keeps the input of every 4-bit layer, adapted or not: the MLP's input and the down
    # projection's are back (147 456 + 2(4096 + 14336) = 184 320 per token per layer).
    assert b.activations == LAYER * 32 * 2048
    # It dequantises one weight at a time to bf16: the largest projection, 4096 x 14336.
    assert b.buffers == 2 * 4096 * 14336


def test_frozen_fp32_upcasts_what_is_not_quantised():
    setup = replace(BASE, method="qlora_4bit", grad_checkpointing=True, frozen_fp32=True)
    b = memory.estimate(LLAMA3_8B, setup, C)
    assert b.weights == pytest.approx(LINEAR * (0.5 + 4 / 64) + 4 * (P - LINEAR) + 4 * LORA_ALL_R16, rel=1e-15)
    # The fp32 embedding makes the residual stream fp32: checkpointing keeps 4-byte layer inputs. The one
    # recomputed layer (2048 x LAYER = 0.38 GB) comes after the loss buffers (3.15 GB) are freed: not at the peak.
    assert b.saved_activations == 2048 * (32 * 4 * 4096 + LAYER)
    assert b.activations == 2048 * 32 * 4 * 4096 and b.logits == 2048 * 128256 * 12
    lora = memory.estimate(LLAMA3_8B, replace(BASE, method="lora", frozen_fp32=True), C)
    assert lora.weights == 4 * P + 4 * LORA_ALL_R16


def test_quantised_lm_head():
    setup = replace(BASE, method="qlora_4bit", quantized_lm_head=True)
    b = memory.estimate(LLAMA3_8B, setup, C)
    quantised = LINEAR + EMBEDDING
    assert b.weights == pytest.approx(quantised * (0.5 + 4 / 64) + 2 * (P - quantised) + 4 * LORA_ALL_R16, rel=1e-15)


def test_quantised_lm_head_is_the_largest_weight_to_dequantise_and_may_carry_an_adapter():
    # LitGPT quantises the output layer and can put an adapter on it (lora_head=True).
    setup = replace(BASE, method="qlora_4bit", quantized_lm_head=True, lora_lm_head=True)
    assert setup.problems() == []
    b = memory.estimate(LLAMA3_8B, setup, C)
    # bitsandbytes dequantises the whole head (128 256 x 4096) to bf16 for each chunk's matmul: it is
    # larger than the largest projection (4096 x 14336).
    assert b.buffers == 2 * EMBEDDING


def test_checkpointing_never_holds_the_loss_buffers_and_a_recomputed_layer_together():
    setup = replace(BASE, method="lora", grad_checkpointing=True)
    b = memory.estimate(LLAMA3_8B, setup, C)
    kept, recomputed = memory.activation_split(LLAMA3_8B, setup, C)
    assert kept == 2048 * 32 * 2 * 4096  # each layer's bf16 input
    assert recomputed == 2048 * memory.layer_activation_bytes(LLAMA3_8B, setup, C, moe_layer=False)
    # The loss buffers (3.15 GB) are larger than one recomputed layer (0.38 GB): the backward pass starts
    # with them, and the layer is recomputed only after the output layer's backward has freed them.
    assert recomputed < LOGITS
    assert (b.activations, b.logits) == (kept, LOGITS)
    assert b.saved_activations == kept + recomputed and b.loss_buffers == LOGITS
    # A fused loss has almost no buffers: then the recomputed layer is the larger moment.
    fused = memory.estimate(LLAMA3_8B, replace(setup, loss="fused"), C)
    assert (fused.activations, fused.logits) == (kept + recomputed, 0)


def test_offloaded_weights_leave_the_staged_shards_reserved():
    # ZeRO-3 / FSDP with the weights in RAM: the shards were on the GPU before being offloaded, and the
    # caching allocator keeps those blocks; 70B QLoRA on 2 cards reads about 20 GB on nvidia-smi.
    llama70 = Architecture(80, 8192, 28672, 64, 8, 128, 32000, False, True)
    setup = replace(BASE, method="qlora_4bit", gpus=2, sharding="zero3", offload="full", seq_len=512)
    setup = replace(setup, grad_checkpointing=True)
    b = memory.estimate(llama70, setup, C)
    weights_on_gpu = memory.estimate(llama70, replace(setup, offload="none"), C).weights
    assert b.weights == 0 and weights_on_gpu == pytest.approx(20_191_649_792, rel=1e-12)
    # Training itself allocates 3.9 GB (the gathered units, the dequantised weight, activations): the
    # reservation is the staged shards, 20.2 GB.
    assert b.allocated + 0.25 * (b.activations + b.logits + b.buffers) < weights_on_gpu
    assert b.reserved == pytest.approx(weights_on_gpu, rel=1e-12)


def test_reserved_memory_is_the_higher_of_both_phases():
    # Full AMP at 6144 tokens: the step allocates the most (20P = 160.6 GB with foreach AdamW's
    # temporary), but the backward pass (14P + 45.7 GB of activations and loss buffers = 158.1 GB, a
    # quarter of that transient cached: 169.5 GB) reserved more, and those blocks stay reserved.
    setup = replace(BASE, seq_len=6144)
    b = memory.estimate(LLAMA3_8B, setup, C)
    transient = (LAYER * 32 + 128256 * 12) * 6144
    assert b.phase == "optimizer_step" and b.allocated == 20 * P
    assert b.backward_peak == 14 * P + transient
    assert b.reserved == pytest.approx(14 * P + 1.25 * transient, rel=1e-15)
    assert b.reserved > 20 * P + 0.25 * 4 * P  # what the step alone would reserve


def test_optimizer_in_backward_keeps_one_gradient_at_a_time():
    setup = replace(BASE, method="full_bf16", optimizer_in_backward=True)
    b = memory.estimate(LLAMA3_8B, setup, C)
    # Weights 2P and bf16 states 4P; the largest gradient (the embedding, bf16) with its foreach
    # temporary (one bf16 state) lives only until its own step.
    assert b.phase == "backward" and b.step_peak == 0
    assert b.gradients == (2 + 2) * EMBEDDING
    assert b.allocated == 6 * P + 4 * EMBEDDING + ACTIVATIONS + LOGITS


def test_fp8_halves_linear_inputs_and_adds_fp8_weight_copies():
    b = memory.estimate(LLAMA3_8B, replace(BASE, fp8=True), C)
    assert b.weights == 2 * P + LINEAR
    assert memory.activation_bytes(LLAMA3_8B, replace(BASE, fp8=True), C) == (LAYER - 53_248 / 2) * 32 * 2048


def test_moe_layer_counts_routed_experts_only():
    # Mixtral 8x7B: Llama 3 8B's layer shape with 8 experts of the same MLP width, 2 per token.
    mixtral = replace(LLAMA3_8B, vocab=32000, experts=8, experts_per_token=2, moe_intermediate=14336)
    dense_layer = memory.layer_activation_bytes(LLAMA3_8B, BASE, C, moe_layer=False)
    moe_layer = memory.layer_activation_bytes(mixtral, BASE, C, moe_layer=True)
    # Two experts' MLP activations (4 x 2 x 14336 more than one) plus two token copies (2 x 2 x 4096).
    assert moe_layer - dense_layer == 2 * 4 * 14336 + 2 * 2 * 4096


def test_invalid_combinations_are_named():
    assert memory.Setup(torch_compile=True).problems()[0].startswith("torch.compile changes memory")
    assert memory.Setup(optimizer_in_backward=True, grad_accum=4).problems() == [
        "the optimizer step inside the backward pass cannot accumulate gradients (grad_accum must be 1)"
    ]
    assert memory.Setup(frozen_fp32=True).problems() == [
        "frozen_fp32 applies to LoRA/QLoRA only (full fine-tuning trains every weight)"
    ]
    assert memory.Setup(method="lora", loss="liger").problems() == [
        "loss = 'liger': expected one of hf, hf_legacy, chunked, fused, unsloth"
    ]
    assert memory.Setup(offload="optimizer").problems() == [
        "offload needs ZeRO sharding (zero1, zero2 or zero3): DeepSpeed offloads only sharded states"
    ]
    assert memory.Setup(sharding="zero2", offload="full").problems() == [
        "offloading the weights (offload = full) needs zero3"
    ]
    assert memory.Setup(method="qlora_4bit", fp8=True).problems() == [
        "FP8 training applies to full fine-tuning and LoRA on a 16-bit base; QLoRA's quantised base is "
        "dequantised to bf16 for its matmuls"
    ]
    assert memory.Setup(seq_len=0, optimizer="adam").problems() == [
        "optimizer = 'adam': expected one of adamw, adamw_fused, adamw_8bit, paged_adamw, paged_adamw_8bit, sgd, "
        "adamw_4bit, adafactor, lion, lion_8bit",
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


def test_typical_setup_table_is_parsed_and_checked():
    rows = [(2, "seq_len", "4096"), (3, "grad_checkpointing", "yes"), (4, "colour", "red")]
    problems = memory.typical_setup_problems(rows)
    assert (3, "value", "yes", "grad_checkpointing: должно быть true или false") in problems
    assert (4, "setting_id", "colour", problems[1][3]) == problems[1]
    assert (None, "setting_id", "optimizer", "эта настройка типовой конфигурации обязательна") in problems
    assert memory.parse_typical_value("multi_gpu_sharding", "zero3") == "zero3"
    with pytest.raises(ValueError, match="допустимые значения: zero1, zero2, zero3"):
        memory.parse_typical_value("multi_gpu_sharding", "ddp")
    with pytest.raises(ValueError, match="должно быть целым числом от 1 до 10 000 000"):
        memory.parse_typical_value("seq_len", "2048.5")


def test_typical_setup_uses_zero3_on_more_than_one_card():
    typical = {row["setting_id"]: row["value"] for row in csv.DictReader((ROOT / "sources/typical_setup.csv").open())}
    assert set(typical) == set(memory.TYPICAL_SETTINGS)
    c = {f"typical_{k}": memory.parse_typical_value(k, v) for k, v in typical.items()}
    one = memory.typical_setup("lora", c)
    assert (one.gpus, one.sharding, one.grad_checkpointing, one.flash_attention) == (1, "ddp", True, True)
    eight = memory.typical_setup("full_amp", c, gpus=8)
    assert (eight.gpus, eight.sharding) == (8, "zero3")


def test_validation_requires_every_estimator_constant():
    from pipeline.schema import REQUIRED_CONSTANTS

    assert set(memory.CONSTANTS) <= set(REQUIRED_CONSTANTS)
    assert {"forward_flops_per_param_token", "train_flops_per_param_token"} <= set(REQUIRED_CONSTANTS)
