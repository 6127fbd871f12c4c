"""The site in a real browser (Debian's chromium through Playwright): sortable tables work by mouse and
keyboard, axe-core finds no serious or critical accessibility problem on any kind of page, and
screenshots at desktop and phone widths are written for a person to look at."""

import pytest

from conftest import ROOT, serious_axe_violations

SCREENSHOTS = ROOT / "screenshots"

ONE_PAGE_OF_EACH_KIND = [
    "index.html",
    "finetune-memory.html",
    "models/index.html",
    "models/llama-3-1-70b.html",
    "methods/lora.html",
    "gpus/h200-sxm.html",
    "servers/hgx-b200-8x.html",
    "compare/server-fit.html",
    "compare/gpu-cards-full_amp.html",
    "calculator.html",
    "charts.html",
    "data.html",
    "quality.html",
    "sources.html",
    "404.html",
]


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="ru-RU")
    page = context.new_page()
    yield page
    context.close()


def first_column(page) -> list[str]:
    return page.eval_on_selector_all("table.sortable tbody tr th", "cells => cells.map(c => c.textContent.trim())")


def test_sortable_table_by_mouse_and_keyboard(page, site_server):
    page.goto(site_server + "models/index.html")
    before = first_column(page)
    header = page.get_by_role("button", name="Параметры, млрд")
    header.click()
    ascending = first_column(page)
    assert ascending[0] == "Qwen2.5 0.5B" and ascending[-1] in ("DeepSeek-V3 (MoE)", "DeepSeek-R1 (MoE)")
    assert page.get_attribute("table.sortable thead th:nth-child(3)", "aria-sort") == "ascending"
    header.focus()
    page.keyboard.press("Enter")
    descending = first_column(page)
    assert descending == ascending[::-1] or descending[-1] == "Qwen2.5 0.5B"
    assert page.get_attribute("table.sortable thead th:nth-child(3)", "aria-sort") == "descending"
    assert sorted(before) == sorted(ascending)  # same rows, only reordered


def test_tables_are_complete_without_javascript(browser, site_server):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(site_server + "models/index.html")
    assert len(first_column(page)) == 45
    assert page.locator("button.sort").count() == 0
    context.close()


@pytest.mark.parametrize("path", ONE_PAGE_OF_EACH_KIND)
def test_axe_finds_no_serious_violations(page, site_server, path):
    page.goto(site_server + path)
    page.wait_for_load_state("networkidle")
    serious = serious_axe_violations(page)
    assert serious == [], serious


@pytest.mark.parametrize("width, height, name", [(1280, 900, "desktop"), (390, 844, "phone")])
def test_screenshots(browser, site_server, width, height, name):
    SCREENSHOTS.mkdir(exist_ok=True)
    context = browser.new_context(viewport={"width": width, "height": height}, locale="ru-RU", device_scale_factor=1)
    page = context.new_page()
    shots = {
        "index": "index.html",
        "model": "models/llama-3-1-70b.html",
        "calculator": "calculator.html?model=custom&params=70&method=lora&gpu=h200-sxm&server=hgx-h200-8x&tokens=100&epochs=3",
        "data": "data.html",
    }
    for shot, path in shots.items():
        page.goto(site_server + path)
        page.wait_for_load_state("networkidle")
        out = SCREENSHOTS / f"{shot}-{name}.png"
        page.screenshot(path=str(out), full_page=True)
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
        # Nothing wider than the screen: the page scrolls only vertically (wide tables scroll inside their box).
        assert page.evaluate("document.documentElement.scrollWidth") <= width, (path, name)
    context.close()
