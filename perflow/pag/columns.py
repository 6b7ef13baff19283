"""Column sources for expressions over PAG vertex sets (see :mod:`perflow.pag.expr_eval`).

:class:`VertexColumns` serves top-down vertices: vertex attributes (``name``,
``kind``, ``file``, ``depth``, ...) and metrics aggregated across processes
with one aggregation, or per (process, thread) location as a dense
vertices x locations matrix (absent rows are 0, as in every aggregation).
:class:`ParallelColumns` serves parallel vertices (one metric row each).
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import TYPE_CHECKING, Any

import numpy as np

from .._arrays import unique
from ..errors import MetricError, PAGError
from .expr_eval import Text, column_values

if TYPE_CHECKING:  # pragma: no cover
    from .pag import PAG

__all__ = ["VertexColumns", "ParallelColumns", "per_location"]

#: Extra names the vertex columns answer to (Hatchet's spellings).
HATCHET_ALIASES = {"time (inc)": "time_inc", "time": "time_exc", "type": "kind", "node_id": "vertex"}


def _unknown(name: str, metrics: list[str], attrs: list[str]) -> MetricError:
    close = get_close_matches(name, [*metrics, *attrs], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return MetricError(
        f"unknown metric {name!r}{hint} (metrics: {', '.join(metrics) or 'none'}; "
        f"vertex attributes: {', '.join(attrs)})"
    )


def per_location(pag: PAG, metric: str) -> np.ndarray:
    """A metric as a dense (vertices x locations) matrix; locations in ``pag.locations`` order, absent rows 0."""
    pag._check_metric(metric)
    idx = pag._metrics.index
    v = np.asarray(idx.codes[0], dtype=np.int64)
    nt = max(len(idx.levels[2]), 1)
    key = np.asarray(idx.codes[1], dtype=np.int64) * nt + np.asarray(idx.codes[2], dtype=np.int64)
    present = unique(key)
    out = np.zeros((pag.n_vertices, max(len(present), 1)))
    out[v, np.searchsorted(present, key)] = pag._metrics[metric].to_numpy(dtype=np.float64, na_value=np.nan)
    return out


class VertexColumns:
    """Names of an expression over the vertices ``ids`` of ``pag``.

    Parameters
    ----------
    pag : PAG
    ids : numpy.ndarray
        The vertices (rows of every column, in this order).
    agg : str
        Aggregation across locations for bare metric names; ``"any"``/``"all"``
        (or ``per_location=True``) give per-location matrices instead.
    aliases : dict, optional
        Extra names for columns (e.g. Hatchet's ``"time (inc)"``).
    """

    def __init__(self, pag: PAG, ids: np.ndarray, agg: str = "sum", *, aliases: dict[str, str] | None = None) -> None:
        self.pag, self.ids, self.agg = pag, np.asarray(ids, dtype=np.int64), agg
        self.per_location = agg in ("any", "all")
        self.aliases = aliases or {}
        self._cache: dict[tuple[str, str], Any] = {}  # several predicates of one query read the same metrics

    def __len__(self) -> int:
        return len(self.ids)

    def _resolve(self, name: str) -> str:
        vt, metrics = self.pag._vertices, self.pag.metric_names
        if name in vt.columns or name in metrics or name == "vertex":
            return name
        return self.aliases.get(name, name)

    def column(self, name: str) -> np.ndarray | Text:
        key = ("", self._resolve(name))
        if key not in self._cache:
            self._cache[key] = self._column(key[1])
        return self._cache[key]

    def _column(self, name: str) -> np.ndarray | Text:
        pag = self.pag
        vt = pag._vertices
        col: Any
        if name in pag.metric_names:
            if self.per_location:
                return per_location(pag, name)[self.ids]
            return pag.aggregate(name, self.agg).to_numpy()[self.ids]
        if name == "vertex" and name not in vt.columns:
            col = self.ids.astype(np.float64)
        elif name in vt.columns:
            col = column_values(vt[name])
            col = Text(col.codes[self.ids], col.cats) if isinstance(col, Text) else col[self.ids]
        else:
            raise _unknown(name, list(map(str, pag.metric_names)), [*map(str, vt.columns), "vertex"])
        if self.per_location:
            return Text(col.codes[:, None], col.cats) if isinstance(col, Text) else col[:, None]
        return col

    def aggregate(self, func: str, name: str) -> np.ndarray:
        name = self._resolve(name)
        if name not in self.pag.metric_names:
            raise _unknown(name, list(map(str, self.pag.metric_names)), [])
        if (func, name) not in self._cache:
            out = self.pag.aggregate(name, func).to_numpy()[self.ids]
            self._cache[(func, name)] = out[:, None] if self.per_location else out
        return self._cache[(func, name)]

    def leaf(self) -> np.ndarray:
        parent = self.pag._vertices["parent"].to_numpy()
        has_child = np.zeros(self.pag.n_vertices, dtype=bool)
        has_child[parent[parent >= 0]] = True
        out = ~has_child[self.ids]
        return out[:, None] if self.per_location else out


class ParallelColumns:
    """Names of an expression over parallel vertices (metric rows) ``ids``: vertex, process, thread,
    vertex attributes and metric values; no aggregations."""

    def __init__(self, pag: PAG, ids: np.ndarray) -> None:
        self.pag, self.ids = pag, np.asarray(ids, dtype=np.int64)
        self._vid: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def column(self, name: str) -> np.ndarray | Text:
        pag = self.pag
        vf = pag.parallel.vertex_frame
        if name in vf.columns:
            return vf[name].to_numpy()[self.ids].astype(np.float64)
        if name in pag.metric_names:
            return pag._metrics[name].to_numpy(dtype=np.float64, na_value=np.nan)[self.ids]
        vt = pag._vertices
        if name in vt.columns:
            if self._vid is None:
                self._vid = vf["vertex"].to_numpy()[self.ids]
            col = column_values(vt[name])
            return Text(col.codes[self._vid], col.cats) if isinstance(col, Text) else col[self._vid]
        raise _unknown(name, list(map(str, pag.metric_names)), [*map(str, vf.columns), *map(str, vt.columns)])

    def aggregate(self, func: str, name: str) -> np.ndarray:
        raise PAGError("aggregations such as max(...) apply to top-down vertices, not parallel vertices")

    def leaf(self) -> np.ndarray:
        raise PAGError("IS LEAF applies to top-down vertices")
