"""Figures and tables of the method-comparison article: the four ways of estimating side by side.

The four estimators are the anchor-table rule (DESIGN.md rules 1-2, the `estimates` table),
the earlier article's rule of thumb (`calibration.rule_of_thumb_gb`), DeepSpeed's model-states
formula (`memory.deepspeed_model_states`) and the first-principles estimator (`memory.estimate`).
A setup is named in templates by a model, a method and a scale: "card" (one card, no
sharding), "server" (ZeRO-3 over the cards of one catalog server) or "servers" (ZeRO-3 over as
many such servers as the table rule needs). Sequence length, batch, checkpointing and LoRA rank
are the typical setup of constants.csv. Russian words come from labels.toml [comparison].
"""

from __future__ import annotations

from dataclasses import asdict, replace
from functools import cached_property

import polars as pl
from markupsafe import Markup

from pipeline.combine import Catalog
from pipeline.estimate import calibration, first_principles
from pipeline.estimate.architecture import parameter_counts
from pipeline.render import format as fmt
from pipeline.render import russian
from pipeline.render.view import TableView
from pipeline.render.views.articles import Tables
from pipeline.render.views.estimator import signed_percent

SCALES = ("card", "server", "servers")

# The seed's practical advice, as changes to a setup without any of it (one card, no checkpointing).
ADVICE = ("base", "grad_checkpointing", "zero1", "zero2", "zero3", "fp8", "micro_batch", "grad_accum")

# The constants each estimator rests on, for the sources line under the tables.
ESTIMATOR_CONSTANTS = {
    "table_rule": (),
    "rule_of_thumb": ("legacy_full_bytes_per_param", "legacy_lora_bytes_per_param", "legacy_qlora_7b_gb"),
    "deepspeed": ("zero3_gather_bytes_per_param",),
    "first_principles": first_principles.CONSTANTS,
}


class Comparison:
    """Table builders and inline figures for the comparison article (`cmp` in article templates)."""

    def __init__(self, catalog: Catalog, labels: dict, tables: Tables, estimator):
        self.c, self.labels, self.t, self.e = catalog, labels, tables, estimator
        self.L = labels["comparison"]

    # -- data, built on first use (the renderer makes a Comparison for every build) --
    @cached_property
    def constants(self) -> dict[str, float]:
        return self.c.constants

    @cached_property
    def archs(self) -> dict[str, first_principles.Architecture]:
        return first_principles.model_architectures(self.c["models"])

    @cached_property
    def _calibration(self) -> dict[str, dict]:
        return {r["measurement_id"]: r for r in self.c["calibration"].iter_rows(named=True)}

    @cached_property
    def _measurements(self) -> dict[str, dict]:
        return {r["measurement_id"]: r for r in self.c["measurements"].iter_rows(named=True)}

    # -- setups --
    def gpus(self, model_id: str, method_id: str, scale: str = "card", server: str | None = None) -> int:
        """Cards of a setup: one, a server's, or the servers' the table rule needs for the task."""
        if scale not in SCALES:
            raise KeyError(scale)
        if scale == "card":
            return 1
        count = self.t.server(server)["gpu_count"]
        if scale == "server":
            return count
        return count * self.t.server_fit_row(model_id, method_id, server)["servers_needed"]

    def setup(
        self, model_id: str, method_id: str, scale: str = "card", server: str | None = None
    ) -> first_principles.Setup:
        base = first_principles.typical_setup(method_id, self.constants)
        if scale == "card":
            return base
        return replace(base, gpus=self.gpus(model_id, method_id, scale, server), sharding="zero3")

    def predictions(self, model_id: str, method_id: str, scale: str = "card", server: str | None = None) -> dict:
        """Per-card GB of each estimator for one setup (None where an estimator says nothing).

        The table rule and the rule of thumb give the memory of the whole task; spread over
        several cards they are divided evenly, as the site's card counts assume (rule 5).
        """
        setup = self.setup(model_id, method_id, scale, server)
        arch = self.archs[model_id]
        params_b = self.t.model(model_id)["params_b"]
        thumb = calibration.rule_of_thumb_gb(params_b, method_id, self.constants)
        states = first_principles.deepspeed_model_states(arch, setup)
        return {
            "table_rule": self.t.estimate(model_id, method_id)["memory_gb"] / setup.gpus,
            "rule_of_thumb": None if thumb is None else thumb / setup.gpus,
            "deepspeed": None if states is None else states / first_principles.GB,
            "first_principles": first_principles.estimate(arch, setup, self.constants).gb()["total"],
        }

    def measured_for(self, model_id: str, method_id: str, setup: first_principles.Setup) -> dict | None:
        """A calibration row measured in exactly this setup, if the catalog has one."""
        keys = ("seq_len", "micro_batch", "gpus", "sharding", "grad_checkpointing")
        for row in self._calibration.values():
            m = self._measurements[row["measurement_id"]]
            same = all(m[k] == getattr(setup, k) for k in keys)
            if row["model_id"] == model_id and row["method_id"] == method_id and same and row["measured_gb"]:
                return row
        return None

    # -- inline figures --
    def link(self, model_id: str, name: str = "display_name") -> Markup:
        """A Markdown link to a model's page, its name made inert."""
        return Markup(f"[{fmt.md_inline(self.t.model(model_id)[name])}](models/{model_id}.html)")

    def deepspeed_bytes_per_param(self, model_id: str) -> str:
        """DeepSpeed's model states per parameter on one card without sharding, bytes."""
        arch = self.archs[model_id]
        states = first_principles.deepspeed_model_states(arch, first_principles.Setup(method="full_amp"))
        return fmt.number(states / parameter_counts(arch).total, 1)

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
        setup = self.setup(model_id, method_id, scale, server)
        return fmt.gb(first_principles.estimate(self.archs[model_id], setup, self.constants).gb()[part])

    def cards(self, model_id: str, method_id: str, scale: str = "card", server: str | None = None) -> str:
        return fmt.integer(self.gpus(model_id, method_id, scale, server))

    def ratio(  # noqa: PLR0913
        self, model_id: str, method_id: str, over: str, under: str, scale: str = "card", server: str | None = None
    ) -> str:
        """How many times one estimator's figure is the other's, one decimal ("1,2")."""
        p = self.predictions(model_id, method_id, scale, server)
        return fmt.number(p[over] / p[under], 1)

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
        total = self.predictions(model_id, method_id, scale, server)["first_principles"]
        return fmt.number(total / self.t.model(model_id)["params_b"], 1)

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
        activations_change, activations_saving."""
        rows = self._advice(model_id, method_id, server)
        return self._advice_value(rows, step, what)

    def advice_steps(self) -> russian.Shown:
        return russian.Shown(fmt.integer(self.constants["comparison_accumulation_steps"]))

    # -- tables --
    def estimators_table(self) -> TableView:
        """What each way of estimating takes into account."""
        L = self.L  # noqa: N806
        inputs = ("method", "size", "seq_batch", "checkpointing", "sharding", "optimizer", "activations")
        rows = []
        for name in self._estimator_order():
            rows.append([self.e.estimator_name(name), *L[f"takes_{name}"]])
        refs = ["llama-factory-hw", "article-gpu-count", "deepspeed-memory", "transformer-math-101"]
        return TableView(
            [L["estimator"]] + [L[f"takes_{k}"] for k in inputs],
            rows,
            self._known(refs + self._constant_refs(first_principles.CONSTANTS)),
            ["memory_anchors", "constants", "calibration_summary"],
            [False] * (len(inputs) + 1),
        )

    def setups_table(self, setups: list[tuple[str, str, str]], server: str) -> TableView:
        """Each setup's per-card GB by the four estimators, the measured peak if any, and whether it
        fits one card of the server's GPU (by the table rule / from first principles)."""
        L = self.L  # noqa: N806
        gpu = self.t.gpu(self.t.server(server)["gpu_id"])
        rows, models = [], []
        for model_id, method_id, scale in setups:
            setup = self.setup(model_id, method_id, scale, server)
            p = self.predictions(model_id, method_id, scale, server)
            measured = self.measured_for(model_id, method_id, setup)
            fit = [L["yes"] if p[k] <= gpu["memory_gb"] else L["no"] for k in ("table_rule", "first_principles")]
            table_rule = fmt.gb(p["table_rule"])
            if self.t.estimate(model_id, method_id)["extrapolated"]:
                table_rule = L["extrapolated_cell"].format(gb=table_rule)
            rows.append(
                [
                    self.t.model_link(model_id, "short_name"),
                    self.t.method_link(method_id, "short_name_ru"),
                    self.e.setup_text(self._setup_row(setup)),
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
            ["estimates", "memory_breakdown", "constants", "models", "servers"],
            [False, False, False, True, True, True, True, True, False],
        )

    def parts_table(self, setups: list[tuple[str, str, str]], server: str) -> TableView:
        """The first-principles breakdown of each setup, part by part, GB per card."""
        E = self.labels["estimator"]  # noqa: N806
        rows, models = [], []
        for model_id, method_id, scale in setups:
            setup = self.setup(model_id, method_id, scale, server)
            parts = first_principles.estimate(self.archs[model_id], setup, self.constants).gb()
            rows.append(
                [
                    self.t.model_link(model_id, "short_name"),
                    self.t.method_link(method_id, "short_name_ru"),
                    fmt.integer(setup.gpus),
                    *(fmt.gb(parts[p]) for p in first_principles.BREAKDOWN_COLUMNS),
                    fmt.gb(parts["total"]),
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
            ["memory_breakdown", "constants", "models"],
            [False, False] + [True] * (len(first_principles.BREAKDOWN_COLUMNS) + 2),
        )

    def measured_table(self, measurements: list[str]) -> TableView:
        """Published measurements beside the four estimators' predictions and errors."""
        L, E = self.L, self.labels["estimator"]  # noqa: N806
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
        L = self.L  # noqa: N806
        gpu = self.t.gpu(self.t.server(server)["gpu_id"])
        steps = self._advice(model_id, method_id, server)
        rows = []
        for step in ADVICE:
            rows.append(
                [
                    L[f"advice_{step}"],
                    self._promise(step),
                    self.e.setup_text(self._setup_row(steps[step]["setup"])) + self._fp8_text(steps[step]["setup"]),
                    self._advice_value(steps, step, "total"),
                    self._advice_value(steps, step, "change"),
                    self._advice_value(steps, step, "activations"),
                    L["yes"] if steps[step]["total"] <= gpu["memory_gb"] else L["no"],
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
            "article-gpu-count",
            *self._constant_refs(first_principles.CONSTANTS),
            self.t.model(model_id)["arch_reference_id"],
        ]
        refs.append(gpu["reference_id"])
        return TableView(
            headers,
            rows,
            self._known(refs),
            ["memory_breakdown", "constants", "models"],
            [False, False, False, True, True, True, False],
        )

    # -- helpers --
    def _advice(self, model_id: str, method_id: str, server: str) -> dict[str, dict]:
        key = (model_id, method_id, server)
        cache = self.__dict__.setdefault("_advice_cache", {})
        if key in cache:
            return cache[key]
        base = replace(first_principles.typical_setup(method_id, self.constants), grad_checkpointing=False)
        n = self.t.server(server)["gpu_count"]
        k = int(self.constants["comparison_accumulation_steps"])
        setups = {
            "base": base,
            "grad_checkpointing": replace(base, grad_checkpointing=True),
            "zero1": replace(base, gpus=n, sharding="zero1"),
            "zero2": replace(base, gpus=n, sharding="zero2"),
            "zero3": replace(base, gpus=n, sharding="zero3"),
            "fp8": replace(base, fp8=True),
            "micro_batch": replace(base, micro_batch=base.micro_batch * k),
            "grad_accum": replace(base, grad_accum=base.grad_accum * k),
        }
        out = {}
        for step, setup in setups.items():
            parts = first_principles.estimate(self.archs[model_id], setup, self.constants).gb()
            out[step] = {
                "setup": setup,
                "total": parts["total"],
                "activations": parts["saved_activations"] + parts["loss_buffers"],
            }
        cache[key] = out
        return out

    def _advice_value(self, rows: dict[str, dict], step: str, what: str) -> str:
        row, base = rows[step], rows["base"]
        if what == "total":
            return fmt.gb(row["total"])
        if what == "activations":
            return fmt.gb(row["activations"])
        if step == "base":
            return "—"
        if what == "change":
            return signed_percent(row["total"] / base["total"] - 1)
        if what == "activations_change":
            return signed_percent(row["activations"] / base["activations"] - 1)
        if what == "saving":  # what the advice takes off the total, percent without a sign
            return fmt.number((1 - row["total"] / base["total"]) * 100, 0)
        if what == "activations_saving":
            return fmt.number((1 - row["activations"] / base["activations"]) * 100, 0)
        raise KeyError(what)

    def _promise(self, step: str) -> str:
        L, c = self.L, self.constants  # noqa: N806
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

    def _fp8_text(self, setup: first_principles.Setup) -> str:
        return self.L["setup_fp8"] if setup.fp8 else ""

    @staticmethod
    def _setup_row(setup: first_principles.Setup) -> dict:
        """A Setup in the shape of a measurements row, for `EstimatorTables.setup_text`."""
        row = asdict(setup)
        if setup.is_full:
            row["lora_rank"] = row["lora_targets"] = None
        return row

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
        constants = self.c["constants"].filter(pl.col("constant_id").is_in(list(ids)))
        return constants["reference_id"].unique(maintain_order=True).to_list()

    def _estimator_refs(self) -> list[str]:
        refs = self.c["memory_anchors"]["reference_id"].unique(maintain_order=True).to_list()
        for ids in ESTIMATOR_CONSTANTS.values():
            refs += self._constant_refs(ids)
        return refs + ["deepspeed-memory"]

    def _known(self, refs: list[str]) -> list[str]:
        """Reference ids in order of first use, without repeats or empties."""
        return [r for r in dict.fromkeys(refs) if r]
