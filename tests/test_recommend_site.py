"""The recommendation on the site: model pages, the seed's offers table, the quote link, the NVLink
column, and the calculator's one-line headline (in chromium) — each the `recommendations` row."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from urllib.parse import parse_qs, unquote, urlsplit

import polars as pl
import pytest

from conftest import METHOD_IDS, sweep
from pipeline.estimate import recommend
from pipeline.render import format as fmt
from pipeline.render import quote
from pipeline.render.views.articles import time_words
from pipeline.words import labels


def page(built, path: str) -> str:
    return (built / "site" / path).read_text(encoding="utf-8")


def best_rows(catalog) -> dict[tuple[str, str], dict]:
    return {
        (r["model_id"], r["method_id"]): r for r in recommend.best(catalog["recommendations"]).iter_rows(named=True)
    }


def cell_text(catalog, r: dict) -> str:
    gpu = catalog["gpus"].filter(pl.col("gpu_id") == r["gpu_id"])["short_name"][0]
    server = catalog["servers"].filter(pl.col("server_id") == r["server_id"])["display_name"][0]
    return f"{r['gpus_per_job']} × {gpu} в сервере «{server}»"


def test_model_page_shows_the_recommendation_of_every_method(built, catalog):
    text = html.unescape(page(built, "models/llama-3-1-70b.html"))
    section = text.split('id="cheapest"')[1].replace("\xa0", " ")  # typeset: NBSP around × and units
    best = best_rows(catalog)
    for method_id in catalog["methods"]["method_id"]:
        r = best[("llama-3-1-70b", method_id)]
        assert cell_text(catalog, r).replace("\xa0", " ") in section
        # The table has a row per method: short and wide, it stacks on a phone (each value labelled).
        reco = labels()["entities"]["reco"]
        time = f'<td data-label="{reco["hours"]}">{html.escape(time_words(reco, r), quote=False)}</td>'
        assert time.replace("\xa0", " ") in section
        assert f"≈ {fmt.number(r['hours'])} ч".replace("\xa0", " ") in time.replace("\xa0", " ")
    lora = best[("llama-3-1-70b", "lora")]
    assert (lora["server_id"], lora["gpus_per_job"], lora["cost_rub"]) == (
        "esc8000a-4x-h100",
        4,
        1_360_800.0,
    )  # all 4 cards
    assert "1 360 800 ₽ — аренда на 1 мес." in section.replace("\xa0", " ")
    assert "Самый дешёвый" not in text


def test_quote_link_carries_the_configuration(built, catalog):
    text = page(built, "models/generic-70b.html")
    href = html.unescape(re.search(r'<a class="quote-link" href="([^"]+)"', text).group(1))
    parts = urlsplit(href)
    assert parts.scheme == "mailto" and parts.path == "sales@tenzor.cloud"
    query = parse_qs(parts.query)
    assert query["subject"] == ["Запрос КП: Модель 70 млрд"]
    body = query["body"][0]
    assert body.startswith("Модель: Модель 70 млрд\n")
    r = best_rows(catalog)[("generic-70b", "lora")]
    assert f"LoRA: {cell_text(catalog, r)}" in body
    assert "Постановка: типовая: 2\xa0048\xa0токенов" in body
    # the server page too, and the calculator without JavaScript (a plain link in the HTML)
    assert 'class="quote-link" href="mailto:sales@tenzor.cloud?subject=' in page(built, "servers/hgx-b200-8x.html")
    assert 'id="calc-quote" class="quote-link" href="mailto:' in page(built, "calculator.html")


def test_calculator_page_carries_one_line_per_job_and_nothing_else(built, catalog):
    """The page holds each job's headline as text (its script makes the quote link and the download
    from the figures on the screen): no quote URL or figure per job, and Russian as it is, not as
    \\uXXXX escapes. The headline the page opens on, and its quote link, are in the HTML itself."""
    text = page(built, "calculator.html")
    found = re.search(r'<script type="application/json" id="calc-headlines">(.*?)</script>', text, re.S).group(1)
    headlines = json.loads(found)
    assert headlines["opens_with"] == ["llama-3-1-70b", "lora"]
    jobs = headlines["jobs"]
    assert len(jobs) == catalog["models"].height * catalog["methods"].height
    assert all(type(line) is str for line in jobs.values())
    r = best_rows(catalog)[("generic-70b", "lora")]
    assert cell_text(catalog, r) in jobs["generic-70b|lora"].replace("\xa0", " ")
    assert "\\u04" not in found and "mailto:" not in found
    opening = re.search(r'<strong id="calc-headline">(.*?)</strong>', text).group(1)
    assert html.unescape(opening).replace("\xa0", " ") == jobs["llama-3-1-70b|lora"].replace("\xa0", " ")
    # the page's weight: its headlines are most of it, a few hundred bytes each
    assert len(found.encode()) < 700 * len(jobs)


def test_quote_url_uses_the_form_when_one_is_set():
    lines = [("Модель", "Llama 3.1 70B"), ("Способ", "LoRA & co")]
    url = quote.quote_url({"email": "a@b.c", "form_url": "https://example.org/kp?src=site"}, "Запрос", lines)
    assert url.startswith("https://example.org/kp?src=site&")
    assert parse_qs(urlsplit(url).query) == {
        "src": ["site"],
        "subject": ["Запрос"],
        "Модель": ["Llama 3.1 70B"],
        "Способ": ["LoRA & co"],
    }
    mail = quote.quote_url({"email": "a@b.c", "form_url": ""}, "Тема", lines)
    assert unquote(mail) == "mailto:a@b.c?subject=Тема&body=Модель: Llama 3.1 70B\nСпособ: LoRA & co"


def test_no_card_without_nvlink_is_ever_required(catalog):
    fit = catalog["gpu_fit"].join(catalog["gpus"].select("gpu_id", "interconnect"), on="gpu_id")
    pcie = fit.filter(pl.col("interconnect") == "pcie")
    assert pcie.height > 0
    assert set(pcie["nvlink_need"].unique()) == {"no", "pcie_only"}
    # and cards with NVLink keep rule 7
    assert "required" in fit.filter(pl.col("interconnect") != "pcie")["nvlink_need"].to_list()
    row = pcie.filter(
        (pl.col("model_id") == "generic-70b") & (pl.col("method_id") == "lora") & (pl.col("gpu_id") == "rtx-pro-6000")
    )
    assert row.select("cards", "cards_high", "nvlink_need").row(0) == (2, 3, "pcie_only")


def test_seed_offers_table_shows_the_recommendation(built, catalog):
    text = html.unescape(page(built, "gpu-count.html")).replace("\xa0", " ")
    best = best_rows(catalog)
    assert "Рекомендация сайта" in text
    assert cell_text(catalog, best[("generic-70b", "full_amp")]) in text
    assert cell_text(catalog, best[("generic-13b", "full_amp")]) in text


def test_model_page_gives_the_per_card_figure_with_its_measured_range(built, catalog):
    r = best_rows(catalog)[("llama-3-1-70b", "lora")]
    text = html.unescape(page(built, "models/llama-3-1-70b.html")).replace("\xa0", " ")
    assert "Память на карту, ГБ (в скобках — диапазон 80 % замеров)" in text
    low, high = fmt.gb(r["per_gpu_memory_low_gb"]), fmt.gb(r["per_gpu_memory_high_gb"])
    assert f">{fmt.gb(r['per_gpu_memory_gb'])} ({low}…{high})</td>" in text


def test_server_page_price_date(built):
    text = page(built, "servers/esc8000a-8x-h100.html")
    assert "<dt>Цена на</dt><dd>12.10.2026</dd>" in text


READ_HEADLINE = """() => {
  const text = (id) => document.getElementById(id).textContent;
  return {
    line: text("calc-headline"),
    reco: text("out-reco"),
    cards: text("out-fp-cards"),
    memory: text("out-fp-memory"),
    low: text("out-fp-low"),
    high: text("out-fp-high"),
    quote: document.getElementById("calc-quote").getAttribute("href"),
  };
}"""


@pytest.mark.parametrize("method", METHOD_IDS)
def test_calculator_headline_matches_the_table_for_every_job(browser, site_server, catalog, method):
    """For every catalog model (one test per method): the headline is recommendations.csv's plan (the form
    set in the page, conftest.sweep)."""
    best = best_rows(catalog)
    context = browser.new_context(locale="ru-RU")
    p = context.new_page()
    p.goto(site_server + "calculator.html")
    p.wait_for_selector("#calc[data-ready=true]")
    # opens with a model (site.toml), not an empty form
    assert p.input_value("#calc-model") == "llama-3-1-70b" and p.input_value("#calc-method") == "lora"
    models = catalog["models"]["model_id"].to_list()
    shown = sweep(p, [[("#calc-model", model_id), ("#calc-method", method)] for model_id in models], READ_HEADLINE)
    assert len(shown) == len(models)
    for model_id, page_says in zip(models, shown, strict=True):
        line = page_says["line"].replace("\xa0", " ")
        r = best.get((model_id, method))
        if r is None:
            # a server that holds it only at the point estimate is said as a risk, never as the plan
            risky = catalog["recommendations"].filter(
                (pl.col("model_id") == model_id) & (pl.col("method_id") == method) & (pl.col("reason") == "tight")
            )
            if risky.height:
                first = risky.sort("rank").row(0, named=True)
                assert "впритык: при верхней границе не помещается" in line, (model_id, method)
                assert cell_text(catalog, first).replace("\xa0", " ") in line, (model_id, method)
            else:
                assert "ни один сервер каталога" in line, (model_id, method)
            continue
        assert cell_text(catalog, r) in line, (model_id, method)
        assert f"≈ {fmt.number(r['hours'])} ч".replace("\xa0", " ") in line, (model_id, method)
        # the result's own recommendation, computed in the page by recommend.py's rules, is the same row
        assert line.endswith(page_says["reco"].replace("\xa0", " ")), (model_id, method, line, page_says["reco"])
        # nothing below contradicts it: the per-card figure is the plan's, on the plan's cards, with the
        # measured range of its kind of setup, as recommendations.csv has it
        assert page_says["cards"] == fmt.integer(r["gpus_per_job"]), (model_id, method)
        assert page_says["memory"] == fmt.gb(r["per_gpu_memory_gb"]), (model_id, method)
        assert page_says["low"] == fmt.gb(r["per_gpu_memory_low_gb"]), (model_id, method)
        assert page_says["high"] == fmt.gb(r["per_gpu_memory_high_gb"]), (model_id, method)
        name = catalog["models"].filter(pl.col("model_id") == model_id)["display_name"][0]
        assert unquote(page_says["quote"]).count(name) >= 1
    context.close()


def test_the_simple_and_advanced_calculator_say_one_plan(browser, site_server, catalog):
    best = best_rows(catalog)
    context = browser.new_context(locale="ru-RU")
    p = context.new_page()
    p.goto(site_server + "calculator.html")
    p.wait_for_selector("#calc[data-ready=true]")
    # the simple and the advanced mode answer with the same line for the same inputs
    p.select_option("#calc-model", "generic-70b")
    p.select_option("#calc-method", "full_amp")
    simple = [p.text_content(f"#{i}") for i in ("calc-headline", "out-fp-memory", "out-reco")]
    p.check("#calc-adv")
    assert [p.text_content(f"#{i}") for i in ("calc-headline", "out-fp-memory", "out-reco")] == simple
    assert p.is_hidden("#calc-headline-changed")
    # entering the plan's own setup (its cards, ZeRO-3) keeps the same plan, and the advanced figure is the plan's
    r = best[("generic-70b", "full_amp")]
    p.fill("#calc-gpus", str(r["gpus_per_job"]))
    p.select_option("#calc-sharding", "zero3")
    assert [p.text_content(f"#{i}") for i in ("calc-headline", "out-fp-memory", "out-reco")] == simple
    assert p.text_content("#adv-total") == simple[1]
    note = p.text_content("#calc-headline-changed").replace("\xa0", " ")
    typical, yours = note.split("Для типовой постановки: ")[1].rstrip(".").split("; для ваших: ")
    assert typical == yours and cell_text(catalog, r) in typical, note  # the same plan, said side by side
    context.close()


def test_calculator_headline_follows_the_inputs_on_screen(browser, site_server, catalog):
    """Changing the sequence length or the cards changes the headline, says what changed, and nothing below
    states another plan; the quote link carries a custom model and the changed sequence length."""
    context = browser.new_context(locale="ru-RU")
    p = context.new_page()
    p.goto(site_server + "calculator.html?model=qwen2-5-14b&method=full_amp&advanced=1")
    p.wait_for_selector("#calc[data-ready=true]")
    typical = p.text_content("#calc-headline")
    assert "Ни один сервер" not in p.text_content("#calc-result") or p.is_hidden("#adv-servers-none")
    p.fill("#calc-seq-len", "32768")
    changed = p.text_content("#calc-headline")
    assert changed != typical
    assert p.text_content("#out-reco") in changed or "впритык" in changed or "ни один" in changed
    assert not p.is_hidden("#calc-headline-changed") and "32768" in p.text_content("#calc-headline-changed")
    # the advanced server table lists the plan's servers: its first row is the headline's server
    first = p.query_selector("#adv-servers tbody tr")
    if first is not None and p.is_visible("#out-reco-row"):
        server = catalog["servers"].filter(pl.col("server_id") == first.get_attribute("data-server"))["display_name"][0]
        assert f"«{server}»" in changed.replace("\xa0", " ")
    href = unquote(p.get_attribute("#calc-quote", "href"))
    assert "32768" in href and "Qwen2.5 14B" in href
    p.select_option("#calc-model", "custom")
    p.fill("#calc-params", "72")
    href = unquote(p.get_attribute("#calc-quote", "href"))
    assert "своя модель, 72 млрд параметров" in href and "Llama 3.1 70B" not in href
    assert "своя модель, 72 млрд параметров" in p.text_content("#calc-headline")
    context.close()


def test_download_has_every_shown_figure(browser, site_server, catalog):
    context = browser.new_context(locale="ru-RU")
    p = context.new_page()
    p.goto(site_server + "calculator.html?model=generic-70b&method=lora")
    p.wait_for_selector("#calc[data-ready=true]")
    href = p.get_attribute("#calc-download", "href")
    assert href.startswith("data:text/csv;charset=utf-8,")
    rows = list(csv.reader(io.StringIO(unquote(href.split(",", 1)[1]).lstrip("\ufeff"))))
    figures = {r[1]: r[2] for r in rows if r[0] == "figure"}
    assert rows[1][2] == p.text_content("#calc-headline")
    for name in ("out-fp-memory", "out-fp-low", "out-fp-high", "out-memory", "out-low", "out-high", "out-reco"):
        assert figures[name] == p.text_content(f"#{name}").strip(), name
    # a value is one line, as the reader sees it (the template's line breaks and indents are spaces; no-break spaces stay)
    assert figures["out-fp-setup"] == "типовая постановка"
    assert all("\n" not in v and "  " not in v for r in rows for v in r)
    cards = [r for r in rows if r[0] == "out-cards"]
    assert len(cards) == catalog["gpus"].height
    assert [r for r in rows if r[0] == "out-servers"]
    context.close()


def test_the_seed_offers_say_the_link_of_the_plan_and_never_require_nvlink(built, catalog):
    """gpu-count's offers table: each plan says what its server's link means for the job (PCIe servers say
    PCIe), with one sentence on why it differs from the seed's offer; no «обязательно» beside a server."""
    text = html.unescape(page(built, "gpu-count.html")).replace("\xa0", " ")
    reco, offers = labels()["entities"]["reco"], labels()["legacy_offers_table"]
    table = text.split(f">{offers['why']}</th>")[1].split("</table>")[0]
    assert reco["link_pcie"] in table and "обязательно" not in table
    r = best_rows(catalog)[("generic-13b", "full_amp")]
    assert r["link"] == "pcie" and cell_text(catalog, r) in table
    tight = offers["why_tight"].split("«")[0]
    assert tight in table and offers["why_network"].split("«")[0] in table


def test_compare_server_fit_shows_the_plan_beside_the_table_rule(built, catalog):
    text = html.unescape(page(built, "compare/server-fit.html")).replace("\xa0", " ")
    reco = labels()["entities"]["reco"]
    assert reco["plan_row"] in text and reco["plan_vs_table"] in text
    r = best_rows(catalog)[("generic-8b", "full_amp")]
    assert cell_text(catalog, r) in text


def test_articles_carry_the_quote_action(built):
    for name in ("gpu-count.html", "finetune-memory.html", "method-comparison.html"):
        text = page(built, name)
        assert 'class="quote-link" href="mailto:sales@tenzor.cloud?subject=' in text, name


def test_every_table_of_server_fit_says_what_its_cells_mean(built):
    """The pages whose table says whether a job fits a server (the comparison, a model's, a server's) say
    what «да», «по оценке да…» and «нет: N шт.» mean; the GPU comparisons, whose cells are card counts, do not."""
    fit = labels()["fit"]
    high = "+50"  # constants.csv's range_high as the site writes it
    legend = (
        f"«Да» — суммарная видеопамять сервера не меньше верхней границы оценки ({high} %); "
        f"«{fit['estimate_only'].format(range_high=high)}» — не меньше оценки, но меньше верхней границы; "
        f"«{fit['no_servers'].format(range_high=high, n='N', n_high='M')}» — задача не помещается"
    )
    cell = re.compile(re.escape(fit["no_servers"].format(range_high=high, n="@", n_high="@")).replace("@", r"\d+"))
    for path in ("compare/server-fit.html", "models/llama-3-1-70b.html", "servers/xfusion-2x-h100.html"):
        text = html.unescape(page(built, path)).replace("\xa0", " ")
        assert text.count(legend) == 1, path
        assert cell.search(text), path  # the legend explains cells the page has
    assert "«Да» —" not in html.unescape(page(built, "compare/gpu-cards-lora.html"))
