"""What a warm process keeps from one build to the next, held by one owner.

`serve` (the editors' loop) makes one `Warm` and passes it to every `build`, so an edit costs
only what it changed: Jinja compiles a page template again only when it changed, Great
Expectations runs only on the tables whose cells changed, a workbook is made again only when
its table did. A plain build, `check` and `estimate` make their own `Warm` and drop it when they
return: a cold process keeps no module state, and no stage function depends on what ran before.

Every entry is keyed by what determines it (a template folder, a partial's source, a table's
cells, a CSV's hash, a device), so a hit is always right. What grows with edits is cut back to
what the last build used (`outcomes`, `workbooks`, `table_files`, `article_bodies`, `queries`,
`indexes`; `frames` and `steps` hold one entry per step), so an editing session does not pile up old entries; the rest is bounded by the inputs (a folder or two, one partial, the tables'
suites; Jinja keeps at most 400 compiled templates).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Warm:
    """The caches of a warm process; each field names the module that fills it."""

    # pipeline/render/site.py: templates folder -> the page templates' Jinja environment.
    environments: dict = field(default_factory=dict)
    # pipeline/render/site.py: the articles' sandboxed environment (made on first use) and, per
    # compiled article name (slug and content hash), its body and file for the loader and line numbers
    # (the last render's: each render registers its articles again).
    article_env: object | None = None
    article_bodies: dict = field(default_factory=dict)
    # pipeline/render/site.py: partial's source and labels -> whether html_table writes what the macro writes.
    tables_verified: dict = field(default_factory=dict)
    # Whether this process lives on after its build (`serve`): then Great Expectations and the suites
    # are made in it, before the validating child is forked, and kept; a build's own Warm leaves them
    # to the child, which imports GX while this process computes.
    lives_on: bool = False
    # pipeline/validate: Great Expectations and the batch definition every suite runs on (made on
    # first use), and the suite with its checks by expectation id per (table, view, build date).
    gx: tuple | None = None
    suites: dict = field(default_factory=dict)
    # pipeline/validate: (table, file, build date, cells) -> (problems, checks) of its suites; the last build's.
    outcomes: dict = field(default_factory=dict)
    # pipeline/validate/query_memo.py: the cross-table rules' queries and the last build's answers
    # by the files they read (a QueryStore, read from the user cache on first use and written back
    # after each validation: pipeline.validation_cache, `validation-queries`).
    queries: object | None = None
    # pipeline/load.py: the last build's DuckDB connection and, per table, the digest of the file its
    # raw, typed and core tables were made of (connect takes it, create_core_tables puts it back);
    # `duck_pending` holds it between the two.
    duck: tuple | None = None
    duck_pending: tuple | None = None
    # pipeline/publish/downloads.py: (table, CSV hash, date, text hash) -> XLSX bytes; the last build's.
    workbooks: dict = field(default_factory=dict)
    # pipeline/publish/downloads.py: table -> its CSV and Parquet bytes by frame content; the last build's.
    table_files: dict = field(default_factory=dict)
    # pipeline/publish/search.py: the last search index (Pagefind's files) by what Pagefind read.
    indexes: dict = field(default_factory=dict)
    # pipeline/frame_memo.py: step name -> (key, frame) of the last build (the recommendations' plans).
    frames: dict = field(default_factory=dict)
    # pipeline/combine.py: derived table -> (its key by the source files it is made from, the table) of
    # the last build: a table none of whose sources an edit changed is taken as it is.
    steps: dict = field(default_factory=dict)
    # pipeline/publish/staging.py: device -> whether its file system exchanges two folders atomically.
    exchange: dict = field(default_factory=dict)

    @property
    def kept_files(self) -> dict | None:
        """`table_files` where this process lives on (its next build compares its tables with them), else
        None: a process that makes one build keeps nothing, and takes no digest of its tables' frames."""
        return self.table_files if self.lives_on else None
