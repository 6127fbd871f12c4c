"""Stage 1, loading: source CSV files -> raw string tables in DuckDB.

Every cell is kept as text here, with the line it came from, so that the
validation can name the exact place of each problem. Typing happens in
`typed_views` (TRY_CAST, for validation) and `create_core_tables` (strict,
once the data is known to be valid).
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import io
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl

from pipeline.messages import message
from pipeline.problems import Problem, capped, display_name
from pipeline.problems import shown as shown_value
from pipeline.schema import DUCKDB_TYPES, MONEY_UNITS, SOURCE_TABLES, TYPE_PATTERNS, Field, Table, ddl

LINE = "_line"


def display_path(sources_dir: Path, table: Table) -> str:
    """How reports name a table's file (pipeline.problems.display_name)."""
    return display_name(sources_dir, table.file)


# Text an editor's spreadsheet may put into a number: grouping spaces, a currency sign.
_SPACES = re.compile(r"(?<=\d)[ \u00a0\u202f\u2009](?=\d)")
_RUB = re.compile(r"\s*(?:₽|руб\.?|р\.)$", re.IGNORECASE)
_DECIMAL_COMMA = re.compile(r"^-?\d+,\d+$")
_RU_DATE = re.compile(r"^(\d{2})\.(\d{2})\.(\d{4})$")
_BOOLS = {"true": "true", "false": "false", "истина": "true", "ложь": "false", "да": "true", "нет": "false"}


# Numbers stated in names (the plausibility rules compare them with the row's figures), in the editors'
# spellings; numbers have at most six digits: int() refuses strings of over 4 300 digits.
# "80GB", "141 ГБ"
GB_IN_NAME = re.compile(r"(?<![\w.])(\d{1,6}(?:[.,]\d{1,6})?)\s*(?:GB|ГБ)\b", re.IGNORECASE)
# "8 × H200", "2x H100", "4 * H200" (× lost in Windows-1251): count, then the GPU part
SERVER_NAME = re.compile(r"^\s*(\d{1,6})\s*[×xXх*]\s*(.+?)\s*$")
# "7 млрд", "8B", "0.5B", "8x7B" (Mixtral: 8 experts of 7B)
PARAMS_IN_NAME = re.compile(r"(?<![\w.])(?:(\d{1,6})\s*[x×]\s*)?(\d{1,6}(?:[.,]\d{1,6})?)\s*(?:млрд|B)(?!\w)")
# "4bit", "8-bit", "2 бита"
BITS_IN_NAME = re.compile(r"(?<![\d.])(\d{1,6})[-\s]?(?:bit|бит)\w*", re.IGNORECASE)
# What separates the words of a name ("H100 SXM5 80GB" -> h100, sxm5, 80gb).
NOT_IN_WORD = re.compile(r"[^0-9a-zа-яё]+")


def normalise(field: Field, value: str) -> str:
    """The documented clean-ups of one cell (see sources/README.md); anything else is left for validation."""
    if field.type in ("int", "float"):
        value = _SPACES.sub("", value).replace("\u2212", "-")
        if field.unit in MONEY_UNITS:
            value = _RUB.sub("", value)
        if field.type == "float" and _DECIMAL_COMMA.match(value):
            value = value.replace(",", ".")
    elif field.type == "bool":
        value = _BOOLS.get(value.lower(), value)
    elif field.type == "date":
        value = _RU_DATE.sub(r"\3-\2-\1", value)
    return value


# A source table is a few kilobytes; anything over this is not an edited table (a log, a dump,
# a wrong file) and is refused before it is read (sources/README.md).
MAX_FILE_BYTES = 50_000_000

# Single-byte Cyrillic encodings a CSV may come in; only Windows-1251 (Excel's "CSV" in a Russian
# Windows) is accepted, the others are named so that the editor knows what to re-save.
CYRILLIC_ENCODINGS = ("cp1251", "koi8_r", "cp866", "mac_cyrillic", "iso8859_5")
_STRAY = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, kept by surrogateescape
_NON_ASCII = re.compile("[^\x00-\x7f]+")
_CYRILLIC_WORD = re.compile(r"[А-Яа-яЁё]{2,}")
_CAPITAL_INSIDE = re.compile(r"[а-яё][А-ЯЁ]")
_FOREIGN_LETTER = re.compile(r"[ЂЃѓЉЊЌЋЏђљњќћџ][а-яё]|[а-яё][ЂЃѓЉЊЌЋЏђљњќћџ]")
# Non-ASCII characters of ordinary Russian text besides the letters.
_RUSSIAN_PUNCTUATION = set("«»–—№…‘’“”„•\u00a0°±")
# In a Windows-1251 file, a character the encoding lacks (×, −, ₽, ≈, →) has been saved as "?" or
# "*" (or, by some programs, "x" between a number and a name).
_SEPARATOR_LINE = re.compile(r"^\ufeff?sep=([;,\t|])\s*$")
_LOST_CHARACTER = re.compile(r"\?(?![\s\"»)]*$)|\*|(?<=\d) x (?=\w)")


def read_file(sources_dir: Path, table: Table, shown: str) -> tuple[bytes | None, list[Problem]]:  # noqa: C901
    """The bytes of one source file, or the reason it is not read.

    A symbolic link is followed only to a file inside the sources folder, and what is not a
    regular file (a folder, a pipe, a device) or is larger than MAX_FILE_BYTES is never read.
    """
    path = opened = sources_dir / table.file

    def refuse(rule: str) -> tuple[None, list[Problem]]:
        return None, [Problem(shown, 0, "", None, rule)]

    try:
        link = os.lstat(path)
    except FileNotFoundError:
        return refuse(message("load.missing"))
    except OSError as exc:
        return refuse(message("load.unreadable", reason=exc.strerror))
    if stat.S_ISLNK(link.st_mode):
        try:
            target = path.resolve(strict=True)
        except FileNotFoundError:
            return refuse(message("load.broken_link"))
        except (RuntimeError, OSError):  # a loop: RuntimeError before Python 3.13, OSError (ELOOP) after
            return refuse(message("load.link_loop"))
        if not target.is_relative_to(sources_dir.resolve()):
            return refuse(message("load.link_outside"))
        opened = target
    try:
        # Non-blocking, so that a pipe in place of the file cannot make the build wait; not following a
        # link, so that a file swapped for one since the check above is not read either.
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(opened, flags)
    except OSError as exc:
        return refuse(message("load.unreadable", reason=exc.strerror))
    too_big = message("load.too_big", limit=MAX_FILE_BYTES // 1_000_000)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            return refuse(message("load.folder"))
        if not stat.S_ISREG(info.st_mode):
            return refuse(message("load.not_regular"))
        if info.st_size > MAX_FILE_BYTES:
            return refuse(too_big)
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)  # a file that grows while it is read stops here too
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        return refuse(too_big)
    return data, []


@dataclass
class Decoded:
    """A source file's text and how it was read."""

    text: str | None  # None when the file cannot be read as text
    encoding: str = "utf-8"
    problems: list[Problem] = field(default_factory=list)
    notices: list[Problem] = field(default_factory=list)
    # UTF-8 with a few bytes that are not: byte offsets of those bytes, which the text holds as
    # lone surrogates (U+DC80-U+DCFF) so that the cells that contain them can be named.
    bad_bytes: list[int] = field(default_factory=list)


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _looks_russian(text: str) -> bool:
    """Whether the non-ASCII characters of `text` read as Russian: words of Russian letters and the
    usual punctuation; no capital inside a word ("бХаТХа": ISO 8859-5 read as another encoding), no
    long words in capitals ("УЕТЧЕТ": KOI8-R read as Windows-1251, which swaps small and capital
    letters), no Serbian letter stuck to Russian ones ("Њодель": Mac Cyrillic read as Windows-1251)."""
    other = sum(map(len, _NON_ASCII.findall(text)))
    if not other:
        return False
    words = _CYRILLIC_WORD.findall(text)
    in_words = sum(map(len, words))
    punctuation = sum(ch in _RUSSIAN_PUNCTUATION for run in _NON_ASCII.findall(text) for ch in run)
    mixed = sum(1 for w in words if _CAPITAL_INSIDE.search(w))
    long = [w for w in words if len(w) >= 5]  # longer than an abbreviation (ГБ, ОЗУ, НДС)
    shouting = sum(1 for w in long if w.isupper())
    return (
        in_words + punctuation >= 0.9 * other
        and mixed <= 0.1 * len(words)
        and shouting <= 0.5 * len(long)
        and not _FOREIGN_LETTER.search(text)
    )


def _single_byte_encoding(data: bytes) -> tuple[str | None, str]:
    """("cp1251", …) when charset-normalizer finds `data` to be Russian text in Windows-1251;
    otherwise (None, the Cyrillic encoding it looks like, or "")."""
    import charset_normalizer

    found = charset_normalizer.from_bytes(data, cp_isolation=list(CYRILLIC_ENCODINGS))
    russian = {m.encoding: m for m in found if _looks_russian(str(m))}
    if not russian:
        return None, ""
    best = min(russian.values(), key=lambda m: (round(m.chaos, 2), -m.coherence))
    cp1251 = russian.get("cp1251")
    if cp1251 is None:
        return None, best.encoding
    # Short files fit several encodings equally well; Windows-1251 is the one Excel writes.
    if best.encoding != "cp1251" and (cp1251.chaos > best.chaos + 0.01 or cp1251.coherence < best.coherence - 0.1):
        return None, best.encoding
    return "cp1251", "cp1251"


_ENCODING_NAMES = {
    "koi8_r": "KOI8-R",
    "koi8_u": "KOI8-R",
    "cp866": "DOS (CP866)",
    "cp1125": "DOS (CP866)",
    "mac_cyrillic": "Mac Cyrillic",
    "iso8859_5": "ISO 8859-5",
    "cp1251": "Windows-1251",
}


def decode(data: bytes, shown: str) -> Decoded:
    """Bytes of a source file -> text, deciding the encoding per file.

    UTF-8 (with or without BOM) is read as is. A file that is UTF-8 but for a few bytes is
    refused, naming them (the whole file read as Windows-1251 would be mojibake). A file in
    Windows-1251 is read with a notice; another encoding is refused with its name.
    """

    def refuse(rule: str, line: int = 0) -> Decoded:
        return Decoded(None, problems=[Problem(shown, line, "", None, rule)])

    if data.startswith(b"PK\x03\x04"):
        return refuse(message("load.xlsx"))
    if data.startswith(b"\xd0\xcf\x11\xe0"):
        return refuse(message("load.xls"))
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return refuse(message("load.utf16"))
    if b"\x00" in data:
        at = data.index(b"\x00")
        return refuse(message("load.binary", at=at), _line_of(data, at))
    try:
        return Decoded(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        pass
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    text = body.decode("utf-8", errors="surrogateescape")
    stray = [m.start() for m in _STRAY.finditer(text)]
    well_formed = sum(map(len, _NON_ASCII.findall(text))) - len(stray)
    if well_formed >= len(stray) or (not well_formed and len(stray) <= 3):
        # Mostly UTF-8 (or ASCII) with a few bytes that are not: a damaged save, not another encoding.
        positions, consumed, at = [], 0, len(data) - len(body)
        for i in stray:
            at += len(text[consumed:i].encode("utf-8", "surrogateescape"))
            positions.append(at)
            at, consumed = at + 1, i + 1
        return Decoded(text, bad_bytes=positions)
    encoding, name = _single_byte_encoding(data)
    if encoding is None:
        if name in _ENCODING_NAMES and name != "cp1251":
            return refuse(message("load.encoding_named", encoding=_ENCODING_NAMES[name]))
        return refuse(message("load.encoding_unknown"))
    notice = Problem(shown, 0, "", None, message("load.windows_1251"))
    return Decoded(data.decode("cp1251"), "cp1251", notices=[notice])


def _header_problems(shown: str, header: list[str], table: Table) -> list[Problem]:
    """The header's missing, unknown (with the nearest name) and repeated columns."""
    problems: list[Problem] = []
    for col in table.columns:
        if col not in header:
            problems.append(Problem(shown, 1, "", None, message("load.column_missing", column=col)))
    for col in dict.fromkeys(header):  # each name once: a header of a million empty names is one problem
        if col not in table.columns:
            guess = difflib.get_close_matches(col[:100], [c for c in table.columns if c not in header], n=1)
            hint = (
                message("load.did_you_mean", guess=guess[0])
                if guess
                else message("load.expected_columns", columns=", ".join(table.columns))
            )
            rule = message("load.column_unknown", column=shown_value(col), hint=hint)
            problems.append(Problem(shown, 1, "", None, rule))
    if len(set(header)) != len(header):
        problems.append(Problem(shown, 1, "", None, message("load.column_twice")))
    return problems


def read_source(
    sources_dir: Path, table: Table, digests: dict[str, str] | None = None
) -> tuple[pl.DataFrame | None, list[Problem], list[Problem]]:
    """Read one CSV into a frame of strings (None for empty cells) plus a line column.

    Returns (frame, problems, notices); notices say which normalisation was applied, and
    which cells of a Windows-1251 file may have lost a character. `digests` (when given) gets the
    SHA-256 of the bytes read, under the file's name: what a validation of them may be remembered by.
    """
    shown = display_path(sources_dir, table)
    data, problems = read_file(sources_dir, table, shown)
    if data is None:
        return None, problems, []
    if digests is not None:
        digests[table.file] = hashlib.sha256(data).hexdigest()
    decoded = decode(data, shown)
    text, problems, notices = decoded.text, decoded.problems, decoded.notices
    if text is None:
        return None, problems, notices
    text, delimiter = _delimiter(text)
    if delimiter != ",":
        notices.append(Problem(shown, 0, "", None, message("load.delimiter", delimiter=delimiter)))
    rows = _csv_rows(text, delimiter)
    if decoded.bad_bytes:
        return None, _bad_byte_problems(shown, rows, decoded.bad_bytes, data), notices
    if not rows:
        return None, [Problem(shown, 0, "", None, message("load.empty_file"))], notices
    (_, _, header), body = rows[0], rows[1:]
    header = [h.strip().lower() for h in header]
    problems += _header_problems(shown, header, table)
    if problems:
        return None, problems, notices
    frame, problems = _frame(shown, table, header, body, decoded)
    return frame, problems, notices


def _delimiter(text: str) -> tuple[str, str]:
    """(the text, its delimiter): the one of ";" and "," the first non-blank line has more of, or the one
    Excel's "sep=;" first line names (that line then removed from the text)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    delimiter = ";" if first.count(";") > first.count(",") else ","
    directive = _SEPARATOR_LINE.match(first)
    if directive:
        delimiter = directive.group(1)
        text = text.replace(first, "", 1)
    return text, delimiter


def _csv_rows(text: str, delimiter: str) -> list[tuple[int, int, list[str]]]:
    """The rows with a non-blank cell, each as (its first line, its last line, its cells)."""
    # A cell may be as long as the file: the length rules, not the reader, say what is too long.
    csv.field_size_limit(max(csv.field_size_limit(), MAX_FILE_BYTES))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows, line = [], 1
    for row in reader:
        if any(c.strip() for c in row):
            rows.append((line, reader.line_num, row))
        line = reader.line_num + 1
    return rows


def _frame(shown: str, table: Table, header: list[str], body: list, decoded: Decoded) -> tuple[pl.DataFrame, list]:
    """The frame of the body's rows that have as many cells as the header, their cells normalised, and a
    problem for each other row; cells of a Windows-1251 file that may have lost a character go to the notices."""
    columns: dict[str, list] = {c: [] for c in table.columns}
    problems, lines = [], []
    last = body[-1][1] if body else 0
    for line, end, row in body:
        if len(row) != len(header):
            problems.append(Problem(shown, line, "", None, _cells_rule(len(row), len(header), line, end, last)))
            continue
        cells = dict(zip(header, row, strict=True))
        for f in table.fields:
            value = normalise(f, cells[f.name].strip())
            columns[f.name].append(value if value else None)
            if decoded.encoding == "cp1251" and f.type == "str" and value and _LOST_CHARACTER.search(value):
                decoded.notices.append(Problem(shown, line, f.name, value, LOST_CHARACTER_RULE))
        lines.append(line)
    frame = pl.DataFrame(
        {LINE: lines, **columns},
        schema={LINE: pl.Int64, **{c: pl.Utf8 for c in table.columns}},
    )
    return frame, problems


def _cells_rule(cells: int, header: int, line: int, end: int, last: int) -> str:
    """A row's count of cells against the header's, and where a quote left open ends."""
    rule = message("load.cells", cells=cells, header=header)
    if end > line:  # a quoted cell ran over line ends: most often a closing quote is missing
        upto = message("load.open_quote_end") if end == last else message("load.open_quote_line", line=end)
        rule += message("load.open_quote", upto=upto)
    return rule


LOST_CHARACTER_RULE = message("load.lost_character")


def _bad_byte_problems(shown: str, rows: list, offsets: list[int], data: bytes) -> list[Problem]:
    """Each cell of a mostly-UTF-8 file that holds a byte which is not UTF-8: line, column, the
    cell (the byte shown as �) and the byte's offset in the file."""
    header = [h.strip().lower() for h in rows[0][2]] if rows else []
    out, k = [], 0
    for line, _, row in rows:
        for i, cell in enumerate(row):
            for _ in _STRAY.finditer(cell):
                at = offsets[k]
                column = header[i] if line != rows[0][0] and i < len(header) else ""
                out.append(
                    Problem(shown, line, column, _STRAY.sub("\ufffd", cell) if column else None, _bad_byte(data, at))
                )
                k += 1
    # bytes outside any cell (between cells, on a blank line)
    out += [Problem(shown, _line_of(data, at), "", None, _bad_byte(data, at)) for at in offsets[k:]]
    return out


def _bad_byte(data: bytes, at: int) -> str:
    return message("load.bad_byte", at=at, byte=f"{data[at]:02X}")


def read_sources(
    sources_dir: Path, digests: dict[str, str] | None = None
) -> tuple[dict[str, pl.DataFrame], list[Problem], list[Problem]]:
    """Read every source table; returns the frames that could be read, all problems and all notices
    (`digests` as in read_source: each file read once, its bytes hashed, so that a file saved while
    it is validated is never remembered as validated)."""
    frames, problems, notices = {}, [], []
    for table in SOURCE_TABLES:
        frame, found, noticed = read_source(sources_dir, table, digests)
        problems.extend(found)
        notices.extend(noticed)
        if frame is not None:
            frames[table.name] = frame
    return frames, problems, capped(notices)


def typed_sql(f: Field, column: str) -> str:
    """SQL for the typed value of a raw text cell. It casts only text of the type's form
    (TYPE_PATTERNS): DuckDB also casts "1e3", " 7" or the year 0, which Python cannot hold and
    the rules do not accept, so those cells are NULL here and reported from their text."""
    cast = f"TRY_CAST({column} AS {DUCKDB_TYPES[f.type]})"
    if f.type not in TYPE_PATTERNS or f.type == "id":
        return cast
    guard = f"regexp_full_match({column}, '{TYPE_PATTERNS[f.type]}')"
    if f.type == "date":
        guard += f" AND {column} >= '0001'"
    return f"CASE WHEN {guard} THEN {cast} END"


def connect(
    frames: dict[str, pl.DataFrame], warm=None, digests: dict[str, str] | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with raw_<table> (text, a table made from the frame: the rules query it many
    times, and a query on a registered Arrow table costs more) and typed_<table> (TRY_CAST) views.

    In a process that lives on (`warm.lives_on`), given the files' digests, the last build's connection
    is taken (`warm.duck`: the connection and, per table, the digest of the file its tables were made
    of): only the tables of files that changed are dropped and made again, their core tables with them
    (create_core_tables makes the missing ones and puts the connection back)."""
    keeps = warm is not None and warm.lives_on and digests is not None
    kept = warm.duck if keeps else None
    if warm is not None:
        warm.duck = None  # taken: a build that fails before its core tables are made leaves none
    con, made = kept if kept is not None else (duckdb.connect(), {})
    for table in SOURCE_TABLES:
        name = table.name
        if kept is not None:
            if name in frames and made.get(name) == digests.get(table.file):
                continue
            con.execute(f'DROP TABLE IF EXISTS "{name}"')
            con.execute(f"DROP VIEW IF EXISTS typed_{name}")
            con.execute(f"DROP TABLE IF EXISTS raw_{name}")
        if name not in frames:
            continue
        con.register("frame", frames[name].to_arrow())
        con.execute(f"CREATE TABLE raw_{name} AS SELECT * FROM frame")
        con.unregister("frame")
        casts = ", ".join(f"{typed_sql(f, f.name)} AS {f.name}" for f in table.fields)
        con.execute(f"CREATE VIEW typed_{name} AS SELECT {LINE}, {casts} FROM raw_{name}")
    if keeps:
        warm.duck_pending = (con, {t.name: digests[t.file] for t in SOURCE_TABLES if t.name in frames})
    return con


def create_core_tables(con: duckdb.DuckDBPyConnection, warm=None) -> None:
    """Strictly typed tables (DDL from the schema registry), filled from the validated views: every one
    the connection lacks (all, unless connect() took it from `warm`: then it is put back for the next
    build)."""
    have = {name for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    for table in SOURCE_TABLES:
        if table.name in have:
            continue
        con.execute(ddl(table))
        cols = ", ".join(table.columns)
        con.execute(f'INSERT INTO "{table.name}" SELECT {cols} FROM typed_{table.name} ORDER BY {LINE}')
    pending = getattr(warm, "duck_pending", None)
    if pending is not None and pending[0] is con:
        warm.duck, warm.duck_pending = pending, None
