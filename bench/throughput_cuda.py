"""Our own training-throughput measurements on a CUDA machine (issue 34, item 7).

`python bench/throughput_cuda.py --config CONFIG.json --model-id ID --gpu-id ID [--method full_bf16|lora]
[--seq-len 2048] [--micro-batch 1] [--steps 8] [--warmup 2] [--checkpointing] [--out rows.csv]`

Builds the model from a Hugging Face config.json with random weights (nothing is downloaded), trains a few
optimizer steps on random tokens (packed: every sequence is seq-len tokens, so no padding), and records
tokens per second over the steps after the warm-up, with the full setup, as a row of sources/throughput.csv
(`throughput_row`), its note saying how it was measured. One process, one GPU (`--gpus 1`, `one_card`);
several GPUs: launch with torchrun and `--fsdp` (FSDP full shard = zero3), the row then counts every rank.
It must finish within a few minutes: a few steps of a small or truncated model (--layers keeps the first N
layers of the config, the per-layer speed is what the time model needs).

The module imports without torch (the imports are inside the functions), so the test suite can check the
row it writes; torch, transformers and (for LoRA) peft are needed only to measure. `--dry-run` needs none of
them and no GPU: it reads the config, checks the ids against sources/ and prints the row the run would
write (tokens_per_second empty) beside the time model's tokens/s for that setup (what the measurement
will be compared with), so a setup can be checked on any machine before the GPU is rented.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

COLUMNS = (
    "run_id", "model_id", "method_id", "precision", "gpu_id", "gpus", "nodes", "link", "network_gbps", "sharding",
    "micro_batch", "grad_accum", "seq_len", "checkpointing", "framework", "extra_techniques", "tokens_per_second",
    "per", "in_accuracy", "note_ru", "reference_id",
)  # fmt: skip
REFERENCE_ID = "bench-throughput-cuda"  # this script, as sources/references.csv names it
REPO = Path(__file__).resolve().parent.parent


def throughput_row(args: argparse.Namespace, tokens_per_second: float, gpus: int, device_name: str) -> dict:
    """The sources/throughput.csv row of one measurement."""
    sharding = "zero3" if args.fsdp else "ddp"
    link = "one_card" if gpus == 1 else args.link
    run_id = f"own-{args.model_id}-{args.method.replace('_', '-')}-{gpus}x{args.gpu_id}-s{args.seq_len}"
    return {
        "run_id": run_id,
        "model_id": args.model_id,
        "method_id": args.method,
        "precision": "bf16",
        "gpu_id": args.gpu_id,
        "gpus": gpus,
        "nodes": 1,
        "link": link,
        "network_gbps": "",
        "sharding": sharding,
        "micro_batch": args.micro_batch,
        "grad_accum": 1,
        "seq_len": args.seq_len,
        "checkpointing": "full" if args.checkpointing else "none",
        "framework": "transformers",
        "extra_techniques": "",
        "tokens_per_second": round(tokens_per_second, 1),
        "per": "job",
        "in_accuracy": "true",
        "note_ru": (
            f"Собственный замер: bench/throughput_cuda.py, {device_name}; модель из config.json со случайными "
            f"весами, случайные токены без паддинга, {args.steps} шагов оптимизатора после {args.warmup} "
            f"разогревочных, AdamW (fused), bf16"
            + (f", первые {args.layers} слоёв конфигурации" if args.layers else "")
            + "."
        ),
        "reference_id": REFERENCE_ID,
    }


def build_model(args: argparse.Namespace):
    """The model of --config with random weights, in bf16 on the GPU; LoRA adapters for --method lora."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(args.config)
    if args.layers:
        config.num_hidden_layers = args.layers
    model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16, attn_implementation="sdpa")
    if args.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if args.method == "lora":
        from peft import LoraConfig, get_peft_model

        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=targets))
    return model.cuda()


def measure(args: argparse.Namespace) -> tuple[float, int, str]:
    """(tokens per second of the whole job, GPUs, device name) over --steps steps after --warmup."""
    import torch

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        torch.distributed.init_process_group("nccl")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    model = build_model(args)
    if args.fsdp:
        from torch.distributed.fsdp import FullyShardedDataParallel

        model = FullyShardedDataParallel(model, use_orig_params=True, device_id=torch.cuda.current_device())
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5, fused=True)
    vocab = model.config.vocab_size if hasattr(model, "config") else args.vocab
    batch = torch.randint(0, vocab, (args.micro_batch, args.seq_len), device="cuda")
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            torch.cuda.synchronize()
            started = time.perf_counter()
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    gpus = torch.distributed.get_world_size() if distributed else 1
    return args.steps * args.micro_batch * args.seq_len * gpus / seconds, gpus, torch.cuda.get_device_name()


def dry_run(args: argparse.Namespace, sources: Path = REPO / "sources") -> dict:
    """The plan of a run without torch or a GPU: the row it would write (no tokens/s yet) and the time
    model's tokens/s for the same setup on one card (step_time.training_time with sources/' constants)."""
    sys.path[:0] = [str(REPO)]
    from dataclasses import replace

    from pipeline.estimate import first_principles, step_time
    from pipeline.estimate.architecture import architecture_from_config

    arch = architecture_from_config(json.loads(args.config.read_text(encoding="utf-8")))
    if args.layers:
        arch = replace(arch, layers=args.layers)
    tables = {
        name: list(csv.DictReader((sources / f"{name}.csv").read_text(encoding="utf-8").splitlines()))
        for name in ("models", "gpus", "constants")
    }
    if args.model_id not in {r["model_id"] for r in tables["models"]}:
        raise SystemExit(f"--model-id {args.model_id!r} is not a model_id of {sources / 'models.csv'}")
    gpu = next((r for r in tables["gpus"] if r["gpu_id"] == args.gpu_id), None)
    if gpu is None:
        raise SystemExit(f"--gpu-id {args.gpu_id!r} is not a gpu_id of {sources / 'gpus.csv'}")
    c = {r["constant_id"]: float(r["value"]) for r in tables["constants"]}
    setup = first_principles.Setup(
        method=args.method, seq_len=args.seq_len, micro_batch=args.micro_batch,
        grad_checkpointing=args.checkpointing, sharding="zero3" if args.fsdp else "ddp",
    )  # fmt: skip
    card = {"bf16_dense_tflops": float(gpu["bf16_dense_tflops"]), "link_gbs": float(gpu["link_gbs"] or 0)}
    predicted = step_time.training_time(arch, setup, card, 1e6, c, link="one_card")
    row = throughput_row(args, 0.0, 1, "dry run") | {"tokens_per_second": "", "note_ru": ""}
    return {"dry_run": True, "row": row, "predicted_tokens_per_second": predicted.tokens_per_second}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Measure training tokens/s on a CUDA GPU (a row of throughput.csv).")
    p.add_argument("--config", type=Path, required=True, help="a Hugging Face config.json (read from disk)")
    p.add_argument("--model-id", required=True, help="the model_id of sources/models.csv the config is")
    p.add_argument("--gpu-id", required=True, help="the gpu_id of sources/gpus.csv the machine has")
    p.add_argument("--method", choices=("full_bf16", "lora"), default="full_bf16")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--layers", type=int, help="keep only the first N layers (a shorter run)")
    p.add_argument("--checkpointing", action="store_true", help="gradient checkpointing (full recompute)")
    p.add_argument("--fsdp", action="store_true", help="FSDP full shard over the torchrun ranks (zero3)")
    p.add_argument("--link", default="nvswitch", choices=("nvswitch", "nvlink-bridge", "pcie"))
    p.add_argument("--vocab", type=int, default=32000, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="append the row to this CSV (header written when new)")
    p.add_argument("--dry-run", action="store_true", help="no torch, no GPU: the planned row and the model's tokens/s")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.dry_run:
        print(json.dumps(dry_run(args), ensure_ascii=False))
        return 0
    tokens_per_second, gpus, device = measure(args)
    if int(os.environ.get("RANK", "0")) != 0:
        return 0
    row = throughput_row(args, tokens_per_second, gpus, device)
    print(json.dumps(row, ensure_ascii=False))
    if args.out:
        new = not args.out.exists()
        with args.out.open("a", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
            if new:
                writer.writeheader()
            writer.writerow(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
