"""The article «Сравнение методик»: its key figures against pipeline.estimate.first_principles computed here, both renderings,
its links, and no figure typed into the template's prose."""

import math
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ROOT
from pipeline.estimate import calibration
from pipeline.estimate import first_principles as memory
from pipeline.estimate.architecture import parameter_counts
from pipeline.render import format as fmt
from pipeline.render import russian

TEMPLATE = Path(__file__).resolve().parent.parent / "site_templates" / "articles" / "method-comparison.md"
SERVER = "hgx-h200-8x"


@pytest.fixture(scope="module")
def cmp(catalog):
    from pipeline.render.site import load_labels
    from pipeline.render.views.articles import Tables
    from pipeline.render.views.comparison import Comparison
    from pipeline.render.views.estimator import EstimatorTables

    labels = load_labels()
    tables = Tables(catalog, labels)
    return Comparison(catalog, labels, tables, EstimatorTables(catalog, labels, tables))


@pytest.fixture(scope="module")
def article(built) -> str:
    return (built / "markdown" / "method-comparison.md").read_text(encoding="utf-8").replace("\xa0", " ")


@pytest.fixture(scope="module")
def html(built) -> str:
    return (built / "site" / "method-comparison.html").read_text(encoding="utf-8").replace("\xa0", " ")


def typical(catalog, method: str, **changes) -> memory.Setup:
    """The typical setup written out field by field from constants.csv, not through typical_setup."""
    c = catalog.constants
    setup = memory.Setup(
        method=method,
        optimizer="adamw",
        seq_len=int(c["typical_seq_len"]),
        micro_batch=int(c["typical_micro_batch"]),
        grad_accum=int(c["typical_grad_accum"]),
        grad_checkpointing=c["typical_grad_checkpointing"] == 1,
        loss=c["typical_loss"],
        flash_attention=True,
        lora_rank=int(c["typical_lora_rank"]),
        lora_targets="all",
    )
    return replace(setup, **changes)


def total_gb(catalog, model_id: str, setup: memory.Setup) -> float:
    arch = memory.model_architectures(catalog["models"])[model_id]
    return memory.estimate(arch, setup, catalog.constants).total / memory.GB


def rows_of(markdown: str, first: str, second: str) -> list[list[str]]:
    """Cells of every Markdown table row that starts with these two cells and names a setup in the third."""
    rows = []
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[:2] == [first, second] and "токенов" in cells[2]:
            rows.append(cells)
    return rows


def params(catalog, model_id: str) -> float:
    return catalog["models"].filter(catalog["models"]["model_id"] == model_id)["params_b"][0]


def table_rule_gb(catalog, model_id: str, method: str) -> float:
    e = catalog["estimates"]
    return e.filter((e["model_id"] == model_id) & (e["method_id"] == method))["memory_gb"][0]


# -- the key figures --


def test_llama_8b_full_on_one_card_row(catalog, article):
    """Four estimators for Llama 3.1 8B, full fine-tuning on one card: each figure recomputed here."""
    c = catalog.constants
    arch = memory.model_architectures(catalog["models"])["llama-3-1-8b"]
    p_total = parameter_counts(arch).total
    setup = typical(catalog, "full_amp")
    [row] = [r for r in rows_of(article, "Llama 3.1 8B", "полное") if "карт: 1," in r[2]]
    assert row[3:7] == [
        fmt.gb(table_rule_gb(catalog, "llama-3-1-8b", "full_amp")),
        fmt.gb(params(catalog, "llama-3-1-8b") * c["legacy_full_bytes_per_param"]),
        fmt.gb((2 + 18) * p_total / memory.GB),  # DeepSpeed ZeRO-2 formula at N = 1: 2P + 18P/N
        fmt.gb(total_gb(catalog, "llama-3-1-8b", setup)),
    ]
    assert row[7] == "нет замера"
    fits = total_gb(catalog, "llama-3-1-8b", setup) <= 141
    assert row[8].endswith("да" if fits else "нет")
    # The same first-principles total is quoted in the prose of «Главное».
    assert f"из первых принципов {fmt.gb(total_gb(catalog, 'llama-3-1-8b', setup))} ГБ" in article


def test_hand_checked_values(article):
    """Figures worked out by hand: 8.03 B between the 7 B (120) and 14 B (240) anchors, and 8.03 × 10 bytes."""
    [row] = [r for r in rows_of(article, "Llama 3.1 8B", "полное") if "карт: 1," in r[2]]
    assert row[3:5] == ["137,7", "80,3"]


def test_llama_70b_full_zero3_on_one_and_two_servers(catalog, article):
    """ZeRO-3 on the 8 cards of one HGX H200 and on as many such servers as the table rule needs."""
    servers = catalog["servers"].filter(catalog["servers"]["server_id"] == SERVER).row(0, named=True)
    gpu_gb = catalog["gpus"].filter(catalog["gpus"]["gpu_id"] == servers["gpu_id"])["memory_gb"][0]
    m = table_rule_gb(catalog, "llama-3-1-70b", "full_amp")
    needed = math.ceil(m / (servers["gpu_count"] * gpu_gb))
    rows = {r[2]: r for r in rows_of(article, "Llama 3.1 70B", "полное")}
    assert len(rows) == 2
    for n in (servers["gpu_count"], servers["gpu_count"] * needed):
        [row] = [r for text, r in rows.items() if f"карт: {fmt.integer(n)}, ZeRO-3" in text]
        setup = typical(catalog, "full_amp", gpus=n, sharding="zero3")
        arch = memory.model_architectures(catalog["models"])["llama-3-1-70b"]
        assert row[3] == fmt.gb(m / n)  # 70,6 B is within anchor_size_tolerance of the 70 B anchor: no mark
        assert row[5] == fmt.gb(memory.deepspeed_model_states(arch, setup) / memory.GB)
        assert row[6] == fmt.gb(total_gb(catalog, "llama-3-1-70b", setup))


def test_lora_and_qlora_rows_have_no_deepspeed_figure(catalog, article):
    for model, method in (("Llama 3.1 8B", "LoRA"), ("Llama 3.1 8B", "QLoRA 4 бита"), ("Qwen2.5 32B", "LoRA")):
        [row] = rows_of(article, model, method)
        assert row[5] == "—"
    [row] = rows_of(article, "Qwen2.5 32B", "LoRA")
    assert row[6] == fmt.gb(total_gb(catalog, "qwen2-5-32b", typical(catalog, "lora")))
    thumb = calibration.rule_of_thumb_gb(params(catalog, "llama-3-1-70b"), "qlora_4bit", catalog.constants)
    [row] = rows_of(article, "Llama 3.1 70B", "QLoRA 4 бита")
    assert row[4] == fmt.gb(thumb)


def test_advice_rows_in_numbers(catalog, article):
    """The earlier article's advice, each applied alone to Llama 3.1 8B full without checkpointing."""
    base = typical(catalog, "full_amp", grad_checkpointing=False)
    steps = int(catalog.constants["comparison_accumulation_steps"])
    expected = {
        "Исходная постановка (ни одного совета)": base,
        "Контрольные точки активаций (gradient checkpointing)": replace(base, grad_checkpointing=True),
        "Шардирование: ZeRO-3 или FSDP (плюс веса)": replace(base, gpus=8, sharding="zero3"),
        "Обучение в FP8": replace(base, fp8=True),
        "Больший батч микробатчем": replace(base, micro_batch=steps),
        "Тот же батч накоплением градиента": replace(base, grad_accum=steps),
    }
    base_gb = total_gb(catalog, "llama-3-1-8b", base)
    for label, setup in expected.items():
        row = first_cell_row(article, label)
        value = total_gb(catalog, "llama-3-1-8b", setup)
        assert row[3] == fmt.gb(value), label
        if setup is not base:
            change = value / base_gb - 1
            sign = "" if fmt.number(abs(change) * 100, 0) == "0" else ("+" if change > 0 else "−")
            assert row[4] == sign + fmt.number(abs(change) * 100, 0), label
    # Accumulation costs nothing; FP8 does not halve memory in this estimator.
    assert total_gb(catalog, "llama-3-1-8b", expected["Тот же батч накоплением градиента"]) == base_gb
    assert total_gb(catalog, "llama-3-1-8b", expected["Обучение в FP8"]) > base_gb / 2


def first_cell_row(article: str, label: str) -> list[str]:
    """The cells of the one table row whose first cell is `label`."""
    found = []
    for line in article.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == label:
            found.append(cells)
    assert len(found) == 1, label
    return found[0]


def test_summary_figures_quoted(catalog, article):
    summary = {r["estimator"]: r for r in catalog["calibration_summary"].iter_rows(named=True)}
    fp = summary["first_principles"]
    # The noun agrees with the count ("90 замеров", "94 замера"), as the template's ru.count makes it.
    rows = russian.count(fp["rows"], "замер").replace("\xa0", " ")
    quoted = f"ошибается в среднем (по медиане) на {fmt.number(fp['median_abs_error'] * 100, 0)} % ({rows})"
    assert quoted in article
    assert f"в ней {rows} из {catalog['calibration'].height}" in article


def test_measured_rows_carry_calibration(catalog, article):
    row = (
        catalog["calibration"]
        .filter(catalog["calibration"]["measurement_id"] == "lf-wiki-ctx-fa2-32768")
        .row(0, named=True)
    )
    [cells] = [r for r in rows_of(article, "Llama 2 7B", "QLoRA 4 бита") if r[2].startswith("32 768 токенов")]
    assert cells[5] == fmt.gb(row["measured_gb"])
    assert cells[9].startswith(fmt.gb(row["first_principles_gb"]) + " (")


# -- the builders --


def test_scales_and_unknown_scale(cmp):
    assert cmp.gpus("llama-3-1-8b", "lora") == 1
    assert cmp.gpus("llama-3-1-70b", "full_amp", "server", SERVER) == 8
    assert cmp.gpus("llama-3-1-70b", "full_amp", "servers", SERVER) % 8 == 0
    assert cmp.row("llama-3-1-70b", "full_amp", "server", SERVER)["sharding"] == "zero3"
    with pytest.raises(KeyError):
        cmp.gpus("llama-3-1-8b", "lora", "rack", SERVER)


def test_measured_for_finds_a_matching_measurement(catalog, cmp):
    from pipeline.combine import measured_setups, measurement_for

    measured = measured_setups(catalog["calibration"], catalog["measurements"])
    setup = memory.Setup(method="lora", seq_len=1024, micro_batch=1, gpus=1, sharding="ddp", grad_checkpointing=True)
    assert measurement_for(measured, "qwen2-7b", "lora", setup) == "lf-issue-7409-qwen2-7b-seq1024-mb1"
    typical_lora = memory.typical_setup("lora", catalog.constants)
    assert measurement_for(measured, "llama-3-1-8b", "lora", typical_lora) is None
    assert cmp.measured_for(cmp.row("llama-3-1-8b", "lora")) is None


def test_tables_reference_known_sources_and_downloads(cmp, catalog, built):
    refs = set(catalog["references"]["reference_id"].to_list())
    setups = [("llama-3-1-8b", "lora", "card"), ("llama-3-1-70b", "full_amp", "server")]
    views = [
        cmp.estimators_table(),
        cmp.setups_table(setups, SERVER),
        cmp.parts_table(setups, SERVER),
        cmp.measured_table(["peft-3b-full"]),
        cmp.advice_table("llama-3-1-8b", "full_amp", SERVER),
    ]
    for view in views:
        assert view.references and set(view.references) <= refs
        assert all((built / "site" / "data" / f"{name}.csv").is_file() for name in view.downloads)
        assert all(len(row) == len(view.headers) == len(view.numeric) for row in view.rows)


# -- rendering, links, no typed figures --


def test_renders_to_markdown_and_html(article, html, built):
    assert article.startswith("# Сравнение методик")
    assert "TABLEPLACEHOLDER" not in html
    assert html.count("<table") >= 6
    assert html.count("<table") == html.count("<figcaption")
    index = (built / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="method-comparison.html"' in index


def test_links_resolve(article, html, built):
    site = built / "site"
    for page in ("accuracy.html", "pretraining.html", "calculator.html", "models/llama-3-1-8b.html"):
        assert f"]({page})" in article
        assert f'href="{page}"' in html
    for href in re.findall(r'href="([^"#]+)', html):
        if not href.startswith(("http://", "https://", "/", "mailto:")):  # "/…": the canonical link; the quote
            assert (site / href).is_file(), href
    for target in re.findall(r"\]\(([^)#]+)\)", article):
        if not target.startswith(("http://", "https://")):
            assert (site / target).is_file(), target


def test_no_figure_typed_into_the_template():
    text = TEMPLATE.read_text(encoding="utf-8")
    _, head, body = text.split("---\n", 2)
    head = "\n".join(line for line in head.splitlines() if not line.startswith("order: "))
    prose = re.sub(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", "", head + body, flags=re.S)
    assert re.findall(r".{0,30}\d.{0,30}", prose) == []


def test_an_undeclared_setup_names_where_to_declare_it(cmp):
    from pipeline.render.views.comparison import UndeclaredSetup

    with pytest.raises(UndeclaredSetup) as card:
        cmp.gb("qwen2-5-32b", "full_amp")
    assert str(card.value) == (
        "постановки qwen2-5-32b × full_amp × card нет в comparison_setups.csv (или её модели либо сервера нет в"
        " каталоге): добавьте её строкой model_id, method_id, scale, server_id"
    )
    with pytest.raises(UndeclaredSetup, match=f"^постановки qwen2-5-32b × lora × advice на сервере {SERVER} нет"):
        cmp.advice("qwen2-5-32b", "lora", SERVER, "zero3")
    # One card is one card whatever the server: the template may name the server or not.
    assert cmp.gb("llama-3-1-8b", "lora", "card", SERVER) == cmp.gb("llama-3-1-8b", "lora")


def test_editors_choose_the_setups_in_comparison_setups_csv(sources, tmp_path):
    """The article's setups are data: one it names but the CSV lacks stops the build with the setup and the
    file named; the same setup added as a row renders, with its figures a row of `comparison`."""
    import polars as pl

    from pipeline.build import load_and_validate
    from pipeline.combine import combine
    from pipeline.problems import TemplateError
    from pipeline.render.site import check_articles

    templates = tmp_path / "templates"
    shutil.copytree(ROOT / "site_templates", templates)
    article = templates / "articles" / "method-comparison.md"
    text = article.read_text(encoding="utf-8").replace('"qwen2-5-32b", "llama-3-1-70b"', '"qwen3-32b", "llama-3-1-70b"')
    article.write_text(text, encoding="utf-8")
    con, validation = load_and_validate(sources)
    with pytest.raises(TemplateError) as stopped:
        check_articles(combine(con), validation, templates)
    rules = [p.rule for p in stopped.value.problems]
    assert rules[0].startswith("постановки qwen3-32b × lora × card нет в comparison_setups.csv"), rules
    with (sources / "comparison_setups.csv").open("a", encoding="utf-8") as f:
        f.write("qwen3-32b,lora,card,,site-rules\n")
    con, validation = load_and_validate(sources)
    catalog = combine(con)
    check_articles(catalog, validation, templates)
    assert catalog["comparison"].filter(pl.col("model_id") == "qwen3-32b")["method_id"].to_list() == ["lora"]


def test_a_setup_on_a_server_names_its_server(sources):
    from pipeline.build import load_and_validate
    from pipeline.problems import DataError

    with (sources / "comparison_setups.csv").open("a", encoding="utf-8") as f:
        f.write("qwen3-32b,lora,card,hgx-h200-8x,site-rules\nqwen3-32b,full_amp,server,,site-rules\n")
    with pytest.raises(DataError) as found:
        load_and_validate(sources)
    assert [(p.line, p.column, p.value, p.rule) for p in found.value.problems] == [
        (
            11,
            "server_id",
            "hgx-h200-8x",
            "постановка на одной карте (card) сервер не использует: оставьте server_id пустым",
        ),
        (12, "server_id", None, "для масштаба server, servers или advice нужен сервер: укажите server_id"),
    ]
