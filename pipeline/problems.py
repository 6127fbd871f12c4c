"""Data problems: what the loader and the validation report to an editor."""

from __future__ import annotations

import datetime as dt
import unicodedata
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline.errors import MAX_PER_RULE, ConfigError, DataError, TemplateError, _thousands, capped  # noqa: F401  (re-exported)
from pipeline.messages import message

# Values longer than this are shown cut, with their length: a 10 MB cell stays one short line.
MAX_SHOWN_VALUE = 120

# Characters a reader cannot see (control, format, line and paragraph separators, private use):
# a report shows them as escapes, so that the editor sees what to delete.
_INVISIBLE_CATEGORIES = ("Cc", "Cf", "Zl", "Zp", "Co", "Cs")
_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
# Letters and marks that render as nothing (default-ignorable, not of the categories above):
# grapheme joiner, Hangul and Khmer fillers, the blank Braille pattern, variation selectors.
_BLANK = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)


def _invisible(ch: str) -> bool:
    return unicodedata.category(ch) in _INVISIBLE_CATEGORIES or ch in _ESCAPES or ch in _BLANK


def shown(value: str) -> str:
    """A cell as a report shows it: invisible characters escaped (\\u00ad), a long value cut."""
    cut = len(value) > MAX_SHOWN_VALUE
    text = value[:MAX_SHOWN_VALUE] if cut else value
    if any(_invisible(ch) for ch in text):
        text = "".join(_ESCAPES.get(ch, f"\\u{ord(ch):04x}") if _invisible(ch) else ch for ch in text)
    return message("report.long_value", text=text, length=_thousands(len(value))) if cut else text


@dataclass(frozen=True)
class Problem:
    """One thing wrong in one place of a source file.

    `omitted` > 0 marks the line that stands for that many further problems of one rule in
    one file, which a report does not list (see `capped`); its rule says so. The value is the
    cell's text; a report shows it with invisible characters escaped and a long one cut.
    """

    file: str
    line: int  # 0 when the problem concerns the whole file
    column: str
    value: str | None
    rule: str
    omitted: int = 0

    def __lt__(self, other: Problem) -> bool:
        return _order(self) < _order(other)

    def __str__(self) -> str:
        place = f"{self.file}:{self.line}" if self.line else self.file
        if self.column and not self.omitted:
            value = message("report.empty") if self.value is None else f'"{shown(str(self.value))}"'
            return f"{place}: {self.column} = {value}: {self.rule}"
        return f"{place}: {self.column + ': ' if self.column else ''}{self.rule}"


def _order(p: Problem) -> tuple:
    return (p.file, p.omitted > 0, p.line, p.column, p.value or "", p.rule)


def format_report(problems: list[Problem]) -> str:
    """The problems grouped by file, one line each (at most MAX_PER_RULE per rule), then a count."""
    by_file: dict[str, list[Problem]] = defaultdict(list)
    for p in capped(problems):
        by_file[p.file].append(p)
    lines = []
    for file, items in by_file.items():
        lines.append(f"{file} ({sum(p.omitted or 1 for p in items)}):")
        lines.extend(f"  {p}" for p in items)
    n = sum(p.omitted or 1 for items in by_file.values() for p in items)
    lines.append(message("report.total", count=n, files=len(by_file)))
    return "\n".join(lines)


@dataclass(frozen=True)
class CheckResult:
    """What the data-quality page shows for one check."""

    table: str
    column: str
    rule: str
    engine: str  # "Great Expectations" or "DuckDB SQL"
    failures: int


@dataclass
class Validation:
    """What validating the sources found: problems (stop the build), warnings (shown), checks (quality.html)."""

    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    build_date: dt.date = dt.date(1970, 1, 1)

    def to_dict(self) -> dict:
        """What a later build of the same sources reuses instead of validating again."""
        return {
            "warnings": [asdict(w) for w in self.warnings],
            "checks": [asdict(c) for c in self.checks],
            "build_date": self.build_date.isoformat(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Validation:
        return cls(
            warnings=[Problem(**w) for w in data["warnings"]],
            checks=[CheckResult(**c) for c in data["checks"]],
            build_date=dt.date.fromisoformat(data["build_date"]),
        )


def display_name(sources_dir: Path, file: str) -> str:
    """How a source file is named in reports: relative to the working directory when possible.

    Only the folder is resolved, never the file: a symbolic link is named as the editor sees
    it, and a link that loops cannot stop the report.
    """
    try:
        return str((Path(sources_dir).resolve() / file).relative_to(Path.cwd().resolve()))
    except (ValueError, OSError, RuntimeError):
        return str(Path(sources_dir) / file)
