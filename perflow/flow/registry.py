"""The pass registry: passes are plain typed functions.

>>> from perflow.flow import pass_
>>> @pass_(version="1")
... def hotspot(pag: PAG, *, metric: str = "time_exc", k: int = 10) -> pd.DataFrame:
...     '''The k vertices with the most ``metric``.'''
...     ...

The decorator reads the signature: positional parameters are the pass's data
*inputs* (their annotations are port types), keyword-only parameters are its
*settings* (annotation and default give the setting's type and default). The
return annotation is the single output, named ``output=`` (default
``"result"``); a pass with several outputs declares ``outputs={"name":
type, ...}`` and returns a dict with those keys. The function is returned
unchanged, so calling it directly works without the framework.

Passes are found by name in this registry, filled from the entry-point group
``perflow.passes`` (each entry point names a module to import, whose
``@pass_`` functions register, or one function; perflow's own library
:mod:`perflow.passes` is registered that way too), or by dotted path
``package.module:function`` where the caller allows importing code.

The framework itself never names a pass: it asks for a **role**
(:mod:`perflow.flow.roles`: the page of a run, its findings, a notebook
fragment) with :func:`role_pass`, and a library registers a pass for a role
with ``@pass_(role=...)``.

A library module that provides ``pass_index()`` and ``load_all()`` (see
:mod:`perflow.flow.passindex`) is registered lazily: its passes are known by
name from the index (:func:`pass_infos` lists them without importing
anything) and the module defining a pass is imported when the pass is first
asked for. :func:`all_passes` imports everything.

What a pass is (:class:`PassSpec`, :class:`Port`, :class:`Setting`,
:func:`make_spec`) lives in :mod:`perflow.flow.spec`; the type checks
(:func:`check_value`, :func:`is_compatible`, :func:`type_name`) in
:mod:`perflow.flow.types`. Both are re-exported here.
"""

from __future__ import annotations

import importlib
import logging
import types
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..errors import PassError
from .plugins import load_group
from .roles import ROLES
from .spec import PassSpec, Port, Setting, make_spec
from .types import check_value, is_compatible, type_name

__all__ = [
    "pass_",
    "PassSpec",
    "Port",
    "Setting",
    "get_pass",
    "all_passes",
    "register",
    "check_value",
    "type_name",
    "is_compatible",
    "load_builtin_passes",
    "pass_infos",
    "role_pass",
]

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])

_REGISTRY: dict[str, PassSpec] = {}
_entry_points_loaded = False
#: passes known from a library's index, not imported yet: name -> index record
_LAZY: dict[str, dict[str, Any]] = {}
#: libraries registered lazily (modules with pass_index() and load_all())
_LIBRARIES: list[Any] = []


def pass_(
    func: F | None = None,
    *,
    name: str | None = None,
    version: str = "1",
    output: str = "result",
    outputs: Mapping[str, Any] | None = None,
    cacheable: bool = True,
    tags: tuple[str, ...] = (),
    role: str | None = None,
) -> Any:
    """Register a function as a pass (usable as ``@pass_`` or ``@pass_(...)``).

    Parameters
    ----------
    name : str, optional
        Registry name (default: the function's name).
    version : str
        Bump it whenever the pass's results change; the cross-run cache keys on it.
    output : str
        Name of the single output (when ``outputs`` is not given).
    outputs : mapping of str to type, optional
        Several outputs; the function then returns a dict with these keys.
    cacheable : bool
        Whether results may be cached across runs (false for passes with side effects).
    tags : tuple of str
        Free-form labels (``"profile"``, ``"trace"``, ``"plot"``) for listings.
    role : str, optional
        A role of :mod:`perflow.flow.roles` the pass fills (``"page"``, ``"findings"``,
        ``"fragment"``): the framework calls it for that role, never by its name.
    """

    def wrap(f: F) -> F:
        spec = make_spec(
            f, name=name, version=version, output=output, outputs=outputs, cacheable=cacheable, tags=tags, role=role
        )
        register(spec)
        f.__perflow_pass__ = spec  # type: ignore[attr-defined]
        return f

    return wrap(func) if func is not None else wrap


def _builtin_module(module: str) -> bool:
    return module == "perflow.passes" or module.startswith("perflow.passes.")


def _builtin(spec: PassSpec) -> bool:
    return _builtin_module(spec.module)


def register(spec: PassSpec) -> PassSpec:
    """Add a pass to the registry.

    Registering a name again from the same function (a re-run notebook cell, a
    reloaded module) replaces it. A pass of your own takes precedence over a
    built-in pass of the same name, whichever registers first (a warning says
    so). Two different functions of your own under one name are an error.
    """
    old = _REGISTRY.get(spec.name)
    if old is not None and (old.module, old.func.__qualname__) != (spec.module, spec.func.__qualname__):
        where = f"{old.module}.{old.func.__qualname__}"
        if _builtin(old) and not _builtin(spec):
            log.warning("pass %r from %s replaces the built-in pass %s", spec.name, spec.module, where)
        elif _builtin(spec) and not _builtin(old):
            log.warning(
                "the built-in pass %s.%s is hidden by your pass %r from %s",
                spec.module,
                spec.func.__qualname__,
                spec.name,
                old.module,
            )
            return old
        else:
            raise PassError(f"pass name {spec.name!r} is already registered by {where}")
    _REGISTRY[spec.name] = spec
    return spec


def load_builtin_passes() -> None:
    """Load the pass libraries registered in the entry-point group ``perflow.passes`` (perflow's own included), once.

    A library with a pass index is only indexed here; its modules are imported
    when one of their passes is used.
    """
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    loaded = load_group("perflow.passes")
    if not loaded:  # pragma: no cover - a broken install (no package metadata)
        log.warning("no pass library found in the entry-point group 'perflow.passes'; is perflow installed?")
    for ep_name, obj in loaded.items():
        index = getattr(obj, "pass_index", None)
        if isinstance(obj, types.ModuleType) and callable(index) and callable(getattr(obj, "load_all", None)):
            _LIBRARIES.append(obj)
            try:
                entries = index()
            except Exception as exc:  # noqa: BLE001 - a broken index: import the library instead
                log.warning("pass index of %s failed (%s); importing the whole library", obj.__name__, exc)
                obj.load_all()
                continue
            for name, rec in entries.items():
                _LAZY.setdefault(name, rec)
        elif callable(obj) and not isinstance(obj, type) and not hasattr(obj, "__perflow_pass__"):
            pass_(obj, name=ep_name)


def role_pass(role: str) -> PassSpec:
    """The pass that fills ``role`` (:mod:`perflow.flow.roles`), imported on first use.

    A pass of a third-party library replaces perflow's own; two third-party
    passes for one role are an error naming both.

    Raises
    ------
    PassError
        For an unknown role, for two third-party passes claiming it, or when no
        pass library provides it.
    """
    if role not in ROLES:
        raise PassError(f"unknown role {role!r} (roles: {', '.join(ROLES)})")
    load_builtin_passes()
    found = {n: sp.module for n, sp in _REGISTRY.items() if sp.role == role}
    found.update({n: str(rec["module"]) for n, rec in _LAZY.items() if rec.get("role") == role and n not in found})
    if not found:
        raise PassError(
            f"no pass library provides the role {role!r} ({ROLES[role].doc}): "
            f"a pass registered with @pass_(role={role!r}) fills it"
        )
    own = sorted(n for n, m in found.items() if not _builtin_module(m))
    if len(own) > 1:
        raise PassError(f"the role {role!r} is claimed by several passes: {', '.join(own)} (keep one)")
    return get_pass(own[0] if own else sorted(found)[0])


def _load_lazy(name: str) -> PassSpec | None:
    """Import the module of an indexed pass; the pass registers itself."""
    rec = _LAZY.get(name)
    if rec is None:
        return None
    try:
        importlib.import_module(rec["module"])
    except Exception as exc:
        raise PassError(f"pass {name!r}: cannot import its module {rec['module']}: {exc}") from exc
    if name not in _REGISTRY:  # a stale index: the module no longer defines it
        _LAZY.pop(name, None)
        return None
    return _REGISTRY[name]


def _load_libraries() -> None:
    """Import every lazily registered library (for listings of real specs, and stale indexes)."""
    load_builtin_passes()
    for lib in _LIBRARIES:
        lib.load_all()


def get_pass(name_or_func: str | Callable[..., Any], *, allow_import: bool = False) -> PassSpec:
    """Find a pass by registry name, by function, or (when allowed) by dotted path ``pkg.mod:func``.

    Raises
    ------
    PassError
        For an unknown name (with a did-you-mean suggestion) or a refused import.
    """
    if callable(name_or_func):
        spec = getattr(name_or_func, "__perflow_pass__", None)
        return spec if spec is not None else make_spec(name_or_func)
    name = str(name_or_func)
    if name in _REGISTRY:
        return _REGISTRY[name]
    load_builtin_passes()
    if name in _REGISTRY:
        return _REGISTRY[name]
    found = _load_lazy(name)
    if found is not None:
        return found
    if ":" in name:
        if not allow_import:
            raise PassError(
                f"pass {name!r} names code to import; allow it explicitly (allow_import=True, or "
                "--allow-import on the command line) if you trust its source"
            )
        mod_name, _, attr = name.partition(":")
        try:
            obj: Any = importlib.import_module(mod_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise PassError(f"cannot import pass {name!r}: {exc}") from None
        if not callable(obj):
            raise PassError(f"{name!r} is not a function")
        return get_pass(obj)
    _load_libraries()  # a pass missing from a stale index
    if name in _REGISTRY:
        return _REGISTRY[name]
    from difflib import get_close_matches

    close = get_close_matches(name, list(_REGISTRY), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise PassError(f"unknown pass {name!r}{hint} (see `perflow passes` for the list)")


def all_passes() -> dict[str, PassSpec]:
    """Every registered pass, built-in ones included, by name (imports every pass library)."""
    _load_libraries()
    return dict(sorted(_REGISTRY.items()))


def pass_infos() -> dict[str, Any]:
    """Every pass by name, as :class:`~perflow.flow.passindex.PassInfo`, without importing pass modules."""
    load_builtin_passes()
    out = {name: passindex.from_record(name, rec) for name, rec in _LAZY.items() if name not in _REGISTRY}
    out.update({name: passindex.info_of(spec) for name, spec in _REGISTRY.items()})
    return dict(sorted(out.items()))


# The pass index builds on the registry (it imports it at its top): the
# module, not its names, is imported here, last, so that either can be
# imported first.
from . import passindex  # noqa: E402
