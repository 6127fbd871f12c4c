"""Validation: the real sources pass; each kind of bad data is reported with file, line, column, value and rule."""

from pathlib import Path

import pytest

from conftest import SOURCES, edit_csv
from pipeline.__main__ import load_and_validate
from pipeline.problems import DataError, format_report


def problems_of(sources: Path) -> list[str]:
    with pytest.raises(DataError) as info:
        load_and_validate(sources)
    return [str(p) for p in info.value.problems]


def test_real_sources_pass():
    con, _ = load_and_validate(SOURCES)
    assert con.execute("SELECT count(*) FROM gpus").fetchone()[0] >= 11


def test_unknown_gpu_in_server(sources):
    edit_csv(
        sources / "servers.csv",
        "hgx-h200-8x,8 × H200 (HGX),HGX H200 8-GPU,h200-sxm",
        "hgx-h200-8x,8 × H200 (HGX),HGX H200 8-GPU,h300",
    )
    assert problems_of(sources) == [
        f'{sources}/servers.csv:9: gpu_id = "h300": no видеокарты row with this id in {sources}/gpus.csv'
    ]


@pytest.mark.parametrize(
    "file, old, new, expected",
    [
        (
            "gpus.csv",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,141,",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,,",
            "gpus.csv:7: memory_gb = (empty): a value is required",
        ),
        (
            "gpus.csv",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,141,",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,141 ГБ,",
            'gpus.csv:7: memory_gb = "141 ГБ": expected число (float, e.g. 141 or 835.5)',
        ),
        (
            "gpus.csv",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,141,",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,5000,",
            'gpus.csv:7: memory_gb = "5000": must be between 1 and 2000 ГБ',
        ),
        (
            "gpus.csv",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,Nvidia,",
            'gpus.csv:7: vendor = "Nvidia": must be one of: NVIDIA, AMD',
        ),
        (
            "gpus.csv",
            # a card no other table refers to (servers.csv and measurements.csv name l40s and others)
            "rtx-5090,NVIDIA GeForce RTX 5090",
            "RTX-5090,NVIDIA GeForce RTX 5090",
            "gpus.csv:14: gpu_id = \"RTX-5090\": ids use lowercase latin letters and digits, joined by '-' or '_'",
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",585000,2026-13-45,",
            'servers.csv:2: price_checked_on = "2026-13-45": not a valid date',
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",585000,12/10/2026,",
            'servers.csv:2: price_checked_on = "12/10/2026": expected дата (ГГГГ-ММ-ДД) (date, e.g. 2026-10-12)',
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",585000,2099-01-01,",
            'servers.csv:2: price_checked_on = "2099-01-01": is in the future (the build date is 2026-11-30)',
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",0,2026-10-12,",
            'servers.csv:2: price_rub_month = "0": must be between 1 and 10000000000 ₽/мес',
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",585000.5,2026-10-12,",
            'servers.csv:2: price_rub_month = "585000.5": expected целое число (int, e.g. 96)',
        ),
        (
            "servers.csv",
            "h200-nvl,4,nvlink-bridge,",
            "h200-nvl,4,nvswitch,",
            'servers.csv:7: interconnect = "nvswitch": does not fit its GPU h200-nvl (form factor pcie, link nvlink-bridge)',
        ),
        (
            "servers.csv",
            "rtx-pro-6000,8,pcie,",
            "rtx-pro-6000,8,nvlink-bridge,",
            'servers.csv:8: interconnect = "nvlink-bridge": does not fit its GPU rtx-pro-6000 (form factor pcie, link pcie)',
        ),
        (
            "models.csv",
            "named,30.5,3.3,",
            "named,30.5,33,",
            'models.csv:22: active_params_b = "33": active parameters exceed the total (30.5 B)',
        ),
        (
            "references.csv",
            ",https://blog.eleuther.ai/transformer-math/,",
            ",javascript:alert(1),",
            'references.csv:3: url = "javascript:alert(1)": must be a web address starting with http:// or https://, without spaces or quotes',
        ),
        (
            "gpus.csv",
            "L40S,NVIDIA,48",
            "L40S\u202e,NVIDIA,48",
            'gpus.csv:12: short_name = "L40S\u202e": contains an invisible control or text-direction character; delete it',
        ),
        (
            "gpus.csv",
            "L40S,NVIDIA,48",
            "L" * 201 + ",NVIDIA,48",
            'gpus.csv:12: short_name = "' + "L" * 201 + '": longer than 200 characters',
        ),
        (
            "constants.csv",
            "range_high_factor,1.5,",
            "range_high,1.5,",
            'constants.csv: constant_id = "range_high_factor": this constant is used by the rules and must be present',
        ),
        (
            "memory_anchors.csv",
            "qlora_2bit,7,4,",
            "qlora_2bit,7,0.001,",
            'memory_anchors.csv:22: memory_gb = "0.001": must be between 0.01 and 1000000 ГБ',
        ),
        (
            "methods.csv",
            ",16,false,40,",
            ",16,maybe,40,",
            'methods.csv:5: theoretical_min_applies = "maybe": expected да/нет (true/false) (bool, e.g. true)',
        ),
    ],
)
def test_one_bad_cell(sources, file, old, new, expected):
    edit_csv(sources / file, old, new)
    assert problems_of(sources) == [f"{sources}/{expected}"]


def test_duplicate_id_names_both_rows(sources):
    edit_csv(sources / "gpus.csv", "rtx-4090,", "rtx-5090,")
    assert problems_of(sources) == [
        f'{sources}/gpus.csv:13: gpu_id = "rtx-5090": duplicate id; ids must be unique',
        f'{sources}/gpus.csv:14: gpu_id = "rtx-5090": duplicate id; ids must be unique',
    ]


def test_missing_anchor_cell_and_shrinking_memory(sources):
    edit_csv(sources / "memory_anchors.csv", "lora,70,160,llama-factory-hw\n", "")
    edit_csv(sources / "memory_anchors.csv", "qlora_8bit,30,40,", "qlora_8bit,30,15,")
    assert problems_of(sources) == [
        f'{sources}/memory_anchors.csv: method_id = "lora": no value at 70 B; every method needs every anchor size',
        f'{sources}/memory_anchors.csv:15: memory_gb = "15": at 30 B qlora_8bit needs less than qlora_4bit (24 GB); '
        "at each size memory must grow in the method order of methods.csv (sort_order)",
        f'{sources}/memory_anchors.csv:15: memory_gb = "15": qlora_8bit at 30 B is less than at 14 B (20 GB); memory must not decrease with model size',
    ]


def test_new_anchor_size_must_be_filled_for_every_method(sources):
    with (sources / "memory_anchors.csv").open("a", encoding="utf-8") as f:
        f.write("lora,110,240,llama-factory-hw\n")
    problems = problems_of(sources)
    assert len(problems) == 5
    assert (
        problems[0]
        == f'{sources}/memory_anchors.csv: method_id = "full_amp": no value at 110 B; every method needs every anchor size'
    )


def test_unknown_reference(sources):
    edit_csv(
        sources / "gpus.csv",
        "1307,2610,infinity-fabric,896,oam,,amd-mi325x",
        "1307,2610,infinity-fabric,896,oam,,amd-mi999",
    )
    assert problems_of(sources) == [
        f'{sources}/gpus.csv:16: reference_id = "amd-mi999": no источники row with this id in {sources}/references.csv'
    ]


def test_header_problems_stop_that_file_only(sources):
    edit_csv(sources / "gpus.csv", "memory_gb,", "memory_gib,")
    edit_csv(sources / "servers.csv", "gpu_count,", "gpu_count,colour,")
    problems = problems_of(sources)
    assert f'{sources}/gpus.csv:1: column "memory_gb" is missing from the header' in problems
    assert any(p.startswith(f'{sources}/gpus.csv:1: unknown column "memory_gib"') for p in problems)
    assert any(p.startswith(f'{sources}/servers.csv:1: unknown column "colour"') for p in problems)


def test_all_problems_at_once_and_report_format(sources):
    edit_csv(
        sources / "gpus.csv",
        "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,141,",
        "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,0,",
    )
    edit_csv(sources / "servers.csv", ",h200-sxm,8,nvswitch,", ",h300,8,nvswitch,")
    with pytest.raises(DataError) as info:
        load_and_validate(sources)
    report = format_report(info.value.problems)
    assert report.splitlines() == [
        f"{sources}/gpus.csv (1):",
        f'  {sources}/gpus.csv:7: memory_gb = "0": must be between 1 and 2000 ГБ',
        f"{sources}/servers.csv (1):",
        f'  {sources}/servers.csv:9: gpu_id = "h300": no видеокарты row with this id in {sources}/gpus.csv',
        "2 problem(s) in 2 file(s); nothing was written.",
    ]
