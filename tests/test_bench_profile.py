"""bench/profile_build.py: the CPU of a build's parts, summed over calls, found wherever a module holds them."""

import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import profile_build  # noqa: E402


class Clock:
    """A CPU clock that advances one second at each reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def process_time(self) -> float:
        self.now += 1.0
        return self.now


def test_a_part_counts_its_outermost_calls_once(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(profile_build, "time", clock)
    timed = profile_build.Timed()

    def countdown(n: int) -> int:
        return n if n == 0 else wrapped(n - 1)

    wrapped = timed.wrap("countdown", countdown)
    # Four calls read the clock as they start (1, 2, 3, 4); only the outermost as it ends (5).
    assert wrapped(3) == 0
    assert timed.calls["countdown"] == 4
    assert timed.cpu["countdown"] == 4.0
    assert wrapped(0) == 0  # 6 to 7
    assert timed.cpu["countdown"] == 5.0 and timed.calls["countdown"] == 5


def test_a_patched_function_is_timed_in_every_module_that_holds_it(monkeypatch):
    owner, user = types.ModuleType("pipeline_fake_owner"), types.ModuleType("pipeline_fake_user")

    def part(x: int) -> int:
        return x * 2

    owner.part = user.part = part
    user.renamed = part
    monkeypatch.setitem(sys.modules, owner.__name__, owner)
    monkeypatch.setitem(sys.modules, user.__name__, user)
    timed = profile_build.Timed()
    timed.patch("the part", owner, "part")
    assert owner.part is user.part is user.renamed is not part
    assert owner.part.__wrapped__ is part
    assert [owner.part(1), user.part(2), user.renamed(3)] == [2, 4, 6]
    assert timed.calls["the part"] == 3


def test_the_report_sets_each_part_under_its_phase(monkeypatch, capsys):
    timed, phases = profile_build.Timed(), profile_build.Phases()
    phases.rows = [("validation", 3.0, 0.0, 200 * 2**20, 250 * 2**20), ("search (Pagefind)", 0.5, 0.5, 2**20, 2**20)]
    timed.cpu.update(
        {"Great Expectations: import": 1.0, "Great Expectations: suites": 1.5, "pages cut for the index": 0.25}
    )
    timed.calls.update(
        {"Great Expectations: import": 1, "Great Expectations: suites": 28, "pages cut for the index": 9}
    )
    profile_build.report(timed, phases, [])
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert lines[1:] == [
        "validation 3.00 75% 200 250",
        "Great Expectations: import 1.00 25%",
        "Great Expectations: suites (without the import) 0.50 12%",
        "search (Pagefind) 1.00 25% 1 1 (of which 0.50 s in child processes)",
        "pages cut for the index 0.25 6%",
        "all phases 4.00",
    ]
