"""Where a build writes: one function turns a relative page path into a file path inside a root.

Every file of a build (pages, continuation pages, charts, downloads, Markdown, CDN files, the
manifest, the DuckDB file, the build state) is written through `write_file` (or linked through
`link_verified`), and both go through `safe_path`: a name that is absolute, climbs out with
`..`, holds a NUL or a control character, has an empty or over-long segment, or would pass through
a symbolic link (which could lead anywhere) is refused before anything is written.

Kept free of heavy imports (only the standard library).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from pipeline.messages import message

NAME_MAX = 255  # bytes in one path segment (Linux, macOS)
PATH_MAX = 4096  # bytes in a whole path (Linux)
_CHUNK = 1 << 20


class UnsafePath(ValueError):
    """A relative path that would leave its root (or that no file system could hold).

    `reason` is the catalogue's key of why ("paths.absolute", …) and `slots` fill it in; the text
    (`str(exc)`, what an editor reads) comes from site_templates/messages.toml.
    """

    def __init__(self, root: Path | str, rel: object, reason: str, **slots):
        self.root, self.rel, self.reason, self.slots = root, rel, reason, slots
        super().__init__(self.text())

    def text(self) -> str:
        """The refusal in the editor's words: what, where and why."""
        why = message(self.reason, **self.slots)
        where = message("paths.where", root=self.root) if str(self.root) else ""
        return message("paths.refused", rel=repr(self.rel), where=where, why=why)

    def rooted(self, root: Path | str) -> UnsafePath:
        """The same refusal, said of `root`."""
        return UnsafePath(root, self.rel, self.reason, **self.slots)


_CONTROL = re.compile(r"[\x00-\x1f\x7f\\]")


def check_relative(rel: object) -> list[str]:
    """The segments of a relative path such as `gpus/h100-pcie.html`; UnsafePath if it is not one.

    Only the text is looked at (no file system): absolute paths, `.` and `..`, empty segments,
    backslashes, NUL and other control characters, and segments over NAME_MAX bytes are refused.
    """
    if not isinstance(rel, str) or not rel:
        raise UnsafePath("", rel, "paths.not_text")
    if rel.startswith("/"):
        raise UnsafePath("", rel, "paths.absolute")
    bad = _CONTROL.search(rel)
    if bad:
        raise UnsafePath("", rel, "paths.backslash" if bad.group() == "\\" else "paths.control")
    parts = rel.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise (
                UnsafePath("", rel, "paths.dots", segment=part) if part else UnsafePath("", rel, "paths.empty_segment")
            )
        if len(part) > NAME_MAX // 4:  # may be over NAME_MAX bytes in UTF-8
            try:
                size = len(part.encode("utf-8"))
            except UnicodeEncodeError:
                raise UnsafePath("", rel, "paths.not_unicode") from None
            if size > NAME_MAX:
                raise UnsafePath("", rel, "paths.long_segment", size=size, limit=NAME_MAX)
    return parts


def safe_path(root: Path, rel: str) -> Path:
    """`root / rel` when it stays inside `root`, else UnsafePath.

    `rel` must pass check_relative (so it can only leave `root` through a symbolic link), and no
    part of it that exists already — a folder on the way or the file itself — may be a symbolic
    link (the build never makes one below its root) or, for a folder, anything but a folder.
    """
    try:
        parts = check_relative(rel)
    except UnsafePath as exc:
        raise exc.rooted(root) from None
    base = os.fspath(root)
    full = os.path.join(base, rel)
    try:
        if len(full.encode("utf-8")) >= PATH_MAX:
            raise UnsafePath(root, rel, "paths.long_path", limit=PATH_MAX)
    except UnicodeEncodeError:
        raise UnsafePath(root, rel, "paths.not_unicode") from None
    current = base
    for i, part in enumerate(parts):
        current = f"{current}/{part}"
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            break  # the rest is made by this build
        except NotADirectoryError:
            raise UnsafePath(root, rel, "paths.file_on_the_way") from None
        if stat.S_ISLNK(mode):
            raise UnsafePath(root, rel, "paths.symbolic_link", part="/".join(parts[: i + 1]))
        if i < len(parts) - 1 and not stat.S_ISDIR(mode):
            raise UnsafePath(root, rel, "paths.not_a_folder", part="/".join(parts[: i + 1]))
    return Path(full)


def make_parents(path: Path) -> None:
    """The folders that will hold `path`: safe_path found every existing one a real folder, so
    the missing ones are made below a real folder."""
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent, exist_ok=True)


def write_file(root: Path, rel: str, data) -> Path:
    """Write a new file `rel` below `root` (which must not exist yet); returns its path. `data`: bytes,
    text (written as UTF-8), or an object whose `write(file)` writes it into a binary file (a download
    too large to hold: downloads.Streamed).

    The file is created with O_EXCL and O_NOFOLLOW: nothing already there, a symbolic link
    included, is ever written through.
    """
    path = safe_path(root, rel)
    content = data.encode("utf-8") if isinstance(data, str) else data
    make_parents(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o666)
    try:
        if isinstance(content, bytes | bytearray | memoryview):
            view = memoryview(content)
            while view:
                written = os.write(fd, view[:_CHUNK])
                view = view[written:]
        else:
            with os.fdopen(os.dup(fd), "wb") as file:
                content.write(file)
    except BaseException as exc:
        os.close(fd)
        os.unlink(path)
        if isinstance(exc, OSError) and exc.filename is None:
            raise located(exc, path) from exc  # say which file
        raise
    os.close(fd)
    return path


_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def os_error_code(exc: OSError) -> int | None:
    """The errno of `exc`: its own, or the one a Rust library (polars, Pagefind) writes into the text of
    an OSError it raises without one ("No space left on device (os error 28)")."""
    if exc.errno is not None:
        return exc.errno
    found = _RUST_OS_ERROR.search(str(exc))
    return int(found.group(1)) if found else None


def located(exc: OSError, path: Path | str) -> OSError:
    """`exc` as an OSError that names `path` and has its errno (os_error_code), so that the build's
    message says what happened and where: a full disk while polars wrote a download into `path` came
    as OSError("No space left on device (os error 28)"), with neither."""
    code = os_error_code(exc)
    if code is None:
        return OSError(exc.errno, exc.strerror or str(exc), str(path))
    return OSError(code, os.strerror(code), str(path))


def existing_file(root: Path, rel: str) -> Path | None:
    """`root / rel` when it is a regular file inside `root` (not a symbolic link), else None."""
    try:
        path = safe_path(root, rel)
        st = os.lstat(path)
    except (UnsafePath, OSError):
        return None
    return path if stat.S_ISREG(st.st_mode) else None


def link_verified(old_root: Path, root: Path, rel: str, data: bytes) -> bool:
    """Put the previous build's `old_root / rel` at `root / rel` (a hard link, so it keeps its
    modification time) when its bytes are exactly `data`; False (nothing left behind) otherwise.

    The content is read through the new link, so what is compared is what is published.
    """
    old = existing_file(old_root, rel)
    if old is None or os.lstat(old).st_size != len(data):
        return False
    path = safe_path(root, rel)
    make_parents(path)
    try:
        os.link(old, path, follow_symlinks=False)
    except OSError:
        return False  # another file system, or links not allowed: the caller writes the file
    try:
        same = _same_bytes(path, data)
    except OSError:
        same = False
    if not same:
        os.unlink(path)
    return same


def _same_bytes(path: Path, data: bytes) -> bool:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(len(data) + 1) == data
    finally:
        os.close(fd)
