"""Rendering only formats: every figure is a cell of a derived table made by pipeline/combine.py.

(a) No module of pipeline/render calls an estimator of pipeline/estimate (constants and option
names may be imported). (b) Every figure of the method-comparison article is the formatted value
of a row of comparison.csv or comparison_advice.csv. (c) The comparison table's values are what
the first-principles estimator gives for those setups. Plus the lineage read from combine's steps.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from conftest import ROOT
from pipeline.estimate import calibration
from pipeline.estimate import first_principles as memory
from pipeline.render import format as fmt
from pipeline.render.views.estimator import signed_percent

SERVER = "hgx-h200-8x"
# Calls into pipeline.estimate a renderer may make: the architectures and the typical setup handed to the
# calculator's script (which recomputes in the browser), and the parsing of a measurement's techniques.
ALLOWED_CALLS = {
    "pipeline.estimate.first_principles.model_architectures",
    "pipeline.estimate.first_principles.shape_references",
    "pipeline.estimate.first_principles.borrowed_shapes",  # which named model a generic size takes its shape from
    "pipeline.estimate.first_principles.typical_setup",
    "pipeline.estimate.architecture.architecture_from_row",
    "pipeline.estimate.calibration.techniques",
}
# The estimators, named so that a test failure says which one came back.
ESTIMATORS = {
    "pipeline.estimate.first_principles.estimate",
    "pipeline.estimate.first_principles.deepspeed_model_states",
    "pipeline.estimate.first_principles.memory_breakdown_table",
    "pipeline.estimate.table_rule.estimate_memory",
    "pipeline.estimate.table_rule.server_memory",
    "pipeline.estimate.table_rule.server_fit",
    "pipeline.estimate.recommend.best",
    "pipeline.estimate.recommend.spread_of",
    "pipeline.estimate.calibration.rule_of_thumb_gb",
}


# -- (a) the import boundary --
def is_module(name: str | None) -> bool:
    """Whether a qualified name is a module (`first_principles`), not a constant (`CONFIG_KEYS.items()`)."""
    if name is None:
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def estimate_calls(source: str) -> list[str]:
    """The qualified names of the pipeline.estimate functions a module's source calls."""
    tree = ast.parse(source)
    names: dict[str, str] = {}  # local name -> qualified name in pipeline.estimate
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pipeline.estimate"):
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pipeline.estimate"):
                    names[alias.asname or alias.name] = alias.name
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in names:
            calls.append(names[func.id])
        elif (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and is_module(names.get(func.value.id))
        ):
            calls.append(f"{names[func.value.id]}.{func.attr}")
    return calls


def test_the_boundary_check_sees_every_way_of_calling():
    source = (
        "from pipeline.estimate import first_principles as fp, table_rule\n"
        "from pipeline.estimate.recommend import best\n"
        "import pipeline.estimate.calibration as cal\n"
        "from pipeline.estimate.first_principles import GB, BREAKDOWN_COLUMNS\n"
        "fp.estimate(a, s, c); table_rule.server_memory(x, y); best(r); cal.rule_of_thumb_gb(1, 'lora', c)\n"
        "fp.typical_setup('lora', c); print(GB, BREAKDOWN_COLUMNS, fp.OPTIMIZERS)\n"
    )
    assert estimate_calls(source) == [
        "pipeline.estimate.first_principles.estimate",
        "pipeline.estimate.table_rule.server_memory",
        "pipeline.estimate.recommend.best",
        "pipeline.estimate.calibration.rule_of_thumb_gb",
        "pipeline.estimate.first_principles.typical_setup",
    ]


def test_render_calls_no_estimator():
    found = {}
    for path in sorted((ROOT / "pipeline" / "render").rglob("*.py")):
        calls = [c for c in estimate_calls(path.read_text(encoding="utf-8")) if c not in ALLOWED_CALLS]
        if calls:
            found[path.relative_to(ROOT).as_posix()] = calls
    assert found == {}, {k: [c for c in v if c in ESTIMATORS] or v for k, v in found.items()}


# -- (b) the comparison article against its downloads --
@pytest.fixture(scope="module")
def article(built) -> str:
    return (built / "markdown" / "method-comparison.md").read_text(encoding="utf-8").replace("\xa0", " ")


@pytest.fixture(scope="module")
def downloads(built) -> dict[str, pl.DataFrame]:
    data = built / "site" / "data"
    return {name: pl.read_csv(data / f"{name}.csv") for name in ("comparison", "comparison_advice", "gpus", "servers")}


def shown(text: str) -> str:
    return text.replace("\xa0", " ")


def gb(value: float | None) -> str:
    return "—" if value is None else shown(fmt.gb(value))


def table_rows(markdown: str, width: int) -> list[list[str]]:
    """The cells of every Markdown table row with this many cells (header and rule lines left out)."""
    rows = []
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == width and not set(line) <= set("|-: "):
            rows.append(cells)
    return rows


def gpu_memory(downloads) -> float:
    gpu_id = downloads["servers"].filter(pl.col("server_id") == SERVER)["gpu_id"].item()
    return downloads["gpus"].filter(pl.col("gpu_id") == gpu_id)["memory_gb"].item()


def test_setups_table_is_the_comparison_download(article, downloads):
    """Each row of the setups table: the four per-card figures and the fit, from one row of comparison.csv."""
    memory_gb = gpu_memory(downloads)
    expected = set()
    for r in downloads["comparison"].iter_rows(named=True):
        table = gb(r["table_rule_gb"]) + (" (экстраполяция)" if r["table_rule_extrapolated"] else "")
        fits = " / ".join("да" if r[f"{k}_gb"] <= memory_gb else "нет" for k in ("table_rule", "first_principles"))
        figures = (table, gb(r["rule_of_thumb_gb"]), gb(r["deepspeed_gb"]), gb(r["first_principles_gb"]))
        expected.add((f"карт: {fmt.integer(r['gpus'])},", *figures, "нет замера", fits))
    rows = [r for r in table_rows(article, 9) if "токенов" in r[2]]
    assert len(rows) == downloads["comparison"].height == 7
    page = set()
    for r in rows:
        [cards] = re.findall(r"карт: [\d ]+,", r[2])
        page.add((cards, *r[3:9]))
    assert page == expected


def test_parts_table_is_the_comparison_download(article, downloads):
    parts = [f"{p}_gb" for p in memory.BREAKDOWN_COLUMNS] + ["first_principles_gb"]
    expected = {
        (fmt.integer(r["gpus"]), *(gb(r[p]) for p in parts)) for r in downloads["comparison"].iter_rows(named=True)
    }
    rows = [tuple(r[2:]) for r in table_rows(article, 11) if r[2].replace(" ", "").isdigit()]
    assert len(rows) == 7
    assert set(rows) == expected


def advice_rows(downloads, method_id: str) -> dict[str, dict]:
    frame = downloads["comparison_advice"].filter((pl.col("method_id") == method_id) & (pl.col("server_id") == SERVER))
    return {r["advice"]: r for r in frame.filter(pl.col("model_id") == "llama-3-1-8b").iter_rows(named=True)}


def saving(share: float) -> str:
    return fmt.number((0.0 - share) * 100, 0)


def test_advice_table_is_the_advice_download(article, downloads):
    memory_gb = gpu_memory(downloads)
    rows = advice_rows(downloads, "full_amp")
    page = [
        r[3:]
        for r in table_rows(article, 7)
        if r[0].startswith(("Исходная", "Контрольные", "Шардир", "Обуч", "Бол", "Тот"))
    ]
    expected = [
        [
            gb(r["total_gb"]),
            "—" if r["total_change"] is None else signed_percent(r["total_change"]),
            gb(r["activations_gb"]),
            "да" if r["total_gb"] <= memory_gb else "нет",
        ]
        for r in rows.values()
    ]
    assert len(page) == 8 and page == expected


def test_inline_figures_are_the_downloads(article, downloads):
    """The prose's figures: each «по опорной таблице … из первых принципов …» run, the parts, the ratios
    and the advice percentages, all formatted from comparison.csv and comparison_advice.csv."""
    by_key = {(r["model_id"], r["method_id"], r["scale"]): r for r in downloads["comparison"].iter_rows(named=True)}
    runs = re.findall(
        r"по опорной таблице ([\d ,]+) ГБ, (?:по популярному правилу ([\d ,]+) ГБ, )?"
        r"(?:по формуле DeepSpeed ([\d ,]+) ГБ, )?из первых принципов ([\d ,]+) ГБ",
        article,
    )
    assert len(runs) == 4
    table_of = {gb(r["table_rule_gb"]): r for r in by_key.values()}
    for table, thumb, deepspeed, first in runs:
        r = table_of[table]
        assert (thumb, deepspeed, first) == tuple(
            "" if r[f"{k}_gb"] is None else gb(r[f"{k}_gb"]) for k in ("rule_of_thumb", "deepspeed", "first_principles")
        )
    m8_full, m8_q = by_key[("llama-3-1-8b", "full_amp", "card")], by_key[("llama-3-1-8b", "qlora_4bit", "card")]
    assert f"это {gb(m8_full['optimizer_gb'])} ГБ из {gb(m8_full['first_principles_gb'])}" in article
    assert f"занимает {gb(m8_q['logits_gb'])} ГБ при любой разрядности базы" in article
    assert f"ГБ ({fmt.number(m8_full['first_principles_bytes_per_param'], 1)} байт" in article  # байт, байта
    assert f"Без шардирования это {fmt.number(m8_full['deepspeed_bytes_per_param'], 1)} байт" in article
    assert f"занижает её в {fmt.number(m8_full['first_principles_to_rule_of_thumb'], 1)} раз" in article
    assert f"ГБ, в {fmt.number(m8_q['first_principles_to_table_rule'], 1)} раз" in article
    full, lora = advice_rows(downloads, "full_amp"), advice_rows(downloads, "lora")
    assert f"с {gb(full['base']['total_gb'])} до {gb(full['zero3']['total_gb'])} ГБ на карту" in article
    # Checkpointing takes nothing off a run that peaks at the optimizer step: the article says so and why.
    assert full["base"]["peak_phase"] == "optimizer_step" and full["grad_checkpointing"]["total_change"] == 0
    assert "Контрольные точки при такой длине памяти не экономят: пик приходится на шаг оптимизатора" in article
    assert "но всю память не сокращают вовсе: при длине 2 048 и микробатче 1 пик полного" in article
    assert "экономят только" not in article and "лишь на 0 %" not in article
    assert f"они экономят уже {saving(lora['grad_checkpointing']['total_change'])} % всей памяти" in article
    zero = [saving(full[k]["total_change"]) for k in ("zero1", "zero2", "zero3")]
    assert f"снимает с каждой карты {zero[0]} % памяти, ZeRO-2 — {zero[1]} %, ZeRO-3/FSDP — {zero[2]} %" in article
    assert f"а увеличивает её: {signed_percent(full['fp8']['total_change'])} %" in article
    change = signed_percent(full["micro_batch"]["total_change"])
    assert f"стоил бы {gb(full['micro_batch']['total_gb'])} ГБ ({change} %)" in article


# -- (c) the comparison table against the estimator --
def typical(catalog, method: str, **changes) -> memory.Setup:
    return replace(memory.typical_setup(method, catalog.constants), **changes)


@pytest.mark.parametrize(
    ("model_id", "method_id", "scale", "setup_changes", "first_principles_gb", "deepspeed_gb"),
    [
        ("llama-3-1-8b", "full_amp", "card", {}, 169.135486208, 160.60522496),
        ("llama-3-1-8b", "qlora_4bit", "card", {}, 11.956749568, None),
        ("llama-3-1-70b", "full_amp", "server", {"gpus": 8, "sharding": "zero3"}, 186.273479552, 162.948532224),
    ],
)
def test_comparison_rows_are_the_estimators(  # noqa: PLR0913
    catalog, model_id, method_id, scale, setup_changes, first_principles_gb, deepspeed_gb
):
    rows = catalog["comparison"].filter(
        (pl.col("model_id") == model_id) & (pl.col("method_id") == method_id) & (pl.col("scale") == scale)
    )
    row = rows.row(0, named=True)
    arch = memory.model_architectures(catalog["models"])[model_id]
    setup = typical(catalog, method_id, **setup_changes)
    parts = memory.estimate(arch, setup, catalog.constants).gb()
    assert row["first_principles_gb"] == parts["total"] == pytest.approx(first_principles_gb, rel=1e-12)
    assert all(row[f"{p}_gb"] == parts[p] for p in memory.BREAKDOWN_COLUMNS)
    states = memory.deepspeed_model_states(arch, setup)
    assert row["deepspeed_gb"] == (None if states is None else states / memory.GB)
    if deepspeed_gb is not None:
        assert row["deepspeed_gb"] == pytest.approx(deepspeed_gb, rel=1e-12)
    params_b = catalog["models"].filter(pl.col("model_id") == model_id)["params_b"].item()
    thumb = calibration.rule_of_thumb_gb(params_b, method_id, catalog.constants)
    assert row["rule_of_thumb_gb"] == thumb / setup.gpus
    assert row["gpus"] == setup.gpus and row["sharding"] == setup.sharding


def test_advice_rows_are_the_estimator(catalog):
    """ZeRO-3 over the server's 8 cards and FP8, each alone, for Llama 3.1 8B full without checkpointing."""
    arch = memory.model_architectures(catalog["models"])["llama-3-1-8b"]
    base = typical(catalog, "full_amp", grad_checkpointing=False)
    rows = {
        r["advice"]: r
        for r in catalog["comparison_advice"].filter(pl.col("method_id") == "full_amp").iter_rows(named=True)
    }
    base_gb = memory.estimate(arch, base, catalog.constants).gb()["total"]
    for advice, setup in (("zero3", replace(base, gpus=8, sharding="zero3")), ("fp8", replace(base, fp8=True))):
        total = memory.estimate(arch, setup, catalog.constants).gb()["total"]
        assert rows[advice]["total_gb"] == total
        assert rows[advice]["total_change"] == total / base_gb - 1
    assert rows["zero3"]["total_gb"] == pytest.approx(40.432574336, rel=1e-12)
    assert rows["base"]["total_change"] is None
    # The peak's phase, as the estimator says: without checkpointing the full run still peaks at the
    # optimizer step, so checkpointing takes nothing off the whole card (the article says why).
    assert rows["base"]["peak_phase"] == memory.estimate(arch, base, catalog.constants).phase == "optimizer_step"
    assert rows["grad_checkpointing"]["total_change"] == 0.0
    assert rows["zero3"]["peak_phase"] == "backward"


# -- the lineage --
def test_made_from_is_what_combine_steps_read():
    from pipeline.combine import STEPS, lineage
    from pipeline.publish.downloads import MADE_FROM
    from pipeline.schema import DERIVED_TABLES, TABLES_BY_NAME

    assert [s.name for s in STEPS] == list(lineage())
    assert {s.name for s in STEPS} == {t.name for t in DERIVED_TABLES}
    for name, inputs in lineage().items():
        if "reference_id" not in TABLES_BY_NAME[name].columns:
            assert MADE_FROM[name] == inputs
    assert MADE_FROM["comparison"][:3] == ("comparison_setups", "models", "servers")
    assert MADE_FROM["memory_breakdown"] == (
        "models",
        "methods",
        "constants",
        "typical_setup",
        "estimates",
        "recommendations",
    )


def test_a_step_sees_only_the_tables_it_names(catalog):
    from pipeline.combine import STEPS

    recipes = {step.name for step in STEPS if not step.held}  # their rows made when asked
    assert recipes == {"server_fit", "recommendations"}
    held = {"server_fit": catalog.fits, "recommendations": catalog.ranked}
    for step in STEPS:
        seen = {name: held[name] if name in recipes else catalog[name] for name in step.inputs}
        made = step.make(seen, catalog.constants, None) if step.memo else step.make(seen, catalog.constants)
        assert (made if step.held else made.frame()).equals(catalog[step.name]), step.name


def test_new_tables_on_the_real_catalog(catalog):
    assert catalog["server_memory"].height == catalog["servers"].height
    assert catalog["comparison"].height == 7 and catalog["comparison_advice"].height == 16
    row = catalog["server_memory"].filter(pl.col("server_id") == SERVER).row(0, named=True)
    assert row["server_memory_gb"] == row["gpu_count"] * row["gpu_memory_gb"]
    assert (
        Path(ROOT / "site_templates" / "dictionary.toml").read_text(encoding="utf-8").count("[tables.comparison") == 3
    )
