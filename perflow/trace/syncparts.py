"""Synchronisation points over partitions: the partitioned form of :func:`perflow.trace.syncpoints.sync_points`.

:func:`~perflow.trace.syncpoints.sync_points` itself runs where the partitions
live, on small traces made for one kind of point each, with the locations
numbered as the whole trace numbers them (:func:`~perflow.trace.criticalparts.global_locations`):

* **message points** on each partition's trace (:mod:`perflow.trace.parttrace`:
  its own intervals and ghosts of the other side's calls), from the Late Sender
  rows (with their completions) charged to its receive calls, then from the
  Late Receiver rows charged to its send calls;
* **collective points** where the wait states' collective instances are
  reduced (:func:`perflow.trace.waitparts.coll_outbox`: whole instances at
  their owner partition), from the collective wait rows of those instances;
* **OpenMP points** on each partition's own intervals (whole processes).

Not wired into the engine yet (the delay costs still gather the trace, and on the 4 M bench trace this form
takes 0.7-0.85 s against 0.13 s on the gathered trace): :func:`program` is called directly.

The client sends each partition the wait rows it needs (a few columns of the
wait table it holds), receives the points (a few per wait state: no interval
leaves its partition) and sorts them as the whole trace's function does: by
location and time, ties in its order of kinds (Late Sender waiters, their
partners, Late Receiver waiters, their partners, collectives, OpenMP) and, within
one, of wait rows, collective instances, or the partition's own order. The
small traces carry each interval's row as its ``vertex``, so every point names
its call (and so its wait row) and gets its call path back afterwards.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..pag.instances import Trace, conform
from ..pag.partitioned import Each
from .criticalparts import PartView, global_locations, part_views
from .flat import Locations
from .parttrace import PartTrace, part_traces
from .pipeline import Built
from .stages import PartTables
from .syncpoints import LS_KINDS, MESSAGE_PARTNERS, SyncPoints, sync_points
from .waitparts import by_process, coll_outbox

__all__ = ["program", "message_points", "collective_points", "omp_points", "merge"]

_LSC = "late_sender_completion"
_COLL_WAITS = ("wait_barrier", "wait_nxn", "finalize_wait", "late_broadcast", "early_reduce")
_OMP_WAITS = ("omp_barrier_wait", "omp_ibarrier_wait")
_WCOLS = ("kind", "interval", "message", "amount", "instance", "process", "thread")
#: the order of the kinds of points among ties (location, time) in the whole trace's function
_LS_A, _LS_B, _LR_A, _LR_B, _COLL, _OMP = range(6)
_POINT = ("loc", "time", "release", "wait", "vertex", "wid", "cls", "partner", "group")


def _glocs(proc: np.ndarray, thr: np.ndarray, iv: pd.DataFrame) -> Locations:
    """Locations numbered as the whole trace's (``proc``, ``thr``), for the intervals ``iv``."""
    g = Locations(proc, thr, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(1, np.int64))
    of = g.lookup(iv["process"].to_numpy(), iv["thread"].to_numpy()) if len(iv) else np.zeros(0, np.int64)
    return Locations(proc, thr, of, np.zeros(0, np.int64), np.zeros(1, np.int64))


def _flat(sp: SyncPoints) -> dict[str, np.ndarray]:
    """A SyncPoints' points as columns (with their location), in its order."""
    out = {c: getattr(sp, c) for c in _POINT if c != "loc"}
    out["loc"] = np.repeat(np.arange(len(sp.offsets) - 1), np.diff(sp.offsets))
    return out


def _waits_frame(w: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({c: w[c].to_numpy() if c != "kind" else w[c].array for c in _WCOLS}, copy=False)


def message_points(pt: PartTrace, w: pd.DataFrame, proc: np.ndarray, thr: np.ndarray) -> dict[str, np.ndarray]:
    """The message points of the wait rows ``w`` charged to this partition's calls (global interval rows and
    message ids; ``w["row"]``: their rows in the whole table), locations numbered as ``proc``, ``thr``."""
    tr = pt.trace
    iv = tr.intervals
    n = len(iv)
    to_local = np.full(int(pt.gid.max()) + 1 if n else 0, -1, np.int64)
    to_local[pt.gid[pt.own]] = np.flatnonzero(pt.own)
    gi = w["interval"].to_numpy().astype(np.int64)
    li = np.where((gi >= 0) & (gi < len(to_local)), to_local[np.clip(gi, 0, max(len(to_local) - 1, 0))], -1)
    gm = w["message"].to_numpy().astype(np.int64)
    ids = np.asarray(pt.msg_ids, dtype=np.int64)  # increasing (the whole trace's message order)
    by = np.argsort(ids, kind="stable") if len(ids) > 1 and np.any(ids[1:] < ids[:-1]) else np.arange(len(ids))
    pos = np.minimum(np.searchsorted(ids[by], gm), max(len(ids) - 1, 0))
    lm = np.where((gm >= 0) & (ids[by][pos] == gm), by[pos], -1) if len(ids) else np.full(len(gm), -1, np.int64)
    lw = _waits_frame(w)
    lw["interval"], lw["message"] = li, lm
    # each interval's row as its vertex: a point names its call
    small = pd.DataFrame({"process": iv["process"].to_numpy(), "thread": iv["thread"].to_numpy(),
                          "vertex": np.arange(n, dtype=np.int64), "enter": iv["enter"].to_numpy(),
                          "leave": iv["leave"].to_numpy(), "parent": np.full(n, -1, np.int64)}, copy=False)  # fmt: skip
    trace = Trace(small, tr.messages, conform("collectives", None))
    locs = _glocs(proc, thr, small)
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    row = w["row"].to_numpy().astype(np.int64)
    kind = w["kind"]
    parts = []
    for (kinds, col), seg in zip(MESSAGE_PARTNERS, (_LS_A, _LR_A)):
        keep = kind.isin(kinds).to_numpy() | ((kind == _LSC).to_numpy() if seg == _LS_A else False)
        r = np.flatnonzero(keep)
        p = _flat(sync_points(trace, lw.iloc[r].reset_index(drop=True), locs, None, None))
        call = p["vertex"]
        p["vertex"] = vtx[call]
        a = p["wid"] >= 0
        sub = np.where(a, row[r][np.maximum(p["wid"], 0)], -1)
        # a partner point: the row of its message (the k-th point of a call is the k-th row naming it)
        mine = np.flatnonzero(kind.iloc[r].isin(kinds).to_numpy() & (li[r] >= 0) & (lm[r] >= 0))
        b_of = tr.messages[col].to_numpy().astype(np.int64)[lm[r][mine]]
        mine, b_of = mine[b_of >= 0], b_of[b_of >= 0]
        by_b = np.lexsort((mine, b_of))
        pb = np.flatnonzero(~a)
        pb = pb[np.lexsort((pb, call[pb]))]
        if len(pb) != len(by_b) or not np.array_equal(call[pb], b_of[by_b]):
            raise AssertionError("partner points do not match their wait rows")
        sub[pb] = row[r][mine[by_b]]
        p["wid"] = np.where(a, sub, -1)
        p["seg"] = np.where(a, seg, seg + 1)
        p["sub"] = sub
        parts.append(p)
    return _cat(parts)


def collective_points(inbound: list[pd.DataFrame], w: pd.DataFrame, comms: dict[int, np.ndarray],
                      proc: np.ndarray, thr: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """The collective points of the instances this partition owns (their rows whole: ``inbound`` of
    :func:`~perflow.trace.waitparts.coll_outbox`), from their collective wait rows ``w``; the groups by
    instance (``ginst``, ``group_off``, ``group_loc``)."""
    got = [x for x in inbound if len(x)]
    if not got:
        return {**_cat([]), "ginst": np.zeros(0, np.int64), "group_off": np.zeros(1, np.int64),
                "group_loc": np.zeros(0, np.int64)}  # fmt: skip
    c = {k: np.concatenate([p[k].to_numpy() for p in got]) for k in got[0].columns}
    order = np.lexsort((c["thread"], c["process"], c["instance"]))
    c = {k: a[order] for k, a in c.items()}
    g = c["interval"].astype(np.int64)
    n = len(g)
    has = g >= 0
    # every row its own interval (its call's enter and leave, or its begin and end: the same values), its row as vertex
    iv = pd.DataFrame({"process": c["process"], "thread": c["thread"], "vertex": np.arange(n, dtype=np.int64),
                       "enter": np.where(has, c["iv:enter"], c["begin"]), "leave": np.where(has, c["iv:leave"], c["end"]),
                       "parent": np.full(n, -1, np.int64)}, copy=False)  # fmt: skip
    local = {k: c[k] for k in conform("collectives", None).columns}
    local["interval"] = np.arange(n)
    trace = Trace(iv, conform("messages", None), pd.DataFrame(local, copy=False), comms=dict(comms))
    lw = _waits_frame(w)
    sp = sync_points(trace, lw, _glocs(proc, thr, iv), None, None)
    p = _flat(sp)
    rowc = p["vertex"]
    p["vertex"] = np.where(has[rowc], c["iv:vertex"][rowc].astype(np.int64), -1)
    row = w["row"].to_numpy().astype(np.int64)
    p["wid"] = np.where(p["wid"] >= 0, row[np.maximum(p["wid"], 0)] if len(row) else -1, -1)
    inst = c["instance"].astype(np.int64)[rowc]
    p["seg"] = np.full(len(rowc), _COLL, np.int64)
    p["sub"] = inst
    ginst = np.full(len(sp.group_off) - 1, -1, np.int64)
    ginst[p["group"][p["group"] >= 0]] = inst[p["group"] >= 0]
    return {**p, "ginst": ginst, "group_off": sp.group_off, "group_loc": sp.group_loc}


def omp_points(v: PartView, t: PartTables, w: pd.DataFrame, proc: np.ndarray, thr: np.ndarray, roles: np.ndarray,
               regions: np.ndarray) -> dict[str, np.ndarray]:  # fmt: skip
    """The OpenMP points of this partition's own intervals (``v``, of its tables ``t``), from its OpenMP barrier
    wait rows ``w``."""
    tr = v.trace
    to_local = np.full(int(v.ginst.max()) + 1 if len(v.ginst) else 0, -1, np.int64)
    to_local[v.ginst] = np.arange(len(v.ginst))
    gi = w["interval"].to_numpy().astype(np.int64)
    lw = _waits_frame(w)
    lw["interval"] = np.where((gi >= 0) & (gi < len(to_local)), to_local[np.clip(gi, 0, max(len(to_local) - 1, 0))], -1)
    iv = tr.intervals
    if "omp_fork" in t.intervals.columns:  # the recorded enter into a region (a fork's release), same rows
        iv = iv.assign(omp_fork=t.intervals["omp_fork"].to_numpy())
    trace = Trace(iv, conform("messages", None), conform("collectives", None))
    p = _flat(sync_points(trace, lw, _glocs(proc, thr, tr.intervals), roles, regions))
    row = w["row"].to_numpy().astype(np.int64)
    p["wid"] = np.where(p["wid"] >= 0, row[np.maximum(p["wid"], 0)] if len(row) else -1, -1)
    p["seg"] = np.full(len(p["loc"]), _OMP, np.int64)
    p["sub"] = np.arange(len(p["loc"]), dtype=np.int64)
    return p


def _cat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    cols = (*_POINT, "seg", "sub")
    if not parts:
        return {c: np.zeros(0, np.float64 if c in ("time", "release", "wait") else np.int64) for c in cols}
    return {c: np.concatenate([np.asarray(p[c]) for p in parts]) for c in cols}


def merge(points: list[dict[str, np.ndarray]], colls: list[dict[str, Any]], n_locs: int) -> SyncPoints:
    """The whole trace's :class:`~perflow.trace.syncpoints.SyncPoints` from the partitions' points."""
    ginst = np.concatenate([c["ginst"] for c in colls]) if colls else np.zeros(0, np.int64)
    owner = np.concatenate([np.full(len(c["ginst"]), k) for k, c in enumerate(colls)]) if colls else ginst
    local = np.concatenate([np.arange(len(c["ginst"])) for c in colls]) if colls else ginst
    gorder = np.argsort(ginst, kind="stable")  # the groups numbered by instance, as the whole trace's are
    new = [np.full(len(c["ginst"]), -1, np.int64) for c in colls]
    for j, k in enumerate(gorder):
        new[owner[k]][local[k]] = j
    sizes = [np.diff(c["group_off"]) for c in colls]
    glocs = [colls[owner[k]]["group_loc"][colls[owner[k]]["group_off"][local[k]]:][: sizes[owner[k]][local[k]]]
             for k in gorder]  # fmt: skip
    group_loc = np.concatenate(glocs) if glocs else np.zeros(0, np.int64)
    group_off = np.r_[0, np.cumsum([len(x) for x in glocs])].astype(np.int64)
    parts = list(points)
    for c, m in zip(colls, new, strict=True):
        q = {k: c[k] for k in (*_POINT, "seg", "sub")}
        q["group"] = np.where(q["group"] >= 0, m[np.maximum(q["group"], 0)] if len(m) else -1, -1)
        parts.append(q)
    f = _cat(parts)
    order = np.lexsort((f["sub"], f["seg"], f["time"], f["loc"]))
    sloc = f["loc"][order]
    return SyncPoints(
        offsets=np.searchsorted(sloc, np.arange(n_locs + 1)).astype(np.int64),
        time=f["time"][order].astype(np.float64, copy=False),
        release=f["release"][order].astype(np.float64, copy=False),
        wait=f["wait"][order].astype(np.float64, copy=False),
        vertex=f["vertex"][order].astype(np.int64, copy=False),
        wid=f["wid"][order].astype(np.int64, copy=False),
        cls=f["cls"][order].astype(np.int8, copy=False),
        partner=f["partner"][order].astype(np.int64, copy=False),
        group=f["group"][order].astype(np.int64, copy=False),
        group_off=group_off,
        group_loc=group_loc.astype(np.int64, copy=False),
    )


def _rows(w: pd.DataFrame, kinds: tuple[str, ...]) -> pd.DataFrame:
    r = np.flatnonzero(w["kind"].isin(kinds).to_numpy())
    out = _waits_frame(w.iloc[r])
    out["row"] = r
    return out


def program(b: Built, waits: pd.DataFrame, roles: np.ndarray | None = None,
            regions: np.ndarray | None = None) -> SyncPoints:  # fmt: skip
    """The synchronisation points of a built trace given its whole wait table, equal to
    :func:`~perflow.trace.syncpoints.sync_points` of the whole trace (``wid``: rows of ``waits``)."""
    rt, n = b.runtime, b.n_parts
    glocs, _ = global_locations(b)
    proc, thr = glocs.process.astype(np.int64), glocs.thread.astype(np.int64)
    msg = by_process(_rows(waits, (*LS_KINDS, _LSC, "late_receiver")), b.processes, b.assign, n)
    cw = _rows(waits, _COLL_WAITS)
    owner = cw["instance"].to_numpy().astype(np.int64) % n
    cws = [cw.iloc[np.flatnonzero(owner == j)].reset_index(drop=True) for j in range(n)]
    pts, _ = part_traces(b)
    refs = list(rt.map(message_points, Each(pts), Each(msg), proc, thr))
    cin = rt.exchange(rt.map(coll_outbox, Each(b.tables), n), "collective_rows")
    crefs = rt.map(collective_points, Each(cin), Each(cws), b.defs.comms, proc, thr)
    if roles is not None and regions is not None:
        omp = by_process(_rows(waits, _OMP_WAITS), b.processes, b.assign, n)
        refs += rt.map(omp_points, Each(part_views(b)), Each(b.tables), Each(omp), proc, thr, roles, regions)
    got = rt.gather([*refs, *crefs])
    return merge(got[: len(refs)], got[len(refs) :], len(glocs))
