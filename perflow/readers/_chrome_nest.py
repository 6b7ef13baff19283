"""Compiled kernels for the Chrome trace reader: B/E pairing and interval nesting."""

from __future__ import annotations

import numpy as np

from .._jit import njit

__all__ = ["pair_begin_end", "nest_intervals"]


@njit
def _pair(loc: np.ndarray, t: np.ndarray, is_begin: np.ndarray):  # type: ignore[no-untyped-def]
    n = len(loc)
    start = np.empty(n, np.float64)
    end = np.empty(n, np.float64)
    idx = np.empty(n, np.int64)
    stack = np.empty(n, np.int64)
    top = 0
    out = 0
    unmatched = 0
    i = 0
    while i < n:
        j = i
        while j < n and loc[j] == loc[i]:
            j += 1
        last = t[j - 1]
        top = 0
        for k in range(i, j):
            if is_begin[k]:
                stack[top] = k
                top += 1
            elif top > 0:
                top -= 1
                b = stack[top]
                start[out] = t[b]
                end[out] = t[k]
                idx[out] = b
                out += 1
            else:
                unmatched += 1
        while top > 0:  # never closed: close at the location's last time stamp
            top -= 1
            b = stack[top]
            start[out] = t[b]
            end[out] = last
            idx[out] = b
            out += 1
        i = j
    return start[:out], end[:out], idx[:out], unmatched


def pair_begin_end(
    loc: np.ndarray, t: np.ndarray, is_begin: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Match B/E events (sorted by location, then stream order) into intervals.

    Returns
    -------
    start, end, begin_index, unmatched_ends
    """
    if len(loc) == 0:
        z = np.zeros(0)
        return z, z, np.zeros(0, np.int64), 0
    s, e, i, u = _pair(
        np.ascontiguousarray(loc, np.int64),
        np.ascontiguousarray(t, np.float64),
        np.ascontiguousarray(is_begin, np.bool_),
    )
    return s, e, i, int(u)


@njit
def _nest(loc: np.ndarray, start: np.ndarray, end: np.ndarray, rid: np.ndarray):  # type: ignore[no-untyped-def]
    n = len(loc)
    ev_loc = np.empty(2 * n, np.int64)
    ev_t = np.empty(2 * n, np.float64)
    ev_k = np.empty(2 * n, np.int64)
    ev_r = np.empty(2 * n, np.int64)
    st_end = np.empty(n, np.float64)
    st_r = np.empty(n, np.int64)
    top = 0
    out = 0
    cur = -1
    for i in range(n + 1):
        if i == n or loc[i] != cur:
            while top > 0:
                top -= 1
                ev_loc[out] = cur
                ev_t[out] = st_end[top]
                ev_k[out] = 1
                ev_r[out] = st_r[top]
                out += 1
            if i == n:
                break
            cur = loc[i]
        s = start[i]
        e = end[i]
        # tolerance: end = ts + dur computed in floating point may overshoot the next start by an ulp
        eps = max(1e-12, 8.0 * np.spacing(abs(s)) + 8.0 * np.spacing(abs(e)))
        while top > 0 and st_end[top - 1] <= s + eps:
            top -= 1
            ev_loc[out] = cur
            ev_t[out] = min(st_end[top], s)
            ev_k[out] = 1
            ev_r[out] = st_r[top]
            out += 1
        if top > 0 and e > st_end[top - 1]:
            e = st_end[top - 1]  # overlapping without nesting: clip to the parent
        ev_loc[out] = cur
        ev_t[out] = s
        ev_k[out] = 0
        ev_r[out] = rid[i]
        out += 1
        st_end[top] = e
        st_r[top] = rid[i]
        top += 1
    return ev_loc[:out], ev_t[:out], ev_k[:out], ev_r[:out]


def nest_intervals(loc: np.ndarray, start: np.ndarray, end: np.ndarray, rid: np.ndarray) -> tuple[np.ndarray, ...]:
    """Enter/leave events from intervals sorted by (location, start, -end), properly nested per location."""
    if len(loc) == 0:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return _nest(
        np.ascontiguousarray(loc, np.int64),
        np.ascontiguousarray(start, np.float64),
        np.ascontiguousarray(end, np.float64),
        np.ascontiguousarray(rid, np.int64),
    )
