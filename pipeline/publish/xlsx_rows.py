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


# --- a large sheet's rows made as whole columns ------------------------------------------------------

_CHUNK_ROWS = 20_000  # rows decoded into one string where the prepared rows are written as text (write_prepared)


class Prepared:
    """A sheet's data rows made in advance, as write_rows would write them (prepare_arrow): the rows' XML
    as one Arrow string array (a row an element), and the column styles it was made with (checked
    against the workbook's). `data()` gives the XML as one buffer of UTF-8 bytes, without a copy."""

    def __init__(self, row, rows: int, last: int | None, kinds: Sequence[str], styles: Sequence[str]):
        self.row, self.rows, self.last, self.kinds, self.styles = row, rows, last, list(kinds), list(styles)

    def __len__(self) -> int:
        return self.rows

    def _rows_xml(self):
        """(the rows' XML as one buffer, each row's start in it and the end of the last), or None when
        no row has a cell."""
        if not self.rows or self.row.buffers()[2] is None:
            return None
        import numpy as np

        offsets = np.frombuffer(self.row.buffers()[1], dtype=np.int64)[
            self.row.offset : self.row.offset + self.rows + 1
        ]
        return memoryview(self.row.buffers()[2])[int(offsets[0]) : int(offsets[-1])], offsets - offsets[0]

    def data(self) -> memoryview:
        found = self._rows_xml()
        return memoryview(b"") if found is None else found[0]

    @property
    def chunks(self) -> list[str]:
        """The rows' XML as text, in pieces of _CHUNK_ROWS rows (what write_prepared writes)."""
        found = self._rows_xml()
        if found is None:
            return []
        data, offsets = found
        return [
            bytes(data[int(offsets[start]) : int(offsets[min(start + _CHUNK_ROWS, self.rows)])]).decode("utf-8")
            for start in range(0, self.rows, _CHUNK_ROWS)
        ]


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


def write_prepared(ws, prepared: Prepared, formats: Sequence, marked: bool = False) -> None:
    """write_rows for rows made by prepare_arrow: the same sheet, provided the workbook gives the columns'
    Formats the indexes the rows were made with (a ValueError, a bug, if not). `marked`: the rows'
    place in the sheet gets MARK instead of the rows, and the workbook's archive puts them there
    (downloads._LevelZip): the sheet's XML is then never made as text."""
    if not ws.constant_memory or ws.previous_row != 0 or any(r for r in ws.table if r):
        raise ValueError("write_prepared needs a constant_memory sheet holding only its header row")
    if ws.date_1904 or ws.remove_timezone:
        raise ValueError("prepare_arrow converted the dates with XlsxWriter's default settings")
    ws._write_single_row(1)  # the header row, as writing the first cell of row 1 does
    if styles(prepared.kinds, formats) != prepared.styles:
        raise ValueError("the rows were prepared with other styles than the workbook's")
    for chunk in [MARK] if marked else prepared.chunks:
        ws.fh.write(chunk)
    if prepared.last is not None:
        ws._check_dimensions(prepared.last, len(prepared.kinds) - 1)
    ws.previous_row = prepared.rows


# Where write_prepared(marked=True) leaves the rows: a NUL, which XlsxWriter never writes (it escapes
# every control character in text as "_x0000_"), so the mark cannot be part of a sheet's own XML.
MARK = "\x00prepared rows\x00"


class ArrowRows:
    """A large sheet's rows as the build process hands them to the forked workbook child: the frame's
    Arrow table (polars' to_arrow, made before the fork), turned into a Prepared by prepare_arrow in
    the child, so that making the sheet's XML (most of a second at 10^5 rows) is off the build
    process's path. polars never runs in the child (its thread pool does not survive a fork); Arrow's
    element-wise kernels run on the calling thread. `styles`: each column's style attribute (styles())."""

    def __init__(self, table, kinds: Sequence[str], styles: Sequence[str]):
        self.table, self.kinds, self.styles = table, list(kinds), list(styles)

    def __len__(self) -> int:
        return self.table.num_rows

    def rows(self) -> Prepared | list[tuple]:
        """The Prepared rows, or the rows as tuples (as polars' rows() gives them) for write_rows when
        a cell needs XlsxWriter's own handling (see prepare_arrow)."""
        import pyarrow as pa

        # The system's allocator, not pyarrow's default (mimalloc): mimalloc gives what is freed back to
        # the kernel within milliseconds, in 2 MB pages that are zeroed again when next used, and the
        # rows' columns are made and freed a column at a time (at 10^5 rows 0.1-0.3 s of the child's
        # CPU, most of it the kernel's: docs/operations.md, "Twenty-first round").
        default = pa.default_memory_pool()
        pa.set_memory_pool(pa.system_memory_pool())
        try:
            prepared = prepare_arrow(self.table, self.kinds, self.styles)
        finally:
            pa.set_memory_pool(default)
        if prepared is not None:
            return prepared
        columns = [column.to_pylist() for column in self.table.columns]
        return list(zip(*columns, strict=True)) if columns else [()] * self.table.num_rows


def prepare_arrow(table, kinds: Sequence[str], styles: Sequence[str]) -> Prepared | None:
    """The data rows of an Arrow table (columns in sheet order) as write_rows writes them, made a column
    at a time with pyarrow's compute functions instead of a cell at a time in Python (each distinct
    value formatted once, in Python, by the same rules as write_rows' cell writers); None when a cell
    needs XlsxWriter's own handling (text that is long, "<r>…</r>", holds a control character or "_x";
    a number that is not finite, or -0.0; a column of another type than its kind), and then the rows
    go to write_rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = table.num_rows
    if rows == 0:
        return Prepared(None, 0, None, kinds, styles)
    if not kinds:
        return None
    text = pa.large_string()

    def lit(value: str):
        return pa.scalar(value, text)

    number = pa.array([str(r) for r in range(2, rows + 2)], text)  # the sheet's row number
    pieces, present, full = ['<row r="', number, '">'], [], False  # markup (str) between whole columns
    for c, (column, kind) in enumerate(zip(table.columns, kinds, strict=True)):
        # A cell is '<c r="' + its column's letters + the row's number + the value's text between its
        # kind's markup, which is put around each distinct value once (_arrow_text).
        value = _arrow_text(column.combine_chunks(), kind, _MARKUP[kind](styles[c]))
        if value is None:
            return None
        start = f'<c r="{xl_col_to_name(c)}'
        if not value.null_count:  # every row has this cell: its pieces go straight into the row's
            if isinstance(pieces[-1], str):
                pieces[-1] += start
            else:
                pieces.append(start)
            pieces += [number, value]
            full = True
            continue
        cell = pc.binary_join_element_wise(lit(start), number, value, lit(""), null_handling="emit_null")
        pieces.append(pc.fill_null(cell, lit("")))  # a null value: no cell
        present.append(pc.is_valid(value))
    pieces.append("</row>")
    pieces = [lit(p) if isinstance(p, str) else p for p in pieces]
    row = pc.binary_join_element_wise(*pieces, lit(""))
    if full:
        last = rows
    else:
        filled = present[0]
        for valid in present[1:]:
            filled = pc.or_(filled, valid)
        if not pc.all(filled).as_py():
            row = pc.if_else(filled, row, lit(""))  # a row without cells writes nothing
        found = np.flatnonzero(filled.to_numpy(zero_copy_only=False))
        last = int(found[-1]) + 1 if len(found) else None
    return Prepared(row, rows, last, kinds, styles)


# Each kind's markup around a cell's text, after the cell's reference, by the column's style attribute.
_MARKUP = {
    TEXT: lambda style: ('" t="inlineStr"><is>', "</t></is></c>"),
    BOOL: lambda style: ('" t="b"><v>', "</v></c>"),
    NUMBER: lambda style: (f'"{style}><v>', "</v></c>"),
    DATE: lambda style: (f'"{style}><v>', "</v></c>"),
}


def _arrow_text(column, kind: str, markup: tuple[str, str] = ("", "")):
    """_column_text of an Arrow column: each cell's text (large_string, null where the cell is) between
    `markup`, or None when a cell must go through XlsxWriter; each distinct value formatted once."""
    import pyarrow as pa
    import pyarrow.types as at

    kind_of = column.type
    view = getattr(at, "is_string_view", lambda _: False)(kind_of)  # pyarrow 16 and later have string views
    if kind == TEXT:
        if not (at.is_string(kind_of) or at.is_large_string(kind_of) or view):
            return None
        format_one = _text_tail
    elif kind == BOOL:
        if not at.is_boolean(kind_of):
            return None
        format_one = lambda v: "1" if v else "0"  # noqa: E731
    elif kind == DATE:
        if not at.is_date32(kind_of):
            return None
        from xlsxwriter.worksheet import Worksheet

        convert = Worksheet()._convert_date_time  # the workbook's defaults: no 1904 dates, timezones kept
        format_one = lambda v: f"{convert(v):.16G}"  # noqa: E731
    elif at.is_integer(kind_of) or at.is_floating(kind_of):
        format_one = lambda v: f"{v:.16G}"  # noqa: E731
    else:
        return None
    if at.is_floating(kind_of):
        import numpy as np
        import pyarrow.compute as pc

        values = pc.drop_null(column).to_numpy(zero_copy_only=False)
        if not np.isfinite(values).all() or (np.signbit(values) & (values == 0)).any():
            return None  # NaN, infinity (XlsxWriter's error), -0.0 (which the dictionary may merge with 0.0)
    if view:
        column = column.cast(pa.large_string())
    encoded = column.dictionary_encode()
    shown = [format_one(v) for v in encoded.dictionary.to_pylist()]
    if any(s is None for s in shown):
        return None
    before, after = markup
    return pa.array([before + s + after for s in shown], pa.large_string()).take(encoded.indices)
