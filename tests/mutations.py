"""A seeded mutator of source folders, for the fuzz test: what careless edits, broken saves and
hostile files do to `sources/`.

`mutate(folder, rng)` changes one file of a copy of sources/ in one way and says how. Every
operator is deterministic given the random generator, so a failing case is replayed from its
seed (`python tests/mutations.py SEED` prints what the case does).
"""

from __future__ import annotations

import csv
import io
import os
import random
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

# Values that have broken, or could break, a loader, a cast or a formula.
HOSTILE_VALUES = (
    "",
    "0",
    "-0",
    "-1",
    "-5",
    "0.0000001",
    "1e308",
    "1e-300",
    "1" + "0" * 308,
    "9" * 400,
    "9223372036854775807",
    "9223372036854775808",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "0x10",
    "1_000",
    "1,5",
    "1 000",
    "\u2212" + "5",
    "\u0661\u0662\u0663",
    "\uff11\uff12",
    "0000-01-01",
    "-2026-10-12",
    "0001-01-01",
    "9999-12-31",
    "10000-01-01",
    "2026-02-30",
    "12.10.2026",
    "2026-10-12T00:00:00",
    "true",
    "ИСТИНА",
    "../../../tmp/evil",
    "..",
    "a/b",
    "index",
    "x" * 300,
    "x" * 140_000,
    "h100\u00adpcie",
    "a\u2060b",
    "a\tb",
    "a\u2028b",
    "a\u202eb",
    "a\ufeffb",
    "a\x85b",
    "line\nbreak",
    '"quoted"',
    "'",
    "=cmd|' /C calc'!A0",
    "<script>alert(1)</script>",
    "{{ 7 * 7 }}",
    "javascript:alert(1)",
    "😀",
    "Модель 7 млрд",
)

# Numbers that multiply a numeric cell: zero, tiny, huge, negative.
FACTORS = (0, 1e-9, 0.001, 0.5, 2, 10, 1000, 1e9, -1)


def read_rows(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


def write_rows(path: Path, rows: list[list[str]]) -> None:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")


def _cell(rows, rng) -> tuple[int, int]:
    return rng.randrange(1, len(rows)) if len(rows) > 1 else 0, rng.randrange(len(rows[0]))


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# -- operators: each takes (file, rng), changes the file and returns what it did --


def cell_hostile(path: Path, rng: random.Random) -> str:
    rows = read_rows(path)
    r, c = _cell(rows, rng)
    value = rng.choice(HOSTILE_VALUES)
    old, rows[r][c] = rows[r][c], value
    write_rows(path, rows)
    return f"row {r} col {rows[0][c]}: {old[:30]!r} -> {value[:40]!r}"


def cell_scaled(path: Path, rng: random.Random) -> str:
    rows = read_rows(path)
    numeric = [(r, c) for r in range(1, len(rows)) for c in range(len(rows[r])) if is_number(rows[r][c])]
    if not numeric:
        return cell_hostile(path, rng)
    r, c = rng.choice(numeric)
    factor = rng.choice(FACTORS)
    value = float(rows[r][c]) * factor
    old, rows[r][c] = rows[r][c], f"{value:.12g}"
    write_rows(path, rows)
    return f"row {r} col {rows[0][c]}: {old} x {factor} -> {rows[r][c]}"


def cell_from_elsewhere(path: Path, rng: random.Random) -> str:
    rows = read_rows(path)
    r, c = _cell(rows, rng)
    r2, c2 = _cell(rows, rng)
    old, rows[r][c] = rows[r][c], rows[r2][c2]
    write_rows(path, rows)
    return f"row {r} col {rows[0][c]}: {old[:30]!r} -> {rows[r][c][:30]!r} (from {rows[0][c2]})"


def column_emptied(path: Path, rng: random.Random) -> str:
    rows = read_rows(path)
    c = rng.randrange(len(rows[0]))
    for row in rows[1:]:
        row[c] = ""
    write_rows(path, rows)
    return f"column {rows[0][c]} emptied"


def columns_swapped(path: Path, rng: random.Random) -> str:
    rows = read_rows(path)
    a, b = rng.sample(range(len(rows[0])), 2)
    keep_header = rng.random() < 0.5
    for i, row in enumerate(rows):
        if i or not keep_header:
            row[a], row[b] = row[b], row[a]
    write_rows(path, rows)
    return f"columns {rows[0][a]} <-> {rows[0][b]} swapped" + (" (header kept)" if keep_header else "")


def column_deleted(path: Path, rng: random.Random) -> str:
    rows = read_rows(path)
    c = rng.randrange(len(rows[0]))
    name = rows[0][c]
    write_rows(path, [row[:c] + row[c + 1 :] for row in rows])
    return f"column {name} deleted"


def row_deleted(path: Path, rng: random.Random) -> str:
    rows = read_rows(path)
    if len(rows) < 2:
        return "no row to delete"
    r = rng.randrange(1, len(rows))
    del rows[r]
    write_rows(path, rows)
    return f"row {r} deleted"


def row_duplicated(path: Path, rng: random.Random) -> str:
    rows = read_rows(path)
    r = rng.randrange(len(rows))
    rows.insert(r, list(rows[r]))
    write_rows(path, rows)
    return f"row {r} duplicated"


def rows_all_deleted(path: Path, rng: random.Random) -> str:
    rows = read_rows(path)
    keep = rng.choice((0, 1))
    write_rows(path, rows[: 1 + keep])
    return "header only" if not keep else "header and the first row only"


def rows_shuffled(path: Path, rng: random.Random) -> str:
    rows = read_rows(path)
    body = rows[1:]
    rng.shuffle(body)
    write_rows(path, rows[:1] + body)
    return "rows shuffled"


def byte_inserted(path: Path, rng: random.Random) -> str:
    data = path.read_bytes()
    i = rng.randrange(len(data) + 1)
    byte = rng.choice((b"\xff", b"\x98", b"\x00", b"\xc3", b"\xe2\x80", b'"', b",", b"\n", b"\r"))
    path.write_bytes(data[:i] + byte + data[i:])
    return f"{byte!r} inserted at byte {i}"


def bytes_deleted(path: Path, rng: random.Random) -> str:
    data = path.read_bytes()
    i = rng.randrange(len(data))
    n = rng.choice((1, 2, 17, 500))
    path.write_bytes(data[:i] + data[i + n :])
    return f"{n} byte(s) deleted at {i}"


def truncated(path: Path, rng: random.Random) -> str:
    data = path.read_bytes()
    i = rng.randrange(len(data))
    path.write_bytes(data[:i])
    return f"truncated at byte {i} of {len(data)}"


def re_encoded(path: Path, rng: random.Random) -> str:
    text = path.read_text(encoding="utf-8")
    encoding = rng.choice(("cp1251", "utf-16", "koi8-r", "cp866", "mac_cyrillic", "latin-1"))
    path.write_bytes(text.encode(encoding, errors="replace"))
    return f"saved as {encoding}"


def quote_unbalanced(path: Path, rng: random.Random) -> str:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    i = rng.randrange(len(lines))
    cells = lines[i].split(",")
    c = rng.randrange(len(cells))
    cells[c] = '"' + cells[c]
    lines[i] = ",".join(cells)
    path.write_text("".join(lines), encoding="utf-8")
    return f"line {i + 1} cell {c}: a quote opened and never closed"


def delimiter_changed(path: Path, rng: random.Random) -> str:
    rows = read_rows(path)
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=";", lineterminator="\r\n").writerows(rows)
    text = buffer.getvalue()
    if rng.random() < 0.5:  # only one line changed
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        i = rng.randrange(len(lines))
        lines[i] = text.splitlines(keepends=True)[i]
        text = "".join(lines)
        path.write_text(text, encoding="utf-8")
        return f"line {i + 1} uses ';'"
    path.write_text(text, encoding="utf-8")
    return "';' between cells, CRLF"


def huge_cell(path: Path, rng: random.Random) -> str:
    rows = read_rows(path)
    r, c = _cell(rows, rng)
    rows[r][c] = rng.choice(("9", "x", "а,")) * rng.choice((140_000, 2_000_000))
    write_rows(path, rows)
    return f"row {r} col {rows[0][c]}: {len(rows[r][c])}-character cell"


def symlinked(path: Path, rng: random.Random) -> str:
    path.unlink()
    target = rng.choice((path.name, "/etc/passwd", "../outside.csv", "missing.csv", "/dev/null"))
    if target == "../outside.csv":
        (path.parent.parent / "outside.csv").write_text("secret,line\n1,2\n", encoding="utf-8")
    os.symlink(target, path)
    return f"symlink to {target}"


def replaced_by_folder(path: Path, rng: random.Random) -> str:
    path.unlink()
    path.mkdir()
    return "a folder in place of the file"


def deleted(path: Path, rng: random.Random) -> str:
    path.unlink()
    return "file deleted"


OPERATORS: tuple[tuple[Callable, int], ...] = (
    (cell_hostile, 12),
    (cell_scaled, 10),
    (cell_from_elsewhere, 4),
    (column_emptied, 3),
    (columns_swapped, 3),
    (column_deleted, 2),
    (row_deleted, 4),
    (row_duplicated, 3),
    (rows_all_deleted, 3),
    (rows_shuffled, 1),
    (byte_inserted, 4),
    (bytes_deleted, 2),
    (truncated, 2),
    (re_encoded, 3),
    (quote_unbalanced, 3),
    (delimiter_changed, 1),
    (huge_cell, 1),
    (symlinked, 2),
    (replaced_by_folder, 1),
    (deleted, 1),
)


SOURCES = Path(__file__).resolve().parent.parent / "sources"


def restore(folder: Path) -> Path:
    """Make `folder` an exact copy of sources/ again, rewriting only what differs.

    Reusing one folder keeps the path in the report the same from case to case, so the
    validation's cache (keyed by path and content) runs the suites only of the tables a case changed.
    """
    folder.mkdir(parents=True, exist_ok=True)
    originals = {p.name: p for p in SOURCES.iterdir() if p.is_file()}
    for p in list(folder.iterdir()):
        if p.name not in originals or p.is_symlink() or not p.is_file():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
    for name, original in originals.items():
        target = folder / name
        data = original.read_bytes()
        if not target.exists() or target.read_bytes() != data:
            target.write_bytes(data)
    for extra in folder.parent.glob("outside*"):
        extra.unlink()
    return folder


def mutate(folder: Path, rng: random.Random) -> str:
    """Apply one random operator to one random CSV of `folder`; returns a description."""
    files = sorted(p for p in folder.glob("*.csv") if p.is_file() and not p.is_symlink())
    path = rng.choice(files)
    operators, weights = zip(*OPERATORS, strict=True)
    operator = rng.choices(operators, weights)[0]
    return f"{path.name}: {operator.__name__}: {operator(path, rng)}"


if __name__ == "__main__":  # replay: python tests/mutations.py SEED [FOLDER]
    import tempfile

    seed = int(sys.argv[1])
    folder = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp()) / "sources"
    if not folder.exists():
        restore(folder)
    print(folder, mutate(folder, random.Random(seed)))
