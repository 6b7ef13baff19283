"""Compiled kernels of the replay (:mod:`perflow.trace.replay`): pieces, the replay pass, its critical path.

* :func:`cut_pieces` cuts each location's flat timeline at its points and
  drops its waiting periods: the **pieces** (start, length, vertex) of the
  work between consecutive points, one run of pieces per **segment**
  (segment ``j`` of a location ends at its point ``j``; one more segment
  runs to its last event).
* :func:`run` replays the points in order for one set of rates: a point's
  replayed time is its location's time plus the rated work of the segment
  before it, raised to its channel's value (plus lag) at a wait point.
* :func:`walk` and :func:`charge` follow the binding waits back from the end
  of the location that finishes last (the critical path of the replay) and
  charge its work to vertices and locations.

Rates: a piece of vertex ``v`` on location ``l`` counts ``vfac[v] *
F[vmap[v], l]`` (``F`` only where ``vmap[v] >= 0``) per second; outside every
region ``ofac``. Only the part of a piece inside the window ``[t0, t1]``
counts.
"""

from __future__ import annotations

import numpy as np

from . import replayblocks as B
from .flat import njit

__all__ = [
    "merge_waits",
    "cut_pieces",
    "piece_room",
    "run",
    "run_many",
    "walk",
    "charge",
    "vertex_time",
    "WAIT",
    "MIN",
    "FIRST",
]

#: bits of a point's kind: a wait point (else an issue point); its channel keeps the earliest issue (else the
#: latest); the first point of its channel (the slot starts empty)
WAIT, MIN, FIRST = 1, 2, 4


@njit
def merge_waits(loc, a, b, nloc):  # type: ignore[no-untyped-def]
    """Union of the waiting periods ``[a, b]`` per location (input sorted by (loc, a)); CSR offsets per location."""
    n = loc.shape[0]
    ws = np.empty(n, np.float64)
    we = np.empty(n, np.float64)
    wl = np.empty(n, np.int64)
    k = 0
    for i in range(n):
        if not b[i] > a[i]:
            continue
        if k > 0 and wl[k - 1] == loc[i] and a[i] <= we[k - 1]:
            if b[i] > we[k - 1]:
                we[k - 1] = b[i]
        else:
            ws[k] = a[i]
            we[k] = b[i]
            wl[k] = loc[i]
            k += 1
    off = np.zeros(nloc + 1, np.int64)
    for i in range(k):
        off[wl[i] + 1] += 1
    for q in range(nloc):
        off[q + 1] += off[q]
    return ws[:k], we[:k], off


@njit
def cut_pieces(ftime, fvert, foff, ptime, poff, ws, we, woff, xs, xd, xv):  # type: ignore[no-untyped-def]
    """Pieces of work per segment (see the module docstring).

    ``ftime``/``fvert``/``foff``: the flat timeline; ``ptime``/``poff``: each
    location's point times (sorted, CSR); ``ws``/``we``/``woff``: its merged
    waiting periods; ``xs``, ``xd``, ``xv``: room for the pieces (start,
    length, vertex; -1 outside every region), :func:`piece_room` long.
    Returns ``soff`` (pieces of segment ``s`` are ``soff[s]:soff[s + 1]``; a
    location's segments follow its points, one more at the end) and the
    number of pieces written.
    """
    L = foff.shape[0] - 1
    nseg = poff[L] + L
    soff = np.zeros(nseg + 1, np.int64)
    n = 0
    seg = 0
    for loc in range(L):
        lo = foff[loc]
        hi = foff[loc + 1]
        j = poff[loc]
        pend = poff[loc + 1]
        w = woff[loc]
        wend = woff[loc + 1]
        soff[seg] = n
        if hi - lo >= 2:
            x = ftime[lo]
            k = lo
            while True:
                while j < pend and ptime[j] <= x:  # segments ending at or before x
                    seg += 1
                    soff[seg] = n
                    j += 1
                while k + 1 < hi and ftime[k + 1] <= x:
                    k += 1
                if k + 1 >= hi:
                    break
                end = ftime[k + 1]
                if j < pend and ptime[j] < end:
                    end = ptime[j]
                while w < wend and we[w] <= x:
                    w += 1
                inside = w < wend and ws[w] <= x
                if inside:
                    if we[w] < end:
                        end = we[w]
                else:
                    if w < wend and ws[w] < end:
                        end = ws[w]
                    v = fvert[k]
                    if n > soff[seg] and xv[n - 1] == v and xs[n - 1] + xd[n - 1] == x:
                        xd[n - 1] = end - xs[n - 1]
                    else:
                        xs[n] = x
                        xd[n] = end - x
                        xv[n] = v
                        n += 1
                x = end
        while j < pend:  # points after the last event (or on a location without events)
            seg += 1
            soff[seg] = n
            j += 1
        seg += 1
        soff[seg] = n
    return soff, n


def piece_room(n_flat: int, n_points: int, n_waits: int) -> int:
    """The most pieces :func:`cut_pieces` can write (every event, point and waiting period's ends cut)."""
    return n_flat + n_points + 2 * n_waits + 1


@njit
def _seg_work(s, loc, soff, xs, xd, xv, vfac, vmap, F, ofac, useful, t0, t1, uacc):  # type: ignore[no-untyped-def]
    acc = 0.0
    for p in range(soff[s], soff[s + 1]):
        d = B.clipped(xs, xd, p, t0, t1)
        if d <= 0.0:
            continue
        v = xv[p]
        if v < 0:
            acc += d * ofac
            continue
        r = vfac[v]
        m = vmap[v]
        if m >= 0:
            r *= F[m, loc]
        d = d * r
        acc += d
        if useful[v]:
            uacc[loc] += d
    return acc


@njit
def _first_after(ptime, t1):  # type: ignore[no-untyped-def]
    """The first point later than ``t1`` (the replay stops there), or the number of points."""
    for i in range(ptime.shape[0]):
        if ptime[i] > t1:
            return i
    return ptime.shape[0]


@njit
def run(  # type: ignore[no-untyped-def]
    ptime, pkind, ploc, pslot, plag, pseg, n_slots, soff, xs, xd, xv, lseg, lnseg, lpts, lpt0, pre,
    vfac, vmap, F, ofac, useful, t0, t1, want_bind, block,
):  # fmt: skip
    """Replay the points for one set of rates (see the module docstring).

    ``lseg``/``lnseg``: first segment and number of segments of each
    location; ``lpts``/``lpt0``: its points in order; ``pre``: each
    location's time before its first event inside the window, counted at
    ``ofac`` (0 where it waits). Returns the replayed end and useful work of
    each location (s after ``t0``), the dependencies carried, the binding
    issue point of each wait point (-1 when its own work was later; only
    with ``want_bind``) and the last point processed on each location (-1
    none). The work of the points' segments comes ``block`` points at a time
    from :func:`perflow.trace.replayblocks.block_works` (the same sums
    whatever the block).
    """
    L = lseg.shape[0]
    ideal = np.zeros(L)
    uacc = np.zeros(L)
    nxt = lseg.copy()
    lastp = np.full(L, -1, np.int64)
    for q in range(L):
        ideal[q] = pre[q] * ofac
    cval = np.zeros(max(n_slots, 1))
    csrc = np.full(max(n_slots, 1), -1, np.int64)
    P = _first_after(ptime, t1)
    bind = np.full(ptime.shape[0] if want_bind else 0, -1, np.int64)
    carried = 0
    vf1 = np.empty((1, vfac.shape[0]))
    vm1 = np.empty((1, vmap.shape[0]), np.int64)
    F1 = np.empty((1, F.shape[0], F.shape[1]))
    vf1[0] = vfac
    vm1[0] = vmap
    F1[0] = F
    rl = B.rate_table(vf1, vm1, F1, np.full(1, ofac))
    cur = np.zeros(L, np.int64)
    buf = np.empty((min(block, max(P, 1)), 1))
    for i0 in range(0, P, block):
        i1 = min(i0 + block, P)
        B.block_works(i0, i1, lseg, lpts, lpt0, lnseg, cur, soff, xs, xd, xv, rl, useful, uacc, t0, t1, buf)
        for i in range(i0, i1):
            loc = ploc[i]
            s1 = pseg[i]
            if s1 != nxt[loc]:
                raise ValueError("a replay plan whose point does not end the next segment of its location")
            nxt[loc] = s1 + 1
            acc = 0.0
            acc += buf[i - i0, 0]
            v = ideal[loc] + acc
            c = pslot[i]
            k = pkind[i]
            if k & FIRST:
                csrc[c] = -1
            if not (k & WAIT):
                if csrc[c] < 0 or (v < cval[c] if k & MIN else v > cval[c]):
                    cval[c] = v
                    csrc[c] = i
            elif csrc[c] >= 0:
                carried += 1
                src = cval[c] + plag[i]
                if src > v:
                    v = src
                    if want_bind:
                        bind[i] = csrc[c]
            ideal[loc] = v
            lastp[loc] = i
    for q in range(L):
        acc = 0.0
        for s in range(nxt[q], lseg[q] + lnseg[q]):
            acc += _seg_work(s, q, soff, xs, xd, xv, vfac, vmap, F, ofac, useful, t0, t1, uacc)
        ideal[q] += acc
    return ideal, uacc, carried, bind, lastp


@njit
def _seg_many(s, loc, soff, xs, xd, xv, vfac, vmap, F, ofac, t0, t1, acc):  # type: ignore[no-untyped-def]
    S = acc.shape[0]
    for j in range(S):
        acc[j] = 0.0
    for p in range(soff[s], soff[s + 1]):
        d = B.clipped(xs, xd, p, t0, t1)
        if d <= 0.0:
            continue
        v = xv[p]
        if v < 0:
            for j in range(S):
                acc[j] += d * ofac[j]
            continue
        for j in range(S):
            r = vfac[j, v]
            m = vmap[j, v]
            if m >= 0:
                r *= F[j, m, loc]
            acc[j] += d * r


@njit
def run_many(  # type: ignore[no-untyped-def]
    ptime, pkind, ploc, pslot, plag, pseg, n_slots, soff, xs, xd, xv, lseg, lnseg, lpts, lpt0, pre,
    vfac, vmap, F, ofac, t0, t1, block,
):  # fmt: skip
    """:func:`run` for ``S`` sets of rates at once (``vfac``/``vmap``: ``(S, n_vertices)``, ``F``:
    ``(S, R, L)``, ``ofac``: ``(S,)``): each location's replayed end per set, ``(S, L)``."""
    L = lseg.shape[0]
    S = ofac.shape[0]
    ideal = np.zeros((S, L))
    nxt = lseg.copy()
    for q in range(L):
        for j in range(S):
            ideal[j, q] = pre[q] * ofac[j]
    ns = max(n_slots, 1)
    cval = np.zeros((ns, S))
    cset = np.zeros(ns, np.bool_)
    acc = np.zeros(S)
    P = _first_after(ptime, t1)
    rl = B.rate_table(vfac, vmap, F, ofac)
    cur = np.zeros(L, np.int64)
    buf = np.empty((min(block, max(P, 1)), S))
    none = np.zeros(0, np.bool_)
    nou = np.zeros(L)
    for i0 in range(0, P, block):
        i1 = min(i0 + block, P)
        B.block_works(i0, i1, lseg, lpts, lpt0, lnseg, cur, soff, xs, xd, xv, rl, none, nou, t0, t1, buf)
        for i in range(i0, i1):
            loc = ploc[i]
            s1 = pseg[i]
            if s1 != nxt[loc]:
                raise ValueError("a replay plan whose point does not end the next segment of its location")
            nxt[loc] = s1 + 1
            for j in range(S):
                ideal[j, loc] += buf[i - i0, j]
            c = pslot[i]
            k = pkind[i]
            if k & FIRST:
                cset[c] = False
            if not (k & WAIT):
                if not cset[c]:
                    for j in range(S):
                        cval[c, j] = ideal[j, loc]
                    cset[c] = True
                elif k & MIN:
                    for j in range(S):
                        if ideal[j, loc] < cval[c, j]:
                            cval[c, j] = ideal[j, loc]
                else:
                    for j in range(S):
                        if ideal[j, loc] > cval[c, j]:
                            cval[c, j] = ideal[j, loc]
            elif cset[c]:
                lag = plag[i]
                for j in range(S):
                    src = cval[c, j] + lag
                    if src > ideal[j, loc]:
                        ideal[j, loc] = src
    for q in range(L):
        for s in range(nxt[q], lseg[q] + lnseg[q]):
            _seg_many(s, q, soff, xs, xd, xv, vfac, vmap, F, ofac, t0, t1, acc)
            for j in range(S):
                ideal[j, q] += acc[j]
    return ideal


@njit
def walk(ploc, pkind, pseg, bind, lseg, lnseg, lpts, lpt0, lastp, start_loc):  # type: ignore[no-untyped-def]
    """The critical path of a replay, backwards from the end of ``start_loc``.

    ``lpts``/``lpt0``: the points of each location in order (the point ending
    segment ``lseg[l] + j`` is ``lpts[lpt0[l] + j]``). Returns per stretch of
    the path on one location (last first): the location, its first and last
    segment, and the wait point where the path came to it from another
    location (-1 at the path's start).
    """
    cap = 64
    hl = np.empty(cap, np.int64)
    ha = np.empty(cap, np.int64)
    hb = np.empty(cap, np.int64)
    hp = np.empty(cap, np.int64)
    n = 0
    loc = start_loc
    last_seg = lseg[loc] + lnseg[loc] - 1
    i = lastp[loc]
    while True:
        found = -1
        j = i
        while j >= 0:
            if (pkind[j] & WAIT) != 0 and bind[j] >= 0:
                found = j
                break
            pos = pseg[j] - lseg[loc]
            j = lpts[lpt0[loc] + pos - 1] if pos > 0 else -1
        if n == cap:
            cap *= 2
            hl2 = np.empty(cap, np.int64)
            ha2 = np.empty(cap, np.int64)
            hb2 = np.empty(cap, np.int64)
            hp2 = np.empty(cap, np.int64)
            hl2[:n] = hl[:n]
            ha2[:n] = ha[:n]
            hb2[:n] = hb[:n]
            hp2[:n] = hp[:n]
            hl, ha, hb, hp = hl2, ha2, hb2, hp2
        hl[n] = loc
        ha[n] = pseg[found] + 1 if found >= 0 else lseg[loc]
        hb[n] = last_seg
        hp[n] = found
        n += 1
        if found < 0:
            break
        src = bind[found]
        loc = ploc[src]
        last_seg = pseg[src]
        pos = pseg[src] - lseg[loc]
        i = lpts[lpt0[loc] + pos - 1] if pos > 0 else -1
    return hl[:n], ha[:n], hb[:n], hp[:n]


@njit
def charge(hl, ha, hb, soff, xs, xd, xv, vfac, vmap, F, ofac, t0, t1, nvert, nloc):  # type: ignore[no-untyped-def]
    """Rated work of the stretches ``(hl, ha..hb)`` per vertex (index ``nvert``: outside every region), per
    location and per stretch."""
    cpv = np.zeros(nvert + 1)
    cpl = np.zeros(nloc)
    cph = np.zeros(hl.shape[0])
    for h in range(hl.shape[0]):
        loc = hl[h]
        for s in range(ha[h], hb[h] + 1):
            for p in range(soff[s], soff[s + 1]):
                d = B.clipped(xs, xd, p, t0, t1)
                if d <= 0.0:
                    continue
                v = xv[p]
                if v < 0:
                    d = d * ofac
                    cpv[nvert] += d
                else:
                    r = vfac[v]
                    m = vmap[v]
                    if m >= 0:
                        r *= F[m, loc]
                    d = d * r
                    cpv[v] += d
                cpl[loc] += d
                cph[h] += d
    return cpv, cpl, cph


@njit
def vertex_time(soff, xs, xd, xv, lseg, lnseg, vmap, R, t0, t1):  # type: ignore[no-untyped-def]
    """Work (waiting excluded) of each vertex group ``vmap[v]`` on each location inside ``[t0, t1]``: ``(R, L)``."""
    L = lseg.shape[0]
    out = np.zeros((R, L))
    for loc in range(L):
        for s in range(lseg[loc], lseg[loc] + lnseg[loc]):
            for p in range(soff[s], soff[s + 1]):
                v = xv[p]
                if v < 0:
                    continue
                m = vmap[v]
                if m < 0:
                    continue
                d = B.clipped(xs, xd, p, t0, t1)
                if d > 0.0:
                    out[m, loc] += d
    return out
