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


def test_md_cell_escapes_table_syntax_and_markup():
    assert fmt.md_cell("a|b") == "a\\|b"
    assert fmt.md_cell("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert fmt.md_cell("line\nbreak `code`") == "line break \\`code\\`"
