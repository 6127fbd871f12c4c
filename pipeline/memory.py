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
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace

import polars as pl

from pipeline.architecture import (
    Architecture,
    architecture_from_row,
    lora_trainable_params,
    parameter_counts,
    synthetic_architecture,
)
from pipeline.schema import ESTIMATOR_CONSTANTS, MEMORY_BREAKDOWN

GB = 1e9
GIB = 2**30

# Byte widths of the data types involved (units, not tunable constants).
FP32, BF16, FP8 = 4, 2, 1

METHODS = ("full_amp", "full_bf16", "lora", "qlora_8bit", "qlora_4bit", "qlora_2bit")
OPTIMIZERS = ("adamw", "adamw_8bit", "sgd")
SHARDINGS = ("ddp", "zero1", "zero2", "zero3")
OFFLOADS = ("none", "optimizer", "full")
LORA_TARGETS = ("qv", "attention", "all")

# Optimizer state bytes per trainable parameter kept in fp32 (Transformer Math 101):
# AdamW keeps momentum and variance (4 + 4), 8-bit AdamW one byte each (bitsandbytes),
# SGD with momentum one momentum tensor. Pure-bf16 training keeps them in bf16 (half).
OPTIMIZER_STATE_BYTES = {"adamw": 8, "adamw_8bit": 2, "sgd": 4}

# The constants the estimator reads from constants.csv; validation requires each.
CONSTANTS = ESTIMATOR_CONSTANTS


@dataclass(frozen=True)
class Setup:
    """One training setup; the defaults are a plain single-GPU run."""

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
    lora_rank: int = 16
    lora_targets: str = "all"
    lora_dropout: bool = False
    double_quant: bool = False
    chunked_loss: bool = False
    fp8: bool = False

    @property
    def is_full(self) -> bool:
        return self.method.startswith("full")

    @property
    def base_bits(self) -> int:
        """Bits per weight of the frozen base (QLoRA), 16 otherwise."""
        return int(self.method.split("_")[1].removesuffix("bit")) if self.method.startswith("qlora") else 16

    def problems(self) -> list[str]:
        """Combinations that do not exist in practice, in plain words; empty when the setup is valid."""
        found = []
        for name, value, allowed in (
            ("method", self.method, METHODS),
            ("optimizer", self.optimizer, OPTIMIZERS),
            ("sharding", self.sharding, SHARDINGS),
            ("offload", self.offload, OFFLOADS),
            ("lora_targets", self.lora_targets, LORA_TARGETS),
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
        if self.double_quant and not self.method.startswith("qlora"):
            found.append("double quantisation applies to QLoRA only")
        if self.lora_dropout and self.is_full:
            found.append("LoRA dropout applies to LoRA/QLoRA only")
        if self.fp8 and not self.is_full:
            found.append("FP8 training applies to full fine-tuning; LoRA/QLoRA keep a 16-bit or quantised base")
        return found


@dataclass(frozen=True)
class Breakdown:
    """Bytes per GPU of each part of the peak, plus what is offloaded to the server's RAM."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    logits: float
    overhead: float
    cpu: float
    trainable_params: float
    context: float  # the CUDA context part of `overhead`

    @property
    def tensors(self) -> float:
        """What PyTorch's allocator hands out at the peak (max_memory_allocated)."""
        return self.weights + self.gradients + self.optimizer + self.activations + self.logits

    @property
    def reserved(self) -> float:
        """What the allocator holds from the driver (max_memory_reserved): tensors plus cache."""
        return self.total - self.context

    @property
    def total(self) -> float:
        return self.tensors + self.overhead

    def gb(self) -> dict[str, float]:
        """Every part in GB (10^9 bytes), with the totals."""
        parts = {k: v / GB for k, v in asdict(self).items() if k != "trainable_params"}
        parts |= {"tensors": self.tensors / GB, "reserved": self.reserved / GB, "total": self.total / GB}
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
    layer keeps its input only when its weight is trained (full) or an adapter reads it.
    """
    act, h = c["activation_bytes"], arch.hidden
    q, k, v, o_in = _widths(arch)
    mlp = _mlp_width(arch, moe_layer)
    linear_inputs = act * (h + o_in)  # attention input after the norm, attention output
    kept = 2 * c["norm_input_bytes"] * h + act * (q + k + v)
    if setup.is_full:
        linear_inputs += act * (h + mlp)  # MLP input after the norm, input of the down projection
        kept += act * (3 if arch.gated_mlp else 1) * mlp  # gate, up, activation (plain MLP: fc1 output)
    else:
        kept += act * (3 if arch.gated_mlp else 1) * mlp
        if setup.lora_targets == "all":
            linear_inputs += act * (h + mlp)
        if setup.lora_dropout:
            # Dropout on the adapter's input (LitGPT's default 0.05; PEFT's default is none) keeps a
            # dropped copy of each adapted layer's input and its mask.
            per_input = act + c["dropout_mask_bytes"]
            up = (2 if arch.gated_mlp else 1) * h  # gate and up, or fc1
            adapted = {"qv": 2 * h, "attention": 3 * h + o_in, "all": 3 * h + o_in + up + mlp}
            kept += per_input * adapted[setup.lora_targets]
    if moe_layer:
        kept += act * h * arch.experts_per_token  # each token copied to its experts and gathered back
    if setup.fp8:
        linear_inputs /= act / FP8  # Transformer Engine keeps the inputs of FP8 matmuls in FP8
    total = kept + linear_inputs
    if not setup.flash_attention:
        # Eager attention keeps the softmax of every query-key pair: per token, heads x seq_len scores.
        total += c["eager_attention_score_bytes"] * arch.heads * setup.seq_len
    return total


def activation_bytes(arch: Architecture, setup: Setup, c: Mapping[str, float]) -> float:
    """Activations of one micro-batch on one GPU (data parallelism does not split them)."""
    tokens = setup.seq_len * setup.micro_batch
    moe_layers = arch.layers - arch.dense_layers if arch.is_moe else 0
    dense = layer_activation_bytes(arch, setup, c, moe_layer=False)
    moe = layer_activation_bytes(arch, setup, c, moe_layer=True) if moe_layers else 0.0
    if not setup.grad_checkpointing:
        return tokens * ((arch.layers - moe_layers) * dense + moe_layers * moe)
    # Checkpointing keeps each layer's input and recomputes one layer at a time in the backward pass.
    return tokens * (arch.layers * c["activation_bytes"] * arch.hidden + max(dense, moe))


def logits_bytes(arch: Architecture, setup: Setup, c: Mapping[str, float]) -> float:
    """The output layer's logits and the loss buffers: tokens x vocabulary, several copies unless chunked."""
    per_element = c["logits_chunked_bytes"] if setup.chunked_loss else c["logits_bytes"]
    return setup.seq_len * setup.micro_batch * arch.vocab * per_element


def quant_constant_bytes(setup: Setup, c: Mapping[str, float]) -> float:
    """Bytes of quantisation scales per weight: one fp32 scale per block of 64 weights, or with double
    quantisation (QLoRA) an 8-bit scale per block plus one fp32 scale per 256 blocks."""
    if setup.double_quant:
        return c["double_quant_scale_bytes"] / c["quant_block_size"] + c["quant_scale_bytes"] / (
            c["quant_block_size"] * c["double_quant_block_size"]
        )
    return c["quant_scale_bytes"] / c["quant_block_size"]


def estimate(arch: Architecture, setup: Setup, c: Mapping[str, float]) -> Breakdown:
    """Peak memory per GPU of `setup` for a model of architecture `arch`."""
    counts = parameter_counts(arch)
    total = counts.total
    linear = counts.attention + counts.mlp
    n = setup.gpus
    shard_optimizer = setup.sharding in ("zero1", "zero2", "zero3")
    shard_gradients = setup.sharding in ("zero2", "zero3")
    shard_weights = setup.sharding == "zero3"

    if setup.is_full:
        trainable = total
        weights = BF16 * total
        gradients = BF16 * total
        if setup.method == "full_amp":
            optimizer = (FP32 + OPTIMIZER_STATE_BYTES[setup.optimizer]) * total  # fp32 master copy + states
        else:
            optimizer = OPTIMIZER_STATE_BYTES[setup.optimizer] / 2 * total  # states in bf16, no master copy
        if setup.fp8:
            weights += FP8 * linear  # FP8 copies of the matmul weights
        gather = c["zero3_gather_bytes_per_param"] * counts.largest_layer
    else:
        trainable = lora_trainable_params(arch, setup.lora_rank, setup.lora_targets)
        bits = setup.base_bits
        if bits == 16:
            base = BF16 * total
        else:
            per_weight = bits / 8 + quant_constant_bytes(setup, c)
            base = per_weight * linear + BF16 * (total - linear)  # embeddings, head and norms stay 16-bit
        weights = base + c["adapter_bytes"] * trainable
        gradients = c["adapter_bytes"] * trainable
        optimizer = OPTIMIZER_STATE_BYTES[setup.optimizer] * trainable  # adapters train in fp32
        gather = BF16 * counts.largest_layer

    cpu = 0.0
    if setup.offload != "none":
        # ZeRO-Offload: optimizer states and fp32 gradients live in RAM, the step runs on the CPU.
        cpu += optimizer + FP32 * trainable
        optimizer = 0.0
    if setup.offload == "full":
        cpu += weights
        weights = 0.0
    cpu *= c["offload_cpu_buffer_factor"]

    if shard_optimizer:
        optimizer /= n
    if shard_gradients:
        gradients /= n
    if shard_weights:
        weights = weights / n + gather  # with offload = full the local shard is 0: only the gathered layer

    activations = activation_bytes(arch, setup, c)
    logits = logits_bytes(arch, setup, c)
    tensors = weights + gradients + optimizer + activations + logits
    context = c["cuda_context_gb"] * GB
    overhead = context + c["allocator_reserve_factor"] * tensors
    return Breakdown(weights, gradients, optimizer, activations, logits, overhead, cpu, trainable, context)


def deepspeed_model_states(arch: Architecture, setup: Setup) -> float | None:
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
        largest = 4 * counts.largest_layer
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


def training_hours(flops: float, cards: int, tflops: float, utilization: float) -> float:
    """Wall-clock hours of `flops` on `cards` GPUs of `tflops` peak at `utilization` of the peak."""
    return flops / (cards * tflops * 1e12 * utilization) / 3600


def cards_for_duration(flops: float, hours: float, tflops: float, utilization: float) -> int:
    """Fewest cards that finish `flops` within `hours`."""
    return max(1, math.ceil(flops / (hours * 3600 * tflops * 1e12 * utilization) * (1 - 1e-9)))


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
    dense = [(parameter_counts(a).total, model_id) for model_id, a in named.items() if not a.is_moe and a.gated_mlp]
    return [model_id for _, model_id in sorted(dense)]


def architecture_for_size(params_b: float, named: Mapping[str, Architecture]) -> Architecture:
    """A dense architecture of `params_b` billion parameters for a model without config data:
    the shape of the reference model nearest in size (on a log scale; the smaller on a tie), layers scaled."""
    size = params_b * 1e9
    totals = [(parameter_counts(named[m]).total, m) for m in shape_references(named)]
    _, nearest = min(totals, key=lambda item: (abs(math.log(item[0] / size)), item[0]))
    return synthetic_architecture(params_b, named[nearest])


def model_architectures(models: pl.DataFrame) -> dict[str, Architecture]:
    """The architecture of every model: from its config columns, or, for a model without them
    (the generic sizes), `architecture_for_size` over the named models."""
    named, missing = {}, []
    for row in models.sort("params_b", "model_id").iter_rows(named=True):
        arch = architecture_from_row(row)
        if arch is None:
            missing.append(row)
        else:
            named[row["model_id"]] = arch
    found = dict(named)
    if named:
        for row in missing:
            found[row["model_id"]] = architecture_for_size(row["params_b"], named)
    return found


BREAKDOWN_COLUMNS = ("weights", "gradients", "optimizer", "activations", "logits", "overhead")


def typical_setup(method_id: str, c: Mapping[str, float]) -> Setup:
    """The setup the site's pages show for each method: one GPU, the typical sequence and batch of
    constants.csv, checkpointing as set there, FlashAttention, AdamW; LoRA on every linear layer."""
    return Setup(
        method=method_id,
        seq_len=int(c["typical_seq_len"]),
        micro_batch=int(c["typical_micro_batch"]),
        grad_checkpointing=bool(c["typical_grad_checkpointing"]),
        lora_rank=int(c["typical_lora_rank"]),
    )


def memory_breakdown_table(
    models: pl.DataFrame, methods: pl.DataFrame, estimates: pl.DataFrame, constants: Mapping[str, float]
) -> pl.DataFrame:
    """The `memory_breakdown` table: every model x method in its typical setup, part by part, in GB."""
    archs = model_architectures(models)
    table = {(m, k): v for m, k, v in estimates.select("model_id", "method_id", "memory_gb").iter_rows()}
    rows = []
    for model_id in sorted(archs):
        for method_id in methods.sort("sort_order")["method_id"]:
            setup = typical_setup(method_id, constants)
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
                    **{f"{k}_gb": parts[k] for k in (*BREAKDOWN_COLUMNS, "total")},
                    "table_rule_gb": table[(model_id, method_id)],
                }
            )
    return pl.DataFrame(rows, schema=MEMORY_BREAKDOWN.polars_schema)
