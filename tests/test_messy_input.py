"""What editors' spreadsheets really produce: each case is accepted with a documented
normalisation (sources/README.md) or rejected with a clear message, output/ untouched."""

import csv
import hashlib
import re
from pathlib import Path

import polars as pl
import pytest

from conftest import edit_csv
from pipeline.__main__ import build, load_and_validate
from pipeline.combine import combine
from pipeline.problems import DataError


def catalog_of(sources: Path):
    con, validation = load_and_validate(sources)
    return combine(con), validation


def cell(catalog, table: str, key: str, key_value: str, column: str):
    return catalog[table].filter(pl.col(key) == key_value)[column].item()


# -- accepted, with normalisation --


def test_utf8_bom_and_windows_line_endings(sources):
    path = sources / "constants.csv"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    catalog, validation = catalog_of(sources)
    assert cell(catalog, "constants", "constant_id", "range_high_factor", "value") == 1.5


def test_windows_1251_is_read_with_a_notice(sources):
    path = sources / "models.csv"
    path.write_bytes(path.read_text(encoding="utf-8").encode("cp1251"))
    catalog, validation = catalog_of(sources)
    assert cell(catalog, "models", "model_id", "generic-70b", "display_name") == "Модель 70 млрд"
    assert [str(w) for w in validation.warnings if "1251" in w.rule] == [
        f"{sources}/models.csv: read as Windows-1251 (Excel's Cyrillic encoding); CSV UTF-8 is preferred"
    ]


def test_semicolons_and_decimal_commas(sources):
    # What LibreOffice or Excel with a Russian locale writes: ';' between cells, ',' in decimals.
    path = sources / "gpus.csv"
    with path.open(encoding="utf-8") as f:
        rows = list(csv.reader(f))
    decimal = re.compile(r"^\d+\.\d+$")
    with path.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter=";").writerows(
            [[c.replace(".", ",") if decimal.match(c) else c for c in r] for r in rows]
        )
    assert ";835,5;" in path.read_text(encoding="utf-8")
    catalog, validation = catalog_of(sources)
    assert cell(catalog, "gpus", "gpu_id", "h100-nvl", "bf16_dense_tflops") == 835.5
    assert cell(catalog, "gpus", "gpu_id", "h200-sxm", "memory_gb") == 141.0
    assert f"{sources}/gpus.csv: read with ';' as the delimiter" in [str(w) for w in validation.warnings]


@pytest.mark.parametrize("price", ["1 360 800", "1\u00a0360\u00a0800", "1 360 800 ₽", "1360800 руб.", '"1 360 800 ₽"'])
def test_prices_with_spaces_and_rouble_sign(sources, price):
    edit_csv(sources / "servers.csv", ",1360800,", f",{price},")
    catalog, _ = catalog_of(sources)
    assert cell(catalog, "servers", "server_id", "esc8000a-4x-h100", "price_rub_month") == 1360800


def test_spaces_around_cells_blank_lines_and_header_case(sources):
    path = sources / "servers.csv"
    text = path.read_text(encoding="utf-8").replace("gpu_id,gpu_count", "GPU_ID , Gpu_Count")
    text = text.replace("xfusion-2x-h100,", "  xfusion-2x-h100 ,", 1).replace("\nhgx-b300", "\n\n,,,\nhgx-b300")
    path.write_text(text, encoding="utf-8")
    catalog, _ = catalog_of(sources)
    assert cell(catalog, "servers", "server_id", "xfusion-2x-h100", "gpu_count") == 2
    assert catalog["servers"].height == 10
    # Line numbers still count the blank lines: an error below them names the right line.
    edit_csv(path, ",b300,8,", ",b300,0,")
    with pytest.raises(DataError) as info:
        load_and_validate(sources)
    assert [str(p) for p in info.value.problems] == [
        f'{sources}/servers.csv:13: gpu_count = "0": must be between 1 and 64 шт.'
    ]


def test_excel_booleans_and_russian_dates(sources):
    edit_csv(sources / "methods.csv", ",32,true,60,", ",32,ИСТИНА,60,")
    edit_csv(sources / "methods.csv", ",16,false,50,", ",16,FALSE,50,")
    edit_csv(sources / "servers.csv", ",585000,2026-10-12,", ",585000,12.10.2026,")
    catalog, _ = catalog_of(sources)
    assert cell(catalog, "methods", "method_id", "full_amp", "theoretical_min_applies") is True
    assert cell(catalog, "methods", "method_id", "full_bf16", "theoretical_min_applies") is False
    assert str(cell(catalog, "servers", "server_id", "xfusion-2x-h100", "price_checked_on")) == "2026-10-12"


# -- rejected: the message, and output/ left as it was --


@pytest.fixture(scope="module")
def previous(tmp_path_factory):
    from conftest import SOURCES

    out = tmp_path_factory.mktemp("previous") / "output"
    build(SOURCES, out)
    return out


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def rejected(sources: Path, out: Path) -> list[str]:
    before = snapshot(out)
    with pytest.raises(DataError) as info:
        build(sources, out)
    assert snapshot(out) == before
    left = [p.name for p in out.parent.glob(".output.*") if p.name != ".output.lock"]  # the lock file stays
    assert left == [], "a staging folder was left behind"
    return [str(p).replace(f"{sources}/", "") for p in info.value.problems]


def test_missing_column(sources, previous):
    path = sources / "gpus.csv"
    frame = pl.read_csv(path, infer_schema=False).drop("form_factor")
    frame.write_csv(path)
    assert rejected(sources, previous) == ['gpus.csv:1: column "form_factor" is missing from the header']


def test_extra_unknown_column(sources, previous):
    path = sources / "gpus.csv"
    pl.read_csv(path, infer_schema=False).with_columns(pl.lit("x").alias("comment")).write_csv(path)
    assert rejected(sources, previous) == [
        'gpus.csv:1: unknown column "comment"; expected: gpu_id, name, short_name, vendor, memory_gb, memory_bandwidth_gbs, '
        "bf16_dense_tflops, fp8_dense_tflops, interconnect, link_gbs, form_factor, memory_note_ru, reference_id"
    ]


def test_header_typo(sources, previous):
    edit_csv(sources / "gpus.csv", ",memory_gb,", ",memmory_gb,")
    assert rejected(sources, previous) == [
        'gpus.csv:1: column "memory_gb" is missing from the header',
        'gpus.csv:1: unknown column "memmory_gb"; did you mean "memory_gb"?',
    ]


def test_duplicated_id(sources, previous):
    edit_csv(sources / "models.csv", "phi-4,", "phi-3-mini,")
    assert rejected(sources, previous) == [
        'models.csv:31: model_id = "phi-3-mini": duplicate id; ids must be unique',
        'models.csv:32: model_id = "phi-3-mini": duplicate id; ids must be unique',
    ]


def test_row_with_a_cell_too_many(sources, previous):
    # a card no other table refers to, so that dropping the row breaks no reference
    edit_csv(
        sources / "gpus.csv",
        "rtx-5090,NVIDIA GeForce RTX 5090,RTX 5090,NVIDIA,32,",
        "rtx-5090,NVIDIA GeForce RTX 5090,RTX 5090,NVIDIA,32,,",
    )
    assert rejected(sources, previous) == ["gpus.csv:14: has 14 cells, the header has 13"]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "file is empty; it needs a header row"),
        (b"\n\n  \n", "file is empty; it needs a header row"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file, not CSV text; save the table as CSV UTF-8"),
        (b"PK\x03\x04\x14\x00\x06\x00", "this is an Excel workbook, not CSV; use Save As -> CSV UTF-8"),
        (b"\xff\x98abc", "neither UTF-8 nor Windows-1251 text (byte 1); save the file as CSV UTF-8"),
    ],
)
def test_unreadable_files(sources, previous, content, message):
    (sources / "legacy_offers.csv").write_bytes(content)
    problems = rejected(sources, previous)
    assert problems[0] == f"legacy_offers.csv: {message}"


def test_missing_file(sources, previous):
    (sources / "servers.csv").unlink()
    assert rejected(sources, previous)[0] == "servers.csv: file is missing"
