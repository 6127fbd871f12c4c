"""The errors every command reports (exit 2 for data and templates, 3 for the environment).

Kept apart from pipeline.problems, whose dataclasses import `inspect`: a build whose inputs have not
changed, or a command stopped by a setting, never needs them (pipeline.problems re-exports these)."""

from __future__ import annotations

import re
from collections import defaultdict

from pipeline.messages import message


class DataError(Exception):
    """Raised when the sources are invalid; carries every problem found (capped per rule)."""

    def __init__(self, problems: list):
        self.problems = capped(problems)
        total = sum(p.omitted or 1 for p in self.problems)
        super().__init__(f"{total} problem(s) in the sources")


class TemplateError(Exception):
    """An article template refers to something the catalog does not have."""

    def __init__(self, problems: list):
        super().__init__(f"{len(problems)} problem(s) in the templates")
        self.problems = problems


class ConfigError(Exception):
    """A setting of the environment or of the configuration that cannot be used (a variable such as
    SOURCE_DATE_EPOCH, a config file, an address): every command says it in one line and exits 3."""


# A report lists at most this many problems of one rule in one file, then says how many more
# there are: a file of junk gives a screenful, not millions of lines.
MAX_PER_RULE = 50


def capped(problems: list, limit: int = MAX_PER_RULE) -> list:
    """At most `limit` problems per rule and file (the first by line), plus one line per rule
    that says how many more there are (a Problem, of the class of those given: this module does not
    import pipeline.problems). Applying it again changes nothing."""
    kept, counts, first_rule, kind = [], defaultdict(int), {}, None
    for p in sorted(set(problems)):
        kind = type(p)
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
        kept.append(kind(key[0], 0, column, None, message("report.more", count=_thousands(n), rule=rule), omitted=n))
    return sorted(kept)


def _kind(text: str) -> str:
    """A rule without the numbers in its text: "has 21 cells" and "has 5 cells" are one rule."""
    return re.sub(r"\d+(?:\.\d+)?", "#", text)


def _thousands(n: int) -> str:
    return f"{n:,}".replace(",", " ")
