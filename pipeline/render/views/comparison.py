"""Figures and tables of the method-comparison article: the four ways of estimating side by side.

The four estimators are the anchor-table rule (docs/rules.md, rules 1-2: the `estimates` table),
the earlier article's rule of thumb (`calibration.rule_of_thumb_gb`), DeepSpeed's model-states
formula (`first_principles.deepspeed_model_states`) and the first-principles estimator
(`first_principles.estimate`).
A setup is named in templates by a model, a method and a scale: "card" (one card, no
sharding), "server" (ZeRO-3 over the cards of one catalog server) or "servers" (ZeRO-3 over as
many such servers as the table rule needs). Every figure is a cell of a derived table made by
pipeline/combine.py: `comparison` (one row per setup of sources/comparison_setups.csv) and
`comparison_advice` (its "advice" rows); this module only looks rows up and formats them. Russian
words come from labels.toml [comparison].
"""

from __future__ import annotations

from functools import cached_property

import polars as pl
from markupsafe import Markup

from pipeline.combine import Catalog
from pipeline.estimate import first_principles
from pipeline.messages import message
from pipeline.render import format as fmt
from pipeline.render import russian
from pipeline.render.view import TableView
from pipeline.render.views.articles import Tables
from pipeline.render.views.estimator import signed_percent
from pipeline.schema import ADVICE, COMPARISON_SCALES, ESTIMATORS_ORDER

SCALES = COMPARISON_SCALES

# The constants each estimator rests on, for the sources line under the tables.
ESTIMATOR_CONSTANTS = {
    "table_rule": (),
    "rule_of_thumb": ("legacy_full_bytes_per_param", "legacy_lora_bytes_per_param", "legacy_qlora_7b_gb"),
    "deepspeed": ("zero3_gather_bytes_per_param",),
    "first_principles": first_principles.CONSTANTS,
}


class UndeclaredSetup(LookupError):
    """An article names a setup that sources/comparison_setups.csv does not declare (or whose model or
    server the catalog no longer has): the build stops with the setup named, for the editor to add it."""

    def __init__(self, model_id: str, method_id: str, scale: str, server: str | None):
        where = "" if scale == "card" or server is None else message("articles.setup_server", server=server)
        super().__init__(
            message("articles.undeclared_setup", model=model_id, method=method_id, scale=scale, server=where)
        )


class Comparison:
    """Table builders and inline figures for the comparison article (`cmp` in article templates)."""

    def __init__(self, catalog: Catalog, labels: dict, tables: Tables, estimator):
        self.c, self.labels, self.t, self.e = catalog, labels, tables, estimator
        self.L = labels["comparison"]
        self._refs_of: dict[tuple, list[str]] = {}  # _constant_refs by the constants asked for

    # -- data, built on first use (the renderer makes a Comparison for every build) --
    @cached_property
    def constants(self) -> dict[str, float]:
        return self.c.constants

    @cached_property
    def _calibration(self) -> dict[str, dict]:
        return {r["measurement_id"]: r for r in self.c["calibration"].iter_rows(named=True)}

    @cached_property
    def _measurements(self) -> dict[str, dict]:
        return {r["measurement_id"]: r for r in self.c["measurements"].iter_rows(named=True)}

    @cached_property
    def _rows(self) -> dict[tuple, dict]:
        """(model, method, scale, server or None) -> its row of the `comparison` table."""
        return {
            (r["model_id"], r["method_id"], r["scale"], r["server_id"]): r
            for r in self.c["comparison"].iter_rows(named=True)
        }

    @cached_property
    def _advice_rows(self) -> dict[tuple, dict[str, dict]]:
        """(model, method, server) -> advice -> its row of the `comparison_advice` table."""
        out: dict[tuple, dict[str, dict]] = {}
        for r in self.c["comparison_advice"].iter_rows(named=True):
            out.setdefault((r["model_id"], r["method_id"], r["server_id"]), {})[r["advice"]] = r
        return out

    # -- setups --
    def row(self, model_id: str, method_id: str, scale: str = "card", server: str | None = None) -> dict:
        """A setup's row of the `comparison` table (one card: whatever the server)."""
        if scale not in SCALES:
            raise KeyError(scale)
        key = (model_id, method_id, scale, None if scale == "card" else server)
        if key not in self._rows:
            raise UndeclaredSetup(model_id, method_id, scale, server)
        return self._rows[key]

    def gpus(self, model_id: str, method_id: str, scale: str = "card", server: str | None = None) -> int:
        """Cards of a setup: one, a server's, or the servers' the table rule needs for the task."""
        return self.row(model_id, method_id, scale, server)["gpus"]

    def predictions(self, model_id: str, method_id: str, scale: str = "card", server: str | None = None) -> dict:
        """Per-card GB of each estimator for one setup (None where an estimator says nothing).

        The table rule and the rule of thumb give the memory of the whole task; spread over
        several cards they are divided evenly, as the site's card counts assume (rule 5).
        """
        row = self.row(model_id, method_id, scale, server)
        return {k: row[f"{k}_gb"] for k in ESTIMATORS_ORDER}

    def measured_for(self, row: dict) -> dict | None:
        """The calibration row measured in exactly this setup (the `comparison` row's measurement_id)."""
        return None if row["measurement_id"] is None else self._calibration[row["measurement_id"]]

    # -- inline figures --
    def link(self, model_id: str, name: str = "display_name") -> Markup:
        """A Markdown link to a model's page, its name made inert."""
        return Markup(f"[{fmt.md_inline(self.t.model(model_id)[name])}](models/{model_id}.html)")

    def deepspeed_bytes_per_param(self, model_id: str) -> str:
        """DeepSpeed's model states per parameter on one card without sharding, bytes."""
        row = next(r for key, r in self._rows.items() if key[0] == model_id)
        return fmt.number(row["deepspeed_bytes_per_param"], 1)

    def gb(
        self,
        model_id: str,
        method_id: str,
        scale: str = "card",
        server: str | None = None,
        estimator: str = "first_principles",
    ) -> str:
        """One estimator's GB per card for a setup, formatted ("—" where it says nothing)."""
        value = self.predictions(model_id, method_id, scale, server)[estimator]
        return "—" if value is None else fmt.gb(value)

    def applies(
        self, model_id: str, method_id: str, estimator: str, scale: str = "card", server: str | None = None
    ) -> bool:
        """Whether an estimator says anything about a setup (DeepSpeed: full fine-tuning only)."""
        return self.predictions(model_id, method_id, scale, server)[estimator] is not None

    def part(self, model_id: str, method_id: str, part: str, scale: str = "card", server: str | None = None) -> str:
        """One part of the first-principles breakdown (weights, activations, ... or total), GB per card."""
        row = self.row(model_id, method_id, scale, server)
        return fmt.gb(row["first_principles_gb" if part == "total" else f"{part}_gb"])

    def cards(self, model_id: str, method_id: str, scale: str = "card", server: str | None = None) -> str:
        return fmt.integer(self.gpus(model_id, method_id, scale, server))

    def ratio(  # noqa: PLR0913
        self, model_id: str, method_id: str, over: str, under: str, scale: str = "card", server: str | None = None
    ) -> str:
        """How many times the first-principles figure is another estimator's, one decimal ("1,2")."""
        if over != "first_principles":
            raise KeyError(f"{over} over {under}: the comparison table has first_principles_to_<estimator> only")
        return fmt.number(self.row(model_id, method_id, scale, server)[f"first_principles_to_{under}"], 1)

    def fits(  # noqa: PLR0913
        self,
        model_id: str,
        method_id: str,
        gpu_id: str,
        scale: str = "card",
        server: str | None = None,
        estimator: str = "first_principles",
    ) -> bool:
        return self.predictions(model_id, method_id, scale, server)[estimator] <= self.t.gpu(gpu_id)["memory_gb"]

    def bytes_per_param(self, model_id: str, method_id: str, scale: str = "card", server: str | None = None) -> str:
        """The first-principles total per parameter of the model, bytes (one decimal)."""
        return fmt.number(self.row(model_id, method_id, scale, server)["first_principles_bytes_per_param"], 1)

    def legacy_full_high_bytes(self) -> str:
        """The rule of thumb's bytes per parameter with its own upper allowance (+50 %)."""
        c = self.constants
        return fmt.number(c["legacy_full_bytes_per_param"] * (1 + c["legacy_overhead_high"]))

    def legacy_qlora_gb(self) -> list[str]:
        """The earlier article's three fixed QLoRA figures, smallest model first."""
        return [fmt.gb(self.constants[f"legacy_qlora_{size}_gb"]) for size in ("7b", "13b", "70b")]

    def legacy_fp8_percent(self) -> str:
        return fmt.number((1 - self.constants["legacy_fp8_memory_factor"]) * 100, 0)

    def within_percent(self) -> str:
        return fmt.number(self.c.constants["calibration_within"] * 100, 0)

    def bytes_per_gb(self) -> str:
        return fmt.integer(first_principles.GB)

    def gib_in_gb(self) -> str:
        return fmt.number(first_principles.GIB / first_principles.GB, 3)

    def measured(self, measurement_id: str) -> str:
        return fmt.gb(self._calibration[measurement_id]["measured_gb"])

    def predicted(self, measurement_id: str, estimator: str) -> str:
        value = self._calibration[measurement_id][f"{estimator}_gb"]
        return "—" if value is None else fmt.gb(value)

    def error(self, measurement_id: str, estimator: str) -> str:
        return signed_percent(self._calibration[measurement_id][f"{estimator}_error"])

    def error_abs(self, measurement_id: str, estimator: str) -> str:
        """An estimator's error on one measurement without its sign, percent."""
        return fmt.number(abs(self._calibration[measurement_id][f"{estimator}_error"]) * 100, 0)

    def seq_len(self, measurement_id: str) -> str:
        return fmt.integer(self._measurements[measurement_id]["seq_len"])

    def advice(self, model_id: str, method_id: str, server: str, step: str, what: str = "total") -> str:
        """One row of the advice table: `what` = total (GB), change (signed % of the total against the
        setup without the advice), saving (the same decrease unsigned), activations (GB, with logits),
        activations_change, activations_saving, phase (the peak's: backward or optimizer_step)."""
        return self._advice_value(self._advice(model_id, method_id, server), step, what)

    def advice_steps(self) -> russian.Shown:
        return russian.Shown(fmt.integer(self.constants["comparison_accumulation_steps"]))

    # -- tables --
    def estimators_table(self) -> TableView:
        """What each way of estimating takes into account."""
        L = self.L
        inputs = ("method", "size", "seq_batch", "checkpointing", "sharding", "optimizer", "activations")
        rows = []
        for name in self._estimator_order():
            rows.append([self.e.estimator_name(name), *L[f"takes_{name}"]])
        return TableView(
            [L["estimator"]] + [L[f"takes_{k}"] for k in inputs],
            rows,
            self._known(self._estimator_refs()),
            ["memory_anchors", "constants", "calibration_summary"],
            [False] * (len(inputs) + 1),
        )

    def setups_table(self, setups: list[tuple[str, str, str]], server: str) -> TableView:
        """Each setup's per-card GB by the four estimators, the measured peak if any, and whether it
        fits one card of the server's GPU (by the table rule / from first principles)."""
        L = self.L
        gpu = self.t.gpu(self.t.server(server)["gpu_id"])
        rows, models = [], []
        for model_id, method_id, scale in setups:
            row = self.row(model_id, method_id, scale, server)
            p = self.predictions(model_id, method_id, scale, server)
            measured = self.measured_for(row)
            fit = [L["yes"] if p[k] <= gpu["memory_gb"] else L["no"] for k in ("table_rule", "first_principles")]
            table_rule = fmt.gb(p["table_rule"])
            if row["table_rule_extrapolated"]:
                table_rule = L["extrapolated_cell"].format(gb=table_rule)
            rows.append(
                [
                    self.t.model_link(model_id, "short_name"),
                    self.t.method_link(method_id, "short_name_ru"),
                    self.e.setup_text(row),
                    table_rule,
                    self._gb_or_dash(p["rule_of_thumb"]),
                    self._gb_or_dash(p["deepspeed"]),
                    fmt.gb(p["first_principles"]),
                    fmt.gb(measured["measured_gb"]) if measured else L["no_measurement"],
                    " / ".join(fit),
                ]
            )
            models.append(model_id)
        headers = [
            L["model"],
            L["method"],
            L["setup"],
            *(L["per_card"].format(estimator=self.e.estimator_name(k)) for k in self._estimator_order()),
            L["measured"],
            L["fits"].format(gpu=gpu["short_name"], memory=fmt.gb(gpu["memory_gb"])),
        ]
        refs = self._estimator_refs() + [self.t.model(m)["arch_reference_id"] for m in models]
        refs += [self.t.server(server)["reference_id"], gpu["reference_id"]]
        # Notes under a table would break the "sources follow every table" contract of the Markdown
        # (test_golden skips only blocks starting with "*", and md_cell escapes it): the article says it.
        return TableView(
            headers,
            rows,
            self._known(refs),
            ["comparison", "constants", "models", "servers"],
            [False, False, False, True, True, True, True, True, False],
        )

    def parts_table(self, setups: list[tuple[str, str, str]], server: str) -> TableView:
        """The first-principles breakdown of each setup, part by part, GB per card."""
        E = self.labels["estimator"]
        rows, models = [], []
        for model_id, method_id, scale in setups:
            row = self.row(model_id, method_id, scale, server)
            rows.append(
                [
                    self.t.model_link(model_id, "short_name"),
                    self.t.method_link(method_id, "short_name_ru"),
                    fmt.integer(row["gpus"]),
                    *(fmt.gb(row[f"{p}_gb"]) for p in first_principles.BREAKDOWN_COLUMNS),
                    fmt.gb(row["first_principles_gb"]),
                ]
            )
            models.append(model_id)
        headers = [
            self.L["model"],
            self.L["method"],
            self.L["cards"],
            *(E["gb"].format(part=E[f"part_{p}"]) for p in first_principles.BREAKDOWN_COLUMNS),
            E["total"],
        ]
        refs = self._constant_refs(first_principles.CONSTANTS) + [self.t.model(m)["arch_reference_id"] for m in models]
        return TableView(
            headers,
            rows,
            self._known(refs),
            ["comparison", "constants", "models"],
            [False, False] + [True] * (len(first_principles.BREAKDOWN_COLUMNS) + 2),
        )

    def measured_table(self, measurements: list[str]) -> TableView:
        """Published measurements beside the four estimators' predictions and errors."""
        L, E = self.L, self.labels["estimator"]
        rows = []
        for mid in measurements:
            row, m = self._calibration[mid], self._measurements[mid]
            measured = f"{fmt.number(row['measured_value'], 2)} {row['measured_unit']}"
            rows.append(
                [
                    self.t.model_link(row["model_id"], "short_name"),
                    self.t.method_link(row["method_id"], "short_name_ru"),
                    self.e.setup_text(m),
                    E[f"metric_{row['metric']}"],
                    measured,
                    fmt.gb(row["measured_gb"]),
                    *(self._prediction(row, k) for k in self._estimator_order()),
                ]
            )
        headers = [
            L["model"],
            L["method"],
            L["setup"],
            E["metric"],
            E["measured"],
            E["measured_gb"],
            *(L["predicted"].format(estimator=self.e.estimator_name(k)) for k in self._estimator_order()),
        ]
        refs = [self._measurements[mid]["reference_id"] for mid in measurements]
        return TableView(
            headers,
            rows,
            self._known(refs),
            ["calibration", "measurements"],
            [False, False, False, False, True, True, True, True, True, True],
        )

    def advice_table(self, model_id: str, method_id: str, server: str) -> TableView:
        """The earlier article's practical advice, each applied alone to one setup, in numbers."""
        L = self.L
        gpu = self.t.gpu(self.t.server(server)["gpu_id"])
        steps = self._advice(model_id, method_id, server)
        rows = []
        for step in ADVICE:
            rows.append(
                [
                    L[f"advice_{step}"],
                    self._promise(step),
                    self.e.setup_text(steps[step]) + self._fp8_text(steps[step]),
                    self._advice_value(steps, step, "total"),
                    self._advice_value(steps, step, "change"),
                    self._advice_value(steps, step, "activations"),
                    L["yes"] if steps[step]["total_gb"] <= gpu["memory_gb"] else L["no"],
                ]
            )
        headers = [
            L["advice"],
            L["promise"],
            L["setup"],
            L["advice_total"],
            L["advice_change"],
            L["advice_activations"],
            L["fits_one"].format(gpu=gpu["short_name"], memory=fmt.gb(gpu["memory_gb"])),
        ]
        refs = [
            *self._constant_refs(ESTIMATOR_CONSTANTS["rule_of_thumb"]),  # the earlier article, whose advice this is
            *self._constant_refs(first_principles.CONSTANTS),
            self.t.model(model_id)["arch_reference_id"],
        ]
        refs.append(gpu["reference_id"])
        return TableView(
            headers,
            rows,
            self._known(refs),
            ["comparison_advice", "constants", "models"],
            [False, False, False, True, True, True, False],
        )

    # -- helpers --
    def _advice(self, model_id: str, method_id: str, server: str) -> dict[str, dict]:
        """Each piece of advice's row of `comparison_advice` for a setup."""
        key = (model_id, method_id, server)
        if key not in self._advice_rows:
            raise UndeclaredSetup(model_id, method_id, "advice", server)
        return self._advice_rows[key]

    @staticmethod
    def _advice_value(rows: dict[str, dict], step: str, what: str) -> str:
        row = rows[step]
        if what == "phase":
            return row["peak_phase"]
        if what in ("total", "activations"):
            return fmt.gb(row[f"{what}_gb"])
        if step == "base":
            return "—"
        if what in ("change", "activations_change"):
            return signed_percent(row["total_change" if what == "change" else what])
        if what in ("saving", "activations_saving"):  # what the advice takes off, percent without a sign
            change = row["total_change" if what == "saving" else "activations_change"]
            return fmt.number((0.0 - change) * 100, 0)
        raise KeyError(what)

    def _promise(self, step: str) -> str:
        L, c = self.L, self.constants
        if step == "grad_checkpointing":
            low, high = (fmt.number(c[f"checkpointing_saving_{k}"] * 100, 0) for k in ("low", "high"))
            return L["promise_grad_checkpointing"].format(low=low, high=high)
        if step == "fp8":
            return L["promise_fp8"].format(percent=self.legacy_fp8_percent())
        if step == "micro_batch":
            return L["promise_micro_batch"].format(steps=self.advice_steps())
        if step == "grad_accum":
            return L["promise_grad_accum"].format(steps=self.advice_steps())
        return L[f"promise_{'zero' if step.startswith('zero') else step}"]

    def _fp8_text(self, row: dict) -> str:
        return self.L["setup_fp8"] if row["fp8"] else ""

    def _prediction(self, row: dict, estimator: str) -> str:
        value, error = row[f"{estimator}_gb"], row[f"{estimator}_error"]
        if value is None:
            return "—"
        return fmt.gb(value) if error is None else f"{fmt.gb(value)} ({signed_percent(error)} %)"

    @staticmethod
    def _gb_or_dash(value: float | None) -> str:
        return "—" if value is None else fmt.gb(value)

    @staticmethod
    def _estimator_order() -> tuple[str, ...]:
        return ("table_rule", "rule_of_thumb", "deepspeed", "first_principles")

    def _constant_refs(self, ids) -> list[str]:
        key = tuple(ids)
        if key not in self._refs_of:  # asked again for every page that shows the estimators
            constants = self.c["constants"].filter(pl.col("constant_id").is_in(list(ids)))
            self._refs_of[key] = constants["reference_id"].unique(maintain_order=True).to_list()
        return list(self._refs_of[key])

    def _estimator_refs(self) -> list[str]:
        """The sources of the four estimators: the anchor table's, then each estimator's constants'."""
        refs = self.c["memory_anchors"]["reference_id"].unique(maintain_order=True).to_list()
        for ids in ESTIMATOR_CONSTANTS.values():
            refs += self._constant_refs(ids)
        return refs

    def _known(self, refs: list[str]) -> list[str]:
        """Reference ids in order of first use, without repeats or empties."""
        return [r for r in dict.fromkeys(refs) if r]
