"""Sharing CPU-bound work with one forked child, so that a build uses two cores.

Great Expectations and XlsxWriter are pure Python (one core each under the GIL). `start_map`
runs the items in this process and in a child made with fork(), which shares everything
already loaded. Both take the next item from one pipe until none is left, so neither waits
for the other. The child starts at once and this process does other work before it joins in (a build validates, and makes its workbooks, while it renders). A child
that fails in any way is not an error: whatever it did not deliver is computed here, so the
result (and any exception) is exactly that of a plain loop. Only pure Python runs in a child:
polars and DuckDB keep thread pools that a forked process does not have.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from typing import NoReturn, TypeVar

# PIPELINE_WORKERS=1 keeps everything in this process (one core, e.g. to profile).
WORKERS = int(os.environ.get("PIPELINE_WORKERS", "2"))
_ITEM = struct.Struct("<I")  # one item number in the queue pipe; reads this small are atomic
# The early child's map is sent after its length, and the child reads that much, not up to the end of
# the pipe: a child forked while the pipe was open (the workbooks') holds its write end until it exits,
# which kept the suites waiting up to 2.7 s after the map was written (docs/operations.md).
_LENGTH = struct.Struct("<Q")
# How much nicer than the build's own path (the pages) its background threads run: the downloads'
# and the DuckDB file's. Where both cores are busy, the pages, on which everything after them waits,
# get them first, and the downloads' two threads fill both cores at the end, where the pages' one
# thread used to finish alone. At 10^6 rows a forced build took 13.1–15.7 s (median 14.3) instead of
# 14.6–16.9 s (median 15.2) in five alternate pairs (docs/operations.md, "Nineteenth round").
BACKGROUND_NICE = 10

T = TypeVar("T")


def start_map(  # noqa: PLR0913
    function: Callable,
    items: Sequence,
    weights: Sequence[float] | None = None,
    alone: bool = False,
    joins: Callable[[], bool] | None = None,
    read_early: bool = False,
) -> Callable[[], list]:
    """[function(item) for item in items], shared with a forked child (heavier items, by weight, start
    first): the child starts on the items now, while this process does other work; calling the returned function takes what the child has not begun, here, and
    returns every result in item order. With one core nothing runs until then; with one item
    neither, unless `alone`: then the child takes even a single item (this process has other
    work to do meanwhile). `joins` false (asked at that call): this process takes no item, it waits
    for the child (an item would cost it a setup the child made, an import of a second). `read_early`:
    the child's answer is read by a thread of this process as the child sends it (_Answer), not when
    the returned function is called: large results (the workbooks, 25 MB at 10^5 rows) are then not
    copied through the pipe on the build's path after its pages (0.08-0.16 s). Nothing may fork in
    this process until the returned function was called (the thread would be running).
    """
    items = list(items)
    few = len(items) < (1 if alone else 2)
    if few or WORKERS < 2 or (os.cpu_count() or 1) < 2 or not hasattr(os, "fork"):
        return once(lambda: [function(item) for item in items])
    order = sorted(range(len(items)), key=lambda i: -(weights[i] if weights else 0))
    queue_read, queue_write = os.pipe()
    os.write(queue_write, b"".join(_ITEM.pack(i) for i in order))  # a few bytes: fits the pipe's buffer
    os.close(queue_write)
    answer_read, answer_write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = fork()
    if pid == 0:  # the child: take items until the queue is empty, send the results, exit at once
        _be_child(parent, [answer_read], lambda: _take(function, items, queue_read), answer_write)
    os.close(answer_write)
    answer = _Answer(answer_read) if read_early else None

    def join() -> list:
        try:
            results = _take(function, items, queue_read) if joins is None or joins() else {}
        except BaseException:  # Ctrl-C (which the child ignores) or an item's error: the child's work is not wanted
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            raise
        finally:
            os.close(queue_read)
            if answer is None:
                with os.fdopen(answer_read, "rb") as pipe:
                    data = pipe.read()
            else:
                data = answer.data()
            _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) == 0:
            try:
                results.update(pickle.loads(data))
            except Exception:  # a truncated answer: its items are computed below
                pass
        return [results[i] if i in results else function(items[i]) for i in range(len(items))]

    return once(join)


class _Answer:
    """A child's answer read from its pipe `fd` by a thread as it comes (start_map's `read_early`), the
    thread nicer than this one (in_background); data() waits for the pipe's end and gives the bytes."""

    def __init__(self, fd: int) -> None:
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._read, args=(fd,), name="answer", daemon=True)
        self._thread.start()

    def _read(self, fd: int) -> None:
        in_background()
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 20):
                self._chunks.append(chunk)

    def data(self) -> bytes:
        self._thread.join()
        data = b"".join(self._chunks)
        self._chunks.clear()
        return data


class Early:
    """A child forked before this process has loaded anything, that makes ready (`prepare`: imports of
    a second or more) while this process reads its inputs, then runs the one map it is sent (`map`).
    `start_map` forks once its items exist, so the second core would idle until then: a build's child
    imports Great Expectations while the build reads the sources, and is then sent the tables.
    Only a process that has not imported DuckDB yet makes one (`usable`): the child may then use
    DuckDB and Arrow of its own, since no table was loaded here when it was forked (the modules may be
    imported just before the fork, so that the child inherits them: importing polars or pyarrow starts
    only their allocators' threads; a process that has loaded tables, `serve` or a test's, forks later,
    with start_map). A child that fails in
    any way is not an error: whatever it did not deliver is computed here. One never sent a map is
    killed by `close`."""

    def __init__(self, prepare: Callable[[], object]) -> None:
        """Forks now where two cores and fork() are there; the caller asks `usable()` first, before it
        imports what the child inherits."""
        self.pid: int | None = None
        self._sent = False
        if WORKERS < 2 or (os.cpu_count() or 1) < 2 or not hasattr(os, "fork"):
            return
        job_read, job_write = os.pipe()
        answer_read, answer_write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = fork()
        if pid == 0:  # the child: make ready, wait for the map, send its results, exit at once
            _be_child(parent, [job_write, answer_read], lambda: _prepared_map(prepare, job_read), answer_write)
        os.close(job_read)
        os.close(answer_write)
        self.pid, self._job, self._answer = pid, job_write, answer_read

    @staticmethod
    def usable() -> bool:
        """Two cores and fork(), and no DuckDB loaded in this process yet (see the class)."""
        return WORKERS >= 2 and (os.cpu_count() or 1) >= 2 and hasattr(os, "fork") and "duckdb" not in sys.modules

    def map(self, function: Callable, items: Sequence) -> Callable[[], list]:
        """[function(item) for item in items] in the child (function and items are pickled to it; a
        thread here writes them, as the child reads only once it is ready); calling the result waits
        for it and computes here what it did not deliver. Without a child, or after a first map, all here."""
        items = list(items)
        if self.pid is None or self._sent:
            return once(lambda: [function(item) for item in items])
        self._sent = True
        data = pickle.dumps((function, items), protocol=pickle.HIGHEST_PROTOCOL)
        data = _LENGTH.pack(len(data)) + data
        writer = threading.Thread(target=_write_all, args=(self._job, data), daemon=True)
        writer.start()
        pid, answer = self.pid, self._answer

        def join() -> list:
            try:
                with os.fdopen(answer, "rb") as pipe:
                    data = pipe.read()
            except BaseException:  # Ctrl-C while waiting: the child's work is not wanted
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                raise
            finally:
                _, status = os.waitpid(pid, 0)
                writer.join()
            results = {}
            if os.waitstatus_to_exitcode(status) == 0:
                with contextlib.suppress(Exception):  # a truncated answer: its items are computed below
                    results = pickle.loads(data)
            return [results[i] if i in results else function(items[i]) for i in range(len(items))]

        return once(join)

    def close(self) -> None:
        """A child never sent a map is killed and reaped (a sent one is reaped by its join)."""
        if self.pid is None or self._sent:
            return
        self._sent = True
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self._job)
        os.close(self._answer)


def _be_child(parent: int, unused: list[int], work: Callable[[], dict], answer: int) -> NoReturn:
    """A forked child's life: it ends with its parent (die_with_parent), closes the parent's ends of the
    pipes (`unused`), sends what `work` returns through `answer`, pickled, and exits at once (status 1
    when anything failed: the parent then computes what it did not deliver)."""
    status = 1
    try:
        die_with_parent(parent)
        for fd in unused:
            os.close(fd)
        done = work()
        with os.fdopen(answer, "wb") as pipe:
            pipe.write(pickle.dumps(done, protocol=pickle.HIGHEST_PROTOCOL))
        status = 0
    finally:
        os._exit(status)


def _prepared_map(prepare: Callable[[], object], job: int) -> dict[int, object]:
    """The early child's work: make ready, then read the map (function, items) from `job` and run it,
    results by item number; nothing when the pipe closes unsent."""
    prepare()
    with os.fdopen(job, "rb") as pipe:
        length = pipe.read(_LENGTH.size)
        if not length:
            return {}
        data = pipe.read(*_LENGTH.unpack(length))
    function, items = pickle.loads(data)
    return {i: function(item) for i, item in enumerate(items)}


def _write_all(fd: int, data: bytes) -> None:
    """All of `data` into a pipe, then closed; a child that is gone (a broken pipe) gets none."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass
    finally:
        os.close(fd)


# How many stack slots (8 bytes each) the frame of on_deep_stack reserves: see there.
DEEP_STACK_SLOTS = 1 << 17


def on_deep_stack(function: Callable[[], T]) -> T:
    """function(), called from a frame that reserves DEEP_STACK_SLOTS slots of CPython's data stack.
    CPython (3.11 and later) keeps frames in a data stack of 16 KiB chunks: a call that does not fit
    the current chunk maps a new one (mmap), and its return unmaps it, so code whose depth swings
    across a chunk's end maps, faults in and unmaps memory at every crossing. Great Expectations'
    deep calls did so: 0.4 s of the kernel's CPU in its child at every catalog size (`perf`;
    docs/operations.md, "Twenty-third round"). This frame is larger than a chunk, so the chunk it
    opens is twice its size (2 MiB, of which only the pages used are ever touched), and every call
    made from it, and from a child forked meanwhile, finds room there. Each thread has a stack of its
    own: a command's entry point runs on this one (pipeline.__main__), and `serve` runs its rebuilds'
    thread on one too."""
    return function()


on_deep_stack.__code__ = on_deep_stack.__code__.replace(co_stacksize=DEEP_STACK_SLOTS)


def in_background() -> None:
    """The calling thread, if it is not the main thread, runs BACKGROUND_NICE nicer than the main
    thread (at most 19; a thread started by a background thread, which inherits its niceness, is no
    nicer). Linux only, where a thread's id names that thread alone (elsewhere it would name the
    process). A thread's niceness cannot be lowered again without privileges: a process that lives on
    (`serve`) starts new threads for each build, at the niceness of the thread that starts them."""
    main = threading.main_thread()
    if not sys.platform.startswith("linux") or threading.current_thread() is main or main.native_id is None:
        return
    me = threading.get_native_id()
    with contextlib.suppress(OSError):
        wanted = min(19, os.getpriority(os.PRIO_PROCESS, main.native_id) + BACKGROUND_NICE)
        if os.getpriority(os.PRIO_PROCESS, me) < wanted:
            os.setpriority(os.PRIO_PROCESS, me, wanted)


def fork() -> int:
    """os.fork() with the garbage collector off and Ctrl-C held across it. The child keeps both: no
    collection may run there (it would run the finalizers of objects the parent left behind, DuckDB or
    Arrow handles whose threads do not exist in the child, and crash; even the threading module's own
    after-fork step allocates, so the collector is off before the fork, not after), and Ctrl-C stays
    held until the child ignores it (die_with_parent). The parent gets both back as they were."""
    collecting = gc.isenabled()
    gc.disable()
    blocking = hasattr(signal, "pthread_sigmask")
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if blocking else None
    pid = -1
    try:
        pid = os.fork()
    finally:
        if pid != 0:  # the parent, or no child (fork failed)
            if blocking:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)
            if collecting:
                gc.enable()
    return pid


@contextlib.contextmanager
def sigint_held():
    """Ctrl-C is held (blocked, not lost) around a fork: a child made inside inherits the block and
    drops the signal when it ignores SIGINT (die_with_parent), so that no Ctrl-C reaches it in the
    instant before; the parent receives a held one when the block ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    holder = os.getpid()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if os.getpid() == holder:  # a child forked inside keeps the block until it ignores SIGINT
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def die_with_parent(parent: int) -> None:
    """In a forked child: Ctrl-C is the parent's to handle (the child would otherwise be interrupted
    half-way through an import and report that as a failure), and the child is killed when the parent
    ends in any way, a SIGKILL included (Linux's PR_SET_PDEATHSIG), so that no child outlives a build."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C held since the fork is dropped here
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent ended before the request took effect
        os._exit(1)


def once(function: Callable[[], list]) -> Callable[[], list]:
    """function, run on the first call only; later calls give the same result or raise the same error."""
    outcome: list = []

    def call() -> list:
        if not outcome:
            try:
                outcome.append((True, function()))
            except BaseException as exc:
                outcome.append((False, exc))
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    return call


def _take(function: Callable, items: list, queue: int) -> dict[int, object]:
    done = {}
    while len(chunk := os.read(queue, _ITEM.size)) == _ITEM.size:
        (i,) = _ITEM.unpack(chunk)
        done[i] = function(items[i])
    return done
