import datetime as dt

import pytest

from pipeline.render import format as fmt

NBSP = "\xa0"


@pytest.mark.parametrize(
    "value, shown",
    [
        (1200.0, f"1{NBSP}200"),
        (6.857142857, "6,9"),
        (137.142857, "137,1"),
        (630.0000000001, "630"),
        (68.55, "68,6"),
        (0.04, "0"),
        (None, ""),
    ],
)
def test_gb(value, shown):
    assert fmt.gb(value) == shown


def test_integer_and_date():
    assert fmt.integer(2373300) == f"2{NBSP}373{NBSP}300"
    assert fmt.date(dt.date(2026, 10, 12)) == "12.10.2026"
    assert fmt.number(835.5) == "835,5"
    assert fmt.number(70.6, 2) == "70,6"


def test_the_formats_are_babels_own():
    """format_decimal keeps the locale and the patterns parsed: the text of Babel's format_decimal and
    format_date with the locale named, for figures of every size and sign, and dates of any year."""
    import random

    from babel.dates import format_date
    from babel.numbers import format_decimal

    rng = random.Random(37)
    values = [0, 1, -1, 7, 999, 1000, -12345, 10**9, 0.05, 0.95, 68.55, -0.04, 123456.789, 1e20]
    values += [rng.uniform(-1e7, 1e7) for _ in range(300)] + [rng.randrange(-(10**12), 10**12) for _ in range(100)]
    for value in values:
        for pattern in ("#,##0.#", "#,##0.##", "#,##0", "#,##0.###"):
            expected = format_decimal(fmt._rounded(value, 3), pattern, locale=fmt.LOCALE)
            assert fmt.format_decimal(fmt._rounded(value, 3), pattern) == expected, (value, pattern)
        assert fmt.gb(value) == format_decimal(fmt._rounded(value, 1), "#,##0.#", locale=fmt.LOCALE)
        assert fmt.integer(int(value)) == format_decimal(int(value), "#,##0", locale=fmt.LOCALE)
    for day in (dt.date(2026, 1, 2), dt.date(1999, 12, 31), dt.date(987, 3, 4), dt.date(1, 1, 1)):
        assert fmt.date(day) == format_date(day, "dd.MM.yyyy", locale=fmt.LOCALE)


def test_md_cell_escapes_table_syntax_and_markup():
    assert fmt.md_cell("a|b") == "a\\|b"
    assert fmt.md_cell("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert fmt.md_cell("line\nbreak `code`") == "line break \\`code\\`"
