"""The schema registry: every source and derived table, declared once.

The loader (types, DuckDB DDL), the validation (Great Expectations suites and
cross-table rules), the downloads (CSV columns) and the data dictionary page are
all generated from the declarations below. Adding a column is one edit here.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from dataclasses import dataclass, replace

import polars as pl

from pipeline import TEMPLATES
from pipeline.messages import message

# Ids become URLs and file names; the method ids use "_" (full_amp, qlora_4bit), so it is
# allowed beside "-". Both are safe in paths and URLs.
ID_PATTERN = r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$"

# Names the site's own pages and folders take (index.html, data.html, 404.html, models/index.html, …):
# an id or an article with one of them would replace that page, so every id of a source table and every
# article's name is refused when it is one (tests/test_hardening.py checks that the list covers every
# page a build writes at the top of a folder).
RESERVED_NAMES = frozenset(
    {
        *("index", "404", "data", "search", "sources", "quality", "calculator", "accuracy", "pretraining"),
        *("charts", "compare", "continued", "sitemap", "robots", "manifest", "pagefind", "style", "changelog"),
    }
)

DUCKDB_TYPES = {
    "id": "VARCHAR",
    "str": "VARCHAR",
    "int": "BIGINT",
    "float": "DOUBLE",
    "date": "DATE",
    "bool": "BOOLEAN",
}

# The same types in polars, for reading the downloads back.
POLARS_TYPES = {
    "id": pl.String,
    "str": pl.String,
    "int": pl.Int64,
    "float": pl.Float64,
    "date": pl.Date,
    "bool": pl.Boolean,
}

# Text forms a cell must match before it is cast (checked by GX on the raw strings).
TYPE_PATTERNS = {
    "id": ID_PATTERN,
    "int": r"^-?[0-9]+$",
    "float": r"^-?[0-9]+(?:\.[0-9]+)?$",
    "date": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
    "bool": r"^(?:true|false)$",
}

# The data dictionary's words (site_templates/dictionary.toml): titles, descriptions and labels of the
# tables and columns below, the display names of units and of value types.
DICTIONARY = tomllib.loads((TEMPLATES / "dictionary.toml").read_text(encoding="utf-8"))
UNITS: dict[str, str] = DICTIONARY["units"]  # unit id -> its display name
TYPE_NAMES_RU: dict[str, str] = DICTIONARY["types"]
MONEY_UNITS = ("rub", "rub_per_month")  # prices in roubles: read with a rouble suffix, shown as money


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    unit: str = ""  # a unit id of UNITS ("gb", "count", "rub_per_month"); "" for a text, an id, a date, a flag
    required: bool = True
    allowed: tuple[str, ...] = ()
    min: float | None = None
    max: float | None = None
    references: str = ""  # "table.column" this value must exist in
    max_length: int = 200  # text and id cells
    pattern: str = ""  # an extra regex a text cell must match, explained by pattern_rule
    pattern_rule: str = ""
    # Values outside this range are possible but rare: a warning asks the editor to check them.
    usual: tuple[float, float] | None = None
    unitless: bool = False  # a number without a unit (an order, a rank, a count of its own kind): declared
    # The words, from site_templates/dictionary.toml (set by the Table the field belongs to):
    label_ru: str = ""  # short column header (XLSX, data dictionary)
    description_ru: str = ""

    @property
    def unit_label(self) -> str:
        """The unit as a reader sees it, from the dictionary; "" without a unit."""
        return UNITS[self.unit] if self.unit else ""


@dataclass(frozen=True)
class Table:
    name: str
    fields: tuple[Field, ...]
    primary_key: tuple[str, ...]
    kind: str = "source"  # source | derived
    min_rows: int = 1  # a source table needs at least this many rows (a header alone is an accident)
    # From site_templates/dictionary.toml, with each column's label and description:
    title_ru: str = ""
    description_ru: str = ""

    def __post_init__(self) -> None:
        words = DICTIONARY["tables"].get(self.name)
        if words is None:  # a table made on the fly (tests): its fields keep their words
            return
        columns = words.get("columns", {})
        object.__setattr__(self, "title_ru", words["title"])
        object.__setattr__(self, "description_ru", words["description"])
        fields = []
        for f in self.fields:
            entry = columns.get(f.name, {})
            fields.append(replace(f, label_ru=entry.get("label", ""), description_ru=entry.get("description", "")))
        object.__setattr__(self, "fields", tuple(fields))

    @property
    def file(self) -> str:
        return f"{self.name}.csv"

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def polars_schema(self) -> dict[str, pl.DataType]:
        """The columns with their polars types: what a derived table's frame is built with."""
        return {f.name: POLARS_TYPES[f.type] for f in self.fields}

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)


def _ref() -> Field:
    return Field(
        "reference_id",
        "id",
        references="references.reference_id",
    )


REFERENCES = Table(
    "references",
    (
        Field("reference_id", "id"),
        Field("title", "str", max_length=300),
        Field(
            "url",
            "str",
            required=False,
            max_length=500,
            pattern=r"^https?://[^\s<>\"']+$",
            pattern_rule=message("rules.url"),
        ),
        Field("publisher", "str", required=False),
        Field("checked_on", "date"),
    ),
    ("reference_id",),
)

METHODS = Table(
    "methods",
    (
        Field("method_id", "id"),
        Field("name_ru", "str"),
        Field("short_name_ru", "str"),
        Field("name_en", "str"),
        Field("family", "str", allowed=("full", "lora", "qlora")),
        Field("trained_ru", "str", max_length=600),
        Field("memory_goes_ru", "str", max_length=600),
        Field("bits", "int", unit="bit", min=1, max=32),
        Field(
            "theoretical_min_applies",
            "bool",
        ),
        Field("sort_order", "int", min=0, max=1000, unitless=True),
        _ref(),
    ),
    ("method_id",),
)

MEMORY_ANCHORS = Table(
    "memory_anchors",
    (
        Field("method_id", "id", references="methods.method_id"),
        Field(
            "params_b",
            "float",
            unit="billion_params",
            min=0.01,
            max=100000,
        ),
        Field("memory_gb", "float", unit="gb", min=0.01, max=1000000),
        _ref(),
    ),
    ("method_id", "params_b"),
)


def _arch(name: str, unit: str = "dimensions", min: float = 1) -> Field:
    """An optional architecture column of models.csv: a whole number from the model's config.json."""
    return Field(name, "int", unit=unit, required=False, min=min, max=10_000_000)


MODELS = Table(
    "models",
    (
        Field("model_id", "id"),
        Field("display_name", "str"),
        Field("short_name", "str"),
        Field("family", "str"),
        Field("kind", "str", allowed=("generic", "named")),
        Field(
            "params_b",
            "float",
            unit="billion",
            min=0.01,
            max=100000,
            usual=(0.1, 2000),
        ),
        Field(
            "active_params_b",
            "float",
            unit="billion",
            required=False,
            min=0.01,
            max=100000,
        ),
        Field("licence", "str", required=False),
        _ref(),
        # Architecture from the model's config.json: all core columns (layers … qkv_bias) or none.
        _arch("layers", unit="count"),
        _arch("hidden_size"),
        _arch(
            "intermediate_size",
        ),
        _arch("attention_heads", unit="count"),
        _arch(
            "kv_heads",
            unit="count",
        ),
        _arch(
            "head_dim",
        ),
        _arch("vocab_size", unit="tokens"),
        Field(
            "tied_embeddings",
            "bool",
            required=False,
        ),
        Field(
            "mlp_kind",
            "str",
            required=False,
            allowed=("gated", "plain"),
        ),
        Field(
            "qkv_bias",
            "bool",
            required=False,
        ),
        _arch("experts", unit="count"),
        _arch(
            "experts_per_token",
            unit="count",
        ),
        _arch(
            "shared_experts",
            unit="count",
            min=0,
        ),
        _arch("moe_intermediate_size"),
        _arch(
            "dense_layers",
            unit="count",
            min=0,
        ),
        Field(
            "attention_kind",
            "str",
            required=False,
            allowed=("mha", "mla"),
        ),
        _arch("q_lora_rank"),
        _arch("kv_lora_rank"),
        _arch("qk_rope_head_dim"),
        _arch(
            "qk_nope_head_dim",
        ),
        _arch("v_head_dim"),
        # config.json's final_logit_softcapping is set (Gemma 2): not a core column, empty is false.
        Field(
            "logit_softcapping",
            "bool",
            required=False,
        ),
        Field(
            "arch_reference_id",
            "id",
            required=False,
            references="references.reference_id",
        ),
    ),
    ("model_id",),
)

GPUS = Table(
    "gpus",
    (
        Field("gpu_id", "id"),
        Field("name", "str"),
        Field("short_name", "str"),
        Field("vendor", "str", allowed=("NVIDIA", "AMD")),
        Field(
            "memory_gb",
            "float",
            unit="gb",
            min=1,
            max=2000,
            usual=(8, 400),
        ),
        Field(
            "memory_bandwidth_gbs",
            "float",
            unit="gb_per_s",
            min=1,
            max=100000,
            usual=(100, 20000),
        ),
        Field(
            "bf16_dense_tflops",
            "float",
            unit="tflops",
            min=1,
            max=100000,
            usual=(10, 5000),
        ),
        Field(
            "fp8_dense_tflops",
            "float",
            unit="tflops",
            required=False,
            min=1,
            max=100000,
            usual=(20, 10000),
        ),
        Field(
            "fp8_reference_id",
            "id",
            required=False,
            references="references.reference_id",
        ),
        Field(
            "interconnect",
            "str",
            allowed=("nvlink", "nvlink-bridge", "infinity-fabric", "pcie"),
        ),
        Field(
            "link_gbs",
            "float",
            unit="gb_per_s",
            required=False,
            min=1,
            max=100000,
            usual=(16, 5000),
        ),
        Field("form_factor", "str", allowed=("sxm", "oam", "pcie")),
        Field(
            "memory_note_ru",
            "str",
            required=False,
            max_length=600,
        ),
        _ref(),
    ),
    ("gpu_id",),
)

# Inter-node networks a server may declare (servers.network): fabric and line rate per port.
SERVER_NETWORKS = ("infiniband-ndr", "infiniband-hdr", "roce-400", "roce-200", "ethernet-100")

SERVERS = Table(
    "servers",
    (
        Field("server_id", "id"),
        Field("display_name", "str"),
        Field("platform", "str"),
        Field("gpu_id", "id", references="gpus.gpu_id"),
        Field("gpu_count", "int", unit="count", min=1, max=64, usual=(1, 16)),
        Field(
            "interconnect",
            "str",
            allowed=("nvswitch", "nvlink-bridge", "infinity-fabric", "pcie"),
        ),
        Field(
            "price_rub_month",
            "int",
            unit="rub_per_month",
            required=False,
            min=1000,
            max=10_000_000_000,
        ),
        Field("price_checked_on", "date", required=False),
        Field(
            "min_term_months",
            "int",
            unit="months",
            required=False,
            min=1,
            max=36,
        ),
        Field(
            "price_rub_hour",
            "int",
            unit="rub_per_hour",
            required=False,
            min=1,
            max=100_000_000,
        ),
        Field(
            "network",
            "str",
            required=False,
            allowed=SERVER_NETWORKS,
        ),
        _ref(),
    ),
    ("server_id",),
)

CONSTANTS = Table(
    "constants",
    (
        Field("constant_id", "id"),
        Field("value", "float", min=0, max=1_000_000, unitless=True),
        Field("unit", "str", required=False),
        Field("description_ru", "str", max_length=600),
        _ref(),
    ),
    ("constant_id",),
)

LEGACY_GPU_COUNTS = Table(
    "legacy_gpu_counts",
    (
        Field("row_id", "id"),
        Field("model_id", "id", references="models.model_id"),
        Field("task_ru", "str"),
        Field(
            "method_id",
            "id",
            required=False,
            references="methods.method_id",
        ),
        Field("h100_cards_text", "str"),
        Field("h200_cards_text", "str"),
        Field(
            "nvlink_text",
            "str",
            allowed=("нет", "желательно", "обязательно"),
        ),
        Field("sort_order", "int", min=0, max=1000, unitless=True),
        _ref(),
    ),
    ("row_id",),
)

LEGACY_OFFERS = Table(
    "legacy_offers",
    (
        Field("offer_id", "id"),
        Field("task_ru", "str"),
        Field("server_id", "id", references="servers.server_id"),
        Field("sort_order", "int", min=0, max=1000, unitless=True),
        _ref(),
    ),
    ("offer_id",),
)

LEGACY_OFFER_JOBS = Table(
    "legacy_offer_jobs",
    (
        Field("offer_id", "id", references="legacy_offers.offer_id"),
        Field("model_id", "id", references="models.model_id"),
        Field(
            "method_id",
            "id",
            required=False,
            references="methods.method_id",
        ),
    ),
    ("offer_id", "model_id", "method_id"),
)

# Scales of a comparison setup: "card" (one card, no sharding), "server" (ZeRO-3 over the cards of one
# catalog server), "servers" (ZeRO-3 over as many such servers as the table rule needs, server_fit).
COMPARISON_SCALES = ("card", "server", "servers")
# The setups the method-comparison article shows, as editors declare them: a scale, or "advice" (the
# earlier article's advice applied one by one on one card; the sharding advice spreads over the server).
COMPARISON_SETUPS = Table(
    "comparison_setups",
    (
        Field("model_id", "id", references="models.model_id"),
        Field("method_id", "id", references="methods.method_id"),
        Field("scale", "str", allowed=(*COMPARISON_SCALES, "advice")),
        Field("server_id", "id", required=False, references="servers.server_id"),
        _ref(),
    ),
    ("model_id", "method_id", "scale"),
)

# Techniques a measured row may use that the first-principles estimator does not model.
EXTRA_TECHNIQUES = (
    "torch_compile",
    "frozen_fp32",
    "quantized_lm_head",
    "lora_lm_head",
    "fsdp_frozen_unsharded",
    "optimizer_in_backward",
    "activation_offloading",
    "unsloth_kernels",
    "dora",
    "ia3",
    "prompt_tuning",
    "double_quant",
    "lora_dropout",
    "quant_inputs_held",
    "unknown_lengths",
)
# The optimizers the first-principles estimator knows (first_principles.OPTIMIZER_STATES says what each stores).
OPTIMIZERS = (
    "adamw",
    "adamw_fused",
    "adamw_8bit",
    "paged_adamw",
    "paged_adamw_8bit",
    "sgd",
    "adamw_4bit",
    "adafactor",
    "lion",
    "lion_8bit",
)
# Loss implementations a measurement may name (memory.LOSSES) and the libraries it may come from.
MEASUREMENT_LOSSES = ("hf", "hf_legacy", "chunked", "fused", "unsloth")
FRAMEWORKS = (
    "transformers",
    "litgpt",
    "torchtune",
    "llama_factory",
    "unsloth",
    "axolotl",
    "deepspeed",
    "ms_swift",
    "other",
)
# Adapters without a rank: their rows leave lora_rank and lora_targets empty although the method is lora.
RANKLESS_ADAPTERS = ("ia3", "prompt_tuning")
_TECHNIQUE = f"(?:{'|'.join(EXTRA_TECHNIQUES)})"

MEASUREMENTS = Table(
    "measurements",
    (
        Field("measurement_id", "id"),
        Field(
            "anchor_row",
            "int",
            required=False,
            min=1,
            max=1000,
            unitless=True,
        ),
        Field("model_id", "id", references="models.model_id"),
        Field("method_id", "id", references="methods.method_id"),
        Field(
            "optimizer",
            "str",
            allowed=OPTIMIZERS,
        ),
        Field(
            "seq_len",
            "int",
            unit="tokens",
            min=1,
            max=10_000_000,
        ),
        Field(
            "micro_batch",
            "int",
            min=1,
            max=100_000,
            unitless=True,
        ),
        Field(
            "grad_accum",
            "int",
            min=1,
            max=100_000,
            unitless=True,
        ),
        Field("gpus", "int", unit="count", min=1, max=100_000),
        Field(
            "sharding",
            "str",
            allowed=("ddp", "zero1", "zero2", "zero3"),
        ),
        Field(
            "offload",
            "str",
            allowed=("none", "optimizer", "full"),
        ),
        Field("grad_checkpointing", "bool"),
        Field(
            "flash_attention",
            "bool",
        ),
        Field(
            "lora_rank",
            "int",
            required=False,
            min=1,
            max=65_536,
            unitless=True,
        ),
        Field(
            "lora_targets",
            "str",
            required=False,
            allowed=("qv", "qkv", "attention", "all"),
        ),
        Field(
            "loss",
            "str",
            allowed=MEASUREMENT_LOSSES,
        ),
        Field(
            "framework",
            "str",
            allowed=FRAMEWORKS,
        ),
        Field(
            "extra_techniques",
            "str",
            required=False,
            pattern=f"^{_TECHNIQUE}(?:,{_TECHNIQUE})*$",
            pattern_rule=message("rules.techniques", values=", ".join(EXTRA_TECHNIQUES)),
        ),
        Field(
            "gpu_id",
            "id",
            required=False,
            references="gpus.gpu_id",
        ),
        Field(
            "outcome",
            "str",
            allowed=("value", "oom"),
        ),
        Field(
            "measured_value",
            "float",
            unit="gb_or_gib",
            required=False,
            min=0.01,
            max=100_000,
        ),
        Field(
            "measured_unit",
            "str",
            allowed=("GB", "GiB"),
        ),
        Field(
            "metric",
            "str",
            allowed=("allocated", "reserved", "reserved_delta", "active", "nvidia_smi", "unknown", "fits_on"),
        ),
        Field(
            "note_ru",
            "str",
            max_length=800,
        ),
        _ref(),
    ),
    ("measurement_id",),
)

# Published measured training throughput (sources/throughput.csv): what the time model is checked against.
THROUGHPUT_LINKS = ("one_card", "nvswitch", "nvlink-bridge", "pcie")
THROUGHPUT_FRAMEWORKS = ("torchtune", "torchtitan", "nemo_automodel", "transformers", "deepspeed", "megatron", "other")
# What a measured run used that the time model does not model (it is then left out of the accuracy figures
# when `in_accuracy` is false, and named beside the error otherwise).
THROUGHPUT_TECHNIQUES = (
    "torch_compile",
    "chunked_loss",
    "fused_loss",
    "activation_offloading",
    "cpu_offload",
    "optimizer_in_backward",
    "adamw_8bit",
    "expert_parallel",
    "tensor_parallel",
    "pipeline_parallel",
    "context_parallel",
    "fp8_all_gather",
    "unpadded_unknown",
)
_THROUGHPUT_TECHNIQUE = f"(?:{'|'.join(THROUGHPUT_TECHNIQUES)})"

THROUGHPUT = Table(
    "throughput",
    (
        Field("run_id", "id"),
        Field("model_id", "id", references="models.model_id"),
        Field("method_id", "id", references="methods.method_id"),
        Field("precision", "str", allowed=("bf16", "fp8")),
        Field("gpu_id", "id", references="gpus.gpu_id"),
        Field("gpus", "int", unit="count", min=1, max=100_000),
        Field("nodes", "int", unit="count", min=1, max=10_000),
        Field("link", "str", allowed=THROUGHPUT_LINKS),
        Field("network_gbps", "float", unit="gbit_per_s", required=False, min=1, max=1_000_000),
        Field("sharding", "str", allowed=("ddp", "zero1", "zero2", "zero3")),
        Field("micro_batch", "int", min=1, max=100_000, unitless=True),
        Field("grad_accum", "int", min=1, max=100_000, unitless=True),
        Field("seq_len", "int", unit="tokens", min=1, max=10_000_000),
        Field("checkpointing", "str", allowed=("none", "selective", "full")),
        Field("framework", "str", allowed=THROUGHPUT_FRAMEWORKS),
        Field(
            "extra_techniques",
            "str",
            required=False,
            pattern=f"^{_THROUGHPUT_TECHNIQUE}(?:,{_THROUGHPUT_TECHNIQUE})*$",
            pattern_rule=message("rules.techniques", values=", ".join(THROUGHPUT_TECHNIQUES)),
        ),
        Field("tokens_per_second", "float", unit="tokens_per_s", min=0.001, max=1e9),
        Field("per", "str", allowed=("gpu", "job")),
        Field("in_accuracy", "bool"),
        Field("note_ru", "str", max_length=800),
        _ref(),
    ),
    ("run_id",),
)

TYPICAL_SETUP = Table(
    "typical_setup",
    (
        Field("setting_id", "id"),
        Field("value", "str", max_length=40),
        Field("description_ru", "str", max_length=600),
        _ref(),
    ),
    ("setting_id",),
)

SOURCE_TABLES: tuple[Table, ...] = (
    REFERENCES,
    CONSTANTS,
    METHODS,
    MEMORY_ANCHORS,
    MODELS,
    GPUS,
    SERVERS,
    LEGACY_GPU_COUNTS,
    LEGACY_OFFERS,
    LEGACY_OFFER_JOBS,
    MEASUREMENTS,
    TYPICAL_SETUP,
    COMPARISON_SETUPS,
    THROUGHPUT,
)

ESTIMATES = Table(
    "estimates",
    (
        Field("model_id", "id", references="models.model_id"),
        Field("params_b", "float", unit="billion"),
        Field("method_id", "id", references="methods.method_id"),
        Field("memory_gb", "float", unit="gb"),
        Field("memory_low_gb", "float", unit="gb"),
        Field("memory_high_gb", "float", unit="gb"),
        Field(
            "theoretical_min_gb",
            "float",
            unit="gb",
            required=False,
        ),
        Field(
            "basis",
            "str",
            allowed=("anchor", "interpolated", "below_range", "extrapolated"),
        ),
        Field(
            "extrapolated",
            "bool",
        ),
    ),
    ("model_id", "method_id"),
    kind="derived",
)

GPU_FIT = Table(
    "gpu_fit",
    (
        Field("model_id", "id", references="models.model_id"),
        Field("method_id", "id", references="methods.method_id"),
        Field("gpu_id", "id", references="gpus.gpu_id"),
        Field("gpu_memory_gb", "float", unit="gb"),
        Field("memory_gb", "float", unit="gb"),
        Field("memory_high_gb", "float", unit="gb"),
        Field("cards", "int", unit="count"),
        Field(
            "cards_high",
            "int",
            unit="count",
        ),
        Field(
            "nvlink_need",
            "str",
            allowed=("no", "recommended", "required", "pcie_only", "other_link"),
        ),
    ),
    ("model_id", "method_id", "gpu_id"),
    kind="derived",
)

SERVER_FIT = Table(
    "server_fit",
    (
        Field("model_id", "id", references="models.model_id"),
        Field("method_id", "id", references="methods.method_id"),
        Field("server_id", "id", references="servers.server_id"),
        Field("server_memory_gb", "float", unit="gb"),
        Field("memory_gb", "float", unit="gb"),
        Field("memory_high_gb", "float", unit="gb"),
        Field(
            "fit",
            "str",
            allowed=("yes", "estimate_only", "no"),
        ),
        Field("servers_needed", "int", unit="count"),
        Field(
            "servers_needed_high",
            "int",
            unit="count",
        ),
        Field(
            "price_rub_month",
            "int",
            unit="rub_per_month",
            required=False,
        ),
    ),
    ("model_id", "method_id", "server_id"),
    kind="derived",
)


def _part(name: str) -> Field:
    return Field(f"{name}_gb", "float", unit="gb")


def _setup_fields() -> tuple[Field, ...]:
    """The training setup columns shared by the estimator's tables."""
    return (
        Field(
            "optimizer",
            "str",
            allowed=OPTIMIZERS,
        ),
        Field("seq_len", "int", unit="tokens"),
        Field("micro_batch", "int", unit="count"),
        Field("gpus", "int", unit="count"),
        Field(
            "sharding",
            "str",
            allowed=("ddp", "zero1", "zero2", "zero3"),
        ),
        Field("grad_checkpointing", "bool"),
        Field("flash_attention", "bool"),
    )


MEMORY_BREAKDOWN = Table(
    "memory_breakdown",
    (
        Field("model_id", "id", references="models.model_id"),
        Field("method_id", "id", references="methods.method_id"),
        *_setup_fields(),
        Field("lora_rank", "int", required=False, unitless=True),
        Field(
            "lora_targets",
            "str",
            required=False,
            allowed=("qv", "qkv", "attention", "all"),
        ),
        Field("trainable_params", "float", unit="count"),
        _part("weights"),
        _part("gradients"),
        _part("optimizer"),
        _part("activations"),
        _part("logits"),
        _part(
            "buffers",
        ),
        _part("overhead"),
        _part("allocated"),
        _part("reserved"),
        _part("total"),
        Field(
            "peak_phase",
            "str",
            allowed=("backward", "optimizer_step"),
        ),
        _part("table_rule"),
    ),
    ("model_id", "method_id"),
    kind="derived",
)

ESTIMATORS = ("first_principles", "table_rule", "rule_of_thumb", "deepspeed")  # the four ways to estimate
# The same four in the order the comparison article shows them (and its table's columns).
ESTIMATORS_ORDER = ("table_rule", "rule_of_thumb", "deepspeed", "first_principles")

CALIBRATION = Table(
    "calibration",
    (
        Field("measurement_id", "id", references="measurements.measurement_id"),
        Field("model_id", "id", references="models.model_id"),
        Field("method_id", "id", references="methods.method_id"),
        Field(
            "gpu_id",
            "id",
            references="gpus.gpu_id",
            required=False,
        ),
        Field("gpu_memory_gb", "float", unit="gb", required=False),
        Field("outcome", "str", allowed=("value", "oom")),
        Field(
            "metric",
            "str",
            allowed=("allocated", "reserved", "reserved_delta", "active", "nvidia_smi", "unknown", "fits_on"),
        ),
        Field(
            "metric_kind",
            "str",
            allowed=("allocated", "reserved", "card", "fits_on"),
        ),
        Field("framework", "str", allowed=FRAMEWORKS),
        Field(
            "sharding",
            "str",
            allowed=("ddp", "zero1", "zero2", "zero3"),
        ),
        Field("loss", "str", allowed=MEASUREMENT_LOSSES),
        Field("measured_value", "float", required=False, unitless=True),
        Field("measured_unit", "str", allowed=("GB", "GiB")),
        Field("measured_gb", "float", unit="gb", required=False),
        *(
            f
            for key in ESTIMATORS
            for f in (
                Field(
                    f"{key}_gb",
                    "float",
                    unit="gb",
                    required=False,
                ),
                Field(
                    f"{key}_error",
                    "float",
                    unit="share",
                    required=False,
                ),
            )
        ),
        # The first-principles prediction out of sample: every fitted constant fitted on the other sources only.
        Field("first_principles_loso_gb", "float", unit="gb", required=False),
        Field("first_principles_loso_error", "float", unit="share", required=False),
        Field(
            "predicts_oom",
            "bool",
            required=False,
        ),
        Field("in_summary", "bool"),
        Field(
            "excluded_because",
            "str",
            required=False,
        ),
        _ref(),
    ),
    ("measurement_id",),
    kind="derived",
)

CALIBRATION_SUMMARY = Table(
    "calibration_summary",
    (
        Field("estimator", "id", allowed=ESTIMATORS),
        Field("sort_order", "int", unitless=True),
        Field("rows", "int", unit="count"),
        Field("median_abs_error", "float", unit="share", required=False),
        Field(
            "within_25",
            "float",
            unit="share",
            required=False,
        ),
        Field(
            "median_error",
            "float",
            unit="share",
            required=False,
        ),
    ),
    ("estimator",),
    kind="derived",
)

_STATS = (
    Field("rows", "int", unit="count"),
    Field("median_abs_error", "float", unit="share", required=False),
    Field(
        "within_25",
        "float",
        unit="share",
        required=False,
    ),
    Field(
        "median_error",
        "float",
        unit="share",
        required=False,
    ),
)

CALIBRATION_BREAKDOWN = Table(
    "calibration_breakdown",
    (
        Field("estimator", "id", allowed=ESTIMATORS),
        Field(
            "dimension",
            "str",
            allowed=("metric_kind", "method", "sharding", "framework", "framework_method", "loss"),
        ),
        Field(
            "group_id",
            "id",
        ),
        Field("sort_order", "int", unitless=True),
        *_STATS,
    ),
    ("estimator", "dimension", "group_id"),
    kind="derived",
)

ESTIMATOR_RANGE = Table(
    "estimator_range",
    (
        Field(
            "scope",
            "id",
            allowed=("all", "allocated", "reserved", "card", "fits_on", "card_one_gpu", "card_sharded"),
        ),
        Field("sort_order", "int", unitless=True),
        Field("rows", "int", unit="count"),
        Field(
            "error_p10",
            "float",
            unit="share",
            required=False,
        ),
        Field("error_median", "float", unit="share", required=False),
        Field(
            "error_p90",
            "float",
            unit="share",
            required=False,
        ),
        Field(
            "low_factor",
            "float",
            required=False,
            unitless=True,
        ),
        Field(
            "high_factor",
            "float",
            required=False,
            unitless=True,
        ),
    ),
    ("scope",),
    kind="derived",
)

# The first-principles estimator in sample (constants.csv as it is) and out of sample (leave one source out), per
# group: what the accuracy page shows side by side and what a plan's headroom can take its factors from.
CALIBRATION_OUT_OF_SAMPLE = Table(
    "calibration_out_of_sample",
    (
        Field("dimension", "str", allowed=("all", "metric_kind", "method", "sharding", "loss")),
        Field("group_id", "id"),
        Field("sort_order", "int", unitless=True),
        Field("rows", "int", unit="count"),
        Field("in_sample_median_abs_error", "float", unit="share", required=False),
        Field("in_sample_within_25", "float", unit="share", required=False),
        Field("in_sample_median_error", "float", unit="share", required=False),
        Field("out_of_sample_median_abs_error", "float", unit="share", required=False),
        Field("out_of_sample_within_25", "float", unit="share", required=False),
        Field("out_of_sample_median_error", "float", unit="share", required=False),
        Field("out_of_sample_error_p10", "float", unit="share", required=False),
        Field("out_of_sample_error_p90", "float", unit="share", required=False),
        Field("low_factor", "float", required=False, unitless=True),
        Field("high_factor", "float", required=False, unitless=True),
    ),
    ("dimension", "group_id"),
    kind="derived",
)

ESTIMATOR_CONSTANTS_TABLE = Table(
    "estimator_constants",
    (
        Field("constant_id", "id", references="constants.constant_id"),
        Field("value", "float", unitless=True),
        Field(
            "basis",
            "str",
            allowed=("derived", "assumed", "fitted"),
        ),
        Field(
            "fitted_on",
            "str",
            required=False,
        ),
        Field("fit_rows", "int", unit="count", required=False),
        Field(
            "refit_value",
            "float",
            required=False,
            unitless=True,
        ),
        Field(
            "refit_median_abs_error",
            "float",
            unit="share",
            required=False,
        ),
    ),
    ("constant_id",),
    kind="derived",
)

PRETRAINING = Table(
    "pretraining",
    (
        Field("model_id", "id", references="models.model_id"),
        Field("gpu_id", "id", references="gpus.gpu_id"),
        Field("tokens", "float", unit="count"),
        Field("flops", "float", unit="flop"),
        Field("target_days", "float", unit="days"),
        Field("efficiency", "float", unit="share"),
        Field(
            "cards_for_memory",
            "int",
            unit="count",
            required=False,
        ),
        Field("cards_for_time", "int", unit="count"),
        Field("cards", "int", unit="count", required=False),
        Field(
            "memory_per_card_gb",
            "float",
            unit="gb",
            required=False,
        ),
        Field("days", "float", unit="days", required=False),
        Field("days_compute", "float", unit="days", required=False),
        Field("days_communication", "float", unit="days", required=False),
        Field(
            "server_id",
            "id",
            references="servers.server_id",
            required=False,
        ),
        Field("servers", "int", unit="count", required=False),
        Field("cost_rub", "float", unit="rub", required=False),
        Field("seed_cards_text", "str", required=False),
    ),
    ("model_id", "gpu_id"),
    kind="derived",
)

RECOMMENDATIONS = Table(
    "recommendations",
    (
        Field("model_id", "id", references="models.model_id"),
        Field("method_id", "id", references="methods.method_id"),
        Field("rank", "int", unitless=True),
        Field("server_id", "id", references="servers.server_id"),
        Field("recommended", "bool"),
        Field(
            "reason",
            "id",
            allowed=("one_chassis", "several_chassis", "tight", "needs_network", "does_not_fit"),
        ),
        Field("tied_on_cost", "bool"),
        Field("servers_count", "int", unit="count", required=False),
        Field("gpus_per_job", "int", unit="count", required=False),
        Field("gpu_id", "id", references="gpus.gpu_id"),
        Field("gpus_per_server", "int", unit="count"),
        Field(
            "per_gpu_memory_gb",
            "float",
            unit="gb",
            required=False,
        ),
        Field("per_gpu_memory_low_gb", "float", unit="gb", required=False),
        Field("per_gpu_memory_high_gb", "float", unit="gb", required=False),
        Field("memory_reserve_gb", "float", unit="gb", required=False),
        Field("headroom_gb", "float", unit="gb", required=False),
        Field("gpu_memory_gb", "float", unit="gb"),
        Field(
            "link",
            "str",
            required=False,
        ),
        Field("gpu_has_nvlink", "bool"),
        Field("tokens", "float", unit="count"),
        Field(
            "hours",
            "float",
            unit="hours",
            required=False,
        ),
        Field("hours_compute", "float", unit="hours", required=False),
        Field("hours_communication", "float", unit="hours", required=False),
        Field("hours_low", "float", unit="hours", required=False),
        Field("hours_high", "float", unit="hours", required=False),
        Field(
            "time_link",
            "str",
            required=False,
            allowed=("one_card", "nvswitch", "nvlink-bridge", "pcie", "between_servers"),
        ),
        Field("time_measured", "bool", required=False),
        Field("efficiency", "float", unit="share", required=False),
        Field(
            "cost_basis",
            "id",
            required=False,
            allowed=("hour", "month", "on_request"),
        ),
        Field("months_billed", "int", unit="months", required=False),
        Field("cost_rub", "float", unit="rub", required=False),
        Field("price_rub_month", "int", unit="rub_per_month", required=False),
        Field("price_rub_hour", "int", unit="rub_per_hour", required=False),
    ),
    ("model_id", "method_id", "server_id"),
    kind="derived",
)

SERVER_MEMORY = Table(
    "server_memory",
    (
        Field("server_id", "id", references="servers.server_id"),
        Field("gpu_id", "id", references="gpus.gpu_id"),
        Field("gpu_count", "int", unit="count"),
        Field("gpu_memory_gb", "float", unit="gb"),
        Field("server_memory_gb", "float", unit="gb"),
        Field("price_rub_month", "int", unit="rub_per_month", required=False),
        Field("rub_per_gb_month", "float", unit="rub_per_gb_month", required=False),
    ),
    ("server_id",),
    kind="derived",
)


MEMORY_CURVE = Table(
    "memory_curve",
    (
        Field("method_id", "id", references="methods.method_id"),
        Field("params_b", "float", unit="billion"),
        Field("memory_gb", "float", unit="gb"),
        Field("memory_low_gb", "float", unit="gb"),
        Field("memory_high_gb", "float", unit="gb"),
        Field("basis", "str", allowed=("anchor", "interpolated", "below_range", "extrapolated")),
        Field("extrapolated", "bool"),
        Field("on_chart", "bool"),
        Field("in_table", "bool"),
    ),
    ("method_id", "params_b"),
    kind="derived",
)

# The earlier article's practical advice, each applied alone (combine.advice_setups).
ADVICE = ("base", "grad_checkpointing", "zero1", "zero2", "zero3", "fp8", "micro_batch", "grad_accum")


def _comparison_setup_tail() -> tuple[Field, ...]:
    return (
        Field("loss", "str", allowed=MEASUREMENT_LOSSES),
        Field("lora_rank", "int", required=False, unitless=True),
        Field("lora_targets", "str", required=False, allowed=("qv", "qkv", "attention", "all")),
    )


COMPARISON = Table(
    "comparison",
    (
        Field("model_id", "id", references="models.model_id"),
        Field("method_id", "id", references="methods.method_id"),
        Field("scale", "str", allowed=COMPARISON_SCALES),
        Field("server_id", "id", required=False, references="servers.server_id"),
        *_setup_fields(),
        *_comparison_setup_tail(),
        *(
            Field(f"{e}_gb", "float", unit="gb", required=e in ("table_rule", "first_principles"))
            for e in ESTIMATORS_ORDER
        ),
        Field("table_rule_extrapolated", "bool"),
        *(_part(p) for p in ("weights", "gradients", "optimizer", "activations", "logits", "buffers", "overhead")),
        Field("first_principles_bytes_per_param", "float", unit="bytes_per_param"),
        Field("deepspeed_bytes_per_param", "float", unit="bytes_per_param"),
        Field("first_principles_to_table_rule", "float", unitless=True),
        Field("first_principles_to_rule_of_thumb", "float", required=False, unitless=True),
        Field("first_principles_to_deepspeed", "float", required=False, unitless=True),
        Field("measurement_id", "id", required=False, references="measurements.measurement_id"),
    ),
    ("model_id", "method_id", "scale", "server_id"),
    kind="derived",
)

COMPARISON_ADVICE = Table(
    "comparison_advice",
    (
        Field("model_id", "id", references="models.model_id"),
        Field("method_id", "id", references="methods.method_id"),
        Field("server_id", "id", references="servers.server_id"),
        Field("advice", "str", allowed=ADVICE),
        *_setup_fields()[:3],
        Field("grad_accum", "int", unit="count"),
        *_setup_fields()[3:],
        *_comparison_setup_tail(),
        Field("fp8", "bool"),
        _part("total"),
        _part("activations"),
        Field("total_change", "float", unit="share", required=False),
        Field("activations_change", "float", unit="share", required=False),
        Field("peak_phase", "str", allowed=("backward", "optimizer_step")),
    ),
    ("model_id", "method_id", "server_id", "advice"),
    kind="derived",
)

TIME_CALIBRATION = Table(
    "time_calibration",
    (
        Field("run_id", "id", references="throughput.run_id"),
        Field("source", "str"),
        Field("gpu_id", "id", references="gpus.gpu_id"),
        Field("method_family", "str", allowed=("full", "lora", "qlora")),
        Field("link", "str", allowed=(*THROUGHPUT_LINKS, "between_servers")),
        Field("in_accuracy", "bool"),
        Field("measured_tokens_per_second_per_gpu", "float", unit="tokens_per_s"),
        Field("predicted_tokens_per_second_per_gpu", "float", unit="tokens_per_s"),
        Field("communication_share", "float", unit="share"),
        Field("error", "float", unit="share"),
        Field("error_fitted", "float", unit="share", required=False),
        Field("error_fitted_out_of_sample", "float", unit="share", required=False),
    ),
    ("run_id",),
    kind="derived",
)

TIME_SUMMARY = Table(
    "time_summary",
    (
        Field("reading", "id", allowed=("declared", "fitted", "out_of_sample")),
        Field("scope", "id", allowed=("all", "gpu_id", "method_family", "link")),
        Field("value", "str"),
        Field("sort_order", "int", unitless=True),
        Field("rows", "int", unit="count"),
        Field("median_abs_error", "float", unit="share", required=False),
        Field("within_25", "float", unit="share", required=False),
        Field("median_error", "float", unit="share", required=False),
        Field("hours_low_factor", "float", unitless=True, required=False),
        Field("hours_high_factor", "float", unitless=True, required=False),
        Field("speed_factor", "float", unitless=True, required=False),
    ),
    ("reading", "scope", "value"),
    kind="derived",
)

DERIVED_TABLES: tuple[Table, ...] = (
    ESTIMATES,
    GPU_FIT,
    SERVER_FIT,
    MEMORY_BREAKDOWN,
    CALIBRATION,
    CALIBRATION_SUMMARY,
    CALIBRATION_BREAKDOWN,
    ESTIMATOR_RANGE,
    CALIBRATION_OUT_OF_SAMPLE,
    ESTIMATOR_CONSTANTS_TABLE,
    PRETRAINING,
    RECOMMENDATIONS,
    SERVER_MEMORY,
    MEMORY_CURVE,
    COMPARISON,
    COMPARISON_ADVICE,
    TIME_CALIBRATION,
    TIME_SUMMARY,
)
ALL_TABLES: tuple[Table, ...] = SOURCE_TABLES + DERIVED_TABLES

# Constants the first-principles estimator (pipeline/estimate/first_principles.py) reads.
ESTIMATOR_CONSTANTS = (
    "activation_bytes",
    "norm_input_bytes",
    "eager_attention_score_bytes",
    "logits_bytes",
    "logits_chunked_bytes",
    "logits_inplace_bytes",
    "dropout_mask_bytes",
    "quant_block_size",
    "quant_scale_bytes",
    "double_quant_scale_bytes",
    "double_quant_block_size",
    "adapter_bytes",
    "zero3_gather_bytes_per_param",
    "offload_cpu_buffer_factor",
    "cuda_context_gb",
    "logits_legacy_bytes",
    "loss_chunks",
    "fused_loss_bytes_per_hidden",
    "zero3_prefetch_units",
    "allocator_fragmentation",
    "nccl_buffers_gb",
)


@dataclass(frozen=True)
class Bounds:
    """The values a constant of constants.csv may take.

    Outside gt/ge … lt/le the value is impossible (an error); outside `usual` it is possible
    but rare (a warning). `integer`: a whole number (a count, a size, a 0/1 switch).
    """

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    integer: bool = False
    usual: tuple[float, float] | None = None


# Every constant the rules, the estimator and the pages read, with the values it may take: one line
# per constant. Each must be present in constants.csv; a new constant is declared here.
CONSTANT_BOUNDS: dict[str, Bounds] = {
    "range_low_factor": Bounds(gt=0, lt=1, usual=(0.5, 0.95)),
    "anchor_size_tolerance": Bounds(ge=0, lt=0.2, usual=(0, 0.05)),
    "range_high_factor": Bounds(gt=1, le=10, usual=(1.05, 2)),
    "adamw_weight_bytes": Bounds(gt=0, le=8),
    "adamw_grad_bytes": Bounds(gt=0, le=8),
    "adamw_optimizer_bytes": Bounds(gt=0, le=32),
    "train_flops_per_param_token": Bounds(gt=0, le=20, usual=(6, 8)),
    "forward_flops_per_param_token": Bounds(gt=0, le=10, usual=(2, 2)),
    "legacy_full_bytes_per_param": Bounds(gt=0, le=100),
    "legacy_overhead_low": Bounds(ge=0, le=5),
    "legacy_overhead_high": Bounds(ge=0, le=5),
    "legacy_lora_bytes_per_param": Bounds(gt=0, le=100),
    "legacy_qlora_7b_gb": Bounds(gt=0, le=10_000),
    "legacy_qlora_13b_gb": Bounds(gt=0, le=10_000),
    "legacy_qlora_70b_gb": Bounds(gt=0, le=10_000),
    "legacy_fp8_memory_factor": Bounds(gt=0, le=1),
    "checkpointing_saving_low": Bounds(ge=0, lt=1),
    "checkpointing_saving_high": Bounds(ge=0, lt=1),
    "checkpointing_slowdown_low": Bounds(ge=0, le=5),
    "checkpointing_slowdown_high": Bounds(ge=0, le=5),
    "stale_after_days": Bounds(ge=1, le=3650, integer=True, usual=(30, 730)),
    "hours_per_month": Bounds(ge=672, le=744),  # 28 to 31 days of 24 hours
    "activation_bytes": Bounds(gt=0, le=8),
    "norm_input_bytes": Bounds(gt=0, le=8),
    "eager_attention_score_bytes": Bounds(ge=0, le=16),
    "logits_bytes": Bounds(gt=0, le=32),
    "logits_chunked_bytes": Bounds(gt=0, le=32),
    "logits_inplace_bytes": Bounds(gt=0, le=32),
    "dropout_mask_bytes": Bounds(ge=0, le=8),
    "quant_block_size": Bounds(ge=1, le=4096, integer=True),
    "quant_scale_bytes": Bounds(ge=0, le=8),
    "double_quant_scale_bytes": Bounds(ge=0, le=8),
    "double_quant_block_size": Bounds(ge=1, le=65_536, integer=True),
    "adapter_bytes": Bounds(gt=0, le=8),
    "zero3_gather_bytes_per_param": Bounds(ge=0, le=32),
    "offload_cpu_buffer_factor": Bounds(ge=1, le=10),
    "cuda_context_gb": Bounds(ge=0, le=10),
    "logits_legacy_bytes": Bounds(gt=0, le=64),
    "loss_chunks": Bounds(ge=1, le=1024, integer=True),
    "fused_loss_bytes_per_hidden": Bounds(ge=0, le=64),
    "zero3_prefetch_units": Bounds(ge=0, le=16, integer=True),
    "allocator_fragmentation": Bounds(ge=0, le=2, usual=(0, 1)),
    "nccl_buffers_gb": Bounds(ge=0, le=10),
    "nccl_buffers_large_group_gb": Bounds(ge=0, le=10),
    "tokens_per_param": Bounds(gt=0, le=100_000, usual=(1, 5000)),
    "pretraining_target_days": Bounds(gt=0, le=3650),
    "comparison_accumulation_steps": Bounds(ge=2, le=1024, integer=True),
    "calibration_within": Bounds(gt=0, lt=1),
    # The training time model (pipeline/estimate/step_time.py):
    "achieved_efficiency": Bounds(gt=0, le=1, usual=(0.2, 0.6)),
    "achieved_efficiency_peak_tflops": Bounds(gt=0, le=100_000),
    "achieved_efficiency_low": Bounds(gt=0, le=1, usual=(0.2, 0.7)),
    "achieved_efficiency_low_peak_tflops": Bounds(gt=0, le=100_000),
    "lora_efficiency_factor": Bounds(gt=0, le=2, usual=(0.6, 1.2)),
    "qlora_efficiency_factor": Bounds(gt=0, le=2, usual=(0.5, 1.1)),
    "fp8_speedup": Bounds(ge=1, le=2),
    "compile_speedup": Bounds(ge=1, le=2),
    "nvlink_busbw_share": Bounds(gt=0, le=1.2),
    "nvlink_bridge_busbw_share": Bounds(gt=0, le=1.2),
    "nvlink_bridge_max_gpus": Bounds(ge=2, le=64, integer=True),
    "pcie_busbw_gbs": Bounds(gt=0, le=256),
    "network_busbw_share": Bounds(gt=0, le=1.2),
    "comm_overlap": Bounds(ge=0, le=1),
    "network_port_gbps_infiniband_ndr": Bounds(gt=0, le=10_000),
    "network_port_gbps_infiniband_hdr": Bounds(gt=0, le=10_000),
    "network_port_gbps_roce_400": Bounds(gt=0, le=10_000),
    "network_port_gbps_roce_200": Bounds(gt=0, le=10_000),
    "network_port_gbps_ethernet_100": Bounds(gt=0, le=10_000),
    "network_ports_per_gpu": Bounds(gt=0, le=16),
}

# Relations between constants: (left, operator, right), each must hold.
CONSTANT_RELATIONS: tuple[tuple[str, str, str], ...] = (
    ("range_low_factor", "<", "range_high_factor"),
    ("achieved_efficiency_low_peak_tflops", "<", "achieved_efficiency_peak_tflops"),
    ("forward_flops_per_param_token", "<", "train_flops_per_param_token"),
    ("legacy_overhead_low", "<=", "legacy_overhead_high"),
    ("checkpointing_saving_low", "<=", "checkpointing_saving_high"),
    ("checkpointing_slowdown_low", "<=", "checkpointing_slowdown_high"),
    ("legacy_qlora_7b_gb", "<=", "legacy_qlora_13b_gb"),
    ("legacy_qlora_13b_gb", "<=", "legacy_qlora_70b_gb"),
    ("logits_chunked_bytes", "<=", "logits_bytes"),
    ("logits_inplace_bytes", "<=", "logits_bytes"),
    ("logits_bytes", "<=", "logits_legacy_bytes"),
    ("double_quant_scale_bytes", "<=", "quant_scale_bytes"),
    ("nccl_buffers_gb", "<=", "nccl_buffers_large_group_gb"),
)

# Which constants of constants.csv each module reads (by name, in its code). tests/test_constants.py reads
# every module and fails when it names a constant its entry does not list; the templates' and articles'
# reads (`t.const("…")`, `constants.…`) are found by scanning them (validate.template_constants).
CONSTANT_READS: dict[str, tuple[str, ...]] = {
    "pipeline.combine": ("calibration_within", "comparison_accumulation_steps"),
    "pipeline.estimate.calibration": (
        "activation_bytes",
        "adapter_bytes",
        "allocator_fragmentation",
        "cuda_context_gb",
        "double_quant_block_size",
        "double_quant_scale_bytes",
        "dropout_mask_bytes",
        "eager_attention_score_bytes",
        "forward_flops_per_param_token",
        "fused_loss_bytes_per_hidden",
        "legacy_full_bytes_per_param",
        "legacy_lora_bytes_per_param",
        "legacy_qlora_13b_gb",
        "legacy_qlora_70b_gb",
        "legacy_qlora_7b_gb",
        "logits_bytes",
        "logits_chunked_bytes",
        "logits_inplace_bytes",
        "logits_legacy_bytes",
        "loss_chunks",
        "nccl_buffers_gb",
        "norm_input_bytes",
        "offload_cpu_buffer_factor",
        "quant_block_size",
        "quant_scale_bytes",
        "train_flops_per_param_token",
        "zero3_gather_bytes_per_param",
        "zero3_prefetch_units",
    ),
    "pipeline.estimate.first_principles": (
        *ESTIMATOR_CONSTANTS,
        "forward_flops_per_param_token",
        "train_flops_per_param_token",
    ),
    "pipeline.estimate.table_rule": (
        "adamw_grad_bytes",
        "anchor_size_tolerance",
        "adamw_optimizer_bytes",
        "adamw_weight_bytes",
        "range_high_factor",
        "range_low_factor",
    ),
    "pipeline.estimate.training": (
        "hours_per_month",
        "pretraining_target_days",
        "tokens_per_param",
    ),
    "pipeline.estimate.recommend": ("nccl_buffers_gb", "nccl_buffers_large_group_gb"),
    "pipeline.estimate.step_time": (
        "achieved_efficiency",
        "achieved_efficiency_low",
        "achieved_efficiency_low_peak_tflops",
        "achieved_efficiency_peak_tflops",
        "comm_overlap",
        "compile_speedup",
        "forward_flops_per_param_token",
        "fp8_speedup",
        "lora_efficiency_factor",
        "network_busbw_share",
        "nvlink_bridge_busbw_share",
        "nvlink_bridge_max_gpus",
        "nvlink_busbw_share",
        "pcie_busbw_gbs",
        "qlora_efficiency_factor",
        "train_flops_per_param_token",
        "network_port_gbps_infiniband_ndr",
        "network_port_gbps_infiniband_hdr",
        "network_port_gbps_roce_400",
        "network_port_gbps_roce_200",
        "network_port_gbps_ethernet_100",
        "network_ports_per_gpu",
    ),
    "pipeline.words": ("calibration_within", "range_high_factor", "range_low_factor"),
    "pipeline.render.calculator_json": (
        "adamw_grad_bytes",
        "anchor_size_tolerance",
        "adamw_optimizer_bytes",
        "adamw_weight_bytes",
        "forward_flops_per_param_token",
        "hours_per_month",
        "nccl_buffers_large_group_gb",
        "range_high_factor",
        "range_low_factor",
        "train_flops_per_param_token",
    ),
    "pipeline.render.views.articles": (
        "adamw_grad_bytes",
        "anchor_size_tolerance",
        "adamw_optimizer_bytes",
        "adamw_weight_bytes",
        "legacy_full_bytes_per_param",
        "legacy_overhead_high",
        "legacy_overhead_low",
    ),
    "pipeline.render.views.comparison": (
        "calibration_within",
        "comparison_accumulation_steps",
        "legacy_fp8_memory_factor",
        "legacy_full_bytes_per_param",
        "legacy_lora_bytes_per_param",
        "legacy_overhead_high",
        "legacy_qlora_7b_gb",
        "zero3_gather_bytes_per_param",
    ),
    "pipeline.render.views.estimator": (
        "activation_bytes",
        "calibration_within",
        "cuda_context_gb",
        "logits_bytes",
        "quant_block_size",
        "zero3_gather_bytes_per_param",
    ),
    "pipeline.validate": ("stale_after_days",),
}

# Constants the rules read from sources/constants.csv; each must be present (with those the templates read).
REQUIRED_CONSTANTS = tuple(dict.fromkeys((*CONSTANT_BOUNDS, *(c for ids in CONSTANT_READS.values() for c in ids))))

# Dates in the sources are when a fact was checked: before this one, the year is a typo.
EARLIEST_DATE = dt.date(2000, 1, 1)

# Plausibility of the catalog, as warnings: a server's price per GB of GPU memory more than this
# many times above or below the median of the priced servers (with at least three priced).
PRICE_PER_GB_SPREAD = 5
# How far a number stated in a name ("2 × H100 80GB", a size in billions) may be from the row's figure.
NAME_TOLERANCE = 0.02

# Which server interconnect a GPU of each form factor can have.
SERVER_INTERCONNECTS = {
    "sxm": ("nvswitch",),
    "oam": ("infinity-fabric",),
    "pcie": ("pcie", "nvlink-bridge"),
}

# Characters a reader cannot see, which can make a cell display as something else (U+202E
# RIGHT-TO-LEFT OVERRIDE) or break a line: the Unicode categories Cc (control, TAB and line
# breaks included), Cf (format: soft hyphen, zero-width and joiner characters, direction marks,
# BOM), Zl and Zp (line and paragraph separators) and Co (private use), as of Unicode 14
# (tests/test_validate.py checks the list against Python's unicodedata). The spaces (Zs: NBSP,
# thin space) are not among them: load turns those in numbers into nothing.
HIDDEN_CHARACTERS = (
    "[\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u115f\\u1160\\u17b4\\u17b5\\u2800\\u3164\\ufe00-\\ufe0f\\uffa0\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u0890-\\u0891\\u08e2\\u180e"
    "\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u2064\\u2066-\\u206f\\ue000-\\uf8ff\\ufeff\\ufff9-\\ufffb"
    "\\U000110bd\\U000110cd\\U00013430-\\U00013438\\U0001bca0-\\U0001bca3\\U0001d173-\\U0001d17a"
    "\\U000e0001\\U000e0020-\\U000e007f\\U000e0100-\\U000e01ef\\U000f0000-\\U000ffffd\\U00100000-\\U0010fffd]"
)
TABLES_BY_NAME = {t.name: t for t in ALL_TABLES}


def ddl(table: Table, prefix: str = "", primary_key: bool = True) -> str:
    """CREATE TABLE statement for a table, with types, NOT NULL and (unless `primary_key` is False:
    the published file, which DuckDB 1.0 refuses with a key index) the primary key."""
    keyed = primary_key and not any(not table.field(k).required for k in table.primary_key)
    cols = []
    for f in table.fields:
        col = f"{f.name} {DUCKDB_TYPES[f.type]}"
        if f.required and (f.name not in table.primary_key or not primary_key):
            col += " NOT NULL"
        cols.append(col)
    if keyed:
        cols.append(f"PRIMARY KEY ({', '.join(table.primary_key)})")
    return f'CREATE TABLE "{prefix}{table.name}" ({", ".join(cols)})'
