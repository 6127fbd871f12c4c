"""What editors' spreadsheets really produce: each case is accepted with a documented
normalisation (sources/README.md) or rejected with a clear message, output/ untouched."""

import csv
import hashlib
import io
import os
import re
from pathlib import Path

import polars as pl
import pytest

from conftest import edit_csv
from pipeline.build import build, load_and_validate
from pipeline.combine import combine
from pipeline.problems import DataError, format_report


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
        f"{sources}/models.csv: файл прочитан как Windows-1251 (кириллическая кодировка Excel); лучше сохранять в CSV UTF-8"
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
    assert f"{sources}/gpus.csv: разделитель столбцов прочитан как «;»" in [str(w) for w in validation.warnings]


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
        f'{sources}/servers.csv:13: gpu_count = "0": допустимо от 1 до 64 шт.'
    ]


def test_excel_booleans_and_russian_dates(sources):
    edit_csv(sources / "methods.csv", ",32,true,60,", ",32,ИСТИНА,60,")
    edit_csv(sources / "methods.csv", ",16,false,50,", ",16,FALSE,50,")
    edit_csv(sources / "servers.csv", ",585000,2026-10-12,", ",585000,12.10.2026,")
    catalog, _ = catalog_of(sources)
    assert cell(catalog, "methods", "method_id", "full_amp", "theoretical_min_applies") is True
    assert cell(catalog, "methods", "method_id", "full_bf16", "theoretical_min_applies") is False
    assert str(cell(catalog, "servers", "server_id", "xfusion-2x-h100", "price_checked_on")) == "2026-10-12"


def test_excel_separator_line_and_russian_yes_no(sources):
    # Excel may write "sep=;" as the first line; editors type да/нет in a true/false column
    path = sources / "methods.csv"
    with path.open(encoding="utf-8") as f:
        rows = list(csv.reader(f))
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=";", lineterminator="\n").writerows(rows)
    text = buffer.getvalue().replace(";32;true;60;", ";32;Да;60;").replace(";16;false;50;", ";16;НЕТ;50;")
    path.write_text("sep=;\n" + text, encoding="utf-8")
    catalog, validation = catalog_of(sources)
    assert cell(catalog, "methods", "method_id", "full_amp", "theoretical_min_applies") is True
    assert cell(catalog, "methods", "method_id", "full_bf16", "theoretical_min_applies") is False
    assert f"{sources}/methods.csv: разделитель столбцов прочитан как «;»" in [str(w) for w in validation.warnings]


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
    assert rejected(sources, previous) == ["gpus.csv:1: в заголовке нет столбца «form_factor»"]


def test_extra_unknown_column(sources, previous):
    path = sources / "gpus.csv"
    pl.read_csv(path, infer_schema=False).with_columns(pl.lit("x").alias("comment")).write_csv(path)
    assert rejected(sources, previous) == [
        "gpus.csv:1: неизвестный столбец «comment»; ожидаются: gpu_id, name, short_name, vendor, memory_gb, memory_bandwidth_gbs, "
        "bf16_dense_tflops, fp8_dense_tflops, fp8_reference_id, interconnect, link_gbs, form_factor, memory_note_ru, "
        "reference_id"
    ]


def test_header_typo(sources, previous):
    edit_csv(sources / "gpus.csv", ",memory_gb,", ",memmory_gb,")
    assert rejected(sources, previous) == [
        "gpus.csv:1: в заголовке нет столбца «memory_gb»",
        "gpus.csv:1: неизвестный столбец «memmory_gb»; может быть, «memory_gb»?",
    ]


def test_duplicated_id(sources, previous):
    edit_csv(sources / "models.csv", "phi-4,", "phi-3-mini,")
    assert rejected(sources, previous) == [
        'models.csv:31: model_id = "phi-3-mini": id повторяется; id должны быть разными',
        'models.csv:32: model_id = "phi-3-mini": id повторяется; id должны быть разными',
    ]


def test_row_with_a_cell_too_many(sources, previous):
    # a card no other table refers to, so that dropping the row breaks no reference
    edit_csv(
        sources / "gpus.csv",
        "rtx-5090,NVIDIA GeForce RTX 5090,RTX 5090,NVIDIA,32,",
        "rtx-5090,NVIDIA GeForce RTX 5090,RTX 5090,NVIDIA,32,,",
    )
    assert rejected(sources, previous) == ["gpus.csv:14: ячеек в строке: 15, в заголовке: 14"]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "legacy_offers.csv: файл пуст; в нём должна быть хотя бы строка заголовка"),
        (b"\n\n  \n", "legacy_offers.csv: файл пуст; в нём должна быть хотя бы строка заголовка"),
        (
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
            "legacy_offers.csv:3: двоичный файл, а не текст CSV (нулевой байт в позиции 8); сохраните таблицу как CSV UTF-8",
        ),
        (
            b"PK\x03\x04\x14\x00\x06\x00",
            "legacy_offers.csv: это книга Excel, а не CSV; сохраните её через «Сохранить как» → «CSV UTF-8»",
        ),
        (
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
            "legacy_offers.csv: это книга старого Excel (.xls), а не CSV; сохраните её через «Сохранить как» → «CSV UTF-8»",
        ),
        (
            "offer_id,task_ru".encode("utf-16"),
            "legacy_offers.csv: файл сохранён в UTF-16 (в Excel — «Текст Юникод»), а не в CSV; сохраните его через «Сохранить как» → «CSV UTF-8»",
        ),
        (
            b"\xff\x98abc",
            "legacy_offers.csv:1: байт 0 (0xFF) — не UTF-8, хотя остальной файл в UTF-8; наберите этот символ "
            "заново или сохраните файл снова как CSV UTF-8",
        ),
    ],
)
def test_unreadable_files(sources, previous, content, message):
    (sources / "legacy_offers.csv").write_bytes(content)
    problems = rejected(sources, previous)
    assert problems[0] == message


def test_missing_file(sources, previous):
    (sources / "servers.csv").unlink()
    assert rejected(sources, previous)[0] == "servers.csv: файла нет"


# -- hostile files: refused with file, line, column, value and rule, never a traceback (issue 11) --


@pytest.fixture(scope="module")
def reused(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("reused") / "sources"


@pytest.fixture
def src(reused) -> Path:
    """A copy of sources/ at the same path for every test of this module (the validation reuses
    the outcomes of the tables a test leaves unchanged)."""
    from mutations import restore

    return restore(reused)


def problems_in(sources: Path) -> list[str]:
    with pytest.raises(DataError) as info:
        load_and_validate(sources)
    return [str(p).replace(f"{sources}/", "") for p in info.value.problems]


def notices_in(sources: Path) -> list[str]:
    _, validation = load_and_validate(sources)
    return [str(w).replace(f"{sources}/", "") for w in validation.warnings]


def test_cell_longer_than_the_csv_field_limit(src):
    # Python's csv refuses fields over 131 072 characters by default: that was a traceback.
    edit_csv(src / "gpus.csv", ",RTX PRO 6000,NVIDIA,96,", ",RTX PRO 6000,NVIDIA," + "9" * 200_000 + ",")
    edit_csv(src / "models.csv", ",Условный размер,generic,14,", ",Условный размер" + " x" * 100_000 + ",generic,14,")
    nines = "9" * 120 + "… (длина 200 000)"
    assert problems_in(src) == [
        f'gpus.csv:11: memory_gb = "{nines}": допустимо от 1 до 2000 ГБ',
        'models.csv:5: family = "Условный размер'
        + " x" * 52
        + ' … (длина 200 015)": слишком длинное значение: можно не больше 200 знаков',
    ]


def test_unclosed_quote_that_swallows_the_rest_of_the_file(src):
    path = src / "servers.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[9].startswith("hgx-b200-8x,")
    quoted = lines[9].replace(",HGX B200 8-GPU,", ',"HGX B200 8-GPU,')
    # over 131 072 characters after the quote: the cell that swallows them is over csv's default limit
    path.write_text("".join(lines[:9]) + quoted + "".join(lines[2:8]) * 400 + lines[10], encoding="utf-8")
    problems = [p for p in problems_in(src) if p.startswith("servers.csv")]
    assert problems == [
        'servers.csv:10: ячеек в строке: 3, в заголовке: 12; ячейка в кавычках (") тянется от этой строки до конца файла: '
        "не пропущена ли закрывающая кавычка?"
    ]


def test_symlink_loop(src):
    (src / "methods.csv").unlink()
    (src / "methods.csv").symlink_to("methods.csv")
    assert "methods.csv: символическая ссылка, которая ведёт сама на себя (петля); положите сюда сам CSV-файл" in (
        problems_in(src)
    )


def test_a_build_refuses_a_symlink_loop_as_check_does(src, tmp_path):
    """The build fingerprints the sources before it reads them: a looping link stopped it there with
    exit 3 and the system's English message ("Too many levels of symbolic links"), where `check` gave
    exit 2 and the loop by name (bench/edit_sweep.py found it). Now it is the same problem, and the
    output is not touched."""
    (src / "methods.csv").unlink()
    (src / "methods.csv").symlink_to("methods.csv")
    with pytest.raises(DataError) as info:
        build(src, tmp_path / "out")
    assert "methods.csv: символическая ссылка, которая ведёт сама на себя (петля); положите сюда сам CSV-файл" in [
        str(p).replace(f"{src}/", "") for p in info.value.problems
    ]
    assert not (tmp_path / "out").exists()


def test_symlink_outside_the_folder_is_not_read(src):
    secret = src.parent / "outside-secret.csv"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    (src / "gpus.csv").unlink()
    (src / "gpus.csv").symlink_to(secret)
    problems = problems_in(src)
    assert problems[0] == (
        "gpus.csv: символическая ссылка на файл вне папки с исходными таблицами — такой файл не читается; "
        "положите сюда сам CSV-файл"
    )
    assert not any("root" in p for p in problems)
    secret.unlink()


def test_symlink_inside_the_folder_is_read(src):
    (src / "backup").mkdir()
    (src / "servers.csv").rename(src / "backup" / "servers.csv")
    (src / "servers.csv").symlink_to(Path("backup") / "servers.csv")
    con, _ = load_and_validate(src)
    assert con.execute("SELECT count(*) FROM servers").fetchone() == (10,)


def test_folder_pipe_and_device_in_place_of_a_table(src):
    (src / "gpus.csv").unlink()
    (src / "gpus.csv").mkdir()
    (src / "servers.csv").unlink()
    os.mkfifo(src / "servers.csv")  # opening a pipe must not make the build wait for a writer
    (src / "models.csv").unlink()
    (src / "models.csv").symlink_to("/dev/zero")
    problems = problems_in(src)
    assert "gpus.csv: это папка, а не CSV-файл" in problems
    assert "servers.csv: это не обычный файл (канал или устройство); положите сюда сам CSV-файл" in problems
    assert (
        "models.csv: символическая ссылка на файл вне папки с исходными таблицами — такой файл не читается; "
        "положите сюда сам CSV-файл" in problems
    )


def test_file_over_the_size_limit_is_refused_before_reading(src):
    from pipeline.load import MAX_FILE_BYTES

    with (src / "measurements.csv").open("r+b") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: no 50 MB written, and never read
    assert (
        problems_in(src)[0] == "measurements.csv: файл больше 50 МБ — это предел для исходной таблицы; тот ли это файл?"
    )


def test_report_lists_fifty_problems_per_rule_then_a_count(src):
    with (src / "gpus.csv").open("a", encoding="utf-8") as f:
        f.write("junk," * 20 + "\n" * 1 + ("junk," * 20 + "\n") * 1199)
    with pytest.raises(DataError) as info:
        load_and_validate(src)
    report = format_report(info.value.problems).replace(f"{src}/", "").splitlines()
    assert report[:2] == ["gpus.csv (1200):", "  gpus.csv:17: ячеек в строке: 21, в заголовке: 14"]
    assert report[51:] == [
        "  gpus.csv: ещё 1 150 таких же, не показаны: ячеек в строке: 21, в заголовке: 14",
        "Ошибок: 1200, в файлах: 1.",
    ]


# -- encodings: decided per file --


def test_one_bad_byte_in_a_utf8_file_is_refused_with_its_place(src):
    path = src / "models.csv"
    data = path.read_bytes()
    at = data.index(b"Apache 2.0") + len(b"Apache 2.0")
    path.write_bytes(data[:at] + b"\xff" + data[at:])
    assert problems_in(src) == [
        f'models.csv:15: licence = "Apache 2.0\ufffd": байт {at} (0xFF) — не UTF-8, хотя остальной файл в UTF-8; '
        "наберите этот символ заново или сохраните файл снова как CSV UTF-8"
    ]


def test_stray_bytes_in_an_ascii_file(src):
    path = src / "memory_anchors.csv"
    data = path.read_bytes()
    path.write_bytes(data.replace(b"full_amp,7,120", b"full_amp,7,1\x9820", 1))
    at = data.index(b"full_amp,7,120") + len(b"full_amp,7,1")
    assert problems_in(src) == [
        f'memory_anchors.csv:2: memory_gb = "1\ufffd20": байт {at} (0x98) — не UTF-8, хотя остальной файл в UTF-8; '
        "наберите этот символ заново или сохраните файл снова как CSV UTF-8"
    ]


@pytest.mark.parametrize(
    "encoding, name",
    [("koi8-r", "KOI8-R"), ("cp866", "DOS (CP866)"), ("mac_cyrillic", "Mac Cyrillic"), ("iso8859_5", "ISO 8859-5")],
)
def test_other_cyrillic_encodings_are_named(src, encoding, name):
    path = src / "models.csv"
    path.write_bytes(path.read_text(encoding="utf-8").encode(encoding))
    assert problems_in(src) == [
        f"models.csv: похоже на текст в кодировке {name}, а не UTF-8 или Windows-1251; сохраните файл как CSV UTF-8"
    ]


def test_windows_1251_file_that_lost_characters_warns(src):
    from pipeline.load import LOST_CHARACTER_RULE

    # Saving as Windows-1251 cannot keep × (it has no such character): it becomes "*" or "?".
    path = src / "servers.csv"
    text = path.read_text(encoding="utf-8")
    path.write_bytes(
        text.replace("2 × H100", "2 * H100").replace("4 × H200 NVL", "4 ? H200 NVL").encode("cp1251", "replace")
    )
    assert [w for w in notices_in(src) if "1251" in w] == [
        "servers.csv: файл прочитан как Windows-1251 (кириллическая кодировка Excel); лучше сохранять в CSV UTF-8",
        f'servers.csv:2: display_name = "2 * H100 80GB (XFUSION)": {LOST_CHARACTER_RULE}',
        f'servers.csv:3: display_name = "4 ? H100 80GB (ESC8000A)": {LOST_CHARACTER_RULE}',
        f'servers.csv:4: display_name = "8 ? H100 80GB (ESC8000A)": {LOST_CHARACTER_RULE}',
        f'servers.csv:5: display_name = "4 ? H200 141GB (ESC8000A)": {LOST_CHARACTER_RULE}',
        f'servers.csv:6: display_name = "8 ? H200 141GB (ESC8000A)": {LOST_CHARACTER_RULE}',
        f'servers.csv:7: display_name = "4 ? H200 NVL": {LOST_CHARACTER_RULE}',
        f'servers.csv:8: display_name = "8 ? RTX PRO 6000": {LOST_CHARACTER_RULE}',
        f'servers.csv:9: display_name = "8 ? H200 (HGX)": {LOST_CHARACTER_RULE}',
        f'servers.csv:10: display_name = "8 ? B200 (HGX)": {LOST_CHARACTER_RULE}',
        f'servers.csv:11: display_name = "8 ? B300": {LOST_CHARACTER_RULE}',
    ]


# -- invisible characters --


@pytest.mark.parametrize(
    "character",
    [
        *("\u00ad", "\u2060", "\t", "\u2028", "\u2029", "\u0085", "\ufeff", "\u200d", "\n", "\ue000"),
        # Default-ignorable letters and marks that render as nothing: grapheme joiner, Hangul and
        # Khmer fillers, the blank Braille pattern, variation selectors.
        *("\u034f", "\u115f", "\u1160", "\u17b4", "\u3164", "\uffa0", "\u2800", "\ufe0f", "\U000e0100"),
    ],
)
def test_invisible_characters_are_refused(src, character):
    from pipeline.validate import HIDDEN_RULE

    edit_csv(src / "gpus.csv", ",RTX PRO 6000,", f',"RTX{character}PRO 6000",')
    escaped = {"\t": "\\t", "\n": "\\n"}.get(character, f"\\u{ord(character):04x}")
    assert problems_in(src) == [f'gpus.csv:11: short_name = "RTX{escaped}PRO 6000": {HIDDEN_RULE}']


def test_nbsp_in_a_price_is_still_normalised(src):
    edit_csv(src / "servers.csv", ",1360800,", ",1\u00a0360\u00a0800,")
    catalog, _ = catalog_of(src)
    assert cell(catalog, "servers", "server_id", "esc8000a-4x-h100", "price_rub_month") == 1360800


def test_a_header_name_is_shown_escaped_and_cut(src):
    edit_csv(src / "gpus.csv", ",memory_gb,", ",memory\u200b_gb,")
    edit_csv(src / "servers.csv", ",platform,", "," + "p" * 500 + ",")
    assert problems_in(src) == [
        "gpus.csv:1: в заголовке нет столбца «memory_gb»",
        "gpus.csv:1: неизвестный столбец «memory\\u200b_gb»; может быть, «memory_gb»?",
        "servers.csv:1: в заголовке нет столбца «platform»",
        "servers.csv:1: неизвестный столбец «" + "p" * 120 + "… (длина 500)»; ожидаются: server_id, display_name, "
        "platform, gpu_id, gpu_count, interconnect, price_rub_month, price_checked_on, min_term_months, price_rub_hour, network, reference_id",
    ]
