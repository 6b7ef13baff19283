"""Engines: where a flow reads its data and computes its analyses.

An engine is any object with

* ``name`` (``"local"``, ``"dask"``, ...),
* ``read(path, format=None, **options)``: the data of ``path`` as a PAG that
  lives on the engine (or ``None`` to let perflow's readers read it here),
* ``close()``.

The PAGs an engine returns carry their own analysis executor (see
:mod:`perflow.pag.analysis`): a pass asking such a PAG for an analysis gets
it computed where the data are (the Dask engine runs partitioned forms on its
workers and combines the partials), and a pass that reads the PAG's tables
gathers them. So engines need to know nothing about passes, and passes
nothing about engines.

``perflow.run(flow, ..., engine=eng)`` and ``perflow.read(path, engine=eng)``
take an engine; while a flow runs, :func:`current_engine` is the engine the
flow's ``read`` steps use. Engines are found by name through the entry-point
group ``perflow.engines`` (``perflow run --engine NAME``); an entry point
names a class or factory taking the engine's options as keywords.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from ..errors import FlowError
from .plugins import entry_points, load_group
from .problems import did_you_mean

__all__ = ["Engine", "LocalEngine", "current_engine", "using", "engine_names", "make_engine"]


@runtime_checkable
class Engine(Protocol):
    """Where a flow reads and analyses its data (see the module docstring)."""

    name: str

    def read(self, path: Any, format: str | None = None, **options: Any) -> Any:
        """The data of ``path`` on this engine, or ``None`` to read it locally."""
        ...

    def close(self) -> None:
        """Release the engine's resources."""
        ...


class LocalEngine:
    """This process: perflow's readers read the data, analyses run here."""

    name = "local"

    def read(self, path: Any, format: str | None = None, **options: Any) -> None:
        return None

    def close(self) -> None:
        pass

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<LocalEngine>"


_CURRENT: contextvars.ContextVar[Any] = contextvars.ContextVar("perflow_engine", default=None)


def current_engine() -> Any:
    """The engine of the running flow (``None`` outside a flow run with an engine)."""
    return _CURRENT.get()


@contextlib.contextmanager
def using(engine: Any) -> Iterator[Any]:
    """Make ``engine`` the current engine while the block runs (``None`` changes nothing)."""
    if engine is None:
        yield None
        return
    if not isinstance(engine, Engine):
        raise FlowError(f"{engine!r} is not an engine: it needs a name, read(path, ...) and close()")
    token = _CURRENT.set(engine)
    try:
        yield engine
    finally:
        _CURRENT.reset(token)


def engine_names() -> list[str]:
    """Names of the engines: ``local`` and those of the ``perflow.engines`` entry-point group."""

    return ["local", *sorted({e.name for e in entry_points("perflow.engines")} - {"local"})]


def make_engine(name: str, **options: Any) -> Any:
    """An engine by name, made with ``options`` (those that are ``None`` are left out).

    Raises
    ------
    FlowError
        For an unknown engine, or options the local engine does not take.
    """
    opts = {k: v for k, v in options.items() if v is not None}
    if name == "local":
        if opts:
            raise FlowError(f"the local engine takes no options (got {', '.join(sorted(opts))})")
        return LocalEngine()

    factories = load_group("perflow.engines")
    if name not in factories:
        raise FlowError(
            f"unknown engine {name!r}{did_you_mean(name, engine_names())} (engines: {', '.join(engine_names())})"
        )
    return factories[name](**opts)
