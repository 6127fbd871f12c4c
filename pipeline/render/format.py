"""Showing numbers and text: Russian number formats (Babel) and Markdown escaping."""

from __future__ import annotations

import datetime as dt
import re
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache

from babel.core import Locale
from babel.lists import format_list
from babel.numbers import format_scientific, parse_pattern

LOCALE = "ru_RU"
_LOCALE = Locale.parse(LOCALE)


@lru_cache(maxsize=64)
def _pattern(text: str):
    return parse_pattern(text)


def format_decimal(value, pattern: str) -> str:
    """Babel's format_decimal(value, pattern, locale=LOCALE), without parsing the locale and the pattern
    on every call (a tenth of a 10^7-row site's model pages, whose figures are mostly distinct)."""
    return _pattern(pattern).apply(
        value, _LOCALE, decimal_quantization=True, group_separator=True, numbering_system="latn"
    )


def _rounded(value: float, places: int) -> Decimal:
    # Half up, as a reader expects (68.55 -> 68,6), not Babel's default half-even.
    return Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


@lru_cache(maxsize=65536)  # pages repeat the same figures thousands of times; Babel is the slow part
def gb(value: float | None) -> str:
    """A memory figure: one decimal, a trailing ',0' dropped ("1 200", "6,9")."""
    if value is None:
        return ""
    return format_decimal(_rounded(value, 1), "#,##0.#")


@lru_cache(maxsize=65536)
def number(value: float | None, places: int = 1) -> str:
    """Any other figure, up to `places` decimals, trailing zeros dropped."""
    if value is None:
        return ""
    if abs(value) >= HUGE:  # beyond what Babel's decimal pattern takes: an absurd input, shown as it is
        return format_scientific(value, "0.###E0", locale=LOCALE)
    return format_decimal(_rounded(value, places), "#,##0." + "#" * places if places else "#,##0")


HUGE = 1e27


@lru_cache(maxsize=65536)
def integer(value: int | None) -> str:
    """A whole number in Russian style ("1 200"); empty for None."""
    return "" if value is None else format_decimal(int(value), "#,##0")


MEMORY_PLACEHOLDER = "{memory_gb}"  # in gpus.memory_note_ru: the card's memory as the row gives it


def memory_note(note: str | None, memory_gb: float) -> str | None:
    """A GPU's memory note with `{memory_gb}` filled in: the figure the site counts by is the row's."""
    return note.replace(MEMORY_PLACEHOLDER, gb(memory_gb)) if note else note


def listed(items: list[str]) -> str:
    """Items joined as Russian lists them (commas, then the conjunction before the last: CLDR's list pattern)."""
    return format_list(list(items), locale=LOCALE)


def date(value: dt.date | None) -> str:
    """DD.MM.YYYY, as the site shows dates (CLDR's dd.MM.yyyy: the day and month of two digits, the year
    of at least four)."""
    return "" if value is None else f"{value.day:02d}.{value.month:02d}.{value.year:04d}"


def md_inline(text: str) -> str:
    """Text made inert inside Markdown: no emphasis, links, code or raw HTML can come from data."""
    text = str(text)
    for char in ("\\", "`", "*", "_", "[", "]", "|"):
        text = text.replace(char, "\\" + char)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def md_cell(text: str) -> str:
    """Text made safe for one cell of a Markdown table (line breaks folded into spaces)."""
    # ASCII whitespace only: the non-breaking spaces of "1 200" and of typography stay
    return md_inline(re.sub(r"[ \t\r\n\f\v]+", " ", str(text)).strip())


def md_url(url: str) -> str:
    """A validated http(s) URL made safe as a Markdown link target."""
    return url.replace("(", "%28").replace(")", "%29")


# Cells that a spreadsheet would run as a formula (OWASP "CSV injection").
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str | None) -> str | None:
    """A text cell prefixed with ' when a spreadsheet would read it as a formula; numbers are never passed here."""
    if text and text.startswith(FORMULA_PREFIXES):
        return "'" + text
    return text
