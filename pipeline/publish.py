"""Stage 6, publishing: write a complete build beside output/ and swap it in atomically.

Nothing is written into output/ itself: a build goes to a fresh sibling folder,
and only when every file is written does it replace output/ (an atomic exchange
of the two folders where the kernel offers one).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pipeline.combine import Catalog
from pipeline.downloads import DATABASE, write_downloads
from pipeline.fingerprint import MANIFEST, STATE, file_hash, remove_stale
from pipeline.render import TEMPLATES, Rendered


def _link_or_write(path: Path, content: bytes, old: Path | None) -> bool:
    """Write `content` at `path`, or hard-link the previous build's identical file (kept: True)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if old is not None and old.is_file():
        try:
            os.link(old, path)
        except OSError:
            shutil.copy2(old, path)  # keeps the modification time
        return True
    path.write_bytes(content)
    return False


def write_tree(root: Path, files: dict[str, str | bytes], previous: Path, hashes: dict[str, str]) -> Counter:
    """Write every file; one whose content the previous build already had is linked, not rewritten."""
    counts: Counter = Counter()
    for rel, content in sorted(files.items()):
        data = content if isinstance(content, bytes) else content.encode("utf-8")
        old = previous / rel
        same = hashes.get(rel) == file_hash(data) if hashes else old.is_file() and old.read_bytes() == data
        counts["kept" if _link_or_write(root / rel, data, old if same else None) else "written"] += 1
    return counts


def relink_unchanged(data_dir: Path, previous: Path, hashes: dict[str, str]) -> Counter:
    """Downloads identical to the previous build's are replaced by links to them (their times stay).

    The DuckDB file's header holds a random id, so it counts as unchanged when every other download is.
    """
    counts: Counter = Counter()
    database = None
    for path in sorted(data_dir.iterdir()):
        rel = f"data/{path.name}"
        if path.name == DATABASE:
            database = path
            continue
        old = previous / rel
        if hashes.get(rel) == file_hash(path.read_bytes()) and old.is_file():
            path.unlink()
            _link_or_write(path, b"", old)
            counts["kept"] += 1
        else:
            counts["written"] += 1
    if database is not None:
        if counts["written"] == 0 and (previous / "data" / DATABASE).is_file():
            database.unlink()
            _link_or_write(database, b"", previous / "data" / DATABASE)
            counts["kept"] += 1
        else:
            counts["written"] += 1
    return counts


def write_manifest(site: Path) -> None:
    """site/manifest.json: every published file with its content hash, for a CDN sync.

    The DuckDB file's bytes carry a random id, so its entry hashes what it holds: the
    Parquet files of the same tables. Two builds of the same sources give the same manifest.
    """
    files = {
        str(p.relative_to(site)): file_hash(p.read_bytes())
        for p in sorted(site.rglob("*"))
        if p.is_file() and p.name not in (MANIFEST, DATABASE)
    }
    if (site / "data" / DATABASE).is_file():
        parquet = "".join(h for rel, h in files.items() if rel.startswith("data/") and rel.endswith(".parquet"))
        files[f"data/{DATABASE}"] = file_hash(f"duckdb:{parquet}".encode())
    text = json.dumps({"files": files}, indent=1, sort_keys=True) + "\n"
    (site / MANIFEST).write_text(text, encoding="utf-8")


def previous_hashes(out: Path) -> dict[str, str]:
    try:
        return json.loads((out / "site" / MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError):
        return {}


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return result == 0


def _pause(point: str) -> None:
    """Test hook: stop at a named point so a test can kill the build there (PIPELINE_TEST_PAUSE=point)."""
    if os.environ.get("PIPELINE_TEST_PAUSE") == point:
        print(f"paused at {point}", flush=True)
        time.sleep(600)


def publish(out: Path, rendered: Rendered, catalog: Catalog, state: dict) -> Counter:
    """Write the whole build to a sibling folder, then put it in place of `out`.

    Files identical to the previous build's are hard-linked from it, so they keep their
    modification times; returns how many files were written and how many kept.
    """
    return stage(out, rendered, catalog).swap(state)


class Staging:
    """A build written beside `out`: swap() finishes it and puts it in place, discard() drops it."""

    def __init__(self, out: Path, folder: Path, hashes: dict[str, str], counts: Counter):
        self.out, self.folder, self.hashes, self.counts = out, folder, hashes, counts

    def swap(self, state: dict, late: dict[str, str | bytes] | None = None) -> Counter:
        """Add the `late` site files (those that waited for validation), the manifest and the
        build state, then put the folder in place of `out`."""
        out, staging = self.out, self.folder
        try:
            counts = self.counts + write_tree(staging / "site", late or {}, out / "site", self.hashes)
            write_manifest(staging / "site")
            readme = (TEMPLATES / "output-README.md").read_bytes()
            counts += write_tree(
                staging, {"README.md": readme, STATE: json.dumps(state, indent=1, sort_keys=True) + "\n"}, out, {}
            )
            staging.chmod(0o755)
            _pause("swap")
            if out.exists() and _exchange(staging, out):
                _pause("cleanup")
                shutil.rmtree(staging)  # now holds the previous build
                return counts
            if out.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-{os.getpid()}-", dir=out.parent))
                os.replace(out, old / "previous")
                os.replace(staging, out)
                shutil.rmtree(old)
            else:
                os.replace(staging, out)
            return counts
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def stage(
    out: Path, rendered: Rendered, catalog: Catalog, skip: tuple[str, ...] = (), workbooks: Callable | None = None
) -> Staging:
    """Write the pages, articles and downloads into a fresh sibling folder of `out`; the site
    files named in `skip` are left for Staging.swap(); `workbooks` as downloads.write_downloads."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(out)
    hashes = previous_hashes(out)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.build-{os.getpid()}-", dir=out.parent))
    try:
        site = {rel: content for rel, content in rendered.site.items() if rel not in skip}
        counts = write_tree(staging / "site", site, out / "site", hashes)
        _pause("staging")
        counts += write_tree(staging / "markdown", rendered.markdown, out / "markdown", {})
        write_downloads(staging / "site" / "data", catalog, workbooks)
        counts += relink_unchanged(staging / "site" / "data", out / "site", hashes)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Staging(out, staging, hashes, counts)
