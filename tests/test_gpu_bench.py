"""bench/gpu_memory.py (issue 36): our own CUDA measurements. Without torch it still parses, checks and plans setups
and turns a run's result into measurements.csv rows; the run itself needs a GPU and is not tested here."""

import csv
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import gpu_memory  # noqa: E402


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama"}', encoding="utf-8")
    return path


def test_importing_it_needs_no_torch():
    # torch, transformers, peft and bitsandbytes are imported inside the functions that run a setup, never at the top.
    source = (REPO / "bench" / "gpu_memory.py").read_text(encoding="utf-8")
    top = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert not [line for line in top if any(m in line for m in ("torch", "transformers", "peft", "bitsandbytes"))]


def test_setups_file_fills_defaults_and_names_a_bad_line(config):
    text = f"config,model_id,method,optimizer,seq_len,grad_checkpointing\n{config},llama-3-2-1b,full_bf16,adamw_8bit,4096,true\n"
    (setup,) = gpu_memory.read_setups(text)
    assert setup == {
        "config": str(config),
        "model_id": "llama-3-2-1b",
        "method": "full_bf16",
        "optimizer": "adamw_8bit",
        "seq_len": 4096,
        "micro_batch": 1,
        "grad_accum": 1,
        "grad_checkpointing": True,
        "lora_rank": 16,
        "steps": 3,
    }
    with pytest.raises(gpu_memory.SetupError, match="line 3: optimizer = 'adam'"):
        gpu_memory.read_setups(text + f"{config},x,lora,adam,1,false\n")
    with pytest.raises(gpu_memory.SetupError, match="no such file"):
        gpu_memory.check_setup({"config": "missing/config.json", "model_id": "x"})


@pytest.mark.parametrize(("version", "loss"), [("4.48.3", "hf_legacy"), ("4.49.0", "hf"), ("5.0.0.dev0", "hf")])
def test_loss_path_follows_the_installed_transformers(version, loss):
    assert gpu_memory.loss_path(version) == loss


def test_a_run_becomes_three_measurement_rows(config):
    setup = gpu_memory.check_setup({"config": str(config), "model_id": "llama-3-2-1b", "grad_checkpointing": True})
    result = setup | {
        "loss": "hf",
        "outcome": "value",
        "max_memory_allocated_gb": 12.3456,
        "max_memory_reserved_gb": 14.0,
        "card_used_gb": 14.9,
        "card_total_gb": 150.0,
        "gpu_name": "NVIDIA H200",
        "torch_version": "2.6.0",
        "transformers_version": "4.50.0",
    }
    rows = gpu_memory.measurement_rows(result, "h200-sxm")
    assert [(r["measurement_id"], r["metric"], r["measured_value"]) for r in rows] == [
        ("bench-llama-3-2-1b-full_bf16-adamw-s2048-b1-gc-allocated", "allocated", "12.346"),
        ("bench-llama-3-2-1b-full_bf16-adamw-s2048-b1-gc-reserved", "reserved", "14.000"),
        ("bench-llama-3-2-1b-full_bf16-adamw-s2048-b1-gc-nvidia_smi", "nvidia_smi", "14.900"),
    ]
    assert all(set(r) == set(gpu_memory.MEASUREMENT_COLUMNS) for r in rows)
    with (REPO / "sources" / "measurements.csv").open(encoding="utf-8") as f:
        assert tuple(next(csv.reader(f))) == gpu_memory.MEASUREMENT_COLUMNS
    oom = gpu_memory.measurement_rows(result | {"outcome": "oom"}, "h200-sxm")
    assert [(r["metric"], r["outcome"], r["measured_value"]) for r in oom] == [("fits_on", "oom", "150.000")]


def test_dry_run_prints_the_plan(config, capsys):
    assert gpu_memory.main(["--config", str(config), "--model-id", "m", "--method", "lora", "--dry-run"]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert [(r["method"], r["optimizer"], r["steps"]) for r in rows] == [("lora", "adamw", "3")]
    assert gpu_memory.main(["--model-id", "m", "--dry-run"]) == 2
