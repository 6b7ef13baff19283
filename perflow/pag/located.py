"""A PAG's metrics by location and by vertex: its locations and processes, metric names checked, aggregation.

:class:`Located` is a base of :class:`~perflow.pag.pag.PAG`: its
``locations``, ``processes``, ``n_processes``, ``check_metric``,
``aggregate(metric, agg)`` (dense: a location without a row counts as zero)
and ``metric_frame``, over its metrics table (``_metrics``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import numpy as np
import pandas as pd

from .._arrays import unique
from ..errors import MetricError
from .frames import aggregate

__all__ = ["Located"]


class Located:
    """The PAG's metrics per location and per vertex."""

    @functools.cached_property
    def locations(self) -> pd.DataFrame:
        """The (process, thread) pairs that have data, sorted."""
        if self._tables is not None:
            return self._tables.locations()
        idx = self._metrics.index
        plev = idx.levels[1].to_numpy().astype(np.int64)
        tlev = idx.levels[2].to_numpy().astype(np.int64)
        nt = max(len(tlev), 1)
        key = np.asarray(idx.codes[1], dtype=np.int64) * nt + np.asarray(idx.codes[2], dtype=np.int64)
        present = np.flatnonzero(np.bincount(key, minlength=len(plev) * nt)) if len(key) else np.zeros(0, np.int64)
        p, t = plev[present // nt] if len(plev) else present, tlev[present % nt] if len(tlev) else present
        # every region instance of a trace contributes a metric row, so these are all locations
        return pd.DataFrame({"process": p.astype(np.int64), "thread": t.astype(np.int64)})

    @property
    def processes(self) -> np.ndarray:
        """Sorted process ids (MPI ranks) that have data."""
        return unique(self.locations["process"].to_numpy())

    @property
    def n_processes(self) -> int:
        """Number of processes with data (or the ``nprocs`` recorded by the source, if larger)."""
        return max(len(self.processes), int(self.attrs.get("nprocs", 0) or 0))

    def check_metric(self, metric: str) -> None:
        """Raise :class:`~perflow.errors.MetricError` (with a did-you-mean) for an unknown metric."""
        self._check_metric(metric)

    def _check_metric(self, metric: str) -> None:
        names = self.metric_names
        if metric not in names:
            from difflib import get_close_matches

            close = get_close_matches(metric, [str(c) for c in names], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise MetricError(f"unknown metric {metric!r}{hint} (metrics: {', '.join(map(str, names))})")

    def aggregate(self, metric: str, agg: str = "sum") -> pd.Series:
        """One metric aggregated across processes and threads, per vertex.

        Parameters
        ----------
        metric : str
            A metric name.
        agg : {"sum", "mean", "max", "min", "std", "count", "median"}
            Locations without a row count as zero.

        Returns
        -------
        pandas.Series
            Indexed by vertex id.
        """
        self._check_metric(metric)
        vals = aggregate(self._metrics, metric, agg, n_vertices=self.n_vertices, n_locations=self._n_locations)
        return pd.Series(vals, index=self._vertices.index, name=f"{metric}:{agg}" if agg != "sum" else metric)

    @functools.cached_property
    def _n_locations(self) -> int:
        return len(self.locations)

    def metric_frame(self, metrics: Iterable[str] | None = None, agg: str = "sum") -> pd.DataFrame:
        """Per-vertex table of the vertex attributes and aggregated metrics."""
        names = list(metrics) if metrics is not None else self.metric_names
        df = self._vertices[["name", "kind", "parent", "depth"]].copy()
        for m in names:
            df[m] = self.aggregate(m, agg).to_numpy()
        return df
