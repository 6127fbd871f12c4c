"""Validation outcomes remembered on disk (pipeline.validation_cache), the light no-change paths and
the large-sheet XLSX mode."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import openpyxl
import pytest

from conftest import ROOT, edit_csv
from pipeline import parallel as workers
from pipeline import validate, validation_cache
from pipeline.build import build, load_and_validate
from pipeline.problems import DataError
from pipeline.schema import SOURCE_TABLES

TABLES = {t.name for t in SOURCE_TABLES}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """An empty user cache folder of this test, and a process that has validated nothing yet."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("GPU_FINETUNE_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def suites(monkeypatch) -> list[tuple[str, str]]:
    """Every GX suite run in this process, as (table, raw|typed); one process, so that all are seen."""
    ran = []
    real = validate._run_suite

    def counted(job):
        ran.append((job[0].name, job[1]))
        return real(job)

    monkeypatch.setattr(workers, "WORKERS", 1)
    monkeypatch.setattr(validate, "_run_suite", counted)
    return ran


def entries(folder: Path, namespace: str) -> list[Path]:
    return sorted((folder / namespace).glob("*.bin"))


def test_a_new_process_validates_only_the_table_that_changed(cache_dir, sources, suites, monkeypatch):
    first = load_and_validate(sources)[1]
    tables = {t for t, _ in suites}
    assert tables == TABLES and len(suites) == 2 * len(TABLES)
    assert len(entries(cache_dir, "validation-table")) == len(TABLES)
    assert len(entries(cache_dir, "validation-all")) == 1

    suites.clear()
    edit_csv(sources / "servers.csv", ",585000,", ",585001,")
    second = load_and_validate(sources)[1]
    assert suites == [("servers", "raw"), ("servers", "typed")]
    assert [(c.table, c.rule, c.failures) for c in second.checks] == [
        (c.table, c.rule, c.failures) for c in first.checks
    ]

    suites.clear()
    again = load_and_validate(sources)[1]  # the whole validation is remembered: no rule runs
    assert suites == []
    assert again.checks == second.checks and again.warnings == second.warnings


def test_unchanged_sources_in_a_new_process_run_no_rule(cache_dir, sources, monkeypatch):
    before = load_and_validate(sources)[1]

    def refuse(*args, **kwargs):
        raise AssertionError("validation ran again")

    monkeypatch.setattr(validate, "start_validation", refuse)
    con, after = load_and_validate(sources)
    assert after.checks == before.checks and after.warnings == before.warnings
    assert (
        con.execute("SELECT count(*) FROM servers").fetchone()[0]
        == (sources / "servers.csv").read_text(encoding="utf-8-sig").count("\n") - 1
    )


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign", "garbage"])
def test_a_damaged_or_foreign_entry_is_ignored(cache_dir, sources, suites, monkeypatch, damage):
    before = load_and_validate(sources)[1]
    files = entries(cache_dir, "validation-table") + entries(cache_dir, "validation-all")
    for i, path in enumerate(files):
        data = path.read_bytes()
        if damage == "truncate":
            path.write_bytes(data[: len(data) // 2])
        elif damage == "flip":
            path.write_bytes(data[:-20] + bytes([data[-20] ^ 1]) + data[-19:])
        elif damage == "foreign":  # another entry's valid bytes under this name
            path.write_bytes(files[(i + 1) % len(files)].read_bytes())
        else:
            path.write_bytes(b'{"format": "gpu-finetune-cache/1"}\n{}')
    suites.clear()
    after = load_and_validate(sources)[1]
    assert len(suites) == 2 * len(TABLES)  # every table validated again
    assert after.checks == before.checks and after.warnings == before.warnings


def test_a_well_formed_entry_with_other_key_parts_is_not_trusted(cache_dir, sources, suites, monkeypatch):
    load_and_validate(sources)
    # A re-signed entry whose payload names other key parts (made for other content): ignored.
    from pipeline import cache

    store = cache.Cache()
    path = entries(cache_dir, "validation-all")[0]
    key = path.stem
    data = json.loads(store.get("validation-all", key))
    data["parts"][2] = "/elsewhere"
    store.put("validation-all", key, json.dumps(data).encode())
    assert validation_cache.remembered(sources) is None


def test_a_copy_of_the_sources_elsewhere_reuses_what_was_validated(cache_dir, sources, tmp_path, suites):
    """The keys are the content, not the folder: a copy runs no rule, and its reports name its own files;
    an edit in the copy runs only the edited table's suites."""
    first = load_and_validate(sources)[1]
    copy = tmp_path / "elsewhere" / "sources"
    shutil.copytree(sources, copy)
    suites.clear()
    again = load_and_validate(copy)[1]
    assert suites == [] and again.checks == first.checks
    assert [w.file for w in again.warnings] == [w.file.replace(str(sources), str(copy)) for w in first.warnings]
    assert any(w.file == f"{copy}/servers.csv" for w in again.warnings)
    edit_csv(copy / "gpus.csv", "H100 PCIe,NVIDIA,80,", "H100 PCIe,NVIDIA,eighty,")
    with pytest.raises(DataError) as refused:
        load_and_validate(copy)
    assert suites == [("gpus", "raw"), ("gpus", "typed")]
    assert any(p.file == f"{copy}/gpus.csv" and p.value == "eighty" for p in refused.value.problems)


def save_while_validating(monkeypatch, module, name: str, path: Path, old: str, new: str) -> None:
    """Replace `module.name` (the validation a command starts once it has read the files) by one that
    first saves an edit of `path`: the deterministic form of an editor saving while it validates."""
    real = getattr(module, name)

    def saving(*args, **kwargs):
        edit_csv(path, old, new)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, saving)


def test_a_file_saved_while_check_validates_is_validated_next_time(cache_dir, sources, monkeypatch):
    """What is remembered is the hash of the bytes validated: a save during validation is not taken as valid."""
    from pipeline.build import check

    save_while_validating(monkeypatch, validate, "validate", sources / "servers.csv", ",h200-sxm,8,", ",h300,8,")
    check(sources, lambda warnings: None)  # validated the bytes read before the save: they pass
    monkeypatch.undo()
    assert validation_cache.remembered_summary(sources) is None
    assert not validation_cache.articles_passed(sources)
    with pytest.raises(DataError) as second:
        check(sources, lambda warnings: None)
    assert any(p.column == "gpu_id" and p.value == "h300" for p in second.value.problems)


def test_a_file_saved_while_build_validates_is_not_published_by_the_next_build(
    cache_dir, sources, tmp_path, monkeypatch
):
    save_while_validating(
        monkeypatch, validate, "start_validation", sources / "servers.csv", ",h200-sxm,8,", ",h300,8,"
    )
    out = tmp_path / "out"
    build(sources, out)
    monkeypatch.undo()
    published = (out / "site" / "data" / "servers.csv").read_text(encoding="utf-8")
    assert "h300" not in published  # the bytes validated are the bytes published
    with pytest.raises(DataError) as second:
        build(sources, out)
    assert any(p.column == "gpu_id" and p.value == "h300" for p in second.value.problems)
    assert (out / "site" / "data" / "servers.csv").read_text(encoding="utf-8") == published


def test_failures_are_remembered_per_table_and_reported_the_same(cache_dir, sources, suites, monkeypatch):
    edit_csv(sources / "gpus.csv", "H100 PCIe,NVIDIA,80,", "H100 PCIe,NVIDIA,eighty,")
    with pytest.raises(DataError) as first:
        load_and_validate(sources)
    assert entries(cache_dir, "validation-all") == []  # a failed validation is never stored whole
    suites.clear()
    with pytest.raises(DataError) as second:
        load_and_validate(sources)
    assert suites == []
    assert [str(p) for p in second.value.problems] == [str(p) for p in first.value.problems]
    assert any("memory_gb" in str(p) and "eighty" in str(p) for p in second.value.problems)


def test_the_suites_definition_is_part_of_the_key(cache_dir, sources, suites, monkeypatch):
    import dataclasses

    from pipeline import schema

    load_and_validate(sources)
    for path in entries(cache_dir, "validation-all"):
        path.unlink()  # (the whole validation's key holds the package's code, and so the registry)
    suites.clear()
    gpus = schema.TABLES_BY_NAME["gpus"]
    monkeypatch.setitem(schema.TABLES_BY_NAME, "gpus", dataclasses.replace(gpus, min_rows=gpus.min_rows + 1))
    load_and_validate(sources)
    assert suites == [("gpus", "raw"), ("gpus", "typed")]


def test_a_forced_build_reads_no_outcome_but_stores_them(cache_dir, sources, tmp_path, suites, monkeypatch):
    """`build --force` asks the cache for no outcome (neither a table's nor the whole folder's) and runs
    every suite; what it validated is stored, so that a build of the same sources to another --out runs
    none and writes the same files."""
    read, real_read = [], validation_cache._read
    monkeypatch.setattr(
        validation_cache, "_read", lambda namespace, *rest: read.append(namespace) or real_read(namespace, *rest)
    )
    assert not validation_cache.articles_passed(sources)
    build(sources, tmp_path / "one", force=True)
    outcomes = {validation_cache.TABLE_NAMESPACE, validation_cache.WHOLE_NAMESPACE}
    assert not outcomes & set(read) and len(suites) == 2 * len(TABLES)  # raw and typed, every table
    assert validation_cache.articles_passed(sources)  # a check of these bytes renders no article again
    suites.clear()
    build(sources, tmp_path / "two")  # another --out of the same sources: remembered
    assert suites == [] and validation_cache.WHOLE_NAMESPACE in read
    for name in ("site/quality.html", "site/data.html", "build-state.json", "site/manifest.json"):
        assert (tmp_path / "two" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()


def test_switched_off_it_validates_every_time(cache_dir, sources, suites, monkeypatch):
    monkeypatch.setenv("GPU_FINETUNE_VALIDATION_CACHE", "off")
    load_and_validate(sources)
    ran = len(suites)
    load_and_validate(sources)
    assert len(suites) == 2 * ran and not cache_dir.exists()


def test_a_warm_process_keeps_outcomes_in_its_own_warm_only(cache_dir, sources, suites, monkeypatch):
    """With the disk cache off, what a build keeps lives in the Warm it was given (serve's): a second
    validation with the same Warm runs no suite, one with a new Warm (a cold call) runs them all, and
    after an edit only the edited table's suites run and only this build's outcomes are kept."""
    from pipeline.warm import Warm

    monkeypatch.setenv("GPU_FINETUNE_VALIDATION_CACHE", "off")
    from pipeline.load import connect, read_sources

    def validated(warm):
        con = connect(read_sources(sources)[0])
        return validate.validate(con, sources, sorted(TABLES), warm)

    warm = Warm()
    first = validated(warm)
    ran = len(suites)
    assert ran == 2 * len(TABLES) and len(warm.outcomes) == len(TABLES)
    suites.clear()
    assert validated(warm).to_dict() == first.to_dict() and suites == []
    validated(Warm())
    assert len(suites) == ran
    suites.clear()
    prices = sources / "servers.csv"
    prices.write_text(prices.read_text(encoding="utf-8").replace("585000", "585001", 1), encoding="utf-8")
    validated(warm)
    assert suites == [("servers", "raw"), ("servers", "typed")]
    assert len(warm.outcomes) == len(TABLES)  # the old servers outcome is gone


def run(*args, env=None, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pipeline", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def imported(stderr: str) -> set[str]:
    return {line.split("|")[-1].strip().split(".")[0] for line in stderr.splitlines() if line.startswith("import time")}


def test_check_and_build_without_change_import_no_heavy_library(cache_dir, sources, tmp_path):
    env = {"GPU_FINETUNE_CACHE_DIR": str(cache_dir)}
    first = run("check", "--sources", str(sources), env=env)
    assert first.returncode == 0, first.stderr
    again = run("check", "--sources", str(sources), env=env)
    assert again.returncode == 0
    assert again.stdout == first.stdout  # the same summary line: "…: все проверки пройдены (N)."
    assert again.stdout.startswith(f"{sources}: все проверки пройдены (")
    heavy = {"polars", "duckdb", "great_expectations", "pandas", "jinja2"}
    assert not imported(again.stderr) & heavy
    assert "great_expectations" in imported(first.stderr)

    out = tmp_path / "out"
    built = run("build", "--sources", str(sources), "--out", str(out), "--quiet", env=env)
    assert built.returncode == 0, built.stderr
    assert "great_expectations" not in imported(built.stderr)  # the check validated these sources
    unchanged = run("build", "--sources", str(sources), "--out", str(out), env=env)
    assert unchanged.stdout.startswith(f"С прошлой сборки {out} ничего не изменилось; ")
    assert not imported(unchanged.stderr) & heavy


@pytest.mark.parametrize("workers, after", [("1", {"1"}), ("2", {"0", "1"})])
def test_a_build_makes_gx_at_most_once_and_only_where_a_suite_runs(cache_dir, sources, workers, after):
    """A plain build leaves GX to the process that runs a suite: none is made in the build process
    while validation starts (the child, forked then, makes its own). With one worker the build
    process runs every suite, so it makes GX once, when it waits for them; with two it makes it (once)
    only if it takes a suite the child has not begun."""
    probe = """
import os, pathlib, sys
import pipeline.validate as v
from pipeline import validation_cache
from pipeline.build import start_loading
made, real = [], v._gx_context
def counted(warm):
    if warm.gx is None:
        made.append(os.getpid())
    return real(warm)
v._gx_context = counted
with validation_cache.fresh():  # every suite runs, as in a build of sources no process validated
    _, _, pending = start_loading(pathlib.Path(sys.argv[1]))
    started = made.count(os.getpid())
    pending()
print(started, made.count(os.getpid()))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe, str(sources)],
        cwd=ROOT,
        env={**os.environ, "GPU_FINETUNE_CACHE_DIR": str(cache_dir), "PIPELINE_WORKERS": workers},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    started, finished = done.stdout.split()
    assert started == "0" and finished in after


def test_the_estimate_stub_has_the_real_help():
    import argparse

    from pipeline import __main__ as cli
    from pipeline.tools import estimate_cli as estimate_command

    parser = argparse.ArgumentParser()
    estimate_command.add_parser(parser.add_subparsers())
    real = parser._subparsers._group_actions[0]._choices_actions[0].help
    assert cli.ESTIMATE_HELP == real


def test_workbooks_use_constant_memory_and_read_back_the_tables(tmp_path, catalog):
    """Every sheet is written in constant_memory mode by the row writer (strings inline, whatever the
    table's size); the bytes are reproducible, and each sheet reads back as its table's rows."""
    import datetime as dt
    import zipfile

    from pipeline.publish import downloads
    from pipeline.schema import TABLES_BY_NAME

    first, again = tmp_path / "first", tmp_path / "again"
    downloads.write_downloads(first, catalog)
    downloads.write_downloads(again, catalog)
    for name in ("server_fit", "gpu_fit", "gpus", "references"):
        book = f"{name}.xlsx"
        assert (first / book).read_bytes() == (again / book).read_bytes()  # reproducible
        with zipfile.ZipFile(first / book) as z:
            assert "xl/sharedStrings.xml" not in z.namelist()
            assert 't="inlineStr"' in z.read("xl/worksheets/sheet1.xml").decode()
        table = TABLES_BY_NAME[name]
        sheet = openpyxl.load_workbook(first / book)[name]
        got = list(sheet.iter_rows(values_only=True))
        assert list(got[0]) == [f.label_ru or f.name for f in table.fields]
        expected = catalog[name].select(table.columns).rows()
        assert len(got) - 1 == len(expected) > 0
        for read, row in zip(got[1:], expected, strict=True):
            # openpyxl gives a date cell as a datetime at midnight; a number keeps 16 significant
            # digits, as XlsxWriter writes it (and Excel keeps 15)
            assert [v.date() if isinstance(v, dt.datetime) else v for v in read] == [
                float(f"{v:.16G}") if type(v) is float else v for v in row
            ]
