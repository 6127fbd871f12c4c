"""Derived frames remembered by what determines them (pipeline/frame_memo.py), and the plans that use it."""

from __future__ import annotations

import re

import polars as pl
import pytest

from conftest import edit_csv
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


SERVERS_REACH = {
    "server_fit",
    "pretraining",
    "recommendations",
    "memory_breakdown",
    "server_memory",
    "comparison",
    "comparison_advice",
}


def test_a_tables_lineage_key_changes_with_the_files_it_is_made_from_only():
    from pipeline.combine import STEPS, lineage_keys
    from pipeline.schema import SOURCE_TABLES

    digests = {t.file: f"digest of {t.file}" for t in SOURCE_TABLES}
    keys = lineage_keys(digests)
    assert set(keys) == {step.name for step in STEPS}

    def changed(**files) -> set[str]:
        edited = lineage_keys(digests | {f"{name}.csv": "edited" for name in files})
        return {name for name, key in edited.items() if keys[name] != key}

    assert changed(servers=1) == SERVERS_REACH
    assert changed(measurements=1) == {
        "calibration",
        "calibration_summary",
        "calibration_breakdown",
        "estimator_range",
        "calibration_out_of_sample",
        "estimator_constants",
        "recommendations",
        "memory_breakdown",
        "comparison",
    }
    assert changed(constants=1) == changed(typical_setup=1) == set(keys)  # every step reads the constants
    unread = lineage_keys({f: d for f, d in digests.items() if f != "throughput.csv"})
    assert "time_calibration" not in unread and "pretraining" not in unread and "estimates" in unread


def test_a_warm_rebuild_takes_the_tables_an_edit_did_not_reach(sources):
    """combine with a warm process's `kept`: after a price edit, the tables the servers do not reach are
    the last build's own frames, the others made anew, and every table is what a cold combine makes."""
    from pipeline.build import load_and_validate
    from pipeline.combine import STEPS, combine
    from pipeline.load import read_sources

    def combined(kept):
        digests: dict = {}
        read_sources(sources, digests)
        return combine(load_and_validate(sources)[0], None, kept, digests)

    kept: dict = {}
    before = combined(kept)
    held = {step.name for step in STEPS if step.held}
    assert set(kept) == held and all(kept[name][1] is before.tables[name] for name in held)
    edit_text = (sources / "servers.csv").read_text(encoding="utf-8").replace(",8,pcie,2373300,", ",8,pcie,2400000,")
    (sources / "servers.csv").write_text(edit_text, encoding="utf-8")
    after, cold = combined(kept), combined(None)
    for name, frame in after.tables.items():
        assert frame.equals(cold.tables[name]), name
        if name in kept and name not in SERVERS_REACH:
            assert frame is before.tables[name], name
    reached = {name for name in kept if after.tables[name] is not before.tables[name]}
    assert (
        reached
        == (SERVERS_REACH & set(kept))
        == {"pretraining", "memory_breakdown", "server_memory", "comparison", "comparison_advice"}
    )
    assert after.ranked.frame().equals(cold.ranked.frame())


def test_the_memory_breakdown_is_taken_from_the_memo_while_each_jobs_cards_stay(sources, store):
    """A new process's build after a price edit reads the memory breakdown from the user cache when no
    job's leading cards moved, and makes it anew when one did; either way the table made without a memo."""
    from pipeline.build import load_and_validate
    from pipeline.combine import combine

    def made_with(memo: frame_memo.FrameMemo):
        con = load_and_validate(sources)[0]
        assert combine(con, memo)["memory_breakdown"].equals(combine(con)["memory_breakdown"])
        return memo.made

    assert made_with(frame_memo.FrameMemo({}, store=store)) == ["plans", "memory_breakdown"]
    edit_csv(sources / "servers.csv", ",8,pcie,2373300,", ",8,pcie,2400000,")
    assert made_with(frame_memo.FrameMemo({}, store=store)) == []  # a new process: from the disk
    # Every 8-card server at 100,000 a month: some job's cheapest option, and so its cards, moves.
    text = (sources / "servers.csv").read_text(encoding="utf-8")
    edited = re.sub(r"(,8,(?:pcie|nvswitch|infinity-fabric),)\d+,", r"\g<1>100000,", text)
    assert edited != text
    (sources / "servers.csv").write_text(edited, encoding="utf-8")
    assert made_with(frame_memo.FrameMemo({}, store=store)) == ["memory_breakdown"]


def test_a_new_process_takes_the_tables_its_edit_did_not_reach_from_the_user_cache(sources, store, monkeypatch):
    """combine in a new process (nothing held) after a price edit: the calibration, which no server
    reaches, comes from the user cache by its lineage key; every table is what a cold combine makes,
    with the same types; a forced build makes it anew."""
    from pipeline import combine as C
    from pipeline.build import load_and_validate
    from pipeline.load import read_sources

    calls = []
    real = C.calibration.calibration
    monkeypatch.setattr(C.calibration, "calibration", lambda *args: calls.append(1) or real(*args))

    def combined(force: bool = False):
        digests: dict = {}
        read_sources(sources, digests)
        memo = frame_memo.FrameMemo({}, read=not force, store=store)
        return C.combine(load_and_validate(sources)[0], memo, None if force else {}, digests)

    combined()
    stored = list((store.root / C.LINEAGE_NAMESPACE).glob("*.bin"))  # the plans' memo steps keep theirs
    assert len(calls) == 1 and len(stored) == len([s for s in C.STEPS if s.held and not s.memo]) == 15
    edit_csv(sources / "servers.csv", ",8,pcie,2373300,", ",8,pcie,2400000,")
    again = combined()
    assert len(calls) == 1  # from the user cache
    cold = C.combine(load_and_validate(sources)[0])
    assert len(calls) == 2
    for name, frame in cold.tables.items():
        assert again.tables[name].schema == frame.schema and again.tables[name].equals(frame), name
    combined(force=True)
    assert len(calls) == 3
