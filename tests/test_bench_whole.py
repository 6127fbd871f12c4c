"""bench/whole.py: the memory figure (the process tree's proportional set size, sampled consistently) and
the Hugo reference (pages of the same shape as the build's)."""

import shutil
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


def test_cpu_tree_every_prints_the_cores_used_in_each_interval_first():
    """`--every SECONDS`: one line per interval (its end, the cores the tree used, the busiest threads)
    before the per-process lines; a process spinning on one thread uses about one core meanwhile."""
    code = "import time\nend = time.process_time() + 0.8\nwhile time.process_time() < end: pass\n"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "cpu_tree.py"), "--every", "0.25", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    timeline = [line for line in lines if " cores | " in line]
    assert len(timeline) >= 2 and lines[: len(timeline)] == timeline, lines
    cores = [float(line.split(": ")[1].split()[0]) for line in timeline]
    assert max(cores) >= 0.5 and all(0 <= c <= 2.5 for c in cores), lines
    assert any(" python " in line or " python3" in line for line in timeline), lines
    assert lines[len(timeline)].startswith("pid ") and lines[-1].startswith("wall ")
    usage = subprocess.run(
        [sys.executable, str(REPO / "bench" / "cpu_tree.py"), "--every", "x", "true"], capture_output=True, timeout=60
    )
    assert usage.returncode == 64


PAGE = """<html><head><title>T</title><style>p {}</style></head><body>
<h1>Модель</h1><p>Два слова.</p><svg><text>drawn</text></svg>
<table><thead><tr><th>Сервер</th><th>Цена</th></tr></thead>
<tbody><tr><td><a href="s.html">ab</a></td><td class="num">1 200</td></tr>
<tr><td>cd</td><td>9</td></tr></tbody></table>
<p>Ещё</p><table><tr><td>x</td></tr></table></body></html>"""


def test_page_shapes_reads_each_pages_text_and_tables(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.html").write_text(PAGE, encoding="utf-8")
    (tmp_path / "b.html").write_text("<p>один</p>", encoding="utf-8")
    (tmp_path / "c.css").write_text("p {}", encoding="utf-8")
    assert whole.page_shapes(tmp_path) == [
        {"text": 4, "tables": []},  # b.html
        # "Модель Два слова. Ещё": the head, style and drawing are not text; the tables are apart
        {"text": 21, "tables": [{"rows": 3, "columns": 2, "cell": 3}, {"rows": 1, "columns": 1, "cell": 1}]},
    ]


def test_a_hugo_page_has_the_shape_it_was_given():
    shape = {"text": 60, "tables": [{"rows": 4, "columns": 3, "cell": 13}]}
    page = whole.hugo_page(7, shape)
    head, body = page.split("---\n\n", 1)
    assert head == '---\ntitle: "p7"\n'
    lines = body.splitlines()
    assert lines[0] == "# p7"
    assert len(lines[2]) == 59  # ten words of five letters and their spaces
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 5  # the header, the rule and three more rows: 4 rows of cells in all
    assert table[1] == "|---|---|---|"
    assert table[0] == "| ячейка ячейка | ячейка ячейка | ячейка ячейка |"


def test_a_small_synthetic_build_is_timed_as_often_as_the_real_catalog(monkeypatch, tmp_path):
    """Up to REPEATED_ROWS rows a synthetic build's wall and CPU are the median of `--repeat` runs (a
    single 10^5-row run moved by 0.8 s within minutes); a larger one is timed once."""
    asked = []
    monkeypatch.setattr(whole.synth, "generate_rows", lambda sources, rows: {"server_fit": rows})
    monkeypatch.setattr(whole.Bench, "run", lambda self, args, repeat=None, **kw: asked.append(repeat) or {"rc": 1})
    b = whole.Bench(REPO, tmp_path, repeat=3)
    for rows in (whole.REPEATED_ROWS, whole.REPEATED_ROWS + 1):
        assert whole.synthetic(b, rows)["rows"] == rows
    assert asked == [3, 1]


def test_the_synthetic_targets_set_the_build_beside_hugo_and_the_pages_alone():
    run = {
        "rows": 998_784,
        "pages": 862,
        "html_bytes": 55 * 2**20,
        "wall": 16.0,
        "cpu": 30.0,
        "peak_mib": 900.0,
        "rc": 0,
        "pages_alone": {"render_cpu": 4.5, "pages": 862},
        "hugo": {"cpu": 3.0, "bytes": 31 * 2**20, "pages": 862},
    }
    rows = whole.synthetic_targets([run])
    assert rows == [
        ("whole build, 998,784 rows < 15 s", "16.0 s wall, 30.0 s cpu, peak 0.88 GiB, 862 pages", "not met"),
        (
            "  vs Hugo, 862 pages of the same shape ≤ 3× (cpu)",
            "10.00× Hugo's 3.00 s (55 MiB of HTML; Hugo's 31)",
            "not met",
        ),
        ("    the pages alone (render_cpu.py) vs Hugo (cpu)", "1.50×: 4.50 s", "(reference)"),
    ]
    run |= {"wall": 14.0, "cpu": 9.0, "hugo": None, "files": 2_100, "file_creation_ms": 0.45}
    assert whole.synthetic_targets([run]) == [
        ("whole build, 998,784 rows < 15 s", "14.0 s wall, 9.0 s cpu, peak 0.88 GiB, 862 pages", "met"),
        ("  creating a file where the builds wrote (file system)", "0.450 ms: 2100 files, 0.94 s", "(reference)"),
    ]


def test_file_creation_is_timed_in_a_new_folder_that_is_removed(tmp_path):
    (tmp_path / "kept.txt").write_text("x")
    ms = whole.file_creation_ms(tmp_path, count=50)
    assert 0 < ms < 1000 and [p.name for p in tmp_path.iterdir()] == ["kept.txt"]


def test_each_price_edit_writes_a_price_no_earlier_edit_wrote(tmp_path):
    """serve_edit waits for the site to change after each edit: an edit that wrote back a price an earlier
    one wrote left the file changed and the site not, and the bench waited forever (it did, when the
    second series of edits began four seconds after the first)."""
    servers = tmp_path / "servers.csv"
    shutil.copy(REPO / "sources" / "servers.csv", servers)
    original = servers.read_text(encoding="utf-8")
    edit, server = whole.price_editor(servers)
    written = []
    for i in [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]:  # serve_edit's two series: the same edit numbers
        edit(i)
        written.append(servers.read_text(encoding="utf-8"))
    assert len(set(written)) == 10 and original not in written
    first = original.splitlines()
    for text in written:
        lines = text.splitlines()
        changed = [n for n, (a, b) in enumerate(zip(first, lines, strict=True)) if a != b]
        assert len(changed) == 1 and lines[changed[0]].startswith(f"{server},")


def test_a_command_is_timed_in_runs_nothing_samples_and_its_peak_taken_in_one_more(tmp_path, monkeypatch):
    """The memory sampler walks the tree's page tables, which slowed the build it measured (10^5 rows:
    5.7-5.9 s wall sampled, 5.4 s not): wall and CPU are the medians of runs without it, the peak is a
    further run's, sampled, after its own `before`."""
    calls, befores = [], []
    figures = iter([(3.0, 5.0), (1.0, 4.0), (2.0, 6.0), (9.0, 9.0)])

    def fake(cmd, cwd, env, sample=True):
        calls.append(sample)
        wall, cpu = next(figures)
        peak = 700.0 if sample else float("nan")
        return {"wall": wall, "cpu": cpu, "peak_mib": peak, "rc": 0, "stdout": f"run {len(calls)}"}

    monkeypatch.setattr(whole, "measure", fake)
    b = whole.Bench(REPO, tmp_path, repeat=3)
    result = b.run(["build"], before=befores.append)
    assert calls == [False, False, False, True] and befores == [0, 1, 2, 3]
    assert (result["wall"], result["cpu"], result["peak_mib"], result["stdout"]) == (2.0, 5.0, 700.0, "run 3")
    calls.clear()
    figures = iter([(1.0, 1.0)])
    alone = b.run(["x"], repeat=1, peak=False)
    assert calls == [False] and alone["wall"] == 1.0 and alone["peak_mib"] != alone["peak_mib"]  # nan


def test_the_editor_tools_bench_times_diff_release_and_the_zip_on_an_edited_copy(monkeypatch, tmp_path):
    """bench/editor_tools.py: a forced build (the published folder), a copy built again after one price
    changed, then diff and release of that copy against it (release into a fresh copy of the history,
    so it compares and never writes the repository's), and the release zip of the copy."""
    import editor_tools

    made = []

    def generate(sources, rows):
        shutil.copytree(REPO / "sources", sources)
        return {"server_fit": rows}

    def run(self, args, before=None, repeat=None, python=False, peak=True):
        if before:
            before(0)
        made.append((args, (tmp_path / "synth-10" / "sources" / "servers.csv").read_text(encoding="utf-8")))
        if args[0] == "build":
            data = Path(args[args.index("--out") + 1]) / "site" / "data"
            data.mkdir(parents=True, exist_ok=True)
            (data / "gpu-finetune.duckdb").write_bytes(b"x" * (10 if "--force" in args else 15))
        if args[0] == "release":
            history = Path(args[args.index("--sources") + 1])
            assert (history / "releases" / "releases.csv").is_file() and history != REPO / "sources"
        return {"rc": 0, "stdout": "123\n", "wall": 1.0, "cpu": 1.0, "peak_mib": 1.0}

    monkeypatch.setattr(editor_tools.synth, "generate_rows", generate)
    monkeypatch.setattr(whole.Bench, "run", run)
    r = editor_tools.tools(whole.Bench(REPO, tmp_path, repeat=1), 10)
    folder = tmp_path / "synth-10"
    published, edited = str(folder / "published"), str(folder / "output")
    assert [a[0][:1] + a[0][-4:] for a in made[:1]] == [["build", "--out", published, "--force", "--quiet"]]
    assert made[1][0][-3:] == ["--out", edited, "--quiet"] and made[1][1] != made[0][1]  # one price changed
    assert made[2][0] == ["diff", "--out", edited, "--against", published]
    assert made[3][0][:5] == ["release", "--out", edited, "--against", published]
    assert made[4][0] == [str(folder / "release_zip.py"), edited]
    assert r["zip_bytes"] == 123 and r["database_bytes"] == [10, 15] and not folder.exists()
