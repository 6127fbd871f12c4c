"""The editors' loop: serve OUT/site on 127.0.0.1, rebuild on every change, reload the open page.

A watcher thread polls the sizes and modification times of sources/ and site_templates/
and rebuilds in this (warm) process with pipeline.build.build. HTML is sent with a small
script that long-polls /__status (the answer comes as soon as a rebuild finishes) and
reloads the page. The script names its page: a rebuild renders the pages open in a browser
first and shows them as soon as the sources have passed their checks (Renderer.preview), then
renders and writes the whole build as usual (a page that then differs reloads again; see
EditorLoop.preview). After a failed
rebuild every page also gets a banner with the report, while the last good site stays in
OUT/site (a failed build writes nothing). Both are added as the page is sent: the files on
disk never contain them. Changes to pipeline/*.py need a restart.
"""

from __future__ import annotations

import contextlib
import functools
import html
import json
import os
import re
import selectors
import signal
import socket
import stat
import sys
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http.server import HTTPServer, SimpleHTTPRequestHandler
from pathlib import Path

import jinja2
from markupsafe import Markup

from pipeline import TEMPLATES, parallel
from pipeline.messages import grouped_warnings, message, stage_line
from pipeline.problems import format_report
from pipeline.publish import outdir
from pipeline.warm import Warm

STATUS_PATH = "/__status"
# How often the watcher looks at the folders (a few dozen stat calls) and how long files must
# stay unchanged before a rebuild starts: an edit that arrives in several writes during a
# rebuild only starts another one. An open page learns of a rebuild at once (long poll);
# it waits at most LONG_POLL_SECONDS per request.
POLL_SECONDS = 0.1
SETTLE_SECONDS = 0.02
LONG_POLL_SECONDS = 25.0
# The server: a fixed pool of worker threads, at most WAITING accepted connections queued for them
# and BACKLOG more waiting in the kernel; at most LONG_POLLS workers wait in long polls (the others
# keep serving pages), a further long poll is told to come back (503). A client that sends nothing
# for REQUEST_TIMEOUT seconds is dropped.
WORKERS = 32
LONG_POLLS = 24
# A rebuild renders at most this many of the pages open in browsers ahead of the rest (EditorLoop.preview).
PREVIEW_PAGES = 4
WAITING = 512
BACKLOG = 512
REQUEST_TIMEOUT = 15
IDLE_SECONDS = 10  # a connection that sends nothing for this long is closed, without ever holding a worker
MAX_URL_BYTES = 4096  # a longer request target is answered 414
MAX_NAME_BYTES = 255  # the longest file name: a longer path segment is answered 414

# Serve mode only, never written to disk. `version` counts finished rebuilds, good or not, and the
# pages shown ahead of one (EditorLoop.preview); /__status?after=N answers when it is no longer N
# (or after LONG_POLL_SECONDS), &page=PATH names the page that asks.
RELOAD_SCRIPT = """<script>/* pipeline serve: live reload */(function () {
  var version = %d;
  function poll() {
    var page = "&page=" + encodeURIComponent(location.pathname);
    fetch("%s?after=" + version + page, {cache: "no-store"}).then(function (r) {
      if (!r.ok) { throw r; }
      return r.json();
    }).then(function (s) {
      if (s.version !== version) { location.reload(); } else { poll(); }
    }).catch(function () { setTimeout(poll, 1000); });
  }
  poll();
})();</script>
"""
# The banner and the "no site" page are site_templates/partials/serve-*.html; the terminal's lines and the words
# of refused requests are the message catalogue's [serve]: editors read them; they exist only in serve mode.


def serve_partial(name: str, **values) -> str:
    """site_templates/partials/serve-<name>.html, with `values` filled in (autoescaped)."""
    environment = jinja2.Environment(autoescape=True, keep_trailing_newline=True)
    return environment.from_string((TEMPLATES / "partials" / f"serve-{name}.html").read_text(encoding="utf-8")).render(
        **values
    )


def snapshot(folders: list[Path]) -> dict[str, tuple[int, int]]:
    """(mtime, size) of every file below the folders; editors' hidden and backup files are skipped."""
    files = {}
    for folder in folders:
        for root, dirs, names in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
            for name in names:
                if name.startswith(".") or name.endswith("~"):
                    continue
                path = os.path.join(root, name)
                st = _status(path)
                if st is not None:
                    files[path] = (st.st_mtime_ns, st.st_size)
    return files


def _status(path: str) -> os.stat_result | None:
    """The file's status, or None when it is gone. For a link that loops, the link's own status, so that
    making one starts a rebuild, which reports it (os.stat raised there, and the watcher stopped)."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:
        try:
            return os.lstat(path)
        except OSError:
            return None


def inject(page: bytes, version: int, report: str | None) -> bytes:
    """The page with the reload script (and the error banner) before </body>."""
    snippet = RELOAD_SCRIPT % (version, STATUS_PATH)
    if report is not None:
        snippet = serve_partial("error", report=Markup(html.escape(report))) + snippet  # as html.escape writes it
    text = page.decode("utf-8", errors="replace")
    at = text.lower().rfind("</body>")
    text = text[:at] + snippet + text[at:] if at >= 0 else text + snippet
    return text.encode("utf-8")


def site_segments(url_path: str) -> tuple[list[str], tuple[int, str] | None]:
    """The path of a request as segments below the site folder, or the answer to a path that cannot
    name a file there: (400, why) for a NUL or a "..", (414, why) for a segment too long for a name."""
    text = urllib.parse.unquote(url_path, errors="replace")
    if "\x00" in text:
        return [], (400, message("serve.nul"))
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if ".." in parts:
        return [], (400, message("serve.dotdot"))
    if any(len(part.encode("utf-8", "replace")) > MAX_NAME_BYTES for part in parts):
        return [], (414, message("serve.segment_too_long", limit=MAX_NAME_BYTES))
    return parts, None


def page_key(url_path: str) -> str | None:
    """The site file a page's URL path names ("servers/x.html"; a folder's is its index.html), as
    Renderer.preview takes it; None for a path that cannot name one."""
    segments, problem = site_segments(url_path)
    if problem is not None:
        return None
    if not segments or url_path.endswith("/"):
        segments = [*segments, "index.html"]
    return "/".join(segments)


def _kind(path: Path) -> str | None:
    """ "dir", "file" or None (absent, unreadable or a symbolic link: served as missing). A link is
    never followed: the site's folder holds none, and one planted there could lead anywhere."""
    try:
        mode = os.lstat(path).st_mode
    except (OSError, ValueError):
        return None
    return "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else None


def _site_path(root: Path, segments: list[str]) -> Path | None:
    """root / segments when every folder on the way is a real folder (no symbolic link), else None."""
    path = root
    for segment in segments[:-1]:
        path = path / segment
        if _kind(path) != "dir":
            return None
    return root.joinpath(*segments)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # deleted or replaced since it was looked at (a rebuild), or unreadable
        return None


class Handler(SimpleHTTPRequestHandler):
    """GET and HEAD of the site's files; every request gets an answer, never a traceback."""

    editor: EditorLoop  # set by EditorLoop
    timeout = REQUEST_TIMEOUT

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass

    def send_body(self, body: bytes, content_type: str, status: int = 200, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_page(self, page: bytes, status: int = 200) -> None:
        status_now = self.editor.status(page=page_key(urllib.parse.urlsplit(self.path).path))
        body = inject(page, status_now["version"], status_now["report"])
        self.send_body(body, "text/html; charset=utf-8", status)

    def refuse(self, status: int, why: str) -> None:
        self.send_error(status, explain=why)

    def do_GET(self) -> None:
        try:
            self.answer()
        except (ConnectionError, TimeoutError):  # the client went away
            self.close_connection = True
        except Exception as exc:  # one line in the log and a 500, never a traceback
            line = message(
                "serve.request_failed", request=f"{self.command} {self.path[:200]!r}", kind=type(exc).__name__
            )
            print(f"serve: {line}: {exc}", file=sys.stderr)
            self.close_connection = True
            with contextlib.suppress(Exception):
                self.refuse(500, message("serve.internal"))

    do_HEAD = do_GET

    def answer(self) -> None:
        if len(self.path.encode("utf-8", "replace")) > MAX_URL_BYTES:
            return self.refuse(414, message("serve.url_too_long", limit=MAX_URL_BYTES))
        url = urllib.parse.urlsplit(self.path)
        if url.path == STATUS_PATH:
            return self.send_status(url.query)
        segments, problem = site_segments(url.path)
        if problem is not None:
            return self.refuse(*problem)
        ahead = self.editor.shown_ahead(url.path)
        if ahead is not None:
            content, is_page = ahead
            return self.send_page(content) if is_page else self.send_body(content, self.guess_type(url.path))
        root = Path(self.directory)
        path = _site_path(root, segments)
        kind = _kind(path) if path is not None else None
        if kind == "dir":
            if not url.path.endswith("/"):
                return self.send_file()  # redirects to the slash form
            path = path / "index.html"
            kind = _kind(path)
        if kind == "file" and path.suffix == ".html":
            page = _read(path)
            if page is not None:
                return self.send_page(page)
            kind = None
        if kind is None:
            not_found = _read(root / "404.html") if _kind(root / "404.html") == "file" else None
            return self.send_page(not_found if not_found is not None else serve_partial("no-site").encode(), 404)
        return self.send_file()

    def send_status(self, query: str) -> None:
        """/__status, or /__status?after=N: the build's status once its version is no longer N."""
        try:
            values = urllib.parse.parse_qs(query, keep_blank_values=True, max_num_fields=20)
        except ValueError:
            return self.refuse(400, message("serve.too_many_parameters"))
        after = values.get("after")
        if after is not None and (len(after) != 1 or not re.fullmatch(r"[0-9]{1,18}", after[0])):
            return self.refuse(400, message("serve.bad_after"))
        page = values.get("page", [None])[-1]
        page = None if page is None else page_key(page)
        if after is None or self.command == "HEAD":
            status = self.editor.status(page=page)
        elif self.server.long_polls.acquire(blocking=False):
            try:
                status = self.editor.status(int(after[0]), page)
            finally:
                self.server.long_polls.release()
        else:  # too many pages wait already: this one asks again in a moment (the reload script does)
            return self.send_body(b"busy\n", "text/plain; charset=utf-8", 503, {"Retry-After": "1"})
        body = json.dumps(status, ensure_ascii=False).encode("utf-8")
        return self.send_body(body, "application/json; charset=utf-8")

    def send_file(self) -> None:
        """Anything but HTML, as http.server sends it."""
        return super().do_HEAD() if self.command == "HEAD" else super().do_GET()


class EditorServer(HTTPServer):
    """An HTTP server on a fixed pool of worker threads (ThreadingHTTPServer starts a thread per
    request, without bound); a full queue makes the next connections wait in the kernel's backlog.
    A connection reaches a worker only once it has sent something: until then it waits in the
    waiting room (one thread, one selector), which drops it after IDLE_SECONDS, so clients that
    connect and stay silent hold no worker and delay no one."""

    request_queue_size = BACKLOG
    daemon_threads = True

    def __init__(self, address, handler, workers: int = WORKERS, waiting: int = WAITING):
        # Set before binding: a failed bind calls server_close() on a half-made server.
        self.pool = None
        self.room = WaitingRoom(self)
        self.slots = threading.BoundedSemaphore(workers + waiting)
        self.long_polls = threading.BoundedSemaphore(min(LONG_POLLS, max(workers - 1, 1)))
        if ":" in str(address[0]):  # an IPv6 address such as ::1
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"serve-{self.server_address[1]}")
        self.room.start()

    def process_request(self, request, client_address) -> None:
        self.slots.acquire()
        self.room.add(request, client_address)

    def dispatch(self, request, client_address) -> None:
        """A connection that has sent its first bytes, to a worker."""
        try:
            self.pool.submit(self._work, request, client_address)
        except RuntimeError:  # the pool is shut down: the server is stopping
            self.slots.release()
            self.shutdown_request(request)

    def drop(self, request) -> None:
        """A connection that stayed silent, or that the stopping server leaves."""
        self.slots.release()
        self.shutdown_request(request)

    def _work(self, request, client_address) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self.slots.release()

    def handle_error(self, request, client_address) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, ConnectionError | TimeoutError):
            line = message("serve.client_failed", client=client_address[0], kind=type(exc).__name__)
            print(f"serve: {line}: {exc}", file=sys.stderr)

    def server_close(self) -> None:
        super().server_close()
        self.room.stop()
        if self.pool is not None:
            self.pool.shutdown(wait=True)


class WaitingRoom:
    """Accepted connections that have not sent anything yet: handed to a worker when they do,
    dropped after IDLE_SECONDS of silence."""

    def __init__(self, server: EditorServer):
        self.server = server
        self.selector = selectors.DefaultSelector()
        self.wake_read, self.wake_write = socket.socketpair()
        self.selector.register(self.wake_read, selectors.EVENT_READ)
        self.arrived: list = []  # (request, address), added by the accepting thread
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name="serve-waiting-room", daemon=True)
        self.thread.start()

    def add(self, request, client_address) -> None:
        with self.lock:
            self.arrived.append((request, client_address))
        with contextlib.suppress(OSError):
            self.wake_write.send(b"\0")

    def run(self) -> None:
        since: dict = {}  # request -> (address, when it arrived)
        while not self.stopping.is_set():
            for key, _ in self.selector.select(timeout=0.5):
                if key.fileobj is self.wake_read:
                    with contextlib.suppress(OSError):
                        self.wake_read.recv(4096)
                    continue
                self.selector.unregister(key.fileobj)
                address, _ = since.pop(key.fileobj)
                self.server.dispatch(key.fileobj, address)
            with self.lock:
                arrived, self.arrived = self.arrived, []
            now = time.monotonic()
            for request, address in arrived:
                try:
                    self.selector.register(request, selectors.EVENT_READ)
                except (ValueError, OSError):  # closed already
                    self.server.drop(request)
                    continue
                since[request] = (address, now)
            for request in [r for r, (_, when) in since.items() if now - when > IDLE_SECONDS]:
                self.selector.unregister(request)
                del since[request]
                self.server.drop(request)
        for request in list(since):
            self.selector.unregister(request)
            self.server.drop(request)
        with self.lock:
            arrived, self.arrived = self.arrived, []
        for request, _ in arrived:
            self.server.drop(request)

    def stop(self) -> None:
        self.stopping.set()
        with contextlib.suppress(OSError):
            self.wake_write.send(b"\0")
        if self.thread is not None:
            self.thread.join()
        self.selector.close()
        self.wake_read.close()
        self.wake_write.close()


class EditorLoop:
    """The server and the watcher; start() builds once and starts both threads, stop() ends them."""

    def __init__(  # noqa: PLR0913
        self,
        sources: Path,
        out: Path,
        port: int = 8000,
        base_url: str = "/",
        quiet: bool = False,
        watch: list[Path] | None = None,
        interval: float = POLL_SECONDS,
        bind: str = "127.0.0.1",
    ):
        # target(): output/ may be a link that each rebuild points at a new folder (pipeline.publish.staging)
        self.sources, self.out = Path(sources), outdir.target(Path(out))
        self.base_url, self.quiet, self.interval = base_url, quiet, interval
        self.watch = watch or [self.sources, TEMPLATES]
        self.generation = 0  # successful rebuilds
        self.version = 0  # finished rebuilds, good or failed: the pages reload when it changes
        self.report: str | None = None  # the last rebuild's problems; None when it was good
        self.building = False
        self.last_seconds: dict | None = None  # the last rebuild's stage times
        self.open_pages: dict[str, int] = {}  # pages whose reload script waits now (long poll), and how many
        self.ahead: dict[str, bytes] = {}  # pages shown ahead of the rebuild that is under way (preview)
        self.ahead_files: dict[str, bytes] = {}  # and what they load: static files, the calculator's data
        self.ahead_version: int | None = None  # the version at which the last rebuild showed pages ahead
        self.same_as_ahead: frozenset[str] = frozenset()  # those the rebuild then wrote as they were shown
        self.warm = Warm(lives_on=True)  # the caches every rebuild of this loop shares (pipeline.warm)
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # notified when `version` changes
        self.stopping = threading.Event()
        handler = type("EditorHandler", (Handler,), {"editor": self})
        self.bind = bind
        self.server = EditorServer((bind, port), functools.partial(handler, directory=str(self.out / "site")))
        self.threads: list[threading.Thread] = []
        self.warming: threading.Thread | None = None  # warm_up(), until the first rebuild joins it

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.bind in ("", "0.0.0.0") else self.bind  # all addresses: this machine's
        host = "[::1]" if host == "::" else f"[{host}]" if ":" in host else host  # an IPv6 address in a URL
        return f"http://{host}:{self.server.server_address[1]}/"

    def status(self, after: int | None = None, page: str | None = None) -> dict:
        """The build's status; with `after`, once the version `page` sees differs from it (long poll)."""
        with self.lock:
            if after is not None:
                if page is not None:
                    self.open_pages[page] = self.open_pages.get(page, 0) + 1
                try:
                    self.changed.wait_for(
                        lambda: self.seen_by(page) != after or self.stopping.is_set(), timeout=LONG_POLL_SECONDS
                    )
                finally:
                    if page is not None:
                        self.open_pages[page] -= 1
                        if not self.open_pages[page]:
                            del self.open_pages[page]
            return {
                "generation": self.generation,
                "version": self.seen_by(page),
                "ok": self.report is None,
                "report": self.report,
                "building": self.building,
            }

    def seen_by(self, page: str | None) -> int:
        """The version as `page` sees it: a page shown ahead of the last rebuild that the rebuild then
        wrote as it was shown has nothing new to reload (called with the lock held)."""
        if page in self.same_as_ahead and self.ahead_version is not None and self.version == self.ahead_version + 1:
            return self.ahead_version
        return self.version

    def shown_ahead(self, url_path: str) -> tuple[bytes, bool] | None:
        """The page at `url_path` as the rebuild under way showed it ahead of the rest, or a file such a
        page loads, with whether it is a page; None when it showed neither."""
        key = page_key(url_path)
        with self.lock:
            if key is None:
                return None
            if key in self.ahead:
                return self.ahead[key], True
            return (self.ahead_files[key], False) if key in self.ahead_files else None

    def preview(self, renderer) -> Callable[[], None] | None:
        """build's `preview` (pipeline.build.show_ahead): the pages open in browsers now, at most
        PREVIEW_PAGES of them, rendered as the rebuild will write them (Renderer.preview), and what
        shows them: they are served instead of the files on disk until the rebuild ends, and the
        version moves, so that their pages reload. None when no open page can be shown ahead. What fails
        here is left to the whole build, which reports its problem: it never stops the build."""
        with self.lock:
            wanted = sorted(self.open_pages, key=lambda page: -self.open_pages[page])[:PREVIEW_PAGES]
        pages, files = {}, None
        for page in wanted:
            with contextlib.suppress(Exception):
                text = renderer.preview(page)
                if text is not None:
                    pages[page] = text.encode("utf-8")
        with contextlib.suppress(Exception):
            files = renderer.preview_files() if pages else None
        if files is None:
            return None

        def show() -> None:
            with self.lock:
                self.ahead, self.ahead_files, self.ahead_version = pages, files, self.version + 1
                self.version += 1
                self.changed.notify_all()

        return show

    def after_ahead(self, ok: bool) -> None:
        """At the end of a rebuild that showed pages ahead (called with the lock held, before the version
        moves): which of them it wrote byte for byte as they were shown; those pages do not reload."""
        if not self.ahead:  # none shown by this rebuild: those of an earlier one stay as they are
            return
        site = self.out / "site"

        def written(name: str, content: bytes) -> bool:
            path = _site_path(site, name.split("/"))
            return path is not None and _kind(path) == "file" and _read(path) == content

        same = set()
        if ok and all(written(name, content) for name, content in self.ahead_files.items()):
            same = {page for page, text in self.ahead.items() if written(page, text)}
        self.same_as_ahead, self.ahead, self.ahead_files = frozenset(same), {}, {}

    def say(self, text: str, stream=None) -> None:
        """A timestamped line on stream; standard output by default, looked up at the call (not at import)."""
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=stream or sys.stdout, flush=True)

    def rebuild(self) -> bool:
        """Build once in this process; on failure keep the last good site and remember the report."""
        from pipeline.build import build

        def progress(stage: str, seconds: float) -> None:
            if not self.quiet:
                print(f"  {stage_line(stage, seconds)}", file=sys.stderr, flush=True)

        started = time.perf_counter()
        with self.lock:
            self.building = True
        if self.warming is not None:  # an edit during the warm-up waits for it (it does what the rebuild would)
            self.warming.join()
            self.warming = None
        with self.lock:  # after a failed rebuild, its banner stays until a whole build replaces it
            preview = self.preview if self.report is None else None
        try:
            summary = build(self.sources, self.out, self.base_url, progress=progress, warm=self.warm, preview=preview)
        except Exception as exc:  # the loop must survive any broken template or source
            problems = getattr(exc, "problems", None)
            if problems is not None:
                report = format_report(problems)
            else:
                report = "".join(traceback.format_exception_only(exc)).strip()
                traceback.print_exc()
            with self.lock:
                self.after_ahead(ok=False)
                self.report, self.building = report, False
                self.version += 1
                self.changed.notify_all()
            print(report, file=sys.stderr)
            self.say(message("serve.stopped", site=self.out / "site"), sys.stderr)
            return False
        with self.lock:
            skipped = bool(summary.get("unchanged"))  # the site already matches these inputs
            fixed = self.report is not None
            if not skipped:
                self.generation += 1
            self.after_ahead(ok=True)
            if not skipped or fixed:
                self.version += 1
                self.changed.notify_all()
            self.report, self.building = None, False
        seconds = time.perf_counter() - started
        self.last_seconds = summary.get("seconds")
        if skipped:
            seconds_shown = f"{seconds:.1f}".replace(".", ",")
            self.say(message("serve.unchanged", seconds=seconds_shown) + (message("serve.reload") if fixed else ""))
        else:
            self.say(message("serve.rebuilt", seconds=f"{seconds:.1f}".replace(".", ","), generation=self.generation))
            for line in grouped_warnings(summary.get("warnings", [])):
                print(f"  {line}", file=sys.stderr)
        return True

    def warm_up(self) -> None:
        """While the editor reads the first build: import Great Expectations and make every table's
        suites (validate.prepare_suites), which the first edit's rebuild would otherwise wait for
        (1.5 s). Best effort: a failure here is the rebuild's to report."""
        from pipeline.validate import prepare_suites

        with contextlib.suppress(Exception):
            prepare_suites(self.warm)

    def watch_loop(self, seen: dict) -> None:
        while not self.stopping.wait(self.interval):
            now = snapshot(self.watch)
            if now == seen:
                continue
            # An editor may save in several writes: wait until the files stop changing.
            while not self.stopping.wait(SETTLE_SECONDS):
                settled = snapshot(self.watch)
                if settled == now:
                    break
                now = settled
            if self.stopping.is_set():
                return
            changed = sorted(set(now.items()) ^ set(seen.items()))
            names = sorted({os.path.basename(path) for path, _ in changed})
            self.say(message("serve.changed", names=", ".join(names[:5]) + (" …" if len(names) > 5 else "")))
            seen = now
            self.rebuild()

    def start(self, build_first: bool = True) -> EditorLoop:
        seen = snapshot(self.watch)  # taken before the build: edits made during it trigger another
        if build_first:
            self.rebuild()
        # Great Expectations' import and every rebuild after the first run on a deep stack of their own
        # (parallel.on_deep_stack: the checks' deep calls otherwise map and unmap the data stack).
        self.warming = threading.Thread(target=parallel.on_deep_stack, args=(self.warm_up,), daemon=True)
        self.warming.start()
        watch = functools.partial(parallel.on_deep_stack, functools.partial(self.watch_loop, seen))
        for target, args in ((self.server.serve_forever, (0.1,)), (watch, ())):
            thread = threading.Thread(target=target, args=args, daemon=True)
            thread.start()
            self.threads.append(thread)
        return self

    def stop(self) -> None:
        self.stopping.set()
        with self.lock:
            self.changed.notify_all()  # open long polls answer now
        self.server.shutdown()
        self.server.server_close()
        for thread in self.threads:
            thread.join()
        if self.warming is not None:  # nothing of the loop runs on after it stops (a test's process goes on)
            self.warming.join()


def serve(  # noqa: PLR0913
    sources: Path, out: Path, port: int = 8000, base_url: str = "/", quiet: bool = False, bind: str = "127.0.0.1"
) -> int:
    """`python -m pipeline serve`: build, serve, rebuild on change until Ctrl-C."""
    try:
        loop = EditorLoop(sources, out, port, base_url, quiet, bind=bind)
    except (OSError, OverflowError, ValueError) as exc:  # taken, not this machine's, out of range, not an address
        reason = getattr(exc, "strerror", None) or str(exc)
        print(message("serve.port_busy", bind=bind, port=port, reason=reason), file=sys.stderr)
        return 3
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop cleanly when killed, as on Ctrl-C
    loop.start()
    loop.say(message("serve.watching", site=loop.out / "site", url=loop.url, sources=sources))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        loop.stop()
    return 0
