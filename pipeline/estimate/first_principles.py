"""First-principles memory of one fine-tuning setup, per GPU, broken into its parts.

The base is EleutherAI's Transformer Math 101 (bytes per parameter for weights,
gradients and optimizer states; ZeRO division rules) and Korthikanti et al. 2022 (which
tensors a transformer layer keeps for the backward pass). The layer terms are written
for the blocks of today's models (RMSNorm, gated MLP, grouped-query attention, MoE),
tensor by tensor, so that each byte has a reason. Every tunable number comes from
`constants.csv`; byte widths of data types are units, not constants.

Pure functions: an `Architecture`, a `Setup` and the constants in, a `Breakdown` out.
`memory_breakdown_table` runs it over every model x method of the catalog as a frame.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import NamedTuple

import polars as pl

from pipeline.estimate.architecture import (
    LORA_TARGETS as ARCH_LORA_TARGETS,
)
from pipeline.estimate.architecture import (
    Architecture,
    architecture_from_row,
    linear_layers,
    lora_trainable_params,
    parameter_counts,
)
from pipeline.messages import message
from pipeline.schema import ESTIMATOR_CONSTANTS, MEMORY_BREAKDOWN, OPTIMIZERS

GB = 1e9
GIB = 2**30

# Byte widths of the data types involved (units, not tunable constants).
FP32, BF16, FP8 = 4, 2, 1

METHODS = ("full_amp", "full_bf16", "lora", "qlora_8bit", "qlora_4bit", "qlora_2bit")
SHARDINGS = ("ddp", "zero1", "zero2", "zero3")
OFFLOADS = ("none", "optimizer", "full")
LORA_TARGETS = ARCH_LORA_TARGETS
LOSSES = ("hf", "hf_legacy", "chunked", "fused", "unsloth")
PHASES = ("backward", "optimizer_step")


class OptimizerStates(NamedTuple):
    """What an optimizer stores per trained parameter: `states` tensors of `bits` bits per number (None: the
    width of the weights it steps, which is the fp32 master copy in mixed precision, bf16 in pure bf16 and the
    adapters' width in LoRA), and for quantised states one fp32 scale per `block` numbers (0: none)."""

    states: int
    bits: int | None
    block: int
    reference_id: str


# Each optimizer by what its code allocates (units and library defaults, not tunable constants):
# PyTorch's AdamW and SGD create their states like the parameter (torch.zeros_like / a clone of the gradient), so
# they are fp32 beside an fp32 master copy and bf16 in pure bf16 training (Transformer Math 101). bitsandbytes'
# optimizers allocate their 32-bit states as float32 whatever the weights' dtype, and their 8-bit states as uint8
# with one float32 absmax per block of 256 (optim/optimizer.py, Optimizer2State/1State.init_state); torchao's
# AdamW8bit uses the same blocks of 256 and AdamW4bit 4-bit codes with a float32 scale per block of 128
# (torchao/optim). transformers' Adafactor (no first moment by default) factors the second moment into a row and a
# column vector per matrix: under 0.1 % of the parameters, counted as none. Lion keeps one momentum
# (lion-pytorch: torch.zeros_like), bitsandbytes' Lion8bit one 8-bit state with the same blocks.
OPTIMIZER_STATES: dict[str, OptimizerStates] = {
    "adamw": OptimizerStates(2, None, 0, "pytorch-adamw"),
    "adamw_fused": OptimizerStates(2, None, 0, "pytorch-adamw"),
    "adamw_8bit": OptimizerStates(2, 8, 256, "bitsandbytes-optimizers"),
    "paged_adamw": OptimizerStates(2, 32, 0, "bitsandbytes-optimizers"),
    "paged_adamw_8bit": OptimizerStates(2, 8, 256, "bitsandbytes-optimizers"),
    "sgd": OptimizerStates(1, None, 0, "transformer-math-101"),
    "adamw_4bit": OptimizerStates(2, 4, 128, "torchao-optim"),
    "adafactor": OptimizerStates(0, None, 0, "hf-adafactor"),
    "lion": OptimizerStates(1, None, 0, "lion-pytorch"),
    "lion_8bit": OptimizerStates(1, 8, 256, "bitsandbytes-optimizers"),
}


def optimizer_state_bytes(optimizer: str, weight_width: float) -> float:
    """Bytes of optimizer state per trained parameter for weights (or master weights) `weight_width` bytes wide."""
    spec = OPTIMIZER_STATES[optimizer]
    if spec.bits is None:
        return spec.states * weight_width
    return spec.states * (spec.bits / 8 + (FP32 / spec.block if spec.block else 0.0))


# Optimizers whose step makes a temporary of one state's size for every parameter (PyTorch's
# default foreach AdamW: sqrt(v) + eps as a tensor list); the others update in one fused kernel.
FOREACH_TEMPORARY = frozenset({"adamw"})
# Optimizers whose states live in CUDA unified memory (cudaMallocManaged), outside PyTorch's allocator.
PAGED = frozenset({"paged_adamw", "paged_adamw_8bit"})

# The constants the estimator reads from constants.csv; validation requires each.
CONSTANTS = ESTIMATOR_CONSTANTS


@dataclass(frozen=True)
class Setup:
    """One training setup; the defaults are a plain single-GPU run (the site's typical setup is
    sources/typical_setup.csv, see `typical_setup`). The fields' order is the order of the command
    line's --batch columns (`setup_fields`)."""

    method: str = "full_amp"
    optimizer: str = "adamw"
    seq_len: int = 2048
    micro_batch: int = 1
    grad_accum: int = 1
    gpus: int = 1
    sharding: str = "ddp"
    offload: str = "none"
    grad_checkpointing: bool = False
    flash_attention: bool = True
    loss: str = "hf"
    lora_rank: int = 16
    lora_targets: str = "all"
    lora_dropout: bool = False
    lora_lm_head: bool = False  # an adapter on the output layer too
    double_quant: bool = False
    fp8: bool = False
    frozen_fp32: bool = False  # the frozen, not quantised weights kept in fp32 (loaded without torch_dtype)
    quantized_lm_head: bool = False  # QLoRA also quantises the output layer (LitGPT does; HF keeps it 16-bit)
    optimizer_in_backward: bool = False  # each parameter stepped as soon as its gradient is ready (torchtune)
    quant_inputs_held: bool = False  # QLoRA: the previous micro-batch's 4-bit inputs still alive (LitGPT)
    torch_compile: bool = False  # refused: its effect on memory is not predictable

    @property
    def is_full(self) -> bool:
        return self.method.startswith("full")

    @property
    def is_quantised(self) -> bool:
        return self.method.startswith("qlora")

    @property
    def base_bits(self) -> int:
        """Bits per weight of the frozen base (QLoRA), 16 otherwise."""
        return int(self.method.split("_")[1].removesuffix("bit")) if self.is_quantised else 16

    def problems(self) -> list[str]:  # noqa: C901
        """Combinations that do not exist in practice, in plain words; empty when the setup is valid."""
        found = []
        for name, value, allowed in (
            ("method", self.method, METHODS),
            ("optimizer", self.optimizer, OPTIMIZERS),
            ("sharding", self.sharding, SHARDINGS),
            ("offload", self.offload, OFFLOADS),
            ("lora_targets", self.lora_targets, LORA_TARGETS),
            ("loss", self.loss, LOSSES),
        ):
            if value not in allowed:
                found.append(f"{name} = {value!r}: expected one of {', '.join(allowed)}")
        counts = ("seq_len", "micro_batch", "grad_accum", "gpus") + (() if self.is_full else ("lora_rank",))
        for name in counts:
            if getattr(self, name) < 1:
                found.append(f"{name} = {getattr(self, name)}: must be at least 1")
        if self.offload != "none" and self.sharding == "ddp":
            found.append("offload needs ZeRO sharding (zero1, zero2 or zero3): DeepSpeed offloads only sharded states")
        if self.offload == "full" and self.sharding != "zero3":
            found.append("offloading the weights (offload = full) needs zero3")
        if self.double_quant and not self.is_quantised:
            found.append("double quantisation applies to QLoRA only")
        if self.quantized_lm_head and not self.is_quantised:
            found.append("a quantised output layer applies to QLoRA only")
        for name in ("lora_dropout", "lora_lm_head", "frozen_fp32"):
            if getattr(self, name) and self.is_full:
                found.append(f"{name} applies to LoRA/QLoRA only (full fine-tuning trains every weight)")
        if self.fp8 and self.is_quantised:
            found.append(
                "FP8 training applies to full fine-tuning and LoRA on a 16-bit base; QLoRA's quantised base is "
                "dequantised to bf16 for its matmuls"
            )
        if self.optimizer_in_backward and self.grad_accum > 1:
            found.append(
                "the optimizer step inside the backward pass cannot accumulate gradients (grad_accum must be 1)"
            )
        if self.optimizer_in_backward and self.offload != "none":
            found.append("the optimizer step inside the backward pass runs on the GPU: no optimizer offload")
        if self.optimizer in PAGED and self.offload != "none":
            found.append("a paged optimizer already pages its states to RAM: do not combine it with offload")
        if self.torch_compile:
            found.append(
                "torch.compile changes memory by the kernels it fuses, which depends on the model code and the "
                "PyTorch version (in torchtune's published ladder it saved 15 % of the peak); no rule predicts it, "
                "so estimate without it: the figure is then an upper bound"
            )
        return found


def setup_fields(
    renames: Mapping[str, str] | None = None, through: str | None = None, leave_out: Collection[str] = ()
) -> tuple[str, ...]:
    """The names of Setup's fields in their order, as a table or the command line names them: `renames`
    maps a field to its name there, `through` is the last field it has (None: every one), `leave_out` the
    fields before it that it has no column for."""
    names = [f.name for f in fields(Setup)]
    if through is not None:
        names = names[: names.index(through) + 1]
    return tuple((renames or {}).get(name, name) for name in names if name not in leave_out)


def setup_fields_of_type(kind: str) -> tuple[str, ...]:
    """The names of Setup's fields of one type ("bool", "int", "str"), in their order."""
    return tuple(f.name for f in fields(Setup) if f.type == kind)


@dataclass(frozen=True)
class Breakdown:
    """Bytes per GPU at the peak, part by part (the parts alive at the peak phase: at the optimizer
    step the activations are already freed), and the three readings of it.

    `allocated` is what torch.cuda.max_memory_allocated reports: the tensors alive at the
    peak phase (`phase`). `reserved` adds the caching allocator's unused blocks
    (max_memory_reserved); `card` adds the CUDA context and NCCL buffers, which PyTorch's
    allocator does not see: what nvidia-smi shows and what must fit. Paged optimizer states
    (`paged`, CUDA unified memory) are outside all three: they move to RAM when the card is full.
    """

    weights: float
    gradients: float
    optimizer: float
    activations: float
    logits: float
    buffers: float  # ZeRO-3 gathered units, reduce buckets, dequantisation and optimizer-step temporaries
    cache: float  # reserved - allocated
    context: float  # CUDA context, cuBLAS workspace, NCCL buffers
    paged: float  # optimizer states in CUDA unified memory (part of `optimizer`, outside the allocator)
    cpu: float
    trainable_params: float
    phase: str  # which moment sets the peak: backward or optimizer_step
    backward_peak: float  # allocated bytes at the peak of each phase
    step_peak: float
    saved_activations: float  # what the setup saves for the backward pass, whichever phase is the peak
    loss_buffers: float

    @property
    def allocated(self) -> float:
        return (
            self.weights + self.gradients + self.optimizer - self.paged + self.activations + self.logits + self.buffers
        )

    @property
    def tensors(self) -> float:
        """Alias of `allocated`: what PyTorch's allocator hands out at the peak."""
        return self.allocated

    @property
    def reserved(self) -> float:
        return self.allocated + self.cache

    @property
    def card(self) -> float:
        """What must fit on the card: reserved memory and what lives outside the allocator (CUDA context,
        NCCL). Paged optimizer states (`paged`) are not counted: CUDA unified memory moves them to RAM
        whenever the card runs short, which is what they are for."""
        return self.reserved + self.context

    @property
    def total(self) -> float:
        """The whole card: what must fit in a GPU's memory."""
        return self.card

    @property
    def overhead(self) -> float:
        """Everything beyond the tensors: allocator cache and CUDA context."""
        return self.cache + self.context

    def gb(self) -> dict[str, float]:
        """Every part in GB (10^9 bytes), with the three readings and both phases."""
        parts = {k: v / GB for k, v in asdict(self).items() if k not in ("trainable_params", "phase")}
        parts |= {
            "overhead": self.overhead / GB,
            "allocated": self.allocated / GB,
            "tensors": self.allocated / GB,
            "reserved": self.reserved / GB,
            "card": self.card / GB,
            "total": self.card / GB,
        }
        return parts


def _widths(arch: Architecture) -> tuple[int, int, int, int]:
    """Per-token widths of q, k, v and the attention output (input of the o projection)."""
    if arch.attention_kind == "mla":
        qk = arch.heads * (arch.qk_nope_head_dim + arch.qk_rope_head_dim)
        return qk, qk, arch.heads * arch.v_head_dim, arch.heads * arch.v_head_dim
    q = arch.heads * arch.head_dim
    kv = arch.kv_heads * arch.head_dim
    return q, kv, kv, q


def _mlp_width(arch: Architecture, moe_layer: bool) -> int:
    """Hidden width of the MLP one token goes through: its routed experts and shared ones in an MoE layer."""
    if not moe_layer:
        return arch.intermediate
    return (arch.experts_per_token + arch.shared_experts) * arch.moe_intermediate


def layer_activation_bytes(arch: Architecture, setup: Setup, c: Mapping[str, float], moe_layer: bool) -> float:
    """Bytes one layer keeps for the backward pass, per token, without checkpointing.

    Tensor by tensor (Korthikanti et al. 2022 count the same way for a GPT block):
    RMSNorm upcasts its input to fp32 and keeps it; attention keeps q, k, v and its
    output; the gated MLP keeps the gate and up projections and the activation; a linear
    layer keeps its input only when its weight is trained (full) or an adapter reads it (autograd saves a
    matmul's input only for its weight's gradient), and bitsandbytes' 4-/8-bit matmul keeps the input of
    every quantised layer, frozen or not (MatMul4Bit saves (A, B) whenever its input needs a gradient).
    An adapter behind dropout reads its dropped copy, not the input: with LoRA dropout the frozen layers'
    inputs are not kept, the copies and their masks are (issue 36).
    """
    act, h = c["activation_bytes"], arch.hidden
    q, k, v, o_in = _widths(arch)
    mlp = _mlp_width(arch, moe_layer)
    linear_inputs = act * o_in  # the attention output, which the attention kernel keeps for its own backward pass
    kept = 2 * c["norm_input_bytes"] * h + act * (q + k + v)
    kept += act * (3 if arch.gated_mlp else 1) * mlp  # gate, up, activation (plain MLP: fc1 output)
    # A frozen layer's matmul keeps no input; an adapter behind dropout keeps its dropped copy instead (below).
    reads_inputs = setup.is_full or setup.is_quantised or not setup.lora_dropout
    if reads_inputs:
        linear_inputs += act * h  # attention input after the norm
    if reads_inputs and (setup.is_full or setup.lora_targets == "all" or setup.is_quantised):
        linear_inputs += act * (h + mlp)  # MLP input after the norm, input of the down projection
    if not setup.is_full and setup.lora_dropout:
        # Dropout on the adapter's input (LitGPT's default 0.05; PEFT's default is none) keeps a
        # dropped copy of each adapted layer's input and its mask.
        per_input = act + c["dropout_mask_bytes"]
        up = (2 if arch.gated_mlp else 1) * h  # gate and up, or fc1
        adapted = {
            "qv": 2 * h,
            "qkv": 3 * h,
            "attention": 3 * h + o_in,
            "all": 3 * h + o_in + up + mlp,
        }
        kept += per_input * adapted[setup.lora_targets]
    if moe_layer:
        kept += act * h * arch.experts_per_token  # each token copied to its experts and gathered back
    if setup.fp8 and setup.is_full:
        # Transformer Engine keeps the inputs of FP8 matmuls in FP8; under LoRA the frozen matmul needs no
        # input for its backward and the bf16 adapter keeps its own bf16 copy, so nothing shrinks.
        linear_inputs /= act / FP8
    total = kept + linear_inputs
    if not setup.flash_attention:
        # Eager attention keeps the softmax of every query-key pair: per token, heads x seq_len scores.
        total += c["eager_attention_score_bytes"] * arch.heads * setup.seq_len
    return total


def residual_bytes(setup: Setup, c: Mapping[str, float]) -> float:
    """Bytes per number of the residual stream (what checkpointing keeps per layer): bf16, or fp32 when
    the embedding is kept in fp32 (its output and every residual addition are then fp32)."""
    return FP32 if setup.frozen_fp32 else c["activation_bytes"]


def activation_bytes(arch: Architecture, setup: Setup, c: Mapping[str, float]) -> float:
    """Activations of one micro-batch on one GPU (data parallelism does not split them)."""
    kept, recomputed = activation_split(arch, setup, c)
    return kept + recomputed


def activation_split(arch: Architecture, setup: Setup, c: Mapping[str, float]) -> tuple[float, float]:
    """(activations kept through the whole backward pass, the one layer checkpointing recomputes).

    Without checkpointing everything is kept (the second is 0). With it, each layer's input is kept
    and one layer at a time is recomputed inside the backward pass, after the output layer and the
    loss are done with: the loss buffers and the recomputed layer are never alive together.
    """
    tokens = setup.seq_len * setup.micro_batch
    moe_layers = arch.layers - arch.dense_layers if arch.is_moe else 0
    dense = layer_activation_bytes(arch, setup, c, moe_layer=False)
    moe = layer_activation_bytes(arch, setup, c, moe_layer=True) if moe_layers else 0.0
    head = 0.0
    if setup.lora_lm_head or setup.quantized_lm_head:
        head = c["activation_bytes"] * arch.hidden  # the output layer's input, read by its adapter or by bitsandbytes
    if not setup.grad_checkpointing:
        held = held_quant_inputs(arch, setup, c)
        return tokens * ((arch.layers - moe_layers) * dense + moe_layers * moe + head + held), 0.0
    # Checkpointing keeps each layer's input and recomputes one layer at a time in the backward pass.
    return tokens * (arch.layers * residual_bytes(setup, c) * arch.hidden + head), tokens * max(dense, moe)


def held_quant_inputs(arch: Architecture, setup: Setup, c: Mapping[str, float]) -> float:
    """Bytes per token of the previous micro-batch's quantised-layer inputs still alive at the peak
    (`quant_inputs_held`; 0 without it, without QLoRA or with checkpointing).

    bitsandbytes before 0.43.2 kept each 4-bit matmul's input as a plain attribute of the autograd context
    (MatMul4Bit: `ctx.tensors = (A, B)`, not `save_for_backward`; PR #1270 dropped it), which the backward pass
    does not free: it lives as long as the graph. A training loop that keeps the last micro-batch's logits or
    loss in a variable until the next one replaces it (LitGPT's finetune scripts: `logits = model(...)`,
    `loss = chunked_cross_entropy(...)`, with bitsandbytes pinned at 0.42.0) therefore still holds every
    quantised layer's input of the previous micro-batch while the next forward pass and loss run: one more
    micro-batch of those inputs at the peak, counted at the same length (an upper bound where lengths vary).
    Under checkpointing nothing is counted: reentrant checkpointing (transformers' default) builds no graph in the
    forward pass; non-reentrant checkpointing would keep every layer's input on old bitsandbytes, since a ctx
    attribute escapes its saved-tensor hooks (bitsandbytes issue #2034): not modelled.
    """
    if not (setup.quant_inputs_held and setup.is_quantised) or setup.grad_checkpointing:
        return 0.0
    act, h = c["activation_bytes"], arch.hidden
    _, _, _, o_in = _widths(arch)
    moe_layers = arch.layers - arch.dense_layers if arch.is_moe else 0

    def layer(moe_layer: bool) -> float:
        # attention input (q, k, v share it), o projection input, MLP input (gate and up share it; each
        # expert reads its own copy), down projection input
        mlp_inputs = h * (arch.experts_per_token if moe_layer else 1)
        return act * (h + o_in + mlp_inputs + _mlp_width(arch, moe_layer))

    total = (arch.layers - moe_layers) * layer(False) + (moe_layers * layer(True) if moe_layers else 0.0)
    if setup.quantized_lm_head:
        total += act * h  # the output layer's input
    return total


def logits_bytes(arch: Architecture, setup: Setup, c: Mapping[str, float]) -> float:
    """The output layer's logits and the loss buffers at their peak (the start of the backward pass).

    hf: Hugging Face's ForCausalLMLoss, bf16 logits upcast to fp32, log-softmax, its gradient;
    hf_legacy: transformers before 4.49 also copied the shifted fp32 logits (PR #35646 removed the
    copy); chunked: what every chunk keeps for the backward pass (log_softmax saves its result: torchtune's fp32
    log-probabilities, LitGPT's bf16 logits and log-probabilities; `logits_chunked_bytes`), the other fp32 buffers
    one chunk at a time; fused: the output layer and
    the loss in one kernel chunk by chunk (Liger), no tokens x vocabulary tensor at all; unsloth:
    Unsloth's Triton cross-entropy keeps only the bf16 logits, computes the per-row logsumexp in the
    kernel (with Gemma's soft-capping inside it) and writes the gradient into the logits in place.
    A model with final-logit soft-capping (Gemma 2) run through hf, hf_legacy or chunked also keeps the
    bf16 output of tanh(logits / cap) for the backward pass (transformers' Gemma2ForCausalLM, LitGPT's
    and torchtune's chunks alike); Unsloth's and Liger's kernels cap inside the kernel.
    """
    tokens = setup.seq_len * setup.micro_batch
    if setup.loss == "fused":
        return tokens * arch.hidden * c["fused_loss_bytes_per_hidden"]
    if setup.loss == "unsloth":
        return tokens * arch.vocab * c["logits_inplace_bytes"]
    softcap = c["activation_bytes"] if arch.logit_softcapping else 0.0
    if setup.loss == "chunked":
        fp32_part = c["logits_bytes"] - c["logits_chunked_bytes"]
        return tokens * arch.vocab * (c["logits_chunked_bytes"] + softcap + fp32_part / c["loss_chunks"])
    per_element = c["logits_legacy_bytes"] if setup.loss == "hf_legacy" else c["logits_bytes"]
    return tokens * arch.vocab * (per_element + softcap)


def quant_constant_bytes(setup: Setup, c: Mapping[str, float]) -> float:
    """Bytes of quantisation scales per weight: one fp32 scale per block of 64 weights, or with double
    quantisation (QLoRA) an 8-bit scale per block plus one fp32 scale per 256 blocks."""
    if setup.double_quant:
        return c["double_quant_scale_bytes"] / c["quant_block_size"] + c["quant_scale_bytes"] / (
            c["quant_block_size"] * c["double_quant_block_size"]
        )
    return c["quant_scale_bytes"] / c["quant_block_size"]


def _frozen_bytes(setup: Setup) -> int:
    """Bytes per weight of the frozen parts that are not quantised."""
    return FP32 if setup.frozen_fp32 else BF16


def _unit_params(arch: Architecture) -> tuple[float, float]:
    """Parameters of one decoder layer (the largest: an MoE layer with all its experts) and of the root
    unit FSDP keeps whole (embedding, output layer, final norm)."""
    counts = parameter_counts(arch)
    root = counts.embedding + counts.lm_head + arch.hidden
    if not arch.is_moe:
        return (counts.total - root) / arch.layers, root
    per_layer = (counts.attention + counts.norms - arch.hidden) / arch.layers
    dense_mlp = (3 if arch.gated_mlp else 2) * arch.hidden * arch.intermediate
    moe_mlp = (counts.mlp - arch.dense_layers * dense_mlp) / arch.moe_layers
    return per_layer + max(moe_mlp, dense_mlp if arch.dense_layers else 0), root


def _weight_bytes(arch: Architecture, setup: Setup, c: Mapping[str, float]) -> tuple[float, float, float]:
    """(all weights on one unsharded GPU, one decoder layer's, the root unit's), in bytes."""
    counts = parameter_counts(arch)
    total = counts.total
    linear = counts.attention + counts.mlp
    layer, root = _unit_params(arch)
    if setup.is_full:
        per_param = BF16 + (FP8 * linear / total if setup.fp8 else 0)
        return per_param * total, per_param * layer, BF16 * root
    frozen = _frozen_bytes(setup)
    if not setup.is_quantised:
        per_param = frozen + (FP8 * linear / total if setup.fp8 else 0)  # LoRA in FP8: an FP8 copy, as full's
        return per_param * total, per_param * layer, frozen * root
    per_weight = setup.base_bits / 8 + quant_constant_bytes(setup, c)
    head = counts.lm_head if setup.quantized_lm_head else 0  # tied heads are the embedding: never quantised
    quantised = linear + head
    weights = per_weight * quantised + frozen * (total - quantised)
    layer_linear = linear / arch.layers
    layer_bytes = per_weight * layer_linear + frozen * (layer - layer_linear)
    root_bytes = frozen * (root - head) + per_weight * head
    return weights, layer_bytes, root_bytes


def _largest_quantised(arch: Architecture, setup: Setup) -> int:
    """Weights of the largest quantised matrix: bitsandbytes dequantises one whole weight to bf16 before each
    matmul (forward and backward), the output layer too when it is quantised (it is the largest then)."""
    largest = max(x.in_features * x.out_features for x in linear_layers(arch))
    if setup.quantized_lm_head:
        largest = max(largest, arch.vocab * arch.hidden)
    return largest


class _States(NamedTuple):
    """The model states of one GPU in bytes: the weights, gradients and optimizer states the method
    keeps, then what offload moves to RAM and what sharding divides."""

    trainable: float
    weights: float
    gradients: float
    optimizer: float
    step_temporary: float  # the optimizer step's temporary (foreach AdamW)
    state_width: float  # bytes per number of the optimizer states and of the gradients
    grad_width: float
    layer_weights: float  # one decoder layer's weights and the root unit's (what ZeRO-3 gathers)
    root_weights: float
    cpu: float = 0.0  # server RAM taken by offload
    staged: float = 0.0  # the sharded weights put on the GPU before offloading them
    paged: float = 0.0  # optimizer states in CUDA unified memory


class _Passes(NamedTuple):
    """What the forward and backward passes hold beside the model states, in bytes per GPU."""

    live: float  # buffers alive during the forward and backward passes
    bucket: float  # DDP's flat gradient buckets
    activations: float  # everything saved for the backward pass
    loss_buffers: float
    at_peak: float  # the activations and the loss buffers alive at the backward pass's first peak
    logits: float


class _Phases(NamedTuple):
    """Allocated bytes at the peak of each phase, and the parts alive at the backward peak."""

    backward: float
    step: float
    at_backward: tuple[float, ...]


def _method_states(arch: Architecture, setup: Setup, c: Mapping[str, float]) -> _States:
    """The states the method keeps on one GPU before offload and sharding."""
    weights, layer_bytes, root_bytes = _weight_bytes(arch, setup, c)
    if setup.is_full:
        total = parameter_counts(arch).total
        trainable = total
        gradients = BF16 * total
        if setup.method == "full_amp":
            # fp32 master copy + states as wide as it (or as the optimizer's own format)
            optimizer = (FP32 + optimizer_state_bytes(setup.optimizer, FP32)) * total
            state_width = FP32
        else:
            optimizer = optimizer_state_bytes(setup.optimizer, BF16) * total  # no master copy
            state_width = BF16
        grad_width = BF16
    else:
        trainable = lora_trainable_params(arch, setup.lora_rank, setup.lora_targets, setup.lora_lm_head)
        weights += c["adapter_bytes"] * trainable
        gradients = c["adapter_bytes"] * trainable
        optimizer = optimizer_state_bytes(setup.optimizer, c["adapter_bytes"]) * trainable  # adapters train in fp32
        state_width = c["adapter_bytes"]
        grad_width = c["adapter_bytes"]
    step_temporary = state_width * trainable if setup.optimizer in FOREACH_TEMPORARY else 0.0
    return _States(
        trainable, weights, gradients, optimizer, step_temporary, state_width, grad_width, layer_bytes, root_bytes
    )


def _offloaded(s: _States, setup: Setup, c: Mapping[str, float]) -> _States:
    """The states with offload: what moves to the server's RAM."""
    cpu = 0.0
    optimizer, step_temporary = s.optimizer, s.step_temporary
    if setup.offload != "none":
        # ZeRO-Offload: optimizer states and fp32 gradients live in RAM, the step runs on the CPU.
        cpu += optimizer + FP32 * s.trainable
        optimizer = 0.0
        step_temporary = 0.0
    if setup.offload == "full":
        cpu += s.weights
    cpu *= c["offload_cpu_buffer_factor"]
    return s._replace(optimizer=optimizer, step_temporary=step_temporary, cpu=cpu)


def _sharded(s: _States, setup: Setup) -> _States:
    """The states one GPU keeps with ZeRO sharding (stage 1 the optimizer states, 2 the gradients, 3 the weights)."""
    n = setup.gpus
    optimizer, step_temporary, gradients, weights = s.optimizer, s.step_temporary, s.gradients, s.weights
    if setup.sharding in ("zero1", "zero2", "zero3"):
        optimizer /= n
        step_temporary /= n
    if setup.sharding in ("zero2", "zero3"):
        gradients /= n
    # With the weights offloaded (ZeRO-3 / FSDP offload_params) the sharded weights are still put on the GPU
    # first (FSDP flattens and shards on the device it is given, DeepSpeed's zero.Init partitions there) and then
    # moved to RAM: the caching allocator keeps those blocks reserved (see `_allocator_cache`).
    staged = weights / n if setup.offload == "full" else 0.0
    if setup.sharding == "zero3":
        weights = 0.0 if setup.offload == "full" else weights / n
    paged = optimizer if setup.optimizer in PAGED else 0.0
    return s._replace(
        optimizer=optimizer,
        step_temporary=step_temporary,
        gradients=gradients,
        weights=weights,
        staged=staged,
        paged=paged,
    )


def _live_buffers(arch: Architecture, setup: Setup, c: Mapping[str, float], s: _States) -> tuple[float, float]:
    """(buffers alive during the forward and backward passes, DDP's gradient buckets)."""
    live = 0.0
    if setup.sharding == "zero3":
        # FSDP keeps the root unit (embedding, output layer) gathered from the forward into the backward,
        # computes on one gathered layer while the next is prefetched, and (full fine-tuning) reduce-
        # scatters a whole layer's gradient.
        live += s.root_weights + (1 + c["zero3_prefetch_units"]) * s.layer_weights
    if setup.is_full and setup.sharding in ("zero2", "zero3"):
        layer_params, _ = _unit_params(arch)
        live += s.grad_width * layer_params  # the unsharded gradient of one layer before its reduce-scatter
    if setup.is_quantised:
        live += BF16 * _largest_quantised(arch, setup)  # bitsandbytes dequantises one weight at a time to bf16
    bucket = 0.0
    if setup.sharding == "ddp" and setup.gpus > 1:
        bucket = s.grad_width * s.trainable  # DDP's flat gradient buckets beside .grad (gradient_as_bucket_view off)
    return live, bucket


def _passes(arch: Architecture, setup: Setup, c: Mapping[str, float], s: _States) -> _Passes:
    """The live buffers, the saved activations and the loss buffers of the forward and backward passes."""
    live, bucket = _live_buffers(arch, setup, c, s)
    kept, recomputed = activation_split(arch, setup, c)
    loss_buffers = logits_bytes(arch, setup, c)
    # The backward pass starts with the loss buffers; a recomputed layer comes later, when they are freed.
    if recomputed > loss_buffers:
        at_peak, logits = kept + recomputed, 0.0
    else:
        at_peak, logits = kept, loss_buffers
    return _Passes(live, bucket, kept + recomputed, loss_buffers, at_peak, logits)


def _phase_peaks(arch: Architecture, setup: Setup, s: _States, p: _Passes) -> _Phases:
    """Allocated bytes at the peak of the backward pass and of the optimizer step."""
    resident = s.weights + s.optimizer - s.paged + p.bucket
    if setup.optimizer_in_backward:
        # Each gradient lives only until its own step (torchtune's optimizer_in_bwd): the largest one,
        # with its step's temporary.
        shards = setup.gpus if setup.sharding in ("zero2", "zero3") else 1
        largest = parameter_counts(arch).largest_layer / shards
        held = (s.grad_width + (s.state_width if setup.optimizer in FOREACH_TEMPORARY else 0)) * largest
        backward = resident + p.at_peak + p.logits + p.live + held
        return _Phases(backward, 0.0, (s.weights, held, s.optimizer, p.at_peak, p.logits, p.live + p.bucket))
    carried = s.gradients if setup.grad_accum > 1 else 0.0  # accumulated from earlier micro-batches
    produced = s.gradients - carried
    # Gradients grow as activations are freed: the backward pass peaks at one end or the other.
    backward = resident + carried + p.live + max(p.at_peak + p.logits, produced)
    step = resident + s.gradients + s.step_temporary
    if p.at_peak + p.logits >= produced:
        at_backward = (s.weights, carried, s.optimizer, p.at_peak, p.logits, p.live + p.bucket)
    else:
        at_backward = (s.weights, s.gradients, s.optimizer, 0.0, 0.0, p.live + p.bucket)
    return _Phases(backward, step, at_backward)


def _peak(s: _States, p: _Passes, phases: _Phases) -> tuple[str, tuple[float, ...], float]:
    """(the phase that sets the peak, the parts alive then, the transient bytes the allocator caches)."""
    if phases.step > phases.backward:
        return (
            "optimizer_step",
            (s.weights, s.gradients, s.optimizer, 0.0, 0.0, s.step_temporary + p.bucket),
            s.step_temporary,
        )
    parts = phases.at_backward
    return "backward", parts, parts[3] + parts[4] + p.live


def _allocator_cache(c: Mapping[str, float], s: _States, p: _Passes, phases: _Phases, peak: tuple) -> float:
    """The caching allocator's unused blocks at the peak (reserved - allocated)."""
    phase, parts, transient = peak
    cache = c["allocator_fragmentation"] * transient
    allocated = sum(parts) - s.paged
    if phase == "optimizer_step":
        # The caching allocator never gives memory back during a step: the blocks the backward pass used
        # stay reserved through the optimizer step, so the reservation is the higher of the two phases.
        at_backward = phases.at_backward
        at_backward_reserved = phases.backward + c["allocator_fragmentation"] * (
            at_backward[3] + at_backward[4] + p.live
        )
        cache = max(cache, at_backward_reserved - allocated)
    if s.staged > allocated + cache:
        cache = s.staged - allocated  # the reservation left by staging the sharded weights before offloading
    return cache


def _context(setup: Setup, c: Mapping[str, float]) -> float:
    """What lives outside PyTorch's allocator: the CUDA context and cuBLAS workspace, NCCL's buffers on more than one GPU."""
    return c["cuda_context_gb"] * GB + (c["nccl_buffers_gb"] * GB if setup.gpus > 1 else 0.0)


def estimate(arch: Architecture, setup: Setup, c: Mapping[str, float]) -> Breakdown:
    """Peak memory per GPU of `setup` for a model of architecture `arch`.

    The peak is the larger of two moments (`phase`): the start of the backward pass (weights,
    optimizer states, gradients kept from earlier micro-batches, every saved activation, the
    loss buffers, ZeRO-3's gathered units) and the optimizer step (weights, gradients,
    states and the step's temporaries; the activations are freed by then).
    """
    s = _sharded(_offloaded(_method_states(arch, setup, c), setup, c), setup)
    p = _passes(arch, setup, c, s)
    phases = _phase_peaks(arch, setup, s, p)
    peak = _peak(s, p, phases)
    phase, parts, _ = peak
    cache = _allocator_cache(c, s, p, phases, peak)
    return Breakdown(
        *parts,
        cache,
        _context(setup, c),
        s.paged,
        s.cpu,
        s.trainable,
        phase,
        phases.backward,
        phases.step,
        p.activations,
        p.loss_buffers,
    )


def deepspeed_model_states(arch: Architecture, setup: Setup, gather_bytes: float = 4) -> float | None:
    """DeepSpeed's own estimate of model states per GPU (bytes), for full fine-tuning only.

    `estimate_zero2_model_states_mem_needs` / `estimate_zero3_…` (stage_1_and_2.py,
    stage3.py): 2 bytes of 16-bit weights plus 18 bytes of sharded states per parameter,
    or the largest layer x 4 with ZeRO-3. No activations: it says so itself.
    """
    if not setup.is_full:
        return None
    counts = parameter_counts(arch)
    p, n = counts.total, setup.gpus
    if setup.sharding == "zero3":
        largest = gather_bytes * counts.largest_layer
        if setup.offload == "full":
            return largest
        if setup.offload == "optimizer":
            return largest + 2 * p / n
        return largest + 18 * p / n
    if setup.offload != "none":
        return 2 * p
    return 2 * p + 18 * p / n


def training_flops_per_token(params_active: float, setup: Setup, c: Mapping[str, float]) -> float:
    """FLOPs per trained token: 2P forward, 4P backward (Transformer Math 101).

    The backward pass is two halves of 2P: gradients of the activations (always needed)
    and of the weights (skipped for a frozen base: LoRA/QLoRA pay 4P, not 6P). Checkpointing
    repeats the forward pass: +2P.
    """
    forward = c["forward_flops_per_param_token"]
    backward = c["train_flops_per_param_token"] - forward
    if not setup.is_full:
        backward /= 2
    recompute = forward if setup.grad_checkpointing else 0
    return params_active * (forward + backward + recompute)


def fits(breakdown: Breakdown, gpu_memory_gb: float) -> bool:
    """Whether the peak (with context and allocator cache) fits one card of `gpu_memory_gb`."""
    return breakdown.total <= gpu_memory_gb * GB


def min_gpus(arch: Architecture, setup: Setup, c: Mapping[str, float], gpu_memory_gb: float, limit: int = 4096):
    """Fewest GPUs of `gpu_memory_gb` on which `setup` fits with its sharding, or None.

    Without ZeRO adding cards does not lower memory per card, so it is one card or none.
    """
    if setup.sharding == "ddp":
        return 1 if fits(estimate(arch, replace(setup, gpus=1), c), gpu_memory_gb) else None
    low, high = 1, limit
    if not fits(estimate(arch, replace(setup, gpus=high), c), gpu_memory_gb):
        return None
    while low < high:
        mid = (low + high) // 2
        if fits(estimate(arch, replace(setup, gpus=mid), c), gpu_memory_gb):
            high = mid
        else:
            low = mid + 1
    return low


def shape_references(named: Mapping[str, Architecture]) -> list[str]:
    """The models whose shape a model without config data may borrow: named dense models with a
    gated MLP (today's block), by total parameters then id."""
    return [model_id for _, model_id in reference_totals(named)]


def reference_totals(named: Mapping[str, Architecture]) -> list[tuple[int, str]]:
    """(total parameters, id) of each shape_references model, in its order: what nearest_reference
    compares (a caller that asks for many sizes passes it, made once)."""
    return sorted(
        (parameter_counts(a).total, model_id) for model_id, a in named.items() if not a.is_moe and a.gated_mlp
    )


def architecture_for_size(
    params_b: float, named: Mapping[str, Architecture], totals: list[tuple[int, str]] | None = None
) -> Architecture:
    """A dense architecture of `params_b` billion parameters for a model without config data:
    the shape of the reference model nearest in size (on a log scale; the smaller on a tie), layers scaled.
    `totals`: reference_totals(named), when the caller has it."""
    return custom_architecture(named, params_b, totals=totals)[0]


def nearest_reference(
    params_b: float, named: Mapping[str, Architecture], totals: list[tuple[int, str]] | None = None
) -> str:
    """The named dense model nearest in size to `params_b` (log scale; the smaller on a tie);
    `totals`: reference_totals(named), when the caller has it."""
    size = params_b * 1e9
    totals = reference_totals(named) if totals is None else totals
    if not totals:
        raise ValueError("the catalog has no named dense model to borrow a shape from")
    return min(totals, key=lambda item: (abs(math.log(item[0] / size)), item[0]))[1]


# How far a custom model's total may be from the size asked for before the request is refused.
CUSTOM_SIZE_TOLERANCE = 0.05
MAX_CUSTOM_LAYERS = 2000
MAX_CUSTOM_PARAMS_B = 100_000


def _check_custom_request(params_b: float | None, vocab: int | None, layers: int | None, hidden: int | None) -> None:
    """ValueError when the request for a custom model is incomplete, contradicts itself or is out of range."""
    if params_b is None and not (layers and hidden):
        raise ValueError("give the size (params_b), or both the number of layers and the hidden size")
    if params_b is not None and layers and hidden:
        raise ValueError("the size follows from the number of layers and the hidden size: leave out params_b")
    for name, value in (("vocab", vocab), ("layers", layers), ("hidden", hidden)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} = {value}: must be a whole number, at least 1")
    if layers is not None and layers > MAX_CUSTOM_LAYERS:
        raise ValueError(f"layers = {layers}: more than {MAX_CUSTOM_LAYERS} layers is not a model anyone trains")
    if params_b is not None and (not math.isfinite(params_b) or params_b <= 0 or params_b > MAX_CUSTOM_PARAMS_B):
        raise ValueError(
            f"params_b = {params_b}: must be a positive number of billions, at most {MAX_CUSTOM_PARAMS_B:,} "
            "(no shape of the catalog has that many layers: give --hidden or --config)"
        )


def _query_group(ref: Architecture) -> int:
    """Query heads per key-value head of `ref`."""
    return max(1, ref.heads // max(1, ref.kv_heads))


def _widened(base: Architecture, ref: Architecture, reference_id: str, width: int) -> Architecture:
    """`base` with hidden size `width`: heads follow at the head size and grouping of `ref`, the MLP keeps its
    ratio. ValueError when `width` is not a whole number of query groups."""
    group = _query_group(ref)
    step = ref.head_dim * group
    if width % step:
        raise ValueError(
            f"hidden = {width}: must be a multiple of {step} (head size {ref.head_dim} x {group} query heads "
            f"per key-value head, as in {reference_id})"
        )
    heads = width // ref.head_dim
    return replace(
        base,
        hidden=width,
        heads=heads,
        kv_heads=max(1, heads // group),
        intermediate=max(1, round(ref.intermediate * width / ref.hidden)),
    )


def _with_layers_for_size(base: Architecture, params_b: float, reference_id: str) -> Architecture:
    """`base` with the number of layers that comes nearest to `params_b` billion parameters."""
    target = params_b * 1e9
    one = parameter_counts(base).total
    per_layer = parameter_counts(replace(base, layers=2)).total - one
    guess = (target - (one - per_layer)) / per_layer
    if guess > MAX_CUSTOM_LAYERS:
        raise ValueError(
            f"{params_b:g} B with the shape of {reference_id} would need {guess:,.0f} layers: give --hidden "
            "(a wider model) or --config"
        )
    candidates = {max(1, math.floor(guess)), max(1, math.ceil(guess))}
    n = min(sorted(candidates), key=lambda k: abs(parameter_counts(replace(base, layers=k)).total - target))
    return replace(base, layers=n)


def _with_hidden_for_size(
    base: Architecture, ref: Architecture, reference_id: str, layers: int, params_b: float
) -> Architecture:
    """`base` with `layers` layers and the hidden size that comes nearest to `params_b` billion parameters."""
    target = params_b * 1e9
    base = replace(base, layers=layers)
    step = ref.head_dim * _query_group(ref)
    widths = range(step, 64 * 1024 + step, step)
    arch = min(
        (_widened(base, ref, reference_id, w) for w in widths),
        key=lambda a: abs(parameter_counts(replace(a, layers=layers)).total - target),
    )
    return replace(arch, layers=layers)


def _check_custom_size(arch: Architecture, params_b: float, reference_id: str) -> None:
    """ValueError when `arch` is more than CUSTOM_SIZE_TOLERANCE off the size asked for."""
    target = params_b * 1e9
    total = parameter_counts(arch).total
    if abs(total - target) > CUSTOM_SIZE_TOLERANCE * target:
        smallest = parameter_counts(replace(arch, layers=1)).total / 1e9
        raise ValueError(
            f"{params_b:g} B cannot take the shape of {reference_id}: the nearest it gives is {total / 1e9:.3g} B "
            f"(one layer with a {arch.vocab:,}-word vocabulary is already {smallest:.3g} B); give --vocab, "
            "--hidden or --layers, or --config"
        )


def custom_architecture(  # noqa: PLR0913
    named: Mapping[str, Architecture],
    params_b: float | None = None,
    vocab: int | None = None,
    layers: int | None = None,
    hidden: int | None = None,
    totals: list[tuple[int, str]] | None = None,
) -> tuple[Architecture, str]:
    """A dense model of `params_b` billion parameters with the shape of the nearest named model, and
    that model's id. `vocab`, `layers` and `hidden` override the borrowed shape (heads follow the
    hidden size at the same head size and grouping, the MLP keeps its ratio); the free dimension is
    the number of layers, or with `layers` given the hidden size. ValueError when the shape cannot
    represent the size (more than 5 % off) or the overrides contradict each other. `totals`:
    reference_totals(named), when the caller has it.
    """
    _check_custom_request(params_b, vocab, layers, hidden)
    reference_id = nearest_reference(params_b if params_b is not None else 7.0, named, totals)
    ref = named[reference_id]
    base = replace(ref, experts=0, experts_per_token=0, shared_experts=0, moe_intermediate=0, dense_layers=0, layers=1)
    if vocab is not None:
        base = replace(base, vocab=vocab)
    if hidden is not None:
        base = _widened(base, ref, reference_id, hidden)
    if params_b is None:
        return replace(base, layers=layers), reference_id
    if layers is None:
        arch = _with_layers_for_size(base, params_b, reference_id)
    else:
        arch = _with_hidden_for_size(base, ref, reference_id, layers, params_b)
    _check_custom_size(arch, params_b, reference_id)
    return arch, reference_id


def _named_and_missing(models: pl.DataFrame) -> tuple[dict[str, Architecture], list[dict]]:
    """(model id -> architecture from its config columns, the rows without them), by size then id."""
    named, missing = {}, []
    for row in models.sort("params_b", "model_id").iter_rows(named=True):
        arch = architecture_from_row(row)
        if arch is None:
            missing.append(row)
        else:
            named[row["model_id"]] = arch
    return named, missing


def model_architectures(models: pl.DataFrame) -> dict[str, Architecture]:
    """The architecture of every model: from its config columns, or, for a model without them
    (the generic sizes), `architecture_for_size` over the named models."""
    named, missing = _named_and_missing(models)
    found = dict(named)
    if named:
        totals = reference_totals(named)
        for row in missing:
            found[row["model_id"]] = architecture_for_size(row["params_b"], named, totals)
    return found


def borrowed_shapes(models: pl.DataFrame) -> dict[str, str]:
    """Each model without config data (the generic sizes) -> the named model whose shape `model_architectures`
    gives it, so that every surface can say which shape it used."""
    named, missing = _named_and_missing(models)
    if not named:
        return {}
    totals = reference_totals(named)
    return {row["model_id"]: nearest_reference(row["params_b"], named, totals) for row in missing}


BREAKDOWN_COLUMNS = ("weights", "gradients", "optimizer", "activations", "logits", "buffers", "overhead")

# The settings of sources/typical_setup.csv: each one's kind and what it may be.
TYPICAL_SETTINGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "seq_len": ("count", ()),
    "micro_batch": ("count", ()),
    "grad_accum": ("count", ()),
    "grad_checkpointing": ("bool", ()),
    "flash_attention": ("bool", ()),
    "optimizer": ("choice", OPTIMIZERS),
    "loss": ("choice", LOSSES),
    "lora_rank": ("count", ()),
    "lora_targets": ("choice", LORA_TARGETS),
    "lora_dropout": ("bool", ()),
    "gpus": ("count", ()),
    "multi_gpu_sharding": ("choice", SHARDINGS[1:]),
    "offload": ("choice", OFFLOADS),
    # The reference dataset of draft times and costs (pipeline/recommend.py): millions of tokens, epochs.
    "dataset_tokens_m": ("count", ()),
    "epochs": ("count", ()),
}
TYPICAL_PREFIX = "typical_"


def parse_typical_value(setting: str, text: str) -> object:
    """A typical_setup.csv value as its Python value; ValueError with the rule when it is not valid."""
    kind, allowed = TYPICAL_SETTINGS[setting]
    text = text.strip()
    if kind == "count":
        if not text.isdigit() or int(text) < 1 or int(text) > 10_000_000:
            raise ValueError(message("rules.typical_count"))
        return int(text)
    if kind == "bool":
        if text not in ("true", "false"):
            raise ValueError(message("rules.typical_bool"))
        return text == "true"
    if text not in allowed:
        raise ValueError(message("rules.allowed", values=", ".join(allowed)))
    return text


def typical_setup_problems(rows: list[tuple[int | None, str | None, str | None]]) -> list[tuple]:
    """Problems of typical_setup.csv rows (line, setting_id, value): (line, column, value, rule) each;
    every setting must be present once, known, and valid."""
    found, seen = [], set()
    for line, setting, value in rows:
        if setting not in TYPICAL_SETTINGS:
            rule = message("rules.typical_unknown", settings=", ".join(TYPICAL_SETTINGS))
            found.append((line, "setting_id", setting, rule))
            continue
        seen.add(setting)
        try:
            parse_typical_value(setting, value or "")
        except ValueError as exc:
            found.append((line, "value", value, f"{setting}: {exc}"))
    for setting in TYPICAL_SETTINGS:
        if setting not in seen:
            found.append((None, "setting_id", setting, message("rules.typical_missing")))
    return found


def typical_constants(frame: pl.DataFrame) -> dict[str, object]:
    """The typical setup as `typical_<setting>` entries beside the constants (templates read them with
    t.const). Numbers and true/false become floats (1/0) as constants are; choices stay text."""
    out: dict[str, object] = {}
    for setting, value in frame.select("setting_id", "value").iter_rows():
        parsed = parse_typical_value(setting, value)
        out[TYPICAL_PREFIX + setting] = float(parsed) if isinstance(parsed, (bool, int)) else parsed
    return out


def typical_setup(method_id: str, c: Mapping[str, object], gpus: int | None = None) -> Setup:
    """The site's typical setup (sources/typical_setup.csv, as `typical_constants` puts it beside the
    constants) for one method; on more than one card with its multi-GPU sharding."""
    t = {k.removeprefix(TYPICAL_PREFIX): v for k, v in c.items() if k.startswith(TYPICAL_PREFIX)}
    cards = int(t["gpus"]) if gpus is None else gpus
    return Setup(
        method=method_id,
        optimizer=str(t["optimizer"]),
        seq_len=int(t["seq_len"]),
        micro_batch=int(t["micro_batch"]),
        grad_accum=int(t["grad_accum"]),
        gpus=cards,
        sharding=str(t["multi_gpu_sharding"]) if cards > 1 else "ddp",
        offload=str(t["offload"]) if cards > 1 else "none",
        grad_checkpointing=bool(t["grad_checkpointing"]),
        flash_attention=bool(t["flash_attention"]),
        lora_rank=int(t["lora_rank"]),
        lora_targets=str(t["lora_targets"]),
        lora_dropout=bool(t["lora_dropout"]) and not method_id.startswith("full"),
        loss=str(t["loss"]),
    )


def memory_breakdown_table(
    models: pl.DataFrame,
    methods: pl.DataFrame,
    estimates: pl.DataFrame,
    constants: Mapping[str, float],
    cards: Mapping[tuple[str, str], int] | None = None,
) -> pl.DataFrame:
    """The `memory_breakdown` table: every model x method in its typical setup, part by part, in GB per
    card. `cards` gives, per (model, method), the cards the recommendation uses (recommend.job_gpus):
    the setup runs on that many (with the typical multi-GPU sharding on more than one), so a 405 B
    model's breakdown is what one of its cards holds, not the whole job on one card; absent, one card."""
    archs = model_architectures(models)
    table = {(m, k): v for m, k, v in estimates.select("model_id", "method_id", "memory_gb").iter_rows()}
    cards = cards or {}
    rows = []
    for model_id in sorted(archs):
        for method_id in methods.sort("sort_order")["method_id"]:
            setup = typical_setup(method_id, constants, cards.get((model_id, method_id), 1))
            b = estimate(archs[model_id], setup, constants)
            parts = b.gb()
            rows.append(
                {
                    "model_id": model_id,
                    "method_id": method_id,
                    "optimizer": setup.optimizer,
                    "seq_len": setup.seq_len,
                    "micro_batch": setup.micro_batch,
                    "gpus": setup.gpus,
                    "sharding": setup.sharding,
                    "grad_checkpointing": setup.grad_checkpointing,
                    "flash_attention": setup.flash_attention,
                    "lora_rank": None if setup.is_full else setup.lora_rank,
                    "lora_targets": None if setup.is_full else setup.lora_targets,
                    "trainable_params": float(b.trainable_params),
                    **{f"{k}_gb": parts[k] for k in (*BREAKDOWN_COLUMNS, "allocated", "reserved", "total")},
                    "peak_phase": b.phase,
                    "table_rule_gb": table[(model_id, method_id)],
                }
            )
    return pl.DataFrame(rows, schema=MEMORY_BREAKDOWN.polars_schema)
