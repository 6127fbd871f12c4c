"""The source distribution holds what its tests need: every tracked file of the checkout (sources/, docs/,
tests/, bench/, the README, the justfile, the CI script), so that `pytest` runs in the unpacked sdist."""

import shutil
import subprocess
import sys
import tarfile

import pytest

from conftest import ROOT

# Tracked files the sdist need not carry (git's own settings).
NOT_SHIPPED = {".gitignore"}


def tracked_files() -> set[str]:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (the unpacked sdist itself): nothing to compare the sdist with")
    done = subprocess.run([git, "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    return {name for name in done.stdout.split("\0") if name and (ROOT / name).is_file()} - NOT_SHIPPED


def test_the_sdist_holds_every_tracked_file(tmp_path):
    """Built (in a child, as `uv build --sdist` would) from a copy of the tracked files, so that setuptools
    writes its egg-info there and not into the checkout."""
    wanted = tracked_files()
    source = tmp_path / "src"
    for name in wanted | {".gitignore"}:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    build = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", build, str(tmp_path)], capture_output=True, text=True, cwd=source)
    assert done.returncode == 0, done.stderr[-3000:]
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        shipped = {m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile()}
    assert sorted(wanted - shipped) == []
    assert {"sources/servers.csv", "docs/analysts.md", "tests/conftest.py", "justfile", ".ci/run"} <= shipped
    assert not any(p.startswith(("node_modules/", "output/site/")) or "__pycache__" in p for p in shipped)
