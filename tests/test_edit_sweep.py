"""bench/edit_sweep.py: its edits are the ones it names and seeded, and it reports every way the three
builds of a step can disagree (the builds stood in for here; `just sweep` runs the real ones)."""

import random
import shutil
import sys
from pathlib import Path

import duckdb
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import edit_sweep  # noqa: E402
from edit_sweep import DATABASE, Sweep, differences, edit, scaled  # noqa: E402


@pytest.mark.parametrize(
    ("value", "factor", "expected"),
    [
        ("30", 0.5, "15"),
        ("585000", 1.1, "643500"),
        ("1", 1.1, "2"),  # an integer that would round back to itself moves by one
        ("1", 0.9, "0"),
        ("14.14", 0.9, "12.73"),
        ("0.69", 1.1, "0.759"),
        ("123456.7", 1.1, "135802"),  # four significant digits, never 1.358e+05
        ("0.001", 0.5, "0.0005"),
        ("-2.5", 2, "-5"),
        ("0.0", 2, "0"),
    ],
)
def test_a_number_is_scaled_as_the_sources_write_numbers(value, factor, expected):
    assert scaled(value, factor) == expected


TABLE = [["id", "name_ru", "count", "note"], ["a", "Первый", "4", ""], ["b", "Второй", "10", "x"]]


@pytest.mark.parametrize(
    ("kind", "seed", "said", "rows"),
    [
        ("delete", 1, "line 2 (a) deleted", [TABLE[0], TABLE[2]]),
        ("duplicate", 1, "line 2 (a) duplicated as a-copy", [TABLE[0], TABLE[1], ["a-copy", *TABLE[1][1:]], TABLE[2]]),
        ("number", 5, "line 3 (b), count: '10' -> '20'", [TABLE[0], TABLE[1], ["b", "Второй", "20", "x"]]),
        (
            "text",
            1,
            "line 2 (a), name_ru: 'Первый' -> 'Первый (правка)'",
            [TABLE[0], ["a", "Первый (правка)", "4", ""], TABLE[2]],
        ),
        ("blank", 0, "line 3 (b), note: 'x' -> ''", [TABLE[0], TABLE[1], ["b", "Второй", "10", ""]]),
    ],
)
def test_each_kind_of_edit_does_what_it_says(kind, seed, said, rows):
    table = [list(r) for r in TABLE]
    assert edit_sweep._edit_row(kind, table, random.Random(seed)) == said
    assert table == rows


def test_a_row_with_nothing_of_the_kind_is_left_alone():
    table = [["id", "count"], ["a", ""]]
    assert edit_sweep._edit_row("number", table, random.Random(1)) is None
    assert edit_sweep._edit_row("blank", table, random.Random(1)) is None
    assert table == [["id", "count"], ["a", ""]]


def test_the_same_seed_makes_the_same_edits_and_a_revert_puts_a_file_back(tmp_path, monkeypatch):
    def sweep_of(folder: Path, seed: int) -> list[str]:
        shutil.copytree(REPO / "sources", folder)
        original = {p.name: p.read_bytes() for p in folder.glob("*.csv")}
        rng = random.Random(seed)
        return [edit(folder, original, rng) for _ in range(12)], original

    first, original = sweep_of(tmp_path / "one", 5)
    second, _ = sweep_of(tmp_path / "two", 5)
    assert first == second and len(set(first)) > 6
    assert {p.name: p.read_bytes() for p in (tmp_path / "one").glob("*.csv")} == {
        p.name: p.read_bytes() for p in (tmp_path / "two").glob("*.csv")
    }
    changed = [n for n, data in original.items() if (tmp_path / "one" / n).read_bytes() != data]
    assert changed
    monkeypatch.setattr(edit_sweep, "KINDS", ("revert",))
    for _ in changed:
        assert edit(tmp_path / "one", original, random.Random(0)).startswith("revert ")
    assert all((tmp_path / "one" / n).read_bytes() == data for n, data in original.items())


def test_a_file_a_hostile_edit_left_unreadable_is_edited_no_further(tmp_path, monkeypatch):
    """A hostile edit the build accepts (a file saved in cp1251, which the loader reads) leaves a file
    the sweep cannot read as UTF-8: no edit of a row touches it (the sweep then chooses again)."""
    saved = "id,name_ru,count\nx,Первый,4\n".encode("cp1251")
    (tmp_path / "a.csv").write_bytes(saved)
    assert edit_sweep.read_rows(tmp_path / "a.csv") == []
    monkeypatch.setattr(edit_sweep, "KINDS", ("number", "text", "blank", "delete", "duplicate", "move"))
    original = {"a.csv": saved}
    assert {edit(tmp_path, original, random.Random(seed)) for seed in range(12)} == {"nothing"}
    assert (tmp_path / "a.csv").read_bytes() == saved


def test_a_revert_replaces_a_link_a_hostile_edit_made(tmp_path, monkeypatch):
    """A source file turned into a link (the fuzz's `symlinked`) is put back as a file: the bytes are
    never written through the link."""
    target = tmp_path / "elsewhere.txt"
    target.write_text("not a source")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.csv").symlink_to(target)
    monkeypatch.setattr(edit_sweep, "KINDS", ("revert",))
    assert edit(tmp_path / "src", {"a.csv": b"id\nx\n"}, random.Random(0)) == "revert a.csv"
    assert not (tmp_path / "src" / "a.csv").is_symlink() and (tmp_path / "src" / "a.csv").read_bytes() == b"id\nx\n"
    assert target.read_text() == "not a source"


def _database(path: Path, rows: list[tuple]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t (a INTEGER, b VARCHAR)")
        con.executemany("INSERT INTO t VALUES (?, ?)", rows)


def test_builds_are_compared_file_by_file_and_the_database_by_content(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for out, page in ((one, "a"), (two, "a")):
        (out / "site").mkdir(parents=True)
        (out / "site" / "index.html").write_text(page)
        (out / "build-state.json").write_text(str(out))  # never compared
    _database(one / DATABASE, [(1, "x")])
    _database(two / DATABASE, [(1, "x")])  # another file (its header's id), the same content
    assert differences(one, two) == []
    (two / DATABASE).unlink()
    _database(two / DATABASE, [(1, "y")])
    assert differences(one, two) == ["the DuckDB file's content differs"]
    (two / DATABASE).unlink()
    assert differences(one, two) == ["the DuckDB file is in one build only"]
    (two / "site" / "index.html").write_text("b")
    (two / "site" / "new.html").write_text("c")
    assert differences(one, two) == ["2 files differ: site/index.html, site/new.html"]


def _stand_in(tmp_path: Path, monkeypatch, outcomes: dict[str, tuple]) -> Sweep:
    """A Sweep whose three builds are stand-ins: outcomes[chain] = (accepted or None, the page written;
    None: nothing written). Chains: "forced", "warm", "process"."""
    sweep = object.__new__(Sweep)
    sweep.sources, sweep.accepted, sweep.work = tmp_path / "sources", tmp_path / "accepted", tmp_path
    sweep.warm, sweep.warm_out, sweep.process_out = None, tmp_path / "warm", tmp_path / "process"
    for folder in (sweep.sources, sweep.accepted):
        folder.mkdir()
        (folder / "a.csv").write_text("id\nbuilt\n")
    (sweep.sources / "a.csv").write_text("id\nedited\n")
    for out in (sweep.warm_out, sweep.process_out):
        (out / "site").mkdir(parents=True)
        (out / "site" / "index.html").write_text("before")

    def write(chain: str, out: Path) -> bool | None:
        accepted, page = outcomes[chain]
        if page is not None:
            (out / "site").mkdir(parents=True, exist_ok=True)
            (out / "site" / "index.html").write_text(page)
        return accepted

    def in_process(out: Path, force: bool = False, warm=None, preview=None) -> tuple[bool | None, str]:
        if preview is not None and "ahead" in outcomes:  # the renderer shows every page so
            preview(type("Renderer", (), {"preview": lambda self, page: outcomes["ahead"]})())
        accepted = write("forced" if force else "warm", out)
        return accepted, "" if accepted is not None else "ZeroDivisionError: float division by zero"

    monkeypatch.setattr(sweep, "_in_process", in_process, raising=False)
    monkeypatch.setattr(
        sweep, "_new_process", lambda: (write("process", sweep.process_out), "Traceback …"), raising=False
    )
    return sweep


@pytest.mark.parametrize(
    ("outcomes", "problems", "kept"),
    [
        ({"forced": (True, "new"), "warm": (True, "new"), "process": (True, "new")}, [], "edited"),
        (
            {"forced": (True, "new"), "warm": (True, "stale"), "process": (True, "new")},
            ["warm: 1 files differ: site/index.html"],
            "edited",
        ),
        (
            {"forced": (False, None), "warm": (True, "new"), "process": (False, None)},
            ["warm: accepted what the forced build refused"],
            "built",
        ),
        (
            {"forced": (True, "new"), "warm": (True, "new"), "process": (False, None)},
            ["new process: refused what the forced build accepted"],
            "edited",
        ),
        (
            {"forced": (False, None), "warm": (False, None), "process": (False, "half")},
            ["new process: a refused build changed its output"],
            "built",
        ),
        (
            {"forced": (None, None), "warm": (None, None), "process": (False, None)},
            [
                "forced: a traceback (exit 1): ZeroDivisionError: float division by zero",
                "warm: a traceback or an exit code other than 0 or 2: ZeroDivisionError: float division by zero",
            ],
            "built",
        ),
        (
            {"forced": (True, "new"), "warm": (True, "new"), "process": (True, "new"), "ahead": "new"},
            [
                "warm: the page shown ahead is not the one written: " + page
                for page in edit_sweep.AHEAD
                if page != "index.html"
            ],
            "edited",
        ),
        (
            {"forced": (True, "new"), "warm": (True, "new"), "process": (None, None)},
            ["new process: a traceback or an exit code other than 0 or 2: Traceback …"],
            "edited",
        ),
    ],
)
def test_a_step_names_every_disagreement_and_goes_on_from_the_last_sources_that_built(
    tmp_path, monkeypatch, outcomes, problems, kept
):
    sweep = _stand_in(tmp_path, monkeypatch, outcomes)
    assert sweep.step(0) == (problems, bool(outcomes["forced"][0]))  # a forced build that raised built nothing
    assert (sweep.sources / "a.csv").read_text() == (sweep.accepted / "a.csv").read_text() == f"id\n{kept}\n"


def test_the_summary_counts_the_edits_made_and_the_steps_that_disagreed(tmp_path, monkeypatch, capsys):
    class Stand:
        def __init__(self, sources, work):
            self.sources, self.original, self.steps = sources, {}, iter([[], ["warm: 1 files differ: x"], []])

        def step(self, n):
            return next(self.steps), True

    monkeypatch.setattr(edit_sweep, "Sweep", Stand)
    monkeypatch.setattr(edit_sweep, "edit", lambda sources, original, rng: "line 2 (a) moved in a.csv")
    assert edit_sweep.run(tmp_path, steps=3, seconds=float("inf"), seed=1, work=tmp_path) == 1
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == "seed 1: 3 edits, 1 where the builds disagreed"
    assert [line.split()[1] for line in printed[:-1] if not line.startswith("       ")] == ["ok", "BAD", "ok"]
    assert "       warm: 1 files differ: x" in printed
    # A budget that the first step spends stops the sweep before the next one.
    monkeypatch.setattr(edit_sweep.time, "perf_counter", iter([0.0, 0.0, 10.0, 10.0, 10.0]).__next__)
    edit_sweep.run(tmp_path, steps=3, seconds=5, seed=1, work=tmp_path)
    assert capsys.readouterr().out.splitlines()[-1] == "seed 1: 1 edits, 0 where the builds disagreed"
