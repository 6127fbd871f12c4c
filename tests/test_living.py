"""Living articles over whole builds: every counted noun agrees with its number on every page and in
every Markdown file; a catalog edit either keeps every sentence true or stops `build` and `check`
with a message naming the claim, and the previous output stays."""

import html
import json
import re
import tomllib
from pathlib import Path

import pytest

from conftest import ROOT, edit_csv
from pipeline.__main__ import main
from pipeline.render import russian, site_links
from pipeline.render.russian import NBSP

TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.DOTALL)


def page_texts(out: Path) -> dict[str, str]:
    """Every page and Markdown file of a build as plain text (tags removed, entities decoded)."""
    texts = {}
    for path in sorted((out / "site").rglob("*.html")):
        texts[str(path.relative_to(out))] = html.unescape(TAG.sub(" ", path.read_text(encoding="utf-8")))
    for path in sorted((out / "markdown").rglob("*.md")):
        texts[str(path.relative_to(out))] = path.read_text(encoding="utf-8").replace("\\", "")
    return texts


def disagreements(out: Path) -> dict[str, list[str]]:
    return {name: found for name, text in page_texts(out).items() if (found := russian.disagreements(text))}


def test_every_counted_noun_agrees_with_its_number_in_the_build(built):
    texts = page_texts(built)
    assert len([n for n in texts if n.endswith(".md")]) == 3 and len(texts) > 100
    assert disagreements(built) == {}
    # The checker reads these pages: numbers with nouns are there to be checked.
    assert f"2{NBSP}048{NBSP}токенов" in texts["site/accuracy.html"]
    assert f"1{NBSP}024{NBSP}токена" in texts["site/accuracy.html"]


def test_a_negative_figure_reads_with_a_minus_sign_not_a_hyphen(built):
    """Every negative figure a reader sees is written "−46", never "-46" (a hyphen-minus before a digit
    that follows no letter, digit or punctuation of a code, a date or a range)."""
    hyphen = re.compile(r"(?<![\w.,:/+\-−–])-(?=\d)")
    found = {name: hyphen.findall(text) for name, text in page_texts(built).items()}
    assert {name: n for name, n in found.items() if n} == {}
    assert "(медиана со знаком −" in page_texts(built)["site/calculator.html"]


def test_markdown_keeps_non_breaking_spaces(built):
    md = (built / "markdown" / "finetune-memory.md").read_text(encoding="utf-8")
    assert f"| 1{NBSP}200 |" in md or f"1{NBSP}200" in md.split("\n|")[1]  # a table cell keeps the NBSP of "1 200"
    assert f"1{NBSP}200{NBSP}ГБ" in md and f"+50{NBSP}%" in md
    assert " - " not in md.replace("| - |", "")


def manifest(out: Path) -> str:
    return (out / "site" / "manifest.json").read_text(encoding="utf-8")


def test_catalog_edits_keep_sentences_true_or_stop_naming_the_claim(sources, tmp_path, capsys):
    # A card's memory, a price and a new server: the build succeeds with every sentence right.
    edit_csv(sources / "gpus.csv", "RTX PRO 6000,NVIDIA,96,", "RTX PRO 6000,NVIDIA,32,")
    edit_csv(sources / "servers.csv", ",585000,", ",1585000,")
    with (sources / "servers.csv").open("a", encoding="utf-8") as f:
        f.write("xfusion-1x-h200,1 × H200 (XFUSION),XFUSION,h200-nvl,1,pcie,99000,2026-10-12,,,,catalog\n")
    out = tmp_path / "out"
    base = ["--base-url", "https://example.org/gpu/"]
    assert main(["build", "--sources", str(sources), "--out", str(out), "--quiet", *base]) == 0
    assert "--base-url" not in capsys.readouterr().err  # an absolute base URL: no warning about it
    assert disagreements(out) == {}
    # Markdown for the CMS: every link absolute under the base URL (downloads, entity pages, calculator).
    for path in (out / "markdown").glob("*.md"):
        targets = re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8"))
        assert targets and all(re.match(r"https?://", t) for t in targets), path.name  # none relative
        assert any(t.startswith("https://example.org/gpu/data/") for t in targets), path.name
    fm = (out / "markdown" / "finetune-memory.md").read_text(encoding="utf-8")
    assert "](https://example.org/gpu/data/memory_estimates.csv)" in fm or "](https://example.org/gpu/data/" in fm
    assert "](https://example.org/gpu/calculator.html?gpu=rtx-pro-6000&method=lora&model=generic-70b)" in fm
    md = (out / "markdown" / "finetune-memory.md").read_text(encoding="utf-8").replace(NBSP, " ")
    assert (
        "LoRA на такой модели занимает 5 карт RTX PRO 6000 или 2 карты H200, "
        "полное дообучение — 38 карт RTX PRO 6000 или 9 карт H200." in md
    )
    assert "больше одной карты нужно: LoRA для 32 млрд — 3 карты по оценке" in md
    assert "помещаются на одну карту любого из двух типов" not in md
    before = manifest(out)
    capsys.readouterr()

    # An edit that makes a claim false: build and check stop and name it; the output stays.
    edit_csv(sources / "constants.csv", "legacy_full_bytes_per_param,10,", "legacy_full_bytes_per_param,20,")
    assert main(["build", "--sources", str(sources), "--out", str(out), "--quiet", *base]) == 2
    err = capsys.readouterr().err
    line = next(
        n
        for n, text in enumerate(Path("site_templates/articles/gpu-count.md").read_text().splitlines(), 1)
        if "популярное правило меньше теоретического минимума" in text
    )
    assert f"site_templates/articles/gpu-count.md:{line}:" in err
    assert "статья «Сколько GPU нужно для дообучения моделей 7B, 13B и 70B" in err
    assert "утверждение «популярное правило меньше теоретического минимума» больше не верно" in err
    assert "сейчас в данных: правило_байт = 20; минимум_байт = 16" in err
    assert "Traceback" not in err
    assert manifest(out) == before
    assert json.loads(before)  # the previous build is whole

    assert main(["check", "--sources", str(sources)]) == 2
    err = capsys.readouterr().err
    assert "утверждение «популярное правило меньше теоретического минимума» больше не верно" in err


def test_data_words_are_formatted_once_from_the_constants():
    from pipeline import words

    figures = words.data_words({"range_low_factor": 0.75, "range_high_factor": 1.4, "calibration_within": 0.2})
    assert figures == {"range_low": "−25", "range_high": "+40", "within": "20"}
    labels = {"a": "при {range_high} % — {n} шт.", "b": ["{range_low}…{range_high} %", 3], "c": "±{within} %"}
    assert words.with_data_words(labels, figures) == {"a": "при +40 % — {n} шт.", "b": ["−25…+40 %", 3], "c": "±20 %"}


def test_labels_are_parsed_once_per_text_and_copied_out_on_each_call(tmp_path):
    from pipeline import words

    (tmp_path / "labels.toml").write_text('[common]\nyes = "да"\nlist = ["а", "б"]\n', encoding="utf-8")
    first = words.labels(tmp_path)
    first["common"]["yes"] = "changed by a caller"
    first["common"]["list"].append("в")
    again = words.labels(tmp_path)  # from the parsed text: the caller's changes are not in it
    assert again == {"common": {"yes": "да", "list": ["а", "б"]}}
    assert again is not words.labels(tmp_path)
    # An edited file (a warm process, `just serve`) is read and parsed anew at the next call.
    (tmp_path / "labels.toml").write_text('[common]\nyes = "ага"\n', encoding="utf-8")
    assert words.labels(tmp_path) == {"common": {"yes": "ага"}}
    # A TOML date cannot be marshalled: such a file is parsed on each call, still right.
    (tmp_path / "labels.toml").write_text("[common]\nday = 2026-12-03\n", encoding="utf-8")
    assert str(words.labels(tmp_path)["common"]["day"]) == "2026-12-03"
    assert words.labels() == tomllib.loads((ROOT / "site_templates" / "labels.toml").read_text(encoding="utf-8"))


def test_an_edited_range_or_accuracy_band_changes_every_sentence_that_quotes_it(sources, tmp_path):
    # The table rule's range and the accuracy band are quoted on many pages: none types them.
    edit_csv(sources / "constants.csv", "range_low_factor,0.7,", "range_low_factor,0.75,")
    edit_csv(sources / "constants.csv", "range_high_factor,1.5,", "range_high_factor,1.4,")
    edit_csv(sources / "constants.csv", "calibration_within,0.25,", "calibration_within,0.2,")
    out = tmp_path / "out"
    assert main(["build", "--sources", str(sources), "--out", str(out), "--quiet"]) == 0
    texts = {name: re.sub(r"\s+", " ", text.replace(NBSP, " ")) for name, text in page_texts(out).items()}
    quoted = {
        "site/models/llama-3-1-8b.html": ["с диапазоном от −25 до +40 %", "при памяти на 40 % выше оценки"],
        "site/gpus/h100-pcie.html": ["при памяти на 40 % выше оценки"],
        "site/servers/xfusion-2x-h100.html": ["верхней границы оценки (+40 %); «по оценке да, при +40 % нет»"],
        "site/compare/index.html": ["по оценке и с запасом +40 %.", "по оценке и при +40 %."],
        "site/accuracy.html": ["в пределах ±20 % у неё", "В пределах ±20 %, доля строк, %"],
        "site/calculator.html": ["с её диапазоном −25…+40 %"],
        "markdown/finetune-memory.md": [
            "«по оценке да, при +40 % нет»",
            "RTX PRO 6000: по оценке / при +40 %",
            "при памяти на 40 % выше оценки",
        ],
    }
    missing = {name: [q for q in want if q not in texts[name]] for name, want in quoted.items()}
    assert missing == dict.fromkeys(quoted, [])
    stale = re.compile(
        r"при \+50 %|−30…|от −30 до|±25 %|на \+?50 % выше|на \+\d+ % выше"
    )  # the old rule's own +50 % stays
    assert {name: stale.findall(text) for name, text in texts.items() if stale.search(text)} == {}


def test_entity_pages_link_the_calculator_preselected(built):
    gpu = (built / "site" / "gpus" / "h200-sxm.html").read_text(encoding="utf-8")
    assert 'href="../calculator.html?gpu=h200-sxm"' in gpu
    server = (built / "site" / "servers" / "hgx-h200-8x.html").read_text(encoding="utf-8")
    assert 'href="../calculator.html?server=hgx-h200-8x"' in server
    article = (built / "site" / "gpu-count.html").read_text(encoding="utf-8")
    assert 'href="calculator.html?gpu=h100-sxm&amp;method=full_amp&amp;model=generic-70b"' in article
    assert 'href="pretraining.html"' in article
    assert "Прежняя статья" not in article and "прежней статье" not in article


def test_site_links():
    text = "[a](data/x.csv) [b](https://o.org/) [c](#top) [d](/abs) ![e](charts/e.svg)"
    assert site_links.absolute_markdown(text, "https://example.org/gpu/") == (
        "[a](https://example.org/gpu/data/x.csv) [b](https://o.org/) [c](#top) [d](/abs) "
        "![e](https://example.org/gpu/charts/e.svg)"
    )
    assert site_links.absolute_markdown(text, "/") == text
    assert site_links.base_url_warning("https://example.org/") == []
    [warning] = site_links.base_url_warning("/")
    assert warning.file == "--base-url" and "sitemap.xml и robots.txt" in warning.rule
    assert site_links.calculator_url(model="generic-8b", method="lora", advanced=True, gpu=None) == (
        "calculator.html?advanced=1&method=lora&model=generic-8b"
    )
    with pytest.raises(KeyError, match="поля калькулятора"):
        site_links.calculator_url(modle="x")


def test_editors_guide_ids_are_those_of_the_sources():
    from pipeline.tools import guide

    text = guide.GUIDE.read_text(encoding="utf-8")
    assert guide.updated(text) == text, "run `just guide`"
    assert "| `rtx-pro-6000` | NVIDIA RTX PRO 6000 Blackwell Server Edition |" in text


def test_editors_guide_starter_article_builds(catalog, tmp_path):
    import shutil

    from pipeline.render.site import TEMPLATES, check_articles

    guide = (TEMPLATES / "README.md").read_text(encoding="utf-8")
    starter = guide.split("## Заготовка статьи", 1)[1].split("```\n", 2)[1]
    templates = tmp_path / "site_templates"
    shutil.copytree(TEMPLATES, templates)
    (templates / "articles" / "moya-statya.md").write_text(starter, encoding="utf-8")
    check_articles(catalog, templates=templates)  # renders every article, the starter too, or raises
    from pipeline.render.site import Renderer, read_articles

    [article] = [a for a in read_articles(templates) if a.slug == "moya-statya"]
    assert article.in_nav is False and article.nav == "LoRA для 70 млрд"
    text, _ = Renderer(catalog, templates=templates).render_article(article, "md")
    assert f"Это\n2{NBSP}карты H200." in text and "На одну карту задача не помещается." in text


WIDE_PAGES = [
    "gpu-count.html",
    "models/llama-3-1-70b.html",
    "accuracy.html",
    "pretraining.html",
    "finetune-memory.html",
]


@pytest.mark.browser
@pytest.mark.parametrize("width, height", [(390, 844), (1280, 900)])
@pytest.mark.parametrize("path", WIDE_PAGES)
def test_wide_tables_fit_the_screen_and_keep_their_first_column(browser, site_server, width, height, path):
    from conftest import serious_axe_violations

    context = browser.new_context(viewport={"width": width, "height": height}, locale="ru-RU")
    page = context.new_page()
    for path in [path]:  # noqa: B020 (one page a test)
        page.goto(site_server + path)
        page.wait_for_load_state("networkidle")
        assert page.evaluate("document.documentElement.scrollWidth") <= width, (path, width)
        assert serious_axe_violations(page) == [], (path, width)
        # Each row's first cell stays in view while the table scrolls sideways, unless the table is
        # stacked on a phone (then nothing scrolls sideways).
        first = page.eval_on_selector_all(
            ".scroll tbody tr:first-child th[scope=row]",
            "cells => cells.map(c => getComputedStyle(c).position + (c.closest('.stack') ? ' stack' : ''))",
        )
        want = {"sticky", "static stack"} if width == 390 else {"sticky", "sticky stack"}
        assert first and set(first) <= want, (path, first)
    context.close()


PHONE_PAGES = [
    "index.html",
    "method-comparison.html",
    "accuracy.html",
    "pretraining.html",
    "models/llama-3-1-8b.html",
    "charts.html",
    "calculator.html",
    "data.html",
]


@pytest.mark.browser
@pytest.mark.parametrize("path", PHONE_PAGES)
def test_a_narrow_phone_scrolls_no_page_sideways_and_sees_the_whole_menu(browser, site_server, path):
    """At 360 px: no page is wider than the screen (a long source title breaks), the «Все материалы»
    menu opens inside the screen, a table's caption stays in view."""
    from conftest import serious_axe_violations

    context = browser.new_context(viewport={"width": 360, "height": 740}, locale="ru-RU")
    page = context.new_page()
    page.goto(site_server + path)
    page.wait_for_load_state("networkidle")
    assert page.evaluate("document.documentElement.scrollWidth") <= 360, path
    assert serious_axe_violations(page) == [], path  # a box that scrolls can be reached by keyboard
    page.click(".site-header .more summary")
    left, right = page.eval_on_selector(
        ".site-header .more ul", "e => [e.getBoundingClientRect().left, e.getBoundingClientRect().right]"
    )
    assert 0 <= left < right <= 360, (path, left, right)
    captions = page.eval_on_selector_all(
        ".scroll caption", "cs => cs.filter(c => c.offsetParent).map(c => c.getBoundingClientRect().right)"
    )
    assert all(r <= 360 for r in captions), (path, captions)
    context.close()


@pytest.mark.browser
def test_on_a_narrow_phone_charts_bars_and_stacked_tables_keep_their_width(browser, site_server):
    """At 360 px a chart keeps its readable width in a box that scrolls sideways instead of shrinking to
    the screen; so do a model page's bars; the data page's table of programs is stacked."""
    context = browser.new_context(viewport={"width": 360, "height": 740}, locale="ru-RU")
    page = context.new_page()
    page.goto(site_server + "charts.html")
    widths = page.eval_on_selector_all("figure.chart img", "es => es.map(e => e.getBoundingClientRect().width)")
    scrolls = page.eval_on_selector_all("figure.chart", "fs => fs.map(f => f.scrollWidth > f.clientWidth)")
    assert widths == [640, 640] and scrolls == [True, True]
    # The model page's breakdown bars keep their labels readable (4 of the 176 user units: 13 px) and scroll.
    page.goto(site_server + "models/llama-3-1-8b.html")
    bars = page.eval_on_selector(
        "#bd-figure", "f => [f.querySelector('svg').getBoundingClientRect().width, f.scrollWidth > f.clientWidth]"
    )
    assert bars == [576, True]
    # The data page's table of programs is stacked: each cell of running text under its column's name.
    page.goto(site_server + "data.html")
    [box] = page.evaluate(STACKED)
    assert box["overflow"] <= 0 and box["display"] == "block" and box["labels"] == box["headers"]
    assert box["headers"] == ['"Файл"', '"Как открыть"']
    context.close()


STACKED = """() => [...document.querySelectorAll(".scroll.stack")].map((box) => ({
  overflow: box.scrollWidth - box.clientWidth,
  display: getComputedStyle(box.querySelector("td")).display,
  labels: [...box.querySelectorAll("tbody tr:first-child td")].map((td) => getComputedStyle(td, "::before").content),
  headers: [...box.querySelectorAll("thead th")].slice(1).map((th) => JSON.stringify(th.textContent.replaceAll("\\u00a0", " "))),
}))"""


@pytest.mark.browser
def test_short_wide_tables_stack_on_a_phone_and_stay_tables_on_a_desktop(browser, site_server):
    from conftest import serious_axe_violations

    for width, display in ((390, "flex"), (1280, "table-cell")):
        context = browser.new_context(viewport={"width": width, "height": 844}, locale="ru-RU")
        page = context.new_page()
        page.goto(site_server + "models/llama-3-1-8b.html")
        page.wait_for_load_state("networkidle")
        boxes = page.evaluate(STACKED)
        assert boxes, "the model page has a short table with many columns"
        for box in boxes:
            assert box["display"] == display, width
            if width == 390:  # each value beside its column's name, nothing hidden sideways
                assert box["overflow"] <= 0 and box["labels"] == box["headers"], box
            else:
                assert box["labels"] == ["none"] * len(box["headers"]), box
        assert serious_axe_violations(page) == [], width
        context.close()


@pytest.mark.browser
def test_a_long_table_keeps_its_header_in_view(browser, site_server):
    page = browser.new_context(viewport={"width": 1280, "height": 700}).new_page()
    page.goto(site_server + "methods/lora.html")
    box = page.query_selector(".scroll.tall")
    assert box is not None
    top = box.evaluate("b => b.getBoundingClientRect().top")
    box.evaluate("b => { b.scrollTop = 400; }")
    header = box.evaluate("b => b.querySelector('thead th').getBoundingClientRect().top")
    assert box.evaluate("b => b.scrollTop") == 400 and abs(header - top) < 1.5


def test_message_catalogue_is_russian():
    from pipeline import messages

    # the report's own lines; every entry of the catalogue: tests/test_messages.py
    entries = messages.catalogue()["report"]
    assert {"warnings_header", "warning_repeated", "stopped_build", "stopped_check"} <= set(entries)
    for key in ("warnings_header", "warning_repeated", "stopped_build", "stopped_check", "total", "empty", "more"):
        words = re.sub(r"\{\w+\}", "", entries[key])
        assert re.search(r"[а-яё]", words), key  # translated
        assert not re.search(r"\b[A-Za-z]{3,}\b", words), key  # no English left in it


def test_repeated_warnings_become_one_line_with_a_count():
    from pipeline.messages import grouped_warnings
    from pipeline.problems import Problem

    rule = "нет цены; на сайте — «по запросу»"
    warnings = [Problem("sources/servers.csv", n, "price_rub_month", None, rule) for n in (7, 8, 9, 10, 11)]
    other = Problem("sources/gpus.csv", 3, "memory_gb", "1", "мало")
    assert grouped_warnings([*warnings, other]) == [
        f"sources/servers.csv: price_rub_month: {rule} (строки 7, 8, 9, 10, 11; всего 5)",
        str(other),
    ]
