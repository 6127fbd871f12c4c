"""Stage 5, rendering: catalog + site_templates -> Markdown and HTML pages (in memory).

Article bodies are Markdown with Jinja placeholders. Each article is rendered
twice: once to Markdown for the CMS (tables as escaped Markdown tables) and once
to HTML (prose through `markdown`, tables through an autoescaped Jinja macro).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import os
import re
import threading
import tomllib
from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import jinja2.compiler
import markdown
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError
from markupsafe import Markup, escape

from pipeline import TEMPLATES, lookups, words
from pipeline.combine import Catalog
from pipeline.messages import message
from pipeline.problems import Problem, TemplateError, Validation
from pipeline.publish import releases
from pipeline.publish.downloads import DATABASE_OLDEST_READER, EXCEL_MAX_ROWS, duckdb_version
from pipeline.render import calculator_json as calculator
from pipeline.render import charts, quote, registry, russian, sanitize, site_links, template_errors
from pipeline.render import format as fmt
from pipeline.render.page_memo import PageMemo
from pipeline.render.view import TALL_MIN_ROWS, Link, TableView
from pipeline.render.views import estimator as estimator_pages
from pipeline.render.views.articles import Tables
from pipeline.render.views.comparison import Comparison, UndeclaredSetup
from pipeline.render.views.entities import EntityTables, config_problems
from pipeline.render.views.estimator import EstimatorTables
from pipeline.schema import ALL_TABLES, TABLES_BY_NAME, TYPE_NAMES_RU
from pipeline.warm import Warm

TOKEN = "TABLEPLACEHOLDER{}X"
# The kinds of entity with a page each (and an index of them), and the template of that page.
ENTITY_KINDS = {"models": "model.html", "methods": "method.html", "gpus": "gpu.html", "servers": "server.html"}


@dataclass(frozen=True)
class Article:
    slug: str
    title: str
    description: str
    order: int
    nav: str  # short label for the navigation bar
    body: str  # the template source, front matter removed
    line: int = 1  # the line of the file where the body starts
    in_nav: bool = True  # in the top navigation ("nav: true"); otherwise only in the list of all articles

    @property
    def file(self) -> str:
        return f"site_templates/articles/{self.slug}.md"


@dataclass(frozen=True)
class Rendered:
    """Everything a build writes, as text, keyed by path relative to its root (None: written and
    dropped, see drop)."""

    site: dict[str, str | bytes | None]
    markdown: dict[str, str | None]
    warnings: list[Problem] = field(default_factory=list)  # markup removed from articles
    release: dict | None = None  # the current release of the data (datapackage.json's version and date)

    def drop(self, keep: tuple[str, ...] = ()) -> None:
        """Forget the text of every page and article but the site's files named in `keep`; the names stay."""
        self.site.update({name: None for name in self.site if name not in keep})
        self.markdown.update(dict.fromkeys(self.markdown))


def load_labels(templates: Path = TEMPLATES, constants: Mapping[str, float] | None = None) -> dict:
    """labels.toml; with `constants`, its data slots filled in (pipeline.words.with_data_words)."""
    found = words.labels(templates)
    return found if constants is None else words.with_data_words(found, words.data_words(constants))


def read_articles(templates: Path = TEMPLATES) -> list[Article]:
    """Articles from site_templates/articles/*.md: front matter between '---' lines, then the body.

    Front matter keys: title, description, order (position in the navigation), nav (true: in the top
    navigation, false: only in the list of all articles), label (its short name in the navigation).
    TemplateError with every article's problem (file, line, what to fix) when one cannot be read.
    """
    articles, problems = [], []
    for path in sorted((templates / "articles").glob("*.md")):
        try:
            articles.append(parse_article(path.stem, path.read_bytes()))
        except FrontMatterError as exc:
            problems.append(Problem(f"site_templates/articles/{path.name}", exc.line, "", None, str(exc)))
        except OSError as exc:
            problems.append(Problem(f"site_templates/articles/{path.name}", 0, "", None, exc.strerror or str(exc)))
    if problems:
        raise TemplateError(problems)
    return sorted(articles, key=lambda a: (a.order, a.slug))


FRONT_MATTER_KEYS = ("title", "description", "order", "nav", "label")
NAV_HIDDEN = ("false", "нет", "no")
NAV_WORDS = ("true", "да", "yes", *NAV_HIDDEN)
_FRONT_LINE = re.compile(r"([A-Za-z_]+)\s*:\s*(.*)")


class FrontMatterError(ValueError):
    """An article that cannot be read: the text says what to fix, `line` where (0: the whole file)."""

    def __init__(self, line: int, entry: str, /, **slots):
        super().__init__(message(entry, **slots))
        self.line = line


def parse_article(slug: str, data: bytes) -> Article:
    """One article from its file's bytes; FrontMatterError for a name, an encoding or a front matter
    the site cannot use (each of the five keys checked: present, of its kind, once)."""
    from pipeline.schema import ID_PATTERN, RESERVED_NAMES

    if slug in RESERVED_NAMES:
        raise FrontMatterError(0, "front_matter.reserved", slug=slug, names=", ".join(sorted(RESERVED_NAMES)))
    if not re.fullmatch(ID_PATTERN, slug) or len(slug) > 100:
        raise FrontMatterError(0, "front_matter.bad_name", slug=slug)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrontMatterError(data.count(b"\n", 0, exc.start) + 1, "front_matter.not_utf8") from None
    head, meta, body = _front_matter(text.removeprefix("\ufeff").replace("\r\n", "\n"))
    for key in ("title", "description", "order"):
        if not meta.get(key, (0, ""))[1]:
            raise FrontMatterError(meta.get(key, (1,))[0], "front_matter.missing", name=key)
    order_line, order = meta["order"]
    if not re.fullmatch(r"-?[0-9]{1,9}", order):
        raise FrontMatterError(order_line, "front_matter.order", value=order[:40])
    nav_line, nav = meta.get("nav", (1, "true"))
    label = meta.get("label", (0, ""))[1] or (nav if nav.lower() not in NAV_WORDS else "")
    if not label:
        raise FrontMatterError(nav_line, "front_matter.missing", name="label")
    return Article(
        slug,
        meta["title"][1],
        meta["description"][1],
        int(order),
        label,  # "nav: <label>" of older articles still works
        body,
        head.count("\n") + 4,  # the two "---" lines and the front matter's lines come first
        nav.lower() not in NAV_HIDDEN,
    )


def _front_matter(text: str) -> tuple[str, dict[str, tuple[int, str]], str]:
    """(front matter, its keys -> (line, value), body) of an article's text; FrontMatterError if it has none."""
    if not text.startswith("---\n"):
        raise FrontMatterError(1, "front_matter.no_front_matter")
    head, separator, body = ("", True, text[8:]) if text.startswith("---\n---\n") else text[4:].partition("\n---\n")
    if not separator:
        raise FrontMatterError(1, "front_matter.unclosed")
    meta: dict[str, tuple[int, str]] = {}
    for number, line in enumerate(head.split("\n"), start=2):
        if not line.strip():
            continue
        found = _FRONT_LINE.fullmatch(line.strip())
        if not found or found[1] not in FRONT_MATTER_KEYS:
            raise FrontMatterError(
                number, "front_matter.bad_line", text=line.strip()[:60], keys=", ".join(FRONT_MATTER_KEYS)
            )
        if found[1] in meta:
            raise FrontMatterError(number, "front_matter.twice", name=found[1])
        meta[found[1]] = (number, found[2].strip())
    return head, meta, body


def markdown_table(view: TableView, sources: str) -> str:
    """A table as Markdown for the CMS: a pipe table (numeric columns right-aligned), its notes in italics
    (set apart from the article's own text), then its sources line."""
    align = ["---:" if n else "---" for n in view.numeric] or ["---"] * len(view.headers)
    lines = [
        "| " + " | ".join(fmt.md_cell(h) for h in view.headers) + " |",
        "|" + "|".join(align) + "|",
    ]
    lines += ["| " + " | ".join(fmt.md_cell(c) for c in row) + " |" for row in view.rows]
    out = "\n".join(lines)
    for note in view.notes:
        out += "\n\n*" + fmt.md_cell(note) + "*"
    return out + "\n\n" + sources


# What an article may use besides pipeline/render/registry.py's helpers and tables: three of Jinja's globals.
ARTICLE_GLOBALS = ("range", "dict", "namespace")
# Filters whose result passes into the article as markup, unescaped: an article has no use for them.
MARKUP_FILTERS = ("safe", "escape", "e", "forceescape", "urlize", "xmlattr", "tojson")
MAX_ARTICLE_CHARS = 20_000_000  # a rendered article longer than this is refused
MAX_REPEAT = 1_000_000  # the longest text or list `*` may make
MAX_POWER_BITS = 65_536  # the largest integer `**` may make
MAX_LOOP_STEPS = 1_000_000  # the most turns an article's loops may take in all (the site's use a few hundred)
# The memory budget of one article: no text or list an operation makes (`~`, `+`, `*`, `%`, join, replace,
# padding) may be longer than MAX_REPEAT, and all of them together no longer than MAX_MADE_CHARS. Each is
# checked before the value is made, from its operands' lengths, so a doubling loop stops at a megabyte.
MAX_MADE_CHARS = 64_000_000
# Filters and text methods that pad or wrap to a width an article gives: the width is capped by MAX_REPEAT.
WIDTH_FILTERS = ("center", "indent", "wordwrap", "truncate", "format")
WIDTH_METHODS = ("center", "ljust", "rjust", "zfill", "expandtabs")  # str.format: ArticleSandbox.wrap_str_format
# A width or precision of 7 digits or more, or one taken from the arguments: "%9999999s", "{:>{w}}", "%*d".
_WIDE_SPEC = re.compile(r"%[-#0 +]*(?:\*|\d{7,}|\d*\.(?:\*|\d{7,}))|\{[^{}]*:[^{}]*(?:\{|\d{7,})")
_LOOP_STEPS = threading.local()  # the turns taken by the loops (and the characters made) of the article being rendered


def _charge(size: int) -> None:
    """Count a text or list of `size` about to be made against the article's memory budget."""
    if size > MAX_REPEAT:
        raise SecurityError(message("articles.value_too_long", count=size, limit=MAX_REPEAT))
    _LOOP_STEPS.made = getattr(_LOOP_STEPS, "made", 0) + size
    if _LOOP_STEPS.made > MAX_MADE_CHARS:
        raise SecurityError(message("articles.memory_budget", limit=MAX_MADE_CHARS))


def _size(value) -> int:
    """The length a value adds to a text or list it is joined into (its text's, for anything but a list)."""
    if isinstance(value, str | list | tuple):
        return len(value)
    return len(str(value))


class _SizedCodeGenerator(jinja2.compiler.CodeGenerator):
    """Jinja's code generator with `~` sent through ArticleSandbox.concat, which checks the length first."""

    def visit_Concat(self, node, frame) -> None:  # noqa: N802 (Jinja's visitor name)
        self.write("environment.concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class Helpers:
    """The documented members of one helper object (`t`, `e`, `cmp`, `fmt`; registry.article_helpers), and nothing else."""

    __slots__ = ("_name", "_members")

    def __init__(self, name: str, members: dict[str, Callable]):
        self._name = name
        self._members = members

    def __getattr__(self, attribute: str):
        if attribute.startswith("_"):
            raise AttributeError(attribute)  # its own slots, before they are set
        try:
            return self._members[attribute]
        except KeyError:
            raise AttributeError(attribute) from None


class ArticleSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox (no attributes starting with "_", no Python internals, no changing of
    lists or dicts), limited further to the helpers, with `*` and `**` kept from making huge values."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})
    compiled_as = "loops counted, texts sized"  # part of the bytecode cache's key: how the template is compiled
    code_generator_class = _SizedCodeGenerator

    def concat(self, values: tuple) -> str:
        """`a ~ b ~ …`, refused before it is made when the text would be too long."""
        _charge(sum(_size(v) for v in values))
        return "".join(map(str, values))

    def _parse(self, source: str, name: str | None, filename: str | None) -> jinja2.nodes.Template:
        """The template's tree with every loop's iterable passed through `_counted`, which stops an
        article whose loops (nested ones multiply) would run more than MAX_LOOP_STEPS turns."""
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(jinja2.nodes.For):
            loop.iter = jinja2.nodes.Filter(loop.iter, "_counted", [], [], None, None, lineno=loop.lineno)
        tree.set_environment(self)
        return tree

    def wrap_str_format(self, value):  # "…".format and "…".format_map, as the article takes them
        wrapped = super().wrap_str_format(value)
        if wrapped is not None:
            _refuse_wide(value.__self__, ())
        return wrapped

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (Jinja's own signature)
        if getattr(__obj, "__self__", None).__class__ is str:
            name = getattr(__obj, "__name__", "")
            if name in WIDTH_METHODS:
                _refuse_wide("", (*args, *kwargs.values()))
            elif name == "join" and len(args) == 1 and not kwargs:
                items = list(args[0])
                _charge(len(__obj.__self__) * max(len(items) - 1, 0) + sum(_size(i) for i in items))
                args = (items,)
            elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
                _charge(_replaced_size(__obj.__self__, *args[:2], *args[2:3]))
        return super().call(__context, __obj, *args, **kwargs)

    def getattr(self, obj, attribute: str):
        if type(obj) is Helpers and attribute not in obj._members:
            raise SecurityError(message("articles.not_helper", name=f"{obj._name}.{attribute}"))
        if isinstance(obj, jinja2.Undefined):
            obj._fail_with_undefined_error()  # "'x' is undefined" says more than a refused attribute of it
        return super().getattr(obj, attribute)

    def is_safe_attribute(self, obj, attr: str, value) -> bool:
        if type(obj) is Helpers:
            return attr in obj._members
        return super().is_safe_attribute(obj, attr, value)

    def call_binop(self, context, operator: str, left, right):
        if operator == "**" and type(left) is int and type(right) is int and right > 0:
            if right * max(abs(left).bit_length() - 1, 0) > MAX_POWER_BITS:
                raise SecurityError(message("articles.power_too_large", left=left, right=right))
        if operator == "*":
            for items, times in ((left, right), (right, left)):
                if isinstance(items, str | list | tuple) and type(times) is int and len(items) * times > MAX_REPEAT:
                    raise SecurityError(message("articles.repeat_too_long", count=len(items) * times))
        if operator == "%" and isinstance(left, str):
            _refuse_wide(left, ())
            _charge(len(left) + sum(_size(v) for v in (right if isinstance(right, tuple) else (right,))))
        if operator == "+" and isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
            _charge(len(left) + len(right))
        if operator == "*":
            for items, times in ((left, right), (right, left)):
                if isinstance(items, str | list | tuple) and type(times) is int and times > 0:
                    _charge(len(items) * times)
        return super().call_binop(context, operator, left, right)


def _refuse_wide(text: str, widths: tuple) -> None:
    """SecurityError for a width an article could make a huge text with: a number over MAX_REPEAT
    given to a padding filter or method, or such a width in a format string."""
    for value in widths:
        if type(value) is int and value > MAX_REPEAT:
            raise SecurityError(message("articles.width_too_large", width=value))
    if isinstance(text, str) and _WIDE_SPEC.search(text):
        raise SecurityError(message("articles.format_too_wide", spec=repr(_WIDE_SPEC.search(text)[0])))


def _replaced_size(text: str, old: str, new: str, count=None) -> int:
    """The length of text.replace(old, new, count), known before it is made."""
    found = text.count(old) if old else len(text) + 1
    if type(count) is int and count >= 0:
        found = min(found, count)
    return len(text) + found * (len(new) - len(old))


def _joined_checked(flt: Callable) -> Callable:
    """The join filter, refused before it joins when the separators alone would pass the budget."""

    @functools.wraps(flt)
    def checked(eval_ctx, value, d="", attribute=None):
        items = list(value)
        _charge(len(str(d)) * max(len(items) - 1, 0) + (sum(_size(i) for i in items) if attribute is None else 0))
        return flt(eval_ctx, items, d, attribute)

    return checked


def _replace_checked(flt: Callable) -> Callable:
    """The replace filter, refused before it replaces when the result would pass the budget."""

    @functools.wraps(flt)
    def checked(eval_ctx, s, old, new, count=None):
        _charge(_replaced_size(str(s), str(old), str(new), count))
        return flt(eval_ctx, s, old, new, count)

    return checked


def _counted(items):
    """A loop's items, each turn counted against MAX_LOOP_STEPS (reset for every article)."""
    for item in items:
        _LOOP_STEPS.taken = getattr(_LOOP_STEPS, "taken", 0) + 1
        if _LOOP_STEPS.taken > MAX_LOOP_STEPS:
            raise SecurityError(message("articles.loops_too_long", limit=MAX_LOOP_STEPS))
        yield item


def _width_checked(name: str, flt: Callable) -> Callable:
    """A padding filter that refuses a huge width first (see _refuse_wide)."""

    @functools.wraps(flt)
    def checked(value, *args, **kwargs):
        if name == "format":  # "%9999999s"|format(x): the width is in the text, the arguments are values
            _refuse_wide(value, ())
        else:
            _refuse_wide("", (*args, *kwargs.values()))
        return flt(value, *args, **kwargs)

    return checked


def _inert(value):
    return value if isinstance(value, Markup) else fmt.md_inline(value)


def article_environment(bodies: dict[str, tuple[str, str]]) -> ArticleSandbox:
    """The articles' sandboxed environment, reading each article's body from `bodies` (compiled name ->
    (body, file)). Every value an article prints is made inert Markdown (no links, emphasis or HTML
    from data); only the tables, already escaped, pass as they are."""

    def source(name: str):
        if name not in bodies:
            return None  # an article includes, imports or extends no other file
        body, file = bodies[name]
        return body, file, lambda: True

    env = ArticleSandbox(
        loader=jinja2.FunctionLoader(source),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        finalize=_inert,
        keep_trailing_newline=True,
    )
    env.globals = {name: env.globals[name] for name in ARTICLE_GLOBALS}
    for name in MARKUP_FILTERS:
        del env.filters[name]
    for name in WIDTH_FILTERS:
        env.filters[name] = _width_checked(name, env.filters[name])
    env.filters["join"] = _joined_checked(env.filters["join"])
    env.filters["replace"] = _replace_checked(env.filters["replace"])
    env.filters["_counted"] = _counted
    env.bytecode_cache = _bytecode_cache(env)
    env.bodies = bodies  # render_lines reads an article's source for its line numbers
    return env


def article_template(article: Article, warm: Warm) -> jinja2.Template:
    """The compiled template of an article: compiled once per content in a warm process (its name
    carries the body's hash), and kept on disk between processes (Jinja's bytecode cache)."""
    name = f"{article.slug}.{hashlib.sha256(article.body.encode()).hexdigest()}"
    warm.article_bodies[name] = (article.body, article.file)
    if warm.article_env is None:
        warm.article_env = article_environment(warm.article_bodies)
    return warm.article_env.get_template(name)


# Exceptions an article's template or a helper it calls can raise on a bad template (an unknown
# id, a wrong argument, a refused attribute, endless recursion): reported against the article.
ARTICLE_ERRORS = (
    jinja2.TemplateError,
    LookupError,
    TypeError,
    ValueError,
    ArithmeticError,
    RecursionError,
    MemoryError,
)


def render_lines(template: jinja2.Template, context: dict) -> tuple[str, Callable[[int], int]]:
    """template.render(context), and a function giving the template line that wrote a character of
    the result (for the editor: the line of a removed tag or link)."""
    _LOOP_STEPS.taken = _LOOP_STEPS.made = 0
    gen = template.root_render_func(template.new_context(context))
    code = gen.gi_code
    literals = {id(c) for c in code.co_consts if type(c) is str}
    parts: list[str] = []
    starts: list[int] = []
    offsets: list[int] = []  # of the yield in the compiled code: its line is looked up only when asked
    size = 0
    try:
        for chunk in gen:
            parts.append(chunk)
            starts.append(size)
            offsets.append(gen.gi_frame.f_lasti)
            size += len(chunk)
            if size > MAX_ARTICLE_CHARS:
                raise SecurityError(message("articles.too_long", limit=MAX_ARTICLE_CHARS))
    except Exception:
        template.environment.handle_exception()
    source = getattr(template.environment, "bodies", {}).get(template.name, ("", ""))[0]
    positions: list[tuple] = []

    def line_at(offset: int) -> int:
        k = bisect_right(starts, offset) - 1
        if k < 0:
            return 1
        positions[:] = positions or list(code.co_positions())  # (line, ...) per instruction
        code_line = positions[offsets[k] // 2][0] or 1
        line = template.get_corresponding_lineno(code_line)
        if id(parts[k]) not in literals:
            return line  # an expression's output: the line of the expression
        # Text of the template itself: find it in the source, at or after the nearest line Jinja knows.
        within = offset - starts[k]
        piece = parts[k][within : within + 40].split("\n")[0]
        found = [source.count("\n", 0, m.start()) + 1 for m in re.finditer(re.escape(piece), source)] if piece else []
        after = [n for n in found if n >= line]
        if after or found:
            return min(after) if after else found[-1]
        return line + parts[k].count("\n", 0, within)

    return "".join(parts), line_at


def template_line(exc: BaseException, filename: str | None) -> int:
    """The template line an exception was raised at (Jinja puts the template's lines into the traceback)."""
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return exc.lineno or 0
    line, tb = 0, exc.__traceback__
    while tb is not None:
        if filename and tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def article_problem(article: Article, exc: BaseException) -> Problem:
    """An article's template error as the editor reads it: file, line, what was refused or is unknown."""
    line = template_line(exc, article.file)
    if isinstance(exc, russian.ClaimError):
        rule = message("articles.claim", title=article.title, claim=exc.message())
    elif isinstance(exc, SecurityError):
        rule = message("articles.refused", reason=template_errors.sandbox_text(str(exc)))
    elif isinstance(exc, KeyError):
        rule = message("articles.unknown_id", id=exc)
    elif isinstance(exc, UndeclaredSetup):
        rule = str(exc)
    elif isinstance(exc, jinja2.TemplateSyntaxError):
        rule = message("articles.syntax", detail=template_errors.jinja_text(str(exc.message)))
    elif isinstance(exc, jinja2.TemplateNotFound):
        rule = message("articles.no_include", name=exc.message)
    elif isinstance(exc, jinja2.TemplateError):
        rule = template_errors.jinja_text(str(exc.message))
    elif isinstance(exc, RecursionError):
        rule = message("articles.recursion")
    elif isinstance(exc, MemoryError):
        rule = message("articles.memory")
    else:
        rule = template_errors.python_text(exc)
    return Problem(article.file, article.line - 1 + line if line else 0, "", None, rule)


def html_environment(templates: Path, warm: Warm) -> jinja2.Environment:
    """The page templates' environment, one per warm process: `just serve` compiles a template again
    only when it changed, and compiled templates are kept on disk between processes (Jinja's
    bytecode cache, in the system's temporary folder, keyed by each template's source)."""
    if templates not in warm.environments:
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(templates),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
        )
        env.bytecode_cache = _bytecode_cache(env)
        # tojson writes text as it is (UTF-8), not as \uXXXX escapes: a third of the size for Russian
        # (still safe in a script element: Jinja escapes <, >, & and ').
        env.policies["json.dumps_kwargs"] = {"sort_keys": True, "ensure_ascii": False}
        env.filters.update(gb=fmt.gb, integer=fmt.integer, date=functools.lru_cache(maxsize=4096)(fmt.date))
        env.filters.update(number=fmt.number, count=russian.count, listed=fmt.listed, noun=russian.noun_form)
        warm.environments[templates] = env
    return warm.environments[templates]


def _bytecode_cache(env: jinja2.Environment) -> jinja2.BytecodeCache | None:
    """Jinja's own per-user cache folder; the file names carry the environment's settings,
    since the compiled code depends on them and Jinja keys its cache on the source only."""
    settings = repr(
        (env.autoescape, env.undefined, env.finalize, env.keep_trailing_newline, env.trim_blocks, env.lstrip_blocks)
        + (type(env).__qualname__, sorted(getattr(env, "intercepted_binops", ())), sorted(env.filters))
        + (getattr(env, "compiled_as", ""),)
    )
    tag = hashlib.sha256(re.sub(r" at 0x[0-9a-f]+", "", settings).encode()).hexdigest()[:12]
    try:
        return jinja2.FileSystemBytecodeCache(pattern=f"__gpu_finetune_{tag}_%s.cache")
    except RuntimeError:  # no safe temporary folder: templates are compiled in memory only
        return None


def plain_refs(refs: list[dict]) -> bool:
    """Sources html_table can write: rows of the references table."""
    return all(type(r) is dict and {"url", "title", "checked_on"} <= r.keys() for r in refs)


class NotPlain(Exception):
    """A table html_table does not write (a cell other than text or Link, a column without a numeric flag)."""


def _cell_opens(view: TableView, num: list[str], layout: str) -> list[str]:
    """The opening tag of each column's cells; in a stacked table each value carries its column's
    name (data-label), shown beside it on a phone."""
    if layout != "stack":
        return ['<th scope="row">'] + [f"<td{n}>" for n in num[1:]]
    names = [escape(h) for h in view.headers] + [""] * (len(num) - len(view.headers))
    return ['<th scope="row">'] + [f'<td{n} data-label="{names[i]}">' for i, n in enumerate(num) if i]


@dataclass
class TableText:
    """What the tables of one render share: the labels, the date filter, and each cell's HTML made so
    far ((root, opening tag) -> cell -> its HTML: columns repeat their texts, pages their links), and
    the typography of each distinct text before and after a table's rows (most pages' tables share
    their headers, notes, sources and downloads)."""

    labels: dict
    date: Callable
    cells: dict = field(default_factory=dict)
    typeset: dict = field(default_factory=dict)

    def set_once(self, text: str, typography: Callable[[str], str]) -> str:
        """typography(text), made once per distinct text (it is a function of the text alone)."""
        done = self.typeset.get((typography, text))
        if done is None:
            done = self.typeset[typography, text] = typography(text)
        return done


def html_table(
    view: TableView, refs: list[dict], root: str, text: TableText, typography: Callable[[str], str] | None = None
) -> Markup:
    """What partials/table.html's render_table writes (see Renderer.table_html); NotPlain if it cannot.

    With `typography` (russian.typograph), what that gives for the whole table, made piece by piece:
    its rules never reach across a tag, so each cell (which starts and ends with a tag) is set on its
    own, once per distinct cell, and so are the parts before and after the rows."""
    root_ = escape(root)
    num = [' class="num"' if n else "" for n in view.numeric]
    width = len(num)
    if len(view.headers) > width:
        raise NotPlain
    layout = view.layout
    opens = _cell_opens(view, num, layout)
    closes = ["</th>"] + ["</td>"] * (width - 1)
    # Columns repeat their texts (fit labels, card counts) and pages their first columns (links
    # to every model or server): each cell's HTML is made once per render.
    seen = [text.cells.setdefault((root, tag, typography is not None), {}) for tag in opens]

    def cell_html(i: int, cell) -> str:
        if type(cell) is Link:
            shown = escape(cell.text)
            inner = f'<a href="{root_}{escape(cell.href)}">{shown}</a>'
        elif type(cell) is str:
            inner = shown = escape(cell)
        else:
            raise NotPlain
        html = f"{opens[i]}{inner}{closes[i]}"
        if typography is not None and russian.may_change(shown):
            html = typography(html)
        seen[i][cell] = html
        return html

    C = text.labels["common"]
    parts = [_table_head(view, num, layout, C)]
    if typography is not None:
        parts = [text.set_once(parts[0], typography)]
    for row in view.rows:
        if len(row) > width:
            raise NotPlain
        line = ["<tr>"]
        for i, cell in enumerate(row):
            html = seen[i].get(cell)
            # A text equal to a cached one may be of another type (Markup == str): check it.
            ok = html is not None and (type(cell) is str or type(cell) is Link)
            line.append(html if ok else cell_html(i, cell))
        line.append("</tr>\n")
        parts.append("".join(line))
    tail = _table_tail(view, refs, root_, C, text.date)
    parts.append(tail if typography is None else text.set_once(tail, typography))
    return Markup("".join(parts))


def _table_head(view: TableView, num: list[str], layout: str, C: dict) -> str:
    """html_table's text before the rows."""
    parts = [
        f'\n<figure class="data-table">\n<div class="scroll{" " + layout if layout else ""}" tabindex="0" role="region"',
        f' aria-label="{escape(C["table_region"])}: ',
        escape(view.headers[0]) if view.headers else "",
        '"><table',
        ' class="sortable"' if view.sortable else "",
        ">\n<thead><tr>",
        *[f'<th scope="col"{num[i]}>{escape(h)}</th>' for i, h in enumerate(view.headers)],
        "</tr></thead>\n<tbody>\n",
    ]
    return "".join(parts)


def _table_tail(view: TableView, refs: list[dict], root_: str, C: dict, date: Callable) -> str:
    """html_table's text after the rows: the notes, the sources line and the downloads."""
    parts = ["</tbody>\n</table></div>\n<figcaption>\n"]
    parts += [f'<p class="note">{escape(note)}</p>' for note in view.notes]
    parts.append(
        f'\n<p class="source" data-pagefind-ignore="">{escape(C["sources"] if len(refs) > 1 else C["source"])}:\n'
    )
    shown = [
        (f'<a href="{escape(r["url"])}">{escape(r["title"])}</a>' if r["url"] else str(escape(r["title"])))
        + f", {escape(C['checked'])} {escape(date(r['checked_on']))}"
        for r in refs
    ]
    parts.append("; ".join(shown) + f".\n{escape(C['download'])}: ")
    parts.append(", ".join(f'<a href="{root_}data/{escape(n)}.csv">{escape(n)}.csv</a>' for n in view.downloads))
    if view.downloads:  # the table's section of the data page, with its citation
        parts.append(f'. <a href="{root_}data.html#{escape(view.downloads[0])}">{escape(C["cite"])}</a>')
    parts.append(".</p>\n</figcaption>\n</figure>")
    return "".join(parts)


def fast_tables_verified(env: jinja2.Environment, labels: dict, verified: dict[str, bool]) -> bool:
    """True when html_table writes exactly what the render_table macro writes, on sample tables
    with every kind of cell, flag and caption (checked once per version of the partial and labels,
    remembered in `verified`: the last one only)."""
    source, _, _ = env.loader.get_source(env, "partials/table.html")
    key = source + repr(labels.get("common"))
    if key not in verified:
        macro = env.get_template("partials/table.html").module
        date = env.filters["date"]
        tricky = "<b>\"A&B\" 'c'</b>"
        link = Link(tricky, "models/a&b.html")
        ref = {"url": "https://example.org/?a=1&b=<2>", "title": tricky, "checked_on": dt.date(2026, 1, 2)}
        ref_no_url = {"url": None, "title": "No link", "checked_on": dt.date(2025, 12, 31)}
        samples = [
            (
                TableView(
                    ["h", tricky, "n"],
                    [[link, "x", "1 200"], ["y", link, tricky]],
                    ["r"],
                    ["t", "u"],
                    [False, False, True],
                    [tricky, "note"],
                    True,
                ),
                [ref, ref_no_url],
                "../",
            ),
            (TableView([tricky], [[tricky]], ["r"], ["t"], [True]), [ref_no_url], ""),
            (TableView(["a", "b"], [], [], [], [True, False]), [], "../../"),
            (
                TableView(
                    ["m", tricky, "b", "c"], [[link, "1", tricky, "2"]], ["r"], ["t"], [False, True, False, True]
                ),
                [ref],
                "",
            ),
            (
                TableView(["m", "n"], [[f"r{i}", str(i)] for i in range(TALL_MIN_ROWS)], [], [], [False, True]),
                [],
                "../",
            ),
        ]
        same = all(
            str(html_table(view, refs, root, TableText(labels, date)))
            == str(macro.render_table(view=view, refs=refs, labels=labels, root=root))
            for view, refs, root in samples
        )
        verified.clear()
        verified[key] = same
    return verified[key]


def check_articles(catalog: Catalog, validation: Validation | None = None, templates: Path = TEMPLATES) -> None:
    """Render every article without writing anything: raises TemplateError with every article's
    problem (a template error or a claim the data no longer supports), as `build` would."""
    renderer = Renderer(catalog, validation, templates)
    problems: list[Problem] = []
    for article in read_articles(templates):
        try:
            renderer.render_article(article, "md")
        except TemplateError as exc:
            problems += exc.problems
    if problems:
        raise TemplateError(problems)


_PLAIN = (str, int, float, bool, type(None))


def _frozen(value) -> tuple:
    """A hashable form of a plain value (lists, tuples and dicts of text, numbers and None; ValueError
    for anything else), its types kept: 1, 1.0 and True differ."""
    if isinstance(value, _PLAIN):
        return type(value).__name__, value
    if isinstance(value, (list, tuple)):
        return type(value).__name__, tuple(_frozen(item) for item in value)
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return "dict", tuple((key, _frozen(item)) for key, item in value.items())
    raise ValueError(type(value).__name__)


def _view_key(kind: str, kwargs: dict) -> tuple | None:
    """What names an article's table: its kind and arguments, when they are plain values (an article
    is rendered twice, as HTML and as Markdown, and its tables are the same); None otherwise."""
    try:
        return kind, _frozen(kwargs)
    except ValueError:
        return None


class Renderer:
    def __init__(  # noqa: PLR0913 (what a render is of, and the two things it may reuse)
        self,
        catalog: Catalog,
        validation: Validation | None = None,
        templates: Path = TEMPLATES,
        base_url: str = "/",
        warm: Warm | None = None,
        memo: PageMemo | None = None,
        sources: Path | None = None,
    ):
        """`warm`: what a warm process keeps between builds (pipeline.warm); a new one by default.
        `memo`: the pages of the previous build that may be taken as they are (pipeline.render.page_memo);
        None renders every page. `sources`: whose release history (sources/releases/, pipeline.publish.releases)
        the data page, the changelog and the data package show; None: no release. `indexer` (set by the
        build: pipeline.publish.search.Indexer) is handed each page as it is rendered."""
        self.memo = memo
        self.indexer = None
        self.history = releases.History() if sources is None else releases.read_history(sources)
        self.warm = Warm() if warm is None else warm
        # Only this build's article bodies: each is registered again as it is compiled (an editing
        # session saving an article many times would otherwise keep every version).
        self.warm.article_bodies.clear()
        self.catalog = catalog
        self.validation = validation
        self.templates = templates
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self.figures = words.data_words(catalog.constants)
        self.labels = words.with_data_words(words.labels(templates), self.figures)
        self.site_config = tomllib.loads((templates / "site.toml").read_text(encoding="utf-8"))
        self.tables = Tables(catalog, self.labels)
        problems = config_problems(self.tables, self.site_config)
        if problems:
            raise TemplateError(problems)
        self.retention = releases.retention(self.site_config)  # checked by config_problems
        self.entities = EntityTables(self.tables, self.labels, self.site_config)
        self.estimator = EstimatorTables(catalog, self.labels, self.tables)
        self.comparison = Comparison(catalog, self.labels, self.tables, self.estimator)
        self.html_env = html_environment(templates, self.warm)
        self.fast_tables = fast_tables_verified(self.html_env, self.labels, self.warm.tables_verified)
        self.table_text = TableText(self.labels, self.html_env.filters["date"])  # html_table's, this render's
        self.assets: dict[str, bytes] = {}
        self.asset_names: dict[str, str] = {}
        self.article_warnings: set[Problem] = set()
        self.pages: list[str] = []  # every page rendered (the sitemap lists them)
        self.articles: list[Article] | None = None  # read_articles(), when render() starts
        self.ahead_files: dict[str, bytes] = {}  # what pages made ahead (preview) made besides themselves
        self.article_helpers: dict[str, Helpers] = {}
        self.article_views: dict[tuple, TableView] = {}  # an article's tables, made once for both its forms
        # Where a typeset table goes (Renderer.page): a comment no template or data can hold.
        self.table_mark = f"<!--table-{os.urandom(8).hex()}-"

    def asset(self, filename: str) -> str:
        """A file of site_templates/static/, published under a content-hashed name (returned).
        Read once per build: every page asks for the stylesheet and the table script."""
        if filename not in self.asset_names:
            content = (self.templates / "static" / filename).read_bytes()
            stem, _, ext = filename.rpartition(".")
            name = f"{stem}.{hashlib.sha256(content).hexdigest()[:10]}.{ext}"
            self.assets[name] = content
            self.asset_names[filename] = name
        return self.asset_names[filename]

    # -- sources line under each table --
    def source_refs(self, view: TableView) -> list[dict]:
        return [self.tables.reference(r) for r in view.references]

    def sources_markdown(self, view: TableView) -> str:
        C = self.labels["common"]
        parts = []
        for ref in self.source_refs(view):
            title = fmt.md_cell(ref["title"])
            shown = f"[{title}]({fmt.md_url(ref['url'])})" if ref["url"] else title
            parts.append(f"{shown}, {C['checked']} {fmt.date(ref['checked_on'])}")
        downloads = ", ".join(f"[{name}.csv](data/{name}.csv)" for name in view.downloads)
        label = C["sources"] if len(parts) > 1 else C["source"]
        return f"{label}: " + "; ".join(parts) + f". {C['download']}: {downloads}."

    # -- articles --
    def render_article(self, article: Article, mode: str) -> tuple[str, dict[str, TableView]]:
        """The article body in Markdown, its raw HTML and links cleaned (sanitize.clean_markdown; what was
        removed goes to self.article_warnings); in html mode, tables are left as tokens to fill later.
        Raises TemplateError when the template fails or is refused by the sandbox."""
        views: dict[str, TableView] = {}
        builders = registry.article_tables(self.tables, self.estimator, self.comparison)

        def table(kind: str, **kwargs) -> Markup:
            if kind not in builders:
                raise SecurityError(message("articles.not_table", kind=kind))
            key = _view_key(kind, kwargs)
            view = self.article_views.get(key) if key else None
            if view is None:
                view = builders[kind](**kwargs)
                if key:
                    self.article_views[key] = view
            if mode == "md":
                return Markup(markdown_table(view, self.sources_markdown(view)))
            token = TOKEN.format(len(views))
            views[token] = view
            return Markup("\n\n" + token + "\n\n")

        if not self.article_helpers:  # made once per renderer
            helpers = registry.article_helpers(self.tables, self.estimator, self.comparison)
            self.article_helpers = {name: Helpers(name, members) for name, members in helpers.items()}
        context = {**self.article_helpers, "table": table, "labels": self.labels}
        try:
            text, line_at = render_lines(article_template(article, self.warm), context)
        except ARTICLE_ERRORS as exc:
            raise TemplateError([article_problem(article, exc)]) from None
        cleaned, removed = sanitize.clean_markdown(text)
        for item in removed:
            self.article_warnings.add(
                Problem(article.file, article.line - 1 + line_at(item.offset), "", None, item.what)
            )
        return cleaned, views

    def article_html(self, article: Article) -> str:
        text, views = self.render_article(article, "html")
        body = markdown.markdown(text, extensions=["tables", "sane_lists"], output_format="html")
        for token, view in views.items():
            body = body.replace(f"<p>{token}</p>", str(self.table_html(view, "")))
        body, removed = sanitize.clean_html(body)
        self.article_warnings.update(Problem(article.file, 0, "", None, what) for what in removed)
        return body

    def _table_html(self, view: TableView, root: str) -> Markup:
        """A table as partials/table.html's render_table macro writes it.

        Entity pages hold tens of thousands of cells, and a Jinja macro call per cell was most of
        the rendering time: when the macro gives exactly what `html_table` gives for every kind of
        cell (checked on sample tables whenever the partial changes), Python writes the tables.
        """
        refs = self.source_refs(view)
        if self.fast_tables and plain_refs(refs):
            try:
                return html_table(view, refs, root, self.table_text)
            except NotPlain:
                pass
        macro = self.html_env.get_template("partials/table.html").module
        return macro.render_table(view=view, refs=refs, labels=self.labels, root=root)

    def table_html(self, view: TableView, root: str) -> Markup:
        """A table (partials/table.html)."""
        return self._table_html(view, root)

    def typeset_table(self, view: TableView, root: str) -> tuple[str, str, str] | None:
        """table_html(view, root) with the page's typography applied, as (the text before its first tag,
        the rest up to its last tag, the text after it), or None when html_table does not write it.
        The rules never reach across a tag, so a table set on its own (html_table, cell by cell) is
        what the page's pass would make of it."""
        refs = self.source_refs(view)
        if not (self.fast_tables and plain_refs(refs)):
            return None
        try:
            html = html_table(view, refs, root, self.table_text, russian.typograph)
        except NotPlain:
            return None
        first, last = html.find("<"), html.rfind(">") + 1
        lead, trail = html[: max(first, 0)], html[last:]
        if first < 0 or lead.strip() or trail.strip():  # text outside the tags meets the page's text
            return None
        return lead, html[first:last], trail

    def page(self, template: str, path: str, root: str | None = None, **context) -> str:
        """One HTML page; `root` leads from it back to the site root, so links work under any base path.
        A page whose inputs are those of the previous build's is taken from it (self.memo)."""
        root = "../" * path.count("/") if root is None else root
        self.pages.append(path)
        digest = None if self.memo is None else self.memo.digest(template, path, root, context)
        kept = None if self.memo is None else self.memo.reuse(path, digest)
        if kept is not None:
            text, assets = kept
            for filename in assets:  # published with this build, as the page links to them
                self.asset(filename)
            self.memo.record(path, digest, assets, reused=True)
            if self.indexer is not None:
                self.indexer.add(path, text)
            return text
        used: list[str] = []
        tables: list[str] = []  # typeset apart; the page's pass sees a comment in each one's place

        def asset(filename: str) -> str:
            used.append(filename)
            return root + self.asset(filename)

        def table(view: TableView) -> Markup:
            typeset = self.typeset_table(view, root)
            if typeset is None:
                return self.table_html(view, root)
            lead, html, trail = typeset
            tables.append(html)
            return Markup(f"{lead}{self.table_mark}{len(tables) - 1}-->{trail}")

        html = self.html_env.get_template(template).render(
            root=root,
            asset=asset,
            table=table,
            nav=self.articles,
            labels=self.labels,
            figures=self.figures,
            path=path,
            canonical=self.base_url + path.removesuffix("index.html"),
            **context,
        )
        if self.memo is not None:
            self.memo.record(path, digest, used, reused=False)
        html = russian.typograph(html, "html")
        for i, typeset in enumerate(tables):
            html = html.replace(f"{self.table_mark}{i}-->", typeset, 1)
        if self.indexer is not None:
            self.indexer.add(path, html)
        return html

    def entity_pages(self) -> dict[str, str]:
        """A page per model, method, GPU and server, an index of each kind, and the comparisons."""
        out = {}
        for kind in ENTITY_KINDS:
            path = f"{kind}/index.html"
            out[path] = self.page("list.html", path, **self.index_context(kind))
        for kind, template in ENTITY_KINDS.items():
            for entity_id in self.entity_ids(kind):
                path = f"{kind}/{entity_id}.html"
                out[path] = self.page(template, path, **self.entity_context(kind, entity_id))
        self.comparison_pages(out)
        return out

    def index_context(self, kind: str) -> dict:
        """What list.html shows of the index of one kind of entity (ENTITY_KINDS)."""
        names, view = self.labels["entity_pages"][kind], getattr(self.entities, f"{kind}_index")()
        return dict(heading=names["title"], description=names["description"], view=view)

    def entity_ids(self, kind: str) -> list[str]:
        """The ids of the entities of one kind that have a page."""
        return getattr(self.entities, f"{kind[:-1]}_ids")()

    def entity_context(self, kind: str, entity_id: str) -> dict:
        """What the page of one entity shows: its kind's context and the way back to the kind's index."""
        context = getattr(self, f"{kind[:-1]}_context")
        section = dict(section_href=f"{kind}/index.html", section_title=self.labels["entity_pages"][kind]["title"])
        return section | context(entity_id)

    def preview(self, path: str) -> str | None:
        """The page at `path` exactly as render() writes it, made on its own and ahead of the rest: an
        entity's page, an index of entities, an article, the home page, the charts or the calculator (`serve` shows
        the pages an editor has open before the whole build is written). None for any other page. This
        render's own record (the page memo, the search index, the pages the sitemap lists, the articles'
        warnings) is left as it was, so render() afterwards writes what it would have written without it."""
        kept = self.memo, self.indexer, self.pages, set(self.article_warnings)
        self.memo, self.indexer, self.pages = None, None, []
        try:
            return self._preview(path)
        finally:
            self.memo, self.indexer, self.pages = kept[:3]
            self.article_warnings = kept[3]

    def preview_files(self) -> dict[str, bytes]:
        """What the pages made ahead (preview) load besides themselves, as render() writes it: the
        static files they link (under content-hashed names), the charts drawn for them and the data the
        calculator panels read."""
        files = dict(self.assets) | self.ahead_files
        files["data/calculator.json"] = calculator.calculator_json(self.catalog).encode("utf-8")
        return files

    def _preview(self, path: str) -> str | None:
        if self.articles is None:  # every page's navigation lists them
            self.articles = read_articles(self.templates)
        kind, _, name = path.partition("/")
        if kind in ENTITY_KINDS:
            if name == "index.html":
                return self.page("list.html", path, **self.index_context(kind))
            entity_id = name.removesuffix(".html")
            if name.endswith(".html") and entity_id in set(self.entity_ids(kind)):
                return self.page(ENTITY_KINDS[kind], path, **self.entity_context(kind, entity_id))
            return None
        for article in self.articles:
            if path == f"{article.slug}.html":
                return self.article_page(article, Markup(self.article_html(article)))
        if path == "index.html":
            return self.home_page()
        if path == "charts.html":
            made = charts.pages(self.catalog, self.labels, self.page, self.source_refs)
            self.ahead_files |= {name: text.encode("utf-8") for name, text in made.items() if name != path}
            return made[path]
        return self.calculator_page() if path == "calculator.html" else None

    def article_page(self, article: Article, body: Markup) -> str:
        """An article's page around its body (article_html)."""
        path = f"{article.slug}.html"
        return self.page("article.html", path, article=article, body=body, closing=self.closing(path, article.title))

    def home_page(self) -> str:
        """The home page: the articles."""
        return self.page("index.html", "index.html", articles=self.articles)

    def model_context(self, m: str) -> dict:
        """What model.html shows of one model."""
        entities, model = self.entities, self.tables.model(m)
        return dict(
            model=model,
            heading=model["display_name"],
            facts=self.model_facts(model),
            memory=entities.model_memory(m),
            cards=entities.model_cards(m),
            servers=entities.model_servers(m),
            cheapest=entities.model_cheapest(m),
            plan_lead=entities.model_plan_lead(m),
            errors_pct=entities.errors_pct,
            quote_url=entities.quote_link(m),
            plan_with=entities.plan_with,
            quote_contacts=self.site_config["quote"],
            breakdown=self.estimator.bars(m),
            breakdown_view=self.estimator.breakdown_table(m),
        )

    def method_context(self, me: str) -> dict:
        """What method.html shows of one fine-tuning method."""
        method, names = self.tables.method(me), self.labels["entity_pages"]["methods"]
        facts = [(names["bits"], fmt.integer(method["bits"])), (names["name_en"], method["name_en"])]
        return dict(method=method, heading=method["name_ru"], facts=facts, models=self.entities.method_models(me))

    def gpu_context(self, g: str) -> dict:
        """What gpu.html shows of one GPU."""
        entities, gpu = self.entities, self.tables.gpu(g)
        return dict(
            gpu=gpu,
            heading=gpu["name"],
            facts=self.gpu_facts(gpu),
            card_counts=[fmt.integer(n) for n in self.site_config["gpu_card_counts"]],
            summary=entities.gpu_summary(g),
            models=entities.gpu_models(g),
        )

    def server_context(self, s: str) -> dict:
        """What server.html shows of one server."""
        entities, server = self.entities, self.tables.server(s)
        return dict(
            server=server,
            heading=server["display_name"],
            facts=self.server_facts(server),
            jobs=entities.server_jobs(s),
            quote_url=entities.quote_link(None, server_id=s),
            quote_contacts=self.site_config["quote"],
        )

    def comparison_pages(self, out: dict[str, str]) -> None:
        """The comparisons into `out`: their index, the servers × main tasks, and a GPU × model page per method."""
        E, t = self.entities, self.tables
        compare = self.labels["compare"]
        methods = [(f"compare/gpu-cards-{me}.html", t.method(me)["name_ru"]) for me in E.method_ids()]
        cite = self.citation()
        view = E.compare_server_fit()
        out["compare/index.html"] = self.page(
            "compare_index.html",
            "compare/index.html",
            methods=methods,
            closing=self.closing("compare/index.html", compare["section_title"], "quote_compare_note"),
        )
        out["compare/server-fit.html"] = self.page(
            "compare.html",
            "compare/server-fit.html",
            heading=compare["server_fit_title"],
            description=compare["server_fit_description"],
            view=view,
            fit_legend=True,
            others=[],
            cite=cite,
            cite_table=self.cited_table(view),
            closing=self.closing("compare/server-fit.html", compare["server_fit_title"], "quote_compare_note"),
        )
        for href, name in methods:
            me = href.removeprefix("compare/gpu-cards-").removesuffix(".html")
            view = E.compare_gpu_cards(me)
            heading = compare["gpu_cards_title"].format(method=name)
            out[href] = self.page(
                "compare.html",
                href,
                heading=heading,
                description=compare["gpu_cards_description"].format(method=name),
                view=view,
                others=[(h, n) for h, n in methods if h != href],
                cite=cite,
                cite_table=self.cited_table(view),
                closing=self.closing(href, heading, "quote_compare_note"),
            )

    @staticmethod
    def cited_table(view: TableView) -> dict:
        """The table a comparison page's citation block names: the first download of its view."""
        table = TABLES_BY_NAME[view.downloads[0]]
        return {"name": table.name, "title_ru": table.title_ru}

    def closing(self, path: str, subject: str, note: str = "quote_article_note") -> dict:
        """The block under an article or a comparison (partials/closing.html): the quote request with the
        page's subject and address and the contacts (`note`: a key of labels [closing] or [entities.reco]),
        and the related materials: the site's other articles, the calculator, the comparisons and
        pretraining, then the company's own (site.toml [[related]])."""
        labels, contacts = self.labels, self.site_config["quote"]
        C, R = labels["closing"], labels["entities"]["reco"]
        own = [(f"{a.slug}.html", a.title, "") for a in sorted(self.articles, key=lambda a: a.order)] + [
            ("calculator.html", C["calculator"], C["calculator_note"]),
            ("compare/index.html", C["compare"], C["compare_note"]),
            ("pretraining.html", C["pretraining"], C["pretraining_note"]),
        ]
        related = [{"path": p, "title": t, "note": n} for p, t, n in own if p != path]
        related += [{"path": "", **r} for r in self.site_config.get("related", [])]
        return {
            "quote_url": quote.quote_url(
                contacts, R["q_subject"].format(what=subject), [(R["q_page"], self.base_url + path)]
            ),
            "note": (C.get(note) or R[note]).format(phone=contacts["phone"], email=contacts["email"]),
            "related": related,
        }

    def model_facts(self, model: dict) -> list:
        F = self.labels["entity_pages"]["models"]
        facts = [(F["family"], model["family"]), (F["params"], fmt.number(model["params_b"], 2))]
        if model["active_params_b"] is not None:
            facts.append((F["active"], fmt.number(model["active_params_b"], 2)))
        if model["licence"]:
            facts.append((F["licence"], model["licence"]))
        return facts + [(F["source"], self.reference_link(model["reference_id"]))]

    def gpu_facts(self, gpu: dict) -> list:
        F, names = self.labels["entity_pages"]["gpus"], self.labels["entities"]
        facts = [
            (F["memory"], fmt.gb(gpu["memory_gb"])),
            (F["bandwidth"], fmt.number(gpu["memory_bandwidth_gbs"])),
            (F["bf16"], fmt.number(gpu["bf16_dense_tflops"])),
            (F["fp8"], fmt.number(gpu["fp8_dense_tflops"]) or "—"),
        ]
        if gpu["fp8_reference_id"]:
            facts.append((F["fp8_source"], self.reference_link(gpu["fp8_reference_id"])))
        facts += [
            (F["interconnect"], names["interconnects"][gpu["interconnect"]]),
            (F["link"], fmt.number(gpu["link_gbs"]) or "—"),
            (F["form"], names["form_factors"][gpu["form_factor"]]),
        ]
        return facts + [(F["source"], self.reference_link(gpu["reference_id"]))]

    def server_facts(self, server: dict) -> list:
        F, names = self.labels["entity_pages"]["servers"], self.labels["entities"]
        memory = self.tables.server_memory_gb(server["server_id"])
        price = server["price_rub_month"]
        facts = [
            (F["gpu"], self.tables.gpu_link(server["gpu_id"])),
            (F["count"], fmt.integer(server["gpu_count"])),
            (F["memory"], fmt.gb(memory)),
            (F["interconnect"], names["interconnects"][server["interconnect"]]),
            (F["platform"], server["platform"]),
            (F["price"], fmt.integer(price) if price is not None else self.labels["common"]["price_on_request"]),
        ]
        if price is not None:
            facts.append((F["price_per_gb"], fmt.integer(price / memory)))
            facts.append((F["price_date"], fmt.date(server["price_checked_on"])))
        return facts + [(F["source"], self.reference_link(server["reference_id"]))]

    def reference_link(self, reference_id: str):
        ref = self.tables.reference(reference_id)
        checked = f"{ref['title']}, {self.labels['common']['checked']} {fmt.date(ref['checked_on'])}"
        return Link(checked, f"sources.html#ref-{reference_id}")

    def cdn_files(self) -> dict[str, str]:
        """sitemap.xml, robots.txt and 404.html (whose links are absolute: it is served at any path)."""
        pages = sorted(p for p in self.pages if p != "404.html")
        urls = "".join(f"<url><loc>{escape(self.base_url + p.removesuffix('index.html'))}</loc></url>\n" for p in pages)
        sitemap = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n' + urls + "</urlset>\n"
        )
        robots = f"User-agent: *\nAllow: /\nSitemap: {self.base_url}sitemap.xml\n"
        return {"sitemap.xml": sitemap, "robots.txt": robots}

    def render(self) -> Rendered:
        """Every page, Markdown article and asset."""
        self.articles = read_articles(self.templates)
        if self.memo is not None:  # what every page depends on besides its own context
            references = self.catalog["references"].sort("reference_id").rows()
            self.memo.share(self.labels, self.figures, self.site_config, self.articles, references, self.fast_tables)
        self.article_warnings.clear()
        self.pages = []
        site: dict[str, str | bytes] = {}
        md: dict[str, str] = {}
        problems: list[Problem] = []
        for article in self.articles:  # every article's problem at once
            try:
                text, _ = self.render_article(article, "md")
                text = russian.typograph(f"# {fmt.md_inline(article.title)}\n\n{text.strip()}\n", "md")
                md[f"{article.slug}.md"] = site_links.absolute_markdown(text, self.base_url)
                body = Markup(self.article_html(article))
            except TemplateError as exc:
                problems += exc.problems
                continue
            site[f"{article.slug}.html"] = self.article_page(article, body)
        if problems:
            raise TemplateError(problems)
        site["index.html"] = self.home_page()
        site["data.html"] = self.page(
            "data.html",
            "data.html",
            tables=self.data_tables(),
            type_names=TYPE_NAMES_RU,
            excel_max_rows=EXCEL_MAX_ROWS,
            warnings=self.validation.warnings if self.validation else [],
            licence=self.site_config["data_licence"],
            duckdb_writer=duckdb_version(),
            duckdb_oldest=DATABASE_OLDEST_READER,
            cite=self.citation(),
            releases=self.shown_releases(),
            retention=self.retention,
        )
        site.update(self.release_files())
        site["search.html"] = self.page("search.html", "search.html")
        references = self.catalog["references"].sort("reference_id").iter_rows(named=True)
        site["sources.html"] = self.page("sources.html", "sources.html", references=list(references))
        if self.validation is not None:
            site["quality.html"] = self.page("quality.html", "quality.html", validation=self.validation)
        site.update(self.entity_pages())
        site["404.html"] = self.not_found_page()
        site.update(charts.pages(self.catalog, self.labels, self.page, self.source_refs))
        site.update(estimator_pages.pages(self))
        site["calculator.html"] = self.calculator_page()
        site["data/calculator.json"] = calculator.calculator_json(self.catalog)
        site.update(self.cdn_files())  # after every page: the sitemap lists them all
        site.update(self.assets)
        return Rendered(site, md, sorted(self.article_warnings), self.history.current)

    def calculator_page(self) -> str:
        """The calculator: its one-line answers, constants and sources (the figures are data/calculator.json's)."""
        opens_with = self.site_config["calculator_opens_with"]
        return self.page(
            "calculator.html",
            "calculator.html",
            constants=self.catalog.constants,
            notes=calculator.constant_notes(self.catalog),
            speed_factor=fmt.number(
                lookups.time_band(self.catalog["time_summary"], self.catalog["time_calibration"]).speed, 2
            ),
            headlines=self.entities.headlines(),
            plan_with=self.entities.plan_with,
            opens_with=opens_with,
            opens_quote=self.entities.quote_link(*opens_with),
            page_rows=self.site_config["table_page_rows"],
            tall_rows=TALL_MIN_ROWS,
            quote_contacts=self.site_config["quote"],
            sources=[
                self.tables.reference(r)
                for r in dict.fromkeys(
                    self.catalog["memory_anchors"]["reference_id"].to_list()
                    + self.catalog["servers"]["reference_id"].to_list()
                    + self.catalog["gpus"]["reference_id"].to_list()
                )
            ],
        )

    def not_found_page(self) -> str:
        """404.html is served at whatever path was asked for: its links start from the base URL."""
        return self.page("404.html", "404.html", root=self.base_url)

    def citation(self) -> dict | None:
        """What the citation blocks ("how to cite") say: the current release; None before the first release."""
        package = self.site_config["data_package"]
        cite = releases.citation(self.history, package["title"], self.base_url, self.site_config["data_licence"]["id"])
        if cite is None:
            return None
        return cite | {"author": package["author"], "date": dt.date.fromisoformat(cite["released_on"])}

    def shown_releases(self) -> list[dict]:
        """Every release, newest first, with its date, changes and, while publish surely keeps its files
        (site.toml `[releases]`), the zip of them all (`zip`: its path under the site, else None)."""
        titles = {t.name: t.title_ru for t in ALL_TABLES}
        changes: dict[str, list[dict]] = {}
        for row in self.history.changes:
            changes.setdefault(row["version"], []).append(row | {"title": titles.get(row["table_name"], "")})
        kept = self.history.kept(self.retention)
        return [
            r
            | {
                "date": dt.date.fromisoformat(r["released_on"]),
                "changes": changes.get(r["version"], []),
                "zip": releases.zip_path(r["version"]) if r["version"] in kept else None,
                "zip_name": releases.zip_path(r["version"]).rsplit("/", 1)[1],
            }
            for r in reversed(self.history.releases)
        ]

    def release_files(self) -> dict[str, str | bytes]:
        """The changelog page, data/changelog.csv and data/CITATION.cff (none before the first release)."""
        cite = self.citation()
        if cite is None:
            return {}
        return {
            "changelog.html": self.page(
                "changelog.html",
                "changelog.html",
                releases=self.shown_releases(),
                cite=cite,
                base_url=self.base_url,
                retention=self.retention,
            ),
            "data/changelog.csv": releases.changelog_csv(self.history),
            "data/CITATION.cff": releases.citation_cff(cite, cite["author"]),
        }

    def data_tables(self) -> list[dict]:
        return [
            {
                "table": t,
                "rows": self.catalog.height(t.name),
                "kind": t.kind,
                "xlsx": self.catalog.height(t.name) <= EXCEL_MAX_ROWS,
            }
            for t in ALL_TABLES
        ]
