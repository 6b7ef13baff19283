"""Hotspot detection: the vertices that account for the most of a metric.

For every vertex ``v`` with values ``x[v, p]`` on processes ``p = 1..N``
(threads summed; a process without data counts 0), the hotspot value is
``value[v] = agg_p x[v, p]`` for the chosen aggregation (sum, mean, max,
...), and its share of the total is::

    share[v] = value[v] / total
    total    = sum over all vertices of value         (exclusive metrics)
             = sum over the roots of value            (inclusive metrics, which nest)

so exclusive shares of all vertices add up to 1, and the inclusive share of
a vertex is the fraction of the whole run spent in its subtree. Time a
recorded thread spent off the CPU (the vertices ``off_cpu``, see
:func:`perflow.sdk.profile.off_cpu_mask`) counts in the total but is no
code's and is never ranked (``breakdown`` shows it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflow.sdk import PAG, VERTEX_STATS, PassError, VertexSet, pass_
from perflow.sdk.profile import AGGREGATIONS, as_pag, off_cpu_mask, resolve_metric, selected_vertices, vertex_columns
from perflow.sdk.render import declare_aggregates

__all__ = ["hotspot", "hotspot_set", "hotspot_table"]

HOTSPOT_COLUMNS = ["vertex", "name", "kind", "call_path", "value", "share", "max", "mean", "max_process"]


def hotspot_table(
    data: PAG | VertexSet,
    *,
    metric: str = "time",
    mode: str | None = None,
    agg: str = "sum",
    k: int | None = 10,
    name: str | list[str] | None = None,
    kind: str | list[str] | None = None,
    min_share: float = 0.0,
) -> pd.DataFrame:
    """The computation behind :func:`hotspot` (see there); ``k=None`` keeps every vertex."""
    pag = as_pag(data)
    if agg not in AGGREGATIONS:
        raise PassError(f"unknown aggregation {agg!r}; choose one of {', '.join(AGGREGATIONS)}")
    col = resolve_metric(pag, metric, mode)
    info = pag.metric_info[col]
    inclusive = info.mode == "inclusive"
    value = pag.aggregate(col, agg).to_numpy()
    total = float(value[pag.roots].sum()) if inclusive else float(value.sum())
    stats = pag.analyses.get(VERTEX_STATS, owner="pass 'hotspot'", metric=col, across="process")
    ids = selected_vertices(data)
    ids = np.arange(pag.n_vertices) if ids is None else np.asarray(ids)
    vs = VertexSet(pag, ids)
    if name is not None or kind is not None:
        vs = vs.filter(name=name, kind=kind)
    ids = vs.ids
    ids = ids[~off_cpu_mask(pag)[ids]]  # time off the CPU is no code's
    share = value[ids] / total if total != 0 else np.zeros(len(ids))
    keep = share >= min_share if min_share > 0 else np.ones(len(ids), dtype=bool)
    ids, share = ids[keep], share[keep]
    order = np.lexsort((ids, -value[ids]))
    ids, share = ids[order], share[order]
    if k is not None:
        if k < 0:
            raise PassError(f"k must be >= 0, not {k}")
        ids, share = ids[:k], share[:k]
    df = vertex_columns(pag, ids)
    df["value"] = value[ids]
    df["share"] = share
    df["max"] = stats["max"][ids]
    df["mean"] = stats["mean"][ids]
    df["max_process"] = stats["argmax_process"][ids]
    unit = info.unit
    df.attrs.update({"metric": col, "agg": agg, "total": total, "units": {"value": unit, "max": unit, "mean": unit}})
    df = df.reset_index(drop=True)
    declare_aggregates(df, pag, {"value": agg})
    declare_aggregates(df, pag, {"max": "max", "mean": "mean"}, across="processes")  # threads summed first
    return df


@pass_(version="1", tags=("profile", "hotspot"))
def hotspot(
    data: PAG | VertexSet,
    *,
    metric: str = "time",
    mode: str | None = None,
    agg: str = "sum",
    k: int = 10,
    name: str | list[str] | None = None,
    kind: str | list[str] | None = None,
    min_share: float = 0.0,
) -> pd.DataFrame:
    """The ``k`` vertices with the largest metric value, with their share of the total.

    ``value = agg over processes of the metric`` (a process without data for
    the vertex counts 0), ``share = value / total`` where ``total`` sums
    ``value`` over all vertices for exclusive metrics and over the roots for
    inclusive ones (see the module docstring). Rows are sorted by value,
    largest first (ties by vertex id).

    Parameters
    ----------
    data : PAG or VertexSet
        The run, or a selection of its vertices to rank (shares stay relative
        to the whole run).
    metric : str
        A metric column (``time_exc``, ``visits``, ``bytes_sent``, ...) or the
        base name ``time``, completed by ``mode``.
    mode : {"exclusive", "inclusive"}, optional
        Pick the ``*_exc`` or ``*_inc`` variant of the metric; by default a
        column is used as named and the base name ``time`` means ``time_exc``.
    agg : str
        Aggregation across processes: sum, mean, max, min, std, median, count.
    k : int
        Number of rows (0 or more).
    name : str or list of str, optional
        Keep only vertices whose name matches these globs (``"MPI_*"``).
    kind : str or list of str, optional
        Keep only vertices of these kinds (``"mpi"``).
    min_share : float
        Drop vertices whose share is below this fraction.

    Returns
    -------
    pandas.DataFrame
        Columns ``vertex``, ``name``, ``kind``, ``call_path``, ``value`` (the
        aggregated metric), ``share`` (fraction of the total), ``max`` and
        ``mean`` (per-process maximum and mean of the metric, threads summed)
        and ``max_process`` (the process holding the maximum, -1 when it is a
        process without data). ``df.attrs`` records ``metric``, ``agg`` and ``total``.
    """
    return hotspot_table(data, metric=metric, mode=mode, agg=agg, k=k, name=name, kind=kind, min_share=min_share)


@pass_(version="1", tags=("profile", "hotspot", "select"))
def hotspot_set(
    data: PAG | VertexSet,
    *,
    metric: str = "time",
    mode: str | None = None,
    agg: str = "sum",
    k: int = 10,
    name: str | list[str] | None = None,
    kind: str | list[str] | None = None,
    min_share: float = 0.0,
) -> VertexSet:
    """The hotspot vertices of :func:`hotspot` as an ordered :class:`~perflow.VertexSet` (largest first).

    Parameters
    ----------
    data : PAG or VertexSet
        The run, or a selection of its vertices.
    metric : str
        Metric column or base name (see :func:`hotspot`).
    mode : {"exclusive", "inclusive"}, optional
        Exclusive or inclusive variant of the metric (default: as named; ``time`` means ``time_exc``).
    agg : str
        Aggregation across processes.
    k : int
        Number of vertices.
    name : str or list of str, optional
        Name globs to keep.
    kind : str or list of str, optional
        Vertex kinds to keep.
    min_share : float
        Minimum share of the total.
    """
    df = hotspot_table(data, metric=metric, mode=mode, agg=agg, k=k, name=name, kind=kind, min_share=min_share)
    return VertexSet(as_pag(data), df["vertex"].to_numpy(), ordered=True)
