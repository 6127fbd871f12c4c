"""The schema registry: every source and derived table, declared once.

The loader (types, DuckDB DDL), the validation (Great Expectations suites and
cross-table rules), the downloads (CSV columns) and the data dictionary page are
all generated from the declarations below. Adding a column is one edit here.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

# Ids become URLs and file names; DESIGN.md's method ids use "_", so it is
# allowed beside "-". Both are safe in paths and URLs.
ID_PATTERN = r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$"

DUCKDB_TYPES = {
    "id": "VARCHAR",
    "str": "VARCHAR",
    "int": "BIGINT",
    "float": "DOUBLE",
    "date": "DATE",
    "bool": "BOOLEAN",
}

# The same types in polars, for reading the downloads back.
POLARS_TYPES = {
    "id": pl.String,
    "str": pl.String,
    "int": pl.Int64,
    "float": pl.Float64,
    "date": pl.Date,
    "bool": pl.Boolean,
}

# Text forms a cell must match before it is cast (checked by GX on the raw strings).
TYPE_PATTERNS = {
    "id": ID_PATTERN,
    "int": r"^-?[0-9]+$",
    "float": r"^-?[0-9]+(?:\.[0-9]+)?$",
    "date": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
    "bool": r"^(?:true|false)$",
}

TYPE_NAMES_RU = {
    "id": "идентификатор",
    "str": "текст",
    "int": "целое число",
    "float": "число",
    "date": "дата (ГГГГ-ММ-ДД)",
    "bool": "да/нет (true/false)",
}


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    description_ru: str
    unit: str = ""
    required: bool = True
    allowed: tuple[str, ...] = ()
    min: float | None = None
    max: float | None = None
    references: str = ""  # "table.column" this value must exist in
    max_length: int = 200  # text and id cells
    pattern: str = ""  # an extra regex a text cell must match, explained by pattern_rule
    pattern_rule: str = ""
    label_ru: str = ""  # short Russian column header (XLSX, data dictionary)


@dataclass(frozen=True)
class Table:
    name: str
    title_ru: str
    description_ru: str
    fields: tuple[Field, ...]
    primary_key: tuple[str, ...]
    kind: str = "source"  # source | derived

    @property
    def file(self) -> str:
        return f"{self.name}.csv"

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)


def _ref() -> Field:
    return Field(
        "reference_id",
        "id",
        "Источник факта: строка из таблицы references.",
        references="references.reference_id",
        label_ru="Источник",
    )


REFERENCES = Table(
    "references",
    "Источники",
    "Внешние и внутренние источники, на которые ссылаются строки остальных таблиц.",
    (
        Field("reference_id", "id", "Идентификатор источника.", label_ru="Код источника"),
        Field("title", "str", "Название источника, как его показывать читателю.", max_length=300, label_ru="Название"),
        Field(
            "url",
            "str",
            "Адрес источника (http:// или https://); пусто для внутренних данных каталога.",
            required=False,
            max_length=500,
            pattern=r"^https?://[^\s<>\"']+$",
            pattern_rule="must be a web address starting with http:// or https://, without spaces or quotes",
            label_ru="Адрес",
        ),
        Field("publisher", "str", "Кто опубликовал источник.", required=False, label_ru="Издатель"),
        Field("checked_on", "date", "Когда данные сверены с источником.", label_ru="Проверено"),
    ),
    ("reference_id",),
)

METHODS = Table(
    "methods",
    "Способы дообучения",
    "Способы дообучения из оценочной таблицы LLaMA-Factory и их описание.",
    (
        Field("method_id", "id", "Идентификатор способа.", label_ru="Код способа"),
        Field("name_ru", "str", "Название по-русски.", label_ru="Название"),
        Field("short_name_ru", "str", "Короткое название для заголовков таблиц.", label_ru="Краткое название"),
        Field("name_en", "str", "Название по-английски.", label_ru="Название по-английски"),
        Field("family", "str", "Группа способа.", allowed=("full", "lora", "qlora"), label_ru="Группа"),
        Field("trained_ru", "str", "Что меняется в модели.", max_length=600, label_ru="Что обучается"),
        Field("memory_goes_ru", "str", "На что уходит память.", max_length=600, label_ru="Куда уходит память"),
        Field("bits", "int", "Разрядность базовых весов.", unit="бит", min=1, max=32, label_ru="Разрядность, бит"),
        Field(
            "theoretical_min_applies",
            "bool",
            "Показывать ли теоретический минимум (вес + градиент + AdamW, байты из constants).",
            label_ru="Теоретический минимум",
        ),
        Field("sort_order", "int", "Порядок показа: от меньшей памяти к большей.", min=0, max=1000, label_ru="Порядок"),
        _ref(),
    ),
    ("method_id",),
)

MEMORY_ANCHORS = Table(
    "memory_anchors",
    "Опорная таблица памяти",
    "Память на дообучение для опорных размеров модели: одна строка на клетку таблицы LLaMA-Factory.",
    (
        Field("method_id", "id", "Способ дообучения.", references="methods.method_id", label_ru="Код способа"),
        Field(
            "params_b",
            "float",
            "Опорный размер модели.",
            unit="млрд параметров",
            min=0.01,
            max=100000,
            label_ru="Размер модели, млрд параметров",
        ),
        Field("memory_gb", "float", "Оценка памяти.", unit="ГБ", min=0.01, max=1000000, label_ru="Память, ГБ"),
        _ref(),
    ),
    ("method_id", "params_b"),
)

MODELS = Table(
    "models",
    "Модели",
    "Модели: условные размеры из статей и реальные открытые модели.",
    (
        Field("model_id", "id", "Идентификатор модели.", label_ru="Код модели"),
        Field("display_name", "str", "Название для читателя.", label_ru="Название"),
        Field("short_name", "str", "Короткое название для заголовков таблиц.", label_ru="Краткое название"),
        Field("family", "str", "Семейство модели.", label_ru="Семейство"),
        Field("kind", "str", "Условный размер или реальная модель.", allowed=("generic", "named"), label_ru="Вид"),
        Field(
            "params_b",
            "float",
            "Всего параметров (у MoE — все эксперты).",
            unit="млрд",
            min=0.01,
            max=100000,
            label_ru="Параметров, млрд",
        ),
        Field(
            "active_params_b",
            "float",
            "Активных параметров на токен у MoE; пусто у плотных моделей.",
            unit="млрд",
            required=False,
            min=0.01,
            max=100000,
            label_ru="Активных параметров, млрд",
        ),
        Field("licence", "str", "Лицензия весов; пусто у условных размеров.", required=False, label_ru="Лицензия"),
        _ref(),
    ),
    ("model_id",),
)

GPUS = Table(
    "gpus",
    "Видеокарты",
    "Характеристики видеокарт (ускорителей), которые сравнивают покупатели.",
    (
        Field("gpu_id", "id", "Идентификатор карты.", label_ru="Код карты"),
        Field("name", "str", "Название карты.", label_ru="Название"),
        Field("short_name", "str", "Короткое название для заголовков таблиц.", label_ru="Краткое название"),
        Field("vendor", "str", "Производитель.", allowed=("NVIDIA", "AMD"), label_ru="Производитель"),
        Field("memory_gb", "float", "Видеопамять одной карты.", unit="ГБ", min=1, max=2000, label_ru="Память, ГБ"),
        Field(
            "memory_bandwidth_gbs",
            "float",
            "Пропускная способность памяти.",
            unit="ГБ/с",
            min=1,
            max=100000,
            label_ru="Пропускная способность памяти, ГБ/с",
        ),
        Field(
            "bf16_dense_tflops",
            "float",
            "Пиковая производительность BF16 без разреженности.",
            unit="TFLOPS",
            min=1,
            max=100000,
            label_ru="BF16 без разреженности, TFLOPS",
        ),
        Field(
            "fp8_dense_tflops",
            "float",
            "Пиковая производительность FP8 без разреженности; пусто, если FP8 нет.",
            unit="TFLOPS",
            required=False,
            min=1,
            max=100000,
            label_ru="FP8 без разреженности, TFLOPS",
        ),
        Field(
            "interconnect",
            "str",
            "Связь между картами.",
            allowed=("nvlink", "nvlink-bridge", "infinity-fabric", "pcie"),
            label_ru="Связь карт",
        ),
        Field(
            "link_gbs",
            "float",
            "Скорость связи карта-карта (в обе стороны); пусто, если только PCIe.",
            unit="ГБ/с",
            required=False,
            min=1,
            max=100000,
            label_ru="Скорость связи, ГБ/с",
        ),
        Field("form_factor", "str", "Исполнение.", allowed=("sxm", "oam", "pcie"), label_ru="Исполнение"),
        Field(
            "memory_note_ru",
            "str",
            "Оговорка об объёме памяти, если источники расходятся.",
            required=False,
            max_length=600,
            label_ru="Примечание о памяти",
        ),
        _ref(),
    ),
    ("gpu_id",),
)

SERVERS = Table(
    "servers",
    "Серверы каталога",
    "Конфигурации серверов каталога с ценой аренды.",
    (
        Field("server_id", "id", "Идентификатор конфигурации.", label_ru="Код сервера"),
        Field("display_name", "str", "Название для читателя.", label_ru="Название"),
        Field("platform", "str", "Платформа (модель сервера).", label_ru="Платформа"),
        Field("gpu_id", "id", "Карта в сервере.", references="gpus.gpu_id", label_ru="Код карты"),
        Field("gpu_count", "int", "Число карт.", unit="шт.", min=1, max=64, label_ru="Карт, шт."),
        Field(
            "interconnect",
            "str",
            "Как соединены карты в сервере.",
            allowed=("nvswitch", "nvlink-bridge", "infinity-fabric", "pcie"),
            label_ru="Связь карт",
        ),
        Field(
            "price_rub_month",
            "int",
            "Цена аренды в месяц; пусто — цена по запросу.",
            unit="₽/мес",
            required=False,
            min=1,
            max=10_000_000_000,
            label_ru="Цена, ₽/мес",
        ),
        Field("price_checked_on", "date", "Дата цены.", required=False, label_ru="Дата цены"),
        _ref(),
    ),
    ("server_id",),
)

CONSTANTS = Table(
    "constants",
    "Константы правил",
    "Числа, на которых стоят правила расчёта: диапазон оценки, байты на параметр, формула времени.",
    (
        Field("constant_id", "id", "Идентификатор константы.", label_ru="Код константы"),
        Field("value", "float", "Значение.", min=0, max=1_000_000, label_ru="Значение"),
        Field("unit", "str", "Единица измерения.", required=False, label_ru="Единица"),
        Field("description_ru", "str", "Что означает константа.", max_length=600, label_ru="Описание"),
        _ref(),
    ),
    ("constant_id",),
)

LEGACY_GPU_COUNTS = Table(
    "legacy_gpu_counts",
    "Прежняя таблица числа карт",
    "Сводная таблица числа карт H100 и H200 из прежней статьи «Сколько GPU нужно» — для сравнения с правилами.",
    (
        Field("row_id", "id", "Идентификатор строки.", label_ru="Код строки"),
        Field("model_id", "id", "Модель.", references="models.model_id", label_ru="Код модели"),
        Field("task_ru", "str", "Тип обучения, как в статье.", label_ru="Задача"),
        Field(
            "method_id",
            "id",
            "Способ по правилам, с которым сравнивать; пусто — правила его не покрывают (предобучение).",
            required=False,
            references="methods.method_id",
            label_ru="Код способа",
        ),
        Field("h100_cards_text", "str", "Число карт H100 80 ГБ, как в статье.", label_ru="Карт H100 (как в статье)"),
        Field("h200_cards_text", "str", "Число карт H200 141 ГБ, как в статье.", label_ru="Карт H200 (как в статье)"),
        Field(
            "nvlink_text",
            "str",
            "Нужен ли NVLink, как в статье.",
            allowed=("нет", "желательно", "обязательно"),
            label_ru="NVLink (как в статье)",
        ),
        Field("sort_order", "int", "Порядок строки в статье.", min=0, max=1000, label_ru="Порядок"),
        _ref(),
    ),
    ("row_id",),
)

LEGACY_OFFERS = Table(
    "legacy_offers",
    "Прежние рекомендации конфигураций",
    "Таблица «задача → сервер → цена» из прежней статьи: какой сервер каталога советовали под задачу.",
    (
        Field("offer_id", "id", "Идентификатор рекомендации.", label_ru="Код рекомендации"),
        Field("task_ru", "str", "Задача, как в статье.", label_ru="Задача"),
        Field("server_id", "id", "Рекомендованный сервер.", references="servers.server_id", label_ru="Код сервера"),
        Field("sort_order", "int", "Порядок строки в статье.", min=0, max=1000, label_ru="Порядок"),
        _ref(),
    ),
    ("offer_id",),
)

LEGACY_OFFER_JOBS = Table(
    "legacy_offer_jobs",
    "Задачи прежних рекомендаций",
    "Из каких задач (модель × способ) состоит каждая рекомендация; пустой способ — предобучение.",
    (
        Field("offer_id", "id", "Рекомендация.", references="legacy_offers.offer_id", label_ru="Код рекомендации"),
        Field("model_id", "id", "Модель.", references="models.model_id", label_ru="Код модели"),
        Field(
            "method_id",
            "id",
            "Способ; пусто — предобучение, которое правила дообучения не оценивают.",
            required=False,
            references="methods.method_id",
            label_ru="Код способа",
        ),
    ),
    ("offer_id", "model_id", "method_id"),
)

SOURCE_TABLES: tuple[Table, ...] = (
    REFERENCES,
    CONSTANTS,
    METHODS,
    MEMORY_ANCHORS,
    MODELS,
    GPUS,
    SERVERS,
    LEGACY_GPU_COUNTS,
    LEGACY_OFFERS,
    LEGACY_OFFER_JOBS,
)

ESTIMATES = Table(
    "estimates",
    "Оценки памяти",
    "Оценка памяти на дообучение для каждой модели и каждого способа.",
    (
        Field("model_id", "id", "Модель.", references="models.model_id", label_ru="Код модели"),
        Field("params_b", "float", "Всего параметров.", unit="млрд", label_ru="Параметров, млрд"),
        Field("method_id", "id", "Способ дообучения.", references="methods.method_id", label_ru="Код способа"),
        Field("memory_gb", "float", "Оценка памяти (интерполяция опорной таблицы).", unit="ГБ", label_ru="Память, ГБ"),
        Field("memory_low_gb", "float", "Нижняя граница диапазона (−30 %).", unit="ГБ", label_ru="Память −30 %, ГБ"),
        Field("memory_high_gb", "float", "Верхняя граница диапазона (+50 %).", unit="ГБ", label_ru="Память +50 %, ГБ"),
        Field(
            "theoretical_min_gb",
            "float",
            "Теоретический минимум (байты на параметр × параметры); пусто, если для способа не задан.",
            unit="ГБ",
            required=False,
            label_ru="Теоретический минимум, ГБ",
        ),
        Field(
            "basis",
            "str",
            "Как получена оценка: anchor — опорная точка, interpolated — между опорными, "
            "below_range — пропорционально ниже наименьшей, extrapolated — пропорционально выше наибольшей.",
            allowed=("anchor", "interpolated", "below_range", "extrapolated"),
            label_ru="Основа оценки",
        ),
        Field(
            "extrapolated",
            "bool",
            "Размер больше наибольшего опорного: оценка — экстраполяция.",
            label_ru="Экстраполяция",
        ),
    ),
    ("model_id", "method_id"),
    kind="derived",
)

GPU_FIT = Table(
    "gpu_fit",
    "Число карт",
    "Сколько карт каждой модели GPU нужно для каждой модели и способа.",
    (
        Field("model_id", "id", "Модель.", references="models.model_id", label_ru="Код модели"),
        Field("method_id", "id", "Способ дообучения.", references="methods.method_id", label_ru="Код способа"),
        Field("gpu_id", "id", "Карта.", references="gpus.gpu_id", label_ru="Код карты"),
        Field("gpu_memory_gb", "float", "Память одной карты.", unit="ГБ", label_ru="Память карты, ГБ"),
        Field("memory_gb", "float", "Оценка памяти.", unit="ГБ", label_ru="Память, ГБ"),
        Field("memory_high_gb", "float", "Оценка памяти +50 %.", unit="ГБ", label_ru="Память +50 %, ГБ"),
        Field("cards", "int", "Карт по оценке: вверх(оценка / память карты).", unit="шт.", label_ru="Карт, шт."),
        Field(
            "cards_high",
            "int",
            "Карт при +50 %: вверх(верхняя граница / память карты).",
            unit="шт.",
            label_ru="Карт при +50 %, шт.",
        ),
        Field(
            "nvlink_need",
            "str",
            "Нужна ли быстрая связь карт: no — одна карта и при +50 %; "
            "recommended — одна по оценке, больше при +50 %; required — две и больше по оценке.",
            allowed=("no", "recommended", "required"),
            label_ru="Нужна быстрая связь",
        ),
    ),
    ("model_id", "method_id", "gpu_id"),
    kind="derived",
)

SERVER_FIT = Table(
    "server_fit",
    "Серверы под задачу",
    "Помещается ли задача (модель × способ) в память каждого сервера каталога.",
    (
        Field("model_id", "id", "Модель.", references="models.model_id", label_ru="Код модели"),
        Field("method_id", "id", "Способ дообучения.", references="methods.method_id", label_ru="Код способа"),
        Field("server_id", "id", "Сервер.", references="servers.server_id", label_ru="Код сервера"),
        Field("server_memory_gb", "float", "Суммарная видеопамять сервера.", unit="ГБ", label_ru="Память сервера, ГБ"),
        Field("memory_gb", "float", "Оценка памяти.", unit="ГБ", label_ru="Память, ГБ"),
        Field("memory_high_gb", "float", "Оценка памяти +50 %.", unit="ГБ", label_ru="Память +50 %, ГБ"),
        Field(
            "fit",
            "str",
            "yes — память не меньше верхней границы; estimate_only — не меньше оценки, "
            "но меньше верхней границы; no — меньше оценки.",
            allowed=("yes", "estimate_only", "no"),
            label_ru="Помещается",
        ),
        Field("servers_needed", "int", "Сколько таких серверов нужно по оценке.", unit="шт.", label_ru="Серверов, шт."),
        Field(
            "servers_needed_high",
            "int",
            "Сколько таких серверов нужно при +50 %.",
            unit="шт.",
            label_ru="Серверов при +50 %, шт.",
        ),
        Field(
            "price_rub_month",
            "int",
            "Цена одного сервера; пусто — по запросу.",
            unit="₽/мес",
            required=False,
            label_ru="Цена сервера, ₽/мес",
        ),
    ),
    ("model_id", "method_id", "server_id"),
    kind="derived",
)

DERIVED_TABLES: tuple[Table, ...] = (ESTIMATES, GPU_FIT, SERVER_FIT)
ALL_TABLES: tuple[Table, ...] = SOURCE_TABLES + DERIVED_TABLES

# Constants the rules read from sources/constants.csv; each must be present.
REQUIRED_CONSTANTS = (
    "range_low_factor",
    "range_high_factor",
    "adamw_weight_bytes",
    "adamw_grad_bytes",
    "adamw_optimizer_bytes",
    "train_flops_per_param_token",
    "legacy_full_bytes_per_param",
    "legacy_overhead_low",
    "legacy_overhead_high",
    "stale_after_days",
    "default_utilization",
    "hours_per_month",
)

# Which server interconnect a GPU of each form factor can have.
SERVER_INTERCONNECTS = {
    "sxm": ("nvswitch",),
    "oam": ("infinity-fabric",),
    "pcie": ("pcie", "nvlink-bridge"),
}

# Control and bidirectional-formatting characters: invisible, and able to make a
# cell display as something else (e.g. U+202E RIGHT-TO-LEFT OVERRIDE).
HIDDEN_CHARACTERS = "[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f\\u200b-\\u200f\\u202a-\\u202e\\u2066-\\u2069\\ufeff]"
TABLES_BY_NAME = {t.name: t for t in ALL_TABLES}


def ddl(table: Table, prefix: str = "") -> str:
    """CREATE TABLE statement for a table, with types, NOT NULL and primary key."""
    cols = []
    for f in table.fields:
        col = f"{f.name} {DUCKDB_TYPES[f.type]}"
        if f.required and f.name not in table.primary_key:
            col += " NOT NULL"
        cols.append(col)
    if not any(not table.field(k).required for k in table.primary_key):
        cols.append(f"PRIMARY KEY ({', '.join(table.primary_key)})")
    return f'CREATE TABLE "{prefix}{table.name}" ({", ".join(cols)})'
