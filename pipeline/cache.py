"""A small content-addressed cache in the user's cache folder: bytes stored and fetched by key.

Used by `python -m pipeline estimate` to keep the validated catalog between calls, keyed by
the sources' content, the pipeline's code and the library versions; meant to hold other
results of the same kind (for example Great Expectations outcomes per table) under their
own namespace.

Where: `$GPU_FINETUNE_CACHE_DIR` when set (tests point it at a temporary folder), else
`$XDG_CACHE_HOME/gpu-finetune-reference`, else `~/.cache/gpu-finetune-reference`.

An entry is one file `<namespace>/<key>.bin`: a JSON header line (format, namespace, key,
payload size and SHA-256) and the payload. `get` returns the payload only when every part
of the header matches what was asked and the payload's size and hash match the header; a
truncated, corrupted or foreign file is ignored (None), never trusted. `put` writes a
temporary file beside the entry and renames it into place, so a reader never sees half an
entry. Payloads are data (the catalog is Arrow IPC and JSON), never pickled code. Every
error of the file system is swallowed: a cache that cannot be read or written only costs time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

FORMAT = "gpu-finetune-cache/1"
ENV_DIR = "GPU_FINETUNE_CACHE_DIR"
APP = "gpu-finetune-reference"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_KEY = re.compile(r"^[0-9a-f]{64}$")


def default_root() -> Path:
    """The cache folder: $GPU_FINETUNE_CACHE_DIR, else $XDG_CACHE_HOME/<app>, else ~/.cache/<app>."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / APP


def make_key(*parts: str) -> str:
    """A cache key from any number of strings (hashes, versions): their SHA-256, unambiguous."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


class Cache:
    """Bytes by (namespace, key) under one folder."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else default_root()

    def _path(self, namespace: str, key: str) -> Path:
        if not _NAME.match(namespace):
            raise ValueError(f"cache namespace {namespace!r}: lowercase letters, digits, '-', '_', '.'")
        if not _KEY.match(key):
            raise ValueError(f"cache key {key!r}: 64 hexadecimal digits (use make_key)")
        return self.root / namespace / f"{key}.bin"

    def get(self, namespace: str, key: str) -> bytes | None:
        """The payload stored under `key`, or None when there is none or it does not verify."""
        path = self._path(namespace, key)
        try:
            with path.open("rb") as f:
                header_line = f.readline(4096)
                payload = f.read()
        except OSError:
            return None
        try:
            header = json.loads(header_line)
        except (ValueError, UnicodeDecodeError):
            return None
        expected = {
            "format": FORMAT,
            "namespace": namespace,
            "key": key,
            "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
        if not isinstance(header, dict) or header != expected:
            return None
        return payload

    def put(self, namespace: str, key: str, payload: bytes) -> bool:
        """Store `payload` under `key` atomically; False (and nothing changed) when the folder is not writable."""
        path = self._path(namespace, key)
        header = {
            "format": FORMAT,
            "namespace": namespace,
            "key": key,
            "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".bin")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(json.dumps(header, sort_keys=True).encode() + b"\n")
                    f.write(payload)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            return False
        return True

    def delete(self, namespace: str, key: str) -> None:
        """Remove an entry if present."""
        try:
            self._path(namespace, key).unlink(missing_ok=True)
        except OSError:
            pass

    def prune(self, namespace: str, keep: int) -> None:
        """Remove all but the `keep` newest entries of a namespace (by modification time), so that a
        namespace that grows with every edit stays bounded."""
        folder = self.root / namespace
        try:
            entries = [(e.stat().st_mtime_ns, e.path) for e in os.scandir(folder) if e.name.endswith(".bin")]
        except OSError:
            return
        for _, path in sorted(entries, reverse=True)[keep:]:
            try:
                os.unlink(path)
            except OSError:
                pass
