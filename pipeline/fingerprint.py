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
        return dt.datetime.fromtimestamp(int(epoch), dt.UTC).date()
    return dt.datetime.now(dt.UTC).date()


def tree_hash(folder: Path, pattern: str = "*") -> str:
    """One hash over every file below `folder` (names and contents)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob(pattern) if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def inputs(sources: Path, base_url: str) -> dict[str, str]:
    """The fingerprint of a build: sources, templates, the pipeline's code, base URL and build date."""
    return {
        "sources": tree_hash(sources, "*.csv"),
        "templates": tree_hash(TEMPLATES),
        "code": tree_hash(PACKAGE, "*.py"),
        "base_url": base_url,
        "build_date": build_date().isoformat(),
    }


def read_state(out: Path) -> dict:  # noqa: D103
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
    files, database = state.get("files"), state.get("database")
    if not isinstance(files, dict) or not isinstance(database, str):
        return False
    try:
        manifest = json.loads((out / "site" / MANIFEST).read_text(encoding="utf-8"))["files"]
        expected = {f"site/{rel}": digest for rel, digest in manifest.items()} | files
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    found = _files(out)
    if found is None or found != set(expected) | {STATE} or database not in expected:
        return False
    expected[database] = _database_digest(out / database)
    for rel, digest in expected.items():
        try:
            with open(out / rel, "rb") as f:
                if hashlib.file_digest(f, "sha256").hexdigest() != digest:
                    return False
        except OSError:
            return False
    return True


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


def file_hash(content: bytes) -> str:  # noqa: D103
    return hashlib.sha256(content).hexdigest()
