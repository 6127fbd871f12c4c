"""Which constants the code and the templates read is derived, so that `check` catches a missing one:
removing any constant a rule or a template reads makes `check` fail, naming sources/constants.csv."""

from __future__ import annotations

import ast
import csv
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, SOURCES
from pipeline import validate
from pipeline.load import connect, read_sources
from pipeline.problems import Validation
from pipeline.schema import CONSTANT_BOUNDS, CONSTANT_READS, ESTIMATOR_CONSTANTS, REQUIRED_CONSTANTS

CONSTANT_IDS = {row["constant_id"] for row in csv.DictReader((SOURCES / "constants.csv").open(encoding="utf-8"))}
READ_BY_TEMPLATES = validate.template_constants()
EVERY_READ = sorted(set(REQUIRED_CONSTANTS) | set(READ_BY_TEMPLATES))


def named_in_code(path: Path) -> set[str]:
    """The constant ids a module names as string literals (how the code reads constants: c["…"])."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return names & (CONSTANT_IDS | set(CONSTANT_BOUNDS))


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if name != "pipeline.schema":  # the registry declares them
            found[name] = path
    return found


@pytest.mark.parametrize("module", sorted(modules()))
def test_each_module_declares_the_constants_it_reads(module: str) -> None:
    undeclared = named_in_code(modules()[module]) - set(CONSTANT_READS.get(module, ()))
    assert undeclared == set(), f"add them to schema.CONSTANT_READS[{module!r}]"


def test_declarations_name_real_readers() -> None:
    assert set(CONSTANT_READS) <= set(modules())
    for module, ids in CONSTANT_READS.items():
        assert set(ids) <= named_in_code(modules()[module]) | set(ESTIMATOR_CONSTANTS)


def test_templates_are_scanned() -> None:
    assert READ_BY_TEMPLATES["checkpointing_saving_low"] == [
        "site_templates/articles/gpu-count.md",
        "site_templates/articles/method-comparison.md",
    ]
    assert READ_BY_TEMPLATES["nccl_buffers_gb"] == ["site_templates/calculator.html"]
    assert not any(c.startswith("typical_") for c in READ_BY_TEMPLATES)  # from typical_setup.csv


def test_every_constant_read_is_bounded() -> None:
    assert [c for c in EVERY_READ if c not in CONSTANT_BOUNDS] == []


@pytest.fixture(scope="module")
def frames() -> dict:
    return read_sources(SOURCES)[0]


def missing_problems(frames: dict, constant: str, templates: Path | None = None) -> list[str]:
    import polars as pl

    without = {**frames, "constants": frames["constants"].filter(pl.col("constant_id") != constant)}
    out = Validation()
    if templates is None:
        validate.constant_rules(connect(without), SOURCES, {"constants"}, out)
    else:
        original = validate.template_constants
        try:
            validate.template_constants = lambda: original(templates)
            validate.constant_rules(connect(without), SOURCES, {"constants"}, out)
        finally:
            validate.template_constants = original
    return [f"{p.file}: {p.column} = {p.value}" for p in out.problems]


@pytest.mark.parametrize("constant", EVERY_READ)
def test_removing_a_constant_that_is_read_is_reported(frames: dict, constant: str) -> None:
    assert constant in CONSTANT_IDS  # the real catalog has it
    assert missing_problems(frames, constant) == [f"sources/constants.csv: constant_id = {constant}"]


def test_a_constant_only_a_template_reads_is_required(frames: dict, tmp_path: Path) -> None:
    templates = tmp_path / "site_templates"
    shutil.copytree(ROOT / "site_templates", templates)
    with (templates / "articles" / "gpu-count.md").open("a", encoding="utf-8") as article:
        article.write('\n{{ t.const("hours_per_month") }} {{ t.const("not_a_constant_yet") }}\n')
    problems = missing_problems(frames, "not_a_constant_yet", templates)
    assert problems == ["sources/constants.csv: constant_id = not_a_constant_yet"]


@pytest.mark.slow
def test_check_exits_2_naming_constants_csv(sources: Path, capsys) -> None:
    from pipeline.__main__ import main

    path = sources / "constants.csv"
    kept = [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if not line.startswith("checkpointing_saving_low,")
    ]
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    assert main(["check", "--sources", str(sources)]) == 2
    err = capsys.readouterr().err
    assert (
        'constants.csv: constant_id = "checkpointing_saving_low": эту константу используют правила, она обязательна'
        in err
    )
