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
import os
import re
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
# A table's rows, left out of what Pagefind reads (the pages are the build's own HTML: no <tbody>
# nests in another, and article markup is sanitised).
TABLE_ROWS = re.compile(r"<tbody>.*?</tbody>", re.S)


def indexed_text(html: str) -> str:
    """The page as Pagefind reads it: its tables without their rows."""
    return TABLE_ROWS.sub("", html)


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


def start_index(site: dict[str, str | bytes], inside: Path, prefix: str = "site/") -> Callable[[], dict[str, bytes]]:
    """Index the pages among `site` (paths under `prefix`) in a child process; the returned function
    waits for it and gives the index files by path (`site/pagefind/...`). Pagefind reads the pages
    from, and writes its index into, a folder made inside `inside` (the build's staging folder, so
    nothing is written outside the build's own folder), removed when the function returns."""
    work = Path(tempfile.mkdtemp(prefix=".search-", dir=inside))
    try:
        pages = work / "site"
        for rel, content in site.items():
            name = rel.removeprefix(prefix)
            if not rel.startswith(prefix) or not name.endswith(".html") or name in NOT_INDEXED:
                continue
            path = pages / name
            path.parent.mkdir(parents=True, exist_ok=True)
            text = content.decode("utf-8") if isinstance(content, bytes) else content
            path.write_text(indexed_text(text), encoding="utf-8")
        if not pages.is_dir():  # no page to index (a site of downloads only): no index, no search files
            shutil.rmtree(work, ignore_errors=True)
            return dict
        command = [
            executable(),
            "--site",
            str(pages),
            "--output-path",
            str(work / "index"),
            "--force-language",
            "ru",
            "--keep-index-url",
        ]
        parent = os.getpid()
        with sigint_held():
            child = subprocess.Popen(  # killed with the build (die_with_parent): it writes into the build's folder
                command,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env={**os.environ, "PAGEFIND_QUIET": "true"},
                preexec_fn=lambda: die_with_parent(parent),
            )
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
            return {
                f"{prefix}{FOLDER}/{path.relative_to(index).as_posix()}": path.read_bytes()
                for path in sorted(index.rglob("*"))
                if path.is_file() and not path.name.startswith(UNUSED)
            }
        finally:
            shutil.rmtree(work, ignore_errors=True)

    return finish
