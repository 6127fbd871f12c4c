"""The first-principles estimator on the site: breakdown bars on model pages, the accuracy page
(accuracy.html) and the pretraining page.

Tables and figures come from the catalog's derived tables (memory_breakdown, calibration,
calibration_summary, pretraining); Russian words from labels.toml [estimator].
"""

from __future__ import annotations

from functools import cached_property
from urllib.parse import urlencode

import polars as pl

from pipeline.combine import Catalog
from pipeline.estimate import calibration
from pipeline.estimate.first_principles import BREAKDOWN_COLUMNS
from pipeline.render import format as fmt
from pipeline.render import russian
from pipeline.render.view import Link, TableView
from pipeline.render.views.articles import Tables

BAR_WIDTH = 100.0  # the bars' scale in SVG user units (percent of the widest bar)


def percent(share: float | None) -> str:
    """A share as whole percent, Russian style (0.253 -> "25"); empty for None."""
    return "" if share is None else fmt.number(share * 100, 0)


def signed_percent(share: float | None) -> str:
    """A signed share as whole percent with "+" or a minus sign ("−12"), "0" unsigned; empty for None."""
    if share is None:
        return ""
    text = fmt.number(abs(share) * 100, 0)
    return text if text == "0" else ("+" if share > 0 else "−") + text


class EstimatorTables:
    """Table builders and inline figures of the estimator, for pages and article templates (`e`)."""

    def __init__(self, catalog: Catalog, labels: dict, tables: Tables):
        self.c, self.t, self.L = catalog, tables, labels["estimator"]
        self._summary = {r["estimator"]: r for r in catalog["calibration_summary"].iter_rows(named=True)}
        self._breakdown = {
            (r["model_id"], r["method_id"]): r for r in catalog["memory_breakdown"].iter_rows(named=True)
        }
        self._measurements = {r["measurement_id"]: r for r in catalog["measurements"].iter_rows(named=True)}
        self._breakdown_stats = {
            (r["estimator"], r["dimension"], r["group_id"]): r
            for r in catalog["calibration_breakdown"].iter_rows(named=True)
        }
        self._range = {r["scope"]: r for r in catalog["estimator_range"].iter_rows(named=True)}
        self._constant_rows = {r["constant_id"]: r for r in catalog["estimator_constants"].iter_rows(named=True)}

    # -- inline figures --
    def median_error(self, estimator: str) -> str:
        return percent(self._summary[estimator]["median_abs_error"])

    def within_25(self, estimator: str) -> str:
        return percent(self._summary[estimator]["within_25"])

    def bias(self, estimator: str) -> str:
        return signed_percent(self._summary[estimator]["median_error"])

    def rows_used(self, estimator: str = "first_principles") -> str:
        return fmt.integer(self._summary[estimator]["rows"])

    def measurements_count(self) -> str:
        return fmt.integer(self.c["calibration"].height)

    def group_stat(self, dimension: str, group: str, stat: str, estimator: str = "first_principles") -> str:
        """One figure of calibration_breakdown: rows, median_abs_error, within_25 or median_error ("—" if the
        group has no rows)."""
        row = self._breakdown_stats.get((estimator, dimension, group))
        if row is None:
            return "—"
        if stat == "rows":
            return fmt.integer(row["rows"])
        return signed_percent(row[stat]) if stat == "median_error" else percent(row[stat])

    def has_group(self, dimension: str, group: str, estimator: str = "first_principles") -> bool:
        return (estimator, dimension, group) in self._breakdown_stats

    def range_percent(self, scope: str, stat: str) -> str:
        """A percentile of estimator_range as a signed percent (error_p10, error_median, error_p90)."""
        return signed_percent(self._range[scope][stat])

    def range_factor(self, scope: str, stat: str) -> str:
        value = self._range[scope][stat]
        return "—" if value is None else fmt.number(value, 2)

    def technique_rows(self, technique: str) -> str:
        """How many measurements carry one extra technique."""
        return fmt.integer(sum(technique in calibration.techniques(m) for m in self._measurements.values()))

    def constant_basis_count(self, basis: str) -> str:
        return fmt.integer(sum(r["basis"] == basis for r in self._constant_rows.values()))

    def fitted(self) -> list[dict]:
        """The fitted constants with what they are fitted on and what the fit gives today."""
        L = self.L
        out = []
        for r in self._constant_rows.values():
            if r["basis"] != "fitted":
                continue
            out.append(
                {
                    "constant_id": r["constant_id"],
                    "value": fmt.number(r["value"], 2),
                    "kind": L[f"kind_{r['fitted_on']}"],
                    "rows": fmt.integer(r["fit_rows"] or 0),
                    "refit": "—" if r["refit_value"] is None else fmt.number(r["refit_value"], 2),
                    "refit_error": percent(r["refit_median_abs_error"]),
                }
            )
        return out

    def breakdown(self, model_id: str, method_id: str) -> dict:
        return self._breakdown[(model_id, method_id)]

    def part(self, model_id: str, method_id: str, part: str) -> str:
        return fmt.gb(self._breakdown[(model_id, method_id)][f"{part}_gb"])

    # -- shared wording --
    def estimator_name(self, estimator: str) -> str:
        return self.L[f"estimator_{estimator}"]

    def setup_text(self, row: dict) -> str:
        """A measurement's or a typical setup's training setup in a few Russian words."""
        return self.L["setup_text"].format(
            seq=russian.Shown(fmt.integer(row["seq_len"])),
            batch=fmt.integer(row["micro_batch"]),
            gpus=fmt.integer(row["gpus"]),
            sharding=self.L[f"sharding_{row['sharding']}"],
            extra=self._setup_extra(row),
        )

    def _setup_extra(self, row: dict) -> str:
        """What setup_text adds after the cards and sharding: checkpointing, attention, loss, LoRA, …"""
        L = self.L
        extra = ""
        if row.get("grad_checkpointing"):
            extra += L["setup_gc"]
        if row.get("flash_attention") is False:
            extra += L["setup_eager"]
        if row.get("loss") == "chunked":
            extra += L["setup_chunked"]
        if row.get("lora_rank") is not None and row.get("lora_targets"):
            extra += L["setup_lora"].format(rank=row["lora_rank"], targets=L[f"targets_{row['lora_targets']}"])
        if row.get("optimizer") and row["optimizer"] != "adamw":
            extra += L["setup_optimizer"].format(optimizer=L[f"optimizer_{row['optimizer']}"])
        techniques = calibration.techniques(row)
        if "double_quant" in techniques:
            extra += L["setup_double_quant"]
        if "lora_dropout" in techniques:
            extra += L["setup_dropout"]
        return extra

    def typical_setup_text(self, rows: list[dict]) -> str:
        """A model page's typical setup in words: one card for every method, or, when some run on
        several, each on the cards its recommendation takes (memory_breakdown's gpus)."""
        several = [r for r in rows if r["gpus"] > 1]
        if not several:
            return self.setup_text(rows[0] | {"lora_rank": None})
        return self.L["setup_text_recommended"].format(
            seq=russian.Shown(fmt.integer(rows[0]["seq_len"])),
            batch=fmt.integer(rows[0]["micro_batch"]),
            sharding=self.L[f"sharding_{several[0]['sharding']}"],
            extra=self._setup_extra(rows[0] | {"lora_rank": None}),
        )

    # -- tables --
    def summary_table(self) -> TableView:
        L = self.L
        rows = [
            [
                self.estimator_name(r["estimator"]),
                fmt.integer(r["rows"]),
                percent(r["median_abs_error"]),
                percent(r["within_25"]),
                signed_percent(r["median_error"]),
            ]
            for r in self.c["calibration_summary"].sort("sort_order").iter_rows(named=True)
        ]
        refs = self.c["measurements"]["reference_id"].unique(maintain_order=True).to_list()
        return TableView(
            [
                L["estimator"],
                L["rows"],
                L["median_abs_error"],
                L["within_25"].format(within=percent(self.c.constants["calibration_within"])),
                L["median_error"],
            ],
            rows,
            refs,
            ["calibration_summary", "calibration", "measurements"],
            [False, True, True, True, True],
        )

    def _prediction(self, row: dict, estimator: str) -> str:
        value = row[f"{estimator}_gb"]
        if value is None:
            return "—"
        error = row[f"{estimator}_error"]
        return fmt.gb(value) if error is None else f"{fmt.gb(value)} ({signed_percent(error)} %)"

    def _status(self, row: dict) -> str:
        L = self.L
        if row["in_summary"]:
            return L["yes"]
        reasons = []
        for reason in (row["excluded_because"] or "").split(","):
            if reason == "unmodelled":
                measurement = self._measurements[row["measurement_id"]]
                names = [
                    t
                    for t in calibration.techniques(measurement)
                    if t not in calibration.MODELLED_TECHNIQUES and t != calibration.UNKNOWN_LENGTHS
                ]
                reasons.append(L["excluded_unmodelled"].format(techniques=", ".join(names)))
            elif reason == "oom":
                verdict = {True: L["oom_predicted"], False: L["oom_missed"]}.get(row["predicts_oom"], "")
                reasons.append(L["excluded_oom"] + (f"; {verdict}" if verdict else ""))
            elif reason:
                reasons.append(L[f"excluded_{reason}"])
        return "; ".join(reasons)

    def accuracy_breakdown_table(self, dimension: str) -> TableView:
        """calibration_breakdown for one dimension: each group's figures for the first-principles estimator
        and the table rule beside it."""
        L = self.L
        rows = []
        frame = self.c["calibration_breakdown"].filter(
            (pl.col("estimator") == "first_principles") & (pl.col("dimension") == dimension)
        )
        for r in frame.sort("sort_order").iter_rows(named=True):
            group = r["group_id"]
            rows.append(
                [
                    self._group_name(dimension, group),
                    fmt.integer(r["rows"]),
                    percent(r["median_abs_error"]),
                    percent(r["within_25"]),
                    signed_percent(r["median_error"]),
                    self.group_stat(dimension, group, "median_abs_error", "table_rule"),
                ]
            )
        headers = [
            L[f"dimension_{dimension}"],
            L["rows"],
            L["median_abs_error"],
            L["within_25"].format(within=percent(self.c.constants["calibration_within"])),
            L["median_error"],
            L["table_rule_error"],
        ]
        refs = self.c["measurements"]["reference_id"].unique(maintain_order=True).to_list()
        return TableView(headers, rows, refs, ["calibration_breakdown", "calibration"], [False] + [True] * 5)

    def _group_name(self, dimension: str, group: str) -> str:
        L = self.L
        if dimension == "metric_kind":
            return L[f"kind_{group}"]
        if dimension == "method":
            return self.t.method(group)["short_name_ru"]
        if dimension == "sharding":
            return L[f"sharding_{group}"]
        if dimension == "framework":
            return L[f"framework_{group}"]
        if dimension == "loss":
            return L[f"loss_{group}"]
        if dimension == "all":
            return L["range_all"]
        framework, method = group.split("-", 1)
        return f"{L[f'framework_{framework}']}, {self.t.method(method)['short_name_ru']}"

    def range_table(self) -> TableView:
        """estimator_range: the measured spread of the first-principles estimator."""
        L = self.L
        rows = []
        for r in self.c["estimator_range"].sort("sort_order").iter_rows(named=True):
            rows.append(
                [
                    L["range_all"] if r["scope"] == "all" else L[f"kind_{r['scope']}"],
                    fmt.integer(r["rows"]),
                    signed_percent(r["error_p10"]) or "—",
                    signed_percent(r["error_median"]) or "—",
                    signed_percent(r["error_p90"]) or "—",
                    self.range_factor(r["scope"], "low_factor"),
                    self.range_factor(r["scope"], "high_factor"),
                ]
            )
        headers = [L["range_scope"], L["rows"], L["range_p10"], L["median_error"], L["range_p90"]]
        headers += [L["range_low"], L["range_high"]]
        refs = self.c["measurements"]["reference_id"].unique(maintain_order=True).to_list()
        return TableView(headers, rows, refs, ["estimator_range", "calibration"], [False] + [True] * 6)

    def out_of_sample_table(self) -> TableView:
        """calibration_out_of_sample: the first-principles estimator in sample and leaving each source out."""
        L = self.L
        within = percent(self.c.constants["calibration_within"])
        rows = []
        for r in self.c["calibration_out_of_sample"].sort("sort_order").iter_rows(named=True):
            name = self._group_name(r["dimension"], r["group_id"])
            if r["dimension"] != "all":
                name = f"{L['dimension_' + r['dimension']]}: {name}"
            rows.append(
                [
                    name,
                    fmt.integer(r["rows"]),
                    percent(r["in_sample_median_abs_error"]),
                    percent(r["in_sample_within_25"]),
                    percent(r["out_of_sample_median_abs_error"]),
                    percent(r["out_of_sample_within_25"]),
                    signed_percent(r["out_of_sample_median_error"]),
                ]
            )
        headers = [
            L["oos_group"],
            L["rows"],
            L["oos_in_error"],
            L["oos_in_within"].format(within=within),
            L["oos_out_error"],
            L["oos_out_within"].format(within=within),
            L["oos_out_bias"],
        ]
        refs = self.c["measurements"]["reference_id"].unique(maintain_order=True).to_list()
        return TableView(headers, rows, refs, ["calibration_out_of_sample", "calibration"], [False] + [True] * 6)

    def out_of_sample_stat(self, dimension: str, group: str, stat: str) -> str:
        """One figure of calibration_out_of_sample as whole percent ("—" when the group has no rows)."""
        frame = self.c["calibration_out_of_sample"].filter(
            (pl.col("dimension") == dimension) & (pl.col("group_id") == group)
        )
        if frame.is_empty():
            return "—"
        value = frame.row(0, named=True)[stat]
        if stat == "rows":
            return fmt.integer(value)
        return signed_percent(value) if stat.endswith("median_error") else percent(value)

    def constants_table(self) -> TableView:
        """Every constant of the first-principles estimator: value, unit, basis, meaning, source."""
        L = self.L
        described = {r["constant_id"]: r for r in self.c["constants"].iter_rows(named=True)}
        titles = dict(self.c["references"].select("reference_id", "title").iter_rows())
        rows = []
        for r in self.c["estimator_constants"].sort("constant_id").iter_rows(named=True):
            d = described[r["constant_id"]]
            rows.append(
                [
                    r["constant_id"],
                    fmt.number(r["value"], 4),
                    d["unit"] or "",
                    L[f"basis_{r['basis']}"],
                    d["description_ru"],
                    Link(titles[d["reference_id"]], f"sources.html#ref-{d['reference_id']}"),  # the source's title
                ]
            )
        headers = [L["constant"], L["value"], L["unit"], L["basis"], L["meaning"], L["source"]]
        refs = list(dict.fromkeys(described[r]["reference_id"] for r in self._constant_rows))
        return TableView(headers, rows, refs, ["estimator_constants", "constants"], [False, True] + [False] * 4)

    def calibration_table(self) -> TableView:
        L = self.L
        rows = []
        for row in self.c["calibration"].iter_rows(named=True):
            m = self._measurements[row["measurement_id"]]
            measured = (
                L["oom"]
                if row["outcome"] == "oom"
                else f"{fmt.number(row['measured_value'], 2)} {row['measured_unit']}"
            )
            rows.append(
                [
                    self.t.model_link(row["model_id"], "short_name"),
                    self.t.method(row["method_id"])["short_name_ru"],
                    self.setup_text(m),
                    self.t.gpu_link(row["gpu_id"], "short_name") if row["gpu_id"] else "—",
                    L[f"framework_{row['framework']}"],
                    L[f"metric_{row['metric']}"],
                    measured,
                    fmt.gb(row["measured_gb"]),
                    *(self._prediction(row, e) for e in calibration.ESTIMATORS),
                    self._status(row),
                ]
            )
        headers = [
            L["model"],
            L["method"],
            L["setup"],
            L["gpu"],
            L["framework"],
            L["metric"],
            L["measured"],
            L["measured_gb"],
            *(L["predicted"].format(estimator=self.estimator_name(e)) for e in calibration.ESTIMATORS),
            L["in_summary"],
        ]
        refs = self.c["measurements"]["reference_id"].unique(maintain_order=True).to_list()
        return TableView(
            headers,
            rows,
            refs,
            ["calibration", "measurements"],
            [False] * 6 + [True] * 6 + [False],
            sortable=True,
        )

    def breakdown_table(self, model_id: str) -> TableView:
        L = self.L
        rows = []
        for method_id in self._method_order():
            r = self._breakdown[(model_id, method_id)]
            rows.append(
                [
                    self.t.method_link(method_id, "short_name_ru"),
                    fmt.integer(r["gpus"]),
                    *(fmt.gb(r[f"{p}_gb"]) for p in BREAKDOWN_COLUMNS),
                    fmt.gb(r["total_gb"]),
                    fmt.gb(r["table_rule_gb"]),
                ]
            )
        headers = [
            L["method"],
            L["cards"],
            *(L["gb"].format(part=L[f"part_{p}"]) for p in BREAKDOWN_COLUMNS),
            L["total"],
            L["table_rule"],
        ]
        refs = self._constant_refs() + [self.t.model(model_id)["reference_id"]]
        return TableView(
            headers,
            rows,
            list(dict.fromkeys(refs)),
            ["memory_breakdown", "constants", "typical_setup", "recommendations"],
            [False] + [True] * (len(BREAKDOWN_COLUMNS) + 3),
        )

    def pretraining_names(self, kind: str) -> str:
        """The models (kind "model") or GPUs ("gpu") of the pretraining rows, listed (fmt.listed)."""
        lookup = self.t.model if kind == "model" else self.t.gpu
        ids = dict.fromkeys(self.c["pretraining"][f"{kind}_id"].to_list())
        return fmt.listed([lookup(i)["short_name"] for i in ids])

    def _pretraining_cost(self, r: dict) -> str:
        """The cost cell: millions of ₽, or why there is no total (several servers, no declared network)."""
        if r["cost_rub"] is not None:
            return fmt.number(r["cost_rub"] / 1e6, 1)
        if r["servers"] is not None and r["servers"] > 1 and r["server_id"] is not None:
            return self.t.labels["entities"]["reco"]["no_network"]
        return "—"

    def _pretraining_days(self, r: dict) -> str:
        """Days as compute + exposed communication (pretraining's columns); compute alone without a network."""
        if r["days"] is not None:
            return self.L["pretrain_days_split"].format(
                days=fmt.number(r["days"], 1),
                compute=fmt.number(r["days_compute"], 1),
                communication=fmt.number(r["days_communication"], 1),
            )
        if r["days_compute"] is not None:
            return self.L["pretrain_days_no_network"].format(compute=fmt.number(r["days_compute"], 1))
        return "—"

    def pretraining_table(self) -> TableView:
        L = self.L
        rows = []
        for r in self.c["pretraining"].iter_rows(named=True):
            rows.append(
                [
                    self.t.model_link(r["model_id"], "short_name"),
                    self.t.gpu_link(r["gpu_id"], "short_name"),
                    fmt.number(r["tokens"] / 1e9, 0),
                    fmt.integer(r["cards_for_memory"]) if r["cards_for_memory"] is not None else "—",
                    fmt.integer(r["cards_for_time"]),
                    fmt.integer(r["cards"]) if r["cards"] is not None else "—",
                    fmt.gb(r["memory_per_card_gb"]),
                    self._pretraining_days(r),
                    fmt.integer(r["servers"]) if r["servers"] is not None else "—",
                    self._pretraining_cost(r),
                    r["seed_cards_text"],
                ]
            )
        first = self.c["pretraining"].row(0, named=True)
        headers = [
            L["pretrain_model"],
            L["pretrain_gpu"],
            L["pretrain_tokens"],
            L["pretrain_cards_memory"],
            L["pretrain_cards_time"].format(days=russian.Shown(fmt.number(first["target_days"], 0))),
            L["pretrain_cards"],
            L["pretrain_memory"],
            L["pretrain_days"],
            L["pretrain_servers"],
            L["pretrain_cost"],
            L["pretrain_seed"],
        ]
        refs = self._constant_refs() + self.c["servers"]["reference_id"].to_list()
        refs += self.c["legacy_gpu_counts"]["reference_id"].to_list()
        return TableView(
            headers,
            rows,
            list(dict.fromkeys(refs)),
            ["pretraining", "constants", "legacy_gpu_counts"],
            [False, False] + [True] * 5 + [False, True, True, False],
        )

    # -- the stacked bars of a model page --
    def bars(self, model_id: str) -> dict:
        """Per method, each part's share of the widest bar (SVG units) and its GB, for the model page."""
        L = self.L
        rows = [self._breakdown[(model_id, m)] for m in self._method_order()]
        widest = max(r["total_gb"] for r in rows)
        bars = []
        for r in rows:
            x, parts = 0.0, []
            for p in BREAKDOWN_COLUMNS:
                width = r[f"{p}_gb"] / widest * BAR_WIDTH
                parts.append({"part": p, "x": x, "width": width, "gb": fmt.gb(r[f"{p}_gb"]), "label": L[f"part_{p}"]})
                x += width
            bars.append(
                {
                    "method": self.t.method(r["method_id"])["short_name_ru"],
                    "method_id": r["method_id"],
                    "gpus": r["gpus"],
                    "sharding": r["sharding"],
                    "parts": parts,
                    "total": fmt.gb(r["total_gb"]),
                    "table_rule": fmt.gb(r["table_rule_gb"]),
                }
            )
        legend = [{"part": p, "label": L[f"part_{p}"]} for p in BREAKDOWN_COLUMNS]
        typical = rows[0]
        lora = next(r for r in rows if r["lora_rank"] is not None)
        query = urlencode(
            {
                "model": model_id,
                "advanced": 1,
                "seq_len": typical["seq_len"],
                "micro_batch": typical["micro_batch"],
                "grad_checkpointing": int(typical["grad_checkpointing"]),
                "lora_rank": lora["lora_rank"],
            }
        )
        return {
            "bars": bars,
            "legend": legend,
            "setup": self.typical_setup_text(rows),
            "calculator_query": query,
        }

    def _method_order(self) -> list[str]:
        return self.t.method_order()

    def _constant_refs(self) -> list[str]:
        return list(self._constant_ref_ids)  # asked by every model page: found once

    @cached_property
    def _constant_ref_ids(self) -> tuple[str, ...]:
        ids = (
            "activation_bytes",
            "logits_bytes",
            "quant_block_size",
            "zero3_gather_bytes_per_param",
            "cuda_context_gb",
        )
        constants = self.c["constants"].filter(pl.col("constant_id").is_in(ids))
        return tuple(constants["reference_id"].unique(maintain_order=True).to_list())


class TimeAccuracy:
    """The time model against published throughput on accuracy.html: time_summary and time_calibration."""

    def __init__(self, catalog: Catalog, labels: dict):
        self.c, self.L = catalog, labels["estimator"]
        self._summary = {
            (r["reading"], r["scope"], r["value"]): r for r in catalog["time_summary"].iter_rows(named=True)
        }

    def figure(self, reading: str, stat: str, scope: str = "all", value: str = "all") -> str:
        """One figure of time_summary: rows, median_abs_error, within_25 or median_error ("—" if none)."""
        row = self._summary.get((reading, scope, value))
        if row is None or row[stat] is None:
            return "—"
        if stat == "rows":
            return fmt.integer(row["rows"])
        return signed_percent(row[stat]) if stat == "median_error" else percent(row[stat])

    def factor(self, reading: str, stat: str) -> str:
        """hours_low_factor or hours_high_factor of the all-rows line, two decimals ("—" if none)."""
        value = self._summary[(reading, "all", "all")][stat]
        return "—" if value is None else fmt.number(value, 2)

    def runs_count(self) -> str:
        return fmt.integer(self.c["time_calibration"].height)

    def uncovered_links(self) -> list[str]:
        """The links between cards no row of the accuracy figures covers (their times stay drafts), as words."""
        used = self.c["time_calibration"].filter(pl.col("in_accuracy"))["link"].unique().to_list()
        links = ("nvswitch", "nvlink-bridge", "pcie", "between_servers")
        return [self.L[f"time_link_{x.replace('-', '_')}"] for x in links if x not in used]

    def _scope_name(self, scope: str, value: str) -> str:
        L = self.L
        if scope == "link":
            value = L[f"time_link_{value.replace('-', '_')}"]
        elif scope == "method_family":
            value = L[f"time_method_{value}"]
        return L[f"time_scope_{scope}"].format(value=value)

    def _refs(self) -> list[str]:
        return self.c["throughput"]["reference_id"].unique(maintain_order=True).to_list()

    def summary_table(self) -> TableView:
        L = self.L
        rows = [
            [
                L[f"time_reading_{r['reading']}"],
                self._scope_name(r["scope"], r["value"]),
                fmt.integer(r["rows"]),
                percent(r["median_abs_error"]),
                percent(r["within_25"]),
                signed_percent(r["median_error"]),
            ]
            for r in self.c["time_summary"].sort("sort_order", maintain_order=True).iter_rows(named=True)
        ]
        headers = [
            L["time_reading"],
            L["time_scope"],
            L["rows"],
            L["median_abs_error"],
            L["within_25"].format(within=percent(self.c.constants["calibration_within"])),
            L["median_error"],
        ]
        return TableView(headers, rows, self._refs(), ["time_summary", "time_calibration", "throughput"],
                         [False, False, True, True, True, True])  # fmt: skip

    def rows_table(self) -> TableView:
        L = self.L
        runs = {r["run_id"]: r for r in self.c["throughput"].iter_rows(named=True)}
        rows = []
        for r in self.c["time_calibration"].iter_rows(named=True):
            run = runs[r["run_id"]]
            setup = L["time_setup_text"].format(
                gpus=run["gpus"],
                gpu=r["gpu_id"],
                link=L[f"time_link_{r['link'].replace('-', '_')}"],
                method=run["method_id"] + (L["time_fp8"] if run["precision"] == "fp8" else ""),
            )
            rows.append(
                [
                    r["run_id"],
                    setup,
                    fmt.integer(round(r["measured_tokens_per_second_per_gpu"])),
                    fmt.integer(round(r["predicted_tokens_per_second_per_gpu"])),
                    percent(r["communication_share"]),
                    signed_percent(r["error"]),
                    signed_percent(r["error_fitted_out_of_sample"]),
                    L["yes"] if r["in_accuracy"] else "—",
                ]
            )
        headers = [
            L["time_run"],
            L["time_setup"],
            L["time_measured"],
            L["time_predicted"],
            L["time_communication"],
            L["time_error"],
            L["time_error_out_of_sample"],
            L["time_in_summary"],
        ]
        return TableView(headers, rows, self._refs(), ["time_calibration", "throughput"],
                         [False, False, True, True, True, True, True, False])  # fmt: skip


def pages(renderer) -> dict[str, str]:
    """accuracy.html and pretraining.html."""
    e = renderer.estimator
    time = TimeAccuracy(renderer.catalog, renderer.labels)
    return {
        "accuracy.html": renderer.page(
            "accuracy.html",
            "accuracy.html",
            e=e,
            summary=e.summary_table(),
            by_kind=e.accuracy_breakdown_table("metric_kind"),
            by_method=e.accuracy_breakdown_table("method"),
            by_sharding=e.accuracy_breakdown_table("sharding"),
            by_framework=e.accuracy_breakdown_table("framework"),
            by_framework_method=e.accuracy_breakdown_table("framework_method"),
            spread=e.range_table(),
            out_of_sample=e.out_of_sample_table(),
            by_loss=e.accuracy_breakdown_table("loss"),
            constants=e.constants_table(),
            rows=e.calibration_table(),
            time=time,
            time_summary=time.summary_table(),
            time_rows=time.rows_table(),
        ),
        "pretraining.html": renderer.page(
            "pretraining.html",
            "pretraining.html",
            e=e,
            view=e.pretraining_table(),
            closing=renderer.closing("pretraining.html", renderer.labels["closing"]["pretraining"]),
        ),
    }
