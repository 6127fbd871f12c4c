"""The words people read come from site_templates/labels.toml (Python holds none): read on each call, so
that a warm process (`just serve`) shows an edited word at its next rebuild.

A few figures recur in those words and in the page templates (the table rule's range, the accuracy
band). They are never typed there: a word holds the slot `{range_low}`, `{range_high}` or `{within}`,
and `data_words` formats the figure once from constants.csv (a page template writes
`{{ figures.range_high }}`), so that an edited constant changes every sentence that quotes it."""

from __future__ import annotations

import marshal
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

from pipeline import TEMPLATES


def labels(templates: Path | None = None) -> dict:
    """site_templates/labels.toml as a dict of sections: a new dict on each call (a caller may change
    it). The file is read on each call; its text is parsed once per process (a build asks for it once
    per workbook and per table of the database: parsing the TOML each time cost a fifth of a second)."""
    text = ((templates or TEMPLATES) / "labels.toml").read_text(encoding="utf-8")
    frozen = _PARSED.get(text)
    if frozen is not None:
        return marshal.loads(frozen)
    sections = tomllib.loads(text)
    try:
        frozen = marshal.dumps(sections)  # strings, numbers, lists and dicts: a TOML date would not fit
    except ValueError:
        return sections
    _PARSED.clear()  # the last text only: an edited file in a warm process replaces it
    _PARSED[text] = frozen
    return sections


_PARSED: dict[str, bytes] = {}  # labels.toml's text -> its parsed sections, marshalled (copied out per call)


DATA_SLOTS = ("range_low", "range_high", "within")
_DATA_SLOT = re.compile(r"\{(" + "|".join(DATA_SLOTS) + r")\}")


def data_words(constants: Mapping[str, float]) -> dict[str, str]:
    """The recurring figures, formatted: range_low "−30" and range_high "+50" (the table rule's range,
    range_low_factor and range_high_factor as signed percents), within "25" (calibration_within, %)."""
    from pipeline.render import format as fmt

    def signed(share: float) -> str:
        text = fmt.number(abs(share) * 100, 1)
        return text if text == "0" else ("+" if share > 0 else "−") + text

    return {
        "range_low": signed(constants["range_low_factor"] - 1),
        "range_high": signed(constants["range_high_factor"] - 1),
        "within": fmt.number(constants["calibration_within"] * 100, 1),
    }


def with_data_words(value, figures: Mapping[str, str]):
    """`value` (a text, or labels' dicts and lists of texts) with every data slot filled in; other
    slots ({n}, {gpu}, …) are left for the code that fills them."""
    if isinstance(value, str):
        return _DATA_SLOT.sub(lambda m: figures[m[1]], value)
    if isinstance(value, dict):
        return {key: with_data_words(item, figures) for key, item in value.items()}
    if isinstance(value, list):
        return [with_data_words(item, figures) for item in value]
    return value
