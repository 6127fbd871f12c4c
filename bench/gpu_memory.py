"""Our own peak-memory measurements on a CUDA machine (issue 36): a few training steps of chosen setups, with the
weights built from a local config.json (random values; nothing is downloaded), recording what each tool shows.

    python bench/gpu_memory.py --config path/to/config.json --model-id llama-3-2-1b --method full_bf16 \\
        --optimizer adamw_8bit --seq-len 2048 --micro-batch 1 --grad-checkpointing --out runs.csv
    python bench/gpu_memory.py --setups setups.csv --out runs.csv     # several setups, one process each

Per setup it records torch.cuda.max_memory_allocated, max_memory_reserved and the card's used memory
(torch.cuda.mem_get_info: total − free, which is what nvidia-smi shows for the card) after `--steps` optimizer
steps, with the library versions, and writes one row per setup; `--measurements` also writes the three rows each
run gives sources/measurements.csv (metrics allocated, reserved, nvidia_smi, GB), with `bench-gpu-memory` as
their reference, for an editor to append. The loss path is read from the installed transformers (4.49 and later:
`hf`, before: `hf_legacy`). Each setup runs in a fresh subprocess so that one run's cached blocks never count in the
next; a setup that runs out of memory is recorded as `oom`. It needs torch and transformers (peft for LoRA,
bitsandbytes or torchao for their optimizers); without them it still parses and checks setups (`--dry-run`), so
that the plan can be tested anywhere. A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path

GB = 1e9
METHODS = ("full_amp", "full_bf16", "lora")
OPTIMIZERS = ("adamw", "adamw_fused", "adamw_8bit", "paged_adamw", "paged_adamw_8bit", "sgd", "adamw_4bit", "lion_8bit")
# The columns of a setups file (and of --setup's fields), with their types.
SETUP_COLUMNS = {
    "config": str,
    "model_id": str,
    "method": str,
    "optimizer": str,
    "seq_len": int,
    "micro_batch": int,
    "grad_accum": int,
    "grad_checkpointing": bool,
    "lora_rank": int,
    "steps": int,
}
DEFAULTS = {
    "method": "full_bf16",
    "optimizer": "adamw",
    "seq_len": 2048,
    "micro_batch": 1,
    "grad_accum": 1,
    "grad_checkpointing": False,
    "lora_rank": 16,
    "steps": 3,
}
RESULT_COLUMNS = (
    *SETUP_COLUMNS,
    "loss",
    "outcome",
    "max_memory_allocated_gb",
    "max_memory_reserved_gb",
    "card_used_gb",
    "card_total_gb",
    "seconds",
    "gpu_name",
    "torch_version",
    "transformers_version",
)
REFERENCE_ID = "bench-gpu-memory"
# sources/measurements.csv's columns, in its order.
MEASUREMENT_COLUMNS = (
    "measurement_id",
    "anchor_row",
    "model_id",
    "method_id",
    "optimizer",
    "seq_len",
    "micro_batch",
    "grad_accum",
    "gpus",
    "sharding",
    "offload",
    "grad_checkpointing",
    "flash_attention",
    "lora_rank",
    "lora_targets",
    "loss",
    "framework",
    "extra_techniques",
    "gpu_id",
    "outcome",
    "measured_value",
    "measured_unit",
    "metric",
    "note_ru",
    "reference_id",
)
# Our runs fit in minutes: a run past this is stopped and recorded as a timeout.
RUN_TIMEOUT_S = 240


class SetupError(ValueError):
    """A setup the script cannot run: the message says which field and why."""


def _parse(name: str, text: str):
    kind = SETUP_COLUMNS[name]
    if kind is bool:
        if text not in ("true", "false"):
            raise SetupError(f"{name} = {text!r}: expected true or false")
        return text == "true"
    if kind is int:
        if not text.isdigit() or int(text) < 1:
            raise SetupError(f"{name} = {text!r}: expected a whole number, at least 1")
        return int(text)
    return text


def check_setup(values: dict) -> dict:
    """A complete setup from `values` (text or typed, empty cells take DEFAULTS); SetupError when it is not runnable."""
    setup = dict(DEFAULTS)
    for name, value in values.items():
        if name not in SETUP_COLUMNS:
            raise SetupError(f"unknown column {name!r}; columns: {', '.join(SETUP_COLUMNS)}")
        if value in ("", None):
            continue
        setup[name] = _parse(name, value) if isinstance(value, str) else value
    for name in ("config", "model_id"):
        if not setup.get(name):
            raise SetupError(f"{name} is required")
    if setup["method"] not in METHODS:
        raise SetupError(f"method = {setup['method']!r}: expected one of {', '.join(METHODS)}")
    if setup["optimizer"] not in OPTIMIZERS:
        raise SetupError(f"optimizer = {setup['optimizer']!r}: expected one of {', '.join(OPTIMIZERS)}")
    if not Path(setup["config"]).is_file():
        raise SetupError(f"config = {setup['config']!r}: no such file (a local config.json; nothing is downloaded)")
    return setup


def read_setups(text: str) -> list[dict]:
    """The setups of a CSV file's text (header: any of SETUP_COLUMNS), each checked; SetupError names the line."""
    reader = csv.DictReader(io.StringIO(text))
    out = []
    for row in reader:
        try:
            out.append(check_setup(row))
        except SetupError as exc:
            raise SetupError(f"line {reader.line_num}: {exc}") from None
    return out


def loss_path(transformers_version: str) -> str:
    """The estimator's loss path of an installed transformers: 4.49 removed the shifted fp32 copy (PR #35646)."""
    major, minor = (int(p) for p in transformers_version.split(".")[:2])
    return "hf" if (major, minor) >= (4, 49) else "hf_legacy"


def measurement_id(setup: dict) -> str:
    """A measurements.csv id for a run: bench-<model>-<method>-<optimizer>-s<seq>-b<batch>[-gc]."""
    gc = "-gc" if setup["grad_checkpointing"] else ""
    return f"bench-{setup['model_id']}-{setup['method']}-{setup['optimizer']}-s{setup['seq_len']}-b{setup['micro_batch']}{gc}"


def measurement_rows(result: dict, gpu_id: str) -> list[dict]:
    """The sources/measurements.csv rows of one run: allocated, reserved and the card's used memory, in GB; a run
    out of memory gives one row, metric fits_on, with the card's memory."""
    base = {
        "anchor_row": "",
        "model_id": result["model_id"],
        "method_id": result["method"],
        "optimizer": result["optimizer"],
        "seq_len": result["seq_len"],
        "micro_batch": result["micro_batch"],
        "grad_accum": result["grad_accum"],
        "gpus": 1,
        "sharding": "ddp",
        "offload": "none",
        "grad_checkpointing": str(result["grad_checkpointing"]).lower(),
        "flash_attention": "true",
        "lora_rank": result["lora_rank"] if result["method"] == "lora" else "",
        "lora_targets": "all" if result["method"] == "lora" else "",
        "loss": result["loss"],
        "framework": "transformers",
        "extra_techniques": "",
        "gpu_id": gpu_id,
        "reference_id": REFERENCE_ID,
    }
    note = (
        f"Свой замер скриптом bench/gpu_memory.py: {result['steps']} шага на случайных токенах, веса из config.json, "
        f"torch {result['torch_version']}, transformers {result['transformers_version']}, {result['gpu_name']}."
    )
    metrics = (
        (
            ("allocated", "max_memory_allocated_gb"),
            ("reserved", "max_memory_reserved_gb"),
            ("nvidia_smi", "card_used_gb"),
        )
        if result["outcome"] == "value"
        else (("fits_on", "card_total_gb"),)
    )
    rows = []
    for metric, column in metrics:
        value = result[column]
        rows.append(
            {"measurement_id": f"{measurement_id(result)}-{metric}"}
            | base
            | {
                "outcome": result["outcome"],
                "measured_value": f"{value:.3f}",
                "measured_unit": "GB",
                "metric": metric,
                "note_ru": note,
            }
        )
    return rows


# -- the run itself (needs torch) --
def _optimizer(name: str, params):
    import torch

    if name in ("adamw", "adamw_fused"):
        return torch.optim.AdamW(params, lr=1e-5, fused=name == "adamw_fused")
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-5, momentum=0.9)
    if name == "adamw_4bit":
        from torchao.optim import AdamW4bit

        return AdamW4bit(params, lr=1e-5)
    import bitsandbytes as bnb

    make = {
        "adamw_8bit": bnb.optim.AdamW8bit,
        "paged_adamw": bnb.optim.PagedAdamW,
        "paged_adamw_8bit": bnb.optim.PagedAdamW8bit,
        "lion_8bit": bnb.optim.Lion8bit,
    }[name]
    return make(params, lr=1e-5)


def run_one(setup: dict) -> dict:
    """Train `setup` for its steps on the current CUDA device and return the result row (RESULT_COLUMNS)."""
    import torch
    import transformers

    start = time.monotonic()
    config = transformers.AutoConfig.from_pretrained(str(Path(setup["config"]).parent))
    dtype = torch.float32 if setup["method"] == "full_amp" else torch.bfloat16
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=dtype, attn_implementation="sdpa")
    if setup["method"] == "lora":
        import peft

        lora = peft.LoraConfig(r=setup["lora_rank"], lora_alpha=2 * setup["lora_rank"], target_modules="all-linear")
        model = peft.get_peft_model(model, lora)
    if setup["grad_checkpointing"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if setup["method"] == "lora":
            model.enable_input_require_grads()
    model.train()
    optimizer = _optimizer(setup["optimizer"], [p for p in model.parameters() if p.requires_grad])
    shape = (setup["micro_batch"], setup["seq_len"])
    card_used = 0.0
    torch.cuda.reset_peak_memory_stats()
    outcome = "value"
    try:
        for _ in range(setup["steps"]):
            for _ in range(setup["grad_accum"]):
                ids = torch.randint(0, config.vocab_size, shape, device="cuda")
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=setup["method"] == "full_amp"):
                    loss = model(input_ids=ids, labels=ids).loss / setup["grad_accum"]
                loss.backward()
                free, total = torch.cuda.mem_get_info()
                card_used = max(card_used, (total - free) / GB)
            optimizer.step()
            free, total = torch.cuda.mem_get_info()
            card_used = max(card_used, (total - free) / GB)
            optimizer.zero_grad(set_to_none=True)
    except torch.cuda.OutOfMemoryError:
        outcome = "oom"
    torch.cuda.synchronize()
    return setup | {
        "loss": loss_path(transformers.__version__),
        "outcome": outcome,
        "max_memory_allocated_gb": torch.cuda.max_memory_allocated() / GB if outcome == "value" else None,
        "max_memory_reserved_gb": torch.cuda.max_memory_reserved() / GB if outcome == "value" else None,
        "card_used_gb": card_used if outcome == "value" else None,
        "card_total_gb": torch.cuda.mem_get_info()[1] / GB,
        "seconds": round(time.monotonic() - start, 1),
        "gpu_name": torch.cuda.get_device_name(),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    }


def _in_subprocess(setup: dict) -> dict:
    """run_one in a fresh Python process (a clean allocator per setup); a crash or a timeout is an outcome too."""
    code = f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import gpu_memory; "
    code += "print(json.dumps(gpu_memory.run_one(json.loads(sys.argv[1]))))"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, json.dumps(setup)],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return setup | {"outcome": "timeout"}
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return setup | {"outcome": "error"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_csv(rows: list[dict], columns, path: Path | None) -> None:
    out = io.StringIO()
    writer = csv.DictWriter(out, list(columns), lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    if path is None:
        sys.stdout.write(out.getvalue())
    else:
        path.write_text(out.getvalue(), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--setups", type=Path, help="a CSV of setups (columns: " + ", ".join(SETUP_COLUMNS) + ")")
    for name, kind in SETUP_COLUMNS.items():
        flag = "--" + name.replace("_", "-")
        if kind is bool:
            ap.add_argument(flag, action="store_const", const="true", dest=name)
        else:
            ap.add_argument(flag, dest=name, help=f"default: {DEFAULTS.get(name, 'required')}")
    ap.add_argument("--gpu-id", default="", help="the gpus.csv id of the card, for --measurements")
    ap.add_argument("--out", type=Path, help="the result CSV (default: stdout)")
    ap.add_argument("--measurements", type=Path, help="also write the runs as sources/measurements.csv rows here")
    ap.add_argument("--dry-run", action="store_true", help="check the setups and print them; run nothing")
    args = ap.parse_args(argv)
    try:
        if args.setups is not None:
            setups = read_setups(args.setups.read_text(encoding="utf-8"))
        else:
            setups = [check_setup({name: getattr(args, name) for name in SETUP_COLUMNS})]
    except (SetupError, OSError) as exc:
        print(f"gpu_memory: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        write_csv(setups, SETUP_COLUMNS, args.out)
        return 0
    results = [_in_subprocess(s) for s in setups]
    write_csv(results, RESULT_COLUMNS, args.out)
    if args.measurements is not None:
        rows = [row for r in results if r["outcome"] in ("value", "oom") for row in measurement_rows(r, args.gpu_id)]
        write_csv(rows, MEASUREMENT_COLUMNS, args.measurements)
    return 0


if __name__ == "__main__":
    sys.exit(main())
