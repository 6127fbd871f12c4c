"""The message catalogue (site_templates/messages.toml): every entry Russian, every key the code names
present with the slots the code fills, no entry unused; and what `check` and the quality page show an
editor holds no English sentence, whatever the sources hold."""

from __future__ import annotations

import ast
import html
import json
import re
import string
from pathlib import Path

import pytest

from conftest import ROOT, edit_csv
from pipeline import messages
from pipeline.schema import SOURCE_TABLES

CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)
# What a word is trimmed of before it is judged: punctuation around it, not the hyphen of an option.
PUNCTUATION = ",.;:!?()[]«»\"'…—"


def english_runs(text: str, length: int = 3) -> list[str]:
    """Runs of `length` or more Latin words in a row (ids, file names, numbers and flags are not words;
    a comma or a semicolon ends a run, so that a list of allowed values "full, lora, qlora" is not one)."""
    runs, current = [], []
    for token in text.split():
        word = token.strip(PUNCTUATION)
        if re.fullmatch(r"[A-Za-z]+", word):
            current.append(word)
            if not token.endswith((",", ";")):
                continue
        if len(current) >= length:
            runs.append(" ".join(current))
        current = []
    if len(current) >= length:
        runs.append(" ".join(current))
    return runs


def entries(node: dict, prefix: str = "") -> dict[str, str]:
    """The catalogue flattened: "section.key" -> text."""
    out = {}
    for key, value in node.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out |= entries(value, f"{name}.")
        else:
            out[name] = value
    return out


CATALOGUE = entries(messages.catalogue())
SECTIONS = set(messages.catalogue())
# Keys the code does not name one by one: the entity of each source table in the diff report, and the
# words of Jinja's token descriptions and Python's type names in an article's error.
BY_TABLE = "diff.nouns."
WORD_TABLES = ("articles.tokens.", "articles.types.")


def slots(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def code_lookups() -> dict[str, list[tuple[str, set[str] | None]]]:
    """Every catalogue key the code names, with where and, for a message(...) call, the slots it fills
    (None where the key is named in a table of keys and filled elsewhere)."""
    found: dict[str, list] = {}
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = {}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "message"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                calls[id(node.args[0])] = {k.arg for k in node.keywords}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = re.fullmatch(r"([a-z_]+)\.[a-z0-9_.]+", node.value)
                if match and match[1] in SECTIONS:
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    found.setdefault(node.value, []).append((where, calls.get(id(node))))
    return found


def test_every_entry_is_russian() -> None:
    assert len(CATALOGUE) > 200
    untranslated = []
    for key, text in CATALOGUE.items():
        words = re.sub(r"\{\w+\}", "", text)
        if not CYRILLIC.search(words) or english_runs(words):
            untranslated.append(f"{key} = {text!r}")
    assert untranslated == []


def test_english_runs_are_found() -> None:
    assert english_runs("no price; the site shows") == ["the site shows"]
    assert english_runs("допустимые значения: full, lora, qlora") == []
    assert english_runs("нет цены; the site shows «по запросу»") == ["the site shows"]
    assert english_runs("проверьте (ls -ld, lsattr; chattr -i) или --out output") == []
    assert english_runs("Great Expectations и DuckDB SQL") == []
    assert english_runs("a value is required") == ["a value is required"]


def test_every_key_the_code_names_exists_with_its_slots() -> None:
    lookups = code_lookups()
    missing = sorted(f"{where}: {key}" for key, uses in lookups.items() for where, _ in uses if key not in CATALOGUE)
    assert missing == []
    wrong = []
    for key, uses in lookups.items():
        for where, filled in uses:
            if filled is not None and filled != slots(CATALOGUE[key]):
                wrong.append(f"{where}: {key} fills {sorted(filled)}, the text has {sorted(slots(CATALOGUE[key]))}")
    assert wrong == []


def test_no_entry_is_unused() -> None:
    named = set(code_lookups())
    unused = sorted(k for k in CATALOGUE if k not in named and not k.startswith((BY_TABLE, *WORD_TABLES)))
    assert unused == []
    assert {k.removeprefix(BY_TABLE) for k in CATALOGUE if k.startswith(BY_TABLE)} == {t.name for t in SOURCE_TABLES}


def test_every_token_jinja_describes_has_a_russian_word() -> None:
    """Jinja's syntax messages name tokens by description ("end of print statement"); operators are
    shown as they are («}»), every other description is in [articles.tokens]."""
    from jinja2 import lexer

    kinds = [v for k, v in vars(lexer).items() if k.startswith("TOKEN_") and isinstance(v, str)]
    described = {lexer._describe_token_type(kind) for kind in kinds if kind not in lexer.reverse_operators}
    internal = {"initial", "whitespace", "raw_begin", "raw_end", "linecomment_begin", "linecomment_end", "linecomment"}
    words = messages.catalogue()["articles"]["tokens"]
    assert sorted(described - internal - set(words)) == []


def test_an_unknown_key_or_slot_is_an_error() -> None:
    with pytest.raises(KeyError):
        messages.message("rules.no_such_rule")
    with pytest.raises(KeyError):
        messages.message("rules.type", type_name="число")  # {example} not given
    assert messages.message("rules.type", type_name="число", example="96") == "ожидается число, например 96"


def mutate_to_fail(src: Path) -> None:
    """Edits that break as many kinds of rule as one `check` reports at once."""
    edit_csv(
        src / "servers.csv",
        "xfusion-2x-h100,2 × H100 80GB (XFUSION),XFUSION,h100-pcie,2,",
        "xfusion-2x-h100,2 × H100 80GB (XFUSION),XFUSION,h100-nope,2,",
    )
    edit_csv(src / "servers.csv", "ASUS ESC8000A,h100-pcie,4,pcie,1360800", "ASUS ESC8000A,h100-pcie,3,pcie,1360800")
    edit_csv(src / "gpus.csv", "A100 40GB,NVIDIA,40,", "A100 40GB,NVIDIA,сорок,")
    edit_csv(src / "gpus.csv", "A100 80GB,NVIDIA,80,", "A100\u200b 80GB,NVIDIA,96,")
    edit_csv(src / "memory_anchors.csv", "full_amp,14,240,", "full_amp,14,100,")
    edit_csv(src / "constants.csv", "range_low_factor,0.7,", "range_low_factor,7,")
    edit_csv(src / "references.csv", "https://blog.eleuther.ai/transformer-math/", "not a web address")
    edit_csv(src / "references.csv", "EleutherAI,2026-10-12", "EleutherAI,2026-13-45")
    edit_csv(src / "typical_setup.csv", "seq_len,2048,", "seq_len,many,")
    edit_csv(
        src / "models.csv",
        "generic-7b,Модель 7 млрд,7 млрд,Условный размер,generic,7,",
        "generic-7b,Модель 7 млрд,7 млрд,Условный размер,generic,70,",
    )
    edit_csv(src / "legacy_offer_jobs.csv", "offer_id,model_id,method_id", "offer_id,model_id,method")
    with (src / "legacy_offers.csv").open("a", encoding="utf-8") as f:
        f.write('broken,"7B LoRA,xfusion-2x-h100\n')


def test_a_failing_check_reports_in_russian(sources, capsys) -> None:
    from pipeline.__main__ import main

    mutate_to_fail(sources)
    assert main(["check", "--sources", str(sources)]) == 2
    err = capsys.readouterr().err
    problems = [line for line in err.splitlines() if line.startswith("  ")]
    assert len(problems) >= 12, err
    # ids, column names and the cells' values aside ("…" is what an editor typed)
    text = re.sub(r'"[^"\n]*"', "", err.replace(str(sources), "sources"))
    assert english_runs(text) == [], err
    assert err.splitlines()[-1] == "Проверка нашла ошибки; ничего не записано."


def test_a_stopped_build_says_what_it_left_where_out_is_absent_empty_or_a_build(sources, tmp_path, capsys) -> None:
    """ "the earlier build is still there" only where there is one; "unchanged" of no folder at all neither."""
    from pipeline.__main__ import environment_message, main, say_interrupted
    from pipeline.publish import outdir

    edit_csv(sources / "legacy_offer_jobs.csv", "offer_id,model_id,method_id", "offer_id,model_id,method")
    out = tmp_path / "never"
    assert main(["build", "--sources", str(sources), "--out", str(out)]) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == f"Сборка остановлена: ничего не записано, папки {out} по-прежнему нет."
    assert not out.exists()
    assert say_interrupted(out) == 130
    assert capsys.readouterr().err == f"Прервано; ничего не записано, папки {out} по-прежнему нет.\n"
    assert environment_message(OSError(28, "No space left on device", str(out)), out).endswith(
        f"; ничего не записано, папки {out} по-прежнему нет."
    )
    out.mkdir()  # empty: no earlier build to speak of
    assert main(["build", "--sources", str(sources), "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"Сборка остановлена: папка {out} не изменена."
    (out / "build-state.json").write_text(json.dumps({"generator": outdir.GENERATOR}), encoding="utf-8")
    assert main(["build", "--sources", str(sources), "--out", str(out)]) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == f"Сборка остановлена: папка {out} не изменена, в ней осталась прежняя сборка."
    assert say_interrupted(out) == 130
    assert capsys.readouterr().err == f"Прервано; папка {out} не изменена.\n"


def test_the_quality_page_is_russian(sources, tmp_path) -> None:
    from pipeline.build import build

    # warnings of every kind, which the page lists; and the same warning on five rows, given once
    edit_csv(sources / "servers.csv", ",585000,", ",5000,")
    edit_csv(sources / "gpus.csv", "RTX 5090,NVIDIA,32,", "RTX 5090,NVIDIA,4,")
    edit_csv(sources / "references.csv", "EleutherAI,2026-10-12", "EleutherAI,2024-01-10")
    (sources / "constants.csv").open("a", encoding="utf-8").write("range_hi_factor,1.5,,Опечатка.,site-rules\n")
    build(sources, tmp_path / "out", base_url="https://gpu.example/")
    page = (tmp_path / "out" / "site" / "quality.html").read_text(encoding="utf-8")
    main = page[page.index("<main") : page.index("</main>")]
    text = html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<code>.*?</code>", " ", main, flags=re.S)))
    assert english_runs(text) == []
    assert str(sources) not in page and str(tmp_path) not in page  # file names, not the build's paths
    rule = messages.message("warnings.no_price", on_request="по запросу")
    assert text.count(rule) == 1
    assert f"{rule} (строки 7, 8, 9, 10, 11; всего 5)" in text.replace("\xa0", " ")
    for engine in ("правило столбца (Great Expectations)", "правило между таблицами (DuckDB)"):
        assert engine in text


def test_an_edited_catalogue_is_read_again_in_the_same_process(tmp_path, monkeypatch):
    """A warm process (serve) shows an edited message without a restart: the parse is kept per file status."""
    import os

    copy = tmp_path / "messages.toml"
    copy.write_text('[serve]\nreload = "первый"\n', encoding="utf-8")
    monkeypatch.setattr(messages, "CATALOGUE", copy)
    assert messages.message("serve.reload") == "первый"
    copy.write_text('[serve]\nreload = "второй вариант"\n', encoding="utf-8")
    os.utime(copy, ns=(1, 1))  # even with an old modification time: its size (and change time) differ
    assert messages.message("serve.reload") == "второй вариант"
