"""The page model at scale (docs/architecture.md, "Pages"): pages grow with entities, not rows. Index
pages show every entity; a comparison longer than `table_page_rows` shows that many rows spread over
its order, its first and last among them, and a
model or server page that many rows of its slice (the smallest servers that take the model, the largest
models the server takes), says so and links the whole table's download; no continuation pages.
The real catalog rendered with `table_page_rows = 10`, so that its 45-model tables are cut."""

import re
import shutil

import numpy as np
import pytest

from conftest import SOURCES


def test_the_real_catalog_has_no_continuation_pages(built):
    site = built / "site"
    assert [p for p in site.rglob("*.html") if p.parent != site and p.parent.parent != site] == []
    assert "Показано строк" not in (site / "compare" / "gpu-cards-lora.html").read_text(encoding="utf-8")


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


def _entities(catalog, rows: int):
    import tomllib

    from pipeline import words
    from pipeline.render.site import TEMPLATES
    from pipeline.render.views.articles import Tables
    from pipeline.render.views.entities import EntityTables

    site = tomllib.loads((TEMPLATES / "site.toml").read_text(encoding="utf-8"))
    site["table_page_rows"] = rows
    labels = words.with_data_words(words.labels(TEMPLATES), words.data_words(catalog.constants))
    return EntityTables(Tables(catalog, labels), labels, site)


def test_a_long_comparison_shows_its_leading_rows_and_says_so(catalog):
    whole = _entities(catalog, 100).compare_gpu_cards("lora")
    cut = _entities(catalog, 10).compare_gpu_cards("lora")
    assert len(whole.rows) == catalog["models"].height == 45
    assert whole.notes == []
    # rows 0, 4, 9, 14, 19, 24, 29, 34, 39 and 44 of the same table, cell for cell: smallest to largest
    assert cut.rows == [whole.rows[i] for i in (0, 4, 9, 14, 19, 24, 29, 34, 39, 44)]
    assert (cut.headers, cut.references, cut.downloads, cut.sortable) == (
        whole.headers,
        whole.references,
        whole.downloads,
        True,
    )
    assert cut.notes == [
        "Показано строк: 10 из 45 — модели по размеру, от самой маленькой до самой большой, через равные "
        "промежутки, чтобы был виден весь диапазон; сортировка по столбцу — среди показанных. "
        "Вся таблица — в загрузке ниже (и в Parquet, XLSX и файле DuckDB на странице данных)."
    ]


def test_a_comparison_that_fits_is_whole(catalog):
    """Ten servers and ten rows a page: every server, the plan row under them, and no note."""
    view = _entities(catalog, 10).compare_server_fit()
    assert catalog["servers"].height == 10
    assert len(view.rows) == 11
    assert not any(note.startswith("Показано строк") for note in view.notes)


def test_the_leading_ids_and_the_note(catalog):
    entities = _entities(catalog, 10)
    ids = [f"s{i}" for i in range(12)]
    shown, note = entities.leading(ids, "servers")
    assert shown == ["s0", "s1", "s2", "s3", "s4", "s6", "s7", "s8", "s9", "s11"]  # i * 11 // 9
    assert note == [
        "Показано строк: 10 из 12 — серверы по суммарной видеопамяти, от наименьшего до наибольшего, через "
        "равные промежутки, чтобы был виден весь диапазон; сортировка по столбцу — среди показанных. Вся "
        "таблица — в загрузке ниже (и в Parquet, XLSX и файле DuckDB на странице данных)."
    ]
    assert entities.leading(ids[:10], "servers") == (ids[:10], [])


@pytest.mark.parametrize(
    ("total", "shown"), [(11, 10), (12, 10), (45, 10), (1_291, 10), (101, 100), (408, 100), (10_007, 100)]
)
def test_the_spread_rows_run_from_the_first_to_the_last(total, shown):
    from pipeline.render.views.entities import spread

    rows = spread(total, shown)
    assert len(rows) == shown and rows[0] == 0 and rows[-1] == total - 1
    steps = np.diff(rows)
    assert steps.min() >= 1 and steps.max() - steps.min() <= 1  # distinct, in order, even to one row


def pages_of_size(tmp_path_factory, rows: int):
    """The real catalog rendered with table_page_rows = `rows` (site_templates copied and edited)."""
    from pipeline.build import load_and_validate
    from pipeline.combine import combine
    from pipeline.render.site import TEMPLATES, Renderer

    root = tmp_path_factory.mktemp("leading-templates")
    templates = root / "site_templates"
    shutil.copytree(TEMPLATES, templates)
    config = templates / "site.toml"
    text = config.read_text(encoding="utf-8")
    assert "\ntable_page_rows = 100\n" in text
    config.write_text(text.replace("\ntable_page_rows = 100\n", f"\ntable_page_rows = {rows}\n"), encoding="utf-8")
    con, validation = load_and_validate(SOURCES)
    return Renderer(combine(con), validation, templates=templates, sources=SOURCES).render()


@pytest.fixture(scope="module")
def small_pages(tmp_path_factory):
    """The real catalog rendered with table_page_rows = 10."""
    return pages_of_size(tmp_path_factory, 10)


def row_heads(html: str) -> list[str]:
    """The first cell of each body row of the page's tables, tags stripped."""
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r'<th scope="row">(.*?)</th>', html)]


def test_pages_are_one_per_entity_whatever_the_page_size(small_pages, built):
    """The same pages as the real build (one per entity, index and comparison), none continued; an
    index lists every row, a comparison its first ten, a server page ten models up to the largest
    that fits it."""
    real = {str(p.relative_to(built / "site")) for p in (built / "site").rglob("*.html")}
    assert {p for p in small_pages.site if p.endswith(".html")} == real
    server = small_pages.site["servers/hgx-b200-8x.html"]
    whole = (built / "site" / "servers" / "hgx-b200-8x.html").read_text(encoding="utf-8")
    assert len(row_heads(whole)) == 45 and row_heads(server) == row_heads(whole)[-10:]  # all 45 fit a B200 x8
    assert "Показано моделей: 10 из 45 — по размеру, до самой большой" in server.replace("\xa0", " ")
    assert "(строки с server_id = hgx-b200-8x)" in server
    smallest = small_pages.site["servers/xfusion-2x-h100.html"]  # the two largest models fit no method on it
    whole = (built / "site" / "servers" / "xfusion-2x-h100.html").read_text(encoding="utf-8")
    assert row_heads(smallest) == row_heads(whole)[33:43]
    models = small_pages.site["models/index.html"]
    assert len(row_heads(models)) == 45
    compare = small_pages.site["compare/gpu-cards-lora.html"]
    assert len(row_heads(compare)) == 10
    assert "Показано строк: 10 из 45 — модели по размеру" in compare.replace("\xa0", " ")
    assert '<a href="../data/gpu_fit.csv">gpu_fit.csv</a>' in compare


@pytest.mark.parametrize(
    ("page", "before", "download"),
    [
        ("gpus/h100-sxm.html", 6, "gpu_fit ниже (строки с gpu_id = h100-sxm)"),
        ("methods/lora.html", 0, "estimates ниже (строки с method_id = lora)"),
    ],
)
def test_a_gpu_or_method_page_spreads_its_models(small_pages, built, page, before, download):
    """Ten of the 45 models, the smallest and the largest among them, under the GPU page's per-method
    summary (which counts every model); a note says so and where every row is."""
    whole = row_heads((built / "site" / page).read_text(encoding="utf-8"))
    small_html = small_pages.site[page]
    assert len(whole) == before + 45 and "Показано моделей" not in (built / "site" / page).read_text(encoding="utf-8")
    assert row_heads(small_html) == whole[:before] + [whole[before + i] for i in (0, 4, 9, 14, 19, 24, 29, 34, 39, 44)]
    text = small_html.replace("\xa0", " ")
    assert "Показано моделей: 10 из 45 — по размеру, от самой маленькой до самой большой" in text
    assert f"в загрузке {download}" in text


def test_the_calculator_lists_the_cheapest_servers_up_to_the_page_size(small_pages, catalog, browser, tmp_path):
    """The calculator's server table (the table rule, for the inputs on the screen) shows the cheapest
    `table_page_rows` servers that take the job and says how many there are (the catalog's servers,
    with copies added to its data until there are five more than the page's ten rows); a job that
    fits no more than ten says nothing."""
    import itertools
    import json

    import polars as pl

    from conftest import serve_directory

    for name, content in small_pages.site.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    data_file = tmp_path / "data" / "calculator.json"
    data = json.loads(data_file.read_text(encoding="utf-8"))
    base = {s["id"]: s["id"] for s in data["servers"]}
    copies = itertools.islice(itertools.cycle(list(data["servers"])), max(0, 15 - len(data["servers"])))
    for i, server in enumerate(copies):
        base[f"{server['id']}-b{i}"] = server["id"]
        data["servers"].append(server | {"id": f"{server['id']}-b{i}", "name": f"{server['name']} B{i}"})
    data_file.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    fits = catalog["server_fit"].filter(pl.col("fit") != "no").group_by("model_id", "method_id").agg("server_id")
    taking = {(m, me): {s for s, b in base.items() if b in set(ids)} for m, me, ids in fits.iter_rows()}
    jobs = [(m, me) for m in catalog["models"]["model_id"] for me in catalog["methods"]["method_id"]]
    most = max(jobs, key=lambda job: len(taking.get(job, ())))
    fewest = min(jobs, key=lambda job: len(taking.get(job, ())))
    assert len(taking[most]) > 10 >= len(taking.get(fewest, ()))
    context = browser.new_context(locale="ru-RU")
    page = context.new_page()
    with serve_directory(tmp_path) as url:
        page.goto(url + "calculator.html?model={}&method={}".format(*most))
        page.wait_for_selector("#calc[data-ready=true]")
        shown = page.eval_on_selector_all("#out-servers tbody tr", "rows => rows.map((r) => r.dataset.server)")
        note = page.text_content("#out-servers-more").replace("\xa0", " ")
        assert page.get_attribute("#out-servers-wrap", "class") == "scroll"  # fewer rows than a tall table's
        page.goto(url + "calculator.html?model={}&method={}".format(*fewest))
        page.wait_for_selector("#calc[data-ready=true]")
        assert page.is_hidden("#out-servers-more") and page.text_content("#out-servers-more") == ""
    context.close()
    cheapest = sorted(
        (s for s in data["servers"] if s["id"] in taking[most]),
        key=lambda s: (s["price_rub_month"] is None, s["price_rub_month"] or 0, s["server_memory_gb"], s["id"]),
    )
    assert shown == [s["id"] for s in cheapest[:10]]
    assert note.startswith(f"Серверов в таблице: 10 из {len(taking[most])}, сначала дешёвые.")


def test_the_slice_window():
    """slice_window: where an entity page's table starts and stops, and whether any row fits."""
    from pipeline.render.views.entities import slice_window

    fits = np.array([False, False, True, False, True, True, False, False])
    assert slice_window(8, 8, fits) == (0, 8, True)  # all shown
    assert slice_window(8, 3, fits) == (2, 5, True)  # from the first that fits
    assert slice_window(8, 3, fits, from_end=True) == (3, 6, True)  # up to the last that fits
    assert slice_window(8, 6, fits) == (2, 8, True)  # fewer than `shown` rather than one that does not fit
    assert slice_window(8, 6, fits, from_end=True) == (0, 6, True)
    none = np.zeros(8, dtype=bool)
    assert slice_window(8, 3, none) == (5, 8, False)  # the largest servers
    assert slice_window(8, 3, none, from_end=True) == (0, 3, False)  # the smallest models
    assert slice_window(2, 3, none) == (0, 2, False)


def test_a_model_page_shows_the_smallest_servers_that_take_it(catalog):
    """A model page's servers table at four rows a page (the real catalog has ten servers): the plan row,
    then four servers from the smallest into which some method fits by estimate, and the note."""
    whole = _entities(catalog, 100)
    cut = _entities(catalog, 4)
    for model_id, first in (("deepseek-v3", 1), ("tinyllama-1-1b", 0)):  # the smallest server takes no DeepSeek-V3
        all_rows, rows = whole.model_servers(model_id).rows, cut.model_servers(model_id).rows
        fits = [any(c != "нет" and not str(c).startswith("нет:") for c in row[3:]) for row in all_rows[1:]]
        assert fits.index(True) == first
        assert rows[0] == all_rows[0] and rows[1:] == all_rows[1 + first : 1 + first + 4]
    notes = cut.model_servers("llama-3-1-70b").notes
    assert notes[1].replace("\xa0", " ") == (
        "Показано серверов: 4 из 10 — по суммарной видеопамяти, начиная с наименьшего, в который хотя бы один "
        "способ помещается по оценке. Все серверы для этой модели — в загрузке server_fit ниже (строки с "
        "model_id = llama-3-1-70b), а также в Parquet и в файле DuckDB на странице данных."
    )
    assert len(whole.model_servers("llama-3-1-70b").notes) == 1  # every server shown: no such note


def test_search_reads_pages_without_their_table_rows_and_script_content():
    """An entity is found by its own page: Pagefind reads a page's tables without their rows, and its
    scripts without their content (which Pagefind never indexes); a table's tags in a script are text."""
    from pipeline.publish.search import indexed_text

    html = (
        '<main data-pagefind-body><h1>H100</h1><table><thead><tr><th scope="col">Сервер</th></tr></thead>\n'
        '<tbody>\n<tr><th scope="row">A</th></tr>\n<tr><th scope="row">B</th></tr>\n</tbody>\n</table>'
        '<script type="application/json" id="figures">{"html": "<tbody>"}</script>'
        "<p>Текст</p><table><tbody><tr><td>C</td></tr></tbody></table><script>go()</script></main>"
    )
    assert indexed_text(html) == (
        '<main data-pagefind-body><h1>H100</h1><table><thead><tr><th scope="col">Сервер</th> </tr></thead>\n'
        '\n</table><script type="application/json" id="figures"></script>'
        "<p>Текст</p><table></table><script></script></main>"
    )


def test_pagefind_makes_the_same_index_without_a_scripts_content(monkeypatch):
    """What indexed_text leaves out of a script is what Pagefind drops itself: given the whole page,
    Pagefind makes of a page whose script holds words the index of the same page with an empty script."""
    from pipeline.publish import search

    cut = search.indexed_text
    monkeypatch.setattr(search, "indexed_text", lambda html: html)  # Pagefind reads the page as it is

    page = (
        '<!doctype html><html lang="ru"><head><meta charset="utf-8"><title>H100</title></head><body>'
        '<main data-pagefind-body><h1>H100</h1><p>Карта</p><script type="application/json">{}</script>'
        "</main></body></html>"
    )
    words = search.start_index({"site/gpus/h100.html": page.format('{"name": "Уникальнословный"}')})
    empty = search.start_index({"site/gpus/h100.html": page.format("")})
    assert words() == empty()
    assert cut(page.format("[1, 2]")) == page.format("")


def test_pagefind_makes_the_same_index_of_the_indexed_main_alone(monkeypatch):
    """Of a page whose main is its data-pagefind-body, Pagefind reads only that main and the head: the
    index of the whole page (a header, a menu and a footer with words of their own) is the index of the
    cut one. A page without such a main is read as it is."""
    from pipeline.publish import search

    cut = search.indexed_text
    monkeypatch.setattr(search, "indexed_text", lambda html: html)
    head = '<!doctype html><html lang="ru"><head><meta charset="utf-8"><title>H100</title></head>'
    main = '<main id="main" data-pagefind-body><h1>H100</h1><p>Карта</p></main>'
    page = f'{head}<body class="x"><header><a href="/">Шапкослово</a></header>{main}<footer>Подвалослово</footer></body></html>'
    assert cut(page) == f'{head}<body class="x">{main}</body></html>'
    whole = search.start_index({"site/gpus/h100.html": page})
    alone = search.start_index({"site/gpus/h100.html": cut(page)})
    assert whole() == alone()
    for other in (
        page.replace(" data-pagefind-body", ""),  # not the indexed body: Pagefind reads the whole page
        page.replace("<footer>", "<main>x</main><footer>"),  # two mains
        page.replace("<body", "<div").replace("</body>", "</div>"),  # no body
        page.replace("</main>", ""),  # a main never closed
    ):
        assert cut(other) == other


def test_pagefind_makes_the_same_index_without_the_elements_it_ignores(monkeypatch):
    """indexed_text cuts each element marked data-pagefind-ignore (with the same elements nested in it),
    as Pagefind leaves it out itself: the index of the whole page is the index of the cut one. An
    element with a filter inside, the attribute's name as words or another attribute's value, and an
    element never closed are left to Pagefind."""
    from pipeline.publish import search

    cut = search.indexed_text
    monkeypatch.setattr(search, "indexed_text", lambda html: html)
    head = '<!doctype html><html lang="ru"><head><meta charset="utf-8"><title>H100</title></head><body>'
    main = (
        "<main data-pagefind-body><h1>H100</h1><p>Карта</p>"
        '<p class="source" data-pagefind-ignore="">Источникослово <a href="x">ссылкослово</a></p>'
        '<section data-pagefind-ignore="all"><section><p>Вложенослово</p></section><pre>Преслово</pre></section>'
        '<svg data-pagefind-ignore viewBox="0 0 1 1"><title>Рисунокслово</title><rect/></svg>'
        "<p>Конецслово</p></main>"
    )
    page = f"{head}{main}</body></html>"
    kept = "<main data-pagefind-body><h1>H100</h1><p>Карта</p><p>Конецслово</p></main>"
    assert cut(page) == f"{head}{kept}</body></html>"
    assert (
        search.start_index({"site/gpus/h100.html": page})() == search.start_index({"site/gpus/h100.html": cut(page)})()
    )
    for other in (
        '<div data-pagefind-ignore><span data-pagefind-filter="вид">карта</span></div>',
        '<p title="x data-pagefind-ignore">слово</p>',
        "<p>слова data-pagefind-ignore в тексте</p>",
        "<p data-pagefind-ignore>не закрыт",
    ):
        assert search._cut_ignored(other) == other


def test_a_tables_header_words_are_found_apart():
    """Pagefind separates td cells but joins adjacent th cells into one word, and a definition list's
    term with its value: indexed_text puts a space after each header cell and term, so a search finds
    each word and the excerpt wraps on a phone."""
    import gzip
    import json

    from pipeline.publish import search

    page = (
        '<!doctype html><html lang="ru"><head><meta charset="utf-8"><title>Данные</title></head><body>'
        '<main data-pagefind-body><h1>Данные</h1><table><thead><tr><th scope="col">Столбец</th>'
        '<th scope="col">Заголовок</th></tr></thead><tbody><tr><td>a</td><td>b</td></tr></tbody></table>'
        '<dl class="facts"><div><dt>Память, ГБ</dt><dd>80</dd></div></dl></main></body></html>'
    )
    index = search.start_index({"site/data.html": page})()
    [fragment] = [data for name, data in index.items() if "/fragment/" in name]
    unzipped = gzip.decompress(fragment)
    content = json.loads(unzipped[unzipped.index(b"{") :])["content"]
    assert "Столбец Заголовок" in content and "СтолбецЗаголовок" not in content
    assert "Память, ГБ 80" in content and "ГБ80" not in content


def test_a_warm_process_indexes_again_only_when_an_indexed_text_changed(monkeypatch):
    """start_index with `kept`: the same indexed texts give the last index without running Pagefind;
    a changed row of a table (not indexed) does not run it; a changed sentence does."""
    from pipeline.publish import search

    page = (
        '<!doctype html><html lang="ru"><head><meta charset="utf-8"><title>H100</title></head><body>'
        "<main data-pagefind-body><h1>H100</h1><p>{}</p><table><tbody><tr><td>{}</td></tr></tbody></table></main>"
        "</body></html>"
    )
    site = {"site/gpus/h100.html": page.format("Карта", "585 000 ₽"), "site/search.html": "не индексируется"}
    kept: dict = {}
    first = search.start_index(site, kept=kept)()
    assert any(name.startswith("site/pagefind/pagefind-entry") for name in first) and len(kept) == 1
    runs = []
    started = search._Service
    monkeypatch.setattr(search, "_Service", lambda *a: runs.append(a) or started(*a))
    assert search.start_index(site | {"site/gpus/h100.html": page.format("Карта", "1 ₽")}, kept=kept)() == first
    assert runs == []
    again = search.start_index(site | {"site/gpus/h100.html": page.format("Другая карта", "1 ₽")}, kept=kept)()
    assert len(runs) == 1 and again != first and len(kept) == 1


_PAGE = (
    '<!doctype html><html lang="ru"><head><meta charset="utf-8"><title>{0}</title></head><body>'
    "<main data-pagefind-body><h1>{0}</h1><p>{1}</p></main></body></html>"
)


def _site(**texts) -> dict[str, str]:
    return {f"site/{name}.html": _PAGE.format(name, text) for name, text in texts.items()}


def test_pages_handed_to_pagefind_as_they_render_make_the_index_made_after():
    """search.Indexer: the pages handed over as they are rendered (Pagefind reads them meanwhile) give
    the index Pagefind makes of the same pages afterwards (one worker, or a caller with its pages at
    once): the index lists the pages in the site's order, which is the order a build renders them in,
    so another order is another index; pages handed over in another order or with another text are
    given to a new process in the site's order (the old one is stopped); pages not indexed
    (search.html) are never sent."""
    from pipeline.publish import search

    site = _site(b="Вторая страница про обучение", a="Первая карта памяти", c="Третья: LoRA и QLoRA")
    streamed = search.Indexer()
    assert streamed.service is not None
    for rel in site:
        streamed.add(rel.removeprefix("site/"), site[rel])
    streamed.add("search.html", "не индексируется")
    assert list(streamed.sent) == ["b.html", "a.html", "c.html"]
    index = streamed.finish(site | {"site/search.html": "x"})()
    assert streamed.service is None and any(name.startswith("site/pagefind/pagefind-entry") for name in index)
    assert search.start_index(site)() == index  # the same pages given at once, in the site's order

    after = search.Indexer(stream=False)  # one worker: nothing sent before finish
    for rel in site:
        after.add(rel.removeprefix("site/"), site[rel])
    assert after.service is None and after.finish(site)() == index

    for handed in (
        (("b.html", _PAGE.format("b", "старый текст")), ("a.html", site["site/a.html"])),
        (("a.html", site["site/a.html"]), ("b.html", site["site/b.html"])),
    ):
        changed = search.Indexer()  # another text than the page has in the end; another order
        for name, text in handed:
            changed.add(name, text)
        read = changed.service.process
        assert changed.finish(site)() == index
        assert read.poll() is not None  # the process that read them was stopped

    by_name = {rel: site[rel] for rel in sorted(site)}
    assert search.start_index(by_name)() != index  # a, b, c: another index


def test_each_page_is_read_for_the_index_once(monkeypatch):
    """A page handed over is cut for Pagefind once (indexed_text): finish takes that text when the site
    has the very page that was handed over, and cuts again a page that is another object."""
    from pipeline.publish import search

    site = _site(a="Первая карта памяти", b="Вторая страница про обучение")
    cut, calls = search.indexed_text, []
    monkeypatch.setattr(search, "indexed_text", lambda html: calls.append(html) or cut(html))
    indexer = search.Indexer(stream=False)
    for name in ("a.html", "b.html"):
        indexer.add(name, site[f"site/{name}"])
    assert search.indexed_pages(site, "site/", {n: (indexer.pages[n], indexer.sent[n]) for n in indexer.pages}) == {
        "a.html": cut(site["site/a.html"]),
        "b.html": cut(site["site/b.html"]),
    }
    assert len(calls) == 2
    copy = site | {"site/b.html": "".join(list(site["site/b.html"]))}  # equal, another object
    indexer.finish(copy)()
    assert len(calls) == 3 and calls[-1] is copy["site/b.html"] and indexer.pages == {}


def test_a_page_handed_over_twice_or_a_pagefind_that_died_gives_the_same_index():
    """A path rendered twice, or Pagefind's process gone while the pages rendered: the pages are given
    to a new process at the end, in the site's order."""
    from pipeline.publish import search

    site = _site(a="Первая карта памяти", b="Вторая страница про обучение")
    expected = search.Indexer(stream=False)
    for name in ("b.html", "a.html"):
        expected.add(name, site[f"site/{name}"])
    index = expected.finish(site)()

    twice = search.Indexer()
    for name in ("b.html", "a.html", "b.html"):
        twice.add(name, site[f"site/{name}"])
    assert twice.again and twice.finish(site)() == index

    died = search.Indexer()
    died.add("b.html", site["site/b.html"])
    died.service.process.kill()
    died.service.process.wait()
    died.add("a.html", site["site/a.html"])  # the broken pipe drops the process
    assert died.service is None and died.finish(site)() == index


def test_a_pagefind_failure_is_an_os_error_and_discard_stops_it(monkeypatch):
    """Pagefind answering with an error (here: an index asked of an index it does not have) fails
    the build with "Pagefind failed" (exit 3, as a missing binary); discard() ends the process."""
    from pipeline.publish import search

    indexer = search.Indexer()
    process = indexer.service.process
    indexer.discard()
    assert process.poll() is not None and indexer.service is None

    service = search._Service()
    service.index = 12345
    service.add("a.html", _site(a="текст")["site/a.html"])
    with pytest.raises(OSError, match="Pagefind failed"):
        service.files()()
    service.kill()

    def missing():
        raise OSError(2, "the Pagefind binary is missing", "pagefind")

    monkeypatch.setattr(search, "executable", missing)
    indexer = search.Indexer()  # renders on; the build stops at the end, as it did without streaming
    indexer.add("a.html", _site(a="текст")["site/a.html"])
    with pytest.raises(OSError, match="binary is missing"):
        indexer.finish(_site(a="текст"))


def test_the_rows_are_cut_as_the_regular_expression_cuts_them():
    """indexed_text (str.find) removes exactly what the regular expression of a table's rows matches,
    on every arrangement of the tags."""
    import itertools

    from pipeline.publish.search import indexed_text

    table_rows = re.compile(r"<tbody>.*?</tbody>", re.S)

    pieces = ["<tbody>", "</tbody>", "a", "<", "tbody>", "\n"]
    for n in range(6):
        for parts in itertools.product(pieces, repeat=n):
            text = "".join(parts)
            assert indexed_text(text) == table_rows.sub("", text), text


def test_an_entity_that_fits_nowhere_shows_the_rows_nearest_to_fitting_and_says_so(catalog):
    """No server takes the model (every fit set to "no" here): its page shows the largest servers; no model
    fits the server: its page shows the smallest models; each note says why."""
    cut = _entities(catalog, 4)
    cut._fits = np.zeros(catalog["server_fit"].height, dtype=bool)
    whole = _entities(catalog, 100)
    assert cut.model_servers("llama-3-1-70b").rows[1:] == whole.model_servers("llama-3-1-70b").rows[-4:]
    assert (
        cut.model_servers("llama-3-1-70b")
        .notes[1]
        .replace("\xa0", " ")
        .startswith(
            "Показано серверов: 4 из 10 — самые большие по суммарной видеопамяти: ни в один сервер каталога ни один "
            "способ не помещается даже по оценке."
        )
    )
    assert cut.server_jobs("hgx-b200-8x").rows == whole.server_jobs("hgx-b200-8x").rows[:4]
    assert (
        cut.server_jobs("hgx-b200-8x")
        .notes[1]
        .replace("\xa0", " ")
        .startswith(
            "Показано моделей: 4 из 45 — самые маленькие: в этот сервер ни один способ ни одной модели каталога не "
            "помещается даже по оценке."
        )
    )
