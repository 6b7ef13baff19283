"""Imports only go down: each layer of perflow imports only the layers below it.

The layers, bottom up (see docs/architecture.md): the ground floor
(``errors``, ``kinds``, the jit and progress helpers), ``pag``, ``trace``,
``readers``/``writers`` (and ``synthetic``, ``recorder``), ``flow``,
``passes``, ``flows``, ``cli``. The optional engine ``perflow.dask`` sits
beside ``passes``: nothing below it may import it, and it is found through
the ``perflow.engines`` entry point. A module may import its own layer and
any layer below; an import inside a function counts as much as one at the
top of the module (it runs all the same).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "perflow"

#: layer of each top-level part of the package; a higher number is a higher layer
LAYER = {
    "errors": 0, "kinds": 0, "_jit": 0, "progress": 0, "_version": 0, "units": 0, "_json": 0, "_atomic": 0, "_inflate": 0, "_arrays": 0,
    "pag": 1,
    "trace": 2,
    "readers": 3, "writers": 3, "synthetic": 3,
    "recorder": 4,
    "flow": 5,
    "passes": 6, "dask": 6, "sdk": 6,
    "flows": 7,
    "cli": 8, "__main__": 8, "__init__": 8,
}  # fmt: skip


def _part(module: str) -> str:
    """The layer key of an imported name: ``perflow.X...`` is part X; a name of ``perflow`` itself is ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYER else "__init__"


def _imports(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """``(line, imported module or name)`` of every perflow import in a module's source."""
    pkg = module if is_package else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
            else:
                names = [node.module or ""]
                if node.module == "perflow":
                    names = [f"perflow.{a.name}" for a in node.names]
            out += [(node.lineno, n) for n in names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return sorted((ln, n) for ln, n in out if n == "perflow" or n.startswith("perflow."))


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "pyrt" not in p.parts)


def test_every_part_has_a_layer() -> None:
    parts = {p.relative_to(ROOT).parts[0].removesuffix(".py") for p in _modules()}
    assert parts <= set(LAYER), f"parts without a layer: {sorted(parts - set(LAYER))}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_imports_go_down(path: Path) -> None:
    here = path.relative_to(ROOT).parts[0].removesuffix(".py")
    bad = []
    rel = path.relative_to(ROOT.parent).with_suffix("")
    is_pkg = path.name == "__init__.py"
    module = ".".join(rel.parts[:-1] if is_pkg else rel.parts)
    for line, target in _imports(path.read_text(encoding="utf-8"), module, is_pkg):
        there = _part(target)
        if LAYER[there] > LAYER[here] and there != here:
            bad.append(f"{path.relative_to(ROOT.parent)}:{line} imports {target} (layer {there} is above {here})")
    assert not bad, "\n".join(bad)


def test_the_check_catches_upward_imports() -> None:
    """The checker itself, on made-up modules: relative, absolute, in-function and package-level imports."""
    src = """
from ..flow.registry import pass_
from .frames import make_metrics
import perflow.trace.raw
def f():
    from perflow import dask
from perflow import Flow
"""
    got = [(n, _part(n)) for _, n in _imports(src, "perflow.pag.probe", False)]
    assert got == [
        ("perflow.flow.registry", "flow"),
        ("perflow.pag.frames", "pag"),
        ("perflow.trace.raw", "trace"),
        ("perflow.dask", "dask"),
        ("perflow.Flow", "__init__"),
    ]
    above = [n for n, part in got if LAYER[part] > LAYER["pag"]]
    assert above == ["perflow.flow.registry", "perflow.trace.raw", "perflow.dask", "perflow.Flow"]
