"""Imports only go down: each layer of perflow imports only the layers below it.

The layers, bottom up (see docs/architecture.md): the ground floor
(``errors``, ``kinds``, the jit and progress helpers), ``pag``, ``trace``,
``codecs`` (format libraries a reader and a writer share), ``readers`` and
``writers`` (and ``synthetic``), ``recorder``, ``flow``, ``passes`` with
``sdk``, ``flows``, ``cli``. The optional engine ``perflow.dask`` sits beside
``passes``: nothing below it may import it, and it is found through the
``perflow.engines`` entry point. A module may import its own layer and any
layer below, except the parts :data:`APART` keeps apart on one floor (a
format's reader and writer share :mod:`perflow.codecs` instead). An import
inside a function counts as much as one at the top of the module (it runs all
the same), and so do run-time imports the source names:
``importlib.import_module("perflow....")`` and the module tables of lazy
package faces (``_LAZY``, ``READER_MODULES``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "perflow"

#: layer of each top-level part of the package; a higher number is a higher layer
LAYER = {
    "errors": 0, "kinds": 0, "_jit": 0, "_jitcache": 0, "_aot": 0, "progress": 0, "_version": 0, "units": 0, "_json": 0, "_atomic": 0, "_inflate": 0, "_arrays": 0,
    "pag": 1,
    "trace": 2,
    "codecs": 3,
    "readers": 4, "writers": 4, "synthetic": 4,
    "recorder": 5,
    "flow": 6,
    "passes": 7, "dask": 7, "sdk": 7,
    "flows": 8,
    "cli": 9, "__main__": 9, "__init__": 9,
}  # fmt: skip

#: parts on one floor that must not import each other
APART = {("readers", "writers"), ("writers", "readers")}
#: module-level tables of lazy package faces: name -> module imported on first use
LAZY_TABLES = ("_LAZY", "READER_MODULES")


def _part(module: str) -> str:
    """The layer key of an imported name: ``perflow.X...`` is part X; a name of ``perflow`` itself is ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYER else "__init__"


def _dynamic(node: ast.AST, pkg: str) -> list[tuple[int, str]]:
    """Run-time imports a node names: ``import_module("...")`` calls and lazy tables' module strings."""

    def resolve(name: str) -> str:
        if name.startswith("."):
            up = len(name) - len(name.lstrip("."))
            base = pkg.split(".")[: len(pkg.split(".")) - up + 1]
            return ".".join([*base, name.lstrip(".")])
        return name if name.startswith("perflow") else f"{pkg}.{name}"

    out = []
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module") and node.args:
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            out.append((node.lineno, resolve(arg.value)))
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    if any(isinstance(t, ast.Name) and t.id in LAZY_TABLES for t in targets) and isinstance(node.value, ast.Dict):
        for v in node.value.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out.append((v.lineno, resolve(v.value)))
    return out


def _imports(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """``(line, imported module or name)`` of every perflow import in a module's source (run-time ones too)."""
    pkg = module if is_package else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        out += _dynamic(node, pkg)
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
        elif (here, there) in APART:
            bad.append(f"{path.relative_to(ROOT.parent)}:{line} imports {target} ({here} and {there} share codecs)")
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


def test_the_check_sees_run_time_imports() -> None:
    src = """
import importlib
_LAZY = {"Thing": ".things", "Other": "perflow.flow.api", "Sub": "engine"}
READER_MODULES: dict[str, str] = {"x": "perflow.readers.saved"}
def f():
    return importlib.import_module("perflow.passes.hotspot"), importlib.import_module(name)
"""
    got = [n for _, n in _imports(src, "perflow.dask", True)]
    assert sorted(got) == sorted(
        ["perflow.dask.things", "perflow.flow.api", "perflow.dask.engine", "perflow.readers.saved",
         "perflow.passes.hotspot"]
    )  # fmt: skip
    assert [n for _, n in _imports("from ..readers.otf2 import decode", "perflow.writers.otf2", False)] == [
        "perflow.readers.otf2"
    ]
    assert ("writers", "readers") in APART
