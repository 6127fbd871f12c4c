"""Architecture: exact parameter counts from config.json values, LoRA sizes, and the validation of models.csv."""

import csv
from pathlib import Path

import pytest

from conftest import SOURCES, edit_csv
from pipeline.build import load_and_validate
from pipeline.estimate.architecture import (
    Architecture,
    architecture_from_config,
    architecture_from_row,
    linear_layers,
    lora_trainable_params,
    parameter_counts,
    synthetic_architecture,
)
from pipeline.load import connect, read_sources
from pipeline.problems import DataError

# Values of the models' config.json files on Hugging Face.
LLAMA_3_1_8B = Architecture(32, 4096, 14336, 32, 8, 128, 128256, tied_embeddings=False, gated_mlp=True)
LLAMA_3_2_3B = Architecture(28, 3072, 8192, 24, 8, 128, 128256, tied_embeddings=True, gated_mlp=True)
LLAMA_2_7B = Architecture(32, 4096, 11008, 32, 32, 128, 32000, tied_embeddings=False, gated_mlp=True)
MIXTRAL_8X7B = Architecture(
    32, 4096, 14336, 32, 8, 128, 32000, False, True, experts=8, experts_per_token=2, moe_intermediate=14336
)
DEEPSEEK_V3 = Architecture(
    61,
    7168,
    18432,
    128,
    128,
    192,
    129280,
    False,
    True,
    experts=256,
    experts_per_token=8,
    shared_experts=1,
    moe_intermediate=2048,
    dense_layers=3,
    attention_kind="mla",
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    qk_nope_head_dim=128,
    v_head_dim=128,
)
QWEN2_5_0_5B = Architecture(24, 896, 4864, 14, 2, 64, 151936, True, True, qkv_bias=True)


def test_llama_3_1_8b_counts_by_part():
    counts = parameter_counts(LLAMA_3_1_8B)
    assert counts.embedding == counts.lm_head == 128256 * 4096 == 525_336_576
    # per layer q 4096², k and v 4096·1024, o 4096²
    assert counts.attention == 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024) == 1_342_177_280
    assert counts.mlp == 32 * 3 * 4096 * 14336 == 5_637_144_576
    assert counts.norms == 32 * 2 * 4096 + 4096 == 266_240
    assert counts.total == 8_030_261_248
    assert counts.active == counts.total
    assert counts.largest_layer == 525_336_576  # the embedding, as DeepSpeed's largest_layer_params


def test_llama_2_7b_total():
    assert parameter_counts(LLAMA_2_7B).total == 6_738_415_616


def test_llama_3_2_3b_ties_the_lm_head_to_the_embedding():
    counts = parameter_counts(LLAMA_3_2_3B)
    assert counts.lm_head == 0
    assert counts.embedding == 128256 * 3072 == 394_002_432
    assert counts.total == 3_212_749_824


def test_qkv_bias_is_counted():
    # Qwen2.5-0.5B: 24 layers of q (896), k and v (2·64 each) biases.
    counts = parameter_counts(QWEN2_5_0_5B)
    assert counts.attention == 24 * (2 * 896 * 896 + 2 * 896 * 128 + 896 + 2 * 128)
    assert counts.total == 494_032_768


def test_mixtral_counts_every_expert_and_two_active():
    counts = parameter_counts(MIXTRAL_8X7B)
    assert counts.total == 46_702_792_704
    expert = 32 * 3 * 4096 * 14336  # one expert in every layer
    assert counts.active == counts.total - 6 * expert == 12_879_925_248
    router = [x for x in linear_layers(MIXTRAL_8X7B) if x.group == "router"]
    assert [(x.in_features, x.out_features, x.count) for x in router] == [(4096, 8, 32)]
    assert MIXTRAL_8X7B.is_moe and not LLAMA_2_7B.is_moe


def test_deepseek_v3_mla_and_moe():
    counts = parameter_counts(DEEPSEEK_V3)
    # q_a 7168·1536, q_b 1536·128·192, kv_a 7168·576, kv_b 512·128·256, o 128·128·7168
    assert counts.attention == 61 * 187_105_280
    assert counts.norms == 61 * (2 * 7168 + 1536 + 512) + 7168
    # 3 dense MLPs of width 18432; 58 MoE layers of 256 routed + 1 shared expert of width 2048 and a router
    assert counts.mlp == 3 * 3 * 7168 * 18432 + 58 * (257 * 3 * 7168 * 2048 + 7168 * 256)
    assert counts.total == 671_026_404_352
    assert counts.active == counts.total - 58 * 248 * 3 * 7168 * 2048 == 37_552_282_624


def test_lora_trainable_params():
    assert lora_trainable_params(LLAMA_2_7B, 8, "qv") == 32 * 2 * 8 * (4096 + 4096) == 4_194_304
    # q 8192, k and v 4096 + 1024, o 8192 (in + out), rank 16
    assert lora_trainable_params(LLAMA_3_1_8B, 16, "attention") == 32 * 16 * (2 * 8192 + 2 * 5120) == 13_631_488
    assert lora_trainable_params(LLAMA_3_1_8B, 16, "all") == 41_943_040
    # every expert gets its own adapters; the router does not
    per_expert = 3 * 8 * (4096 + 14336)
    attention = lora_trainable_params(MIXTRAL_8X7B, 8, "attention")
    assert lora_trainable_params(MIXTRAL_8X7B, 8, "all") == attention + 32 * 8 * per_expert
    with pytest.raises(ValueError):
        lora_trainable_params(LLAMA_2_7B, 8, "mlp")


def test_synthetic_architecture_scales_layers_only():
    seven = synthetic_architecture(7, LLAMA_3_1_8B)
    # 218 112 000 per layer, 1 050 677 248 outside the layers: 27.3 layers for 7e9
    assert seven == Architecture(27, 4096, 14336, 32, 8, 128, 128256, False, True)
    assert parameter_counts(seven).total == 1_050_677_248 + 27 * 218_112_000
    assert synthetic_architecture(0.001, LLAMA_3_1_8B).layers == 1
    dense = synthetic_architecture(20, MIXTRAL_8X7B)
    assert not dense.is_moe and (dense.hidden, dense.intermediate, dense.vocab) == (4096, 14336, 32000)
    assert abs(parameter_counts(dense).total - 20e9) <= parameter_counts(dense).total / dense.layers / 2


def test_architecture_from_row():
    row = {
        "layers": 32,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "attention_heads": 32,
        "kv_heads": 32,
        "head_dim": 128,
        "vocab_size": 32000,
        "tied_embeddings": False,
        "mlp_kind": "gated",
        "qkv_bias": False,
        "experts": None,
        "attention_kind": None,
    }
    assert architecture_from_row(row) == LLAMA_2_7B
    assert architecture_from_row({"model_id": "generic-7b", "layers": None}) is None
    with pytest.raises(ValueError, match="hidden_size"):
        architecture_from_row({**row, "hidden_size": None})


def _models() -> list[dict[str, str]]:
    with (SOURCES / "models.csv").open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_every_named_model_has_an_architecture_within_2_percent_of_its_stated_size():
    frames, problems, _ = read_sources(SOURCES)
    assert not [p for p in problems if p.file.endswith("models.csv")]
    result = connect(frames).sql("SELECT * FROM typed_models")
    rows = [dict(zip(result.columns, r, strict=True)) for r in result.fetchall()]
    for row in rows:
        arch = architecture_from_row(row)
        assert (arch is None) == (row["kind"] == "generic"), row["model_id"]
        if arch is None:
            continue
        counts = parameter_counts(arch)
        assert abs(counts.total / 1e9 - row["params_b"]) <= 0.02 * row["params_b"], row["model_id"]
        if row["active_params_b"] is not None:
            assert abs(counts.active / 1e9 - row["active_params_b"]) <= 0.02 * row["active_params_b"]
        assert row["arch_reference_id"] == f"hf-config-{row['model_id']}"


def test_every_architecture_reference_is_a_config_json_on_hugging_face():
    with (SOURCES / "references.csv").open(encoding="utf-8") as f:
        urls = {r["reference_id"]: r["url"] for r in csv.DictReader(f)}
    for row in _models():
        if row["arch_reference_id"]:
            url = urls[row["arch_reference_id"]]
            assert url.startswith("https://huggingface.co/") and url.endswith("/blob/main/config.json"), url


def model_problems(sources: Path) -> list[str]:
    """The problems reported in models.csv (other tables are other tests' business)."""
    with pytest.raises(DataError) as info:
        load_and_validate(sources)
    return [str(p) for p in info.value.problems if p.file.endswith("models.csv")]


CORE = (
    "layers, hidden_size, intermediate_size, attention_heads, kv_heads, head_dim, vocab_size, "
    "tied_embeddings, mlp_kind, qkv_bias, arch_reference_id"
)


@pytest.mark.parametrize(
    "old, new, expected",
    [
        (
            "named,8.03,,Llama 3.1 Community License",
            "named,9,,Llama 3.1 Community License",
            'models.csv:11: params_b = "9": по архитектуре выходит 8,03 млрд (8 030 261 248 параметров), '
            "на \u221210,8\u00a0% от указанных 9 млрд; расхождение должно быть не больше 2\u00a0%",
        ),
        (
            "named,46.7,12.9,",
            "named,46.7,10,",
            'models.csv:25: active_params_b = "10": по архитектуре выходит 12,88 млрд (12 879 925 248 параметров), '
            "на +28,8\u00a0% от указанных 10 млрд; расхождение должно быть не больше 2\u00a0%",
        ),
        (
            "hf-llama-3-1-8b,32,4096,",
            "hf-llama-3-1-8b,32,,",
            f"models.csv:11: hidden_size = (пусто): столбцы архитектуры заполняются вместе: заполните все из {CORE} "
            "или ни одного",
        ),
        (
            "false,gated,false,8,2,",
            "false,gated,false,8,10,",
            'models.csv:25: experts_per_token = "10": экспертов на токен больше, чем всего экспертов (8)',
        ),
        (
            "false,gated,false,8,2,",
            "false,gated,false,8,,",
            "models.csv:25: experts_per_token = (пусто): experts и experts_per_token заполняются вместе: "
            "оба или ни одного",
        ),
        (
            "mla,1536,512,64,",
            "mla,1536,,64,",
            "models.csv:29: kv_lora_rank = (пусто): для внимания MLA нужны kv_lora_rank, qk_rope_head_dim, "
            "qk_nope_head_dim и v_head_dim",
        ),
    ],
)
def test_one_bad_architecture_cell(sources, old, new, expected):
    edit_csv(sources / "models.csv", old, new)
    assert model_problems(sources) == [f"{sources}/{expected}"]


def test_the_real_sources_pass():
    load_and_validate(SOURCES)


def test_final_logit_softcapping_is_read_from_config_json():
    base = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100}
    assert architecture_from_config(base | {"final_logit_softcapping": 30.0}).logit_softcapping
    assert not architecture_from_config(base | {"final_logit_softcapping": None}).logit_softcapping
    assert not architecture_from_config(base).logit_softcapping
