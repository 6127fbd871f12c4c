"""Site search: a static Pagefind index of the built pages, made at build time (site/pagefind/).

Pagefind (PyPI `pagefind[extended]`, which ships its binary: nothing is downloaded) indexes the
HTML this build writes, in Russian (stemming included), as files a CDN serves like any other;
site/search.html (site_templates/search.html, static/search.js) queries them in the browser. Only
each page's `<main data-pagefind-body>` is indexed, so the header and footer never match, and
without the rows of its tables (`<tbody>`; their headers stay): the rows of an entity page name
every entity on the other side, so a search for a GPU would match every model page, and at 10^6
server_fit rows the rows were two thirds of Pagefind's work. An entity is found by its own page.
The index runs in a child process while the build writes its downloads.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from pipeline.parallel import die_with_parent, sigint_held

FOLDER = "pagefind"
# The search page itself, the error page, and the quality page: it is written last, once validation
# has finished (Staging.swap), after the index is made, so the index never depends on its timing.
NOT_INDEXED = ("search.html", "404.html", "quality.html")
# A table's rows (from <tbody> to the next </tbody>), left out of what Pagefind reads (the pages are
# the build's own HTML: no <tbody> nests in another, and article markup is sanitised).
ROWS_OPEN, ROWS_CLOSE = "<tbody>", "</tbody>"
# A script's content (from "<script" to the next "</script>", as HTML ends it), left out too.
SCRIPT_OPEN, SCRIPT_CLOSE = "<script", "</script>"
# A page's indexed body (site_templates/layout.html: `<main id="main" data-pagefind-body>`).
MAIN_OPEN, MAIN_CLOSE, BODY_CLOSE = "<main", "</main>", "</body>"
HEADER_CELL_CLOSE = "</th>"


def indexed_text(html: str) -> str:
    """The page as Pagefind reads it: its tables without their rows, its scripts without their
    content (Pagefind never indexes a script: its parser drops `script`, `style`, `svg`, `form` and a
    few more; the calculator's page carries its figures as JSON, 8 MB at 10^6 rows), found with
    str.find (a regular expression steps through a row character by character, and at 10^6 rows the
    pages are 60 MB). Scripts first: a table's tags in a script's text are not a table. Of a page
    whose `<main>` is its `data-pagefind-body`, the body holds only that main: Pagefind indexes
    nothing else of such a page (the header, the menu and the footer are a tenth of its work). A space
    follows each header cell: Pagefind separates `td` cells but joins adjacent `th` cells into one word
    (the data page's headers became one long word: none was found, and its excerpt overflowed a phone)."""
    cut = _cut(_main_only(_cut(html, SCRIPT_OPEN, SCRIPT_CLOSE, keep_tags=True)), ROWS_OPEN, ROWS_CLOSE)
    return cut.replace(HEADER_CELL_CLOSE, HEADER_CELL_CLOSE + " ")


def _main_only(html: str) -> str:
    """`html` with its body cut to its one `<main data-pagefind-body>` element (the head stays);
    as it is when it has no body, several mains, or a main that is not the indexed body."""
    body, main, end = html.find("<body"), html.find(MAIN_OPEN), html.find(MAIN_CLOSE)
    tag_end, body_end = html.find(">", body), html.rfind(BODY_CLOSE)
    if min(body, main, end, tag_end) < 0 or not body < tag_end < main < end < body_end:
        return html
    if html.find(MAIN_OPEN, main + 1) >= 0 or "data-pagefind-body" not in html[main : html.find(">", main)]:
        return html
    return html[: tag_end + 1] + html[main : end + len(MAIN_CLOSE)] + html[body_end:]


def _cut(html: str, opening: str, closing: str, keep_tags: bool = False) -> str:
    """`html` without what lies from each `opening` to the next `closing` (the tags too, unless
    `keep_tags`: then the opening tag, to its ">", and the closing one stay)."""
    parts, start = [], 0
    while (begin := html.find(opening, start)) >= 0 and (end := html.find(closing, begin + len(opening))) >= 0:
        if keep_tags:
            tag_end = html.find(">", begin)
            if tag_end < 0 or tag_end > end:
                break  # an opening tag without its ">": left as it is
            parts.append(html[start : tag_end + 1])
            start = end
        else:
            parts.append(html[start:begin])
            start = end + len(closing)
    parts.append(html[start:])
    return "".join(parts)


# The parts of Pagefind's output that site/search.html uses (its ready-made UIs are left out).
UNUSED = ("pagefind-ui.", "pagefind-modular-ui.", "pagefind-component-ui.", "pagefind-highlight.")


def executable() -> str:
    """The Pagefind binary shipped by the PyPI package (the extended one, else the plain one), else on PATH."""
    for module in ("pagefind_bin_extended", "pagefind_bin"):
        try:
            found = __import__(module).get_executable()
        except (ImportError, FileNotFoundError, AttributeError):
            continue
        if found and Path(found).exists():
            return str(found)
    found = shutil.which("pagefind_extended") or shutil.which("pagefind")
    if found:
        return found
    raise OSError(errno.ENOENT, "the Pagefind binary is missing: pip install 'pagefind[extended]'", "pagefind")


def start_index(
    site: dict[str, str | bytes], inside: Path, prefix: str = "site/", kept: dict | None = None
) -> Callable[[], dict[str, bytes]]:
    """Index the pages among `site` (paths under `prefix`) in a child process; the returned function
    waits for it and gives the index files by path (`site/pagefind/...`). Pagefind reads the pages
    from, and writes its index into, a folder made inside `inside` (the build's staging folder, so
    nothing is written outside the build's own folder), removed when the function returns.
    `kept` (pipeline.warm: a warm process's last index, by what Pagefind read) gives the index at once
    when no page's indexed text changed (an edit that changes only the rows of tables, which are not
    indexed)."""
    texts = indexed_pages(site, prefix)
    if not texts:  # no page to index (a site of downloads only): no index, no search files
        return dict
    kept = {} if kept is None else kept
    key = _texts_key(texts, prefix)
    if key in kept:
        return lambda: dict(kept[key])
    work = Path(tempfile.mkdtemp(prefix=".search-", dir=inside))
    try:
        pages = work / "site"
        for name, text in texts.items():
            path = pages / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        child = _pagefind(pages, work / "index")
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise

    def finish() -> dict[str, bytes]:
        try:
            _, errors = child.communicate()
            if child.returncode != 0:
                text = errors.decode("utf-8", "replace").strip().splitlines()
                raise OSError(errno.EIO, f"Pagefind failed: {text[-1] if text else child.returncode}", "pagefind")
            index = work / "index"
            files = {
                f"{prefix}{FOLDER}/{path.relative_to(index).as_posix()}": path.read_bytes()
                for path in sorted(index.rglob("*"))
                if path.is_file() and not path.name.startswith(UNUSED)
            }
        finally:
            shutil.rmtree(work, ignore_errors=True)
        kept.clear()  # only the last index: an editing session does not pile them up
        kept[key] = files
        return dict(files)

    return finish


def indexed_pages(site: dict[str, str | bytes], prefix: str) -> dict[str, str]:
    """The pages among `site` (paths under `prefix`) that are indexed, by name: their indexed text."""
    texts = {}
    for rel, content in site.items():
        name = rel.removeprefix(prefix)
        if rel.startswith(prefix) and name.endswith(".html") and name not in NOT_INDEXED:
            texts[name] = indexed_text(content.decode("utf-8") if isinstance(content, bytes) else content)
    return texts


def _pagefind(pages: Path, index: Path) -> subprocess.Popen:
    """Pagefind started on the folder `pages`, writing its index into `index` (killed with the build:
    it writes into the build's folder)."""
    command = [executable(), "--site", str(pages), "--output-path", str(index)]
    parent = os.getpid()
    with sigint_held():
        return subprocess.Popen(
            [*command, "--force-language", "ru", "--keep-index-url"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "PAGEFIND_QUIET": "true"},
            preexec_fn=lambda: die_with_parent(parent),
        )


def _texts_key(texts: dict[str, str], prefix: str) -> str:
    """What an index is made from: every page's name and indexed text, the prefix and the binary."""
    digest = hashlib.sha256(f"{executable()}\0{prefix}\0".encode())
    for name in sorted(texts):
        digest.update(f"{name}\0{len(texts[name])}\0{texts[name]}\0".encode())
    return digest.hexdigest()
