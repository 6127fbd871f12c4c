"""Stage 6, publishing: write a complete build beside output/ and put it in place atomically.

Nothing is written into output/ itself: a build goes to a fresh sibling folder, every file
through pipeline.publish.paths (so no name can lead outside it), and only when every file is written
does it replace output/:
- where the kernel can exchange two folders atomically (Linux's renameat2 RENAME_EXCHANGE),
  the new folder and output/ trade places;
- elsewhere (macOS, file systems without the exchange) output/ is a symbolic link to the build
  folder beside it, and a new link replaces it in one rename. The first such build turns a real
  output/ folder into the link: between its two renames output/ is missing, and a build killed
  right there is put back by the next build (`outdir.tidy`).

A file identical to the previous build's is hard-linked from it (it keeps its modification
time), but only after its bytes were compared with what this build would write; the DuckDB file
(whose bytes differ in every build) and, with `--force`, every file are written anew.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from pipeline import parallel
from pipeline.combine import Catalog
from pipeline.fingerprint import DATABASE_XATTR, MANIFEST, STATE, file_hash, read_state, recorded_files
from pipeline.publish import search
from pipeline.publish.downloads import (
    DATABASE,
    Streamed,
    Workbooks,
    any_too_large,
    database_keys,
    download_paths,
    iter_downloads,
    made_parquet,
    write_database,
)
from pipeline.publish.outdir import GENERATOR, layout_target, side_name, target
from pipeline.publish.paths import existing_file, link_verified, located, make_parents, safe_path, write_file
from pipeline.render.site import TEMPLATES, Rendered
from pipeline.schema import ALL_TABLES, Table

if TYPE_CHECKING:
    import polars as pl

DATABASE_PATH = f"site/data/{DATABASE}"


def write_tree(
    root: Path, files: dict[str, str | bytes], previous: Path | None, hashes: dict[str, str] | None = None
) -> Counter:
    """Write every file below `root` (relative paths); one whose bytes the previous build's file
    at the same path has is linked from `previous` instead (kept). Records each file's hash in `hashes`.
    A file too large to hold (downloads.Streamed) is always written: created empty (paths.write_file:
    nothing there before, no link followed), then written by name (`root` is a build's private
    folder: mkdtemp's, which only this user may change), then hashed from the file."""
    counts: Counter = Counter()
    for rel, content in sorted(files.items()):
        if isinstance(content, Streamed):
            path = write_file(root, rel, b"")
            try:
                content.write(str(path))
            except OSError as exc:
                if exc.filename:
                    raise
                raise located(exc, path) from exc  # polars' own errors name neither the file nor the errno
            counts["written"] += 1
            if hashes is not None:
                hashes[rel] = _file_digest(path)
            continue
        data = content if isinstance(content, bytes) else content.encode("utf-8")
        if previous is not None and link_verified(previous, root, rel, data):
            counts["kept"] += 1
        else:
            write_file(root, rel, data)
            counts["written"] += 1
        if hashes is not None:
            hashes[rel] = file_hash(data)
    return counts


def manifest_text(hashes: dict[str, str]) -> str:
    """site/manifest.json: every published file with its content hash, for a CDN sync.

    The DuckDB file's bytes carry a random id, so its entry hashes what it holds: the
    Parquet files of the same tables. Two builds of the same sources give the same manifest.
    """
    files = {rel.removeprefix("site/"): h for rel, h in sorted(hashes.items()) if rel.startswith("site/")}
    files.pop(MANIFEST, None)
    if DATABASE_PATH in hashes:
        parquet = "".join(h for rel, h in files.items() if rel.startswith("data/") and rel.endswith(".parquet"))
        files[DATABASE_PATH.removeprefix("site/")] = file_hash(f"duckdb:{parquet}".encode())
    return json.dumps({"files": files}, indent=1, sort_keys=True) + "\n"


_DIGEST_CHUNK = 1 << 24  # bytes read at a time: few reads, so few waits for the GIL in a download thread


def _file_digest(path: Path) -> str:
    """The SHA-256 of a file, read in large pieces (hashlib.file_digest reads 256 KiB at a time, and a
    thread asks for the GIL at every piece: up to 5 ms each while another thread runs Python)."""
    digest, buffer = hashlib.sha256(), bytearray(_DIGEST_CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while size := f.readinto(buffer):
            digest.update(view[:size])
    return digest.hexdigest()


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE): True when done, False where the
    system or the file system has no such call; any other failure (permissions, a read-only or
    immutable folder) is raised as OSError."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _exchange_works(folder: Path, known: dict[int, bool]) -> bool:
    """Whether folders in `folder` can be exchanged: tried on two empty folders once per file system,
    remembered in `known` (device -> answer; pipeline.warm keeps it in a warm process)."""
    device = os.stat(folder).st_dev
    if device not in known:
        a = Path(tempfile.mkdtemp(prefix=f".{folder.name}.probe-{os.getpid()}-", dir=folder))
        b = Path(tempfile.mkdtemp(prefix=f".{folder.name}.probe-{os.getpid()}-", dir=folder))
        try:
            known[device] = _exchange(a, b)
        finally:
            os.rmdir(a)
            os.rmdir(b)
    return known[device]


def _new_link(staging: Path, out: Path) -> Path:
    """A symbolic link beside `out` to the build folder `staging` (relative: the two move together)."""
    while True:
        link = out.parent / f"{side_name(out, 'link')}{os.getpid()}-{os.urandom(4).hex()}"
        try:
            os.symlink(staging.name, link)
            return link
        except FileExistsError:
            continue


def put_in_place(staging: Path, out: Path, exchange: dict[int, bool] | None = None) -> Path | None:
    """Make the complete build in `staging` the one at `out` in one atomic step; returns the folder
    that now holds the previous build (for the caller to remove), or None. `exchange`: what is known
    of the file systems (device -> whether they exchange folders), kept by a warm process."""
    current = layout_target(out)
    if current is not None:  # output/ is a link: point a new one at this build
        _switch_link(staging, out)
        return current
    if os.path.lexists(out):
        if _exchange(staging, out):
            return staging  # now holds the previous build
        # No exchange here: output/ becomes a link (the one moment without it, see the docstring).
        old = Path(tempfile.mkdtemp(prefix=f"{side_name(out, 'old')}{os.getpid()}-", dir=out.parent))
        os.rmdir(old)
        _switch_link(staging, out, move_aside=old)
        return old
    if _exchange_works(out.parent, {} if exchange is None else exchange):
        os.rename(staging, out)
    else:
        _switch_link(staging, out)
    return None


def remove_previous(old: Path | None) -> Path | None:
    """Remove the previous build that put_in_place handed back; returns it when it could not be
    removed (the new build is in place; the next build removes it)."""
    if old is None:
        return None
    shutil.rmtree(old, ignore_errors=True)
    return old if os.path.lexists(old) else None


def _switch_link(staging: Path, out: Path, move_aside: Path | None = None) -> None:
    """Point `out` at `staging` with one rename of a new link over it; with `move_aside`, the
    folder now at `out` is first renamed there (and put back if the link cannot take its place)."""
    link = _new_link(staging, out)
    try:
        if move_aside is not None:
            os.rename(out, move_aside)
            try:
                os.replace(link, out)
            except BaseException:
                os.rename(move_aside, out)
                raise
        else:
            os.replace(link, out)
    finally:
        if os.path.islink(link):
            os.unlink(link)


def publish(out: Path, rendered: Rendered, catalog: Catalog, state: dict, force: bool = False) -> Counter:
    """Write the whole build to a sibling folder, then put it in place of `out`.

    Files identical to the previous build's are hard-linked from it, so they keep their
    modification times; returns how many files were written and how many kept.
    """
    return stage(out, rendered, catalog, force=force).swap(state)


class Staging:
    """A build written beside `out`: swap() finishes it and puts it in place, discard() drops it."""

    def __init__(  # noqa: PLR0913
        self,
        out: Path,
        folder: Path,
        previous: Path | None,
        hashes: dict[str, str],
        counts: Counter,
        database: dict | None = None,
    ):
        self.out, self.folder, self.previous, self.hashes, self.counts = out, folder, previous, hashes, counts
        self.leftover: Path | None = None  # a previous build that could not be removed
        self.database = database or {}  # _Database.join: the keys and the tables made again

    def swap(
        self, state: dict, late: dict[str, str | bytes] | None = None, exchange: dict[int, bool] | None = None
    ) -> Counter:
        """Add the `late` site files (those that waited for validation), the manifest and the
        build state, then put the folder in place of `out` (`exchange` as in put_in_place)."""
        out, staging, hashes = self.out, self.folder, self.hashes
        try:
            counts = self.counts + write_tree(
                staging, {f"site/{rel}": c for rel, c in (late or {}).items()}, self.previous, hashes
            )
            readme = (TEMPLATES / "output-README.md").read_bytes()
            counts += write_tree(
                staging, {f"site/{MANIFEST}": manifest_text(hashes), "README.md": readme}, self.previous, hashes
            )
            outside = {rel: h for rel, h in hashes.items() if not rel.startswith("site/")}
            outside[f"site/{MANIFEST}"] = hashes[f"site/{MANIFEST}"]
            files = dict(sorted(outside.items()))
            state = {
                "generator": GENERATOR,
                **state,
                "files": files,
                "database": DATABASE_PATH,
                "database_tables": self.database.get("keys"),
            }
            counts += write_tree(staging, {STATE: json.dumps(state, indent=1, sort_keys=True) + "\n"}, self.previous)
            staging.chmod(0o755)
            old = put_in_place(staging, out, exchange)
        except BaseException:
            self.discard()
            raise
        self.leftover = remove_previous(old)
        return counts

    def outcome(self, counts: Counter) -> dict:
        """For the build summary: the files written and kept, a previous build that could not be
        removed, and the DuckDB file's tables made again (the others came from the previous file)."""
        return {"leftover": self.leftover, "files": counts, "database": self.database.get("made", [])}

    def discard(self) -> None:
        if self.folder.is_dir() and not self.folder.is_symlink() and layout_target(self.out) != self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


# While the downloads' thread runs, Python hands the GIL over after 0.5 ms instead of 5 ms. DuckDB
# takes the GIL after each of its tasks (to check for Ctrl-C), and a file read or a SHA-256 update
# takes it back after each chunk: each time the thread waited for the rendering, pure Python, to let
# go of it. Beside a busy Python thread, DuckDB wrote the 10^6-row file in 22 s instead of 2.3 s
# alone, and in 4.4 s with this interval (`python bench/gil_wait.py`); two busy Python threads lose
# about a tenth to the more frequent handovers.
THREAD_SWITCH_SECONDS = 0.0005


class Downloads:
    """A build's downloads (every table's CSV, XLSX, Parquet, metadata.json, datapackage.json and the
    DuckDB file), written into the build's new folder beside `out` (stage() adds the pages and the
    rest). A build starts it before rendering. When a table is too large for a workbook
    (downloads.EXCEL_MAX_ROWS), a thread writes them meanwhile: polars and DuckDB write mostly without
    the GIL, on the core that rendering (pure Python) leaves free (THREAD_SWITCH_SECONDS meanwhile,
    for the moments they take it). Smaller
    downloads are mostly Python (metadata, links to the previous build's files), which a thread would
    only interleave with the rendering (`serve`'s rebuild was 0.15 s slower): join() writes them. Each
    path is checked before the first file is written; with `force` nothing is taken from the
    previous build. `release`: the current release, which datapackage.json carries; `workbooks` as
    downloads.iter_downloads. Without that thread the DuckDB file, the one large part of the smaller
    downloads, is begun at once in a thread of its own, keyed on the Parquet files made for it now
    (_early_database).

    Nothing in this process may fork while the thread runs (a child would inherit the locks it holds):
    a build starts its children (Great Expectations, the workbooks, the charts) first."""

    def __init__(  # noqa: PLR0913
        self,
        out: Path,
        catalog: Catalog,
        workbooks: Workbooks | None = None,
        release: dict | None = None,
        force: bool = False,
    ) -> None:
        out = target(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        self.out, self.previous = out, (out if not force and out.is_dir() else None)
        self.paths = [f"site/data/{name}" for name in download_paths(catalog)]
        self.hashes: dict[str, str] = {}
        self.counts: Counter = Counter()
        self.database: dict = {}
        self.folder = Path(tempfile.mkdtemp(prefix=f"{side_name(out, 'build')}{os.getpid()}-", dir=out.parent))
        self._stop, self._error = threading.Event(), None
        try:
            for rel in self.paths:
                safe_path(self.folder, rel)  # UnsafePath before anything is written
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        self._args = (catalog, workbooks, release)
        self._thread: threading.Thread | None = None
        self._switch: float | None = None  # the switch interval to restore, while a thread runs
        self._database: _Database | None = None  # begun early (early_database)
        if self.threaded(catalog):
            self._thread = threading.Thread(target=self._run, args=self._args, name="downloads", daemon=True)
            self._switch_to_short()
            self._thread.start()
        elif workbooks is not None and parallel.WORKERS > 1:
            self._early_database(catalog, workbooks)

    def _switch_to_short(self) -> None:
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch, THREAD_SWITCH_SECONDS))

    def _early_database(self, catalog: Catalog, workbooks: Workbooks) -> None:
        """Without the downloads' thread (every table small enough for a workbook, so every table's
        TableFiles is made): the Parquet files, then the DuckDB file keyed on their hashes, made in a
        thread of its own, so that they are made while the pages render (polars, DuckDB and the
        hashing run mostly without the GIL) instead of after them (a fifth of `serve`'s rebuild), and
        the build's own thread does not wait for polars' Parquet writer before it renders (at 10^5
        rows 0.3-0.5 s: docs/operations.md, "Twenty-first round"). join() takes the Parquet files
        that thread made and checks that the files written have the hashes it was keyed on."""
        texts = workbooks.texts
        if any(table.name not in texts for table in ALL_TABLES):
            return

        def parquet() -> dict[str, str]:
            return {
                f"site/data/{table.name}.parquet": file_hash(made_parquet(texts[table.name], catalog, table))
                for table in ALL_TABLES
            }

        self._switch_to_short()
        self._database = _Database(self.folder, catalog, None, self.previous, parquet=parquet)

    @staticmethod
    def threaded(catalog: Catalog) -> bool:
        """Whether the downloads are written by a thread: a table is too large for a workbook, and the
        build uses two cores (PIPELINE_WORKERS=1 keeps all of it in one thread, as to profile it)."""
        return parallel.WORKERS > 1 and any_too_large(catalog)

    def _run(self, catalog: Catalog, workbooks: Workbooks | None, release: dict | None) -> None:
        parallel.in_background()
        try:
            self._write(catalog, workbooks, release)
        except BaseException as exc:  # raised in the build's thread by join()
            self._error = exc

    def _write(self, catalog: Catalog, workbooks: Workbooks | None, release: dict | None) -> None:
        # Each download is written as it is made (one table's files in memory at a time), each to a
        # path checked before: download_paths names them all before any is made. In this thread, the
        # DuckDB file is begun in a thread of its own: at once when there is no previous build to
        # keep tables from (it needs no hash), else once every Parquet file is written (a table is
        # kept by its Parquet file's hash). Without this thread it was begun before the pages
        # rendered (_early_database), or, with one worker, it is written after the rest. Where no
        # database waits for the Parquet files, a large table's CSV and Parquet come from one pass.
        expected, made = {d for d in self.paths if d != DATABASE_PATH}, set()
        parquet, threaded = {f"site/data/{t.name}.parquet" for t in ALL_TABLES}, self._thread is not None
        database = None
        if threaded and self.previous is None:
            database = _Database(self.folder, catalog, None, None)
        if self._database is not None:
            self._database.parquet_made.wait()  # its thread made them first: taken, not made again
        try:
            together = not (threaded and self.previous is not None)
            for name, content in iter_downloads(catalog, workbooks, release, together):
                if self._stop.is_set():
                    break
                rel = f"site/data/{name}"
                assert rel in expected and rel not in made, f"download_paths is out of date: {rel}"
                made.add(rel)
                self.counts += write_tree(self.folder, {rel: content}, self.previous, self.hashes)
                del content
                if database is None and threaded and parquet <= made:
                    database = _Database(self.folder, catalog, self.hashes, self.previous)
            else:
                assert made == expected, "download_paths is out of date"
                if self._database is not None:
                    database, self._database = self._database, None
                    written = {rel: self.hashes[rel] for rel in database.early}
                    assert written == database.early, "the Parquet files differ from those the database was keyed on"
                database = database or _Database(self.folder, catalog, self.hashes, self.previous, threaded=False)
                self.database = database.join(self.hashes)
                self.hashes[DATABASE_PATH] = ""  # listed in the manifest by what it holds (manifest_text)
                self.counts["written"] += 1
        finally:
            if database is not None and database.thread.is_alive():  # stopped or failed: interrupted, its error dropped
                database.stop()
            if self._database is not None:  # begun early and not reached: the same
                self._database.stop()

    def join(self) -> None:
        """Wait for the downloads (or write them now, when no thread was started); their error, if any,
        is raised here."""
        if self._thread is None:
            self._run(*self._args)
        else:
            self._thread.join()
        self._switch_back()
        if self._error is not None:
            raise self._error

    def _switch_back(self) -> None:
        """The switch interval as it was before the thread started (once the thread has ended)."""
        if self._switch is not None:
            sys.setswitchinterval(self._switch)
            self._switch = None

    def discard(self) -> None:
        """After a failure: the thread stops after the file it is writing, and the folder is removed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._database is not None:  # begun early, not joined yet: interrupted, its error dropped
            self._database.stop()
        self._switch_back()
        shutil.rmtree(self.folder, ignore_errors=True)


def stage(  # noqa: PLR0913
    out: Path,
    rendered: Rendered,
    catalog: Catalog,
    skip: tuple[str, ...] = (),
    workbooks: Workbooks | None = None,
    force: bool = False,
    indexes: dict | None = None,
    downloads: Downloads | None = None,
    keep_pages: bool = True,
    indexer: search.Indexer | None = None,
) -> Staging:
    """Write the pages, articles and downloads into a fresh sibling folder of `out`; the site
    files named in `skip` are left for Staging.swap(); `workbooks` as downloads.iter_downloads;
    `indexes` a warm process's last search index (search.start_index's `kept`); `downloads`: the
    Downloads the build started into that folder before rendering (started here if None). Without
    `keep_pages` the text of each page once written is dropped from `rendered` (its name stays, with
    None): a build does not hold its pages while it waits for the downloads (237 MB of HTML at 10^7
    rows, twice that as Python text). `indexer`: the search.Indexer the pages were handed to as they
    were rendered (a new one by default).

    Every path is checked before a byte is written to it. With `force` nothing is taken
    from the previous build. datapackage.json carries the release the render shows (rendered.release)."""
    if downloads is None:
        downloads = Downloads(out, catalog, workbooks, rendered.release, force)
    staging, previous = downloads.folder, downloads.previous
    files = {f"site/{rel}": content for rel, content in rendered.site.items() if rel not in skip}
    files.update({f"markdown/{rel}": content for rel, content in rendered.markdown.items()})
    later = [f"site/{rel}" for rel in skip] + [f"site/{MANIFEST}", "README.md", STATE]
    searching = None
    try:
        for rel in [*files, *later]:
            safe_path(staging, rel)  # UnsafePath before a page is written
        indexer = search.Indexer(stream=False) if indexer is None else indexer
        searching = indexer.finish(files, kept=indexes)  # made while the downloads are written
        hashes: dict[str, str] = {}
        counts = write_tree(staging, files, previous, hashes)
        if not keep_pages:
            files.clear()
            rendered.drop(skip)
        downloads.join()
        hashes.update(downloads.hashes)
        counts += downloads.counts
        index, searching = searching(), None
        counts += write_tree(staging, index, previous, hashes)
    except BaseException:
        if searching is not None:
            with contextlib.suppress(Exception):
                searching()  # the child is waited for and its folder removed
        downloads.discard()
        raise
    return Staging(downloads.out, staging, previous, hashes, counts, downloads.database)


STOP_POLL = 0.05  # seconds between the interrupts of a stopping build's DuckDB file (_Database.stop)


class _Database:
    """_write_database begun now: in a thread of its own (`threaded`, the build's downloads thread
    goes on with the large CSVs) or at once; join() waits for it and gives its outcome or raises its
    error; stop() interrupts DuckDB (a failed build need not wait for the file: 30 s at 10^7 rows).
    It reads a copy of the files' hashes as they are now (None: none is needed, see _write_database)."""

    def __init__(  # noqa: PLR0913
        self,
        staging: Path,
        catalog: Catalog,
        hashes: dict[str, str] | None,
        previous: Path | None,
        threaded: bool = True,
        parquet: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        self.outcome, self.error = None, None
        # `parquet`, given: run first in the thread, it makes the Parquet files and gives their hashes
        # (`early`), which the file is then keyed on instead of `hashes`; `parquet_made` is set after it.
        self.early: dict[str, str] = {}
        self.parquet_made = threading.Event()
        self._lock, self._stopped, self._connections = threading.Lock(), False, []
        self.stopping = threading.Event()  # set by stop(): also ends a comparison (database_update), not DuckDB's
        hashes = None if hashes is None else dict(hashes)
        args = (parquet, staging, catalog, hashes, previous)
        self.thread = threading.Thread(target=self._run, args=args, name="database", daemon=True)
        if threaded:
            self.thread.start()
        else:
            self._run(*args)

    def _run(  # noqa: PLR0913
        self,
        parquet: Callable[[], dict[str, str]] | None,
        staging: Path,
        catalog: Catalog,
        hashes: dict[str, str] | None,
        previous: Path | None,
    ) -> None:
        parallel.in_background()  # (nothing in the main thread, when not threaded)
        try:
            try:
                if parquet is not None:
                    self.early = parquet()
                    hashes = dict(self.early)  # keyed on the Parquet files made here
            finally:
                self.parquet_made.set()  # Downloads waits for it, also when making them failed
            self.outcome = _write_database(staging, catalog, hashes, previous, self._connected, self.stopping)
        except BaseException as exc:  # raised by join()
            self.error = exc

    def _connected(self, con) -> None:
        with self._lock:
            self._connections.append(con)
            if self._stopped:
                con.interrupt()

    def stop(self) -> None:
        """Interrupt what DuckDB is doing and wait for the thread (its error is not raised). DuckDB's
        interrupt reaches only a query that runs (one sent between two statements is lost), so it is
        sent again every STOP_POLL seconds until the thread ends."""
        self.stopping.set()
        with self._lock:
            self._stopped = True
        while True:
            with self._lock:
                for con in self._connections:
                    with contextlib.suppress(duckdb.Error):  # closed already: the file was written
                        con.interrupt()
            if not self.thread.is_alive():
                return
            self.thread.join(STOP_POLL)

    def join(self, hashes: dict[str, str]) -> dict:
        """The outcome: the tables made again, and the keys of the file's tables, made from `hashes`
        (every Parquet file's, written by now)."""
        if self.thread.is_alive():
            self.thread.join()
        if self.error is not None:
            raise self.error
        return {"keys": _keys(hashes), "made": self.outcome}


def _write_database(  # noqa: PLR0913
    staging: Path,
    catalog: Catalog,
    hashes: dict[str, str] | None,
    previous: Path | None,
    connected=None,
    stopping: threading.Event | None = None,
) -> dict:
    """The DuckDB file. Its header holds a random id, so no build can tell by its bytes that the
    previous build's file is what it would write; what each table in it is made from is recorded
    instead (downloads.database_keys, in the build state). When the previous build's file is intact
    (its bytes have the SHA-256 recorded in its extended attribute) and its keys are recorded, a copy
    of it is taken and only the tables whose key changed are made again; otherwise the file is
    written anew. The new file's SHA-256 goes into an extended attribute (where the file system has
    them), for the no-change check and the next build. Returns the names of the tables made again
    (the build summary's "database"; _Database.join adds the keys, the build state's
    "database_tables"). With no previous build (`--force`, a first build) the file is written anew
    and needs no hash: `hashes` may then be None."""
    path = safe_path(staging, DATABASE_PATH)
    make_parents(path)  # begun with no hash, it may come before the first download
    if previous is None:
        write_database(path, catalog, connected=connected)
        _record_digest(path)
        return [t.name for t in ALL_TABLES]
    keys = _keys(hashes)
    before, files = _previous_state(previous)
    replace = [t for t in ALL_TABLES if before.get(t.name) != keys[t.name]]
    # Nothing to keep (another DuckDB or storage version is in every key): written anew, never a copy
    # of a file this DuckDB may not open as it is.
    if len(replace) < len(ALL_TABLES) and _copy_intact(previous / DATABASE_PATH, path):
        try:
            dropped = tuple(sorted(set(before) - set(keys)))
            earlier = functools.partial(_earlier_rows, previous, (before, files), stopping)
            write_database(path, catalog, replace, dropped, connected=connected, earlier=earlier)
        except duckdb.Error:  # the copy could not be updated: written anew (I/O errors are OSError here)
            if stopping is not None and stopping.is_set():
                raise  # interrupted by a stopping build: nothing more to write
            path.unlink(missing_ok=True)
            Path(f"{path}.wal").unlink(missing_ok=True)
            replace = list(ALL_TABLES)
            write_database(path, catalog, connected=connected)
    else:
        replace = list(ALL_TABLES)
        write_database(path, catalog, connected=connected)
    _record_digest(path)
    return [t.name for t in replace]


def _keys(hashes: dict[str, str]) -> dict[str, str]:
    """downloads.database_keys of the Parquet files' hashes among `hashes`."""
    return database_keys({t.name: hashes[f"site/data/{t.name}.parquet"] for t in ALL_TABLES})


def _record_digest(path: Path) -> None:
    """The file's SHA-256 in its extended attribute (for the no-change check and the next build)."""
    with contextlib.suppress(AttributeError, OSError):  # no extended attributes here: see fingerprint.intact
        os.setxattr(path, DATABASE_XATTR, _file_digest(path).encode("ascii"))


def _previous_state(previous: Path | None) -> tuple[dict[str, str], dict[str, str]]:
    """The tables' keys the previous build recorded for its DuckDB file, and the SHA-256 of its files by
    path (fingerprint.recorded_files); {} for either when it has none."""
    state = read_state(previous) if previous is not None else {}
    if not isinstance(state, dict):
        return {}, {}
    keys = state.get("database_tables")
    ok = isinstance(keys, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in keys.items())
    return (keys if ok else {}), recorded_files(previous, state) or {}


class Stopped(Exception):
    """The build stopped while the DuckDB file's thread compared a table (_Database.stop)."""


def _earlier_rows(
    previous: Path, state: tuple[dict[str, str], dict[str, str]], stopping: threading.Event | None, table: Table
) -> tuple[Iterator[pl.DataFrame], int] | None:
    """The rows of `table` that the copy of the previous build's DuckDB file holds, as the previous
    build's Parquet download of it (its row groups, and their count), for write_database to update
    the table in place: only when that file's bytes have the SHA-256 the previous build recorded, the
    table's key recorded for the file is the one those rows make with this build's DDL, comments and
    DuckDB (so the copy's table was written from them, as this build would), and it has at least
    database_update.UPDATE_MIN_ROWS rows. None otherwise: the table is made again. `state`: the previous
    build's table keys and files' hashes (_previous_state). Once `stopping` is set the next row group
    raises Stopped: a stopped build does not wait for the comparison (some seconds at 10^7 rows)."""
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.publish.database_update import UPDATE_MIN_ROWS

    before, files = state
    rel = f"site/data/{table.name}.parquet"
    recorded = files.get(rel)
    if recorded is None or before.get(table.name) != database_keys({table.name: recorded}, (table,))[table.name]:
        return None
    source = existing_file(previous, rel)
    try:
        data = source.read_bytes() if source is not None else b""
    except OSError:
        return None
    if file_hash(data) != recorded:
        return None
    parquet = pq.ParquetFile(pa.BufferReader(data))
    if parquet.metadata.num_rows < UPDATE_MIN_ROWS:
        return None

    def groups() -> Iterator[pl.DataFrame]:
        for i in range(parquet.num_row_groups):
            if stopping is not None and stopping.is_set():
                raise Stopped
            yield pl.from_arrow(parquet.read_row_group(i))

    return groups(), parquet.metadata.num_rows


def _copy_intact(source: Path, copy: Path) -> bool:
    """Copy the previous build's DuckDB file to `copy` when the copy's bytes have the SHA-256 recorded
    in the original's extended attribute; False (and no copy) when it has none, or another, or
    the file is missing or not a plain file."""
    try:
        if source.is_symlink() or not source.is_file() or os.path.lexists(f"{source}.wal"):
            return False
        recorded = os.getxattr(source, DATABASE_XATTR).decode("ascii")
        shutil.copyfile(source, copy)
    except (AttributeError, OSError, UnicodeDecodeError):
        copy.unlink(missing_ok=True)
        return False
    if _file_digest(copy) != recorded:
        copy.unlink()
        return False
    return True
