"""Pages by dependency: a page is rendered again only when what it is made from changed.

A page is made from its template (and the templates it includes), the pipeline's code, the
build's settings (base URL, build date), what every page shares (labels with the data's figures,
site.toml, the articles in the menu, the references a table's sources line names) and its own
context: the rows and figures the page shows, passed to the template as plain values. The
digest of all that is the page's record in build-state.json (`pages`: path -> [digest, the
static files it links to]). The next build computes each page's context (cheap) and its digest;
when the record of the previous build in the same folder is the same and the page's file there
still has the bytes the manifest lists, that file's text is the page, and Jinja does not run.

Only plain values count as inputs: text, numbers, dates, lists, dicts, Markup and the pipeline's
own dataclasses (a TableView with its rows, a Link, a Field). A context that holds anything else
(an object whose methods the template calls, a function) has inputs no digest can see: that page
is rendered every time. `build --force` takes no page from the previous build.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import pickle
from collections.abc import Mapping
from dataclasses import is_dataclass
from pathlib import Path

from markupsafe import Markup

FORMAT = "page-memo/1"
# Values a digest can see whole: pickling them writes every field and every character (a date is
# pickled as its bytes). A set's order may differ between processes: that only makes a page render again.
_PLAIN = (str, bytes, int, float, bool, type(None), list, tuple, dict, set, frozenset, dt.date, dt.datetime, Markup)


class NotPlain(Exception):
    """A page's context holds a value whose content a digest cannot see."""


class _Pickler(pickle.Pickler):
    """Pickles a context, refusing whatever is not a plain value or a pipeline dataclass.

    reducer_override, unlike persistent_id, is not called for the exact str, int, float, list, tuple
    and dict objects that are most of a context (a table's cells): those are plain, and pickled as
    pickle pickles them; the bytes are the same."""

    def reducer_override(self, obj):
        kind = type(obj)
        if kind in _PLAIN or kind is type:
            return NotImplemented
        if is_dataclass(kind) and kind.__module__.startswith("pipeline."):
            return NotImplemented
        raise NotPlain(kind.__qualname__)


def context_bytes(*values) -> bytes | None:
    """The values pickled (types and contents), or None when one holds something not plain.

    Without pickle's memo: an object met twice is written twice, so equal values give equal bytes
    whether or not they are one object (a validation read back from JSON shares no strings)."""
    buffer = io.BytesIO()
    pickler = _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True
    try:
        pickler.dump(values)
    except (NotPlain, pickle.PicklingError, TypeError, AttributeError, ValueError, RecursionError):
        return None
    return buffer.getvalue()


class PageMemo:
    """This build's page records and the previous build's, in the folder the build replaces."""

    def __init__(self, inputs: Mapping[str, str], previous: Mapping | None = None, site: Path | None = None):
        """`inputs`: the build's (fingerprint.inputs); `previous`: the last build's `pages` record
        (None: take nothing from it, as under --force); `site`: that build's site folder."""
        self.inputs = inputs
        self.shared = b""
        self.previous = previous if isinstance(previous, Mapping) and site is not None else {}
        self.site = site
        self.now: dict[str, list] = {}  # path -> [digest, assets]: this build's record
        self.rendered: set[str] = set()  # pages Jinja rendered in this build
        self.reused: set[str] = set()  # pages taken from the previous build
        self._manifest: dict | None = None

    def share(self, *values) -> None:
        """Set what every page depends on besides its context (shared_inputs), before the first page."""
        self.shared = hashlib.sha256(shared_inputs(self.inputs, *values)).digest()

    def digest(self, template: str, path: str, root: str, context: Mapping) -> str | None:
        """The digest of everything the page is made from, or None when the context is not plain."""
        own = context_bytes(template, path, root, dict(context))
        return None if own is None else hashlib.sha256(self.shared + own).hexdigest()

    def reuse(self, path: str, digest: str | None) -> tuple[str, list[str]] | None:
        """(the page's text, the static files it links to) from the previous build, when its record
        there is this digest and its file verifies against that build's manifest; else None."""
        record = self.previous.get(path)
        if digest is None or not _record(record) or record[0] != digest:
            return None
        listed = self.manifest().get(path)
        try:
            data = (self.site / path).read_bytes()
        except OSError:
            return None
        if not isinstance(listed, str) or hashlib.sha256(data).hexdigest() != listed:
            return None
        try:
            return data.decode("utf-8"), list(record[1])
        except UnicodeDecodeError:
            return None

    def manifest(self) -> dict:
        """The previous build's site/manifest.json files (path -> SHA-256), read once; {} if unreadable."""
        if self._manifest is None:
            try:
                files = json.loads((self.site / "manifest.json").read_text(encoding="utf-8"))["files"]
            except (OSError, ValueError, KeyError, TypeError):
                files = {}
            self._manifest = files if isinstance(files, dict) else {}
        return self._manifest

    def record(self, path: str, digest: str | None, assets: list[str], reused: bool) -> None:
        """Note how the page was made; a page with no digest is left out of the record."""
        (self.reused if reused else self.rendered).add(path)
        if digest is not None:
            self.now[path] = [digest, sorted(set(assets))]


def _record(record) -> bool:
    return (
        isinstance(record, list)
        and len(record) == 2
        and isinstance(record[0], str)
        and isinstance(record[1], list)
        and all(isinstance(a, str) for a in record[1])
    )


def shared_inputs(inputs: Mapping[str, str], *values) -> bytes:
    """What every page depends on besides its context: the build's inputs but the sources (the code,
    the templates, the base URL, the build date) and `values` (labels, figures, site.toml, the menu,
    the references), pickled; a value that is not plain makes no page reusable."""
    settings = json.dumps({k: v for k, v in sorted(inputs.items()) if k != "sources"}, sort_keys=True)
    shared = context_bytes(*values)
    return (FORMAT + settings).encode() + (shared if shared is not None else _never())


def _never() -> bytes:
    """Shared inputs no digest can see: a value that differs in every build, so nothing matches."""
    import os

    return os.urandom(32)
