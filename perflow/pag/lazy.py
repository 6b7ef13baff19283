"""Lazily materialised tables: the protocol an engine's PAGs implement, and the PAG's table slots.

An engine builds its PAGs with ``PAG(vertices, tables=..., executor=...)``
(:class:`LazyTables`: metrics, their descriptions, the instance tables and the
locations, materialised on first use); a PAG reads its tables through
:class:`_Table` slots, which hold the frames the constructor got or ask the
:class:`LazyTables` each time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .base import MetricInfo
    from .instances import Trace

__all__ = ["LazyTables"]


@runtime_checkable
class LazyTables(Protocol):
    """The tables of a PAG whose data live elsewhere (an engine's workers), materialised on first use.

    An engine builds its PAGs with ``PAG(vertices, tables=..., executor=...)``:
    the vertex table is here from the start; the PAG asks ``tables`` for the
    rest each time it needs them, so an implementation materialises each
    table once and keeps it (the Dask engine's gathers the metrics table, and
    the instance tables, from its workers). ``metric_names``,
    ``metric_info`` and ``locations`` must be cheap: listings and checks use
    them without touching the metrics.
    """

    def metric_names(self) -> list[str]:
        """The metric columns, known without materialising the metrics table."""
        ...

    def metric_info(self) -> dict[str, MetricInfo]:
        """Description of each metric."""
        ...

    def metrics(self) -> pd.DataFrame:
        """The metrics table (as :func:`perflow.pag.frames.make_metrics` makes it)."""
        ...

    def trace(self) -> Trace | None:
        """The instance tables (a :class:`~perflow.pag.instances.Trace`, which may gather its own lazily), or None."""
        ...

    def locations(self) -> pd.DataFrame:
        """The (process, thread) locations with data, sorted (columns ``process``, ``thread``)."""
        ...


class _Table:
    """A table slot of a PAG: the value the constructor got, else its :class:`LazyTables`' (asked on each use)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot, self.method = f"_given{name}", name.lstrip("_")

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        d = obj.__dict__
        if self.slot in d:
            return d[self.slot]
        tables = d.get("_tables")
        if tables is None:
            raise AttributeError(self.method)
        return getattr(tables, self.method)()

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.slot] = value
