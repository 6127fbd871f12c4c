"""Hostile cell values reach every output format inert: HTML, Markdown, CSV; unsafe ids never become paths.
Article templates run in a sandbox, and their markup is held to an allow-list in the site and the CMS Markdown."""

import csv
import html as html_lib
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import Markup

from conftest import edit_csv
from pipeline.build import build, load_and_validate
from pipeline.problems import DataError
from pipeline.render.format import spreadsheet_safe
from pipeline.validate import HIDDEN_RULE

SCRIPT = "<script>alert(1)</script>"
FORMULA = '=HYPERLINK("http://evil.example/x","y")'
MARKDOWN = "[click](javascript:alert(1)) *bold* | pipe `code`"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    import shutil

    from conftest import SOURCES

    root = tmp_path_factory.mktemp("hostile")
    sources = root / "sources"
    shutil.copytree(SOURCES, sources)
    edit_csv(sources / "servers.csv", "hgx-b300-8x,8 × B300,", f'hgx-b300-8x,"{SCRIPT}",')
    edit_csv(
        sources / "gpus.csv",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition,RTX PRO 6000,",
        f'NVIDIA RTX PRO 6000 Blackwell Server Edition,"{FORMULA.replace(chr(34), chr(34) * 2)}",',
    )
    edit_csv(sources / "models.csv", "generic-70b,Модель 70 млрд,", f'generic-70b,"{MARKDOWN}",')
    build(sources, root / "output")
    return root / "output"


def test_html_is_escaped(hostile):
    pages = sorted((hostile / "site").rglob("*.html"))
    assert "servers/hgx-b300-8x.html" in {
        p.relative_to(hostile / "site").as_posix() for p in pages
    }  # the hostile server's own page
    for page in pages:
        html = page.read_text(encoding="utf-8")
        # The only scripts are the site's own modules, loaded by src.
        # The only scripts are the site's own modules (by src) and JSON data islands with no "<" inside.
        own = re.findall(r'<script type="module" src="[^"<>]+"></script>', html)
        islands = re.findall(r'<script type="application/json" id="[a-z-]+">[^<]*</script>', html)
        assert len(re.findall(r"<script\b", html)) == len(own) + len(islands), page.name
        assert own, page.name
        assert "alert(1)</script>" not in html, page.name
        assert 'href="javascript' not in html, page.name
    article = (hostile / "site" / "finetune-memory.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in article
    assert "<em>bold</em>" not in article and "<code>code</code>" not in article
    assert "[click](javascript:alert(1)) *bold* | pipe `code`" in article.replace("&#x27;", "'")


def table_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("| ")]


def test_markdown_is_escaped(hostile):
    text = (hostile / "markdown" / "finetune-memory.md").read_text(encoding="utf-8")
    assert "<script" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "\\[click\\](javascript:alert(1)) \\*bold\\* \\| pipe \\`code\\`" in text
    # Every row of every table has as many unescaped cell separators as its header.
    blocks = [b for b in text.split("\n\n") if b.startswith("| ")]
    assert len(blocks) >= 6
    for block in blocks:
        counts = {len(re.findall(r"(?<!\\)\|", row)) for row in block.splitlines()}
        assert len(counts) == 1, block[:80]


def test_csv_neutralises_formulas_but_not_numbers(hostile):
    with (hostile / "site" / "data" / "gpus.csv").open(encoding="utf-8-sig") as f:
        gpus = {row["gpu_id"]: row for row in csv.DictReader(f)}
    assert gpus["rtx-pro-6000"]["short_name"] == "'" + FORMULA
    assert gpus["rtx-pro-6000"]["memory_gb"] == "96.0"
    with (hostile / "site" / "data" / "servers.csv").open(encoding="utf-8-sig") as f:
        servers = {row["server_id"]: row for row in csv.DictReader(f)}
    assert servers["hgx-b300-8x"]["display_name"] == SCRIPT


@pytest.mark.parametrize(
    "text, safe",
    [
        ("=1+1", "'=1+1"),
        ("+7 499", "'+7 499"),
        ("-5", "'-5"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("H100", "H100"),
        ("", ""),
        (None, None),
    ],
)
def test_spreadsheet_safe(text, safe):
    assert spreadsheet_safe(text) == safe


@pytest.mark.parametrize(
    "new, rule",
    [
        ("../../x", "в id — строчные латинские буквы и цифры, через «-» или «_»"),
        ("index", "reserved"),  # the name of a page of the site (models/index.html): pipeline.schema.RESERVED_NAMES
        ("indexed", None),  # a plain id is fine
    ],
)
def test_path_like_ids_are_rejected(sources, new, rule):
    from pipeline.messages import message
    from pipeline.schema import RESERVED_NAMES

    if rule == "reserved":
        rule = message("rules.reserved_id", names=", ".join(sorted(RESERVED_NAMES)))
    edit_csv(sources / "models.csv", "phi-4,", f"{new},")
    if rule is None:
        load_and_validate(sources)
        return
    with pytest.raises(DataError) as info:
        load_and_validate(sources)
    assert [str(p) for p in info.value.problems] == [f'{sources}/models.csv:32: model_id = "{new}": {rule}']


@pytest.mark.parametrize(
    "name, rule",
    [
        ("x" * 10_000, "слишком длинное значение: можно не больше 200 знаков"),
        ("Phi\u200f-4", HIDDEN_RULE),
        ("Phi\u202e4-", HIDDEN_RULE),
    ],
)
def test_hostile_names_are_rejected(sources, name, rule):
    edit_csv(sources / "models.csv", "phi-4,Phi-4 (14B),", f"phi-4,{name},")
    with pytest.raises(DataError) as info:
        load_and_validate(sources)
    assert [p.rule for p in info.value.problems] == [rule]
    assert [p.line for p in info.value.problems] == [32]


# --- Article templates: a sandbox for their Jinja, an allow-list for their markup ----------------------

ARTICLE_LINE = 7  # the file line where a test article's body starts (after its front matter)
REFUSED = " (в статье можно пользоваться только помощниками из site_templates/README.md)"


@pytest.fixture(scope="module")
def renderer(catalog):
    from pipeline.render.site import Renderer

    return Renderer(catalog)


def hostile_article(body: str):
    from pipeline.render.site import Article

    return Article("hostile", "Статья", "Описание", 99, "Статья", body, ARTICLE_LINE)


def render_hostile(renderer, body: str) -> tuple[str, str, list[str]]:
    """(Markdown for the CMS, HTML body for the site, warnings) of an article with this body."""
    renderer.article_warnings.clear()
    article = hostile_article(body)
    markdown, _ = renderer.render_article(article, "md")
    html = renderer.article_html(article)
    return markdown, html, sorted(str(w) for w in renderer.article_warnings)


def refusal(renderer, body: str) -> list[str]:
    from pipeline.problems import TemplateError

    with pytest.raises(TemplateError) as info:
        render_hostile(renderer, body)
    return [str(p) for p in info.value.problems]


def at(line: int, rule: str) -> str:
    return f"site_templates/articles/hostile.md:{ARTICLE_LINE - 1 + line}: {rule}"


SHELL = "{{ cycler.__init__.__globals__.os.system('touch %s') }}"


def test_the_shell_command_article_runs_nothing(renderer, tmp_path):
    marker = tmp_path / "SSTI-RAN"
    assert refusal(renderer, "Текст.\n\n" + SHELL % marker + "\n") == [at(3, "«cycler» не определено")]
    assert not marker.exists()


@pytest.mark.parametrize(
    "payload, rule",
    [
        (
            "{{ ''.__class__.__mro__[1].__subclasses__() }}",
            "обращение к атрибуту __class__ объекта str небезопасно",
        ),
        ("{{ ().__class__.__base__ }}", "обращение к атрибуту __class__ объекта tuple небезопасно"),
        ("{{ labels.__class__.__mro__ }}", "обращение к атрибуту __class__ объекта dict небезопасно"),
        ("{{ t.mem.__self__ }}", "обращение к атрибуту __self__ объекта method небезопасно"),
        ("{{ t.mem.__func__.__globals__ }}", "обращение к атрибуту __func__ объекта method небезопасно"),
        ("{{ range.__globals__ }}", "обращение к атрибуту __globals__ объекта function небезопасно"),
        ("{{ table.__globals__ }}", "обращение к атрибуту __globals__ объекта function небезопасно"),
        ("{{ namespace.__init__.__globals__ }}", "обращение к атрибуту __init__ объекта type небезопасно"),
        ("{{ self.__init__.__globals__ }}", "обращение к атрибуту __init__ объекта TemplateReference небезопасно"),
        ("{% set s = 's' %}{{ s|attr('__class__') }}", "обращение к атрибуту __class__ объекта str небезопасно"),
        ("{{ '{0.__class__}'.format(1) }}", "обращение к атрибуту __class__ объекта int небезопасно"),
        ("{{ labels.update({}) }}", "обращение к атрибуту update объекта dict небезопасно"),
        ('{{ t.c["models"].write_csv("x.csv") }}', "«t.c» — не помощник статей"),
        ("{{ e.c }}", "«e.c» — не помощник статей"),
        ("{{ cmp.t }}", "«cmp.t» — не помощник статей"),
        ("{{ fmt.pl }}", "«fmt.pl» — не помощник статей"),
        ("{{ t._members }}", "«t._members» — не помощник статей"),
        ('{{ table("__class__") }}', 'table("__class__") — такой таблицы для статей нет'),
        ("{{ 'x' * 10**8 }}", "повтор из 100000000 элементов слишком длинный для статьи"),
        ("{{ 7 ** 999999 }}", "7 ** 999999 — слишком большое число для статьи"),
        (
            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
            "циклы статьи делают больше 1000000 шагов",
        ),
        ("{{ '%999999999s'|format(1) }}", "формат '%999999999' задаёт слишком большую ширину для статьи"),
        ("{{ '%*d'|format(999999999, 1) }}", "формат '%*' задаёт слишком большую ширину для статьи"),
        ("{{ '%.9999999f' % 1.5 }}", "формат '%.9999999' задаёт слишком большую ширину для статьи"),
        ("{{ '{:>999999999}'.format(1) }}", "формат '{:>999999999' задаёт слишком большую ширину для статьи"),
        ("{{ '{:>{w}}'.format(1, w=999999999) }}", "формат '{:>{' задаёт слишком большую ширину для статьи"),
        ("{{ 'x'.center(999999999) }}", "ширина 999999999 слишком велика для статьи"),
        ("{{ 'x'|indent(10**9) }}", "ширина 1000000000 слишком велика для статьи"),
        ("{{ 'x'.zfill(10**9) }}", "ширина 1000000000 слишком велика для статьи"),
    ],
)
def test_sandbox_refuses_python_internals(renderer, payload, rule):
    assert refusal(renderer, f"Текст.\n\n{payload}\n") == [at(3, f"запрещено: {rule}{REFUSED}")]


def test_an_articles_loops_may_take_exactly_their_limit_of_turns(renderer, monkeypatch):
    """The turns of all an article's loops count together: as many as the limit pass, one more anywhere
    is refused. The limit is lowered from MAX_LOOP_STEPS (1 000 000) to keep the test short: at the real
    one this loop took 8 s."""
    from pipeline.render import site

    monkeypatch.setattr(site, "MAX_LOOP_STEPS", 10_000)
    whole = "{% for c in 'x' * 10000 %}{{ c if loop.first }}{% endfor %}"
    _, html, _ = render_hostile(renderer, f"Текст.\n\n{whole}\n")
    assert "<p>x</p>" in html
    one_more = whole + "{% for d in 'y' %}{% endfor %}"
    rule = "циклы статьи делают больше 10000 шагов"
    assert refusal(renderer, f"Текст.\n\n{one_more}\n") == [at(3, f"запрещено: {rule}{REFUSED}")]


@pytest.mark.parametrize(
    "payload, rule",
    [
        (
            "{% include '/etc/passwd' %}",
            "статья не может подключать, импортировать или расширять другие файлы (/etc/passwd)",
        ),
        (
            "{% import 'layout.html' as x %}",
            "статья не может подключать, импортировать или расширять другие файлы (layout.html)",
        ),
        ("{{ 'x'|safe }}", "ошибка в разметке шаблона: нет фильтра «safe»"),
        ("{{ 'x'|e }}", "ошибка в разметке шаблона: нет фильтра «e»"),
        ("{{ lipsum.__globals__ }}", "«lipsum» не определено"),
        (
            "{{ range(10**9)|list }}",
            "слишком длинный диапазон range(): больше 100000",
        ),
        ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "макрос вызывает сам себя без конца"),
        ('{{ t.mem("no-such-model", "lora") }}', "неизвестный id ('no-such-model', 'lora')"),
        (
            '{{ table("memory", bogus=1) }}',
            "у Tables.memory_table() нет параметра «bogus»",
        ),
    ],
)
def test_other_template_errors_name_file_and_line(renderer, payload, rule):
    assert refusal(renderer, f"Текст.\n\n{payload}\n") == [at(3, rule)]


SYNTAX = "ошибка в разметке шаблона: "


@pytest.mark.parametrize(
    "payload, rule",
    [
        ("{{ t.gpu_count(", SYNTAX + "статья кончилась, а скобка, кавычка или тег не закрыты"),
        ("{{ t.gpu_count", SYNTAX + "статья кончилась, а не хватает: конец вывода «}}»"),
        (
            "{% if true %}да",
            SYNTAX + "блок «if» не закрыт до конца статьи (нужен один из тегов: {% elif %}, {% else %}, {% endif %})",
        ),
        (
            "{% if true %}{% endfor %}",
            SYNTAX
            + "тег «endfor» здесь не к месту: открыт блок «if», нужен один из тегов: {% elif %}, {% else %}, {% endif %}",
        ),
        ("{{ 1 + }}", SYNTAX + "здесь не к месту: конец вывода «}}»"),
        ("{{ (1, }}", SYNTAX + "здесь не к месту: «}»; нужно: «)»"),
        ('{{ "без кавычки }}', SYNTAX + 'неожиданный символ «"» (может быть, не закрыта кавычка)'),
        ("{% for x y %}{% endfor %}", SYNTAX + "нужно: слово in; а здесь: «y»"),
        ("{{ 1 2 }}", SYNTAX + "нужно: конец вывода «}}»; а здесь: целое число"),
        ("{% set %}", SYNTAX + "нужно выражение (значение, имя или вызов помощника); а здесь: конец тега «%}»"),
        ("{% %}", SYNTAX + "после «{%» нет имени тега"),
        ("{# заметка", SYNTAX + "комментарий не закрыт: нет «#}»"),
        ("{{ 1 / 0 }}", "деление на ноль"),
        ("{{ 'карт' + 1 }}", "к тексту нельзя прибавить «целое число» знаком +; соедините их знаком ~"),
        ("{{ 1 < 'a' }}", "значения «целое число» и «текст» нельзя сравнить знаком <"),
        ("{% for x in 5 %}{% endfor %}", "значение «целое число» нельзя перебрать в цикле"),
        ("{{ labels.nope }}", "у значения «словарь» нет атрибута «nope»"),
        ("{{ t.cards() }}", "Tables.cards: не заданы аргументы «model_id», «method_id», «gpu_id»"),
    ],
)
def test_a_template_mistake_is_said_in_russian(renderer, payload, rule):
    """An editor's typo in an article: the build names the line and what is wrong, in Russian, with
    Jinja's tokens («}}», «%}») named as the editor typed them."""
    assert refusal(renderer, f"Текст.\n\n{payload}\n") == [at(3, rule)]


def test_a_sandbox_escape_stops_the_build_with_exit_2(built, tmp_path, monkeypatch, capsys):
    """Through the command line: exit 2, the article's file and line, the previous output untouched."""
    from conftest import SOURCES
    from pipeline.__main__ import main
    from pipeline.render import site as render

    out = tmp_path / "output"
    shutil.copytree(built, out)  # the same sources: the build reuses their validation
    before = sorted((p.relative_to(out), p.read_bytes()) for p in out.rglob("*") if p.is_file())
    marker = tmp_path / "SSTI-RAN"
    real = render.read_articles
    monkeypatch.setattr(render, "read_articles", lambda t: real(t) + [hostile_article(SHELL % marker + "\n")])
    code = main(["build", "--sources", str(SOURCES), "--out", str(out), "--base-url", "/other/", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert at(1, "«cycler» не определено") in err and "Traceback" not in err
    assert not marker.exists()
    assert sorted((p.relative_to(out), p.read_bytes()) for p in out.rglob("*") if p.is_file()) == before


# Each payload, what the Markdown for the CMS and the site's HTML keep of it, and the warning.
MARKUP = [
    (
        "До <script>alert(1)</script> после",
        "До  после",
        "<p>До  после</p>",
        "<script> убран вместе с содержимым: «<script>alert(1)</script>»",
    ),
    (
        '<img src="gpu.png" alt="GPU" onerror="alert(1)">',
        '<img src="gpu.png" alt="GPU">',
        '<p><img src="gpu.png" alt="GPU"></p>',
        'атрибут onerror="alert(1)" убран из <img>',
    ),
    (
        "<img src=x onerror=alert(1)>",
        '<img src="x">',
        '<p><img src="x"></p>',
        'атрибут onerror="alert(1)" убран из <img>',
    ),
    (
        "[нажмите](javascript:alert(1))",
        "нажмите",
        "<p>нажмите</p>",
        "ссылка на «javascript:alert(1)» убрана, её текст оставлен: допустимы только адреса http(s), mailto, tel и относительные",
    ),
    (
        "[нажмите](JaVaScRiPt&#58;alert(1) 'заголовок')",
        "нажмите",
        "<p>нажмите</p>",
        "ссылка на «JaVaScRiPt:alert(1)» убрана, её текст оставлен: допустимы только адреса http(s), mailto, tel и относительные",
    ),
    (
        "[файл](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "файл",
        "<p>файл</p>",
        "ссылка на «data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==» убрана, её текст оставлен: "
        "допустимы только адреса http(s), mailto, tel и относительные",
    ),
    (
        "![схема](data:image/svg+xml;base64,PHN2Zz4=)",
        "схема",
        "<p>схема</p>",
        "картинка «data:image/svg+xml;base64,PHN2Zz4=» убрана: допустимы только адреса http(s) и относительные",
    ),
    (
        '<a href="java\tscript:alert(1)" title="x">ссылка</a>',
        '<a title="x">ссылка</a>',
        '<p><a title="x">ссылка</a></p>',
        'href="java script:alert(1)" убран из <a>: допустимы только адреса http(s), mailto, tel и относительные',
    ),
    (
        "<javascript:alert(1)>",
        "",
        "",
        "ссылка на «javascript:alert(1)» убрана: допустимы только адреса http(s), mailto, tel и относительные",
    ),
    (
        "[x][evil]\n\n- [evil]: javascript:alert(1)",  # a definition inside a list item is one too
        "[x][evil]\n\n- [evil]: ",
        "<p>[x][evil]</p>\n<ul>\n<li>[evil]: </li>\n</ul>",
        "определение ссылки на «javascript:alert(1)» убрано",
    ),
    (
        '<iframe src="https://evil.example/"></iframe>',
        "",
        "",
        '<iframe> убран вместе с содержимым: «<iframe src="https://evil.example/"></iframe>»',
    ),
    (
        '<p style="background:url(javascript:alert(1))">текст</p>',
        "<p>текст</p>",
        "<p>текст</p>\n",
        'атрибут style="background:url(javascript:alert(1))" убран из <p>',
    ),
    (
        '<div class="site-header evil" onclick="steal()">текст</div>',
        "<div>текст</div>",
        "<div>текст</div>\n",
        'атрибут onclick="steal()" убран из <div>',
    ),
    (
        "<svg onload=alert(1)><circle/></svg>",
        "",
        "",
        "<svg> убран вместе с содержимым: «<svg onload=alert(1)><circle/></svg>»",
    ),
    (
        '<form action="https://evil.example/"><input name="q"></form>',
        "",
        "",
        "тег <form> в статье не допускается: тег убран, его текст оставлен",
    ),
    (
        "<img src=x onerror=alert(1)//",
        "&lt;img src=x onerror=alert(1)//",
        "<p>&lt;img src=x onerror=alert(1)//</p>",
        "«<img src=x onerror=alert(1)//» — не законченный HTML-тег: показан как текст",
    ),
    (
        "<!-- заметка --> текст",
        " текст",
        "<p>текст</p>",
        "HTML-комментарий убран; заметку для редакторов пишите в {# … #}",
    ),
]


@pytest.mark.parametrize("payload, markdown, html, warning", MARKUP)
def test_markup_outside_the_allow_list_is_removed_and_reported(renderer, payload, markdown, html, warning):
    md, body, warnings = render_hostile(renderer, f"Первый абзац.\n\n{payload}\n\nПоследний абзац.\n")
    assert md == f"Первый абзац.\n\n{markdown}\n\nПоследний абзац.\n"
    assert body == f"<p>Первый абзац.</p>\n{html + chr(10) if html else ''}<p>Последний абзац.</p>"
    assert [w for w in warnings if w.startswith("site_templates/articles/hostile.md:") and w.endswith(warning)]
    assert_inert(md)
    assert_inert(body)


def assert_inert(text: str) -> None:
    """Every tag in the text is an allowed one with allowed attributes and addresses; every other "<" is text."""
    from pipeline.render.sanitize import ATTRIBUTES, TAGS, url_allowed

    for tag in re.findall(r"<[^<>]*>?", text):
        m = re.fullmatch(r"<(/?)([a-z0-9]+)((?:\s+[a-z-]+(?:=\"[^\"<>]*\")?)*)\s*/?>", tag)
        assert m, tag
        assert m.group(2) in TAGS, tag
        for name, value in re.findall(r'\s([a-z-]+)(?:="([^"]*)")?', m.group(3)):
            assert name in ATTRIBUTES["*"] | ATTRIBUTES.get(m.group(2), frozenset()) | {"class"}, tag
            assert name not in ("href", "src") or url_allowed(html_lib.unescape(value)), tag


def test_every_class_and_attribute_removed_is_reported(renderer):
    _, _, warnings = render_hostile(renderer, '<div class="site-header evil" onclick="steal()">текст</div>\n')
    assert warnings == [
        at(1, 'атрибут onclick="steal()" убран из <div>'),
        at(1, "класс «site-header evil» убран из <div>"),
    ]


ALLOWED = (
    "<details open><summary>Итог</summary>\n\nЧасть *подробностей*.\n\n</details>\n\n"
    'H<sub>2</sub>O и x<sup>2</sup>, <abbr title="Graphics Processing Unit">GPU</abbr>, <kbd>Ctrl</kbd>.\n\n'
    "[сайт](https://example.org/a?b=1&c=2), [почта](mailto:editor@example.org), [телефон](tel:+74950000000), "
    "[таблица](data/models.csv), [раздел](#itog), <https://example.org/x>.\n\n"
    '![Схема](charts/memory.svg "Память")\n\n'
    '<table class="sortable"><tr><th scope="col">A</th><td class="num">1</td></tr></table>\n'
)


def test_allowed_markup_passes_unchanged(renderer):
    md, body, warnings = render_hostile(renderer, ALLOWED)
    assert warnings == []
    # An autolink is written as the same link in [text](url) form (inside raw HTML it would be a tag).
    assert md == ALLOWED.replace("<https://example.org/x>", "[https://example.org/x](https://example.org/x)")
    # The site's HTML as nh3 writes it: the same markup (an empty value, a table's implied tbody).
    assert body == (
        '<details open=""><summary>Итог</summary>\n\nЧасть *подробностей*.\n\n</details>\n\n'
        '<p>H<sub>2</sub>O и x<sup>2</sup>, <abbr title="Graphics Processing Unit">GPU</abbr>, <kbd>Ctrl</kbd>.</p>\n'
        '<p><a href="https://example.org/a?b=1&amp;c=2">сайт</a>, <a href="mailto:editor@example.org">почта</a>, '
        '<a href="tel:+74950000000">телефон</a>, <a href="data/models.csv">таблица</a>, <a href="#itog">раздел</a>, '
        '<a href="https://example.org/x">https://example.org/x</a>.</p>\n'
        '<p><img alt="Схема" src="charts/memory.svg" title="Память"></p>\n'
        '<table class="sortable"><tbody><tr><th scope="col">A</th><td class="num">1</td></tr></tbody></table>'
    )


def test_markup_made_by_an_expression_is_cleaned_too(renderer):
    """A helper's Markup changed by the template still passes the allow-list; the warning names its line."""
    body = 'Текст.\n\n{{ cmp.link("llama-3-1-8b").replace("models/", "javascript:alert(1)//") }}\n'
    md, html, warnings = render_hostile(renderer, body)
    assert md == "Текст.\n\nLlama 3.1 8B\n" and "javascript" not in html
    assert warnings == [
        at(
            3,
            "ссылка на «javascript:alert(1)//llama-3-1-8b.html» убрана, её текст оставлен: "
            "допустимы только адреса http(s), mailto, tel и относительные",
        )
    ]


def test_warnings_name_the_line_in_the_file(renderer):
    body = (
        "{% set m = 'generic-7b' %}\n"  # 1
        "{% if t.const('range_high_factor') > 1 %}\n"  # 2
        "Память {{ t.mem(m, 'lora') }} ГБ.\n"  # 3
        "{% endif %}\n"  # 4
        "\n"  # 5
        "<script>one()</script>\n"  # 6
        "{% for i in range(2) %}{{ i }}{% endfor %}\n"  # 7
        "Текст [x](javascript:two()) текст.\n"  # 8
        "\n"  # 9
        "<b onclick=three()>жирный</b>\n"  # 10
    )
    _, _, warnings = render_hostile(renderer, body)
    assert warnings == [
        at(6, "<script> убран вместе с содержимым: «<script>one()</script>»"),
        at(
            8,
            "ссылка на «javascript:two()» убрана, её текст оставлен: допустимы только адреса http(s), mailto, tel и относительные",
        ),
        at(10, 'атрибут onclick="three()" убран из <b>'),
    ]


def test_a_build_publishes_cleaned_markup_and_prints_the_warnings(built, tmp_path, monkeypatch, capsys):
    """Through the command line: exit 0, the article's page and its CMS Markdown cleaned, each removal printed."""
    from conftest import SOURCES
    from pipeline.__main__ import main
    from pipeline.render import site as render

    out = tmp_path / "output"
    shutil.copytree(built, out)  # the same sources: the build reuses their validation
    body = "Текст <img src=x onerror=alert(1)> и [ссылка](javascript:alert(2)).\n\n<script>alert(3)</script>\n"
    real = render.read_articles
    monkeypatch.setattr(render, "read_articles", lambda t: real(t) + [hostile_article(body)])
    code = main(["build", "--sources", str(SOURCES), "--out", str(out), "--base-url", "/other/", "--quiet"])
    err = capsys.readouterr().err
    assert code == 0
    assert at(1, 'атрибут onerror="alert(1)" убран из <img>') in err
    assert at(3, "<script> убран вместе с содержимым: «<script>alert(3)</script>»") in err
    cms = (out / "markdown" / "hostile.md").read_text(encoding="utf-8")
    assert cms == '# Статья\n\nТекст <img src="x"> и ссылка.\n'
    page = (out / "site" / "hostile.html").read_text(encoding="utf-8")
    assert '<p>Текст <img src="x"> и ссылка.</p>' in page
    assert "alert(" not in page and "onerror" not in page and "javascript:" not in page


def plain_render(renderer, article, mode: str) -> tuple[str, dict]:
    """An article as the pipeline rendered it before the sandbox: plain Jinja over the helper objects."""
    import jinja2

    from pipeline.render import format as fmt
    from pipeline.render import russian
    from pipeline.render.site import TOKEN, _inert, markdown_table

    sources = (renderer.tables, renderer.estimator, renderer.comparison)
    views = {}

    def table(kind, **kwargs):
        view = next(getattr(s, f"{kind}_table") for s in sources if hasattr(s, f"{kind}_table"))(**kwargs)
        if mode == "md":
            return Markup(markdown_table(view, renderer.sources_markdown(view)))
        token = TOKEN.format(len(views))
        views[token] = view
        return Markup("\n\n" + token + "\n\n")

    plain = jinja2.Environment(
        undefined=jinja2.StrictUndefined, autoescape=False, finalize=_inert, keep_trailing_newline=True
    )
    text = plain.from_string(article.body).render(
        t=renderer.tables,
        e=renderer.estimator,
        cmp=renderer.comparison,
        table=table,
        fmt=fmt,
        ru=russian,
        labels=renderer.labels,
    )
    return text, views


def test_existing_articles_are_untouched_by_sandbox_and_sanitiser(renderer):
    """Every article renders byte-identically to plain Jinja with unsanitised Markdown and HTML."""
    import markdown as markdown_lib

    from pipeline.render import sanitize
    from pipeline.render.site import read_articles

    renderer.article_warnings.clear()
    articles = read_articles()
    assert len(articles) == 3
    for article in articles:
        for mode in ("md", "html"):
            raw, views = plain_render(renderer, article, mode)
            assert renderer.render_article(article, mode)[0] == raw, (article.slug, mode)
            assert sanitize.clean_markdown(raw) == (raw, [])
        body = markdown_lib.markdown(raw, extensions=["tables", "sane_lists"], output_format="html")
        for token, view in views.items():
            body = body.replace(f"<p>{token}</p>", str(renderer.table_html(view, "")))
        assert sanitize.clean_html(body) == (body, [])
        assert renderer.article_html(article) == body, article.slug
    assert renderer.article_warnings == set()


def test_sandbox_and_plain_templates_are_cached_apart():
    """Jinja compiles sandboxed code differently: its bytecode cache must not be shared with a plain one."""
    import jinja2

    from pipeline.render.site import _bytecode_cache, _inert, article_environment

    plain = jinja2.Environment(
        undefined=jinja2.StrictUndefined, autoescape=False, finalize=_inert, keep_trailing_newline=True
    )
    assert _bytecode_cache(plain).pattern != article_environment({}).bytecode_cache.pattern


def test_every_article_helper_and_table_is_documented_and_exists(renderer):
    from pipeline.render import registry
    from pipeline.render.views.articles import Tables
    from pipeline.render.views.comparison import Comparison
    from pipeline.render.views.estimator import EstimatorTables

    guide = (Path(__file__).resolve().parent.parent / "site_templates" / "README.md").read_text(encoding="utf-8")
    views = (renderer.tables, renderer.estimator, renderer.comparison)
    for name, members in registry.article_helpers(*views).items():
        for member in members:
            assert f"{name}.{member}" in guide, f"{name}.{member}"
    tables = registry.article_tables(*views)
    for kind, function in tables.items():
        assert f'table("{kind}"' in guide, kind
        assert function.__name__ == f"{kind}_table" and type(function.__self__) in (Tables, EstimatorTables, Comparison)
    documented = set(re.findall(r'table\("([a-z_]+)"', guide))
    assert documented == set(tables)  # every documented table exists, and no other is reachable
    assert "## Что можно писать в статье" in guide


PIECES = [
    *(
        "<script>alert(1)</script>",
        "<script>",
        "</script>",
        "<img src=x onerror=alert(1)>",
        "<img/src=x/onerror=alert(1)>",
    ),
    *(
        "[x](javascript:alert(1))",
        "[x](&#106;avascript:a)",
        "[x](java\\:script:a)",
        "[a](j\navascript:1)",
        "[a](java\tscript:1)",
    ),
    *(
        "![i](data:text/html,a)",
        "<a href='javascript:1'>a</a>",
        '<a href="https://ok" onclick=x>b</a>',
        "<https://ok.org>",
    ),
    *(
        "<https:/onclick=alert(1)>",
        "<x/onclick=alert(1)@a.b>",
        "<javascript:alert(1)>",
        "[r]: javascript:alert(1)",
        "[y][r]",
    ),
    *(
        "- [r]: data:x",
        "\n",
        "\n\n",
        " ",
        "`",
        "\\",
        "<",
        ">",
        "[",
        "]",
        "(",
        ")",
        "!",
        '"',
        "<!--",
        "-->",
        "<svg onload=x>",
    ),
    *(
        "<iframe src=x>",
        "<p style=x>",
        '<div class="num evil">',
        "&lt;",
        "<details open>",
        "</details>",
        "<summary>",
        "text",
    ),
    *(
        "- ",
        "> ",
        "1. ",
        "    ",
        "```",
        "|",
        "| a | b |\n|---|---|\n| c | d |",
        "<A HREF=JaVaScRiPt:x>",
        "<scr<script>ipt>",
    ),
    *(
        "<<script>>",
        '<a href="&#x6A;avascript:1">x</a>',
        '<img src="data:image/svg+xml,<svg onload=alert(1)>">',
        "<div>\n",
    ),
    *(
        '<noscript><p title="</noscript><img src=x onerror=alert(1)>">',
        "<?xml x?>",
        "<![CDATA[<script>]]>",
        "[a]:\n javascript:x",
    ),
]


def markup_problems(html: str) -> list:
    """Tags, attributes and addresses outside the allow-list in some HTML, as a browser would see them."""
    from html.parser import HTMLParser

    from pipeline.render.sanitize import ATTRIBUTES, CLASSES, TAGS, url_allowed

    found = []

    class Check(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag not in TAGS:
                found.append(tag)
            for name, value in attrs:
                if name == "class":
                    if any(c not in CLASSES.get(tag, ()) for c in (value or "").split()):
                        found.append((tag, name, value))
                elif name not in ATTRIBUTES["*"] | ATTRIBUTES.get(tag, frozenset()):
                    found.append((tag, name, value))
                elif name in ("href", "src") and not url_allowed(value or ""):
                    found.append((tag, name, value))

        handle_startendtag = handle_starttag

        def handle_comment(self, data):
            found.append("<!--")

    checker = Check(convert_charrefs=True)
    checker.feed(html)
    checker.close()
    return found


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=20).map("".join))
def test_cleaned_markdown_makes_only_allowed_html(text):
    """Whatever an article mixes up, its cleaned Markdown makes only allowed HTML (before nh3 too), and
    cleaning it again changes nothing."""
    import markdown as markdown_lib

    from pipeline.render.sanitize import clean_html, clean_markdown

    cleaned, _ = clean_markdown(text)
    assert clean_markdown(cleaned) == (cleaned, [])
    html = markdown_lib.markdown(cleaned, extensions=["tables", "sane_lists"], output_format="html")
    assert markup_problems(html) == []
    assert markup_problems(clean_html(html)[0]) == []


def test_sandbox_limits_leave_ordinary_loops_and_formats_alone(renderer):
    body = (
        "{% for i in range(3) %}{% for j in range(2) %}{{ i * j }}{% endfor %}{% endfor %} "
        "{{ '%5.1f'|format(2.5) }} {{ '{:>4}'.format(7) }} {{ 'x'|center(5) }} {{ '%s'|format(99999999999) }}"
    )
    markdown, _, warnings = render_hostile(renderer, f"Текст.\n\n{body}\n")
    assert (markdown, warnings) == ("Текст.\n\n000102   2.5    7   x   99999999999\n", [])


def test_the_editors_guide_states_the_sandbox_limits():
    from pipeline.render.site import MAX_LOOP_STEPS, MAX_REPEAT

    guide = (Path(__file__).parents[1] / "site_templates" / "README.md").read_text(encoding="utf-8")
    assert f"циклы, которые вместе делают больше {MAX_LOOP_STEPS:_} шагов".replace("_", " ") in guide
    assert f"ширина больше {MAX_REPEAT:_} знаков".replace("_", " ") in guide


def test_an_articles_table_is_made_once_for_both_its_forms(catalog):
    """An article is rendered twice (Markdown for the CMS, HTML for the site): a table asked for with the
    same kind and arguments is made once; other arguments make another table, and arguments that are
    not plain values are not remembered."""
    from pipeline.render.site import Renderer

    renderer = Renderer(catalog)
    made = []
    real = renderer.tables.cards_table

    def counted(**kwargs):
        made.append(kwargs)
        return real(**kwargs)

    renderer.tables.cards_table = counted
    gpus = catalog["gpus"]["gpu_id"].to_list()[:2]
    task = catalog["estimates"].row(0, named=True)
    tasks = [(task["model_id"], task["method_id"])]
    body = "".join(f'{{{{ table("cards", tasks={tasks!r}, gpus={g!r}) }}}}\n\n' for g in (gpus, gpus[:1], gpus))
    markdown, html, _ = render_hostile(renderer, body)
    assert made == [{"tasks": tasks, "gpus": gpus}, {"tasks": tasks, "gpus": gpus[:1]}]
    fresh_markdown, fresh_html, _ = render_hostile(Renderer(catalog), body)
    assert (markdown, html) == (fresh_markdown, fresh_html)
    assert html.count("<table") == 3


def test_only_plain_arguments_name_an_articles_table():
    from pipeline.render.site import _view_key

    keys = [_view_key("min", {"models": value}) for value in (1, 1.0, True, "1", [1], (1,), {"a": 1}, None)]
    assert None not in keys and len(set(keys)) == len(keys)
    assert _view_key("min", {"models": [("a", "b")]}) == _view_key("min", {"models": [("a", "b")]})
    assert _view_key("min", {"models": [object()]}) is None
    assert _view_key("min", {"models": {1: "a"}}) is None
