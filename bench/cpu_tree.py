"""CPU seconds of a command's process tree, by process and thread: where a build's CPU goes, in real
CPU time rather than in samples of a profiler (which count a thread that waits for a core as busy).

    python bench/cpu_tree.py python -m pipeline build --sources S --out O --force --quiet
    python bench/cpu_tree.py --every 0.5 python -m pipeline build …

Every SAMPLE_SECONDS the command's process and its descendants are listed from /proc with each
thread's user + system time; a process or thread that ends between two samples keeps its last
reading (so a short-lived one may be under-counted by up to SAMPLE_SECONDS of CPU, and one that
starts and ends between two samples is not seen at all: the last line also gives the kernel's count
of the whole tree, from wait4). Printed per
process, in the order they started: its parent, when it was first and last seen (seconds from the
start), its CPU and its threads' CPU (those over 0.05 s); processes under 0.01 s are left out. Linux only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

SAMPLE_SECONDS = 0.05


def _parents() -> dict[int, int]:
    """Every process's parent, by pid (those that could be read)."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    stat = f.read()
                found[int(name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
            except (OSError, ValueError):
                pass
    return found


def _tree(root: int, parents: dict[int, int]) -> set[int]:
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree


def _threads(pid: int, tick: int) -> dict[int, tuple[str, float]]:
    """Thread id -> (its name, user + system CPU seconds) of one process."""
    found = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2 :].split()
        found[int(tid)] = (stat[stat.index("(") + 1 : stat.rindex(")")], (int(fields[11]) + int(fields[12])) / tick)
    return found


def main(command: list[str], every: float | None = None) -> int:
    tick = os.sysconf("SC_CLK_TCK")
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: dict[tuple[int, int], list] = {}  # (pid, tid) -> [name, parent pid, first, last, cpu]
    timeline, shown_at, shown_cpu = [], 0.0, {}
    usage = None
    while usage is None:
        parents, now = _parents(), time.perf_counter() - started
        for pid in _tree(proc.pid, parents):
            try:
                threads = _threads(pid, tick)
            except OSError:
                continue  # ended meanwhile
            for tid, (name, cpu) in threads.items():
                entry = seen.setdefault((pid, tid), [name, parents.get(pid), now, now, 0.0])
                entry[3], entry[4] = now, cpu
        if every and now - shown_at >= every:
            timeline.append(_interval(seen, shown_cpu, now, now - shown_at))
            shown_at = now
        time.sleep(SAMPLE_SECONDS)
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            usage, proc.returncode = rusage, os.waitstatus_to_exitcode(status)
    for line in timeline:
        print(line)
    by_process: dict[int, list] = {}
    for (pid, tid), entry in seen.items():
        by_process.setdefault(pid, []).append((tid, *entry))
    total = 0.0
    for pid, threads in sorted(by_process.items(), key=lambda item: min(t[3] for t in item[1])):
        cpu = sum(t[5] for t in threads)
        total += cpu
        if cpu < 0.01:
            continue  # a shell or a helper that did nothing measurable
        main_name = next((t[1] for t in threads if t[0] == pid), threads[0][1])
        shown = ", ".join(f"{t[0]} {t[1]} {t[5]:.2f}" for t in sorted(threads, key=lambda t: -t[5]) if t[5] > 0.05)
        first, last = min(t[3] for t in threads), max(t[4] for t in threads)
        print(
            f"pid {pid} (parent {threads[0][2]}) {main_name}: {first:.1f}–{last:.1f} s, {cpu:.2f} s CPU; threads: {shown}"
        )
    # The kernel's own count (wait4, as bench/whole.py measures): every thread and every waited-for
    # process, including those too short-lived for the samples above.
    kernel = usage.ru_utime + usage.ru_stime
    print(
        f"wall {time.perf_counter() - started:.1f} s, CPU {total:.1f} s sampled, {kernel:.1f} s by the kernel "
        f"(user {usage.ru_utime:.1f}, system {usage.ru_stime:.1f}), exit code {proc.returncode}"
    )
    return proc.returncode


def _interval(seen: dict, before: dict, now: float, seconds: float) -> str:
    """One line of the timeline: the CPU each thread used since `before` (updated), over `seconds`."""
    used = {}
    for (pid, tid), (name, _, _, _, cpu) in seen.items():
        used[f"{pid}/{tid} {name}"] = cpu - before.get((pid, tid), 0.0)
        before[pid, tid] = cpu
    busiest = ", ".join(f"{k} {v:.2f}" for k, v in sorted(used.items(), key=lambda kv: -kv[1])[:4] if v >= 0.02)
    return f"{now:6.1f} s: {sum(used.values()) / seconds:4.2f} cores | {busiest}"


if __name__ == "__main__":
    args = sys.argv[1:]
    every = None
    if args[:1] == ["--every"]:
        try:
            every, args = float(args[1]), args[2:]
        except (IndexError, ValueError):
            args = []
    if not args or (every is not None and every <= 0):
        print(__doc__, file=sys.stderr)
        sys.exit(64)
    sys.exit(main(args, every))
