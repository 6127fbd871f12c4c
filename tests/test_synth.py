"""bench/synth.py writes source folders the real loader and validator accept, of the size asked for."""

import subprocess
import sys
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import synth  # noqa: E402


def test_small_synthetic_catalog_passes_check_with_expected_counts(tmp_path):
    counts = synth.generate(tmp_path, models=45, servers=17)
    methods = pl.read_csv(REPO / "sources" / "methods.csv").height
    gpus = pl.read_csv(REPO / "sources" / "gpus.csv").height
    assert counts == {
        "models": 45,
        "methods": methods,
        "gpus": gpus,
        "servers": 17,
        "estimates": 45 * methods,
        "gpu_fit": 45 * methods * gpus,
        "server_fit": 45 * methods * 17,
    }
    assert pl.read_csv(tmp_path / "models.csv").height == 45
    assert pl.read_csv(tmp_path / "servers.csv").height == 17

    check = subprocess.run(
        [sys.executable, "-m", "pipeline", "check", "--sources", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith(f"{tmp_path}: все проверки пройдены (")


def test_derived_row_counts_match_what_the_rules_compute(tmp_path):
    from pipeline.build import load_and_validate
    from pipeline.combine import combine

    counts = synth.generate(tmp_path, models=40, servers=12)
    con, _ = load_and_validate(tmp_path)
    catalog = combine(con)
    assert {t: catalog[t].height for t in ("estimates", "gpu_fit", "server_fit")} == {
        t: counts[t] for t in ("estimates", "gpu_fit", "server_fit")
    }


def test_rows_option_aims_at_the_server_fit_size(tmp_path):
    counts = synth.generate_rows(tmp_path, 100_000)
    assert 95_000 <= counts["server_fit"] <= 105_000


def test_the_benchmark_counts_every_page_when_it_samples(tmp_path, monkeypatch):
    """`just bench` renders big catalogs from samples: its page count is that of a whole render.

    120 models and 110 servers: one page per model, server, method (6) and GPU (15) whatever their
    tables' lengths (no continuation pages), an index of each kind (4); the comparisons: the index,
    the server comparison and a GPU comparison per method (6)."""
    import run

    synth.generate(tmp_path, models=120, servers=110)
    whole = run.child_render(str(tmp_path), "5")
    monkeypatch.setattr(run, "FULL_RENDER_LIMIT", 0)
    sampled = run.child_render(str(tmp_path), "5")
    assert whole["mode"] == "all pages"
    assert sampled["mode"] == "sampled: 5 models' and 5 servers' pages, total extrapolated"
    expected = 120 + 110 + 6 + 15 + 4 + 1 + 1 + 6
    assert whole["pages"] == sampled["pages"] == expected


def test_the_whole_process_bench_reads_the_files_a_build_wrote():
    """bench/whole.py reports how many files a one-price build rewrote, from the summary line the
    build prints (the message catalogue's words), so a reworded line must not make it report None."""
    import whole

    from pipeline.messages import message

    line = message(
        "report.built",
        out="output",
        pages=101,
        rendered=101,
        markdown=3,
        rows="estimates 270",
        written=17,
        kept=312,
        seconds="9,9",
    )
    assert whole.written(line) == 17
    assert whole.rendered(line.replace("заново: 101", "заново: 37")) == (37, 101)
    assert whole.rendered("nothing here") is None
    assert whole.written("nothing here") is None


def test_the_whole_process_bench_holds_synthetic_builds_to_issue_37s_targets():
    """10^5 rows ≤ 5 s wall, 10^6 ≤ 15 s, 10^7 ≤ 60 s and 4 GB; CPU within 3× of Hugo's on as many pages
    of the same shape."""
    import whole

    def run(rows: int, wall: float, peak_gib: float = 1.0, hugo: float | None = None) -> dict:
        reference = None if hugo is None else {"cpu": hugo, "bytes": 2**20, "pages": rows // 1000}
        return {
            "rows": rows,
            "wall": wall,
            "cpu": wall,
            "peak_mib": peak_gib * 1024,
            "pages": rows // 1000,
            "html_bytes": 2**21,
            "rc": 0,
            "hugo": reference,
        }

    got = whole.synthetic_targets(
        [run(99_846, 4.9, hugo=1.7), run(998_784, 15.5, hugo=5.0), run(10_000_086, 59.0, 4.5), run(2_700, 9.0)]
    )
    assert [(name, verdict) for name, _, verdict in got] == [
        ("whole build, 99,846 rows < 5 s", "met"),
        ("  vs Hugo, 99 pages of the same shape ≤ 3× (cpu)", "met"),
        ("whole build, 998,784 rows < 15 s", "not met"),
        ("  vs Hugo, 998 pages of the same shape ≤ 3× (cpu)", "not met"),
        ("whole build, 10,000,086 rows < 60 s and < 4 GB", "not met"),
        ("whole build, 2,700 rows", "(reference)"),
    ]
