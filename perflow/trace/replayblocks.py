"""The work of the replay's segments, computed a block of points at a time in location order.

The replay (:func:`perflow.trace.replaykernels.run` and ``run_many``) visits
its points in time order, which interleaves the locations: reading each
point's pieces there jumps between as many streams of the piece arrays as
there are locations, and the replay waits on memory. Each point ends exactly
one segment, the next of its location (segment ``j`` of a location ends at
its point ``j``), so the rated work of a point's segment needs nothing from
the replay itself: :func:`block_works` computes it for a block of points
location by location (each location's pieces read in order), into a small
buffer the replay then reads in point order. Every sum is the one the replay
made piece by piece, in the same order, so the results are identical.

Rates (see :mod:`perflow.trace.replaykernels`) are given as ``S`` sets:
``vfac``/``vmap`` ``(S, n_vertices)``, ``F`` ``(S, R, L)``, ``ofac`` ``(S,)``.
"""

from __future__ import annotations

import numpy as np

from .flat import njit

__all__ = ["BLOCK", "block_works", "clipped", "rate_table"]

#: points per block: a buffer of ``BLOCK * S`` floats, long enough runs of one location's pieces
BLOCK = 16384


@njit(inline="always")
def clipped(xs, xd, p, t0, t1):  # type: ignore[no-untyped-def]
    """The length of piece ``p`` (start ``xs[p]``, duration ``xd[p]``) inside ``[t0, t1]``; at most 0 when it
    lies outside. The one clipping of every replay kernel (compiled into each caller)."""
    a = xs[p]
    b = a + xd[p]
    if a < t0:
        a = t0
    if b > t1:
        b = t1
    return b - a


@njit
def rate_table(vfac, vmap, F, ofac):  # type: ignore[no-untyped-def]
    """Each set's rate of each vertex on each location, ``(L, n_vertices + 1, S)``; the last vertex row is
    the time outside every region (``ofac``). The products are the replay's own (``vfac * F``)."""
    S, nv = vfac.shape
    L = F.shape[2]
    rl = np.empty((L, nv + 1, S))
    for loc in range(L):
        for v in range(nv):
            for j in range(S):
                r = vfac[j, v]
                m = vmap[j, v]
                if m >= 0:
                    r *= F[j, m, loc]
                rl[loc, v, j] = r
        for j in range(S):
            rl[loc, nv, j] = ofac[j]
    return rl


@njit
def block_works(  # type: ignore[no-untyped-def]
    i0, i1, lseg, lpts, lpt0, lnseg, cur, soff, xs, xd, xv, rl, useful, uacc, t0, t1, buf,
):  # fmt: skip
    """The rated work of the segment each point ``i0..i1-1`` ends, per set, into ``buf[i - i0]``.

    ``cur[l]``: how many of location ``l``'s points are done (advanced here);
    its point ``k`` ends its segment ``lseg[l] + k``. With ``useful`` (per
    vertex; empty: not kept) the useful work of set 0 is added to ``uacc``
    per location, in the order of the location's pieces.
    """
    L = lnseg.shape[0]
    S = rl.shape[2]
    nv = rl.shape[1] - 1
    keep = useful.shape[0] > 0
    for loc in range(L):
        k = cur[loc]
        base = lpt0[loc]
        npts = lnseg[loc] - 1
        r = rl[loc]
        u = uacc[loc]
        while k < npts:
            i = lpts[base + k]
            if i >= i1:
                break
            w = buf[i - i0]
            for j in range(S):
                w[j] = 0.0
            s = lseg[loc] + k
            for p in range(soff[s], soff[s + 1]):
                d = clipped(xs, xd, p, t0, t1)
                if d <= 0.0:
                    continue
                v = xv[p]
                if v < 0:
                    v = nv
                if S == 1:
                    x = d * r[v, 0]
                    w[0] += x
                    if keep and v < nv and useful[v]:
                        u += x
                else:
                    for j in range(S):
                        w[j] += d * r[v, j]
            k += 1
        cur[loc] = k
        uacc[loc] = u
