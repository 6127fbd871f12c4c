"""Work proportional to the change stays exact for other kinds of edit (issue 37, items 3 and 5): after a
GPU's figure, a new server and a renamed model, or a constant, a build that takes what it can from the
previous one (validation outcomes, derived tables by lineage, pages by digest,
workbooks, the DuckDB file's unchanged tables) writes the bytes a forced build of the same sources
writes in a fresh folder. A price edit is tests/test_incremental.py's; random edits of every kind, for as
long as one likes, bench/edit_sweep.py's (`just sweep`)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SOURCES, edit_csv

sys.path.insert(0, str(ROOT / "bench"))
from edit_sweep import differences  # noqa: E402  (bench/edit_sweep.py: the same comparison, for random edits)


def _more_tflops(sources: Path) -> None:
    path = sources / "gpus.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    [row] = [i for i, line in enumerate(lines) if line.startswith("h100-pcie,")]
    cells = lines[row].split(",")
    assert cells[6] == "756"  # bf16_dense_tflops
    cells[6] = "800"
    lines[row] = ",".join(cells)
    path.write_text("".join(lines), encoding="utf-8")


def _new_server(sources: Path) -> None:
    with (sources / "servers.csv").open("a", encoding="utf-8") as f:
        f.write("xfusion-2x-h100-b,2 × H100 80GB (XFUSION B),XFUSION,h100-pcie,2,pcie,590000,2026-10-12,,,,catalog\n")


def _rename_model(sources: Path) -> None:
    edit_csv(sources / "models.csv", "falcon-7b,Falcon 7B,", "falcon-7b,Falcon 7B Base,")


def _narrower_range(sources: Path) -> None:
    edit_csv(sources / "constants.csv", "range_high_factor,1.5,", "range_high_factor,1.4,")


# Each case is one incremental build and one forced build (a few seconds). The first case's edits reach
# some pages only (a GPU's figure: the plans and times; a new server: its page, the indexes, every model's
# servers table; a renamed model: the pages that name it), so the pages' memo decides page by page; a
# constant every page shares is a case of its own, since it makes every page again.
EDITS = {
    "figure_server_and_name": (_more_tflops, _new_server, _rename_model),
    "shared_constant": (_narrower_range,),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(EDITS))
def test_an_edit_builds_what_a_forced_build_writes(kind, built, tmp_path):
    from pipeline.build import build

    sources, out, forced = tmp_path / "sources", tmp_path / "output", tmp_path / "forced"
    shutil.copytree(SOURCES, sources)
    shutil.copytree(built, out)  # the previous build: the real sources'
    for edit in EDITS[kind]:
        edit(sources)
    summary = build(sources, out)
    assert summary["files"]["kept"] > 0  # it did take files from the previous build
    build(sources, forced, force=True)
    assert differences(out, forced) == []  # every file, the DuckDB file by its content
