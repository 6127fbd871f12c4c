"""The held-out set of issue 14 (bench/heldout_measurements.csv) and its scorer (bench/heldout.py)."""

import csv
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import heldout  # noqa: E402

SOURCES = REPO / "sources"


@pytest.fixture(scope="module")
def rows():
    return heldout.read_rows(heldout.DEFAULT_CSV)


@pytest.fixture(scope="module")
def predicted(rows):
    return heldout.predict(rows, SOURCES)


def test_the_file_parses_with_every_metric_kind(rows):
    assert len(rows) == 114
    assert sum(r["outcome"] == "oom" for r in rows) == 20
    kinds = {heldout.KIND[r["metric"]] for r in rows}
    assert kinds == set(heldout.KINDS)
    assert all(r["source_url"].startswith("https://") and r["quote"] for r in rows)


def test_every_row_is_accepted_by_the_estimator(rows, predicted):
    assert [p["problems"] for p in predicted] == [""] * len(rows)
    assert all(float(p["whole_card"]) > 0 for p in predicted)


def test_no_row_duplicates_a_calibration_row(rows):
    with (SOURCES / "measurements.csv").open(encoding="utf-8") as f:
        known = list(csv.DictReader(f))
    ids = {r["measurement_id"] for r in known}
    key = ("model_id", "method_id", "seq_len", "micro_batch", "gpus", "sharding", "offload", "measured_value")
    settings = {tuple(r[k] for k in key) for r in known}
    assert not [r["measurement_id"] for r in rows if r["measurement_id"] in ids]
    assert not [r["measurement_id"] for r in rows if tuple(r[k] for k in key) in settings]


# A note that names the transformers release a run used ("transformers 4.48.1", "transformers 4.46–4.48").
TRANSFORMERS_RELEASE = re.compile(r"transformers (\d+)\.(\d+)")


def test_a_run_on_transformers_before_4_49_has_the_shifted_logits_copy(rows):
    """ForCausalLMLoss copied the shifted fp32 logits until PR #35646 (transformers 4.49): a row, held out or
    calibration, whose note names an earlier release is hf_legacy, never hf."""
    with (SOURCES / "measurements.csv").open(encoding="utf-8", newline="") as f:
        calibration = list(csv.DictReader(f))
    notes = [(r["measurement_id"], r["loss"], r["note"]) for r in rows]
    notes += [(r["measurement_id"], r["loss"], r["note_ru"]) for r in calibration]
    named = {}
    for measurement_id, loss, note in notes:
        releases = [(int(a), int(b)) for a, b in TRANSFORMERS_RELEASE.findall(note)]
        if releases and min(releases) < (4, 49):
            named[measurement_id] = loss
    # Held out: fms-acceleration 77, Answer.AI 17, Unsloth's blogs 4, llama-recipes 2, Phil Schmid 1;
    # calibration: Unsloth's December 2024 table 7, axolotl's Llama 3 examples 2 (before 4.46), Liger's example 3 (4.43.3).
    assert len(named) == 77 + 17 + 4 + 2 + 1 + 7 + 2 + 3
    assert {i: loss for i, loss in named.items() if loss == "hf"} == {}


def test_the_reading_compared_is_the_one_the_metric_names(rows, predicted):
    recs = heldout.records(rows, predicted)
    valued = [(row, p) for row, p in zip(rows, predicted, strict=True) if row["outcome"] == "value"]
    assert len(recs) == len(valued) == 94
    for (row, p), rec in zip(valued, recs, strict=True):
        assert rec["predicted_gb"] == float(p[heldout.READING[row["metric"]]])
    first = rows[0]
    assert first["measured_unit"] == "GiB"
    assert recs[0]["measured_gb"] == float(first["measured_value"]) * 2**30 / 10**9


def test_a_batch_row_sets_every_modelled_technique():
    row = {c: "" for c in heldout.COLUMNS} | {"model_id": "llama-2-7b", "extra_techniques": "lora_dropout,double_quant"}
    out = heldout.batch_row(row)
    assert out["model"] == "llama-2-7b"
    assert {t: out[t] for t in heldout.TECHNIQUES} == {
        "lora_dropout": "true",
        "double_quant": "true",
        "quantized_lm_head": "false",
        "lora_lm_head": "false",
        "frozen_fp32": "false",
        "optimizer_in_backward": "false",
        "quant_inputs_held": "false",
    }


TINY = [
    {
        "measurement_id": "a",
        "model_id": "m",
        "method_id": "lora",
        "sharding": "zero3",
        "metric_kind": "reserved",
        "error": 0.10,
    },
    {
        "measurement_id": "b",
        "model_id": "m",
        "method_id": "lora",
        "sharding": "ddp",
        "metric_kind": "reserved",
        "error": -0.30,
    },
    {
        "measurement_id": "c",
        "model_id": "m",
        "method_id": "qlora_4bit",
        "sharding": "ddp",
        "metric_kind": "reserved",
        "error": 0.05,
    },
    {
        "measurement_id": "d",
        "model_id": "m",
        "method_id": "qlora_4bit",
        "sharding": "ddp",
        "metric_kind": "card",
        "error": -0.20,
    },
]


def test_the_scorer_figures_on_a_tiny_set_are_exact():
    out = heldout.summary(TINY, worst=2)
    assert out["all"] == {
        "rows": 4,
        "median_abs_error": 0.15000000000000002,
        "within_25": 0.75,
        "median_error": -0.07500000000000001,
        "worst": [{"measurement_id": "b", "error": -0.30}, {"measurement_id": "d", "error": -0.20}],
    }
    assert list(out["metric_kind"]) == ["reserved", "card"]
    assert out["metric_kind"]["reserved"]["rows"] == 3
    assert out["metric_kind"]["reserved"]["median_abs_error"] == 0.10
    assert out["metric_kind"]["reserved"]["within_25"] == 2 / 3
    assert out["metric_kind"]["card"]["median_error"] == -0.20
    assert list(out["kind_sharding"]) == ["reserved ddp", "reserved zero3", "card ddp"]
    assert out["kind_sharding"]["reserved ddp"]["median_abs_error"] == 0.175
    assert out["kind_sharding"]["reserved zero3"]["rows"] == 1
    assert out["method"]["lora"]["median_abs_error"] == 0.2
    assert out["method"]["qlora_4bit"]["within_25"] == 1.0


def test_a_run_out_of_memory_counts_whether_the_estimator_says_it_does_not_fit(rows, predicted):
    ooms = heldout.oom_records(rows, predicted)
    assert len(ooms) == 20
    for rec in ooms:
        assert rec["predicts_oom"] == (rec["predicted_gb"] > rec["card_gb"])
    tiny = [
        {"measurement_id": "x", "predicts_oom": True},
        {"measurement_id": "y", "predicts_oom": False},
        {"measurement_id": "w", "predicts_oom": True},
        {"measurement_id": "v", "predicts_oom": False},
    ]
    assert heldout.oom_stats(tiny) == {"rows": 4, "predicted": 2, "share": 0.5, "missed": ["v", "y"]}
    assert heldout.summary(TINY, ooms=tiny)["oom"]["predicted"] == 2
    assert heldout.oom_stats([]) == {"rows": 0, "predicted": 0, "share": None, "missed": []}


def test_an_oom_row_must_name_the_card(tmp_path):
    path = tmp_path / "bad.csv"
    text = heldout.DEFAULT_CSV.read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.startswith("fms-mixtral-hf-full-1gpu-mb4-oom,"))
    path.write_text(text.replace(line, line.replace(",oom,fits_on,", ",oom,nvidia_smi,")), encoding="utf-8")
    with pytest.raises(heldout.HeldoutError, match=r"an oom row's metric is fits_on"):
        heldout.read_rows(path)
    path.write_text(text.replace(line, line.replace(",oom,fits_on,", ",failed,fits_on,")), encoding="utf-8")
    with pytest.raises(heldout.HeldoutError, match=r"outcome 'failed'; expected value or oom"):
        heldout.read_rows(path)


def test_a_bad_file_gives_a_clear_message(tmp_path):
    path = tmp_path / "bad.csv"
    text = heldout.DEFAULT_CSV.read_text(encoding="utf-8").replace(",reserved,4.98,GiB,", ",peak,4.98,GiB,", 1)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(heldout.HeldoutError, match=r"bad.csv:2: metric 'peak'; expected one of allocated"):
        heldout.read_rows(path)
    path.write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(heldout.HeldoutError, match="the columns must be measurement_id"):
        heldout.read_rows(path)


def test_the_scorer_groups_by_loss_path_and_prints_the_calibration_set_out_of_sample():
    # Issue 36: records without a loss take the default path (hf); the calibration set's in-sample and
    # leave-one-source-out figures follow the held-out ones, one line per group.
    out = heldout.summary([*TINY[:2], TINY[2] | {"loss": "chunked"}, TINY[3]], worst=1)
    assert {k: v["rows"] for k, v in out["loss"].items()} == {"chunked": 1, "hf": 3}
    rows = [
        {
            "dimension": "metric_kind",
            "group_id": "reserved",
            "rows": 8,
            "in_sample_median_abs_error": 0.044,
            "in_sample_within_25": 0.875,
            "out_of_sample_median_abs_error": 0.171,
            "out_of_sample_within_25": 0.5,
            "out_of_sample_median_error": -0.036,
        }
    ]
    assert heldout.render_out_of_sample(rows).splitlines()[-1].split() == [
        "metric_kind", "reserved", "8", "4.4", "%", "87.5", "%", "17.1", "%", "50.0", "%", "-3.6", "%",
    ]  # fmt: skip
