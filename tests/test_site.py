"""The built site as a whole: links resolve at the root and under a subpath, every page parses as HTML5,
has its own title and description, canonical and Open Graph tags, and a typical page stays light."""

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import html5lib
import pytest

from conftest import SOURCES


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids, self.lang, self.tables, self.captions = [], set(), None, 0, 0
        self.meta, self.canonical, self.title, self._in_title = {}, None, "", False
        self._svg = 0  # an SVG's <title> names a shape, not the page

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.lang = a.get("lang")
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "link" and a.get("rel") == "canonical":
            self.canonical = a["href"]
        elif tag == "meta":
            self.meta[a.get("name") or a.get("property")] = a.get("content")
        for key in ("href", "src"):
            if key in a and not (tag == "link" and a.get("rel") == "canonical"):
                self.links.append(a[key])
        self.tables += tag == "table"
        self.captions += tag == "figcaption"
        self._svg += tag == "svg"
        self._in_title = tag == "title" and not self._svg

    def handle_data(self, data):
        if self._in_title:
            self.title += data

    def handle_endtag(self, tag):
        self._in_title = False
        self._svg -= tag == "svg"


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


RELEASE_FILES = re.compile(r"(^|/)data/releases/\d+\.\d+\.\d+/")


def check_links(site: Path, base_path: str) -> int:
    """Every internal href/src resolves to a file, every #anchor exists; returns how many were checked."""
    pages = {p: parse(p) for p in site.rglob("*.html")}
    checked = 0
    for page, parsed in pages.items():
        for link in parsed.links:
            if urlparse(link).scheme in ("http", "https", "mailto"):
                continue
            target, anchor = urldefrag(link)
            target = target.split("?", 1)[0]  # calculator links carry their state in the query
            if RELEASE_FILES.search(target):  # on the storage only: publish puts them there (test_releases.py)
                continue
            if target.startswith("/"):  # only 404.html may link from the base path
                assert page.name == "404.html", f"{page}: {link}"
                assert target.startswith(base_path), f"{page}: {link}"
                resolved = site / target.removeprefix(base_path)
            else:
                resolved = (page.parent / target).resolve() if target else page
            assert resolved.is_file(), f"{page.relative_to(site)}: {link}"
            if anchor:
                assert anchor in pages[resolved.resolve()].ids, f"{page.relative_to(site)}: {link}"
            checked += 1
    return checked


def test_links_resolve_at_the_root(built):
    assert check_links(built / "site", "/") > 5000


@pytest.fixture(scope="module")
def subpath_build(tmp_path_factory) -> Path:
    from pipeline.build import build

    out = tmp_path_factory.mktemp("subpath") / "output"
    build(SOURCES, out, base_url="https://example.org/docs/gpu/")
    return out / "site"


def test_links_resolve_under_a_subpath(subpath_build):
    assert check_links(subpath_build, "/docs/gpu/") > 5000
    html = (subpath_build / "404.html").read_text(encoding="utf-8")
    assert 'href="https://example.org/docs/gpu/index.html"' in html


def test_canonical_open_graph_sitemap_robots(subpath_build):
    model = parse(subpath_build / "models" / "llama-3-1-8b.html")
    assert model.canonical == "https://example.org/docs/gpu/models/llama-3-1-8b.html"
    assert model.meta["og:url"] == model.canonical
    assert model.meta["og:title"] == "Llama 3.1 8B: память для дообучения и число GPU"
    assert model.title == model.meta["og:title"] + " — Память GPU для дообучения"
    assert parse(subpath_build / "index.html").canonical == "https://example.org/docs/gpu/"
    assert parse(subpath_build / "models" / "index.html").canonical == "https://example.org/docs/gpu/models/"
    sitemap = (subpath_build / "sitemap.xml").read_text(encoding="utf-8")
    pages = sorted(str(p.relative_to(subpath_build)) for p in subpath_build.rglob("*.html") if p.name != "404.html")
    assert sitemap.count("<loc>") == len(pages)
    assert "<loc>https://example.org/docs/gpu/models/llama-3-1-8b.html</loc>" in sitemap
    assert (
        subpath_build / "robots.txt"
    ).read_text() == "User-agent: *\nAllow: /\nSitemap: https://example.org/docs/gpu/sitemap.xml\n"
    assert parse(subpath_build / "404.html").meta.get("robots") == "noindex"


def test_every_page_is_valid_html5_with_its_own_title_and_description(built):
    titles, descriptions = {}, {}
    for path in sorted((built / "site").rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        parser = html5lib.HTMLParser(strict=True)
        parser.parse(text)  # raises on any parse error
        page = parse(path)
        assert page.lang == "ru", path
        for key in ("description", "og:title", "og:description", "og:type", "og:locale"):
            assert page.meta.get(key), (path, key)
        titles.setdefault(page.title, []).append(path.name)
        descriptions.setdefault(page.meta["description"], []).append(path.name)
    assert [t for t, p in titles.items() if len(p) > 1] == []
    assert [d for d, p in descriptions.items() if len(p) > 1] == []


def page_weight(site: Path, page: Path) -> int:
    """HTML plus the CSS and JS it loads (downloads excluded)."""
    parsed = parse(page)
    assets = {(page.parent / link).resolve() for link in parsed.links if link.endswith((".css", ".js"))}
    return page.stat().st_size + sum(a.stat().st_size for a in assets)


def test_typical_page_weight_under_100_kb(built):
    site = built / "site"
    for rel in (
        "index.html",
        "finetune-memory.html",
        "models/llama-3-1-8b.html",
        "gpus/h200-sxm.html",
        "servers/hgx-h200-8x.html",
    ):
        assert page_weight(site, site / rel) < 100_000, rel


def test_article_tables_have_source_captions(built):
    for name in ("finetune-memory.html", "gpu-count.html", "models/qwen3-30b-a3b.html", "gpus/b200.html"):
        parsed = parse(built / "site" / name)
        assert parsed.tables >= 2 and parsed.tables == parsed.captions, name


def test_html_article_carries_the_seed_figures(built):
    html = (built / "site" / "finetune-memory.html").read_text(encoding="utf-8").replace("\xa0", " ")
    html = re.sub(r' data-label="[^"]*"', "", html)  # a short wide table: its values carry their column's name
    row = (
        '<th scope="row"><a href="methods/full_amp.html">Полное, bf16/fp16 (смешанная точность)</a></th>'
        '<td class="num">137,1</td><td class="num">630</td><td class="num">1 200</td>'
    )
    assert row in html
    assert "проверено 12.10.2026" in html
    assert "TABLEPLACEHOLDER" not in html


def test_data_page_lists_every_table_and_column(built):
    from pipeline.schema import ALL_TABLES

    html = (built / "site" / "data.html").read_text(encoding="utf-8")
    for table in ALL_TABLES:
        assert f'href="data/{table.name}.csv"' in html
        for field in table.fields:
            assert f"<code>{field.name}</code>" in html


def test_quality_page_lists_every_check_and_warning(built):
    from pipeline.build import load_and_validate

    _, validation = load_and_validate(SOURCES)
    html = (built / "site" / "quality.html").read_text(encoding="utf-8")
    assert html.count("<td>пройдена</td>") == len(validation.checks) > 200
    assert "ошибок:" not in html
    # the five servers without a price: one line with their rows
    assert len(validation.warnings) == 5
    assert html.count("нет цены; на сайте будет «по запросу»") == 1
    assert "нет цены; на сайте будет «по запросу» (строки 7, 8, 9, 10, 11; всего 5)</li>" in html
    assert "Дата сборки: 05.12.2026" in html
    data = (built / "site" / "data.html").read_text(encoding="utf-8")
    assert 'href="quality.html">«Качество данных»</a> (замечаний: 5)' in data


def test_a_server_page_promises_a_price_only_when_the_catalog_has_one(built):
    """The lead of each server page: «вместе с ценой» where servers.csv has a monthly or hourly price,
    «по запросу» where it has none (the calculator then shows no price either)."""
    import polars as pl

    servers = pl.read_csv(SOURCES / "servers.csv")
    priced = {
        r["server_id"]: r["price_rub_month"] is not None or r["price_rub_hour"] is not None
        for r in servers.iter_rows(named=True)
    }
    assert set(priced.values()) == {True, False}  # the real catalog has both kinds
    for server_id, has_price in priced.items():
        page = (built / "site" / "servers" / f"{server_id}.html").read_text(encoding="utf-8")
        lead = re.search(r"сервер там уже выбран[^<]*", page)[0]
        assert lead == (
            "сервер там уже выбран, вместе с ценой."
            if has_price
            else "сервер там уже выбран; цену этого сервера сообщают по запросу."
        ), server_id


def test_the_accuracy_page_names_each_constants_source_by_its_title(built):
    """The constants table links every constant's source by the title a reader can read, not its id."""
    import html

    import polars as pl

    page = (built / "site" / "accuracy.html").read_text(encoding="utf-8")
    constants = pl.read_csv(SOURCES / "constants.csv")
    titles = dict(pl.read_csv(SOURCES / "references.csv").select("reference_id", "title").iter_rows())
    links = dict(re.findall(r'<a href="sources\.html#ref-([\w-]+)">([^<]*)</a>', page))
    for reference_id in set(constants["reference_id"]) & set(links):
        assert html.unescape(links[reference_id]).replace("\u00a0", " ") == titles[reference_id].replace("\u00a0", " ")
    assert "nccl-issue-964" in links and f">{'nccl-issue-964'}<" not in page
