"""Selection passes: filters, ordering, set algebra, subgraphs and slices, as flow steps.

Most of these are thin wrappers over :class:`perflow.VertexSet` and
:class:`perflow.ParallelVertexSet` methods, so that a flow can chain them::

    steps:
      - {pass: filter_vertices, in: pag, with: {kind: mpi}}
      - {pass: top_vertices, with: {k: 5, metric: time_exc, agg: max}}

A data input typed ``PAG | VertexSet`` accepts either a whole PAG (all its
vertices) or a selection to refine. Set algebra returns sets ordered by id;
sorting and ``top_vertices`` keep the order they compute.
"""

from __future__ import annotations

import numpy as np

from perflow.sdk import PAG, ParallelVertexSet, PassError, Selection, VertexSet, pass_

from ._graph import slice_ids

__all__ = [
    "filter_vertices",
    "query_vertices",
    "sort_vertices",
    "top_vertices",
    "set_union",
    "set_intersection",
    "set_difference",
    "set_symmetric_difference",
    "subgraph",
    "ancestors",
    "descendants",
    "parallel_vertices",
    "backward_slice",
    "forward_slice",
]


def _vset(data: PAG | VertexSet) -> VertexSet:
    if isinstance(data, PAG):
        return data.vertices
    if isinstance(data, VertexSet):
        return data
    if isinstance(data, ParallelVertexSet):
        return data.vertices()
    raise PassError(f"expected a PAG or a VertexSet, got {type(data).__name__}")


@pass_(version="1", tags=("select",))
def filter_vertices(
    data: PAG | VertexSet,
    *,
    name: str | list[str] | None = None,
    regex: str | None = None,
    kind: str | list[str] | None = None,
    expr: str | None = None,
    agg: str = "sum",
) -> VertexSet:
    """Vertices whose name, kind and metrics satisfy every condition given.

    A thin wrapper over :meth:`perflow.VertexSet.filter`.

    Parameters
    ----------
    data : PAG or VertexSet
        The vertices to filter (a PAG means all of its vertices).
    name : str or list of str, optional
        Shell-style glob(s) on the vertex name, e.g. ``"MPI_*"``.
    regex : str, optional
        Regular expression searched in the vertex name.
    kind : str or list of str, optional
        Vertex kind(s): ``mpi``, ``function``, ``loop``, ``io``, ...
    expr : str, optional
        Boolean metric expression per vertex, e.g. ``"time_exc > 0.01"`` or
        ``"max(time_exc) > 1.3 * mean(time_exc)"``; bare metric names are
        aggregated across processes with ``agg``. The grammar (docs/queries.md)
        allows columns, numbers, strings, arithmetic, comparisons, and/or/not,
        aggregations and math functions, and nothing else.
    agg : str
        Aggregation for bare metric names in ``expr`` (sum, mean, max, min, std, median, count).

    Returns
    -------
    VertexSet
    """
    return _vset(data).filter(expr, name=name, regex=regex, kind=kind, agg=agg)


@pass_(version="1", tags=("select",))
def query_vertices(data: PAG | VertexSet, *, query: str | list = 'MATCH ("*")', agg: str = "sum") -> VertexSet:
    """Vertices on call paths that match a Hatchet-style call-path query.

    A thin wrapper over :meth:`perflow.PAG.query`; see ``docs/queries.md``.
    In YAML, write an object-dialect pair as a two-item list::

        - {pass: query_vertices, in: pag, with: {query: [[".", {name: "MPI_.*"}], "*"]}}
        - {pass: query_vertices, in: pag, with: {query: 'MATCH (".", p)->("*") WHERE p."name" STARTS WITH "MPI_"'}}

    Parameters
    ----------
    data : PAG or VertexSet
        The PAG to query (a VertexSet: its PAG, keeping only matches inside the set).
    query : str or list
        A string-dialect query (``MATCH ... WHERE ...``) or an object-dialect list.
        The default, ``MATCH ("*")``, matches every path (all vertices).
    agg : str
        How per-process metrics are compared: aggregated (sum, mean, max, min,
        std, median, count), or ``any``/``all`` to test each location.

    Returns
    -------
    VertexSet
    """
    if isinstance(data, PAG):
        return data.query(query, agg=agg)
    vs = _vset(data)
    return vs.pag.query(query, agg=agg) & vs


@pass_(version="1", tags=("select",))
def sort_vertices(
    data: PAG | VertexSet, *, metric: str = "time_exc", agg: str = "sum", ascending: bool = False
) -> VertexSet:
    """The vertices ordered by a metric aggregated across processes (largest first by default).

    Parameters
    ----------
    data : PAG or VertexSet
    metric : str
        Metric to sort by.
    agg : str
        Aggregation across processes (sum, mean, max, min, std, median, count).
    ascending : bool
        Smallest first instead.
    """
    return _vset(data).sort_by(metric, agg, ascending=ascending)


@pass_(version="1", tags=("select",))
def top_vertices(data: PAG | VertexSet, *, k: int = 10, metric: str | None = None, agg: str = "sum") -> VertexSet:
    """The ``k`` vertices with the largest aggregated metric (or the first ``k`` of an ordered set).

    Parameters
    ----------
    data : PAG or VertexSet
    k : int
        How many vertices to keep.
    metric : str, optional
        Metric to rank by; default: the set's current order if it has one, else ``time_exc``.
    agg : str
        Aggregation across processes.
    """
    if k < 0:
        raise PassError(f"k must be >= 0, not {k}")
    return _vset(data).top(k, by=metric, agg=agg)


def _same_kind(a: Selection, b: Selection) -> None:
    if type(a) is not type(b):
        raise PassError(f"cannot combine a {type(a).__name__} with a {type(b).__name__}")
    if a.pag is not b.pag:
        raise PassError("cannot combine sets of two different PAGs")


@pass_(version="1", tags=("select",))
def set_union(a: Selection, b: Selection) -> Selection:
    """Elements in ``a`` or ``b`` (two sets of the same kind and PAG), ordered by id."""
    _same_kind(a, b)
    return a | b


@pass_(version="1", tags=("select",))
def set_intersection(a: Selection, b: Selection) -> Selection:
    """Elements in both ``a`` and ``b``, ordered by id."""
    _same_kind(a, b)
    return a & b


@pass_(version="1", tags=("select",))
def set_difference(a: Selection, b: Selection) -> Selection:
    """Elements of ``a`` not in ``b``, ordered by id."""
    _same_kind(a, b)
    return a - b


@pass_(version="1", tags=("select",))
def set_symmetric_difference(a: Selection, b: Selection) -> Selection:
    """Elements in exactly one of ``a`` and ``b``, ordered by id."""
    _same_kind(a, b)
    return a ^ b


@pass_(version="1", tags=("select",))
def ancestors(data: VertexSet, *, include_self: bool = False) -> VertexSet:
    """All vertices on the paths from the roots of the top-down view to the given vertices.

    Parameters
    ----------
    data : VertexSet
    include_self : bool
        Keep the given vertices too.
    """
    return _vset(data).ancestors(include_self=include_self)


@pass_(version="1", tags=("select",))
def descendants(data: VertexSet, *, include_self: bool = False, max_depth: int | None = None) -> VertexSet:
    """All vertices in the subtrees below the given vertices.

    Parameters
    ----------
    data : VertexSet
    include_self : bool
        Keep the given vertices too.
    max_depth : int, optional
        Keep only descendants at most this many levels below the nearest given ancestor.
    """
    vs = _vset(data)
    out = vs.descendants(include_self=include_self)
    if max_depth is not None and len(out):
        pag = vs.pag
        parent = pag.vertex_table["parent"].to_numpy()
        # distance to the nearest selected ancestor, one numpy step per level
        dist = np.full(pag.n_vertices, -1, dtype=np.int64)
        dist[vs.ids] = 0
        cand = out.ids
        for d in range(1, max_depth + 1):
            p = parent[cand]
            hit = (p >= 0) & (dist[np.maximum(p, 0)] == d - 1) & (dist[cand] < 0)
            dist[cand[hit]] = d
        keep = (dist[out.ids] >= (0 if include_self else 1)) & (dist[out.ids] <= max_depth)
        out = VertexSet(pag, out.ids[keep])
    return out


@pass_(version="1", tags=("select",))
def subgraph(data: VertexSet, *, with_ancestors: bool = True, with_descendants: bool = False) -> PAG:
    """A new PAG restricted to a vertex set (plus the ancestors that keep it a tree).

    Vertices are renumbered in their original order; the new vertex table
    has an extra column ``orig_vertex`` with the id each vertex had. Metric
    rows of the kept vertices are copied unchanged, so ``time_inc`` still
    includes the time of children that were dropped. Communication edges
    between kept (vertex, process, thread) triples are kept as explicit
    edges (the result has no instance-level trace). A vertex whose parent
    is dropped (``with_ancestors=False``) becomes a root.

    Parameters
    ----------
    data : VertexSet
        The vertices to keep.
    with_ancestors : bool
        Also keep every ancestor of the given vertices (default), so their
        call paths are unchanged.
    with_descendants : bool
        Also keep every descendant of the given vertices.

    Returns
    -------
    PAG
    """
    vs = _vset(data)
    return vs.pag.subgraph(vs.ids, with_ancestors=with_ancestors, with_descendants=with_descendants)


@pass_(version="1", tags=("select",))
def parallel_vertices(
    data: PAG | VertexSet,
    *,
    processes: list[int] | None = None,
    name: str | list[str] | None = None,
    kind: str | list[str] | None = None,
    expr: str | None = None,
) -> ParallelVertexSet:
    """The (vertex, process, thread) vertices of the parallel view for a PAG or a top-down vertex set.

    Parameters
    ----------
    data : PAG or VertexSet
        A PAG (every parallel vertex) or top-down vertices (their instances on every process).
    processes : list of int, optional
        Keep these processes only.
    name : str or list of str, optional
        Glob(s) on the vertex name.
    kind : str or list of str, optional
        Vertex kind(s).
    expr : str, optional
        Expression on per-(vertex, process, thread) metric values, e.g. ``"time_exc > 0.5"``.
    """
    pv = data.parallel.vertices if isinstance(data, PAG) else _vset(data).on_processes()
    return pv.filter(expr, name=name, kind=kind, process=processes)


def _seed_rows(data: ParallelVertexSet | VertexSet) -> tuple[PAG, np.ndarray]:
    if isinstance(data, ParallelVertexSet):
        return data.pag, data.ids
    if isinstance(data, VertexSet):
        return data.pag, data.on_processes().ids
    raise PassError(f"expected a ParallelVertexSet or a VertexSet, got {type(data).__name__}")


@pass_(version="1", tags=("select", "parallel"))
def backward_slice(
    data: ParallelVertexSet | VertexSet, *, kinds: list[str] | None = None, max_steps: int | None = None
) -> ParallelVertexSet:
    """Parallel vertices from which the given ones can be reached: what may have influenced them.

    A backward traversal of ``pag.parallel.edge_table``: intra-process
    ``call`` edges (parent to child on one process and thread) and the
    communication edges (``p2p`` sender to receiver, ``collective`` last
    arriver to the other participants), followed against their direction.
    The given vertices are part of the slice.

    Parameters
    ----------
    data : ParallelVertexSet or VertexSet
        Seeds (top-down vertices stand for their instances on every process).
    kinds : list of str, optional
        Edge kinds to follow (``call``, ``p2p``, ``collective``, ``thread``); default all.
    max_steps : int, optional
        Follow at most this many edges from a seed.
    """
    pag, seeds = _seed_rows(data)
    return ParallelVertexSet(pag, slice_ids(pag, seeds, backward=True, kinds=kinds, max_steps=max_steps))


@pass_(version="1", tags=("select", "parallel"))
def forward_slice(
    data: ParallelVertexSet | VertexSet, *, kinds: list[str] | None = None, max_steps: int | None = None
) -> ParallelVertexSet:
    """Parallel vertices reachable from the given ones along parallel-view edges: what they may influence.

    The forward counterpart of :func:`backward_slice` (same edges, followed
    in their direction); the given vertices are part of the slice.

    Parameters
    ----------
    data : ParallelVertexSet or VertexSet
        Seeds.
    kinds : list of str, optional
        Edge kinds to follow; default all.
    max_steps : int, optional
        Follow at most this many edges from a seed.
    """
    pag, seeds = _seed_rows(data)
    return ParallelVertexSet(pag, slice_ids(pag, seeds, backward=False, kinds=kinds, max_steps=max_steps))
