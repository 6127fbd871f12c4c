"""Derived frames remembered by what determines them (pipeline/frame_memo.py), and the plans that use it."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline import cache, frame_memo
from pipeline.estimate import recommend


@pytest.fixture
def store(tmp_path):
    return cache.Cache(tmp_path / "cache")


def counting(frame: pl.DataFrame):
    calls = []

    def make() -> pl.DataFrame:
        calls.append(1)
        return frame

    return make, calls


def test_a_frame_is_made_once_per_parts_in_the_process_and_on_disk(store):
    frame = pl.DataFrame({"a": [1, 2], "b": ["x", None]})
    make, calls = counting(frame)
    held: dict = {}
    assert frame_memo.FrameMemo(held, store=store).get("t", ["1"], make).equals(frame)
    assert frame_memo.FrameMemo(held, store=store).get("t", ["1"], make).equals(frame)
    assert len(calls) == 1  # held in the process
    fresh = frame_memo.FrameMemo({}, store=store)
    found = fresh.get("t", ["1"], make)
    assert found.equals(frame) and found.schema == frame.schema and len(calls) == 1 and fresh.made == []
    other = frame_memo.FrameMemo({}, store=store)
    other.get("t", ["2"], make)  # other parts: made again
    assert len(calls) == 2 and other.made == ["t"]


def test_force_makes_anew_and_a_damaged_entry_is_made_again(store):
    frame = pl.DataFrame({"a": [1.5]})
    make, calls = counting(frame)
    frame_memo.FrameMemo({}, store=store).get("t", ["p"], make)
    frame_memo.FrameMemo({}, read=False, store=store).get("t", ["p"], make)
    assert len(calls) == 2
    [entry] = (store.root / frame_memo.NAMESPACE).glob("*.bin")
    data = bytearray(entry.read_bytes())
    data[-3] ^= 0xFF
    entry.write_bytes(bytes(data))
    assert frame_memo.FrameMemo({}, store=store).get("t", ["p"], make).equals(frame)
    assert len(calls) == 3


def test_the_disk_part_is_off_with_the_validation_cache(store, monkeypatch):
    monkeypatch.setenv("GPU_FINETUNE_VALIDATION_CACHE", "off")
    make, calls = counting(pl.DataFrame({"a": [1]}))
    frame_memo.FrameMemo({}, store=store).get("t", ["p"], make)
    frame_memo.FrameMemo({}, store=store).get("t", ["p"], make)
    assert len(calls) == 2 and not (store.root / frame_memo.NAMESPACE).exists()


def test_frame_digest_reads_values_and_types():
    a = pl.DataFrame({"x": [1, 2]})
    assert frame_memo.frame_digest(a) == frame_memo.frame_digest(pl.concat([a.head(1), a.tail(1)], rechunk=False))
    assert frame_memo.frame_digest(a) != frame_memo.frame_digest(pl.DataFrame({"x": [1, 3]}))
    assert frame_memo.frame_digest(a) != frame_memo.frame_digest(a.cast({"x": pl.Int32}))


def test_a_price_edit_reuses_the_plans_and_gives_the_table_made_anew(catalog, store):
    """The plans do not depend on prices: a memo made before the edit gives them, and the table is the one
    computed without any memo (the new price, its new cost and rank)."""
    servers = catalog["servers"]
    args = (catalog["models"], catalog["methods"])
    rest = (catalog["gpus"], catalog.constants)
    held: dict = {}
    recommend.recommendations(*args, servers, *rest, memo=frame_memo.FrameMemo(held, store=store))
    first = servers["server_id"].sort()[0]
    edited = servers.with_columns(
        price_rub_month=pl.when(pl.col("server_id") == first).then(1).otherwise(pl.col("price_rub_month"))
    )
    memo = frame_memo.FrameMemo(held, store=store)
    reused = recommend.recommendations(*args, edited, *rest, memo=memo)
    assert memo.made == []
    anew = recommend.recommendations(*args, edited, *rest)
    assert reused.equals(anew)
    cheapest = anew.filter(pl.col("server_id") == first, pl.col("recommended"))
    assert cheapest.height > 0 and (cheapest["rank"] == 1).all()  # one rouble a month: first wherever it fits
    moved = recommend.recommendations(*args, edited.with_columns(network=pl.lit("infiniband-ndr")), *rest, memo=memo)
    assert memo.made == ["plans"]  # a server's network is part of its plan
    assert not moved.equals(anew)
