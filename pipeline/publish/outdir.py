"""The output folder: which folders a build may replace, one build per folder at a time, and
what a killed build left beside it.

- `target` names the folder a build replaces; `check_output` refuses a folder the build does not
  own (anything but an absent or empty folder or an earlier build, which carries `build-state.json`
  with the build's marker) and any folder that is or contains the sources, the templates, the
  pipeline's code or the working directory.
- `writable` checks, before any work, that the folder beside which the build is written takes
  new files (and that the output folder can be renamed).
- `locked` is the lock a build (and every rebuild of `serve`) holds: `fcntl.lockf` on
  `.<name>.lock` beside the folder (never inside it), so a second build of the same folder waits.
- `tidy` puts back a build that a kill left under a side name and removes leftovers.

Kept free of heavy imports: all of this runs before the no-change check.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import struct
import sys
from pathlib import Path

from pipeline.fingerprint import MANIFEST, PACKAGE, STATE, TEMPLATES
from pipeline.messages import message

GENERATOR = "gpu-finetune-reference"  # build-state.json's "generator": the mark of a folder a build made
_LEGACY_INPUTS = {"sources", "templates", "code", "base_url", "build_date"}  # state files of earlier versions
_MAX_STATE_BYTES = 64 << 20


class OutputRefused(Exception):
    """--out names a folder the build must not replace; the message says why and what to do."""


def side_name(out: Path, kind: str) -> str:
    """The prefix of a folder or link a build makes beside `out`: `.output.build-`, `.output.old-`, …"""
    return f".{out.name}.{kind}-"


_SIDE = re.compile(r"^\.(?P<name>.+)\.(?P<kind>build|old|link|probe)-(?P<pid>\d+)-[A-Za-z0-9_]+$")


def _side(entry: str, out: Path) -> re.Match | None:
    found = _SIDE.match(entry)
    return found if found and found["name"] == out.name else None


def layout_target(out: Path, link_path: Path | None = None) -> Path | None:
    """When `out` is a symbolic link to a build folder beside it (the layout used where folders
    cannot be exchanged atomically), that folder; else None. With `link_path`: the same question
    about a link of that name beside `out`, as if it were `out`."""
    try:
        link = os.readlink(link_path or out)
    except OSError:
        return None
    found = _side(link, out) if "/" not in link else None
    if found is None or found["kind"] != "build":
        return None
    folder = out.parent / link
    return folder if folder.is_dir() and not folder.is_symlink() else None


def target(out: Path) -> Path:
    """The absolute path of the folder a build of `out` replaces: `out` with its parent resolved;
    a symbolic link the user made to a folder elsewhere is followed (the build replaces that folder)."""
    path = Path(os.path.abspath(out))
    if path.name in ("", ".", ".."):
        path = path.resolve()
    if path.parent == path:
        return path
    path = path.parent.resolve() / path.name
    if path.is_symlink() and layout_target(path) is None:
        return path.resolve()
    return path


def is_build(folder: Path) -> bool:
    """True when `folder` holds an earlier build: a build-state.json with the build's marker."""
    state = folder / STATE
    try:
        st = os.lstat(state)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_STATE_BYTES:
            return False
        data = json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict):
        return False
    if data.get("generator") == GENERATOR:
        return True
    inputs = data.get("inputs")
    return isinstance(inputs, dict) and _LEGACY_INPUTS <= inputs.keys()


def _placeholder(folder: Path, entries: list[str]) -> bool:
    """The folder a clone of the repository carries before its first build: only the README.md that
    every build writes there (its first line the same as site_templates/output-README.md's)."""
    if entries != ["README.md"] or (folder / "README.md").is_symlink():
        return False
    try:
        with open(folder / "README.md", "rb") as mine, open(TEMPLATES / "output-README.md", "rb") as template:
            return mine.readline().strip() == template.readline().strip() != b""
    except OSError:
        return False


def _contains(outer: Path, inner: Path) -> bool:
    return inner == outer or outer in inner.parents


def _target_or_refuse(out: Path) -> Path:
    """target(out), or OutputRefused when `out` or a folder above it is a loop of symbolic links."""
    try:
        return target(out)
    except RuntimeError:  # Path.resolve on a loop of symbolic links
        raise OutputRefused(message("outdir.loop", out=out)) from None


def _refuse_project_folders(shown: str, real: Path, sources: Path | None) -> None:
    """OutputRefused when the resolved --out is, contains or lies inside the code, templates or sources."""
    guarded = [
        (message("outdir.what_code"), PACKAGE.parent),
        (message("outdir.what_templates"), TEMPLATES),
        (message("outdir.what_cwd"), Path.cwd()),
    ]
    if sources is not None:
        guarded.insert(0, (message("outdir.what_sources"), Path(sources)))
    for what, folder in guarded:
        if _contains(real, folder.resolve()):
            raise OutputRefused(message("outdir.contains", shown=shown, what=what, folder=folder.resolve()))
    # output/ sits in the repository
    inside = [(message("outdir.what_code"), PACKAGE), (message("outdir.what_templates"), TEMPLATES)]
    if sources is not None:
        inside.insert(0, (message("outdir.what_sources"), Path(sources)))
    for what, folder in inside:
        if _contains(folder.resolve(), real):
            raise OutputRefused(message("outdir.inside", shown=shown, what=what, folder=folder.resolve()))


def _refuse_below_a_file(shown: str, path: Path) -> None:
    """OutputRefused when a file stands where one of the folders above --out should be."""
    for above in path.parents:  # the nearest folder above that exists must be a folder
        if os.path.lexists(above):
            if not above.is_dir():
                raise OutputRefused(message("outdir.below_file", shown=shown, above=above))
            break


def check_output(out: Path, sources: Path | None = None) -> Path:
    """The folder a build of `out` may replace (see `target`); OutputRefused when it may not."""
    shown = str(out)
    path = _target_or_refuse(out)
    if path.parent == path:
        raise OutputRefused(message("outdir.root", shown=shown))
    real = path.resolve()
    _refuse_project_folders(shown, real, sources)
    _refuse_below_a_file(shown, path)
    if not os.path.lexists(path):
        return path
    if not real.is_dir():
        raise OutputRefused(message("outdir.is_file", shown=shown))
    try:
        entries = sorted(os.listdir(real))
    except OSError as exc:
        raise OutputRefused(message("outdir.unreadable", shown=shown, reason=exc.strerror)) from None
    if entries and not is_build(real) and not _placeholder(real, entries):
        listed = ", ".join(entries[:5]) + (", …" if len(entries) > 5 else "")
        raise OutputRefused(message("outdir.foreign", shown=shown, state=STATE, listed=listed))
    return path


def writable(out: Path) -> None:
    """OSError now, before any work, when the build could not be written beside `out` or put in
    its place: the parent folder must take a new file, and `out` must not be immutable."""
    out.parent.mkdir(parents=True, exist_ok=True)
    for folder in (out.parent, out):
        if _immutable(folder):
            raise OSError(errno.EPERM, message("outdir.immutable"), str(folder))
    probe = out.parent / f"{side_name(out, 'probe')}{os.getpid()}-x"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(probe)
    os.close(os.open(probe, flags, 0o600))
    os.unlink(probe)


def _immutable(path: Path) -> bool:
    """Linux's immutable or append-only flag on a folder (`chattr +i` / `+a`; root is not exempt)."""
    if not sys.platform.startswith("linux") or not path.is_dir():
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return False
    try:
        buffer = fcntl.ioctl(fd, 0x80086601, bytes(8))  # FS_IOC_GETFLAGS
    except OSError:
        return False  # a file system without these flags
    finally:
        os.close(fd)
    (flags,) = struct.unpack("i", buffer[:4])
    return bool(flags & (0x10 | 0x20))  # FS_IMMUTABLE_FL, FS_APPEND_FL


def lock_path(out: Path) -> Path:
    """The lock file beside the output folder `out` (`.output.lock`), held by `locked`."""
    return out.parent / f".{out.name}.lock"


@contextlib.contextmanager
def locked(out: Path, say=None):
    """Hold the lock of the output folder `out` (a target()); a second holder waits, saying so.

    A POSIX lock (`fcntl.lockf`) on `.<name>.lock` beside the folder: released by the kernel
    when the process ends however it ends, and not passed on to forked children. The file holds
    the holder's process id, for the message; it is never removed (removing a lock file races).
    """
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(lock_path(out), flags, 0o644)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            say(message("report.waiting", out=out, holder=holder))
            fcntl.lockf(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def complete(folder: Path) -> bool:
    """A folder holding a whole build (its state file is written last, just before it is put in place)."""
    return folder.is_dir() and is_build(folder) and (folder / "site" / MANIFEST).is_file()


def tidy(out: Path) -> list[str]:  # noqa: C901
    """Under the lock: put back a build that a kill left beside `out` while `out` was missing, then
    remove what killed builds left (staging folders, previous builds, links). Returns what was done."""
    done = []
    try:
        entries = sorted(os.listdir(out.parent))
    except OSError:
        return done
    sides = [(name, found) for name in entries if (found := _side(name, out))]
    if not os.path.lexists(out):
        # A kill between the two renames of a move from a folder to a link: the link to the new
        # build goes in place; failing that, the previous build comes back.
        for kind in ("link", "old"):
            for name, found in sides:
                if found["kind"] != kind:
                    continue
                side = out.parent / name
                if kind == "link" and layout_target(out, side) is not None:
                    os.replace(side, out)
                elif kind == "old" and not side.is_symlink() and complete(side):
                    os.replace(side, out)
                elif kind == "old" and complete(side / "previous"):  # left by earlier versions
                    os.replace(side / "previous", out)
                else:
                    continue
                done.append(f"put back {out} from {name}")
                break
            if os.path.lexists(out):
                break
    current = layout_target(out)
    for name, found in sides:
        side = out.parent / name
        if current is not None and side == current or not os.path.lexists(side):
            continue
        pid = int(found["pid"])
        if pid != os.getpid() and _alive(pid):
            continue
        if side.is_symlink() or not side.is_dir():
            side.unlink()
        else:
            shutil.rmtree(side, ignore_errors=True)
        done.append(f"removed {name}")
    return done


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
