"""`python -m pipeline estimate`: the first-principles memory of one training setup, from the command line.

Prints the per-GPU breakdown in GB, the table rule's estimate beside it, which GPUs and
catalog servers the setup fits, and (with --tokens) a draft training time and cost.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, replace
from pathlib import Path

from pipeline import memory, training
from pipeline.problems import DataError, format_report

PARTS = (
    ("weights", "weights"),
    ("gradients", "gradients"),
    ("optimizer", "optimizer states"),
    ("activations", "activations"),
    ("logits", "logits and loss"),
    ("overhead", "CUDA context and allocator cache"),
)

HELP = """\
Estimate the GPU memory of one fine-tuning setup from first principles (weights, gradients,
optimizer states, activations, logits, overhead; per GPU, in GB = 10^9 bytes), beside the
site's table rule, and list the GPUs and catalog servers it fits. Every constant comes from
sources/constants.csv.
"""


def add_parser(commands) -> None:
    """The `estimate` subcommand and its options."""
    d = memory.Setup()
    e = commands.add_parser(
        "estimate",
        help="memory of one training setup from first principles, and what it fits",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument("--sources", type=Path, default=Path("sources"), help="folder of source CSV files")
    model = e.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", metavar="ID", help="a model_id from sources/models.csv, e.g. llama-3-1-8b")
    model.add_argument(
        "--params-b",
        type=float,
        metavar="N",
        help="a model of N billion parameters not in the catalog; its shape is taken from the catalog's "
        "dense model nearest in size, with the number of layers scaled",
    )
    e.add_argument(
        "--method",
        choices=memory.METHODS,
        default=d.method,
        help="full_amp: all weights trained, bf16 compute with an fp32 master copy; full_bf16: all weights "
        "trained, everything in bf16; lora: a small adapter trained, the model frozen in 16 bits; "
        "qlora_8bit/4bit/2bit: the same with the frozen model compressed to 8, 4 or 2 bits (default: %(default)s)",
    )
    e.add_argument(
        "--optimizer",
        choices=memory.OPTIMIZERS,
        default=d.optimizer,
        help="adamw: two fp32 states per trained weight; adamw_8bit: two 1-byte states (bitsandbytes); "
        "sgd: one momentum state (default: %(default)s)",
    )
    e.add_argument("--seq-len", type=int, default=d.seq_len, help="tokens per sequence (default: %(default)s)")
    e.add_argument(
        "--micro-batch", type=int, default=d.micro_batch, help="sequences per GPU per step (default: %(default)s)"
    )
    e.add_argument(
        "--grad-accum",
        type=int,
        default=d.grad_accum,
        help="micro-batches added up before each optimizer step: the effective batch grows, memory does not "
        "(default: %(default)s)",
    )
    e.add_argument("--gpus", type=int, default=d.gpus, help="GPUs training together (default: %(default)s)")
    e.add_argument(
        "--sharding",
        choices=memory.SHARDINGS,
        default=d.sharding,
        help="ddp: every GPU holds everything; zero1: optimizer states split across the GPUs; zero2: and "
        "the gradients; zero3 (= FSDP full shard): and the weights (default: %(default)s)",
    )
    e.add_argument(
        "--offload",
        choices=memory.OFFLOADS,
        default=d.offload,
        help="none; optimizer: optimizer states and fp32 gradients kept in the server's RAM (needs ZeRO); "
        "full: the weights too (needs zero3). Slower, frees GPU memory (default: %(default)s)",
    )
    e.add_argument(
        "--grad-checkpointing",
        action="store_true",
        help="keep only each layer's input and recompute the rest in the backward pass: far less activation "
        "memory for one more forward pass of compute",
    )
    e.add_argument(
        "--no-flash-attention",
        dest="flash_attention",
        action="store_false",
        help="plain (eager) attention that stores a score per pair of tokens; FlashAttention/SDPA is the default",
    )
    e.add_argument(
        "--flash-attention",
        dest="flash_attention",
        action="store_true",
        default=d.flash_attention,
        help="FlashAttention-style attention that never stores the full score matrix (the default)",
    )
    e.add_argument(
        "--chunked-loss",
        action="store_true",
        help="compute the loss over the vocabulary in chunks (torchtune, Liger, Unsloth): no full fp32 logits",
    )
    e.add_argument("--lora-rank", type=int, default=d.lora_rank, help="LoRA rank r (default: %(default)s)")
    e.add_argument(
        "--lora-targets",
        choices=memory.LORA_TARGETS,
        default=d.lora_targets,
        help="which layers get an adapter: qv (query and value projections), attention (q, k, v, o), all "
        "(every linear layer, MLP included) (default: %(default)s)",
    )
    e.add_argument(
        "--lora-dropout",
        action="store_true",
        help="dropout on the adapter's input (LitGPT's default; PEFT and LLaMA-Factory default to none): "
        "keeps a copy of each adapted layer's input",
    )
    e.add_argument(
        "--double-quant",
        action="store_true",
        help="QLoRA's double quantisation: the block scales themselves stored in 8 bits (about 0.4 bits per "
        "weight less)",
    )
    e.add_argument(
        "--fp8", action="store_true", help="FP8 matmuls (Transformer Engine) in full fine-tuning, on GPUs that have FP8"
    )
    e.add_argument("--tokens", type=float, help="tokens to train on (x epochs) for a draft time and cost estimate")
    e.add_argument("--gpu", metavar="ID", help="a gpu_id for the time estimate (default: the first GPU that fits)")
    e.add_argument("--server", metavar="ID", help="a server_id from sources/servers.csv for the cost estimate")
    e.add_argument(
        "--utilization",
        type=float,
        help="share of the GPU's peak dense throughput the training reaches (default: from constants.csv)",
    )
    e.add_argument("--json", action="store_true", help="print the result as JSON")


def _load(sources: Path):
    """The catalog; validation is skipped when a build already validated exactly these sources."""
    from pipeline import fingerprint
    from pipeline.__main__ import load_and_validate, load_validated_before
    from pipeline.combine import combine

    state = fingerprint.read_state(Path("output"))
    validated = state.get("inputs", {}).get("sources") == fingerprint.tree_hash(sources, "*.csv")
    con = load_validated_before(sources) if validated and "validation" in state else load_and_validate(sources)[0]
    return combine(con)


def result(catalog, args) -> dict:
    """Everything the command prints, as plain data (the --json output)."""
    c = catalog.constants
    models = catalog["models"]
    setup = memory.Setup(
        method=args.method,
        optimizer=args.optimizer,
        seq_len=args.seq_len,
        micro_batch=args.micro_batch,
        grad_accum=args.grad_accum,
        gpus=args.gpus,
        sharding=args.sharding,
        offload=args.offload,
        grad_checkpointing=args.grad_checkpointing,
        flash_attention=args.flash_attention,
        lora_rank=args.lora_rank,
        lora_targets=args.lora_targets,
        lora_dropout=args.lora_dropout,
        double_quant=args.double_quant,
        chunked_loss=args.chunked_loss,
        fp8=args.fp8,
    )
    problems = setup.problems()
    if args.model is not None:
        ids = models["model_id"].to_list()
        if args.model not in ids:
            raise SystemExit(f"unknown model {args.model!r}; models: {', '.join(sorted(ids))}")
        arch = memory.model_architectures(models)[args.model]
        row = models.filter(models["model_id"] == args.model).row(0, named=True)
        name, params_b = row["display_name"], row["params_b"]
    else:
        if args.params_b is None or args.params_b <= 0:
            raise SystemExit("--params-b must be a positive number of billions")
        named = memory.model_architectures(models.filter(models["kind"] == "named"))
        arch = memory.architecture_for_size(args.params_b, named)
        name, params_b = f"{args.params_b:g}B (shape of the nearest catalog model)", args.params_b
    out = {"model": name, "params_b": params_b, "setup": asdict(setup), "problems": problems}
    if problems:
        return out
    breakdown = memory.estimate(arch, setup, c)
    out["per_gpu_gb"] = breakdown.gb()
    out["trainable_params"] = breakdown.trainable_params
    out["effective_batch"] = setup.micro_batch * setup.grad_accum * setup.gpus
    estimates = catalog["estimates"]
    table = estimates.filter((estimates["method_id"] == setup.method) & (estimates["params_b"] == params_b))
    if args.model is not None:
        table = estimates.filter((estimates["model_id"] == args.model) & (estimates["method_id"] == setup.method))
    if table.height:
        row = table.row(0, named=True)
        out["table_rule_gb"] = {k: row[k] for k in ("memory_gb", "memory_low_gb", "memory_high_gb")}
    gpus = catalog["gpus"].sort("memory_gb", "gpu_id")
    fitting = []
    for gpu in gpus.iter_rows(named=True):
        if setup.fp8 and not gpu["fp8_dense_tflops"]:
            continue
        cards = memory.min_gpus(arch, setup, c, gpu["memory_gb"])
        fitting.append(
            {"gpu_id": gpu["gpu_id"], "name": gpu["short_name"], "memory_gb": gpu["memory_gb"], "cards": cards}
        )
    out["gpus"] = fitting
    gpu_by_id = {g["gpu_id"]: g for g in gpus.iter_rows(named=True)}
    servers = []
    for server in catalog["servers"].sort("server_id").iter_rows(named=True):
        gpu = gpu_by_id[server["gpu_id"]]
        count = server["gpu_count"]
        usable = not (setup.fp8 and not gpu["fp8_dense_tflops"])
        # With ZeRO the job may span several servers of a kind: the fewest whose cards all fit it.
        cards = memory.min_gpus(arch, setup, c, gpu["memory_gb"]) if usable else None
        needed = None if cards is None else (1 if setup.sharding == "ddp" else math.ceil(cards / count))
        in_job = count * (needed or 1)  # DDP, too, trains on every card of the server
        total = memory.estimate(arch, replace(setup, gpus=in_job), c).total / memory.GB
        servers.append(
            {
                "server_id": server["server_id"],
                "name": server["display_name"],
                "servers_needed": needed,
                "gpus_in_job": in_job,
                "per_gpu_gb": total,
                "fits_one": needed == 1,
                "price_rub_month": server["price_rub_month"],
            }
        )
    out["servers"] = servers
    if args.tokens:
        utilization = args.utilization or c["default_utilization"]
        if args.gpu:
            if args.gpu not in gpu_by_id:
                raise SystemExit(f"unknown GPU {args.gpu!r}; GPUs: {', '.join(sorted(gpu_by_id))}")
            gpu = gpu_by_id[args.gpu]
        else:
            gpu = next((gpu_by_id[g["gpu_id"]] for g in fitting if g["cards"]), None)
        server = None
        if args.server:
            server = next((s for s in catalog["servers"].iter_rows(named=True) if s["server_id"] == args.server), None)
            if server is None:
                raise SystemExit(f"unknown server {args.server!r}")
            gpu = gpu_by_id[server["gpu_id"]]
        if gpu is not None:
            flops = training.training_flops(arch, setup, args.tokens, c)
            if server:  # every card of the servers the job needs (see the servers list)
                entry = next(e for e in servers if e["server_id"] == server["server_id"])
                cards = entry["gpus_in_job"] if entry["servers_needed"] else server["gpu_count"]
            else:
                cards = setup.gpus
            p = training.plan(flops, gpu, cards, utilization, c, setup.fp8, server)
            out["draft_time"] = {
                "gpu_id": gpu["gpu_id"],
                "cards": cards,
                "utilization": utilization,
                "flops": flops,
                "hours": p.hours,
                "servers": p.servers,
                "cost_rub": p.cost_rub,
            }
    return out


def _gb(value: float) -> str:
    return f"{value:,.1f}".replace(",", " ")


def render(out: dict) -> str:
    """The human-readable report."""
    s = out["setup"]
    lines = [
        f"{out['model']}: {s['method']}, {s['optimizer']}, seq {s['seq_len']} x micro-batch {s['micro_batch']}, "
        f"{s['gpus']} GPU(s), {s['sharding']}, offload {s['offload']}"
        + (", checkpointing" if s["grad_checkpointing"] else "")
        + ("" if s["flash_attention"] else ", eager attention")
        + (", chunked loss" if s["chunked_loss"] else "")
        + (", FP8" if s["fp8"] else "")
        + (f", LoRA r={s['lora_rank']} on {s['lora_targets']}" if not s["method"].startswith("full") else "")
        + (", LoRA dropout" if s["lora_dropout"] else "")
        + (", double quantisation" if s["double_quant"] else "")
    ]
    if out["problems"]:
        lines += ["This setup does not exist in practice:"] + [f"  {p}" for p in out["problems"]]
        return "\n".join(lines)
    parts = out["per_gpu_gb"]
    lines.append("Per GPU, GB (10^9 bytes):")
    width = max(len(label) for _, label in PARTS)
    for key, label in PARTS:
        lines.append(f"  {label:<{width}}  {_gb(parts[key]):>9}")
    lines.append(f"  {'total':<{width}}  {_gb(parts['total']):>9}")
    if parts["cpu"]:
        lines.append(f"  {'server RAM for offload (all GPUs)':<{width}}  {_gb(parts['cpu']):>9}")
    lines.append(f"Trained parameters: {out['trainable_params']:,.0f}; effective batch {out['effective_batch']}")
    if "table_rule_gb" in out:
        t = out["table_rule_gb"]
        lines.append(
            f"Table rule (anchor table, seq/batch/sharding not considered): {_gb(t['memory_gb'])} GB "
            f"(range {_gb(t['memory_low_gb'])}–{_gb(t['memory_high_gb'])})"
        )
    lines.append("GPUs (fewest cards with this sharding; ddp: one card or none):")
    for g in out["gpus"]:
        verdict = f"{g['cards']} card(s)" if g["cards"] else "does not fit"
        lines.append(f"  {g['name']:<24} {g['memory_gb']:>6g} GB  {verdict}")
    lines.append("Catalog servers (with ZeRO, the fewest servers of a kind whose GPUs all share the job):")
    for sv in out["servers"]:
        price = f"{sv['price_rub_month']:,} ₽/month".replace(",", " ") if sv["price_rub_month"] else "price on request"
        if sv["servers_needed"] is None:
            verdict = "does not fit"
        else:
            n = sv["servers_needed"]
            verdict = f"{n} server(s), {_gb(sv['per_gpu_gb'])} GB per GPU"
        lines.append(f"  {sv['name']:<40} {verdict:<36} {price}")
    if "draft_time" in out:
        t = out["draft_time"]
        cost = ", about " + f"{t['cost_rub']:,.0f} ₽".replace(",", " ") if t["cost_rub"] is not None else ""
        lines.append(
            f"Draft time: {t['flops']:.3g} FLOP on {t['cards']} x {t['gpu_id']} at {t['utilization']:.0%} "
            f"utilisation: {t['hours']:,.1f} h{cost} (a draft estimate)"
        )
    return "\n".join(lines)


def run(args) -> int:
    try:
        catalog = _load(args.sources)
    except DataError as exc:
        print(format_report(exc.problems), file=sys.stderr)
        return 2
    out = result(catalog, args)
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=2, sort_keys=True))
    else:
        print(render(out))
    return 2 if out["problems"] else 0
