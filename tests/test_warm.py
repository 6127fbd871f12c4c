"""What a warm process keeps has one owner (pipeline.warm.Warm, passed into build by serve): a build
without one keeps nothing in module state, and every memo is bounded by the inputs."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import pytest

import pipeline
from pipeline.build import build
from pipeline.schema import SOURCE_TABLES
from pipeline.warm import Warm

MUTABLE = (dict, list, set, bytearray)
# The one module-level memo: labels.toml's last text -> its parse (pipeline/words.py), keyed by the
# text itself, so it is always right and holds one entry. Whether it is filled before a test depends
# on the tests that ran before it in the same process.
PARSE_CACHES = {("pipeline.words", "_PARSED")}


def module_state() -> dict[tuple[str, str], str]:
    """Every module-level dict, list, set or bytearray of the pipeline's modules, as text."""
    for info in pkgutil.walk_packages(pipeline.__path__, "pipeline."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    state = {}
    for name, module in list(sys.modules.items()):
        if name == "pipeline" or name.startswith("pipeline."):
            for attr, value in vars(module).items():
                # Not Python's own (`__builtins__` is the interpreter's one dict, which any library may add to).
                if type(value) in MUTABLE and (name, attr) not in PARSE_CACHES and not attr.startswith("__"):
                    state[name, attr] = repr(value)
    return state


@pytest.mark.slow
def test_a_build_keeps_nothing_in_module_state(sources, tmp_path):
    before = module_state()
    build(sources, tmp_path / "cold", force=True)
    assert module_state() == before


@pytest.mark.slow
def test_a_warm_build_keeps_what_it_keeps_in_its_warm(sources, tmp_path):
    before = module_state()
    warm = Warm(lives_on=True)  # as `serve` makes it: GX and the suites are made here and kept
    build(sources, tmp_path / "warm", force=True, warm=warm)
    assert module_state() == before
    assert list(warm.environments) and warm.article_env is not None and warm.gx is not None
    assert len(warm.outcomes) == len({t for t, *_ in warm.outcomes}) == len(SOURCE_TABLES) and warm.workbooks
    shown = len(warm.workbooks)
    prices = sources / "servers.csv"
    prices.write_text(prices.read_text(encoding="utf-8").replace("585000", "585001", 1), encoding="utf-8")
    build(sources, tmp_path / "warm", warm=warm)
    assert len(warm.workbooks) == shown and len(warm.outcomes) == len(SOURCE_TABLES)  # this build's, not piled up
    articles = dict(warm.article_bodies)
    assert len(articles) == len(list((pipeline.TEMPLATES / "articles").glob("*.md")))
    warm.article_bodies["finetune-memory.an-older-version"] = ("old body", "old file")  # an earlier save
    build(sources, tmp_path / "warm", force=True, warm=warm)
    assert warm.article_bodies == articles  # this render's articles only


def test_a_warm_process_makes_again_only_the_tables_of_changed_files(sources):
    """serve keeps its DuckDB connection (warm.duck): after an edit of servers.csv only the raw, typed and
    core tables of servers are made again (new table ids), and every table holds what a connection
    made anew holds; a build that stops before its core tables are made leaves no connection to take."""
    from conftest import edit_csv
    from pipeline.load import connect, create_core_tables, read_sources

    warm = Warm(lives_on=True)

    def load(keep: Warm | None, core: bool = True):
        digests: dict[str, str] = {}
        frames, problems, _ = read_sources(sources, digests)
        assert not problems
        con = connect(frames, keep, digests)
        if core:
            create_core_tables(con, keep)
        return con

    def ids(con) -> dict[str, int]:
        return dict(con.execute("SELECT table_name, table_oid FROM duckdb_tables()").fetchall())

    def rows(con) -> dict[str, list]:
        names = [t.name for t in SOURCE_TABLES] + [f"typed_{t.name}" for t in SOURCE_TABLES]
        return {name: con.execute(f'SELECT * FROM "{name}" ORDER BY ALL').fetchall() for name in names}

    first = load(warm)
    before = ids(first)
    assert len(before) == 2 * len(SOURCE_TABLES) and warm.duck[0] is first
    edit_csv(sources / "servers.csv", ",585000,", ",585001,")
    second = load(warm)
    after = ids(second)
    assert second is first and after.keys() == before.keys()
    assert {name for name in after if after[name] != before[name]} == {"raw_servers", "servers"}
    assert rows(second) == rows(load(None))

    edit_csv(sources / "servers.csv", ",585001,", ",585000,")
    load(warm, core=False)  # stopped (a problem found) before the core tables
    assert warm.duck is None
    third = load(warm)
    assert third is not first and rows(third) == rows(load(None))


def test_only_a_process_that_lives_on_keeps_its_tables_files_for_a_next_build():
    """`serve`'s Warm hands its table_files to the build (compared by frame digest next time); a
    one-build process's hands none, so that build takes no digest of its tables' frames."""
    living = Warm(lives_on=True)
    assert Warm().kept_files is None
    assert living.kept_files is living.table_files
