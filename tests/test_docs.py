"""Docs are tested: every command, option, source table and template helper is documented."""

import re
import subprocess
import sys

from conftest import ROOT
from pipeline.render.views.articles import Tables
from pipeline.render.views.comparison import Comparison
from pipeline.render.views.estimator import EstimatorTables
from pipeline.schema import SOURCE_TABLES

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = {path.name: path.read_text(encoding="utf-8") for path in sorted((ROOT / "docs").glob("*.md"))}
EVERYTHING = README + "".join(DOCS.values())  # the README and docs/, where a newcomer reads


def test_every_just_recipe_is_in_readme():
    recipes = subprocess.run(["just", "--summary"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert {"build", "check", "test", "lint"} <= set(recipes)
    for recipe in recipes:
        if recipe != "default":
            assert f"`just {recipe}`" in README, recipe


def test_every_recipe_has_a_description():
    out = subprocess.run(["just", "--list"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    listed = [line for line in out.splitlines()[1:] if line.strip()]
    assert listed and all("#" in line for line in listed), out


def test_every_cli_option_is_in_readme():
    for command in ("build", "check", "serve", "diff", "estimate", "publish", "release"):
        help_text = subprocess.run(
            [sys.executable, "-m", "pipeline", command, "--help"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        for option in re.findall(r"(--[a-z-]+)", help_text):
            if option != "--help":
                assert option in EVERYTHING, (command, option)
        assert f"python -m pipeline {command}" in README


def test_quick_start_has_the_two_commands():
    quick = README.split("## Quick start", 1)[1].split("##", 1)[0]
    assert "./dev-setup.sh && . .venv/bin/activate && just build" in quick and "just test" in quick
    assert 'pip install -e ".[dev]"' in quick  # pip stays possible
    setup = (ROOT / "dev-setup.sh").read_text(encoding="utf-8")
    assert "-m venv .venv" in setup and "sync --quiet --frozen" in setup  # it makes its venv and installs the lock


def test_every_source_table_is_in_the_editors_guide():
    guide = (ROOT / "sources" / "README.md").read_text(encoding="utf-8")
    for table in SOURCE_TABLES:
        assert f"`{table.file}`" in guide, table.file


def test_every_template_table_is_documented():
    guide = (ROOT / "site_templates" / "README.md").read_text(encoding="utf-8")
    kinds = [name[: -len("_table")] for name in dir(Tables) if name.endswith("_table") and not name.startswith("_")]
    assert len(kinds) == 9
    for builders in (Tables, EstimatorTables, Comparison):
        for name in dir(builders):
            if name.endswith("_table") and not name.startswith("_"):
                assert f'table("{name.removesuffix("_table")}"' in guide, name


def test_readme_describes_the_estimate_command():
    """The estimator section names the three readings, both phases, the typical setup, the cache folder and
    every column of --batch, in and out, as the code has them."""
    from pipeline import cache
    from pipeline.estimate import first_principles as memory
    from pipeline.tools import estimate_cli as estimate_command

    section = DOCS["estimator.md"].split("## The first-principles estimator", 1)[1].split("\n## ", 1)[0]
    for reading in ("allocated", "reserved", "whole_card", "peak_phase", "per_gpu_gb", "readings_gb"):
        assert f"`{reading}`" in section, reading
    assert "backward pass" in section and "optimizer step" in section
    assert "`sources/typical_setup.csv`" in section
    assert f"${cache.ENV_DIR}" in section and "gpu-finetune-reference" in section
    for column in estimate_command.BATCH_COLUMNS:
        assert f"`{column}`" in section, column
    for column in estimate_command.BATCH_OUT:
        if column not in {k for k, _ in estimate_command.PARTS}:
            assert f"`{column}`" in section or column in ("allocated", "reserved", "whole_card"), column
    for loss in memory.LOSSES:
        assert f"`{loss}`" in section, loss
    help_text = subprocess.run(
        [sys.executable, "-m", "pipeline", "estimate", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "typical_setup.csv" in help_text and cache.ENV_DIR in help_text
    assert "default: 2048, the typical setup" in help_text.replace("\n", " ").replace("  ", " ")


def test_readme_links_every_doc_and_nothing_points_outside_the_project():
    for name in DOCS:
        assert f"](docs/{name})" in README, name
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "sources" / "README.md"]:
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            resolved = (path.parent / target).resolve()
            assert resolved.is_relative_to(ROOT), (path.name, target)  # a clone has nothing outside it
            assert resolved.exists() or target.startswith(("output/", "../output/")), (path.name, target)
        assert "/work/" not in text and "../shared" not in text, path.name


def test_no_file_of_the_project_points_outside_it():
    """Code, templates, tests and docs refer to the project's own files (docs/rules.md for the rules),
    never to a design note or a folder beside the clone, which a clone does not have."""
    outside = ("DESIGN" + ".md", "../" + "shared", "/work" + "/")
    if not (ROOT / ".git").exists():  # the unpacked sdist: every file it holds is the project's
        tracked = "\n".join(
            p.relative_to(ROOT).as_posix()
            for p in ROOT.rglob("*")
            if p.is_file()
            and not any(
                part in (".venv", "node_modules", "__pycache__", "output") or part.endswith(".egg-info")
                for part in p.relative_to(ROOT).parent.parts
            )
        )
    else:
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    found = []
    for name in tracked.splitlines():
        path = ROOT / name
        if name == "tests/test_docs.py":  # this file names them, to look for them
            continue
        if path.suffix not in (".py", ".md", ".toml", ".html", ".js", ".css", ".csv", ".txt", ".json") and name not in (
            "justfile",
            ".ci/run",
            "dev-setup.sh",
        ):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{name}: {word}" for word in outside if word in text]
    assert found == []


def test_readme_keeps_what_a_newcomer_needs():
    for heading in ("## Quick start", "## Commands", "## Layout", "## Read more"):
        assert heading in README, heading
    assert len(README) < 10_000  # the rest is in docs/
