"""The charts page: static SVG charts from the catalog, each with alt text, its data table and sources."""

import dataclasses
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
    labels = load_labels()
    again = {
        "memory": charts.spec_svg(*charts.memory_chart(catalog, labels), charts.memory_alt(catalog, labels)),
        "price": charts.spec_svg(*charts.price_chart(catalog, labels), charts.price_alt(catalog, labels)),
    }
    assert again == svgs


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


def test_a_drawn_chart_is_remembered_across_processes(catalog, svgs, tmp_path, monkeypatch):
    """The memory chart comes from the user cache once drawn: a new process (here: a fresh cache
    object, and vl-convert made to fail) gets the same bytes; a changed constant draws it again."""
    import vl_convert

    monkeypatch.setenv("GPU_FINETUNE_CACHE_DIR", str(tmp_path / "cache"))
    labels = load_labels()
    alt = charts.memory_alt(catalog, labels)
    first = charts.memory_svg(catalog, labels, alt)
    assert first == svgs["memory"]

    def refuse(*args, **kwargs):
        raise AssertionError("drawn again")

    monkeypatch.setattr(vl_convert, "vegalite_to_svg", refuse)
    assert charts.memory_svg(catalog, labels, alt) == first

    import dataclasses

    anchors = catalog["memory_anchors"].with_columns(pl.col("params_b") * 2)
    changed = dataclasses.replace(catalog, tables=catalog.tables | {"memory_anchors": anchors})
    with pytest.raises(AssertionError, match="drawn again"):
        charts.memory_svg(changed, labels, alt)


@pytest.mark.parametrize("payload", [b"", b"\xff\xfe", b"not an svg"])
def test_a_broken_chart_entry_is_drawn_again(catalog, svgs, tmp_path, monkeypatch, payload):
    from pipeline import cache

    monkeypatch.setenv("GPU_FINETUNE_CACHE_DIR", str(tmp_path / "cache"))
    labels = load_labels()
    alt = charts.memory_alt(catalog, labels)
    charts.memory_svg(catalog, labels, alt)
    folder = tmp_path / "cache" / charts.SVG_NAMESPACE
    (entry,) = folder.iterdir()
    cache.Cache().put(charts.SVG_NAMESPACE, entry.stem, payload)
    assert charts.memory_svg(catalog, labels, alt) == svgs["memory"]


def _altair_memory_chart(data, labels: dict):
    """The memory chart as Vega-Altair builds it (what charts._memory_chart writes as plain data)."""
    import altair as alt

    L = labels["charts"]
    x = alt.X(
        "params_b:Q",
        title=L["memory_x"],
        scale=alt.Scale(type="log", domain=list(data.x_domain), nice=False),
        axis=alt.Axis(values=charts._ticks(*data.x_domain), format=charts.AXIS_FORMAT),
    )
    y_scale = alt.Scale(type="log", domain=list(data.y_domain), nice=False)
    y = alt.Y(
        "memory_gb:Q",
        title=L["memory_y"],
        scale=y_scale,
        axis=alt.Axis(values=charts._ticks(*data.y_domain), format=charts.AXIS_FORMAT),
    )
    gpu_data = alt.Data(name="gpus")
    rules = alt.Chart(gpu_data).mark_rule(color="#888", strokeWidth=1, strokeDash=[2, 3]).encode(y=y)
    lines = (
        alt.Chart(alt.Data(name="curves"))
        .mark_line(strokeWidth=2)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "method:N",
                title=L["memory_method"],
                sort=data.methods,
                scale=alt.Scale(domain=data.methods, scheme="tableau10"),
                legend=alt.Legend(orient="bottom", columns=2, labelLimit=320),
            ),
            strokeDash=alt.StrokeDash(
                "basis:N",
                title=L["memory_basis"],
                scale=alt.Scale(domain=data.bases, range=[[1, 0], [6, 4]][: len(data.bases)]),
                legend=alt.Legend(orient="bottom", labelLimit=320),
            ),
        )
    )
    hidden = alt.Axis(labels=False, ticks=False, domain=False, grid=False, title=None)
    leaders = (
        alt.Chart(gpu_data)
        .mark_rule(color="#888", strokeWidth=1)
        .encode(
            x=alt.X("from:Q", scale=alt.Scale(domain=[0, 1]), axis=None),
            x2="to:Q",
            y=alt.Y("memory_gb:Q", scale=y_scale, axis=hidden),
            y2="label_gb:Q",
        )
    )
    names = (
        alt.Chart(gpu_data)
        .mark_text(align="left", baseline="middle", dx=4, fontSize=11, color="#444")
        .encode(
            x=alt.X("to:Q", scale=alt.Scale(domain=[0, 1]), axis=None),
            y=alt.Y("label_gb:Q", scale=y_scale, axis=hidden),
            text="label:N",
        )
    )
    plot = (rules + lines).properties(width=charts.WIDTH, height=charts.HEIGHT)
    return (
        alt.hconcat(plot, (leaders + names).properties(width=24, height=charts.HEIGHT), spacing=0)
        .resolve_scale(y="shared")
        .properties(title=alt.Title(L["memory_title"], anchor="start"))
        .configure(font=charts.FONT, aria=False)
        .configure_view(strokeWidth=0)
    )


def _altair_price_chart(labels: dict):
    """The price chart as Vega-Altair builds it (what charts.price_spec writes as plain data)."""
    import altair as alt

    L = labels["charts"]
    x = alt.X(
        "server_memory_gb:Q",
        title=L["price_x"],
        scale=alt.Scale(zero=True, nice=True),
        axis=alt.Axis(format=charts.AXIS_FORMAT, tickCount=6),
    )
    y = alt.Y(
        "price_rub_month:Q",
        title=L["price_y"],
        scale=alt.Scale(zero=True, nice=True),
        axis=alt.Axis(format=charts.AXIS_FORMAT),
    )
    base = alt.Chart(alt.Data(name="servers")).encode(x=x, y=y)
    points = base.mark_point(filled=True, size=70, color="#4c78a8")
    right = base.mark_text(align="left", dx=8, fontSize=11).encode(text="server:N")
    left = base.mark_text(align="right", dx=-8, fontSize=11).encode(text="server:N")
    return (
        (points + right.transform_filter(alt.datum.side == "right") + left.transform_filter(alt.datum.side == "left"))
        .properties(width=charts.WIDTH, height=360, title=alt.Title(L["price_title"], anchor="start"))
        .configure(font=charts.FONT, aria=False)
        .configure_view(strokeWidth=0)
    )


def _without_schema(spec: dict) -> dict:
    return {k: v for k, v in spec.items() if k != "$schema"}


def test_the_charts_specs_are_what_altair_builds(catalog, svgs):
    """The specs written as plain data are the Vega-Lite that Vega-Altair builds of the same charts
    (and validates against Vega-Lite's schema): for the real catalog, and for a catalog without a model
    beyond the anchor table (one line style, no extrapolation legend) and with other labels."""
    labels = load_labels()
    data = charts._memory_data(catalog, labels["charts"])
    spec, datasets = charts._memory_chart(data, labels)
    assert spec == _without_schema(_altair_memory_chart(data, labels).to_dict())
    assert len(data.bases) == 2 and datasets == {"curves": data.rows, "gpus": data.gpu_rows}
    single = dataclasses.replace(data, bases=data.bases[:1], x_domain=(1.0, 70.0))
    assert charts._memory_chart(single, labels)[0] == _without_schema(_altair_memory_chart(single, labels).to_dict())
    assert charts.price_spec(labels) == _without_schema(_altair_price_chart(labels).to_dict())
    renamed = labels | {"charts": labels["charts"] | {"price_title": "Другой заголовок", "price_x": "Память"}}
    assert charts.price_spec(renamed) == _without_schema(_altair_price_chart(renamed).to_dict())
    alt_text = charts.price_alt(catalog, labels)
    assert (
        charts.spec_svg(charts.price_spec(labels), {"servers": charts.price_rows(catalog)}, alt_text) == svgs["price"]
    )


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
        f"Подписаны {len(named)} из 25\xa0серверов — с самой низкой ценой гигабайта памяти GPU; остальные — точки без "
        "подписи, их названия есть в таблице."
    )
    assert charts.price_note(catalog, load_labels()) is None  # the real catalog: every server named


def test_a_new_process_draws_the_charts_in_a_child_with_the_same_bytes(svgs, tmp_path):
    """start_drawing in a new process: a forked child takes the charts (vl-convert holds the GIL, so
    the build renders its other pages meanwhile; this process takes what the child has not begun when
    it asks for them), and the SVGs are the build's. An empty user cache, so that they are drawn."""
    import json
    import os
    import subprocess
    import sys

    from conftest import SOURCES

    script = (
        "import json, os, sys, time\n"
        "from pathlib import Path\n"
        "from pipeline.build import load_and_validate\n"
        "from pipeline.combine import combine\n"
        "from pipeline.render import charts\n"
        "from pipeline.render.site import load_labels\n"
        f"catalog = combine(load_and_validate(Path({str(SOURCES)!r}))[0])\n"
        "draw, by = charts._draw, {}\n"
        "def _draw(job):\n"
        "    return os.getpid(), draw(job)\n"
        "charts._draw = _draw\n"
        "drawing = charts.start_drawing(catalog, load_labels())\n"
        "time.sleep(1)  # the child takes the first chart at once\n"
        "alts, drawn = drawing()\n"
        "print(json.dumps({'me': os.getpid(), 'drawn': drawn, 'altair': 'altair' in sys.modules}))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PIPELINE_WORKERS": "2"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["drawn"]["memory"][0] != answer["me"]  # drawn by the child
    assert answer["altair"] is False  # the specs are plain data: Altair is never imported
    assert {name: svg for name, (_, svg) in answer["drawn"].items()} == svgs
