"""Settings: declared once, as a frozen dataclass, and given to functions as keyword parameters.

A :class:`Settings` subclass is the single declaration of a group of choices:
each field's type (``Literal[...]`` lists the allowed values), default and
documentation (the ``Attributes`` section of its docstring), and further
checks in :meth:`Settings.check`. An analysis takes one as its settings
(:mod:`perflow.pag.analysis`); a pass or function that needs the same choices
takes the same class through :func:`settings_keywords`, which turns its
fields into keyword-only parameters (so the pass registry, ``perflow
validate`` and flows see them as ordinary settings with their types, allowed
values and defaults) and hands the function one validated object:

>>> from dataclasses import dataclass
>>> from typing import Literal
>>> @dataclass(frozen=True)
... class TopSettings(Settings):
...     '''Attributes
...     ----------
...     k : int
...         How many rows.
...     order : {"largest", "smallest"}
...         Which end.
...     '''
...     k: int = 5
...     order: Literal["largest", "smallest"] = "largest"
>>> @settings_keywords(TopSettings, "top")
... def top(values, *, top: TopSettings):
...     return sorted(values, reverse=top.order == "largest")[: top.k]
>>> top([3, 1, 2], k=2)
[3, 2]
>>> import inspect; str(inspect.signature(top))
"(values, *, k: int = 5, order: Literal['largest', 'smallest'] = 'largest')"
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args, get_origin

from ..errors import PassError

__all__ = ["Settings", "NoSettings", "SettingsError", "settings_dict", "settings_keywords", "settings_of", "field_docs"]

F = TypeVar("F", bound=Callable[..., Any])


class SettingsError(PassError, ValueError):
    """Settings of an analysis (or of the pass that asked for it) are invalid."""


@dataclass(frozen=True)
class Settings:
    """Base class of analysis settings: a frozen dataclass, validated on construction.

    Fields annotated with ``Literal[...]`` must take one of the listed values,
    ``int``/``float``/``bool``/``str`` fields must have that type (an int is
    accepted for a float), and a subclass may add checks in :meth:`check`
    (raise :class:`SettingsError`). :meth:`of` builds settings from keyword
    values and names the pass or analysis in every error.
    """

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            _check_field(type(self).__name__, f.name, getattr(self, f.name), hints.get(f.name, Any))
        self.check()

    def check(self) -> None:
        """Further checks of a subclass (raise :class:`SettingsError`)."""

    @classmethod
    def of(cls, owner: str | None = None, /, **values: Any) -> Settings:
        """Settings from keyword values; errors name ``owner`` (a pass or analysis) and the setting."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        who = f"{owner}: " if owner else ""
        if unknown:
            raise SettingsError(f"{who}unknown setting(s) {', '.join(unknown)} (settings: {', '.join(sorted(names))})")
        try:
            return cls(**values)
        except SettingsError as e:
            raise SettingsError(f"{who}{e}") from None


def _check_field(owner: str, name: str, value: Any, tp: Any) -> None:
    if get_origin(tp) is Literal:
        if value not in get_args(tp):
            choices = ", ".join(map(repr, get_args(tp)))
            raise SettingsError(f"setting {name}={value!r} is not one of {choices}")
        return
    if get_origin(tp) in (typing.Union, types.UnionType):
        if value is None and type(None) in get_args(tp):
            return
        tp = next((a for a in get_args(tp) if a is not type(None)), Any)
    ok = True
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif tp is str:
        ok = isinstance(value, str)
    if not ok:
        raise SettingsError(f"setting {name}={value!r} should be of type {tp.__name__}")


@dataclass(frozen=True)
class NoSettings(Settings):
    """Settings of an analysis that has none."""


def settings_dict(s: Settings) -> Mapping[str, Any]:
    """The fields of a settings object as a dict."""
    return {f.name: getattr(s, f.name) for f in dataclasses.fields(s)}


def _heading(lines: list[str], i: int) -> bool:
    return bool(lines[i].strip()) and i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}


def _attribute_entries(cls: type) -> dict[str, list[str]]:
    """The entries of the ``Attributes`` section of a class's own numpydoc docstring, by field name."""
    lines = inspect.cleandoc(cls.__dict__.get("__doc__") or "").splitlines()
    out: dict[str, list[str]] = {}
    for i in range(len(lines)):
        if lines[i].strip() == "Attributes" and _heading(lines, i):
            current: list[str] | None = None
            for j in range(i + 2, len(lines)):
                if _heading(lines, j):
                    break
                line = lines[j]
                if line and not line.startswith(" "):
                    current = [line]
                    for name in line.split(":")[0].split(","):
                        out[name.strip()] = current
                elif current is not None:
                    current.append(line)
            break
    for entry in out.values():
        while entry and not entry[-1].strip():
            entry.pop()
    return out


def field_docs(cls: type) -> list[str]:
    """The numpydoc entries documenting the fields of a settings class, in field order (cleaned lines).

    Each field's entry comes from the ``Attributes`` section of the nearest
    class in the method resolution order that documents it alone, so a
    subclass documents only the fields it adds.
    """
    per_class = [_attribute_entries(c) for c in cls.__mro__]
    out: list[str] = []
    for f in dataclasses.fields(cls):
        entry = next((e[f.name] for e in per_class if f.name in e and "," not in e[f.name][0].split(":")[0]), None)
        out += entry or []
    return out


def _with_parameters(doc: str | None, entries: list[str]) -> str:
    """``doc`` with ``entries`` appended to its ``Parameters`` section (added when it has none)."""
    lines = inspect.cleandoc(doc or "").splitlines()
    if not entries:
        return "\n".join(lines)
    start = next((i for i in range(len(lines)) if lines[i].strip() == "Parameters" and _heading(lines, i)), None)
    if start is None:
        return "\n".join([*lines, "", "Parameters", "----------", *entries]).strip("\n")
    end = next((j for j in range(start + 2, len(lines)) if _heading(lines, j)), len(lines))
    at = end
    while at > start + 2 and not lines[at - 1].strip():
        at -= 1
    return "\n".join([*lines[:at], *entries, *lines[at:]])


def settings_keywords(cls: type[Settings], param: str) -> Callable[[F], F]:
    """Give a function the fields of ``cls`` as keyword-only parameters, handed to it as one ``cls`` object.

    The decorated function declares a keyword-only parameter ``param``
    (annotated ``cls``). The function returned has, in its place, one
    keyword-only parameter per field of ``cls``, with the field's type and
    default, so a pass registered from it has those settings, and its
    docstring's ``Parameters`` gain the fields' documentation (``cls``'s
    ``Attributes`` section). A call builds the settings with ``cls.of``
    (errors name the function and the setting) and passes them as ``param``;
    a ready ``cls`` object may be given as ``param`` instead (keywords then
    replace some of its fields). Nothing else is repeated: the defaults,
    choices and checks are the dataclass's.
    """
    fields = [f for f in dataclasses.fields(cls)]
    hints = typing.get_type_hints(cls)
    names = [f.name for f in fields]

    def wrap(f: F) -> F:
        sig = inspect.signature(f)
        if param not in sig.parameters or sig.parameters[param].kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(f"{f.__qualname__}: settings_keywords needs a keyword-only parameter {param!r}")
        clash = [n for n in names if n in sig.parameters]
        if clash:
            raise TypeError(f"{f.__qualname__}: parameters {clash} are fields of {cls.__name__} too")
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            if p.name != param:
                params.append(p)
                continue
            params += [
                inspect.Parameter(
                    fl.name, inspect.Parameter.KEYWORD_ONLY, default=fl.default, annotation=hints[fl.name]
                )
                for fl in fields
            ]
        owner = f"pass {f.__name__!r}"

        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {k: kwargs.pop(k) for k in names if k in kwargs}
            obj = kwargs.pop(param, None)
            if obj is None:
                s = cls.of(owner, **given)
            elif not isinstance(obj, cls):
                raise SettingsError(f"{owner}: {param} must be {cls.__name__}, not {type(obj).__name__}")
            else:
                s = cls.of(owner, **{**settings_dict(obj), **given}) if given else obj
            return f(*args, **kwargs, **{param: s})

        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        ann = {k: v for k, v in getattr(f, "__annotations__", {}).items() if k != param}
        wrapper.__annotations__ = {**ann, **{n: hints[n] for n in names}}
        wrapper.__doc__ = _with_parameters(f.__doc__, field_docs(cls))
        wrapper.__perflow_settings__ = (*getattr(f, "__perflow_settings__", ()), cls)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return wrap


def settings_of(func: Callable[..., Any]) -> tuple[type[Settings], ...]:
    """The :class:`Settings` classes whose fields ``func`` takes as keywords (:func:`settings_keywords`)."""
    return tuple(getattr(func, "__perflow_settings__", ()))
