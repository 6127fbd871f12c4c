"""A large table of the DuckDB file updated in place where an edit changed a few of its rows
(pipeline/publish/database_update.py), and a table made again without doubling the file."""

import math
import shutil

import duckdb
import polars as pl
import pytest

from conftest import SOURCES, edit_csv
from pipeline.build import build
from pipeline.combine import Catalog
from pipeline.publish import database_update, downloads
from pipeline.publish.database_update import POSITION, changed_rows
from pipeline.schema import ALL_TABLES, TABLES_BY_NAME

OLD = pl.DataFrame(
    {
        "key": ["a", "b", "c", "d", "e", "f"],
        "n": [1, 2, None, 4, 5, 6],
        "x": [0.5, 0.0, 1.0, math.nan, 2.0, 3.0],
    }
)


def pieces(frame: pl.DataFrame, *lengths: int) -> list[pl.DataFrame]:
    starts = [sum(lengths[:i]) for i in range(len(lengths))]
    return [frame.slice(s, n) for s, n in zip(starts, lengths, strict=True)]


def test_changed_rows_are_found_by_position_across_pieces_of_other_lengths():
    new = OLD.with_columns(
        n=pl.Series([1, 2, 3, 4, 5, 6]),  # a null that became a value (row 2)
        x=pl.Series([0.5, -0.0, 1.0, math.nan, 2.0, 3.5]),  # -0.0 is not 0.0 (row 1), NaN is NaN, row 5 changed
    )
    found = changed_rows(pieces(OLD, 4, 2), pieces(new, 1, 2, 3), limit=6)
    assert found is not None
    rows, columns = found
    assert columns == ["n", "x"]  # "key" never differs
    assert rows[POSITION].to_list() == [1, 2, 5]
    assert rows.drop(POSITION).equals(new[[1, 2, 5]])


def test_no_change_is_an_empty_update():
    rows, columns = changed_rows(pieces(OLD, 6), pieces(OLD.clone(), 3, 3), limit=0)
    assert (rows.height, columns) == (0, [])


@pytest.mark.parametrize(
    ("old", "new", "limit"),
    [
        (pieces(OLD, 6), pieces(OLD.head(5), 5), 6),  # a row fewer
        (pieces(OLD.head(5), 5), pieces(OLD, 6), 6),  # a row more
        (pieces(OLD, 6), pieces(OLD.rename({"n": "m"}), 6), 6),  # another column
        (pieces(OLD, 6), pieces(OLD.with_columns(pl.col("n").cast(pl.Float64)), 6), 6),  # another type
        (pieces(OLD, 6), pieces(OLD.with_columns(n=pl.lit(9)), 2, 2, 2), 5),  # more rows changed than the limit
    ],
)
def test_no_update_in_place_where_the_tables_differ_in_shape_or_too_much(old, new, limit):
    assert changed_rows(old, new, limit) is None


def test_the_share_rewritten_counts_changed_columns_in_the_row_groups_they_touch():
    rows = pl.DataFrame({POSITION: [5, 6, 122_880 * 3, 122_880 * 3 + 9]})
    height = 122_880 * 8  # eight row groups
    assert database_update.rewritten_share(rows, ["a", "b"], 10, height) == 2 / 10 * 2 / 8
    assert database_update.rewritten_share(rows.head(0), [], 10, height) == 0.0
    assert database_update.rewritten_share(rows.head(1), ["a"], 4, 100) == 1 / 4  # one row group in all


def test_an_update_in_place_leaves_the_table_a_new_file_would_hold(catalog, tmp_path):
    """The same rows in the same order as the file written anew, and only the changed column written."""
    table = TABLES_BY_NAME["servers"]
    servers = downloads.published_frame(catalog, table)
    path = tmp_path / "file.duckdb"
    downloads.write_database(path, Catalog({table.name: servers}, {}), replace=[table])
    changed_id = servers["server_id"][3]
    edited = servers.with_columns(
        price_rub_month=pl.when(pl.col("server_id") == changed_id)
        .then(pl.col("price_rub_month") + 1)
        .otherwise(pl.col("price_rub_month"))
    )
    held_before = {table.name: (iter(pieces(servers, 2, servers.height - 2)), servers.height)}
    writes = []
    update = database_update.update_in_place

    def spy(con, name, rows, columns, arrow):
        writes.append((name, rows[POSITION].to_list(), columns))
        update(con, name, rows, columns, arrow)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(database_update, "update_in_place", spy)
        updated = downloads.write_database(
            path, Catalog({table.name: edited}, {}), [table], earlier=lambda t: held_before.get(t.name)
        )
    assert updated == ["servers"] and writes == [("servers", [3], ["price_rub_month"])]
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.sql('SELECT * FROM "servers"').pl().equals(edited)


def test_a_large_table_made_again_reuses_its_blocks(catalog, tmp_path):
    """The table's DROP is committed before it is written again: the file of a 10^7-row build after one
    price edit was twice the size of a forced build's (1.26 GB against 0.63 GB), the dropped
    tables' blocks still held when the new ones were written."""
    table = TABLES_BY_NAME["recommendations"]
    small = catalog["recommendations"].select(table.columns)
    frame = pl.concat([small] * -(-150_000 // small.height)).with_columns(
        server_id=pl.col("server_id") + "-" + (pl.int_range(pl.len()) // small.height).cast(pl.String)
    )
    path = tmp_path / "large.duckdb"
    downloads.write_database(path, Catalog({table.name: frame}, {}), replace=[table])
    size = path.stat().st_size
    again = frame.with_columns(rank=pl.col("rank") + 1)
    assert downloads.write_database(path, Catalog({table.name: again}, {}), replace=[table]) == []
    assert path.stat().st_size <= size * 1.05
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.sql("SELECT rank FROM recommendations").pl()["rank"].equals(again["rank"])


@pytest.fixture(scope="module")
def edited(tmp_path_factory, built):
    """The real catalog built, then built again after one price edit with every table compared with
    the previous build's rows (UPDATE_MIN_ROWS 0: the real tables are below it), and after a server
    added (row counts differ: made again); the first beside a forced build of the same sources."""
    root = tmp_path_factory.mktemp("database-update")
    sources, out = root / "sources", root / "output"
    shutil.copytree(SOURCES, sources)
    shutil.copytree(built, out)  # the real catalog's build (with its DuckDB file's extended attribute)
    calls: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(database_update, "UPDATE_MIN_ROWS", 0)
        update = database_update.update_in_place
        patch.setattr(
            database_update, "update_in_place", lambda con, name, *a: calls.append(name) or update(con, name, *a)
        )
        edit_csv(sources / "servers.csv", ",2373300,", ",2450000,")
        priced = build(sources, out)
        priced_tables = database_rows(out)
        build(sources, root / "priced-forced", force=True)
        updated = list(calls)
        lines = (sources / "servers.csv").read_text(encoding="utf-8").splitlines()
        added = lines[1].replace(lines[1].split(",")[0], "added-server", 1)
        (sources / "servers.csv").write_text("\n".join([*lines, added]) + "\n", encoding="utf-8")
        calls.clear()
        grown = build(sources, out)
    return root, priced, priced_tables, updated, grown, list(calls)


def database_rows(out) -> dict[str, object]:
    """Every table's columns, comment and rows in the order a plain SELECT gives them."""
    with duckdb.connect(str(out / "site" / "data" / downloads.DATABASE), read_only=True) as con:
        tables = con.sql("SELECT table_name, comment FROM duckdb_tables() ORDER BY table_name").fetchall()
        columns = con.sql("SELECT table_name, column_name, data_type, comment FROM duckdb_columns() ORDER BY ALL")
        return {"tables": tables, "columns": columns.fetchall()} | {
            name: con.sql(f'SELECT * FROM "{name}"').fetchall() for name, _ in tables
        }


def test_one_price_updates_its_tables_in_place_as_a_forced_build_writes_them(edited):
    root, priced, priced_tables, updated, *_ = edited
    assert priced["database"] == ["servers", "server_fit", "recommendations", "server_memory"]
    # Updated in place: the rows the price changed, in one row group of each of these small tables, in
    # a quarter of its columns at most; server_memory's 2 of 7 (the price and the price per GB) are more:
    # made again (database_update.UPDATE_MAX_REWRITE).
    assert sorted(updated) == ["recommendations", "server_fit", "servers"]
    assert priced_tables == database_rows(root / "priced-forced")


def test_a_table_whose_row_count_changed_is_made_again(edited):
    *_, grown, calls = edited
    assert "servers" in grown["database"] and "servers" not in calls  # (its rows: the test below)


def test_every_table_keeps_the_rows_of_its_parquet_download(edited):
    root = edited[0]
    data = root / "output" / "site" / "data"
    with duckdb.connect(str(data / downloads.DATABASE), read_only=True) as con:
        for table in ALL_TABLES:
            held = con.sql(f'SELECT * FROM "{table.name}"').pl()
            assert held.equals(pl.read_parquet(data / f"{table.name}.parquet")), table.name


def test_the_previous_rows_are_those_of_its_verified_parquet_file_and_a_stop_ends_them(built, tmp_path, monkeypatch):
    """staging._earlier_rows: the previous build's rows of a table, its Parquet download's row groups, only
    while that file has the manifest's hash; once the build stops (the event set) the next row group
    raises Stopped, so a stopped build does not wait for a comparison (some seconds at 10^7 rows)."""
    import threading

    from pipeline.publish import staging

    monkeypatch.setattr(database_update, "UPDATE_MIN_ROWS", 0)  # the real tables are smaller
    table = TABLES_BY_NAME["server_fit"]
    state, stopping = staging._previous_state(built), threading.Event()
    rows, count = staging._earlier_rows(built, state, stopping, table)
    parquet = pl.read_parquet(built / "site" / "data" / "server_fit.parquet")
    assert count == parquet.height and pl.concat(list(rows)).equals(parquet)
    rows, _ = staging._earlier_rows(built, state, stopping, table)
    stopping.set()
    with pytest.raises(staging.Stopped):
        next(rows)
    previous = tmp_path / "previous"
    shutil.copytree(built, previous)
    data = previous / "site" / "data" / "server_fit.parquet"
    data.write_bytes(data.read_bytes()[:-1] + b"\0")  # not the file the manifest lists
    assert staging._earlier_rows(previous, staging._previous_state(previous), None, table) is None
    monkeypatch.setattr(staging, "_write_database", lambda *args: [])
    database = staging._Database(tmp_path, Catalog({}, {}), None, None, threaded=False)
    database.stop()
    assert database.stopping.is_set()
