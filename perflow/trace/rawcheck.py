"""The raw trace's ordering and placement checks, each one pass over its columns.

:meth:`perflow.trace.raw.RawTrace.validate`, the OTF2 decoder's order check
and the readers' value checks (:func:`perflow.readers._values.check_trace`)
ask the same questions of every event: is the location column grouped, does
time go backwards on a location, are the other tables sorted by ``(location,
pos)``, does an event lie between the region events its ``pos`` places it
between, and inside an MPI call. Each function here answers them for a whole
table and returns where the first violation is (-1: none); the callers word
the errors. Large tables run one compiled pass (no temporaries: a numpy
expression of these conditions makes one event-long array per operation);
small ones the numpy expression, which needs no compiled kernel.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._jit import compiled_for, njit

__all__ = ["ENTER", "LEAVE", "RegionOrder", "region_order", "key_order", "placement_faults"]

#: the kinds of region events (``region_events["kind"]``; :mod:`perflow.trace.raw` re-exports them)
ENTER = 0
LEAVE = 1


class RegionOrder(NamedTuple):
    """What :func:`region_order` finds in the region events (indices -1: no violation)."""

    loc_lo: int
    loc_hi: int
    #: first event whose location is below the one before it (not grouped by location)
    ungrouped: int
    #: first event earlier than the event before it on the same location
    back: int
    reg_lo: int
    reg_hi: int


def region_order(loc: np.ndarray, time: np.ndarray, region: np.ndarray) -> RegionOrder:
    """Range of locations and regions, the first ungrouped event and the first time going backwards.

    ``time`` going backwards means ``time[i] < time[i-1]`` on the same
    location (a NaN never compares below: it is the value checks' to refuse).
    Empty columns give ranges ``(0, -1)``.
    """
    n = len(loc)
    if not n:
        return RegionOrder(0, -1, -1, -1, 0, -1)
    if compiled_for(n):
        return RegionOrder(*(int(x) for x in _region_order(loc, time, region)))
    d = np.diff(loc)
    down = np.flatnonzero(d < 0)
    back = np.flatnonzero((d == 0) & (np.diff(time) < 0))
    return RegionOrder(
        int(loc.min()),
        int(loc.max()),
        int(down[0]) + 1 if len(down) else -1,
        int(back[0]) + 1 if len(back) else -1,
        int(region.min()),
        int(region.max()),
    )


@njit
def _region_order(loc, time, region):  # noqa: ANN001, ANN202
    lo = hi = loc[0]
    rlo = rhi = region[0]
    down = back = -1
    for i in range(1, len(loc)):
        a, b = loc[i - 1], loc[i]
        if b < lo:
            lo = b
        if b > hi:
            hi = b
        r = region[i]
        if r < rlo:
            rlo = r
        if r > rhi:
            rhi = r
        if b < a:
            if down < 0:
                down = i
        elif b == a and back < 0 and time[i] < time[i - 1]:
            back = i
    return lo, hi, down, back, rlo, rhi


def key_order(loc: np.ndarray, pos: np.ndarray) -> tuple[int, int, int]:
    """First row not sorted by ``(loc, pos)`` (-1 none), and the range of ``pos`` (``(0, -1)`` when empty)."""
    n = len(pos)
    if not n:
        return -1, 0, -1
    if compiled_for(n):
        bad, lo, hi = _key_order(loc, pos)
        return int(bad), int(lo), int(hi)
    dl = np.diff(loc)
    wrong = np.flatnonzero(~((dl > 0) | ((dl == 0) & (np.diff(pos) >= 0))))
    return (int(wrong[0]) + 1 if len(wrong) else -1), int(pos.min()), int(pos.max())


@njit
def _key_order(loc, pos):  # noqa: ANN001, ANN202
    lo = hi = pos[0]
    bad = -1
    for i in range(1, len(pos)):
        p = pos[i]
        if p < lo:
            lo = p
        if p > hi:
            hi = p
        if bad < 0 and (loc[i] < loc[i - 1] or (loc[i] == loc[i - 1] and p < pos[i - 1])):
            bad = i
    return bad, lo, hi


def placement_faults(
    tt: np.ndarray,
    tl: np.ndarray,
    pos: np.ndarray,
    t: np.ndarray,
    loc: np.ndarray,
    kind: np.ndarray,
    region: np.ndarray,
    is_mpi: np.ndarray | None,
) -> tuple[int, int, int]:
    """Where a table's events (time ``tt``, location ``tl``, ``pos``) break their placement among region events.

    ``t``, ``loc``, ``kind``, ``region`` are the region events' columns; every
    ``pos`` lies in ``0..len(t)`` (:meth:`~perflow.trace.raw.RawTrace.validate`).
    An event is *early* when it is before the region event it follows on its
    location (``pos - 1``), *late* when after the one it precedes (``pos``).
    With ``is_mpi`` (per region id, whether it is an MPI call) an event is
    also checked to be right inside an MPI call: the region event before it
    enters one, or the one after it leaves one.

    Returns
    -------
    (int, int, int)
        The first early or late event and the region event it contradicts,
        and the first event outside any MPI call (each -1 when none; the last
        always -1 without ``is_mpi``).
    """
    m, n = len(tt), len(t)
    if not m:
        return -1, -1, -1
    mpi = is_mpi is not None
    flags = is_mpi if is_mpi is not None else np.zeros(0, dtype=bool)
    if compiled_for(m) and n:
        i, j, k = _placement(tt, tl, pos, t, loc, kind, region, flags, mpi)
        return int(i), int(j), int(k)
    pos = np.asarray(pos, dtype=np.int64)
    tl = np.asarray(tl, dtype=np.int64)
    i = j = k = -1
    if n:
        prev = pos - 1
        has_prev = prev >= 0
        has_prev[has_prev] &= loc[prev[has_prev]] == tl[has_prev]
        has_next = pos < n
        has_next[has_next] &= loc[pos[has_next]] == tl[has_next]
        early = has_prev & (tt < t[np.maximum(prev, 0)])
        late = has_next & (tt > t[np.minimum(pos, n - 1)])
        bad = np.flatnonzero(early | late)
        if len(bad):
            i = int(bad[0])
            j = int(prev[i]) if early[i] else int(pos[i])
    if mpi:
        if not n or not len(flags):
            return i, j, 0

        def mpi_at(x: np.ndarray) -> np.ndarray:  # the region events at x (only those: gathered, not all mapped)
            r = region[x].astype(np.int64)
            ok = (r >= 0) & (r < len(flags))
            return ok & flags[np.where(ok, r, 0)]

        prev = np.clip(pos - 1, 0, n - 1)
        nxt = np.clip(pos, 0, n - 1)
        after_enter = (pos >= 1) & (loc[prev] == tl) & (kind[prev] == ENTER) & mpi_at(prev)
        before_leave = (pos < n) & (loc[nxt] == tl) & (kind[nxt] == LEAVE) & mpi_at(nxt)
        out = np.flatnonzero(~(after_enter | before_leave))
        k = int(out[0]) if len(out) else -1
    return i, j, k


@njit
def _placement(tt, tl, pos, t, loc, kind, region, is_mpi, mpi):  # noqa: ANN001, ANN202
    n, nf = len(t), len(is_mpi)
    first, other, outside = -1, -1, -1
    if mpi and nf == 0:
        outside = 0
    for e in range(len(tt)):
        p = pos[e]
        at = tl[e]
        if first < 0:
            if p >= 1 and loc[p - 1] == at and tt[e] < t[p - 1]:
                first, other = e, p - 1
            elif p < n and loc[p] == at and tt[e] > t[p]:
                first, other = e, p
        if mpi and outside < 0:
            inside = False
            if p >= 1 and loc[p - 1] == at and kind[p - 1] == ENTER:
                r = region[p - 1]
                inside = 0 <= r < nf and is_mpi[r]
            if not inside and p < n and loc[p] == at and kind[p] == LEAVE:
                r = region[p]
                inside = 0 <= r < nf and is_mpi[r]
            if not inside:
                outside = e
        if first >= 0 and (outside >= 0 or not mpi):
            break
    return first, other, outside
