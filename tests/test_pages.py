"""Entity and comparison pages: one per model, method, GPU and server, with the catalog's figures."""

import re
from pathlib import Path

import polars as pl

from pipeline.render import format as fmt
from pipeline.render.site import load_labels


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8").replace("\xa0", " ")


def cells(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", html, flags=re.S)]


def test_one_page_per_entity(built, catalog):
    site = built / "site"
    for kind, key in (("models", "model_id"), ("methods", "method_id"), ("gpus", "gpu_id"), ("servers", "server_id")):
        pages = sorted(p.stem for p in (site / kind).glob("*.html") if p.name != "index.html")
        assert pages == sorted(catalog[kind][key].to_list()), kind
        index = text(site / kind / "index.html")
        assert 'class="sortable"' in index
        for entity_id in pages:
            assert f'href="{entity_id}.html"' in index or f'href="../{kind}/{entity_id}.html"' in index, entity_id


def test_model_page_figures(built, catalog):
    html = text(built / "site" / "models" / "llama-3-1-8b.html")
    L = load_labels(constants=catalog.constants)["entities"]  # noqa: N806
    e = catalog["estimates"].filter(pl.col("model_id") == "llama-3-1-8b").sort("method_id")
    for row in e.iter_rows(named=True):
        low, high = (
            fmt.gb(row["memory_low_gb"]).replace("\xa0", " "),
            fmt.gb(row["memory_high_gb"]).replace("\xa0", " "),
        )
        # A row per method, five columns: the table stacks on a phone, each value with its column's name.
        estimate, spread = (f'<td class="num" data-label="{L[k]}">' for k in ("estimate", "range"))
        assert f"{estimate}{fmt.gb(row['memory_gb'])}</td>{spread}{low}…{high}</td>" in html
    full = e.filter(pl.col("method_id") == "full_amp").row(0, named=True)
    assert full["theoretical_min_gb"] == 8.03 * 16
    assert f'<td class="num" data-label="{L["minimum"]}">{fmt.gb(full["theoretical_min_gb"])}</td>' in html
    fit = catalog["gpu_fit"].filter(
        (pl.col("model_id") == "llama-3-1-8b") & (pl.col("gpu_id") == "h200-sxm") & (pl.col("method_id") == "full_amp")
    )
    cards, high = fit.select("cards", "cards_high").row(0)
    assert (cards, high) == (1, 2)
    assert 'href="../gpus/h200-sxm.html">H200</a>' in html
    assert 'href="../methods/lora.html">LoRA</a>' in html
    # Which server (table recommendations): full fine-tuning of 8.03 B in the typical setup needs three
    # H100 with ZeRO-3 (its 128k-word vocabulary makes large logits); the rented 4-card server is used
    # whole (issue 35), a whole month.
    assert "4 × H100 PCIe в сервере «4 × H100 80GB (ESC8000A)»" in html
    assert "1 360 800 ₽ — аренда на 1 мес." in html


def test_moe_and_extrapolated_model(built):
    html = text(built / "site" / "models" / "deepseek-v3.html")
    assert "MoE: активных на токен — 37 млрд" in html
    assert "* — размер больше наибольшего опорного (70 млрд)" in html
    assert "экстраполяция (выше опорных размеров)" in html


def test_gpu_page_summary(built, catalog):
    html = text(built / "site" / "gpus" / "h200-sxm.html")
    fit = catalog["gpu_fit"].filter((pl.col("gpu_id") == "h200-sxm") & (pl.col("method_id") == "lora"))
    on_one = fit.filter(pl.col("cards") <= 1).join(catalog["models"], on="model_id").sort("params_b")
    assert on_one.height == 35  # LoRA of 46.7 B (Mixtral 8x7B) needs 104 GB; 69-70 B need 160 GB, over 141
    row = cells(html.split('id="fits"')[1].split("</table>")[0])
    lora = row[row.index("LoRA") : row.index("LoRA") + 5]
    assert lora[1] == f"35 мод., до {on_one['short_name'][-1]}"
    assert on_one["short_name"][-1] == "Mixtral 8x7B"
    assert "Карт: 8" in html


def test_server_page_facts(built):
    html = text(built / "site" / "servers" / "esc8000a-8x-h100.html")
    facts = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", html))
    assert facts["Видеопамять, ГБ"] == "640"
    assert facts["Цена, ₽/мес"] == "2 373 300"
    assert facts["₽/мес за 1 ГБ видеопамяти"] == "3 708"  # 2 373 300 / 640 = 3 708.3
    assert facts["Связь карт"] == "только PCIe"
    assert 'href="../gpus/h100-pcie.html"' in facts["Карта"]
    unpriced = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", text(built / "site" / "servers" / "hgx-b300-8x.html")))
    assert unpriced["Цена, ₽/мес"] == "по запросу" and "₽/мес за 1 ГБ видеопамяти" not in unpriced


def test_comparison_pages(built, catalog):
    site = built / "site"
    matrix = text(site / "compare" / "server-fit.html")
    assert matrix.count("<tr>") == catalog["servers"].height + 2  # the header, the servers, the plan (issue 35)
    assert "70 млрд, полное (1 200, до 1 800)" in matrix
    for method_id in catalog["methods"]["method_id"]:
        page = text(site / "compare" / f"gpu-cards-{method_id}.html")
        assert page.count("<tr>") == catalog["models"].height + 1
    assert "9 / 13" in text(site / "compare" / "gpu-cards-full_amp.html")


def test_a_model_below_the_smallest_anchor_warns_that_the_table_falls_short(built, catalog):
    breakdown = catalog["memory_breakdown"].filter(pl.col("model_id") == "qwen2-5-0-5b").sort("table_rule_gb")
    r = breakdown.row(breakdown.height - 1, named=True)
    # (per card on the plan's two cards, ZeRO-3: still above the table's figure)
    assert r["method_id"] == "full_amp" and r["total_gb"] > r["table_rule_gb"]
    method = catalog["methods"].filter(pl.col("method_id") == "full_amp")["name_ru"][0]
    small = text(built / "site" / "models" / "qwen2-5-0-5b.html")
    assert (
        "Модель меньше наименьшего опорного размера (7 млрд): таблица уменьшает память пропорционально размеру "
        "и для малых моделей сильно её занижает. Из первых принципов способ "
        f"«{method}» занимает {fmt.gb(r['total_gb'])} ГБ на карту, по таблице — {fmt.gb(r['table_rule_gb'])} ГБ"
    ) in small.replace("&quot;", '"')
    assert "Модель меньше наименьшего опорного" not in text(built / "site" / "models" / "llama-3-1-8b.html")
    # 70,6 B is within anchor_size_tolerance of the 70 B anchor: no extrapolation mark or note
    seventy = text(built / "site" / "models" / "llama-3-1-70b.html")
    assert "* — размер больше наибольшего опорного" not in seventy
    assert "* — размер больше наибольшего опорного" in text(built / "site" / "models" / "qwen2-5-72b.html")


def test_a_page_made_ahead_is_the_page_the_render_writes(catalog):
    """Renderer.preview (`serve` shows the open pages with it): each kind of page it makes equals the
    render's, and a render after it writes every byte it writes without it (the sitemap, the memo)."""
    from pipeline.render.page_memo import PageMemo
    from pipeline.render.site import Renderer

    plain_memo = PageMemo({"sources": "x"})
    plain = Renderer(catalog, memo=plain_memo).render()
    renderer = Renderer(catalog, memo=PageMemo({"sources": "x"}))
    paths = [
        "models/llama-3-1-8b.html",
        "methods/lora.html",
        "gpus/index.html",
        "servers/esc8000a-8x-h100.html",
        "gpu-count.html",
        "index.html",
        "calculator.html",
        "charts.html",
    ]
    ahead = {path: renderer.preview(path) for path in paths}
    assert renderer.pages == [] and renderer.memo.now == {} and renderer.indexer is None
    for other in (
        "data.html",
        "models/no-such-model.html",
        "models/",
        "quality.html",
        "compare/index.html",
    ):
        assert renderer.preview(other) is None, other
    rendered = renderer.render()
    assert {path: rendered.site[path] for path in paths} == ahead
    files = renderer.preview_files()  # what the pages shown load: the charts drawn for charts.html too
    charts_drawn = sorted(name for name in rendered.site if name.startswith("charts/"))
    assert len(charts_drawn) == 2 and all(files[name] == rendered.site[name].encode() for name in charts_drawn)
    assert rendered.site == plain.site and rendered.markdown == plain.markdown
    assert rendered.warnings == plain.warnings and renderer.memo.now == plain_memo.now
