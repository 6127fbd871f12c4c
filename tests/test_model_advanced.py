"""Model pages' live breakdown (static/model-advanced.js): without JavaScript the static bars and table of
the typical setup; with it, a form whose setups redraw the same bars and table with calculator.js's
estimator, equal to pipeline/estimate/first_principles.py. Playwright drives Debian's chromium over a local http.server."""

import html
import json
import math
import re
import tomllib
from dataclasses import replace
from urllib.parse import parse_qsl

import pytest

from conftest import ROOT, serious_axe_violations
from pipeline.estimate import first_principles as memory
from pipeline.render import format as fmt

LABELS = tomllib.loads((ROOT / "site_templates" / "labels.toml").read_text(encoding="utf-8"))["estimator"]
LORA_ONLY = ("lora_rank", "lora_targets")
FIELD_IDS = {
    "seq_len": "#bd-seq-len",
    "micro_batch": "#bd-micro-batch",
    "gpus": "#bd-gpus",
    "lora_rank": "#bd-lora-rank",
    "sharding": "#bd-sharding",
    "offload": "#bd-offload",
    "optimizer": "#bd-optimizer",
    "lora_targets": "#bd-lora-targets",
    "grad_checkpointing": "#bd-grad-checkpointing",
    "flash_attention": "#bd-flash-attention",
    "loss": "#bd-loss",
    "fp8": "#bd-fp8",
}

# (model, what differs from the typical setup): a dense model, an MoE model, a generic size, DeepSeek's MLA.
CASES = [
    ("llama-3-1-8b", {"seq_len": 4096, "micro_batch": 2, "grad_checkpointing": False, "flash_attention": False}),
    ("llama-3-1-8b", {"sharding": "zero3", "gpus": 8, "offload": "optimizer", "optimizer": "adamw_8bit"}),
    ("llama-3-1-8b", {"lora_rank": 64, "lora_targets": "qv", "fp8": True, "loss": "chunked"}),
    ("qwen3-30b-a3b", {"sharding": "zero2", "gpus": 4, "optimizer": "sgd", "seq_len": 8192}),
    ("qwen3-30b-a3b", {"sharding": "zero3", "gpus": 16, "offload": "full", "lora_targets": "attention"}),
    ("generic-13b", {"sharding": "zero1", "gpus": 2, "seq_len": 1024, "micro_batch": 4}),
    ("generic-13b", {"lora_rank": 8, "lora_targets": "attention", "flash_attention": False, "seq_len": 512}),
    ("deepseek-v3", {"sharding": "zero3", "gpus": 256, "offload": "optimizer"}),
    ("deepseek-v3", {"sharding": "zero3", "gpus": 64, "fp8": True, "optimizer": "adamw_8bit", "seq_len": 4096}),
    ("mixtral-8x7b", {"sharding": "zero2", "gpus": 8, "lora_rank": 32, "loss": "chunked", "micro_batch": 3}),
    # No card count: each method stays on its own cards (405 B: 3 to 32), with what the reader changed.
    ("llama-3-1-405b", {"seq_len": 4096, "micro_batch": 2}),
    ("llama-3-1-405b", {"sharding": "zero2", "optimizer": "adamw_8bit"}),
]

# Invalid combinations and the codes of their messages (the page's text keys, as in the calculator).
INVALID = [
    # (on one card: every method of the page now runs on its server's cards with ZeRO-3, issue 35)
    ({"gpus": 1, "sharding": "ddp", "offload": "optimizer"}, ["offload_ddp"]),
    ({"sharding": "zero2", "offload": "full"}, ["offload_full"]),
    ({"gpus": 0}, ["min_gpus"]),
    ({"lora_rank": 0}, ["min_lora_rank"]),
]

READ = """() => {
  const figure = document.getElementById("bd-figure");
  const bars = {};
  for (const g of figure.querySelectorAll("svg g[data-method]")) {
    bars[g.dataset.method] = {
      total: g.querySelector(".bar-total").textContent,
      total_x: Number(g.querySelector(".bar-total").getAttribute("x")),
      rects: [...g.querySelectorAll("rect")].map((r) => ({
        part: r.getAttribute("class").replace("part-", ""),
        x: Number(r.getAttribute("x")),
        width: Number(r.getAttribute("width")),
        title: r.querySelector("title").textContent,
      })),
    };
  }
  const table = [...document.querySelectorAll("#bd-table tbody tr")].map((row) => [
    row.querySelector("th a").getAttribute("href").replace(/^.*\\//, "").replace(".html", ""),
    ...[...row.querySelectorAll("td")].map((td) => td.textContent),
  ]);
  const shown = (el) => el !== null && el.closest("[hidden]") === null;
  const problems = document.getElementById("bd-problems");
  return {
    raw: figure.dataset.raw ? JSON.parse(figure.dataset.raw) : null,
    bars,
    table,
    title: document.getElementById("breakdown-title").textContent,
    setup: document.getElementById("bd-setup").textContent,
    kind: document.getElementById("bd-setup-kind").textContent,
    href: document.getElementById("bd-calculator").getAttribute("href"),
    problems: shown(problems) ? [...problems.querySelectorAll("li")].map((li) => li.textContent) : [],
    table_visible: shown(document.getElementById("bd-table")),
    bars_visible: getComputedStyle(figure.querySelector("svg")).visibility === "visible",
  };
}"""


@pytest.fixture(scope="module")
def architectures(catalog):
    return memory.model_architectures(catalog["models"])


@pytest.fixture(scope="module")
def method_order(catalog):
    return catalog["methods"].sort("sort_order")["method_id"].to_list()


def open_model(page, site_server, model_id):
    page.goto(site_server + f"models/{model_id}.html")
    page.wait_for_selector("#bd-form[data-ready='true']")


def page_text(built, model_id) -> dict:
    page = (built / "site" / "models" / f"{model_id}.html").read_text(encoding="utf-8")
    return json.loads(html.unescape(re.search(r'<script type="application/json" id="bd-text">(.*?)</script>', page)[1]))


def set_form(page, values: dict):
    for name, value in values.items():
        selector = FIELD_IDS[name]
        if isinstance(value, bool):
            page.set_checked(selector, value)
        elif isinstance(value, int):
            page.fill(selector, str(value))
        else:
            page.select_option(selector, value)


def own_cards(catalog, model_id) -> dict[str, int]:
    """Each method's cards on the static page (memory_breakdown: the cards its recommendation uses)."""
    rows = catalog["memory_breakdown"].filter(model_id=model_id)
    return dict(rows.select("method_id", "gpus").iter_rows())


def python_breakdowns(catalog, architectures, methods, model_id, changes) -> dict[str, memory.Breakdown]:
    """memory.estimate for each method in the typical setup with `changes`: on the method's own cards
    (with the typical multi-GPU sharding on several) unless `changes` sets the cards; the fields that do
    not apply to a method (LoRA's for full fine-tuning, FP8 for LoRA/QLoRA) keep Setup()'s defaults."""
    out = {}
    cards = own_cards(catalog, model_id)
    for method_id in methods:
        gpus = changes.get("gpus", cards[method_id])
        setup = replace(memory.typical_setup(method_id, catalog.constants, gpus), **changes)
        if setup.is_full:
            setup = replace(setup, **{k: getattr(memory.Setup(), k) for k in LORA_ONLY})
        else:
            setup = replace(setup, fp8=False)
        assert setup.problems() == [], (model_id, method_id, changes)
        out[method_id] = memory.estimate(architectures[model_id], setup, catalog.constants)
    return out


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def mismatches(shown: dict, want: dict[str, memory.Breakdown], cards: dict[str, int]) -> list[str]:
    """Raw numbers at 1e-9, the bars' geometry as EstimatorTables.bars draws it, the text as fmt.gb shows
    it, and each method's cards in the table."""
    found = []
    gb = {m: b.gb() for m, b in want.items()}
    widest = max(g["total"] for g in gb.values())
    for method_id, b in want.items():
        raw = shown["raw"]["breakdown"][method_id]
        for part in (*memory.BREAKDOWN_COLUMNS, "cpu", "trainable_params"):
            if not close(raw[part], getattr(b, part)):
                found.append(f"{method_id} raw {part}: {raw[part]} != {getattr(b, part)}")
        if not close(raw["total"], b.total):
            found.append(f"{method_id} raw total: {raw['total']} != {b.total}")
        bar = shown["bars"][method_id]
        if bar["total"] != f"{fmt.gb(gb[method_id]['total'])} ГБ":
            found.append(f"{method_id} bar total {bar['total']!r}")
        x, rects = 0.0, []
        for part in memory.BREAKDOWN_COLUMNS:
            width = gb[method_id][part] / widest * 100
            if width > 0:
                rects.append((part, 50 + x, width, f"{LABELS[f'part_{part}']}: {fmt.gb(gb[method_id][part])} ГБ"))
            x += width
        got = [(r["part"], r["x"], r["width"], r["title"]) for r in bar["rects"]]
        if [(p, t) for p, _, _, t in got] != [(p, t) for p, _, _, t in rects]:
            found.append(f"{method_id} rects {got} != {rects}")
        elif not all(close(a[1], b_[1]) and close(a[2], b_[2]) for a, b_ in zip(got, rects, strict=True)):
            found.append(f"{method_id} rect geometry {got} != {rects}")
        if not close(bar["total_x"], 50 + x + 1):
            found.append(f"{method_id} total at x={bar['total_x']}, want {50 + x + 1}")
        row = next(r for r in shown["table"] if r[0] == method_id)
        want_cells = [
            fmt.integer(cards[method_id]),
            *(fmt.gb(gb[method_id][p]) for p in (*memory.BREAKDOWN_COLUMNS, "total")),
        ]
        if row[1 : len(want_cells) + 1] != want_cells:
            found.append(f"{method_id} table {row[1 : len(want_cells) + 1]} != {want_cells}")
    return found


def test_without_javascript_the_page_is_static(browser, site_server, catalog, method_order):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(site_server + "models/llama-3-1-8b.html")
    assert page.is_hidden("#bd-form")
    shown = page.evaluate(READ)
    assert shown["raw"] is None and shown["problems"] == []
    assert list(shown["bars"]) == method_order
    rows = {
        r["method_id"]: r for r in catalog["memory_breakdown"].filter(model_id="llama-3-1-8b").iter_rows(named=True)
    }
    for method_id, bar in shown["bars"].items():
        assert bar["total"].replace("\xa0", " ") == f"{fmt.gb(rows[method_id]['total_gb'])} ГБ"
    assert [r[0] for r in shown["table"]] == method_order
    context.close()


def spaced(shown):
    """What the page shows with the typesetter's non-breaking spaces as plain ones: the static page
    is typeset at build time, the live one is written by the script (the figures must match)."""
    return json.loads(json.dumps(shown, ensure_ascii=False).replace("\u00a0", " ").replace("\xa0", " "))


@pytest.mark.parametrize("model_id", ["llama-3-1-8b", "qwen3-30b-a3b", "generic-13b", "deepseek-v3"])
def test_live_numbers_start_equal_to_the_static_ones(
    browser, page, site_server, catalog, architectures, method_order, model_id
):
    context = browser.new_context(java_script_enabled=False)
    static_page = context.new_page()
    static_page.goto(site_server + f"models/{model_id}.html")
    static = spaced(static_page.evaluate(READ))
    context.close()
    open_model(page, site_server, model_id)
    shown = page.evaluate(READ)
    live = spaced(shown)
    for key in ("table", "title", "setup", "kind", "href"):
        assert live[key] == static[key], key
    for method_id in method_order:
        s, v = static["bars"][method_id], live["bars"][method_id]
        assert v["total"] == s["total"] and close(v["total_x"], s["total_x"])
        assert [(r["part"], r["title"]) for r in v["rects"]] == [(r["part"], r["title"]) for r in s["rects"]]
        assert all(
            close(a["x"], b["x"]) and close(a["width"], b["width"]) for a, b in zip(v["rects"], s["rects"], strict=True)
        )
    want = python_breakdowns(catalog, architectures, method_order, model_id, {})
    assert mismatches(shown, want, own_cards(catalog, model_id)) == []
    typical = memory.typical_setup("full_amp", catalog.constants)
    several = max(own_cards(catalog, model_id).values()) > 1
    for name in FIELD_IDS:
        value = getattr(typical, name)
        if isinstance(value, bool):
            assert page.is_checked(FIELD_IDS[name]) == value, name
        elif name == "gpus" and several:  # empty: each method on its own cards
            assert page.input_value(FIELD_IDS[name]) == "", name
            assert page.get_attribute(FIELD_IDS[name], "placeholder") == "как в рекомендации"
        else:
            assert page.input_value(FIELD_IDS[name]) == str(value), name


def test_setups_redraw_bars_and_table_like_python(page, site_server, catalog, architectures, method_order):
    assert {m for m, _ in CASES} >= {"llama-3-1-8b", "qwen3-30b-a3b", "generic-13b", "deepseek-v3"}
    assert architectures["qwen3-30b-a3b"].is_moe and architectures["deepseek-v3"].attention_kind == "mla"
    for model_id, changes in CASES:
        open_model(page, site_server, model_id)
        set_form(page, changes)
        shown = page.evaluate(READ)
        assert shown["problems"] == [] and shown["table_visible"] and shown["bars_visible"], (model_id, changes)
        assert shown["raw"]["problems"] == []
        want = python_breakdowns(catalog, architectures, method_order, model_id, changes)
        cards = {m: changes.get("gpus", n) for m, n in own_cards(catalog, model_id).items()}
        assert mismatches(shown, want, cards) == [], (model_id, changes)
        assert shown["kind"] == "выбранной постановке"
        assert shown["title"].endswith(shown["setup"])


def test_the_calculator_link_carries_the_setup(page, site_server):
    open_model(page, site_server, "qwen3-32b")
    set_form(page, {"seq_len": 4096, "sharding": "zero3", "gpus": 8, "flash_attention": False, "fp8": True})
    href = page.get_attribute("#bd-calculator", "href")
    path, query = href.split("?")
    assert path == "../calculator.html"
    assert dict(parse_qsl(query)) == {
        "model": "qwen3-32b",
        "advanced": "1",
        "seq_len": "4096",
        "micro_batch": "1",
        "grad_checkpointing": "1",
        "lora_rank": "16",
        "gpus": "8",
        "sharding": "zero3",
        "flash_attention": "0",
        "fp8": "1",
        "method": "full_amp",
    }
    page.click("#bd-reset")
    assert page.get_attribute("#bd-calculator", "href") == (
        "../calculator.html?model=qwen3-32b&advanced=1&seq_len=2048&micro_batch=1&grad_checkpointing=1&lora_rank=16"
    )
    assert page.evaluate(READ)["kind"] == "типовой постановке"


def test_invalid_combination_shows_the_message(page, site_server, built, catalog):
    text = page_text(built, "llama-3-1-8b")
    open_model(page, site_server, "llama-3-1-8b")
    for changes, codes in INVALID:
        page.click("#bd-reset")
        set_form(page, changes)
        shown = page.evaluate(READ)
        method = "lora" if "lora_rank" in changes else "full_amp"
        assert replace(memory.typical_setup(method, catalog.constants), **changes).problems(), changes
        assert shown["raw"] == {"problems": codes}, changes
        assert shown["problems"] == [text[c] for c in codes]
        assert not shown["table_visible"] and not shown["bars_visible"]
    page.click("#bd-reset")
    page.fill("#bd-micro-batch", "2,5")
    shown = page.evaluate(READ)
    assert shown["problems"] == [text["not_integer"].format(label="Микробатч")]
    assert page.get_attribute("#bd-micro-batch", "aria-invalid") == "true"
    page.fill("#bd-micro-batch", "2")
    shown = page.evaluate(READ)
    assert shown["problems"] == [] and shown["table_visible"] and shown["bars_visible"]


def test_form_by_keyboard(page, site_server):
    open_model(page, site_server, "llama-3-1-8b")
    page.focus("#bd-seq-len")
    page.keyboard.press("Control+A")
    page.keyboard.type("4096")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "bd-micro-batch"
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "bd-sharding"
    page.keyboard.press("End")
    raw = page.evaluate(READ)["raw"]
    assert raw["setup"]["seq_len"] == 4096 and raw["setup"]["sharding"] == "zero3"
    page.focus("#bd-reset")
    page.keyboard.press("Enter")
    assert page.evaluate(READ)["raw"]["setup"]["seq_len"] == 2048


def test_fits_a_phone_and_passes_axe(browser, site_server):
    context = browser.new_context(viewport={"width": 390, "height": 844}, locale="ru-RU")
    page = context.new_page()
    for changes in (
        {"sharding": "zero3", "gpus": 64, "offload": "optimizer"},
        {"sharding": "ddp", "offload": "optimizer"},
    ):
        open_model(page, site_server, "deepseek-v3")
        set_form(page, changes)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, changes
        violations = serious_axe_violations(page)
        assert violations == [], violations
    context.close()
