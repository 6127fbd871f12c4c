"""The build never writes outside its folder, never replaces a folder it does not own, and ends an
environment failure with one line and exit code 3, leaving the previous output as it was."""

import contextlib
import errno
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from pipeline.publish import outdir
from pipeline.publish import staging as publish
from pipeline.publish.paths import UnsafePath, check_relative, link_verified, safe_path, write_file

FAULTS = ROOT / "tests" / "faults.py"


def run(*args: str, cwd: Path = ROOT, faults: dict | None = None, env: dict | None = None):
    command = [sys.executable, "-m", "pipeline", *args]
    if faults is not None:
        command = [sys.executable, str(FAULTS), json.dumps(faults), *args]
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})}
    )


def run_here(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command line in this process (a refusal of --out happens before any work: the process adds
    nothing that test_out_dot_in_a_clone_is_refused does not already check)."""
    from pipeline.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    saved = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def tree(folder: Path) -> dict[str, str]:
    """Every entry below `folder` (links by their target), files by their hash."""
    found = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            found[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[rel] = "dir"
    return found


def escaped(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*escaped*"))


# --- one function turns a relative path into a file path -------------------------------------


@pytest.mark.parametrize(
    "rel",
    [
        "/etc/passwd",
        "../escaped.html",
        "gpus/../../escaped.html",
        "gpus/..",
        "./index.html",
        "gpus//index.html",
        "gpus/",
        "",
        "a\\..\\escaped.html",
        "gpus/a\0b.html",
        "gpus/a\nb.html",
        "x" * 256 + ".html",
        "я" * 128 + ".html",  # 256 bytes in UTF-8
    ],
)
def test_safe_path_refuses_names_that_leave_the_folder(tmp_path, rel):
    with pytest.raises(UnsafePath):
        safe_path(tmp_path, rel)
    with pytest.raises(UnsafePath):
        write_file(tmp_path, rel, b"x")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("rel", "why"),
    [
        ("/etc/passwd", "путь абсолютный, а должен идти от папки сборки"),
        ("gpus/../../escaped.html", "в пути часть «..» (текущая или родительская папка)"),
        ("gpus//index.html", "в пути пустая часть (две косые черты подряд или черта в конце)"),
        ("a\\b.html", "в имени обратная косая черта"),
        ("gpus/a\nb.html", "в имени нулевой или управляющий символ"),
        ("я" * 128 + ".html", "часть пути длиной 261 байт, а можно не больше 255"),
    ],
)
def test_a_refused_name_is_said_in_russian(tmp_path, rel, why):
    """What an editor reads when a name is refused: the name, the folder and why, from the catalogue."""
    with pytest.raises(UnsafePath) as refused:
        safe_path(tmp_path, rel)
    assert str(refused.value) == f"файл {rel!r} в папке {tmp_path} не записан: {why}"


def test_a_planted_link_is_named(tmp_path):
    (tmp_path / "gpus").symlink_to(tmp_path)
    with pytest.raises(UnsafePath) as refused:
        safe_path(tmp_path, "gpus/h100.html")
    assert refused.value.reason == "paths.symbolic_link"
    assert str(refused.value).endswith("не записан: «gpus» — символическая ссылка, а сборка не пишет через ссылки")


def test_safe_path_takes_ordinary_names(tmp_path):
    for rel in ("index.html", "gpus/h100-pcie.html", "models/llama-3-1-8b/servers-2.html", "data/данные.csv"):
        assert safe_path(tmp_path, rel) == tmp_path / rel
        assert check_relative(rel) == rel.split("/")
    assert len(check_relative("x" * 255)) == 1


def test_safe_path_refuses_symbolic_links_out_of_the_folder(tmp_path):
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "gpus").symlink_to(elsewhere)
    (root / "index.html").symlink_to(elsewhere / "escaped.html")
    for rel in ("gpus/escaped.html", "gpus/x/escaped.html", "index.html"):
        with pytest.raises(UnsafePath):
            write_file(root, rel, b"x")
    assert list(elsewhere.iterdir()) == []


def test_safe_path_refuses_paths_longer_than_the_system_takes(tmp_path):
    deep = "/".join(["d" * 200] * 21)  # 4 200 bytes
    with pytest.raises(UnsafePath, match="4096"):
        safe_path(tmp_path, deep + "/index.html")


def test_write_file_never_writes_through_what_is_there(tmp_path):
    target = tmp_path / "outside.html"
    target.write_text("mine", encoding="utf-8")
    (tmp_path / "root").mkdir()
    write_file(tmp_path / "root", "index.html", "page")
    with pytest.raises(FileExistsError):
        write_file(tmp_path / "root", "index.html", "again")
    assert (tmp_path / "root" / "index.html").read_text(encoding="utf-8") == "page"
    assert target.read_text(encoding="utf-8") == "mine"


def test_link_verified_reuses_only_identical_regular_files(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    (old / "gpus").mkdir(parents=True)
    new.mkdir()
    (old / "gpus" / "a.html").write_bytes(b"same")
    (old / "gpus" / "b.html").write_bytes(b"damaged")
    (old / "gpus" / "c.html").symlink_to(old / "gpus" / "a.html")
    assert link_verified(old, new, "gpus/a.html", b"same") is True
    assert os.stat(new / "gpus" / "a.html").st_ino == os.stat(old / "gpus" / "a.html").st_ino
    assert link_verified(old, new, "gpus/b.html", b"correct") is False  # same size, other bytes
    assert link_verified(old, new, "gpus/c.html", b"same") is False  # a link is never reused
    assert link_verified(old, new, "../old/gpus/a.html", b"same") is False
    assert sorted(p.name for p in (new / "gpus").iterdir()) == ["a.html"]


# --- every writer goes through it -------------------------------------------------------------


@pytest.fixture
def small_render():
    from pipeline.render.site import Rendered

    return Rendered(
        {
            "index.html": '<!doctype html><html lang="ru"><body><main>ok</main></body></html>',
            "charts/memory.0123456789.svg": "<svg/>",
        },
        {"a.md": "# a\n"},
    )


@pytest.mark.parametrize(
    "kind, bad",
    [
        ("page", "gpus/../../../escaped.html"),
        ("page in a folder", "models/x/../../../../escaped/servers-2.html"),
        ("chart", "charts/../../../escaped.svg"),
        ("CDN file", "{root}/escaped-robots.txt"),
        ("Markdown", "../../escaped.md"),
        ("download", "../../../escaped.csv"),
    ],
)
def test_every_writer_refuses_a_path_out_of_the_staging_folder(tmp_path, catalog, small_render, kind, bad, monkeypatch):
    """Checked before the first byte is written: nothing of the build is left anywhere."""
    bad = bad.format(root=tmp_path)
    site, markdown = dict(small_render.site), dict(small_render.markdown)
    if kind == "Markdown":
        markdown[bad] = "# x\n"
    elif kind == "download":
        files, paths = publish.iter_downloads, publish.download_paths
        monkeypatch.setattr(publish, "download_paths", lambda c: [*paths(c), bad])
        monkeypatch.setattr(publish, "iter_downloads", lambda c, w=None: [*files(c, w), (bad, b"x")])
    else:
        site[bad] = "x"
    out = tmp_path / "output"
    with pytest.raises(UnsafePath):
        publish.stage(out, type(small_render)(site, markdown), catalog)
    assert escaped(tmp_path) == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("rel", ["site/manifest.json", "README.md", "build-state.json", "site/quality.html"])
def test_late_files_refuse_a_planted_link(tmp_path, catalog, small_render, rel):
    """The files written last (manifest, README, build state, the quality page) go through the same
    function: a symbolic link planted in the staging folder is never written through."""
    target = tmp_path / "elsewhere.txt"
    target.write_text("mine", encoding="utf-8")
    out = tmp_path / "output"
    staging = publish.stage(out, small_render, catalog, skip=("quality.html",))
    (staging.folder / rel).symlink_to(target)
    with pytest.raises(UnsafePath):
        staging.swap({"inputs": {}}, {"quality.html": "q"})
    assert target.read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere.txt"]


def test_database_writer_refuses_a_planted_link(tmp_path, catalog, small_render, monkeypatch):
    target = tmp_path / "elsewhere.duckdb"
    target.write_bytes(b"mine")
    write_database = publish.write_database

    def planted(path, catalog, connected=None):
        Path(path).symlink_to(target)
        return write_database(path, catalog, connected=connected)

    monkeypatch.setattr(publish, "write_database", planted)
    with pytest.raises(FileExistsError):
        publish.stage(tmp_path / "output", small_render, catalog)
    assert target.read_bytes() == b"mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere.duckdb"]


def test_write_downloads_writes_through_the_same_function(tmp_path, catalog, monkeypatch):
    from pipeline.publish import downloads, paths

    seen = []
    real = paths.write_file
    monkeypatch.setattr(paths, "write_file", lambda root, rel, data: seen.append(rel) or real(root, rel, data))
    downloads.write_downloads(tmp_path / "data", catalog)
    assert sorted(seen + [downloads.DATABASE]) == sorted(downloads.download_paths(catalog))
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == sorted(downloads.download_paths(catalog))


# --- ids are checked before anything is written ---------------------------------------------


def add_gpu(sources: Path, gpu_id: str) -> None:
    with (sources / "gpus.csv").open("a", encoding="utf-8") as f:
        f.write(f"{gpu_id},AMD Instinct MI355X,MI355X,AMD,288,8000,2500,5000,,infinity-fabric,1075,oam,,amd-mi325x\n")


def test_path_id_problems_names_every_unsafe_id(tmp_path, sources):
    from pipeline.build import path_id_problems
    from pipeline.load import read_sources

    for gpu_id in ("../../escaped", "/tmp/escaped", "Upper", "a" * 201):
        add_gpu(sources, gpu_id)
    frames, _, _ = read_sources(sources)
    found = [(p.line, p.column, p.value, p.rule) for p in path_id_problems(frames, sources)]
    rule = "в id — строчные латинские буквы и цифры, через «-» или «_»"
    assert found == [
        (17, "gpu_id", "../../escaped", rule),
        (18, "gpu_id", "/tmp/escaped", rule),
        (19, "gpu_id", "Upper", rule),
        (20, "gpu_id", "a" * 201, "слишком длинное значение: можно не больше 200 знаков"),
    ]


def test_traversal_ids_write_nothing_anywhere(tmp_path, sources, built):
    """An id climbing out of the staging folder, to anywhere or over a page of the live output,
    while the suites still run in their child: refused, and not one file is written."""
    out = tmp_path / "output"
    shutil.copytree(built, out)
    before = tree(out)
    add_gpu(sources, "../" * 20 + str(tmp_path).strip("/") + "/escaped")
    add_gpu(sources, "../../../output/site/index")
    failed = run("build", "--sources", str(sources), "--out", str(out))
    assert failed.returncode == 2, failed.stderr
    assert "Traceback" not in failed.stderr
    assert failed.stderr.count("в id — строчные латинские буквы и цифры, через «-» или «_»") == 2
    assert tree(out) == before
    assert escaped(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".output.lock", "output", "sources"]


def forge_validated(sources: Path, out: Path) -> None:
    """A build state that says these sources were validated already (so no suite runs)."""
    from pipeline import fingerprint

    out.mkdir()
    state = {
        "generator": outdir.GENERATOR,
        "inputs": fingerprint.inputs(sources, "/"),
        "validation": {"warnings": [], "checks": [], "build_date": "2026-12-03"},
    }
    (out / "build-state.json").write_text(json.dumps(state), encoding="utf-8")


def test_ids_are_checked_even_when_validation_is_reused(tmp_path, sources, monkeypatch):
    from pipeline.build import build
    from pipeline.problems import DataError

    add_gpu(sources, "../../escaped")
    out = tmp_path / "output"
    forge_validated(sources, out)
    monkeypatch.setattr(publish, "stage", lambda *a, **k: pytest.fail("nothing may be written"))
    with pytest.raises(DataError) as refused:
        build(sources, out)
    assert [(p.line, p.value) for p in refused.value.problems] == [(17, "../../escaped")]
    assert escaped(tmp_path) == []


def test_serve_rebuild_refuses_traversal_ids(tmp_path, sources):
    from pipeline.tools.serve import EditorLoop

    add_gpu(sources, "../../escaped")
    out = tmp_path / "output"
    forge_validated(sources, out)
    loop = EditorLoop(sources, out, port=0, quiet=True)
    try:
        assert loop.rebuild() is False
    finally:
        loop.server.server_close()
    assert 'gpu_id = "../../escaped": в id — строчные латинские буквы и цифры' in loop.report
    assert escaped(tmp_path) == []


# --- --out: only a folder the build owns -----------------------------------------------------


def fake_clone(tmp_path: Path) -> Path:
    clone = tmp_path / "clone"
    for name in ("pipeline", "site_templates", "sources"):
        shutil.copytree(ROOT / name, clone / name, ignore=shutil.ignore_patterns("__pycache__"))
    (clone / ".git").mkdir()
    (clone / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (clone / "README.md").write_text("the project\n", encoding="utf-8")
    return clone


def test_out_dot_in_a_clone_is_refused(tmp_path):
    clone = fake_clone(tmp_path)
    before = tree(clone)
    refused = run("build", "--out", ".", cwd=clone)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith("Отказ: --out . — это папка с исходными таблицами или папка над ней")
    assert tree(clone) == before


@pytest.mark.parametrize(
    "which", ["sources", "site_templates", "repository", "inside sources", "inside the code", "parent of cwd"]
)
def test_out_over_the_project_is_refused(tmp_path, sources, which):
    out = {
        "sources": sources,
        "site_templates": ROOT / "site_templates",
        "repository": ROOT,
        "inside sources": sources / "out",
        "inside the code": ROOT / "pipeline" / "out",
        "parent of cwd": ROOT.parent,
    }[which]
    before = tree(sources)
    refused = run_here("build", "--sources", str(sources), "--out", str(out))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    inside = "находится внутри другой папки проекта — "
    shown = {"inside sources": inside, "inside the code": inside}.get(which, "— это ")
    assert refused.stderr.startswith(f"Отказ: --out {out} {shown}")
    assert tree(sources) == before and not (sources / "out").exists() and not (ROOT / "pipeline" / "out").exists()


@pytest.mark.parametrize("what", ["home", "user files", "foreign state", "a file"])
def test_out_over_a_folder_the_build_does_not_own_is_refused(tmp_path, what):
    out = tmp_path / "target"
    if what == "a file":
        out.write_text("notes", encoding="utf-8")
    else:
        out.mkdir()
        files = {
            "home": {".bashrc": "export X=1\n", "notes.txt": "mine"},
            "user files": {"report.docx": "mine", "site/index.html": "my own site"},
            "foreign state": {"build-state.json": '{"inputs": {"other": 1}}'},
        }[what]
        for rel, text in files.items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_text(text, encoding="utf-8")
    before = tree(tmp_path)
    refused = run_here("build", "--out", str(out), env={"HOME": str(out)} if what == "home" else None)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    reason = " — файл, а не папка" if what == "a file" else ": папка не пуста и создана не сборкой"
    assert refused.stderr.count("\n") == 1 and refused.stderr.startswith(f"Отказ: --out {out}{reason}")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("below", ["out", "a/b/out"])
def test_out_below_a_file_is_refused(tmp_path, below):
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    out = tmp_path / "notes.txt" / below
    refused = run_here("build", "--out", str(out))
    assert (refused.returncode, refused.stderr) == (
        2,
        f"Отказ: --out {out}: {tmp_path / 'notes.txt'} — файл, а не папка, поэтому внутри ничего нельзя создать; "
        "выберите другую папку через --out.\n",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_serve_refuses_a_folder_it_does_not_own(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    refused = run_here("serve", "--out", str(out), "--port", "0")
    assert refused.returncode == 2 and refused.stderr.startswith(f"Отказ: --out {out}: папка не пуста")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_folders_a_build_may_replace(tmp_path):
    absent, empty, placeholder, earlier, legacy = (tmp_path / n for n in ("a", "e", "p", "b", "l"))
    empty.mkdir()
    placeholder.mkdir()
    shutil.copy(ROOT / "site_templates" / "output-README.md", placeholder / "README.md")  # a fresh clone's output/
    earlier.mkdir()
    (earlier / "build-state.json").write_text(json.dumps({"generator": outdir.GENERATOR}), encoding="utf-8")
    legacy.mkdir()  # made by a version without the marker
    keys = ("sources", "templates", "code", "base_url", "build_date")
    (legacy / "build-state.json").write_text(json.dumps({"inputs": dict.fromkeys(keys, "x")}), encoding="utf-8")
    for folder in (absent, empty, placeholder, earlier, legacy):
        assert outdir.check_output(folder) == folder
    (placeholder / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(outdir.OutputRefused):
        outdir.check_output(placeholder)


def test_out_that_is_a_loop_of_links_is_refused(tmp_path):
    (tmp_path / "out").symlink_to("out")  # a link to itself
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")  # two links to each other
    for out in (tmp_path / "out", tmp_path / "a", tmp_path / "a" / "site"):
        with pytest.raises(outdir.OutputRefused, match="ведёт сама на себя"):
            outdir.check_output(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "out"]


# --- environment failures: one line, exit 3, the old output intact ---------------------------


@pytest.fixture
def previous(tmp_path, built):
    """A copy of a build; the tests build the same sources with another base URL over it (the
    validation is reused, so each build takes seconds)."""
    out = tmp_path / "output"
    shutil.copytree(built, out)
    return out, tree(out)


def assert_environment_failure(result, out: Path, before: dict, words: str) -> None:
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Ошибка окружения: {words}") and last.endswith(f"; папка {out} не изменена."), last
    assert tree(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == [".output.lock", "output"]


def test_read_only_parent_fails_before_any_work(previous):
    out, before = previous
    faults = {"fail_open": {"under": str(out.parent), "errno": errno.EROFS}}
    result = run("build", "--out", str(out), "--base-url", "/b/", faults=faults)
    assert result.returncode == 3 and "запуск:" not in result.stderr  # before the libraries are even loaded
    message = result.stderr.strip()
    assert message.startswith(
        f"Ошибка окружения: файловая система доступна только для чтения ({out.parent}/.output.probe-"
    )
    assert message.endswith(
        f"): подключите её с правом записи или выберите другую папку через --out; папка {out} не изменена."
    )
    assert tree(out) == before and sorted(p.name for p in out.parent.iterdir()) == ["output"]


def test_disk_full_while_writing(previous):
    out, before = previous
    result = run(
        "build",
        "--out",
        str(out),
        "--base-url",
        "/b/",
        faults={"fail_write": {"after_bytes": 1_000_000, "errno": errno.ENOSPC}},
    )
    assert_environment_failure(result, out, before, "диск заполнен (")


def test_disk_full_in_the_database(previous):
    out, before = previous
    result = run("build", "--out", str(out), "--base-url", "/b/", faults={"duckdb_full": True})
    assert_environment_failure(result, out, before, "диск заполнен (")
    assert "gpu-finetune.duckdb" in result.stderr


def test_missing_permission_in_the_staging_folder(previous):
    out, before = previous
    result = run(
        "build",
        "--out",
        str(out),
        "--base-url",
        "/b/",
        faults={"fail_open": {"under": str(out.parent), "errno": errno.EACCES, "deeper": True}},
    )
    assert_environment_failure(result, out, before, "нет прав на запись (")


def test_output_that_cannot_be_renamed(previous):
    out, before = previous
    result = run("build", "--out", str(out), "--base-url", "/b/", faults={"fail_rename": {"errno": errno.EPERM}})
    assert_environment_failure(result, out, before, "нет прав на запись (")


def test_a_really_full_disk(tmp_path, built):
    """The same on a real full file system (a small tmpfs, where this machine lets root mount one)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"no tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        out = disk / "output"
        shutil.copytree(built, out)
        before = tree(out)
        with open(disk / "filler", "wb") as f:
            f.write(b"\0" * (shutil.disk_usage(disk).free - 2_000_000))  # 2 MB left
        result = run("build", "--out", str(out), "--base-url", "/b/")
        assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
        last = result.stderr.strip().splitlines()[-1]
        # The failed write names the file when the OS does, else the output folder the build was for.
        assert last.startswith(f"Ошибка окружения: диск заполнен ({disk}/"), last
        assert last.endswith(f"; папка {out} не изменена."), last
        assert tree(out) == before
        assert sorted(p.name for p in disk.iterdir()) == [".output.lock", "filler", "output"]
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_under_polars_names_the_file_and_says_the_disk_is_full(tmp_path):
    """polars (Rust) raises OSError("No space left on device (os error 28)") with no errno and no file:
    a 10^6-row build on a full disk said so in English, of the output folder. A large download is
    written by polars into its file by path (downloads.Streamed); here into /dev/full, which is always full."""
    import polars as pl

    from pipeline.__main__ import environment_message
    from pipeline.publish.downloads import Streamed

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    frame = pl.DataFrame({"a": list(range(100_000))})
    root = tmp_path / "staging"
    with pytest.raises(OSError) as raised:
        publish.write_tree(root, {"site/data/big.csv": Streamed(lambda _target: frame.write_csv("/dev/full"))}, None)
    assert raised.value.args == (errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert raised.value.filename == str(root / "site" / "data" / "big.csv")
    assert environment_message(raised.value, tmp_path / "out") == (
        f"Ошибка окружения: диск заполнен ({root}/site/data/big.csv): освободите место (или выберите другую "
        f"папку через --out) и запустите сборку снова; ничего не записано, папки {tmp_path / 'out'} по-прежнему нет."
    )
    # Any other OSError of a Rust library without an errno: the code read from its text; none there, as it was.
    assert environment_message(OSError("Permission denied (os error 13)"), None).startswith(
        "Ошибка окружения: нет прав на запись: "
    )
    assert environment_message(OSError("something odd"), None) == (
        "Ошибка окружения: something odd: устраните причину и запустите сборку снова."
    )


def chattr_works(path: Path) -> bool:
    try:
        return subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0
    except OSError:
        return False


@pytest.mark.parametrize("which", ["output", "its parent"])
def test_immutable_folder_fails_before_any_work(previous, which):
    out, before = previous
    folder = out if which == "output" else out.parent
    if not chattr_works(folder):
        pytest.skip("chattr +i is not available here (no CAP_LINUX_IMMUTABLE or no such flag on this file system)")
    try:
        result = run("build", "--out", str(out), "--base-url", "/b/")
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    assert result.returncode == 3 and "запуск:" not in result.stderr
    assert result.stderr.strip() == (
        "Ошибка окружения: папка защищена от изменений (флаг immutable или append-only; снимается командой "
        f"chattr -i / -a) ({folder}): проверьте владельца, права и флаги папки (ls -ld, lsattr; chattr -i) или "
        f"выберите другую папку через --out; папка {out} не изменена."
    )
    assert tree(out) == before


def test_exit_codes_are_documented():
    helped = run("build", "--help")
    assert helped.returncode == 0
    for line in ("0  built", "1  an internal error", "2  invalid sources", "3  an environment problem"):
        assert line in helped.stdout
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "`3` an environment problem" in readme
