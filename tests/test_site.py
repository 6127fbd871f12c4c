"""The built site: every internal link resolves, pages are Russian, tables cite sources."""

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urlparse


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids, self.lang, self.tables, self.captions = [], set(), None, 0, 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.lang = a.get("lang")
        if "id" in a:
            self.ids.add(a["id"])
        for key in ("href", "src"):
            if key in a:
                self.links.append(a[key])
        self.tables += tag == "table"
        self.captions += tag == "figcaption"


def parse(path: Path) -> Links:
    parser = Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_every_internal_link_resolves(built):
    site = built / "site"
    pages = {p: parse(p) for p in site.rglob("*.html")}
    assert len(pages) == 6
    checked = 0
    for page, parsed in pages.items():
        assert parsed.lang == "ru", page
        for link in parsed.links:
            if urlparse(link).scheme in ("http", "https"):
                continue
            assert not link.startswith("/"), f"{page.name}: absolute link {link} breaks under a subpath"
            target, anchor = urldefrag(link)
            resolved = (page.parent / target).resolve() if target else page
            assert resolved.is_file(), f"{page.name}: {link}"
            if anchor:
                assert anchor in pages[resolved].ids, f"{page.name}: {link}"
            checked += 1
    assert checked > 50


def test_article_tables_have_source_captions(built):
    for name in ("finetune-memory.html", "gpu-count.html"):
        parsed = parse(built / "site" / name)
        assert parsed.tables >= 3 and parsed.tables == parsed.captions, name


def test_html_article_carries_the_seed_figures(built):
    html = (built / "site" / "finetune-memory.html").read_text(encoding="utf-8").replace("\xa0", " ")
    assert (
        '<th scope="row">Полное, bf16/fp16 (смешанная точность)</th><td class="num">137,1</td><td class="num">630</td><td class="num">1 200</td>'
        in html
    )
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
    from conftest import SOURCES
    from pipeline.__main__ import load_and_validate

    _, validation = load_and_validate(SOURCES)
    html = (built / "site" / "quality.html").read_text(encoding="utf-8")
    assert html.count("<td>пройдена</td>") == len(validation.checks) > 200
    assert "ошибок:" not in html
    assert html.count("no price; the site shows &#34;по запросу&#34;") == 5 == len(validation.warnings)
    assert "Дата сборки: 29.11.2026" in html
    data = (built / "site" / "data.html").read_text(encoding="utf-8")
    assert 'href="quality.html">«Качество данных»</a> (замечаний: 5)' in data
