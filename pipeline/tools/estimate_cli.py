"""`python -m pipeline estimate`: the first-principles memory of one training setup, from the command line.

Prints the per-GPU breakdown in GB, the table rule's estimate beside it, which GPUs and
catalog servers the setup fits, and (with --tokens) a draft training time and cost.
"""

from __future__ import annotations

import argparse
import json
import math
import stat
import sys
from dataclasses import asdict, replace
from pathlib import Path

from pipeline import lookups
from pipeline.estimate import first_principles, step_time, training
from pipeline.estimate.architecture import architecture_from_config, parameter_counts
from pipeline.problems import DataError, format_report

PARTS = (
    ("weights", "weights"),
    ("gradients", "gradients"),
    ("optimizer", "optimizer states"),
    ("activations", "activations"),
    ("logits", "logits and loss"),
    ("buffers", "buffers (ZeRO-3 units, dequantised weight, step temporaries)"),
)
PHASE_TEXT = {"backward": "the start of the backward pass", "optimizer_step": "the optimizer step"}

HELP = """\
Estimate the GPU memory of one fine-tuning setup from first principles, per GPU, in GB = 10^9
bytes: the parts alive at the peak (weights, gradients, optimizer states, activations, logits and
loss, buffers) and three readings of it: allocated (torch.cuda.max_memory_allocated), reserved (what
PyTorch's allocator holds, max_memory_reserved) and the whole card (as nvidia-smi shows it: what
must fit). The peak is the larger of two phases, the start of the backward pass and the optimizer
step; the report says which. Beside it the site's table rule, and the GPUs and catalog servers it fits.

Every unset option takes the site's typical setup (sources/typical_setup.csv, each default below);
every constant comes from sources/constants.csv. The validated catalog is cached in the user cache
folder ($GPU_FINETUNE_CACHE_DIR, else $XDG_CACHE_HOME/gpu-finetune-reference, else
~/.cache/gpu-finetune-reference), keyed by the sources' content: later calls skip validation.
--batch FILE.csv scores many setups at once: one setup per row, columns named like the options
(model, params_b, config, method, seq_len, ...), empty cells take the typical setup; the output is
a CSV with every part and reading per row.
"""

EXIT_CODES = """\
exit codes:
  0  estimated (no problem in the setup)
  1  an internal error (a bug)
  2  invalid sources, an impossible or unknown setup, a value out of range (--tokens over 10^15),
     or a --batch/--config file with bad rows
  3  a configuration problem (an unusable SOURCE_DATE_EPOCH)
  64 a wrong command line (an unknown option, a missing value)"""

# Columns a --batch file may have (a header row; every column but one of model/params_b is optional): the
# model's, then Setup's fields (torch.compile is refused, so it has none).
BATCH_COLUMNS = (
    "model",
    "params_b",
    "config",
    "vocab",
    "layers",
    "hidden",
    *first_principles.setup_fields(leave_out=("torch_compile",)),
)
BOOL_OPTIONS = first_principles.setup_fields_of_type("bool")
COUNT_OPTIONS = first_principles.setup_fields_of_type("int")


class UsageError(Exception):
    """A wrong option or value: the message says which and why (exit 2)."""


def _finite(text: str, name: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UsageError(f"{name} = {text!r}: not a number") from None
    if not math.isfinite(value):
        raise UsageError(f"{name} = {text!r}: must be a finite number")
    return value


def _positive(text: str, name: str) -> float:
    value = _finite(text, name)
    if value <= 0:
        raise UsageError(f"{name} = {text!r}: must be greater than 0")
    return value


MAX_TOKENS = 1e15  # a thousand times the largest training runs; more overflows the cost's integer columns


def _tokens(text: str, name: str) -> float:
    value = _positive(text, name)
    if value > MAX_TOKENS:
        raise UsageError(f"{name} = {text!r}: at most 1e15 tokens (a thousand times the largest training runs)")
    return value


def _count(text: str, name: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise UsageError(f"{name} = {text!r}: must be a whole number") from None
    if value < 1 or value > 100_000_000:
        raise UsageError(f"{name} = {text!r}: must be a whole number from 1 to 100 000 000")
    return value


def _share(text: str, name: str) -> float:
    value = _finite(text, name)
    if not 0 < value <= 1:
        raise UsageError(f"{name} = {text!r}: a share of the peak, greater than 0 and at most 1 (0.4 is 40 %)")
    return value


def _typed(kind):
    """An argparse type that raises argparse's own error (one line, no traceback; exit 2, see __main__.Parser)."""

    def convert(text: str):
        try:
            return kind(text, "value")
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("value = ")) from None

    convert.invalid_data = True  # a refused value exits 2 (invalid input), not 64 (a wrong command line)
    return convert


def _typical_defaults(sources: Path = Path("sources")) -> dict[str, str]:
    """The typical setup as written in sources/typical_setup.csv, for --help (no validation)."""
    import csv

    try:
        with (sources / "typical_setup.csv").open(encoding="utf-8") as f:
            return {r["setting_id"]: r["value"] for r in csv.DictReader(f) if r.get("setting_id")}
    except (OSError, KeyError, ValueError):
        return {}


def _typical_note(typical: dict[str, str], setting: str) -> str:
    """The end of an option's help: its default in the typical setup."""
    value = typical.get(setting, "")
    return f" (default: {value}, the typical setup)" if value else " (default: the typical setup)"


def _add_model_options(e) -> None:
    """The sources, and the model: a catalog id, a size, or a config.json, with the shape overrides."""
    e.add_argument(
        "--sources", type=Path, default=Path("sources"), help="folder of source CSV files (default: sources)"
    )
    model = e.add_mutually_exclusive_group()
    model.add_argument("--model", metavar="ID", help="a model_id from sources/models.csv, e.g. llama-3-1-8b")
    model.add_argument(
        "--params-b",
        type=_typed(_positive),
        metavar="N",
        help="a model of N billion parameters not in the catalog: it borrows the shape (hidden size, heads, "
        "MLP width, vocabulary) of the catalog's dense model nearest in size, says which, and scales the "
        "number of layers; refused when that shape cannot come within 5 %% of N",
    )
    model.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="a Hugging Face config.json read from disk (nothing is downloaded): the exact architecture",
    )
    e.add_argument("--vocab", type=_typed(_count), help="override the borrowed vocabulary size (with --params-b)")
    e.add_argument(
        "--layers", type=_typed(_count), help="override the number of layers (the hidden size is then solved)"
    )
    e.add_argument(
        "--hidden",
        type=_typed(_count),
        help="override the hidden size (heads follow at the same head size; the MLP keeps its ratio)",
    )


def _add_run_options(e, typical: dict[str, str]) -> None:
    """The method, the optimizer, the batch shape and the cards with their sharding and offload."""
    e.add_argument(
        "--method",
        choices=first_principles.METHODS,
        default="full_amp",
        help="full_amp: all weights trained, bf16 compute with an fp32 master copy; full_bf16: all weights "
        "trained, everything in bf16; lora: a small adapter trained, the model frozen in 16 bits; "
        "qlora_8bit/4bit/2bit: the same with the frozen model compressed to 8, 4 or 2 bits (default: %(default)s)",
    )
    e.add_argument(
        "--optimizer",
        choices=first_principles.OPTIMIZERS,
        help="adamw: PyTorch's AdamW, two states as wide as the weights it steps (fp32 beside a master copy, "
        "bf16 in full_bf16; foreach: one temporary of a state's size at the step); adamw_fused: the same in one "
        "kernel; adamw_8bit: two 1-byte states and a 4-byte scale per 256 (bitsandbytes or torchao); "
        "paged_adamw: bitsandbytes' two fp32 states, paged_adamw_8bit: its 8-bit states, both in CUDA unified "
        "memory outside PyTorch's allocator; sgd: one momentum state; adamw_4bit: torchao's two 4-bit states and "
        "a scale per 128; adafactor: transformers' factored second moment, about no bytes per parameter; lion: "
        "one momentum; lion_8bit: bitsandbytes' one 8-bit state" + _typical_note(typical, "optimizer"),
    )
    e.add_argument("--seq-len", type=_typed(_count), help="tokens per sequence" + _typical_note(typical, "seq_len"))
    e.add_argument(
        "--micro-batch", type=_typed(_count), help="sequences per GPU per step" + _typical_note(typical, "micro_batch")
    )
    e.add_argument(
        "--grad-accum",
        type=_typed(_count),
        help="micro-batches added up before each optimizer step: the gradients then stay through every "
        "backward pass" + _typical_note(typical, "grad_accum"),
    )
    e.add_argument("--gpus", type=_typed(_count), help="GPUs training together" + _typical_note(typical, "gpus"))
    e.add_argument(
        "--sharding",
        choices=first_principles.SHARDINGS,
        help="ddp: every GPU holds everything; zero1: optimizer states split across the GPUs; zero2: and the "
        "gradients; zero3 (= FSDP full shard): and the weights (default: ddp on one GPU, "
        f"{typical.get('multi_gpu_sharding', 'zero3')} on more, the typical setup)",
    )
    e.add_argument(
        "--offload",
        choices=first_principles.OFFLOADS,
        help="none; optimizer: optimizer states and fp32 gradients kept in the server's RAM (needs ZeRO); "
        "full: the weights too (needs zero3). Slower, frees GPU memory" + _typical_note(typical, "offload"),
    )


def _add_memory_options(e, typical: dict[str, str]) -> None:
    """Checkpointing, the attention kernel and the loss: what the forward and backward passes keep."""
    e.add_argument(
        "--grad-checkpointing",
        action=argparse.BooleanOptionalAction,
        help="keep only each layer's input and recompute the rest in the backward pass"
        + _typical_note(typical, "grad_checkpointing"),
    )
    e.add_argument(
        "--flash-attention",
        action=argparse.BooleanOptionalAction,
        help="FlashAttention-style attention that never stores the score matrix; --no-flash-attention: eager "
        "attention that stores a score per pair of tokens" + _typical_note(typical, "flash_attention"),
    )
    e.add_argument(
        "--loss",
        choices=first_principles.LOSSES,
        help="hf: Hugging Face's loss (bf16 logits upcast to fp32); hf_legacy: transformers before 4.49 (one "
        "more fp32 copy, of the shifted logits); chunked: torchtune's chunked cross-entropy; fused: the output layer and the loss in "
        "one kernel (Liger), no full logits; unsloth: Unsloth's cross-entropy kernel (bf16 logits only, the gradient "
        "written into them in place)" + _typical_note(typical, "loss"),
    )
    e.add_argument("--chunked-loss", dest="loss", action="store_const", const="chunked", help="same as --loss chunked")


def _add_lora_options(e, typical: dict[str, str]) -> None:
    """The adapter (LoRA) and the quantised base (QLoRA)."""
    e.add_argument("--lora-rank", type=_typed(_count), help="LoRA rank r" + _typical_note(typical, "lora_rank"))
    e.add_argument(
        "--lora-targets",
        choices=first_principles.LORA_TARGETS,
        help="which layers get an adapter: qv (query and value), qkv (and key), attention (q, k, v, o), all "
        "(every linear layer, MLP included)" + _typical_note(typical, "lora_targets"),
    )
    e.add_argument(
        "--lora-dropout",
        action=argparse.BooleanOptionalAction,
        help="dropout on the adapter's input (LitGPT's default): keeps a copy of each adapted layer's input"
        + _typical_note(typical, "lora_dropout"),
    )
    e.add_argument("--lora-lm-head", action="store_true", help="an adapter on the output layer too (default: off)")
    e.add_argument(
        "--frozen-fp32",
        action="store_true",
        help="LoRA/QLoRA with the frozen, not quantised weights in fp32: a model loaded without torch_dtype, or "
        "PEFT's prepare_model_for_kbit_training (default: off)",
    )
    e.add_argument(
        "--quantized-lm-head",
        action="store_true",
        help="QLoRA that also quantises the output layer (LitGPT does; Hugging Face keeps it 16-bit) (default: off)",
    )
    e.add_argument(
        "--quant-inputs-held",
        action="store_true",
        help="QLoRA without checkpointing whose training loop holds the last micro-batch's logits or loss into the "
        "next one, on bitsandbytes before 0.43.2 (LitGPT's finetune scripts): the previous micro-batch's inputs of "
        "the 4-bit layers are still alive at the peak (default: off)",
    )
    e.add_argument(
        "--double-quant",
        action="store_true",
        help="QLoRA's double quantisation: block scales stored in 8 bits (about 0.4 bits per weight less) "
        "(default: off)",
    )


def _add_step_options(e) -> None:
    """The optimizer step in the backward pass, torch.compile (refused) and FP8."""
    e.add_argument(
        "--optimizer-in-backward",
        action="store_true",
        help="step each weight as soon as its gradient is ready (torchtune's optimizer_in_bwd): one gradient "
        "at a time; no accumulation (default: off)",
    )
    e.add_argument(
        "--torch-compile",
        action="store_true",
        help="refused with the reason: torch.compile's effect on memory is not predictable",
    )
    e.add_argument(
        "--fp8",
        action="store_true",
        help="FP8 matmuls (Transformer Engine) in full fine-tuning and LoRA on a 16-bit base (default: off)",
    )


def _add_output_options(e) -> None:
    """What to print: the table rule only, a draft time and cost, a batch of setups, JSON."""
    e.add_argument(
        "--table-rule",
        action="store_true",
        help="print only the site's table-rule estimate (anchor table, any size) for the model and method",
    )
    e.add_argument(
        "--tokens",
        type=_typed(_tokens),
        help="tokens to train on (x epochs), for a draft time and cost estimate",
    )
    e.add_argument("--gpu", metavar="ID", help="a gpu_id for the time estimate (default: the first GPU that fits)")
    e.add_argument("--server", metavar="ID", help="a server_id from sources/servers.csv for the cost (needs --tokens)")
    e.add_argument(
        "--utilization",
        type=_typed(_share),
        help="share of the GPU's dense BF16 peak the compute reaches, above 0 and at most 1, instead of the "
        "time model's measured efficiency (by card and method: constants.csv achieved_efficiency and its kin)",
    )
    e.add_argument(
        "--batch",
        type=Path,
        metavar="FILE.csv",
        help="score every row of a CSV file (columns: " + ", ".join(BATCH_COLUMNS) + "; empty cells take the "
        "typical setup) and print a CSV with every part and reading; a bad row is reported with its line and "
        "column (exit 2)",
    )
    e.add_argument("--json", action="store_true", help="print the result as JSON")
    _add_time_options(e)


def _add_time_options(e) -> None:
    """Where the cards of the time estimate sit: servers, their network, their link; a MoE's active size."""
    e.add_argument(
        "--nodes",
        type=_typed(_count),
        help="servers the --gpus cards are spread over, for the time estimate (default: 1; with --server, "
        "as many as the job needs); more than one needs --network",
    )
    e.add_argument(
        "--network",
        type=_typed(_positive),
        metavar="GBPS",
        help="the network between the servers: Gbit/s of all the network cards of one server (8 x 400G = 3200)",
    )
    e.add_argument(
        "--link",
        choices=step_time.LINKS[1:],
        help="how the cards of one server are joined, for the time estimate: nvswitch, nvlink-bridge or pcie "
        "(default: the server's, else the card's own: NVLink cards through NVSwitch, PCIe cards over PCIe)",
    )
    e.add_argument(
        "--active-params-b",
        type=_typed(_positive),
        metavar="N",
        help="a MoE given by --params-b (all experts, what memory and communication carry): the billions "
        "of parameters active per token, what the compute of the time estimate runs on",
    )


def add_parser(commands) -> None:
    """The `estimate` subcommand and its options; unset options take the typical setup."""
    typical = _typical_defaults()
    e = commands.add_parser(
        "estimate",
        help="memory of one training setup from first principles, and what it fits",
        description=HELP,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_model_options(e)
    _add_run_options(e, typical)
    _add_memory_options(e, typical)
    _add_lora_options(e, typical)
    _add_step_options(e)
    _add_output_options(e)


# -- the validated catalog, cached in the user's cache folder ------------------------------------

CACHE_NAMESPACE = "estimate-catalog"


def _catalog_key(sources: Path, known: dict[str, str] | None = None) -> str:
    import importlib.metadata
    import platform

    from pipeline import cache, fingerprint

    versions = []
    for package in ("polars", "duckdb", "great_expectations"):
        try:
            versions.append(f"{package}={importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{package}=none")
    return cache.make_key(
        "catalog/1",
        fingerprint.tree_hash(sources, "*.csv", known),  # known: the bytes that were validated
        fingerprint.tree_hash(fingerprint.PACKAGE, "*.py"),
        fingerprint.build_date().isoformat(),
        platform.python_version(),
        *versions,
    )


def catalog_to_bytes(catalog) -> bytes:
    """The catalog as data only: a JSON manifest (constants, table names and sizes) and Arrow IPC tables."""
    import io

    blobs, names = [], []
    tables = catalog.tables | {"recommendations": catalog["recommendations"]}  # a build holds it as its order
    for name, frame in sorted(tables.items()):
        buffer = io.BytesIO()
        frame.write_ipc(buffer)
        blobs.append(buffer.getvalue())
        names.append([name, len(blobs[-1])])
    manifest = json.dumps({"constants": catalog.constants, "tables": names}, sort_keys=True).encode()
    return len(manifest).to_bytes(8, "big") + manifest + b"".join(blobs)


def catalog_from_bytes(payload: bytes):
    """The inverse of catalog_to_bytes; ValueError when the payload is not one."""
    import io

    import polars as pl

    from pipeline.combine import Catalog

    try:
        size = int.from_bytes(payload[:8], "big")
        manifest = json.loads(payload[8 : 8 + size])
        offset, tables = 8 + size, {}
        for name, length in manifest["tables"]:
            tables[name] = pl.read_ipc(io.BytesIO(payload[offset : offset + length]))
            offset += length
        if offset != len(payload):
            raise ValueError("trailing bytes")
        return Catalog(tables, dict(manifest["constants"]))
    except Exception as exc:  # any malformed payload is simply not a catalog
        raise ValueError(f"not a cached catalog: {exc}") from None


def _load(sources: Path):
    """The validated catalog: from the user cache when these exact sources (and code) were validated
    before, otherwise validated now and cached."""
    from pipeline import cache

    store = cache.Cache()
    key = _catalog_key(sources)
    payload = store.get(CACHE_NAMESPACE, key)
    if payload is not None:
        try:
            return catalog_from_bytes(payload)
        except ValueError:
            store.delete(CACHE_NAMESPACE, key)
    from pipeline.build import load_and_validate
    from pipeline.combine import combine
    from pipeline.frame_memo import FrameMemo

    digests: dict[str, str] = {}
    catalog = combine(load_and_validate(sources, digests)[0], FrameMemo(store=store))
    store.put(CACHE_NAMESPACE, _catalog_key(sources, digests), catalog_to_bytes(catalog))  # what was read
    return catalog


# -- one setup -------------------------------------------------------------------------------------


def _setup(c, args) -> first_principles.Setup:
    """The Setup of the options, every unset one from the typical setup."""
    gpus = args.gpus if args.gpus is not None else None
    base = first_principles.typical_setup(args.method, c, gpus=gpus)
    changes = {}
    for name in first_principles.setup_fields(leave_out=("method", "gpus")):
        value = getattr(args, name, None)
        if value is not None and value is not False:
            changes[name] = value
        elif value is False and name in ("grad_checkpointing", "flash_attention", "lora_dropout"):
            changes[name] = False
    setup = replace(base, **changes)
    if args.sharding is None and setup.gpus == 1:
        setup = replace(setup, sharding="ddp", offload="none" if args.offload is None else setup.offload)
    if setup.is_full and args.lora_dropout is None:
        setup = replace(setup, lora_dropout=False)
    return setup


# The largest --config or --batch file read (a config.json is a few kB; a batch of setups, lines).
MAX_INPUT_BYTES = 16 * 1024 * 1024


def read_input(path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a small input file (--config, --batch); refuses what is not a regular file or
    is larger than `limit` before reading it whole. OSError passes through."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{path}: not a regular file")
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UsageError(f"{path}: larger than {limit // 2**20} MB; a config.json or a batch of setups is far smaller")
    return data


class _NotANumber(str):
    """NaN, Infinity or -Infinity where config.json has a number: kept while parsing, to be named by key."""


def _not_a_number_key(config) -> tuple[str, str] | None:
    """The first key (as a dotted path) whose value is NaN or ±Infinity, and that value; None if none.
    Walked without recursion: a config that parsed may still be nested deeper than a recursive walk goes."""
    stack = [("", config)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, _NotANumber):
            return where or "(the whole file)", str(value)
        if isinstance(value, dict):
            stack.extend((f"{where}.{key}" if where else key, item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in reversed(list(enumerate(value))))
    return None


def _short(exc: BaseException) -> str:
    """An exception's message cut to one readable line."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, RecursionError):
        text = "nested too deeply"
    return text if len(text) <= 200 else text[:200] + "…"


def _config_architecture(args):
    """_architecture's answer for --config: the exact architecture of a Hugging Face config.json."""
    if args.vocab or args.layers or args.hidden:
        raise UsageError("--config gives the exact architecture: leave out --vocab, --layers and --hidden")
    try:
        config = json.loads(read_input(args.config).decode("utf-8"), parse_constant=_NotANumber)
    except OSError as exc:
        raise UsageError(f"--config {args.config}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise UsageError(f"--config {args.config}: not a config.json ({_short(exc)})") from None
    if (bad := _not_a_number_key(config)) is not None:
        raise UsageError(f"--config {args.config}: {bad[0]} = {bad[1]}: not a number a config may hold")
    try:
        arch = architecture_from_config(config)
    except (ValueError, TypeError, OverflowError) as exc:
        raise UsageError(f"--config {args.config}: {_short(exc)}") from None
    total = parameter_counts(arch).total / 1e9
    return arch, f"{args.config.name} ({total:.3g} B from its config)", total, None


def _architecture(catalog, args):
    """(architecture, display name, params_b, borrowed shape id or None) of --model / --params-b / --config."""
    models = catalog["models"]
    if args.model is not None:
        if args.config is not None or args.params_b is not None:
            raise UsageError(
                "--model names a catalog model: leave out --config and --params-b (or give only one of them)"
            )
        ids = models["model_id"].to_list()
        if args.model not in ids:
            raise UsageError(f"unknown model {args.model!r}; models: {', '.join(sorted(ids))}")
        if args.vocab or args.layers or args.hidden:
            raise UsageError("--vocab, --layers and --hidden change a custom size: use them with --params-b")
        arch = first_principles.model_architectures(models)[args.model]
        row = models.filter(models["model_id"] == args.model).row(0, named=True)
        # A generic size has no config data: it borrows a named model's shape, and says so (issue 36).
        return arch, row["display_name"], row["params_b"], first_principles.borrowed_shapes(models).get(args.model)
    if args.config is not None:
        return _config_architecture(args)
    if args.params_b is None and not (args.layers and args.hidden):
        raise UsageError("give --model ID, --params-b N or --config FILE (or --batch FILE.csv)")
    named = first_principles.model_architectures(models.filter(models["kind"] == "named"))
    try:
        arch, borrowed = first_principles.custom_architecture(
            named, args.params_b, args.vocab, args.layers, args.hidden
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    total = parameter_counts(arch).total / 1e9
    params_b = args.params_b if args.params_b is not None else total
    return arch, f"{params_b:g}B with the shape of {borrowed}", params_b, borrowed


def table_rule(catalog, params_b: float, method_id: str) -> dict[str, float]:
    """The site's table rule (anchor interpolation, docs/rules.md rules 1-2) for any size."""
    import polars as pl

    from pipeline.estimate.table_rule import estimate_memory

    one = pl.DataFrame({"model_id": ["custom"], "params_b": [float(params_b)]})
    methods = catalog["methods"].filter(pl.col("method_id") == method_id)
    row = estimate_memory(one, methods, catalog["memory_anchors"], catalog.constants).row(0, named=True)
    return {k: row[k] for k in ("memory_gb", "memory_low_gb", "memory_high_gb", "basis")}


def _check_time_options(args) -> None:
    """UsageError for an option of the time estimate given without --tokens."""
    if args.server and not args.tokens:
        raise UsageError("--server prices a training run: give --tokens too (how many tokens x epochs)")
    if args.gpu and not args.tokens:
        raise UsageError("--gpu chooses the card of the time estimate: give --tokens too")
    if args.utilization is not None and not args.tokens:
        raise UsageError("--utilization is for the time estimate: give --tokens too")
    for name in ("nodes", "network", "link"):
        if getattr(args, name, None) is not None and not args.tokens:
            raise UsageError(f"--{name} is for the time estimate: give --tokens too")
    if getattr(args, "active_params_b", None) is not None:
        if args.params_b is None:
            raise UsageError("--active-params-b describes a MoE given by --params-b: give --params-b too")
        if args.active_params_b > args.params_b:
            raise UsageError("--active-params-b is part of the model: at most --params-b")


def _estimate_figures(catalog, arch, setup: first_principles.Setup, params_b: float) -> dict:
    """The first-principles breakdown, its readings and measured range, and the table rule beside it."""
    breakdown = first_principles.estimate(arch, setup, catalog.constants)
    return {
        "per_gpu_gb": breakdown.gb(),
        "readings_gb": {k: getattr(breakdown, v) / first_principles.GB for k, v in READINGS.items()},
        "measured_range_gb": _measured_range(catalog, breakdown.card / first_principles.GB),
        "peak_phase": breakdown.phase,
        "trainable_params": breakdown.trainable_params,
        "effective_batch": setup.micro_batch * setup.grad_accum * setup.gpus,
        "table_rule_gb": table_rule(catalog, params_b, setup.method),
    }


def _gpus_by_id(catalog) -> dict[str, dict]:
    """The catalog's GPUs by id, from the smallest memory."""
    return {g["gpu_id"]: g for g in catalog["gpus"].sort("memory_gb", "gpu_id").iter_rows(named=True)}


def _gpu_fits(catalog, arch, setup: first_principles.Setup) -> list[dict]:
    """Every catalog GPU (from the smallest memory) with the fewest cards the setup fits (None: none)."""
    fitting = []
    for gpu in catalog["gpus"].sort("memory_gb", "gpu_id").iter_rows(named=True):
        if setup.fp8 and not gpu["fp8_dense_tflops"]:
            continue
        cards = first_principles.min_gpus(arch, setup, catalog.constants, gpu["memory_gb"])
        fitting.append(
            {"gpu_id": gpu["gpu_id"], "name": gpu["short_name"], "memory_gb": gpu["memory_gb"], "cards": cards}
        )
    return fitting


def _setup_on(setup: first_principles.Setup, c) -> callable:
    """The request's setup on `cards` cards, sharded as the recommendation shards: its own sharding on
    more than one card unless it is DDP (then the typical multi-GPU sharding), plain DDP on one card."""
    typical = first_principles.typical_setup(setup.method, c, 2)

    def on(cards: int) -> first_principles.Setup:
        if cards == setup.gpus:
            return setup
        if cards == 1:
            return replace(setup, gpus=1, sharding="ddp", offload="none")
        if setup.sharding == "ddp":
            return replace(setup, gpus=cards, sharding=typical.sharding, offload=typical.offload)
        return replace(setup, gpus=cards)

    return on


def _server_fits(catalog, arch, setup: first_principles.Setup, args=None) -> list[dict]:
    """Every catalog server (best first) by the recommendation's rules (recommend.plan_job): all its cards
    with the recommendation's sharding, fits only with headroom (the upper end of the measured range plus
    the reserve), several servers only over a declared network; the draft time and rent on the reference
    dataset (or --tokens). A card without FP8 is left out of an FP8 setup."""
    import polars as pl

    from pipeline.estimate import recommend

    c = catalog.constants
    servers = catalog["servers"]
    tokens = getattr(args, "tokens", None) or float(c["typical_dataset_tokens_m"]) * 1e6 * float(c["typical_epochs"])
    share = getattr(args, "utilization", None)
    spreads = recommend.plan_spreads(catalog["estimator_range"])
    band = _time_band(catalog, args)
    plans = recommend.plan_job(arch, _setup_on(setup, c), servers, catalog["gpus"], c, tokens, spreads, band, share)
    frame = pl.DataFrame(
        [{"model_id": "request", "method_id": setup.method} | r for r in plans], schema=recommend.JOB_SCHEMA
    ).with_columns(tokens=pl.lit(tokens))
    rows = recommend.ranked(frame, servers, c)
    names = dict(servers.select("server_id", "display_name").iter_rows())
    return [
        {
            "server_id": r["server_id"],
            "name": names[r["server_id"]],
            "rank": r["rank"],
            "recommended": r["recommended"],
            "reason": r["reason"],
            "servers_needed": r["servers_count"],
            "gpus_in_job": r["gpus_per_job"],
            "per_gpu_gb": r["per_gpu_memory_gb"],
            "per_gpu_high_gb": r["per_gpu_memory_high_gb"],
            "reserve_gb": r["memory_reserve_gb"],
            "headroom_gb": r["headroom_gb"],
            "link": r["link"],
            "fits_one": r["reason"] == "one_chassis",
            "hours": r["hours"],
            "hours_compute": r["hours_compute"],
            "hours_communication": r["hours_communication"],
            "hours_low": r["hours_low"],
            "hours_high": r["hours_high"],
            "time_measured": r["time_measured"],
            "cost_rub": r["cost_rub"],
            "price_rub_month": r["price_rub_month"],
        }
        for r in rows.iter_rows(named=True)
    ]


def _draft_hardware(catalog, args, fitting: list[dict], gpu_by_id: dict[str, dict]) -> tuple[dict | None, dict | None]:
    """(the GPU of the time estimate: --server's, --gpu or the first that fits; the --server row or None);
    UsageError for an unknown id."""
    if args.gpu:
        if args.gpu not in gpu_by_id:
            raise UsageError(f"unknown GPU {args.gpu!r}; GPUs: {', '.join(sorted(gpu_by_id))}")
        gpu = gpu_by_id[args.gpu]
    else:
        gpu = next((gpu_by_id[g["gpu_id"]] for g in fitting if g["cards"]), None)
    server = None
    if args.server:
        server = next((s for s in catalog["servers"].iter_rows(named=True) if s["server_id"] == args.server), None)
        if server is None:
            ids = sorted(catalog["servers"]["server_id"].to_list())
            raise UsageError(f"unknown server {args.server!r}; servers: {', '.join(ids)}")
        gpu = gpu_by_id[server["gpu_id"]]
    return gpu, server


def result(catalog, args) -> dict:
    """Everything the command prints, as plain data (the --json output); UsageError for a wrong request."""
    _check_time_options(args)
    arch, name, params_b, borrowed = _architecture(catalog, args)
    setup = _setup(catalog.constants, args)
    problems = setup.problems()
    out = {"model": name, "params_b": params_b, "setup": asdict(setup), "problems": problems}
    if borrowed:
        out["shape_borrowed_from"] = borrowed
        out["architecture"] = asdict(arch)
    if problems:
        return out
    out |= _estimate_figures(catalog, arch, setup, params_b)
    out["gpus"] = _gpu_fits(catalog, arch, setup)
    out["servers"] = _server_fits(catalog, arch, setup, args)
    out["recommendation"] = recommendation(catalog, args, setup)
    if args.tokens and _draft_hardware(catalog, args, out["gpus"], _gpus_by_id(catalog))[0] is not None:
        out["time"] = training_time(catalog, args, arch, setup, out)
    return out


def _time_layout(catalog, args, setup: first_principles.Setup, out: dict) -> tuple[dict, dict | None, int, int, str]:
    """(the GPU, the --server row or None, cards, servers, link) of the time estimate: --server's cards
    (every card of the servers the job needs) and link, else --gpus cards on --nodes servers joined by
    --link or the card's own link."""
    gpu, server = _draft_hardware(catalog, args, out["gpus"], _gpus_by_id(catalog))
    nodes = args.nodes or 1
    cards = setup.gpus
    if server is not None:
        entry = next(e for e in out["servers"] if e["server_id"] == server["server_id"])
        nodes = args.nodes or entry["servers_needed"] or 1
        cards = server["gpu_count"] * nodes
    if cards % nodes:
        raise UsageError(f"--gpus {cards} cannot be spread evenly over --nodes {nodes}")
    own = step_time.SERVER_LINKS[server["interconnect"]] if server else step_time.CARD_LINKS.get(gpu["interconnect"])
    return gpu, server, cards, nodes, args.link or own or "pcie"


def training_time(catalog, args, arch, setup: first_principles.Setup, out: dict) -> dict:
    """The `time` key: hours as compute + exposed communication (pipeline/estimate/step_time.py) on the
    cards of the time estimate, the constants used, and the rent of those hours with --server."""
    c = catalog.constants
    gpu, server, cards, nodes, link = _time_layout(catalog, args, setup, out)
    on_cards = replace(setup, gpus=cards)
    if cards > 1 and setup.gpus == 1 and args.sharding is None:  # the typical multi-GPU sharding
        on_cards = replace(on_cards, sharding=first_principles.typical_setup(setup.method, c, cards).sharding)
    active = args.active_params_b * 1e9 if getattr(args, "active_params_b", None) else None
    network = args.network or (step_time.server_network_gbps(server, c) if server and nodes > 1 else None)
    if server is not None and nodes > 1 and network is None:  # as the plan: no time across servers with no network
        return {
            "gpu_id": gpu["gpu_id"],
            "server_id": server["server_id"],
            "cards": cards,
            "nodes": nodes,
            "hours": None,
        }
    try:
        t = step_time.training_time(arch, on_cards, gpu, args.tokens, c, link, nodes, network, active, args.utilization)
    except ValueError as exc:
        raise UsageError(f"{exc}: give --network GBPS") from None
    band = _time_band(catalog, args)
    result = {"gpu_id": gpu["gpu_id"], "cards": cards, "nodes": nodes, "sharding": on_cards.sharding, **t.as_dict()}
    result |= {  # the model's time as the site shows it: divided by the published runs' speed factor
        "hours": band.hours(t.hours),
        "hours_compute": band.hours(t.hours_compute),
        "hours_communication": band.hours(t.hours_communication),
        "tokens_per_second": t.tokens_per_second * band.speed,
        "speed_factor": band.speed,
        "hours_low": None if band.low is None else band.hours(t.hours) * band.low,
        "hours_high": None if band.high is None else band.hours(t.hours) * band.high,
        "measured": band.measured(gpu["gpu_id"], t.link),
        "fp8_in_bf16": setup.fp8 and not gpu["fp8_dense_tflops"],  # step_time: no FP8 on the card
    }
    if server is not None:
        result["server_id"] = server["server_id"]
        result["cost_rub"] = training.rental_cost(result["hours"], nodes, server, c)[0]
    return result


def _time_band(catalog, args) -> lookups.TimeBand:
    """The time figures' band; with the reader's own --utilization, no speed factor (their share is theirs)."""
    band = lookups.time_band(catalog["time_summary"], catalog["time_calibration"])
    return band if getattr(args, "utilization", None) is None else replace(band, speed=1.0)


# What the card shows, as --json names it: first_principles.Breakdown's readings.
READINGS = {"allocated": "allocated", "reserved": "reserved", "whole_card": "card"}


def _measured_range(catalog, whole_card_gb: float) -> dict | None:
    """Where 80 % of published peaks lie for such an estimate (estimator_range's factors), None with too few rows."""
    from pipeline.estimate import recommend

    spread = recommend.spread_of(catalog["estimator_range"])
    if spread is None:
        return None
    low, high = recommend.measured_range(whole_card_gb, spread)
    return {"low": low, "high": high}


def recommendation(catalog, args, setup: first_principles.Setup) -> dict | None:
    """The rank-1 row of `recommendations` (the same as data/recommendations.csv) for a catalog model in
    the typical setup; {"recommended": False} when no server takes the job; None for any other request
    (the table is computed for the typical setup only)."""

    from pipeline.estimate import recommend

    if args.model is None or args.config is not None:
        return None
    if setup != first_principles.typical_setup(setup.method, catalog.constants, setup.gpus) or setup.gpus != 1:
        return None
    best = recommend.best(catalog.ranked.job(args.model, setup.method))
    if best.is_empty():
        return {"recommended": False}
    return best.row(0, named=True)


def _recommendation_line(r: dict | None) -> str:
    if r is None:
        return "Recommendation: data/recommendations.csv is for the catalog models in the typical setup; this request differs"
    if not r.get("recommended"):
        return (
            "Recommendation: no catalog server takes the job with headroom in one chassis"
            " (several only over a declared network; see the server list for the risks)"
        )
    measured = ""
    if r.get("per_gpu_memory_low_gb") is not None:
        measured = f" (80 % of measured peaks: {_gb(r['per_gpu_memory_low_gb'])}–{_gb(r['per_gpu_memory_high_gb'])})"
    cost = (
        "price on request" if r["cost_rub"] is None else f"{r['cost_rub']:,.0f} ₽ ({r['cost_basis']})".replace(",", " ")
    )
    return (
        f"Recommendation (as data/recommendations.csv): {r['gpus_per_job']} x {r['gpu_id']} in {r['server_id']}"
        f" ({r['servers_count']} server(s), link {r['link']}), {_gb(r['per_gpu_memory_gb'])} GB per GPU{measured};"
        f" {r['hours']:,.1f} h on {r['tokens'] / 1e9:g} B tokens ({r['hours_compute']:,.1f} h compute +"
        f" {r['hours_communication']:,.1f} h communication over {r['time_link']}"
        + ("" if r["time_measured"] else "; no measured run on this card and link: a draft")
        + f"), {cost}"
    )


def _gb(value: float) -> str:
    return f"{value:,.1f}".replace(",", " ")


def _reading_lines(out: dict, width: int) -> list[str]:
    """What the card shows, reading by reading (allocated, reserved, whole card), and the measured range."""
    parts, r = out["per_gpu_gb"], out["readings_gb"]
    lines = [
        f"  {'= allocated (max_memory_allocated)':<{width}}  {_gb(r['allocated']):>9}",
        f"  {'+ allocator cache':<{width}}  {_gb(parts['cache']):>9}",
        f"  {'= reserved (max_memory_reserved)':<{width}}  {_gb(r['reserved']):>9}",
        f"  {'+ CUDA context, NCCL buffers':<{width}}  {_gb(parts['context']):>9}",
        f"  {'= whole card (nvidia-smi; must fit)':<{width}}  {_gb(r['whole_card']):>9}",
    ]
    if m := out["measured_range_gb"]:
        lines.append(
            f"  80 % of published peaks lie between {_gb(m['low'])} and {_gb(m['high'])} GB for such an estimate"
        )
    return lines


def _setup_line(out: dict) -> str:
    """The first line of the report: the model and its setup."""
    s = out["setup"]
    return (
        f"{out['model']}: {s['method']}, {s['optimizer']}, seq {s['seq_len']} x micro-batch {s['micro_batch']}"
        f" (accumulation {s['grad_accum']}), {s['gpus']} GPU(s), {s['sharding']}, offload {s['offload']}"
        + (", checkpointing" if s["grad_checkpointing"] else ", no checkpointing")
        + ("" if s["flash_attention"] else ", eager attention")
        + f", loss {s['loss']}"
        + (", FP8" if s["fp8"] else "")
        + (f", LoRA r={s['lora_rank']} on {s['lora_targets']}" if not s["method"].startswith("full") else "")
        + (", adapter on the LM head" if s["lora_lm_head"] else "")
        + (", LoRA dropout" if s["lora_dropout"] else "")
        + (", double quantisation" if s["double_quant"] else "")
        + (", frozen weights in fp32" if s["frozen_fp32"] else "")
        + (", quantised LM head" if s["quantized_lm_head"] else "")
        + (", previous micro-batch's 4-bit inputs held" if s["quant_inputs_held"] else "")
        + (", optimizer step in the backward pass" if s["optimizer_in_backward"] else "")
    )


def _breakdown_lines(out: dict) -> list[str]:
    """The parts at the peak, the readings, the other phase and the server RAM of offload."""
    parts = out["per_gpu_gb"]
    lines = [f"Per GPU, GB (10^9 bytes), at the peak: {PHASE_TEXT[out['peak_phase']]}"]
    width = max(len(label) for _, label in PARTS) + 2
    for key, label in PARTS:
        lines.append(f"  {label:<{width}}  {_gb(parts[key]):>9}")
    lines += _reading_lines(out, width)
    if parts["paged"]:
        lines.append(f"  {'paged optimizer states (unified memory)':<{width}}  {_gb(parts['paged']):>9}")
    lines.append(
        f"  other phase: {_gb(parts['step_peak'] if out['peak_phase'] == 'backward' else parts['backward_peak'])} GB "
        f"allocated at {PHASE_TEXT['optimizer_step' if out['peak_phase'] == 'backward' else 'backward']}"
    )
    if parts["cpu"]:
        lines.append(f"  {'server RAM for offload (all GPUs)':<{width}}  {_gb(parts['cpu']):>9}")
    return lines


def _fit_lines(out: dict) -> list[str]:
    """The GPUs and the catalog servers the setup fits."""
    lines = ["GPUs (fewest cards with this sharding; ddp: one card or none):"]
    for g in out["gpus"]:
        verdict = f"{g['cards']} card(s)" if g["cards"] else "does not fit"
        lines.append(f"  {g['name']:<24} {g['memory_gb']:>6g} GB  {verdict}")
    lines.append(
        "Catalog servers, best first (all their GPUs, sharded as the recommendation; fits only when the upper"
        " end of the measured range plus the reserve is within the card):"
    )
    for sv in out["servers"]:
        price = f"{sv['price_rub_month']:,} ₽/month".replace(",", " ") if sv["price_rub_month"] else "price on request"
        lines.append(f"  {sv['name']:<40} {SERVER_VERDICTS[sv['reason']].format(**_verdict_slots(sv)):<60} {price}")
    return lines


# What the server list says of each server, by the recommendation's `reason`.
SERVER_VERDICTS = {
    "one_chassis": "fits: {gpus} GPUs, {per_gpu} GB per GPU (up to {high}, headroom {headroom} GB)",
    "several_chassis": "{servers} servers over the declared network, {per_gpu} GB per GPU (up to {high})",
    "tight": "tight: {gpus} GPUs, {per_gpu} GB per GPU, up to {high} does not fit — not recommended",
    "needs_network": "not recommended: {servers} servers needed, no declared network between them",
    "does_not_fit": "does not fit",
}


def _verdict_slots(sv: dict) -> dict:
    number = lambda v: "—" if v is None else _gb(v)  # noqa: E731
    return {
        "gpus": sv["gpus_in_job"],
        "servers": sv["servers_needed"],
        "per_gpu": number(sv["per_gpu_gb"]),
        "high": number(sv["per_gpu_high_gb"]),
        "headroom": number(sv["headroom_gb"]),
    }


def _time_line(t: dict) -> str:
    """Hours as compute + communication, naming what dominates."""
    if t["hours"] is None:
        return (
            f"Time: none: {t['nodes']} servers {t['server_id']} needed ({t['cards']} GPUs), and the catalog declares"
            " no network between them (not recommended; give --network GBPS to time it over a network of your own)"
        )
    where = "between servers" if t["nodes"] > 1 else f"over {t['link']}"
    cost = f", {t['cost_rub']:,.0f} RUB on {t['server_id']}" if t.get("cost_rub") is not None else ""
    bf16 = f"; {t['gpu_id']} has no FP8, so the compute is timed in BF16" if t.get("fp8_in_bf16") else ""
    return (
        f"Time: {t['hours']:,.1f} h on {t['cards']} x {t['gpu_id']} ({t['sharding']}): "
        f"{t['hours_compute']:,.1f} h compute + {t['hours_communication']:,.1f} h communication {where} "
        f"({t['dominant']} dominates; {t['tokens_per_second']:,.0f} tokens/s){cost}{bf16}"
    )


def render(out: dict) -> str:
    """The human-readable report."""
    lines = [_setup_line(out)]
    if out.get("shape_borrowed_from"):
        a = out["architecture"]
        lines.append(
            f"Shape borrowed from {out['shape_borrowed_from']}: {a['layers']} layers, hidden {a['hidden']}, "
            f"MLP {a['intermediate']}, {a['heads']} heads ({a['kv_heads']} key-value), vocabulary {a['vocab']} "
            "(to be exact, give the model's config.json with --config)"
        )
    if out["problems"]:
        lines += ["This setup cannot be estimated:"] + [f"  {p}" for p in out["problems"]]
        return "\n".join(lines)
    lines += _breakdown_lines(out)
    lines.append(f"Trained parameters: {out['trainable_params']:,.0f}; effective batch {out['effective_batch']}")
    t = out["table_rule_gb"]
    lines.append(
        f"Table rule (anchor table, seq/batch/sharding not considered): {_gb(t['memory_gb'])} GB "
        f"(range {_gb(t['memory_low_gb'])}–{_gb(t['memory_high_gb'])})"
    )
    lines += _fit_lines(out)
    if "recommendation" in out:
        lines.append(_recommendation_line(out["recommendation"]))
    if "time" in out:
        lines.append(_time_line(out["time"]))
    return "\n".join(lines)


def _table_rule_only(catalog, args) -> dict:
    _, name, params_b, borrowed = _architecture(catalog, args)
    out = {
        "model": name,
        "params_b": params_b,
        "method": args.method,
        "table_rule_gb": table_rule(catalog, params_b, args.method),
    }
    if borrowed:
        out["shape_borrowed_from"] = borrowed
    return out


def _batch_args(row: dict[str, str], line: int, defaults: argparse.Namespace) -> argparse.Namespace:  # noqa: C901
    """One --batch row as the options it stands for; UsageError naming line and column."""
    args = argparse.Namespace(**vars(defaults))
    for name in ("model", "params_b", "config", "vocab", "layers", "hidden", "tokens", "gpu", "server", "utilization"):
        setattr(args, name, None)
    args.method = "full_amp"
    for column, text in row.items():
        text = (text or "").strip()
        if column is None or not text:
            continue
        where = f"line {line}, column {column}"
        try:
            if column in ("model", "gpu", "server"):
                setattr(args, column, text)
            elif column == "config":
                args.config = Path(text)
            elif column == "params_b":
                args.params_b = _positive(text, column)
            elif column in ("vocab", "layers", "hidden", *COUNT_OPTIONS):
                setattr(args, column, _count(text, column))
            elif column in BOOL_OPTIONS:
                if text.lower() not in ("true", "false", "1", "0"):
                    raise UsageError(f"{column} = {text!r}: must be true or false")
                setattr(args, column, text.lower() in ("true", "1"))
            elif column in ("method", "optimizer", "sharding", "offload", "loss", "lora_targets"):
                allowed = {
                    "method": first_principles.METHODS,
                    "optimizer": first_principles.OPTIMIZERS,
                    "sharding": first_principles.SHARDINGS,
                    "offload": first_principles.OFFLOADS,
                    "loss": first_principles.LOSSES,
                    "lora_targets": first_principles.LORA_TARGETS,
                }[column]
                if text not in allowed:
                    raise UsageError(f"{column} = {text!r}: expected one of {', '.join(allowed)}")
                setattr(args, column, text)
            else:
                raise UsageError(f"unknown column {column!r}; columns: {', '.join(BATCH_COLUMNS)}")
        except UsageError as exc:
            raise UsageError(f"{where}: {exc}") from None
    return args


BATCH_OUT = (
    "line",
    "model",
    "shape_borrowed_from",
    "method",
    "peak_phase",
    *(k for k, _ in PARTS),
    "cache",
    "context",
    "paged",
    "allocated",
    "reserved",
    "whole_card",
    "backward_peak",
    "step_peak",
    "cpu",
    "trainable_params",
    "table_rule",
    "problems",
)


def _batch_rows(reader, path: Path, problems: list[str]):
    """The rows of a --batch file; a row the csv module cannot read ends it with a problem."""
    import csv

    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problems.append(f"{path}:{reader.line_num}: {exc}")
            return
        yield row


def _batch_header_problem(reader, path: Path) -> str | None:
    """What is wrong with a --batch file's header row, or None."""
    import csv

    try:
        fieldnames = reader.fieldnames
    except csv.Error as exc:
        return f"{path}:1: {exc}"
    if not fieldnames:
        return f"{path}: no header row; columns: {', '.join(BATCH_COLUMNS)}"
    unknown = [c for c in fieldnames if c not in BATCH_COLUMNS]
    if unknown:
        return f"{path}:1: unknown column(s) {', '.join(unknown)}; columns: {', '.join(BATCH_COLUMNS)}"
    repeated = sorted({c for c in fieldnames if fieldnames.count(c) > 1})
    if repeated:
        return f"{path}:1: column(s) {', '.join(repeated)} given twice"
    return None


def run_batch(catalog, path: Path, defaults: argparse.Namespace) -> tuple[str, list[str]]:
    """Every row of a --batch file scored: (CSV text, problems with line and column)."""
    import csv
    import io

    try:
        text = read_input(path).decode("utf-8-sig")
    except OSError as exc:
        return "", [f"{path}: cannot read it ({exc.strerror or exc})"]
    except UnicodeDecodeError:
        return "", [f"{path}: not UTF-8 text"]
    except UsageError as exc:
        return "", [str(exc)]
    reader = csv.DictReader(io.StringIO(text))
    wrong = _batch_header_problem(reader, path)
    if wrong:
        return "", [wrong]
    out = io.StringIO()
    writer = csv.DictWriter(out, BATCH_OUT, lineterminator="\n")
    writer.writeheader()
    problems = []
    for row in _batch_rows(reader, path, problems):
        line = reader.line_num
        try:
            if None in row:
                raise UsageError(f"line {line}: more cells than the header has columns")
            args = _batch_args(row, line, defaults)
            if not (args.model or args.params_b or args.config or (args.layers and args.hidden)):
                raise UsageError(f"line {line}, column model: give model, params_b or config")
            try:
                res = result(catalog, args)
            except UsageError as exc:
                raise UsageError(f"line {line}: {exc}") from None
        except UsageError as exc:
            problems.append(f"{path}:{exc}")
            continue
        record = {"line": line, "model": res["model"], "shape_borrowed_from": res.get("shape_borrowed_from", "")}
        record |= {"method": res["setup"]["method"], "problems": "; ".join(res["problems"])}
        if not res["problems"]:
            parts = res["per_gpu_gb"]
            record |= {k: parts[k] for k, _ in PARTS}
            record |= {k: parts[k] for k in ("cache", "context", "paged", "backward_peak", "step_peak", "cpu")}
            record |= {k: v for k, v in res["readings_gb"].items()}
            record |= {"peak_phase": res["peak_phase"], "trainable_params": res["trainable_params"]}
            record["table_rule"] = res["table_rule_gb"]["memory_gb"]
        else:
            problems.append(f"{path}:line {line}: " + "; ".join(res["problems"]))
        writer.writerow(record)
    return out.getvalue(), problems


def run(args) -> int:
    """`python -m pipeline estimate`: one setup (text or --json), the table rule, or a --batch CSV; the exit code."""
    try:
        catalog = _load(args.sources)
    except DataError as exc:
        print(format_report(exc.problems), file=sys.stderr)
        return 2
    try:
        if args.batch is not None:
            text, problems = run_batch(catalog, args.batch, args)
            sys.stdout.write(text)
            for problem in problems:
                print(problem, file=sys.stderr)
            return 2 if problems else 0
        out = _table_rule_only(catalog, args) if args.table_rule else result(catalog, args)
    except UsageError as exc:
        print(f"estimate: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=2, sort_keys=True))
    elif args.table_rule:
        t = out["table_rule_gb"]
        print(
            f"{out['model']}, {out['method']}: table rule {_gb(t['memory_gb'])} GB "
            f"(range {_gb(t['memory_low_gb'])}–{_gb(t['memory_high_gb'])}; {t['basis']})"
        )
    else:
        print(render(out))
    return 2 if out.get("problems") else 0
