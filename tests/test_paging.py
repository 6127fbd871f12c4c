"""Long tables split over pages (pipeline/render/paging.py): the real catalog with `table_page_rows = 10`
so that its 45-model and 15-GPU tables are split, and checked as a site: every row once, pagers,
continuation pages with their own titles, links, sitemap, HTML5 and axe-core."""

import re
import shutil
from pathlib import Path

import html5lib
import pytest
from test_site import check_links, parse

from conftest import SOURCES, serious_axe_violations, serve_directory
from pipeline.render.paging import split
from pipeline.render.view import Link, TableView, page_items


@pytest.mark.parametrize(
    "current, total, expected",
    [
        (1, 1, [1]),
        (1, 4, [1, 2, 3, 4]),
        (1, 13, [1, 2, 3, None, 13]),
        (5, 13, [1, 2, 3, 4, 5, 6, 7, None, 13]),
        (7, 13, [1, None, 5, 6, 7, 8, 9, None, 13]),
        (13, 13, [1, None, 11, 12, 13]),
        (4, 7, [1, 2, 3, 4, 5, 6, 7]),
    ],
)
def test_page_items(current, total, expected):
    assert page_items(current, total) == expected


def test_split_keeps_every_row_once_in_order():
    view = TableView(["a"], [[Link(f"row {i}", f"x/{i}.html")] for i in range(1, 26)], ["r"], ["t"], [False])
    parts = split(view, 10, "servers/s1.html", "jobs", "Задачи")
    assert [len(p.rows) for p in parts] == [10, 10, 5]
    assert [row for p in parts for row in p.rows] == view.rows
    assert [(p.pager.current, p.pager.first_row, p.pager.last_row, p.pager.total_rows) for p in parts] == [
        (1, 1, 10, 25),
        (2, 11, 20, 25),
        (3, 21, 25, 25),
    ]
    assert parts[0].pager.hrefs == ["servers/s1.html", "servers/s1/jobs-2.html", "servers/s1/jobs-3.html"]
    assert all(p.headers == ["a"] and p.references == ["r"] and p.downloads == ["t"] for p in parts)
    assert split(view, 10, "models/index.html", "view", "Модели")[1].pager.hrefs[1] == "models/index/page-2.html"


def test_a_table_that_fits_is_not_touched():
    view = TableView(["a"], [[str(i)] for i in range(10)], [])
    assert split(view, 10, "p.html", "t", "T") == [view]
    assert view.pager is None


def test_the_real_catalog_has_no_continuation_pages(built):
    site = built / "site"
    assert [p for p in site.rglob("*.html") if p.parent != site and p.parent.parent != site] == []
    assert 'class="pager"' not in (site / "servers" / "hgx-b200-8x.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("rows", [0, 9, "10", 2.5])
def test_a_bad_page_size_is_named(catalog, rows):
    import tomllib

    from pipeline.render.site import TEMPLATES, load_labels
    from pipeline.render.views.articles import Tables
    from pipeline.render.views.entities import config_problems

    site = tomllib.loads((TEMPLATES / "site.toml").read_text(encoding="utf-8"))
    assert config_problems(Tables(catalog, load_labels()), site) == []
    site["table_page_rows"] = rows
    [problem] = config_problems(Tables(catalog, load_labels()), site)
    assert (problem.file, problem.column, problem.value) == ("site_templates/site.toml", "table_page_rows", rows)
    assert problem.rule == "нужно целое число строк таблицы на странице, не меньше 10"


@pytest.fixture(scope="module")
def paged_render(tmp_path_factory):
    """The real catalog rendered with table_page_rows = 10 (site_templates copied and edited): the
    rendering and the catalog."""
    from pipeline.build import load_and_validate
    from pipeline.combine import combine
    from pipeline.render.site import TEMPLATES, Renderer

    root = tmp_path_factory.mktemp("paged-templates")
    templates = root / "site_templates"
    shutil.copytree(TEMPLATES, templates)
    config = templates / "site.toml"
    text = config.read_text(encoding="utf-8")
    assert "\ntable_page_rows = 100\n" in text
    config.write_text(text.replace("\ntable_page_rows = 100\n", "\ntable_page_rows = 10\n"), encoding="utf-8")
    con, validation = load_and_validate(SOURCES)
    catalog = combine(con)
    return Renderer(catalog, validation, templates=templates).render(), catalog


@pytest.fixture(scope="module")
def paged_site(tmp_path_factory, built, paged_render) -> Path:
    """That site written out; the downloads, which do not depend on templates, are those of the real build."""
    rendered, _ = paged_render
    root = tmp_path_factory.mktemp("paged")
    site = root / "site"
    shutil.copytree(built / "site" / "data", site / "data")
    for path, content in rendered.site.items():
        target = site / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return site


def row_heads(html: str) -> list[str]:
    """The first cell of each body row of the page's tables, tags stripped."""
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r'<th scope="row">(.*?)</th>', html)]


def test_continuation_pages_hold_the_rest_of_the_rows(paged_site, built):
    whole = row_heads((built / "site" / "servers" / "hgx-b200-8x.html").read_text(encoding="utf-8"))
    assert len(whole) == 45
    pages = [paged_site / "servers" / "hgx-b200-8x.html"] + [
        paged_site / "servers" / "hgx-b200-8x" / f"jobs-{k}.html" for k in (2, 3, 4, 5)
    ]
    parts = [row_heads(p.read_text(encoding="utf-8")) for p in pages]
    assert [len(p) for p in parts] == [10, 10, 10, 10, 5]
    assert [head for part in parts for head in part] == whole
    assert not (paged_site / "servers" / "hgx-b200-8x" / "jobs-6.html").exists()
    # 15 GPUs on a model page: 10 + 5; ten servers below the plan's row: 10 + 1, the plan on the first page.
    assert (paged_site / "models" / "llama-3-1-8b" / "cards-2.html").exists()
    servers = row_heads((paged_site / "models" / "llama-3-1-8b" / "servers-2.html").read_text(encoding="utf-8"))
    assert len(servers) == 1 and not (paged_site / "models" / "llama-3-1-8b" / "servers-3.html").exists()
    assert sorted(p.name for p in (paged_site / "models" / "index").iterdir()) == [
        "page-2.html",
        "page-3.html",
        "page-4.html",
        "page-5.html",
    ]


def test_pager_text_and_links(paged_site):
    first = (paged_site / "servers" / "hgx-b200-8x.html").read_text(encoding="utf-8").replace("\xa0", " ")
    pager = first[first.index('<nav class="pager"') :]
    assert 'aria-label="Страницы таблицы «Какие задачи помещаются»"' in pager
    assert (
        "<p>Строки 1–10 из 45 (страница 1 из 5). Сортировка по столбцу — в пределах страницы. "
        "Вся таблица одним файлом — в загрузке выше.</p>"
    ) in pager
    assert 'rel="prev"' not in pager
    assert '<a aria-current="page" href="../servers/hgx-b200-8x.html" aria-label="Страница 1">1</a>' in pager
    assert '<a rel="next" href="../servers/hgx-b200-8x/jobs-2.html">Следующая →</a>' in pager

    last = (paged_site / "servers" / "hgx-b200-8x" / "jobs-5.html").read_text(encoding="utf-8")
    pager = last[last.index('<nav class="pager"') :]
    assert "<p>Строки 41–45 из 45 (страница 5 из 5)." in pager
    assert '<a rel="prev" href="../../servers/hgx-b200-8x/jobs-4.html">← Предыдущая</a>' in pager
    assert 'rel="next"' not in pager


def test_a_continuation_page_is_a_page_of_its_own(paged_site):
    page = parse(paged_site / "servers" / "hgx-b200-8x" / "jobs-2.html")
    assert page.title == "8 × B200 (HGX). Какие задачи помещаются, страница 2 из 5 — Память GPU для дообучения"
    assert page.meta["description"] == "8 × B200 (HGX). Какие задачи помещаются: строки 11–20 из 45."
    assert page.canonical == "/servers/hgx-b200-8x/jobs-2.html"
    html = (paged_site / "servers" / "hgx-b200-8x" / "jobs-2.html").read_text(encoding="utf-8").replace("\xa0", " ")
    assert (
        '<nav class="crumbs" aria-label="Путь"><a href="../../index.html">Главная</a> → '
        '<a href="../../servers/index.html">Серверы каталога</a> → '
        '<a href="../../servers/hgx-b200-8x.html">8 × B200 (HGX)</a></nav>'
    ) in html
    assert '<h2 id="table">Какие задачи помещаются: страница 2 из 5</h2>' in html
    # Same sources line and download link as the first page.
    assert '<a href="../../data/server_fit.csv">server_fit.csv</a>' in html
    index = (paged_site / "models" / "index" / "page-2.html").read_text(encoding="utf-8")
    assert '<a href="../../models/index.html">Модели</a></nav>' in index


def test_the_paged_site_links_sitemap_and_html(paged_site):
    assert check_links(paged_site, "/") > 5000
    sitemap = (paged_site / "sitemap.xml").read_text(encoding="utf-8")
    pages = sorted(str(p.relative_to(paged_site)) for p in paged_site.rglob("*.html") if p.name != "404.html")
    assert sitemap.count("<loc>") == len(pages)
    assert "<loc>/servers/hgx-b200-8x/jobs-4.html</loc>" in sitemap
    titles = {}
    for path in sorted(paged_site.rglob("*.html")):
        html5lib.HTMLParser(strict=True).parse(path.read_text(encoding="utf-8"))
        titles.setdefault(parse(path).title, []).append(str(path.relative_to(paged_site)))
    assert [t for t, p in titles.items() if len(p) > 1] == []


@pytest.mark.parametrize(
    "path, following",
    [
        ("servers/hgx-b200-8x.html", "servers/hgx-b200-8x/jobs-2.html"),
        ("servers/hgx-b200-8x/jobs-2.html", "servers/hgx-b200-8x/jobs-3.html"),
    ],
)
def test_axe_and_the_pager_in_a_browser(browser, paged_site, path, following):
    with serve_directory(paged_site) as url:
        context = browser.new_context(viewport={"width": 390, "height": 844}, locale="ru-RU")
        page = context.new_page()
        page.goto(url + path)
        page.wait_for_load_state("networkidle")
        assert serious_axe_violations(page) == []
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.get_by_role("link", name="Следующая →").click()
        page.wait_for_load_state("networkidle")
        assert page.url == url + following
        context.close()


def test_continuation_pages_are_left_out_of_the_search_index(paged_render, tmp_path, monkeypatch):
    """Search finds an entity by its own page: the continuation pages of its tables are not indexed."""
    from pipeline.publish import search, staging

    rendered, catalog = paged_render
    # paging.continuation_href: "<page stem>/<table>-<k>.html" beside the page "<page stem>.html"
    continued = {
        p
        for p in rendered.site
        if re.search(r"/[a-z_]+-\d+\.html$", p) and p.rsplit("/", 1)[0] + ".html" in rendered.site
    }
    assert "servers/hgx-b200-8x/jobs-2.html" in continued
    assert rendered.continuations == continued
    seen = {}

    def capture(site, inside, prefix="site/"):
        seen.update(site)
        return dict

    monkeypatch.setattr(search, "start_index", capture)
    staging.stage(tmp_path / "output", rendered, catalog).discard()
    indexed = {p.removeprefix("site/") for p in seen if p.endswith(".html")}
    assert "servers/hgx-b200-8x.html" in indexed and "index.html" in indexed
    assert indexed & continued == set()
    assert indexed == {p for p in rendered.site if p.endswith(".html")} - continued
