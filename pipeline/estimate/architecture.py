"""Model architecture: the linear layers of a decoder-only transformer and its exact parameter counts.

Pure functions, no I/O. The numbers come from a model's published config.json (the
architecture columns of sources/models.csv); the memory estimator and the validation
(computed total against the stated params_b) both read them from here.

What is counted, per decoder layer: the attention projections (and their biases when
qkv_bias), the MLP (dense, or router + routed experts + shared experts), two RMSNorm
weight vectors (before attention and before the MLP; MLA adds the norms of its two
low-rank latents); then the input embedding, the final norm and the LM head (none when
tied). Models with LayerNorm biases, biases on every linear or extra norms (phi-1.5,
StableLM-Alpha, Falcon, Gemma 2, Qwen3's QK-norm) differ from this by well under 0.1 %.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

# Names of the attention projections LoRA's "qv" target takes: q and v, and under MLA the
# low-rank query (q_a, q_b) and key-value (kv_a, kv_b) projections that produce them.
_QV = frozenset({"q", "v", "q_a", "q_b", "kv_a", "kv_b"})
# "qkv" adds the key projection (MLA has none apart from its key-value latent: the same as qv there).
_QKV = _QV | {"k"}
LORA_TARGETS = ("qv", "qkv", "attention", "all")


@dataclass(frozen=True)
class Architecture:
    layers: int
    hidden: int
    intermediate: int  # dense MLP width
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied_embeddings: bool
    gated_mlp: bool  # SwiGLU/GeGLU: gate, up, down; otherwise up, down
    qkv_bias: bool = False
    experts: int = 0  # routed experts per MoE layer; 0 for a dense model
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_intermediate: int = 0  # width of one expert's MLP
    dense_layers: int = 0  # leading layers with a dense MLP in a MoE model
    attention_kind: str = "mha"  # mha (multi-head, GQA, MQA) | mla (DeepSeek's multi-head latent attention)
    q_lora_rank: int = 0  # MLA; 0 projects the query directly
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # Gemma 2's final_logit_softcapping: logits = tanh(logits / cap) * cap, whose tanh output autograd keeps.
    logit_softcapping: bool = False

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0


@dataclass(frozen=True)
class Linear:
    """One kind of linear layer (weight in_features x out_features) and how many the model has."""

    name: str  # q, k, v, o, q_a, q_b, kv_a, kv_b, gate, up, down, shared_gate, shared_up, shared_down, router
    group: str  # attention | mlp | expert | router
    in_features: int
    out_features: int
    count: int

    @property
    def params(self) -> int:
        """Weights of all `count` copies (biases are counted by parameter_counts)."""
        return self.in_features * self.out_features * self.count


@dataclass(frozen=True)
class ParameterCounts:
    embedding: int  # input embedding
    lm_head: int  # 0 when tied to the embedding
    attention: int  # projections and their biases
    mlp: int  # dense MLPs, routed and shared experts, routers
    norms: int
    total: int
    active: int  # per token: dense parts plus experts_per_token routed and all shared experts
    largest_layer: int  # most parameters in one module (DeepSpeed's largest_layer_params)


# Column of sources/models.csv -> Architecture field. The first ten are the core columns:
# a row has all of them or none.
CORE_COLUMNS = {
    "layers": "layers",
    "hidden_size": "hidden",
    "intermediate_size": "intermediate",
    "attention_heads": "heads",
    "kv_heads": "kv_heads",
    "head_dim": "head_dim",
    "vocab_size": "vocab",
    "tied_embeddings": "tied_embeddings",
    "mlp_kind": "gated_mlp",
    "qkv_bias": "qkv_bias",
}
MOE_COLUMNS = {
    "experts": "experts",
    "experts_per_token": "experts_per_token",
    "shared_experts": "shared_experts",
    "moe_intermediate_size": "moe_intermediate",
    "dense_layers": "dense_layers",
}
MLA_COLUMNS = {
    "q_lora_rank": "q_lora_rank",
    "kv_lora_rank": "kv_lora_rank",
    "qk_rope_head_dim": "qk_rope_head_dim",
    "qk_nope_head_dim": "qk_nope_head_dim",
    "v_head_dim": "v_head_dim",
}


def architecture_from_row(row: Mapping[str, object]) -> Architecture | None:
    """The architecture of a typed models.csv row; None when the row has no architecture columns.

    A row with only some core columns raises ValueError (the validation reports those rows).
    """
    present = [c for c in CORE_COLUMNS if row.get(c) is not None]
    if not present:
        return None
    if len(present) < len(CORE_COLUMNS):
        missing = [c for c in CORE_COLUMNS if row.get(c) is None]
        raise ValueError(f"architecture columns missing: {', '.join(missing)}")
    values: dict[str, object] = {}
    for column, name in {**CORE_COLUMNS, **MOE_COLUMNS, **MLA_COLUMNS}.items():
        value = row.get(column)
        if value is None:
            continue
        if column == "mlp_kind":
            values[name] = value == "gated"
        elif isinstance(value, bool):
            values[name] = value
        else:
            values[name] = int(value)
    values["attention_kind"] = row.get("attention_kind") or "mha"
    values["logit_softcapping"] = bool(row.get("logit_softcapping"))
    return Architecture(**values)


def _attention_linears(a: Architecture) -> list[Linear]:
    n = a.layers
    if a.attention_kind == "mla":
        qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:
            query = [
                Linear("q_a", "attention", a.hidden, a.q_lora_rank, n),
                Linear("q_b", "attention", a.q_lora_rank, a.heads * qk_head, n),
            ]
        else:
            query = [Linear("q", "attention", a.hidden, a.heads * qk_head, n)]
        return [
            *query,
            # The compressed key-value latent plus the shared rotary key.
            Linear("kv_a", "attention", a.hidden, a.kv_lora_rank + a.qk_rope_head_dim, n),
            Linear("kv_b", "attention", a.kv_lora_rank, a.heads * (a.qk_nope_head_dim + a.v_head_dim), n),
            Linear("o", "attention", a.heads * a.v_head_dim, a.hidden, n),
        ]
    q_out, kv_out = a.heads * a.head_dim, a.kv_heads * a.head_dim
    return [
        Linear("q", "attention", a.hidden, q_out, n),
        Linear("k", "attention", a.hidden, kv_out, n),
        Linear("v", "attention", a.hidden, kv_out, n),
        Linear("o", "attention", q_out, a.hidden, n),
    ]


def _mlp_linears(prefix: str, group: str, hidden: int, width: int, gated: bool, count: int) -> list[Linear]:  # noqa: PLR0913
    if count == 0:
        return []
    out = [Linear(f"{prefix}gate", group, hidden, width, count)] if gated else []
    return out + [
        Linear(f"{prefix}up", group, hidden, width, count),
        Linear(f"{prefix}down", group, width, hidden, count),
    ]


def linear_layers(arch: Architecture) -> list[Linear]:
    """Every kind of linear layer in the decoder layers (not the embedding or LM head), with counts."""
    a = arch
    dense_count = a.dense_layers if a.is_moe else a.layers
    out = _attention_linears(a) + _mlp_linears("", "mlp", a.hidden, a.intermediate, a.gated_mlp, dense_count)
    if a.is_moe:
        moe = a.moe_layers
        out += _mlp_linears("shared_", "mlp", a.hidden, a.moe_intermediate, a.gated_mlp, moe * a.shared_experts)
        out += _mlp_linears("", "expert", a.hidden, a.moe_intermediate, a.gated_mlp, moe * a.experts)
        out.append(Linear("router", "router", a.hidden, a.experts, moe))
    return out


def _attention_bias(a: Architecture) -> int:
    if not a.qkv_bias or a.attention_kind == "mla":
        return 0
    return a.layers * (a.heads + 2 * a.kv_heads) * a.head_dim


def _norms(a: Architecture) -> int:
    per_layer = 2 * a.hidden
    if a.attention_kind == "mla":
        per_layer += a.q_lora_rank + a.kv_lora_rank  # RMSNorms of the query and key-value latents
    return a.layers * per_layer + a.hidden


@functools.lru_cache(maxsize=1024)  # the estimator asks for the same model's counts many times (min_gpus)
def parameter_counts(arch: Architecture) -> ParameterCounts:
    """Exact parameter counts by part, the per-token active count of a MoE, and the largest module."""
    a = arch
    linears = linear_layers(a)
    embedding = a.vocab * a.hidden
    lm_head = 0 if a.tied_embeddings else embedding
    attention = sum(x.params for x in linears if x.group == "attention") + _attention_bias(a)
    mlp = sum(x.params for x in linears if x.group != "attention")
    norms = _norms(a)
    total = embedding + lm_head + attention + mlp + norms
    routed = sum(x.params for x in linears if x.group == "expert")
    idle = routed - routed // a.experts * a.experts_per_token if a.is_moe else 0
    largest = max([embedding, lm_head] + [x.in_features * x.out_features for x in linears])
    return ParameterCounts(embedding, lm_head, attention, mlp, norms, total, total - idle, largest)


@functools.lru_cache(maxsize=1024)  # asked per plan and card count (step_time.step_bytes): a model's is fixed
def lora_trainable_params(arch: Architecture, rank: int, targets: str, lm_head: bool = False) -> int:
    """LoRA's trainable parameters: rank * (in + out) for each targeted linear layer.

    targets: "qv" (query and value projections), "qkv" (and the key projection), "attention"
    (q, k, v, o), "all" (every linear layer of attention and MLP, every expert included; not the
    router). `lm_head` adds an adapter on the output layer (hidden x vocabulary).
    """
    if targets == "qv":
        chosen = [x for x in linear_layers(arch) if x.name in _QV]
    elif targets == "qkv":
        chosen = [x for x in linear_layers(arch) if x.name in _QKV]
    elif targets == "attention":
        chosen = [x for x in linear_layers(arch) if x.group == "attention"]
    elif targets == "all":
        chosen = [x for x in linear_layers(arch) if x.group in ("attention", "mlp", "expert")]
    else:
        raise ValueError(f"unknown LoRA targets {targets!r}; expected one of {', '.join(LORA_TARGETS)}")
    head = rank * (arch.hidden + arch.vocab) if lm_head else 0
    return sum(rank * (x.in_features + x.out_features) * x.count for x in chosen) + head


def synthetic_architecture(params_b: float, reference: Architecture) -> Architecture:
    """A dense architecture of about params_b billion parameters shaped like the reference.

    Hidden size, MLP width, heads, head size and vocabulary stay; only the number of layers
    changes (at least 1), chosen so that the total is closest to params_b * 1e9.
    """
    dense = replace(
        reference, experts=0, experts_per_token=0, shared_experts=0, moe_intermediate=0, dense_layers=0, layers=1
    )
    one = parameter_counts(dense).total
    per_layer = parameter_counts(replace(dense, layers=2)).total - one
    target = params_b * 1e9
    guess = (target - (one - per_layer)) / per_layer
    candidates = {max(1, math.floor(guess)), max(1, math.ceil(guess))}
    layers = min(sorted(candidates), key=lambda n: abs(parameter_counts(replace(dense, layers=n)).total - target))
    return replace(dense, layers=layers)


# Model types whose MLP has no gate (up, activation, down); every other decoder of today is gated.
PLAIN_MLP_TYPES = frozenset({"gpt2", "gpt_neox", "gptj", "falcon", "phi", "opt", "bloom", "mpt", "starcoder2"})
# Model types that tie the output layer to the embedding when config.json does not say.
TIED_BY_DEFAULT = frozenset({"gemma", "gemma2", "gemma3_text", "phi"})
# The config.json keys each value is read from, first match wins (the calculator's port reads this too).
CONFIG_KEYS = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head"),
    "intermediate": ("intermediate_size", "n_inner", "ffn_hidden_size"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads"),
    "head_dim": ("head_dim",),
    "vocab": ("vocab_size", "padded_vocab_size"),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "experts_per_token": ("num_experts_per_tok", "moe_topk"),
    "shared_experts": ("n_shared_experts",),
    "moe_intermediate": ("moe_intermediate_size",),
    "dense_layers": ("first_k_dense_replace",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
}


# No count of a config.json (layers, widths, vocabulary, experts) is larger than this.
CONFIG_MAX_COUNT = 100_000_000


def whole(value: object, name: str) -> int:
    """A count of a config.json (layers, widths, vocabulary, experts): ValueError unless a whole
    number from 0 to CONFIG_MAX_COUNT."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"config.json: {name} = {value!r} is not a whole number")
    if value != int(value) or value < 0:
        raise ValueError(f"config.json: {name} = {value!r} is not a whole number")
    if value > CONFIG_MAX_COUNT:
        raise ValueError(f"config.json: {name} = {value!r} is beyond any model (at most {CONFIG_MAX_COUNT:,})")
    return int(value)


def _first(config: Mapping[str, object], *names: str, default: object = None, required: bool = True) -> object:
    """The value of the first of `names` that config.json sets; `default` otherwise, ValueError when
    `required` and there is no default."""
    for name in names:
        if config.get(name) is not None:
            return config[name]
    if required and default is None:
        raise ValueError(f"config.json has no {' / '.join(names)}")
    return default


def _config_count(config: Mapping[str, object], key: str, default: object = None) -> int:
    """The count of CONFIG_KEYS[key] (a required one unless it has a default), named by its first key."""
    names = CONFIG_KEYS[key]
    return whole(_first(config, *names, default=default), names[0])


def _dense_values(config: Mapping[str, object]) -> dict[str, object]:
    """The Architecture fields every decoder has: layers, widths, heads, vocabulary, tying, MLP kind, bias."""
    model_type = str(config.get("model_type") or "")
    layers = _config_count(config, "layers")
    hidden = _config_count(config, "hidden")
    heads = _config_count(config, "heads")
    if layers < 1 or hidden < 1 or heads < 1:
        raise ValueError("config.json: layers, hidden size and heads must be at least 1")
    intermediate = _config_count(config, "intermediate", default=4 * hidden)
    kv_default = 1 if config.get("multi_query") else heads
    kv_heads = _config_count(config, "kv_heads", default=kv_default)
    head_dim = _config_count(config, "head_dim", default=hidden // heads)
    vocab = _config_count(config, "vocab")
    tied = config.get("tie_word_embeddings")
    tied = (model_type in TIED_BY_DEFAULT) if tied is None else bool(tied)
    gated = model_type not in PLAIN_MLP_TYPES
    qkv_bias = bool(config.get("attention_bias") or config.get("qkv_bias") or model_type == "qwen2")
    return dict(
        layers=layers,
        hidden=hidden,
        intermediate=intermediate,
        heads=heads,
        kv_heads=max(1, kv_heads),
        head_dim=head_dim,
        vocab=vocab,
        tied_embeddings=tied,
        gated_mlp=gated,
        qkv_bias=qkv_bias,
        logit_softcapping=config.get("final_logit_softcapping") is not None,
    )


def _moe_values(config: Mapping[str, object], experts: object, intermediate: int) -> dict[str, object]:
    """The mixture-of-experts fields of a config.json with `experts` routed experts."""
    k = CONFIG_KEYS
    moe_width = _first(config, *k["moe_intermediate"], default=intermediate, required=False)
    return {
        "experts": whole(experts, "num_experts"),
        "experts_per_token": _config_count(config, "experts_per_token"),
        "shared_experts": whole(
            _first(config, *k["shared_experts"], default=0, required=False) or 0, "n_shared_experts"
        ),
        "moe_intermediate": whole(moe_width, "moe_intermediate_size"),
        "dense_layers": whole(
            _first(config, *k["dense_layers"], default=0, required=False) or 0, "first_k_dense_replace"
        ),
    }


def _mla_values(config: Mapping[str, object]) -> dict[str, object]:
    """The multi-head latent attention fields (DeepSeek-V2/V3) of a config.json with a kv_lora_rank."""
    values: dict[str, object] = {
        "attention_kind": "mla",
        "q_lora_rank": whole(config.get("q_lora_rank") or 0, "q_lora_rank"),
        "kv_lora_rank": whole(config["kv_lora_rank"], "kv_lora_rank"),
    }
    for name in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
        values[name] = whole(_first(config, *CONFIG_KEYS[name]), name)
    values["qkv_bias"] = False
    return values


def architecture_from_config(config: Mapping[str, object]) -> Architecture:
    """An Architecture from a Hugging Face config.json (already parsed); ValueError naming what is missing.

    Reads the keys the common decoders use (Llama, Mistral, Mixtral, Qwen 2/3 and their MoE,
    Gemma, Phi-3, DeepSeek-V2/V3 with MLA, GPT-NeoX/Falcon-style names); a multimodal config's
    `text_config` is used when present.
    """
    if not isinstance(config, Mapping):
        raise ValueError("config.json must be a JSON object")
    if isinstance(config.get("text_config"), Mapping):
        config = {**config, **config["text_config"]}
    values = _dense_values(config)
    experts = _first(config, *CONFIG_KEYS["experts"], default=0, required=False)
    if experts:
        values |= _moe_values(config, experts, values["intermediate"])
    if config.get("kv_lora_rank"):
        values |= _mla_values(config)
    return Architecture(**values)
