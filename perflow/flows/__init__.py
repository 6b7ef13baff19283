"""Flows shipped with perflow.

Each flow is a YAML file ``flows/<name>.yaml`` or a Python module
``flows/<name>.py`` defining ``FLOW`` (a :class:`perflow.Flow`) or a
function ``flow()`` returning one. ``perflow flows`` lists them and
``perflow run NAME`` runs one by name.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from perflow.flow.loader import flow_from_python
from perflow.flow.yaml_io import loads

__all__ = ["FLOW_DIR", "names", "path", "find", "describe"]

FLOW_DIR = Path(__file__).resolve().parent


def _files() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for p in sorted(FLOW_DIR.iterdir()):
        if p.name.startswith(("_", ".")):
            continue
        if p.suffix in (".yaml", ".yml", ".py"):
            out.setdefault(p.stem, p)
    return out


def names() -> list[str]:
    """Names of the shipped flows, sorted."""
    return sorted(_files())


def path(name: str) -> Path:
    """The file defining the shipped flow ``name`` (KeyError if there is none)."""
    files = _files()
    if name not in files:
        raise KeyError(f"no shipped flow {name!r} (shipped: {', '.join(files) or 'none'})")
    return files[name]


def find(name: str) -> Any:
    """The shipped flow ``name`` as a :class:`perflow.Flow` (not validated)."""

    p = path(name)
    if p.suffix == ".py":
        f = flow_from_python(importlib.import_module(f"{__name__}.{p.stem}"), str(p))
        f.source = str(p)
    else:
        f = loads(p.read_text(encoding="utf-8"), source=str(p), validate=False)
    f.origin = name
    return f


def describe() -> dict[str, str]:
    """Shipped flow name -> one-line description."""
    out = {}
    for name in names():
        try:
            out[name] = find(name).summary
        except Exception as exc:  # a broken flow still shows up, with why
            out[name] = f"(cannot be read: {exc})"
    return out
