"""measurements.csv: published peak-memory measurements, transcribed exactly, and the rules that guard them."""

import csv
from pathlib import Path

import pytest

from conftest import SOURCES
from pipeline.build import load_and_validate
from pipeline.problems import DataError


def rows_of(sources: Path = SOURCES) -> list[dict]:
    with (sources / "measurements.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def set_cell(sources: Path, measurement_id: str, column: str, value: str) -> int:
    """Change one cell of measurements.csv; returns the file line of the row."""
    path = sources / "measurements.csv"
    rows = rows_of(sources)
    (index,) = [i for i, r in enumerate(rows) if r["measurement_id"] == measurement_id]
    rows[index][column] = value
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return index + 2


def problems_of(sources: Path) -> list[str]:
    with pytest.raises(DataError) as info:
        load_and_validate(sources)
    return [str(p) for p in info.value.problems]


@pytest.fixture(scope="module")
def measured() -> dict[str, tuple]:
    con, _ = load_and_validate(SOURCES)
    rows = con.sql(
        "SELECT measurement_id, anchor_row, model_id, method_id, seq_len, micro_batch, gpus, outcome, "
        "measured_value, measured_unit, metric, gpu_id FROM measurements"
    ).fetchall()
    return {r[0]: r[1:] for r in rows}


def test_real_table_passes_and_has_every_measurement(measured):
    # + torchao's four Llama2-7B optimizer rows, ms-swift's seven examples and torchtune PR #961's two runs (issue 36)
    # + torchtune's README speed table (six), ms-swift's Megatron benchmark (one) and Qwen3 best practices (three),
    # LitGPT's dataset tutorial (two); axolotl's Llama 2 and Llama 3 examples (four) and Liger Kernel's Hugging Face
    # example (six, two of them out of memory)
    assert len(measured) == 150
    assert sum(r[6] == "oom" for r in measured.values()) == 14
    anchor_rows = {r[0] for r in measured.values() if r[0] is not None}
    assert anchor_rows == set(range(25, 47)) | set(range(59, 65)) | {68, 69, 70}
    # §1.3: LLaMA-Factory issues #7409 (three Qwen2-7B rows) and #4772 (QLoRA and LoRA)
    assert sorted(k for k, r in measured.items() if r[0] is None and k.startswith("lf-")) == [
        "lf-issue-4772-glm-4-9b-lora",
        "lf-issue-4772-glm-4-9b-qlora",
        "lf-issue-7409-qwen2-7b-seq1024-mb1",
        "lf-issue-7409-qwen2-7b-seq2048-mb1",
        "lf-issue-7409-qwen2-7b-seq2048-mb2",
    ]


def test_sub_rows_are_separate_rows(measured):
    phi = sorted((r[4], r[7]) for r in measured.values() if r[0] == 42)
    assert phi == [(1, 4.82), (2, 6.76), (4, 10.68)]
    context = sorted((r[3], r[6], r[7]) for k, r in measured.items() if r[0] == 70 and "-fa2-" in k)
    assert context == [
        (1024, "value", 6),
        (2048, "value", 7),
        (4096, "value", 9),
        (8192, "value", 12),
        (16384, "value", 19),
        (32768, "value", 32),
        (65536, "oom", None),
        (100000, "oom", None),
    ]
    assert sum(r[0] == 70 for r in measured.values()) == 16


def test_transcribed_values(measured):
    assert measured["litgpt-llama-2-7b-lora-mb1"] == (
        35, "llama-2-7b", "lora", 1304, 1, 1, "value", 21.30, "GB", "allocated", "a100-40gb"
    )  # fmt: skip
    assert measured["torchtune-3b-ladder-29"] == (
        29, "llama-3-2-3b", "full_bf16", 4096, 2, 1, "value", 24.9, "GiB", "active", "a100-80gb"
    )  # fmt: skip
    assert measured["peft-3b-full"] == (
        59, "llama-3-2-3b", "full_bf16", 768, 4, 1, "value", 36.20, "GiB", "reserved_delta", "l40s"
    )  # fmt: skip
    assert measured["litgpt-llama-2-7b-lora-mb4"][6:8] == ("oom", None)
    assert measured["litgpt-llama-2-7b-lora-mb1-2gpu"][5:8] == (2, "value", 22.18)
    assert measured["lf-issue-7409-qwen2-7b-seq2048-mb1"][6:9] == ("value", 26.1, "GB")
    assert measured["lf-issue-4772-glm-4-9b-qlora"][6:8] == ("value", 72)
    assert measured["lf-issue-4772-glm-4-9b-lora"][6:8] == ("value", 66)


def test_every_row_has_a_note_and_a_known_source():
    rows = rows_of()
    assert all(r["note_ru"].strip() for r in rows)
    assert {r["reference_id"] for r in rows} == {
        "torchtune-readme",
        "litgpt-resource-tables",
        "peft-method-comparison",
        "llama-factory-wiki-performance",
        "llama-factory-issue-7409",
        "llama-factory-issue-4772",
        "litgpt-config-hub",
        "torchtune-lora-tutorial",
        "torchtune-qlora-tutorial",
        "peft-fsdp-docs",
        "peft-deepspeed-docs",
        "unsloth-benchmarks",
        "torchao-optim",
        "ms-swift-examples",
        "torchtune-pr-961",
        "torchtune-readme-speed",
        "ms-swift-megatron-benchmark",
        "ms-swift-qwen3-best-practice",
        "litgpt-prepare-dataset",
        "axolotl-llama2-example",
        "axolotl-llama3-example",
        "liger-kernel-hf-example",
    }


def test_issue_36_coverage_rows(measured):
    # consumer card and 8-bit paged AdamW (torchtune's README speed table), an MoE run, sequences of 8192 (ms-swift)
    assert measured["torchtune-speed-llama3-1-8b-full-4090"] == (
        None, "llama-3-1-8b", "full_bf16", 2048, 2, 1, "value", 18.9, "GiB", "active", "rtx-4090"
    )  # fmt: skip
    assert measured["torchtune-speed-llama3-1-405b-qlora-8xa100"][5:9] == (8, "value", 44.8, "GB")
    assert measured["swift-mg-bench-qwen2-5-14b-full-8k-zero3"] == (
        None, "qwen2-5-14b", "full_amp", 8192, 1, 8, "value", 58, "GB", "unknown", None
    )  # fmt: skip
    assert measured["swift-qwen3-30b-a3b-full-8k-zero2-16gpu"] == (
        None, "qwen3-30b-a3b", "full_amp", 8192, 1, 16, "oom", None, "GiB", "unknown", "a100-80gb"
    )  # fmt: skip
    assert measured["swift-qwen3-8b-full-8k-liger"][3:8] == (8192, 1, 4, "value", 60)
    falcon = sorted((r[3], r[7]) for k, r in measured.items() if k.startswith("litgpt-dataset-falcon-7b-"))
    assert falcon == [(256, 15.73), (1079, 23.52)]
    # axolotl: consumer card (RTX 4090), 8-bit AdamW on an 8-bit base, 8192 packed tokens with PagedAdamW8bit, FSDP
    assert measured["axolotl-llama-2-7b-lora-8bit-4090"] == (
        None, "llama-2-7b", "qlora_8bit", 4096, 2, 1, "value", 20, "GB", "unknown", "rtx-4090"
    )  # fmt: skip
    assert measured["axolotl-llama-3-8b-full-paged8bit-48gb"][2:9] == ("full_bf16", 8192, 1, 1, "value", 48, "GB")
    assert measured["axolotl-llama-3-70b-qlora-fsdp-offload-2gpu"][5:9] == (2, "value", 21, "GB")
    liger = sorted(
        (r[4], r[7]) for k, r in measured.items() if k.startswith("liger-qwen2-7b-") and k.endswith("-liger")
    )
    assert liger == [(32, 38.38), (48, 41.1), (64, 41.71)]


@pytest.mark.parametrize(
    "measurement_id, column, value, rule",
    [
        (
            "litgpt-llama-2-7b-lora-mb1",
            "measured_value",
            "",
            "measured_value = (пусто): outcome = value: нужен измеренный пик памяти",
        ),
        (
            "lf-wiki-ctx-fa2-65536",
            "measured_value",
            "40",
            'measured_value = "40": outcome = oom: оставьте измеренный пик пустым',
        ),
        (
            "torchtune-3b-ladder-25",
            "lora_rank",
            "8",
            'lora_rank = "8": способ full_bf16 — полное дообучение: оставьте lora_rank пустым',
        ),
        (
            "peft-3b-lora-r32",
            "lora_targets",
            "",
            "lora_targets = (пусто): способ lora — LoRA/QLoRA: lora_targets обязателен",
        ),
        (
            "peft-3b-ia3",
            "lora_rank",
            "8",
            'lora_rank = "8": у адаптеров ia3 и prompt_tuning нет ранга: оставьте lora_rank пустым',
        ),
        (
            "litgpt-llama-2-7b-lora-mb1",
            "measured_value",
            "41.30",
            'measured_value = "41.3": пик 41.3 GB больше памяти одной видеокарты a100-40gb (40 ГБ)',
        ),
        (
            "torchtune-3b-ladder-26",
            "measured_value",
            "75.0",
            'measured_value = "75": пик 75 GiB = 80,5 ГБ больше памяти одной видеокарты a100-80gb (80 ГБ)',
        ),
        (
            "torchtune-3b-ladder-27",
            "extra_techniques",
            "torch_compile, dora",
            'extra_techniques = "torch_compile, dora": нужен список через запятую (без пробелов) из: '
            "torch_compile, frozen_fp32, quantized_lm_head, lora_lm_head, fsdp_frozen_unsharded, "
            "optimizer_in_backward, activation_offloading, unsloth_kernels, dora, ia3, prompt_tuning, "
            "double_quant, lora_dropout, quant_inputs_held, unknown_lengths",
        ),
        (
            "peft-3b-full",
            "gpu_id",
            "v100-32gb",
            f'gpu_id = "v100-32gb": в таблице «Видеокарты» ({SOURCES.name}/gpus.csv) нет строки с таким id',
        ),
    ],
)
def test_one_bad_cell_is_reported(sources, measurement_id, column, value, rule):
    line = set_cell(sources, measurement_id, column, value)
    problems = problems_of(sources)
    if column == "gpu_id":
        rule = rule.replace(f"{SOURCES.name}/gpus.csv", f"{sources}/gpus.csv")
    assert problems == [f"{sources}/measurements.csv:{line}: {rule}"]
