"""Locations and the flat (exclusive) timeline of a trace, for the trace analyses.

A *location* is one (process, thread) stream. :func:`locations` numbers the
locations of a :class:`~perflow.pag.instances.Trace` and groups its intervals
by location. :func:`flat_timeline` rebuilds, per location, the Enter/Leave
event stream from the interval table (intervals of a location are numbered in
Enter order, which is a pre-order of the instance tree, so the stream is
recovered with a stack in one compiled pass) and records the innermost open
interval after every event. Slot ``k`` of a location, between its events
``k`` and ``k + 1``, is exclusive time of interval ``owner[k]``; that is what
the critical-path and delay analyses charge to call paths.

A PAG computes both once (:mod:`perflow.trace.analyses`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from .._jit import njit
from ..pag.instances import Trace

__all__ = [
    "Locations",
    "FlatTimeline",
    "locations",
    "flat_timeline",
    "subtree_sizes",
    "njit",
    "window_sums",
    "gallop",
    "exclusive_sums",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Locations:
    """The (process, thread) streams of a trace.

    Attributes
    ----------
    process, thread : numpy.ndarray
        Per location, sorted by (process, thread).
    of_interval : numpy.ndarray
        Location id of every interval row.
    order : numpy.ndarray
        Interval rows grouped by location (stable: enter order within one).
    offsets : numpy.ndarray
        Intervals of location ``l`` are ``order[offsets[l]:offsets[l + 1]]``.
    """

    process: np.ndarray
    thread: np.ndarray
    of_interval: np.ndarray
    order: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.process)

    def lookup(self, process: Any, thread: Any) -> np.ndarray:
        """Location ids of (process, thread) pairs; -1 for pairs without intervals."""
        p = np.asarray(process, dtype=np.int64)
        t = np.broadcast_to(np.asarray(thread, dtype=np.int64), p.shape)
        width = int(max(self.thread.max(initial=0), t.max(initial=0))) + 1
        keys = self.process.astype(np.int64) * width + self.thread
        q = p * width + t
        span = (int(self.process.max()) + 1) * width if len(keys) else 0
        if 0 < span <= max(4 * len(q), 1 << 16):  # few keys: a table instead of a search per pair
            table = np.full(span + 1, -1, dtype=np.int64)
            table[keys] = np.arange(len(keys))
            ok = (p >= 0) & (t >= 0) & (t < width) & (q < span)
            return table[np.where(ok, q, span)]
        i = np.minimum(np.searchsorted(keys, q), max(len(keys) - 1, 0))
        hit = (len(keys) > 0) & (keys[i] == q) if len(keys) else np.zeros(p.shape, dtype=bool)
        return np.where(hit, i, -1).astype(np.int64)


def locations(trace: Trace) -> Locations:
    """Number the locations of ``trace`` (a PAG caches it: :data:`perflow.trace.analyses.LOCATIONS`)."""
    iv = trace.intervals
    proc = iv["process"].to_numpy().astype(np.int64)
    thr = iv["thread"].to_numpy().astype(np.int64)
    n = len(proc)
    if n == 0:
        e = np.zeros(0, dtype=np.int64)
        return Locations(e, e, e, e, np.zeros(1, dtype=np.int64))
    width = int(thr.max()) + 1
    key = proc * width + thr
    if np.all(key[1:] >= key[:-1]):
        order = np.arange(n, dtype=np.int64)
        skey = key
    else:
        order = np.argsort(key, kind="stable").astype(np.int64)
        skey = key[order]
    start = np.r_[True, skey[1:] != skey[:-1]]
    firsts = np.flatnonzero(start)
    offsets = np.r_[firsts, n].astype(np.int64)
    loc_sorted = np.cumsum(start) - 1
    of_interval = np.empty(n, dtype=np.int64)
    of_interval[order] = loc_sorted
    ukey = skey[firsts]
    return Locations(ukey // width, ukey % width, of_interval, order, offsets)


@dataclass(frozen=True)
class FlatTimeline:
    """Per-location Enter/Leave streams with the innermost open interval after each event.

    Attributes
    ----------
    time : numpy.ndarray
        Event times, grouped by location, in stream order.
    owner : numpy.ndarray
        Interval open after each event (-1 when none): slot ``k`` (from
        event ``k`` to ``k + 1`` of the same location) is exclusive time of
        ``owner[k]``.
    vertex : numpy.ndarray
        Call path of ``owner`` (-1 when none).
    offsets : numpy.ndarray
        Events of location ``l`` are ``offsets[l]:offsets[l + 1]``.
    """

    time: np.ndarray
    owner: np.ndarray
    vertex: np.ndarray
    offsets: np.ndarray

    def start(self) -> np.ndarray:
        """First event time of each location."""
        o = self.offsets
        ok = o[1:] > o[:-1]
        return np.where(ok, self.time[np.minimum(o[:-1], max(len(self.time) - 1, 0))], 0.0)

    def end(self) -> np.ndarray:
        """Last event time of each location."""
        o = self.offsets
        ok = o[1:] > o[:-1]
        return np.where(ok, self.time[np.maximum(o[1:] - 1, 0)], 0.0)


@njit
def _flatten(order, offsets, parent, enter, leave):  # type: ignore[no-untyped-def]
    n = order.shape[0]
    time = np.empty(2 * n, np.float64)
    owner = np.empty(2 * n, np.int64)
    stack = np.empty(n + 1, np.int64)
    k = 0
    for loc in range(offsets.shape[0] - 1):
        sp = 0
        for q in range(offsets[loc], offsets[loc + 1]):
            i = order[q]
            p = parent[i]
            while sp > 0 and stack[sp - 1] != p:
                j = stack[sp - 1]
                sp -= 1
                time[k] = leave[j]
                owner[k] = stack[sp - 1] if sp > 0 else -1
                k += 1
            time[k] = enter[i]
            owner[k] = i
            stack[sp] = i
            sp += 1
            k += 1
        while sp > 0:
            j = stack[sp - 1]
            sp -= 1
            time[k] = leave[j]
            owner[k] = stack[sp - 1] if sp > 0 else -1
            k += 1
    return time, owner


def flat_timeline(trace: Trace, locs: Locations | None = None) -> FlatTimeline:
    """The flat exclusive timeline of ``trace`` (a PAG caches it: :data:`perflow.trace.analyses.FLAT_TIMELINE`)."""
    locs = locs if locs is not None else locations(trace)
    iv = trace.intervals
    parent = iv["parent"].to_numpy().astype(np.int64, copy=False)  # (read only: no copies)
    time, owner = _flatten(
        locs.order,
        locs.offsets,
        parent,
        iv["enter"].to_numpy().astype(np.float64, copy=False),
        iv["leave"].to_numpy().astype(np.float64, copy=False),
    )
    v = np.empty(len(iv) + 1, np.int64)  # the last slot: the time outside every interval (owner -1)
    v[:-1] = iv["vertex"].to_numpy()
    v[-1] = -1
    vertex = v[owner] if len(owner) and owner.min() >= -1 else np.where(owner >= 0, v[np.maximum(owner, 0)], -1)
    return FlatTimeline(time, owner, vertex, (2 * locs.offsets).astype(np.int64))


@njit
def _bsearch_right(a, lo, hi, x):  # type: ignore[no-untyped-def]
    """First index in a[lo:hi] with a[i] > x (hi when none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit
def gallop(a, lo, hi, x, h, right):  # type: ignore[no-untyped-def]
    """First index in ``a[lo:hi]`` (sorted) with ``a[i] > x`` (``right``) or ``a[i] >= x`` (hi when none),
    searched outwards from the guess ``h``: the index a binary search gives, in a few steps when the guess
    is near (a cursor that moves little between calls) and cache-friendly."""
    if h < lo:
        h = lo
    if h > hi:
        h = hi
    step = 1
    if h < hi and (a[h] <= x if right else a[h] < x):  # the answer lies after h
        i0 = h + 1
        i1 = hi
        while True:
            j = h + step
            if j >= hi:
                break
            if a[j] <= x if right else a[j] < x:
                i0 = j + 1
                step *= 2
            else:
                i1 = j
                break
    else:  # the answer lies at or before h
        i0 = lo
        i1 = h
        while True:
            j = h - step
            if j < lo:
                break
            if a[j] <= x if right else a[j] < x:
                i0 = j + 1
                break
            i1 = j
            step *= 2
    while i0 < i1:
        mid = (i0 + i1) >> 1
        if a[mid] <= x if right else a[mid] < x:
            i0 = mid + 1
        else:
            i1 = mid
    return i0


@njit
def window_sums(time, vertex, offsets, loc, a, b, sign, nvert, out, mark, touched, ntouched, hint):  # type: ignore[no-untyped-def]
    """Add ``sign`` times the exclusive time per vertex of location ``loc`` within ``[a, b]`` to ``out``.

    ``mark`` flags the vertices listed in ``touched[:ntouched]``; new ones are
    appended and the new count is returned. Time outside every region is
    charged to index ``nvert`` (one past the last vertex). ``hint[loc]``: where
    the search for ``a`` starts (updated: a cursor per location).
    """
    lo = offsets[loc]
    hi = offsets[loc + 1]
    if hi - lo < 2 or b <= a:
        return ntouched
    k = gallop(time, lo, hi, a, hint[loc], True)
    hint[loc] = k
    k -= 1
    if k < lo:
        k = lo
    while k < hi - 1 and time[k] < b:
        s = time[k] if time[k] > a else a
        e = time[k + 1] if time[k + 1] < b else b
        if e > s:
            v = vertex[k]
            if v < 0:
                v = nvert
            if not mark[v]:
                mark[v] = True
                touched[ntouched] = v
                ntouched += 1
            out[v] += sign * (e - s)
        k += 1
    return ntouched


@njit
def exclusive_sums(time, vertex, offsets, nvert):  # type: ignore[no-untyped-def]
    """Exclusive time per vertex summed over the locations (index ``nvert``: outside every region), in
    event order: each slot between consecutive events of one location counts ``max(0, t[k+1] - t[k])``."""
    out = np.zeros(nvert + 1)
    for loc in range(offsets.shape[0] - 1):
        for k in range(offsets[loc], offsets[loc + 1] - 1):
            d = time[k + 1] - time[k]
            if d < 0.0:
                d = 0.0
            v = vertex[k]
            out[v if v >= 0 else nvert] += d
    return out


@njit
def _sizes(order, parent):  # type: ignore[no-untyped-def]
    size = np.ones(order.shape[0], np.int64)
    for q in range(order.shape[0] - 1, -1, -1):
        i = order[q]
        p = parent[i]
        if p >= 0:
            size[p] += size[i]
    return size


def subtree_sizes(trace: Trace, locs: Locations | None = None) -> np.ndarray:
    """Number of intervals in each interval's subtree, itself included.

    Intervals of a location are a pre-order of its instance tree, so the
    subtree of interval ``i`` is the ``size[i]`` intervals from ``i`` on in
    ``locations(trace).order``.
    """

    locs = locs if locs is not None else locations(trace)
    return _sizes(locs.order, trace.intervals["parent"].to_numpy().astype(np.int64))
