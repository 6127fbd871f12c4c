"""recommendations is never held whole (recommend.Ranked): the build keeps its order and makes its rows
when asked, in pieces of whole jobs (the downloads), a job's (the CLI, an article's offer), the rows
the pages read (`leading`) or whole (tools and tests). Each of those is what the whole table gives."""

import io

import duckdb
import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipeline.estimate import recommend, table_rule
from pipeline.publish import downloads
from pipeline.schema import TABLES_BY_NAME

RECOMMENDATIONS = TABLES_BY_NAME["recommendations"]


@pytest.fixture(scope="module")
def inputs(catalog):
    """The real catalog's plans with prices by the hour (the H200 servers, the cheapest then), on request
    (the servers without a price) and a copy of each H200 server under another id (the same plans and
    prices: its jobs' rank-1 rows tie on cost with the copy's)."""
    servers = catalog["servers"]
    h200 = pl.col("server_id").str.contains("h200")
    copies = servers.filter(h200).with_columns(server_id=pl.col("server_id") + "-copy")
    servers = pl.concat([servers, copies]).with_columns(
        price_rub_hour=pl.when(h200).then(pl.lit(900.0)),
        price_rub_month=pl.when(h200).then(None).otherwise(pl.col("price_rub_month")),
    )
    spreads = recommend.plan_spreads(catalog["estimator_range"])
    return (catalog["models"], catalog["methods"], servers, catalog["gpus"], catalog.constants, spreads)


@pytest.fixture(scope="module")
def whole(inputs):
    return recommend.rank_plans(*inputs).frame()


@pytest.fixture(params=["kept", "pieced"])
def ranked(request, inputs, monkeypatch):
    """The table held as its order: kept whole once made (a small catalog's), or made in pieces and
    windows of each job's rows every time (a large catalog's: KEPT_ROWS 0)."""
    if request.param == "pieced":
        monkeypatch.setattr(recommend, "KEPT_ROWS", 0)
    return recommend.rank_plans(*inputs)


def _jobs(frame: pl.DataFrame) -> list[tuple[str, str]]:
    return list(dict.fromkeys(frame.select("model_id", "method_id").iter_rows()))


def test_the_whole_table_is_every_job_on_every_server_with_ties_and_risks(ranked, whole, catalog):
    assert whole.columns == list(RECOMMENDATIONS.columns) and ranked.height == whole.height > 0
    assert whole.select(RECOMMENDATIONS.primary_key).is_duplicated().sum() == 0
    assert len(ranked.jobs) == len(_jobs(whole)) and ranked.jobs.rows() == _jobs(whole)
    assert whole.filter(pl.col("rank") == 1)["tied_on_cost"].any()  # a copy ties with its original
    assert (whole["reason"] == "tight").any() and set(whole["cost_basis"].drop_nulls()) == {
        "hour",
        "month",
        "on_request",
    }


def test_pieces_are_whole_jobs_in_rank_order_and_make_the_table(ranked, whole):
    pieces = list(ranked.chunks(rows=100))
    assert len(pieces) > 10 and all(0 < p.height <= 100 for p in pieces)
    jobs = [_jobs(p) for p in pieces]
    assert sum(len(j) for j in jobs) == len(ranked.jobs)  # no job split between two pieces
    assert_frame_equal(pl.concat(pieces), whole)
    if recommend.KEPT_ROWS >= ranked.height:
        (piece,) = ranked.chunks()  # no larger than KEPT_ROWS: the kept frame, one piece
        assert piece is ranked.frame() and piece.equals(whole)
    else:
        assert_frame_equal(pl.concat(ranked.chunks()), whole) and ranked._whole is None  # never held


def test_the_leading_rows_are_each_jobs_first_and_its_best_risk(ranked, whole):
    job = ["model_id", "method_id"]
    tight = pl.col("reason") == "tight"
    expected = whole.filter((pl.col("rank") == 1) | (tight & (tight.cum_sum().over(job) == 1)))
    assert_frame_equal(ranked.leading, expected)
    assert ranked.leading.filter(pl.col("rank") > 1).height > 0  # risks below the first row
    assert ranked.leading.filter(pl.col("rank") == 1)["tied_on_cost"].any()  # read off its neighbour
    assert_frame_equal(recommend.best(ranked.leading), recommend.best(whole))


def test_a_jobs_rows_and_an_unknown_job(ranked, whole):
    for model_id, method_id in ranked.jobs.rows()[::17]:
        expected = whole.filter((pl.col("model_id") == model_id) & (pl.col("method_id") == method_id))
        assert_frame_equal(ranked.job(model_id, method_id), expected)
    none = ranked.job("no-such-model", "lora")
    assert none.height == 0 and none.schema == whole.schema


def test_a_table_held_whole_reads_as_ranked(ranked, whole):
    held = recommend.Whole(whole)
    assert held.height == whole.height and list(held.chunks()) == [whole] and held.frame() is whole
    assert_frame_equal(held.leading, ranked.leading)
    assert np.array_equal(held.offsets, ranked.offsets) and held.jobs.equals(ranked.jobs)
    model_id, method_id = ranked.jobs.row(3)
    assert_frame_equal(held.job(model_id, method_id), ranked.job(model_id, method_id))


def test_an_empty_table_is_one_empty_piece(catalog):
    spreads = recommend.plan_spreads(catalog["estimator_range"])
    args = (catalog["models"].clear(), catalog["methods"], catalog["servers"], catalog["gpus"], catalog.constants)
    empty = recommend.rank_plans(*args, spreads)
    (piece,) = list(empty.chunks())
    assert empty.height == 0 and piece.columns == list(RECOMMENDATIONS.columns) and piece.height == 0
    assert empty.leading.height == 0 and empty.job("a", "b").height == 0


@pytest.fixture
def small_pieces(monkeypatch, catalog):
    """Pieces of about 300 rows, so that the real catalog's recommendations come in several."""
    monkeypatch.setattr(recommend, "KEPT_ROWS", 300)
    monkeypatch.setattr(recommend, "PIECE_ROWS", 300)


def test_the_catalog_holds_no_recommendations_rows(catalog, small_pieces):
    assert "recommendations" not in catalog.tables
    pieces = list(catalog.pieces("recommendations"))
    assert len(pieces) > 5 and catalog.height("recommendations") == sum(p.height for p in pieces)
    assert_frame_equal(pl.concat(pieces), catalog["recommendations"])


def test_the_downloads_written_piece_by_piece_are_those_of_the_whole(catalog, small_pieces, tmp_path):
    import pyarrow.parquet as pq

    whole = catalog["recommendations"]
    pieces = list(downloads.published_pieces(catalog, RECOMMENDATIONS))
    assert len(pieces) > 5
    buffer = io.BytesIO()
    downloads.write_csv_pieces(RECOMMENDATIONS, lambda: iter(pieces), buffer)
    assert buffer.getvalue() == downloads.csv_bytes(RECOMMENDATIONS, whole)
    made = downloads.parquet_of_pieces(iter(pieces))
    assert_frame_equal(pl.read_parquet(io.BytesIO(made)), whole)
    assert pq.ParquetFile(io.BytesIO(made)).metadata.num_row_groups == len(pieces)
    path = tmp_path / "pieces.duckdb"
    downloads.write_database(path, catalog)
    with duckdb.connect(str(path), read_only=True) as con:
        stored = con.sql("SELECT * FROM recommendations").pl()
        [(_, _, _, total, used, free, *_)] = con.sql("PRAGMA database_size").fetchall()
    assert_frame_equal(stored, whole, check_dtypes=False)
    assert (free, used) == (0, total)


def test_a_large_tables_csv_and_parquet_made_in_one_pass_are_those_made_apart(catalog, small_pieces, monkeypatch):
    """With `together` (a build whose DuckDB file waits for no Parquet hash), a table too large for a
    workbook has its CSV and its Parquet file made in one pass over its pieces, each piece made once:
    the same files as made apart, its CSV now first (in its turn) and its Parquet file right after."""
    monkeypatch.setattr(table_rule, "CHUNK_ROWS", 300)
    monkeypatch.setattr(downloads, "EXCEL_MAX_ROWS", 40)
    large = ("server_fit", "recommendations")
    assert all(len(list(catalog.pieces(name))) > 5 for name in large)
    apart = [(name, bytes(content)) for name, content in downloads.iter_downloads(catalog)]
    made, asked = [], []
    published = downloads.published_pieces
    monkeypatch.setattr(downloads, "published_pieces", lambda c, t: asked.append(t.name) or published(c, t))
    for name, content in downloads.iter_downloads(catalog, together=True):
        made.append((name, bytes(content)))  # a Streamed CSV is written before the next file is asked for
    assert dict(made) == dict(apart) and len(made) == len(apart)
    order = [name for name, _ in made]
    for name in large:
        assert order.index(f"{name}.parquet") == order.index(f"{name}.csv") + 1
        assert asked.count(name) == 1
