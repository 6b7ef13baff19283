"""Construction and aggregation of the metrics table.

The metrics table is a pandas DataFrame with one row per (vertex, process,
thread) that has data, indexed by a sorted MultiIndex whose codes are built
directly from integer arrays (no factorising of 100 million rows), and one
numeric column per metric.

Aggregation across processes uses *dense* semantics: a vertex that a process
never executed counts as 0 for that process. So the mean of a vertex run only
on rank 0 of 4 ranks is a quarter of rank 0's value, and its minimum is 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .._arrays import unique
from ..errors import MetricError, PAGError
from .stats import one_stat

__all__ = ["INDEX_NAMES", "make_metrics", "aggregate", "AGGREGATIONS", "present_levels"]

INDEX_NAMES = ["vertex", "process", "thread"]
AGGREGATIONS = ("sum", "mean", "max", "min", "std", "count", "median")


def present_levels(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a non-negative integer array, in linear time when the range is small."""
    if len(x) == 0:
        return np.zeros(0, dtype=np.int64)
    lo, hi = int(x.min()), int(x.max())
    if lo >= 0 and hi < max(4 * len(x), 1 << 24):
        return np.flatnonzero(np.bincount(x, minlength=hi + 1)).astype(np.int64)
    return unique(x).astype(np.int64)


def _codes(x: np.ndarray, levels: np.ndarray) -> np.ndarray:
    if len(levels) and levels[0] >= 0 and levels[-1] < (1 << 24):
        lut = np.full(int(levels[-1]) + 1, -1, dtype=np.int32)
        lut[levels] = np.arange(len(levels), dtype=np.int32)
        return lut[x]
    return np.searchsorted(levels, x).astype(np.int32)


def _as_int(x: np.ndarray) -> np.ndarray:
    a = np.asarray(x)
    return a if a.dtype.kind in "iu" else a.astype(np.int64)


def _code_dtype(n_levels: int) -> np.dtype:
    """The integer dtype pandas uses for the codes of a level with ``n_levels`` values."""
    for dt in (np.int8, np.int16, np.int32):
        if n_levels < np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.int64)


def _strictly_increasing(vc: np.ndarray, pc: np.ndarray, tc: np.ndarray, n_p: int, n_t: int) -> bool:
    """Whether the (vertex, process, thread) keys strictly increase, checked in chunks (bounded memory)."""
    n = len(vc)
    step = 1 << 23
    prev = None
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        key = (vc[lo:hi].astype(np.int64) * n_p + pc[lo:hi]) * n_t + tc[lo:hi]
        if prev is not None and key[0] <= prev:
            return False
        if len(key) > 1 and not np.all(key[1:] > key[:-1]):
            return False
        prev = key[-1]
    return True


def make_metrics(
    vertex: np.ndarray,
    process: np.ndarray,
    thread: np.ndarray | None,
    columns: Mapping[str, np.ndarray],
    *,
    n_vertices: int,
    duplicates: str = "sum",
) -> pd.DataFrame:
    """Build a metrics table from parallel integer key arrays and metric columns.

    Parameters
    ----------
    vertex, process, thread : numpy.ndarray
        Integer keys of each row. ``thread`` may be ``None`` (all zeros).
    columns : mapping of str to numpy.ndarray
        Metric columns, each as long as the keys.
    n_vertices : int
        Number of vertices of the PAG (the vertex level is ``0..n_vertices-1``).
    duplicates : {"sum", "error"}
        What to do with repeated keys: add their values, or raise.

    Returns
    -------
    pandas.DataFrame
        Sorted by (vertex, process, thread), indexed by a MultiIndex named
        ``vertex``, ``process``, ``thread``.
    """
    vertex = _as_int(vertex)
    process = _as_int(process)
    thread = np.zeros(len(vertex), dtype=np.int8) if thread is None else _as_int(thread)
    n = len(vertex)
    if len(process) != n or len(thread) != n:
        raise PAGError("vertex, process and thread arrays differ in length")
    cols = {}
    for k, v in columns.items():
        a = np.asarray(v)
        if len(a) != n:
            raise PAGError(f"metric column {k!r} has {len(a)} rows, expected {n}")
        if a.dtype.kind not in "fiub":
            raise MetricError(f"metric column {k!r} is not numeric (dtype {a.dtype})")
        cols[k] = a
    if n and (vertex.min() < 0 or vertex.max() >= n_vertices):
        raise PAGError(f"metric rows refer to vertex ids outside 0..{n_vertices - 1}")
    if n and (process.min() < 0 or thread.min() < 0):
        raise PAGError("process and thread ids must be non-negative")
    plev = present_levels(process)
    tlev = present_levels(thread)
    # codes in the dtypes pandas would choose, so the MultiIndex takes them without copying
    vc = vertex.astype(_code_dtype(n_vertices), copy=False)
    pc = _codes(process, plev).astype(_code_dtype(len(plev)), copy=False)
    tc = _codes(thread, tlev).astype(_code_dtype(len(tlev)), copy=False)
    n_p, n_t = len(plev), max(len(tlev), 1)
    if n > 1 and not _strictly_increasing(vc, pc, tc, n_p, n_t):
        key = (vc.astype(np.int64) * n_p + pc) * n_t + tc
        order = np.argsort(key, kind="stable")
        key = key[order]
        vc, pc, tc = vc[order], pc[order], tc[order]
        cols = {k: v[order] for k, v in cols.items()}
        dup = np.r_[False, key[1:] == key[:-1]]
        if dup.any():
            if duplicates == "error":
                i = int(np.flatnonzero(dup)[0])
                raise PAGError(f"duplicate metric row for vertex {vc[i]}, process {plev[pc[i]]}, thread {tlev[tc[i]]}")
            starts = np.flatnonzero(~dup)
            cols = {k: np.add.reduceat(v, starts) if len(v) else v for k, v in cols.items()}
            vc, pc, tc = vc[starts], pc[starts], tc[starts]
    index = pd.MultiIndex(
        levels=[pd.RangeIndex(n_vertices), pd.Index(plev), pd.Index(tlev)],
        codes=[vc, pc, tc],
        names=INDEX_NAMES,
        verify_integrity=False,
    )
    return pd.DataFrame(cols, index=index, copy=False)


def _segments(vcodes: np.ndarray, n_vertices: int) -> tuple[np.ndarray, np.ndarray]:
    counts = np.bincount(vcodes, minlength=n_vertices)
    starts = np.cumsum(counts) - counts
    return starts, counts


def aggregate(
    metrics: pd.DataFrame,
    column: str,
    agg: str,
    *,
    n_vertices: int,
    n_locations: int,
) -> np.ndarray:
    """Aggregate one metric across processes and threads, per vertex.

    Parameters
    ----------
    metrics : pandas.DataFrame
        A metrics table built by :func:`make_metrics`.
    column : str
        The metric.
    agg : {"sum", "mean", "max", "min", "std", "count", "median"}
        The aggregation. ``count`` is the number of locations with a row.
    n_vertices, n_locations : int
        Number of vertices, and of (process, thread) locations over which
        absent rows count as zeros.

    Returns
    -------
    numpy.ndarray
        float64 array of length ``n_vertices``.
    """
    if agg not in AGGREGATIONS:
        raise PAGError(f"unknown aggregation {agg!r}; choose one of {', '.join(AGGREGATIONS)}")
    if column not in metrics.columns:
        raise MetricError(f"unknown metric {column!r}; metrics are {', '.join(map(str, metrics.columns))}")
    v = np.asarray(metrics.index.codes[0], dtype=np.int64)
    x = metrics[column].to_numpy(dtype=np.float64, na_value=np.nan)
    n_loc = max(n_locations, 1)
    if agg != "median":
        return one_stat(v, x, agg, n_vertices=n_vertices, n_groups=n_loc)
    counts = np.bincount(v, minlength=n_vertices)
    starts, _ = _segments(v, n_vertices)
    has = counts > 0
    # median with the zeros of absent locations: sort within each vertex's segment
    order = np.lexsort((x, v))
    xs = x[order]
    neg = np.bincount(v, weights=(x < 0).astype(np.float64), minlength=n_vertices).astype(np.int64)
    z = n_loc - counts

    def kth(k: np.ndarray) -> np.ndarray:
        res = np.zeros(n_vertices, dtype=np.float64)
        a = k < neg
        res[a] = xs[starts[a] + k[a]]
        b = k >= neg + z
        res[b] = xs[np.minimum(starts[b] + k[b] - z[b], max(len(xs) - 1, 0))] if len(xs) else 0.0
        return res

    out = 0.5 * (kth(np.full(n_vertices, (n_loc - 1) // 2)) + kth(np.full(n_vertices, n_loc // 2)))
    out[~has] = 0.0
    return out
