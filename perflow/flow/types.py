"""Port and setting types by name, for YAML flows and listings.

YAML flows name types with short words (``PAG``, ``DataFrame``, ``path``,
``int``, ...). :func:`resolve_type` turns a name into the Python type and
:func:`type_label` does the reverse. A name that is not in the table stays a
string: it is shown as is and is compatible with every type (it cannot be
checked), so an unusual type never makes a flow invalid by itself.

Types whose classes are expensive to import (matplotlib's ``Figure``) are
resolved lazily.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pathlib
import types
import typing
from typing import Any, get_args, get_origin

from .registry import type_name

__all__ = ["TYPE_NAMES", "resolve_type", "type_label", "shallow_check", "coerce_value", "describe_value"]

#: name -> "module:attribute" (imported on first use) or a builtin type.
TYPE_NAMES: dict[str, Any] = {
    "any": Any,
    "PAG": "perflow.pag.pag:PAG",
    "VertexSet": "perflow.pag.sets:VertexSet",
    "EdgeSet": "perflow.pag.sets:EdgeSet",
    "ParallelVertexSet": "perflow.pag.parallel:ParallelVertexSet",
    "ParallelEdgeSet": "perflow.pag.parallel:ParallelEdgeSet",
    "Trace": "perflow.trace.tables:Trace",
    "DataFrame": "pandas:DataFrame",
    "Series": "pandas:Series",
    "Figure": "matplotlib.figure:Figure",
    "path": pathlib.Path,
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "list": list,
    "dict": dict,
}
_RESOLVED: dict[str, Any] = {}


def resolve_type(name: str) -> Any:
    """The Python type called ``name`` in :data:`TYPE_NAMES` (the name itself when unknown)."""
    if name in _RESOLVED:
        return _RESOLVED[name]
    target = TYPE_NAMES.get(name, name)
    if isinstance(target, str):
        if name not in TYPE_NAMES:
            return name
        mod, _, attr = target.partition(":")
        target = getattr(importlib.import_module(mod), attr)
    _RESOLVED[name] = target
    return target


def type_label(tp: Any) -> str:
    """The YAML name of a type (the inverse of :func:`resolve_type`; a readable string otherwise)."""
    if tp is Any or tp is inspect.Parameter.empty or tp is None:
        return "any"
    if isinstance(tp, str):
        return tp
    for name, target in TYPE_NAMES.items():
        if target is tp:
            return name
        if isinstance(target, str) and isinstance(tp, type):
            mod, _, attr = target.partition(":")
            if tp.__name__ == attr and (tp.__module__ == mod or tp.__module__.startswith(mod + ".")):
                return name
    return type_name(tp)


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (typing.Union, types.UnionType)


def shallow_check(value: Any, tp: Any) -> bool:
    """Whether ``value`` is an instance of the outer type of ``tp`` (elements are not checked).

    Cheap enough to run on every value a step produces: ``list[int]`` only
    checks for a list. Unknown (string) types and ``Any`` accept everything.
    """
    if tp is Any or tp is inspect.Parameter.empty or isinstance(tp, str) or tp is None:
        return True
    if _is_union(tp):
        return any(shallow_check(value, a) for a in get_args(tp))
    if tp is type(None):
        return value is None
    if get_origin(tp) is typing.Literal:
        return value in get_args(tp)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is pathlib.Path:
        return isinstance(value, os.PathLike)
    origin = get_origin(tp) or tp
    if isinstance(origin, type):
        try:
            return isinstance(value, origin)
        except TypeError:  # some typing constructs refuse isinstance
            return True
    return True


def coerce_value(value: Any, tp: Any) -> Any:
    """Convert values that YAML and the command line cannot express to the declared type.

    ``str`` becomes :class:`pathlib.Path` for a path, a list becomes a tuple
    (or set) for a tuple-typed (set-typed) value, an int becomes a float for a
    float. Anything else is returned unchanged.
    """
    if tp is Any or isinstance(tp, str) or value is None:
        return value
    if _is_union(tp):
        for a in get_args(tp):
            if shallow_check(value, a):
                return coerce_value(value, a)
        return value
    origin = get_origin(tp) or tp
    if origin is pathlib.Path and isinstance(value, str):
        return pathlib.Path(value)
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    if origin in (set, frozenset) and isinstance(value, list):
        return origin(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def describe_value(value: Any, limit: int = 80) -> str:
    """A one-line description of a value for error notes and listings."""
    import reprlib

    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "columns"):
        return f"{type(value).__name__} ({shape[0]} rows x {shape[1]} columns)"
    if shape is not None:
        return f"{type(value).__name__} shape {tuple(shape)}"
    if type(value).__name__ == "PAG":
        return f"PAG ({getattr(value, 'n_vertices', '?')} vertices)"
    r = reprlib.Repr()
    r.maxstring = limit
    r.maxother = limit
    return r.repr(value)
