"""What a page shows of a table: headers, formatted cells, its sources and downloads."""

from __future__ import annotations

from dataclasses import dataclass, field

STACK_MAX_ROWS = 6  # at most this many rows and
STACK_MIN_COLUMNS = 4  # at least this many columns: stacked on a phone
TALL_MIN_ROWS = 25  # this many rows or more: the table scrolls in a box of its own


@dataclass(frozen=True)
class Link:
    """A cell that links to a page of the site; `href` is relative to the site root."""

    text: str
    href: str

    def __str__(self) -> str:
        return self.text


@dataclass
class TableView:
    headers: list[str]
    rows: list[list[str | Link]]
    references: list[str]  # reference ids, in order of first use
    downloads: list[str] = field(default_factory=list)  # table names under data/
    numeric: list[bool] = field(default_factory=list)  # right-align these columns
    notes: list[str] = field(default_factory=list)
    sortable: bool = False

    @property
    def layout(self) -> str:
        """The class of the table's scrolling box besides "scroll": "stack" for a short table with many
        columns (on a phone each row becomes a block, each value under its column's name), "tall" for
        a long one (it scrolls in its own box, so its header row stays in view), else ""."""
        if len(self.rows) <= STACK_MAX_ROWS and len(self.headers) >= STACK_MIN_COLUMNS:
            return "stack"
        return "tall" if len(self.rows) >= TALL_MIN_ROWS else ""
