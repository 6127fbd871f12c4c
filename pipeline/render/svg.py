"""A small SVG writer for the site's charts: scales, ticks as d3 makes them, text widths, elements.

Drawing two charts this way takes milliseconds in the build's own process; a charting runtime
(Vega-Lite through vl-convert, which the site used before) started a V8 engine for it, 0.6-0.9 s of
CPU in every build that changed a chart. The output is a plain, deterministic SVG: the same data
gives the same bytes, no ids, no scripts, nothing fetched when it is viewed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

# -- text widths: no font is measured at build time, so widths are estimated from typical sans-serif
# advance widths (Helvetica/Arial metrics, in em); used to place labels and size the drawing.
_EM_BY_CHAR = {
    **dict.fromkeys("0123456789", 0.556),
    **dict.fromkeys(" \u00a0,.:;/!|'", 0.278),
    **dict.fromkeys("()[]-r", 0.333),
    **dict.fromkeys("ijl", 0.222),
    **dict.fromkeys("ftI", 0.278),
    **dict.fromkeys("kvxyzscJ", 0.5),
    **dict.fromkeys("wCDHNUOQG\u0445", 0.722),  # and Cyrillic kha
    # and Cyrillic sha, shcha, zhe, yu, em, yeru, ef; capital sha, shcha, zhe, yu
    **dict.fromkeys("mM\u0448\u0449\u0436\u044e\u043c\u044b\u0444\u0428\u0429\u0416\u042e", 0.833),
    "W": 0.944,
    "%": 0.889,
    "—": 1.0,
    "–": 0.556,
    "×": 0.584,
    "+": 0.584,
    "₽": 0.611,
}
BOLD = 1.08  # bold text is about this much wider
# The fonts a reader's system may pick (system-ui, DejaVu Sans…) run up to a tenth wider than Arial:
# a drawing is sized for the wider, so that no label is cut off at its edge.
WIDE = 1.1


def _em(char: str) -> float:
    known = _EM_BY_CHAR.get(char)
    if known is not None:
        return known
    if char.isupper():
        return 0.667 if char.isascii() else 0.7
    return 0.556 if char.isascii() else 0.55


def text_width(text: str, size: float, bold: bool = False) -> float:
    """The estimated width in pixels of `text` at `size` px."""
    return sum(_em(c) for c in text) * size * WIDE * (BOLD if bold else 1.0)


# -- ticks and scales --
_E10, _E5, _E2 = math.sqrt(50), math.sqrt(10), math.sqrt(2)


def tick_step(lo: float, hi: float, count: int) -> float:
    """d3's tick step: a 1-2-5 multiple of a power of ten giving about `count` ticks over [lo, hi]."""
    step = (hi - lo) / max(count, 1)
    power = math.floor(math.log10(step))
    error = step / 10**power
    factor = 10 if error >= _E10 else 5 if error >= _E5 else 2 if error >= _E2 else 1
    return factor * 10.0**power


def nice(lo: float, hi: float, count: int) -> tuple[float, float]:
    """[lo, hi] widened to whole tick steps, as d3's linear scale `nice(count)` does."""
    if hi <= lo:
        hi = lo + 1.0
    previous = None
    for _ in range(10):
        step = tick_step(lo, hi, count)
        if step == previous:
            break
        lo, hi, previous = math.floor(lo / step) * step, math.ceil(hi / step) * step, step
    return lo, hi


def linear_ticks(lo: float, hi: float, count: int) -> list[float]:
    """d3's ticks for a linear scale over [lo, hi]."""
    step = tick_step(lo, hi, count)
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    return [round(i * step, 10) for i in range(first, last + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks inside [lo, hi] on a log scale."""
    out = []
    for exponent in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for mantissa in (1, 2, 5):
            value = round(mantissa * 10.0**exponent, 10)
            if lo <= value <= hi:
                out.append(value)
    return out


@dataclass(frozen=True)
class Scale:
    """A position scale from a data domain to pixels (`start` maps to domain[0]); `log` for a log scale."""

    domain: tuple[float, float]
    start: float
    end: float
    log: bool = False

    def __call__(self, value: float) -> float:
        lo, hi, v = self.domain[0], self.domain[1], value
        if self.log:
            lo, hi, v = math.log(lo), math.log(hi), math.log(value)
        if hi == lo:  # a domain of one value: its middle
            return (self.start + self.end) / 2
        return self.start + (v - lo) / (hi - lo) * (self.end - self.start)


# -- elements --
def num(value: float) -> str:
    """A coordinate, to two decimals, without trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


Point = tuple[float, float]


@dataclass(frozen=True)
class Font:
    """How a text is set: its size in px, anchor (start, middle, end), weight and colour."""

    size: float
    anchor: str = "start"
    bold: bool = False
    fill: str = "#000"

    def width(self, text: str) -> float:
        return text_width(text, self.size, self.bold)


@dataclass
class Drawing:
    """SVG elements in drawing order; `svg()` writes the document."""

    parts: list[str] = field(default_factory=list)

    def line(self, start: Point, end: Point, stroke: str, width: float = 1, dash: str = "") -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        (x1, y1), (x2, y2) = start, end
        self.parts.append(
            f'<line x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}" stroke="{stroke}"'
            f' stroke-width="{num(width)}"{extra}/>'
        )

    def path(self, points: list[Point], stroke: str, width: float = 1, dash: str = "") -> None:
        """An open line through `points`."""
        d = "M" + "L".join(f"{num(x)},{num(y)}" for x, y in points)
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(
            f'<path d="{d}" fill="none" stroke="{stroke}" stroke-width="{num(width)}" stroke-linejoin="round"{extra}/>'
        )

    def circle(self, at: Point, r: float, fill: str, opacity: float = 1.0) -> None:
        x, y = at
        self.parts.append(
            f'<circle cx="{num(x)}" cy="{num(y)}" r="{num(r)}" fill="{fill}" fill-opacity="{num(opacity)}"/>'
        )

    def text(self, at: Point, text: str, font: Font, rotate: int = 0) -> None:
        """Text whose baseline starts, centres or ends (font.anchor) at `at`, turned by `rotate` degrees."""
        x, y = at
        place = f'transform="translate({num(x)},{num(y)}) rotate({rotate})"' if rotate else f'x="{num(x)}" y="{num(y)}"'
        weight = ' font-weight="bold"' if font.bold else ""
        self.parts.append(
            f'<text {place} text-anchor="{font.anchor}" font-size="{num(font.size)}"{weight} fill="{font.fill}">'
            f"{escape(text)}</text>"
        )

    def svg(self, width: float, height: float, title: str, description: str, font: str) -> str:
        """The document: `width` x `height` px (rounded up), its own title and description, a white ground."""
        w, h = math.ceil(width), math.ceil(height)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}"'
            f' font-family="{escape(font)}"><title>{escape(title)}</title><desc>{escape(description)}</desc>'
            f'<rect width="{w}" height="{h}" fill="white"/>' + "".join(self.parts) + "</svg>"
        )
