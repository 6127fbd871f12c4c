"""The estimation rules of docs/rules.md as properties, checked on random catalogs (Hypothesis).

Every catalog has 2-6 anchor sizes shared by 2-4 methods (memory non-decreasing with size),
1-8 models below, between, on and above the anchors, 1-5 GPUs and 1-5 servers. Many anchor
memory figures are exact multiples of a card or a server (or those plus a few units of float
noise), so that the boundary cases (exactly k cards, S == high) come up as often as the rest.
"""

import math
from itertools import pairwise

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import RULE_CONSTANTS as CONSTANTS
from pipeline.estimate import table_rule as estimate

# The code shrinks every ratio by one part in 1e9 before ceil (estimate.RELATIVE_TOLERANCE). So:
# within 1e-9 (relative, at least 1e-9 absolute) of a boundary either answer is right, but a
# figure that is a short decimal (945, 94.5, 768) up to float noise must count as that decimal.
TOL = 1e-9
EPS = 1e-9  # the step of the continuity checks: s and s * (1 + EPS)

SETTINGS = settings(max_examples=100, deadline=None)


def near(a: float, b: float) -> bool:
    """a and b are within the rounding band, where the code may call them either way."""
    return abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


def covers(have: float, need: float) -> bool:
    """have >= need for sure: in floats, or need is have (a short decimal) plus float noise."""
    return have >= need or (have == round(have, 6) and need - have <= 1e-10)


def is_ceil(n: int, need: float, unit: float) -> bool:
    """n is the smallest whole number with n x unit >= need (k cards plus float noise are k cards, not k + 1)."""
    return n >= 1 and (n * unit >= need or near(n * unit, need)) and not covers((n - 1) * unit, need)


def float_noise(x: float, ulps: int) -> float:
    """x moved by a few units in the last place, as arithmetic leaves it (630.0000000000001)."""
    for _ in range(abs(ulps)):
        x = math.nextafter(x, math.inf if ulps > 0 else 0)
    return x


def finite(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


@st.composite
def catalogs(draw):
    sizes = sorted(
        draw(
            st.lists(
                st.one_of(st.sampled_from([7.0, 14.0, 30.0, 70.0]), finite(0.05, 2000)),
                min_size=2,
                max_size=6,
                unique=True,
            )
        )
    )
    gpu_memory = draw(
        st.lists(
            st.one_of(st.integers(1, 300).map(float), st.sampled_from([24.0, 80.0, 94.5, 96.0, 141.0]), finite(1, 300)),
            min_size=1,
            max_size=5,
        )
    )
    servers = []
    for i in range(draw(st.integers(1, 5))):
        g = draw(st.integers(0, len(gpu_memory) - 1))
        count = draw(st.integers(1, 16))
        price = draw(st.one_of(st.none(), st.integers(1, 10_000_000)))
        servers.append((f"s{i}", f"g{g}", count, price, count * gpu_memory[g]))
    server_memory = [s[4] for s in servers]
    # Memory figures: arbitrary; exactly k cards, k servers or k servers at +50 %; or those plus noise.
    exact = st.one_of(
        st.builds(lambda k, g: k * g, st.integers(1, 20), st.sampled_from(gpu_memory)),
        st.builds(lambda k, s: k * s, st.integers(1, 3), st.sampled_from(server_memory)),
        st.builds(lambda k, s: k * s / 1.5, st.integers(1, 3), st.sampled_from(server_memory + gpu_memory)),
    )
    memory = st.one_of(finite(0.01, 5000), exact, st.builds(float_noise, exact, st.integers(-4, 4)))
    methods = [f"method{j}" for j in range(draw(st.integers(2, 4)))]
    anchor_memory = {m: sorted(draw(st.lists(memory, min_size=len(sizes), max_size=len(sizes)))) for m in methods}
    model_sizes = draw(
        st.lists(st.one_of(st.sampled_from(sizes), finite(sizes[0] * 0.01, sizes[-1] * 4)), min_size=1, max_size=8)
    )
    return {
        "sizes": sizes,
        "anchor_memory": anchor_memory,
        "model_sizes": model_sizes,
        "methods": pl.DataFrame(
            {
                "method_id": methods,
                "theoretical_min_applies": draw(st.lists(st.booleans(), min_size=len(methods), max_size=len(methods))),
            }
        ),
        "anchors": pl.DataFrame(
            {
                "method_id": [m for m in methods for _ in sizes],
                "params_b": sizes * len(methods),
                "memory_gb": [x for m in methods for x in anchor_memory[m]],
            }
        ),
        "models": models_frame(model_sizes),
        "gpus": pl.DataFrame({"gpu_id": [f"g{i}" for i in range(len(gpu_memory))], "memory_gb": gpu_memory}),
        "servers": pl.DataFrame(
            [s[:4] for s in servers],
            schema={"server_id": pl.String, "gpu_id": pl.String, "gpu_count": pl.Int64, "price_rub_month": pl.Int64},
            orient="row",
        ),
    }


def models_frame(sizes: list[float]) -> pl.DataFrame:
    return pl.DataFrame(
        {"model_id": [f"m{i:03d}" for i in range(len(sizes))], "params_b": sizes},
        schema={"model_id": pl.String, "params_b": pl.Float64},
    )


def estimates_for(cat, sizes: list[float]) -> dict[tuple[str, float], dict]:
    """Estimates of models of the given sizes, keyed by (method_id, params_b)."""
    e = estimate.estimate_memory(models_frame(sizes), cat["methods"], cat["anchors"], CONSTANTS)
    return {(r["method_id"], r["params_b"]): r for r in e.iter_rows(named=True)}


def slope_bound(sizes: list[float], memory: list[float]) -> float:
    """The steepest slope of the piecewise-linear estimate (GB per billion parameters)."""
    inner = [(m1 - m0) / (b1 - b0) for (b0, m0), (b1, m1) in pairwise(zip(sizes, memory, strict=True))]
    return max([memory[0] / sizes[0], memory[-1] / sizes[-1], *inner])


@SETTINGS
@given(catalogs())
def test_estimate_is_the_anchor_at_anchor_sizes(cat):
    got = estimates_for(cat, cat["sizes"] + cat["model_sizes"])
    for method, memory in cat["anchor_memory"].items():
        for size, anchor_gb in zip(cat["sizes"], memory, strict=True):
            row = got[(method, size)]
            assert (row["memory_gb"], row["basis"], row["extrapolated"]) == (anchor_gb, "anchor", False)


@SETTINGS
@given(catalogs())
def test_estimate_does_not_decrease_with_size(cat):
    thirds = [a + (b - a) * k / 3 for a, b in pairwise(cat["sizes"]) for k in (1, 2)]
    sizes = sorted(set(cat["sizes"] + cat["model_sizes"] + thirds))
    got = estimates_for(cat, sizes)
    for method in cat["anchor_memory"]:
        memory = [got[(method, s)]["memory_gb"] for s in sizes]
        assert all(a <= b for a, b in pairwise(memory)), list(zip(sizes, memory, strict=True))


@SETTINGS
@given(catalogs())
def test_estimate_is_continuous(cat):
    points = [(s, s * (1 + EPS)) for s in cat["model_sizes"]]
    points += [(a * (1 - EPS), a) for a in cat["sizes"]] + [(a, a * (1 + EPS)) for a in cat["sizes"]]
    got = estimates_for(cat, [s for pair in points for s in pair])
    for method, memory in cat["anchor_memory"].items():
        slope = slope_bound(cat["sizes"], memory)
        for s0, s1 in points:
            m0, m1 = got[(method, s0)]["memory_gb"], got[(method, s1)]["memory_gb"]
            noise = 1e-12 * max(m0, m1, memory[-1])
            assert abs(m1 - m0) <= slope * (s1 - s0) * (1 + 1e-6) + noise, (method, s0, s1, m0, m1)


@SETTINGS
@given(catalogs())
def test_estimate_is_linear_between_anchors_and_proportional_outside(cat):
    sizes = cat["sizes"]
    mids = [(a + b) / 2 for a, b in pairwise(sizes)]
    below, above = sizes[0] / 3, sizes[-1] * 3
    got = estimates_for(cat, [below, above, *mids])
    for method, memory in cat["anchor_memory"].items():
        for mid, (m0, m1) in zip(mids, pairwise(memory), strict=True):
            if sizes[0] < mid < sizes[-1] and mid not in sizes:  # a float midpoint may round onto an anchor
                assert got[(method, mid)]["basis"] == "interpolated"
                assert got[(method, mid)]["memory_gb"] == pytest.approx((m0 + m1) / 2, rel=1e-9)
        assert (got[(method, below)]["basis"], got[(method, below)]["extrapolated"]) == ("below_range", False)
        assert got[(method, below)]["memory_gb"] == pytest.approx(memory[0] / 3, rel=1e-12)
        assert (got[(method, above)]["basis"], got[(method, above)]["extrapolated"]) == ("extrapolated", True)
        assert got[(method, above)]["memory_gb"] == pytest.approx(memory[-1] * 3, rel=1e-12)


@SETTINGS
@given(catalogs())
def test_range_and_theoretical_minimum(cat):
    e = estimate.estimate_memory(cat["models"], cat["methods"], cat["anchors"], CONSTANTS)
    applies = dict(cat["methods"].iter_rows())
    for r in e.iter_rows(named=True):
        m = r["memory_gb"]
        assert 0 < r["memory_low_gb"] < m < r["memory_high_gb"]
        assert (r["memory_low_gb"], r["memory_high_gb"]) == (0.7 * m, 1.5 * m)
        assert r["theoretical_min_gb"] == (16 * r["params_b"] if applies[r["method_id"]] else None)


@SETTINGS
@given(catalogs())
def test_gpu_cards_and_nvlink(cat):
    e = estimate.estimate_memory(cat["models"], cat["methods"], cat["anchors"], CONSTANTS)
    for r in estimate.gpu_fit(e, cat["gpus"]).iter_rows(named=True):
        cards, cards_high, gpu = r["cards"], r["cards_high"], r["gpu_memory_gb"]
        assert 1 <= cards <= cards_high, r
        assert is_ceil(cards, r["memory_gb"], gpu), r
        assert is_ceil(cards_high, r["memory_high_gb"], gpu), r
        assert r["nvlink_need"] == ("no" if cards_high == 1 else "recommended" if cards == 1 else "required"), r


@SETTINGS
@given(catalogs())
def test_server_fit(cat):
    e = estimate.estimate_memory(cat["models"], cat["methods"], cat["anchors"], CONSTANTS)
    cards = {
        (r["model_id"], r["method_id"], r["gpu_id"]): r for r in estimate.gpu_fit(e, cat["gpus"]).iter_rows(named=True)
    }
    server_gpu = {r["server_id"]: (r["gpu_id"], r["gpu_count"]) for r in cat["servers"].iter_rows(named=True)}
    for r in estimate.server_fit(e, cat["servers"], cat["gpus"]).iter_rows(named=True):
        s, m, hi, fit = r["server_memory_gb"], r["memory_gb"], r["memory_high_gb"], r["fit"]
        gpu_id, count = server_gpu[r["server_id"]]
        # Rule 6, at the boundaries exactly (rounding never turns >= into <) and elsewhere with the band.
        if covers(s, hi):
            assert fit == "yes", r
        elif not near(s, hi):
            assert fit != "yes", r
        if covers(s, m):
            assert fit != "no", r
        elif not near(s, m):
            assert fit == "no", r
        assert is_ceil(r["servers_needed"], m, s), r
        assert is_ceil(r["servers_needed_high"], hi, s), r
        # The fit, the number of servers and the cards of the server's GPU tell the same story
        # (away from the 1e-9 band; at the band itself see the exact examples at the end).
        if not near(s, m) and not near(s, hi):
            needed = (r["servers_needed"], r["servers_needed_high"])
            assert {"yes": needed == (1, 1), "estimate_only": needed[0] == 1 < needed[1], "no": needed[0] >= 2}[fit], r
            gpu_row = cards[(r["model_id"], r["method_id"], gpu_id)]
            assert (fit != "no") == (gpu_row["cards"] <= count), (r, gpu_row)
            assert (fit == "yes") == (gpu_row["cards_high"] <= count), (r, gpu_row)


@SETTINGS
@given(catalogs())
def test_every_combination_appears_once(cat):
    e = estimate.estimate_memory(cat["models"], cat["methods"], cat["anchors"], CONSTANTS)
    models, methods = cat["models"]["model_id"].to_list(), cat["methods"]["method_id"].to_list()
    gpus, servers = cat["gpus"]["gpu_id"].to_list(), cat["servers"]["server_id"].to_list()
    assert sorted(e.select("model_id", "method_id").rows()) == sorted((a, b) for a in models for b in methods)
    fit = estimate.gpu_fit(e, cat["gpus"])
    assert sorted(fit.select("model_id", "method_id", "gpu_id").rows()) == sorted(
        (a, b, g) for a in models for b in methods for g in gpus
    )
    fit = estimate.server_fit(e, cat["servers"], cat["gpus"])
    assert sorted(fit.select("model_id", "method_id", "server_id").rows()) == sorted(
        (a, b, s) for a in models for b in methods for s in servers
    )


# -- edge cases found by the properties above, kept as exact examples --


def test_tiny_memory_still_needs_one_card():
    e = pl.DataFrame({"model_id": ["m"], "method_id": ["x"], "memory_gb": [1e-10], "memory_high_gb": [1.5e-10]})
    fit = estimate.gpu_fit(e, pl.DataFrame({"gpu_id": ["g"], "memory_gb": [1.0]}))
    assert fit.select("cards", "cards_high").rows() == [(1, 1)]


def test_fit_and_servers_needed_agree_just_above_the_server():
    # 16 x 300 GB = 4800 GB and the job needs 1e-6 GB more: within the 1e-9 relative tolerance every table
    # says it fits (fit, servers_needed and gpu_fit's 16 cards agree).
    e = pl.DataFrame(
        {"model_id": ["m"], "method_id": ["x"], "memory_gb": [4800.000001], "memory_high_gb": [7200.0000015]}
    )
    gpus = pl.DataFrame({"gpu_id": ["g"], "memory_gb": [300.0]})
    servers = pl.DataFrame({"server_id": ["s"], "gpu_id": ["g"], "gpu_count": [16], "price_rub_month": [1]})
    assert estimate.server_fit(e, servers, gpus).select("fit", "servers_needed").rows() == [("estimate_only", 1)]
    assert estimate.gpu_fit(e, gpus).select("cards").rows() == [(16,)]
