"""A PAG backed by a :class:`~perflow.dask.dtrace.DistTrace`: analyses on the workers, tables gathered on first use.

:meth:`DistTrace.pag` returns a :class:`DaskPAG`: a real :class:`~perflow.PAG`
whose vertex table is on the client from the start, whose metrics table
(one row per vertex and location) is gathered the first time a pass reads
it, and whose instance tables (``pag.trace``: intervals, messages,
collectives; as large as the trace) only when a pass needs them, with a
logged warning when that is large. Its analyses (``pag.analyses``) run on the
workers when they have a partitioned form (:class:`~.runtime.DaskExecutor`):
a pass that asks for them gathers nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .._arrays import unique
from ..pag.instances import Trace, location_table
from ..pag.pag import PAG, MetricInfo
from ..pag.stats import VERTEX_STATS
from .runtime import DaskExecutor

if TYPE_CHECKING:  # pragma: no cover
    from .dtrace import DistTrace

__all__ = ["DaskPAG", "DistTables", "LazyTrace", "GATHER_WARN_ROWS"]

log = logging.getLogger(__name__)

#: gathering a metrics table with more rows than this logs a warning
GATHER_WARN_ROWS = 5_000_000


class DistTables:
    """The :class:`~perflow.pag.pag.LazyTables` of a distributed trace: gathered from the workers on first use."""

    def __init__(self, dist: DistTrace) -> None:
        self.dist = dist

    def metric_names(self) -> list[str]:
        return list(self.dist.metric_names)

    def metric_info(self) -> dict[str, MetricInfo]:
        return self.dist.metric_info

    def metrics(self) -> pd.DataFrame:
        if not self.dist.gathered("metrics"):
            n = self.dist.n_metric_rows
            if n > GATHER_WARN_ROWS:
                log.warning("gathering a metrics table of %d rows from the Dask workers", n)
        return self.dist.metrics_frame()

    def trace(self) -> Trace:
        return self.dist.lazy_trace()

    def locations(self) -> pd.DataFrame:
        return self.dist.locations()


class DaskPAG(PAG):
    """A PAG whose data live on Dask workers until a pass reads them (see the module docstring).

    Made through the PAG's public construction path for lazily materialised
    tables (``PAG(vertices, tables=DistTables(dist), executor=DaskExecutor(dist))``).

    Attributes
    ----------
    dist : DistTrace
        The distributed trace (distributed analyses: ``pag.dist.imbalance()``, ...).
    """

    def __init__(self, dist: DistTrace) -> None:
        super().__init__(
            dist.vertex_table, tables=DistTables(dist), executor=DaskExecutor(dist), attrs=dist.pag_attrs()
        )
        self.dist = dist

    @property
    def gathered(self) -> set[str]:
        """Which tables have been gathered to the client so far (``"metrics"``, ``"trace"``)."""
        return {k for k in ("metrics", "trace") if self.dist.gathered(k)}

    def aggregate(self, metric: str, agg: str = "sum") -> pd.Series:
        """Per-vertex aggregation across locations, combined on the workers (``median`` gathers the metrics)."""
        if agg == "median":
            log.warning("median has no partitioned form: gathering the %r column", metric)
            return super().aggregate(metric, agg)
        self.check_metric(metric)
        if agg not in ("sum", "mean", "max", "min", "std", "count"):
            return super().aggregate(metric, agg)  # the error of an unknown aggregation
        st = self.analyses.get(VERTEX_STATS, metric=metric, across="location")
        vals = np.asarray(st[agg], dtype=np.float64)
        return pd.Series(vals, index=pd.RangeIndex(self.n_vertices), name=f"{metric}:{agg}" if agg != "sum" else metric)

    @property
    def n_processes(self) -> int:
        """Number of processes."""
        return max(int(self.attrs.get("nprocs", 0) or 0), len(unique(self.dist.defs.locations["process"])))

    def __repr__(self) -> str:
        return f"<DaskPAG vertices={self.n_vertices}, {self.dist!r}, gathered={sorted(self.gathered)}>"


class LazyTrace(Trace):
    """A :class:`~perflow.pag.instances.Trace` whose tables are gathered from the workers on first access."""

    def __init__(self, dist: DistTrace) -> None:  # noqa: D107 - no Trace.__init__: nothing is gathered here
        object.__setattr__(self, "_dist", dist)
        object.__setattr__(self, "comms", dict(dist.defs.comms))
        object.__setattr__(self, "comm_names", dict(dist.defs.comm_names))
        object.__setattr__(self, "locations", location_table(dist.defs.locations))

    @property
    def intervals(self) -> pd.DataFrame:  # type: ignore[override]
        """Region instances (gathered on first access)."""
        return self._dist.trace_tables().intervals

    @property
    def messages(self) -> pd.DataFrame:  # type: ignore[override]
        """Matched messages (gathered on first access)."""
        return self._dist.trace_tables().messages

    @property
    def collectives(self) -> pd.DataFrame:  # type: ignore[override]
        """Collective participants (gathered on first access)."""
        return self._dist.trace_tables().collectives

    @property
    def locks(self) -> pd.DataFrame:  # type: ignore[override]
        """Lock acquisitions (gathered on first access)."""
        return self._dist.trace_tables().locks

    @property
    def io(self) -> pd.DataFrame:  # type: ignore[override]
        """I/O operations (gathered on first access)."""
        return self._dist.trace_tables().io

    @property
    def io_handles(self) -> dict[int, str]:  # type: ignore[override]
        """I/O handle names."""
        return self._dist.trace_tables().io_handles

    @property
    def rma(self) -> pd.DataFrame:  # type: ignore[override]
        """RMA records (gathered on first access)."""
        return self._dist.trace_tables().rma

    @property
    def rma_windows(self) -> dict[int, dict]:  # type: ignore[override]
        """RMA windows."""
        return self._dist.trace_tables().rma_windows

    @property
    def rma_groups(self) -> dict[int, np.ndarray]:  # type: ignore[override]
        """Members of the RMA group syncs' groups."""
        return self._dist.trace_tables().rma_groups

    @property
    def n_intervals(self) -> int:
        """Number of region instances (known without gathering)."""
        return int(self._dist.built.tree["n_intervals"])

    @property
    def span(self) -> tuple[float, float]:
        """(first enter, last leave) over all intervals (reduced on the workers)."""
        return self._dist.span()

    def __repr__(self) -> str:
        return f"<LazyTrace of {self._dist!r}>"

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other
