"""What a build is made from, as content hashes, so that a build of unchanged inputs can be skipped.

Kept free of heavy imports: the no-change check runs before polars, DuckDB or Great
Expectations are loaded, which is what makes an unchanged rebuild instant.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import time
from pathlib import Path

from pipeline import ROOT, TEMPLATES

PACKAGE = ROOT / "pipeline"

STATE = "build-state.json"  # in the output folder, beside site/ and markdown/
MANIFEST = "manifest.json"  # in site/: every published file with its content hash
# The DuckDB file's bytes differ in every build (its header holds a random id): its SHA-256 is kept
# in this extended attribute of the file rather than in build-state.json, which stays byte-identical.
DATABASE_XATTR = "user.gpu_finetune.sha256"


def build_date() -> dt.date:
    """The date the build is made for: SOURCE_DATE_EPOCH when set (reproducible builds), else today (UTC)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        return epoch_date(epoch)
    return dt.datetime.now(dt.UTC).date()


def epoch_date(epoch: str) -> dt.date:
    """The date of SOURCE_DATE_EPOCH (whole seconds since 1970, as reproducible-builds.org defines it);
    ConfigError (exit 3, one line) for anything else: "abc", "1e9", a date past the year 9999."""
    from pipeline.messages import message
    from pipeline.problems import ConfigError

    text = epoch.strip()
    try:
        if not text.isascii() or not text.isdigit() or len(text) > 12:
            raise ValueError(epoch)
        return dt.datetime.fromtimestamp(int(text), dt.UTC).date()
    except (ValueError, OverflowError, OSError):
        raise ConfigError(message("config.source_date_epoch", value=epoch[:40])) from None


def tree_hash(folder: Path, pattern: str = "*", known: dict[str, str] | None = None) -> str:
    """One hash over every file below `folder` (names and contents); `known`: the SHA-256 of files
    already read (by their path relative to `folder`), taken as given instead of reading them again."""
    digest = hashlib.sha256()
    known = known or {}
    root = str(folder).rstrip(os.sep) + os.sep
    with Digests(folder) as digests:
        for rel in matching_files(folder, pattern):
            digest.update(rel.encode() + b"\0")
            digest.update(bytes.fromhex(known.get(rel) or digests.of(root + rel)))
    return digest.hexdigest()


def matching_files(folder: Path, pattern: str) -> list[str]:
    """The files below `folder` whose name matches `pattern`, as paths relative to it, in the order
    of sorted(folder.rglob(pattern)) (by their parts), outside __pycache__: what Path.rglob and
    is_file() give (a link to a file counts, a linked folder is not entered), with strings and
    os.scandir instead of Path objects (pathlib was most of an unchanged build's check)."""
    from fnmatch import fnmatchcase

    found, todo = [], [(str(folder), ())]
    while todo:
        path, parts = todo.pop()
        try:
            entries = list(os.scandir(path))
        except OSError:  # as rglob: an unreadable or missing folder holds nothing
            continue
        for entry in entries:
            if entry.name == "__pycache__":
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append((entry.path, (*parts, entry.name)))
                    continue
                matches = fnmatchcase(entry.name, pattern) and entry.is_file()
            except OSError:  # a link that loops (ELOOP) or cannot be followed: no file here; the loader says why
                continue
            if matches:
                found.append((*parts, entry.name))
    return ["/".join(parts) for parts in sorted(found)]


class Digests:
    """The SHA-256 of the files below one folder, remembered between processes by their status
    (git's index): a file whose size, modification and change times, inode and device are those it
    had when it was hashed is not read again. The change time (ctime) is set by the kernel on every
    write, rename or `touch`, and no program can set it back, so a file edited in any way is hashed
    anew. A file changed within the file system's timestamp granularity of its hashing could still
    show the same times after another write, so such an entry is not trusted until it is hashed
    again later (git's "racily clean" rule). The window is RACY_NS (50 ms: Linux stamps files from a
    clock that advances once per kernel tick, 1–10 ms) for a file whose change time has a fraction
    of a second, and COARSE_RACY_NS (2 s: FAT's granularity) for one whose change time is a whole
    second, as file systems with coarse timestamps give.

    The memory lives in the user cache (pipeline.cache, namespace `file-digests`, one entry per
    folder) and is checked like every entry there; a missing, corrupted or foreign entry only costs
    the hashing. Used as a context manager: what was hashed is stored on leaving.
    """

    NAMESPACE = "file-digests"
    FORMAT = "file-digests/1"
    RACY_NS = 50_000_000  # a few kernel ticks: the granularity of a file system with fine timestamps
    COARSE_RACY_NS = 2_000_000_000  # whole-second timestamps (FAT's are 2 s)

    def __init__(self, folder: Path):
        from pipeline import cache

        self.folder = Path(os.path.abspath(folder))  # not resolved: output/ may be a link switched by each build
        self.given = str(folder).rstrip(os.sep) + os.sep  # the paths asked for start with it (relpath is slow)
        self.store = cache.Cache()
        self.key = cache.make_key(self.FORMAT, str(self.folder))
        self.known = self._read()
        self.changed = False

    def _read(self) -> dict:
        if os.environ.get(MEMO_ENV) == "off":
            return {}
        payload = self.store.get(self.NAMESPACE, self.key)
        try:
            known = json.loads(payload) if payload else {}
        except ValueError:
            return {}
        return known if isinstance(known, dict) else {}

    def of(self, path: Path | str) -> str:
        """The SHA-256 (hex) of `path`'s bytes; OSError when it cannot be read."""
        status = os.stat(path)
        stamp = [status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino, status.st_dev]
        shown = str(path)
        rel = shown[len(self.given) :] if shown.startswith(self.given) else os.path.relpath(path, self.folder)
        entry = self.known.get(rel)
        if (
            isinstance(entry, list)
            and len(entry) == 7
            and entry[:5] == stamp
            and isinstance(entry[5], int)
            and status.st_ctime_ns < entry[5] - self.racy_window(status.st_ctime_ns)
            and isinstance(entry[6], str)
        ):
            return entry[6]
        hashed_at = time.time_ns()
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        self.known[rel] = [*stamp, hashed_at, digest]
        self.changed = True
        return digest

    def racy_window(self, ctime_ns: int) -> int:
        """How long after a file's change its hash is not trusted (see the class)."""
        return self.COARSE_RACY_NS if ctime_ns % 1_000_000_000 == 0 else self.RACY_NS

    def __enter__(self) -> Digests:
        return self

    def __exit__(self, *exc) -> None:
        if self.changed and os.environ.get(MEMO_ENV) != "off":
            kept = {rel: entry for rel, entry in self.known.items() if os.path.lexists(self.folder / rel)}
            self.store.put(self.NAMESPACE, self.key, json.dumps(kept, separators=(",", ":")).encode())


MEMO_ENV = "GPU_FINETUNE_DIGEST_MEMO"  # "off": hash every file every time


def inputs(sources: Path, base_url: str) -> dict[str, str]:
    """The fingerprint of a build: sources, templates, the pipeline's code, base URL and build date."""
    return {
        "sources": tree_hash(sources, "*.csv"),
        "templates": tree_hash(TEMPLATES),
        "code": tree_hash(PACKAGE, "*.py"),
        "base_url": base_url,
        "build_date": build_date().isoformat(),
    }


def read_state(out: Path) -> dict:
    """The build state the last build in `out` wrote (its inputs, validation and files); {} when none can be read."""
    try:
        return json.loads((out / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def is_current(out: Path, fingerprint: dict[str, str]) -> bool:
    """True when `out` is a complete, undamaged build of exactly these inputs."""
    state = read_state(out)
    return state.get("inputs") == fingerprint and intact(out, state)


def intact(out: Path, state: dict) -> bool:
    """Every file of the build in `out` is there with the bytes it was written with, and nothing else is.

    site/manifest.json holds the hashes of the site's files; build-state.json's "files" those of
    the others and the DuckDB file's own bytes (the manifest lists it by what it holds).
    """
    database = state.get("database")
    expected = recorded_files(out, state)
    if expected is None or not isinstance(database, str):
        return False
    found = _files(out)
    if found is None or found != set(expected) | {STATE} or database not in expected:
        return False
    expected[database] = _database_digest(out / database)
    root = str(out).rstrip(os.sep) + os.sep
    with Digests(out) as digests:
        for rel, digest in expected.items():
            try:
                if digests.of(root + rel) != digest:
                    return False
            except OSError:
                return False
    return True


def recorded_files(out: Path, state: dict) -> dict[str, str] | None:
    """Every file of the build in `out` with the SHA-256 it was written with, by its path below `out`:
    site/manifest.json's (the site's files) and the build state's "files" (the others, and the DuckDB
    file's own bytes); None when either cannot be read."""
    files = state.get("files")
    if not isinstance(files, dict):
        return None
    try:
        manifest = json.loads((out / "site" / MANIFEST).read_text(encoding="utf-8"))["files"]
        return {f"site/{rel}": digest for rel, digest in manifest.items()} | files
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _database_digest(path: Path) -> str | None:
    """The SHA-256 the build recorded for its DuckDB file (DATABASE_XATTR); where the file system
    keeps no extended attributes, the file's own hash (then only its presence is checked)."""
    try:
        return os.getxattr(path, DATABASE_XATTR).decode("ascii")
    except AttributeError:  # no extended attributes in this Python (macOS)
        pass
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return None  # not recorded (a copy that dropped it): the build runs again
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _files(folder: Path, prefix: str = "") -> set[str] | None:
    """Every regular file below `folder`, as relative paths; None if anything else is there (a link, a socket)."""
    found: set[str] = set()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    for entry in entries:
        rel = prefix + entry.name
        if entry.is_symlink():
            return None
        if entry.is_dir():
            below = _files(Path(entry.path), rel + "/")
            if below is None:
                return None
            found |= below
        elif entry.is_file():
            found.add(rel)
        else:
            return None
    return found


def file_hash(content: bytes) -> str:
    """The SHA-256 of a file's bytes, as the manifest and the build state list it."""
    return hashlib.sha256(content).hexdigest()
