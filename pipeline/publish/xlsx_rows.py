"""The data rows of a large sheet, written as XlsxWriter writes them in constant_memory mode.

XlsxWriter spends most of a large workbook's time in its per-cell Python: each write_* call checks
the cell, stores a tuple, and when the row is done formats its XML attribute by attribute. Here a
row's cells are formatted at once with the same text XlsxWriter gives them (its <row> and <c>
elements, inline strings, the same escapes and number formatting), straight into the sheet's row
file, so the workbook's bytes are unchanged (tests/test_downloads.py compares the two on every kind
of cell). Only a constant_memory worksheet, with the header row written and nothing below it yet;
the rarer cells (NaN or infinity, over-long text, "<r>…</r>" text, a value of another type) go
through XlsxWriter's own methods, which raise or write exactly as they would have.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from xlsxwriter.utility import xl_col_to_name
from xlsxwriter.xmlwriter import xml_escapes

# The kinds of column (downloads._column_writer's): how a cell of each is written.
TEXT, NUMBER, DATE, BOOL = "text", "number", "date", "bool"
KINDS = {"str": TEXT, "id": TEXT, "bool": BOOL, "date": DATE}  # by schema type; any other is a NUMBER
_SHORT_TEXT = 32767 // 2  # below this many characters no text needs XlsxWriter's UTF-16 truncation


def write_rows(ws, rows: Sequence[tuple], kinds: Sequence[str], formats: Sequence) -> None:
    """Rows 1..len(rows) of `ws` (row 0, the header, already written with write_string); `kinds`
    and `formats` per column (the number or date Format, or None). A None cell is left empty."""
    if not ws.constant_memory or ws.previous_row != 0 or any(r for r in ws.table if r):
        raise ValueError("write_rows needs a constant_memory sheet holding only its header row")
    ws._write_single_row(1)  # the header row, as writing the first cell of row 1 does
    fh = ws.fh
    cells = [_cell_writer(ws, kind, fmt) for kind, fmt in zip(kinds, formats, strict=True)]
    names = [xl_col_to_name(c) for c in range(len(kinds))]
    last = None
    for r, row in enumerate(rows, 1):
        if all(value is None for value in row):
            continue  # XlsxWriter writes no element for a row without cells
        number = r + 1
        fh.write(f'<row r="{number}">')
        for c, value in enumerate(row):
            if value is not None:
                cells[c](fh, f"{names[c]}{number}", value, r, c)
        fh.write("</row>")
        last = r
    if last is not None:
        ws._check_dimensions(last, len(kinds) - 1)  # the sheet's <dimension>, as the cells set it
    ws.previous_row = len(rows)


def _cell_writer(ws, kind: str, fmt) -> Callable:
    """fh, ref, value, row, col -> the cell's <c> element, written to fh."""
    style = "" if fmt is None else f' s="{fmt._get_xf_index()}"'
    if kind == TEXT:

        def text(fh, ref: str, value, r: int, c: int) -> None:
            if (
                type(value) is not str
                or len(value) > _SHORT_TEXT
                or (value.startswith("<r>") and value.endswith("</r>"))
            ):
                return _through_xlsxwriter(ws, ws._write_string, r, c, value, None)
            if "_x" in value or _CONTROL.search(value):
                value = ws._escape_control_characters(value)
            preserve = ' xml:space="preserve"' if _EDGE_SPACE.search(value) else ""
            if xml_escapes.search(value):
                value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            fh.write(f'<c r="{ref}" t="inlineStr"><is><t{preserve}>{value}</t></is></c>')

        return text
    if kind == BOOL:
        return lambda fh, ref, value, r, c: fh.write(f'<c r="{ref}" t="b"><v>{1 if value else 0}</v></c>')
    if kind == DATE:
        date_style = f' s="{(fmt or ws.default_date_format)._get_xf_index()}"'
        return lambda fh, ref, value, r, c: fh.write(
            f'<c r="{ref}"{date_style}><v>{ws._convert_date_time(value):.16G}</v></c>'
        )

    def number(fh, ref: str, value, r: int, c: int) -> None:
        if (type(value) is not int and type(value) is not float) or not math.isfinite(value):
            return _through_xlsxwriter(ws, ws._write_number, r, c, value, fmt)  # NaN, infinity: its error
        fh.write(f'<c r="{ref}"{style}><v>{value:.16G}</v></c>')

    return number


# Text XlsxWriter marks xml:space="preserve": leading or trailing whitespace (its utility's
# RE_LEADING_WHITESPACE or RE_TRAILING_WHITESPACE; the helper's name changed between releases).
_EDGE_SPACE = re.compile(r"^\s|\s$")

# What Worksheet._escape_control_characters changes (besides "_xHHHH_" text, checked by "_x").
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\ufffe\uffff]")


def _through_xlsxwriter(ws, write: Callable, r: int, c: int, *value_and_format) -> None:
    """One cell by XlsxWriter's own methods: stored by `write` (which may refuse it, as it would),
    then written by Worksheet._write_cell to the same row file, in its place in the row."""
    write(r, c, *value_and_format)
    cell = ws.table[r].pop(c, None)
    ws.table.clear()
    if cell is not None:
        ws._write_cell(r, c, cell)


# --- the same rows made as whole columns (polars), for a large table -------------------------------

_CHUNK_ROWS = 20_000  # rows joined into one string: the prepared sheet is a few such strings


class Prepared:
    """A sheet's data rows made in advance, as write_rows would write them (prepare): the row XML in
    chunks, and the column styles it was made with (checked against the workbook's)."""

    def __init__(self, chunks: list[str], rows: int, last: int | None, kinds: Sequence[str], styles: Sequence[str]):
        self.chunks, self.rows, self.last, self.kinds, self.styles = chunks, rows, last, list(kinds), list(styles)

    def __len__(self) -> int:
        return self.rows


def styles(kinds: Sequence[str], formats: Sequence) -> list[str]:
    """Each column's style attribute (' s="3"', or "") as write_rows writes it, asking the Formats for
    their indexes in the order write_rows asks (the index of a Format is given on first asking).
    A date column always has its Format here (downloads.number_format)."""
    out = []
    for kind, fmt in zip(kinds, formats, strict=True):
        style = "" if fmt is None else f' s="{fmt._get_xf_index()}"'
        if kind == DATE:
            if fmt is None:
                raise ValueError("a date column without its number format")
            style = f' s="{fmt._get_xf_index()}"'
        out.append(style if kind in (NUMBER, DATE) else "")
    return out


def prepare(frame, kinds: Sequence[str], styles: Sequence[str]) -> Prepared | None:
    """The data rows of `frame` (columns in sheet order) as write_rows writes them, made a column at a
    time with polars instead of a cell at a time in Python; None when a cell needs XlsxWriter's own
    handling (text that is long, "<r>…</r>", holds a control character or "_x"; a number that is not
    finite, or -0.0; a column of another type than its kind), and then the rows go to write_rows.
    `styles`: each column's style attribute (styles()). Made in the build process: polars never runs
    in the forked workbook child."""
    import polars as pl

    if frame.height == 0:
        return Prepared([], 0, None, kinds, styles)
    number = pl.int_range(2, frame.height + 2, eager=False).cast(pl.Utf8)  # the sheet's row number
    cells, present = [], []
    for c, (name, kind) in enumerate(zip(frame.columns, kinds, strict=True)):
        column, dtype = frame[name], frame.schema[name]
        value = _column_text(column, dtype, kind)
        if value is None:
            return None
        ref = xl_col_to_name(c)
        if kind == TEXT:
            head, tail = f'<c r="{ref}', '" t="inlineStr"><is>'
            cell = pl.concat_str([pl.lit(head), number, pl.lit(tail), value, pl.lit("</t></is></c>")])
        elif kind == BOOL:
            cell = pl.concat_str([pl.lit(f'<c r="{ref}'), number, pl.lit('" t="b"><v>'), value, pl.lit("</v></c>")])
        else:
            style = styles[c]
            cell = pl.concat_str([pl.lit(f'<c r="{ref}'), number, pl.lit(f'"{style}><v>'), value, pl.lit("</v></c>")])
        cells.append(pl.when(pl.col(name).is_not_null()).then(cell).otherwise(pl.lit("")))
        present.append(pl.col(name).is_not_null())
    row = pl.concat_str([pl.lit('<row r="'), number, pl.lit('">'), *cells, pl.lit("</row>")])
    made = (
        frame.lazy()
        .select(
            pl.when(pl.any_horizontal(present)).then(row).otherwise(pl.lit("")).alias("xml"),
            pl.any_horizontal(present).alias("any"),
        )
        .collect()
    )
    filled = made["any"].arg_true()
    last = int(filled[-1]) + 1 if len(filled) else None
    xml = made["xml"]
    chunks = ["".join(xml.slice(start, _CHUNK_ROWS).to_list()) for start in range(0, frame.height, _CHUNK_ROWS)]
    return Prepared(chunks, frame.height, last, kinds, styles)


def _column_text(column, dtype, kind: str):
    """The polars expression of a column's cell text (for text: from the <t> element's attributes on),
    or None when some cell of it must go through XlsxWriter (see prepare). Each distinct value is
    formatted once, in Python, by the same rules as write_rows' cell writers."""
    import polars as pl

    distinct = column.drop_nulls().unique().to_list()
    if kind == TEXT:
        if dtype != pl.Utf8:
            return None
        shown = [_text_tail(v) for v in distinct]
        if any(t is None for t in shown):
            return None
    elif kind == BOOL:
        if dtype != pl.Boolean:
            return None
        shown = ["1" if v else "0" for v in distinct]
    elif kind == DATE:
        if dtype != pl.Date:
            return None
        from xlsxwriter.worksheet import Worksheet

        convert = Worksheet()._convert_date_time  # the workbook's defaults: no 1904 dates, timezones kept
        shown = [f"{convert(v):.16G}" for v in distinct]
    else:
        if not dtype.is_numeric() or any(type(v) is not int and type(v) is not float for v in distinct):
            return None
        if dtype.is_float():
            import numpy as np

            values = column.drop_nulls().to_numpy()
            if not np.isfinite(values).all() or (np.signbit(values) & (values == 0)).any():
                return None  # NaN, infinity (XlsxWriter's error), -0.0 (which unique() may merge with 0.0)
        shown = [f"{v:.16G}" for v in distinct]
    return pl.col(column.name).replace_strict(distinct, shown, return_dtype=pl.Utf8)


def _text_tail(value: str) -> str | None:
    """`<t…>text` of a text cell as write_rows writes it (after `<c r=… t="inlineStr"><is>`), None
    for a cell that write_rows hands to XlsxWriter (or whose "_x" or control character it escapes)."""
    if len(value) > _SHORT_TEXT or (value.startswith("<r>") and value.endswith("</r>")):
        return None
    if "_x" in value or _CONTROL.search(value):
        return None
    preserve = ' xml:space="preserve"' if _EDGE_SPACE.search(value) else ""
    if xml_escapes.search(value):
        value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"<t{preserve}>{value}"


def write_prepared(ws, prepared: Prepared, formats: Sequence) -> None:
    """write_rows for rows made by prepare: the same sheet, provided the workbook gives the columns'
    Formats the indexes the rows were made with (a ValueError, a bug, if not)."""
    if not ws.constant_memory or ws.previous_row != 0 or any(r for r in ws.table if r):
        raise ValueError("write_prepared needs a constant_memory sheet holding only its header row")
    if ws.date_1904 or ws.remove_timezone:
        raise ValueError("prepare converted the dates with XlsxWriter's default settings")
    ws._write_single_row(1)  # the header row, as writing the first cell of row 1 does
    if styles(prepared.kinds, formats) != prepared.styles:
        raise ValueError("the rows were prepared with other styles than the workbook's")
    for chunk in prepared.chunks:
        ws.fh.write(chunk)
    if prepared.last is not None:
        ws._check_dimensions(prepared.last, len(prepared.kinds) - 1)
    ws.previous_row = prepared.rows
