"""Downloads for analysts: every source and derived table as files under site/data/."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from pipeline.combine import Catalog
from pipeline.format import spreadsheet_safe
from pipeline.schema import ALL_TABLES, ddl

DATABASE = "gpu-finetune.duckdb"


def write_downloads(data_dir: Path, catalog: Catalog) -> None:
    """Every table as CSV (UTF-8 with BOM, comma, dot decimal) and all of them in one DuckDB file."""
    data_dir.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(data_dir / DATABASE))
    for table in ALL_TABLES:
        frame = catalog[table.name].select(table.columns)
        text_columns = [f.name for f in table.fields if f.type in ("str", "id")]
        safe = frame.with_columns(
            pl.col(c).map_elements(spreadsheet_safe, return_dtype=pl.String) for c in text_columns
        )
        safe.write_csv(data_dir / f"{table.name}.csv", include_bom=True, date_format="%Y-%m-%d")
        con.execute(ddl(table))
        con.register("frame", frame.to_arrow())
        con.execute(f'INSERT INTO "{table.name}" SELECT * FROM frame')
        con.unregister("frame")
    con.close()
