"""bench/whole.py's memory figure: the process tree's proportional set size, sampled consistently."""

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import whole  # noqa: E402


def test_a_sample_whose_tree_changed_while_it_was_read_is_taken_again(monkeypatch):
    """A fork between listing the tree and reading it counted the pages the child shares twice: the
    sample is taken again until the tree is the same before and after it is read."""
    trees = iter([[1], [1, 2], [1, 2], [1, 2]])  # a child forked during the first sample
    read = []
    monkeypatch.setattr(whole, "_tree", lambda pid: next(trees))
    monkeypatch.setattr(whole, "_pss", lambda p: read.append(p) or {1: 300, 2: 100}[p])
    assert whole._tree_pss(1) == 400
    assert read == [1, 1, 2]


def test_a_forked_child_adds_only_what_it_does_not_share():
    """A process holding 200 MB that forks a child: the tree reads about 200 MB, not twice that."""
    code = (
        "import os, sys, time\n"
        "block = bytearray(200 * 2**20)\n"
        "for i in range(0, len(block), 4096): block[i] = 1\n"
        "if os.fork() == 0:\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while len(whole._tree(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(whole._tree(proc.pid)) == 2
        total = whole._tree_pss(proc.pid) / 2**20
        assert 200 < total < 260, total
    finally:
        for pid in whole._tree(proc.pid)[1:]:
            subprocess.run(["kill", str(pid)], check=False)
        proc.kill()
        proc.wait()


def test_cpu_tree_counts_each_process_and_thread_of_the_tree():
    """bench/cpu_tree.py: a parent that spins on two threads and forks a child that spins too; each is
    listed with its CPU (about what it spun), the child under its parent, and the exit code passes."""
    code = (
        "import os, threading, time\n"
        "def spin(seconds):\n"
        "    end = time.process_time() + seconds\n"
        "    while time.thread_time() < seconds and time.process_time() < end + 5: pass\n"
        "if os.fork() == 0:\n"
        "    spin(0.6); os._exit(0)\n"
        "t = threading.Thread(target=spin, args=(0.4,)); t.start(); spin(0.4); t.join(); os.wait()\n"
        "raise SystemExit(3)\n"
    )
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "cpu_tree.py"), sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    lines = done.stdout.splitlines()
    parent, child = lines[0], lines[1]
    parent_pid = int(parent.split()[1])
    assert f"(parent {parent_pid})" in child
    cpu = [float(line.split(", ")[1].split()[0]) for line in (parent, child)]
    assert 0.7 <= cpu[0] <= 1.5 and 0.5 <= cpu[1] <= 1.2, lines
    assert len(parent.split("threads: ")[1].split(", ")) == 2, parent  # both spinning threads
    assert lines[-1].startswith("wall ") and lines[-1].endswith("exit code 3")
