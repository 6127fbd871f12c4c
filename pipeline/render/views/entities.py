"""Entity and comparison pages: one page per model, method, GPU and server, their index pages,
and the catalog-wide comparison matrices. Tables are TableViews; words come from labels.toml
([entities]) and the page templates; editorial choices (card counts on GPU pages, the main tasks
of the comparison) from site_templates/site.toml."""

from __future__ import annotations

import re
from functools import cached_property

import numpy as np
import polars as pl

from pipeline import lookups
from pipeline.messages import message
from pipeline.problems import Problem
from pipeline.publish import releases
from pipeline.render import format as fmt
from pipeline.render import quote, russian
from pipeline.render.view import Link, TableView
from pipeline.render.views.articles import Tables, _unique, link_words, time_words
from pipeline.render.views.estimator import signed_percent


def _job_problems(shown: str, key: str, job, models: set[str], methods: set[str]) -> list[Problem]:
    """A [model_id, method_id] setting of site.toml: a pair of the catalog's ids, or its problems."""
    if not (isinstance(job, list) and len(job) == 2 and all(isinstance(i, str) for i in job)):
        return [Problem(shown, 0, key, job, message("rules.config_job"))]
    found = []
    if job[0] not in models:
        found.append(Problem(shown, 0, key, job[0], message("rules.config_no_model")))
    if job[1] not in methods:
        found.append(Problem(shown, 0, key, job[1], message("rules.config_no_method")))
    return found


def config_problems(tables: Tables, site: dict) -> list[Problem]:
    """Ids in site_templates/site.toml that the catalog does not have."""
    shown = "site_templates/site.toml"
    methods, models = set(tables.c["methods"]["method_id"]), set(tables.c["models"]["model_id"])
    out = []
    index_methods, tasks, counts = (site.get(k) for k in ("index_methods", "compare_tasks", "gpu_card_counts"))
    if not (isinstance(index_methods, list) and all(isinstance(m, str) for m in index_methods)):
        out.append(Problem(shown, 0, "index_methods", index_methods, message("rules.config_ids")))
    else:
        out += [
            Problem(shown, 0, "index_methods", m, message("rules.config_no_method"))
            for m in index_methods
            if m not in methods
        ]
    if not isinstance(tasks, list):
        out.append(Problem(shown, 0, "compare_tasks", tasks, message("rules.config_jobs")))
    for task in tasks if isinstance(tasks, list) else ():
        out += _job_problems(shown, "compare_tasks", task, models, methods)
    out += _job_problems(shown, "calculator_opens_with", site.get("calculator_opens_with"), models, methods)
    if not (isinstance(counts, list) and counts and all(type(n) is int and n >= 1 for n in counts)):
        out.append(Problem(shown, 0, "gpu_card_counts", counts, message("rules.config_counts")))
    rows = site.get("table_page_rows")
    if type(rows) is not int or rows < 10:
        out.append(Problem(shown, 0, "table_page_rows", rows, message("rules.config_page_rows")))
    licence = site.get("data_licence")
    for key in ("id", "title", "title_ru", "url"):
        value = licence.get(key) if isinstance(licence, dict) else None
        if not isinstance(value, str) or not value.strip():
            rule = message("rules.config_licence")
            out.append(Problem(shown, 0, f"data_licence.{key}", value, rule))
    package = site.get("data_package")
    for key in ("title", "description"):
        value = package.get(key) if isinstance(package, dict) else None
        if not isinstance(value, str) or not value.strip():
            out.append(Problem(shown, 0, f"data_package.{key}", value, message("rules.config_package")))
    try:
        releases.retention(site)
    except ValueError:
        out.append(Problem(shown, 0, "releases", site.get("releases"), message("rules.config_releases")))
    return out + related_problems(site.get("related", []), shown)


def slice_window(total: int, shown: int, fits: np.ndarray, from_end: bool = False) -> tuple[int, int, bool]:
    """(start, stop, any fits) of the at most `shown` consecutive rows an entity page's table keeps of
    its `total` (all of them when there are no more): beginning at the first row where `fits` is true,
    or, with `from_end`, ending at the last one; where none is, the `shown` rows nearest to fitting
    (the last ones, or with `from_end` the first). A reader of a model page wants the smallest servers
    that take it, and of a server page the largest models it takes; the whole slice is a download."""
    found = np.flatnonzero(fits)
    if total <= shown:
        return 0, total, len(found) > 0
    if not len(found):
        return (0, shown, False) if from_end else (total - shown, total, False)
    if from_end:
        stop = int(found[-1]) + 1
        return max(stop - shown, 0), stop, True
    start = int(found[0])
    return start, min(start + shown, total), True


def spread(total: int, shown: int) -> list[int]:
    """`shown` row numbers of `total` (more than `shown`, `shown` at least 2) evenly spaced, in order, from
    the first row (0) to the last (total - 1): row i * (total - 1) // (shown - 1), all distinct since the
    step is more than one row."""
    return [i * (total - 1) // (shown - 1) for i in range(shown)]


def related_problems(related, shown: str) -> list[Problem]:
    """site.toml [[related]]: each a non-empty title, a note, and an empty url or an http(s) address (a
    javascript: or relative link never reaches a page)."""
    out = []
    for i, item in enumerate(related if isinstance(related, list) else [None], 1):
        item = item if isinstance(item, dict) else {}
        title, note, url = item.get("title"), item.get("note", ""), item.get("url", "")
        if not isinstance(title, str) or not title.strip():
            out.append(Problem(shown, 0, f"related[{i}].title", title, message("closing.config_title")))
        if not isinstance(note, str):
            out.append(Problem(shown, 0, f"related[{i}].note", note, message("closing.config_note")))
        if not isinstance(url, str) or (url and not re.match(r"https?://[^\s/]+\.[^\s]*$", url)):
            out.append(Problem(shown, 0, f"related[{i}].url", url, message("closing.config_url")))
        extra = sorted(set(item) - {"title", "note", "url"})
        if extra:
            out.append(Problem(shown, 0, f"related[{i}]", ", ".join(extra), message("closing.config_keys")))
    return out


class EntityTables:
    def __init__(self, tables: Tables, labels: dict, site: dict):
        self.t = tables
        self.c = tables.c
        self.L = labels["entities"]
        self.labels_plan = labels["plan_beside"]
        self.basis_labels = labels["basis"]
        self.site = site
        self.anchor_refs = self.c["memory_anchors"]["reference_id"].unique(maintain_order=True).to_list()
        # Every page asks for these orders: each is computed once (copies are handed out).
        self._methods = self.c["methods"].sort("sort_order")["method_id"].to_list()
        self._models = self.c["models"].sort("params_b", "model_id")["model_id"].to_list()
        self._gpus = self.c["gpus"].sort("memory_gb", "gpu_id")["gpu_id"].to_list()
        self._servers = self.c["server_memory"].sort("server_memory_gb", "server_id")["server_id"].to_list()
        self._plan_texts: dict[tuple[str, str], str] = {}  # plan_text: a model page's quote links ask again

    def method_ids(self) -> list[str]:
        return list(self._methods)

    def model_ids(self) -> list[str]:
        return list(self._models)

    def gpu_ids(self) -> list[str]:
        return list(self._gpus)

    def server_ids(self) -> list[str]:
        return list(self._servers)

    @cached_property
    def method_headers(self) -> list[str]:
        return [self.method_header(me) for me in self._methods]

    @cached_property
    def server_cells(self) -> list[list]:
        """The first cells of a server's row in a model page: link, memory, price."""
        return [
            [
                self.t.server_link(s),
                fmt.gb(self.t.server_memory_gb(s)),
                self._price(self.t.server(s)["price_rub_month"]),
            ]
            for s in self._servers
        ]

    @cached_property
    def gpu_cells(self) -> list[list]:
        return [[self.t.gpu_link(g, "short_name"), fmt.gb(self.t.gpu(g)["memory_gb"])] for g in self._gpus]

    @cached_property
    def model_cells(self) -> list[list]:
        """The first cells of a model's row in GPU and server pages: link, parameters."""
        return [[self.t.model_link(m), fmt.number(self.t.model(m)["params_b"], 2)] for m in self._models]

    def method_header(self, method_id: str) -> str:
        name = self.t.method(method_id)["short_name_ru"]
        return name[:1].upper() + name[1:]

    def _price(self, price: int | None) -> str:
        return fmt.integer(price) if price is not None else self.t.labels["common"]["price_on_request"]

    # -- index pages --
    def models_index(self) -> TableView:
        L = self.L
        methods = self.site["index_methods"]
        rows = []
        for m in self.model_ids():
            model = self.t.model(m)
            rows.append(
                [
                    self.t.model_link(m),
                    model["family"],
                    fmt.number(model["params_b"], 2),
                    fmt.number(model["active_params_b"], 2),
                    *[self.t._gb_marked(m, me) for me in methods],
                ]
            )
        return TableView(
            [L["model"], L["family"], L["params"], L["active"]]
            + [L["memory_of"].format(method=self.t.method(me)["short_name_ru"]) for me in methods],
            rows,
            _unique(self.c["models"]["reference_id"].to_list() + self.anchor_refs),
            ["models", "estimates"],
            [False, False, True, True] + [True] * len(methods),
            sortable=True,
        )

    def methods_index(self) -> TableView:
        view = self.t.methods_table()
        view.sortable = True
        return view

    def gpus_index(self) -> TableView:
        L = self.L
        rows = []
        for g in self.gpu_ids():
            gpu = self.t.gpu(g)
            rows.append(
                [
                    self.t.gpu_link(g),
                    gpu["vendor"],
                    fmt.gb(gpu["memory_gb"]),
                    fmt.number(gpu["memory_bandwidth_gbs"]),
                    fmt.number(gpu["bf16_dense_tflops"]),
                    fmt.number(gpu["fp8_dense_tflops"]) or "—",
                    self.L["interconnects"][gpu["interconnect"]],
                    fmt.number(gpu["link_gbs"]) or "—",
                    self.L["form_factors"][gpu["form_factor"]],
                ]
            )
        return TableView(
            [
                L["gpu"],
                L["vendor"],
                L["memory"],
                L["bandwidth"],
                L["bf16"],
                L["fp8"],
                L["interconnect"],
                L["link"],
                L["form"],
            ],
            rows,
            _unique(self.c["gpus"]["reference_id"].to_list()),
            ["gpus"],
            [False, False, True, True, True, True, False, True, False],
            sortable=True,
        )

    def servers_index(self) -> TableView:
        L = self.L
        memory = self.c["server_memory"].select("server_id", "server_memory_gb", "rub_per_gb_month")
        by_id = {r["server_id"]: r for r in self.c["servers"].join(memory, on="server_id").iter_rows(named=True)}
        rows = []
        for s in self.server_ids():
            r = by_id[s]
            rows.append(
                [
                    self.t.server_link(s),
                    self.t.gpu_link(r["gpu_id"], "short_name"),
                    fmt.integer(r["gpu_count"]),
                    fmt.gb(r["server_memory_gb"]),
                    self.L["interconnects"][r["interconnect"]],
                    self._price(r["price_rub_month"]),
                    fmt.integer(r["rub_per_gb_month"]) if r["price_rub_month"] else "—",
                ]
            )
        return TableView(
            [L["server"], L["gpu"], L["count"], L["total_memory"], L["interconnect"], L["price"], L["price_per_gb"]],
            rows,
            _unique(self.c["servers"]["reference_id"].to_list() + self.c["gpus"]["reference_id"].to_list()),
            ["servers"],
            [False, False, True, True, False, True, True],
            sortable=True,
        )

    # -- model page --
    def model_memory(self, model_id: str) -> TableView:
        L = self.L
        rows = []
        for me in self.method_ids():
            e = self.t.estimate(model_id, me)
            rows.append(
                [
                    self.t.method_link(me),
                    self.t._gb_marked(model_id, me),
                    f"{fmt.gb(e['memory_low_gb'])}…{fmt.gb(e['memory_high_gb'])}",
                    fmt.gb(e["theoretical_min_gb"]) or "—",
                    self.basis_labels[e["basis"]],
                ]
            )
        view = TableView(
            [L["method"], L["estimate"], L["range"], L["minimum"], L["basis"]],
            rows,
            _unique(self.anchor_refs + [self.t.model(model_id)["reference_id"]]),
            ["estimates"],
            [False, True, True, True, False],
        )
        if any(self.t.estimate(model_id, me)["basis"] == "below_range" for me in self.method_ids()):
            view.notes.append(self._below_range_note(model_id))
        return self.t._note_extrapolation(view, [model_id])

    @cached_property
    def _most_table_rule(self) -> dict[str, dict]:
        """model_id -> its memory_breakdown row of the method the table rule gives most memory (the
        last after a stable sort by it): found for every model at once, not filtered per page."""
        ordered = self.c["memory_breakdown"].sort("model_id", "table_rule_gb", maintain_order=True)
        return {
            r["model_id"]: r for r in ordered.group_by("model_id", maintain_order=True).last().iter_rows(named=True)
        }

    def _below_range_note(self, model_id: str) -> str:
        """Below the smallest anchor the table rule scales down and falls far short: the note says so
        with the two estimates of the method the table gives most memory (memory_breakdown)."""
        r = self._most_table_rule[model_id]
        return self.t.labels["common"]["below_range_note"].format(
            min_anchor=fmt.number(self.c["memory_anchors"]["params_b"].min()),
            method=self.t.method(r["method_id"])["name_ru"],
            fp=fmt.gb(r["total_gb"]),
            table=fmt.gb(r["table_rule_gb"]),
        )

    def model_cards(self, model_id: str) -> TableView:
        L = self.L
        cards = self.t.cards_cells.table(self.t.gpu_grid.block(model_id, self._methods, self._gpus).T)
        rows = [first + row for first, row in zip(self.gpu_cells, cards, strict=True)]
        return TableView(
            [L["gpu"], L["memory"]] + self.method_headers,
            rows,
            _unique(self.anchor_refs + self.c["gpus"]["reference_id"].to_list()),
            ["gpu_fit"],
            [False, True] + [True] * len(self._methods),
        )

    def model_servers(self, model_id: str) -> TableView:
        """The table rule's server fits for every method, and above them the plan (the `recommendations`
        row of each method) with one sentence on why the two may differ. A catalog of more than
        `table_page_rows` servers shows that many (slice_window): from the smallest server on which
        some method fits, up; the model's every row is in the download."""
        L = self.L
        block = self.t.server_grid.block(model_id, self._methods, self._servers).T  # servers x methods
        start, stop, fit = slice_window(len(self._servers), self.site["table_page_rows"], self._fits[block].any(axis=1))
        fits = self.t.fit_cells.table(block[start:stop])
        rows = [first + row for first, row in zip(self.server_cells[start:stop], fits, strict=True)]
        plan = [L["reco"]["plan_row"], "—", "—"] + [self.plan_cell(model_id, me) for me in self._methods]
        return TableView(
            [L["server"], L["total_memory"], L["price"]] + self.method_headers,
            [plan, *rows],  # first: the plan stays on top of the fits
            _unique(self.c["servers"]["reference_id"].to_list() + self.anchor_refs),
            ["server_fit", "recommendations"],
            [False, True, True] + [False] * len(self._methods),
            notes=[self.labels_plan["first_row"]] + self._slice_note(stop - start, "model", model_id, fit),
        )

    @cached_property
    def _fits(self) -> np.ndarray:
        """Per server_fit row: whether the job fits the server (its `fit` is not "no")."""
        cells = self.t.fit_cells
        return np.array([v["fit"] != "no" for v in cells.values], dtype=bool)[cells.codes]

    def _slice_note(self, shown: int, kind: str, entity_id: str, fit: bool) -> list[str]:
        """The note of a model (`kind` "model") or server page's table that shows `shown` of its rows
        (slice_window; `fit`: whether any row fits), none when it shows them all."""
        total = len(self._servers) if kind == "model" else len(self._models)
        if shown == total:
            return []
        L = self.L["leading"]
        which = L[f"slice_{kind}"] if fit else L[f"slice_{kind}_none"]
        return [which.format(shown=fmt.integer(shown), total=fmt.integer(total), entity_id=entity_id)]

    def plan_cell(self, model_id: str, method_id: str):
        """The plan for a job in one cell (pipeline/render/views/articles.py Tables.plan_cell)."""
        return self.t.plan_cell(model_id, method_id)

    def model_plan_lead(self, model_id: str) -> list[tuple]:
        """(method link, the plan in one cell, its cost or the risk) per method: the model page opens with it."""
        out = []
        for me in self._methods:
            r = self.recommended.get((model_id, me))
            if r is not None:
                out.append((self.t.method_link(me), self.plan_cell(model_id, me), self.cost_text(r)))
            elif (model_id, me) in self.tight:
                out.append((self.t.method_link(me), self.tight_text(self.tight[(model_id, me)]), ""))
            else:
                out.append((self.t.method_link(me), self.L["reco"]["none"], ""))
        return out

    @cached_property
    def errors_pct(self) -> dict[str, str] | None:
        """The measured median errors of both estimators (calibration_summary), in %, None unmeasured."""
        summary = {r["estimator"]: r for r in self.c["calibration_summary"].iter_rows(named=True)}
        fp, table = summary["first_principles"]["median_abs_error"], summary["table_rule"]["median_abs_error"]
        if fp is None or table is None:
            return None
        return {"fp": fmt.number(fp * 100, 0), "table": fmt.number(table * 100, 0)}

    @property
    def recommended(self) -> dict[tuple[str, str], dict]:
        """(model, method) -> the rank-1 row of the `recommendations` table (Tables.recommended)."""
        return self.t.recommended

    @cached_property
    def tight(self) -> dict[tuple[str, str], dict]:
        """(model, method) -> its best-ranked `tight` row (fits one chassis only at the point estimate)."""
        rows = self.c.ranked.leading.filter(pl.col("reason") == "tight").sort("rank")  # each job's best
        out: dict[tuple[str, str], dict] = {}
        for r in rows.iter_rows(named=True):
            out.setdefault((r["model_id"], r["method_id"]), r)
        return out

    def plan_text(self, model_id: str, method_id: str) -> str:
        """The recommendation's line; without one, the risk a tight server would be; else none."""
        key = (model_id, method_id)
        if key not in self._plan_texts:
            row = self.recommended.get(key)
            tight = row is None and key in self.tight
            self._plan_texts[key] = self.tight_text(self.tight[key]) if tight else self.recommendation_text(row)
        return self._plan_texts[key]

    def tight_text(self, row: dict) -> str:
        """A server that holds the job only at the point estimate, said as a risk, never as the plan."""
        return self.L["reco"]["tight_line"].format(
            cards=fmt.integer(row["gpus_per_job"]),
            gpu=self.t.gpu(row["gpu_id"])["short_name"],
            server=self.t.server(row["server_id"])["display_name"],
            high=fmt.gb(
                row["per_gpu_memory_high_gb"] if row["per_gpu_memory_high_gb"] is not None else row["per_gpu_memory_gb"]
            ),
            memory=fmt.gb(row["gpu_memory_gb"]),
        )

    def recommendation_text(self, row: dict | None) -> str:
        """One line: cards, the server, its link, price, time — every figure a cell of `recommendations`."""
        R = self.L["reco"]
        if row is None:
            return R["none"]
        gpu = self.t.gpu(row["gpu_id"])["short_name"]
        server = self.t.server(row["server_id"])["display_name"]
        return R["line"].format(
            cards=fmt.integer(row["gpus_per_job"]),
            gpu=gpu,
            server=server,
            link=self.link_text(row),
            cost=self.cost_text(row),
            time=self.time_text(row),
            tokens=fmt.number(row["tokens"] / 1e9, 2),
        )

    def link_text(self, row: dict) -> str:
        return link_words(self.L["reco"], row)

    def time_text(self, row: dict) -> str:
        return time_words(self.L["reco"], row)

    def cost_text(self, row: dict) -> str:
        """The cost under the rental terms; on a tie with another recommended server, that the time decided."""
        text = self._cost(row)
        return f"{text} ({self.L['reco']['tied']})" if row.get("tied_on_cost") and row.get("rank") == 1 else text

    def _cost(self, row: dict) -> str:
        R = self.L["reco"]
        if row["cost_basis"] == "hour":
            return R["cost_hour"].format(
                cost=fmt.integer(round(row["cost_rub"])), price=fmt.integer(row["price_rub_hour"])
            )
        if row["cost_basis"] == "month":
            return R["cost_month"].format(
                cost=fmt.integer(round(row["cost_rub"])), months=fmt.integer(row["months_billed"])
            )
        return self.t.labels["common"]["price_on_request"]

    def quote_link(self, model_id: str, method_id: str | None = None, server_id: str | None = None) -> str:
        """The quote-request link for a model (all methods, or one) or a server."""
        R = self.L["reco"]
        setup = self.c.constants
        lines = []
        if model_id:
            lines.append((R["q_model"], self.t.model(model_id)["display_name"]))
        methods = [method_id] if method_id else (self.method_ids() if model_id else [])
        for me in methods:
            lines.append((self.t.method(me)["name_ru"], self.plan_text(model_id, me)))
        if server_id:
            lines.append((R["q_server"], self.t.server(server_id)["display_name"]))
        lines.append(
            (
                R["q_setup"],
                R["q_setup_value"].format(
                    seq=russian.Shown(fmt.integer(int(setup["typical_seq_len"]))),
                    batch=fmt.integer(int(setup["typical_micro_batch"])),
                ),
            )
        )
        subject = R["q_subject"].format(
            what=self.t.model(model_id)["display_name"] if model_id else self.t.server(server_id)["display_name"]
        )
        return quote.quote_url(self.site["quote"], subject, lines)

    @cached_property
    def plan_with(self) -> str:
        """The one sentence beside both estimators: which to plan with, citing their measured errors
        (calibration_summary) and the first-principles range measured on the calibration set (estimator_range)."""
        summary = {r["estimator"]: r for r in self.c["calibration_summary"].iter_rows(named=True)}
        spread = lookups.spread_of(self.c["estimator_range"])
        fp, table = summary["first_principles"], summary["table_rule"]
        if fp["median_abs_error"] is None or table["median_abs_error"] is None or spread is None:
            return self.L["reco"]["plan_with_unknown"]
        return self.L["reco"]["plan_with"].format(
            fp=fmt.number(fp["median_abs_error"] * 100, 0),
            table=fmt.number(table["median_abs_error"] * 100, 0),
            table_bias=signed_percent(table["median_error"]),
            rows=russian.Shown(fmt.integer(fp["rows"])),
            low=fmt.number(spread[0], 2),
            high=fmt.number(spread[1], 2),
        )

    def headlines(self) -> dict[str, str]:
        """The calculator's one-line answer for every model x method ("model|method"): the recommendation's
        line, as the model pages give it. Only the text: the page carries one per job (its script makes
        the quote link and the download from the figures on the screen), so it grows by a line per job."""
        return {
            f"{m}|{me}": self.L["reco"]["headline"].format(
                method=self.t.method(me)["short_name_ru"],
                model=self.t.model(m)["display_name"],
                line=self.plan_text(m, me),
            )
            for m in self.model_ids()
            for me in self.method_ids()
        }

    def model_cheapest(self, model_id: str) -> TableView:
        """Which server, for every method: the rank-1 row of `recommendations` (pipeline/recommend.py)."""
        L, R = self.L, self.L["reco"]
        rows = []
        for me in self.method_ids():
            self.t.estimate(model_id, me)  # KeyError for an unknown job, as every lookup
            r = self.recommended.get((model_id, me))
            if r is None:
                risk = self.tight.get((model_id, me))
                rows.append([self.t.method_link(me), self.tight_text(risk) if risk else R["none"], "—", "—", "—", "—"])
                continue
            rows.append(
                [
                    self.t.method_link(me),
                    Link(
                        R["cell"].format(
                            cards=fmt.integer(r["gpus_per_job"]),
                            gpu=self.t.gpu(r["gpu_id"])["short_name"],
                            server=self.t.server(r["server_id"])["display_name"],
                        ),
                        f"servers/{r['server_id']}.html",
                    ),
                    self.per_gpu_text(r),
                    self.link_text(r),
                    self.time_text(r),
                    self.cost_text(r),
                ]
            )
        return TableView(
            [L["method"], R["server"], R["per_gpu"], R["link"], R["hours"], R["cost"]],
            rows,
            _unique(self.c["servers"]["reference_id"].to_list() + self.c["typical_setup"]["reference_id"].to_list()),
            ["recommendations"],
            [False, False, True, False, False, False],
        )

    def per_gpu_text(self, row: dict) -> str:
        """The per-card figure of a recommendation with its measured range (recommendations' columns)."""
        if row["per_gpu_memory_low_gb"] is None:
            return fmt.gb(row["per_gpu_memory_gb"])
        return self.L["reco"]["per_gpu_range"].format(
            gb=fmt.gb(row["per_gpu_memory_gb"]),
            low=fmt.gb(row["per_gpu_memory_low_gb"]),
            high=fmt.gb(row["per_gpu_memory_high_gb"]),
        )

    # -- method page --
    def method_models(self, method_id: str) -> TableView:
        """Every model's estimate for the method; a catalog of more than `table_page_rows` models shows that
        many, spread from the smallest to the largest (`_spread_models`); the method's every row is in the
        download."""
        L = self.L
        picked, notes = self._spread_models("method", method_id)
        models = [self._models[i] for i in picked]
        rows = []
        for m in models:
            e = self.t.estimate(m, method_id)
            rows.append(
                [
                    self.t.model_link(m),
                    fmt.number(e["params_b"], 2),
                    self.t._gb_marked(m, method_id),
                    f"{fmt.gb(e['memory_low_gb'])}…{fmt.gb(e['memory_high_gb'])}",
                    fmt.gb(e["theoretical_min_gb"]) or "—",
                ]
            )
        view = TableView(
            [L["model"], L["params"], L["estimate"], L["range"], L["minimum"]],
            rows,
            _unique(self.anchor_refs + self.c["models"]["reference_id"].to_list()),
            ["estimates"],
            [False, True, True, True, True],
            sortable=True,
        )
        view = self.t._note_extrapolation(view, models)
        view.notes += notes
        return view

    def _spread_models(self, kind: str, entity_id: str) -> tuple[list[int], list[str]]:
        """(the models' positions a GPU or method page's table shows, the note that says which): every model
        in a catalog of at most `table_page_rows`, else that many spread evenly from the smallest to the
        largest (`spread`, as the comparisons), so that the page shows the whole range of sizes."""
        total, shown = len(self._models), self.site["table_page_rows"]
        if total <= shown:
            return list(range(total)), []
        note = self.L["leading"][f"slice_{kind}"]
        return spread(total, shown), [
            note.format(shown=fmt.integer(shown), total=fmt.integer(total), entity_id=entity_id)
        ]

    # -- GPU page --
    def gpu_summary(self, gpu_id: str) -> TableView:
        """For each method and card count: how many catalog models fit, and the largest of them."""
        L = self.L
        counts = self.site["gpu_card_counts"]
        # Rows by method, columns the models in model_ids() order (by size, then id): the largest
        # model that fits in n cards is the last column whose count is at most n.
        rows_of = self.t.gpu_grid.block(self._models, self._methods, gpu_id).T
        cards = self.c["gpu_fit"]["cards"].to_numpy()[rows_of]
        rows = []
        for me, by_model in zip(self._methods, cards, strict=True):
            cells: list = [self.t.method_link(me)]
            for n in counts:
                fits = (by_model <= n).nonzero()[0]
                if len(fits) == 0:
                    cells.append("—")
                else:
                    largest = self._models[fits[-1]]
                    cells.append(
                        Link(
                            L["fits_value"].format(n=fmt.integer(len(fits)), model=self.t.model(largest)["short_name"]),
                            f"models/{largest}.html",
                        )
                    )
            rows.append(cells)
        return TableView(
            [L["method"]] + [L["on_cards"].format(n=fmt.integer(n)) for n in counts],
            rows,
            _unique(self.anchor_refs + [self.t.gpu(gpu_id)["reference_id"]]),
            ["gpu_fit"],
            [False] + [False] * len(counts),
        )

    def gpu_models(self, gpu_id: str) -> TableView:
        """Each model's cards of this GPU per method; a catalog of more than `table_page_rows` models shows
        that many, spread from the smallest to the largest (`_spread_models`): the card counts the page
        summarises above are over every model, and the GPU's every row is in the download."""
        L = self.L
        picked, notes = self._spread_models("gpu", gpu_id)
        block = self.t.gpu_grid.block(self._models, self._methods, gpu_id)[picked]  # models x methods
        cards = self.t.cards_cells.table(block)
        cells = [self.model_cells[i] for i in picked]
        rows = [first + row for first, row in zip(cells, cards, strict=True)]
        return TableView(
            [L["model"], L["params"]] + self.method_headers,
            rows,
            _unique(self.anchor_refs + [self.t.gpu(gpu_id)["reference_id"]]),
            ["gpu_fit"],
            [False, True] + [True] * len(self._methods),
            notes=notes,
            sortable=True,
        )

    # -- server page --
    def server_jobs(self, server_id: str) -> TableView:
        """The table rule's fits of every model x method on the server, and beside them, per model, the
        methods the plan (rank 1 of `recommendations`) puts on this very server, with one sentence on
        why the two differ. A catalog of more than `table_page_rows` models shows that many
        (slice_window): the models by size up to the largest of which some method fits; the server's
        every row is in the download."""
        L, words = self.L, self.labels_plan
        block = self.t.server_grid.block(self._models, self._methods, server_id)  # models x methods
        start, stop, fit = slice_window(
            len(self._models), self.site["table_page_rows"], self._fits[block].any(axis=1), from_end=True
        )
        fits = self.t.fit_cells.table(block[start:stop])
        models = self._models[start:stop]
        rows = [
            first + row + [self.plan_methods(m, server_id)]
            for m, first, row in zip(models, self.model_cells[start:stop], fits, strict=True)
        ]
        return TableView(
            [L["model"], L["params"]] + self.method_headers + [words["server_column"]],
            rows,
            _unique(self.anchor_refs + [self.t.server(server_id)["reference_id"]]),
            ["server_fit", "recommendations"],
            [False, True] + [False] * len(self._methods) + [False],
            notes=[words["server_note"]] + self._slice_note(stop - start, "server", server_id, fit),
            sortable=True,
        )

    def plan_methods(self, model_id: str, server_id: str) -> str:
        """The methods of a model whose plan is this server (short names, "; " apart: a name may hold a
        comma), or a dash."""
        return self._plan_methods.get((model_id, server_id), "—")

    @cached_property
    def _plan_methods(self) -> dict[tuple[str, str], str]:
        """(model, server) -> plan_methods' text, for the pairs some plan puts there: found once for every
        server page (a server page asks for each of its models)."""
        names: dict[tuple[str, str], list[str]] = {}
        for me in self._methods:
            short = self.t.method(me)["short_name_ru"]
            for m in self._models:
                server_id = self.recommended.get((m, me), {}).get("server_id")
                if server_id is not None:
                    names.setdefault((m, server_id), []).append(short)
        return {key: "; ".join(found) for key, found in names.items()}

    # -- comparison pages --
    def leading(self, ids: list[str], kind: str) -> tuple[list[str], list[str]]:
        """The rows a comparison shows: at most `table_page_rows` ids (site.toml) spread evenly over the
        table's own order, its first and last among them (`spread`), and the note that says so (none when
        every row is shown). The first rows alone would be the smallest models or servers, much alike and
        fitting little, at hundreds of entities; spread, they show the whole range. An entity is never
        left without a page: entity and index pages show every row; the whole table is a download."""
        shown = self.site["table_page_rows"]
        if len(ids) <= shown:
            return ids, []
        L = self.L["leading"]
        note = L["shown"].format(shown=fmt.integer(shown), total=fmt.integer(len(ids)), order=L[kind])
        return [ids[i] for i in spread(len(ids), shown)], [note]

    def compare_server_fit(self) -> TableView:
        """The table rule's server fits, and beside them the plan (the `recommendations` row of each task)
        with one sentence on why the two may differ (both made by Tables.server_fit_table)."""
        tasks = [tuple(task) for task in self.site["compare_tasks"]]
        servers, note = self.leading(self.server_ids(), "servers")
        view = self.t.server_fit_table(servers, tasks)
        view.notes += note
        view.sortable = True
        return view

    def compare_gpu_cards(self, method_id: str) -> TableView:
        gpus = self.gpu_ids()
        models, note = self.leading(self._models, "models")
        cards = self.t.cards_cells.table(self.t.gpu_grid.block(models, method_id, gpus))
        rows = [[self.t.model_link(m, "short_name")] + row for m, row in zip(models, cards, strict=True)]
        return TableView(
            [self.L["model"]] + [self.t.gpu(g)["short_name"] for g in gpus],
            rows,
            _unique(self.anchor_refs + self.c["gpus"]["reference_id"].to_list()),
            ["gpu_fit"],
            [False] + [True] * len(gpus),
            notes=note,
            sortable=True,
        )
