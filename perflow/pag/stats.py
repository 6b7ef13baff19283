"""Per-vertex statistics of a metric across processes or locations: one definition, mergeable.

A metric has one value per (vertex, group) row, a *group* being a process
(its threads summed) or a (process, thread) location. Statistics follow
*dense* semantics: a group without a row for a vertex counts as 0, so with
``N`` groups ``mean = sum / N``, the maximum of a vertex that some group
never ran is at least 0, and ``std`` is the population standard deviation
over all ``N`` values.

The statistics are computed in three steps so that they can be spread over
partitions of the groups (the Dask engine) and still give the values of one
pass over all rows:

* :func:`partial` reduces some rows to a :class:`Partial` (sums, sums of
  squares, counts, row extrema and the group of the row maximum);
* :func:`combine` merges partials (sums add, extrema reduce, the lowest
  group wins a tie for the maximum);
* :func:`finish` applies the dense semantics for ``N`` groups.

:func:`row_stats` (and :meth:`Grouped.stats`) is the whole computation in one process;
:meth:`perflow.PAG.aggregate` and the passes use it or, for one statistic,
the same formulas (:func:`one_stat`). Sums re-associate across partitions,
so sums, means and standard deviations agree with the one-process values to
rounding; extrema, counts and the argmax are exact.

Group keys are integers that order the groups: the process id, or for
locations ``process * 2**24 + thread`` (:func:`location_key`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import MetricError, PAGError
from .analysis import Analysis, Settings

if TYPE_CHECKING:  # pragma: no cover
    from .pag import PAG

__all__ = [
    "ACROSS",
    "STATS",
    "Partial",
    "group_rows",
    "location_key",
    "split_location_key",
    "partial",
    "combine",
    "finish",
    "row_stats",
    "one_stat",
    "Grouped",
    "grouped",
    "StatsSettings",
    "VERTEX_STATS",
]

#: how rows are grouped: by process (threads summed) or by (process, thread) location
ACROSS = ("process", "location")
#: the statistics :func:`finish` returns per vertex (besides ``argmax``, ``n``, ``row_max``, ``row_min``)
STATS = ("sum", "mean", "max", "min", "std", "count")

_THREAD_BITS = 24


def location_key(process: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """The group key of (process, thread) locations: ordered by process, then thread."""
    return (np.asarray(process, dtype=np.int64) << _THREAD_BITS) + np.asarray(thread, dtype=np.int64)


def split_location_key(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(process, thread) of location keys (-1, -1 for -1)."""
    key = np.asarray(key, dtype=np.int64)
    ok = key >= 0
    return np.where(ok, key >> _THREAD_BITS, -1), np.where(ok, key & ((1 << _THREAD_BITS) - 1), -1)


def group_rows(
    vertex: np.ndarray, process: np.ndarray, thread: np.ndarray, value: np.ndarray, across: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``(vertex, group key, value)`` sorted by vertex then group; threads summed per process for ``"process"``.

    The input rows are metric rows, one per (vertex, process, thread); NaN
    values count as 0.
    """
    if across not in ACROSS:
        raise PAGError(f"across must be one of {', '.join(ACROSS)}, not {across!r}")
    v = np.asarray(vertex, dtype=np.int64)
    x = np.nan_to_num(np.asarray(value, dtype=np.float64), nan=0.0)
    key = np.asarray(process, dtype=np.int64) if across == "process" else location_key(process, thread)
    if not len(v):
        return v, key, x
    span = int(key.max()) + 1
    full = v * span + key
    if len(full) > 1 and not np.all(full[1:] >= full[:-1]):
        order = np.argsort(full, kind="stable")
        v, key, x, full = v[order], key[order], x[order], full[order]
    if len(full) > 1 and not np.all(full[1:] > full[:-1]):  # several rows per group (threads of a process)
        starts = np.flatnonzero(np.r_[True, full[1:] != full[:-1]])
        x = np.add.reduceat(x, starts)
        v, key = v[starts], key[starts]
    return v, key, x


@dataclass
class Partial:
    """Mergeable per-vertex reductions of some rows (see the module docstring).

    ``max``/``min`` are over the rows present (-inf/+inf for none); ``argmax``
    is the group key of the first (lowest) row holding ``max``, -1 for none.
    """

    sum: np.ndarray
    sumsq: np.ndarray
    count: np.ndarray
    max: np.ndarray
    min: np.ndarray
    argmax: np.ndarray

    @classmethod
    def empty(cls, n_vertices: int) -> Partial:
        """The partial of no rows."""
        z = np.zeros(n_vertices)
        return cls(z, z.copy(), np.zeros(n_vertices, np.int64), np.full(n_vertices, -np.inf),
                   np.full(n_vertices, np.inf), np.full(n_vertices, -1, np.int64))  # fmt: skip


def _segment_starts(v: np.ndarray, n_vertices: int) -> tuple[np.ndarray, np.ndarray]:
    count = np.bincount(v, minlength=n_vertices)
    return np.cumsum(count) - count, count


def partial(vertex: np.ndarray, key: np.ndarray, value: np.ndarray, n_vertices: int) -> Partial:
    """Reduce rows sorted by (vertex, group key) (as :func:`group_rows` returns them) to a :class:`Partial`."""
    v = np.asarray(vertex, dtype=np.int64)
    x = np.asarray(value, dtype=np.float64)
    out = Partial.empty(n_vertices)
    if not len(v):
        return out
    starts, count = _segment_starts(v, n_vertices)
    has = count > 0
    out.sum = np.bincount(v, weights=x, minlength=n_vertices)
    out.sumsq = np.bincount(v, weights=x * x, minlength=n_vertices)
    out.count = count.astype(np.int64)
    out.max[has] = np.maximum.reduceat(x, starts[has])
    out.min[has] = np.minimum.reduceat(x, starts[has])
    rows = np.flatnonzero(x == out.max[v])
    if len(rows):  # rows are sorted by (vertex, key): the first hit per vertex has the lowest key
        uv, first = np.unique(v[rows], return_index=True)
        out.argmax[uv] = np.asarray(key, dtype=np.int64)[rows[first]]
    return out


def combine(parts: list[Partial]) -> Partial:
    """Merge partials of disjoint groups (the order of ``parts`` does not matter)."""
    if not parts:
        raise PAGError("combine needs at least one partial")
    out = Partial(*(np.array(a, copy=True) for a in (parts[0].sum, parts[0].sumsq, parts[0].count,
                                                        parts[0].max, parts[0].min, parts[0].argmax)))  # fmt: skip
    for q in parts[1:]:
        out.sum = out.sum + q.sum
        out.sumsq = out.sumsq + q.sumsq
        out.count = out.count + q.count
        tie = (q.max == out.max) & (q.argmax >= 0) & ((out.argmax < 0) | (q.argmax < out.argmax))
        better = (q.max > out.max) | tie
        out.argmax = np.where(better, q.argmax, out.argmax)
        out.max = np.maximum(out.max, q.max)
        out.min = np.minimum(out.min, q.min)
    return out


def _mean(s: np.ndarray, n: int) -> np.ndarray:
    return s / max(n, 1)


def _std(s: np.ndarray, s2: np.ndarray, n: int) -> np.ndarray:
    n = max(n, 1)
    mean = s / n
    return np.sqrt(np.maximum(s2 / n - mean * mean, 0.0))


def _dense(extreme: np.ndarray, count: np.ndarray, n: int, fn: np.ufunc) -> np.ndarray:
    """Row extrema with absent groups counting 0 (0 for vertices without rows)."""
    has = count > 0
    out = np.where(has, extreme, 0.0)
    absent = has & (count < max(n, 1))
    out[absent] = fn(out[absent], 0.0)
    return out


def finish(p: Partial, n_groups: int) -> dict[str, np.ndarray]:
    """Dense per-vertex statistics over ``n_groups`` groups.

    Returns ``sum``, ``mean``, ``max``, ``min``, ``std``, ``count`` (groups with
    a row), ``argmax`` (group key of the maximum; -1 when the maximum is an
    absent group's 0 or the vertex has no rows), ``n`` (groups), and the row
    extrema ``row_max``/``row_min`` (noise floors use them).
    """
    n = max(n_groups, 1)
    mx = _dense(p.max, p.count, n, np.maximum)
    argmax = np.where((p.count > 0) & (p.max == mx), p.argmax, -1)
    return {
        "sum": p.sum,
        "mean": _mean(p.sum, n),
        "max": mx,
        "min": _dense(p.min, p.count, n, np.minimum),
        "std": _std(p.sum, p.sumsq, n),
        "count": p.count.astype(np.int64),
        "argmax": argmax.astype(np.int64),
        "n": np.full(len(p.count), n_groups, dtype=np.int64),
        "row_max": p.max,
        "row_min": p.min,
    }


def row_stats(vertex: np.ndarray, key: np.ndarray, value: np.ndarray, n_vertices: int, n_groups: int) -> dict:
    """:func:`finish` of :func:`partial` of every row (rows as :func:`group_rows` returns them)."""
    return finish(partial(vertex, key, value, n_vertices), n_groups)


def one_stat(vertex: np.ndarray, value: np.ndarray, agg: str, *, n_vertices: int, n_groups: int) -> np.ndarray:
    """One statistic of :data:`STATS` per vertex, computing only what it needs.

    ``vertex`` must be sorted (rows of one vertex together) for ``max`` and
    ``min``; ``count`` is the number of rows per vertex.
    """
    if agg not in STATS:
        raise PAGError(f"unknown statistic {agg!r}; choose one of {', '.join(STATS)}")
    v = np.asarray(vertex, dtype=np.int64)
    x = np.asarray(value, dtype=np.float64)
    if agg == "count":
        return np.bincount(v, minlength=n_vertices).astype(np.float64)
    if agg in ("sum", "mean", "std"):
        s = np.bincount(v, weights=x, minlength=n_vertices)
        if agg == "sum":
            return s
        if agg == "mean":
            return _mean(s, n_groups)
        return _std(s, np.bincount(v, weights=x * x, minlength=n_vertices), n_groups)
    starts, count = _segment_starts(v, n_vertices)
    has = count > 0
    fn = np.maximum if agg == "max" else np.minimum
    ext = np.zeros(n_vertices)
    if len(x):
        ext[has] = fn.reduceat(x, starts[has])
    return _dense(ext, count, n_groups, fn)


# ----------------------------------------------------------------------- a PAG's rows, grouped
@dataclass(frozen=True)
class Grouped:
    """One metric reduced to one value per (vertex, group).

    Attributes
    ----------
    vertex : numpy.ndarray
        Vertex id of each row (sorted, then by group).
    group : numpy.ndarray
        Group code of each row (``0..n_groups-1``).
    value : numpy.ndarray
        float64 metric value of each row.
    n_vertices, n_groups : int
        Sizes of the dense (vertex x group) matrix the rows are a sparse form of.
    process, thread : numpy.ndarray
        Process id and thread id of each group (thread is -1 for process groups).
    """

    vertex: np.ndarray
    group: np.ndarray
    value: np.ndarray
    n_vertices: int
    n_groups: int
    process: np.ndarray
    thread: np.ndarray

    def stats(self) -> dict[str, np.ndarray]:
        """Per-vertex statistics across the groups, dense semantics (a missing group counts 0).

        :func:`finish`'s dict: ``sum``, ``mean``, ``max``, ``min``, ``std``
        (population), ``count`` (groups with a row), ``argmax`` (group code of
        the maximum; the lowest on ties; -1 when the maximum is a missing
        group's 0) and ``n`` (groups).
        """
        return row_stats(self.vertex, self.group, self.value, self.n_vertices, self.n_groups)

    def dense(self) -> np.ndarray:
        """The (n_vertices, n_groups) matrix, zeros where there is no row."""
        out = np.zeros((self.n_vertices, max(self.n_groups, 1)))
        out[self.vertex, self.group] = self.value
        return out


def grouped(pag: PAG, metric: str, across: str = "process") -> Grouped:
    """Values of ``metric`` per (vertex, process) with threads summed, or per (vertex, location).

    Parameters
    ----------
    pag : PAG
    metric : str
        A metric column.
    across : {"process", "location"}
        ``"process"`` sums the threads of each process; ``"location"`` keeps
        every (process, thread) as its own group.
    """
    pag._check_metric(metric)
    if across not in ACROSS:
        raise PAGError(f"across must be one of {', '.join(ACROSS)}, not {across!r}")
    m = pag._metrics
    idx = m.index
    plev = idx.levels[1].to_numpy().astype(np.int64)
    tlev = idx.levels[2].to_numpy().astype(np.int64)
    # the index codes order the groups as their ids do, so they serve as group keys
    v, key, x = group_rows(
        idx.codes[0], idx.codes[1], idx.codes[2], m[metric].to_numpy(dtype=np.float64, na_value=np.nan), across
    )
    if across == "location":
        loc = pag.locations
        lp, lt = loc["process"].to_numpy(), loc["thread"].to_numpy()
        lkey = location_key(np.searchsorted(plev, lp), np.searchsorted(tlev, lt))
        g = np.searchsorted(lkey, key)
        return Grouped(v, g, x, pag.n_vertices, len(loc), lp.astype(np.int64), lt.astype(np.int64))
    return Grouped(v, key, x, pag.n_vertices, len(plev), plev, np.full(len(plev), -1, dtype=np.int64))


# ----------------------------------------------------------------------- the analysis
@dataclass(frozen=True)
class StatsSettings(Settings):
    """Which metric, grouped how (see :data:`VERTEX_STATS`)."""

    metric: str = "time_exc"
    across: Literal["process", "location"] = "process"


def _n_groups(pag: PAG, across: str) -> int:
    return len(pag.processes) if across == "process" else len(pag.locations)


def _with_ids(st: dict[str, np.ndarray], process: np.ndarray, thread: np.ndarray) -> dict[str, np.ndarray]:
    a = st["argmax"]
    ok = a >= 0
    st["argmax_process"] = np.where(ok, process[np.maximum(a, 0)] if len(process) else -1, -1)
    st["argmax_thread"] = np.where(ok, thread[np.maximum(a, 0)] if len(thread) else -1, -1)
    return st


def _stats_local(pag: PAG, s: StatsSettings) -> dict[str, np.ndarray]:
    g = grouped(pag, s.metric, s.across)
    return _with_ids(g.stats(), g.process, g.thread)


def _stats_partial(part: Any, s: StatsSettings) -> Partial:
    rows = part.metric_rows(s.metric)
    if rows is None:
        return Partial.empty(part.n_vertices)
    v, key, x = group_rows(*rows, s.across)
    return partial(v, key, x, part.n_vertices)


def _stats_combine(parts: list[Partial], s: StatsSettings) -> Partial:
    return combine(parts)


def _stats_finish(pag: PAG, p: Partial, s: StatsSettings) -> dict[str, np.ndarray]:
    if s.metric not in pag.metric_names:
        raise MetricError(f"unknown metric {s.metric!r} (metrics: {', '.join(pag.metric_names)})")
    st = finish(p, _n_groups(pag, s.across))
    key = st["argmax"]
    if s.across == "process":
        st["argmax_process"], st["argmax_thread"] = key.copy(), np.full(len(key), -1, dtype=np.int64)
    else:
        st["argmax_process"], st["argmax_thread"] = split_location_key(key)
    return st


#: per-vertex statistics of one metric across processes or locations (:func:`finish`'s dict, plus
#: ``argmax_process``/``argmax_thread``); partitioned, so an engine computes it where the rows live
VERTEX_STATS = Analysis(
    "pag.vertex_stats",
    compute=_stats_local,
    partial=_stats_partial,
    combine=_stats_combine,
    finish=_stats_finish,
    settings=StatsSettings,
    uses=frozenset({"metrics", "vertices"}),
    doc="per-vertex sum, mean, max, min, std, count and argmax of a metric across groups",
)
