"""Living articles over whole builds: every counted noun agrees with its number on every page and in
every Markdown file; a catalog edit either keeps every sentence true or stops `build` and `check`
with a message naming the claim, and the previous output stays."""

import html
import json
import re
from pathlib import Path

from conftest import edit_csv
from pipeline import russian
from pipeline.__main__ import main
from pipeline.russian import NBSP

TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.DOTALL)


def page_texts(out: Path) -> dict[str, str]:
    """Every page and Markdown file of a build as plain text (tags removed, entities decoded)."""
    texts = {}
    for path in sorted((out / "site").rglob("*.html")):
        texts[str(path.relative_to(out))] = html.unescape(TAG.sub(" ", path.read_text(encoding="utf-8")))
    for path in sorted((out / "markdown").rglob("*.md")):
        texts[str(path.relative_to(out))] = path.read_text(encoding="utf-8").replace("\\", "")
    return texts


def disagreements(out: Path) -> dict[str, list[str]]:
    return {name: found for name, text in page_texts(out).items() if (found := russian.disagreements(text))}


def test_every_counted_noun_agrees_with_its_number_in_the_build(built):
    texts = page_texts(built)
    assert len([n for n in texts if n.endswith(".md")]) == 3 and len(texts) > 100
    assert disagreements(built) == {}
    # The checker reads these pages: numbers with nouns are there to be checked.
    assert f"2{NBSP}048{NBSP}токенов" in texts["site/accuracy.html"]
    assert f"1{NBSP}024{NBSP}токена" in texts["site/accuracy.html"]


def test_markdown_keeps_non_breaking_spaces(built):
    md = (built / "markdown" / "finetune-memory.md").read_text(encoding="utf-8")
    assert f"| 1{NBSP}200 |" in md or f"1{NBSP}200" in md.split("\n|")[1]  # a table cell keeps the NBSP of "1 200"
    assert f"1{NBSP}200{NBSP}ГБ" in md and f"+50{NBSP}%" in md
    assert " - " not in md.replace("| - |", "")


def manifest(out: Path) -> str:
    return (out / "site" / "manifest.json").read_text(encoding="utf-8")


def test_catalog_edits_keep_sentences_true_or_stop_naming_the_claim(sources, tmp_path, capsys):
    # A card's memory, a price and a new server: the build succeeds with every sentence right.
    edit_csv(sources / "gpus.csv", "RTX PRO 6000,NVIDIA,96,", "RTX PRO 6000,NVIDIA,32,")
    edit_csv(sources / "servers.csv", ",585000,", ",1585000,")
    with (sources / "servers.csv").open("a", encoding="utf-8") as f:
        f.write("xfusion-1x-h200,1 × H200 (XFUSION),XFUSION,h200-nvl,1,pcie,99000,2026-10-12,catalog\n")
    out = tmp_path / "out"
    assert main(["build", "--sources", str(sources), "--out", str(out), "--quiet"]) == 0
    assert disagreements(out) == {}
    md = (out / "markdown" / "finetune-memory.md").read_text(encoding="utf-8").replace(NBSP, " ")
    assert (
        "LoRA на такой модели занимает 5 карт RTX PRO 6000 или 2 карты H200, "
        "полное дообучение — 38 карт RTX PRO 6000 или 9 карт H200." in md
    )
    assert "больше одной карты нужно: LoRA для 32 млрд — 3 карты по оценке" in md
    assert "помещаются на одну карту любого из двух типов" not in md
    before = manifest(out)
    capsys.readouterr()

    # An edit that makes a claim false: build and check stop and name it; the output stays.
    edit_csv(sources / "constants.csv", "legacy_full_bytes_per_param,10,", "legacy_full_bytes_per_param,20,")
    assert main(["build", "--sources", str(sources), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    line = next(
        n
        for n, text in enumerate(Path("site_templates/articles/gpu-count.md").read_text().splitlines(), 1)
        if "правило прежней статьи меньше теоретического минимума" in text
    )
    assert f"site_templates/articles/gpu-count.md:{line}:" in err
    assert "статья «Сколько GPU нужно для дообучения моделей 7B, 13B и 70B" in err
    assert "утверждение «правило прежней статьи меньше теоретического минимума» больше не верно" in err
    assert "сейчас в данных: правило_байт = 20; минимум_байт = 16" in err
    assert "Traceback" not in err
    assert manifest(out) == before
    assert json.loads(before)  # the previous build is whole

    assert main(["check", "--sources", str(sources)]) == 2
    err = capsys.readouterr().err
    assert "утверждение «правило прежней статьи меньше теоретического минимума» больше не верно" in err
