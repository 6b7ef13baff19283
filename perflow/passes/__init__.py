"""perflow's built-in pass library.

Each family of passes lives in its own module (``passes.<family>``).
Importing this package imports none of them: the registry
(:mod:`perflow.flow.registry`) learns the passes from the pass index
(``_index.json``, see :mod:`perflow.flow.passindex`) and imports a family's
module when one of its passes is first used, so that listing passes or running
a flow costs only the modules (and their libraries: matplotlib, scipy, ...) in
use. :func:`load_all` imports every family; ``perflow.passes.<family>`` imports
one. The run's page, its findings and a value's HTML fragment are passes of
this library that fill the flow layer's presentation roles
(:mod:`perflow.flow.roles`).
"""

from __future__ import annotations

import functools
import importlib
import json
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["pass_index", "modules", "load_all"]


@functools.cache
def pass_index() -> dict[str, dict[str, Any]]:
    """Pass name -> index record (module, function, version, tags, doc, ports, settings)."""
    path = Path(__file__).with_name("_index.json")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # pragma: no cover - a broken install: every module is imported instead
        return {}


def modules() -> list[str]:
    """The full names of the pass family modules."""
    return [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]


def load_all() -> None:
    """Import every pass family (registering all built-in passes)."""
    for name in modules():
        importlib.import_module(name)


def _family(name: str) -> ModuleType:
    """A pass family's module, imported on first use (the one lazy mechanism of this package)."""
    return importlib.import_module(f"{__name__}.{name}")


def __getattr__(name: str) -> ModuleType:
    if not name.startswith("_") and name in {m.rsplit(".", 1)[1] for m in modules()}:
        return _family(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
