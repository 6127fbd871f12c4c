"""Edits stay true (issue 35, items 6, 7 and 9): a GPU's memory note reaches the downloads filled in,
a seed-000 verdict that flips after an edit is reported, the closing block (quote, contacts, related
materials) on every article and comparison page, and the plan beside the table rule's verdicts."""

from __future__ import annotations

import polars as pl

from pipeline.combine import filled_memory_notes
from pipeline.schema import GPUS


def gpus(*rows: dict) -> pl.DataFrame:
    base = {f.name: None for f in GPUS.fields}
    return pl.DataFrame([base | r for r in rows], schema=GPUS.polars_schema)


def test_memory_notes_are_filled_in_before_any_download():
    table = gpus(
        {"gpu_id": "b300", "memory_gb": 288.0, "memory_note_ru": "У NVIDIA — 270 ГБ; справочник считает по {memory_gb} ГБ."},
        {"gpu_id": "x", "memory_gb": 1200.5, "memory_note_ru": "{memory_gb} и ещё раз {memory_gb}"},
        {"gpu_id": "y", "memory_gb": 80.0, "memory_note_ru": None},
    )
    assert filled_memory_notes(table)["memory_note_ru"].to_list() == [
        "У NVIDIA — 270 ГБ; справочник считает по 288 ГБ.",
        "1\xa0200,5 и ещё раз 1\xa0200,5",
        None,
    ]


def test_the_catalog_and_its_csv_carry_no_placeholder(catalog, built):
    assert not catalog["gpus"]["memory_note_ru"].str.contains("{memory_gb}", literal=True).any()
    text = (built / "site" / "data" / "gpus.csv").read_text(encoding="utf-8-sig")
    assert "{memory_gb}" not in text and "справочник считает по 270 ГБ" in text
