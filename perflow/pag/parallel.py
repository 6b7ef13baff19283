"""The parallel view: top-down vertices per (process, thread), joined by edges.

Parallel vertices are the rows of ``pag.metrics``: the parallel vertex with id
``r`` is ``(vertex, process, thread)`` of metric row ``r``. Edges live in one
table (built on first use):

========== ==========================================================
kind       meaning
========== ==========================================================
call       intra-process flow: parent to child on the same (process, thread)
p2p        point-to-point messages, sender's call path to receiver's
collective from the last participant to arrive to each other participant
========== ==========================================================

with columns ``src``, ``dst`` (parallel vertex ids), ``kind``, ``count``,
``bytes``, ``time`` (summed transfer time: receive completion minus send)
and ``wait`` (summed waiting time at the destination: Late Sender time for
messages, the wait of the participant for collectives).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._arrays import unique
from ..errors import PAGError
from .base import read_only
from .columns import ParallelColumns
from .edges import EDGE_DTYPE, EDGE_KINDS, collective_edges, edge_kinds, message_edges
from .expr_eval import FrameColumns, eval_mask
from .selection import Selection, name_mask
from .sets import VertexSet, kind_values

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

    from .pag import PAG

__all__ = ["ParallelView", "ParallelVertexSet", "ParallelEdgeSet", "EDGE_KINDS", "edge_kinds"]


class ParallelView:
    """The parallel view of a PAG (``pag.parallel``)."""

    def __init__(self, pag: PAG) -> None:
        self._pag = pag
        idx = pag._metrics.index
        self._v = np.asarray(idx.codes[0], dtype=np.int64)
        self._pc = np.asarray(idx.codes[1], dtype=np.int64)
        self._tc = np.asarray(idx.codes[2], dtype=np.int64)
        self._plev = idx.levels[1].to_numpy().astype(np.int64)
        self._tlev = idx.levels[2].to_numpy().astype(np.int64)
        self._np = max(len(self._plev), 1)
        self._nt = max(len(self._tlev), 1)
        self._key = (self._v * self._np + self._pc) * self._nt + self._tc

    # -------------------------------------------------------------- lookups
    @property
    def pag(self) -> PAG:
        """The PAG."""
        return self._pag

    def __len__(self) -> int:
        return len(self._v)

    @property
    def vertex_ids(self) -> np.ndarray:
        """The top-down vertex of each parallel vertex (row of the metrics table), read-only."""

        return read_only(self._v)

    @functools.cached_property
    def vertex_frame(self) -> pd.DataFrame:
        """One row per parallel vertex: ``vertex``, ``process``, ``thread``."""
        return pd.DataFrame(
            {"vertex": self._v, "process": self._plev[self._pc], "thread": self._tlev[self._tc]},
        )

    def rows(self, vertex: Any, process: Any, thread: Any = 0) -> np.ndarray:
        """Parallel vertex ids of (vertex, process, thread) triples; -1 where there is no such row."""
        v = np.atleast_1d(np.asarray(vertex, dtype=np.int64))
        p = np.broadcast_to(np.asarray(process, dtype=np.int64), v.shape)
        t = np.broadcast_to(np.asarray(thread, dtype=np.int64), v.shape)
        pc = np.searchsorted(self._plev, p)
        tc = np.searchsorted(self._tlev, t)
        ok = (pc < len(self._plev)) & (tc < len(self._tlev))
        ok[ok] &= (self._plev[pc[ok]] == p[ok]) & (self._tlev[tc[ok]] == t[ok])
        key = (v * self._np + pc) * self._nt + tc
        r = np.searchsorted(self._key, key)
        r = np.minimum(r, max(len(self._key) - 1, 0))
        hit = ok & (len(self._key) > 0)
        hit[hit] &= self._key[r[hit]] == key[hit]
        return np.where(hit, r, -1)

    def row(self, vertex: int, process: int, thread: int = 0) -> int:
        """The parallel vertex id of one (vertex, process, thread); raises if absent."""
        r = int(self.rows(vertex, process, thread)[0])
        if r < 0:
            raise PAGError(f"vertex {vertex} has no data on process {process}, thread {thread}")
        return r

    # -------------------------------------------------------------- sets
    @property
    def vertices(self) -> ParallelVertexSet:
        """All parallel vertices."""
        return ParallelVertexSet(self._pag, np.arange(len(self._v), dtype=np.int64))

    @property
    def edges(self) -> ParallelEdgeSet:
        """All parallel edges."""
        return ParallelEdgeSet(self._pag, np.arange(len(self.edge_table), dtype=np.int64))

    def vertex(self, vertex: int, process: int, thread: int = 0) -> ParallelVertexSet:
        """A one-element set."""
        return ParallelVertexSet(self._pag, [self.row(vertex, process, thread)])

    # -------------------------------------------------------------- edges
    @functools.cached_property
    def edge_table(self) -> pd.DataFrame:
        """All edges: ``src``, ``dst``, ``kind``, ``count``, ``bytes``, ``time``, ``wait``."""
        parts = [self._call_edges()]
        tr = self._pag.trace
        if tr is not None:
            parts.append(message_edges(self, tr))
            parts.append(collective_edges(self, tr))
        elif self._pag._comm is not None:
            parts.append(self._explicit_edges(self._pag._comm))
        df = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
        kind = df["kind"]
        if not isinstance(kind.dtype, pd.CategoricalDtype) or list(kind.cat.categories) != list(EDGE_KINDS):
            kind = pd.Categorical(kind.astype(str), dtype=EDGE_DTYPE)
        df["kind"] = kind
        return df

    def _call_edges(self) -> pd.DataFrame:
        parent = self._pag._vertices["parent"].to_numpy()[self._v]
        has = parent >= 0
        src = np.full(len(self._v), -1, dtype=np.int64)
        key = (parent[has] * self._np + self._pc[has]) * self._nt + self._tc[has]
        r = np.searchsorted(self._key, key)
        r = np.minimum(r, max(len(self._key) - 1, 0))
        found = self._key[r] == key if len(self._key) else np.zeros(0, dtype=bool)
        src[np.flatnonzero(has)[found]] = r[found]
        dst = np.flatnonzero(src >= 0)
        n = len(dst)
        return pd.DataFrame(
            {
                "src": src[dst],
                "dst": dst,
                "kind": edge_kinds("call", n),
                "count": self._count_column(dst),
                "bytes": np.zeros(n, dtype=np.int64),
                "time": np.zeros(n),
                "wait": np.zeros(n),
            }
        )

    def _count_column(self, rows: np.ndarray) -> np.ndarray:
        m = self._pag._metrics
        if "visits" in m.columns:
            return m["visits"].to_numpy(dtype=np.float64)[rows].astype(np.int64)
        return np.ones(len(rows), dtype=np.int64)

    def _explicit_edges(self, comm: pd.DataFrame) -> pd.DataFrame:
        src = self.rows(comm["src_vertex"], comm["src_process"], comm.get("src_thread", 0))
        dst = self.rows(comm["dst_vertex"], comm["dst_process"], comm.get("dst_thread", 0))
        if (src < 0).any() or (dst < 0).any():
            bad = int(np.flatnonzero((src < 0) | (dst < 0))[0])
            raise PAGError(f"communication edge {bad} refers to a (vertex, process, thread) without data")
        n = len(comm)

        def col(name: str, default: Any) -> np.ndarray:
            return comm[name].to_numpy() if name in comm.columns else np.full(n, default)

        return pd.DataFrame(
            {
                "src": src,
                "dst": dst,
                "kind": pd.Categorical(col("kind", "p2p").astype(str), dtype=EDGE_DTYPE),
                "count": col("count", 1).astype(np.int64),
                "bytes": col("bytes", 0).astype(np.int64),
                "time": col("time", 0.0).astype(np.float64),
                "wait": col("wait", 0.0).astype(np.float64),
            }
        )

    # -------------------------------------------------------------- networkx face
    @functools.cached_property
    def graph(self) -> nx.DiGraph:
        """The parallel view as a networkx DiGraph with (vertex, process, thread) tuple nodes.

        Built on first access; meant for interactive exploration of small and
        medium PAGs (each node and edge becomes a Python object).
        """
        import networkx as nx

        g = nx.DiGraph()
        vf = self.vertex_frame
        names = self._pag._vertices["name"].astype(str).to_numpy()[self._v]
        nodes = list(zip(vf["vertex"].tolist(), vf["process"].tolist(), vf["thread"].tolist()))
        mcols = {m: self._pag._metrics[m].to_numpy() for m in self._pag.metric_names}
        g.add_nodes_from(
            (nodes[i], {"name": names[i], **{m: float(a[i]) for m, a in mcols.items()}}) for i in range(len(nodes))
        )
        et = self.edge_table
        for s, d, k, c, b, t, w in zip(
            et["src"].tolist(),
            et["dst"].tolist(),
            et["kind"].astype(str).tolist(),
            et["count"].tolist(),
            et["bytes"].tolist(),
            et["time"].tolist(),
            et["wait"].tolist(),
        ):
            g.add_edge(nodes[s], nodes[d], kind=k, count=c, bytes=b, time=t, wait=w)
        return g


class ParallelVertexSet(Selection):
    """A set of parallel vertices (metric rows) of one PAG."""

    _what = "parallel vertices"

    @property
    def _view(self) -> ParallelView:
        return self._pag.parallel

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        vf = self._view.vertex_frame
        v, p, t = (vf[c].to_numpy()[self._ids].tolist() for c in ("vertex", "process", "thread"))
        return iter(zip(v, p, t))

    def _default_metric(self) -> str:
        return VertexSet(self._pag, [])._default_metric()

    def _sort_values(self, metric: str, agg: str) -> np.ndarray:
        self._pag._check_metric(metric)
        return self._pag._metrics[metric].to_numpy(dtype=np.float64)[self._ids]

    def filter(
        self,
        expr: str | Callable[[pd.DataFrame], Any] | None = None,
        *,
        name: str | Iterable[str] | None = None,
        regex: str | None = None,
        kind: Any = None,
        vertex: Any = None,
        process: Any = None,
        thread: Any = None,
    ) -> ParallelVertexSet:
        """Keep parallel vertices by name, kind, vertex id, process, thread and metric expression."""
        vf = self._view.vertex_frame
        vt = self._pag._vertices
        vid = vf["vertex"].to_numpy()[self._ids]
        mask = np.ones(len(self._ids), dtype=bool)
        if name is not None or regex is not None:
            mask &= name_mask(vt["name"], name, regex)[vid]
        if kind is not None:
            mask &= np.isin(vt["kind"].astype(str).to_numpy()[vid], kind_values(kind))
        for col, val in (("vertex", vertex), ("process", process), ("thread", thread)):
            if val is not None:
                vals = getattr(val, "ids", val)
                mask &= np.isin(vf[col].to_numpy()[self._ids], np.atleast_1d(np.asarray(vals)))
        if isinstance(expr, str):
            mask &= eval_mask(expr, ParallelColumns(self._pag, self._ids))
        elif expr is not None:
            mask &= np.asarray(expr(self.to_frame()), dtype=bool)
        return self._select(mask)

    # -------------------------------------------------------------- navigation
    def _edges_touching(self, side: str, kinds: Iterable[str] | None) -> np.ndarray:
        et = self._view.edge_table
        sel = np.isin(et[side].to_numpy(), self._ids)
        if kinds is not None:
            sel &= np.isin(et["kind"].astype(str).to_numpy(), list(kinds))
        return np.flatnonzero(sel)

    def in_edges(self, kinds: Iterable[str] | None = None) -> ParallelEdgeSet:
        """Edges ending at these vertices (optionally of some kinds only)."""
        return ParallelEdgeSet(self._pag, self._edges_touching("dst", kinds))

    def out_edges(self, kinds: Iterable[str] | None = None) -> ParallelEdgeSet:
        """Edges starting at these vertices."""
        return ParallelEdgeSet(self._pag, self._edges_touching("src", kinds))

    def predecessors(self, kinds: Iterable[str] | None = None) -> ParallelVertexSet:
        """Sources of the edges into these vertices."""
        return self.in_edges(kinds).sources()

    def successors(self, kinds: Iterable[str] | None = None) -> ParallelVertexSet:
        """Targets of the edges out of these vertices."""
        return self.out_edges(kinds).targets()

    def peers(self) -> ParallelVertexSet:
        """Communication partners: the other ends of p2p and collective edges, both directions."""
        k = ("p2p", "collective")
        return self.in_edges(k).sources() | self.out_edges(k).targets()

    def vertices(self) -> VertexSet:
        """The distinct top-down vertices of these parallel vertices."""
        return VertexSet(self._pag, self._view.vertex_frame["vertex"].to_numpy()[self._ids])

    def processes(self) -> np.ndarray:
        """The distinct processes."""
        return unique(self._view.vertex_frame["process"].to_numpy()[self._ids])

    def to_frame(self, metrics: Iterable[str] | None = None) -> pd.DataFrame:
        """One row per parallel vertex: vertex, process, thread, name, kind and metrics."""
        vf = self._view.vertex_frame.iloc[self._ids]
        vt = self._pag._vertices
        df = vf.copy()
        df.index = pd.Index(self._ids, name="id")
        df["name"] = vt["name"].to_numpy()[df["vertex"].to_numpy()]
        df["kind"] = vt["kind"].to_numpy()[df["vertex"].to_numpy()]
        names = list(metrics) if metrics is not None else self._pag.metric_names
        for m in names:
            self._pag._check_metric(m)
            df[m] = self._pag._metrics[m].to_numpy()[self._ids]
        return df


class ParallelEdgeSet(Selection):
    """A set of parallel-view edges (rows of ``pag.parallel.edge_table``)."""

    _what = "edges"

    def __iter__(self) -> Iterator[tuple[tuple[int, int, int], tuple[int, int, int], str]]:
        et = self._pag.parallel.edge_table
        vf = self._pag.parallel.vertex_frame
        trip = list(zip(vf["vertex"].tolist(), vf["process"].tolist(), vf["thread"].tolist()))
        s = et["src"].to_numpy()[self._ids].tolist()
        d = et["dst"].to_numpy()[self._ids].tolist()
        k = et["kind"].astype(str).to_numpy()[self._ids].tolist()
        return ((trip[a], trip[b], c) for a, b, c in zip(s, d, k))

    def _default_metric(self) -> str:
        return "wait"

    def _sort_values(self, metric: str, agg: str) -> np.ndarray:
        et = self._pag.parallel.edge_table
        if metric not in et.columns:
            raise PAGError(f"unknown edge attribute {metric!r}; attributes are count, bytes, time, wait")
        return et[metric].to_numpy(dtype=np.float64)[self._ids]

    def filter(self, expr: str | Callable[[pd.DataFrame], Any] | None = None, *, kind: Any = None) -> ParallelEdgeSet:
        """Keep edges by kind (``"p2p"``, ``"collective"``, ``"call"``) and attribute expression (``"bytes > 1e6"``)."""
        et = self._pag.parallel.edge_table
        mask = np.ones(len(self._ids), dtype=bool)
        if kind is not None:
            kinds = [kind] if isinstance(kind, str) else list(kind)
            bad = [k for k in kinds if k not in EDGE_KINDS]
            if bad:
                raise PAGError(f"unknown edge kind {bad[0]!r}; kinds are {', '.join(EDGE_KINDS)}")
            mask &= np.isin(et["kind"].astype(str).to_numpy()[self._ids], kinds)
        if isinstance(expr, str):
            no_agg = "aggregations such as max(...) apply to top-down vertices, not parallel edges"
            mask &= eval_mask(expr, FrameColumns(self.to_frame, len(self._ids), what="edge attribute", no_agg=no_agg))
        elif expr is not None:
            mask &= np.asarray(expr(self.to_frame()), dtype=bool)
        return self._select(mask)

    def sources(self) -> ParallelVertexSet:
        """Source vertices of the edges."""
        return ParallelVertexSet(self._pag, self._pag.parallel.edge_table["src"].to_numpy()[self._ids])

    def targets(self) -> ParallelVertexSet:
        """Target vertices of the edges."""
        return ParallelVertexSet(self._pag, self._pag.parallel.edge_table["dst"].to_numpy()[self._ids])

    def to_frame(self) -> pd.DataFrame:
        """Edges with their endpoints spelled out (vertex, process, thread, name on each side)."""
        et = self._pag.parallel.edge_table.iloc[self._ids]
        vf = self._pag.parallel.vertex_frame
        names = self._pag._vertices["name"].to_numpy()
        df = pd.DataFrame(index=pd.Index(self._ids, name="id"))
        for side in ("src", "dst"):
            r = et[side].to_numpy()
            df[f"{side}_vertex"] = vf["vertex"].to_numpy()[r]
            df[f"{side}_process"] = vf["process"].to_numpy()[r]
            df[f"{side}_thread"] = vf["thread"].to_numpy()[r]
            df[f"{side}_name"] = names[vf["vertex"].to_numpy()[r]]
        for c in ("kind", "count", "bytes", "time", "wait"):
            df[c] = et[c].to_numpy()
        return df
