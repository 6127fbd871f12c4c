"""The schema registry: every source and derived table, declared once.

The loader (types, DuckDB DDL), the validation (Great Expectations suites and
cross-table rules), the downloads (CSV columns) and the data dictionary page are
all generated from the declarations below. Adding a column is one edit here.
"""

from __future__ import annotations

import datetime as dt
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
    # Values outside this range are possible but rare: a warning asks the editor to check them.
    usual: tuple[float, float] | None = None


@dataclass(frozen=True)
class Table:
    name: str
    title_ru: str
    description_ru: str
    fields: tuple[Field, ...]
    primary_key: tuple[str, ...]
    kind: str = "source"  # source | derived
    min_rows: int = 1  # a source table needs at least this many rows (a header alone is an accident)

    @property
    def file(self) -> str:
        return f"{self.name}.csv"

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def polars_schema(self) -> dict[str, pl.DataType]:
        """The columns with their polars types: what a derived table's frame is built with."""
        return {f.name: POLARS_TYPES[f.type] for f in self.fields}

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


def _arch(name: str, description_ru: str, label_ru: str, unit: str = "измерений", min: float = 1) -> Field:
    """An optional architecture column of models.csv: a whole number from the model's config.json."""
    return Field(name, "int", description_ru, unit=unit, required=False, min=min, max=10_000_000, label_ru=label_ru)


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
            usual=(0.1, 2000),
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
        # Architecture from the model's config.json: all core columns (layers … qkv_bias) or none.
        _arch("layers", "Число слоёв декодера (num_hidden_layers).", "Слоёв", unit="шт."),
        _arch("hidden_size", "Размер скрытого состояния (hidden_size).", "Скрытый размер"),
        _arch(
            "intermediate_size",
            "Ширина плотного MLP (intermediate_size; у ChatGLM — ffn_hidden_size).",
            "Ширина MLP",
        ),
        _arch(
            "attention_heads", "Число голов внимания для запросов (num_attention_heads).", "Голов внимания", unit="шт."
        ),
        _arch(
            "kv_heads",
            "Число голов ключей и значений (num_key_value_heads; равно attention_heads без GQA, 1 у MQA).",
            "Голов ключей/значений",
            unit="шт.",
        ),
        _arch(
            "head_dim",
            "Размер одной головы внимания (head_dim); у MLA — размер головы запроса и ключа "
            "(qk_nope_head_dim + qk_rope_head_dim).",
            "Размер головы",
        ),
        _arch("vocab_size", "Размер словаря (vocab_size): строк в таблице эмбеддингов.", "Словарь", unit="токенов"),
        Field(
            "tied_embeddings",
            "bool",
            "Выходной слой (LM head) использует веса входных эмбеддингов (tie_word_embeddings).",
            required=False,
            label_ru="Общие эмбеддинги",
        ),
        Field(
            "mlp_kind",
            "str",
            "Устройство MLP: gated — SwiGLU/GeGLU, три матрицы (gate, up, down); plain — две матрицы (up, down).",
            required=False,
            allowed=("gated", "plain"),
            label_ru="Вид MLP",
        ),
        Field(
            "qkv_bias",
            "bool",
            "У проекций запросов, ключей и значений есть смещения (bias).",
            required=False,
            label_ru="Смещения QKV",
        ),
        _arch(
            "experts", "MoE: число маршрутизируемых экспертов в слое; пусто у плотных моделей.", "Экспертов", unit="шт."
        ),
        _arch(
            "experts_per_token",
            "MoE: сколько маршрутизируемых экспертов работает на токен (num_experts_per_tok).",
            "Экспертов на токен",
            unit="шт.",
        ),
        _arch(
            "shared_experts",
            "MoE: общие эксперты, работающие на каждом токене (n_shared_experts); пусто — нет.",
            "Общих экспертов",
            unit="шт.",
            min=0,
        ),
        _arch("moe_intermediate_size", "MoE: ширина MLP одного эксперта (moe_intermediate_size).", "Ширина эксперта"),
        _arch(
            "dense_layers",
            "MoE: число первых слоёв с плотным MLP вместо экспертов (у DeepSeek first_k_dense_replace = 3); пусто — 0.",
            "Плотных слоёв",
            unit="шт.",
            min=0,
        ),
        Field(
            "attention_kind",
            "str",
            "Вид внимания: mha — обычное многоголовое (в том числе GQA и MQA), mla — латентное внимание DeepSeek; "
            "пусто — mha.",
            required=False,
            allowed=("mha", "mla"),
            label_ru="Вид внимания",
        ),
        _arch("q_lora_rank", "MLA: ранг сжатия запроса (q_lora_rank).", "Ранг запроса MLA"),
        _arch("kv_lora_rank", "MLA: ранг сжатия ключей и значений (kv_lora_rank).", "Ранг KV MLA"),
        _arch(
            "qk_rope_head_dim", "MLA: часть головы запроса и ключа с RoPE (qk_rope_head_dim).", "RoPE-часть головы MLA"
        ),
        _arch(
            "qk_nope_head_dim",
            "MLA: часть головы запроса и ключа без RoPE (qk_nope_head_dim).",
            "Часть головы без RoPE MLA",
        ),
        _arch("v_head_dim", "MLA: размер головы значений (v_head_dim).", "Размер головы значений MLA"),
        Field(
            "arch_reference_id",
            "id",
            "Источник архитектуры (config.json модели): строка из таблицы references; пусто без архитектуры.",
            required=False,
            references="references.reference_id",
            label_ru="Источник архитектуры",
        ),
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
        Field(
            "memory_gb",
            "float",
            "Видеопамять одной карты.",
            unit="ГБ",
            min=1,
            max=2000,
            label_ru="Память, ГБ",
            usual=(8, 400),
        ),
        Field(
            "memory_bandwidth_gbs",
            "float",
            "Пропускная способность памяти.",
            unit="ГБ/с",
            min=1,
            max=100000,
            label_ru="Пропускная способность памяти, ГБ/с",
            usual=(100, 20000),
        ),
        Field(
            "bf16_dense_tflops",
            "float",
            "Пиковая производительность BF16 без разреженности.",
            unit="TFLOPS",
            min=1,
            max=100000,
            label_ru="BF16 без разреженности, TFLOPS",
            usual=(10, 5000),
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
            usual=(20, 10000),
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
            usual=(16, 5000),
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

# Inter-node networks a server may declare (servers.network): fabric and line rate per port.
SERVER_NETWORKS = ("infiniband-ndr", "infiniband-hdr", "roce-400", "roce-200", "ethernet-100")

SERVERS = Table(
    "servers",
    "Серверы каталога",
    "Конфигурации серверов каталога с ценой аренды.",
    (
        Field("server_id", "id", "Идентификатор конфигурации.", label_ru="Код сервера"),
        Field("display_name", "str", "Название для читателя.", label_ru="Название"),
        Field("platform", "str", "Платформа (модель сервера).", label_ru="Платформа"),
        Field("gpu_id", "id", "Карта в сервере.", references="gpus.gpu_id", label_ru="Код карты"),
        Field("gpu_count", "int", "Число карт.", unit="шт.", min=1, max=64, label_ru="Карт, шт.", usual=(1, 16)),
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
            min=1000,
            max=10_000_000_000,
            label_ru="Цена, ₽/мес",
        ),
        Field("price_checked_on", "date", "Дата цены.", required=False, label_ru="Дата цены"),
        Field(
            "min_term_months",
            "int",
            "Наименьший срок аренды по месячной цене; пусто — один месяц.",
            unit="мес",
            required=False,
            min=1,
            max=36,
            label_ru="Мин. срок, мес",
        ),
        Field(
            "price_rub_hour",
            "int",
            "Цена аренды за час, если сервер сдаётся почасово; пусто — только помесячно.",
            unit="₽/ч",
            required=False,
            min=1,
            max=100_000_000,
            label_ru="Цена, ₽/ч",
        ),
        Field(
            "network",
            "str",
            "Сеть между серверами для задачи на нескольких серверах; пусто — не заявлена, "
            "и задачу на несколько таких серверов сайт не рекомендует.",
            required=False,
            allowed=SERVER_NETWORKS,
            label_ru="Сеть между серверами",
        ),
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

# Techniques a measured row may use that the first-principles estimator does not model.
EXTRA_TECHNIQUES = (
    "torch_compile",
    "frozen_fp32",
    "quantized_lm_head",
    "lora_lm_head",
    "fsdp_frozen_unsharded",
    "optimizer_in_backward",
    "activation_offloading",
    "unsloth_kernels",
    "dora",
    "ia3",
    "prompt_tuning",
    "double_quant",
    "lora_dropout",
    "unknown_lengths",
)
# Loss implementations a measurement may name (memory.LOSSES) and the libraries it may come from.
MEASUREMENT_LOSSES = ("hf", "hf_legacy", "chunked", "fused")
FRAMEWORKS = ("transformers", "litgpt", "torchtune", "llama_factory", "unsloth", "axolotl", "deepspeed", "other")
# Adapters without a rank: their rows leave lora_rank and lora_targets empty although the method is lora.
RANKLESS_ADAPTERS = ("ia3", "prompt_tuning")
_TECHNIQUE = f"(?:{'|'.join(EXTRA_TECHNIQUES)})"

MEASUREMENTS = Table(
    "measurements",
    "Измерения пиковой памяти",
    "Опубликованные измерения пиковой видеопамяти при дообучении с их конфигурацией: "
    "по ним проверяются оценки справочника.",
    (
        Field("measurement_id", "id", "Идентификатор измерения.", label_ru="Код измерения"),
        Field(
            "anchor_row",
            "int",
            "Номер строки в проверочном наборе (раздел 6 справочного файла estimator-anchors.md); "
            "пусто у измерений из обсуждений LLaMA-Factory (раздел 1.3).",
            required=False,
            min=1,
            max=1000,
            label_ru="Строка набора",
        ),
        Field("model_id", "id", "Модель.", references="models.model_id", label_ru="Код модели"),
        Field("method_id", "id", "Способ дообучения.", references="methods.method_id", label_ru="Код способа"),
        Field(
            "optimizer",
            "str",
            "Оптимизатор: adamw — AdamW PyTorch (foreach), adamw_fused — он же одним ядром, adamw_8bit — 8-битный "
            "AdamW, paged_adamw и paged_adamw_8bit — их страничные варианты bitsandbytes, sgd — SGD с моментом.",
            allowed=("adamw", "adamw_fused", "adamw_8bit", "paged_adamw", "paged_adamw_8bit", "sgd"),
            label_ru="Оптимизатор",
        ),
        Field(
            "seq_len",
            "int",
            "Длина последовательности, на которой достигнут пик: длина упаковки или заявленная "
            "максимальная (самая длинная) длина.",
            unit="токенов",
            min=1,
            max=10_000_000,
            label_ru="Длина последовательности, токенов",
        ),
        Field(
            "micro_batch",
            "int",
            "Последовательностей в одном проходе на карту.",
            min=1,
            max=100_000,
            label_ru="Микробатч",
        ),
        Field(
            "grad_accum",
            "int",
            "Шагов накопления градиента (память не растёт, растёт эффективный батч).",
            min=1,
            max=100_000,
            label_ru="Накопление градиента",
        ),
        Field("gpus", "int", "Число карт в запуске.", unit="шт.", min=1, max=100_000, label_ru="Карт, шт."),
        Field(
            "sharding",
            "str",
            "Распределение состояний по картам: ddp — без шардирования (и одна карта), zero1/zero2/zero3 — "
            "ступени ZeRO (FSDP с полным шардированием = zero3).",
            allowed=("ddp", "zero1", "zero2", "zero3"),
            label_ru="Шардирование",
        ),
        Field(
            "offload",
            "str",
            "Выгрузка в память CPU: none — нет, optimizer — состояния оптимизатора, full — оптимизатор и веса.",
            allowed=("none", "optimizer", "full"),
            label_ru="Выгрузка на CPU",
        ),
        Field("grad_checkpointing", "bool", "Контрольные точки активаций (пересчёт).", label_ru="Контрольные точки"),
        Field(
            "flash_attention",
            "bool",
            "Внимание без квадратичной по длине матрицы: FlashAttention-2, flash-ядро PyTorch SDPA, Unsloth.",
            label_ru="Flash-внимание",
        ),
        Field(
            "lora_rank",
            "int",
            "Ранг LoRA; пусто у полного дообучения и у адаптеров без ранга (IA3, prompt tuning).",
            required=False,
            min=1,
            max=65_536,
            label_ru="Ранг LoRA",
        ),
        Field(
            "lora_targets",
            "str",
            "Слои с LoRA: qv — только q и v, qkv — q, k и v, attention — все проекции внимания, all — все линейные "
            "слои; пусто у полного дообучения и у адаптеров без ранга.",
            required=False,
            allowed=("qv", "qkv", "attention", "all"),
            label_ru="Слои LoRA",
        ),
        Field(
            "loss",
            "str",
            "Как посчитана функция потерь: hf — кросс-энтропия transformers с 4.46 (логиты bf16 переводятся в fp32), "
            "hf_legacy — она же до 4.46 (ещё одна fp32-копия), chunked — выходной слой и кросс-энтропия по кускам "
            "(torchtune, LitGPT), fused — слитое ядро выходного слоя и потерь (Liger, Unsloth).",
            allowed=MEASUREMENT_LOSSES,
            label_ru="Функция потерь",
        ),
        Field(
            "framework",
            "str",
            "Чем обучали: transformers — Trainer, TRL, PEFT и accelerate Hugging Face; litgpt, torchtune, "
            "llama_factory, unsloth, axolotl — одноимённые библиотеки; deepspeed — собственный цикл на DeepSpeed; "
            "other — другое. Библиотеки по-разному хранят одни и те же тензоры (см. страницу точности).",
            allowed=FRAMEWORKS,
            label_ru="Библиотека",
        ),
        Field(
            "extra_techniques",
            "str",
            "Особенности запуска через запятую: "
            + ", ".join(EXTRA_TECHNIQUES)
            + ". double_quant, lora_dropout, frozen_fp32 (несжатые замороженные веса в fp32), quantized_lm_head "
            "(QLoRA сжимает и выходной слой), lora_lm_head (адаптер на выходном слое) и optimizer_in_backward "
            "оценка учитывает; unknown_lengths — длина примеров неизвестна "
            "(seq_len — только верхняя граница); с остальными строка показывается, но не входит в сводку "
            "точности. Пусто — таких нет.",
            required=False,
            pattern=f"^{_TECHNIQUE}(?:,{_TECHNIQUE})*$",
            pattern_rule="must be a comma-separated list (no spaces) of: " + ", ".join(EXTRA_TECHNIQUES),
            label_ru="Прочие приёмы",
        ),
        Field(
            "gpu_id",
            "id",
            "Карта, на которой мерили; пусто, если источник её не называет.",
            required=False,
            references="gpus.gpu_id",
            label_ru="Код карты",
        ),
        Field(
            "outcome",
            "str",
            "Итог: value — пик измерен, oom — не хватило памяти.",
            allowed=("value", "oom"),
            label_ru="Итог",
        ),
        Field(
            "measured_value",
            "float",
            "Пиковая память на одну карту, как в источнике; пусто при oom.",
            unit="ГБ или ГиБ (measured_unit)",
            required=False,
            min=0.01,
            max=100_000,
            label_ru="Пик памяти",
        ),
        Field(
            "measured_unit",
            "str",
            "Единица, как её пишет источник: GB (10^9 байт) или GiB (2^30 байт); если не пишет — GB, и это сказано в примечании.",
            allowed=("GB", "GiB"),
            label_ru="Единица",
        ),
        Field(
            "metric",
            "str",
            "Что измерено: allocated — max_memory_allocated, reserved — max_memory_reserved, reserved_delta — прирост "
            "reserved от старта, active — пик active_bytes, nvidia_smi — по nvidia-smi, unknown — не указано, "
            "fits_on — источник говорит лишь, что обучение поместилось в столько памяти (бюджет карты).",
            allowed=("allocated", "reserved", "reserved_delta", "active", "nvidia_smi", "unknown", "fits_on"),
            label_ru="Метрика",
        ),
        Field(
            "note_ru",
            "str",
            "Что сказано в источнике и какие значения приняты по предположению.",
            max_length=800,
            label_ru="Примечание",
        ),
        _ref(),
    ),
    ("measurement_id",),
)

TYPICAL_SETUP = Table(
    "typical_setup",
    "Типовая постановка",
    "Постановка обучения, которую показывают страницы моделей, таблица memory_breakdown и подробный режим "
    "калькулятора и которую берёт по умолчанию команда estimate: одна строка на параметр.",
    (
        Field("setting_id", "id", "Параметр постановки (их список — в sources/README.md).", label_ru="Параметр"),
        Field("value", "str", "Значение: число, true/false или вариант из списка.", max_length=40, label_ru="Значение"),
        Field("description_ru", "str", "Почему выбрано это значение.", max_length=600, label_ru="Обоснование"),
        _ref(),
    ),
    ("setting_id",),
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
    MEASUREMENTS,
    TYPICAL_SETUP,
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
            "recommended — одна по оценке, больше при +50 %; required — две и больше по оценке; "
            "pcie_only — у карты нет NVLink, и карт нужно больше одной: обмен идёт только по PCIe.",
            allowed=("no", "recommended", "required", "pcie_only"),
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


def _part(name: str, what: str, label: str) -> Field:
    return Field(f"{name}_gb", "float", what, unit="ГБ", label_ru=f"{label}, ГБ")


def _setup_fields() -> tuple[Field, ...]:
    """The training setup columns shared by the estimator's tables."""
    return (
        Field(
            "optimizer",
            "str",
            "Оптимизатор.",
            allowed=("adamw", "adamw_fused", "adamw_8bit", "paged_adamw", "paged_adamw_8bit", "sgd"),
            label_ru="Оптимизатор",
        ),
        Field("seq_len", "int", "Длина последовательности.", unit="токенов", label_ru="Длина, токенов"),
        Field("micro_batch", "int", "Последовательностей на карту за шаг.", unit="шт.", label_ru="Микробатч"),
        Field("gpus", "int", "Карт в обучении.", unit="шт.", label_ru="Карт"),
        Field(
            "sharding",
            "str",
            "Разделение между картами: ddp — нет; zero1 — состояния оптимизатора; zero2 — и градиенты; "
            "zero3 (FSDP) — и веса.",
            allowed=("ddp", "zero1", "zero2", "zero3"),
            label_ru="Шардирование",
        ),
        Field("grad_checkpointing", "bool", "Контрольные точки активаций (пересчёт).", label_ru="Контрольные точки"),
        Field("flash_attention", "bool", "Внимание в стиле FlashAttention.", label_ru="FlashAttention"),
    )


MEMORY_BREAKDOWN = Table(
    "memory_breakdown",
    "Память по составляющим",
    "Оценка из первых принципов для каждой модели и способа в типовой постановке: "
    "из чего складывается память одной карты.",
    (
        Field("model_id", "id", "Модель.", references="models.model_id", label_ru="Код модели"),
        Field("method_id", "id", "Способ дообучения.", references="methods.method_id", label_ru="Код способа"),
        *_setup_fields(),
        Field("lora_rank", "int", "Ранг LoRA; пусто для полного дообучения.", required=False, label_ru="Ранг LoRA"),
        Field(
            "lora_targets",
            "str",
            "Слои с адаптером: qv, qkv, attention (все проекции внимания), all (все линейные); пусто для полного.",
            required=False,
            allowed=("qv", "qkv", "attention", "all"),
            label_ru="Слои LoRA",
        ),
        Field("trainable_params", "float", "Обучаемых параметров.", unit="шт.", label_ru="Обучаемых параметров"),
        _part("weights", "Веса модели на карте (16 бит, сжатые для QLoRA, с адаптером).", "Веса"),
        _part("gradients", "Градиенты обучаемых параметров.", "Градиенты"),
        _part("optimizer", "Состояния оптимизатора (со 32-битной копией весов при смешанной точности).", "Оптимизатор"),
        _part("activations", "Активации, сохранённые для обратного прохода.", "Активации"),
        _part("logits", "Логиты выходного слоя и буферы функции потерь.", "Логиты и потери"),
        _part(
            "buffers",
            "Временные буферы: собранные слои ZeRO-3, распакованный вес QLoRA, временные тензоры шага оптимизатора.",
            "Буферы",
        ),
        _part("overhead", "Кэш распределителя памяти и контекст CUDA.", "Накладные расходы"),
        _part("allocated", "Выдано тензорам на пике (torch.cuda.max_memory_allocated).", "Выдано тензорам"),
        _part("reserved", "Занято распределителем PyTorch на пике (max_memory_reserved).", "Занято распределителем"),
        _part("total", "Вся занятая память карты (как в nvidia-smi): то, что должно поместиться.", "Всего на карту"),
        Field(
            "peak_phase",
            "str",
            "Момент пика: backward — начало обратного прохода, optimizer_step — шаг оптимизатора.",
            allowed=("backward", "optimizer_step"),
            label_ru="Момент пика",
        ),
        _part("table_rule", "Оценка по опорной таблице для сравнения.", "Оценка по таблице"),
    ),
    ("model_id", "method_id"),
    kind="derived",
)

_ESTIMATOR_NAMES = {
    "first_principles": "из первых принципов",
    "table_rule": "по опорной таблице",
    "rule_of_thumb": "по правилу прежней статьи",
    "deepspeed": "по формуле DeepSpeed (только состояния модели)",
}

CALIBRATION = Table(
    "calibration",
    "Точность оценок: измерения",
    "Для каждого опубликованного измерения пиковой памяти: измеренное значение, прогноз каждого способа "
    "оценки и его ошибка.",
    (
        Field("measurement_id", "id", "Измерение.", references="measurements.measurement_id", label_ru="Измерение"),
        Field("model_id", "id", "Модель.", references="models.model_id", label_ru="Код модели"),
        Field("method_id", "id", "Способ дообучения.", references="methods.method_id", label_ru="Код способа"),
        Field(
            "gpu_id",
            "id",
            "Карта измерения; пусто, если не указана.",
            references="gpus.gpu_id",
            required=False,
            label_ru="Карта",
        ),
        Field("gpu_memory_gb", "float", "Память карты.", unit="ГБ", required=False, label_ru="Память карты, ГБ"),
        Field("outcome", "str", "value — измерено; oom — не поместилось.", allowed=("value", "oom"), label_ru="Итог"),
        Field(
            "metric",
            "str",
            "Что измерено: allocated/active — тензоры; reserved, reserved_delta — с кэшем распределителя; "
            "nvidia_smi, unknown — вся занятая память карты; fits_on — бюджет, в который обучение поместилось.",
            allowed=("allocated", "reserved", "reserved_delta", "active", "nvidia_smi", "unknown", "fits_on"),
            label_ru="Метрика",
        ),
        Field(
            "metric_kind",
            "str",
            "Какое показание оценки сравнивается: allocated — тензоры, reserved — с кэшем распределителя, card — "
            "вся карта (nvidia-smi или метрика не названа), fits_on — бюджет, в который обучение поместилось.",
            allowed=("allocated", "reserved", "card", "fits_on"),
            label_ru="Вид показания",
        ),
        Field("framework", "str", "Библиотека обучения.", allowed=FRAMEWORKS, label_ru="Библиотека"),
        Field(
            "sharding",
            "str",
            "Шардирование: ddp (и одна карта), zero1, zero2, zero3 (и FSDP).",
            allowed=("ddp", "zero1", "zero2", "zero3"),
            label_ru="Шардирование",
        ),
        Field("measured_value", "float", "Значение, как в источнике.", required=False, label_ru="Измерено"),
        Field("measured_unit", "str", "Единица источника.", allowed=("GB", "GiB"), label_ru="Единица"),
        Field("measured_gb", "float", "Измерено, в ГБ (10⁹ байт).", unit="ГБ", required=False, label_ru="Измерено, ГБ"),
        *(
            f
            for key, name in _ESTIMATOR_NAMES.items()
            for f in (
                Field(
                    f"{key}_gb",
                    "float",
                    f"Прогноз {name}; пусто, если способ здесь неприменим.",
                    unit="ГБ",
                    required=False,
                    label_ru=f"Прогноз {name}, ГБ",
                ),
                Field(
                    f"{key}_error",
                    "float",
                    f"Ошибка прогноза {name}: (прогноз − измерение) / измерение.",
                    unit="доля",
                    required=False,
                    label_ru=f"Ошибка {name}",
                ),
            )
        ),
        Field(
            "predicts_oom",
            "bool",
            "Для строк oom: больше ли прогноз из первых принципов памяти карты.",
            required=False,
            label_ru="Прогноз OOM",
        ),
        Field("in_summary", "bool", "Входит ли строка в сводку точности.", label_ru="В сводке"),
        Field(
            "excluded_because",
            "str",
            "Почему строка не в сводке: oom — нет числа; unmodelled — приёмы, которые оценка не моделирует; "
            "unknown_lengths — длина последовательностей неизвестна.",
            required=False,
            label_ru="Не в сводке, потому что",
        ),
        _ref(),
    ),
    ("measurement_id",),
    kind="derived",
)

CALIBRATION_SUMMARY = Table(
    "calibration_summary",
    "Точность оценок: сводка",
    "Для каждого способа оценки по строкам сводки: число строк, медианная абсолютная ошибка, доля в пределах ±25 %.",
    (
        Field("estimator", "id", "Способ оценки.", allowed=tuple(_ESTIMATOR_NAMES), label_ru="Способ оценки"),
        Field("sort_order", "int", "Порядок на странице.", label_ru="Порядок"),
        Field("rows", "int", "Строк с прогнозом.", unit="шт.", label_ru="Строк"),
        Field(
            "median_abs_error", "float", "Медиана |ошибки|.", unit="доля", required=False, label_ru="Медиана |ошибки|"
        ),
        Field(
            "within_25",
            "float",
            "Доля строк с |ошибкой| не больше calibration_within (25 %).",
            unit="доля",
            required=False,
            label_ru="В ±25 %",
        ),
        Field(
            "median_error",
            "float",
            "Медиана ошибки со знаком: меньше нуля — занижает.",
            unit="доля",
            required=False,
            label_ru="Медиана ошибки",
        ),
    ),
    ("estimator",),
    kind="derived",
)

_STATS = (
    Field("rows", "int", "Строк с прогнозом.", unit="шт.", label_ru="Строк"),
    Field("median_abs_error", "float", "Медиана |ошибки|.", unit="доля", required=False, label_ru="Медиана |ошибки|"),
    Field(
        "within_25",
        "float",
        "Доля строк с |ошибкой| не больше calibration_within (25 %).",
        unit="доля",
        required=False,
        label_ru="В ±25 %",
    ),
    Field(
        "median_error",
        "float",
        "Медиана ошибки со знаком: меньше нуля — занижает.",
        unit="доля",
        required=False,
        label_ru="Медиана ошибки",
    ),
)

CALIBRATION_BREAKDOWN = Table(
    "calibration_breakdown",
    "Точность оценок: по видам показаний, способам, шардированию и библиотекам",
    "Для каждого способа оценки — ошибка по строкам сводки, разложенная по одному признаку: виду показания, "
    "способу дообучения, шардированию или библиотеке обучения.",
    (
        Field("estimator", "id", "Способ оценки.", allowed=tuple(_ESTIMATOR_NAMES), label_ru="Способ оценки"),
        Field(
            "dimension",
            "str",
            "Признак: metric_kind — вид показания, method — способ дообучения, sharding — шардирование, framework — "
            "библиотека, framework_method — библиотека и способ вместе (код группы: библиотека-способ).",
            allowed=("metric_kind", "method", "sharding", "framework", "framework_method"),
            label_ru="Признак",
        ),
        Field(
            "group_id",
            "id",
            "Значение признака: код вида показания, способа, шардирования или библиотеки.",
            label_ru="Группа",
        ),
        Field("sort_order", "int", "Порядок на странице.", label_ru="Порядок"),
        *_STATS,
    ),
    ("estimator", "dimension", "group_id"),
    kind="derived",
)

ESTIMATOR_RANGE = Table(
    "estimator_range",
    "Измеренный разброс оценки из первых принципов",
    "Насколько оценка из первых принципов расходится с измерениями сводки: 10-й и 90-й процентили ошибки со "
    "знаком, всего и по видам показаний, и множители, которые переводят оценку в измеренный диапазон: "
    "пик лежит между оценкой × low_factor и оценкой × high_factor у 80 % строк.",
    (
        Field(
            "scope",
            "id",
            "Какие строки: all — все строки сводки, иначе вид показания (allocated, reserved, card, fits_on).",
            allowed=("all", "allocated", "reserved", "card", "fits_on"),
            label_ru="Строки",
        ),
        Field("sort_order", "int", "Порядок на странице.", label_ru="Порядок"),
        Field("rows", "int", "Строк сводки.", unit="шт.", label_ru="Строк"),
        Field(
            "error_p10",
            "float",
            "10-й процентиль ошибки со знаком (прогноз − измерение) / измерение; пусто, если строк меньше 5.",
            unit="доля",
            required=False,
            label_ru="Ошибка, 10-й процентиль",
        ),
        Field(
            "error_median", "float", "Медиана ошибки со знаком.", unit="доля", required=False, label_ru="Медиана ошибки"
        ),
        Field(
            "error_p90",
            "float",
            "90-й процентиль ошибки со знаком; пусто, если строк меньше 5.",
            unit="доля",
            required=False,
            label_ru="Ошибка, 90-й процентиль",
        ),
        Field(
            "low_factor",
            "float",
            "Нижний множитель измеренного диапазона: 1 / (1 + error_p90).",
            required=False,
            label_ru="Множитель снизу",
        ),
        Field(
            "high_factor",
            "float",
            "Верхний множитель измеренного диапазона: 1 / (1 + error_p10).",
            required=False,
            label_ru="Множитель сверху",
        ),
    ),
    ("scope",),
    kind="derived",
)

ESTIMATOR_CONSTANTS_TABLE = Table(
    "estimator_constants",
    "Константы оценки из первых принципов: откуда каждая",
    "Каждая константа оценки из первых принципов с её значением и происхождением: derived — выведена из "
    "устройства тензоров или кода библиотек, assumed — принята без подбора, fitted — подобрана по калибровочным "
    "измерениям (с тем, по скольким строкам и что даёт подбор на текущих строках).",
    (
        Field("constant_id", "id", "Константа.", references="constants.constant_id", label_ru="Константа"),
        Field("value", "float", "Значение в constants.csv.", label_ru="Значение"),
        Field(
            "basis",
            "str",
            "Происхождение: derived — выведена, assumed — принята, fitted — подобрана.",
            allowed=("derived", "assumed", "fitted"),
            label_ru="Происхождение",
        ),
        Field(
            "fitted_on",
            "str",
            "Для подобранной: по каким строкам (вид показания); пусто у остальных.",
            required=False,
            label_ru="Подобрана по",
        ),
        Field(
            "fit_rows", "int", "Для подобранной: строк подбора.", unit="шт.", required=False, label_ru="Строк подбора"
        ),
        Field(
            "refit_value",
            "float",
            "Для подобранной: значение с наименьшей медианой |ошибки| на этих строках сейчас (перебор с шагом 0,05).",
            required=False,
            label_ru="Подбор сейчас",
        ),
        Field(
            "refit_median_abs_error",
            "float",
            "Медиана |ошибки| на строках подбора при refit_value.",
            unit="доля",
            required=False,
            label_ru="Медиана |ошибки| при подборе",
        ),
    ),
    ("constant_id",),
    kind="derived",
)

PRETRAINING = Table(
    "pretraining",
    "Предобучение: черновой план",
    "Предобучение с нуля: токенов 20 на параметр (по умолчанию), смешанная точность, ZeRO-3 и контрольные "
    "точки; сколько карт нужно по памяти и чтобы уложиться в срок, и во что это обойдётся. Черновая оценка.",
    (
        Field("model_id", "id", "Модель.", references="models.model_id", label_ru="Код модели"),
        Field("gpu_id", "id", "Карта.", references="gpus.gpu_id", label_ru="Карта"),
        Field("tokens", "float", "Токенов обучения.", unit="шт.", label_ru="Токенов"),
        Field("flops", "float", "Вычислений на всё обучение.", unit="FLOP", label_ru="FLOP"),
        Field("target_days", "float", "Желаемый срок.", unit="дней", label_ru="Срок, дней"),
        Field("utilization", "float", "Доля пиковой производительности.", unit="доля", label_ru="Загрузка"),
        Field(
            "cards_for_memory",
            "int",
            "Наименьшее число карт, на которых помещаются веса, градиенты и состояния (ZeRO-3).",
            unit="шт.",
            required=False,
            label_ru="Карт по памяти",
        ),
        Field("cards_for_time", "int", "Карт, чтобы уложиться в срок.", unit="шт.", label_ru="Карт по сроку"),
        Field("cards", "int", "Итого карт: большее из двух.", unit="шт.", required=False, label_ru="Карт"),
        Field(
            "memory_per_card_gb",
            "float",
            "Память одной карты при этом числе карт.",
            unit="ГБ",
            required=False,
            label_ru="Память на карту, ГБ",
        ),
        Field("days", "float", "Срок при этом числе карт.", unit="дней", required=False, label_ru="Дней"),
        Field(
            "server_id",
            "id",
            "Сервер каталога с этими картами.",
            references="servers.server_id",
            required=False,
            label_ru="Сервер",
        ),
        Field("servers", "int", "Серверов.", unit="шт.", required=False, label_ru="Серверов"),
        Field("cost_rub", "float", "Аренда на весь срок.", unit="₽", required=False, label_ru="Стоимость, ₽"),
        Field("seed_cards_text", "str", "Карт в таблице прежней статьи.", required=False, label_ru="В прежней статье"),
    ),
    ("model_id", "gpu_id"),
    kind="derived",
)

RECOMMENDATIONS = Table(
    "recommendations",
    "Рекомендация: сервер под задачу",
    "Для каждой модели и способа в типовой постановке — каждый сервер каталога: сколько карт нужно по оценке из "
    "первых принципов, сколько серверов, по какой связи, черновое время на эталонный объём данных и стоимость "
    "по условиям аренды. rank 1 — рекомендация: сначала то, что помещается в один сервер, затем дешевле.",
    (
        Field("model_id", "id", "Модель.", references="models.model_id", label_ru="Код модели"),
        Field("method_id", "id", "Способ дообучения.", references="methods.method_id", label_ru="Код способа"),
        Field("rank", "int", "Место среди серверов для этой задачи; 1 — рекомендация.", label_ru="Место"),
        Field("server_id", "id", "Сервер.", references="servers.server_id", label_ru="Код сервера"),
        Field("recommended", "bool", "Рекомендуется ли этот вариант.", label_ru="Рекомендуется"),
        Field(
            "reason",
            "id",
            "Почему: one_chassis — помещается в один сервер; several_chassis — нужно несколько серверов, "
            "сеть между ними заявлена; needs_network — нужно несколько серверов, а сети между ними нет "
            "(не рекомендуется); does_not_fit — не помещается.",
            allowed=("one_chassis", "several_chassis", "needs_network", "does_not_fit"),
            label_ru="Причина",
        ),
        Field("servers_count", "int", "Серверов на задачу.", unit="шт.", required=False, label_ru="Серверов"),
        Field("gpus_per_job", "int", "Карт на задачу.", unit="шт.", required=False, label_ru="Карт"),
        Field("gpu_id", "id", "Карта.", references="gpus.gpu_id", label_ru="Карта"),
        Field("gpus_per_server", "int", "Карт в сервере.", unit="шт.", label_ru="Карт в сервере"),
        Field(
            "per_gpu_memory_gb",
            "float",
            "Пик памяти одной карты по оценке из первых принципов на этом числе карт.",
            unit="ГБ",
            required=False,
            label_ru="Память на карту, ГБ",
        ),
        Field("gpu_memory_gb", "float", "Память одной карты.", unit="ГБ", label_ru="Память карты, ГБ"),
        Field(
            "link",
            "str",
            "По чему идёт обмен между картами задачи: one_card — карта одна; связь сервера (nvswitch, "
            "nvlink-bridge, pcie) или сеть между серверами.",
            required=False,
            label_ru="Связь",
        ),
        Field("gpu_has_nvlink", "bool", "Есть ли у карты NVLink (или другая прямая связь).", label_ru="NVLink у карты"),
        Field("tokens", "float", "Эталонный объём: токенов × эпох.", unit="шт.", label_ru="Токенов"),
        Field("utilization", "float", "Доля пиковой производительности.", unit="доля", label_ru="Загрузка"),
        Field(
            "hours",
            "float",
            "Черновое время на картах задачи: вычисления по активным параметрам / (карт × пик BF16 × загрузка).",
            unit="ч",
            required=False,
            label_ru="Часов",
        ),
        Field(
            "hours_all_cards",
            "float",
            "Черновое время, если занять все карты арендованных серверов.",
            unit="ч",
            required=False,
            label_ru="Часов на всех картах",
        ),
        Field(
            "cost_basis",
            "id",
            "Как считана стоимость: hour — почасовая цена; month — целые месяцы, не меньше минимального срока; "
            "on_request — цены нет.",
            required=False,
            allowed=("hour", "month", "on_request"),
            label_ru="Основа стоимости",
        ),
        Field("months_billed", "int", "Оплачиваемых месяцев.", unit="мес", required=False, label_ru="Месяцев"),
        Field("cost_rub", "float", "Стоимость аренды на это время.", unit="₽", required=False, label_ru="Стоимость, ₽"),
        Field("price_rub_month", "int", "Цена сервера в месяц.", unit="₽/мес", required=False, label_ru="₽/мес"),
        Field("price_rub_hour", "int", "Цена сервера за час.", unit="₽/ч", required=False, label_ru="₽/ч"),
    ),
    ("model_id", "method_id", "server_id"),
    kind="derived",
)

DERIVED_TABLES: tuple[Table, ...] = (
    ESTIMATES,
    GPU_FIT,
    SERVER_FIT,
    MEMORY_BREAKDOWN,
    CALIBRATION,
    CALIBRATION_SUMMARY,
    CALIBRATION_BREAKDOWN,
    ESTIMATOR_RANGE,
    ESTIMATOR_CONSTANTS_TABLE,
    PRETRAINING,
    RECOMMENDATIONS,
)
ALL_TABLES: tuple[Table, ...] = SOURCE_TABLES + DERIVED_TABLES

# Constants the first-principles estimator (pipeline/memory.py) reads.
ESTIMATOR_CONSTANTS = (
    "activation_bytes",
    "norm_input_bytes",
    "eager_attention_score_bytes",
    "logits_bytes",
    "logits_chunked_bytes",
    "dropout_mask_bytes",
    "quant_block_size",
    "quant_scale_bytes",
    "double_quant_scale_bytes",
    "double_quant_block_size",
    "adapter_bytes",
    "zero3_gather_bytes_per_param",
    "offload_cpu_buffer_factor",
    "cuda_context_gb",
    "logits_legacy_bytes",
    "loss_chunks",
    "fused_loss_bytes_per_hidden",
    "zero3_prefetch_units",
    "allocator_fragmentation",
    "nccl_buffers_gb",
)


@dataclass(frozen=True)
class Bounds:
    """The values a constant of constants.csv may take.

    Outside gt/ge … lt/le the value is impossible (an error); outside `usual` it is possible
    but rare (a warning). `integer`: a whole number (a count, a size, a 0/1 switch).
    """

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    integer: bool = False
    usual: tuple[float, float] | None = None


# Every constant the rules, the estimator and the pages read, with the values it may take: one line
# per constant. Each must be present in constants.csv; a new constant is declared here.
CONSTANT_BOUNDS: dict[str, Bounds] = {
    "range_low_factor": Bounds(gt=0, lt=1, usual=(0.5, 0.95)),
    "range_high_factor": Bounds(gt=1, le=10, usual=(1.05, 2)),
    "adamw_weight_bytes": Bounds(gt=0, le=8),
    "adamw_grad_bytes": Bounds(gt=0, le=8),
    "adamw_optimizer_bytes": Bounds(gt=0, le=32),
    "train_flops_per_param_token": Bounds(gt=0, le=20, usual=(6, 8)),
    "forward_flops_per_param_token": Bounds(gt=0, le=10, usual=(2, 2)),
    "legacy_full_bytes_per_param": Bounds(gt=0, le=100),
    "legacy_overhead_low": Bounds(ge=0, le=5),
    "legacy_overhead_high": Bounds(ge=0, le=5),
    "legacy_lora_bytes_per_param": Bounds(gt=0, le=100),
    "legacy_qlora_7b_gb": Bounds(gt=0, le=10_000),
    "legacy_qlora_13b_gb": Bounds(gt=0, le=10_000),
    "legacy_qlora_70b_gb": Bounds(gt=0, le=10_000),
    "legacy_fp8_memory_factor": Bounds(gt=0, le=1),
    "checkpointing_saving_low": Bounds(ge=0, lt=1),
    "checkpointing_saving_high": Bounds(ge=0, lt=1),
    "checkpointing_slowdown_low": Bounds(ge=0, le=5),
    "checkpointing_slowdown_high": Bounds(ge=0, le=5),
    "stale_after_days": Bounds(ge=1, le=3650, integer=True, usual=(30, 730)),
    "default_utilization": Bounds(gt=0, le=1, usual=(0.1, 0.8)),
    "hours_per_month": Bounds(ge=672, le=744),  # 28 to 31 days of 24 hours
    "activation_bytes": Bounds(gt=0, le=8),
    "norm_input_bytes": Bounds(gt=0, le=8),
    "eager_attention_score_bytes": Bounds(ge=0, le=16),
    "logits_bytes": Bounds(gt=0, le=32),
    "logits_chunked_bytes": Bounds(gt=0, le=32),
    "dropout_mask_bytes": Bounds(ge=0, le=8),
    "quant_block_size": Bounds(ge=1, le=4096, integer=True),
    "quant_scale_bytes": Bounds(ge=0, le=8),
    "double_quant_scale_bytes": Bounds(ge=0, le=8),
    "double_quant_block_size": Bounds(ge=1, le=65_536, integer=True),
    "adapter_bytes": Bounds(gt=0, le=8),
    "zero3_gather_bytes_per_param": Bounds(ge=0, le=32),
    "offload_cpu_buffer_factor": Bounds(ge=1, le=10),
    "cuda_context_gb": Bounds(ge=0, le=10),
    "logits_legacy_bytes": Bounds(gt=0, le=64),
    "loss_chunks": Bounds(ge=1, le=1024, integer=True),
    "fused_loss_bytes_per_hidden": Bounds(ge=0, le=64),
    "zero3_prefetch_units": Bounds(ge=0, le=16, integer=True),
    "allocator_fragmentation": Bounds(ge=0, le=2, usual=(0, 1)),
    "nccl_buffers_gb": Bounds(ge=0, le=10),
    "tokens_per_param": Bounds(gt=0, le=100_000, usual=(1, 5000)),
    "pretraining_target_days": Bounds(gt=0, le=3650),
    "comparison_accumulation_steps": Bounds(ge=2, le=1024, integer=True),
    "calibration_within": Bounds(gt=0, lt=1),
}

# Relations between constants: (left, operator, right), each must hold.
CONSTANT_RELATIONS: tuple[tuple[str, str, str], ...] = (
    ("range_low_factor", "<", "range_high_factor"),
    ("forward_flops_per_param_token", "<", "train_flops_per_param_token"),
    ("legacy_overhead_low", "<=", "legacy_overhead_high"),
    ("checkpointing_saving_low", "<=", "checkpointing_saving_high"),
    ("checkpointing_slowdown_low", "<=", "checkpointing_slowdown_high"),
    ("legacy_qlora_7b_gb", "<=", "legacy_qlora_13b_gb"),
    ("legacy_qlora_13b_gb", "<=", "legacy_qlora_70b_gb"),
    ("logits_chunked_bytes", "<=", "logits_bytes"),
    ("logits_bytes", "<=", "logits_legacy_bytes"),
    ("double_quant_scale_bytes", "<=", "quant_scale_bytes"),
)

# Constants the rules read from sources/constants.csv; each must be present.
REQUIRED_CONSTANTS = tuple(dict.fromkeys((*CONSTANT_BOUNDS, *ESTIMATOR_CONSTANTS)))

# Dates in the sources are when a fact was checked: before this one, the year is a typo.
EARLIEST_DATE = dt.date(2000, 1, 1)

# Plausibility of the catalog, as warnings: a server's price per GB of GPU memory more than this
# many times above or below the median of the priced servers (with at least three priced).
PRICE_PER_GB_SPREAD = 5
# How far a number stated in a name ("2 × H100 80GB", "Модель 7 млрд") may be from the row's figure.
NAME_TOLERANCE = 0.02

# Which server interconnect a GPU of each form factor can have.
SERVER_INTERCONNECTS = {
    "sxm": ("nvswitch",),
    "oam": ("infinity-fabric",),
    "pcie": ("pcie", "nvlink-bridge"),
}

# Characters a reader cannot see, which can make a cell display as something else (U+202E
# RIGHT-TO-LEFT OVERRIDE) or break a line: the Unicode categories Cc (control, TAB and line
# breaks included), Cf (format: soft hyphen, zero-width and joiner characters, direction marks,
# BOM), Zl and Zp (line and paragraph separators) and Co (private use), as of Unicode 14
# (tests/test_validate.py checks the list against Python's unicodedata). The spaces (Zs: NBSP,
# thin space) are not among them: load turns those in numbers into nothing.
HIDDEN_CHARACTERS = (
    "[\\x00-\\x1f\\x7f-\\x9f\\xad\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u0890-\\u0891\\u08e2\\u180e"
    "\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u2064\\u2066-\\u206f\\ue000-\\uf8ff\\ufeff\\ufff9-\\ufffb"
    "\\U000110bd\\U000110cd\\U00013430-\\U00013438\\U0001bca0-\\U0001bca3\\U0001d173-\\U0001d17a"
    "\\U000e0001\\U000e0020-\\U000e007f\\U000f0000-\\U000ffffd\\U00100000-\\U0010fffd]"
)
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
