"""Site search: a static Pagefind index of the built pages, made at build time (site/pagefind/).

Pagefind (PyPI `pagefind[extended]`, which ships its binary: nothing is downloaded) indexes the
HTML this build writes, in Russian (stemming included), as files a CDN serves like any other;
site/search.html (site_templates/search.html, static/search.js) queries them in the browser. Only
each page's `<main data-pagefind-body>` is indexed, so the header and footer never match, and
without the rows of its tables (`<tbody>`; their headers stay): the rows of an entity page name
every entity on the other side, so a search for a GPU would match every model page, and at 10^6
server_fit rows the rows were two thirds of Pagefind's work. An entity is found by its own page.
Pagefind runs as its service (`pagefind --service`), handed each page as it is rendered, so that it
reads the pages on the other core while the build renders the rest (Indexer); it hands the index's
files over once the build's pages are all written.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import json
import os
import queue
import re
import shutil
import subprocess
import threading
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
# The attribute that keeps an element out of Pagefind's index (its documentation: "Indexing");
# indexed_text cuts such elements before Pagefind reads them.
IGNORED = "data-pagefind-ignore"
# An attribute: its name (its value skipped); an opening tag: its name and its attributes' text.
_ATTRIBUTE_TEXT = r"\s+([^\s=>/\"']+)(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>\"']+))?"
_ATTRIBUTE = re.compile(_ATTRIBUTE_TEXT)
_TAG = re.compile(rf"<([A-Za-z][A-Za-z0-9-]*)((?:{_ATTRIBUTE_TEXT})*)\s*/?>")
# Elements whose end Pagefind does not take for a break between words (a header cell, a term of a
# definition list): a space follows each.
JOINED_CLOSES = ("</th>", "</dt>")


def indexed_text(html: str) -> str:
    """The page as Pagefind reads it: its tables without their rows, its scripts without their
    content (Pagefind never indexes a script: its parser drops `script`, `style`, `svg`, `form` and a
    few more; the calculator's page carries its figures as JSON, 8 MB at 10^6 rows), found with
    str.find (a regular expression steps through a row character by character, and at 10^6 rows the
    pages are 60 MB). Scripts first: a table's tags in a script's text are not a table. Of a page
    whose `<main>` is its `data-pagefind-body`, the body holds only that main: Pagefind indexes
    nothing else of such a page (the header, the menu and the footer are a tenth of its work). A space
    follows each header cell and each term of a definition list (JOINED_CLOSES): Pagefind separates
    `td` cells but joins adjacent `th` cells into one word, and a `dt` with its `dd` (the data page's
    headers became one long word: none was found, and its excerpt overflowed a phone; a GPU page's
    facts ran their label into their value)."""
    cut = _cut(_main_only(_cut(html, SCRIPT_OPEN, SCRIPT_CLOSE, keep_tags=True)), ROWS_OPEN, ROWS_CLOSE)
    cut = _cut_ignored(cut)
    for close in JOINED_CLOSES:
        cut = cut.replace(close, close + " ")
    return cut


def _cut_ignored(html: str) -> str:
    """`html` without the elements that carry IGNORED (their tags too), which Pagefind leaves out of
    the index itself (the templates mark a table's sources and downloads, the quote link, a chart's
    drawing and a form: the same words on every page, a third of what Pagefind read at 10^6 rows).
    An element is kept as it is where Pagefind might still read something of it (a `data-pagefind-`
    attribute inside: a filter or a meta) or where its end is not found."""
    parts, start, at = [], 0, html.find(IGNORED)
    while at >= 0:
        begin = html.rfind("<", start, at)
        name, tag_end = _ignoring_tag(html, begin, at)
        end = _closing(html, name, tag_end) if name else -1
        if end < 0 or "data-pagefind-" in html[tag_end:end].replace(IGNORED, ""):
            at = html.find(IGNORED, at + len(IGNORED))
            continue
        parts.append(html[start:begin])
        start = end + len(name) + 3  # past "</name>"
        at = html.find(IGNORED, start)
    parts.append(html[start:])
    return "".join(parts)


def _ignoring_tag(html: str, begin: int, at: int) -> tuple[str, int]:
    """(the tag's name, the index past its ">") when the tag opened at `begin` has the attribute IGNORED
    found at `at` (an attribute of its own, not words in another's value); ("", -1) otherwise."""
    tag_end = html.find(">", at)
    tag = _TAG.match(html, begin, tag_end + 1) if begin >= 0 and tag_end >= 0 else None
    if tag is None or tag.group(0).endswith("/>"):
        return "", -1
    names = [m.group(1).lower() for m in _ATTRIBUTE.finditer(tag.group(2))]
    return (tag.group(1).lower(), tag_end + 1) if IGNORED in names else ("", -1)


def _closing(html: str, name: str, position: int) -> int:
    """Where the element `name` whose content starts at `position` ends (its "</name>"), counting the
    elements of the same name opened inside it; -1 when it never ends."""
    depth, opening, closing = 1, f"<{name}", f"</{name}>"
    while depth:
        end = html.find(closing, position)
        if end < 0:
            return -1
        inner = html.find(opening, position, end)
        while inner >= 0 and html[inner + len(opening) : inner + len(opening) + 1] not in (" ", ">", "/", "\n", "\t"):
            inner = html.find(opening, inner + 1, end)  # <p> is not <pre>
        if inner >= 0:
            depth, position = depth + 1, inner + len(opening)
        else:
            depth, position = depth - 1, end + len(closing)
    return position - len(closing)


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
    site: dict[str, str | bytes], prefix: str = "site/", kept: dict | None = None
) -> Callable[[], dict[str, bytes]]:
    """Index the pages among `site` (paths under `prefix`, in the order `site` lists them) in
    Pagefind's process; the returned function waits for it and gives the index files by path
    (`site/pagefind/...`). See Indexer.finish, which this is without pages handed over before."""
    return Indexer(stream=False).finish(site, prefix, kept)


class Indexer:
    """The build's search index, made by Pagefind's service (`pagefind --service`, the protocol of its
    Python and Node.js APIs: base64 JSON messages, each ended by a comma) as the pages are rendered:
    the renderer hands each page over (add) and Pagefind reads it on the other core meanwhile, instead
    of reading them all once rendering has ended (at 10^6 rows, the build's last 2.5 s with one core
    idle). The index lists the pages in the site's order (its page numbers), which is the order a
    build renders them in: a build that hands nothing over, or whose pages or their order differ from
    what was handed over, gives a new Pagefind process the site's pages afterwards, so the index is the
    same whichever way it was made. Without `stream` nothing is sent before finish (one worker,
    PIPELINE_WORKERS=1, or a caller with all its pages at once)."""

    def __init__(self, stream: bool = True) -> None:
        self.sent: dict[str, str] = {}  # name -> indexed text, in the order handed over
        self.pages: dict[str, str] = {}  # name -> the page handed over, until finish (no second reading)
        self.again = False  # a page handed over twice: what was sent is not the site
        self.service: _Service | None = None
        if stream:
            try:
                self.service = _Service()
            except OSError:  # no binary: finish reports it, as a build without streaming would
                self.service = None

    def add(self, name: str, html: str) -> None:
        """A rendered page (its path in the site, its HTML): sent to Pagefind when it is indexed."""
        if not name.endswith(".html") or name in NOT_INDEXED:
            return
        text = indexed_text(html)
        if name in self.sent:
            self.again = True
            return
        self.sent[name], self.pages[name] = text, html
        if self.service is not None:
            try:
                self.service.add(name, text)
            except OSError:  # gone: finish gives the pages to a new process
                self.discard()

    def discard(self) -> None:
        """Stop Pagefind's process (a build that failed, or an index made another way)."""
        if self.service is not None:
            self.service.kill()
            self.service = None

    def finish(
        self, site: dict[str, str | bytes], prefix: str = "site/", kept: dict | None = None
    ) -> Callable[[], dict[str, bytes]]:
        """The index of the pages among `site` (paths under `prefix`), in the order `site` lists them;
        the returned function waits for it and gives its files by path (`site/pagefind/...`). When
        every page was handed over, once, in that order, with the text it has in `site`, it is the
        index of what Pagefind has read; otherwise the pages are given to a new Pagefind process. So
        the index depends on the site alone, not on how it was made. Nothing is written: Pagefind
        hands the files over. `kept` (pipeline.warm: a warm
        process's last index, by what Pagefind read and in which order) gives the index at once when no
        page's indexed text changed (an edit that changes only the rows of tables, which are not
        indexed)."""
        texts = indexed_pages(site, prefix, {name: (self.pages[name], self.sent[name]) for name in self.pages})
        self.pages = {}
        order = list(texts)  # the site's order (the build's: its pages in the order they were rendered)
        kept = {} if kept is None else kept
        key = _texts_key(texts, prefix)
        if not texts or key in kept:  # no page to index (a site of downloads only): no index, no search files
            self.discard()
            return (lambda: dict(kept[key])) if texts else dict
        if self.again or list(self.sent) != order or any(self.sent[n] != texts[n] for n in order):
            self.discard()  # what Pagefind read is not the site: it is given the site's pages anew
        elif self.service is not None and not self.service.alive():
            self.discard()  # gone after the last page was handed over: a new process reads them
        self.sent = {}  # not held while the build waits for its downloads (tens of MB at 10^7 rows)
        service, self.service = self.service, None
        try:
            if service is None:
                service = _Service()
                for name in order:
                    service.add(name, texts[name])
            made = service.files()
        except BaseException:
            if service is not None:
                service.kill()
            raise

        def finish() -> dict[str, bytes]:
            try:
                files = {
                    f"{prefix}{FOLDER}/{path}": content
                    for path, content in sorted(made().items())
                    if not path.rpartition("/")[2].startswith(UNUSED)
                }
            finally:
                service.kill()
            kept.clear()  # only the last index: an editing session does not pile them up
            kept[key] = files
            return dict(files)

        return finish


def indexed_pages(
    site: dict[str, str | bytes], prefix: str, known: dict[str, tuple[str | bytes, str]] | None = None
) -> dict[str, str]:
    """The pages among `site` (paths under `prefix`) that are indexed, by name: their indexed text.
    `known`: (a page's content, its indexed text) by name, taken when the page is that very object."""
    texts, known = {}, known or {}
    for rel, content in site.items():
        name = rel.removeprefix(prefix)
        if rel.startswith(prefix) and name.endswith(".html") and name not in NOT_INDEXED:
            page, text = known.get(name, (None, ""))
            if page is not content:
                text = indexed_text(content.decode("utf-8") if isinstance(content, bytes) else content)
            texts[name] = text
    return texts


class _Service:
    """One `pagefind --service` process (killed with the build), with one index. A thread writes the
    messages and another reads the answers, so that neither side waits on a full pipe: a build's
    rendering hands a page over and goes on while Pagefind, on the other core, reads the pages before it
    (waiting for the pipe was a second of a 10^6-row build's rendering). Every failure is an OSError
    "Pagefind failed: …" (an error for a page, the process gone)."""

    CONFIG = {"force_language": "ru", "keep_index_url": True}  # the site is Russian; URLs as written

    def __init__(self) -> None:
        parent = os.getpid()
        with sigint_held():
            self.process = subprocess.Popen(
                [executable(), "--service"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                preexec_fn=lambda: die_with_parent(parent),
            )
        self.answers: dict[int, dict] = {}
        self.errors: list[str] = []
        self.ended = False
        self.arrived = threading.Condition()
        self.sent = 0
        self.reader = threading.Thread(target=self._read, name="pagefind", daemon=True)
        self.reader.start()
        self.outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()  # None: no more to write
        self.broken: str | None = None  # why a write failed
        self.writer = threading.Thread(target=self._write, name="pagefind-writer", daemon=True)
        self.writer.start()
        try:
            self.index = self._answer(self._send({"type": "NewIndex", "config": self.CONFIG}))().get("index_id")
        except BaseException:
            self.kill()
            raise

    def alive(self) -> bool:
        """Whether the process runs and every message so far could be written."""
        return self.broken is None and self.process.poll() is None

    def _send(self, payload: dict) -> int:
        """Queue a message for the writing thread; its number. A process already gone is an OSError."""
        if not self.alive():
            raise _failed(self.broken or "the process ended")
        self.sent += 1
        message = json.dumps({"message_id": self.sent, "payload": payload})  # ASCII: any text can be sent
        self.outbox.put(base64.b64encode(message.encode("ascii")) + b",")
        return self.sent

    def _write(self) -> None:
        """The writing thread: each queued message into the pipe, until None or a failed write (the
        process gone: a broken pipe, a closed file), which is noted for _send and the answers' waiters."""
        while (data := self.outbox.get()) is not None:
            try:
                self.process.stdin.write(data)
                self.process.stdin.flush()
            except (OSError, ValueError) as exc:
                with self.arrived:
                    self.broken = str(exc) or type(exc).__name__
                    self.errors.append(self.broken)
                    self.arrived.notify_all()
                return

    def _answer(self, message: int) -> Callable[[], dict]:
        """A function that waits for the answer to `message` and gives it."""

        def wait() -> dict:
            with self.arrived:
                self.arrived.wait_for(lambda: message in self.answers or self.errors or self.ended)
                answer = self.answers.get(message)
                errors = list(self.errors)
            if errors or answer is None:
                raise _failed(errors[0] if errors else "the process ended")
            return answer

        return wait

    def _read(self) -> None:
        parts, stream = [], self.process.stdout  # the pieces of an answer not yet ended
        try:
            while chunk := stream.read1(1 << 20):
                *ended, rest = chunk.split(b",")
                if not ended:
                    parts.append(rest)
                    continue
                messages = [b"".join([*parts, ended[0]]), *ended[1:]]
                parts = [rest]
                with self.arrived:
                    for message in messages:
                        self._take(json.loads(base64.b64decode(message)))
                    self.arrived.notify_all()
        except (OSError, ValueError) as exc:
            with self.arrived:
                self.errors.append(f"unreadable answer: {exc}")
        finally:
            with self.arrived:
                self.ended = True
                self.arrived.notify_all()

    def _take(self, answer: dict) -> None:
        payload = answer.get("payload") or {}
        if payload.get("type") == "Error":
            self.errors.append(str(payload.get("message", "")))
        elif payload.get("type") != "IndexedFile":  # a page's answer is not waited for
            self.answers[answer.get("message_id")] = payload

    def add(self, name: str, text: str) -> None:
        """Hand a page over (its indexed text)."""
        self._send({"type": "AddFile", "index_id": self.index, "url": f"/{name}", "file_contents": text})

    def files(self) -> Callable[[], dict[str, bytes]]:
        """Ask Pagefind for the index's files; the returned function waits for them, by path. (Not
        WriteFiles: Pagefind 1.5 answers it, and may even exit, before pagefind-entry.json is written:
        one index in eight came out with that file empty.)"""
        wait = self._answer(self._send({"type": "GetFiles", "index_id": self.index}))
        return lambda: {file["path"]: base64.b64decode(file["content"]) for file in wait()["files"]}

    def kill(self) -> None:
        self.outbox.put(None)
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        # Both threads end with the process (no thread of it outlives it: a fork after): the writer takes
        # the None or fails on the closed pipe, the reader sees the end of the output.
        self.writer.join(READER_WAIT)
        if not self.writer.is_alive():
            with contextlib.suppress(OSError, ValueError):
                self.process.stdin.close()
        self.reader.join(READER_WAIT)
        if not self.reader.is_alive():
            self.process.stdout.close()


READER_WAIT = 10.0  # seconds: the reading thread sees the end of the output as soon as the process ends


def _failed(reason: str) -> OSError:
    return OSError(errno.EIO, f"Pagefind failed: {reason}", "pagefind")


def _texts_key(texts: dict[str, str], prefix: str) -> str:
    """What an index is made from: every page's name and indexed text in the index's order (the
    order of `texts`), the prefix and the binary."""
    digest = hashlib.sha256(f"{executable()}\0{prefix}\0".encode())
    for name in texts:
        digest.update(f"{name}\0{len(texts[name])}\0{texts[name]}\0".encode())
    return digest.hexdigest()
