"""The charts page: static SVG charts from the catalog, each with alt text, its data table and sources."""

import dataclasses
import math
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from pipeline.render import charts
from pipeline.render import format as fmt
from pipeline.render.site import load_labels


class Page(HTMLParser):
    """Images, links and tables (as rows of cell text) of one page."""

    def __init__(self):
        super().__init__()
        self.images, self.links, self.tables, self.captions = [], [], [], 0
        self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a)
        if tag == "a" and "href" in a:
            self.links.append(a["href"])
        if tag == "table":
            self.tables.append([])
        if tag == "tr":
            self.tables[-1].append([])
        if tag in ("th", "td"):
            self._cell = ""
        self.captions += tag == "figcaption"

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("th", "td"):
            self.tables[-1][-1].append(self._cell.replace("\xa0", " "))
            self._cell = None


@pytest.fixture(scope="module")
def page(built) -> Page:
    parsed = Page()
    parsed.feed((built / "site" / "charts.html").read_text(encoding="utf-8"))
    return parsed


@pytest.fixture(scope="module")
def svgs(built, page) -> dict[str, str]:
    """The charts linked from the page, keyed by name (memory, price)."""
    out = {}
    for img in page.images:
        path = built / "site" / img["src"]
        assert path.is_file(), img["src"]
        out[Path(img["src"]).name.split(".")[0]] = path.read_text(encoding="utf-8")
    return out


def svg_text(svg: str) -> set[str]:
    root = ET.fromstring(svg)
    return {"".join(el.itertext()).replace("\xa0", " ") for el in root.iter("{http://www.w3.org/2000/svg}text")}


def as_shown(text: str) -> str:
    return text.replace("\xa0", " ")


def test_both_charts_are_small_valid_svg(svgs):
    assert sorted(svgs) == ["memory", "price"]
    for name, svg in svgs.items():
        root = ET.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg", name
        assert root.find("{http://www.w3.org/2000/svg}title").text
        assert root.find("{http://www.w3.org/2000/svg}desc").text
        assert len(svg.encode()) < 100_000, name
        # Nothing to fetch when the file is viewed: no scripts, web fonts or external links.
        for marker in ("<script", "@font-face", "@import", "href="):
            assert marker not in svg, (name, marker)


def test_charts_render_identically_again(catalog, svgs):
    """A second render in the same process gives the same bytes (no counters, ids or timestamps)."""
    assert charts.drawn(catalog, load_labels())[1] == svgs


def test_memory_chart_shows_every_method_and_gpu(catalog, svgs):
    shown = svg_text(svgs["memory"])
    for name in catalog["methods"]["name_ru"]:
        assert name in shown
    label = load_labels()["charts"]["gpu_label"]
    for gb, names in (
        catalog["gpus"].sort("memory_gb", "gpu_id").group_by("memory_gb", maintain_order=True).agg("short_name").rows()
    ):
        assert label.format(gpus=", ".join(names), gb=as_shown(fmt.gb(gb))) in shown


def test_price_chart_shows_every_priced_server_only(catalog, svgs):
    shown = svg_text(svgs["price"])
    servers = catalog["servers"]
    priced = servers.filter(pl.col("price_rub_month").is_not_null())["display_name"].to_list()
    unpriced = servers.filter(pl.col("price_rub_month").is_null())["display_name"].to_list()
    assert priced and unpriced
    assert set(priced) <= shown
    assert not set(unpriced) & shown


def test_chart_curves_follow_the_rules(catalog):
    """Where the curves (the memory_curve table) pass a catalog model's size they give exactly the
    catalog's estimates: the smallest and the largest model at least, for every method."""
    curves = catalog["memory_curve"].select("params_b", "method_id", "memory_gb")
    expected = catalog["estimates"].select("params_b", "method_id", "memory_gb").unique()
    at_models = curves.join(expected.select("params_b").unique(), on="params_b")
    assert at_models.height >= 2 * catalog["methods"].height
    shared = expected.join(at_models.select("params_b").unique(), on="params_b")
    assert at_models.sort("params_b", "method_id").equals(shared.sort("params_b", "method_id"))


def test_grid_spans_the_catalog_and_holds_every_anchor(catalog):
    from pipeline.combine import size_grid

    grid = size_grid(catalog["models"], catalog["memory_anchors"])
    assert grid[0] == catalog["models"]["params_b"].min() and grid[-1] == catalog["models"]["params_b"].max()
    assert set(catalog["memory_anchors"]["params_b"].cast(float)) <= set(grid)
    on_chart = catalog["memory_curve"].filter(pl.col("on_chart"))
    assert sorted(set(on_chart["params_b"])) == grid
    assert on_chart.height == len(grid) * catalog["methods"].height


def test_gpu_labels_do_not_overlap():
    at = charts.spread_labels([24, 32, 40, 48, 80, 94, 96, 141, 180, 192, 256, 270], (0.2, 15000), 420, 12)
    import math

    px = [420 * (math.log(15000) - math.log(v)) / (math.log(15000) - math.log(0.2)) for v in at]
    assert all(lower - upper >= 12 - 1e-9 for lower, upper in zip(px, px[1:], strict=False))
    assert charts.spread_labels([10, 1000], (0.2, 15000), 420, 12) == pytest.approx([10, 1000])


def test_images_have_alt_text_with_key_figures(catalog, page):
    alts = {Path(img["src"]).name.split(".")[0]: as_shown(img["alt"]) for img in page.images}
    assert all(img.get("width") and img.get("height") for img in page.images)
    full = catalog["estimates"].filter(pl.col("method_id") == "full_amp")
    max_anchor = catalog["memory_anchors"]["params_b"].max()
    anchor_gb = catalog["memory_anchors"].filter(pl.col("params_b") == max_anchor)["memory_gb"]
    assert f"{as_shown(fmt.gb(anchor_gb.max()))} ГБ" in alts["memory"]
    assert f"{as_shown(fmt.gb(anchor_gb.min()))} ГБ" in alts["memory"]
    assert fmt.number(full["params_b"].max(), 2) in alts["memory"]
    prices = catalog["servers"]["price_rub_month"].drop_nulls()
    assert f"{as_shown(fmt.integer(prices.min()))} ₽" in alts["price"]
    assert f"{as_shown(fmt.integer(prices.max()))} ₽" in alts["price"]


def test_memory_table_equals_the_catalog(catalog, page):
    memory = page.tables[0]
    anchors = catalog["memory_anchors"]
    sizes = sorted(anchors["params_b"].unique().to_list())
    largest = catalog["models"].sort("params_b").row(-1, named=True)
    header = memory[0]
    for row, method in zip(memory[1:], catalog["methods"].sort("sort_order").iter_rows(named=True), strict=True):
        assert row[0] == method["name_ru"]
        for size in sizes:
            value = anchors.filter((pl.col("method_id") == method["method_id"]) & (pl.col("params_b") == size))
            column = header.index(f"{fmt.number(size)} млрд, ГБ")
            assert row[column] == as_shown(fmt.gb(value["memory_gb"].item()))
        estimate = catalog["estimates"].filter(
            (pl.col("model_id") == largest["model_id"]) & (pl.col("method_id") == method["method_id"])
        )
        assert row[-1] == as_shown(fmt.gb(estimate["memory_gb"].item())) + "*"


def test_gpu_and_price_tables_equal_the_catalog(catalog, page):
    gpus = page.tables[1][1:]
    assert sorted(gpus) == sorted(
        [r[0], as_shown(fmt.gb(r[1]))] for r in catalog["gpus"].select("short_name", "memory_gb").rows()
    )
    prices = page.tables[2][1:]
    memory = {g: gb for g, gb in catalog["gpus"].select("gpu_id", "memory_gb").rows()}
    expected = [
        [
            s["display_name"],
            fmt.integer(s["gpu_count"]),
            fmt.gb(s["gpu_count"] * memory[s["gpu_id"]]),
            fmt.integer(s["price_rub_month"]),
        ]
        for s in catalog["servers"].filter(pl.col("price_rub_month").is_not_null()).iter_rows(named=True)
    ]
    assert sorted(row[:4] for row in prices) == sorted([as_shown(c) for c in row] for row in expected)


def test_every_table_cites_its_sources_and_every_link_resolves(built, page):
    html = (built / "site" / "charts.html").read_text(encoding="utf-8")
    assert len(page.tables) == 3 and page.captions >= 3
    assert html.count('<p class="source" data-pagefind-ignore="">') == 3 and "проверено 12.10.2026" in html
    for link in page.links + [img["src"] for img in page.images]:
        target = link.split("#")[0]
        if target and not link.startswith(("http://", "https://")):
            assert (built / "site" / target).is_file(), link


def test_every_page_links_to_the_charts(built):
    for name in ("index.html", "data.html", "charts.html"):
        html = (built / "site" / name).read_text(encoding="utf-8")
        assert 'href="charts.html"' in html, name
    assert 'href="charts.html" aria-current="page"' in (built / "site" / "charts.html").read_text(encoding="utf-8")


def test_catalog_without_prices_has_no_price_chart(catalog):
    from pipeline.render.site import Renderer

    tables = dict(catalog.tables, servers=catalog["servers"].with_columns(price_rub_month=pl.lit(None, pl.Int64)))
    site = Renderer(dataclasses.replace(catalog, tables=tables)).render().site
    assert [name for name in site if name.startswith("charts/")] == [next(n for n in site if "charts/memory." in n)]
    assert 'id="chart-memory"' in site["charts.html"] and 'id="chart-price"' not in site["charts.html"]


def test_a_price_chart_of_many_servers_names_the_cheapest_per_gb_one_per_point(catalog):
    """More than PRICE_NAMED_MAX priced servers: every one is a point, PRICE_NAMED_MAX are named (the
    lowest ₽ per GB, one per point), and the sentence under the chart says so."""
    base = catalog["servers"].filter(pl.col("price_rub_month").is_not_null())
    n = charts.PRICE_NAMED_MAX + 5
    copies = [
        base.head(1).with_columns(
            server_id=pl.lit(f"s{i:02d}"),
            display_name=pl.lit(f"Сервер {i}"),
            price_rub_month=pl.lit(100_000 * (i // 2 + 1)),
        )
        for i in range(n)
    ]  # two servers per price: the same point
    servers = pl.concat(copies)
    memory = catalog["server_memory"].head(1)
    memory = pl.concat([memory.with_columns(server_id=pl.lit(f"s{i:02d}")) for i in range(n)])
    many = {"servers": servers, "server_memory": memory}
    named = charts.price_named(many)
    assert named == {f"s{i:02d}" for i in range(0, 2 * charts.PRICE_NAMED_MAX, 2) if i < n}
    rows = charts.price_rows(many)
    assert len(rows) == n and sum(r["side"] != "none" for r in rows) == len(named)
    assert charts.price_note(many, load_labels()) == (
        f"Подписаны {len(named)} из 25\xa0серверов: с самой низкой ценой гигабайта памяти GPU, по одному на точку и "
        "так, чтобы подписи не наложились друг на друга; остальные — точки без подписи, их названия есть в таблице."
    )
    assert charts.price_note(catalog, load_labels()) is None  # the real catalog: every server named


SVG = "{http://www.w3.org/2000/svg}"


def _value(label: str) -> float:
    return float(label.replace("\xa0", "").replace(" ", "").replace(",", "."))


def _axes(root: ET.Element, log: bool):
    """Pixel -> value on each axis, read back from the drawn tick labels (x: centred under the
    plot, y: right-aligned left of it), so that a test checks positions against the labels a reader sees."""
    ticks = {"middle": [], "end": []}
    for text in root.iter(SVG + "text"):
        anchor = text.get("text-anchor")
        if anchor in ticks and text.get("font-size") == "10":
            ticks[anchor].append((float(text.get("x")), float(text.get("y")), _value(text.text)))

    def inverse(points: list[tuple[float, float]]):
        (p0, v0), (p1, v1) = points[0], points[-1]
        if log:
            return lambda p: math.exp(math.log(v0) + (p - p0) / (p1 - p0) * (math.log(v1) - math.log(v0)))
        return lambda p: v0 + (p - p0) / (p1 - p0) * (v1 - v0)

    x = inverse([(px, v) for px, _, v in ticks["middle"]])
    # a y label's baseline sits MIDDLE of its size below its tick
    y = inverse([(py - 10 * charts.MIDDLE, v) for _, py, v in ticks["end"]])
    return x, y


def _path_points(path: ET.Element) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in path.get("d")[1:].split("L")]


def test_memory_curves_are_drawn_at_the_catalogs_figures(catalog, svgs):
    """Each method's line, read back through the axes' tick labels, passes through exactly the
    `memory_curve` points of that method; its colour is the one its legend entry shows; each GPU's
    dotted line is at its memory."""
    root = ET.fromstring(svgs["memory"])
    x_of, y_of = _axes(root, log=True)
    children = list(root)
    legend = {  # a legend entry: its symbol (a line), then its label
        nxt.text: line.get("stroke")
        for line, nxt in zip(children, children[1:], strict=False)
        if line.tag == SVG + "line" and line.get("stroke-width") == "2" and nxt.tag == SVG + "text"
    }
    curves = charts.memory_curves(catalog)
    for method in catalog["methods"]["name_ru"]:
        paths = [p for p in root.iter(SVG + "path") if p.get("stroke") == legend[method]]
        assert len(paths) == 2  # solid to the largest anchor, dashed beyond (the real catalog)
        pixels = {point for p in paths for point in _path_points(p)}  # the lines meet at the largest anchor
        drawn = sorted((x_of(px), y_of(py)) for px, py in pixels)
        expected = curves.filter(pl.col("name_ru") == method).select("params_b", "memory_gb").rows()
        assert [d[0] for d in drawn] == pytest.approx([e[0] for e in expected], rel=1e-3)
        assert [d[1] for d in drawn] == pytest.approx([e[1] for e in expected], rel=1e-3)
    dotted = sorted(float(line.get("y1")) for line in root.iter(SVG + "line") if line.get("stroke-dasharray") == "2,3")
    levels = [lv["memory_gb"] for lv in charts.gpu_levels(catalog)]
    assert sorted(y_of(py) for py in dotted) == pytest.approx(sorted(levels), rel=1e-3)


def test_price_points_are_drawn_at_each_servers_memory_and_price(catalog, svgs):
    root = ET.fromstring(svgs["price"])
    x_of, y_of = _axes(root, log=False)
    drawn = sorted(
        (round(x_of(float(c.get("cx"))), 1), round(y_of(float(c.get("cy"))), -2)) for c in root.iter(SVG + "circle")
    )
    servers = charts.priced_servers(catalog)
    expected = sorted(zip(servers["server_memory_gb"], servers["price_rub_month"], strict=True))
    assert [d[0] for d in drawn] == pytest.approx([e[0] for e in expected], abs=0.5)
    assert [d[1] for d in drawn] == pytest.approx([e[1] for e in expected], abs=2_000)
    ticks = sorted(
        _value(t.text) for t in root.iter(SVG + "text") if t.get("text-anchor") == "middle" and t.text[0].isdigit()
    )
    assert ticks == [0, 200, 400, 600, 800, 1000, 1200]  # from zero, a whole step past the largest memory


def _extent(text: ET.Element) -> tuple[float, float]:
    from pipeline.render import svg

    x, size = float(text.get("x")), float(text.get("font-size"))
    width = svg.text_width("".join(text.itertext()), size, text.get("font-weight") == "bold")
    shift = {"start": 0, "middle": width / 2, "end": width}[text.get("text-anchor")]
    return x - shift, x - shift + width


def test_no_label_runs_off_the_drawing_however_long_the_names(catalog):
    """Long GPU, method and server names widen the drawing instead of being cut at its edge (with the
    fonts' widths as the layout estimates them)."""
    long = " ".join(["Очень длинное название"] * 5)
    tables = dict(
        catalog.tables,
        gpus=catalog["gpus"].with_columns(short_name=pl.col("short_name") + " " + long),
        methods=catalog["methods"].with_columns(name_ru=pl.col("name_ru") + " " + long),
        servers=catalog["servers"].with_columns(display_name=pl.col("display_name") + " " + long),
    )
    alts, drawn = charts.drawn(dataclasses.replace(catalog, tables=tables), load_labels())
    _, usual = charts.drawn(catalog, load_labels())
    for name, text in drawn.items():
        root = ET.fromstring(text)
        width = float(root.get("width"))
        assert width > float(ET.fromstring(usual[name]).get("width")), name
        for label in root.iter(SVG + "text"):
            if label.get("x") is not None:  # the rotated y title is placed by its transform
                left, right = _extent(label)
                assert 0 <= left and right <= width, (name, label.text)


def test_price_names_never_overlap_and_the_note_counts_those_shown(catalog):
    """Servers whose names would cover each other (the same memory, prices 1 ₽ apart): one is named on
    each side of the point, the others are points only, and the sentence under the chart says how
    many are named."""
    servers = catalog["servers"].filter(pl.col("price_rub_month").is_not_null())
    memory = catalog["server_memory"]
    lead = servers.sort("price_rub_month").row(-1, named=True)["server_id"]  # the dearest
    twins = [
        servers.filter(pl.col("server_id") == lead).with_columns(
            server_id=pl.lit(f"twin-{i}"),
            display_name=pl.lit(f"Близнец {i}"),
            price_rub_month=pl.col("price_rub_month") - i,
        )
        for i in (1, 2, 3)
    ]
    twin_memory = [
        memory.filter(pl.col("server_id") == lead).with_columns(server_id=pl.lit(f"twin-{i}")) for i in (1, 2, 3)
    ]
    near = {"servers": pl.concat([servers, *twins]), "server_memory": pl.concat([memory, *twin_memory])}
    rows = charts.price_rows(near)
    assert len(rows) == servers.height + 3
    cluster = [r["side"] for r in rows if r["server_id"] == lead or r["server_id"].startswith("twin-")]
    assert sorted(cluster) == ["left", "none", "none", "right"]
    others = {r["server_id"] for r in rows if r["server_id"] != lead and not r["server_id"].startswith("twin-")}
    assert others <= charts.price_named(near) and len(charts.price_named(near)) == servers.height + 1
    assert charts.price_note(near, load_labels()).startswith(f"Подписаны {servers.height + 1} из {servers.height + 3}")
    drawn = ET.fromstring(charts.price_svg(near, load_labels(), "alt"))
    shown = {r["server"] for r in rows}
    boxes = [(*_extent(t), float(t.get("y"))) for t in drawn.iter(SVG + "text") if t.text in shown]
    assert len(boxes) == servers.height + 1
    for i, (left, right, y) in enumerate(boxes):
        for other_left, other_right, other_y in boxes[i + 1 :]:
            assert not (left < other_right and other_left < right and abs(y - other_y) < 11), (left, y)
