"""FP8 compute for LoRA on a 16-bit base (issue 34): estimated, not refused; QLoRA in FP8 still refused."""

from dataclasses import replace

import pytest

from pipeline.estimate import first_principles, step_time
from pipeline.estimate.architecture import parameter_counts
from pipeline.estimate.first_principles import FP8, Setup


def test_lora_in_fp8_is_a_valid_setup_and_qlora_in_fp8_is_not() -> None:
    assert Setup(method="lora", fp8=True).problems() == []
    assert Setup(method="full_bf16", fp8=True).problems() == []
    assert Setup(method="qlora_4bit", fp8=True).problems() == [
        "FP8 training applies to full fine-tuning and LoRA on a 16-bit base; QLoRA's quantised base is "
        "dequantised to bf16 for its matmuls"
    ]


def test_lora_in_fp8_adds_an_fp8_copy_of_the_frozen_matmul_weights_and_keeps_the_activations(catalog) -> None:
    arch = first_principles.model_architectures(catalog["models"])["llama-3-1-8b"]
    c = catalog.constants
    bf16 = replace(first_principles.typical_setup("lora", c), grad_checkpointing=False)
    fp8 = replace(bf16, fp8=True)
    before, after = first_principles.estimate(arch, bf16, c), first_principles.estimate(arch, fp8, c)
    counts = parameter_counts(arch)
    assert after.weights - before.weights == pytest.approx(FP8 * (counts.attention + counts.mlp), rel=1e-12)
    assert after.activations == before.activations  # the bf16 adapters keep their own bf16 inputs


def test_cli_estimates_lora_in_fp8_at_the_measured_fp8_speed_up(catalog) -> None:
    from pipeline.__main__ import parser
    from pipeline.tools import estimate_cli

    def run(*extra: str) -> dict:
        words = ["--model", "llama-3-1-8b", "--method", "lora", "--gpu", "h100-sxm", "--tokens", "1e8", *extra]
        return estimate_cli.result(catalog, parser(["estimate", *words], "x").parse_args(["estimate", *words]))

    bf16, fp8 = run(), run("--fp8")
    assert fp8["problems"] == [] and fp8["setup"]["fp8"] is True
    speed_up = catalog.constants["fp8_speedup"]
    assert fp8["time"]["efficiency"] == pytest.approx(bf16["time"]["efficiency"] * speed_up, rel=1e-12)
    assert fp8["time"]["hours"] == pytest.approx(bf16["time"]["hours"] / speed_up, rel=1e-12)
    assert step_time.TIME_CONSTANTS == tuple(fp8["time"]["constants"])
