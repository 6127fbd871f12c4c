"""Data problems: what the loader and the validation report to an editor."""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline.messages import message

# A report lists at most this many problems of one rule in one file, then says how many more
# there are: a file of junk gives a screenful, not millions of lines.
MAX_PER_RULE = 50
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


def _thousands(n: int) -> str:
    return f"{n:,}".replace(",", " ")


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


def _kind(text: str) -> str:
    """A rule without the numbers in its text: "has 21 cells" and "has 5 cells" are one rule."""
    return re.sub(r"\d+(?:\.\d+)?", "#", text)


def _order(p: Problem) -> tuple:
    return (p.file, p.omitted > 0, p.line, p.column, p.value or "", p.rule)


def capped(problems: list[Problem], limit: int = MAX_PER_RULE) -> list[Problem]:
    """At most `limit` problems per rule and file (the first by line), plus one line per rule
    that says how many more there are. Applying it again changes nothing."""
    kept, counts, first_rule = [], defaultdict(int), {}
    for p in sorted(set(problems)):
        if p.omitted:
            kept.append(p)
            continue
        key = (p.file, _kind(p.column), _kind(p.rule))
        counts[key] += 1
        if counts[key] <= limit:
            kept.append(p)
        else:
            first_rule.setdefault(key, (p.column, p.rule))
    for key, (column, rule) in first_rule.items():
        n = counts[key] - limit
        kept.append(Problem(key[0], 0, column, None, message("report.more", count=_thousands(n), rule=rule), omitted=n))
    return sorted(kept)


class DataError(Exception):
    """Raised when the sources are invalid; carries every problem found (capped per rule)."""

    def __init__(self, problems: list[Problem]):
        self.problems = capped(problems)
        total = sum(p.omitted or 1 for p in self.problems)
        super().__init__(f"{total} problem(s) in the sources")


class TemplateError(Exception):
    """An article template refers to something the catalog does not have."""

    def __init__(self, problems: list[Problem]):
        super().__init__(f"{len(problems)} problem(s) in the templates")
        self.problems = problems


class ConfigError(Exception):
    """A setting of the environment or of the configuration that cannot be used (a variable such as
    SOURCE_DATE_EPOCH, a config file, an address): every command says it in one line and exits 3."""


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
