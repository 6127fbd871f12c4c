"""The message catalogue: every text the command line and the quality page show an editor, in Russian,
from site_templates/messages.toml. One lookup, `message("section.key", **slots)`; an unknown key or
slot is a bug (tests/test_messages.py checks that every key the code names exists and every entry is used)."""

from __future__ import annotations

import contextlib
from functools import lru_cache
from pathlib import Path

CATALOGUE = Path(__file__).resolve().parent.parent / "site_templates" / "messages.toml"


def catalogue() -> dict[str, str]:
    """The parsed catalogue as the file is now: read again when its status changes, so that a warm
    process (`just serve`) shows an edited message at once."""
    status = CATALOGUE.stat()
    return _parsed(CATALOGUE, status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)


@lru_cache(maxsize=1)
def _parsed(path: Path, *status: int) -> dict[str, str]:
    """The catalogue at `path` with this file status (size, times, inode). Parsing TOML costs more than
    a build with nothing to do, so the parse is kept as JSON in the user cache (pipeline.cache), keyed
    by the file's bytes; a missing or bad entry means parsing again."""
    import hashlib
    import json

    from pipeline import cache

    data = path.read_bytes()
    store = cache.Cache()
    key = cache.make_key("messages/1", hashlib.sha256(data).hexdigest())
    kept = store.get("messages", key)
    if kept is not None:
        with contextlib.suppress(ValueError):
            parsed = json.loads(kept)
            if isinstance(parsed, dict):
                return parsed
    import tomllib

    parsed = tomllib.loads(data.decode("utf-8"))
    store.put("messages", key, json.dumps(parsed, ensure_ascii=False).encode("utf-8"))
    return parsed


def message(key: str, **slots) -> str:
    """The catalogue's text for "section.key", its {slots} filled in."""
    entry = catalogue()
    for part in key.split("."):
        entry = entry[part]
    return entry.format(**slots)


# The stages of a build (pipeline/build.py names them in English for the benchmark) as an editor reads them.
STAGES = {
    "imports": "stages.imports",
    "load, validation started": "stages.load",
    "load (validation reused)": "stages.load_reused",
    "load (validation remembered)": "stages.load_remembered",
    "compute": "stages.compute",
    "preview": "stages.preview",
    "render": "stages.render",
    "validation (rest)": "stages.validation_rest",
    "write": "stages.write",
}


def stage_line(stage: str, seconds: float) -> str:
    """One progress line of a build: the stage and how long it took."""
    name = message(STAGES[stage]) if stage in STAGES else stage
    return message("stages.line", stage=name, seconds=f"{seconds:.2f}".replace(".", ","))


def grouped_warnings(warnings) -> list[str]:
    """The warnings as lines, the same warning on several rows of one file given once with its rows
    and count (five servers without a price: one line, not five)."""
    groups: dict[tuple, list] = {}
    for w in warnings:
        groups.setdefault((w.file, w.column, str(w.value), w.rule), []).append(w)
    lines = []
    for (file, column, _, rule), items in groups.items():
        if len(items) == 1 or not all(w.line for w in items):
            lines += [str(w) for w in items]
            continue
        where = f"{file}: {column}" if column else file
        rows = ", ".join(str(w.line) for w in items)
        lines.append(message("report.warning_repeated", where=where, rule=rule, lines=rows, count=len(items)))
    return lines
