"""Tables shown on the site, built from the catalog: headers, rows and their sources.

Each builder returns a TableView; `render` turns it into Markdown or HTML.
Russian words come from site_templates/labels.toml; every figure comes from
the catalog, formatted by `pipeline.render.format`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from pipeline import lookups, verdicts
from pipeline.combine import Catalog
from pipeline.render import format as fmt
from pipeline.render import russian
from pipeline.render.view import Link, TableView


def link_words(reco: dict, row: dict) -> str:
    """What a plan's link means for the job, in a buyer's words (labels [entities.reco] link_*), as the
    server has it: PCIe in a server without a bridge is said so even when the card could take one."""
    link = row["link"]
    if link == "pcie":
        return reco["link_pcie" if row["gpu_has_nvlink"] else "link_pcie_only"]
    return reco.get(f"link_{link}", link or "")


def time_words(reco: dict, row: dict) -> str:
    """A plan's hours as compute + exposed communication (recommendations' hours_* columns), with the range
    the published runs give, the link the exchange goes over and what dominates; a draft where no
    published run covers the card and link (labels [entities.reco] time_*)."""
    if row["hours"] is None:
        return "—"
    link = row["link"] or ""
    over = reco.get(f"over_{link}", reco["over_network"])
    if row["time_link"] == "one_card":
        split = reco["time_one_card"]
    elif row["hours_communication"] <= 0:
        split = reco["time_hidden"].format(over=over)
    else:
        dominant = "communication" if row["hours_communication"] > row["hours_compute"] else "compute"
        split = reco["time_split"].format(
            compute=fmt.number(row["hours_compute"]),
            communication=fmt.number(row["hours_communication"]),
            over=over,
            dominant=reco[f"dominant_{dominant}"],
        )
    spread = ""
    if row["hours_low"] is not None:
        spread = reco["time_range"].format(low=fmt.number(row["hours_low"]), high=fmt.number(row["hours_high"]))
    text = reco["time"].format(hours=fmt.number(row["hours"]), range=spread, split=split)
    return text if row["time_measured"] else text + reco["time_draft"]


def memory_note(gpu: dict) -> str | None:
    """A GPU's memory note with `{memory_gb}` filled in from the row: the figure the site counts by is the
    data's, so an edit of memory_gb cannot leave the note quoting the old one."""
    return fmt.memory_note(gpu.get("memory_note_ru"), gpu["memory_gb"])


class Tables:
    """Table builders and inline figures over one catalog, for article templates."""

    def __init__(self, catalog: Catalog, labels: dict):
        self.c = catalog
        self.labels = labels
        self._rows = {
            name: {r[key]: r for r in catalog[name].iter_rows(named=True)}
            for name, key in (
                ("models", "model_id"),
                ("methods", "method_id"),
                ("gpus", "gpu_id"),
                ("servers", "server_id"),
                ("references", "reference_id"),
                ("server_memory", "server_id"),
            )
        }
        for gpu in self._rows["gpus"].values():
            gpu["memory_note_ru"] = memory_note(gpu)
        self._estimates = {(r["model_id"], r["method_id"]): r for r in catalog["estimates"].iter_rows(named=True)}
        # The fit tables grow with models x servers (10^7 rows at scale): no Python object per row,
        # only an array of row numbers by key; a row becomes a dict when a template asks for it.
        self.gpu_grid = KeyGrid(catalog["gpu_fit"], ("model_id", "method_id", "gpu_id"))
        self.server_grid = CrossGrid(catalog.fits)
        self.max_anchor_b = catalog["memory_anchors"]["params_b"].max()

    # -- lookups (each raises KeyError with the unknown id, which the renderer reports) --
    def model(self, model_id: str) -> dict:
        return self._rows["models"][model_id]

    def method(self, method_id: str) -> dict:
        return self._rows["methods"][method_id]

    def gpu(self, gpu_id: str) -> dict:
        return self._rows["gpus"][gpu_id]

    def server(self, server_id: str) -> dict:
        return self._rows["servers"][server_id]

    def reference(self, reference_id: str) -> dict:
        return self._rows["references"][reference_id]

    def estimate(self, model_id: str, method_id: str) -> dict:
        return self._estimates[(model_id, method_id)]

    def fit(self, model_id: str, method_id: str, gpu_id: str) -> dict:
        return self.gpu_grid.row(model_id, method_id, gpu_id)

    def server_fit_row(self, model_id: str, method_id: str, server_id: str) -> dict:
        return self.server_grid.row(model_id, method_id, server_id)

    def legacy_row(self, row_id: str) -> dict:
        rows = self.c["legacy_gpu_counts"].filter(pl.col("row_id") == row_id).to_dicts()
        if not rows:
            raise KeyError(row_id)
        return rows[0]

    def const(self, constant_id: str) -> float:
        return self.c.constants[constant_id]

    def _refs(self, table: str, ids) -> list[str]:
        return [self._rows[table][i]["reference_id"] for i in ids]

    def server_memory_gb(self, server_id: str) -> float:
        return self._rows["server_memory"][server_id]["server_memory_gb"]

    def min_bytes(self) -> float:
        return sum(self.const(k) for k in ("adamw_weight_bytes", "adamw_grad_bytes", "adamw_optimizer_bytes"))

    # -- links to entity pages --
    def model_link(self, model_id: str, name: str = "display_name") -> Link:
        return Link(self.model(model_id)[name], f"models/{model_id}.html")

    def method_link(self, method_id: str, name: str = "name_ru") -> Link:
        return Link(self.method(method_id)[name], f"methods/{method_id}.html")

    def gpu_link(self, gpu_id: str, name: str = "name") -> Link:
        return Link(self.gpu(gpu_id)[name], f"gpus/{gpu_id}.html")

    def server_link(self, server_id: str) -> Link:
        return Link(self.server(server_id)["display_name"], f"servers/{server_id}.html")

    # -- the cells of the fit tables, each distinct value formatted once --
    @cached_property
    def cards_cells(self) -> Cells:
        """'cards / cards_high' of every gpu_fit row."""
        return Cells.of(
            self.c["gpu_fit"],
            ("cards", "cards_high"),
            lambda r: f"{fmt.integer(r['cards'])} / {fmt.integer(r['cards_high'])}",
        )

    @cached_property
    def fit_cells(self) -> Cells:
        """The fit label of every server_fit row (made piece by piece: the rows are never held whole)."""
        return Cells.of_frames(self.c.fits.chunks(), ("fit", "servers_needed", "servers_needed_high"), self.fit_label)

    # -- inline figures for prose --
    def mem(self, model_id: str, method_id: str, which: str = "memory_gb") -> str:
        return fmt.gb(self.estimate(model_id, method_id)[which])

    def mem_high(self, model_id: str, method_id: str) -> str:
        return self.mem(model_id, method_id, "memory_high_gb")

    def mem_low(self, model_id: str, method_id: str) -> str:
        return self.mem(model_id, method_id, "memory_low_gb")

    def cards(self, model_id: str, method_id: str, gpu_id: str, which: str = "cards") -> str:
        return fmt.integer(self.fit(model_id, method_id, gpu_id)[which])

    def cards_high(self, model_id: str, method_id: str, gpu_id: str) -> str:
        return self.cards(model_id, method_id, gpu_id, "cards_high")

    def tmin(self, model_id: str) -> str:
        return fmt.gb(self.model(model_id)["params_b"] * self.min_bytes())

    def anchor_sizes(self) -> str:
        """The anchor sizes of the memory table, "7, 14, 30, 70"."""
        return ", ".join(fmt.number(s) for s in sorted(self.c["memory_anchors"]["params_b"].unique().to_list()))

    def percent(self, constant_id: str) -> str:
        """A range factor as a signed percentage: 0.7 -> "−30", 1.5 -> "+50"."""
        delta = round((self.const(constant_id) - 1) * 100)
        return f"+{delta}" if delta >= 0 else f"−{-delta}"

    # -- tables --
    def methods_table(self, methods: list[str] | None = None) -> TableView:
        L = self.labels["methods_table"]
        ids = methods or self.method_order()
        rows = [
            [
                self.method_link(m),
                self.method(m)["trained_ru"],
                self.method(m)["memory_goes_ru"],
                fmt.integer(self.method(m)["bits"]),
            ]
            for m in ids
        ]
        return TableView(
            [L["method"], L["trained"], L["memory_goes"], L["bits"]],
            rows,
            _unique(self._refs("methods", ids)),
            ["methods"],
            [False, False, False, True],
        )

    def anchors_table(self) -> TableView:
        L = self.labels["anchors_table"]
        anchors = self.c["memory_anchors"]
        sizes = sorted(anchors["params_b"].unique().to_list())
        value = {(r["method_id"], r["params_b"]): r["memory_gb"] for r in anchors.iter_rows(named=True)}
        ids = self.method_order()
        rows = [[self.method_link(m)] + [fmt.gb(value[(m, s)]) for s in sizes] for m in ids]
        return TableView(
            [L["method"]] + [L["size"].format(size=fmt.number(s)) for s in sizes],
            rows,
            _unique(anchors["reference_id"].to_list()),
            ["memory_anchors"],
            [False] + [True] * len(sizes),
        )

    def memory_table(self, models: list[str], methods: list[str] | None = None) -> TableView:
        L = self.labels["memory_table"]
        ids = methods or self.method_order()
        rows = [[self.method_link(m)] + [self._gb_marked(mo, m) for mo in models] for m in ids]
        view = TableView(
            [L["method"]] + [L["model"].format(model=self.model(mo)["short_name"]) for mo in models],
            rows,
            _unique(self.c["memory_anchors"]["reference_id"].to_list() + self._refs("models", models)),
            ["estimates"],
            [False] + [True] * len(models),
        )
        return self._note_extrapolation(view, models)

    def min_table(self, models: list[str], method: str = "full_amp") -> TableView:
        L = self.labels["min_table"]
        rows = [
            [
                self.model(mo)["display_name"],
                fmt.number(self.model(mo)["params_b"], 2),
                fmt.number(self.min_bytes()),
                self.tmin(mo),
                self._gb_marked(mo, method),
            ]
            for mo in models
        ]
        refs = self.c["constants"].filter(pl.col("constant_id").str.starts_with("adamw_"))["reference_id"].to_list()
        view = TableView(
            [
                L["model"],
                L["params"],
                L["bytes"],
                L["minimum"],
                L["estimate"].format(method=self.method(method)["short_name_ru"]),
            ],
            rows,
            _unique(refs + self.c["memory_anchors"]["reference_id"].to_list()),
            ["estimates"],
            [False, True, True, True, True],
        )
        return self._note_extrapolation(view, models)

    def cards_table(self, tasks: list[tuple[str, str]], gpus: list[str]) -> TableView:
        L = self.labels["cards_table"]
        rows = []
        for model_id, method_id in tasks:
            label = L["task_label"].format(
                model=self.model(model_id)["display_name"], method=self.method(method_id)["short_name_ru"]
            )
            cells = [Link(label, f"models/{model_id}.html"), self._gb_marked(model_id, method_id)]
            cells += [f"{self.cards(model_id, method_id, g)} / {self.cards_high(model_id, method_id, g)}" for g in gpus]
            rows.append(cells)
        view = TableView(
            [L["task"], L["memory"]] + [L["gpu"].format(gpu=self.gpu(g)["short_name"]) for g in gpus],
            rows,
            _unique(self.c["memory_anchors"]["reference_id"].to_list() + self._refs("gpus", gpus)),
            ["gpu_fit"],
            [False] + [True] * (1 + len(gpus)),
        )
        return self._note_extrapolation(view, [t[0] for t in tasks])

    def fit_label(self, row: dict) -> str:
        F = self.labels["fit"]
        if row["fit"] == "no":
            return F["no_servers"].format(
                n=fmt.integer(row["servers_needed"]), n_high=fmt.integer(row["servers_needed_high"])
            )
        return F[row["fit"]]

    def server_fit_table(self, servers: list[str], tasks: list[tuple[str, str]]) -> TableView:
        L = self.labels["server_fit_table"]
        headers = [L["server"], L["memory"]]
        for model_id, method_id in tasks:
            headers.append(
                L["task"].format(
                    model=self.model(model_id)["short_name"],
                    method=self.method(method_id)["short_name_ru"],
                    gb=self.mem(model_id, method_id),
                    gb_high=self.mem_high(model_id, method_id),
                )
            )
        rows = []
        for s in servers:
            cells = [self.server_link(s), L["memory_value"].format(gb=fmt.gb(self.server_memory_gb(s)))]
            cells += [self.fit_label(self.server_fit_row(mo, me, s)) for mo, me in tasks]
            rows.append(cells)
        # The table rule's verdicts, and below them the plan of each task with one sentence on why they differ.
        R = self.labels["entities"]["reco"]
        rows.append([R["plan_row"], "—", *[self.plan_cell(mo, me) for mo, me in tasks]])
        gpu_ids = [self.server(s)["gpu_id"] for s in servers]
        return TableView(
            headers,
            rows,
            _unique(
                self._refs("servers", servers)
                + self._refs("gpus", gpu_ids)
                + self.c["memory_anchors"]["reference_id"].to_list()
            ),
            ["server_fit", "recommendations"],
            [False, True] + [False] * len(tasks),
            notes=[R["plan_vs_table"]],
        )

    @cached_property
    def recommended(self) -> dict[tuple[str, str], dict]:
        """(model, method) -> the rank-1 row of the `recommendations` table (pipeline/estimate/recommend.py)."""
        best = lookups.best(self.c.ranked.leading)
        return {(r["model_id"], r["method_id"]): r for r in best.iter_rows(named=True)}

    def plan_cell(self, model_id: str, method_id: str):
        """The plan for a job in one cell (cards, card, server; a link to the server), or that there is none."""
        R = self.labels["entities"]["reco"]
        r = self.recommended.get((model_id, method_id))
        if r is None:
            return R["none_short"]
        text = R["cell"].format(
            cards=fmt.integer(r["gpus_per_job"]),
            gpu=self.gpu(r["gpu_id"])["short_name"],
            server=self.server(r["server_id"])["display_name"],
        )
        return Link(text, f"servers/{r['server_id']}.html")

    def rule_of_thumb_table(self, models: list[str], method: str = "full_amp") -> TableView:
        L = self.labels["rule_of_thumb_table"]
        legacy_bytes = self.const("legacy_full_bytes_per_param")
        low, high = self.const("legacy_overhead_low"), self.const("legacy_overhead_high")
        rows = []
        for mo in models:
            p = self.model(mo)["params_b"]
            e = self.estimate(mo, method)
            rows.append(
                [
                    self.model(mo)["display_name"],
                    fmt.gb(p * legacy_bytes),
                    f"{fmt.gb(p * legacy_bytes * (1 + low))}…{fmt.gb(p * legacy_bytes * (1 + high))}",
                    self.tmin(mo),
                    self._gb_marked(mo, method),
                    L["range_value"].format(low=fmt.gb(e["memory_low_gb"]), high=fmt.gb(e["memory_high_gb"])),
                ]
            )
        const_refs = (
            self.c["constants"]
            .filter(pl.col("constant_id").str.starts_with("legacy_") | pl.col("constant_id").str.starts_with("adamw_"))[
                "reference_id"
            ]
            .to_list()
        )
        view = TableView(
            [
                L["model"],
                L["legacy"].format(bytes=russian.Shown(fmt.number(legacy_bytes))),
                L["legacy_range"].format(low=fmt.number(low * 100), high=fmt.number(high * 100)),
                L["minimum"].format(bytes=russian.Shown(fmt.number(self.min_bytes()))),
                L["estimate"].format(method=self.method(method)["short_name_ru"]),
                L["range"],
            ],
            rows,
            _unique(const_refs + self.c["memory_anchors"]["reference_id"].to_list()),
            ["estimates", "constants"],
            [False] + [True] * 5,
        )
        return self._note_extrapolation(view, models)

    def legacy_counts_table(self, gpus: list[str]) -> TableView:
        L, C = self.labels["legacy_counts_table"], self.labels["common"]
        legacy = self.c["legacy_gpu_counts"].sort("sort_order")
        article_cols = {0: "h100_cards_text", 1: "h200_cards_text"}
        headers = [L["model"], L["task"], L["memory"]]
        for i, g in enumerate(gpus):
            headers += [L["gpu_rules"].format(gpu=self.gpu(g)["short_name"])]
            if i in article_cols:
                headers += [L["gpu_article"].format(gpu=self.gpu(g)["short_name"])]
        headers += [
            L["nvlink_rules"].format(gpus=" / ".join(self.gpu(g)["short_name"] for g in gpus)),
            L["nvlink_article"],
        ]
        rows = []
        for r in legacy.iter_rows(named=True):
            cells = [self.model(r["model_id"])["display_name"], r["task_ru"]]
            method_id = r["method_id"]
            cells.append(self._gb_marked(r["model_id"], method_id) if method_id else C["not_covered"])
            for i, g in enumerate(gpus):
                cells.append(
                    f"{self.cards(r['model_id'], method_id, g)} / {self.cards_high(r['model_id'], method_id, g)}"
                    if method_id
                    else "—"
                )
                if i in article_cols:
                    cells.append(r[article_cols[i]])
            cells.append(
                " / ".join(self._nvlink_words(r["model_id"], method_id, g) for g in gpus) if method_id else "—"
            )
            cells.append(r["nvlink_text"])
            rows.append(cells)
        return TableView(
            headers,
            rows,
            _unique(
                legacy["reference_id"].to_list()
                + self.c["memory_anchors"]["reference_id"].to_list()
                + self._refs("gpus", gpus)
            ),
            ["legacy_gpu_counts", "gpu_fit"],
            [False, False, True] + [True] * (len(headers) - 3),
        )

    @cached_property
    def _interconnects(self) -> dict[str, set]:
        """gpu_id -> the interconnects of the catalog's servers with that card."""
        out: dict[str, set] = {}
        for server in self._rows["servers"].values():
            out.setdefault(server["gpu_id"], set()).add(server["interconnect"])
        return out

    def _nvlink_words(self, model_id: str, method_id: str, gpu_id: str) -> str:
        """Rule 7's need for a card, unless no catalog server links that card by NVLink: then it says the
        catalog's servers exchange over PCIe (never "required" beside hardware without NVLink)."""
        N = self.labels["nvlink"]
        need = self.fit(model_id, method_id, gpu_id)["nvlink_need"]
        links = self._interconnects.get(gpu_id, set())
        if need in ("required", "recommended") and links and not links & {"nvswitch", "nvlink-bridge"}:
            return N["catalog_pcie"]
        return N[need]

    def legacy_offers(self) -> list[dict]:
        """Seed 000's task -> server -> price rows, recomputed by the rules."""
        out = []
        jobs = self.c["legacy_offer_jobs"]
        plans = verdicts.offer_plans(self.c["legacy_offers"], jobs, self.c.ranked.leading)
        for offer in self.c["legacy_offers"].sort("sort_order").iter_rows(named=True):
            own = jobs.filter(pl.col("offer_id") == offer["offer_id"])
            row = {"offer": offer, "covered": own["method_id"].null_count() == 0}
            if row["covered"]:
                ests = [self.estimate(j["model_id"], j["method_id"]) for j in own.iter_rows(named=True)]
                need = max(ests, key=lambda e: e["memory_gb"])
                row["memory_gb"], row["memory_high_gb"] = need["memory_gb"], need["memory_high_gb"]
                row["article_fit"] = self.server_fit_row(need["model_id"], need["method_id"], offer["server_id"])
                # The site's answer for the offer (pipeline/verdicts.py: what build and diff compare too).
                row["recommended"] = plans[offer["offer_id"]]
                row["same"] = row["recommended"] is not None and row["recommended"]["server_id"] == offer["server_id"]
                # The plan's row of that job on the offer's own server: why the plan differs, from the data.
                job = row["recommended"] or need
                on_offer = self.c.ranked.job(job["model_id"], job["method_id"])
                on_offer = on_offer.filter(pl.col("server_id") == offer["server_id"])
                row["on_offer"] = on_offer.row(0, named=True) if on_offer.height else None
            out.append(row)
        return out

    def _recommended(self, row: dict | None):
        L = self.labels["legacy_offers_table"]
        if row is None:
            return L["no_recommendation"]
        text = L["recommended_value"].format(
            cards=fmt.integer(row["gpus_per_job"]),
            gpu=self.gpu(row["gpu_id"])["short_name"],
            server=self.server(row["server_id"])["display_name"],
        )
        return Link(text, f"servers/{row['server_id']}.html")

    def legacy_offers_table(self) -> TableView:
        L = self.labels["legacy_offers_table"]
        rows = []
        offers = self.legacy_offers()
        for row in offers:
            offer = row["offer"]
            server = self.server(offer["server_id"])
            cells = [offer["task_ru"], self.server_link(offer["server_id"]), self._price(server["price_rub_month"])]
            if not row["covered"]:
                cells += [L["not_covered"], "—", "—", "—", "—"]
            else:
                cells += [
                    L["memory_value"].format(gb=fmt.gb(row["memory_gb"]), gb_high=fmt.gb(row["memory_high_gb"])),
                    self.fit_label(row["article_fit"]),
                    self._recommended(row["recommended"]),
                    L["same"] if row["same"] else L["differs"],
                    self._why(row) + self._link_note(row["recommended"]),
                ]
            rows.append(cells)
        server_ids = self.c["servers"].filter(pl.col("price_rub_month").is_not_null())["server_id"].to_list()
        return TableView(
            [
                L["task"],
                L["server"],
                L["price"],
                L["memory"],
                L["article_fit"],
                L["recommended"],
                L["verdict"],
                L["why"],
            ],
            rows,
            _unique(
                self.c["legacy_offers"]["reference_id"].to_list()
                + self._refs("servers", server_ids)
                + self.c["memory_anchors"]["reference_id"].to_list()
            ),
            ["legacy_offers", "server_fit", "recommendations"],
            [False, False, True, True, False, False, False, False],
        )

    def _link_note(self, row: dict | None) -> str:
        """The recommended server's link, for the job, in a buyer's words."""
        if row is None:
            return ""
        words = link_words(self.labels["entities"]["reco"], row)
        return self.labels["legacy_offers_table"]["link_note"].format(link=words)

    def _why(self, row: dict) -> str:
        """One sentence on the plan against the offer's server, from the job's `recommendations` rows."""
        L = self.labels["legacy_offers_table"]
        mine, theirs = row["recommended"], row["on_offer"]
        if theirs is None:
            return "—"
        server = self.server(theirs["server_id"])["display_name"]
        cost = lambda r: fmt.integer(round(r["cost_rub"])) if r["cost_rub"] is not None else None  # noqa: E731
        if row["same"]:
            return L["why_same"].format(
                cards=russian.Shown(fmt.integer(theirs["gpus_per_job"])), gb=fmt.gb(theirs["per_gpu_memory_gb"])
            )
        if theirs["reason"] == "tight":
            high = theirs["per_gpu_memory_high_gb"] or theirs["per_gpu_memory_gb"]
            return L["why_tight"].format(server=server, high=fmt.gb(high), memory=fmt.gb(theirs["gpu_memory_gb"]))
        if theirs["reason"] == "needs_network":
            return L["why_network"].format(server=server, n=russian.Shown(fmt.integer(theirs["servers_count"])))
        if theirs["reason"] == "does_not_fit":
            return L["why_no_fit"].format(server=server)
        if mine is not None and cost(mine) and cost(theirs):
            return L["why_cheaper"].format(server=server, theirs=cost(theirs), mine=cost(mine))
        return L["why_ranked"].format(server=server)

    # -- helpers --
    def _price(self, price: int | None) -> str:
        return fmt.integer(price) if price is not None else self.labels["common"]["price_on_request"]

    def method_order(self) -> list[str]:
        """The methods' ids in their sort order (a copy: callers may keep it)."""
        return list(self._method_ids)

    @cached_property
    def _method_ids(self) -> tuple[str, ...]:
        return tuple(self.c["methods"].sort("sort_order")["method_id"].to_list())

    def _gb_marked(self, model_id: str, method_id: str) -> str:
        e = self.estimate(model_id, method_id)
        mark = self.labels["common"]["extrapolation_mark"] if e["extrapolated"] else ""
        return fmt.gb(e["memory_gb"]) + mark

    def _note_extrapolation(self, view: TableView, models: list[str]) -> TableView:
        beyond = self.max_anchor_b * (1 + self.const("anchor_size_tolerance"))  # table_rule.estimate_memory's
        if any(self.model(m)["params_b"] > beyond for m in models):
            view.notes.append(
                self.labels["common"]["extrapolation_note"].format(max_anchor=fmt.number(self.max_anchor_b))
            )
        return view


def coded(column: pl.Series) -> tuple[dict[str, int], np.ndarray]:
    """(each distinct value -> its number in sorted order, each row's number)."""
    values = column.unique().sort()
    return {v: i for i, v in enumerate(values.to_list())}, column.cast(pl.Enum(values)).to_physical().to_numpy()


class KeyGrid:
    """Row numbers of a table laid out over the sorted values of its key columns (a dense array).

    Looks rows up by key, and takes whole blocks of them (a page's table) at once.
    """

    def __init__(self, frame: pl.DataFrame, keys: tuple[str, ...]):
        self.frame = frame
        self.codes: list[dict[str, int]] = []
        positions = []
        for key in keys:
            codes, at = coded(frame[key])
            self.codes.append(codes)
            positions.append(at)
        self.grid = np.full([len(c) for c in self.codes], -1, dtype=np.int64 if frame.height >= 2**31 else np.int32)
        self.grid[tuple(positions)] = np.arange(frame.height, dtype=self.grid.dtype)

    def row(self, *ids: str) -> dict:
        """One row as a dict; KeyError when the table has none with these ids."""
        i = self.grid[tuple(codes[v] for codes, v in zip(self.codes, ids, strict=True))]
        if i < 0:
            raise KeyError(ids)
        return self.frame.row(int(i), named=True)

    def block(self, *ids: list[str] | str) -> np.ndarray:
        """Row numbers for every combination of the ids given per key: a list, or one id (that axis dropped)."""
        index: list = [
            codes[i] if isinstance(i, str) else [codes[v] for v in i] for codes, i in zip(self.codes, ids, strict=True)
        ]
        axes = [k for k, i in enumerate(index) if isinstance(i, list)]
        for k, spread in zip(axes, np.ix_(*(index[k] for k in axes)), strict=True):
            index[k] = spread
        rows = self.grid[tuple(index)]
        if (rows < 0).any():
            raise KeyError(ids)
        return rows


class CrossGrid(KeyGrid):
    """A KeyGrid of server_fit (table_rule.ServerFit), whose rows are never held: row j x S + s is job j
    (model, method) on server s, so the grid is made from the jobs and the servers alone."""

    def __init__(self, fits):
        self.fits = fits
        jobs, servers = fits.jobs, fits.servers
        (model_codes, models), (method_codes, methods) = coded(jobs["model_id"]), coded(jobs["method_id"])
        self.codes = [model_codes, method_codes, coded(servers["server_id"])[0]]
        kind = np.int64 if fits.height >= 2**31 else np.int32
        self.grid = np.full([len(c) for c in self.codes], -1, dtype=kind)
        first = np.arange(jobs.height, dtype=kind)[:, None] * servers.height
        self.grid[models, methods, :] = first + np.arange(servers.height, dtype=kind)

    def row(self, *ids: str) -> dict:
        """One row as a dict; KeyError when the table has none with these ids."""
        (i,) = self.block(*ids).reshape(1)  # KeyError for an unknown id or a job without an estimate
        job, server = divmod(int(i), self.fits.servers.height)
        return self.fits.job(job).row(server, named=True)


@dataclass(frozen=True)
class Cells:
    """A formatted column: per row an index into the texts of its distinct values (`values`: the
    distinct values themselves, in the same order, where made by of_frames)."""

    codes: np.ndarray
    texts: list[str]
    values: list[dict] | None = None

    @classmethod
    def of(cls, frame: pl.DataFrame, columns: tuple[str, ...], text) -> Cells:
        distinct = frame.select(columns).unique().with_row_index("code")
        codes = frame.select(columns).join(distinct, on=list(columns), how="left", maintain_order="left")["code"]
        return cls(codes.to_numpy(), [text(r) for r in distinct.drop("code").iter_rows(named=True)])

    @classmethod
    def of_frames(cls, frames, columns: tuple[str, ...], text) -> Cells:
        """`of` over the rows of several frames, one after the other (a table made piece by piece)."""
        known: dict[tuple, int] = {}
        parts = []
        for frame in frames:
            local = cls.of(frame, columns, lambda r: tuple(r.values()))
            ids = np.array([known.setdefault(v, len(known)) for v in local.texts], dtype=np.int32)
            parts.append(ids[local.codes] if len(ids) else local.codes.astype(np.int32))
        values = [dict(zip(columns, v, strict=True)) for v in known]
        codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        return cls(codes, [text(v) for v in values], values)

    def table(self, rows: np.ndarray) -> list[list[str]]:
        """The texts of a 2-D block of row numbers, as rows of cells."""
        texts = self.texts
        return [[texts[c] for c in line] for line in self.codes[rows].tolist()]


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
