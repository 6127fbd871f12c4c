"""The words of the data dictionary live in site_templates/dictionary.toml: every table and column of the
registry has its entry there, and every entry names a real table or column; Python holds no Russian."""

from __future__ import annotations

import re
import tomllib

from conftest import ROOT
from pipeline.schema import ALL_TABLES, UNITS

DICTIONARY = tomllib.loads((ROOT / "site_templates" / "dictionary.toml").read_text(encoding="utf-8"))
CYRILLIC = re.compile(r"[\u0400-\u04ff]")
# The loader reads what editors type, so it knows their Russian spellings (руб., да/нет, "7 млрд", "80 ГБ",
# mis-decoded Cyrillic); the other Russian in Python is the values legacy_gpu_counts.csv's nvlink_text may hold.
INPUT_MODULE = "pipeline/load.py"
INPUT_TOKENS = {
    "pipeline/schema.py": ['allowed=("нет", "желательно", "обязательно"),'],
    "pipeline/render/site.py": [
        'NAV_HIDDEN = ("false", "нет", "no")',
        'NAV_WORDS = ("true", "да", "yes", *NAV_HIDDEN)',
    ],  # front matter
}
# Russian grammar (noun forms by case and number, typography rules) is data of the language, not text.
GRAMMAR_MODULE = "pipeline/render/russian.py"
# Words still to move to site_templates/, by module and count: none left (the guide's headings, the
# data package's title and the table caption are in site_templates/; messages name their counted nouns
# in the catalogue, "{age:день}").
NOT_YET_MOVED: dict[str, int] = {}


def test_every_table_and_column_has_its_words() -> None:
    tables = DICTIONARY["tables"]
    assert sorted(tables) == sorted(t.name for t in ALL_TABLES)
    for table in ALL_TABLES:
        entry = tables[table.name]
        assert entry["title"] and entry["description"], table.name
        assert list(entry["columns"]) == table.columns, table.name  # every field an entry, every entry a field
        for column, words in entry["columns"].items():
            assert set(words) == {"label", "description"}, (table.name, column)
            assert words["label"] and words["description"], (table.name, column)


def test_the_registry_takes_its_words_from_the_dictionary() -> None:
    servers = next(t for t in ALL_TABLES if t.name == "servers")
    assert servers.title_ru == DICTIONARY["tables"]["servers"]["title"]
    price = servers.field("price_rub_month")
    assert price.label_ru == DICTIONARY["tables"]["servers"]["columns"]["price_rub_month"]["label"]
    assert (price.unit, price.unit_label) == ("rub_per_month", "₽/мес")


def test_every_unit_is_named_and_used() -> None:
    used = {f.unit for t in ALL_TABLES for f in t.fields if f.unit}
    assert used <= set(UNITS)
    assert set(UNITS) - used == set()
    assert all(re.fullmatch(r"[a-z_]+", unit) for unit in UNITS)  # ids, not display text


def test_no_russian_in_python_but_input_tokens() -> None:
    found = []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name in (INPUT_MODULE, GRAMMAR_MODULE):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CYRILLIC.search(line) and not any(line.strip().startswith(t) for t in INPUT_TOKENS.get(name, ())):
                found.append(f"{name}:{number}: {line.strip()}")
    counts: dict[str, int] = {}
    for line in found:
        counts[line.split(":")[0]] = counts.get(line.split(":")[0], 0) + 1
    assert counts == NOT_YET_MOVED, found  # fewer is progress: lower the count
