"""Stage 6, publishing: write a complete build beside output/ and swap it in atomically.

Nothing is written into output/ itself: a build goes to a fresh sibling folder,
and only when every file is written does it replace output/ (an atomic exchange
of the two folders where the kernel offers one).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
import time
from pathlib import Path

from pipeline.combine import Catalog
from pipeline.downloads import write_downloads
from pipeline.render import TEMPLATES, Rendered


def write_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in sorted(files.items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="\n")


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


def _remove_stale(out: Path) -> None:
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


def publish(out: Path, rendered: Rendered, catalog: Catalog) -> None:
    """Write the whole build to a sibling folder, then put it in place of `out`."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(out)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.build-{os.getpid()}-", dir=out.parent))
    try:
        write_tree(staging / "site", rendered.site)
        _pause("staging")
        write_tree(staging / "markdown", rendered.markdown)
        write_downloads(staging / "site" / "data", catalog)
        shutil.copyfile(TEMPLATES / "output-README.md", staging / "README.md")
        staging.chmod(0o755)
        _pause("swap")
        if out.exists() and _exchange(staging, out):
            _pause("cleanup")
            shutil.rmtree(staging)  # now holds the previous build
            return
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-{os.getpid()}-", dir=out.parent))
            os.replace(out, old / "previous")
            os.replace(staging, out)
            shutil.rmtree(old)
        else:
            os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
