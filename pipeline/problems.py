"""Data problems: what the loader and the validation report to an editor."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong in one place of a source file."""

    file: str
    line: int  # 0 when the problem concerns the whole file
    column: str
    value: str | None
    rule: str

    def __str__(self) -> str:
        place = f"{self.file}:{self.line}" if self.line else self.file
        if self.column:
            shown = "(empty)" if self.value is None else f'"{self.value}"'
            return f"{place}: {self.column} = {shown}: {self.rule}"
        return f"{place}: {self.rule}"


class DataError(Exception):
    """Raised when the sources are invalid; carries every problem found."""

    def __init__(self, problems: list[Problem]):
        super().__init__(f"{len(problems)} problem(s) in the sources")
        self.problems = sorted(set(problems))


class TemplateError(Exception):
    """An article template refers to something the catalog does not have."""

    def __init__(self, problems: list[Problem]):
        super().__init__(f"{len(problems)} problem(s) in the templates")
        self.problems = problems


def format_report(problems: list[Problem]) -> str:
    """The problems grouped by file, one line each, then a count."""
    by_file: dict[str, list[Problem]] = defaultdict(list)
    for p in sorted(set(problems)):
        by_file[p.file].append(p)
    lines = []
    for file, items in by_file.items():
        lines.append(f"{file} ({len(items)}):")
        lines.extend(f"  {p}" for p in items)
    n = sum(len(v) for v in by_file.values())
    lines.append(f"{n} problem(s) in {len(by_file)} file(s); nothing was written.")
    return "\n".join(lines)
