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

The class is assembled from bases, one job each: :class:`~perflow.pag.arith.Arithmetic`
(``+ - * /``), :class:`~perflow.pag.located.Located` (locations, metric
checks, aggregation), :class:`~perflow.pag.callpaths.CallPaths` (call paths,
vertex lookup, the networkx face) and :class:`~perflow.pag.describe.Described`
(summary, repr, content); the table slots and the :class:`LazyTables`
protocol of an engine's PAGs live in :mod:`perflow.pag.lazy`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import PAGError, PassError
from ..units import guess_unit
from .analysis import AnalysisManager
from .arith import Arithmetic
from .base import DEFAULT_METRICS, MetricInfo, metric_combine
from .callpaths import CallPaths
from .describe import Described
from .faces import MetricRows, subgraph
from .frames import make_metrics
from .instances import Trace
from .lazy import LazyTables, _Table
from .located import Located
from .parallel import ParallelView
from .query import query as run_query
from .sets import VertexSet
from .tree import TreeIndex, tree_index
from .vertices import VERTEX_COLUMNS, canonical_order, is_normalized, normalize_vertices

if TYPE_CHECKING:  # pragma: no cover
    from .analysis import AnalysisManager
    from .faces import MetricRows
    from .parallel import ParallelView
    from .partitioned import Executor
    from .sets import VertexSet

__all__ = ["PAG", "MetricInfo", "LazyTables", "metric_combine", "VERTEX_COLUMNS", "normalize_vertices"]


def _COPY_ON_WRITE() -> bool:  # noqa: N802 - reads like the pandas option it checks
    """Whether pandas copies on write (pandas 3; an option in pandas 2): then shallow copies protect the PAG."""
    return int(pd.__version__.split(".")[0]) >= 3 or bool(pd.get_option("mode.copy_on_write"))


class PAG(Arithmetic, Located, CallPaths, Described):
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

    # ------------------------------------------------------------------ metrics
    @functools.cached_property
    def rows(self) -> MetricRows:
        """The metrics table as read-only arrays, without copies (:class:`~perflow.pag.faces.MetricRows`)."""

        return MetricRows.of(self)

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

    @functools.cached_property
    def analyses(self) -> AnalysisManager:
        """The cached analyses of this PAG (see :mod:`perflow.pag.analysis`): ``pag.analyses.get(ANALYSIS, **settings)``."""

        return AnalysisManager(self, self._executor)

    @functools.cached_property
    def parallel(self) -> ParallelView:
        """The parallel view: (vertex, process, thread) vertices and communication edges."""

        return ParallelView(self)

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


# Reading literals, saving and the tree display build on the PAG class (they
# import it at their top): the modules, not their names, are imported here,
# last, so that either can be imported first.
from . import literal as literal_  # noqa: E402
from . import persist, treeview  # noqa: E402
