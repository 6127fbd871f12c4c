"""The built site served under a subpath (/gpu/), as a site owner hosts it beside other things: search
results, links, the calculator and the downloads all resolve inside /gpu/ (the same build as at /)."""

import os
import shutil

import pytest

from conftest import serve_directory

BASE = "gpu/"


@pytest.fixture(scope="module")
def subpath_server(built, tmp_path_factory):
    """The shared build's site under <root>/gpu/ (hard links, no second build); yields http://host/gpu/."""
    root = tmp_path_factory.mktemp("subpath")
    shutil.copytree(built / "site", root / BASE.rstrip("/"), copy_function=os.link)
    with serve_directory(root) as url:
        yield url + BASE


def hrefs(page, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "els => els.map(e => e.href)")  # resolved, absolute


def test_search_results_resolve_under_the_subpath(page, subpath_server):
    page.goto(subpath_server + "gpus/index.html")
    page.fill("#site-search-q", "H100")
    page.press("#site-search-q", "Enter")
    page.wait_for_url("**/gpu/search.html?q=H100")
    page.wait_for_selector("#search-results li a", timeout=30_000)
    links = hrefs(page, "#search-results li a")
    assert links and all(link.startswith(subpath_server) for link in links), links
    assert not any("/gpu/gpu/" in link for link in links), links
    assert any(link.startswith(subpath_server + "gpus/h100") for link in links), links
    first = next(link for link in links if link.startswith(subpath_server + "gpus/h100"))
    response = page.goto(first)
    assert response.status == 200 and "H100" in page.title()


def test_links_and_downloads_stay_under_the_subpath(page, subpath_server):
    response = page.goto(subpath_server + "models/llama-3-1-70b.html")
    assert response.status == 200
    links = [link for link in hrefs(page, "a[href]") if link.startswith("http://127.0.0.1")]
    assert links and all(link.startswith(subpath_server) for link in links), [
        link for link in links if not link.startswith(subpath_server)
    ]
    page.goto(subpath_server + "data.html")
    downloads = [link for link in hrefs(page, "main a[href]") if "/data/" in link]
    assert subpath_server + "data/gpus.csv" in downloads and subpath_server + "data/datapackage.json" in downloads
    for link in (subpath_server + "data/gpus.csv", subpath_server + "data/gpu-finetune.duckdb"):
        assert page.request.get(link).status == 200, link


def test_calculator_works_under_the_subpath(page, subpath_server, site_server):
    query = "calculator.html?model=llama-3-1-70b&method=lora&gpu=h200-sxm"
    shown = {}
    for server in (site_server, subpath_server):
        page.goto(server + query)
        page.wait_for_selector("#calc[data-ready='true']")
        shown[server] = [page.text_content(f"#out-{name}") for name in ("memory", "low", "high")]
    assert shown[subpath_server] == shown[site_server] and all(shown[site_server]), shown
