"""Plug-ins found through entry points: pass libraries, flow libraries, readers, engines.

perflow's own pass library (:mod:`perflow.passes`), flow library
(:mod:`perflow.flows`) and engines register through the same entry-point
groups a third-party package uses, so the framework never imports them by
name:

========================  ==========================================================
group                     an entry point names
========================  ==========================================================
``perflow.passes``        a module whose import registers passes (``@pass_``), or
                          one pass function (registered under the entry point's name)
``perflow.flows``         a flow library: an object with ``names()`` and
                          ``find(name)`` (and optionally ``path(name)``,
                          ``describe()``), e.g. a module
``perflow.readers``       a module whose import registers readers
                          (:func:`perflow.readers.register_reader`)
``perflow.engines``       an engine class or factory, run with ``--engine NAME``
========================  ==========================================================

In ``pyproject.toml``::

    [project.entry-points."perflow.passes"]
    mylib = "mylib.passes"

Entry points of perflow itself load first, so a third party's pass of the
same name replaces a built-in one (with a warning).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

__all__ = ["entry_points", "load_group", "GROUPS"]

log = logging.getLogger(__name__)

#: the entry-point groups perflow reads
GROUPS = ("perflow.passes", "perflow.flows", "perflow.readers", "perflow.engines")

_LOADED: dict[str, dict[str, Any]] = {}
_LOCK = threading.RLock()


def entry_points(group: str) -> list[Any]:
    """The entry points of ``group``, perflow's own first, then by name."""
    from importlib.metadata import entry_points as _eps

    eps = list(_eps(group=group))
    own = [e for e in eps if e.value.split(":")[0].split(".")[0] == "perflow"]
    return own + sorted((e for e in eps if e not in own), key=lambda e: e.name)


def load_group(group: str) -> dict[str, Any]:
    """Load every entry point of ``group`` once; name -> loaded object (failures are logged and skipped)."""
    with _LOCK:
        if group in _LOADED:
            return _LOADED[group]
        out: dict[str, Any] = {}
        _LOADED[group] = out  # a plug-in importing perflow while loading must not recurse
        for ep in entry_points(group):
            try:
                out[ep.name] = ep.load()
            except Exception as exc:
                log.warning("entry point %s = %s (%s) failed to load: %s", ep.name, ep.value, group, exc)
        return out
