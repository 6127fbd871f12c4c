"""What a page shows of a table: headers, formatted cells, its sources and downloads, and its pager."""

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
    pager: Pager | None = None  # set on the pages of a table split by pipeline.render.paging

    @property
    def layout(self) -> str:
        """The class of the table's scrolling box besides "scroll": "stack" for a short table with many
        columns (on a phone each row becomes a block, each value under its column's name), "tall" for
        a long one (it scrolls in its own box, so its header row stays in view), else ""."""
        if len(self.rows) <= STACK_MAX_ROWS and len(self.headers) >= STACK_MIN_COLUMNS:
            return "stack"
        return "tall" if len(self.rows) >= TALL_MIN_ROWS else ""


@dataclass(frozen=True)
class Pager:
    """Where one page of a split table sits: page `current` (1-based) of `hrefs` (root-relative)."""

    hrefs: list[str]
    current: int
    first_row: int  # 1-based numbers of the rows on this page
    last_row: int
    total_rows: int
    label: str  # the table's title, for the pager's accessible name

    @property
    def total(self) -> int:
        return len(self.hrefs)

    def items(self, around: int = 2) -> list[int | None]:
        """Page numbers to link: the first, the last and `around` either side of the current one;
        None where numbers are left out."""
        return page_items(self.current, self.total, around)


def page_items(current: int, total: int, around: int = 2) -> list[int | None]:
    """Page numbers to link: the first, the last and `around` either side of the current one;
    None where numbers are left out."""
    shown = sorted({1, total} | set(range(max(current - around, 1), min(current + around, total) + 1)))
    out: list[int | None] = []
    for n in shown:
        if out and n - out[-1] > 2:
            out.append(None)
        elif out and n - out[-1] == 2:
            out.append(n - 1)  # a gap of one page: show its number rather than an ellipsis
        out.append(n)
    return out
