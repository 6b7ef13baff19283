"""Top-down vertex and edge sets.

>>> hot = pag.vertices.filter(kind="mpi").sort_by("time_exc", agg="max").top(5)
>>> hot.ancestors() | hot
>>> pag.vertices.filter("max(time_exc) > 1.3 * mean(time_exc)")

A :class:`VertexSet` is an ordered array of vertex ids; an :class:`EdgeSet` of
the top-down view is an array of child ids (each edge runs from
``parent[child]`` to ``child``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import PAGError
from ..kinds import VertexKind
from ..units import aggregate_label, format_column, guess_unit
from .columns import VertexColumns
from .expr_eval import eval_mask
from .selection import Selection, name_mask
from .tree import ancestors_mask, descendants_mask

if TYPE_CHECKING:  # pragma: no cover
    from .pag import PAG

__all__ = ["Vertex", "VertexSet", "EdgeSet", "kind_values"]


def kind_values(kind: str | VertexKind | Iterable[str | VertexKind]) -> list[str]:
    """Normalise one kind or several to their string values (raising on unknown kinds)."""
    kinds = [kind] if isinstance(kind, str | VertexKind) else list(kind)
    out = []
    for k in kinds:
        try:
            out.append(VertexKind(k).value if not isinstance(k, VertexKind) else k.value)
        except ValueError:
            valid = ", ".join(v.value for v in VertexKind)
            raise PAGError(f"unknown vertex kind {k!r}; kinds are {valid}") from None
    return out


class Vertex:
    """One top-down vertex: a light handle (PAG + id) with convenient accessors."""

    __slots__ = ("_pag", "id")

    def __init__(self, pag: PAG, vid: int) -> None:
        self._pag = pag
        self.id = int(vid)

    def _attr(self, col: str) -> Any:
        return self._pag._vertices[col].iat[self.id]

    @property
    def name(self) -> str:
        """Region name."""
        return str(self._attr("name"))

    @property
    def kind(self) -> VertexKind:
        """Vertex kind."""
        return VertexKind(self._attr("kind"))

    @property
    def depth(self) -> int:
        """Depth in the calling-context tree (roots are 0)."""
        return int(self._attr("depth"))

    @property
    def file(self) -> str:
        """Source file, or ``""``."""
        return str(self._attr("file"))

    @property
    def line(self) -> int:
        """Source line, or -1."""
        return int(self._attr("line"))

    @property
    def module(self) -> str:
        """Load module (executable or library), or ``""``."""
        return str(self._attr("module"))

    @property
    def parent(self) -> Vertex | None:
        """The parent vertex, or ``None`` for a root."""
        p = int(self._attr("parent"))
        return None if p < 0 else Vertex(self._pag, p)

    @property
    def children(self) -> VertexSet:
        """The child vertices."""
        return VertexSet(self._pag, [self.id]).children()

    @property
    def call_path(self) -> str:
        """``"main/solve/MPI_Send"``."""
        return str(self._pag.call_paths().iat[self.id])

    @property
    def metrics(self) -> pd.DataFrame:
        """This vertex's metric rows, indexed by (process, thread)."""
        m = self._pag._metrics
        v = m.index.codes[0]
        lo, hi = np.searchsorted(v, [self.id, self.id + 1])
        return m.iloc[lo:hi].droplevel("vertex")

    def value(self, metric: str, agg: str = "sum") -> float:
        """One metric aggregated across processes."""
        return float(self._pag.aggregate(metric, agg).iat[self.id])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vertex) and other._pag is self._pag and other.id == self.id

    def __hash__(self) -> int:
        return hash((id(self._pag), self.id))

    def __int__(self) -> int:
        return self.id

    def __repr__(self) -> str:
        return f"<Vertex {self.id} {self.name!r} ({self.kind.value})>"


class VertexSet(Selection):
    """An ordered set of top-down vertices of one PAG.

    A set sorted with ``sort_by(metric, agg)`` remembers ``agg``: its display
    shows the metrics aggregated that way, and the column headers say so
    (``time_exc (max over 8 processes)``).
    """

    _what = "vertices"
    _agg = "sum"

    def _make(self, ids: np.ndarray, ordered: bool = False) -> VertexSet:
        out = super()._make(ids, ordered)
        out._agg = self._agg
        return out

    def sort_by(self, metric: str, agg: str = "sum", *, ascending: bool = False) -> VertexSet:
        """Sort by a metric (aggregated with ``agg`` where that applies); largest first by default."""
        out = super().sort_by(metric, agg, ascending=ascending)
        out._agg = agg
        return out

    def _over(self) -> str:
        return aggregate_label(self._agg, len(self._pag.processes), len(self._pag.locations))

    def _display(self, k: int) -> pd.DataFrame:
        """The first ``k`` vertices as strings: name, kind, file:line, metrics with units."""
        pag = self._pag
        ids = self._ids[:k]
        vt = pag._vertices
        files = vt["file"].astype(str).to_numpy()[ids]
        lines = vt["line"].to_numpy()[ids]
        out = pd.DataFrame(
            {
                "name": vt["name"].astype(str).to_numpy()[ids],
                "kind": vt["kind"].astype(str).to_numpy()[ids],
                "file:line": [f"{f}:{ln}" if f and ln >= 0 else f for f, ln in zip(files, lines)],
            },
            index=pd.Index(ids, name="vertex"),
        )
        if not any(out["file:line"]):
            out = out.drop(columns="file:line")
        for m in pag.metric_names:
            info = pag.metric_info.get(m)
            unit = info.unit if info is not None and info.unit in ("s", "bytes") else guess_unit(m)
            out[m] = format_column(pag.aggregate(m, self._agg).iloc[ids], unit)
        return out

    def __repr__(self) -> str:
        n = len(self)
        if n == 0:
            return f"<{type(self).__name__}: empty>"
        more = f"\n... {n - 10} more" if n > 10 else ""
        head = f"<{type(self).__name__}: {n} {self._what}; metrics: {self._over()}>"
        return f"{head}\n{self._display(10).to_string()}{more}"

    def _repr_html_(self) -> str:
        n = len(self)
        head = f"<b>{type(self).__name__}</b>: {n} {self._what}"
        if n == 0:
            return head
        head += f"; metrics: {self._over()}"
        more = f"<p>... {n - 20} more</p>" if n > 20 else ""
        return head + self._display(20).to_html() + more

    def __iter__(self) -> Iterator[Vertex]:
        return (Vertex(self._pag, i) for i in self._ids.tolist())

    def _default_metric(self) -> str:
        names = self._pag.metric_names
        for m in ("time_exc", "time_inc"):
            if m in names:
                return m
        if not names:
            raise PAGError("the PAG has no metrics to rank by")
        return names[0]

    def _sort_values(self, metric: str, agg: str) -> np.ndarray:
        return self._pag.aggregate(metric, agg).to_numpy()[self._ids]

    # -------------------------------------------------------------- filters
    def filter(
        self,
        expr: str | Callable[[pd.DataFrame], Any] | None = None,
        *,
        name: str | Iterable[str] | None = None,
        regex: str | None = None,
        kind: str | VertexKind | Iterable[str | VertexKind] | None = None,
        agg: str = "sum",
        **attrs: Any,
    ) -> VertexSet:
        """Keep the vertices that satisfy every condition given.

        Parameters
        ----------
        expr : str or callable, optional
            A boolean metric expression evaluated per vertex, with metrics
            aggregated by ``agg`` and explicit aggregations allowed, e.g.
            ``"time_exc > 0.01"``, ``"max(time_exc) > 1.3 * mean(time_exc)"`` or
            ``"name in ['MPI_Wait', 'MPI_Recv'] and depth > 2"`` (perflow's own
            grammar, evaluated with numpy, never by Python: ``docs/queries.md``);
            or a function that takes :meth:`to_frame` and returns a boolean mask.
        name : str or list of str, optional
            Glob pattern(s) on the vertex name (``"MPI_*"``).
        regex : str, optional
            Regular expression searched in the vertex name.
        kind : str or VertexKind or list, optional
            Vertex kind(s).
        agg : str
            Aggregation across processes for bare metric names in ``expr``.
        **attrs
            Equality tests on other vertex columns (``file="solver.c"``, ``depth=2``).
        """
        vt = self._pag._vertices
        mask = np.ones(len(self._ids), dtype=bool)
        if name is not None or regex is not None:
            mask &= name_mask(vt["name"], name, regex)[self._ids]
        if kind is not None:
            mask &= np.isin(vt["kind"].astype(str).to_numpy()[self._ids], kind_values(kind))
        for col, val in attrs.items():
            if col not in vt.columns:
                raise PAGError(f"unknown vertex attribute {col!r}; attributes are {', '.join(vt.columns)}")
            mask &= vt[col].to_numpy()[self._ids] == val
        if isinstance(expr, str):
            mask &= eval_mask(expr, VertexColumns(self._pag, self._ids, agg))
        elif expr is not None:
            res = np.asarray(expr(self.to_frame(agg=agg)), dtype=bool)
            if res.shape != mask.shape:
                raise PAGError(f"filter function returned {res.shape[0]} values for {len(mask)} vertices")
            mask &= res
        return self._select(mask)

    def where(self, predicate: Callable[[Vertex], bool]) -> VertexSet:
        """Keep vertices for which ``predicate(vertex)`` is true (a Python call per vertex: small sets only)."""
        mask = np.array([bool(predicate(v)) for v in self], dtype=bool)
        return self._select(mask) if len(mask) else self

    # -------------------------------------------------------------- navigation
    def parents(self) -> VertexSet:
        """The parents of the vertices (roots have none)."""
        p = self._pag._vertices["parent"].to_numpy()[self._ids]
        return self._make(p[p >= 0])

    def children(self) -> VertexSet:
        """The children of the vertices."""
        parent = self._pag._vertices["parent"].to_numpy()
        return self._make(np.flatnonzero(np.isin(parent, self._ids)))

    def ancestors(self, *, include_self: bool = False) -> VertexSet:
        """All vertices above these, up to the roots."""
        m = ancestors_mask(self._pag._vertices["parent"].to_numpy(), self._ids, include_self=include_self)
        return self._make(np.flatnonzero(m))

    def descendants(self, *, include_self: bool = False) -> VertexSet:
        """All vertices below these."""
        if not len(self._ids):
            return self._make(self._ids)
        m = descendants_mask(self._pag.tree_index, self._ids, include_self=include_self)
        return self._make(np.flatnonzero(m))

    def leaves(self) -> VertexSet:
        """The vertices of this set that have no children in the PAG."""
        parent = self._pag._vertices["parent"].to_numpy()
        has_child = np.zeros(self._pag.n_vertices, dtype=bool)
        has_child[parent[parent >= 0]] = True
        return self._select(~has_child[self._ids])

    def in_edges(self) -> EdgeSet:
        """Top-down edges into these vertices (from their parents)."""
        p = self._pag._vertices["parent"].to_numpy()[self._ids]
        return EdgeSet(self._pag, self._ids[p >= 0])

    def out_edges(self) -> EdgeSet:
        """Top-down edges out of these vertices (to their children)."""
        return EdgeSet(self._pag, self.children().ids)

    def on_processes(self, processes: Iterable[int] | int | None = None) -> Any:
        """These vertices in the parallel view (all processes, or the ones given)."""
        pv = self._pag.parallel.vertices.filter(vertex=self._ids)
        return pv if processes is None else pv.filter(process=processes)

    # -------------------------------------------------------------- output
    def to_frame(
        self, metrics: Iterable[str] | None = None, agg: str | None = None, *, per_process: bool = False
    ) -> pd.DataFrame:
        """A table of these vertices.

        Parameters
        ----------
        metrics : list of str, optional
            Metrics to include (default: all).
        agg : str, optional
            Aggregation across processes and threads (default: the one the set
            was sorted by, else ``"sum"``); ``df.attrs["aggregates"]`` records it.
        per_process : bool
            If true, return the metric rows per (vertex, process, thread)
            instead of one aggregated row per vertex.
        """
        names = list(metrics) if metrics is not None else self._pag.metric_names
        if per_process:
            m = self._pag._metrics
            v = np.asarray(m.index.codes[0])
            rows = np.flatnonzero(np.isin(v, self._ids))
            out = m.iloc[rows][names].copy()
            out.insert(0, "name", self._pag._vertices["name"].to_numpy()[v[rows]])
            return out
        agg = self._agg if agg is None else agg
        vt = self._pag._vertices
        df = vt.iloc[self._ids][["name", "kind", "parent", "depth", "file", "line"]].copy()
        for m in names:
            self._pag._check_metric(m)
            df[m] = self._pag.aggregate(m, agg).to_numpy()[self._ids]
        over = aggregate_label(agg, len(self._pag.processes), len(self._pag.locations))
        df.attrs["aggregates"] = {m: over for m in names}  # tables rendered from it say how
        df.attrs["units"] = {m: i.unit for m, i in self._pag.metric_info.items() if m in names and i.unit}
        return df

    def names(self) -> list[str]:
        """The vertex names, in order."""
        return [str(x) for x in self._pag._vertices["name"].to_numpy()[self._ids]]


class EdgeSet(Selection):
    """A set of top-down (parent to child) edges, identified by the child's id."""

    _what = "edges"

    def __iter__(self) -> Iterator[tuple[Vertex, Vertex]]:
        parent = self._pag._vertices["parent"].to_numpy()
        return ((Vertex(self._pag, int(parent[c])), Vertex(self._pag, c)) for c in self._ids.tolist())

    def _default_metric(self) -> str:
        return VertexSet(self._pag, self._ids)._default_metric()

    def _sort_values(self, metric: str, agg: str) -> np.ndarray:
        return self._pag.aggregate(metric, agg).to_numpy()[self._ids]

    def sources(self) -> VertexSet:
        """The parent ends of the edges."""
        return VertexSet(self._pag, self._pag._vertices["parent"].to_numpy()[self._ids])

    def targets(self) -> VertexSet:
        """The child ends of the edges."""
        return VertexSet(self._pag, self._ids)

    def filter(self, expr: str | Callable[[pd.DataFrame], Any] | None = None, **kwargs: Any) -> EdgeSet:
        """Keep edges whose *target* vertex passes :meth:`VertexSet.filter` with the same arguments."""
        keep = VertexSet(self._pag, self._ids).filter(expr, **kwargs)
        return self._make(keep.ids)

    def to_frame(self, metrics: Iterable[str] | None = None, agg: str = "sum") -> pd.DataFrame:
        """One row per edge: source and target ids and names, and the target's metrics."""
        vt = self._pag._vertices
        parent = vt["parent"].to_numpy()[self._ids]
        df = pd.DataFrame(
            {
                "src": parent,
                "dst": self._ids,
                "src_name": vt["name"].to_numpy()[parent],
                "dst_name": vt["name"].to_numpy()[self._ids],
            }
        )
        for m in list(metrics) if metrics is not None else []:
            df[m] = self._pag.aggregate(m, agg).to_numpy()[self._ids]
        return df
