"""Charts: memory against model size and server price against GPU memory, as static SVG.

Each chart is drawn at build time by `pipeline.render.svg`, in milliseconds and in the build's own
process (no JavaScript at view time, nothing fetched when viewed). Every plotted number comes from the
catalog through the rules in `estimate`; words come from the [charts] section of
site_templates/labels.toml. The page shows each chart with a text alternative and the data table
beside it.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from pipeline.combine import Catalog
from pipeline.render import format as fmt
from pipeline.render import russian, svg
from pipeline.render.view import TableView

FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif'
WIDTH, HEIGHT = 560, 420
GPU_LABEL_GAP_PX = 12  # GPU labels closer than this on the log axis are pushed apart


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
PAD = 5  # around the drawing
TITLE = svg.Font(13, bold=True)
AXIS_TITLE = svg.Font(11, "middle", bold=True)
TICK_X, TICK_Y = svg.Font(10, "middle"), svg.Font(10, "end")
GPU_NAME = svg.Font(11, fill="#444")
LEGEND_TITLE, LEGEND = svg.Font(11, bold=True), svg.Font(10)
SERVER_RIGHT, SERVER_LEFT = svg.Font(11), svg.Font(11, "end")  # a server's name right or left of its point
PLOT_TOP = PAD + TITLE.size + 12
GRID, DOMAIN, GUIDE = "#ddd", "#888", "#888"
# Tableau 10, the categorical scheme of Vega-Lite and Tableau: the methods' colours in their order.
TABLEAU10 = [
    "#4c78a8",
    "#f58518",
    "#e45756",
    "#72b7b2",
    "#54a24b",
    "#eeca3b",
    "#b279a2",
    "#ff9da6",
    "#9d755d",
    "#bab0ac",
]
DASHES = ["", "6,4"]  # the memory curves: solid by the anchor table, dashed extrapolated
GPU_COLUMN = 24  # the leaders' column between the plot and the GPU names
PRICE_HEIGHT = 360
PRICE_X_TICKS, PRICE_Y_TICKS = 6, 9
POINT = {"r": math.sqrt(70 / math.pi), "fill": "#4c78a8", "opacity": 0.7}  # a 70 px² dot
LABEL_DX = 8  # a server's name beside its point
MIDDLE = 0.35  # of a font's size: from a text's baseline to its middle


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


def memory_svg(catalog: Catalog, labels: dict, alt: str) -> str:
    """The memory chart as SVG: a line per method over model size (log-log), dashed beyond the anchor
    table; a dotted line at each GPU memory size, named in a column to the right; the legends below."""
    return _memory_drawing(_memory_data(catalog, labels["charts"]), labels, alt)


def _memory_drawing(data: _MemoryData, labels: dict, alt: str) -> str:
    L = labels["charts"]
    d = svg.Drawing()
    x_ticks, y_ticks = svg.log_ticks(*data.x_domain), svg.log_ticks(*data.y_domain)
    left = _left_margin(y_ticks)
    x = svg.Scale(data.x_domain, left, left + WIDTH, log=True)
    y = svg.Scale(data.y_domain, PLOT_TOP + HEIGHT, PLOT_TOP, log=True)
    d.text((PAD, PAD + TITLE.size * 0.8), L["memory_title"], TITLE)
    axes_right = _axes(d, x, y, (x_ticks, y_ticks), (L["memory_x"], L["memory_y"]))
    right, names_at = x.end, x.end + GPU_COLUMN + 4
    for gpu in data.gpu_rows:
        level, at = y(gpu["memory_gb"]), y(gpu["label_gb"])
        d.line((x.start, level), (right, level), GUIDE, dash="2,3")
        d.line((right, level), (right + GPU_COLUMN, at), GUIDE)
        d.text((names_at, at + GPU_NAME.size * MIDDLE), gpu["label"], GPU_NAME)
    colors = {method: TABLEAU10[i % len(TABLEAU10)] for i, method in enumerate(data.methods)}
    dashes = dict(zip(data.bases, DASHES, strict=False))
    for (method, basis), points in _curves(data.rows).items():
        d.path([(x(p), y(m)) for p, m in points], colors[method], 2, dashes[basis])
    legend_top = y.start + 52
    methods = [(m, colors[m], "") for m in data.methods]
    methods_right, bottom = _legend(d, (x.start, legend_top), L["memory_method"], methods, columns=2)
    bases = [(b, GUIDE, dashes[b]) for b in data.bases]
    bases_right, bases_bottom = _legend(d, (methods_right + 24, legend_top), L["memory_basis"], bases)
    names_right = names_at + max((GPU_NAME.width(g["label"]) for g in data.gpu_rows), default=0)
    width = max(axes_right, names_right, methods_right, bases_right) + PAD
    return d.svg(width, max(bottom, bases_bottom) + PAD, L["memory_title"], alt, FONT)


def _curves(rows: list[dict]) -> dict[tuple[str, str], list[svg.Point]]:
    """The memory chart's lines: (method, basis) -> its points (size, memory), by size."""
    lines: dict[tuple[str, str], list[svg.Point]] = {}
    for r in rows:
        lines.setdefault((r["method"], r["basis"]), []).append((r["params_b"], r["memory_gb"]))
    return {key: sorted(points) for key, points in lines.items()}


def _tick_label(value: float) -> str:
    return fmt.number(value, 6)


def _left_margin(y_ticks: list[float]) -> float:
    """From the drawing's left edge to the plot: the y axis's title, its tick labels and ticks."""
    widest = max((TICK_Y.width(_tick_label(t)) for t in y_ticks), default=0)
    return PAD + AXIS_TITLE.size + 8 + widest + 7


def _axes(d: svg.Drawing, x: svg.Scale, y: svg.Scale, ticks: tuple[list, list], titles: tuple[str, str]) -> float:
    """The grid, the axes' lines, ticks, tick labels and titles of the plot that `x` and `y` span;
    returns the right edge of what it drew (the last x tick's label may reach past the plot)."""
    (x_ticks, y_ticks), (x_title, y_title) = ticks, titles
    top, bottom, left, right = y.end, y.start, x.start, x.end
    for t in x_ticks:
        d.line((x(t), top), (x(t), bottom), GRID)
    for t in y_ticks:
        d.line((left, y(t)), (right, y(t)), GRID)
    d.line((left, top), (left, bottom), DOMAIN)
    d.line((left, bottom), (right, bottom), DOMAIN)
    for t in x_ticks:
        d.line((x(t), bottom), (x(t), bottom + 5), DOMAIN)
        d.text((x(t), bottom + 15), _tick_label(t), TICK_X)
    for t in y_ticks:
        d.line((left - 5, y(t)), (left, y(t)), DOMAIN)
        d.text((left - 7, y(t) + TICK_Y.size * MIDDLE), _tick_label(t), TICK_Y)
    d.text(((left + right) / 2, bottom + 34), x_title, AXIS_TITLE)
    d.text((PAD + AXIS_TITLE.size * 0.8, (top + bottom) / 2), y_title, AXIS_TITLE, rotate=-90)
    return max([right] + [x(t) + TICK_X.width(_tick_label(t)) / 2 for t in x_ticks])


def _legend(
    d: svg.Drawing, at: svg.Point, title: str, entries: list[tuple[str, str, str]], columns: int = 1
) -> tuple[float, float]:
    """A legend of line symbols, its entries (label, colour, dash) row by row in `columns` columns,
    its title's top-left corner at `at`; returns its right and bottom edges."""
    x0, y0 = at
    d.text((x0, y0 + LEGEND_TITLE.size * 0.8), title, LEGEND_TITLE)
    symbol, gap, row, first = 20, 16, 14, y0 + LEGEND_TITLE.size + 14
    widths = [
        symbol + 5 + max(LEGEND.width(label) for label, _, _ in entries[c::columns])
        for c in range(min(columns, len(entries)))
    ]
    for i, (label, color, dash) in enumerate(entries):
        r, c = divmod(i, columns)
        x, baseline = x0 + sum(widths[:c]) + gap * c, first + r * row
        d.line((x, baseline - 3.5), (x + symbol, baseline - 3.5), color, 2, dash)
        d.text((x + symbol + 5, baseline), label, LEGEND)
    right = x0 + max(sum(widths) + gap * (len(widths) - 1), LEGEND_TITLE.width(title))
    return right, first + (math.ceil(len(entries) / columns) - 1) * row + 4


# The price chart names at most this many servers beside their points: more names overlap into an
# unreadable block (and drawing 400 names took Vega 1.8 s). The servers with the lowest price per GB
# of GPU memory are named first, one per point, each where its name overlaps no name placed before
# it (the chart says so when it names fewer than all); every server is a point, and a row of the
# table under the chart.
PRICE_NAMED_MAX = 20


def price_named(catalog: Catalog) -> set[str]:
    """The servers the price chart names (price_rows)."""
    return {r["server_id"] for r in price_rows(catalog) if r["side"] != "none"}


def price_rows(catalog: Catalog) -> list[dict]:
    """What the price chart draws: each priced server's id, name, memory, price and the side of its name
    ("none" for a server it does not name). Servers are named cheapest per GB first, one per point
    (servers of the same memory and price share one: the first by id is named), up to PRICE_NAMED_MAX:
    a name goes on the side away from the nearer edge of the plot, else on the other, and not at all
    where both would overlap a name placed before it or run past the plot's left edge."""
    servers = priced_servers(catalog)
    if not servers.height:
        return []
    x, y = _price_scales(servers["server_memory_gb"].max(), servers["price_rub_month"].max(), (0, 0))
    middle = (servers["server_memory_gb"].min() + servers["server_memory_gb"].max()) / 2
    points = servers.sort("rub_per_gb", "server_id").unique(
        ["server_memory_gb", "price_rub_month"], keep="first", maintain_order=True
    )
    placed: list[tuple[float, float, float, float]] = []
    sides: dict[str, str] = {}
    for r in points.iter_rows(named=True):
        if len(sides) == PRICE_NAMED_MAX:
            break
        at, level = x(r["server_memory_gb"]), y(r["price_rub_month"])
        width, half = SERVER_RIGHT.width(r["display_name"]), SERVER_RIGHT.size * 0.6
        boxes = {
            "right": (at + LABEL_DX, level - half, at + LABEL_DX + width, level + half),
            "left": (at - LABEL_DX - width, level - half, at - LABEL_DX, level + half),
        }
        for side in ("left", "right") if r["server_memory_gb"] > middle else ("right", "left"):
            box = boxes[side]
            if box[0] >= 0 and not any(_overlap(box, other) for other in placed):
                placed.append(box)
                sides[r["server_id"]] = side
                break
    return [
        {
            "server_id": r["server_id"],
            "server": r["display_name"],
            "server_memory_gb": r["server_memory_gb"],
            "price_rub_month": r["price_rub_month"],
            "side": sides.get(r["server_id"], "none"),
        }
        for r in servers.iter_rows(named=True)
    ]


def _price_scales(memory_max: float, price_max: float, corner: svg.Point) -> tuple[svg.Scale, svg.Scale]:
    """The price chart's scales, both from zero to a whole tick step past the largest value, for a
    plot whose top-left corner is at `corner`."""
    left, top = corner
    x = svg.Scale(svg.nice(0.0, memory_max, PRICE_X_TICKS), left, left + WIDTH)
    return x, svg.Scale(svg.nice(0.0, price_max, PRICE_Y_TICKS), top + PRICE_HEIGHT, top)


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Whether two boxes (left, top, right, bottom) overlap."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def price_note(catalog: Catalog, labels: dict, rows: list[dict] | None = None) -> str | None:
    """The sentence under the price chart when it names only some of its servers (`rows`: price_rows,
    made here when not given)."""
    rows = price_rows(catalog) if rows is None else rows
    servers, named = len(rows), sum(r["side"] != "none" for r in rows)
    if named == servers:
        return None
    return labels["charts"]["price_named"].format(named=fmt.integer(named), servers=russian.Shown(fmt.integer(servers)))


def price_svg(catalog: Catalog, labels: dict, alt: str) -> str:
    """The price chart as SVG: a point per priced server by its GPU memory and monthly price (both
    axes from zero), the named ones with their names beside (price_rows)."""
    return _price_drawing(price_rows(catalog), labels, alt)


def _price_drawing(rows: list[dict], labels: dict, alt: str) -> str:
    L = labels["charts"]
    d = svg.Drawing()
    maxima = max(r["server_memory_gb"] for r in rows), max(r["price_rub_month"] for r in rows)
    y_ticks = svg.linear_ticks(*_price_scales(*maxima, (0, 0))[1].domain, PRICE_Y_TICKS)
    x, y = _price_scales(*maxima, (_left_margin(y_ticks), PLOT_TOP))
    d.text((PAD, PAD + TITLE.size * 0.8), L["price_title"], TITLE)
    right = _axes(d, x, y, (svg.linear_ticks(*x.domain, PRICE_X_TICKS), y_ticks), (L["price_x"], L["price_y"]))
    for r in rows:
        d.circle((x(r["server_memory_gb"]), y(r["price_rub_month"])), POINT["r"], POINT["fill"], POINT["opacity"])
    for r in rows:
        if r["side"] == "none":
            continue
        at, baseline = x(r["server_memory_gb"]), y(r["price_rub_month"]) + SERVER_RIGHT.size * MIDDLE
        if r["side"] == "left":
            d.text((at - LABEL_DX, baseline), r["server"], SERVER_LEFT)
        else:
            d.text((at + LABEL_DX, baseline), r["server"], SERVER_RIGHT)
            right = max(right, at + LABEL_DX + SERVER_RIGHT.width(r["server"]))
    return d.svg(right + PAD, y.start + 38 + PAD, L["price_title"], alt, FONT)


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


def _hashed(name: str, svg_text: str) -> str:
    return f"charts/{name}.{hashlib.sha256(svg_text.encode()).hexdigest()[:10]}.svg"


def drawn(catalog: Catalog, labels: dict) -> tuple[dict[str, str], dict[str, str]]:
    """(alt texts, SVGs) by chart. A catalog where every price is "on request" has no price chart."""
    return _drawn(catalog, labels, price_rows(catalog))


def _drawn(catalog: Catalog, labels: dict, rows: list[dict]) -> tuple[dict[str, str], dict[str, str]]:
    """drawn, with the price chart's rows (price_rows) made once by the caller."""
    alts = {"memory": memory_alt(catalog, labels)}
    svgs = {"memory": memory_svg(catalog, labels, alts["memory"])}
    if rows:
        alts["price"] = price_alt(catalog, labels)
        svgs["price"] = _price_drawing(rows, labels, alts["price"])
    return alts, svgs


def pages(catalog: Catalog, labels: dict, page: Callable[..., str], source_refs: Callable) -> dict[str, str | bytes]:
    """charts.html and its SVG files (content-hashed names): `page` renders a template, `source_refs`
    lists a view's sources (both the Renderer's)."""
    rows = price_rows(catalog)
    alts, svgs = _drawn(catalog, labels, rows)
    views = {"memory": memory_table(catalog, labels), "gpus": gpu_table(catalog, labels)}
    if "price" in svgs:
        views["price"] = price_table(catalog, labels)
    files: dict[str, str | bytes] = {}
    src = {}
    for name, text in svgs.items():
        path = _hashed(name, text)
        files[path] = text
        width, height = _SIZE.search(text).groups()
        src[name] = {"path": path, "width": width, "height": height}
    tables = {key: {"view": view, "refs": source_refs(view)} for key, view in views.items()}
    notes = {"price": price_note(catalog, labels, rows)} if "price" in svgs else {}
    files["charts.html"] = page("charts.html", "charts.html", src=src, alts=alts, tables=tables, notes=notes)
    return files
