"""What an article may contain: one allow-list of HTML, classes and link addresses, enforced twice.

Articles are Markdown written by editors. Their raw HTML and their links are checked in the
Markdown itself (`clean_markdown`), so the Markdown written for the CMS is as safe as the site:
an allowed tag is written again in a canonical form with only its allowed attributes, anything
else is removed (script-like elements with their content), a link or image to an address other
than http(s), mailto, tel or a relative one is replaced by its text, and every other "<" becomes
"&lt;". Each removal is described for the editor. The HTML made from that Markdown then passes
through nh3 (the Ammonia sanitiser) with the same allow-list (`clean_html`): nothing outside it
reaches a page even where the two readings of the Markdown differ.
"""

from __future__ import annotations

import difflib
import html
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from html.parser import HTMLParser

import nh3

from pipeline.messages import message

# Tags an article may use: what Markdown makes, what the table helpers write, and a few that
# editors write by hand (details/summary, sup/sub, abbr, kbd...).
TAGS = frozenset(
    {
        *("h1", "h2", "h3", "h4", "h5", "h6", "p", "br", "hr", "blockquote", "pre", "code"),
        *("ul", "ol", "li", "dl", "dt", "dd"),
        *("strong", "em", "b", "i", "s", "del", "ins", "sub", "sup", "small", "mark", "kbd", "abbr", "cite", "q"),
        *("span", "div", "a", "img", "figure", "figcaption", "details", "summary", "nav"),
        *("table", "caption", "thead", "tbody", "tfoot", "tr", "th", "td", "colgroup", "col"),
    }
)
# Removed together with everything up to their closing tag: their content is code or not text.
DROP_CONTENT = frozenset(
    {
        *("script", "style", "iframe", "frame", "frameset", "object", "embed", "applet", "noscript", "template"),
        *("textarea", "select", "title", "xmp", "noembed", "noframes", "plaintext", "svg", "math"),
    }
)
# Attributes per tag ("*": on every allowed tag). `class` is allowed only with the values of CLASSES.
ATTRIBUTES: dict[str, frozenset[str]] = {
    "*": frozenset({"id", "title", "lang"}),
    "a": frozenset({"href", "hreflang", "rel", "aria-current", "aria-label"}),
    "img": frozenset({"src", "alt", "width", "height"}),
    "th": frozenset({"scope", "colspan", "rowspan"}),
    "td": frozenset({"colspan", "rowspan", "data-label"}),  # a stacked table's column name per value
    "col": frozenset({"span"}),
    "colgroup": frozenset({"span"}),
    "ol": frozenset({"start", "reversed"}),
    "li": frozenset({"value", "aria-hidden"}),
    "nav": frozenset({"aria-label"}),
    "details": frozenset({"open"}),
    "div": frozenset({"tabindex", "role", "aria-label"}),  # a table's scroll box is a focusable region
    "p": frozenset({"data-pagefind-ignore"}),  # a table's sources line, left out of the search index
}
# The classes of the site's stylesheet and table script that an article's markup carries
# (the table helpers' figure, scroll box, sortable table, numeric cells, notes, sources, pager).
CLASSES: dict[str, frozenset[str]] = {
    "figure": frozenset({"data-table"}),
    "div": frozenset({"scroll", "stack", "tall"}),  # stack, tall: render.view.TableView.layout
    "table": frozenset({"sortable"}),
    "th": frozenset({"num"}),
    "td": frozenset({"num"}),
    "p": frozenset({"note", "source"}),
    "nav": frozenset({"pager"}),
}
URL_SCHEMES = frozenset({"http", "https", "mailto", "tel"})
URL_ATTRIBUTES = frozenset({"href", "src"})
SHOWN = 60  # characters of a removed piece quoted in a message

_NAME = r"[A-Za-z][A-Za-z0-9-]*"
_ATTRIBUTE = r"""\s+[A-Za-z_:][A-Za-z0-9_.:-]*(?:\s*=\s*(?:[^\s"'=<>`]+|'[^']*'|"[^"]*"))?"""
# The raw HTML of CommonMark (spec 0.31, "Raw HTML"), each at a "<".
_OPEN = re.compile(rf"<({_NAME})((?:{_ATTRIBUTE})*)\s*(/?)>")
_CLOSE = re.compile(rf"</({_NAME})\s*>")
_ONE_ATTRIBUTE = re.compile(r"""\s+([A-Za-z_:][A-Za-z0-9_.:-]*)(?:\s*=\s*([^\s"'=<>`]+|'[^']*'|"[^"]*"))?""")
_COMMENT = re.compile(r"<!--(?:-?>|.*?-->)", re.S)
_OTHER = re.compile(r"<\?.*?\?>|<!\[CDATA\[.*?\]\]>|<![A-Za-z][^>]*>", re.S)
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}):[^\s<>\x00-\x1f]*>")
_EMAIL = re.compile(
    r"<[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*>"
)
_WINDOW = 20_000  # the longest tag looked at from one "<"
_ID = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,99}")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_C0_AND_SPACE = "".join(map(chr, range(33)))
# A destination with nothing to parse (no spaces, parentheses, escapes or "<"), closed at once.
_SIMPLE_DESTINATION = re.compile(r"([^\s()\\<]*)\)")
_BACKSLASH = re.compile(r"\\([!-/:-@\[-`{-~])")
# What follows the "]:" of a link definition, [label]: destination (CommonMark "link reference
# definitions"), wherever it stands: in a list item or a quote it is a definition too.
_DEFINITION = re.compile(r"\]:[ \t]*\n?[ \t]*(\S+)")


@dataclass(frozen=True)
class Removed:
    """One thing taken out of an article: where (offset in the text cleaned) and what, for the editor."""

    offset: int
    what: str


def short(text: str) -> str:
    """A text as a warning quotes it: whitespace runs made one space, cut to SHOWN characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def url_allowed(url: str) -> bool:
    """An address as a browser reads it (tabs and line breaks dropped, leading spaces and controls
    skipped): http(s), mailto, tel, or relative (no scheme)."""
    url = url.replace("\t", "").replace("\n", "").replace("\r", "").lstrip(_C0_AND_SPACE)
    scheme = _SCHEME.match(url)
    return scheme is None or scheme.group(1).lower() in URL_SCHEMES


def _attribute_text(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def _tag(name: str, raw: str, selfclosing: str) -> tuple[str, list[str]]:
    """An allowed opening tag in canonical form, and what was taken out of it."""
    kept: dict[str, str | None] = {}  # None: written without a value, as in <details open>
    notes = []
    for m in _ONE_ATTRIBUTE.finditer(raw):
        attribute, value = m.group(1).lower(), m.group(2)
        if value is not None:
            value = html.unescape(value[1:-1] if value[0] in "\"'" else value)
        if attribute in kept:
            continue  # a browser keeps the first
        if attribute == "class" and name in CLASSES:
            classes = (value or "").split()
            good = [c for c in classes if c in CLASSES[name]]
            if len(good) < len(classes):
                bad = " ".join(c for c in classes if c not in CLASSES[name])
                notes.append(message("sanitize.class_removed", value=short(bad), tag=name))
            if good:
                kept["class"] = " ".join(good)
            continue
        if attribute not in ATTRIBUTES["*"] and attribute not in ATTRIBUTES.get(name, ()):
            notes.append(message("sanitize.attribute_removed", attribute=attribute, value=short(value or ""), tag=name))
        elif attribute in URL_ATTRIBUTES and not url_allowed(value or ""):
            notes.append(message("sanitize.address_removed", attribute=attribute, value=short(value or ""), tag=name))
        elif attribute == "id" and not _ID.fullmatch(value or ""):
            notes.append(message("sanitize.id_removed", value=short(value or ""), tag=name))
        else:
            kept[attribute] = value
    attributes = "".join(f" {a}" if v is None else f' {a}="{_attribute_text(v)}"' for a, v in kept.items())
    return f"<{name}{attributes}{' /' if selfclosing else ''}>", notes


def _at(text: str, i: int) -> tuple[int, str, list[str]]:  # noqa: C901
    """What starts at text[i] == "<": (where it ends, what replaces it, what was removed)."""
    end = min(len(text), i + _WINDOW)
    if m := _COMMENT.match(text, i):
        return m.end(), "", [message("sanitize.comment")]
    if m := _OTHER.match(text, i):
        return m.end(), "", [message("sanitize.not_html", text=short(m.group()))]
    if m := _CLOSE.match(text, i, end):
        name = m.group(1).lower()
        if name in TAGS:
            return m.end(), f"</{name}>", []
        return m.end(), "", [message("sanitize.close_removed", tag=name)]
    if m := _OPEN.match(text, i, end):
        name = m.group(1).lower()
        if name in TAGS:
            tag, notes = _tag(name, m.group(2), m.group(3))
            return m.end(), tag, notes
        if name in DROP_CONTENT:
            close = re.compile(rf"</{name}\s*>", re.I).search(text, m.end())
            if close:
                return (
                    close.end(),
                    "",
                    [message("sanitize.removed_with_content", tag=name, text=short(text[i : close.end()]))],
                )
            return m.end(), "", [message("sanitize.tag_removed", tag=name, text=short(m.group()))]
        return m.end(), "", [message("sanitize.tag_text_kept", tag=name)]
    if m := _AUTOLINK.match(text, i, end):
        if m.group(1).lower() in URL_SCHEMES:
            return m.end(), _explicit_link(m.group()[1:-1], m.group()[1:-1]), []
        return (
            m.end(),
            "",
            [message("sanitize.autolink_removed", url=short(m.group()[1:-1]))],
        )
    if m := _EMAIL.match(text, i, end):
        return m.end(), _explicit_link(m.group()[1:-1], "mailto:" + m.group()[1:-1]), []
    if re.match(r"</?[A-Za-z!?]", text[i : i + 2]):
        rest = text[i : text.find("\n", i) if "\n" in text[i:end] else end]
        return i + 1, "&lt;", [message("sanitize.incomplete_tag", text=short(rest))]
    return i + 1, "&lt;", []


def _explicit_link(text: str, url: str) -> str:
    """An autolink (<https://…>, <name@host>) as the same link in [text](url) form: inside a raw HTML
    block an autolink is not one, and a browser would read "<https:/onclick=…>" as a tag."""
    shown = "".join("\\" + c if c in "\\`*_[]|" else c for c in text)
    shown = shown.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"[{shown}]({url.replace('(', '%28').replace(')', '%29')})"


def _clean_html_parts(text: str) -> tuple[str, list[Removed], list[tuple[int, int]]]:
    """Raw HTML in Markdown cleaned; also (offset in the result, offset in `text`) at each edit."""
    if "<" not in text:
        return text, [], []
    out, removed, anchors = [], [], []
    length, pos = 0, 0
    i = text.find("<")
    while i >= 0:
        out.append(text[pos:i])
        length += i - pos
        end, piece, notes = _at(text, i)
        removed += [Removed(i, note) for note in notes]
        out.append(piece)
        length += len(piece)
        anchors.append((length, end))
        pos = end
        i = text.find("<", pos)
    out.append(text[pos:])
    return "".join(out), removed, anchors


def _escaped(text: str, i: int) -> bool:
    """Whether text[i] is preceded by an odd number of backslashes."""
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def _destination(text: str, i: int) -> tuple[str, int]:
    """A link destination starting at text[i] (after "]("): its raw text and where it ends."""
    while i < len(text) and text[i] in " \t":
        i += 1
    if i < len(text) and text[i] == "\n":
        i += 1
        while i < len(text) and text[i] in " \t":
            i += 1
    start, depth = i, 0
    if i < len(text) and text[i] == "<":
        close = text.find(">", i)
        if close >= 0 and "\n" not in text[i:close]:
            return text[i + 1 : close], close + 1
    while i < len(text) and not text[i].isspace():
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            i += 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                break
            depth -= 1
        i += 1
    return text[start:i], i


def _whole_destination(text: str, i: int) -> tuple[str, int | None]:
    """Everything from text[i] (after "](") to the ")" that closes it, line breaks and spaces included,
    as a laxer Markdown (Python-Markdown) reads a destination; and where that ")" ends (None: none
    before a blank line). A browser drops the tabs and line breaks of an address: "j\navascript:"."""
    depth, start = 0, i
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "\n" and text[i + 1 : i + 2] == "\n":
            break
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return text[start:i], i + 1
            depth -= 1
        i += 1
    return text[start:i], None


def _link_end(text: str, i: int) -> int | None:
    """Where a link's "( … )" ends, from the end of its destination: after an optional title and ")"."""
    title = re.compile(
        r"""[ \t]*\n?[ \t]*(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\))?[ \t]*\n?[ \t]*\)"""
    )
    m = title.match(text, i)
    return m.end() if m else None


def _link_start(text: str, close: int) -> int | None:
    """The "[" that opens the link text ending at text[close] == "]" (same paragraph), if any."""
    depth, i = 0, close - 1
    while i >= 0:
        c = text[i]
        if c == "\n" and text[i - 1 : i] == "\n":
            return None
        if c in "[]" and not _escaped(text, i):
            if c == "]":
                depth += 1
            elif depth == 0:
                return i
            else:
                depth -= 1
        i -= 1
    return None


def decoded_destination(raw: str) -> str:
    """A Markdown link destination as a renderer passes it on: backslash escapes and entities resolved."""
    if "\\" not in raw and "&" not in raw:
        return raw
    return html.unescape(_BACKSLASH.sub(r"\1", raw))


def _replace(text: str, edits: list[tuple[int, int, str]]) -> tuple[str, list[tuple[int, int]]]:
    """`text` with non-overlapping (start, end, new text) edits made, and (offset in the result, offset
    in `text`) after each edit, to find where a later offset came from (`_back`)."""
    out, anchors, pos, length = [], [], 0, 0
    for start, end, piece in sorted(edits):
        out += [text[pos:start], piece]
        length += start - pos + len(piece)
        anchors.append((length, end))
        pos = end
    out.append(text[pos:])
    return "".join(out), anchors


def _back(anchors: list[tuple[int, int]], offset: int) -> int:
    k = bisect_right(anchors, (offset, float("inf"))) - 1
    return offset if k < 0 else anchors[k][1] + offset - anchors[k][0]


def _bad_links(text: str) -> tuple[list[tuple[int, int, str]], list[Removed]]:
    """One pass over the links and images of `text`: edits that replace each one to a disallowed
    address by its text (an image by nothing but its text), and what they remove."""
    edits: list[tuple[int, int, str]] = []
    removed: list[Removed] = []
    done = 0  # links inside a replaced one are seen on the next pass
    for m in re.finditer(r"\]\(", text):
        at = m.start()
        if at < done or _escaped(text, at):
            continue
        simple = _SIMPLE_DESTINATION.match(text, at + 2)
        if simple and url_allowed(decoded_destination(simple.group(1))):
            continue  # most links: no need to read them both ways
        raw, end = _destination(text, at + 2)
        whole, whole_end = _whole_destination(text, at + 2)
        if url_allowed(decoded_destination(raw)) and url_allowed(decoded_destination(whole)):
            continue
        bad = raw if not url_allowed(decoded_destination(raw)) else whole
        shown = short(decoded_destination(bad))
        opening, closing = _link_start(text, at), _link_end(text, end) or whole_end
        if opening is None or closing is None or opening < done:
            edits.append((at, at, "\\"))
            removed.append(Removed(at, message("sanitize.link_as_text", url=shown)))
            done = at + 1
        elif opening > 0 and text[opening - 1] == "!" and not _escaped(text, opening - 1):
            edits.append((opening - 1, closing, text[opening + 1 : at]))
            removed.append(Removed(opening - 1, message("sanitize.image_removed", url=shown)))
            done = closing
        else:
            edits.append((opening, closing, text[opening + 1 : at]))
            removed.append(Removed(opening, message("sanitize.link_removed", url=shown)))
            done = closing
    return edits, removed


def _clean_links(text: str) -> tuple[str, list[Removed], list[list[tuple[int, int]]]]:
    """Links, images and link definitions to a disallowed address: replaced by their text, or removed.
    Offsets of what was removed are those of `text`; also the anchors of each pass of edits."""
    removed: list[Removed] = []
    passes: list[list[tuple[int, int]]] = []

    def original(offset: int) -> int:
        for anchors in reversed(passes):
            offset = _back(anchors, offset)
        return offset

    while True:
        edits, found = _bad_links(text)
        if not edits:
            break
        removed += [Removed(original(r.offset), r.what) for r in found]
        text, anchors = _replace(text, edits)
        passes.append(anchors)
    edits = []
    for m in _DEFINITION.finditer(text):
        if not _escaped(text, m.start()) and not url_allowed(decoded_destination(m.group(1).strip("<>"))):
            shown = short(decoded_destination(m.group(1)))
            opening = _link_start(text, m.start())
            removed.append(
                Removed(
                    original(m.start() if opening is None else opening),
                    message("sanitize.definition_removed", url=shown),
                )
            )
            edits.append((m.start(1), m.end(1), ""))
    text, anchors = _replace(text, edits)
    return text, removed, passes + [anchors]


MAX_PASSES = 8  # an edit can make a new construct ("<scr<script>ipt>"): clean until nothing changes


def clean_markdown(text: str) -> tuple[str, list[Removed]]:
    """Article Markdown with only allowed raw HTML and link addresses; what was removed, by offset in `text`."""
    removed: list[Removed] = []
    maps: list[list[tuple[int, int]]] = []  # the anchors of every pass of edits, first to last

    def original(offset: int) -> int:
        for anchors in reversed(maps):
            offset = _back(anchors, offset)
        return offset

    for _ in range(MAX_PASSES):
        cleaned, found, anchors = _clean_html_parts(text)
        removed += [Removed(original(r.offset), r.what) for r in found]
        maps.append(anchors)
        cleaned, found, passes = _clean_links(cleaned)
        removed += [Removed(original(r.offset), r.what) for r in found]
        maps += passes
        if cleaned == text:
            break
        text = cleaned
    else:  # still changing: nothing of it may stay markup
        text = re.sub(r"\](?=[(:])", r"\\]", text.replace("<", "&lt;"))
        removed.append(Removed(0, message("sanitize.unstable")))
    return text, sorted(removed, key=lambda r: r.offset)


# --- HTML ----------------------------------------------------------------------------------------


def clean_html(body: str) -> tuple[str, list[str]]:
    """An article's HTML through nh3 with the allow-list; what it removed (nothing, when the Markdown
    was cleaned first and Markdown made only allowed HTML of it)."""
    cleaned = nh3.clean(
        body,
        tags=set(TAGS),
        clean_content_tags=set(DROP_CONTENT),
        attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
        link_rel=None,
        url_schemes=set(URL_SCHEMES),
        allowed_classes={tag: set(names) for tag, names in CLASSES.items()},
        strip_comments=True,
    ).replace("&nbsp;", "\u00a0")  # the same character: the site writes it as itself
    if cleaned == body:
        return cleaned, []
    return cleaned, _differences(_Structure.of(body), _Structure.of(cleaned))


class _Structure(HTMLParser):
    """Tags, attributes and text of some HTML, to tell what a sanitiser changed from how it writes it."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.items: list[tuple] = []

    @classmethod
    def of(cls, text: str) -> list[tuple]:
        parser = cls()
        parser.feed(text)
        parser.close()
        return parser.items

    def handle_starttag(self, tag, attrs):
        self.items.append(("<", tag, tuple(sorted((k, v or "") for k, v in attrs))))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        self.items.append(("</", tag))

    def handle_data(self, data):
        if self.items and self.items[-1][0] == "text":
            self.items[-1] = ("text", self.items[-1][1] + data)
        else:
            self.items.append(("text", data))

    def handle_comment(self, data):
        self.items.append(("comment", data))


def _differences(before: list[tuple], after: list[tuple]) -> list[str]:
    """What the sanitiser took out: tags, attributes, comments, text (tags it only closed or moved, as a
    browser would, are no loss)."""
    kept_tags = Counter(i[1] for i in after if i[0] == "<")
    kept_attributes = Counter((i[1], a) for i in after if i[0] == "<" for a in i[2])
    notes = []
    for item in before:
        if item[0] == "comment":
            notes.append(message("sanitize.html_comment"))
        if item[0] != "<":
            continue
        _, tag, attributes = item
        if kept_tags[tag] > 0:
            kept_tags[tag] -= 1
        else:
            notes.append(message("sanitize.html_tag", tag=tag))
            continue
        for name, value in attributes:
            if kept_attributes[(tag, (name, value))] > 0:
                kept_attributes[(tag, (name, value))] -= 1
            else:
                notes.append(message("sanitize.html_attribute", attribute=name, value=short(value), tag=tag))
    text_before = "".join(i[1] for i in before if i[0] == "text")
    text_after = "".join(i[1] for i in after if i[0] == "text")
    if text_before != text_after:
        lost = [op for op in difflib.SequenceMatcher(None, text_before, text_after, autojunk=False).get_opcodes()]
        gone = " … ".join(text_before[i1:i2] for tag, i1, i2, _, _ in lost if tag in ("delete", "replace"))
        notes.append(message("sanitize.html_text", text=short(gone)))
    return list(dict.fromkeys(notes))
