"""The shape of the code: no function in pipeline/ over 60 lines. The functions still longer are listed with
their length: one of them may only shrink (lower its number, or delete its line once it fits), and any
other function over the limit fails."""

from __future__ import annotations

import ast

from conftest import ROOT

LIMIT = 60
STILL_LONGER = {}


def function_lengths() -> dict[str, int]:
    lengths = {}
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owners = {
            id(f): f"{node.name}.{f.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
            for f in node.body
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = owners.get(id(node), node.name)
                lengths[f"{path.relative_to(ROOT).as_posix()}:{name}"] = node.end_lineno - node.lineno + 1
    return lengths


def test_no_function_over_the_limit() -> None:
    lengths = function_lengths()
    over = {name: n for name, n in lengths.items() if n > LIMIT and n > STILL_LONGER.get(name, LIMIT)}
    assert over == {}
    assert {name for name in STILL_LONGER if lengths.get(name, 0) <= LIMIT} == set()  # fits now: delete its line


def test_the_flow_and_the_command_line_are_short() -> None:
    lengths = function_lengths()
    assert lengths["pipeline/build.py:run"] <= LIMIT
    assert max(n for name, n in lengths.items() if name.startswith("pipeline/__main__.py:")) <= LIMIT
