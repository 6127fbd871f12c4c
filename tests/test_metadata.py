"""Metadata completeness (in the manner of PUDL's metadata tests): every frame of the catalog matches its
registry entry — columns, their order and their types — every column has a unit or is declared unitless,
a label and a description, and every table has its downloads."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.publish.downloads import EXCEL_MAX_ROWS
from pipeline.schema import ALL_TABLES, POLARS_TYPES, UNITS

TABLES = [pytest.param(t, id=t.name) for t in ALL_TABLES]


@pytest.mark.parametrize("table", TABLES)
def test_every_frame_matches_its_registry_entry(catalog, table) -> None:
    frame = catalog[table.name]
    assert frame.columns == table.columns  # the same columns, in the same order
    expected = {f.name: POLARS_TYPES[f.type] for f in table.fields}
    for column, dtype in frame.schema.items():
        assert dtype == expected[column] or dtype == pl.Null, (column, dtype)
    for f in table.fields:
        if f.required:
            assert frame[f.name].null_count() == 0, f.name
        if f.allowed:
            assert set(frame[f.name].drop_nulls().unique().to_list()) <= set(f.allowed), f.name
    assert frame.select(table.primary_key).is_unique().all(), table.primary_key


def test_the_catalog_holds_exactly_the_registered_tables(catalog) -> None:
    # server_fit and recommendations are made when asked (Catalog.fits, Catalog.ranked), never held
    for name in ("server_fit", "recommendations"):
        assert name not in catalog.tables and catalog.height(name) == catalog[name].height > 0
    assert sorted([*catalog.tables, "server_fit", "recommendations"]) == sorted(t.name for t in ALL_TABLES)


@pytest.mark.parametrize("table", TABLES)
def test_every_column_is_described(table) -> None:
    assert table.title_ru and table.description_ru
    for f in table.fields:
        assert f.label_ru and f.description_ru, f.name
        if f.type in ("int", "float"):
            assert bool(f.unit) != f.unitless, f"{f.name}: a unit id, or unitless=True"  # one or the other
        else:
            assert not f.unit and not f.unitless, f.name
        assert not f.unit or f.unit in UNITS, f.name


@pytest.mark.parametrize("table", TABLES)
def test_every_table_has_its_downloads(built, table) -> None:
    data = built / "site" / "data"
    rows = json.loads((data / f"{table.name}.metadata.json").read_text(encoding="utf-8"))
    assert rows["table"] == table.name
    assert [c["name"] for c in rows["columns"]] == table.columns
    assert (data / table.file).is_file() and (data / f"{table.name}.parquet").is_file()
    xlsx = (data / f"{table.name}.xlsx").is_file()
    assert xlsx == (pl.read_parquet(data / f"{table.name}.parquet").height <= EXCEL_MAX_ROWS)
