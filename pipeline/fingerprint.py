"""What a build is made from, as content hashes, so that a build of unchanged inputs can be skipped.

Kept free of heavy imports: the no-change check runs before polars, DuckDB or Great
Expectations are loaded, which is what makes an unchanged rebuild instant.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
TEMPLATES = PACKAGE.parent / "site_templates"
STATE = "build-state.json"  # in the output folder, beside site/ and markdown/
MANIFEST = "manifest.json"  # in site/: every published file with its content hash


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


def read_state(out: Path) -> dict:
    try:
        return json.loads((out / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def is_current(out: Path, fingerprint: dict[str, str]) -> bool:
    """True when `out` is a complete build of exactly these inputs."""
    state = read_state(out)
    if state.get("inputs") != fingerprint:
        return False
    try:
        manifest = json.loads((out / "site" / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return all((out / "site" / rel).is_file() for rel in manifest["files"])


def file_hash(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def remove_stale(out: Path) -> None:
    """Folders left by builds that were killed: removed once their process is gone."""
    for path in out.parent.glob(f".{out.name}.*-*"):
        pid = path.name.rsplit(".", 1)[-1].split("-")[1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
