"""Validation: the real sources pass; each kind of bad data is reported with file, line, column, value and rule."""

import math
from pathlib import Path

import pytest

from conftest import SOURCES, edit_csv
from pipeline.build import load_and_validate
from pipeline.problems import DataError, format_report
from pipeline.schema import SOURCE_TABLES
from pipeline.validate import HIDDEN_RULE


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
        f'{sources}/servers.csv:9: gpu_id = "h300": в таблице «Видеокарты» ({sources}/gpus.csv) нет строки с таким id'
    ]


@pytest.mark.parametrize(
    "file, old, new, expected",
    [
        (
            "gpus.csv",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,141,",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,,",
            "gpus.csv:7: memory_gb = (пусто): значение обязательно",
        ),
        (
            "gpus.csv",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,141,",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,141 ГБ,",
            'gpus.csv:7: memory_gb = "141 ГБ": ожидается число, например 141 или 835.5',
        ),
        (
            "gpus.csv",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,141,",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,5000,",
            'gpus.csv:7: memory_gb = "5000": допустимо от 1 до 2000 ГБ',
        ),
        (
            "gpus.csv",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,NVIDIA,",
            "h200-sxm,NVIDIA H200 SXM 141GB,H200,Nvidia,",
            'gpus.csv:7: vendor = "Nvidia": допустимые значения: NVIDIA, AMD',
        ),
        (
            "gpus.csv",
            # a card no other table refers to (servers.csv and measurements.csv name l40s and others)
            "rtx-5090,NVIDIA GeForce RTX 5090",
            "RTX-5090,NVIDIA GeForce RTX 5090",
            'gpus.csv:14: gpu_id = "RTX-5090": в id — строчные латинские буквы и цифры, через «-» или «_»',
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",585000,2026-13-45,",
            'servers.csv:2: price_checked_on = "2026-13-45": по виду это дата (ГГГГ-ММ-ДД), но такого значения не бывает; проверьте его',
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",585000,12/10/2026,",
            'servers.csv:2: price_checked_on = "12/10/2026": ожидается дата (ГГГГ-ММ-ДД), например 2026-10-12',
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",585000,2099-01-01,",
            'servers.csv:2: price_checked_on = "2099-01-01": дата в будущем (дата сборки — 2026-12-05)',
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",0,2026-10-12,",
            'servers.csv:2: price_rub_month = "0": допустимо от 1000 до 10000000000 ₽/мес',
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",585000.5,2026-10-12,",
            'servers.csv:2: price_rub_month = "585000.5": ожидается целое число, например 96',
        ),
        (
            "servers.csv",
            "h200-nvl,4,nvlink-bridge,",
            "h200-nvl,4,nvswitch,",
            'servers.csv:7: interconnect = "nvswitch": не подходит к видеокарте h200-nvl (форм-фактор pcie, связь nvlink-bridge)',
        ),
        (
            "servers.csv",
            "rtx-pro-6000,8,pcie,",
            "rtx-pro-6000,8,nvlink-bridge,",
            'servers.csv:8: interconnect = "nvlink-bridge": не подходит к видеокарте rtx-pro-6000 (форм-фактор pcie, связь pcie)',
        ),
        (
            "gpus.csv",
            "2039,312,,,nvlink",
            "2039,312,,nvidia-a100,nvlink",
            'gpus.csv:3: fp8_reference_id = "nvidia-a100": источник цифры FP8 указан, а самой цифры (fp8_dense_tflops) нет: '
            "заполните её или очистите fp8_reference_id",
        ),
        (
            "models.csv",
            "named,30.5,3.3,",
            "named,30.5,33,",
            'models.csv:22: active_params_b = "33": активных параметров больше, чем всего (30.5 млрд)',
        ),
        (
            "references.csv",
            ",https://blog.eleuther.ai/transformer-math/,",
            ",javascript:alert(1),",
            'references.csv:3: url = "javascript:alert(1)": нужен веб-адрес, начинающийся с http:// или https://, без пробелов и кавычек',
        ),
        (
            "gpus.csv",
            "L40S,NVIDIA,48",
            "L40S\u202e,NVIDIA,48",
            'gpus.csv:12: short_name = "L40S\\u202e": ' + HIDDEN_RULE,
        ),
        (
            "gpus.csv",
            "L40S,NVIDIA,48",
            "L" * 201 + ",NVIDIA,48",
            'gpus.csv:12: short_name = "'
            + "L" * 120
            + '… (длина 201)": слишком длинное значение: можно не больше 200 знаков',
        ),
        (
            "constants.csv",
            "range_high_factor,1.5,",
            "range_high,1.5,",
            'constants.csv: constant_id = "range_high_factor": эту константу используют правила, она обязательна',
        ),
        (
            "memory_anchors.csv",
            "qlora_2bit,7,4,",
            "qlora_2bit,7,0.001,",
            'memory_anchors.csv:22: memory_gb = "0.001": допустимо от 0.01 до 1000000 ГБ',
        ),
        (
            "methods.csv",
            ",16,false,40,",
            ",16,maybe,40,",
            'methods.csv:5: theoretical_min_applies = "maybe": ожидается да/нет (true/false), например true',
        ),
    ],
)
def test_one_bad_cell(sources, file, old, new, expected):
    edit_csv(sources / file, old, new)
    assert problems_of(sources) == [f"{sources}/{expected}"]


def test_duplicate_id_names_both_rows(sources):
    edit_csv(sources / "gpus.csv", "rtx-4090,", "rtx-5090,")
    # (throughput.csv's rows on the RTX 4090 then lose their card too: only gpus.csv's problems are asserted)
    assert [p for p in problems_of(sources) if "/gpus.csv:" in p] == [
        f'{sources}/gpus.csv:13: gpu_id = "rtx-5090": id повторяется; id должны быть разными',
        f'{sources}/gpus.csv:14: gpu_id = "rtx-5090": id повторяется; id должны быть разными',
    ]


def test_missing_anchor_cell_and_shrinking_memory(sources):
    edit_csv(sources / "memory_anchors.csv", "lora,70,160,llama-factory-hw\n", "")
    edit_csv(sources / "memory_anchors.csv", "qlora_8bit,30,40,", "qlora_8bit,30,15,")
    assert problems_of(sources) == [
        f'{sources}/memory_anchors.csv: method_id = "lora": нет значения для 70 млрд параметров; у каждого способа должно быть значение на каждом опорном размере',
        f'{sources}/memory_anchors.csv:15: memory_gb = "15": qlora_8bit на 30 млрд параметров требует хотя бы памяти под веса: 30 ГБ при разрядности 8',
        f'{sources}/memory_anchors.csv:15: memory_gb = "15": на 30 млрд параметров qlora_8bit требует меньше памяти, '
        "чем qlora_4bit (24 ГБ); на каждом размере память должна расти в порядке способов из methods.csv (sort_order)",
        f'{sources}/memory_anchors.csv:15: memory_gb = "15": у qlora_8bit на 30 млрд параметров память меньше, чем на 14 млрд (20 ГБ); память не должна убывать с ростом модели',
    ]


def test_new_anchor_size_must_be_filled_for_every_method(sources):
    with (sources / "memory_anchors.csv").open("a", encoding="utf-8") as f:
        f.write("lora,110,240,llama-factory-hw\n")
    problems = problems_of(sources)
    assert len(problems) == 5
    assert (
        problems[0]
        == f'{sources}/memory_anchors.csv: method_id = "full_amp": нет значения для 110 млрд параметров; у каждого способа должно быть значение на каждом опорном размере'
    )


def test_unknown_reference(sources):
    edit_csv(
        sources / "gpus.csv",
        "1307,2610,,infinity-fabric,896,oam,,amd-mi325x",
        "1307,2610,,infinity-fabric,896,oam,,amd-mi999",
    )
    assert problems_of(sources) == [
        f'{sources}/gpus.csv:16: reference_id = "amd-mi999": в таблице «Источники» ({sources}/references.csv) нет строки с таким id'
    ]


def test_header_problems_stop_that_file_only(sources):
    edit_csv(sources / "gpus.csv", "memory_gb,", "memory_gib,")
    edit_csv(sources / "servers.csv", "gpu_count,", "gpu_count,colour,")
    problems = problems_of(sources)
    assert f"{sources}/gpus.csv:1: в заголовке нет столбца «memory_gb»" in problems
    assert any(p.startswith(f"{sources}/gpus.csv:1: неизвестный столбец «memory_gib»") for p in problems)
    assert any(p.startswith(f"{sources}/servers.csv:1: неизвестный столбец «colour»") for p in problems)


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
        f'  {sources}/gpus.csv:7: memory_gb = "0": допустимо от 1 до 2000 ГБ',
        f"{sources}/servers.csv (1):",
        f'  {sources}/servers.csv:9: gpu_id = "h300": в таблице «Видеокарты» ({sources}/gpus.csv) нет строки с таким id',
        "Ошибок: 2, в файлах: 2.",
    ]


# -- issue 11: data that crashed the build, and well-formed nonsense (a reused folder: the
# validation reruns only the suites of the tables a test changes) --


@pytest.fixture(scope="module")
def reused(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("reused") / "sources"


@pytest.fixture
def src(reused) -> Path:
    from mutations import restore

    return restore(reused)


def found(sources: Path) -> list[str]:
    return [p.replace(f"{sources}/", "") for p in problems_of(sources)]


def warned(sources: Path) -> list[str]:
    _, validation = load_and_validate(sources)
    return [str(w).replace(f"{sources}/", "") for w in validation.warnings if "по запросу" not in w.rule]


def set_constant(sources: Path, constant_id: str, value) -> None:
    path = sources / "constants.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{constant_id},"))
    rest = lines[at].split(",", 2)[2]
    lines[at] = f"{constant_id},{value},{rest}"
    path.write_text("".join(lines), encoding="utf-8")


@pytest.mark.parametrize(
    "file, old, new, expected",
    [
        # DuckDB casts the year 0 and negative years; Python's dates cannot hold them (a traceback before).
        (
            "references.csv",
            ",2026-10-12\n",
            ",0000-01-01\n",
            'references.csv:2: checked_on = "0000-01-01": по виду это дата (ГГГГ-ММ-ДД), но такого значения не бывает; проверьте его',
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",585000,-2026-10-12,",
            'servers.csv:2: price_checked_on = "-2026-10-12": ожидается дата (ГГГГ-ММ-ДД), например 2026-10-12',
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",585000,10000-01-01,",
            'servers.csv:2: price_checked_on = "10000-01-01": ожидается дата (ГГГГ-ММ-ДД), например 2026-10-12',
        ),
        (
            "servers.csv",
            ",585000,2026-10-12,",
            ",585000,0001-01-01,",
            'servers.csv:2: price_checked_on = "0001-01-01": дата раньше 2000-01-01: проверьте год',
        ),
        # the cell's text, not the float it casts to (1.0000000000000000109790636e+308)
        (
            "methods.csv",
            ",4,false,20,",
            ",4,false,1" + "0" * 308 + ",",
            'methods.csv:3: sort_order = "1'
            + "0" * 119
            + '… (длина 309)": по виду это целое число, но такого значения не бывает; проверьте его',
        ),
    ],
)
def test_dates_and_numbers_python_cannot_hold(src, file, old, new, expected):
    edit_csv(src / file, old, new)
    assert found(src) == [expected]


@pytest.mark.parametrize("table", [t.name for t in SOURCE_TABLES])
def test_a_table_with_only_its_header_is_refused(src, table):
    path = src / f"{table}.csv"
    path.write_text(path.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    assert f"{table}.csv: в таблице нет строк, только заголовок; нужна хотя бы одна строка" in found(src)


@pytest.mark.parametrize(
    "constant_id, value, expected",
    [
        (
            "hours_per_month",
            0,
            'constants.csv:16: value = "0": hours_per_month должно быть не меньше 672 и не больше 744',
        ),
        (
            "achieved_efficiency",
            0,
            'constants.csv:49: value = "0": achieved_efficiency должно быть больше 0 и не больше 1',
        ),
        (
            "achieved_efficiency",
            50,
            'constants.csv:49: value = "50": achieved_efficiency должно быть больше 0 и не больше 1',
        ),
        (
            "quant_block_size",
            0.5,
            'constants.csv:25: value = "0.5": quant_block_size должно быть целым числом от 1 до 4096',
        ),
        (
            "adamw_optimizer_bytes",
            0,
            'constants.csv:10: value = "0": adamw_optimizer_bytes должно быть больше 0 и не больше 32',
        ),
        (
            "stale_after_days",
            1000000,
            'constants.csv:15: value = "1000000": stale_after_days должно быть целым числом от 1 до 3650',
        ),
    ],
)
def test_constants_out_of_their_declared_bounds(src, constant_id, value, expected):
    set_constant(src, constant_id, value)
    assert found(src) == [expected]


def test_relations_between_constants(src):
    # «диапазон от +100 до −50 %» was published
    set_constant(src, "range_low_factor", 2)
    set_constant(src, "range_high_factor", 0.5)
    assert found(src) == [
        'constants.csv:2: value = "2": range_low_factor должно быть больше 0 и меньше 1',
        'constants.csv:2: value = "2": range_low_factor должно быть меньше range_high_factor (0.5)',
        'constants.csv:3: value = "0.5": range_high_factor должно быть больше 1 и не больше 10',
    ]
    set_constant(src, "range_low_factor", 0.7)
    set_constant(src, "range_high_factor", 1.5)
    set_constant(src, "legacy_overhead_low", 0.6)
    assert found(src) == [
        'constants.csv:6: value = "0.6": legacy_overhead_low должно быть не больше legacy_overhead_high (0.5)'
    ]


def test_constant_bounds_cover_every_constant():
    from pipeline.schema import CONSTANT_BOUNDS, CONSTANT_RELATIONS, CONSTANTS, ESTIMATOR_CONSTANTS, REQUIRED_CONSTANTS
    from pipeline.validate import _within

    in_file = [line.split(",")[0] for line in (SOURCES / "constants.csv").read_text(encoding="utf-8").splitlines()[1:]]
    assert sorted(in_file) == sorted(CONSTANT_BOUNDS)
    assert set(ESTIMATOR_CONSTANTS) <= set(CONSTANT_BOUNDS) and set(REQUIRED_CONSTANTS) == set(CONSTANT_BOUNDS)
    assert {c for relation in CONSTANT_RELATIONS for c in relation[::2]} <= set(CONSTANT_BOUNDS)
    value = CONSTANTS.field("value")  # the column's own range holds for every constant
    assert all(
        value.min <= (b.ge if b.ge is not None else b.gt) and (b.le if b.le is not None else b.lt) <= value.max
        for b in CONSTANT_BOUNDS.values()
    )
    values = {
        line.split(",")[0]: float(line.split(",")[1])
        for line in (SOURCES / "constants.csv").read_text(encoding="utf-8").splitlines()[1:]
    }
    for constant_id, bounds in CONSTANT_BOUNDS.items():
        assert _within(bounds, values[constant_id]), constant_id
        assert bounds.usual is None or bounds.usual[0] <= values[constant_id] <= bounds.usual[1], constant_id


@pytest.mark.parametrize(
    "file, old, new, expected",
    [
        (
            "gpus.csv",
            "H100 PCIe,NVIDIA,80,",
            "H100 PCIe,NVIDIA,1,",
            [
                'gpus.csv:5: name = "NVIDIA H100 PCIe 80GB": в названии 80GB, а в memory_gb — 1',
                'servers.csv:2: display_name = "2 × H100 80GB (XFUSION)": в названии 80GB на видеокарту, а у h100-pcie — 1 ГБ',
                'servers.csv:3: display_name = "4 × H100 80GB (ESC8000A)": в названии 80GB на видеокарту, а у h100-pcie — 1 ГБ',
                'servers.csv:4: display_name = "8 × H100 80GB (ESC8000A)": в названии 80GB на видеокарту, а у h100-pcie — 1 ГБ',
            ],
        ),
        (
            "servers.csv",
            "h100-pcie,2,pcie,",
            "h100-pcie,64,pcie,",
            ['servers.csv:2: display_name = "2 × H100 80GB (XFUSION)": в названии видеокарт: 2, а в gpu_count — 64'],
        ),
        (
            "servers.csv",
            "XFUSION,h100-pcie,2,",
            "XFUSION,h200-nvl,2,",
            [
                'servers.csv:2: display_name = "2 × H100 80GB (XFUSION)": в названии 80GB на видеокарту, а у h200-nvl — 141 ГБ',
                'servers.csv:2: display_name = "2 × H100 80GB (XFUSION)": в названии H100, а gpu_id h200-nvl — это '
                "NVIDIA H200 NVL 141GB",
            ],
        ),
        (
            "servers.csv",
            ",585000,",
            ",1,",
            ['servers.csv:2: price_rub_month = "1": допустимо от 1000 до 10000000000 ₽/мес'],
        ),
        (
            "models.csv",
            "Условный размер,generic,7,",
            "Условный размер,generic,70,",
            [
                'models.csv:2: display_name = "Модель 7 млрд": в названии 7 млрд параметров, а в params_b — 70',
                'models.csv:2: short_name = "7 млрд": в названии 7 млрд параметров, а в params_b — 70',
            ],
        ),
        (
            "methods.csv",
            "QLoRA 8 бит,",
            "QLoRA 4 бита,",
            ['methods.csv:4: bits = "8": в short_name_ru указано 4 бита'],
        ),
        (
            # LoRA on a 32-bit base: LLaMA-Factory's lora figures (16 GB at 7 B, …) are below its weights alone
            "methods.csv",
            "только для добавки,16,false,40,",
            "только для добавки,32,false,40,",
            [
                'memory_anchors.csv:10: memory_gb = "16": lora на 7 млрд параметров требует хотя бы памяти под веса: 28 ГБ при разрядности 32',
                'memory_anchors.csv:11: memory_gb = "32": lora на 14 млрд параметров требует хотя бы памяти под веса: 56 ГБ при разрядности 32',
                'memory_anchors.csv:12: memory_gb = "64": lora на 30 млрд параметров требует хотя бы памяти под веса: 120 ГБ при разрядности 32',
                'memory_anchors.csv:13: memory_gb = "160": lora на 70 млрд параметров требует хотя бы памяти под веса: 280 ГБ при разрядности 32',
            ],
        ),
        (
            "legacy_offer_jobs.csv",
            "70b-full,generic-70b,full_amp\n",
            "",
            [
                'legacy_offers.csv:4: offer_id = "70b-full": у рекомендации нет задач в legacy_offer_jobs.csv; добавьте хотя бы одну'
            ],
        ),
    ],
)
def test_well_formed_nonsense_is_refused(src, file, old, new, expected):
    edit_csv(src / file, old, new)
    assert found(src) == expected


def test_a_methods_bits_contradicting_its_id(src):
    edit_csv(src / "methods.csv", ",2,false,10,", ",32,false,10,")
    problems = found(src)
    assert [p for p in problems if p.startswith("methods.csv")] == [
        'methods.csv:2: bits = "32": QLoRA квантует базовую модель до 8 бит или меньше',
        'methods.csv:2: bits = "32": в method_id указано 2bit',
        'methods.csv:2: bits = "32": в name_en указано 2-bit',
        'methods.csv:2: bits = "32": в name_ru указано 2 бита',
        'methods.csv:2: bits = "32": в short_name_ru указано 2 бита',
    ]
    assert (
        'memory_anchors.csv:22: memory_gb = "4": qlora_2bit на 7 млрд параметров требует хотя бы памяти под веса: 28 ГБ при разрядности 32'
        in (problems)
    )


def test_ids_the_code_names_must_exist(src):
    # seed 000's pretraining rows are recomputed on the catalog's H100 PCIe and H200 NVL
    for path in src.glob("*.csv"):
        path.write_text(path.read_text(encoding="utf-8").replace("h100-pcie", "h100-pcie-card"), encoding="utf-8")
    assert found(src) == [
        "legacy_gpu_counts.csv:4: method_id = (пусто): строка предобучения (пустой method_id) пересчитывается на "
        "h100-pcie, а этой видеокарты нет в gpus.csv"
    ]


@pytest.mark.parametrize(
    "edit, expected",
    [
        (
            lambda s: edit_csv(s / "servers.csv", ",585000,", ",5000,"),
            'servers.csv:2: price_rub_month = "5000": 31 ₽ за ГБ памяти видеокарт при медиане каталога 2 885 ₽ — '
            "отличие больше чем в 5\u00a0раз; проверьте цену",
        ),
        (
            lambda s: edit_csv(s / "gpus.csv", "RTX 5090,NVIDIA,32,", "RTX 5090,NVIDIA,4,"),
            'gpus.csv:14: memory_gb = "4": необычное значение: обычно от 8 до 400 ГБ; проверьте число',
        ),
        (
            lambda s: edit_csv(s / "gpus.csv", "H100 PCIe,NVIDIA,80,2000,756,", "H100 PCIe,NVIDIA,80,2000,100000,"),
            'gpus.csv:5: bf16_dense_tflops = "100000": необычное значение: обычно от 10 до 5000 TFLOPS; проверьте число',
        ),
        (
            lambda s: set_constant(s, "achieved_efficiency", 0.9),
            'constants.csv:49: value = "0.9": необычно для achieved_efficiency: обычно от 0.2 до 0.6; проверьте число',
        ),
        (
            lambda s: (
                (s / "constants.csv").open("a", encoding="utf-8").write("range_hi_factor,1.5,,Опечатка.,site-rules\n")
            ),
            'constants.csv:70: constant_id = "range_hi_factor": эту константу не использует ни одно правило и ни одна страница; опечатка в id?',
        ),
        (
            lambda s: edit_csv(s / "memory_anchors.csv", "full_amp,70,1200,", "full_amp,70,1000000,"),
            'memory_anchors.csv:5: memory_gb = "1000000": необычно: 14\u00a0286\u00a0байт на параметр, '
            "а полное дообучение занимает около 17 байт; проверьте число",
        ),
        (
            lambda s: (
                (s / "models.csv")
                .open("a", encoding="utf-8")
                .write("foo-7b,Foo 7B,Foo 7B,Foo,named,70,,,site-rules" + "," * 23 + "\n")
            ),
            'models.csv:47: params_b = "70": в названии 7 млрд параметров, а в params_b — 70; проверьте число',
        ),
    ],
)
def test_possible_but_unusual_values_are_warnings(src, edit, expected):
    edit(src)
    assert warned(src) == [expected]


def edge_values(which: str) -> dict[str, float]:
    """Every constant at the lowest (or highest) value its bounds allow, the relations kept."""
    from pipeline.schema import CONSTANT_BOUNDS, CONSTANT_RELATIONS

    def edge(b) -> float:
        if which == "low":
            x = b.ge if b.ge is not None else b.gt * 1.000001 + 1e-9
        else:
            x = b.le if b.le is not None else b.lt * 0.999999
        return float(math.ceil(x) if which == "low" else math.floor(x)) if b.integer else x

    values = {c: edge(b) for c, b in CONSTANT_BOUNDS.items()}
    for left, op, right in CONSTANT_RELATIONS:  # keep each relation by moving its other side a little
        if not (values[left] < values[right] if op == "<" else values[left] <= values[right]):
            if which == "low":
                values[right] = values[left] * (2 if op == "<" else 1)
            else:
                values[left] = values[right] * (0.5 if op == "<" else 1)
    return values


@pytest.mark.parametrize("which", ["low", "high"])
def test_every_constant_at_the_edge_of_its_bounds_builds(src, tmp_path, monkeypatch, which):
    # What validation lets through, the compute and render stages must survive: no division by
    # zero, no index out of range, no cast that fails, whatever the constants within their bounds.
    from pipeline.build import build
    from pipeline.problems import TemplateError
    from pipeline.render import russian

    for constant_id, value in edge_values(which).items():
        set_constant(src, constant_id, f"{value:.15f}".rstrip("0").rstrip("."))
    load_and_validate(src)  # accepted
    # Such constants may make an article's checked statement false: then the build stops with the
    # editor's message for each such statement, and for nothing else.
    try:
        build(src, tmp_path / "checked")
    except TemplateError as exc:
        assert exc.problems and all("больше не верно" in p.rule for p in exc.problems), exc.problems
    # With the statements let through, every stage survives: every page is rendered.
    monkeypatch.setattr(russian, "claim", lambda condition, statement, **now: "")
    summary = build(src, tmp_path / "out")
    assert summary["pages"] > 50 and (tmp_path / "out" / "site" / "index.html").is_file()


def test_the_editors_guide_states_the_limits_and_usual_ranges():
    from pipeline.load import MAX_FILE_BYTES
    from pipeline.problems import MAX_PER_RULE
    from pipeline.schema import EARLIEST_DATE, PRICE_PER_GB_SPREAD
    from pipeline.validate import ANCHOR_USUAL_BYTES_PER_PARAM

    guide = (SOURCES / "README.md").read_text(encoding="utf-8")

    def ru(x: float) -> str:
        return f"{x:,.10g}".replace(",", " ").replace(".", ",")

    assert f"больше {MAX_FILE_BYTES // 1_000_000} МБ" in guide
    assert f"больше {MAX_PER_RULE}" in guide
    assert f"больше чем в {PRICE_PER_GB_SPREAD} раз" in guide
    assert f"раньше {EARLIEST_DATE.year} года" in guide
    assert f"больше {ANCHOR_USUAL_BYTES_PER_PARAM} байт на параметр" in guide
    for table in SOURCE_TABLES:
        for f in table.fields:
            if f.usual:
                assert f"{ru(f.usual[0])}–{ru(f.usual[1])}" in guide, (table.name, f.name)


def test_method_ids_the_estimator_reads(src):
    # memory.Setup takes the kind of a method from its id, and a QLoRA base's bits from qlora_<N>bit
    for path in src.glob("*.csv"):
        path.write_text(path.read_text(encoding="utf-8").replace("qlora_4bit", "qlora_nf4"), encoding="utf-8")
    edit_csv(
        src / "methods.csv", "LoRA (also Freeze/GaLore/BAdam/OFT),lora,", "LoRA (also Freeze/GaLore/BAdam/OFT),full,"
    )
    assert [p for p in found(src) if p.startswith("methods.csv")] == [
        'methods.csv:3: method_id = "qlora_nf4": id способа QLoRA называет разрядность базовой модели, например '
        "qlora_4bit: расчёт читает её оттуда",
        'methods.csv:5: method_id = "lora": family = full, но расчёт берёт вид способа из id: full… — полное '
        "дообучение, qlora… — QLoRA, остальные — LoRA",
    ]


def test_the_pretraining_page_needs_a_pretraining_row(src):
    path = src / "legacy_gpu_counts.csv"
    path.write_text(path.read_text(encoding="utf-8").replace(",Pretraining,,", ",Pretraining,lora,"), encoding="utf-8")
    assert found(src) == [
        "legacy_gpu_counts.csv: method_id = (пусто): нет ни одной строки предобучения (пустой method_id): страница "
        "о предобучении пересчитывает их из статьи 000; оставьте хотя бы одну"
    ]


def test_warnings_do_not_stop_the_build(src, tmp_path):
    from pipeline.build import build

    edit_csv(src / "servers.csv", ",585000,", ",5000,")
    edit_csv(src / "gpus.csv", "RTX 5090,NVIDIA,32,", "RTX 5090,NVIDIA,4,")
    summary = build(src, tmp_path / "out", base_url="https://gpu.example/")
    shown = [str(w).replace(f"{src}/", "") for w in summary["warnings"] if "по запросу" not in w.rule]
    assert shown == [
        'gpus.csv:14: memory_gb = "4": необычное значение: обычно от 8 до 400 ГБ; проверьте число',
        'servers.csv:2: price_rub_month = "5000": 31 ₽ за ГБ памяти видеокарт при медиане каталога 2 885 ₽ — '
        "отличие больше чем в 5\xa0раз; проверьте цену",
    ]
    quality = (tmp_path / "out" / "site" / "quality.html").read_text(encoding="utf-8").replace("\xa0", " ")
    assert "необычное значение: обычно от 8 до 400 ГБ; проверьте число" in quality
    assert "отличие больше чем в 5 раз; проверьте цену" in quality


def test_one_pretraining_row_per_model(src):
    # two pretraining rows of one model gave the pretraining table a duplicate key (a traceback)
    edit_csv(
        src / "legacy_gpu_counts.csv",
        "7b-full,generic-7b,Full fine-tuning,full_amp,",
        "7b-full,generic-7b,Full fine-tuning,,",
    )
    assert found(src) == [
        'legacy_gpu_counts.csv:4: model_id = "generic-7b": вторая строка предобучения (пустой method_id) для этой '
        "модели, после строки 3; в таблице предобучения по одной строке на модель"
    ]


def test_gx_reads_each_expectations_configuration_once_per_call_with_the_same_kwargs():
    """The shortcut of pipeline.validate._fewer_configurations gives what GX's own methods give, for every
    expectation the registry generates."""
    import datetime as dt

    from pipeline import validate

    validate._import_gx()
    from great_expectations.expectations.expectation import Expectation

    domain, success = Expectation._get_domain_kwargs, Expectation._get_success_kwargs
    assert domain.__wrapped__ and success.__wrapped__
    checks = [c for table in SOURCE_TABLES for c in validate.table_checks(table, dt.date(2026, 10, 12))]
    assert len(checks) > 300
    for check in checks:
        e = check.expectation
        assert domain(e) == domain.__wrapped__(e)
        assert success(e) == success.__wrapped__(e)


def test_gx_runtime_kwargs_from_one_configuration_are_gx_own():
    """pipeline.validate._runtime_from_one_configuration gives what GX's own _get_runtime_kwargs gives,
    keys in the same order, for every expectation the registry generates and the runtime settings a
    suite's run passes."""
    import datetime as dt

    from pipeline import validate

    validate._import_gx()
    from great_expectations.expectations.expectation import Expectation

    runtime = Expectation._get_runtime_kwargs
    assert runtime.__wrapped__
    checks = [c for table in SOURCE_TABLES for c in validate.table_checks(table, dt.date(2026, 10, 12))]
    settings = [None, {}, {"result_format": "BOOLEAN_ONLY"}, {"result_format": {"result_format": "COMPLETE"}}]
    for check in checks:
        for setting in settings:
            made, own = runtime(check.expectation, setting), runtime.__wrapped__(check.expectation, setting)
            assert made == own and list(made) == list(own)

    # Installed only over GX's own method, and only where _fewer_configurations is in place.
    def on(success):
        methods = {"_get_runtime_kwargs": runtime.__wrapped__, "_get_success_kwargs": success}
        return type("Like", (), methods | {"_get_success_kwarg": Expectation._get_success_kwarg})

    own_success, shortcut = on(Expectation._get_success_kwargs.__wrapped__), on(Expectation._get_success_kwargs)
    validate._runtime_from_one_configuration(own_success)
    validate._runtime_from_one_configuration(shortcut)
    assert own_success._get_runtime_kwargs is runtime.__wrapped__
    assert shortcut._get_runtime_kwargs.__wrapped__ is runtime.__wrapped__


def test_gx_metric_ids_kept_by_content_are_the_ids_gx_makes():
    """pipeline.validate._ids_by_content: the same id as GX's own IDDict.to_id for every content, a
    kept one included; values whose JSON differs (0.0 and -0.0, 1, 1.0 and True) never share one."""
    import datetime as dt
    import math

    from pipeline import validate

    validate._import_gx()
    from great_expectations.core.id_dict import IDDict

    original = IDDict.to_id.__wrapped__
    contents = [
        {"column": "price", "min_value": 0.0, "max_value": None},
        {"column": "price", "min_value": -0.0, "max_value": None},
        {"column": "price", "min_value": 1, "max_value": None},
        {"column": "price", "min_value": 1.0, "max_value": None},
        {"column": "price", "min_value": True, "max_value": None},
        {"column": "price", "min_value": math.nan, "max_value": math.inf},
        {"max_value": None, "column": "price", "min_value": 0.0},  # another order: the same id
        {"column_list": ["a", "b"], "ignore_row_if": "all_values_are_missing"},
        {"column_list": ("a", "b"), "nested": {"x": [1, 2.5, None]}},
        {"column": "released", "max_value": dt.datetime(2026, 12, 6)},  # not kept: GX's own method
        {"column": "name"},
        {},
    ]
    ids = []
    for content in contents * 2:  # the second time from what was kept
        made = IDDict(content).to_id()
        assert made == original(IDDict(content)), content
        ids.append(made)
    assert len(set(ids[:5])) == 5
    assert ids[0] == ids[6]
    assert IDDict({"a": 1, "b": 2}).to_id(id_keys=["a"]) == original(IDDict({"a": 1, "b": 2}), ["a"])


def test_gx_expectation_types_are_the_names_gx_makes():
    from pipeline import validate

    validate._import_gx()
    import great_expectations.expectations as gxe
    import great_expectations.expectations.expectation as module
    from great_expectations import util

    assert module.camel_to_snake is not util.camel_to_snake
    for name in dir(gxe):
        if name.startswith("Expect"):
            assert module.camel_to_snake(name) == util.camel_to_snake(name)
    between = gxe.ExpectColumnValuesToBeBetween(column="price", min_value=1)
    assert between.configuration.type == "expect_column_values_to_be_between"


def test_validating_imports_neither_scipy_stats_nor_altair_nor_boto3(sources):
    """GX loads them for what the suites never use; pipeline.validate defers them (and they still import)."""
    import subprocess
    import sys

    probe = """
import pathlib, sys
from pipeline.build import load_and_validate
from pipeline import validation_cache
with validation_cache.fresh():
    load_and_validate(pathlib.Path(sys.argv[1]))
print(sorted(m for m in ("scipy.stats._stats_py", "altair.vegalite", "jsonschema.validators", "boto3") if m in sys.modules))
import scipy.stats, altair, boto3
print(scipy.stats.entropy([1, 1]) > 0, altair.Chart is not None, boto3.__name__)
"""
    done = subprocess.run(
        [sys.executable, "-c", probe, str(sources)],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "True True boto3"]
