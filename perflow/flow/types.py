"""Port and setting types by name, for YAML flows and listings.

YAML flows name types with short words (``PAG``, ``DataFrame``, ``path``,
``int``, ...). :func:`resolve_type` turns a name into the Python type and
:func:`type_label` does the reverse. A name that is not in the table stays a
string: it is shown as is and is compatible with every type (it cannot be
checked), so an unusual type never makes a flow invalid by itself.

Types whose classes are expensive to import (matplotlib's ``Figure``) are
stood for by a *lazy class* (:func:`lazy_class`, :data:`Figure`): a class
whose ``isinstance``/``issubclass`` checks compare the qualified names of the
classes involved, so that checking a value or a port type needs no import;
pass modules annotate with it to stay cheap to import.

Type checks: :func:`type_name` (a short readable name for an annotation),
:func:`is_compatible` (whether an output may feed an input) and
:func:`check_value` (whether a value fits an annotation).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import operator
import os
import pathlib
import types
import typing
from typing import Any, get_args, get_origin

__all__ = [
    "TYPE_NAMES",
    "Figure",
    "PAGType",
    "lazy_class",
    "real_class",
    "resolve_type",
    "type_label",
    "shallow_check",
    "coerce_value",
    "describe_value",
    "type_name",
    "is_compatible",
    "check_value",
]


class _LazyClass(type):
    """Metaclass of the classes made by :func:`lazy_class`."""

    __target__: str

    def resolved(cls) -> type | None:
        """The real class when its module is already imported (nothing is imported here)."""
        import sys

        mod, _, qual = cls.__target__.partition(":")
        m = sys.modules.get(mod)
        obj: Any = m
        for part in qual.split(".") if m is not None else ():
            obj = getattr(obj, part, None)
        return obj if isinstance(obj, type) else None

    def __instancecheck__(cls, obj: Any) -> bool:
        return cls.__subclasscheck__(type(obj))

    def __subclasscheck__(cls, sub: Any) -> bool:
        if sub is cls:
            return True
        if not isinstance(sub, type):
            return False
        return any(f"{c.__module__}:{c.__qualname__}" == cls.__target__ for c in sub.__mro__)


def lazy_class(target: str) -> type:
    """A stand-in for the class ``"module:QualName"`` that never imports it (see the module docs)."""
    mod, _, qual = target.partition(":")
    return _LazyClass(
        qual.rsplit(".", 1)[-1],
        (),
        {"__target__": target, "__module__": mod, "__qualname__": qual, "__doc__": f"{target} (imported on use)"},
    )


def real_class(tp: Any) -> Any:
    """The real class for a lazy class whose module is imported; ``tp`` itself otherwise."""
    if isinstance(tp, _LazyClass):
        return tp.resolved() or tp
    return tp


#: matplotlib's Figure, for annotations and port types (matplotlib is imported only to make a figure)
Figure = lazy_class("matplotlib.figure:Figure")
#: the PAG class (and its subclasses, an engine's PAGs), checked without importing pandas
PAGType = lazy_class("perflow.pag.pag:PAG")

#: name -> "module:attribute" (imported on first use) or a builtin type.
TYPE_NAMES: dict[str, Any] = {
    "any": Any,
    "PAG": "perflow.pag.pag:PAG",
    "Ensemble": "perflow.pag.ensemble:Ensemble",
    "VertexSet": "perflow.pag.sets:VertexSet",
    "EdgeSet": "perflow.pag.sets:EdgeSet",
    "ParallelVertexSet": "perflow.pag.parallel:ParallelVertexSet",
    "ParallelEdgeSet": "perflow.pag.parallel:ParallelEdgeSet",
    "Trace": "perflow.pag.instances:Trace",
    "DataFrame": "pandas:DataFrame",
    "Series": "pandas:Series",
    "Figure": Figure,
    "path": pathlib.Path,
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "list": list,
    "tuple": tuple,
    "set": set,
    "dict": dict,
    "None": type(None),
}
_RESOLVED: dict[str, Any] = {}


def _resolve_name(name: str) -> Any:
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


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return parts


def resolve_type(name: str) -> Any:
    """The Python type a name stands for: a :data:`TYPE_NAMES` entry, ``A | B`` or ``list[A]``.

    A name that is not understood is returned as is (a string type fits every port).
    """
    text = name.strip()
    alts = _split_top(text, "|")
    if len(alts) > 1:
        members = [resolve_type(a) for a in alts]
        if any(isinstance(m, str) for m in members):
            return name
        return functools.reduce(operator.or_, members)
    if text.endswith("]") and "[" in text:
        head, _, inner = text[:-1].partition("[")
        origin = _resolve_name(head.strip())
        args = [... if a == "..." else resolve_type(a) for a in _split_top(inner, ",")]
        if isinstance(origin, str) or any(isinstance(a, str) for a in args):
            return name
        try:
            return origin[tuple(args)] if len(args) > 1 else origin[args[0]]
        except TypeError:
            return name
    return _resolve_name(text)


def type_label(tp: Any) -> str:
    """The YAML name of a type (the inverse of :func:`resolve_type`; a readable string otherwise)."""
    if tp is Any or tp is inspect.Parameter.empty or tp is None:
        return "any"
    if tp is ...:
        return "..."
    if isinstance(tp, str):
        return tp
    if _is_union(tp):
        return " | ".join(type_label(a) for a in get_args(tp))
    origin, args = get_origin(tp), get_args(tp)
    if origin is not None and args and origin is not typing.Literal:
        return f"{type_label(origin)}[{', '.join(type_label(a) for a in args)}]"
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
    if isinstance(value, PAGType):
        return f"{type(value).__name__} ({value.n_vertices} vertices)"
    r = reprlib.Repr()
    r.maxstring = limit
    r.maxother = limit
    return r.repr(value)


# ---------------------------------------------------------------------- type checks
def type_name(tp: Any) -> str:
    """A short readable name for a type annotation."""
    if tp is Any or tp is inspect.Parameter.empty:
        return "any"
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _resolve(tp: Any) -> Any:
    return Any if tp is inspect.Parameter.empty else tp


def is_compatible(produced: Any, expected: Any) -> bool:
    """Whether a value of type ``produced`` may feed a port of type ``expected`` (unknown types pass)."""
    produced, expected = _resolve(produced), _resolve(expected)
    if produced is Any or expected is Any or isinstance(produced, str) or isinstance(expected, str):
        return True
    exp_args = get_args(expected) if get_origin(expected) in (typing.Union, types.UnionType) else (expected,)
    prod_args = get_args(produced) if get_origin(produced) in (typing.Union, types.UnionType) else (produced,)
    for pa in prod_args:
        ok = False
        for ea in exp_args:
            pe, ee = real_class(get_origin(pa) or pa), real_class(get_origin(ea) or ea)
            if ee is Any or pe is Any:
                ok = True
            elif isinstance(pe, type) and isinstance(ee, type):
                ok = issubclass(pe, ee)
            else:
                ok = True
            if ok:
                break
        if not ok:
            return False
    return True


def check_value(value: Any, tp: Any) -> bool:
    """Whether ``value`` fits the annotation ``tp`` (int accepted for float; ``None`` for Optional)."""
    tp = _resolve(tp)
    if tp is Any or isinstance(tp, str):
        return True
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(check_value(value, a) for a in get_args(tp))
    if origin is typing.Literal:
        return value in get_args(tp)
    if tp is type(None):
        return value is None
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (list, tuple, set, frozenset):
        if not isinstance(value, list | tuple | set | frozenset):
            return False
        args = get_args(tp)
        if not args or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
            return all(check_value(v, args[0]) for v in value) if args else True
        if origin is tuple:
            return len(args) == len(value) and all(check_value(v, a) for v, a in zip(value, args))
        return all(check_value(v, args[0]) for v in value)
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            return False
        args = get_args(tp)
        return not args or all(check_value(k, args[0]) and check_value(v, args[1]) for k, v in value.items())
    if isinstance(origin, type):
        return isinstance(value, origin)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True
