"""An article template's error in the editor's words: Jinja's and Python's English texts, matched by
pattern, as the catalogue's Russian ones (site_templates/messages.toml, [articles] and its tables).

Jinja builds its syntax messages from a few shapes ("expected token X, got Y", "unexpected X",
"Unexpected end of template. Jinja was looking for …") around token descriptions ("end of print
statement", "integer", a name); each shape is a catalogue entry and each description a word of
[articles.tokens], so every message of those shapes reads in Russian, whatever the tokens.
A text no pattern knows is given inside a Russian sentence that says it is Jinja's own.
"""

from __future__ import annotations

import re

from pipeline.messages import catalogue, message

_QUOTED = r"'((?:[^'\\]|\\.)*)'"  # one of Jinja's '…' quoted token descriptions (a quote may be escaped)
_TAGS = r"((?:'[^']*'(?: or )?)+)"  # "'elif' or 'else' or 'endif'"

# (pattern, key, slot names, how each slot is read: "token", "tags", "type" or "as is")
_JINJA = [
    (
        r"access to attribute '([^']*)' of '([^']*)' object is unsafe\.",
        "articles.unsafe_attribute",
        ("attribute", "kind"),
        ("", ""),
    ),
    (r"(.+) is not safely callable", "articles.unsafe_call", ("name",), ("",)),
    (r"No filter named '([^']*)'\.?", "articles.syntax_no_filter", ("name",), ("",)),
    (r"No test named '([^']*)'\.?", "articles.syntax_no_test", ("name",), ("",)),
    (
        r"Unexpected end of template\. Jinja was looking for the following tags: "
        + _TAGS
        + r"\. The innermost block that needs to be closed is '([^']*)'\.",
        "articles.syntax_unclosed_block",
        ("tags", "block"),
        ("tags", ""),
    ),
    (
        r"Encountered unknown tag '([^']*)'\. Jinja was looking for the following tags: "
        + _TAGS
        + r"\. The innermost block that needs to be closed is '([^']*)'\.",
        "articles.syntax_misplaced_tag",
        ("name", "tags", "block"),
        ("", "tags", ""),
    ),
    (r"Encountered unknown tag '([^']*)'\..*", "articles.syntax_unknown_tag", ("name",), ("",)),
    (
        r"unexpected end of template, expected " + _QUOTED + r"\.",
        "articles.syntax_early_end",
        ("expected",),
        ("token",),
    ),
    (r"unexpected 'end of template'", "articles.syntax_early_end_any", (), ()),
    (r"unexpected char " + _QUOTED + r" at \d+", "articles.syntax_unexpected_char", ("char",), ("",)),
    (
        r"unexpected " + _QUOTED + r", expected " + _QUOTED,
        "articles.syntax_unexpected_expected",
        ("got", "expected"),
        ("token", "token"),
    ),
    (r"unexpected " + _QUOTED, "articles.syntax_unexpected", ("got",), ("token",)),
    (
        r"expected token " + _QUOTED + r", got " + _QUOTED,
        "articles.syntax_expected",
        ("expected", "got"),
        ("token", "token"),
    ),
    (r"Expected an expression, got " + _QUOTED, "articles.syntax_no_expression", ("got",), ("token",)),
    (r"tag name expected", "articles.syntax_no_tag_name", (), ()),
    (r"Missing end of comment tag", "articles.syntax_open_comment", (), ()),
    (r"Missing end of raw directive", "articles.syntax_open_raw", (), ()),
    (r"invalid syntax for function call expression", "articles.syntax_call", (), ()),
    (r"expected call", "articles.syntax_call", (), ()),
    (r"non-default argument follows default argument", "articles.syntax_macro_defaults", (), ()),
    (r"You cannot chain multiple tests with is", "articles.syntax_chained_tests", (), ()),
    (r"[Bb]lock '([^']*)' defined twice", "articles.syntax_block_twice", ("name",), ("",)),
    (r"expected name or number", "articles.syntax_after_dot", (), ()),
    (r"expected subscript expression", "articles.syntax_subscript", (), ()),
    (r"'([^']*)' is undefined", "articles.undefined", ("name",), ("",)),
    (r"'([^']*)' has no attribute '([^']*)'", "articles.no_attribute", ("owner", "name"), ("type", "")),
    (r"(.+) object has no element (.+)", "articles.no_element", ("owner", "name"), ("type", "")),
]
_JINJA_PATTERNS = [(re.compile(p, re.S), key, names, kinds) for p, key, names, kinds in _JINJA]

# Python's own errors inside an article's expression (type names are Python's: int, str, …).
_PYTHON = [
    (
        r"division by zero|float division by zero|integer division or modulo by zero|float modulo",
        "articles.division_by_zero",
        (),
        (),
    ),
    (
        r"unsupported operand type\(s\) for (.+): '([^']*)' and '([^']*)'",
        "articles.bad_operands",
        ("operator", "left", "right"),
        ("", "type", "type"),
    ),
    (r'can only concatenate str \(not "([^"]*)"\) to str', "articles.text_plus", ("right",), ("type",)),
    (
        r"'(.+)' not supported between instances of '([^']*)' and '([^']*)'",
        "articles.bad_comparison",
        ("operator", "left", "right"),
        ("", "type", "type"),
    ),
    (r"'([^']*)' object is not iterable", "articles.not_iterable", ("kind",), ("type",)),
    (r"'([^']*)' object is not callable", "articles.not_callable", ("kind",), ("type",)),
    (r"'([^']*)' object is not subscriptable", "articles.not_subscriptable", ("kind",), ("type",)),
    (
        r"(\S+?)(?:\(\))? missing \d+ required (?:positional |keyword-only )?arguments?: (.+)",
        "articles.missing_argument",
        ("function", "names"),
        ("", "names"),
    ),
    (
        r"(\S+?)(?:\(\))? takes (?:from \d+ to )?(\d+) positional arguments? but (\d+) (?:was|were) given",
        "articles.too_many_arguments",
        ("function", "most", "given"),
        ("", "", ""),
    ),
    (r"(\S+) got an unexpected keyword argument '([^']*)'", "articles.bad_argument", ("function", "name"), ("", "")),
    (
        r"Range too big\. The sandbox blocks ranges larger than MAX_RANGE \((\d+)\)\.",
        "articles.range_too_big",
        ("limit",),
        ("",),
    ),
]
_PYTHON_PATTERNS = [(re.compile(p, re.S), key, names, kinds) for p, key, names, kinds in _PYTHON]


def _words(section: str) -> dict[str, str]:
    return catalogue()["articles"][section]


def _token(description: str) -> str:
    """A token as Jinja describes it ("end of print statement", "integer", "}", a name) in Russian."""
    description = description.replace("\\'", "'")
    return _words("tokens").get(description) or f"«{description}»"


def _tags(text: str) -> str:
    return ", ".join(f"{{% {tag} %}}" for tag in re.findall(r"'([^']*)'", text))


def _type(name: str) -> str:
    """A Python type name ("int", "str object", "dict object") as the catalogue's word for it."""
    name = name.removesuffix(" object").strip("'")
    return _words("types").get(name, name)


def _names(text: str) -> str:
    """Python's "'a' and 'b'" as «a», «b»."""
    return ", ".join(f"«{name}»" for name in re.findall(r"'([^']*)'", text))


_READERS = {"token": _token, "tags": _tags, "type": _type, "names": _names, "": lambda text: text}


def _translated(text: str, patterns, keys: tuple = ()) -> str | None:
    for pattern, key, names, kinds in patterns:
        if keys and key not in keys:
            continue
        found = pattern.fullmatch(text)
        if found:
            slots = {
                name: _READERS[kind](value) for name, kind, value in zip(names, kinds, found.groups(), strict=True)
            }
            return message(key, **slots)
    return None


_CYRILLIC = re.compile("[\u0400-\u04ff]")  # the project's own messages are Russian


def _as_is_or_quoted(text: str) -> str:
    """A text no pattern knows: the project's own (Russian) as it is, Jinja's inside a Russian sentence."""
    return text if _CYRILLIC.search(text) else message("articles.jinja_other", detail=text)


def jinja_text(text: str, keys: tuple = ()) -> str:
    """A message of Jinja's (or of its sandbox) in the catalogue's Russian (only the `keys` given, if any)."""
    return _translated(text, _JINJA_PATTERNS, keys) or _as_is_or_quoted(text)


def sandbox_text(text: str) -> str:
    """Why the sandbox refused an attribute or a call (the article sandbox's own refusals are Russian)."""
    return jinja_text(text, ("articles.unsafe_attribute", "articles.unsafe_call"))


def python_text(exc: BaseException) -> str:
    """Another error an article's expression raised (a TypeError, a division by zero, …)."""
    text = str(exc)
    return _translated(text, _PYTHON_PATTERNS) or message("articles.failed", kind=type(exc).__name__, detail=text)
