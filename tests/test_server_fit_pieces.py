"""server_fit is never held whole (table_rule.ServerFit): the catalog makes it when asked, the downloads
write it piece by piece and the renderer looks its rows up by arithmetic. Each of those gives what the
whole table gives."""

import io

import duckdb
import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipeline.estimate import table_rule
from pipeline.publish import downloads
from pipeline.render.views.articles import Cells, CrossGrid, KeyGrid
from pipeline.schema import TABLES_BY_NAME

SERVER_FIT = TABLES_BY_NAME["server_fit"]


@pytest.fixture
def small_pieces(monkeypatch, catalog):
    """Pieces of three jobs' rows, so that the real catalog's server_fit comes in many."""
    monkeypatch.setattr(table_rule, "CHUNK_ROWS", 3 * catalog["servers"].height)


def test_the_catalog_holds_no_server_fit_rows_and_makes_them_when_asked(catalog):
    assert "server_fit" not in catalog.tables
    whole = catalog["server_fit"]
    assert catalog.height("server_fit") == whole.height == catalog["estimates"].height * catalog["servers"].height
    assert whole.columns == list(SERVER_FIT.columns)
    assert whole.select(SERVER_FIT.primary_key).is_duplicated().sum() == 0
    keys = whole.select(SERVER_FIT.primary_key)
    assert keys.equals(keys.sort(SERVER_FIT.primary_key))  # key order: row j x S + s is job j on server s


def test_pieces_are_whole_jobs_in_key_order_and_make_the_table(catalog, small_pieces):
    pieces = list(catalog.fits.chunks())
    servers = catalog["servers"].height
    assert len(pieces) == -(-catalog["estimates"].height // 3)
    assert all(p.height == 3 * servers for p in pieces[:-1]) and 0 < pieces[-1].height <= 3 * servers
    assert_frame_equal(pl.concat(pieces), catalog["server_fit"])


def test_an_empty_server_fit_is_one_empty_piece(catalog):
    fits = table_rule.ServerFit(catalog["estimates"].clear(), catalog["servers"], catalog["gpus"])
    (piece,) = list(fits.chunks())
    assert fits.height == 0 and piece.height == 0 and piece.columns == list(SERVER_FIT.columns)


def test_one_row_is_the_tables_row_and_an_unknown_id_a_key_error(catalog):
    whole = catalog["server_fit"]
    for i in (0, 1234, whole.height - 1):
        expected = whole.row(i, named=True)
        ids = (expected["model_id"], expected["method_id"], expected["server_id"])
        assert catalog.fits.row(*ids) == expected
    with pytest.raises(KeyError):
        catalog.fits.row(expected["model_id"], expected["method_id"], "no-such-server")


def test_the_grid_by_arithmetic_is_the_grid_by_keys(catalog):
    whole = catalog["server_fit"]
    by_keys = KeyGrid(whole, ("model_id", "method_id", "server_id"))
    crossed = CrossGrid(catalog.fits)
    assert crossed.codes == by_keys.codes
    assert np.array_equal(crossed.grid, by_keys.grid)
    model, method = whole["model_id"][0], whole["method_id"][0]
    servers = whole["server_id"].unique().sort().to_list()[::-1]
    assert np.array_equal(crossed.block(model, [method], servers), by_keys.block(model, [method], servers))
    assert crossed.row(model, method, servers[0]) == by_keys.row(model, method, servers[0])
    for i in range(0, whole.height, 7):  # every 7th row: more jobs than the rows kept of them
        expected = whole.row(i, named=True)
        assert crossed.row(expected["model_id"], expected["method_id"], expected["server_id"]) == expected
    assert len(catalog.fits._jobs) == table_rule.JOBS_KEPT
    with pytest.raises(KeyError):
        crossed.row(model, method, "no-such-server")


def test_cells_made_piece_by_piece_are_the_cells_of_the_whole(catalog, small_pieces):
    columns = ("fit", "servers_needed", "servers_needed_high")

    def text(r):
        return f"{r['fit']} {r['servers_needed']}/{r['servers_needed_high']}"

    whole = Cells.of(catalog["server_fit"], columns, text)
    pieces = Cells.of_frames(catalog.fits.chunks(), columns, text)
    assert len(pieces.codes) == catalog.height("server_fit")
    assert [pieces.texts[c] for c in pieces.codes] == [whole.texts[c] for c in whole.codes]
    assert sorted(pieces.texts) == sorted(whole.texts)
    assert [text(v) for v in pieces.values] == pieces.texts


def test_the_csv_written_piece_by_piece_is_the_csv_of_the_whole(catalog, small_pieces, tmp_path):
    pieces = list(downloads.published_pieces(catalog, SERVER_FIT))
    assert len(pieces) > 1
    whole = downloads.csv_bytes(SERVER_FIT, catalog["server_fit"])
    buffer = io.BytesIO()
    downloads.write_csv_pieces(SERVER_FIT, lambda: iter(pieces), buffer)
    downloads.write_csv_pieces(SERVER_FIT, lambda: iter(pieces), str(tmp_path / "by-path.csv"))
    assert buffer.getvalue() == whole == (tmp_path / "by-path.csv").read_bytes()
    assert whole.startswith(b"\xef\xbb\xbfmodel_id,") and whole.count(b"model_id,method_id") == 1


def test_the_parquet_written_piece_by_piece_holds_the_table_in_row_groups(catalog, small_pieces):
    import pyarrow.parquet as pq

    made = downloads.parquet_of_pieces(downloads.published_pieces(catalog, SERVER_FIT))
    assert made == downloads.parquet_of_pieces(downloads.published_pieces(catalog, SERVER_FIT))  # the same bytes
    assert_frame_equal(pl.read_parquet(io.BytesIO(made)), catalog["server_fit"])
    assert pq.ParquetFile(io.BytesIO(made)).metadata.num_row_groups == len(list(catalog.fits.chunks()))
    one = catalog["estimates"]
    assert downloads.parquet_of_pieces(iter([one])) == downloads.parquet_bytes(one)  # one piece: as before


def test_the_database_holds_server_fit_written_piece_by_piece(catalog, small_pieces, tmp_path):
    path = tmp_path / "pieces.duckdb"
    downloads.write_database(path, catalog)
    with duckdb.connect(str(path), read_only=True) as con:
        stored = con.sql("SELECT * FROM server_fit").pl()
        comment = con.sql("SELECT comment FROM duckdb_tables() WHERE table_name = 'server_fit'").fetchall()[0][0]
        [(_, _, _, total, used, free, *_)] = con.sql("PRAGMA database_size").fetchall()
    assert_frame_equal(stored, catalog["server_fit"], check_dtypes=False)
    assert comment  # the data dictionary too, once every piece is in
    assert (free, used) == (0, total)  # one INSERT of every piece: no block left unused
