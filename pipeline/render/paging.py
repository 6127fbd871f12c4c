"""Long tables on the site, split into pages of `table_page_rows` rows (site_templates/site.toml).

A model page lists every server and a server page every model: at a thousand of each a page would
carry a table of thousands of rows (megabytes of HTML, slow to render and to read). Such a table
shows its first rows on the entity's own page and the rest on continuation pages beside it,
`<page stem>/<table>-<k>.html` (`models/llama-3-1-8b/servers-2.html`, `models/index/page-2.html`),
each with the same columns, sources and download links and a pager. The downloads always hold
whole tables. A table that fits on one page is not touched.
"""

from __future__ import annotations

from dataclasses import replace

from pipeline.render.view import Pager, TableView


def continuation_href(path: str, key: str, k: int) -> str:
    """Page k (k >= 2) of the table `key` of the page at `path` ("page-k" for a page's only table,
    which the list and comparison templates call `view`)."""
    name = "page" if key == "view" else key
    return f"{path.removesuffix('.html')}/{name}-{k}.html"


def split(view: TableView, rows_per_page: int, path: str, key: str, label: str) -> list[TableView]:
    """The view as pages of at most `rows_per_page` rows, each with its Pager; [view] if it fits."""
    n = len(view.rows)
    if n <= rows_per_page:
        return [view]
    starts = range(0, n, rows_per_page)
    hrefs = [path] + [continuation_href(path, key, k) for k in range(2, len(starts) + 1)]
    return [
        replace(
            view,
            rows=view.rows[start : start + rows_per_page],
            pager=Pager(hrefs, k, start + 1, min(start + rows_per_page, n), n, label),
        )
        for k, start in enumerate(starts, start=1)
    ]
