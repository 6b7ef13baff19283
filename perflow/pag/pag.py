"""The Program Abstraction Graph.

A :class:`PAG` has two views of one run:

* the **top-down view**: a calling-context tree whose vertices are code
  regions in context (``pag.vertex_table``), with metrics per (vertex,
  process, thread) (``pag.metrics``);
* the **parallel view** (``pag.parallel``): the same vertices per process and
  thread, joined by intra-process flow edges and inter-process
  communication edges.

Storage is columnar: one row per vertex in ``vertex_table``, one row per
(vertex, process, thread) with data in ``metrics``. networkx graphs are built
on request (``pag.graph``, ``pag.parallel.graph``). A PAG never changes after
construction; every operation returns new objects.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from .._arrays import unique
from ..errors import MetricError, PAGError, PassError
from ..units import guess_unit
from .analysis import AnalysisManager
from .arith import Arithmetic
from .base import DEFAULT_METRICS, MetricInfo, metric_combine
from .faces import MetricRows, subgraph
from .frames import aggregate, make_metrics
from .instances import Trace
from .parallel import ParallelView
from .query import query as run_query
from .sets import Vertex, VertexSet
from .tree import TreeIndex, tree_index
from .vertices import VERTEX_COLUMNS, canonical_order, is_normalized, normalize_vertices

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

    from .analysis import AnalysisManager
    from .faces import MetricRows
    from .parallel import ParallelView
    from .partitioned import Executor
    from .sets import Vertex, VertexSet

__all__ = ["PAG", "MetricInfo", "LazyTables", "metric_combine", "VERTEX_COLUMNS", "normalize_vertices"]


def _COPY_ON_WRITE() -> bool:  # noqa: N802 - reads like the pandas option it checks
    """Whether pandas copies on write (pandas 3; an option in pandas 2): then shallow copies protect the PAG."""
    return int(pd.__version__.split(".")[0]) >= 3 or bool(pd.get_option("mode.copy_on_write"))


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


class PAG(Arithmetic):
    """A Program Abstraction Graph: top-down view, parallel view, and (for traces) instance data.

    Build one with :meth:`from_frames`, :meth:`from_literal`, a reader
    (:func:`perflow.read`), :mod:`perflow.synthetic` or
    :class:`perflow.trace.builder.TraceBuilder`; load a saved one with
    :func:`perflow.load`. PAGs combine with ``+ - * /`` aligned by call path
    (:mod:`perflow.pag.arith`: ``pag_b - pag_a``, ``pag.sub(other, fill=nan)``).

    Parameters
    ----------
    vertices : pandas.DataFrame
        The vertex table (see :func:`normalize_vertices`).
    metrics : pandas.DataFrame
        The metrics table (see :func:`perflow.pag.frames.make_metrics`).
    metric_info : mapping of str to MetricInfo, optional
    trace : Trace, optional
        Instance-level data when the PAG comes from a trace.
    comm : pandas.DataFrame, optional
        Aggregated communication edges for sources without a trace (columns
        ``src_vertex``, ``src_process``, ``src_thread``, ``dst_vertex``,
        ``dst_process``, ``dst_thread``, ``kind``, ``count``, ``bytes``,
        ``time``, ``wait``).
    attrs : mapping, optional
        Metadata: ``source``, ``format``, ``nprocs``, run metadata, ...
    tables : LazyTables, optional
        Instead of ``metrics``, ``metric_info`` and ``trace``: where to get
        them when they are first needed (a PAG whose data live on an
        engine; see :class:`LazyTables`).
    executor : Executor, optional
        Where the PAG's analyses run (:mod:`perflow.pag.partitioned`;
        default: here, their local forms). An engine gives its PAGs its own.
    """

    _metrics = _Table()
    _metric_info = _Table()
    _trace = _Table()

    def __init__(
        self,
        vertices: pd.DataFrame,
        metrics: pd.DataFrame | None = None,
        *,
        metric_info: Mapping[str, MetricInfo] | None = None,
        trace: Trace | None = None,
        comm: pd.DataFrame | None = None,
        attrs: Mapping[str, Any] | None = None,
        tables: LazyTables | None = None,
        executor: Executor | None = None,
    ) -> None:
        if not is_normalized(vertices):
            vertices = normalize_vertices(vertices)
        self._vertices = vertices
        self._comm = comm
        self._executor = executor
        self.attrs: dict[str, Any] = dict(attrs or {})
        if tables is not None:
            if metrics is not None or metric_info is not None or trace is not None:
                raise PAGError("a PAG takes its tables either as frames or from LazyTables, not both")
            if not isinstance(tables, LazyTables):
                raise PAGError(f"{type(tables).__name__} is not LazyTables (see perflow.pag.pag.LazyTables)")
            self._tables: LazyTables | None = tables
            return
        if metrics is None:
            raise PAGError("a PAG needs a metrics table (or LazyTables)")
        self._tables = None
        if len(metrics.columns) and list(metrics.columns) != canonical_order(metrics.columns):
            metrics = metrics[canonical_order(metrics.columns)]
        self._metrics = metrics
        info = dict(metric_info or {})
        for m in metrics.columns:
            if m not in info:
                info[m] = DEFAULT_METRICS.get(m, MetricInfo(m))
        self._metric_info = {m: info[m] for m in metrics.columns}
        self._trace = trace

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_frames(
        cls,
        vertices: pd.DataFrame | Mapping[str, Any],
        metrics: pd.DataFrame,
        *,
        metric_info: Mapping[str, MetricInfo] | None = None,
        trace: Trace | None = None,
        comm: pd.DataFrame | None = None,
        attrs: Mapping[str, Any] | None = None,
        duplicates: str = "sum",
    ) -> PAG:
        """Build a PAG from a vertex table and a long-format metrics table.

        Parameters
        ----------
        vertices : pandas.DataFrame
            One row per vertex, row ``i`` is vertex ``i``; columns ``name``,
            ``parent`` (-1 for roots) and optionally ``kind``, ``module``,
            ``file``, ``line`` and any extra attribute.
        metrics : pandas.DataFrame
            Columns ``vertex``, ``process``, optionally ``thread``, and one
            numeric column per metric (or already indexed by those levels).
        duplicates : {"sum", "error"}
            What to do with repeated (vertex, process, thread) rows.

        Returns
        -------
        PAG
        """
        vt = normalize_vertices(vertices)
        m = metrics.reset_index() if isinstance(metrics.index, pd.MultiIndex) else metrics
        for c in ("vertex", "process"):
            if c not in m.columns:
                raise PAGError(f"metrics table lacks the column {c!r}")
        keys = {"vertex", "process", "thread", "index"}
        cols = {c: m[c].to_numpy() for c in m.columns if c not in keys}
        mt = make_metrics(
            m["vertex"].to_numpy(),
            m["process"].to_numpy(),
            m["thread"].to_numpy() if "thread" in m.columns else None,
            cols,
            n_vertices=len(vt),
            duplicates=duplicates,
        )
        return cls(vt, mt, metric_info=metric_info, trace=trace, comm=comm, attrs=attrs)

    @classmethod
    def from_literal(cls, literal: Any, **kwargs: Any) -> PAG:
        """Build a PAG from a nested literal (see :func:`perflow.pag.literal.from_literal`)."""
        return literal_.from_literal(literal, **kwargs)

    # ------------------------------------------------------------------ tables
    @property
    def vertex_table(self) -> pd.DataFrame:
        """The vertex table (a copy; the PAG is not changed by edits to it)."""
        return self._vertices.copy(deep=not _COPY_ON_WRITE())

    @property
    def metrics(self) -> pd.DataFrame:
        """Metrics per (vertex, process, thread): a DataFrame with a sorted MultiIndex (a copy, as above)."""
        return self._metrics.copy(deep=not _COPY_ON_WRITE())

    @property
    def metric_names(self) -> list[str]:
        """Names of the metric columns (known without materialising lazy tables)."""
        if self._tables is not None:
            return list(self._tables.metric_names())
        return list(self._metrics.columns)

    @property
    def lazy(self) -> bool:
        """Whether the tables come from :class:`LazyTables` (data that live on an engine)."""
        return self._tables is not None

    @property
    def metric_info(self) -> dict[str, MetricInfo]:
        """Description of each metric."""
        return dict(self._metric_info)

    @property
    def trace(self) -> Trace | None:
        """Instance-level tables when the PAG comes from a trace, else ``None``."""
        return self._trace

    @property
    def n_vertices(self) -> int:
        """Number of top-down vertices."""
        return len(self._vertices)

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

    @functools.cached_property
    def tree_index(self) -> TreeIndex:
        """Depth, pre-order and subtree sizes of the calling-context tree."""
        return tree_index(self._vertices["parent"].to_numpy())

    def tree(
        self,
        metric: str | list[str] = "time_inc",
        *,
        agg: str = "sum",
        process: int | None = None,
        depth: int | None = None,
        threshold: float = 0.0,
        expand: list[str | int] | None = None,
        collapse: list[str | int] | None = None,
        show_file: bool = False,
        color: bool = False,
        units: bool = True,
        precision: int = 3,
        ascii: bool = False,  # noqa: A002
        max_lines: int = 2000,
    ) -> str:
        """The calling-context tree with metrics as text, like Hatchet's ``GraphFrame.tree()``.

        ``print(pag.tree())`` (or ``pag.tree()`` at a prompt, where the text shows as is);
        ``perflow tree DATA`` prints the same. The first line names the metric and how it
        aggregates over processes; several metrics (``pag.tree(["time_inc", "time_exc"])``)
        show as columns.

        Parameters
        ----------
        metric : str or list of str
            The value(s) shown; the first selects, sorts and colours.
        agg : str
            Aggregation across processes: sum, mean, max, min, std, median, count.
        process : int, optional
            One process's values instead of an aggregation.
        depth : int, optional
            Deepest level shown (roots are 0).
        threshold : float
            Hide vertices below this fraction of the largest value (their ancestors stay).
        expand, collapse : list, optional
            Vertices shown whole / folded (globs on names, call paths with ``/``, or ids).
        show_file : bool
            Append ``file:line`` (always shown for two call sites of one function).
        color : bool
            ANSI colours by magnitude.
        units : bool
            Values with units (``12.3 ms``); else plain numbers with ``precision`` decimals.
        precision : int
            Significant digits (with units) or decimals.
        ascii : bool
            ASCII instead of box-drawing characters.
        max_lines : int
            At most this many vertices.

        Returns
        -------
        str
            The tree, one vertex per line.
        """
        metrics = [metric] if isinstance(metric, str) else list(metric)
        if not metrics:
            raise PassError("tree: metric names no metric")
        tv = treeview.tree_view(
            self, None, who="tree", metric=metrics[0], agg=agg, depth=depth, threshold=threshold,
            expand=expand, collapse=collapse, sort=True, process=process,
        )  # fmt: skip
        columns = []
        for m in metrics[1:]:
            info = self.metric_info.get(m)
            unit = info.unit if info is not None and info.unit in ("s", "bytes") else guess_unit(m)
            columns.append((m, treeview.metric_values(self, m, agg, process, "tree"), unit))
        plain, colored = treeview.tree_lines(
            tv, columns=columns, show_file=show_file, color=color, units=units, precision=precision,
            ascii=ascii, max_lines=max_lines,
        )  # fmt: skip
        lines = colored if color else plain
        return treeview.TreeText("\n".join(lines) + ("\n" if lines else ""))

    @property
    def roots(self) -> np.ndarray:
        """Ids of the root vertices."""
        return np.flatnonzero(self._vertices["parent"].to_numpy() < 0)

    # ------------------------------------------------------------------ metrics
    def check_metric(self, metric: str) -> None:
        """Raise :class:`~perflow.errors.MetricError` (with a did-you-mean) for an unknown metric."""
        self._check_metric(metric)

    @functools.cached_property
    def rows(self) -> MetricRows:
        """The metrics table as read-only arrays, without copies (:class:`~perflow.pag.faces.MetricRows`)."""

        return MetricRows.of(self)

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

    # ------------------------------------------------------------------ views
    @property
    def vertices(self) -> VertexSet:
        """All top-down vertices, as a :class:`~perflow.pag.sets.VertexSet`."""

        return VertexSet(self, np.arange(self.n_vertices, dtype=np.int64))

    def query(self, query: str | list[Any], *, agg: str = "sum") -> VertexSet:
        """Vertices on call paths matching a Hatchet-style query (string or object dialect; see docs/queries.md).

        >>> pag.query('MATCH (".", p)->("*") WHERE p."name" STARTS WITH "MPI_"')
        >>> pag.query([(".", {"name": "main"}), "*", (".", {"time_exc": ">= 0.5"})])
        """

        return run_query(self, query, agg=agg)

    def vertex(self, key: int | str) -> Vertex:
        """One vertex by id, by name (must be unique) or by call path ``"main/solve/MPI_Send"``."""

        if isinstance(key, int | np.integer):
            if not 0 <= int(key) < self.n_vertices:
                raise PAGError(f"no vertex {key}: ids are 0..{self.n_vertices - 1}")
            return Vertex(self, int(key))
        ids = np.flatnonzero(self.call_paths().to_numpy() == key) if "/" in key else None
        if ids is None or not len(ids):
            ids = np.flatnonzero(self._vertices["name"].to_numpy() == key)
        if len(ids) == 0:
            raise PAGError(f"no vertex named {key!r}")
        if len(ids) > 1:
            raise PAGError(f"{len(ids)} vertices are named {key!r} (ids {ids[:5].tolist()}...); use an id or path")
        return Vertex(self, int(ids[0]))

    @functools.cached_property
    def analyses(self) -> AnalysisManager:
        """The cached analyses of this PAG (see :mod:`perflow.pag.analysis`): ``pag.analyses.get(ANALYSIS, **settings)``."""

        return AnalysisManager(self, self._executor)

    @functools.cached_property
    def parallel(self) -> ParallelView:
        """The parallel view: (vertex, process, thread) vertices and communication edges."""

        return ParallelView(self)

    @functools.cached_property
    def graph(self) -> nx.DiGraph:
        """The top-down view as a networkx DiGraph (built on first access).

        Nodes are vertex ids with attributes ``name``, ``kind``, ``depth``,
        ``file``, ``line`` and each metric summed over processes; edges go from
        parent to child.
        """
        import networkx as nx

        g = nx.DiGraph()
        vt = self._vertices
        sums = {m: self.aggregate(m, "sum").to_numpy() for m in self.metric_names}
        names = vt["name"].astype(str).to_numpy()
        kinds = vt["kind"].astype(str).to_numpy()
        depth = vt["depth"].to_numpy()
        files = vt["file"].astype(str).to_numpy()
        lines = vt["line"].to_numpy()
        g.add_nodes_from(
            (
                i,
                {
                    "name": names[i],
                    "kind": kinds[i],
                    "depth": int(depth[i]),
                    "file": files[i],
                    "line": int(lines[i]),
                    **{m: float(a[i]) for m, a in sums.items()},
                },
            )
            for i in range(len(vt))
        )
        parent = vt["parent"].to_numpy()
        child = np.flatnonzero(parent >= 0)
        g.add_edges_from(zip(parent[child].tolist(), child.tolist()))
        return g

    def call_paths(self, sep: str = "/") -> pd.Series:
        """The call path of every vertex as a string, e.g. ``"main/solve/MPI_Allreduce"``."""
        return self._call_paths(sep)

    @functools.lru_cache(maxsize=2)  # noqa: B019 - a PAG is immutable and long-lived
    def _call_paths(self, sep: str) -> pd.Series:
        names = self._vertices["name"].astype(str).to_numpy().astype(object)
        parent = self._vertices["parent"].to_numpy()
        depth = self._vertices["depth"].to_numpy()
        out = np.empty(len(names), dtype=object)
        order = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[order], np.arange(int(depth.max(initial=0)) + 2))
        for d in range(len(bounds) - 1):
            lv = order[bounds[d] : bounds[d + 1]]
            if d == 0:
                out[lv] = names[lv]
            else:
                out[lv] = out[parent[lv]] + sep + names[lv]
        return pd.Series(out, index=self._vertices.index, name="call_path")

    # ------------------------------------------------------------------ derived PAGs
    def with_metrics(self, info: Mapping[str, MetricInfo] | None = None, **columns: np.ndarray) -> PAG:
        """A new PAG with extra (or replaced) metric columns aligned with ``metrics`` rows."""
        m = self._metrics
        arrays = {k: np.asarray(v) for k, v in columns.items()}
        for k, a in arrays.items():
            if len(a) != len(m):
                raise PAGError(f"metric {k!r} has {len(a)} values, the PAG has {len(m)} metric rows")
        if arrays:  # one concatenation, not one insert per column (pandas warns of a fragmented frame)
            order = list(m.columns) + [k for k in arrays if k not in m.columns]
            new = pd.DataFrame(arrays, index=m.index)
            m = pd.concat([m.drop(columns=[k for k in arrays if k in m.columns]), new], axis=1)[order]
        else:
            m = m.copy(deep=False)
        mi = dict(self._metric_info)
        mi.update(info or {})
        out = PAG(self._vertices, m, metric_info=mi, trace=self._trace, comm=self._comm, attrs=self.attrs)
        if "analyses" in self.__dict__:  # what does not read the metrics stays valid
            out.analyses.inherit(self.analyses, unchanged=frozenset({"vertices", "trace"}))
        return out

    def subgraph(self, ids: Iterable[int], *, with_ancestors: bool = True, with_descendants: bool = False) -> PAG:
        """A new PAG restricted to the vertices ``ids`` (plus the ancestors that keep it a tree).

        Vertices are renumbered in their original order; the new vertex table
        has an extra column ``orig_vertex``. Metric rows of the kept vertices
        are copied unchanged (``time_inc`` still includes dropped children),
        communication edges between kept (vertex, process, thread) triples
        become explicit edges (the result has no instance-level trace), and a
        vertex whose parent is dropped (``with_ancestors=False``) is a root.
        """

        return subgraph(
            self, np.fromiter(ids, dtype=np.int64), with_ancestors=with_ancestors, with_descendants=with_descendants
        )

    def save(self, path: str | Path, *, overwrite: bool = True) -> Path:
        """Save to a directory in perflow's versioned on-disk format (see :mod:`perflow.pag.persist`)."""
        return persist.save(self, path, overwrite=overwrite)

    def content(self) -> list[tuple[str, Any]]:
        """What the PAG holds, part by part: ``(name, table or value)`` (for content fingerprints).

        The vertex table, the metrics table, the metric descriptions, and
        for a trace its intervals, messages, collectives and communicators,
        and the communication edges of a source without a trace. Two PAGs
        with equal parts hold the same data. The tables are the PAG's own
        (read them, do not change them); a lazy PAG materialises them.
        """
        parts: list[tuple[str, Any]] = [
            ("vertices", self._vertices),
            ("metrics", self._metrics),
            ("metric_info", repr(sorted((k, repr(v)) for k, v in self._metric_info.items()))),
        ]
        tr = self._trace
        if tr is not None:
            parts += [("intervals", tr.intervals), ("messages", tr.messages), ("collectives", tr.collectives)]
            parts += [
                ("comms", {int(k): np.asarray(v) for k, v in tr.comms.items()}),
                ("comm_names", repr(sorted(tr.comm_names.items()))),
            ]
        if self._comm is not None:
            parts.append(("comm", self._comm))
        return parts

    # ------------------------------------------------------------------ display
    def summary(self) -> dict[str, Any]:
        """A few headline numbers: vertices, processes, threads, metrics, trace sizes."""
        s: dict[str, Any] = {
            "vertices": self.n_vertices,
            "processes": int(len(self.processes)),
            "threads": int(self.locations.groupby("process").size().max()) if len(self.locations) else 0,
            "metric rows": len(self._metrics),
            "metrics": self.metric_names,
        }
        if self._trace is not None:
            s["intervals"] = self._trace.n_intervals
            s["messages"] = len(self._trace.messages)
            s["collective instances"] = int(self._trace.collectives["instance"].nunique())
        for k in ("source", "format"):
            if k in self.attrs:
                s[k] = self.attrs[k]
        return s

    def __repr__(self) -> str:
        s = self.summary()
        extra = f", intervals={s['intervals']}, messages={s['messages']}" if "intervals" in s else ""
        src = f", source={s['source']!r}" if "source" in s else ""
        return (
            f"<PAG vertices={s['vertices']}, processes={s['processes']}, threads={s['threads']}, "
            f"metrics={s['metrics']}{extra}{src}>"
        )

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in self.summary().items()
        )
        return f"<b>PAG</b><table>{rows}</table>"


# Reading literals, saving and the tree display build on the PAG class (they
# import it at their top): the modules, not their names, are imported here,
# last, so that either can be imported first.
from . import literal as literal_  # noqa: E402
from . import persist, treeview  # noqa: E402
