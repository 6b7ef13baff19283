"""Thread dependencies of a replay: OpenMP barriers, lock acquisitions, the fork and join of parallel regions.

Threads of one process share its partition, so these channels are the
part's own (:class:`~perflow.trace.replaydeps.Dependencies`). Barrier
instances and teams are those of :mod:`perflow.trace.threadwaits`: a team
instance is the set of overlapping instances of one parallel region on the
threads of a process; its **master** is the instance on the lowest thread
(the thread that forks). A worker's time outside every region before its
instance of a team is idle: it waits for the fork (the master's enter), with
the recorded start-up delay as lag; the master's leave waits for every
worker's leave (the join).
"""

from __future__ import annotations

import numpy as np

from ..pag.instances import Trace
from .flat import Locations
from .threadwaits import barrier_instances, parallel_teams

__all__ = ["thread_dependencies"]


def _new_channels(d, n: int) -> int:  # type: ignore[no-untyped-def]
    """First of ``n`` fresh part-local channels."""
    first = d.n_channels + d.n_local
    d.n_local += int(n)
    return first


def thread_dependencies(
    d,  # type: ignore[no-untyped-def]
    trace: Trace,
    locs: Locations,
    roles: np.ndarray | None,
    regions: np.ndarray | None,
    interval_ids: np.ndarray | None,
) -> None:
    """Add the barrier, lock, fork and join dependencies of ``trace`` to ``d``."""
    iv = trace.intervals
    if len(trace.locks):
        _locks(d, trace, locs, interval_ids)
    if roles is None or regions is None or not len(iv):
        return
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    loc = locs.of_interval
    B, inst = barrier_instances(iv, roles, regions, interval_ids)
    if len(B):
        G = int(inst.max()) + 1
        first = _new_channels(d, G)
        latest = np.full(G, -np.inf)
        np.maximum.at(latest, inst, enter[B])
        src = latest[inst]
        ok = src <= leave[B]
        d.skip("thread barriers", loc[B[~ok]])
        d.issue(loc[B], enter[B], first + inst)
        k = np.flatnonzero(ok)
        d.wait("thread barriers", loc[B[k]], enter[B[k]], np.maximum(enter[B[k]], src[k]), first + inst[k])
    vrole = np.asarray(roles, dtype=object)
    if not (vrole == "parallel").any():  # no parallel region: no fork or join
        return
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    ok_v = (vtx >= 0) & (vtx < len(vrole))
    P = np.flatnonzero(ok_v & (vrole == "parallel")[np.where(ok_v, vtx, 0)])
    if len(P):
        _fork_join(d, trace, locs, P, parallel_teams(iv, vrole, regions, interval_ids, P)[1][P], enter, leave, loc)


def _fork_join(d, trace: Trace, locs: Locations, P: np.ndarray, team: np.ndarray, enter: np.ndarray,  # type: ignore[no-untyped-def]
               leave: np.ndarray, loc: np.ndarray) -> None:  # fmt: skip
    iv = trace.intervals
    thr = iv["thread"].to_numpy().astype(np.int64)
    T = int(team.max()) + 1
    order = np.lexsort((enter[P], thr[P], team))
    p, t = P[order], team[order]
    is_master = np.r_[True, t[1:] != t[:-1]]
    master = p[np.maximum.accumulate(np.where(is_master, np.arange(len(p)), 0))]
    w = ~is_master
    if not w.any():
        return
    fork, join = _new_channels(d, T), _new_channels(d, T)
    pw, tw, mw = p[w], t[w], master[w]
    # the worker's idle time before its instance: back to its previous event when no region is open there
    a = _idle_since(iv, locs, pw)
    c = enter[mw]
    ok = c <= enter[pw]
    d.skip("forks", loc[pw[~ok]])
    d.issue(loc[p[is_master]], enter[p[is_master]], fork + t[is_master])
    k = np.flatnonzero(ok)
    lag = np.maximum(0.0, enter[pw[k]] - np.maximum(c[k], a[k]))
    d.wait("forks", loc[pw[k]], a[k], enter[pw[k]], fork + tw[k], lag)
    last = np.full(T, -np.inf)
    np.maximum.at(last, tw, leave[pw])
    d.issue(loc[pw], leave[pw], join + tw)
    mrows = p[is_master]
    src = last[t[is_master]]
    has = np.isfinite(src)
    okj = has & (src <= leave[mrows])
    d.skip("joins", loc[mrows[has & ~okj]])
    k = np.flatnonzero(okj)
    d.wait("joins", loc[mrows[k]], leave[mrows[k]], leave[mrows[k]], join + t[is_master][k])


def _idle_since(iv, locs: Locations, rows: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Per row: where the idle time before it starts (the previous top-level leave of its location, -inf for
    the first); the row's own enter when it is nested in another region (its location was busy)."""
    parent = iv["parent"].to_numpy()
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    out = enter[rows].astype(np.float64).copy()
    top = parent[rows] < 0
    if not top.any():
        return out
    tops = np.flatnonzero(parent < 0)
    o = np.lexsort((enter[tops], locs.of_interval[tops]))
    tops = tops[o]
    tl = locs.of_interval[tops]
    prev = np.full(len(tops), -np.inf)
    same = tl[1:] == tl[:-1]
    prev[1:][same] = leave[tops[:-1]][same]
    pos = np.full(len(parent), -1, dtype=np.int64)
    pos[tops] = np.arange(len(tops))
    out[top] = prev[pos[rows[top]]]
    return out


def _locks(d, trace: Trace, locs: Locations, interval_ids: np.ndarray | None) -> None:  # type: ignore[no-untyped-def]
    lk = trace.locks.sort_values(["process", "lock", "order"], kind="stable")
    proc = lk["process"].to_numpy().astype(np.int64)
    thr = lk["thread"].to_numpy().astype(np.int64)
    lock = lk["lock"].to_numpy()
    same = np.r_[False, (proc[1:] == proc[:-1]) & (lock[1:] == lock[:-1])]
    prev = np.arange(len(lk)) - 1
    other = same & (thr != thr[np.maximum(prev, 0)])
    rel = lk["release"].to_numpy()
    R = np.where(other, rel[np.maximum(prev, 0)], np.nan)
    g = lk["interval"].to_numpy().astype(np.int64)
    if interval_ids is not None:  # global rows to local ones
        i = np.clip(np.searchsorted(interval_ids, g), 0, max(len(interval_ids) - 1, 0))
        li = np.where((g >= 0) & (len(interval_ids) > 0) & (interval_ids[i] == g), i, -1)
    else:
        li = g
    iv = trace.intervals
    acq = lk["acquire"].to_numpy()
    has = li >= 0
    E = np.where(has, iv["enter"].to_numpy()[np.maximum(li, 0)], acq)
    L = np.where(has, iv["leave"].to_numpy()[np.maximum(li, 0)], acq)
    cand = other & np.isfinite(R)
    ok = cand & (R <= L)
    loc = locs.lookup(proc, thr)
    d.skip("locks", loc[cand & ~ok])
    k = np.flatnonzero(ok)
    if not len(k):
        return
    first = _new_channels(d, len(k))
    ch = first + np.arange(len(k))
    d.issue(loc[prev[k]], R[k], ch)
    d.wait("locks", loc[k], E[k], np.maximum(E[k], R[k]), ch)
