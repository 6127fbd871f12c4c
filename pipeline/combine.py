"""Stage 4, combination: typed source tables -> every derived table, as one catalog.

Every figure the site shows is a cell of a table made here (rendering only looks rows up and
formats them), so that each figure on a page can be traced to a row of a download. The tables are
made by `STEPS`: each names the table it makes, the tables it reads and the function that makes
it; a step sees only the tables it names, so the lineage of the downloads (`made_from`, from
`lineage`) is what the steps really read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, partial

import duckdb
import polars as pl

from pipeline import cache, frame_memo, lookups
from pipeline.estimate import calibration, first_principles, recommend, table_rule, time_accuracy, training
from pipeline.estimate.architecture import parameter_counts
from pipeline.frame_memo import FrameMemo
from pipeline.render import format as fmt
from pipeline.schema import (
    ADVICE,
    COMPARISON,
    COMPARISON_ADVICE,
    COMPARISON_SCALES,
    ESTIMATORS_ORDER,
    MEMORY_CURVE,
    SERVER_MEMORY,
    SOURCE_TABLES,
)


@dataclass(frozen=True)
class Catalog:
    """Every source and derived table as polars frames, plus the rules' constants. Two tables are not
    among `tables`, being 10^7 rows each at scale: `server_fit`, the cross join of the jobs and the
    servers (table_rule.ServerFit, `fits`), and `recommendations`, held as its order (recommend.Ranked,
    `ranked`, in `made`). Each is made when asked for (`catalog[name]`, whole: for tools and tests), piece
    by piece (`pieces`: the downloads) or looked up per page (the renderer); `height` counts any table."""

    tables: dict[str, pl.DataFrame]
    constants: dict[str, float]
    made: dict[str, object] = field(default_factory=dict)  # the steps not held (combine's recipes)

    def __getitem__(self, name: str) -> pl.DataFrame:
        if name in self.tables:
            return self.tables[name]
        if name == "server_fit":
            return self.fits.frame()
        if name == "recommendations":
            return self.ranked.frame()
        raise KeyError(name)

    @cached_property
    def fits(self) -> table_rule.ServerFit:
        """The server_fit table without its rows (made from estimates, servers and gpus)."""
        return table_rule.ServerFit(self.tables["estimates"], self.tables["servers"], self.tables["gpus"])

    @cached_property
    def ranked(self) -> recommend.JobRows:
        """The recommendations table: as its order (recommend.Ranked) as combine made it, or a frame held
        whole (a catalog read back from its downloads) read the same way (recommend.Whole)."""
        if "recommendations" in self.tables:
            return recommend.Whole(self.tables["recommendations"])
        return self.made["recommendations"]

    def height(self, name: str) -> int:
        """A table's row count, without making server_fit's or recommendations' rows."""
        if name in self.tables:
            return self.tables[name].height
        return self.fits.height if name == "server_fit" else self.ranked.height

    def pieces(self, name: str) -> Iterator[pl.DataFrame]:
        """A table's rows in order, in pieces of whole jobs for server_fit and recommendations (one piece
        when small), any other table as its one frame."""
        if name not in self.tables and name in ("server_fit", "recommendations"):
            return self.fits.chunks() if name == "server_fit" else self.ranked.chunks()
        return iter([self.tables[name]])


Tables = Mapping[str, pl.DataFrame]
Constants = Mapping[str, object]


@dataclass(frozen=True)
class Step:
    """One derived table: its name, the tables it is made from (in the order the downloads name
    them; "constants" and "typical_setup" stand for the constants mapping, which holds both) and
    the function of those tables and the constants that makes it."""

    name: str
    inputs: tuple[str, ...]
    make: Callable[..., pl.DataFrame]
    memo: bool = False  # make takes the build's FrameMemo as a third argument (pipeline.frame_memo)
    held: bool = True  # False: make gives an object that makes the rows when asked (Catalog.made), not in tables


# -- the method-comparison article's setups --
# The article (site_templates/articles/method-comparison.md) names a handful of setups by model,
# method, scale and server; editors declare them in sources/comparison_setups.csv, and only those are
# made: every catalog model x method x scale x server would be 45 x 6 x (1 + 2 x 10) = 5 670 rows,
# and the advice table eight times a model x method x server (21 600 rows), of which the article shows
# sixteen, for a download nobody reads and a slower build. An article naming a setup that is not
# declared stops the build with a message naming the setup and that file.
# The comparison's four estimators, as the columns of `comparison` name them.
ESTIMATORS = ESTIMATORS_ORDER
# The calibration columns a measurement must share with a setup to be its measured peak.
SAME_SETUP = ("seq_len", "micro_batch", "gpus", "sharding", "grad_checkpointing")

# -- the memory chart --
GRID_POINTS = 60  # sizes on the curve; the anchor sizes are always added, so the kinks are exact


def size_grid(models: pl.DataFrame, anchors: pl.DataFrame, points: int = GRID_POINTS) -> list[float]:
    """Log-spaced sizes from the smallest to the largest catalog model, plus every anchor size between."""
    sizes = models["params_b"].cast(pl.Float64)
    lo, hi = float(sizes.min()), float(sizes.max())
    step = (math.log(hi) - math.log(lo)) / (points - 1)
    grid = {lo, hi} | {math.exp(math.log(lo) + i * step) for i in range(1, points - 1)}
    grid |= {float(a) for a in anchors["params_b"].to_list() if lo <= a <= hi}
    return sorted(grid)


def table_sizes(models: pl.DataFrame, anchors: pl.DataFrame) -> list[float]:
    """The sizes of the table beside the memory chart: the smallest and largest model and every anchor."""
    sizes = models["params_b"].cast(pl.Float64)
    return sorted({float(sizes.min()), float(sizes.max())} | {float(a) for a in anchors["params_b"].to_list()})


def memory_curve(t: Tables, c: Constants) -> pl.DataFrame:
    """The `memory_curve` table: the table rule (estimate_memory) over the memory chart's grid of
    sizes (`size_grid`) and the sizes of the table beside it (`table_sizes`), one row per size x method;
    `on_chart` and `in_table` say which of the two shows the row."""
    chart = size_grid(t["models"], t["memory_anchors"])
    beside = table_sizes(t["models"], t["memory_anchors"])
    sizes = sorted(set(chart) | set(beside))
    grid = pl.DataFrame({"model_id": [f"grid-{i:04d}" for i in range(len(sizes))], "params_b": sizes})
    curves = table_rule.estimate_memory(grid, t["methods"], t["memory_anchors"], c)
    return (
        curves.with_columns(
            on_chart=pl.col("params_b").is_in(chart),
            in_table=pl.col("params_b").is_in(beside),
        )
        .join(t["methods"].select("method_id", "sort_order"), on="method_id")
        .sort("sort_order", "method_id", "params_b")
        .select(MEMORY_CURVE.columns)
    )


def server_memory(t: Tables, c: Constants) -> pl.DataFrame:
    """The `server_memory` table: each server's total GPU memory (count x one card's) and, where it has
    a price, the price of one GB of it per month."""
    return (
        table_rule.server_memory(t["servers"], t["gpus"])
        .with_columns(rub_per_gb_month=pl.col("price_rub_month") / pl.col("server_memory_gb"))
        .sort("server_id")
        .select(SERVER_MEMORY.columns)
    )


# -- the comparison --
def comparison_setup(method_id: str, scale: str, gpus: int, c: Constants) -> first_principles.Setup:
    """The typical setup of a method on one card, or ZeRO-3 over `gpus` cards."""
    base = first_principles.typical_setup(method_id, c)
    if scale == "card":
        return base
    return replace(base, gpus=gpus, sharding="zero3")


def _setup_cells(setup: first_principles.Setup, fields: tuple[str, ...]) -> dict:
    """A Setup's cells of a comparison table (no LoRA rank or layers for full fine-tuning)."""
    row = {k: getattr(setup, k) for k in fields}
    if setup.is_full:
        row |= {k: None for k in ("lora_rank", "lora_targets") if k in row}
    return row


def measured_setups(calibrated: pl.DataFrame, measurements: pl.DataFrame) -> dict[tuple, str]:
    """(model, method, the SAME_SETUP values) -> the first calibration row with a measured peak in it."""
    rows = calibrated.filter(pl.col("measured_gb").is_not_null() & (pl.col("measured_gb") != 0))
    setups = measurements.select("measurement_id", *SAME_SETUP)
    joined = rows.select("measurement_id", "model_id", "method_id").join(
        setups, on="measurement_id", how="left", maintain_order="left"
    )
    out: dict[tuple, str] = {}
    for r in joined.iter_rows(named=True):
        out.setdefault((r["model_id"], r["method_id"], *(r[k] for k in SAME_SETUP)), r["measurement_id"])
    return out


def measurement_for(measured: dict[tuple, str], model_id: str, method_id: str, setup) -> str | None:
    """The id of a measurement in exactly this setup (`measured_setups`), None if the catalog has none."""
    return measured.get((model_id, method_id, *(getattr(setup, k) for k in SAME_SETUP)))


def _gpus_of(t: Tables, model_id: str, method_id: str, scale: str, server_id: str | None) -> int:
    """Cards of a setup: one, a server's, or the servers' the table rule needs for the task."""
    if scale not in COMPARISON_SCALES:
        raise KeyError(scale)
    if scale == "card":
        return 1
    count = t["servers"].filter(pl.col("server_id") == server_id)["gpu_count"].item()
    if scale == "server":
        return count
    return count * t["server_fit"].row(model_id, method_id, server_id)["servers_needed"]


def _predictions(arch, setup, params_b: float, table_gb: float, c: Constants) -> dict[str, float | None]:
    """Per-card GB of each estimator (None where it says nothing). The table rule and the rule of thumb
    give the memory of the whole task; over several cards it is divided evenly (rule 5)."""
    thumb = calibration.rule_of_thumb_gb(params_b, setup.method, c)
    states = first_principles.deepspeed_model_states(arch, setup)
    return {
        "table_rule": table_gb / setup.gpus,
        "rule_of_thumb": None if thumb is None else thumb / setup.gpus,
        "deepspeed": None if states is None else states / first_principles.GB,
        "first_principles": first_principles.estimate(arch, setup, c).gb()["total"],
    }


def _ratio(over: float | None, under: float | None) -> float | None:
    return None if over is None or under is None else over / under


def comparison(t: Tables, c: Constants) -> pl.DataFrame:
    """The `comparison` table: one row per setup of comparison_setups.csv (but the advice rows) whose
    model (and server) the catalog has: the four estimators' GB per card, the first-principles parts, and a measurement in
    exactly that setup if the catalog has one."""
    archs = first_principles.model_architectures(t["models"])
    params = dict(t["models"].select("model_id", "params_b").iter_rows())
    estimates = {(r["model_id"], r["method_id"]): r for r in t["estimates"].iter_rows(named=True)}
    measured = measured_setups(t["calibration"], t["measurements"])
    servers = set(t["servers"]["server_id"])
    rows = []
    declared = t["comparison_setups"].filter(pl.col("scale") != "advice")
    for model_id, method_id, scale, server_id in declared.select("model_id", "method_id", "scale", "server_id").rows():
        if model_id not in archs or (server_id is not None and server_id not in servers):
            continue
        setup = comparison_setup(method_id, scale, _gpus_of(t, model_id, method_id, scale, server_id), c)
        arch, table = archs[model_id], estimates[(model_id, method_id)]
        p = _predictions(arch, setup, params[model_id], table["memory_gb"], c)
        parts = first_principles.estimate(arch, setup, c).gb()
        states = first_principles.deepspeed_model_states(arch, first_principles.Setup(method="full_amp"))
        rows.append(
            {
                "model_id": model_id,
                "method_id": method_id,
                "scale": scale,
                "server_id": server_id,
                **_setup_cells(setup, COMPARISON_SETUP_FIELDS),
                **{f"{k}_gb": p[k] for k in ESTIMATORS},
                "table_rule_extrapolated": table["extrapolated"],
                **{f"{k}_gb": parts[k] for k in first_principles.BREAKDOWN_COLUMNS},
                "first_principles_bytes_per_param": p["first_principles"] / params[model_id],
                "deepspeed_bytes_per_param": states / parameter_counts(arch).total,
                **{f"first_principles_to_{k}": _ratio(p["first_principles"], p[k]) for k in ESTIMATORS[:3]},
                "measurement_id": measurement_for(measured, model_id, method_id, setup),
            }
        )
    return pl.DataFrame(rows, schema=COMPARISON.polars_schema)


COMPARISON_SETUP_FIELDS = (
    "optimizer",
    "seq_len",
    "micro_batch",
    "gpus",
    "sharding",
    "grad_checkpointing",
    "flash_attention",
    "loss",
    "lora_rank",
    "lora_targets",
)
ADVICE_SETUP_FIELDS = (*COMPARISON_SETUP_FIELDS[:3], "grad_accum", *COMPARISON_SETUP_FIELDS[3:], "fp8")


def advice_setups(method_id: str, gpus: int, c: Constants) -> dict[str, first_principles.Setup]:
    """Each piece of ADVICE applied alone to the typical setup without checkpointing on one card;
    sharding over `gpus` cards, a micro-batch or accumulation comparison_accumulation_steps times larger."""
    base = replace(first_principles.typical_setup(method_id, c), grad_checkpointing=False)
    k = int(c["comparison_accumulation_steps"])
    return {
        "base": base,
        "grad_checkpointing": replace(base, grad_checkpointing=True),
        "zero1": replace(base, gpus=gpus, sharding="zero1"),
        "zero2": replace(base, gpus=gpus, sharding="zero2"),
        "zero3": replace(base, gpus=gpus, sharding="zero3"),
        "fp8": replace(base, fp8=True),
        "micro_batch": replace(base, micro_batch=base.micro_batch * k),
        "grad_accum": replace(base, grad_accum=base.grad_accum * k),
    }


def comparison_advice(t: Tables, c: Constants) -> pl.DataFrame:
    """The `comparison_advice` table: for each "advice" row of comparison_setups.csv whose model and server
    the catalog has, each piece of ADVICE alone: the first-principles total and activations (with the
    loss buffers) per card, their change against the setup without any advice, and the phase that sets the peak."""
    archs = first_principles.model_architectures(t["models"])
    cards = dict(t["servers"].select("server_id", "gpu_count").iter_rows())
    rows = []
    declared = t["comparison_setups"].filter(pl.col("scale") == "advice")
    for model_id, method_id, server_id in declared.select("model_id", "method_id", "server_id").rows():
        if model_id not in archs or server_id not in cards:
            continue
        base, setups = None, advice_setups(method_id, cards[server_id], c)
        for step in ADVICE:
            setup = setups[step]
            breakdown = first_principles.estimate(archs[model_id], setup, c)
            parts = breakdown.gb()
            total, activations = parts["total"], parts["saved_activations"] + parts["loss_buffers"]
            base = base or (total, activations)
            rows.append(
                {
                    "model_id": model_id,
                    "method_id": method_id,
                    "server_id": server_id,
                    "advice": step,
                    **_setup_cells(setup, ADVICE_SETUP_FIELDS),
                    "total_gb": total,
                    "activations_gb": activations,
                    "total_change": None if step == "base" else total / base[0] - 1,
                    "activations_change": None if step == "base" else activations / base[1] - 1,
                    "peak_phase": breakdown.phase,
                }
            )
    return pl.DataFrame(rows, schema=COMPARISON_ADVICE.polars_schema)


# -- the steps --
def _recommendations(t: Tables, c: Constants, memo: FrameMemo | None = None) -> pl.DataFrame:
    spreads = recommend.plan_spreads(t["estimator_range"])
    band = lookups.time_band(t["time_summary"], t["time_calibration"])
    return recommend.rank_plans(t["models"], t["methods"], t["servers"], t["gpus"], c, spreads, band, memo)


def _memory_breakdown(t: Tables, c: Constants, memo: FrameMemo | None = None) -> pl.DataFrame:
    """Through `memo` by what the table is made from: the recommendations only through each job's cards,
    which a price edit seldom changes (0.3 s of a new process's build when made)."""
    cards = recommend.job_gpus(t["recommendations"].leading)

    def made() -> pl.DataFrame:
        return first_principles.memory_breakdown_table(t["models"], t["methods"], t["estimates"], c, cards)

    parts = [frame_memo.frame_digest(t[name]) for name in ("models", "methods", "estimates")]
    parts += [frame_memo.mapping_digest(c), repr(sorted(cards.items()))]
    return frame_memo.made_now("memory_breakdown", parts, made, memo)


def _calibration(t: Tables, c: Constants) -> pl.DataFrame:
    return calibration.calibration(t["measurements"], t["models"], t["estimates"], t["gpus"], c)


def _pretraining(t: Tables, c: Constants) -> pl.DataFrame:
    speed = lookups.time_band(t["time_summary"], t["time_calibration"]).speed
    table = training.pretraining_table(t["models"], t["gpus"], t["servers"], t["legacy_gpu_counts"], c, speed)
    return recommend.without_network_price(table, t["servers"])


STEPS: tuple[Step, ...] = (
    Step(
        "estimates",
        ("memory_anchors", "models", "methods", "constants"),
        lambda t, c: table_rule.estimate_memory(t["models"], t["methods"], t["memory_anchors"], c),
    ),
    Step("gpu_fit", ("estimates", "gpus"), lambda t, c: table_rule.gpu_fit(t["estimates"], t["gpus"])),
    Step(
        "server_fit",
        ("estimates", "servers", "gpus"),
        lambda t, c: table_rule.ServerFit(t["estimates"], t["servers"], t["gpus"]),
        held=False,
    ),
    Step("calibration", ("measurements", "models", "estimates", "gpus", "constants"), _calibration),
    Step(
        "calibration_summary",
        ("calibration",),
        lambda t, c: calibration.summary(t["calibration"], c["calibration_within"]),
    ),
    Step(
        "calibration_breakdown",
        ("calibration",),
        lambda t, c: calibration.breakdown(t["calibration"], c["calibration_within"]),
    ),
    Step("estimator_range", ("calibration",), lambda t, c: calibration.estimator_range(t["calibration"])),
    Step(
        "calibration_out_of_sample",
        ("calibration",),
        lambda t, c: calibration.out_of_sample(t["calibration"], c["calibration_within"]),
    ),
    Step(
        "estimator_constants",
        ("constants", "calibration", "measurements", "models"),
        lambda t, c: calibration.estimator_constants(t["calibration"], t["measurements"], t["models"], t["constants"]),
    ),
    Step(
        "time_calibration",
        ("throughput", "models", "gpus", "references", "constants"),
        lambda t, c: time_accuracy.time_calibration(t["throughput"], t["models"], t["gpus"], t["references"], c),
    ),
    Step(
        "time_summary",
        ("time_calibration",),
        lambda t, c: time_accuracy.time_summary(t["time_calibration"], c["calibration_within"]),
    ),
    Step(
        "pretraining",
        ("models", "gpus", "servers", "legacy_gpu_counts", "constants", "time_summary", "time_calibration"),
        _pretraining,
    ),
    Step(
        "recommendations",
        (
            "models",
            "methods",
            "servers",
            "gpus",
            "constants",
            "typical_setup",
            "estimator_range",
            "time_summary",
            "time_calibration",
        ),
        _recommendations,
        memo=True,
        held=False,
    ),
    Step(
        "memory_breakdown",
        ("models", "methods", "constants", "typical_setup", "estimates", "recommendations"),
        _memory_breakdown,
        memo=True,
    ),
    Step("server_memory", ("servers", "gpus"), server_memory),
    Step("memory_curve", ("memory_anchors", "models", "methods", "constants"), memory_curve),
    Step(
        "comparison",
        (
            "comparison_setups",
            "models",
            "servers",
            "constants",
            "typical_setup",
            "estimates",
            "server_fit",
            "calibration",
            "measurements",
        ),
        comparison,
    ),
    Step(
        "comparison_advice", ("comparison_setups", "models", "servers", "constants", "typical_setup"), comparison_advice
    ),
)


def lineage() -> dict[str, tuple[str, ...]]:
    """Each derived table -> the tables its step reads (the `made_from` of the downloads)."""
    return {step.name: step.inputs for step in STEPS}


def filled_memory_notes(gpus: pl.DataFrame) -> pl.DataFrame:
    """gpus with `{memory_gb}` in memory_note_ru replaced by the row's memory (Russian format): the
    downloads, the pages and the CLI all carry the text a reader sees, never the placeholder."""
    notes = [fmt.memory_note(n, m) for n, m in gpus.select("memory_note_ru", "memory_gb").iter_rows()]
    return gpus.with_columns(pl.Series("memory_note_ru", notes, dtype=gpus.schema["memory_note_ru"]))


def combine(
    con: duckdb.DuckDBPyConnection,
    memo: FrameMemo | None = None,
    kept: dict | None = None,
    digests: Mapping[str, str] | None = None,
) -> Catalog:
    """Read the typed tables and make every derived table, step by step (`STEPS`); `memo`: where the
    costly steps find what an earlier build made from the same inputs (pipeline.frame_memo). `kept`
    (a warm process's `Warm.steps`) with `digests` (the SHA-256 of each source file as read, by file
    name): each table a step made in the last build, by its lineage key (`lineage_keys`), so that a step
    none of whose sources changed since is not made again (a price edit leaves the calibration alone);
    with `memo` too, such tables are also kept in the user cache by that key (`LINEAGE_NAMESPACE`), for
    the next process."""
    tables = {t.name: con.sql(f'SELECT * FROM "{t.name}"').pl() for t in SOURCE_TABLES}
    tables["gpus"] = filled_memory_notes(tables["gpus"])
    constants = dict(tables["constants"].select("constant_id", "value").iter_rows())
    constants |= first_principles.typical_constants(tables["typical_setup"])  # the typical setup, as typical_<setting>
    keys = lineage_keys(digests) if kept is not None and digests is not None else {}
    by_lineage = None if memo is None or not keys else memo.sibling(LINEAGE_NAMESPACE, LINEAGE_KEEP)
    recipes: dict[str, object] = {}  # the steps not held (server_fit, recommendations): what later steps see
    for step in STEPS:
        seen = {name: tables[name] if name in tables else recipes[name] for name in step.inputs}
        key = keys.get(step.name) if step.held else None
        if key is not None and kept.get(step.name, (None,))[0] == key:
            made = kept[step.name][1]
        elif step.memo:
            made = step.make(seen, constants, memo)
        else:
            made = frame_memo.made_now(
                step.name, [key], partial(step.make, seen, constants), None if key is None else by_lineage
            )
        if key is not None:
            kept[step.name] = (key, made)
        (tables if step.held else recipes)[step.name] = made
    # server_fit's recipe is made again when asked for (Catalog.fits: two small sorts), from the tables
    return Catalog(tables, constants, {"recommendations": recipes["recommendations"]})


# The user cache's part for the tables by lineage (a new process's build takes those its edit did not
# reach), apart from the plans' frames: about twenty small tables a catalog.
LINEAGE_NAMESPACE = "frames-by-lineage"
LINEAGE_KEEP = 64


def lineage_keys(digests: Mapping[str, str]) -> dict[str, str]:
    """Each derived table's key by its lineage: the digests of the source files it is made from,
    through the steps between (every step also reads the constants mapping, which holds the constants
    and the typical setup); a table made from a file that was not read has none. Within one process
    (whose code does not change) the same key means the same table."""
    keys: dict[str, str | None] = {t.name: digests.get(t.file) for t in SOURCE_TABLES}
    mapping = [keys["constants"], keys["typical_setup"]]
    for step in STEPS:
        parts = [keys.get(name) for name in step.inputs] + mapping
        keys[step.name] = None if None in parts else cache.make_key("step", step.name, *parts)
    return {step.name: key for step in STEPS if (key := keys[step.name]) is not None}
