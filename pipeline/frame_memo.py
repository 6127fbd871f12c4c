"""Derived frames remembered by what determines them, so that an edit recomputes only what it changed.

A step that is costly and depends on few of its inputs' cells (the recommendations' plans depend on the
models, methods, cards, constants and the servers' configurations, not on their prices) asks a `FrameMemo`
for its frame under a name and the parts that determine it (digests of frames, constants, texts). The
key is those parts with the pipeline's code and the library versions (validation_cache's), so a hit is
always right. A frame is found:

- in the process, in `held` (a warm process's `Warm.frames`: `serve` keeps the last frame of each name);
- on disk, in the user cache (pipeline.cache, namespace `frames`, Arrow IPC; the newest `KEEP` entries),
  shared by every build, check and estimate of this machine: a price edited in a new process reuses the
  plans of the build before.

`read=False` (build --force) computes every frame anew and stores it; GPU_FINETUNE_VALIDATION_CACHE=off
turns the disk part off, as it does the validation outcomes. A payload that does not verify or read is
ignored and the frame made again. The code in the key is the files' (validation_cache._code): a process
that patches a function at run time and wants its effect must pass `read=False` or switch the disk off.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterable, Mapping

import polars as pl

from pipeline import cache, validation_cache

FORMAT = "frames/1"
NAMESPACE = "frames"
KEEP = 16  # entries on disk: a few catalogs' worth


def frame_digest(frame: pl.DataFrame) -> str:
    """SHA-256 of a frame's schema and values (its Arrow IPC bytes, uncompressed)."""
    data = io.BytesIO()
    frame.rechunk().write_ipc(data, compression="uncompressed")
    return hashlib.sha256(data.getvalue()).hexdigest()


def mapping_digest(values: Mapping[str, object]) -> str:
    """SHA-256 of a mapping's items, by key (repr of each value: numbers and texts)."""
    return cache.make_key(*(f"{k}={values[k]!r}" for k in sorted(values)))


class FrameMemo:
    """Frames by (name, parts): in `held` first, then in the user cache; made and stored on a miss."""

    def __init__(  # noqa: PLR0913
        self,
        held: dict | None = None,
        read: bool = True,
        store: cache.Cache | None = None,
        namespace: str = NAMESPACE,
        keep: int = KEEP,
    ):
        self.held = {} if held is None else held
        self.read = read
        self.store = store
        self.namespace, self.keep = namespace, keep  # the user cache's part it uses, and its newest entries kept
        self.made: list[str] = []  # the names made (not found) by this memo: what a build recomputed

    def sibling(self, namespace: str, keep: int) -> FrameMemo:
        """A memo that reads as this one does, from the same store, in a namespace of its own (so that
        many small frames do not push this one's few large ones out), holding nothing yet."""
        return FrameMemo({}, self.read, self.store, namespace, keep)

    def key(self, name: str, parts: Iterable[str]) -> str:
        return cache.make_key(FORMAT, name, validation_cache._code("package"), *validation_cache.versions(), *parts)

    def get(self, name: str, parts: Iterable[str], make: Callable[[], pl.DataFrame]) -> pl.DataFrame:
        key = self.key(name, parts)
        if self.read and name in self.held and self.held[name][0] == key:
            return self.held[name][1]
        disk = self.store if self.store is not None else cache.Cache()
        frame = self._read(disk, key) if self.read and validation_cache.enabled() else None
        if frame is None:
            frame = make()
            self.made.append(name)
            if validation_cache.enabled():
                data = io.BytesIO()
                frame.write_ipc(data, compression="lz4")
                disk.put(self.namespace, key, data.getvalue())
                disk.prune(self.namespace, self.keep)
        self.held[name] = (key, frame)
        return frame

    def _read(self, disk: cache.Cache, key: str) -> pl.DataFrame | None:
        payload = disk.get(self.namespace, key)
        if payload is None:
            return None
        try:
            return pl.read_ipc(io.BytesIO(payload))
        except Exception:  # a payload that verifies but does not read (another polars): made again
            return None


def made_now(name: str, parts: Iterable[str], make: Callable[[], pl.DataFrame], memo: FrameMemo | None) -> pl.DataFrame:
    """`make()` through `memo` when there is one, else made now."""
    return make() if memo is None else memo.get(name, parts, make)
