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
