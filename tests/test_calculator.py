"""The «Дообучение» calculator: its JSON, its page, and parity of the browser's figures with the pipeline's."""

import csv
import html
import json
import math
import re
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import polars as pl
import pytest

from conftest import METHOD_IDS, sweep
from pipeline import lookups
from pipeline.estimate import first_principles as memory
from pipeline.estimate import step_time, training
from pipeline.estimate import table_rule as estimate
from pipeline.estimate.architecture import architecture_from_config, parameter_counts
from pipeline.render import format as fmt
from pipeline.render.calculator_json import CONSTANTS, ESTIMATOR_CONSTANTS, calculator_data, calculator_json

ROOT = Path(__file__).resolve().parent.parent

# Custom sizes (B): below, on, between and above the anchors (7, 14, 30, 70) and the seed's sizes.
SIZES = [0.5, 3.3, 7, 8, 10.5, 12.5, 14, 22, 30, 32, 50, 70, 84, 100, 235, 405]


# ---- calculator_data ----


def test_data_carries_every_anchor_and_constant(catalog):
    data = calculator_data(catalog)
    anchors = catalog["memory_anchors"]
    assert sum(len(rows) for rows in data["anchors"].values()) == anchors.height
    assert data["anchors"]["lora"] == [[7, 16], [14, 32], [30, 64], [70, 160]]
    assert data["constants"] == {name: catalog.constants[name] for name in CONSTANTS}
    assert data["ceil_relative_tolerance"] == estimate.RELATIVE_TOLERANCE
    assert [m["id"] for m in data["methods"]] == [
        "qlora_2bit",
        "qlora_4bit",
        "qlora_8bit",
        "lora",
        "full_bf16",
        "full_amp",
    ]
    assert [m["id"] for m in data["methods"] if m["theoretical_min_applies"]] == ["full_amp"]
    assert len(data["models"]) == catalog["models"].height
    assert len(data["gpus"]) == catalog["gpus"].height


def test_data_servers_have_total_memory_and_price(catalog):
    servers = {s["id"]: s for s in calculator_data(catalog)["servers"]}
    assert servers["rtx-pro-6000-8x"]["server_memory_gb"] == 768
    assert servers["rtx-pro-6000-8x"]["price_rub_month"] is None
    assert servers["xfusion-2x-h100"] == {
        "id": "xfusion-2x-h100",
        "name": "2 × H100 80GB (XFUSION)",
        "gpu_id": "h100-pcie",
        "gpu_count": 2,
        "server_memory_gb": 160,
        "price_rub_month": 585000,
        "price_rub_hour": None,
        "min_term_months": None,
        "interconnect": "pcie",
        "network": None,
    }


def test_json_is_deterministic_and_published(catalog, built):
    text = calculator_json(catalog)
    assert text == calculator_json(catalog)
    assert json.loads(text) == calculator_data(catalog)
    assert (built / "site" / "data" / "calculator.json").read_text(encoding="utf-8") == text


def test_anchor_sizes_are_data(catalog):
    """A new anchor column (110B) reaches the page's data with no code change."""
    anchors = pl.concat(
        [
            catalog["memory_anchors"],
            catalog["memory_anchors"]
            .filter(pl.col("params_b") == 70)
            .with_columns(params_b=pl.lit(110).cast(catalog["memory_anchors"]["params_b"].dtype)),
        ]
    )
    tables = dict(catalog.tables, memory_anchors=anchors)
    data = calculator_data(replace(catalog, tables=tables))
    assert data["anchors"]["full_amp"][-1] == [110, 1200]


def test_page_has_labels_noscript_and_the_time_block(built):
    page = (built / "site" / "calculator.html").read_text(encoding="utf-8")
    ids = [i for i in re.findall(r'<(?:input|select)[^>]* id="([^"]+)"', page) if not i.startswith("site-search")]
    assert len(ids) == 9 + 20  # the table rule's fields, the advanced switch and the 19 Setup fields
    for field_id in ids:
        assert f'<label for="{field_id}">' in page, field_id
    assert "<noscript>" in page
    assert 'aria-live="polite"' in page
    start = page.index('<details id="calc-time"')
    details = page[start : page.index("</details>", start)]
    assert "счёт и обмен между картами" in details
    assert (
        '<input id="calc-util" name="util" type="text" inputmode="decimal" autocomplete="off" aria-describedby'
        in details
    )
    assert "33\xa0% на картах уровня H100" in details  # achieved_efficiency, from constants.csv
    assert "целые месяцы по 720 ч" in details  # hours_per_month, never price / 720
    assert re.search(r'<script type="module" src="calculator\.[0-9a-f]{10}\.js">', page)


# ---- what the pipeline says the page should show ----


def test_the_method_sweeps_cover_every_method(catalog):
    assert METHOD_IDS == catalog["methods"].sort("sort_order")["method_id"].to_list()


def page_text(built) -> dict:
    page = (built / "site" / "calculator.html").read_text(encoding="utf-8")
    return json.loads(
        html.unescape(re.search(r'<script type="application/json" id="calc-text">(.*?)</script>', page)[1])
    )


def custom_catalog_tables(catalog):
    """estimates, gpu_fit and server_fit for the custom SIZES, computed by pipeline/estimate/table_rule.py."""
    models = pl.DataFrame({"model_id": [f"custom:{s}" for s in SIZES], "params_b": [float(s) for s in SIZES]})
    est = estimate.estimate_memory(models, catalog["methods"], catalog["memory_anchors"], catalog.constants)
    return est, estimate.gpu_fit(est, catalog["gpus"]), estimate.server_fit(est, catalog["servers"], catalog["gpus"])


@pytest.fixture(scope="module")
def expected(catalog, built):
    """(model key, method) -> the figures the page must show, formatted by pipeline/render/format.py."""
    text = page_text(built)
    custom = custom_catalog_tables(catalog)
    estimates = pl.concat([catalog["estimates"], custom[0]])
    gpu_fit = pl.concat([catalog["gpu_fit"], custom[1]])
    server_fit = pl.concat([catalog["server_fit"], custom[2]])

    def price(value):
        return text["on_request"] if value is None else text["price"].format(price=fmt.integer(value))

    cards = {}
    for r in gpu_fit.iter_rows(named=True):
        cards.setdefault((r["model_id"], r["method_id"]), {})[r["gpu_id"]] = [
            fmt.integer(r["cards"]),
            fmt.integer(r["cards_high"]),
            text[f"nvlink_{r['nvlink_need']}"],
        ]
    fits = {}
    for r in server_fit.sort("server_memory_gb", "server_id").iter_rows(named=True):
        fits.setdefault((r["model_id"], r["method_id"]), []).append(r)

    sizes = {}
    for method_id, size in catalog["memory_anchors"].sort("params_b").select("method_id", "params_b").iter_rows():
        sizes.setdefault(method_id, []).append(size)

    def note(p, method_id, basis):
        """The anchor sizes the basis note names: the neighbours of p, or the one it is proportional to."""
        lower = max((s for s in sizes[method_id] if s <= p), default=None)
        upper = min((s for s in sizes[method_id] if s >= p), default=None)
        shown = {"anchor": [lower], "interpolated": [lower, upper], "below_range": [upper], "extrapolated": [lower]}
        return [fmt.gb(s) for s in shown[basis]]

    out = {}
    for r in estimates.iter_rows(named=True):
        key = (r["model_id"], r["method_id"])
        fitting = [s for s in fits[key] if s["fit"] != "no"]
        fitting.sort(
            key=lambda s: (
                s["price_rub_month"] is None,
                s["price_rub_month"] or 0,
                s["server_memory_gb"],
                s["server_id"],
            )
        )
        out[key] = {
            "memory": fmt.gb(r["memory_gb"]),
            "low": fmt.gb(r["memory_low_gb"]),
            "high": fmt.gb(r["memory_high_gb"]),
            "min": fmt.gb(r["theoretical_min_gb"]) if r["theoretical_min_gb"] is not None else None,
            "basis": [r["basis"]],
            "note": note(r["params_b"], r["method_id"], r["basis"]),
            "cards": cards[key],
            "servers": [[s["server_id"], text[f"fit_{s['fit']}"], price(s["price_rub_month"])] for s in fitting],
            "_row": r,
            "_fits": {s["server_id"]: s for s in fits[key]},
        }
    return out


def public(figures: dict) -> dict:
    return {k: v for k, v in figures.items() if not k.startswith("_")}


# ---- the page in a browser ----

READ = """() => {
  const $ = (id) => document.getElementById(id);
  const shown = (el) => el !== null && el.closest("[hidden]") === null;
  const text = (id) => (shown($(id)) ? $(id).textContent : null);
  const cells = (row, names) => names.map((n) => row.querySelector(`[data-cell="${n}"]`).textContent);
  return {
    memory: text("out-memory"),
    low: text("out-low"),
    high: text("out-high"),
    min: text("out-min"),
    basis: [...document.querySelectorAll("[data-basis]")].filter(shown).map((n) => n.dataset.basis),
    note: [...document.querySelectorAll("[data-basis] [data-slot]")].filter(shown).map((n) => n.textContent),
    cards: Object.fromEntries(
      [...document.querySelectorAll("#out-cards tbody tr")].map((r) => [r.dataset.gpu, cells(r, ["cards", "cards_high", "nvlink"])]),
    ),
    servers: shown($("out-servers"))
      ? [...document.querySelectorAll("#out-servers tbody tr")].map((r) => [r.dataset.server, ...cells(r, ["fit", "price"])])
      : [],
    gpu_line: text("out-gpu-line"),
    server_line: text("out-server-line"),
    time_gpu: text("out-time-gpu"),
    hours: text("out-hours"),
    cost: text("out-cost"),
    time_servers: text("out-time-servers"),
  };
}"""

FIGURES = ("memory", "low", "high", "min", "basis", "note", "cards", "servers")


@pytest.fixture
def page(browser, site_server):
    context = browser.new_context()
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == []


def open_calculator(page, site_server, query: dict | None = None):
    page.goto(site_server + "calculator.html" + ("?" + urlencode(query) if query else ""))
    page.wait_for_selector("#calc[data-ready='true']")


def figures(shown: dict) -> dict:
    """The figures of READ's result that the pipeline's tables hold."""
    return {k: shown[k] for k in FIGURES}


def read(page) -> tuple[dict, dict]:
    shown = page.evaluate(READ)
    return figures(shown), shown


@pytest.mark.parametrize("method", METHOD_IDS)
def test_parity_with_the_pipeline(page, site_server, catalog, expected, method):
    """Drive the form like a reader: every catalog model and every custom size, with every method (one
    test per method). The form is set in the page (conftest.sweep), as Playwright's actions set it
    (test_the_sweep_shows_what_playwright_actions_show)."""
    open_calculator(page, site_server)
    models = catalog["models"]["model_id"].to_list()
    steps = [[("#calc-model", model_id), ("#calc-method", method)] for model_id in models]
    keys = list(models)
    for i, size in enumerate(SIZES):
        # Half of the sizes typed the Russian way, with a decimal comma.
        typed = str(size).replace(".", ",") if i % 2 else str(size)
        steps.append([("#calc-model", "custom"), ("#calc-params", typed), ("#calc-method", method)])
        keys.append(f"custom:{size}")
    mismatches = []
    for key, everything in zip(keys, sweep(page, steps, READ), strict=True):
        shown = figures(everything)
        want = {k: v for k, v in public(expected[(key, method)]).items() if k in FIGURES}
        if shown != want:
            mismatches.append((key, method, shown, want))
    assert mismatches == []
    assert len(keys) == catalog["models"].height + len(SIZES)


def test_the_sweep_shows_what_playwright_actions_show(page, site_server, catalog):
    """The sweeps set the form in the page; Playwright's own select_option and fill, step by step, make
    the page show the same figures, in the basic and the advanced mode (models, methods, a typed size)."""
    both = f"() => ({{basic: ({READ})(), advanced: ({READ_ADVANCED})()}})"
    models = catalog["models"]["model_id"].to_list()
    steps = [
        [("#calc-model", models[0]), ("#calc-method", "lora")],
        [("#calc-model", models[-1]), ("#calc-method", "full_amp")],
        [("#calc-model", "custom"), ("#calc-params", "12,5"), ("#calc-method", "qlora_4bit")],
        [("#calc-model", models[len(models) // 2]), ("#calc-method", "qlora_4bit")],
    ]
    open_calculator(page, site_server, {"advanced": "1"})
    swept = sweep(page, steps, both)
    open_calculator(page, site_server, {"advanced": "1"})
    by_hand = []
    for actions in steps:
        for selector, value in actions:
            if selector == "#calc-params":
                page.fill(selector, value)
            else:
                page.select_option(selector, value)
        by_hand.append(page.evaluate(both))
    assert len({json.dumps(r, sort_keys=True) for r in by_hand}) == len(steps)  # each step shows other figures
    assert swept == by_hand


# URL-driven cases: GPU, server and the time block. Each key is a field of the form.
URL_CASES = [
    {
        "model": "custom",
        "params": "0.5",
        "method": "qlora_4bit",
        "gpu": "rtx-4090",
        "server": "xfusion-2x-h100",
        "tokens": "10",
        "epochs": "3",
    },
    {
        "model": "generic-70b",
        "method": "lora",
        "gpu": "rtx-pro-6000",
        "server": "h200-nvl-4x",
        "tokens": "500",
        "util": "35",
    },
    {
        "model": "custom",
        "params": "405",
        "method": "full_amp",
        "gpu": "h200-sxm",
        "server": "esc8000a-8x-h200",
        "tokens": "1000",
        "epochs": "2",
        "util": "50",
    },
    {"model": "llama-3-1-8b", "method": "full_bf16", "gpu": "b200", "tokens": "200", "cards": "4"},
    {"model": "custom", "params": "32", "method": "full_amp", "server": "rtx-pro-6000-8x", "tokens": "100"},
    {"model": "custom", "params": "8", "method": "lora", "gpu": "a100-80gb", "tokens": "2.5"},
    {
        "model": "qwen3-235b-a22b",
        "method": "qlora_4bit",
        "gpu": "mi300x",
        "server": "esc8000a-4x-h100",
        "tokens": "50",
        "epochs": "1.5",
        "cards": "3",
    },
    {"model": "deepseek-v3", "method": "full_amp", "server": "esc8000a-4x-h200", "tokens": "1000"},
    {
        "model": "custom",
        "params": "70",
        "method": "qlora_2bit",
        "gpu": "l40s",
        "server": "esc8000a-4x-h200",
        "tokens": "20",
        "util": "60",
        "cards": "2",
    },
    {"model": "custom", "params": "12.5", "method": "qlora_8bit", "gpu": "h100-sxm"},
    {
        "model": "custom",
        "params": "7",
        "method": "full_amp",
        "gpu": "h100-pcie",
        "server": "esc8000a-8x-h100",
        "tokens": "300",
        "epochs": "2",
    },
    {"model": "mixtral-8x22b", "method": "lora", "server": "hgx-b300-8x", "tokens": "100"},
    # 84B full: 1 440 GB (= 8 x B200 exactly), up to 2 160 GB (= 8 x B300 exactly): the boundaries of rule 6.
    {"model": "custom", "params": "84", "method": "full_amp", "gpu": "b200", "server": "hgx-b200-8x"},
    {"model": "custom", "params": "84", "method": "full_amp", "gpu": "b300", "server": "hgx-b300-8x"},
]


def model_key(case: dict) -> str:
    """The key of `expected` for a URL case: a catalog model id or "custom:<size as in SIZES>"."""
    return f"custom:{float(case['params']):g}" if case["model"] == "custom" else case["model"]


def site_time(catalog, arch, setup, gpu, server, tokens, share):
    """(hours as the site shows them, cost) of `setup` on `gpu` or on whole `server`s, as calculator.js's
    renderTime computes them: the time model ÷ the published runs' speed factor (none with the reader's
    own share of the peak); no time across servers without a declared network."""
    c = catalog.constants
    band = lookups.time_band(catalog["time_summary"], catalog["time_calibration"])
    band = band if share is None else replace(band, speed=1.0)
    if server is None:
        link = step_time.CARD_LINKS.get(gpu["interconnect"], "pcie")
        t = step_time.training_time(arch, setup, gpu, tokens, c, link, share=share)
    else:
        servers = math.ceil(setup.gpus / server["gpu_count"])
        t = step_time.server_time(arch, setup, gpu, tokens, c, server, servers, share)
    if t is None:
        return None, None
    hours = band.hours(t.hours)
    return hours, None if server is None else training.rental_cost(hours, servers, server, c)[0]


def expected_time(catalog, text, figures, case):
    """The time model and the cost, in the order calculator.js computes them."""
    if "tokens" not in case or ("gpu" not in case and "server" not in case):
        return None
    gpus = {r["gpu_id"]: r for r in catalog["gpus"].iter_rows(named=True)}
    servers = {r["server_id"]: r for r in catalog["servers"].iter_rows(named=True)}
    server = servers.get(case.get("server"))
    gpu = gpus[server["gpu_id"]] if server else gpus[case["gpu"]]
    row = figures["_row"]
    if "cards" in case:
        cards = math.ceil(float(case["cards"]))
    elif server:
        cards = server["gpu_count"] * figures["_fits"][server["server_id"]]["servers_needed"]
    else:
        cards = int(figures["cards"][gpu["gpu_id"]][0])
    c = catalog.constants
    archs = memory.model_architectures(catalog["models"])
    arch = archs[case["model"]] if case["model"] in archs else memory.architecture_for_size(row["params_b"], archs)
    setup = memory.typical_setup(case["method"], c, cards)
    tokens = float(case["tokens"]) * 1e6 * float(case.get("epochs", "1"))
    share = float(case["util"]) / 100 if "util" in case else None
    hours, _ = site_time(catalog, arch, setup, gpu, server, tokens, share)
    out = {
        "time_gpu": text["time_gpu"].format(name=gpu["short_name"], cards=fmt.integer(cards)),
        "hours": "—" if hours is None else fmt.number(hours, 1),
        "cost": None,
        "time_servers": None,
    }
    # several servers without a declared network: not recommended, no total price (issue 35)
    unjoined = server is not None and math.ceil(cards / server["gpu_count"]) > 1 and not server["network"]
    if server and server["price_rub_month"] is not None and not unjoined and hours is not None:
        count = math.ceil(cards / server["gpu_count"])
        cost = training.rental_cost(hours, count, server, catalog.constants)[0]
        out["cost"] = fmt.number(cost, 0)
        out["time_servers"] = text["time_servers"].format(name=server["display_name"], count=fmt.integer(count))
    return out


def test_url_parameters_gpu_server_and_time(page, site_server, catalog, built, expected):
    text = page_text(built)
    gpus = {r["gpu_id"]: r for r in catalog["gpus"].iter_rows(named=True)}
    servers = estimate.server_memory(catalog["servers"], catalog["gpus"])
    servers = {r["server_id"]: r for r in servers.iter_rows(named=True)}
    for case in URL_CASES:
        open_calculator(page, site_server, case)
        figures = expected[(model_key(case), case["method"])]
        shown, extra = read(page)
        assert shown == {k: v for k, v in public(figures).items() if k in FIGURES}, case

        for name, value in case.items():  # the inputs are restored from the URL
            assert page.input_value(f"[name={name}]").replace(",", ".") == value, (case, name)
        assert page.evaluate("document.getElementById('calc-time').open") == ("tokens" in case or "cards" in case)

        if "gpu" in case:
            gpu = gpus[case["gpu"]]
            cards, cards_high, nvlink = figures["cards"][gpu["gpu_id"]]
            assert extra["gpu_line"] == text["gpu_line"].format(
                name=gpu["short_name"],
                memory=fmt.gb(gpu["memory_gb"]),
                cards=cards,
                cards_high=cards_high,
                nvlink=nvlink,
            )
        else:
            assert extra["gpu_line"] is None
        if "server" in case:
            s = servers[case["server"]]
            fit = figures["_fits"][case["server"]]
            shown_fit = (
                text["fit_no"].format(
                    count=fmt.integer(fit["servers_needed"]), count_high=fmt.integer(fit["servers_needed_high"])
                )
                if fit["fit"] == "no"
                else text[f"fit_{fit['fit']}"]
            )
            assert extra["server_line"] == text["server_line"].format(
                name=s["display_name"], memory=fmt.gb(s["server_memory_gb"]), fit=shown_fit
            )
        else:
            assert extra["server_line"] is None

        time = expected_time(catalog, text, figures, case)
        shown_time = {k: extra[k] for k in ("time_gpu", "hours", "cost", "time_servers")}
        assert shown_time == (time or dict.fromkeys(shown_time)), case


def test_cases_cover_every_fit_and_basis(expected):
    """The URL cases above are not all alike: every fit verdict and a priced and unpriced server occur."""
    fits = set()
    for case in URL_CASES:
        if "server" in case:
            fits.add(expected[(model_key(case), case["method"])]["_fits"][case["server"]]["fit"])
    assert fits == {"yes", "estimate_only", "no"}
    bases = {expected[(f"custom:{s}", "lora")]["basis"][0] for s in SIZES}
    assert bases == {"below_range", "anchor", "interpolated", "extrapolated"}


def test_inputs_live_in_the_url(page, site_server, expected):
    open_calculator(page, site_server)
    page.select_option("#calc-model", "custom")
    page.fill("#calc-params", "22")
    page.select_option("#calc-method", "full_bf16")
    page.select_option("#calc-gpu", "h200-nvl")
    page.select_option("#calc-server", "esc8000a-4x-h200")
    page.click("#calc-time summary")
    page.fill("#calc-tokens", "1 000")
    page.fill("#calc-util", "45,5")
    search = page.evaluate("window.location.search")  # page.url follows replaceState only asynchronously
    query = dict(parse_qsl(search.lstrip("?")))
    assert query == {
        "model": "custom",
        "params": "22",
        "method": "full_bf16",
        "gpu": "h200-nvl",
        "server": "esc8000a-4x-h200",
        "tokens": "1000",
        "epochs": "1",
        "util": "45.5",
    }
    before = page.evaluate(READ)
    assert read(page)[0] == {k: v for k, v in public(expected[("custom:22", "full_bf16")]).items() if k in FIGURES}
    shared = site_server + "calculator.html" + search
    page.goto("about:blank")
    page.goto(shared)
    page.wait_for_selector("#calc[data-ready='true']")
    assert page.evaluate(READ) == before
    assert page.input_value("#calc-util") == "45,5"


def test_keyboard_only(page, site_server, expected):
    """Tab to the form, choose with the keys, open the time block: no mouse."""
    open_calculator(page, site_server, {"model": "custom"})
    assert page.evaluate(
        "[...document.querySelectorAll('#calc input, #calc select')].every((e) => e.labels.length > 0)"
    )
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "calc-model":
            break
    assert page.evaluate("document.activeElement.id") == "calc-model"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "calc-params"
    page.keyboard.type("70")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "calc-method"
    page.keyboard.press("End")  # the last method: full fine-tuning in mixed precision
    assert page.input_value("#calc-method") == "full_amp"
    assert page.text_content("#out-memory") == expected[("custom:70", "full_amp")]["memory"] == "1\xa0200"
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.tagName") == "SUMMARY":
            break
    page.keyboard.press("Enter")
    assert page.evaluate("document.getElementById('calc-time').open")
    page.keyboard.press("Tab")  # the link to the accuracy page in the time block's explanation
    assert page.evaluate("document.activeElement.getAttribute('href')").endswith("accuracy.html")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "calc-tokens"


def test_calculator_constants_are_required_by_validation():
    # A constant the page reads but validation does not require would surface as a KeyError, not a report line.
    from pipeline.render.calculator_json import CONSTANTS
    from pipeline.schema import REQUIRED_CONSTANTS

    assert set(CONSTANTS) <= set(REQUIRED_CONSTANTS)


# ---- the advanced mode: the first-principles estimator (pipeline/estimate/first_principles.py) in the browser ----


def test_data_carries_the_estimator(catalog):
    data = calculator_data(catalog)["estimator"]
    archs = memory.model_architectures(catalog["models"])
    assert set(data["architectures"]) == set(catalog["models"]["model_id"]) == set(archs)
    assert data["architectures"]["llama-3-1-8b"]["layers"] == 32
    assert data["architectures"]["generic-70b"] == asdict(archs["generic-70b"])  # synthetic, as Python shapes it
    assert data["constants"] == {name: catalog.constants[name] for name in ESTIMATOR_CONSTANTS}
    assert set(memory.CONSTANTS) <= set(data["constants"])
    # The advanced mode opens with the typical setup: checkpointing on, sources/typical_setup.csv.
    assert data["setup_defaults"] == asdict(TYPICAL) and TYPICAL.grad_checkpointing
    assert data["options"]["optimizers"] == list(memory.OPTIMIZERS)
    assert data["options"]["optimizer_states"]["adamw_8bit"] == {"states": 2, "bits": 8, "block": 256}
    assert data["options"]["optimizer_states"]["adamw"] == {"states": 2, "bits": None, "block": 0}
    assert set(data["options"]["optimizer_states"]) == set(memory.OPTIMIZERS)
    assert "deepseek-v3" not in data["dense_references"] and "llama-3-1-405b" in data["dense_references"]
    gpus = {g["id"]: g for g in calculator_data(catalog)["gpus"]}
    assert gpus["h100-sxm"]["fp8_dense_tflops"] == 1979 and gpus["a100-80gb"]["fp8_dense_tflops"] is None


def custom_key(size) -> str:
    return f"custom:{float(size):g}"


@pytest.fixture(scope="module")
def architectures(catalog):
    """Every catalog model's architecture and the custom sizes', exactly as memory.model_architectures makes them."""
    sizes = sorted({float(s) for s in SIZES} | {float(c["params"]) for c in ADVANCED_CASES if c["model"] == "custom"})
    custom = pl.DataFrame({"model_id": [custom_key(s) for s in sizes], "params_b": sizes})
    models = pl.concat([catalog["models"], custom], how="diagonal_relaxed")
    return memory.model_architectures(models)


# The calculator offers every Setup field but torch.compile (refused) and quant_inputs_held (a property of old
# bitsandbytes in LitGPT's loop, for scoring published runs: the command line and --batch have it, not the page).
NOT_IN_CALCULATOR = ("torch_compile", "quant_inputs_held")
SETUP_FIELDS = {name: type(value) for name, value in asdict(memory.Setup()).items() if name not in NOT_IN_CALCULATOR}
TYPICAL = memory.typical_setup(
    "full_amp",
    {
        f"typical_{r['setting_id']}": memory.parse_typical_value(r["setting_id"], r["value"])
        for r in csv.DictReader((ROOT / "sources" / "typical_setup.csv").open(encoding="utf-8"))
    },
)
LORA_ONLY = ("lora_rank", "lora_targets", "lora_dropout", "lora_lm_head", "frozen_fp32")
QLORA_ONLY = ("double_quant", "quantized_lm_head")


def setup_of(case: dict) -> memory.Setup:
    """The Setup a URL case describes; the fields the page hides for the method keep their defaults."""
    values = {}
    full = case["method"].startswith("full")
    for name, kind in SETUP_FIELDS.items():
        if name not in case:
            continue
        if (name in LORA_ONLY and full) or (name == "fp8" and not full):
            continue
        if name in QLORA_ONLY and not case["method"].startswith("qlora"):
            continue
        values[name] = case[name] == "1" if kind is bool else kind(case[name])
    return replace(TYPICAL, **values)


def python_advanced(catalog, architectures, expected, case: dict) -> dict:
    """What the advanced mode must show for a URL case, computed by pipeline/estimate/first_principles.py and pipeline/estimate/training.py."""
    key = model_key(case)
    arch = architectures[key]
    setup = setup_of(case)
    c = catalog.constants
    problems = setup.problems()
    if problems:
        return {"problems": problems}
    breakdown = memory.estimate(arch, setup, c)
    gpus = {r["gpu_id"]: r for r in catalog["gpus"].iter_rows(named=True)}

    def no_fp8(gpu):
        return setup.fp8 and gpu["fp8_dense_tflops"] is None

    gpu_fit = {
        g["gpu_id"]: {
            "fits": not no_fp8(g) and memory.fits(breakdown, g["memory_gb"]),
            "min_gpus": None if no_fp8(g) else memory.min_gpus(arch, setup, c, g["memory_gb"]),
        }
        for g in gpus.values()
    }
    # The servers: the plan's (recommend.plan_job by the CLI's rules: headroom, whole servers, the request
    # sharded as the recommendation shards it), the recommended ones and then the risks, best first.
    from types import SimpleNamespace

    from pipeline.tools.estimate_cli import _server_fits

    typed = SimpleNamespace(
        tokens=float(case["tokens"]) * 1e6 * float(case.get("epochs", "1")) if "tokens" in case else None,
        utilization=float(case["util"]) / 100 if "util" in case else None,
    )
    plan = _server_fits(catalog, arch, setup, typed)
    servers = [
        (r["server_id"], r["per_gpu_gb"] * memory.GB) for r in plan if r["recommended"] or r["reason"] == "tight"
    ]
    out = {
        "_no_fp8": {g for g, row in gpus.items() if no_fp8(row)},
        "problems": [],
        "breakdown": {
            **asdict(breakdown),
            "overhead": breakdown.overhead,
            "allocated": breakdown.allocated,
            "reserved": breakdown.reserved,
            "card": breakdown.card,
            "total": breakdown.total,
        },
        "gpus": gpu_fit,
        "servers": [[server_id, total] for server_id, total in servers],
        "table_memory": expected[(key, case["method"])]["_row"]["memory_gb"],
        "flops_per_token": memory.training_flops_per_token(parameter_counts(arch).active, setup, c),
        "layers": arch.layers,
    }
    if "tokens" in case and ("gpu" in case or "server" in case):
        server_rows = {r["server_id"]: r for r in catalog["servers"].iter_rows(named=True)}
        server = server_rows.get(case.get("server"))
        gpu = gpus[server["gpu_id"]] if server else gpus[case["gpu"]]
        cards = math.ceil(float(case["cards"])) if "cards" in case else setup.gpus
        tokens = float(case["tokens"]) * 1e6 * float(case.get("epochs", "1"))
        flops = training.training_flops(arch, setup, tokens, c)
        sharding = c["typical_multi_gpu_sharding"] if cards > 1 and setup.gpus == 1 else setup.sharding
        on = replace(setup, gpus=cards, sharding=sharding)
        share = float(case["util"]) / 100 if "util" in case else None
        hours, cost = site_time(catalog, arch, on, gpu, server, tokens, share)
        out |= {"cards": cards, "flops": flops, "hours": hours, "cost": cost}
    return out


def close(shown, want, path="") -> list[str]:
    """Where two JSON-like values differ, numbers compared with a relative tolerance of 1e-9."""
    if isinstance(want, dict) and isinstance(shown, dict):
        if set(shown) != set(want):
            return [f"{path}: keys {sorted(set(shown) ^ set(want))}"]
        return [d for k in want for d in close(shown[k], want[k], f"{path}.{k}")]
    if isinstance(want, (list, tuple)) and isinstance(shown, list):
        if len(shown) != len(want):
            return [f"{path}: {shown} != {want}"]
        return [d for i, (a, b) in enumerate(zip(shown, want, strict=True)) for d in close(a, b, f"{path}[{i}]")]
    if isinstance(want, bool) or want is None or isinstance(want, str):
        return [] if shown == want else [f"{path}: {shown!r} != {want!r}"]
    if isinstance(shown, bool) or not isinstance(shown, (int, float)):
        return [f"{path}: {shown!r} != {want!r}"]
    return [] if math.isclose(shown, want, rel_tol=1e-9, abs_tol=0) else [f"{path}: {shown!r} != {want!r}"]


READ_ADVANCED = """() => {
  const result = document.getElementById("adv-result");
  const shown = (el) => el !== null && el.closest("[hidden]") === null;
  const cells = (selector, key, cell) => Object.fromEntries(
    [...document.querySelectorAll(selector)].map((r) => [r.dataset[key], r.querySelector(`[data-cell="${cell}"]`).textContent]));
  return {
    raw: result.dataset.raw ? JSON.parse(result.dataset.raw) : null,
    visible: shown(document.getElementById("adv-output")),
    problems: shown(document.getElementById("adv-problems"))
      ? [...document.querySelectorAll("#adv-problem-list li")].map((li) => li.textContent) : [],
    total: document.getElementById("adv-total").textContent,
    parts: cells("#adv-parts tbody tr", "part", "gb"),
    bar: [...document.querySelectorAll("#adv-bar [data-part]")].map((s) => [s.dataset.part, s.textContent]),
    cpu: shown(document.getElementById("adv-cpu-row")) ? document.getElementById("adv-cpu").textContent : null,
    fits: cells("#adv-gpus tbody tr", "gpu", "fits"),
    min_gpus: cells("#adv-gpus tbody tr", "gpu", "min_gpus"),
    servers: shown(document.getElementById("adv-servers"))
      ? [...document.querySelectorAll("#adv-servers tbody tr")].map((r) => [r.dataset.server, r.querySelector('[data-cell="per_card"]').textContent]) : [],
    hours: shown(document.getElementById("time-output")) ? document.getElementById("out-hours").textContent : null,
    cost: shown(document.getElementById("out-cost-row")) ? document.getElementById("out-cost").textContent : null,
  };
}"""

# Python's Setup.problems() messages -> the page's codes (the page words them in Russian).
PROBLEM_CODES = [
    (r"^(seq_len|micro_batch|grad_accum|gpus|lora_rank) = .*must be at least 1$", "min_{0}"),
    (r"^offload needs ZeRO sharding", "offload_ddp"),
    (r"^offloading the weights", "offload_full"),
    (r"^lora_dropout applies", "dropout_full"),
    (r"^lora_lm_head applies", "head_full"),
    (r"^frozen_fp32 applies", "frozen_full"),
    (r"^double quantisation applies", "double_quant_qlora"),
    (r"^a quantised output layer applies", "quantized_head_qlora"),
    (r"^FP8 training applies", "fp8_full"),
    (r"^the optimizer step inside the backward pass cannot", "in_backward_accum"),
    (r"^the optimizer step inside the backward pass runs", "in_backward_offload"),
    (r"^a paged optimizer", "paged_offload"),
    (r"^torch.compile changes", "torch_compile"),
]


def problem_code(message: str) -> str:
    for pattern, code in PROBLEM_CODES:
        if found := re.match(pattern, message):
            return code.format(*found.groups())
    raise AssertionError(f"no page text for Setup.problems() message {message!r}")


def displayed(text: dict, want: dict) -> dict:
    """The texts the page shows for Python's raw figures, formatted by pipeline/render/format.py."""
    parts = want["breakdown"]
    no_fp8 = want["_no_fp8"]
    return {
        "total": fmt.gb(parts["total"] / memory.GB),
        "parts": {k: fmt.gb(parts[k] / memory.GB) for k in memory.BREAKDOWN_COLUMNS},
        "bar": [
            [k, text["bar_segment"].format(gb=fmt.gb(parts[k] / memory.GB))]
            for k in memory.BREAKDOWN_COLUMNS
            if parts[k] > 0
        ],
        "cpu": fmt.gb(parts["cpu"] / memory.GB) if parts["cpu"] else None,
        "fits": {
            g: text["no_fp8"] if g in no_fp8 else text["yes"] if f["fits"] else text["no"]
            for g, f in want["gpus"].items()
        },
        "min_gpus": {
            g: text["no_fp8"] if g in no_fp8 else text["never"] if f["min_gpus"] is None else fmt.integer(f["min_gpus"])
            for g, f in want["gpus"].items()
        },
        "servers": [[s, fmt.gb(total / memory.GB)] for s, total in want["servers"]],
        # no time across servers without a declared network: the page shows a dash
        "hours": ("—" if want["hours"] is None else fmt.number(want["hours"], 1)) if "hours" in want else None,
        "cost": fmt.number(want["cost"], 0) if want.get("cost") is not None else None,
    }


# ~40 setups covering every option: optimizers, ZeRO 1/2/3 on N cards, offload, checkpointing, FlashAttention,
# chunked loss, LoRA rank and targets, dropout, FP8, custom sizes, MoE and MLA models; some with the time block.
ADVANCED_CASES = [
    {"model": "llama-3-1-8b", "method": "full_amp", "gpu": "h100-sxm", "tokens": "100"},
    {"model": "llama-3-1-8b", "method": "full_amp", "optimizer": "adamw_8bit"},
    {"model": "llama-3-1-8b", "method": "full_bf16", "optimizer": "sgd"},
    {"model": "llama-3-1-70b", "method": "full_amp", "sharding": "zero1", "gpus": "8"},
    {"model": "llama-3-1-70b", "method": "full_amp", "sharding": "zero2", "gpus": "8", "grad_checkpointing": "1"},
    {
        "model": "llama-3-1-70b",
        "method": "full_amp",
        "sharding": "zero3",
        "gpus": "16",
        "grad_checkpointing": "1",
        "server": "hgx-h200-8x",
        "tokens": "100",
    },
    {"model": "qwen3-30b-a3b", "method": "full_bf16", "sharding": "zero3", "gpus": "4", "offload": "optimizer"},
    {
        "model": "deepseek-v3",
        "method": "full_amp",
        "sharding": "zero3",
        "gpus": "64",
        "offload": "full",
        "grad_checkpointing": "1",
    },
    {"model": "deepseek-v3", "method": "qlora_4bit", "lora_targets": "attention", "lora_rank": "64"},
    {
        "model": "deepseek-v3",
        "method": "lora",
        "lora_targets": "qv",
        "lora_rank": "8",
        "flash_attention": "0",
        "seq_len": "1024",
    },
    {"model": "mixtral-8x7b", "method": "qlora_4bit", "lora_rank": "8", "lora_dropout": "1", "double_quant": "1"},
    {"model": "mixtral-8x22b", "method": "lora", "sharding": "zero3", "gpus": "8", "grad_checkpointing": "1"},
    {"model": "custom", "params": "3.3", "method": "full_amp", "flash_attention": "0", "seq_len": "4096"},
    {
        "model": "custom",
        "params": "100",
        "method": "full_amp",
        "sharding": "zero3",
        "gpus": "32",
        "fp8": "1",
        "grad_checkpointing": "1",
        "gpu": "h100-sxm",
        "tokens": "1000",
    },
    {
        "model": "custom",
        "params": "100",
        "method": "qlora_2bit",
        "lora_targets": "qv",
        "lora_rank": "8",
        "double_quant": "1",
    },
    {"model": "custom", "params": "3.3", "method": "lora", "loss": "chunked", "micro_batch": "8"},
    {
        "model": "qwen2-5-7b",
        "method": "qlora_8bit",
        "lora_rank": "64",
        "lora_targets": "attention",
        "lora_dropout": "1",
        "micro_batch": "4",
        "grad_accum": "16",
    },
    {"model": "phi-1-5", "method": "full_amp", "flash_attention": "0", "micro_batch": "2"},
    {"model": "phi-1-5", "method": "lora", "lora_dropout": "1", "gpu": "rtx-4090", "tokens": "5", "epochs": "3"},
    {"model": "gemma-2-9b", "method": "full_amp", "fp8": "1", "loss": "chunked"},
    {
        "model": "gemma-2-27b",
        "method": "full_bf16",
        "sharding": "zero2",
        "gpus": "4",
        "offload": "optimizer",
        "optimizer": "sgd",
    },
    {"model": "generic-70b", "method": "lora", "sharding": "zero3", "gpus": "4", "offload": "full"},
    {
        "model": "generic-7b",
        "method": "full_amp",
        "sharding": "zero1",
        "gpus": "2",
        "offload": "optimizer",
        "optimizer": "adamw_8bit",
    },
    {
        "model": "llama-3-1-405b",
        "method": "full_amp",
        "sharding": "zero3",
        "gpus": "128",
        "grad_checkpointing": "1",
        "loss": "chunked",
        "fp8": "1",
        "server": "hgx-b200-8x",
        "tokens": "500",
        "util": "35",
    },
    {
        "model": "llama-3-1-405b",
        "method": "qlora_4bit",
        "grad_checkpointing": "1",
        "server": "hgx-h200-8x",
        "tokens": "50",
        "epochs": "2",
    },
    {
        "model": "qwen3-235b-a22b",
        "method": "lora",
        "sharding": "zero3",
        "gpus": "8",
        "grad_checkpointing": "1",
        "server": "hgx-b300-8x",
        "tokens": "100",
    },
    {"model": "qwen3-235b-a22b", "method": "full_amp", "sharding": "zero3", "offload": "optimizer", "gpus": "32"},
    {"model": "llama-3-2-1b", "method": "full_amp", "seq_len": "8192", "micro_batch": "4", "flash_attention": "0"},
    {"model": "llama-3-2-1b", "method": "qlora_4bit", "loss": "chunked", "lora_rank": "8", "lora_targets": "qv"},
    {"model": "custom", "params": "0.5", "method": "full_bf16", "optimizer": "adamw_8bit"},
    {
        "model": "custom",
        "params": "405",
        "method": "qlora_4bit",
        "sharding": "zero3",
        "gpus": "8",
        "grad_checkpointing": "1",
    },
    {
        "model": "falcon-40b",
        "method": "full_amp",
        "sharding": "zero3",
        "gpus": "8",
        "grad_checkpointing": "1",
        "optimizer": "sgd",
    },
    {
        "model": "glm-4-9b-chat",
        "method": "lora",
        "lora_rank": "64",
        "grad_checkpointing": "1",
        "grad_accum": "8",
        "gpus": "2",
    },
    {
        "model": "mistral-7b",
        "method": "full_bf16",
        "fp8": "1",
        "grad_checkpointing": "1",
        "gpu": "a100-80gb",
        "tokens": "10",
        "cards": "4",
    },
    {
        "model": "llama-3-1-8b",
        "method": "qlora_8bit",
        "optimizer": "sgd",
        "grad_checkpointing": "1",
        "flash_attention": "0",
        "seq_len": "512",
    },
    {
        "model": "deepseek-r1",
        "method": "full_bf16",
        "sharding": "zero3",
        "gpus": "256",
        "grad_checkpointing": "1",
        "offload": "optimizer",
    },
    {
        "model": "qwen3-30b-a3b",
        "method": "qlora_4bit",
        "lora_targets": "attention",
        "lora_rank": "8",
        "loss": "chunked",
        "gpu": "l40s",
        "tokens": "20",
    },
    {
        "model": "llama-3-1-70b",
        "method": "lora",
        "sharding": "zero2",
        "gpus": "2",
        "offload": "optimizer",
        "optimizer": "adamw_8bit",
    },
    {"model": "stablelm-alpha-3b", "method": "full_amp", "loss": "chunked", "flash_attention": "0"},
    {
        "model": "custom",
        "params": "12.5",
        "method": "full_amp",
        "sharding": "zero3",
        "gpus": "4",
        "offload": "full",
        "grad_checkpointing": "1",
        "server": "esc8000a-4x-h100",
        "tokens": "100",
    },
    {"model": "qwen2-5-0-5b", "method": "qlora_2bit", "micro_batch": "16", "seq_len": "4096", "lora_rank": "64"},
    # The estimator's second version: losses, optimizers, targets, the head, fp32 bases, optimizer in backward.
    {"model": "llama-3-1-8b", "method": "lora", "lora_targets": "qkv", "loss": "hf_legacy", "lora_lm_head": "1"},
    {"model": "qwen2-5-7b", "method": "qlora_4bit", "frozen_fp32": "1", "loss": "fused", "seq_len": "16384"},
    {"model": "gemma-2-9b", "method": "qlora_4bit", "loss": "unsloth", "seq_len": "16384", "flash_attention": "0"},
    {"model": "llama-3-2-3b", "method": "qlora_4bit", "quantized_lm_head": "1", "optimizer": "paged_adamw"},
    {
        "model": "mistral-7b",
        "method": "lora",
        "optimizer": "paged_adamw_8bit",
        "frozen_fp32": "1",
        "grad_checkpointing": "0",
    },
    {"model": "llama-3-2-1b", "method": "full_bf16", "optimizer_in_backward": "1", "grad_accum": "1"},
    {
        "model": "phi-4",
        "method": "full_amp",
        "optimizer": "adamw_fused",
        "gpus": "4",
        "sharding": "zero3",
        "micro_batch": "4",
    },
    {"model": "mixtral-8x7b", "method": "qlora_4bit", "gpus": "8", "sharding": "zero3", "lora_targets": "qkv"},
    {"model": "deepseek-v3", "method": "lora", "gpus": "16", "sharding": "zero3", "lora_lm_head": "1", "loss": "fused"},
    {"model": "llama-3-1-70b", "method": "full_amp", "gpus": "8", "sharding": "ddp", "grad_accum": "1"},
    # Optimizer states by what each optimizer stores (issue 36): quantised states keep their width in pure bf16.
    {"model": "llama-3-1-8b", "method": "full_bf16", "optimizer": "adamw_8bit"},
    {"model": "qwen2-5-7b", "method": "full_bf16", "optimizer": "adamw_4bit", "gpus": "2", "sharding": "zero2"},
    {"model": "llama-3-2-3b", "method": "full_amp", "optimizer": "adafactor"},
    {"model": "mistral-7b", "method": "full_bf16", "optimizer": "lion"},
    {"model": "llama-3-2-1b", "method": "lora", "optimizer": "lion_8bit"},
]


def test_advanced_cases_cover_every_option(architectures):
    seen = {name: {c.get(name, str(getattr(TYPICAL, name))) for c in ADVANCED_CASES} for name in SETUP_FIELDS}
    assert seen["method"] >= set(memory.METHODS)
    assert seen["optimizer"] >= set(memory.OPTIMIZERS)
    assert seen["sharding"] >= set(memory.SHARDINGS)
    assert seen["offload"] >= set(memory.OFFLOADS)
    assert seen["lora_targets"] >= set(memory.LORA_TARGETS)
    assert {"8", "64"} <= seen["lora_rank"]
    assert seen["loss"] >= set(memory.LOSSES)
    flags = [name for name, kind in SETUP_FIELDS.items() if kind is bool]
    for flag in flags:
        assert {"1", "0"} <= {c.get(flag, "1" if getattr(TYPICAL, flag) else "0") for c in ADVANCED_CASES}, flag
    assert {"3.3", "100"} <= {c["params"] for c in ADVANCED_CASES if c["model"] == "custom"}
    kinds = {architectures[model_key(c)].attention_kind for c in ADVANCED_CASES}
    assert kinds == {"mha", "mla"}
    assert any(architectures[model_key(c)].is_moe for c in ADVANCED_CASES)
    assert all(not setup_of(c).problems() for c in ADVANCED_CASES)
    assert len(ADVANCED_CASES) >= 40


def read_advanced(page) -> dict:
    return page.evaluate(READ_ADVANCED)


def advanced_mismatches(catalog, architectures, expected, text, case, shown) -> list:
    want = python_advanced(catalog, architectures, expected, case)
    public_want = {k: v for k, v in want.items() if not k.startswith("_")}
    found = close(shown["raw"], public_want, "raw")
    if not found:
        figures = displayed(text, want)
        found = [f"{k}: {shown[k]!r} != {v!r}" for k, v in figures.items() if shown[k] != v]
    return [(case, found)] if found else []


@pytest.mark.parametrize("method", METHOD_IDS)
def test_advanced_parity_every_model_and_method(page, site_server, catalog, built, architectures, expected, method):
    """Every catalog model x every method with Setup's defaults: the breakdown, fits, servers equal Python's
    (one test per method; the form set in the page, conftest.sweep)."""
    text = page_text(built)
    open_calculator(page, site_server, {"advanced": "1"})
    models = catalog["models"]["model_id"].to_list()
    shown = sweep(page, [[("#calc-model", model_id), ("#calc-method", method)] for model_id in models], READ_ADVANCED)
    mismatches = []
    for model_id, figures in zip(models, shown, strict=True):
        case = {"model": model_id, "method": method}
        mismatches += advanced_mismatches(catalog, architectures, expected, text, case, figures)
    assert mismatches == []
    assert len(shown) == catalog["models"].height


@pytest.mark.parametrize("half", [0, 1])
def test_advanced_parity_varied_setups(page, site_server, catalog, built, architectures, expected, half):
    """Each setup loaded from a shared URL: the inputs come back, every figure equals Python's (the cases
    in two tests, every other one)."""
    text = page_text(built)
    mismatches = []
    for case in ADVANCED_CASES[half::2]:
        open_calculator(page, site_server, {"advanced": "1", **case})
        for name, value in case.items():
            selector = f"[name={name}]"
            if name in SETUP_FIELDS and SETUP_FIELDS[name] is bool:
                assert page.is_checked(selector) == (value == "1"), (case, name)
            else:
                assert page.input_value(selector).replace(",", ".") == value, (case, name)
        shown = read_advanced(page)
        assert shown["visible"] and shown["problems"] == [], case
        mismatches += advanced_mismatches(catalog, architectures, expected, text, case, shown)
        if "tokens" in case:
            assert shown["hours"] is not None, case
    assert mismatches == []


def test_custom_sizes_take_the_shape_python_gives(page, site_server, catalog, built, architectures, expected):
    """A custom size gets memory.model_architectures' synthetic architecture: same layers, same figures."""
    text = page_text(built)
    open_calculator(page, site_server, {"advanced": "1", "model": "custom", "method": "full_amp"})
    mismatches = []
    for size in SIZES:
        page.fill("#calc-params", str(size))
        shown = read_advanced(page)
        case = {"model": "custom", "params": str(size), "method": "full_amp"}
        mismatches += advanced_mismatches(catalog, architectures, expected, text, case, shown)
    assert mismatches == []


INVALID_CASES = [
    {"model": "llama-3-1-8b", "method": "full_amp", "offload": "optimizer"},
    {"model": "llama-3-1-8b", "method": "full_amp", "sharding": "zero2", "gpus": "4", "offload": "full"},
    {"model": "llama-3-1-8b", "method": "lora", "gpus": "0", "seq_len": "0"},
]


def test_invalid_combination_shows_the_message(page, site_server, catalog, built, architectures, expected):
    text = page_text(built)
    for case in INVALID_CASES:
        open_calculator(page, site_server, {"advanced": "1", **case})
        shown = read_advanced(page)
        codes = [problem_code(m) for m in setup_of(case).problems()]
        assert codes and shown["raw"] == {"problems": codes}, case
        assert shown["problems"] == [text[c] for c in codes]
        assert not shown["visible"]
    open_calculator(page, site_server, {"advanced": "1", "model": "llama-3-1-8b", "method": "lora"})
    page.fill("#calc-micro-batch", "2,5")
    shown = read_advanced(page)
    assert shown["problems"] == [text["not_integer"].format(label="Микробатч, последовательностей")]
    assert page.get_attribute("#calc-micro-batch", "aria-invalid") == "true"
    page.fill("#calc-micro-batch", "2")
    assert read_advanced(page)["visible"]


def test_advanced_inputs_live_in_the_url(page, site_server):
    open_calculator(page, site_server)
    assert page.is_hidden("#calc-advanced")
    page.select_option("#calc-model", "qwen3-32b")
    page.select_option("#calc-method", "full_amp")
    page.check("#calc-adv")
    assert page.is_visible("#calc-advanced") and page.is_visible("#calc-fp8")
    for lora_only in ("#calc-lora-rank", "#calc-lora-targets", "#calc-lora-dropout", "#calc-double-quant"):
        assert page.is_hidden(lora_only), lora_only
    page.select_option("#calc-sharding", "zero3")
    page.fill("#calc-gpus", "8")
    page.fill("#calc-seq-len", "4 096")
    assert page.is_checked("#calc-grad-checkpointing")  # the typical setup: checkpointing on
    page.uncheck("#calc-grad-checkpointing")
    page.uncheck("#calc-flash-attention")
    page.select_option("#calc-optimizer", "adamw_8bit")
    page.check("#calc-fp8")
    search = page.evaluate("window.location.search")
    assert dict(parse_qsl(search.lstrip("?"))) == {
        "model": "qwen3-32b",
        "method": "full_amp",
        "advanced": "1",
        "optimizer": "adamw_8bit",
        "seq_len": "4096",
        "gpus": "8",
        "sharding": "zero3",
        "grad_checkpointing": "0",
        "flash_attention": "0",
        "fp8": "1",
        "epochs": "1",
    }
    before = read_advanced(page)
    page.goto("about:blank")
    page.goto(site_server + "calculator.html" + search)
    page.wait_for_selector("#calc[data-ready='true']")
    assert read_advanced(page) == before
    page.uncheck("#calc-adv")
    assert page.is_hidden("#adv-result")
    assert "advanced" not in dict(parse_qsl(page.evaluate("window.location.search").lstrip("?")))


def test_advanced_mode_by_keyboard(page, site_server):
    open_calculator(page, site_server, {"model": "llama-3-1-8b", "method": "lora"})
    page.focus("#calc-server")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "calc-adv"
    page.keyboard.press("Space")
    assert page.is_checked("#calc-adv") and page.is_visible("#adv-result")
    page.keyboard.press("Tab")  # the config.json field comes first: a pasted config replaces the model's shape
    assert page.evaluate("document.activeElement.id") == "calc-config"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "calc-optimizer"
    page.keyboard.press("End")
    assert page.input_value("#calc-optimizer") == memory.OPTIMIZERS[-1]  # the last option
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "calc-grad-checkpointing":
            break
    page.keyboard.press("Space")  # the typical setup has it on: Space turns it off
    assert not page.is_checked("#calc-grad-checkpointing")
    assert "grad_checkpointing=0" in page.evaluate("window.location.search")


ADVANCED_SHOT = {
    "advanced": "1",
    "model": "deepseek-v3",
    "method": "full_amp",
    "sharding": "zero3",
    "gpus": "64",
    "offload": "optimizer",
    "grad_checkpointing": "1",
    "server": "hgx-b200-8x",
    "tokens": "100",
}


def test_advanced_mode_fits_a_phone_and_passes_axe(browser, site_server):
    from conftest import serious_axe_violations

    context = browser.new_context(viewport={"width": 390, "height": 844}, locale="ru-RU")
    page = context.new_page()
    for query in (ADVANCED_SHOT, {**ADVANCED_SHOT, "sharding": "ddp"}):  # numbers, then the message
        open_calculator(page, site_server, query)
        page.click("#calc-time summary")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, query
        violations = serious_axe_violations(page)
        assert violations == [], violations
    context.close()


# -- a pasted config.json (the advanced mode's port of architecture.architecture_from_config) --

CONFIGS = Path(__file__).resolve().parent / "configs"
# Real Hugging Face config.json files, each with the catalog model of the same architecture.
CONFIG_FILES = {
    "llama-3.1-8b.json": "llama-3-1-8b",
    "mixtral-8x7b.json": "mixtral-8x7b",
    "qwen3-30b-a3b.json": "qwen3-30b-a3b",
}


def cli_json(*args: str) -> dict:
    run = subprocess.run(
        [sys.executable, "-m", "pipeline", "estimate", *args, "--json"], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize("name", sorted(CONFIG_FILES))
def test_pasted_config_gives_the_architecture_and_figures_of_the_cli(page, site_server, catalog, built, expected, name):
    text_value = (CONFIGS / name).read_text(encoding="utf-8")
    arch = architecture_from_config(json.loads(text_value))
    assert arch == memory.model_architectures(catalog["models"])[CONFIG_FILES[name]]  # the same model as the catalog's
    page_text(built)  # the page renders its texts
    open_calculator(page, site_server, {"advanced": "1", "model": "llama-3-2-1b", "method": "full_amp"})
    page.fill("#calc-config", text_value)
    for method_id in ("full_amp", "lora", "qlora_4bit"):
        page.select_option("#calc-method", method_id)
        shown = read_advanced(page)
        raw = shown["raw"]
        assert raw["config_architecture"] == asdict(arch), (name, method_id)
        # The same figures as Python gives for that architecture in the page's (typical) setup ...
        case = {"model": "llama-3-2-1b", "method": method_id}
        want = python_advanced(catalog, {"llama-3-2-1b": arch}, expected, case)
        public = {k: v for k, v in want.items() if not k.startswith("_")}
        assert close({k: v for k, v in raw.items() if k != "config_architecture"}, public) == [], (name, method_id)
        # ... and as the command line prints for the same file.
        cli = cli_json("--config", str(CONFIGS / name), "--method", method_id)
        assert cli["per_gpu_gb"]["total"] == pytest.approx(raw["breakdown"]["total"] / memory.GB, rel=1e-9)
        assert cli["readings_gb"]["allocated"] == pytest.approx(raw["breakdown"]["allocated"] / memory.GB, rel=1e-9)
        assert shown["visible"] and shown["total"] == fmt.gb(raw["breakdown"]["total"] / memory.GB)
    note = page.text_content("#calc-config-note")
    assert f"слоёв — {arch.layers}" in note and page.is_visible("#calc-config-note")
    if arch.is_moe:
        assert f"экспертов — {arch.experts}, на токен — {arch.experts_per_token}" in note


MALFORMED_CONFIGS = [
    ('{"num_hidden_layers": 32,', "config_json"),
    ("[1, 2, 3]", "config_object"),
    ('{"hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 32000}', "config_missing"),
    (
        '{"num_hidden_layers": 32.5, "hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 32000}',
        "config_not_whole",
    ),
    (
        '{"num_hidden_layers": true, "hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 32000}',
        "config_not_whole",
    ),
    (
        '{"num_hidden_layers": 0, "hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 32000}',
        "config_at_least_one",
    ),
    (
        '{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100, "num_experts": 4}',
        "config_missing",
    ),
]


@pytest.mark.parametrize(("config_text", "code"), MALFORMED_CONFIGS)
def test_malformed_config_gets_a_russian_message_and_no_figures(page, site_server, built, tmp_path, config_text, code):
    text = page_text(built)
    open_calculator(page, site_server, {"advanced": "1", "model": "llama-3-1-8b", "method": "lora"})
    page.fill("#calc-config", config_text)
    shown = read_advanced(page)
    assert shown["raw"]["config_error"] == code and not shown["visible"]
    message = page.text_content("#calc-config-error")
    assert page.is_visible("#calc-config-error") and page.get_attribute("#calc-config", "aria-invalid") == "true"
    template = text[code]
    fixed = [part for part in re.split(r"\{[a-z_]+\}", template) if part.strip()]
    assert all(part in message for part in fixed), message
    assert re.search(r"[а-яё]", message) and "{" not in message.replace("{ до }", "").replace("{ … }", "")
    # The command line refuses the same file (exit 2, one line, no traceback).
    path = tmp_path / "config.json"
    path.write_text(config_text, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "pipeline", "estimate", "--config", str(path)], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr and run.stderr.startswith("estimate: --config")
    # Emptying the field brings the selected model back.
    page.fill("#calc-config", "")
    assert read_advanced(page)["visible"] and not page.is_visible("#calc-config-error")


def test_a_model_without_config_data_names_the_shape_it_borrows(page, site_server, catalog, built):
    """Issue 36: a custom or generic size says which named model's shape the advanced mode used, and how to be exact."""
    page_text(built)
    names = dict(catalog["models"].select("model_id", "display_name").iter_rows())
    borrowed = memory.borrowed_shapes(catalog["models"])
    open_calculator(page, site_server, {"advanced": "1", "model": "generic-70b", "method": "lora"})
    note = page.text_content("#calc-config-note")
    assert page.is_visible("#calc-config-note") and f"форму {names[borrowed['generic-70b']]}" in note
    assert f"слоёв под размер — {memory.model_architectures(catalog['models'])['generic-70b'].layers}" in note
    named = memory.model_architectures(catalog["models"].filter(pl.col("kind") == "named"))
    open_calculator(page, site_server, {"advanced": "1", "model": "custom", "params": "20", "method": "lora"})
    assert f"форму {names[memory.nearest_reference(20, named)]}" in page.text_content("#calc-config-note")
    open_calculator(page, site_server, {"advanced": "1", "model": "llama-3-1-8b", "method": "lora"})
    assert not page.is_visible("#calc-config-note")  # a model with its own config data borrows nothing
