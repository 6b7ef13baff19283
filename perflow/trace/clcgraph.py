"""The happens-before graph of a raw trace, for the controlled logical clock (:mod:`perflow.trace.clc`).

Every event of a :class:`~perflow.trace.raw.RawTrace` (all its tables) gets
one place in its location's stream (:func:`event_order`: region events by
their index, the other events before the region event their ``pos`` names).
Dependencies between locations are *groups*: an event that ends a group
(``out``) happened after every event that starts it (``in``):

* a message: its send (MpiSend, MpiIsend) before its receive (MpiRecv, the
  MpiIrecv completion), matched as the build matches them (FIFO per
  communicator, source, destination and tag, in posting order);
* a collective instance (the k-th collective on a communicator of each
  member, its MpiCollectiveBegin/End records): every BEGIN before every END
  for barriers and all-to-all operations (and communicator creation); the
  root's BEGIN before the others' ENDs for 1-to-N operations; every BEGIN
  before the root's END for N-to-1 operations; in a scan, the BEGINs of ranks
  up to ``k`` (before ``k`` for MPI_Exscan) before rank ``k``'s END;
* MPI_Init, MPI_Init_thread and MPI_Finalize, world barriers: every enter
  before every leave;
* an OpenMP team: the fork before each worker's ThreadTeamBegin, each
  worker's ThreadTeamEnd before the join.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kinds import CollectiveOp, ThreadEv
from .collmatch import collective_begin_pairs, collective_seq
from .match import nth_pairs, p2p_records, p2p_threaded, record_key, to_world
from .omptree import _last_fork_before
from .raw import TABLE_SCHEMAS, RawTrace
from .records import _fifo

__all__ = ["EventOrder", "event_order", "Groups", "groups", "TABLES"]

#: the event tables, in the order their events are numbered
TABLES = tuple(TABLE_SCHEMAS)


@dataclass(frozen=True)
class EventOrder:
    """Every event of a raw trace in stream order per location.

    Attributes
    ----------
    order : numpy.ndarray
        Event ids (see ``start``) in (location, stream) order.
    offsets : numpy.ndarray
        Events of location ``l`` are ``order[offsets[l]:offsets[l + 1]]``.
    start : dict of str to int
        First event id of each table (its rows are consecutive ids from there).
    time : numpy.ndarray
        Time of every event id.
    """

    order: np.ndarray
    offsets: np.ndarray
    start: dict[str, int]
    time: np.ndarray


def event_order(raw: RawTrace) -> EventOrder:
    """Number every event of ``raw`` and order them per location (see the module docstring)."""
    locs, prims, times, start = [], [], [], {}
    n = 0
    for name in TABLES:
        t = getattr(raw, name)
        k = len(t["location"])
        start[name] = n
        n += k
        locs.append(t["location"].astype(np.int64))
        times.append(t["time"].astype(np.float64))
        # region events sit at 2i + 1, the other events just before the region event their pos names
        prims.append(2 * np.arange(k, dtype=np.int64) + 1 if name == "region_events" else 2 * t["pos"].astype(np.int64))
    loc, prim, time = (np.concatenate(a) for a in (locs, prims, times))
    # one integer key; ties (events of several tables before one region event) keep table order, each table
    # its stream order (a stable sort of nearly sorted runs)
    order = np.argsort(loc * (1 << 42) + prim, kind="stable")
    L = len(raw.locations)
    offsets = np.searchsorted(loc[order], np.arange(L + 1)).astype(np.int64)
    return EventOrder(order.astype(np.int64), offsets, start, time)


@dataclass(frozen=True)
class Groups:
    """Happens-before groups: each ``out`` event follows every ``in`` event of its group (CSR lists)."""

    in_off: np.ndarray
    in_ev: np.ndarray
    out_off: np.ndarray
    out_ev: np.ndarray
    kind: np.ndarray  # 0 message, 1 collective, 2 thread team

    def __len__(self) -> int:
        return len(self.in_off) - 1


class _Builder:
    def __init__(self) -> None:
        self.ins: list[np.ndarray] = []
        self.outs: list[np.ndarray] = []
        self.gin: list[np.ndarray] = []
        self.gout: list[np.ndarray] = []
        self.kinds: list[np.ndarray] = []
        self.n = 0

    def add(self, gin: np.ndarray, ins: np.ndarray, gout: np.ndarray, outs: np.ndarray, ng: int, kind: int) -> None:
        """Groups ``0..ng-1`` (local numbers): ``ins[i]`` starts group ``gin[i]``, ``outs[i]`` ends ``gout[i]``."""
        if ng <= 0:
            return
        self.gin.append(np.asarray(gin, np.int64) + self.n)
        self.ins.append(np.asarray(ins, np.int64))
        self.gout.append(np.asarray(gout, np.int64) + self.n)
        self.outs.append(np.asarray(outs, np.int64))
        self.kinds.append(np.full(ng, kind, np.int8))
        self.n += ng

    def done(self) -> Groups:
        def csr(g: list[np.ndarray], e: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
            gg = np.concatenate(g) if g else np.zeros(0, np.int64)
            ee = np.concatenate(e) if e else np.zeros(0, np.int64)
            o = np.argsort(gg, kind="stable")
            return np.r_[0, np.cumsum(np.bincount(gg, minlength=self.n))].astype(np.int64), ee[o]

        io, ie = csr(self.gin, self.ins)
        oo, oe = csr(self.gout, self.outs)
        kinds = np.concatenate(self.kinds) if self.kinds else np.zeros(0, np.int8)
        return Groups(io, ie, oo, oe, kinds)


def _messages(raw: RawTrace, eo: EventOrder, b: _Builder) -> None:
    ev = raw.p2p_events
    n = len(ev["location"])
    if not n:
        return
    none = np.full(n, -1, dtype=np.int64)
    rec = p2p_records(raw, none, np.zeros(0, np.int64), np.zeros(0, np.int64), p2p_threaded(raw))
    s, r = rec.s, rec.r
    ks = _fifo(rec.comm[s], rec.proc[s], rec.peer[s], rec.tag[s], rec.order_s)
    kr = _fifo(rec.comm[r], rec.peer[r], rec.proc[r], rec.tag[r], rec.order_r)
    key = record_key(
        np.r_[rec.comm[s], rec.comm[r]], np.r_[rec.proc[s], rec.peer[r]], np.r_[rec.peer[s], rec.proc[r]],
        np.r_[rec.tag[s], rec.tag[r]],
    )  # fmt: skip
    kmax = int(max(ks.max(initial=0), kr.max(initial=0))) + 1
    full = key * kmax + np.r_[ks, kr]
    j = nth_pairs(full[len(s) :], full[: len(s)])  # each receive's send
    ok = np.flatnonzero(j >= 0)
    base = eo.start["p2p_events"]
    g = np.arange(len(ok))
    b.add(g, base + s[j[ok]], g, base + r[ok], len(ok), 0)


def _collectives(raw: RawTrace, eo: EventOrder, b: _Builder) -> None:
    ends, begins, j, order = collective_begin_pairs(raw)
    if not len(ends):
        return
    ev = raw.coll_events
    loc = ev["location"].astype(np.int64)
    proc = raw.locations["process"].to_numpy(dtype=np.int64)[loc[ends]]
    comm = ev["comm"][ends].astype(np.int64)
    begin_t = np.where(j >= 0, ev["time"][begins[np.maximum(j, 0)]], ev["time"][ends])
    seq = collective_seq(raw, ends, order, begin_t)
    inst_key = comm * (1 << 32) + seq
    uk, inst = np.unique(inst_key, return_inverse=True)
    inst = inst.ravel()
    has_b = j >= 0
    base = eo.start["coll_events"]
    bev = np.where(has_b, base + begins[np.maximum(j, 0)], base + ends)  # no BEGIN: the END starts it too
    eev = base + ends
    op = ev["op"][ends].astype(np.int64)
    root_local = ev["root"][ends].astype(np.int64)
    root = np.where(root_local >= 0, to_world(raw, comm, np.maximum(root_local, 0)), -1)
    is_root = (root >= 0) & (proc == root)
    one2n = np.isin(op, [CollectiveOp.BCAST, CollectiveOp.SCATTER, CollectiveOp.SCATTERV])
    n2one = np.isin(op, [CollectiveOp.GATHER, CollectiveOp.GATHERV, CollectiveOp.REDUCE])
    scan = np.isin(op, [CollectiveOp.SCAN, CollectiveOp.EXSCAN])
    # ins: everyone's BEGIN, but only the root's for 1-to-N; outs: everyone's END, but only the root's for N-to-1
    sin = ~scan & (~one2n | is_root)
    sout = ~scan & (~n2one | is_root)
    b.add(inst[sin], bev[sin], inst[sout], eev[sout], len(uk), 1)
    if scan.any():  # rank k waits for the BEGINs of ranks 0..k (0..k-1 for MPI_Exscan): one group per rank
        rank = _comm_rank_of(raw, comm, proc)
        gi, gv, go, gw = [], [], [], []
        ng = 0
        for i in np.unique(inst[scan]).tolist():
            rows = np.flatnonzero(scan & (inst == i))
            excl = op[rows[0]] == CollectiveOp.EXSCAN
            for r in rows.tolist():
                lower = rows[(rank[rows] < rank[r]) | ((rank[rows] == rank[r]) & ~excl)]
                gi.append(np.full(len(lower), ng))
                gv.append(bev[lower])
                go.append([ng])
                gw.append([eev[r]])
                ng += 1
        b.add(np.concatenate(gi), np.concatenate(gv), np.concatenate(go), np.concatenate(gw), ng, 1)


def _comm_rank_of(raw: RawTrace, comm: np.ndarray, proc: np.ndarray) -> np.ndarray:
    rank = proc.copy()
    for cid in np.unique(comm).tolist():
        members = raw.comms.get(int(cid))
        if members is None or not len(members):
            continue
        inv = {int(p): i for i, p in enumerate(np.asarray(members).tolist())}
        sel = comm == cid
        rank[sel] = [inv.get(int(p), int(p)) for p in proc[sel].tolist()]
    return rank


def _init_finalize(raw: RawTrace, eo: EventOrder, b: _Builder) -> None:
    names = raw.regions["name"].astype(str).to_numpy()
    ev = raw.region_events
    base = eo.start["region_events"]
    for group in (("MPI_Init", "MPI_Init_thread"), ("MPI_Finalize",)):
        ids = np.flatnonzero(np.isin(names, group))
        if not len(ids):
            continue
        sel = np.flatnonzero(np.isin(ev["region"], ids))
        enter = sel[ev["kind"][sel] == 0]
        leave = sel[ev["kind"][sel] == 1]
        if not len(enter):
            continue
        # each location's first call: its enter and the next leave of such a region there
        el = ev["location"][enter]
        fe = enter[np.r_[True, el[1:] != el[:-1]]]
        le_loc = ev["location"][leave].astype(np.int64)
        k = np.searchsorted(leave, fe)
        ok = (k < len(leave)) & (le_loc[np.minimum(k, len(leave) - 1)] == ev["location"][fe])
        fe, fl = fe[ok], leave[k[ok]]
        z = np.zeros(len(fe), np.int64)
        b.add(z, base + fe, z, base + fl, 1 if len(fe) else 0, 1)


def _teams(raw: RawTrace, eo: EventOrder, b: _Builder) -> None:
    ev = raw.thread_events
    kind = ev["kind"]
    if not (kind == ThreadEv.FORK).any():
        return
    loc = ev["location"].astype(np.int64)
    proc = raw.locations["process"].to_numpy(dtype=np.int64)[loc]
    forks = np.flatnonzero(kind == ThreadEv.FORK)
    joins = np.flatnonzero(kind == ThreadEv.JOIN)
    jf = nth_pairs(loc[forks], loc[joins])  # non-nested forks and joins pair in order on their thread
    tb = np.flatnonzero(kind == ThreadEv.TEAM_BEGIN)
    te = np.flatnonzero(kind == ThreadEv.TEAM_END)
    k = _last_fork_before(proc[forks], ev["time"][forks], proc[tb], ev["time"][tb])
    ok = (k >= 0) & (loc[forks[np.maximum(k, 0)]] != loc[tb])
    base = eo.start["thread_events"]
    tb, k = tb[ok], k[ok]
    g = np.arange(len(forks))
    b.add(g, base + forks, k, base + tb, len(forks), 2)
    ends = nth_pairs(loc[tb], loc[te])  # a worker's k-th team begin and end
    okj = (ends >= 0) & (jf[k] >= 0)
    gj = np.arange(len(forks))
    b.add(k[okj], base + te[ends[okj]], gj[jf >= 0], base + joins[jf[jf >= 0]], len(forks), 2)


def groups(raw: RawTrace, eo: EventOrder) -> Groups:
    """The happens-before groups of ``raw`` (see the module docstring)."""
    b = _Builder()
    _messages(raw, eo, b)
    _collectives(raw, eo, b)
    _init_finalize(raw, eo, b)
    _teams(raw, eo, b)
    return b.done()
