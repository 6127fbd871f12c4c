"""Golden: the generated seed-002 article carries every row of the seed's tables with the seed's figures."""

import re

import pytest

# Rows copied from the seed article 002 (the spec of the numbers).
SEED_MEMORY_ROWS = """
| QLoRA, база в 4 бита | 6,9 | 25,2 | 48 |
| QLoRA, база в 8 бит | 11,4 | 42 | 80 |
| LoRA | 18,3 | 68,8 | 160 |
| Полное, чистый bf16 | 68,6 | 315 | 600 |
| Полное, bf16/fp16 (смешанная точность) | 137,1 | 630 | 1 200 |
"""
SEED_CARDS_ROWS = """
| Модель 70 млрд, QLoRA 4 бита | 48 | 1 / 1 | 1 / 1 |
| Модель 32 млрд, LoRA | 68,8 | 1 / 2 | 1 / 1 |
| Модель 70 млрд, LoRA | 160 | 2 / 3 | 2 / 2 |
| Модель 8 млрд, полное | 137,1 | 2 / 3 | 1 / 2 |
| Модель 32 млрд, полное | 630 | 7 / 10 | 5 / 7 |
| Модель 70 млрд, полное | 1 200 | 13 / 19 | 9 / 13 |
"""
SEED_FIT_HEADER = "| Сервер | Память | 70 млрд, LoRA (160, до 240) | 32 млрд, полное (630, до 945) | 70 млрд, полное, чистый bf16 (600, до 900) | 70 млрд, полное (1 200, до 1 800) |"
SEED_FIT_ROWS = """
| 4 × H200 NVL | 564 ГБ | да | нет | нет | нет |
| 8 × RTX PRO 6000 | 768 ГБ | да | по оценке да, при +50 % нет | по оценке да, при +50 % нет | нет |
| 8 × H200 (HGX) | 1 128 ГБ | да | да | да | нет |
| 8 × B200 (HGX) | 1 440 ГБ | да | да | да | по оценке да, при +50 % нет |
| 8 × B300 | 2 160 ГБ | да | да | да | да |
"""


def seed_rows(block: str) -> list[str]:
    return [line for line in block.strip().splitlines()]


@pytest.fixture(scope="module")
def article(built) -> str:
    return (built / "markdown" / "finetune-memory.md").read_text(encoding="utf-8").replace("\xa0", " ")


@pytest.mark.parametrize("row", seed_rows(SEED_MEMORY_ROWS) + seed_rows(SEED_CARDS_ROWS))
def test_seed_rows_present(article, row):
    assert row in article.splitlines()


def test_seed_server_fit_table(article):
    lines = article.splitlines()
    assert SEED_FIT_HEADER in lines
    start = lines.index(SEED_FIT_HEADER)
    ours = lines[start + 2 : start + 7]
    # Where one server is not enough we say how many it takes ("нет: 2 шт., …"); the verdict is the seed's.
    assert [re.sub(r"нет: [^|]*", "нет ", row).replace("  |", " |") for row in ours] == seed_rows(SEED_FIT_ROWS)
    assert ours[0].endswith(
        "| нет: 2 шт., при +50 % — 2 шт. | нет: 2 шт., при +50 % — 2 шт. | нет: 3 шт., при +50 % — 4 шт. |"
    )


@pytest.mark.parametrize(
    "sentence",
    [
        "Модели на 70 млрд параметров нужно примерно 48 ГБ при QLoRA с 4-битной базой, 160 ГБ при LoRA и 1 200 ГБ",
        "Для 8 млрд те же три способа — 6,9, 18,3 и 137,1 ГБ.",
        "В картах для 70 млрд это 1, 2 и 13 карт RTX PRO 6000 (по 96 ГБ) или 1, 2 и 9 карт H200 (по 141 ГБ).",
        "Для модели на 70 млрд параметров минимум равен 1 120 ГБ, на 32 млрд — 512 ГБ, на 8 млрд — 128 ГБ.",
        "от −30 до +50 %",
    ],
)
def test_seed_prose_figures(article, sentence):
    assert sentence in article


def test_every_table_names_its_source(built):
    for md in (built / "markdown").glob("*.md"):
        blocks = md.read_text(encoding="utf-8").split("\n\n")
        for i, block in enumerate(blocks):
            if block.startswith("| "):
                following = next(b for b in blocks[i + 1 :] if not b.startswith("*"))
                assert re.match(r"Источники?: .*проверено \d\d\.\d\d\.\d{4}", following), (md.name, block[:60])


def test_seed_000_recomputed(built):
    text = (built / "markdown" / "gpu-count.md").read_text(encoding="utf-8").replace("\xa0", " ")
    lines = text.splitlines()
    full70 = next(line for line in lines if line.startswith("| Модель 70 млрд | Full fine-tuning |"))
    assert (
        full70
        == "| Модель 70 млрд | Full fine-tuning | 1 200 | 15 / 23 | 8 | 9 / 13 | 4–8 | обязательно / обязательно | обязательно |"
    )
    offer = next(line for line in lines if line.startswith("| 70B full | "))
    assert "| 8 × H100 80GB (ESC8000A) | 2 373 300 | 1 200, до 1 800 | нет: 2 шт., при +50 % — 3 шт. |" in offer
    # then the verdict and why (issue 35): the plan would need 3 such servers, with no network between them
    assert "| отличается | на «8 × H100 80GB (ESC8000A)» нужно 3 сервера, а сети между ними в каталоге нет." in offer
    lora = next(line for line in lines if line.startswith("| 7B–13B LoRA | "))
    # beside the seed's offer, the site's recommendation (table recommendations): all the server's cards
    assert "| 2 × H100 PCIe в сервере «2 × H100 80GB (XFUSION)» | совпадает | тот же сервер: все 2 карты," in lora
    rule = next(line for line in lines if line.startswith("| Модель 70 млрд | 700 |"))
    assert rule == "| Модель 70 млрд | 700 | 840…1 050 | 1 120 | 1 200 | 840…1 800 |"
