"""Building the replay plan (:class:`perflow.trace.replay.Plan`): points in order, pieces per segment, slots.

:func:`plan_part` turns the dependencies of some locations
(:mod:`perflow.trace.replaydeps`) and their flat timelines into their
points in replay order (time; issuers before waiters at equal times), each
point's segment, and the wait-free pieces of every segment; it needs
nothing but those locations' data, so each partition of a trace makes its
own. :func:`combine_parts` merges the parts and gives every channel a
**slot**: a channel is needed from its first point to its last, so slots are
handed on (few are live at any time) and the replay's state fits in cache.
:func:`build_plan` is the one-part run for a whole trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..pag.instances import Trace
from . import replaykernels as K
from .flat import FlatTimeline, Locations, flat_timeline, locations, njit
from .replay import Plan
from .replaydeps import Dependencies, dependencies
from .syncpoints import by_location_time

__all__ = ["PlanPart", "plan_part", "combine_parts", "build_plan"]


@dataclass
class PlanPart:
    """:func:`plan_part` of some locations: their points in replay order, their pieces, their own channels."""

    process: np.ndarray
    thread: np.ndarray
    ptime: np.ndarray
    pkind: np.ndarray
    ploc: np.ndarray
    ppos: np.ndarray
    pch: np.ndarray
    plag: np.ndarray
    pseg: np.ndarray
    soff: np.ndarray
    xs: np.ndarray
    xd: np.ndarray
    xv: np.ndarray
    lseg: np.ndarray
    lnseg: np.ndarray
    lstart: np.ndarray
    lend: np.ndarray
    pre_wait: np.ndarray
    n_channels: int
    n_local: int
    counts: dict[str, int]


@njit
def _gather_points(o, itime, iloc, ich, wb, wloc, wch, wlag, newid, wait):  # type: ignore[no-untyped-def]
    """The points in replay order ``o`` (indices into the issues then the waits) gathered from the
    dependencies' arrays in one pass: time, kind, channel, lag, location (renumbered by ``newid`` when it
    has entries)."""
    P = o.shape[0]
    ni = itime.shape[0]
    time = np.empty(P, np.float64)
    kind = np.zeros(P, np.int8)
    ch = np.empty(P, np.int64)
    lag = np.zeros(P, np.float64)
    loc = np.empty(P, np.int64)
    renum = newid.shape[0] > 0
    for i in range(P):
        j = o[i]
        if j < ni:
            time[i] = itime[j]
            ch[i] = ich[j]
            q = iloc[j]
        else:
            j -= ni
            time[i] = wb[j]
            kind[i] = wait
            ch[i] = wch[j]
            lag[i] = wlag[j]
            q = wloc[j]
        loc[i] = newid[q] if renum else q
    return time, kind, ch, lag, loc


@njit
def _positions(loc, n):  # type: ignore[no-untyped-def]
    """Rank of each point among the earlier points of its location, and the points per location."""
    pos = np.empty(loc.shape[0], np.int64)
    cnt = np.zeros(n, np.int64)
    for i in range(loc.shape[0]):
        pos[i] = cnt[loc[i]]
        cnt[loc[i]] += 1
    return pos, cnt


@njit
def _layout(loc, time, n):  # type: ignore[no-untyped-def]
    """:func:`_positions`, the CSR offsets of the counts, each point's segment (segment ``j`` of a location
    ends at its point ``j``) and each location's point times in order."""
    pos, cnt = _positions(loc, n)
    poff = np.zeros(n + 1, np.int64)
    for q in range(n):
        poff[q + 1] = poff[q] + cnt[q]
    pseg = np.empty(loc.shape[0], np.int64)
    ptl = np.empty(loc.shape[0], np.float64)
    for i in range(loc.shape[0]):
        q = loc[i]
        pseg[i] = poff[q] + q + pos[i]
        ptl[poff[q] + pos[i]] = time[i]
    return pos, cnt, poff, pseg, ptl


@njit
def _slots(pch, n_ch):  # type: ignore[no-untyped-def]
    """A slot per point's channel, reused once the channel's last point is past; the first point of each
    channel flagged; the number of slots."""
    P = pch.shape[0]
    last = np.full(n_ch, -1, np.int64)
    for i in range(P):
        last[pch[i]] = i
    slot_of = np.full(n_ch, -1, np.int64)
    free = np.empty(P + 1, np.int64)
    nfree = 0
    nslots = 0
    pslot = np.empty(P, np.int64)
    first = np.zeros(P, np.bool_)
    for i in range(P):
        c = pch[i]
        s = slot_of[c]
        if s < 0:
            if nfree > 0:
                nfree -= 1
                s = free[nfree]
            else:
                s = nslots
                nslots += 1
            slot_of[c] = s
            first[i] = True
        pslot[i] = s
        if last[c] == i:
            free[nfree] = s
            nfree += 1
    return pslot, first, nslots


def plan_part(deps: Dependencies, locs: Locations, flat: FlatTimeline, own: np.ndarray | None = None) -> PlanPart:
    """The plan of some locations (``own``: their ids in ``locs``; default all) from their dependencies."""
    L = len(locs)
    own = np.arange(L) if own is None else np.asarray(own, dtype=np.int64)
    n = len(own)
    mine = np.zeros(L, dtype=bool)
    mine[own] = True
    iloc, itime, ich, wloc, wa, wb, wch, wlag = deps.arrays()
    if n == L:
        newid = None
        time = np.concatenate([itime, wb])
    else:
        newid = np.full(L + 1, -1, dtype=np.int64)
        newid[own] = np.arange(n)
        keep = np.flatnonzero(newid[np.concatenate([iloc, wloc])] >= 0)
        time = np.concatenate([itime, wb])[keep]
    o = np.argsort(time, kind="stable")  # issues come first: they stay first at equal times
    if newid is not None:
        o = keep[o]
    time, kind, ch, lag, loc = _gather_points(
        o, itime, iloc, ich, wb, wloc, wch, wlag, np.zeros(0, np.int64) if newid is None else newid, K.WAIT
    )
    pos, cnt, poff, pseg, ptl = _layout(loc, time, n)
    lseg = (poff[:-1] + np.arange(n)).astype(np.int64)  # segment j of a location ends at its point j
    # the waiting periods, merged per location
    w_l = wloc if newid is None else newid[wloc]
    wsel = (w_l >= 0) & (wb > wa)
    w_l, w_a, w_b = w_l[wsel], wa[wsel], wb[wsel]
    wo = by_location_time(w_l, w_a, n)
    ws, we, woff = K.merge_waits(w_l[wo], w_a[wo], w_b[wo], n)
    fo = flat.offsets
    sizes = (fo[own + 1] - fo[own]).astype(np.int64)
    if n == L:
        ftime, fvert, foff = flat.time, flat.vertex, fo.astype(np.int64)
    else:
        idx = np.concatenate([np.arange(fo[q], fo[q + 1]) for q in own]) if n else np.zeros(0, np.int64)
        ftime, fvert = flat.time[idx], flat.vertex[idx]
        foff = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    # the pieces go into arrays of the most they can be, shrunk in place after (no copy of the pieces)
    room = K.piece_room(len(ftime), len(ptl), len(ws))
    xs, xd, xv = np.empty(room), np.empty(room), np.empty(room, np.int64)
    soff, npieces = K.cut_pieces(ftime, fvert.astype(np.int64, copy=False), foff, ptl, poff, ws, we, woff, xs, xd, xv)
    for a in (xs, xd, xv):
        a.resize(int(npieces), refcheck=False)
    has = sizes > 0
    last = max(len(ftime) - 1, 0)
    lstart = np.where(has, ftime[np.minimum(foff[:-1], last)], 0.0) if len(ftime) else np.zeros(n)
    lend = np.where(has, ftime[np.clip(foff[1:] - 1, 0, last)], 0.0) if len(ftime) else np.zeros(n)
    pre_wait = np.zeros(n, dtype=bool)
    pre_wait[w_l[w_a <= lstart[w_l]]] = True  # waiting from before the first event: a forked thread
    if deps.min_channels:
        mins = np.unique(np.concatenate(deps.min_channels))
        kind[np.isin(ch, mins) & ((kind & K.WAIT) == 0)] |= K.MIN
    return PlanPart(
        locs.process[own], locs.thread[own], time, kind, loc, pos, ch, lag, pseg, soff, xs, xd, xv, lseg,
        (cnt + 1).astype(np.int64), lstart, lend, pre_wait, deps.n_channels, deps.n_local, deps.counts(mine),
    )  # fmt: skip


def combine_parts(parts: list[PlanPart]) -> Plan:
    """The plan of the whole trace from the plans of its parts (disjoint locations, one channel numbering)."""
    N = parts[0].n_channels
    counts: dict[str, int] = {}
    for p in parts:
        for k, v in p.counts.items():
            counts[k] = counts.get(k, 0) + v
    proc = np.concatenate([p.process for p in parts]).astype(np.int64)
    thr = np.concatenate([p.thread for p in parts]).astype(np.int64)
    gorder = np.lexsort((thr, proc))  # global location ids: sorted by (process, thread)
    gid = np.empty(len(gorder), np.int64)
    gid[gorder] = np.arange(len(gorder))
    if len(parts) == 1:
        p = parts[0]
        ptime, pkind, ploc, ppos, pch, plag, pseg = p.ptime, p.pkind, gid[p.ploc], p.ppos, p.pch, p.plag, p.pseg
        soff, xs, xd, xv, n_local = p.soff, p.xs, p.xd, p.xv, p.n_local
    else:
        loc0 = np.cumsum([0] + [len(p.process) for p in parts])
        seg0 = np.cumsum([0] + [len(p.soff) - 1 for p in parts])
        piece0 = np.cumsum([0] + [len(p.xs) for p in parts])
        ch0 = np.cumsum([0] + [p.n_local for p in parts])
        cat = lambda f: np.concatenate([f(i, p) for i, p in enumerate(parts)])  # noqa: E731
        ptime, pkind, ppos, plag = cat(lambda i, p: p.ptime), cat(lambda i, p: p.pkind), cat(lambda i, p: p.ppos), cat(lambda i, p: p.plag)  # fmt: skip
        ploc = cat(lambda i, p: gid[loc0[i] + p.ploc])
        pch = cat(lambda i, p: np.where(p.pch >= N, p.pch + ch0[i], p.pch))
        pseg = cat(lambda i, p: p.pseg + seg0[i])
        soff = np.r_[cat(lambda i, p: p.soff[:-1] + piece0[i]), piece0[-1]].astype(np.int64)
        xs, xd, xv = cat(lambda i, p: p.xs), cat(lambda i, p: p.xd), cat(lambda i, p: p.xv)
        o = np.lexsort((pkind & K.WAIT, ptime))  # issuers before waiters at equal times; stable per location
        ptime, pkind, ploc, ppos, pch, plag, pseg = (a[o] for a in (ptime, pkind, ploc, ppos, pch, plag, pseg))
        n_local = int(ch0[-1])
    lseg = np.concatenate([p.lseg + (0 if len(parts) == 1 else seg0[i]) for i, p in enumerate(parts)])[gorder]
    pslot, first, n_slots = _slots(pch.astype(np.int64, copy=False), N + n_local)
    pkind = (pkind | np.where(first, K.FIRST, 0)).astype(np.int8)
    npts = np.bincount(ploc, minlength=len(gorder)) if len(ploc) else np.zeros(len(gorder), np.int64)
    lpt0 = (np.cumsum(npts) - npts).astype(np.int64)
    lpts = np.empty(len(ploc), np.int64)
    lpts[lpt0[ploc] + ppos] = np.arange(len(ploc))
    cat2 = lambda f: np.concatenate([f(p) for p in parts])[gorder]  # noqa: E731
    return Plan(
        proc[gorder], thr[gorder], ptime, pkind, ploc.astype(np.int64), pslot, plag, pseg.astype(np.int64),
        int(n_slots), soff, xs, xd, xv.astype(np.int64, copy=False), lseg, cat2(lambda p: p.lnseg), lpts, lpt0,
        cat2(lambda p: p.lstart), cat2(lambda p: p.lend), cat2(lambda p: p.pre_wait), counts,
    )  # fmt: skip


def build_plan(
    trace: Trace,
    *,
    names: np.ndarray | None = None,
    late_receiver: str = "auto",
    early_reduce: str = "latest",
    eager_limit: int | None = None,
    roles: np.ndarray | None = None,
    regions: np.ndarray | None = None,
    locs: Locations | None = None,
    flat: FlatTimeline | None = None,
) -> Plan:
    """The replay plan of a whole trace (the one-part run of :func:`plan_part` and :func:`combine_parts`).

    Settings as in :func:`perflow.trace.replaydeps.dependencies`.
    """
    locs = locs if locs is not None else locations(trace)
    flat = flat if flat is not None else flat_timeline(trace, locs)
    kw: dict[str, Any] = {} if eager_limit is None else {"eager_limit": int(eager_limit)}
    deps = dependencies(
        trace, locs, names=names, late_receiver=late_receiver, early_reduce=early_reduce, roles=roles,
        regions=regions, **kw,
    )  # fmt: skip
    return combine_parts([plan_part(deps, locs, flat)])
