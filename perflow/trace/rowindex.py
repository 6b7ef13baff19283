"""Row numbering of a partition's tables: rows within their location, global rows, local rows of global ones.

Rows are grouped by location (the raw-trace contract); :mod:`perflow.trace.stages`
numbers its intervals and point-to-point rows globally with these, and the
partitioned analyses find their local instances of global interval rows.
"""

from __future__ import annotations

import numpy as np

from .._jit import njit

__all__ = ["offset_in_location", "local_rows", "within_location", "global_rows"]


def offset_in_location(loc: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Index of some rows among the rows of their location (``loc`` sorted ascending)."""
    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return rows
    at = loc[rows]
    if at.dtype.kind in "iu" and len(rows) > 1024:  # ids in a small range: the first row of each, then one gather
        lo, hi = int(loc[0]), int(loc[-1])
        if 0 <= hi - lo < len(loc) and bool(np.all(loc[1:] >= loc[:-1])):  # (sorted: as searchsorted reads it)
            first = np.searchsorted(loc, np.arange(lo, hi + 1, dtype=loc.dtype), side="left")
            return rows - first[at - lo]
    return rows - np.searchsorted(loc, at, side="left")


def local_rows(ginst: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local instance index of global interval rows ``g``, and whether each is held locally.

    ``ginst`` (the global row of each local instance) is increasing; when it
    is one contiguous range (a whole trace, or one location) no search is needed.
    """
    g = np.asarray(g, dtype=np.int64)
    n = len(ginst)
    if n == 0:
        return np.zeros(len(g), dtype=np.int64), np.zeros(len(g), dtype=bool)
    if int(ginst[-1]) - int(ginst[0]) == n - 1:
        i = g - int(ginst[0])
        ok = (i >= 0) & (i < n)
        return np.where(ok, i, 0), ok
    i = np.clip(np.searchsorted(ginst, g), 0, n - 1)
    return i, (g >= 0) & (ginst[i] == g)


def within_location(loc: np.ndarray) -> np.ndarray:
    """Index of each row among the rows of its location (rows grouped by location)."""
    n = len(loc)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, loc[1:] != loc[:-1]])
    lengths = np.diff(np.r_[starts, n])
    return np.arange(n) - np.repeat(starts, lengths)


def global_rows(loc: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """``offset[loc] + within_location(loc)``: the global row of rows grouped by location, in one pass."""
    out = np.empty(len(loc), dtype=np.int64)
    if len(loc):
        _global_rows(loc, np.asarray(offset, dtype=np.int64), out)
    return out


@njit
def _global_rows(loc, offset, out):  # type: ignore[no-untyped-def]
    start = 0
    for i in range(loc.shape[0]):
        if i > 0 and loc[i] != loc[i - 1]:
            start = i
        out[i] = offset[loc[i]] + (i - start)
