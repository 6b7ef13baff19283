"""OpenMP thread teams in the build: worker threads below the forking thread's call path, regions from fork to join.

A trace of an OpenMP program (Score-P ``--thread=omp``) records on the thread
that forks a team a ``ThreadFork`` before it enters the parallel region and a
``ThreadJoin`` after it leaves it; every other thread of the team enters its own
copy of the region after its ``ThreadTeamBegin``. Read as they are, the workers'
call trees would start at the parallel region, a tree of their own. As Score-P
and Scalasca do, the build (:func:`team_contexts`, run by
:func:`perflow.trace.stages.scan_part`) instead:

* places each worker's top-level instance (its copy of the parallel region)
  and everything below it under the call path the forking thread was in at the
  fork (``main``, usually), so that ``main/!$omp parallel/...`` is one call
  path on every thread of the team. The ancestors get the worker's inclusive
  time and no visit, no exclusive time (a worker did not run ``main``);
* lets the parallel region's instance on every thread of the team span the
  team's lifetime, from the fork to the join (Scalasca's rule: the time a
  thread spends being forked and joined is OpenMP management time of the
  parallel region, ``omp_fork``/``omp_join``, not exclusive time of the
  function that forks). The shifted amounts are kept per instance and become
  the PAG metrics ``omp_fork`` and ``omp_join``.

A worker's top-level instance belongs to the latest fork of its process,
on another thread, at or before its enter; a fork pairs with the join that
closes it on its thread (nested teams included). Instances that no fork
precedes (threads of other models) are left as they are.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..kinds import ThreadEv
from .match import nth_pairs
from .raw import RawTrace
from .scan import ScanResult

__all__ = ["Teams", "team_contexts", "OMP_METRICS"]

#: the per-instance amounts the team layout adds as PAG metrics (name -> description)
OMP_METRICS = {
    "omp_fork": "time a thread of a team spent between the fork and entering its parallel region (s)",
    "omp_join": "time a thread of a team spent between leaving its parallel region and the join (s)",
}


@dataclass(frozen=True)
class Teams:
    """The scan result and instance times after the team layout (see the module docstring).

    Attributes
    ----------
    res : ScanResult
        With the workers' call paths rebased below the forking call path and
        the calling-context tree renumbered (unused call paths dropped).
    t_enter, t_leave : numpy.ndarray
        Instance times, parallel regions spanning fork to join.
    first : tuple of numpy.ndarray
        Per call path, the location and the region event (its Enter) that
        places it first: its own first instance or a descendant's, whichever
        comes first, so that a call path never sorts after its descendants.
    ancestor_rows : tuple of numpy.ndarray
        ``(call path, location, inclusive time)`` of the forking call path and
        its ancestors on each worker.
    inst_metrics : dict of str to numpy.ndarray
        ``omp_fork`` and ``omp_join`` per instance.
    """

    res: ScanResult
    t_enter: np.ndarray
    t_leave: np.ndarray
    first: tuple[np.ndarray, np.ndarray]
    ancestor_rows: tuple[np.ndarray, np.ndarray, np.ndarray]
    inst_metrics: dict[str, np.ndarray]


def _forks(raw: RawTrace, thr_open: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fork rows of the thread events and, per fork, the row of the join that closes it (-1 none)."""
    ev = raw.thread_events
    kind = ev["kind"]
    sel = np.flatnonzero((kind == ThreadEv.FORK) | (kind == ThreadEv.JOIN))
    if not len(sel):
        return sel, sel
    loc = ev["location"][sel].astype(np.int64)
    delta = np.where(kind[sel] == ThreadEv.FORK, 1, -1)
    first = np.r_[True, loc[1:] != loc[:-1]]
    csum = np.cumsum(delta)
    base = np.maximum.accumulate(np.where(first, np.arange(len(sel)), 0))
    depth_after = csum - (csum[base] - delta[base])  # nesting depth after each event, within its location
    is_fork = delta > 0
    f, j = sel[is_fork], sel[~is_fork]
    key_f = loc[is_fork] * (1 << 20) + (depth_after[is_fork] - 1)
    key_j = loc[~is_fork] * (1 << 20) + depth_after[~is_fork]
    pair = nth_pairs(key_f, key_j)
    return f, np.where(pair >= 0, j[np.maximum(pair, 0)], -1)


def _last_fork_before(fp: np.ndarray, ft: np.ndarray, qp: np.ndarray, qt: np.ndarray) -> np.ndarray:
    """For each query (process, time): the fork with that process and the latest time <= the query's (-1 none)."""
    n_f = len(fp)
    proc = np.r_[fp, qp]
    time = np.r_[ft, qt]
    is_q = np.r_[np.zeros(n_f, bool), np.ones(len(qp), bool)]
    order = np.lexsort((is_q, time, proc))  # forks before queries at equal times
    idx = np.where(~is_q[order], order, -1)
    last = np.maximum.accumulate(idx)
    out = np.full(len(qp), -1, dtype=np.int64)
    qs = np.flatnonzero(is_q[order])
    cand = last[qs]
    ok = (cand >= 0) & (proc[np.maximum(cand, 0)] == proc[order[qs]])
    out[order[qs] - n_f] = np.where(ok, cand, -1)
    return out


def team_contexts(
    raw: RawTrace,
    res: ScanResult,
    thr_open: np.ndarray,
    inst_loc: np.ndarray,
    t_enter: np.ndarray,
    t_leave: np.ndarray,
) -> Teams | None:
    """The team layout of a partition's scan (see the module docstring); None when the trace forks no team."""
    forks, joins = _forks(raw, thr_open)
    if not len(forks) or not len(res.callpath):
        return None
    ev = raw.thread_events
    loc_proc = raw.locations["process"].to_numpy(dtype=np.int64)
    f_loc = ev["location"][forks].astype(np.int64)
    f_time = ev["time"][forks]
    f_join = np.where(joins >= 0, ev["time"][np.maximum(joins, 0)], np.inf)
    f_open = thr_open[forks]
    f_cp = np.where(f_open >= 0, res.callpath[np.maximum(f_open, 0)], -1)
    n = len(res.callpath)
    parent = res.parent
    role = raw.regions["role"].astype(str).str.lower().to_numpy()
    is_par = role[res.cp_region[res.callpath]] == "parallel"
    # the forking thread's copy: a parallel instance whose enclosing instance is open at a fork just before it
    fork_of = np.full(n, -1, dtype=np.int64)
    mi = np.flatnonzero(is_par & (parent >= 0))
    if len(mi):
        f_pos = ev["pos"][forks].astype(np.int64)
        order = np.lexsort((f_pos, f_loc))
        key_f = f_loc[order] * (1 << 40) + f_pos[order]
        key_i = inst_loc[mi] * (1 << 40) + res.enter[mi]
        j = np.searchsorted(key_f, key_i, side="right") - 1
        jj = order[np.maximum(j, 0)]
        ok = (j >= 0) & (f_loc[jj] == inst_loc[mi]) & (f_open[jj] == parent[mi])
        fork_of[mi[ok]] = jj[ok]
    # the workers' copies: top-level instances inside a fork of another thread of the process
    wi = np.flatnonzero(parent < 0)
    base = np.full(n, -2, dtype=np.int64)  # per instance: the call path to rebase it below (-2: keep)
    if len(wi):
        k = _last_fork_before(loc_proc[f_loc], f_time, loc_proc[inst_loc[wi]], t_enter[wi])
        kk = np.maximum(k, 0)
        ok = (k >= 0) & (f_loc[kk] != inst_loc[wi]) & (f_join[kk] >= t_leave[wi])
        fork_of[wi[ok]] = k[ok]
        base[wi[ok]] = f_cp[k[ok]]
    if not (fork_of >= 0).any():
        return None
    # rebase the workers' subtrees: the top-level instance of each (pre-order: the last top-level one so far)
    top = np.maximum.accumulate(np.where(parent < 0, np.arange(n), -1))
    moved = base[top] > -2
    res2, first = _rebase(res, moved, base[top], inst_loc)
    # parallel instances span fork to join
    te, tl = t_enter.copy(), t_leave.copy()
    fi = np.flatnonzero(fork_of >= 0)
    k = fork_of[fi]
    times = raw.region_events["time"]
    rloc = raw.region_events["location"]
    prev_e = res.enter[fi] - 1
    lo = np.where((prev_e >= 0) & (rloc[np.maximum(prev_e, 0)] == inst_loc[fi]), times[np.maximum(prev_e, 0)], -np.inf)
    nxt = np.where(res.leave[fi] >= 0, res.leave[fi] + 1, len(times))
    hi_ok = (nxt < len(times)) & (rloc[np.minimum(nxt, len(times) - 1)] == inst_loc[fi])
    hi = np.where(hi_ok, times[np.minimum(nxt, len(times) - 1)], np.inf)
    te[fi] = np.minimum(te[fi], np.maximum(f_time[k], lo))
    tl[fi] = np.maximum(tl[fi], np.minimum(np.where(np.isfinite(f_join[k]), f_join[k], tl[fi]), hi))
    omp_fork = np.zeros(n)
    omp_join = np.zeros(n)
    omp_fork[fi] = t_enter[fi] - te[fi]
    omp_join[fi] = tl[fi] - t_leave[fi]
    # the workers' forking call path and its ancestors: the worker's inclusive time, no visit
    wtop = np.flatnonzero((parent < 0) & (base >= 0))
    cur = res2.cp_parent[res2.callpath[wtop]].astype(np.int64)
    wl, wx = inst_loc[wtop].astype(np.int64), tl[wtop] - te[wtop]
    vs, ls, xs = [], [], []
    while len(cur):
        ok = cur >= 0
        cur, wl, wx = cur[ok], wl[ok], wx[ok]
        if not len(cur):
            break
        vs.append(cur)
        ls.append(wl)
        xs.append(wx)
        cur = res2.cp_parent[cur].astype(np.int64)
    empty_i = np.zeros(0, np.int64)
    rows = (
        np.concatenate(vs) if vs else empty_i,
        np.concatenate(ls) if ls else empty_i,
        np.concatenate(xs) if xs else np.zeros(0),
    )
    return Teams(res2, te, tl, first, rows, {"omp_fork": omp_fork, "omp_join": omp_join})


def _rebase(
    res: ScanResult, moved: np.ndarray, base: np.ndarray, inst_loc: np.ndarray
) -> tuple[ScanResult, tuple[np.ndarray, np.ndarray]]:
    """Rebase the call paths of the ``moved`` instances below ``base`` and renumber the tree compactly."""
    cp_parent = res.cp_parent.tolist()
    cp_region = res.cp_region.tolist()
    index = {(p, r): c for c, (p, r) in enumerate(zip(cp_parent, cp_region))}
    memo: dict[tuple[int, int], int] = {}

    def rebase(b: int, c: int) -> int:
        if c < 0:
            return b
        got = memo.get((b, c))
        if got is None:
            p = rebase(b, cp_parent[c])
            key = (p, cp_region[c])
            got = index.get(key)
            if got is None:
                got = index[key] = len(cp_parent)
                cp_parent.append(p)
                cp_region.append(cp_region[c])
            memo[(b, c)] = got
        return got

    callpath = res.callpath.astype(np.int64).copy()
    mi = np.flatnonzero(moved)
    if len(mi):
        width = max(len(cp_parent), 1) + 1
        pair = (base[mi] + 1) * width + callpath[mi]
        uniq, inv = np.unique(pair, return_inverse=True)
        new = np.array([rebase(int(u // width) - 1, int(u % width)) for u in uniq.tolist()], dtype=np.int64)
        callpath[mi] = new[inv.ravel()]
    par = np.asarray(cp_parent, dtype=np.int64)
    ncp = len(par)
    # a call path sorts at its first instance or its first descendant's, whichever comes first
    key = np.full(ncp, len(callpath), dtype=np.int64)
    np.minimum.at(key, callpath, np.arange(len(callpath)))
    for c in range(ncp - 1, -1, -1):  # children have larger ids than their parents
        p = par[c]
        if p >= 0 and key[c] < key[p]:
            key[p] = key[c]
    used = np.flatnonzero(key < len(callpath))
    order = used[np.lexsort((used, key[used]))]
    new_id = np.full(ncp, -1, dtype=np.int64)
    new_id[order] = np.arange(len(order))
    reg = np.asarray(cp_region, dtype=np.int64)
    new_parent = np.where(par[order] >= 0, new_id[np.maximum(par[order], 0)], -1)
    res2 = dataclasses.replace(
        res,
        callpath=new_id[callpath].astype(res.callpath.dtype, copy=False),
        cp_parent=new_parent.astype(res.cp_parent.dtype, copy=False),
        cp_region=reg[order].astype(res.cp_region.dtype, copy=False),
    )
    first_inst = key[order]
    return res2, (inst_loc[first_inst].astype(np.int64), res.enter[first_inst].astype(np.int64))
