"""Russian text: plural agreement (CLDR rules through Babel), numbers with their nouns, typography,
and checked claims for articles.

- `plural(shown)` gives the CLDR plural category (one, few, many, other) of a number as it is shown
  ("1", "21", "1,5", "1 024"): the category depends on the visible decimals, so it is computed from
  the text a reader sees, never from a float.
- `count(value, noun, case)` writes the number with its noun in agreement («5 карт», «1,5 карты»).
- `typograph(text, mode)` sets non-breaking spaces, «ёлочки» and dashes in HTML or Markdown.
- `claim(condition, statement, **now)` lets an article state a fact about the data: a false claim
  stops the build with a message for the editor (ClaimError).
The calculator's script evaluates the same CLDR rules (`plural_data`), exported from Babel.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from babel import Locale

from pipeline.messages import message
from pipeline.render import format as fmt
from pipeline.render.site_links import calculator_url  # noqa: F401  (an article helper: ru.calculator_url)

NBSP = "\u00a0"
CATEGORIES = ("one", "few", "many", "other")
CASES = ("nom", "gen", "dat", "acc", "ins", "prep")

# Every counted noun of the site: per case, the form for each CLDR category (one, few, many, other).
# "other" is the fractional form («1,5 карты»): the genitive singular.
_FORMS: dict[str, dict[str, tuple[str, str, str, str]]] = {
    "карта": {
        "nom": ("карта", "карты", "карт", "карты"),
        "gen": ("карты", "карт", "карт", "карты"),
        "dat": ("карте", "картам", "картам", "карты"),
        "acc": ("карту", "карты", "карт", "карты"),
        "ins": ("картой", "картами", "картами", "карты"),
        "prep": ("карте", "картах", "картах", "карты"),
    },
    "сервер": {
        "nom": ("сервер", "сервера", "серверов", "сервера"),
        "gen": ("сервера", "серверов", "серверов", "сервера"),
        "dat": ("серверу", "серверам", "серверам", "сервера"),
        "acc": ("сервер", "сервера", "серверов", "сервера"),
        "ins": ("сервером", "серверами", "серверами", "сервера"),
        "prep": ("сервере", "серверах", "серверах", "сервера"),
    },
    "токен": {
        "nom": ("токен", "токена", "токенов", "токена"),
        "gen": ("токена", "токенов", "токенов", "токена"),
        "dat": ("токену", "токенам", "токенам", "токена"),
        "acc": ("токен", "токена", "токенов", "токена"),
        "ins": ("токеном", "токенами", "токенами", "токена"),
        "prep": ("токене", "токенах", "токенах", "токена"),
    },
    "час": {
        "nom": ("час", "часа", "часов", "часа"),
        "gen": ("часа", "часов", "часов", "часа"),
        "dat": ("часу", "часам", "часам", "часа"),
        "acc": ("час", "часа", "часов", "часа"),
        "ins": ("часом", "часами", "часами", "часа"),
        "prep": ("часе", "часах", "часах", "часа"),
    },
    "день": {
        "nom": ("день", "дня", "дней", "дня"),
        "gen": ("дня", "дней", "дней", "дня"),
        "dat": ("дню", "дням", "дням", "дня"),
        "acc": ("день", "дня", "дней", "дня"),
        "ins": ("днём", "днями", "днями", "дня"),
        "prep": ("дне", "днях", "днях", "дня"),
    },
    "байт": {
        "nom": ("байт", "байта", "байт", "байта"),
        "gen": ("байта", "байт", "байт", "байта"),
        "dat": ("байту", "байтам", "байтам", "байта"),
        "acc": ("байт", "байта", "байт", "байта"),
        "ins": ("байтом", "байтами", "байтами", "байта"),
        "prep": ("байте", "байтах", "байтах", "байта"),
    },
    "модель": {
        "nom": ("модель", "модели", "моделей", "модели"),
        "gen": ("модели", "моделей", "моделей", "модели"),
        "dat": ("модели", "моделям", "моделям", "модели"),
        "acc": ("модель", "модели", "моделей", "модели"),
        "ins": ("моделью", "моделями", "моделями", "модели"),
        "prep": ("модели", "моделях", "моделях", "модели"),
    },
    "параметр": {
        "nom": ("параметр", "параметра", "параметров", "параметра"),
        "gen": ("параметра", "параметров", "параметров", "параметра"),
        "dat": ("параметру", "параметрам", "параметрам", "параметра"),
        "acc": ("параметр", "параметра", "параметров", "параметра"),
        "ins": ("параметром", "параметрами", "параметрами", "параметра"),
        "prep": ("параметре", "параметрах", "параметрах", "параметра"),
    },
    "замер": {
        "nom": ("замер", "замера", "замеров", "замера"),
        "gen": ("замера", "замеров", "замеров", "замера"),
        "dat": ("замеру", "замерам", "замерам", "замера"),
        "acc": ("замер", "замера", "замеров", "замера"),
        "ins": ("замером", "замерами", "замерами", "замера"),
        "prep": ("замере", "замерах", "замерах", "замера"),
    },
    "строка": {
        "nom": ("строка", "строки", "строк", "строки"),
        "gen": ("строки", "строк", "строк", "строки"),
        "dat": ("строке", "строкам", "строкам", "строки"),
        "acc": ("строку", "строки", "строк", "строки"),
        "ins": ("строкой", "строками", "строками", "строки"),
        "prep": ("строке", "строках", "строках", "строки"),
    },
    "слово": {
        "nom": ("слово", "слова", "слов", "слова"),
        "gen": ("слова", "слов", "слов", "слова"),
        "dat": ("слову", "словам", "словам", "слова"),
        "acc": ("слово", "слова", "слов", "слова"),
        "ins": ("словом", "словами", "словами", "слова"),
        "prep": ("слове", "словах", "словах", "слова"),
    },
    "раз": {case: ("раз", "раза", "раз", "раза") for case in CASES},
    "шт.": {case: ("шт.", "шт.", "шт.", "шт.") for case in CASES},
}
NOUNS = tuple(_FORMS)

_RULE = Locale("ru").plural_form


def _decimal(shown) -> Decimal:
    """A number as a reader sees it: "1 024", "1,5", "−3" (grouping spaces and a Russian comma), or a
    Python number. A float is read through its shortest repr, so 1.5 stays 1.5."""
    if isinstance(shown, bool):
        raise ValueError(f"not a number: {shown!r}")
    if isinstance(shown, int | Decimal):
        return Decimal(shown)
    if isinstance(shown, float):
        return Decimal(repr(shown))
    text = str(shown).strip().replace(NBSP, "").replace("\u202f", "").replace(" ", "")
    text = text.replace(",", ".").replace("−", "-").lstrip("+")
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ValueError(f"not a number: {shown!r}") from None


def value(shown) -> float:
    """The number a formatted figure shows ("1 200,5" -> 1200.5), for comparisons in an article."""
    return float(_decimal(shown))


@lru_cache(maxsize=4096)  # keyed by the text: Decimal("2.0") == Decimal("2"), but their categories differ
def _plural_cached(number: str) -> str:
    return _RULE(abs(Decimal(number)))


def plural(shown) -> str:
    """The CLDR plural category of a number as shown: "1" one, "2" few, "5" many, "1,5" other."""
    return _plural_cached(str(_decimal(shown)))


def noun_form(shown, noun: str, case: str = "nom") -> str:
    """The form of `noun` that agrees with the number `shown` in `case`."""
    if noun not in _FORMS:
        raise KeyError(message("articles.unknown_noun", noun=noun, nouns=", ".join(NOUNS)))
    if case not in CASES:
        raise KeyError(message("articles.unknown_case", case=case, cases=", ".join(CASES)))
    return _FORMS[noun][case][CATEGORIES.index(plural(shown))]


def shown(number, places: int = 1) -> Shown:
    """A number as count() shows it, for a message or label that names its noun: "{age:день}"."""
    return Shown(fmt.integer(number) if isinstance(number, int) else fmt.number(float(number), places))


def count(number, noun: str, case: str = "nom", places: int = 1) -> str:
    """A number with its noun in agreement, joined by a non-breaking space: count(5, "карта") ->
    "5 карт", count(1.5, "карта") -> "1,5 карты", count("1 024", "токен", "gen") -> "1 024 токенов".
    A Python number is formatted as the site formats figures (up to `places` decimals); a text is
    taken as it is shown."""
    if isinstance(number, str):
        shown = number
        _decimal(shown)  # refuses what is not a number
    elif isinstance(number, int):
        shown = fmt.integer(number)
    else:
        shown = fmt.number(float(number), places)
    return f"{shown}{NBSP}{noun_form(shown, noun, case)}"


def forms_of(noun: str) -> dict[str, tuple[str, str, str, str]]:
    """The declared forms of a noun: case -> (one, few, many, other), as the grammar data lists them."""
    return _FORMS[noun]


def plural_data() -> dict:
    """The CLDR plural rules of Russian (Babel's parsed form, as JSON-ready lists) and the noun forms,
    for the calculator's script, which evaluates them on the number as it is shown."""
    return json.loads(json.dumps({"rules": [[category, rule] for category, rule in _RULE.abstract], "nouns": _FORMS}))


# -- checked claims --


class ClaimError(ValueError):
    """A claim of an article that the data no longer supports."""

    def __init__(self, statement: str, now: dict):
        self.statement = statement
        self.now = now
        super().__init__(statement)

    def message(self) -> str:
        said = "; ".join(f"{k} = {v}" for k, v in self.now.items())
        return (
            f"утверждение «{self.statement}» больше не верно"
            + (f"; сейчас в данных: {said}" if said else "")
            + ". Исправьте предложение в статье (или выберите формулировку по данным через {% if %}) "
            "либо проверьте правку в sources/; прежний сайт остаётся опубликованным"
        )


def claim(condition, statement: str, **now) -> str:
    """Nothing when `condition` holds; otherwise the build stops naming the article's line and the claim.

    {{ claim(ru.value(t.cards(m, "lora", g)) == 1, "LoRA для 8B помещается на одну карту", карт=t.cards(m, "lora", g)) }}
    """
    if not condition:
        raise ClaimError(str(statement), {k: str(v) for k, v in now.items()})
    return ""


# -- typography --

_UNIT = r"(?:[%‰₽$€]|[А-Яа-яЁёA-Za-z])"
# Each rule: its pattern, its replacement, and what the text must hold for it to match at all (a rule
# runs only then: most pages have no quote, «т.» or «№»); () means always.
_RULES_TEXT: tuple[tuple[re.Pattern, str, tuple[str, ...]], ...] = (
    # straight double quotes around text become «ёлочки»
    (re.compile(r'(?<![\w="])"([^"<>\n=\x00]+?)"(?![\w=])'), r"«\1»", ('"',)),
    # a number and its unit or noun: «1 200 ГБ», «50 %», «13 млрд», «5 карт», «585 000 ₽/мес»
    # (not before a short preposition or conjunction: «1 из 5», «2 и 3», «5 или 6»)
    (
        re.compile(
            r"(?<![\w.])(\d(?:[\d\u00a0]*\d)?(?:[.,]\d+)?) (?!(?:[а-яё]{1,2}|или)[\s\u00a0,.)])(?=" + _UNIT + ")"
        ),
        r"\1" + NBSP,
        (),
    ),
    # «×» between two numbers or a number and a name: «2 × H100», «8 × 7B» (a space already made
    # non-breaking is taken too: a second pass changes nothing)
    (re.compile(r"[ \u00a0]?×[ \u00a0]?"), NBSP + "×" + NBSP, ("×",)),
    # «т. е.», «т. д.», «т. п.», «т. к.», «и т. д.»
    (re.compile(r"\bт\. ?([едпк])\."), "т." + NBSP + r"\1.", ("т.",)),
    # a spaced hyphen or en dash between words becomes an em dash
    (re.compile(r"(?<=[\w»)]) [-–] (?=[\w«(])"), " — ", (" -", " –")),
    # an em dash keeps to the word before it: «слово — слово»
    (re.compile(r"(?<=[^\s|>\x00]) — "), NBSP + "— ", (" — ",)),
    # «№ 5», «§ 2»
    (re.compile(r"([№§]) ?(?=\d)"), r"\1" + NBSP, ("№", "§")),
)

# Parts of HTML a typographer leaves alone: tags (attributes), comments, script, style, code, pre, and
# the title (it must read as the og:title attribute does).
# Each pattern is one capturing group (HTML's has a second, the element's name), so that re.split
# returns the text pieces and the parts kept in one pass of C.
_HTML_SKIP = re.compile(
    r"(<(script|style|pre|code|textarea|title)\b.*?</\2>|<!--.*?-->|<[^>]*>)",
    re.DOTALL | re.IGNORECASE,
)
# Parts of Markdown left alone: fenced blocks, code spans, link and image targets, raw tags, URLs.
_MD_SKIP = re.compile(
    r"(```.*?```|`[^`\n]*`|\]\([^)\n]*\)|<[^>\n]*>|https?://\S+|^\|?[ :|-]+\|[ :|-]*$)",
    re.DOTALL | re.MULTILINE,
)


# What a text must hold for some rule to change it: the number rule and the dashes need a space,
# the others their own characters (and typograph drops a NUL).
_MARKS = (" ", '"', "×", "т.", "№", "§", "\x00")


def may_change(text: str) -> bool:
    """False when typograph leaves `text` (text only, no tag) as it is, whatever surrounds it."""
    return any(mark in text for mark in _MARKS)


def _text_rules(text: str) -> str:
    for pattern, replacement, needs in _RULES_TEXT:
        if not needs or any(n in text for n in needs):
            text = pattern.sub(replacement, text)
    return text


_JOIN = "\x00"  # between the text pieces of a document while the rules run (no rule matches it)


def typograph(text: str, mode: str = "html") -> str:
    """Russian typography for HTML ("html") or Markdown ("md"): only text is changed, never a tag,
    an attribute, code, a script or a link target. Applying it twice changes nothing more.

    The text pieces between the parts left alone are joined by a NUL, which no rule matches, so the
    rules run once over the whole document (a page has thousands of table cells)."""
    if _JOIN in text:
        text = text.replace(_JOIN, "")
    skip, step = (_HTML_SKIP, 3) if mode == "html" else (_MD_SKIP, 2)
    parts = skip.split(text)  # piece, kept[, name], piece, kept[, name], …, piece
    done = _text_rules(_JOIN.join(parts[::step])).split(_JOIN)
    out = [""] * (2 * len(done) - 1)
    out[::2] = done
    out[1::2] = parts[1::step]
    return "".join(out)


# -- the checker: every counted noun agrees with the number before it --

_GENITIVE_PREPOSITIONS = {"от", "до", "из", "для", "около", "без", "у", "после", "более", "менее", "свыше", "с"}
_ALL_FORMS = {form: noun for noun, cases in _FORMS.items() for forms in cases.values() for form in forms}
_COUNTED = re.compile(
    r"(?:(?P<before>[А-Яа-яЁё]+)[\s\u00a0]+)?(?<![\w.,])(?<!\d\u00a0)(?P<number>\d(?:[\d\u00a0]*\d)?(?:,\d+)?)[ \u00a0](?P<word>"
    + "|".join(sorted((re.escape(f) for f in _ALL_FORMS), key=len, reverse=True))
    + r")(?![\wА-Яа-яЁё])"
)


def disagreements(text: str) -> list[str]:
    """Each "number noun" of a plain text whose noun does not agree with the number in any case (a
    genitive plural after 2–4 only after a preposition that governs the genitive: «от 2 карт»)."""
    problems = []
    for m in _COUNTED.finditer(text):
        noun, word, shown = _ALL_FORMS[m["word"]], m["word"], m["number"]
        category = CATEGORIES.index(plural(shown))
        allowed = {forms[category] for forms in _FORMS[noun].values()}
        if category == 1 and (m["before"] or "").lower() not in _GENITIVE_PREPOSITIONS:
            allowed -= {_FORMS[noun]["gen"][1]} - {_FORMS[noun]["nom"][1], _FORMS[noun]["acc"][1]}
        if word not in allowed:
            problems.append(f"{shown} {word}")
    return problems


class Shown(str):
    """A formatted number that a label can put with its noun: "{seq:токен}" or "{count:сервер/gen}"
    in a label of labels.toml (str.format) gives «1 024 токена», «5 серверов»."""

    def __format__(self, spec: str) -> str:
        if not spec:
            return str(self)
        noun, _, case = spec.partition("/")
        return count(str(self), noun, case or "nom")
