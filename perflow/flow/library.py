"""Named flows from the flow libraries of the entry-point group ``perflow.flows``.

A flow library is any object with ``names()`` (the flow names it ships) and
``find(name)`` (the :class:`~perflow.flow.flow.Flow`, not validated);
optionally ``path(name)`` (the file defining it) and ``describe()`` (name ->
one-line summary). :mod:`perflow.flows` is perflow's own. When two libraries
ship a flow of the same name, the later one (a third party's) wins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .plugins import load_group

__all__ = ["flow_names", "find_flow", "flow_path", "describe_flows", "libraries"]


def libraries() -> list[Any]:
    """The flow libraries, perflow's own first."""

    return list(load_group("perflow.flows").values())


def _owner(name: str) -> Any:
    owner = None
    for lib in libraries():
        if name in lib.names():
            owner = lib
    return owner


def flow_names() -> list[str]:
    """Names of every shipped flow, sorted."""
    out: set[str] = set()
    for lib in libraries():
        out.update(lib.names())
    return sorted(out)


def find_flow(name: str) -> Any:
    """The shipped flow ``name`` (not validated); KeyError when no library ships it."""
    lib = _owner(name)
    if lib is None:
        raise KeyError(name)
    return lib.find(name)


def flow_path(name: str) -> Path | None:
    """The file that defines the shipped flow ``name``, when its library says."""
    lib = _owner(name)
    if lib is None:
        raise KeyError(name)
    fn = getattr(lib, "path", None)
    return Path(fn(name)) if fn is not None else None


def describe_flows() -> dict[str, str]:
    """Shipped flow name -> one-line summary, sorted by name."""
    out: dict[str, str] = {}
    for lib in libraries():
        desc = getattr(lib, "describe", None)
        if desc is not None:
            out.update(desc())
        else:
            for n in lib.names():
                try:
                    out[n] = lib.find(n).summary
                except Exception as exc:  # a broken flow still shows up, with why
                    out[n] = f"(cannot be read: {exc})"
    return dict(sorted(out.items()))
