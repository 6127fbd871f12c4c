"""The build end to end: the output contract, failure safety and data-driven results."""

import contextlib
import hashlib
import io
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

from conftest import ROOT, edit_csv
from pipeline.__main__ import main
from pipeline.build import load_and_validate
from pipeline.combine import combine
from pipeline.schema import ALL_TABLES, DERIVED_TABLES, SOURCE_TABLES


def run_build(*args: str) -> subprocess.CompletedProcess:
    """The command line in a process of its own (exit codes and what is printed are what is tested)."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "build", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def run_here(*args: str) -> tuple[int, str, str]:
    """The command line in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def derived(sources: Path):
    """The derived tables of `sources` (validated, combined), in this process: what a build publishes."""
    return combine(load_and_validate(sources)[0])


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_output_contract(built):
    site = built / "site"
    for page in ("index.html", "finetune-memory.html", "gpu-count.html", "data.html", "sources.html"):
        assert (site / page).is_file(), page
    assert sorted(p.name for p in (built / "markdown").iterdir()) == [
        "finetune-memory.md",
        "gpu-count.md",
        "method-comparison.md",
    ]
    assert (site / "data" / "gpu-finetune.duckdb").is_file()
    for table in ALL_TABLES:
        header = (site / "data" / f"{table.name}.csv").read_text(encoding="utf-8-sig").splitlines()[0]
        assert header.split(",") == table.columns
    required = {
        "estimates": ["model_id", "params_b", "method_id", "memory_gb", "memory_low_gb", "memory_high_gb"],
        "gpu_fit": ["model_id", "method_id", "gpu_id", "gpu_memory_gb", "cards", "cards_high"],
        "server_fit": ["model_id", "method_id", "server_id", "server_memory_gb", "fit", "price_rub_month"],
    }
    for name, columns in required.items():
        table = next(t for t in DERIVED_TABLES if t.name == name)
        assert set(columns) <= set(table.columns)


def test_csv_downloads_load_back_with_declared_types(built, catalog):
    data = built / "site" / "data"
    con = duckdb.connect()
    for table in ALL_TABLES:
        path = data / f"{table.name}.csv"
        frame = pl.read_csv(path, schema=table.polars_schema)
        assert frame.columns == table.columns
        assert frame.equals(catalog[table.name].select(table.columns)), table.name
        rel = con.read_csv(str(path))
        assert rel.columns == table.columns
        assert con.execute(f"SELECT count(*) FROM read_csv('{path}')").fetchone()[0] == catalog[table.name].height


def test_duckdb_download_has_every_table(built, catalog):
    con = duckdb.connect(str(built / "site" / "data" / "gpu-finetune.duckdb"), read_only=True)
    for table in ALL_TABLES:
        assert con.execute(f'SELECT count(*) FROM "{table.name}"').fetchone()[0] == catalog[table.name].height
    assert con.execute(
        "SELECT fit FROM server_fit WHERE model_id='generic-32b' AND method_id='full_amp' AND server_id='rtx-pro-6000-8x'"
    ).fetchall() == [("estimate_only",)]


def test_cli_build_and_invalid_source_leaves_output_untouched(tmp_path, sources):
    out = tmp_path / "output"
    ok = run_build("--sources", str(sources), "--out", str(out))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"Собрано: {out}/site (страниц: ") and "server_fit 2700" in ok.stdout
    # The sources lie outside the working directory: the site names their files within the
    # sources folder, never by a path of the build machine.
    quality = (out / "site" / "quality.html").read_text(encoding="utf-8")
    shown = "<li><code>servers.csv</code> — price_rub_month: нет цены; на сайте будет «по запросу» (строки 7, 8, 9, 10, 11; всего 5)</li>"
    assert shown in quality and "sources/servers.csv" not in quality
    leaked = [str(p) for p in out.rglob("*") if p.is_file() and str(tmp_path).encode() in p.read_bytes()]
    assert leaked == []
    assert f"{sources}/servers.csv: price_rub_month" in ok.stderr and "(строки 7, 8, 9, 10, 11; всего 5)" in ok.stderr
    before = snapshot(out)
    edit_csv(sources / "servers.csv", ",h200-sxm,8,nvswitch,", ",h300,8,nvswitch,")
    failed = run_build("--sources", str(sources), "--out", str(out))
    assert failed.returncode == 2
    assert (
        f'{sources}/servers.csv:9: gpu_id = "h300": в таблице «Видеокарты» ({sources}/gpus.csv) нет строки с таким id'
        in failed.stderr
    )
    assert "Traceback" not in failed.stderr
    assert snapshot(out) == before
    # No staging folder left behind; the lock file beside the output stays (it is never removed).
    assert sorted(p.name for p in tmp_path.iterdir()) == [".output.lock", "output", "sources"]


def test_check_command(sources):
    code, stdout, _ = run_here("check", "--sources", str(sources))
    assert code == 0 and re.fullmatch(rf"{sources}: все проверки пройдены \(\d+\)\.\n", stdout)
    edit_csv(sources / "gpus.csv", ",NVIDIA,141,", ",NVIDIA,-141,")
    bad = subprocess.run(
        [sys.executable, "-m", "pipeline", "check", "--sources", str(sources)], cwd=ROOT, capture_output=True, text=True
    )
    assert bad.returncode == 2 and 'memory_gb = "-141": допустимо от 1 до 2000 ГБ' in bad.stderr


def test_new_anchor_column_changes_results_without_code(tmp_path, sources):
    # LLaMA-Factory's 110B column (commit 937f49ec3).
    extra = {"full_amp": 2000, "full_bf16": 900, "lora": 240, "qlora_8bit": 140, "qlora_4bit": 72, "qlora_2bit": 48}
    with (sources / "memory_anchors.csv").open("a", encoding="utf-8") as f:
        f.writelines(f"{m},110,{gb},llama-factory-hw\n" for m, gb in extra.items())
    est = {(r["model_id"], r["method_id"]): r for r in derived(sources)["estimates"].iter_rows(named=True)}
    # Mixtral 8x22B (141 B) was 160 x 141 / 70 = 322.3 GB by proportion; now 240 x 141 / 110.
    assert float(est[("mixtral-8x22b", "lora")]["memory_gb"]) == 240 * 141 / 110
    # Qwen2.5 72B now interpolates between 70 and 110.
    assert float(est[("qwen2-5-72b", "lora")]["memory_gb"]) == 160 + (240 - 160) * (72.7 - 70) / 40
    assert est[("qwen2-5-72b", "lora")]["basis"] == "interpolated"
    assert est[("generic-70b", "lora")]["memory_gb"] == 160.0


def test_new_gpu_row_appears_in_results(tmp_path, sources):
    with (sources / "gpus.csv").open("a", encoding="utf-8") as f:
        f.write("mi355x,AMD Instinct MI355X,MI355X,AMD,288,8000,2500,5000,,infinity-fabric,1075,oam,,amd-mi325x\n")
    catalog = derived(sources)
    fit = [r for r in catalog["gpu_fit"].iter_rows(named=True) if r["gpu_id"] == "mi355x"]
    assert len(fit) == catalog["models"].height * 6
    seventy = {r["method_id"]: (r["cards"], r["cards_high"]) for r in fit if r["model_id"] == "generic-70b"}
    assert seventy["full_amp"] == (5, 7) and seventy["lora"] == (1, 1)


def test_source_tables_are_all_published(built):
    names = {p.stem for p in (built / "site" / "data").glob("*.csv")}
    tables = {t.name for t in SOURCE_TABLES} | {t.name for t in DERIVED_TABLES}
    assert names == tables | {"changelog"}  # and the releases' changelog (pipeline/publish/releases.py)


def test_template_ids_missing_from_the_catalog_stop_the_build_without_a_traceback(tmp_path, sources):
    # An editor deletes a model that an article and the comparison page use.
    path = sources / "models.csv"
    path.write_text(
        "".join(
            line for line in path.read_text(encoding="utf-8").splitlines(True) if not line.startswith("generic-32b,")
        ),
        encoding="utf-8",
    )
    out = tmp_path / "output"
    code, _, stderr = run_here("build", "--sources", str(sources), "--out", str(out))
    assert code == 2 and "Traceback" not in stderr
    assert 'site_templates/site.toml: compare_tasks = "generic-32b": такой модели нет в models.csv' in stderr
    assert not out.exists()


def test_pages_are_shown_ahead_only_once_the_suites_have_passed():
    """build.show_ahead (serve's fast path): the pages are rendered while the suites run, and shown
    only after they pass; their DataError stops the build with nothing shown."""
    from pipeline.build import show_ahead
    from pipeline.problems import DataError, Problem

    calls = []

    def preview(renderer):
        calls.append(("rendered", renderer))
        return lambda: calls.append("shown")

    def passed():
        calls.append("suites")

    show_ahead(preview, "renderer", passed)
    assert calls == [("rendered", "renderer"), "suites", "shown"]
    calls.clear()
    problem = Problem("servers.csv", 4, "price_rub_month", -5, "rule")

    def rejected():
        calls.append("suites")
        raise DataError([problem])

    with pytest.raises(DataError):
        show_ahead(preview, "renderer", rejected)
    assert calls == [("rendered", "renderer"), "suites"]
    calls.clear()
    show_ahead(lambda renderer: calls.append("rendered"), "renderer", rejected)  # no page open: no wait
    assert calls == ["rendered"]
    show_ahead(preview, "renderer", None)  # validated before (nothing pending)
    assert calls == ["rendered", ("rendered", "renderer"), "shown"]
