"""The SVG writer of the charts: d3's ticks and nice domains, scales, coordinates, text."""

import xml.etree.ElementTree as ET

import pytest

from pipeline.render import svg


@pytest.mark.parametrize(
    ("lo", "hi", "count", "expected"),
    [
        (0, 1128, 6, (0, 1200)),  # the real catalog's largest server: 8 x 141 GB
        (0, 2_900_000, 9, (0, 3_000_000)),
        (0, 0.73, 5, (0, 0.8)),
        (0, 97, 10, (0, 100)),
        (3, 3, 5, (3, 4)),  # an empty span is widened
    ],
)
def test_nice_widens_to_whole_steps_as_d3(lo, hi, count, expected):
    assert svg.nice(lo, hi, count) == pytest.approx(expected)


def test_ticks_are_d3s():
    assert svg.linear_ticks(0, 1200, 6) == [0, 200, 400, 600, 800, 1000, 1200]
    assert svg.linear_ticks(0, 3_000_000, 9) == [i * 500_000 for i in range(7)]
    assert svg.linear_ticks(0, 1, 10) == [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert svg.tick_step(0, 10, 3) == 5 and svg.tick_step(0, 10, 7) == 2 and svg.tick_step(0, 10, 10) == 1
    assert svg.log_ticks(0.4, 700) == [0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500]


def test_scales_map_the_domain_onto_the_range():
    linear = svg.Scale((0, 1200), 50, 610)
    assert (linear(0), linear(600), linear(1200)) == (50, 330, 610)
    log = svg.Scale((1, 1000), 400, 100, log=True)  # a y axis: larger values higher up
    assert (log(1), log(10), log(1000)) == pytest.approx((400, 300, 100))
    assert svg.Scale((70, 70), 0, 560, log=True)(70) == 280  # one model size: the middle


def test_coordinates_are_short_and_stable():
    assert [svg.num(v) for v in (2.0, 1.5, 1.005001, -0.001, 12.349)] == ["2", "1.5", "1.01", "0", "12.35"]


def test_text_width_grows_with_the_text_and_its_weight():
    assert svg.text_width("", 10) == 0
    assert svg.text_width("1 000", 10) < svg.text_width("10 000", 10) < svg.text_width("10 000", 10, bold=True)
    assert svg.text_width("ш", 10) > svg.text_width("г", 10) > svg.text_width("i", 10)
    assert svg.text_width("Ш" * 10, 20) == pytest.approx(2 * svg.text_width("Ш" * 10, 10))


def test_a_drawing_is_one_escaped_svg_document():
    d = svg.Drawing()
    d.text((1, 2), "A < B & C", svg.Font(10, "end", bold=True))
    d.line((0, 0), (10.5, 0), "#888", dash="2,3")
    d.path([(0, 0), (1, 1), (2, 0.5)], "#4c78a8", 2)
    d.circle((3, 4), 4.72, "#4c78a8", 0.7)
    text = d.svg(100.2, 50, 'Заголовок "1"', "Описание <и> всё", "Arial")
    root = ET.fromstring(text)
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("101", "50", "0 0 101 50")
    assert [el.tag.split("}")[1] for el in root] == ["title", "desc", "rect", "text", "line", "path", "circle"]
    assert root[0].text == 'Заголовок "1"' and root[1].text == "Описание <и> всё"
    assert root[3].text == "A < B & C" and root[3].get("font-weight") == "bold"
    assert root[4].get("stroke-dasharray") == "2,3" and root[5].get("d") == "M0,0L1,1L2,0.5"
