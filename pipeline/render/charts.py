"""Charts: memory against model size and server price against GPU memory, as static SVG.

Each chart is a Vega-Lite spec written here as plain data (the spec Vega-Altair would build of it:
tests/test_charts.py builds both and compares them; importing Altair cost a build 0.9 s of CPU), drawn
at build time by vl-convert (no JavaScript at view time). Every plotted number comes from the catalog
through the rules in `estimate`;
words come from the [charts] section of site_templates/labels.toml. The page shows
each chart with a text alternative and the data table beside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from html import escape

import polars as pl

from pipeline.combine import Catalog
from pipeline.parallel import start_map
from pipeline.render import format as fmt
from pipeline.render import russian
from pipeline.render.view import TableView

FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif'
WIDTH, HEIGHT = 560, 420
GPU_LABEL_GAP_PX = 12  # GPU labels closer than this on the log axis are pushed apart
AXIS_FORMAT = ",~f"  # d3-format in the ru-RU locale: "0,5", "10 000"


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


# -- data, from the catalog --
def method_order(catalog: Catalog) -> pl.DataFrame:
    """The methods in the order the site lists them (sort_order, then id)."""
    return catalog["methods"].sort("sort_order", "method_id")


def memory_curves(catalog: Catalog, which: str = "on_chart") -> pl.DataFrame:
    """The `memory_curve` rows the chart (`on_chart`) or the table beside it (`in_table`) shows, one per
    size x method, with the methods' names, in the methods' order."""
    methods = method_order(catalog).select("method_id", "name_ru", "short_name_ru", "sort_order")
    curves = catalog["memory_curve"].filter(pl.col(which))
    return curves.join(methods, on="method_id").sort("sort_order", "params_b")


def gpu_levels(catalog: Catalog) -> list[dict]:
    """One entry per distinct GPU memory size: the memory and the GPUs that have it."""
    gpus = catalog["gpus"].sort("memory_gb", "gpu_id")
    levels: dict[float, list[str]] = {}
    for row in gpus.iter_rows(named=True):
        levels.setdefault(float(row["memory_gb"]), []).append(row["short_name"])
    return [{"memory_gb": gb, "gpus": names} for gb, names in levels.items()]


def priced_servers(catalog: Catalog) -> pl.DataFrame:
    """Servers with a price, with their total GPU memory and the price of one GB of it (`server_memory`)."""
    memory = catalog["server_memory"].select("server_id", "server_memory_gb", rub_per_gb="rub_per_gb_month")
    return (
        catalog["servers"]
        .join(memory, on="server_id")
        .filter(pl.col("price_rub_month").is_not_null())
        .sort("server_memory_gb", "price_rub_month", "server_id")
    )


# -- layout helpers --
def _log_domain(values: list[float], pad: float = 1.25) -> tuple[float, float]:
    return min(values) / pad, max(values) * pad


def _ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks inside [lo, hi]."""
    out = []
    for exponent in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for mantissa in (1, 2, 5):
            value = round(mantissa * 10.0**exponent, 10)
            if lo <= value <= hi:
                out.append(value)
    return out


def spread_labels(values: list[float], domain: tuple[float, float], height: float, gap: float) -> list[float]:
    """Positions (in data units, log scale) for labels at `values`, pushed apart to at least `gap` pixels."""
    lo, hi = (math.log(d) for d in domain)
    px = [height * (hi - math.log(v)) / (hi - lo) for v in sorted(values)]  # bottom label first
    # Labels that would overlap form a block centred on their lines; blocks that then
    # overlap merge, until none do.
    blocks: list[list[float]] = []
    for p in px:
        blocks.append([p])
        while len(blocks) > 1 and _top(blocks[-1], gap) > _top(blocks[-2], gap) - len(blocks[-2]) * gap:
            blocks[-2:] = [blocks[-2] + blocks[-1]]
    placed = [_top(b, gap) - i * gap for b in blocks for i in range(len(b))]
    return [math.exp(hi - p * (hi - lo) / height) for p in placed]


def _top(block: list[float], gap: float) -> float:
    """Pixel position of the lowest label of a block of labels `gap` apart, centred on their lines."""
    return sum(block) / len(block) + (len(block) - 1) * gap / 2


# -- the charts --
def memory_chart(catalog: Catalog, labels: dict) -> tuple:
    """The chart and its named datasets."""
    return _memory_chart(_memory_data(catalog, labels["charts"]), labels)


def _memory_chart(data: _MemoryData, labels: dict) -> tuple:
    """memory_chart from its data (plain Python: no polars): its Vega-Lite spec and named datasets."""
    L = labels["charts"]
    x = _axis(
        "params_b", L["memory_x"], _log_scale(data.x_domain), {"format": AXIS_FORMAT, "values": _ticks(*data.x_domain)}
    )
    y_scale = _log_scale(data.y_domain)
    y = _axis("memory_gb", L["memory_y"], y_scale, {"format": AXIS_FORMAT, "values": _ticks(*data.y_domain)})
    rules = {
        "data": {"name": "gpus"},
        "mark": {"type": "rule", "color": "#888", "strokeDash": [2, 3], "strokeWidth": 1},
        "encoding": {"y": y},
    }
    plot = {"layer": [rules, _memory_lines(L, x, y, data)], "height": HEIGHT, "width": WIDTH}
    spec = {
        "config": _CONFIG,
        "hconcat": [plot, _gpu_names(y_scale)],
        "resolve": {"scale": {"y": "shared"}},
        "spacing": 0,
        "title": {"text": L["memory_title"], "anchor": "start"},
    }
    return spec, {"curves": data.rows, "gpus": data.gpu_rows}


# Every chart's configuration: the site's font, no ARIA attributes (the page's alt text describes the
# chart), no frame; Vega-Lite's default view size, as Altair writes it.
_CONFIG = {"view": {"continuousWidth": 300, "continuousHeight": 300, "strokeWidth": 0}, "aria": False, "font": FONT}


def _log_scale(domain: tuple[float, float]) -> dict:
    return {"domain": list(domain), "nice": False, "type": "log"}


def _axis(field: str, title: str | None, scale: dict, axis: dict | None) -> dict:
    """A quantitative position channel: its field, title (None: none), scale and axis (None: no axis)."""
    channel = {"axis": axis, "field": field, "scale": scale, "type": "quantitative"}
    return channel if title is None else channel | {"title": title}


@dataclass(frozen=True)
class _MemoryData:
    """What the memory chart draws: the curves' points, the GPU lines, the axes' domains, the legends' order."""

    rows: list[dict]
    gpu_rows: list[dict]
    x_domain: tuple[float, float]
    y_domain: tuple[float, float]
    methods: list[str]
    bases: list[str]


def _memory_data(catalog: Catalog, L: dict) -> _MemoryData:
    """The memory chart's datasets, from the `memory_curve` table and the GPUs."""
    curves = memory_curves(catalog)
    sizes = curves["params_b"].unique().sort().to_list()
    max_anchor = float(catalog["memory_anchors"]["params_b"].max())
    basis_in = L["memory_basis_table"]
    basis_out = L["memory_basis_extrapolated"].format(max_anchor=fmt.number(max_anchor))
    # The extrapolated piece starts at the largest anchor, so the solid and dashed lines meet.
    rows = [
        {"params_b": r["params_b"], "memory_gb": r["memory_gb"], "method": r["name_ru"], "basis": basis_in}
        for r in curves.filter(~pl.col("extrapolated")).iter_rows(named=True)
    ] + [
        {"params_b": r["params_b"], "memory_gb": r["memory_gb"], "method": r["name_ru"], "basis": basis_out}
        for r in curves.filter(pl.col("extrapolated") | (pl.col("params_b") == max_anchor)).iter_rows(named=True)
    ]
    levels = gpu_levels(catalog)
    y_domain = _log_domain(curves["memory_gb"].to_list() + [lv["memory_gb"] for lv in levels])
    label_at = spread_labels([lv["memory_gb"] for lv in levels], y_domain, HEIGHT, GPU_LABEL_GAP_PX)
    gpu_rows = [
        {
            "memory_gb": lv["memory_gb"],
            "label_gb": at,
            "label": L["gpu_label"].format(gpus=", ".join(lv["gpus"]), gb=fmt.gb(lv["memory_gb"])),
            "from": 0,
            "to": 1,
        }
        for lv, at in zip(levels, label_at, strict=True)
    ]
    return _MemoryData(
        rows,
        gpu_rows,
        (sizes[0], sizes[-1]),
        y_domain,
        method_order(catalog)["name_ru"].to_list(),
        [basis_in, basis_out] if curves["extrapolated"].any() else [basis_in],
    )


def _memory_lines(L: dict, x: dict, y: dict, data: _MemoryData) -> dict:
    """One line per method, solid where the anchor table covers the size, dashed beyond it."""
    color = {
        "field": "method",
        "legend": {"columns": 2, "labelLimit": 320, "orient": "bottom"},
        "scale": {"domain": data.methods, "scheme": "tableau10"},
        "sort": data.methods,
        "title": L["memory_method"],
        "type": "nominal",
    }
    dash = {
        "field": "basis",
        "legend": {"labelLimit": 320, "orient": "bottom"},
        "scale": {"domain": data.bases, "range": [[1, 0], [6, 4]][: len(data.bases)]},
        "title": L["memory_basis"],
        "type": "nominal",
    }
    return {
        "data": {"name": "curves"},
        "mark": {"type": "line", "strokeWidth": 2},
        "encoding": {"color": color, "strokeDash": dash, "x": x, "y": y},
    }


def _gpu_names(y_scale: dict) -> dict:
    """A narrow column beside the plot that names the GPU of each reference line; a leader joins
    the line's height to its label where labels had to be pushed apart."""
    hidden = {"domain": False, "grid": False, "labels": False, "ticks": False, "title": None}
    unit = {"domain": [0, 1]}
    leaders = {
        "mark": {"type": "rule", "color": "#888", "strokeWidth": 1},
        "encoding": {
            "x": _axis("from", None, unit, None),
            "x2": {"field": "to"},
            "y": _axis("memory_gb", None, y_scale, hidden),
            "y2": {"field": "label_gb"},
        },
    }
    names = {
        "mark": {"type": "text", "align": "left", "baseline": "middle", "color": "#444", "dx": 4, "fontSize": 11},
        "encoding": {
            "text": {"field": "label", "type": "nominal"},
            "x": _axis("to", None, unit, None),
            "y": _axis("label_gb", None, y_scale, hidden),
        },
    }
    return {"layer": [leaders, names], "data": {"name": "gpus"}, "height": HEIGHT, "width": 24}


def price_chart(catalog: Catalog, labels: dict) -> tuple:
    """The chart's Vega-Lite spec and its named datasets."""
    return price_spec(labels), {"servers": price_rows(catalog)}


# The price chart names at most this many servers beside their points: more names overlap into an
# unreadable block (and drawing 400 names took Vega 1.8 s). Beyond it, the servers with the lowest
# price per GB of GPU memory are named, one per point (the chart says so); every server is a point,
# and a row of the table under the chart.
PRICE_NAMED_MAX = 20


def price_named(catalog: Catalog) -> set[str]:
    """The servers the price chart names: every priced one, or the PRICE_NAMED_MAX cheapest per GB,
    one per point (servers of the same memory and price share a point: the first by id is named)."""
    servers = priced_servers(catalog)
    if servers.height <= PRICE_NAMED_MAX:
        return set(servers["server_id"].to_list())
    points = servers.sort("rub_per_gb", "server_id").unique(
        ["server_memory_gb", "price_rub_month"], keep="first", maintain_order=True
    )
    return set(points["server_id"].head(PRICE_NAMED_MAX).to_list())


def price_rows(catalog: Catalog) -> list[dict]:
    """The price chart's one dataset ("servers"): each priced server's memory, price and label side
    ("none" for a server it does not name: price_named)."""
    servers = priced_servers(catalog)
    named = price_named(catalog)
    middle = (servers["server_memory_gb"].min() + servers["server_memory_gb"].max()) / 2
    return [
        {
            "server": r["display_name"],
            "server_memory_gb": r["server_memory_gb"],
            "price_rub_month": r["price_rub_month"],
            "side": "none" if r["server_id"] not in named else "left" if r["server_memory_gb"] > middle else "right",
        }
        for r in servers.iter_rows(named=True)
    ]


def price_note(catalog: Catalog, labels: dict) -> str | None:
    """The sentence under the price chart when it names only some of its servers (price_named)."""
    servers = priced_servers(catalog).height
    named = len(price_named(catalog))
    if named == servers:
        return None
    return labels["charts"]["price_named"].format(named=fmt.integer(named), servers=russian.Shown(fmt.integer(servers)))


def price_spec(labels: dict) -> dict:
    """The price chart's Vega-Lite spec without its data (the named dataset "servers", joined when it
    is drawn) and description: a point per server, and beside the named ones their names, pointing
    away from the nearer edge so that none runs off the chart."""
    L = labels["charts"]
    scale = {"nice": True, "zero": True}
    x = _axis("server_memory_gb", L["price_x"], scale, {"format": AXIS_FORMAT, "tickCount": 6})
    y = _axis("price_rub_month", L["price_y"], scale, {"format": AXIS_FORMAT})
    name = {"field": "server", "type": "nominal"}

    def names(side: str, dx: int) -> dict:
        return {
            "mark": {"type": "text", "align": side, "dx": dx, "fontSize": 11},
            "encoding": {"text": name, "x": x, "y": y},
            "transform": [{"filter": f"(datum.side === '{'left' if side == 'right' else 'right'}')"}],
        }

    return {
        "config": _CONFIG,
        "layer": [
            {"mark": {"type": "point", "color": "#4c78a8", "filled": True, "size": 70}, "encoding": {"x": x, "y": y}},
            names("left", 8),
            names("right", -8),
        ],
        "data": {"name": "servers"},
        "height": 360,
        "title": {"text": L["price_title"], "anchor": "start"},
        "width": WIDTH,
    }


SVG_NAMESPACE = "chart-svg"  # pipeline.cache: Vega-Lite's drawing of a spec, by the spec and vl-convert's version
_CLIP_ID = re.compile(r"\b(clip|gradient|pattern)(\d+)\b")


def drawn(spec: dict, vl_convert) -> str:
    """vl-convert's SVG of `spec`, remembered in the user cache (pipeline.cache): drawing is most of a
    chart's cost, and the same spec with the same vl-convert gives the same drawing, so a build in a
    new process (or `just serve` after an edit) draws a chart again only when its data changed."""
    text = json.dumps(spec, sort_keys=True, default=str)
    return remembered(
        SVG_NAMESPACE,
        (getattr(vl_convert, "__version__", "?"), text),
        lambda: vl_convert.vegalite_to_svg(spec, format_locale="ru-RU", allowed_base_urls=[]),
    )


def remembered(namespace: str, parts: tuple[str, ...], make: Callable[[], str]) -> str:
    """An SVG from the user cache (pipeline.cache) under the key of `parts`, else `make()` stored there;
    an entry that does not decode or is not an SVG is made again."""
    from pipeline import cache

    store = cache.Cache()
    key = cache.make_key(namespace, *parts)
    kept = store.get(namespace, key)
    if kept is not None:
        with contextlib.suppress(UnicodeDecodeError):
            text = kept.decode("utf-8")
            if text.startswith("<svg"):
                return text
    text = make()
    store.put(namespace, key, text.encode("utf-8"))
    return text


def spec_svg(spec: dict, datasets: dict[str, list[dict]], description: str) -> str:
    """The chart of `spec` (without data and description) as a self-contained SVG: no network, Russian
    number format, stable ids. The rows join the spec only here, so the spec is written once whatever
    the data."""
    import vl_convert

    spec = {k: v for k, v in spec.items() if k != "$schema"} | {"description": description, "datasets": datasets}
    svg = drawn(spec, vl_convert)
    # Vega numbers clip paths from a counter that lives as long as the process; renumber from 1
    # so that the same data gives the same bytes however many charts were drawn before.
    seen: dict[str, str] = {}

    def renumber(m: re.Match) -> str:
        return seen.setdefault(m.group(0), f"{m.group(1)}{len(seen) + 1}")

    svg = _CLIP_ID.sub(renumber, svg)
    # With ARIA attributes off (the page's alt text describes the chart), the file carries
    # its own title and description for whoever opens it directly.
    head = f"<title>{escape(spec['title']['text'])}</title><desc>{escape(description)}</desc>"
    return re.sub(r"(<svg[^>]*>)", lambda m: m.group(1) + head, svg, count=1)


# -- the tables beside the charts --
def memory_table(catalog: Catalog, labels: dict) -> TableView:
    """The table beside the memory chart: each method's anchor figures and the table rule at the table's sizes."""
    L, C = labels["charts"], labels["common"]
    anchors = catalog["memory_anchors"]
    curves = memory_curves(catalog, "in_table")
    sizes = curves["params_b"].unique().sort().to_list()
    rows = []
    for method in method_order(catalog).iter_rows(named=True):
        own = curves.filter(pl.col("method_id") == method["method_id"])
        rows.append(
            [method["name_ru"]]
            + [
                fmt.gb(r["memory_gb"]) + (C["extrapolation_mark"] if r["extrapolated"] else "")
                for r in own.iter_rows(named=True)
            ]
        )
    max_anchor = float(anchors["params_b"].max())
    return TableView(
        [L["table_method"]] + [L["table_size"].format(size=fmt.number(s, 2)) for s in sizes],
        rows,
        _unique(anchors["reference_id"].to_list()),
        ["memory_anchors", "estimates"],
        [False] + [True] * len(sizes),
        [C["extrapolation_note"].format(max_anchor=fmt.number(max_anchor))] if sizes[-1] > max_anchor else [],
    )


def gpu_table(catalog: Catalog, labels: dict) -> TableView:
    """The table beside the memory chart's GPU lines: each card's memory, smallest first."""
    L = labels["charts"]
    gpus = catalog["gpus"].sort("memory_gb", "gpu_id")
    return TableView(
        [L["table_gpu"], L["table_gpu_memory"]],
        [[r["short_name"], fmt.gb(r["memory_gb"])] for r in gpus.iter_rows(named=True)],
        _unique(gpus["reference_id"].to_list()),
        ["gpus"],
        [False, True],
    )


def price_table(catalog: Catalog, labels: dict) -> TableView:
    """The table beside the price chart: each priced server's cards, memory, monthly price and ₽ per GB."""
    L = labels["charts"]
    servers = priced_servers(catalog)
    rows = [
        [
            r["display_name"],
            fmt.integer(r["gpu_count"]),
            fmt.gb(r["server_memory_gb"]),
            fmt.integer(r["price_rub_month"]),
            fmt.integer(round(r["rub_per_gb"])),
        ]
        for r in servers.iter_rows(named=True)
    ]
    gpu_refs = catalog["gpus"].filter(pl.col("gpu_id").is_in(servers["gpu_id"].implode()))["reference_id"].to_list()
    return TableView(
        [L["table_server"], L["table_gpu_count"], L["table_server_memory"], L["table_price"], L["table_rub_per_gb"]],
        rows,
        _unique(servers["reference_id"].to_list() + gpu_refs),
        ["servers", "gpus"],
        [False, True, True, True, True],
    )


# -- key figures for the text alternatives --
def memory_facts(catalog: Catalog) -> dict:
    """The memory chart's key figures for its text alternative (sizes, the figures at the largest anchor, the GPU levels)."""
    models = catalog["models"]["params_b"].cast(pl.Float64)
    max_anchor = float(catalog["memory_anchors"]["params_b"].max())
    at_anchor = memory_curves(catalog, "in_table").filter(pl.col("params_b") == max_anchor).sort("memory_gb")
    levels = gpu_levels(catalog)
    return {
        "methods": catalog["methods"].height,
        "size_min": fmt.number(float(models.min()), 2),
        "size_max": fmt.number(float(models.max()), 2),
        "max_anchor": fmt.number(max_anchor),
        "low_gb": fmt.gb(at_anchor["memory_gb"][0]),
        "low_method": at_anchor["short_name_ru"][0],
        "high_gb": fmt.gb(at_anchor["memory_gb"][-1]),
        "high_method": at_anchor["short_name_ru"][-1],
        "gpus": catalog["gpus"].height,
        "gpu_low_gb": fmt.gb(levels[0]["memory_gb"]),
        "gpu_low": ", ".join(levels[0]["gpus"]),
        "gpu_high_gb": fmt.gb(levels[-1]["memory_gb"]),
        "gpu_high": ", ".join(levels[-1]["gpus"]),
    }


def price_facts(catalog: Catalog) -> dict:
    """The price chart's key figures for its text alternative (the cheapest and dearest servers, the best ₽ per GB)."""
    servers = priced_servers(catalog)
    cheap = servers.sort("price_rub_month", "server_id").row(0, named=True)
    dear = servers.sort("price_rub_month", "server_id").row(-1, named=True)
    per_gb = servers.sort("rub_per_gb", "server_id")
    return {
        "servers": servers.height,
        "unpriced": catalog["servers"].height - servers.height,
        "cheap": cheap["display_name"],
        "cheap_gb": fmt.gb(cheap["server_memory_gb"]),
        "cheap_price": fmt.integer(cheap["price_rub_month"]),
        "dear": dear["display_name"],
        "dear_gb": fmt.gb(dear["server_memory_gb"]),
        "dear_price": fmt.integer(dear["price_rub_month"]),
        "per_gb_low": fmt.integer(round(per_gb["rub_per_gb"][0])),
        "per_gb_low_server": per_gb["display_name"][0],
        "per_gb_high": fmt.integer(round(per_gb["rub_per_gb"][-1])),
        "per_gb_high_server": per_gb["display_name"][-1],
    }


_SIZE = re.compile(r'<svg[^>]* width="(\d+)" height="(\d+)"')


def memory_alt(catalog: Catalog, labels: dict) -> str:
    """The text alternative of the memory chart, with its key figures."""
    return labels["charts"]["memory_alt"].format(**memory_facts(catalog))


def price_alt(catalog: Catalog, labels: dict) -> str:
    """The text alternative of the price chart, with its key figures."""
    facts = price_facts(catalog)
    return labels["charts"]["price_alt"].format(**facts | {"servers": russian.Shown(fmt.integer(facts["servers"]))})


def _hashed(name: str, svg: str) -> str:
    return f"charts/{name}.{hashlib.sha256(svg.encode()).hexdigest()[:10]}.svg"


def memory_svg(catalog: Catalog, labels: dict, alt: str) -> str:
    """The memory chart's SVG (drawn, or from the user cache: `drawn`)."""
    return _draw(_memory_job(catalog, labels, alt))


def _memory_job(catalog: Catalog, labels: dict, alt: str) -> tuple:
    """What drawing the memory chart needs, in plain Python (made here with polars): its data, labels
    and alt text."""
    return "memory", (_memory_data(catalog, labels["charts"]), labels, alt)


def _draw(job: tuple) -> str:
    """A chart's SVG from its job (_memory_job, or the price chart's labels, rows and alt text):
    vl-convert only, so that a forked child can draw it (start_drawing)."""
    name, inputs = job
    if name == "memory":
        data, labels, alt = inputs
        return spec_svg(*_memory_chart(data, labels), alt)
    labels, rows, alt = inputs
    return spec_svg(price_spec(labels), {"servers": rows}, alt)


# The smallest chart: drawing it starts vl-convert's runtime (start_runtime).
_FIRST_SPEC = {
    "data": {"values": [{"x": 0}]},
    "mark": "point",
    "encoding": {"x": {"field": "x", "type": "quantitative"}},
}


def start_runtime() -> None:
    """Start vl-convert's runtime in this process (a process that lives on: pipeline/tools/serve.py
    calls this while the editor reads the first build). A process's first drawing costs about 0.6 s of
    CPU to start it, each later one 0.03-0.08 s: once it runs, start_drawing draws here, so an edit that
    changes a chart no longer forks a child that starts the runtime again."""
    import vl_convert

    vl_convert.vegalite_to_svg(_FIRST_SPEC, format_locale="ru-RU", allowed_base_urls=[])


def start_drawing(catalog: Catalog, labels: dict) -> Callable[[], tuple[dict[str, str], dict[str, str]]]:
    """Start drawing the charts; the returned function gives (alt texts, SVGs) by chart. They are drawn
    in a forked child while this process renders the other pages (pipeline.parallel.start_map): vl-convert
    holds the GIL, so a thread would not help, and drawing is a second or two in a new process. The
    child gets plain Python (the datasets are made here, with polars, which a forked child must not
    touch). A process where vl-convert runs already (its runtime's threads are not forked) draws here."""
    alts = {"memory": memory_alt(catalog, labels)}
    jobs = [_memory_job(catalog, labels, alts["memory"])]
    # A catalog where every price is "on request" has no price chart; the page leaves it out.
    if priced_servers(catalog).height:
        alts["price"] = price_alt(catalog, labels)
        jobs.append(("price", (labels, price_rows(catalog), alts["price"])))
    here = "vl_convert" in sys.modules
    drawing = (lambda: [_draw(job) for job in jobs]) if here else start_map(_draw, jobs, alone=True)
    return lambda: (alts, dict(zip([name for name, _ in jobs], drawing(), strict=True)))


def pages(
    catalog: Catalog, labels: dict, page: Callable[..., str], source_refs: Callable, drawing: Callable | None = None
) -> dict[str, str | bytes]:
    """charts.html and its SVG files (content-hashed names): `page` renders a template, `source_refs`
    lists a view's sources (both the Renderer's); `drawing`: what start_drawing returned, if the
    charts were started earlier."""
    alts, svgs = (drawing or start_drawing(catalog, labels))()
    views = {"memory": memory_table(catalog, labels), "gpus": gpu_table(catalog, labels)}
    if "price" in svgs:
        views["price"] = price_table(catalog, labels)
    files: dict[str, str | bytes] = {}
    src = {}
    for name, svg in svgs.items():
        path = _hashed(name, svg)
        files[path] = svg
        width, height = _SIZE.search(svg).groups()
        src[name] = {"path": path, "width": width, "height": height}
    tables = {key: {"view": view, "refs": source_refs(view)} for key, view in views.items()}
    notes = {"price": price_note(catalog, labels)} if "price" in svgs else {}
    files["charts.html"] = page("charts.html", "charts.html", src=src, alts=alts, tables=tables, notes=notes)
    return files
