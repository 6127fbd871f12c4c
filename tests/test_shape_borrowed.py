"""A model the catalog has no config data for never borrows a shape silently (issue 36)."""

import argparse
from dataclasses import asdict

from pipeline.estimate import first_principles as memory
from pipeline.tools import estimate_cli


def _args(**given) -> argparse.Namespace:
    names = ("model", "config", "params_b", "vocab", "layers", "hidden")
    return argparse.Namespace(**{name: given.get(name) for name in names})


def test_generic_and_custom_sizes_name_the_model_whose_shape_they_take(catalog):
    borrowed = memory.borrowed_shapes(catalog["models"])
    generic = set(catalog["models"].filter(catalog["models"]["kind"] == "generic")["model_id"])
    assert set(borrowed) == generic and "llama-3-1-8b" not in borrowed
    arch, _, _, shape = estimate_cli._architecture(catalog, _args(model="generic-70b"))
    assert shape == borrowed["generic-70b"] and arch == memory.model_architectures(catalog["models"])["generic-70b"]
    assert estimate_cli._architecture(catalog, _args(model="llama-3-1-8b"))[3] is None
    _, name, _, shape = estimate_cli._architecture(catalog, _args(params_b=20.0))
    assert name == f"20B with the shape of {shape}"
    out = {
        "model": name,
        "shape_borrowed_from": shape,
        "architecture": {"layers": 1, "hidden": 2, "intermediate": 3, "heads": 4, "kv_heads": 5, "vocab": 6},
    }
    line = estimate_cli.render(out | {"setup": asdict(memory.Setup()), "problems": ["x"]}).splitlines()
    assert any(f"Shape borrowed from {shape}" in x and "--config" in x for x in line)
