"""fingerprint.Digests: file hashes remembered by the files' status, so that a build with nothing to
do reads no file, and a file changed in any way is read again."""

import builtins
import hashlib
import os
import time

import pytest

from pipeline import fingerprint


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_FINETUNE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(fingerprint.MEMO_ENV, raising=False)
    return tmp_path / "cache"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def reads(monkeypatch) -> list[str]:
    """The files opened from now on."""
    opened: list[str] = []
    real = builtins.open

    def spy(file, *args, **kwargs):
        opened.append(os.fspath(file))
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy)
    return opened


def hash_once(folder, name) -> str:
    with fingerprint.Digests(folder) as digests:
        return digests.of(folder / name)


def test_a_file_hashed_long_enough_ago_is_not_read_again(tmp_path, cache_dir, monkeypatch):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "a.html").write_bytes(b"first")
    monkeypatch.setattr(fingerprint.Digests, "racy_window", lambda self, ctime: 0)  # trust at once
    assert hash_once(folder, "a.html") == sha(b"first")
    opened = reads(monkeypatch)
    assert hash_once(folder, "a.html") == sha(b"first")
    assert str(folder / "a.html") not in opened


def test_same_size_and_modification_time_are_not_enough(tmp_path, cache_dir, monkeypatch):
    """Bytes replaced and the modification time put back: the change time moved, so it is read."""
    folder = tmp_path / "site"
    folder.mkdir()
    page = folder / "a.html"
    page.write_bytes(b"first")
    monkeypatch.setattr(fingerprint.Digests, "racy_window", lambda self, ctime: 0)
    assert hash_once(folder, "a.html") == sha(b"first")
    before = page.stat()
    page.write_bytes(b"XXXXX")
    os.utime(page, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert page.stat().st_size == before.st_size and page.stat().st_mtime_ns == before.st_mtime_ns
    assert hash_once(folder, "a.html") == sha(b"XXXXX")


def test_a_racily_clean_entry_is_not_trusted(tmp_path, cache_dir):
    """Hashed within the racy window of its last change: a file system with coarse times could show the same
    status after another write, so the file is read again (git's rule)."""
    folder = tmp_path / "site"
    folder.mkdir()
    page = folder / "a.html"
    page.write_bytes(b"first")
    with fingerprint.Digests(folder) as digests:
        digests.of(page)
        # the same status as now, as a coarse clock would show after the next write
        status = page.stat()
        stamp = [status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino, status.st_dev]
        assert digests.known["a.html"][:5] == stamp
    page.write_bytes(b"other")
    with fingerprint.Digests(folder) as digests:
        status = page.stat()
        hashed_at = digests.known["a.html"][5]
        digests.known["a.html"] = [status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino,
                                   status.st_dev, hashed_at, sha(b"first")]  # fmt: skip
        assert digests.of(page) == sha(b"other")


@pytest.mark.parametrize(
    "payload",
    [b"not json", b"[1, 2]", b'{"a.html": "nope"}', b'{"a.html": [1, 2, 3]}'],
)
def test_a_foreign_or_broken_memory_is_ignored(tmp_path, cache_dir, monkeypatch, payload):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "a.html").write_bytes(b"first")
    store = fingerprint.Digests(folder)
    store.store.put(store.NAMESPACE, store.key, payload)
    assert hash_once(folder, "a.html") == sha(b"first")


def test_the_memory_can_be_switched_off(tmp_path, cache_dir, monkeypatch):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "a.html").write_bytes(b"first")
    monkeypatch.setattr(fingerprint.Digests, "racy_window", lambda self, ctime: 0)
    monkeypatch.setenv(fingerprint.MEMO_ENV, "off")
    hash_once(folder, "a.html")
    opened = reads(monkeypatch)
    hash_once(folder, "a.html")
    assert str(folder / "a.html") in opened
    assert not (cache_dir / fingerprint.Digests.NAMESPACE).exists()


def test_files_gone_are_forgotten(tmp_path, cache_dir, monkeypatch):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "a.html").write_bytes(b"a")
    (folder / "b.html").write_bytes(b"b")
    assert fingerprint.tree_hash(folder) != ""
    (folder / "b.html").unlink()
    (folder / "c.html").write_bytes(b"c")
    fingerprint.tree_hash(folder)
    assert sorted(fingerprint.Digests(folder).known) == ["a.html", "c.html"]


def test_the_racy_window_follows_the_timestamps_granularity(tmp_path, cache_dir):
    """Fine timestamps (a fraction of a second): a few kernel ticks; whole seconds: FAT's 2 s."""
    digests = fingerprint.Digests(tmp_path)
    assert digests.racy_window(1_700_000_000_123_456_789) == fingerprint.Digests.RACY_NS == 50_000_000
    assert digests.racy_window(1_700_000_000_000_000_000) == fingerprint.Digests.COARSE_RACY_NS == 2_000_000_000


def test_a_file_is_trusted_once_the_window_has_passed(tmp_path, cache_dir, monkeypatch):
    folder = tmp_path / "site"
    folder.mkdir()
    page = folder / "a.html"
    page.write_bytes(b"first")
    changed = page.stat().st_ctime_ns
    window = fingerprint.Digests(folder).racy_window(changed)
    while time.time_ns() <= changed + window:  # hashed only after the window
        time.sleep(0.01)
    assert hash_once(folder, "a.html") == sha(b"first")
    opened = reads(monkeypatch)
    assert hash_once(folder, "a.html") == sha(b"first")
    assert str(page) not in opened


def test_the_files_of_a_tree_are_those_rglob_finds_in_its_order(tmp_path):
    """matching_files is Path.rglob(pattern) with is_file() outside __pycache__, as strings: the
    same files in the same order (by parts: "a/b" before "a-b"), a link to a file counted, a linked
    folder not entered, hidden files and folders included."""
    root = tmp_path / "tree"
    for rel in (
        "a/b.csv",
        "a-b.csv",
        "a/c/d.csv",
        ".hidden/e.csv",
        "f.txt",
        "__pycache__/g.csv",
        "a/__pycache__/h.csv",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    (root / "link.csv").symlink_to(root / "a-b.csv")
    (root / "broken.csv").symlink_to(root / "missing.csv")
    (root / "linked").symlink_to(root / "a", target_is_directory=True)
    for pattern in ("*.csv", "*"):
        expected = [
            str(p.relative_to(root))
            for p in sorted(p for p in root.rglob(pattern) if p.is_file() and "__pycache__" not in p.parts)
        ]
        assert fingerprint.matching_files(root, pattern) == expected
    assert fingerprint.matching_files(root, "*.csv") == [".hidden/e.csv", "a/b.csv", "a/c/d.csv", "a-b.csv", "link.csv"]
    assert fingerprint.matching_files(tmp_path / "none", "*") == []
