"""Synchronisation points of a trace, after Scalasca's: where the delay analysis cuts its intervals.

A *synchronisation point* is an event at which a location synchronised with
others; the delay analysis (:mod:`perflow.trace.delays`) compares what two
locations did since the last one they shared. As in Scalasca, they are:

* **messages with a wait state**: a receive that waited for a late sender (its
  call, and the call that sent the message) and a send that waited for a late
  receiver (its completing call, and the call that posted the receive). A
  message that made nobody wait synchronised nothing;
* **synchronising collectives**: every participant of a barrier, MPI_Init,
  MPI_Finalize or all-to-all collective that moved data; the root and the
  receivers that waited for it of a 1-to-N collective; the root and the latest
  sender of an N-to-1 collective when the root waited (not scans);
* **OpenMP**: every thread at each barrier of its team, and at the fork of
  each team (its copy of the parallel region).

Each point has a time (the enter of its call: an interval ends there), a
*release* (where the next interval starts: the call's leave less its
completion time, the part of the call after the synchronisation let it go:
Late Sender completion ``max(0, Lr - Ls)`` on the receiver and
``max(0, Ls - Lr)`` on the sender, the collective completion of
:mod:`perflow.trace.collwaits`, the earliest enter into the parallel region of
a team for its fork), the waiting time of the wait state there (subtracted as
waiting, not work, from the intervals that contain it, and where long-term
delay costs flow), and whom it synchronised with (a location, or the members
of a group). MPI intervals run between MPI points shared with the partner,
OpenMP intervals between a thread's OpenMP points.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..kinds import CollectiveOp
from ..pag.instances import Trace
from .flat import Locations
from .synckernels import by_location_time_sorted, collective_sync
from .threadwaits import _team_rows, barrier_instances

__all__ = ["SyncPoints", "sync_points", "by_location_time", "SYNC_WAIT_KINDS", "LS_KINDS"]

LS_KINDS = ("late_sender", "late_sender_wrong_order_same", "late_sender_wrong_order_diff")
#: wait kinds whose instances are waiting at a synchronisation point
SYNC_WAIT_KINDS = (
    *LS_KINDS,
    "late_receiver",
    "wait_barrier",
    "wait_nxn",
    "finalize_wait",
    "late_broadcast",
    "early_reduce",
    "omp_barrier_wait",
    "omp_ibarrier_wait",
)
_COLL_WAITS = ("wait_barrier", "wait_nxn", "finalize_wait", "late_broadcast", "early_reduce")


@dataclass(frozen=True)
class SyncPoints:
    """The synchronisation points of a trace, grouped by location and sorted by time within one.

    Attributes
    ----------
    offsets : numpy.ndarray
        Points of location ``l`` are ``offsets[l]:offsets[l + 1]``.
    time, release, wait : numpy.ndarray
        The enter of the point's call, where the next interval starts, the waiting time there.
    vertex : numpy.ndarray
        Call path of the point's call (-1 unknown).
    wid : numpy.ndarray
        Row of the point's wait state in the wait table given to :func:`sync_points` (-1 none).
    cls : numpy.ndarray
        0 MPI, 1 OpenMP.
    partner : numpy.ndarray
        The location synchronised with (a message), or -1 (a group: ``group``).
    group : numpy.ndarray
        The group synchronised with (``group_loc[group_off[g]:group_off[g + 1]]``, sorted), or -1.
    """

    offsets: np.ndarray
    time: np.ndarray
    release: np.ndarray
    wait: np.ndarray
    vertex: np.ndarray
    wid: np.ndarray
    cls: np.ndarray
    partner: np.ndarray
    group: np.ndarray
    group_off: np.ndarray
    group_loc: np.ndarray


#: The wait kinds of the message points and the message column naming each one's partner call: a Late
#: Sender's receive-completing call waits for the sending call, a Late Receiver's send-completing call for
#: the receive-posting call (one definition, also used by the partitioned form, ``trace.syncparts``).
MESSAGE_PARTNERS: tuple[tuple[tuple[str, ...], str], ...] = (
    (LS_KINDS, "send_interval"),
    (("late_receiver",), "recv_post_interval"),
)


def _message_points(trace: Trace, waits: pd.DataFrame, locs: Locations, iv_loc: np.ndarray) -> list[dict]:
    iv = trace.intervals
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    m = trace.messages
    kind = waits["kind"]  # (categorical: compared by its codes, never as 20 M strings)
    wiv = waits["interval"].to_numpy().astype(np.int64)
    msg = waits["message"].to_numpy().astype(np.int64)
    lsc = (kind == "late_sender_completion").to_numpy()
    # each receive call's Late Sender completion (one per call), by interval
    comp = np.bincount(wiv[lsc], weights=waits["amount"].to_numpy()[lsc], minlength=len(iv)) if lsc.any() else None
    out = []
    for kinds, other in MESSAGE_PARTNERS:
        r = np.flatnonzero(kind.isin(kinds).to_numpy() & (wiv >= 0) & (msg >= 0))
        if not len(r):
            continue
        mm = msg[r]
        a = wiv[r]  # the waiting call; ``b`` its partner
        b = m[other].to_numpy().astype(np.int64)[mm]
        if other == "send_interval":  # Late Sender: released at its leave less the completion's wait
            c = comp[a] if comp is not None else np.zeros(len(a))
            rel_a = leave[a] - c
        else:
            rel_a = leave[a]
        rel_b = leave[np.maximum(b, 0)] - np.maximum(0.0, leave[np.maximum(b, 0)] - leave[a])
        ok = b >= 0
        a, b, r, rel_a, rel_b = a[ok], b[ok], r[ok], rel_a[ok], rel_b[ok]
        la, lb = iv_loc[a], iv_loc[b]
        zero = np.zeros(len(a))
        out.append(dict(loc=la, time=enter[a], release=rel_a, wait=waits["amount"].to_numpy()[r], vertex=vtx[a],
                        wid=r, cls=0, partner=lb, group=-1))  # fmt: skip
        out.append(dict(loc=lb, time=enter[b], release=rel_b, wait=zero, vertex=vtx[b], wid=np.full(len(a), -1),
                        cls=0, partner=la, group=-1))  # fmt: skip
    return out


def _collective_points(trace: Trace, waits: pd.DataFrame, locs: Locations) -> tuple[list[dict], np.ndarray, np.ndarray]:
    c = trace.collectives
    empty = np.zeros(0, np.int64)
    if not len(c):
        return [], np.zeros(1, np.int64), empty
    if not _sorted_keys(c["instance"].to_numpy(), c["process"].to_numpy(), c["thread"].to_numpy()):
        c = c.sort_values(["instance", "process", "thread"], kind="stable").reset_index(drop=True)
    iv = trace.intervals
    inst = c["instance"].to_numpy().astype(np.int64, copy=False)
    civ = c["interval"].to_numpy()
    op = c["op"].to_numpy().astype(np.int64, copy=False)
    kind = _OP_KIND[np.clip(op, 0, len(_OP_KIND) - 1)]  # (an op past the table: all-to-all, as before)
    kind[op < 0] = 0
    cols = {k: c[k].to_numpy() for k in ("begin", "end", "sent", "received", "root", "process")}
    E, release, sync, vtx = collective_sync(
        inst, civ, iv["enter"].to_numpy(), iv["leave"].to_numpy(), iv["vertex"].to_numpy(), cols, kind
    )
    loc = locs.lookup(c["process"].to_numpy(), c["thread"].to_numpy())
    # the wait state of each synchronising row
    wr = np.flatnonzero(waits["kind"].isin(_COLL_WAITS).to_numpy())
    wid = _first_match(
        (waits["instance"].to_numpy()[wr], waits["process"].to_numpy()[wr], waits["thread"].to_numpy()[wr]),
        (inst, c["process"].to_numpy(), c["thread"].to_numpy()), wr,
    )  # fmt: skip
    amount = _amounts(waits, wid)
    s = np.flatnonzero(sync & (loc >= 0))
    # groups: the synchronising members of each instance, sorted by location
    g_of = np.full(int(inst.max()) + 1 if len(inst) else 0, -1, dtype=np.int64)
    gi = inst[s]
    ls = loc[s]
    in_order = not len(gi) or bool(np.all((gi[1:] > gi[:-1]) | ((gi[1:] == gi[:-1]) & (ls[1:] >= ls[:-1]))))
    order = np.arange(len(gi)) if in_order else np.lexsort((ls, gi))
    ug, first = np.unique(gi[order], return_index=True)
    g_of[ug] = np.arange(len(ug))
    group_off = np.r_[first, len(order)].astype(np.int64)
    group_loc = loc[s][order].astype(np.int64)
    pts = [dict(loc=loc[s], time=E[s], release=release[s], wait=amount[s], vertex=vtx[s], wid=wid[s],
                cls=0, partner=-1, group=g_of[gi])]  # fmt: skip
    return pts, group_off, group_loc


def _sorted_keys(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> bool:
    """Whether the rows are in (a, b, c) order already (a stable sort would leave them as they are)."""
    if len(a) < 2:
        return True
    da, db, dc = np.diff(a.astype(np.int64)), np.diff(b.astype(np.int64)), np.diff(c.astype(np.int64))
    return bool(np.all((da > 0) | ((da == 0) & ((db > 0) | ((db == 0) & (dc >= 0))))))


def _first_match(keys: tuple[np.ndarray, ...], query: tuple[np.ndarray, ...], value: np.ndarray) -> np.ndarray:
    """``value`` of the first row of ``keys`` equal to each row of ``query`` (-1 where none): integer keys of
    a few columns, joined by a table when the possible keys are few, else by one sort."""
    if not len(value) or not len(query[0]):
        return np.full(len(query[0]), -1, np.int64)
    k = [np.asarray(x, np.int64) for x in keys]
    q = [np.asarray(x, np.int64) for x in query]
    lo = [min(int(a.min()), int(b.min())) for a, b in zip(k, q, strict=True)]
    span = [max(int(a.max()), int(b.max())) - m + 1 for a, b, m in zip(k, q, lo, strict=True)]
    if float(np.prod(np.asarray(span, np.float64))) >= 2.0**62:  # too wide for one integer: the pandas way
        s = pd.Series(value, index=pd.MultiIndex.from_arrays(k))
        s = s[~s.index.duplicated()]
        return s.reindex(pd.MultiIndex.from_arrays(q)).fillna(-1).to_numpy().astype(np.int64)
    kc, qc = np.zeros(len(k[0]), np.int64), np.zeros(len(q[0]), np.int64)
    for a, b, m, w in zip(k, q, lo, span, strict=True):
        kc, qc = kc * w + (a - m), qc * w + (b - m)
    total = int(np.prod(np.asarray(span, np.int64)))
    if total <= 4 * (len(kc) + len(qc)) + 65536:  # few possible keys (instance, process, thread): a table
        best = np.full(total, len(kc), np.int64)
        np.minimum.at(best, kc, np.arange(len(kc)))  # the first row of each key
        b = best[qc]
        return np.where(b < len(kc), np.asarray(value, np.int64)[np.minimum(b, len(kc) - 1)], -1)
    uk, first = np.unique(kc, return_index=True)  # the first row of each key
    pos = np.minimum(np.searchsorted(uk, qc), len(uk) - 1)
    return np.where(uk[pos] == qc, np.asarray(value, np.int64)[first[pos]], -1)


_ONE2N = (int(CollectiveOp.BCAST), int(CollectiveOp.SCATTER), int(CollectiveOp.SCATTERV))
_N2ONE = (int(CollectiveOp.GATHER), int(CollectiveOp.GATHERV), int(CollectiveOp.REDUCE))
_SCAN = (int(CollectiveOp.SCAN), int(CollectiveOp.EXSCAN))
#: the synchronisation rule of each operation (see :func:`~perflow.trace.synckernels.collective_sync`): 1 every
#: participant (barrier, MPI_Init, MPI_Finalize), 0 all-to-all with data, 2 1-to-N, 3 N-to-1, 4 none (scans;
#: MPI_Alltoallv/w, arbitrary patterns, as in Scalasca; handle operations)
_OP_KIND = np.zeros(max(23, max(int(o) for o in CollectiveOp) + 2), np.int8)
_OP_KIND[[int(CollectiveOp.BARRIER), int(CollectiveOp.INIT), int(CollectiveOp.FINALIZE)]] = 1
_OP_KIND[list(_ONE2N)] = 2
_OP_KIND[list(_N2ONE)] = 3
_OP_KIND[[*_SCAN, int(CollectiveOp.ALLTOALLV), int(CollectiveOp.ALLTOALLW), *range(17, 23)]] = 4


def _omp_points(
    trace: Trace, waits: pd.DataFrame, iv_loc: np.ndarray, roles: np.ndarray | None, regions: np.ndarray | None
) -> list[dict]:
    if roles is None or regions is None:
        return []
    iv = trace.intervals
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    out = []
    b, _ = barrier_instances(iv, roles, regions)
    if len(b):
        wr = np.flatnonzero(waits["kind"].isin(("omp_barrier_wait", "omp_ibarrier_wait")).to_numpy())
        by_iv = pd.Series(wr, index=waits["interval"].to_numpy()[wr])
        by_iv = by_iv[~by_iv.index.duplicated()]
        wid = by_iv.reindex(b).fillna(-1).to_numpy().astype(np.int64)
        amount = _amounts(waits, wid)
        out.append(dict(loc=iv_loc[b], time=enter[b], release=leave[b], wait=amount, vertex=vtx[b], wid=wid, cls=1,
                        partner=-1, group=-1))  # fmt: skip
    P, team, _ = _team_rows(iv, roles, regions, None)
    if len(P):  # the fork: the next interval starts at the team's earliest recorded enter into the region
        rec = enter[P] + (iv["omp_fork"].to_numpy()[P] if "omp_fork" in iv.columns else 0.0)
        first = pd.Series(rec).groupby(team).transform("min").to_numpy()
        out.append(dict(loc=iv_loc[P], time=enter[P], release=np.maximum(first, enter[P]), wait=np.zeros(len(P)),
                        vertex=vtx[P], wid=np.full(len(P), -1), cls=1, partner=-1, group=-1))  # fmt: skip
    return out


def by_location_time(loc: np.ndarray, time: np.ndarray, n_locs: int) -> np.ndarray:
    """``np.lexsort((time, loc))``: a stable sort by time, then a stable one by location (a radix sort of
    16-bit location ids when there are few: the same order in linear time; compiled, a counting sort by
    location and a sort of each location's times only where they are out of order)."""
    loc = np.asarray(loc)
    fast = by_location_time_sorted(loc, np.asarray(time), n_locs)
    if fast is not None:
        return fast
    if n_locs > np.iinfo(np.int16).max or not len(loc):
        return np.lexsort((time, loc.astype(np.int64)))
    o = np.argsort(time, kind="stable")
    return o[np.argsort(loc[o].astype(np.int16), kind="stable")]


def _amounts(waits: pd.DataFrame, wid: np.ndarray) -> np.ndarray:
    """The waiting time of wait row ``wid`` for each point (0 where ``wid`` is -1, as when ``waits`` is empty)."""
    amount = waits["amount"].to_numpy()
    if not len(amount):
        return np.zeros(len(wid))
    return np.where(wid >= 0, amount[np.maximum(wid, 0)], 0.0)


def sync_points(
    trace: Trace, waits: pd.DataFrame, locs: Locations, roles: np.ndarray | None, regions: np.ndarray | None
) -> SyncPoints:
    """The synchronisation points of ``trace`` (see the module docstring).

    ``waits`` is the wait table whose rows the points' ``wid`` refers to (it
    must hold every wait state of the trace); ``roles`` and ``regions`` (of
    each vertex) enable the OpenMP points.
    """
    iv_loc = locs.of_interval
    parts = _message_points(trace, waits, locs, iv_loc)
    coll, group_off, group_loc = _collective_points(trace, waits, locs)
    parts += coll + _omp_points(trace, waits, iv_loc, roles, regions)
    cols = ("loc", "time", "release", "wait", "vertex", "wid", "cls", "partner", "group")
    if parts:
        n = [len(p["loc"]) for p in parts]
        flat = {c: np.concatenate([np.broadcast_to(np.asarray(p[c]), (k,)) for p, k in zip(parts, n)]) for c in cols}
    else:
        flat = {c: np.zeros(0) for c in cols}
    L = len(locs)
    order = by_location_time(flat["loc"], flat["time"], L)
    sloc = flat["loc"][order]
    return SyncPoints(
        offsets=np.searchsorted(sloc, np.arange(L + 1)).astype(np.int64),
        time=flat["time"][order].astype(np.float64, copy=False),
        release=flat["release"][order].astype(np.float64, copy=False),
        wait=flat["wait"][order].astype(np.float64, copy=False),
        vertex=flat["vertex"][order].astype(np.int64, copy=False),
        wid=flat["wid"][order].astype(np.int64, copy=False),
        cls=flat["cls"][order].astype(np.int8, copy=False),
        partner=flat["partner"][order].astype(np.int64, copy=False),
        group=flat["group"][order].astype(np.int64, copy=False),
        group_off=np.asarray(group_off, dtype=np.int64),
        group_loc=np.asarray(group_loc, dtype=np.int64),
    )
