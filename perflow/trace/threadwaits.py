"""Thread wait states: OpenMP barriers and lock contention, after Scalasca.

Rows in the format of :data:`perflow.trace.waits.WAIT_COLUMNS`; notation as
there (``E``/``L`` the enter/leave time of the region instance that waits).

Barriers (``omp_barrier_wait``: explicit barriers, region role ``barrier``;
``omp_ibarrier_wait``: implicit ones, role ``implicit_barrier``)
    A **team instance** is a set of instances of one parallel region
    (role ``parallel``) of one process that overlap in time: the threads of a
    team enter their copy of the region after the fork and leave it before
    the join, inside the forking thread's copy, while two runs of the region
    one after the other do not overlap. A barrier belongs to the innermost
    parallel instance enclosing it; the ``k``-th barrier (in enter order)
    inside each thread's parallel instance of a team instance is **barrier
    instance** ``k`` of that team (OpenMP requires every thread of a team to
    meet the same barriers in the same order). Barriers outside every
    parallel instance form one team per process, the ``k``-th of each thread
    being instance ``k``. Each thread's wait is the time until the last
    thread arrives: ``max(0, min(max_j E_j, L_i) - E_i)``; it is caused by the
    last to arrive (the first thread with the latest enter).
Locks (``lock_contention_critical``: the acquisition happened inside a
``critical`` construct; ``lock_contention_api``: any other lock, e.g.
``omp_set_lock`` or ``pthread_mutex_lock``)
    The acquisitions of a lock are ordered by their acquisition number
    (:data:`perflow.pag.instances.LOCK_COLUMNS`). Acquisition ``k`` waits
    for the release of acquisition ``k - 1`` when another thread held it:
    ``max(0, min(R_{k-1}, L) - E)`` with ``E``/``L`` those of the region
    instance open at the acquisition (the lock call or the critical
    construct). The releasing thread is the cause, at its release time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .pieces import previous_max
from .waittable import _frame, empty_waits

__all__ = [
    "thread_waits",
    "barrier_waits",
    "barrier_instances",
    "lock_waits",
    "idle_waits",
    "parallel_teams",
    "fork_edges",
    "BARRIER_ROLES",
]

#: region roles of barriers and their wait kinds
BARRIER_ROLES = {"barrier": "omp_barrier_wait", "implicit_barrier": "omp_ibarrier_wait"}


def _local_parent(parent: np.ndarray, gid: np.ndarray | None) -> np.ndarray:
    if gid is None:
        return parent.astype(np.int64)
    i = np.clip(np.searchsorted(gid, parent), 0, max(len(gid) - 1, 0))
    ok = (parent >= 0) & (gid[i] == parent) if len(gid) else np.zeros(len(parent), dtype=bool)
    return np.where(ok, i, -1)


def _local(g: np.ndarray, gid: np.ndarray | None) -> np.ndarray:
    return _local_parent(np.asarray(g, dtype=np.int64), gid)


def _global(rows: np.ndarray, gid: np.ndarray | None) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.int64)
    if gid is None:
        return rows
    return np.where(rows >= 0, gid[np.maximum(rows, 0)] if len(gid) else -1, -1)


def parallel_teams(
    iv: pd.DataFrame, role: np.ndarray, region: np.ndarray, gid: np.ndarray | None, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The innermost parallel instance enclosing each of ``rows`` (local rows; -1 none; a parallel
    instance encloses itself), and the team instance of every row that is a parallel instance (-1
    for the others): overlapping instances of one parallel region of one process, numbered from 0."""
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    vrole = np.asarray(role, dtype=object)
    ok_v = (vtx >= 0) & (vtx < len(vrole))
    is_par = ok_v & (vrole == "parallel")[np.where(ok_v, vtx, 0)]
    parent = _local_parent(iv["parent"].to_numpy().astype(np.int64), gid)
    rows = np.asarray(rows, dtype=np.int64)
    anc = np.where(is_par[rows], rows, parent[rows]) if len(rows) else rows.copy()
    while True:
        pending = np.flatnonzero((anc >= 0) & ~is_par[np.maximum(anc, 0)])
        if not len(pending):
            break
        anc[pending] = parent[anc[pending]]
    P = np.flatnonzero(is_par)
    team = np.full(len(iv), -1, dtype=np.int64)
    if len(P):
        proc = iv["process"].to_numpy().astype(np.int64)[P]
        enter, leave = iv["enter"].to_numpy()[P], iv["leave"].to_numpy()[P]
        preg = np.asarray(region, dtype=np.int64)[vtx[P]]
        order = np.lexsort((enter, preg, proc))
        ps, rs = proc[order], preg[order]
        grp = np.cumsum(np.r_[True, (ps[1:] != ps[:-1]) | (rs[1:] != rs[:-1])]) - 1
        new = enter[order] > previous_max(grp, leave[order])  # -inf for a group's first
        team[P[order]] = np.cumsum(new) - 1
    return anc, team


def _team_rows(
    iv: pd.DataFrame, role: np.ndarray, region: np.ndarray, gid: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parallel-region rows (local), their team instance, and each row's team's forking copy (a local row).

    The forking copy of a team is the copy that lies inside another region of
    its own thread (the function that forked; the lowest thread when none does).
    """
    empty = np.zeros(0, np.int64)
    vrole = np.asarray(role, dtype=object)
    if not len(vrole) or not (vrole == "parallel").any():  # no parallel region (an MPI-only trace): no pass
        return empty, empty, empty
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    ok_v = (vtx >= 0) & (vtx < len(vrole))
    is_par = ok_v & (vrole == "parallel")[np.where(ok_v, vtx, 0)] if len(vrole) else np.zeros(len(vtx), bool)
    P = np.flatnonzero(is_par)
    if not len(P):
        return empty, empty, empty
    _, team = parallel_teams(iv, vrole, region, gid, P)
    t = team[P]
    thr = iv["thread"].to_numpy().astype(np.int64)[P]
    nested = iv["parent"].to_numpy()[P] >= 0
    order = np.lexsort((thr, ~nested, t))  # per team: a nested copy first, then by thread
    ts = t[order]
    new = np.r_[True, ts[1:] != ts[:-1]]
    head = order[np.flatnonzero(new)][np.cumsum(new) - 1]
    fork_copy = np.empty(len(P), dtype=np.int64)
    fork_copy[order] = P[head]
    return P, t, fork_copy


def fork_edges(
    iv: pd.DataFrame, role: np.ndarray, region: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where each worker thread's team begins: ``(process, thread, forking process, forking thread, time)``.

    Every member of a team but the forking copy (:func:`_team_rows`) begins at
    the enter of its copy, which the build places at the fork
    (:mod:`perflow.trace.omptree`).
    """
    P, _, fork = _team_rows(iv, role, region, None)
    sel = P != fork
    o, m = P[sel], fork[sel]
    proc = iv["process"].to_numpy().astype(np.int64)
    thr = iv["thread"].to_numpy().astype(np.int64)
    return proc[o], thr[o], proc[m], thr[m], iv["enter"].to_numpy()[o]


def idle_waits(iv: pd.DataFrame, role: np.ndarray, region: np.ndarray, gid: np.ndarray | None = None) -> pd.DataFrame:
    """OpenMP idle threads (``omp_idle``, Scalasca's *idle threads*): worker threads outside every team.

    While the thread that forks the outermost teams of a process (its master)
    runs outside them, from its first event to its first fork, between a join
    and the next fork, and from its last join to its end, each of the process's
    worker threads (a thread that was a member of a team without forking it)
    is idle: one instance per such stretch and worker, with no call path of
    its own (``vertex`` -1; the time is the master's, charged to the master's
    call paths by the delay analysis), caused by the master at the end of the
    stretch.
    """
    P, team, fork = _team_rows(iv, role, region, gid)
    if not len(P):
        return empty_waits()
    proc = iv["process"].to_numpy().astype(np.int64)
    thr = iv["thread"].to_numpy().astype(np.int64)
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    parent = _local_parent(iv["parent"].to_numpy().astype(np.int64), gid)
    anc, _ = parallel_teams(iv, np.asarray(role, dtype=object), region, gid, np.maximum(parent[fork], 0))
    outer = np.unique(fork[(parent[fork] < 0) | (anc < 0)])  # forking copies of outermost teams
    workers = np.unique(np.stack([proc[P[P != fork]], thr[P[P != fork]]]), axis=1)
    if not len(outer) or not workers.shape[1]:
        return empty_waits()
    # per master location: its span and its outermost teams
    key = proc * (1 << 20) + thr
    mkey = np.unique(key[outer])
    ext = pd.DataFrame({"key": key, "enter": enter, "leave": leave}).groupby("key")
    span0, span1 = ext["enter"].min(), ext["leave"].max()
    parts = []
    for mk in mkey.tolist():
        f = outer[key[outer] == mk]
        f = f[np.argsort(enter[f], kind="stable")]
        starts = np.r_[span0[mk], leave[f]]
        ends = np.r_[enter[f], span1[mk]]
        cause = np.r_[f, -1]
        ok = ends > starts
        p = mk >> 20
        wthr = workers[1][workers[0] == p]
        wthr = wthr[wthr != (mk & ((1 << 20) - 1))]
        if not len(wthr) or not ok.any():
            continue
        s0, s1, cz = starts[ok], ends[ok], cause[ok]
        n = len(s0)
        parts.append(
            pd.DataFrame(
                {
                    "thread": np.repeat(wthr, n),
                    "start": np.tile(s0, len(wthr)),
                    "end": np.tile(s1, len(wthr)),
                    "cause": np.tile(cz, len(wthr)),
                    "process": p,
                    "mthread": mk & ((1 << 20) - 1),
                }
            )
        )
    if not parts:
        return empty_waits()
    d = pd.concat(parts, ignore_index=True)
    cz = d["cause"].to_numpy()
    return _frame(
        len(d),
        "omp_idle",
        process=d["process"].to_numpy(),
        thread=d["thread"].to_numpy(),
        start=d["start"].to_numpy(),
        end=d["end"].to_numpy(),
        amount=d["end"].to_numpy() - d["start"].to_numpy(),
        cause_process=d["process"].to_numpy(),
        cause_thread=d["mthread"].to_numpy(),
        cause_time=d["end"].to_numpy(),
        cause_interval=np.where(cz >= 0, _global(np.maximum(cz, 0), gid), -1),
    )


def barrier_instances(
    iv: pd.DataFrame, role: np.ndarray, region: np.ndarray, gid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The barrier rows of ``iv`` (local rows) and the barrier instance of each (see the module docstring).

    Arguments as in :func:`barrier_waits`; instances are numbered from 0 within ``iv``.
    """
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    vrole = np.asarray(role, dtype=object)
    is_bar_v = np.isin(vrole, list(BARRIER_ROLES))
    z = np.zeros(0, dtype=np.int64)
    if not len(vtx) or not is_bar_v.any():
        return z, z
    ok_v = (vtx >= 0) & (vtx < len(vrole))
    B = np.flatnonzero(ok_v & is_bar_v[np.where(ok_v, vtx, 0)])
    if not len(B):
        return z, z
    proc = iv["process"].to_numpy().astype(np.int64)
    thr = iv["thread"].to_numpy().astype(np.int64)
    anc, team = parallel_teams(iv, vrole, region, gid, B)
    n_team = int(team.max()) + 1 if len(team) else 0
    inside = anc >= 0
    bteam = np.where(inside, team[np.maximum(anc, 0)], n_team + proc[B])  # outside every region: one per process
    # the k-th barrier of each thread's parallel instance (or, outside, of each thread)
    holder = np.where(inside, anc, -1 - (proc[B] * (1 << 20) + thr[B]))
    k = _rank_in_runs(holder)
    _, inst = np.unique(np.stack([bteam, k]), axis=1, return_inverse=True)
    return B, np.asarray(inst).ravel().astype(np.int64)


def barrier_waits(
    iv: pd.DataFrame, role: np.ndarray, region: np.ndarray, gid: np.ndarray | None = None
) -> pd.DataFrame:
    """OpenMP barrier wait states (see the module docstring).

    Parameters
    ----------
    iv : pandas.DataFrame
        Intervals (all of a process's threads together), sorted by (process,
        thread, enter) as in :class:`~perflow.pag.instances.Trace`.
    role, region : numpy.ndarray
        Region role (str) and region id of each vertex.
    gid : numpy.ndarray, optional
        Global row of each row of ``iv`` (increasing) when ``iv`` is a
        partition's part of the intervals; the ``parent`` column and the
        result use global rows. None: ``iv`` is the whole table.
    """
    B, inst = barrier_instances(iv, role, region, gid)
    if not len(B):
        return empty_waits()
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    vrole = np.asarray(role, dtype=object)
    proc = iv["process"].to_numpy().astype(np.int64)
    thr = iv["thread"].to_numpy().astype(np.int64)
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    srt = np.lexsort((thr[B], proc[B], inst))
    b, g = B[srt], inst[srt]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    gi = np.cumsum(np.r_[True, g[1:] != g[:-1]]) - 1
    E, L = enter[b], leave[b]
    latest = np.maximum.reduceat(E, starts)[gi]
    rows = np.arange(len(b))
    last = np.minimum.reduceat(np.where(E == latest, rows, len(rows)), starts)[gi]
    wait = np.maximum(0.0, np.minimum(latest, L) - E)
    keep = np.flatnonzero(wait > 0)
    kinds = np.array([BARRIER_ROLES[r] for r in vrole[vtx[b[keep]]]], dtype=object)
    cause = b[last[keep]]
    sel = b[keep]
    return _frame(
        len(keep),
        kinds,
        process=proc[sel],
        thread=thr[sel],
        start=E[keep],
        end=E[keep] + wait[keep],
        amount=wait[keep],
        vertex=vtx[sel],
        interval=_global(sel, gid),
        cause_process=proc[cause],
        cause_thread=thr[cause],
        cause_time=enter[cause],
        cause_interval=_global(cause, gid),
    )


def _rank_in_runs(key: np.ndarray) -> np.ndarray:
    """Rank of each element among the earlier elements with the same key (keys need not be contiguous)."""
    n = len(key)
    if not n:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(key, kind="stable")
    ks = key[order]
    start = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    run = np.cumsum(np.r_[True, ks[1:] != ks[:-1]]) - 1
    out = np.empty(n, dtype=np.int64)
    out[order] = np.arange(n) - start[run]
    return out


def lock_waits(iv: pd.DataFrame, locks: pd.DataFrame, role: np.ndarray, gid: np.ndarray | None = None) -> pd.DataFrame:
    """Lock contention (see the module docstring).

    ``locks`` holds every acquisition of the processes of ``iv``
    (:data:`~perflow.pag.instances.LOCK_COLUMNS`, global interval rows);
    ``gid`` as in :func:`barrier_waits`.
    """
    if not len(locks):
        return empty_waits()
    lk = locks.sort_values(["process", "lock", "order"], kind="stable")
    proc = lk["process"].to_numpy().astype(np.int64)
    thr = lk["thread"].to_numpy().astype(np.int64)
    lock = lk["lock"].to_numpy()
    rel = lk["release"].to_numpy()
    same = np.r_[False, (proc[1:] == proc[:-1]) & (lock[1:] == lock[:-1])]
    prev = np.arange(len(lk)) - 1
    other = same & (thr != thr[np.maximum(prev, 0)])
    ivg = lk["interval"].to_numpy().astype(np.int64)
    li = _local(ivg, gid)
    has = li >= 0
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    acq = lk["acquire"].to_numpy()
    E = np.where(has, enter[np.maximum(li, 0)] if len(enter) else acq, acq)
    Lv = np.where(has, leave[np.maximum(li, 0)] if len(leave) else acq, acq)
    R = np.where(other, rel[np.maximum(prev, 0)], np.nan)
    wait = np.where(other & np.isfinite(R), np.maximum(0.0, np.minimum(R, Lv) - E), 0.0)
    keep = np.flatnonzero(wait > 0)
    if not len(keep):
        return empty_waits()
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    v = np.where(has[keep], vtx[np.maximum(li[keep], 0)] if len(vtx) else -1, -1)
    vrole = np.asarray(role, dtype=object)
    crit = (v >= 0) & (vrole[np.clip(v, 0, max(len(vrole) - 1, 0))] == "critical") if len(vrole) else v < -1
    p = prev[keep]
    return _frame(
        len(keep),
        np.where(crit, "lock_contention_critical", "lock_contention_api"),
        process=proc[keep],
        thread=thr[keep],
        start=E[keep],
        end=E[keep] + wait[keep],
        amount=wait[keep],
        vertex=v,
        interval=ivg[keep],
        cause_process=proc[p],
        cause_thread=thr[p],
        cause_time=R[keep],
        cause_interval=lk["release_interval"].to_numpy().astype(np.int64)[p],
    )


def thread_waits(
    iv: pd.DataFrame,
    locks: pd.DataFrame,
    role: np.ndarray | None,
    region: np.ndarray | None,
    gid: np.ndarray | None = None,
) -> pd.DataFrame:
    """Barrier and lock wait states of some whole processes (``role`` None: the vertices have no roles)."""
    if role is None or region is None:
        return empty_waits()
    parts = [barrier_waits(iv, role, region, gid), lock_waits(iv, locks, role, gid), idle_waits(iv, role, region, gid)]
    return pd.concat(parts, ignore_index=True)
