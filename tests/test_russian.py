"""Russian text: plural agreement (CLDR through Babel, and the calculator's script), numbers with
nouns, typography, the agreement checker, and checked claims of the articles."""

import json
import re
import subprocess
from pathlib import Path

import pytest

from pipeline.render import russian
from pipeline.render.russian import NBSP

ROOT = Path(__file__).resolve().parent.parent
CALCULATOR_JS = ROOT / "site_templates" / "static" / "calculator.js"


@pytest.mark.parametrize(
    "shown, category",
    [
        ("0", "many"),
        ("1", "one"),
        ("2", "few"),
        ("4", "few"),
        ("5", "many"),
        ("11", "many"),
        ("12", "many"),
        ("14", "many"),
        ("21", "one"),
        ("22", "few"),
        ("25", "many"),
        ("101", "one"),
        ("111", "many"),
        ("112", "many"),
        ("122", "few"),
        (f"1{NBSP}024", "few"),
        (f"1{NBSP}000{NBSP}000", "many"),
        ("1,5", "other"),
        ("0,5", "other"),
        ("2,0", "other"),
        (1.5, "other"),
        (21, "one"),
    ],
)
def test_plural_categories_are_cldr(shown, category):
    assert russian.plural(shown) == category


@pytest.mark.parametrize(
    "number, noun, case, shown",
    [
        (1, "карта", "nom", f"1{NBSP}карта"),
        (2, "карта", "nom", f"2{NBSP}карты"),
        (5, "карта", "nom", f"5{NBSP}карт"),
        (21, "карта", "nom", f"21{NBSP}карта"),
        (1.5, "карта", "nom", f"1,5{NBSP}карты"),
        (1, "карта", "acc", f"1{NBSP}карту"),
        (8, "карта", "prep", f"8{NBSP}картах"),
        (1, "карта", "prep", f"1{NBSP}карте"),
        (2, "сервер", "prep", f"2{NBSP}серверах"),
        (3, "сервер", "nom", f"3{NBSP}сервера"),
        (1024, "токен", "nom", f"1{NBSP}024{NBSP}токена"),
        (2048, "токен", "nom", f"2{NBSP}048{NBSP}токенов"),
        (16, "байт", "nom", f"16{NBSP}байт"),
        (2, "байт", "nom", f"2{NBSP}байта"),
        (21.1, "байт", "nom", f"21,1{NBSP}байта"),
        (1, "час", "nom", f"1{NBSP}час"),
        (3, "час", "nom", f"3{NBSP}часа"),
        (11, "модель", "nom", f"11{NBSP}моделей"),
        (22, "параметр", "gen", f"22{NBSP}параметров"),
        (1.7, "раз", "acc", f"1,7{NBSP}раза"),
        (5, "шт.", "nom", f"5{NBSP}шт."),
        ("1,5", "карта", "nom", f"1,5{NBSP}карты"),
    ],
)
def test_count_agrees(number, noun, case, shown):
    assert russian.count(number, noun, case) == shown


def test_count_refuses_an_unknown_noun_and_what_is_not_a_number():
    with pytest.raises(KeyError, match="известные существительные"):
        russian.count(2, "корова")
    with pytest.raises(ValueError, match="not a number"):
        russian.count("два", "карта")


def test_shown_puts_a_label_number_with_its_noun():
    assert "{seq:токен} × {n}".format(seq=russian.Shown(f"1{NBSP}024"), n="1") == f"1{NBSP}024{NBSP}токена × 1"
    assert "{n:сервер/gen}".format(n=russian.Shown("5")) == f"5{NBSP}серверов"


def test_value_reads_a_shown_number():
    assert russian.value(f"1{NBSP}200,5") == 1200.5
    assert russian.value("−12") == -12
    assert russian.value("+50") == 50


# -- the calculator's script evaluates the same CLDR rules --

SAMPLES = [str(n) for n in range(201)] + [
    *("0,5", "1,5", "2,25", "10,0", "21,1", "4,75", "100,01", "0,0", "1,0", "11,5"),
    *(f"1{NBSP}024", f"2{NBSP}048", f"1{NBSP}000{NBSP}001"),
]


def test_calculator_script_plural_matches_cldr():
    script = (
        f"import {{ pluralCategory, countNoun }} from {json.dumps(CALCULATOR_JS.as_uri())};"
        "const data = JSON.parse(process.argv[1]);"
        "const out = data.samples.map((s) => [pluralCategory(data.plural, s), countNoun(data.plural, s, 'карта', 'prep')]);"
        "console.log(JSON.stringify(out));"
    )
    payload = json.dumps({"plural": russian.plural_data(), "samples": SAMPLES})
    run = subprocess.run(
        ["node", "--input-type=module", "-e", script, payload], capture_output=True, text=True, check=True
    )
    got = json.loads(run.stdout)
    expected = [[russian.plural(s), russian.count(s, "карта", "prep")] for s in SAMPLES]
    assert got == expected
    assert got[2] == ["few", f"2{NBSP}картах"] and got[201] == ["other", f"0,5{NBSP}карты"]


# -- typography --


def test_typograph_html_changes_text_only():
    html = '<p title="a - b">Это "тест" - 1 200 ГБ, т. е. 50 % и 2 × H100 — да</p><code>a - b "c"</code>'
    assert russian.typograph(html, "html") == (
        f'<p title="a - b">Это «тест»{NBSP}— 1 200{NBSP}ГБ, т.{NBSP}е. 50{NBSP}% и 2{NBSP}×{NBSP}H100{NBSP}— да</p>'
        '<code>a - b "c"</code>'
    )


def test_typograph_markdown_keeps_tables_links_and_code():
    md = '| a | — |\n|---|---:|\n| 5 карт | [x](a - b.html) "q" |\n- пункт - тире `x - y`\n'
    assert russian.typograph(md, "md") == (
        f"| a | — |\n|---|---:|\n| 5{NBSP}карт | [x](a - b.html) «q» |\n- пункт{NBSP}— тире `x - y`\n"
    )


def test_typograph_twice_changes_nothing_more():
    text = 'Нужно 585 000 ₽/мес, "да" - т. е. 13 млрд; № 5'
    once = russian.typograph(text, "md")
    assert once == f"Нужно 585 000{NBSP}₽/мес, «да»{NBSP}— т.{NBSP}е. 13{NBSP}млрд; №{NBSP}5"
    assert russian.typograph(once, "md") == once
    # «×» with its spaces made non-breaking, or one of them already: once more is the same
    for text in ("2 × H100", f"4{NBSP}× H100", f"8{NBSP}×{NBSP}7B", "2×H100"):
        once = russian.typograph(text, "html")
        assert NBSP + NBSP not in once and russian.typograph(once, "html") == once, text


# -- the agreement checker --


def test_disagreements_finds_what_does_not_agree():
    text = (
        f"при длине 1{NBSP}024 токенов, 5 карты, от 2 карт, 21 карта, 1,5 карты, 3 байта, 16 байт, "
        "в 2 раза, в 5 раз, версии 4.46 модели, 1 модель, 2 моделей, на 8 картах, 13 карт"
    )
    assert russian.disagreements(text) == [f"1{NBSP}024 токенов", "5 карты", "2 моделей"]


# -- checked claims --


def test_claim_passes_silently_and_fails_with_an_editor_message():
    assert russian.claim(True, "верно") == ""
    with pytest.raises(russian.ClaimError) as failed:
        russian.claim(False, "LoRA помещается на одну карту", карт="3")
    message = failed.value.message()
    assert message.startswith("утверждение «LoRA помещается на одну карту» больше не верно; сейчас в данных: карт = 3.")
    assert "прежний сайт остаётся опубликованным" in message


def test_editors_guide_examples_give_the_outputs_it_shows():
    """Every example of site_templates/README.md's helper table gives the output the table shows."""
    import ast

    guide = (ROOT / "site_templates" / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\|[^|]*\| `ru\.(\w+)\((.*)\)` \| (.+) \|$", guide, re.MULTILINE)
    assert len(rows) >= 12
    for name, args, shown in rows:
        result = getattr(russian, name)(*ast.literal_eval(f"({args},)"))
        assert str(result).replace(NBSP, " ") == shown, (name, args)


def test_a_table_typeset_cell_by_cell_is_what_the_page_pass_makes_of_it():
    """Renderer.page sets each table apart (html_table with typography, once per distinct cell):
    the rules never reach across a tag, so that is typograph() of the whole table."""
    import datetime as dt

    from pipeline.render.site import TableText, html_table
    from pipeline.render.view import Link, TableView

    texts = [
        "1 200 ГБ",
        "2 × H100",
        'модель "Llama"',
        "т. е. 5 карт",
        "слово - слово",
        "№ 5",
        "1 из 5",
        "50 %",
        "8\u00a0×\u00a0H200",
        "без пробелов",
        "",
        "a\x00b 7 B",
    ]
    rows = [[Link(t or "x", f"m/{i}.html"), t, f"{i} ₽/мес"] for i, t in enumerate(texts)] * 2
    view = TableView(
        ["Модель — имя", "Текст", "Цена"], rows, ["r"], ["server_fit"], [False, False, True], ["т. е. 2 - 3"]
    )
    refs = [{"url": "https://example.org", "title": 'Каталог "А"', "checked_on": dt.date(2026, 1, 2)}]
    labels = {
        "common": {
            "table_region": "Таблица",
            "sources": "Источники",
            "source": "Источник",
            "checked": "проверено",
            "download": "Скачать",
            "cite": "Как цитировать",
        }
    }
    typograph, may_change = russian.typograph, russian.may_change
    plain = html_table(view, refs, "../", TableText(labels, lambda d: d.isoformat()))
    typeset = html_table(view, refs, "../", TableText(labels, lambda d: d.isoformat()), typograph)
    assert typeset == typograph(str(plain))
    assert typeset != str(plain)
    assert "1 200\u00a0ГБ" in typeset and "2\u00a0×\u00a0H100" in typeset
    assert [may_change(t) for t in ("1\u00a0200", "H100", "1 200", "т.", "a\x00")] == [False, False, True, True, True]

    # The text before and after the rows is set once per render however many tables share it.
    text, calls = TableText(labels, lambda d: d.isoformat()), []

    def counted(html: str) -> str:
        calls.append(html)
        return typograph(html)

    assert html_table(view, refs, "../", text, counted) == html_table(view, refs, "../", text, counted) == typeset
    heads = [c for c in calls if c.lstrip().startswith("<figure")]
    tails = [c for c in calls if c.startswith("</tbody>")]
    assert (len(heads), len(tails)) == (1, 1)
