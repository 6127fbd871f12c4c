"""bench/throughput_cuda.py (issue 34): the dry run plans a measurement without torch or a GPU."""

import json
import sys
from pathlib import Path

import polars as pl

from pipeline.estimate import first_principles, step_time
from pipeline.estimate.architecture import architecture_from_config

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "tests" / "configs" / "llama-3.1-8b.json"


def _bench():
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import throughput_cuda
    finally:
        sys.path.pop(0)
    return throughput_cuda


def test_dry_run_prints_the_planned_row_and_the_time_models_tokens_per_second(catalog, capsys) -> None:
    bench = _bench()
    words = ["--config", str(CONFIG), "--model-id", "llama-3-1-8b", "--gpu-id", "h100-sxm", "--method", "lora"]
    assert bench.main([*words, "--dry-run", "--seq-len", "4096", "--micro-batch", "2", "--checkpointing"]) == 0
    out = json.loads(capsys.readouterr().out)
    setup = first_principles.Setup(method="lora", seq_len=4096, micro_batch=2, grad_checkpointing=True)
    gpu = catalog["gpus"].filter(pl.col("gpu_id") == "h100-sxm").row(0, named=True)
    arch = architecture_from_config(json.loads(CONFIG.read_text(encoding="utf-8")))
    expected = step_time.training_time(arch, setup, gpu, 1e6, catalog.constants, link="one_card")
    assert out["predicted_tokens_per_second"] == expected.tokens_per_second
    row = out["row"]
    assert (row["run_id"], row["checkpointing"], row["tokens_per_second"]) == (
        "own-llama-3-1-8b-lora-1xh100-sxm-s4096", "full", "",
    )  # fmt: skip
    # The rows the script writes cite it, and sources/references.csv names it.
    assert row["reference_id"] == bench.REFERENCE_ID in catalog["references"]["reference_id"].to_list()


def test_dry_run_refuses_an_id_sources_do_not_have() -> None:
    import pytest

    bench = _bench()
    args = bench.parse(["--config", str(CONFIG), "--model-id", "llama-9", "--gpu-id", "h100-sxm", "--dry-run"])
    with pytest.raises(SystemExit, match="--model-id 'llama-9' is not a model_id of"):
        bench.dry_run(args)
