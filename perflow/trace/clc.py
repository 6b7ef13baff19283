"""Timestamp correction: the controlled logical clock (CLC), after Rabenseifner and Becker, Rabenseifner, Wolf.

Clocks of different nodes drift; a trace then holds messages received before
they were sent, collectives left before the last process entered them:
*clock-condition violations*. The wait-state analysis cannot use such a
dependency (it drops the message), so the waiting it shows is wrong. The CLC
moves timestamps forward, as little as it can, until every dependency of the
happens-before graph (:mod:`perflow.trace.clcgraph`: messages, collectives,
MPI_Init/Finalize, OpenMP forks and joins) holds again, keeping the lengths of
the local intervals where it can:

* **forward amortisation**: events are visited in happens-before order; each
  event's corrected time is ``C_i = max(t_i, C_{i-1} + gamma (t_i - t_{i-1}),
  R_i + latency)`` with ``R_i`` the corrected time of the latest event it
  depends on (the send of a receive, the begins of a collective's end). After
  a jump, the clock runs slightly slower than the original one (``gamma`` just
  below 1) until the two meet again, so the intervals after the jump keep
  their lengths nearly exactly;
* **backward amortisation**: a jump would stretch the one interval before the
  event that jumped; instead the events before it move forward with it, each
  as far as the event after it moved, as long as no dependency breaks (a send
  never moves past what its receivers can take, a collective's begin past its
  earliest end): a clock that ran behind is set forward as a whole, and the
  local intervals keep their lengths everywhere but where a dependency forbids.
  The sweep is repeated until nothing moves, so a lag that only a late
  dependency reveals reaches back past the sends and collectives before it;
  the threads of a process share its clock, so a fork and a worker's team end
  take the shift of the team begins and the join that follow them.

:func:`correct` returns the corrected raw trace and a :class:`ClockReport`
(violations before and after, the largest and the mean shift). The build
applies it according to the ``clock_correction`` setting
(:func:`perflow.trace.build.build_pag`, every trace reader, ``perflow run /
info / convert --clock-correction``, :func:`clock_correction` around any
code that reads traces): ``"auto"`` (default) corrects a trace that has
violations, ``"on"`` always, ``"off"`` never.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._jit import njit
from ..kinds import CollectiveOp
from .clcgraph import TABLES, EventOrder, Groups, event_order, groups
from .clcmode import MODES, clock_correction, mode  # the mode lives apart (no numpy)
from .raw import RawTrace

__all__ = [
    "MODES",
    "ClockReport",
    "correct",
    "violations",
    "built_violations",
    "collective_extremes",
    "early_collectives",
    "clock_correction",
    "mode",
    "skew_clock",
]

log = logging.getLogger(__name__)

#: the forward amortisation's slope after a jump (Scalasca's first pass uses the same)
GAMMA = 0.99999
#: at most this many backward-amortisation sweeps (each carries shifts one dependency further back)
_SWEEPS = 64


@dataclass(frozen=True)
class ClockReport:
    """What a timestamp correction found and did.

    Attributes
    ----------
    violations : int
        Dependencies that the original timestamps violated (``messages`` + ``collectives``).
    messages, collectives : int
        Messages received before they were sent; collective instances left by
        a participant before another entered (and OpenMP team events out of order).
    remaining : int
        Violations after the correction (0 unless the trace's dependencies form a cycle).
    max_shift, mean_shift : float
        The largest and the mean shift of an event (s).
    """

    violations: int
    messages: int
    collectives: int
    remaining: int
    max_shift: float
    mean_shift: float

    def as_dict(self) -> dict[str, Any]:
        """The report as a plain dict (for ``pag.attrs``)."""
        return dataclasses.asdict(self)


def _violated(g: Groups, t: np.ndarray) -> tuple[int, int]:
    """(messages, other groups) with an out event earlier than one of its in events."""
    n = len(g)
    if not n:
        return 0, 0
    gi = np.repeat(np.arange(n), np.diff(g.in_off))
    go = np.repeat(np.arange(n), np.diff(g.out_off))
    latest = np.full(n, -np.inf)
    np.maximum.at(latest, gi, t[g.in_ev])
    earliest = np.full(n, np.inf)
    np.minimum.at(earliest, go, t[g.out_ev])
    bad = earliest < latest
    return int((bad & (g.kind == 0)).sum()), int((bad & (g.kind != 0)).sum())


def violations(raw: RawTrace) -> tuple[int, int]:
    """The clock-condition violations of a raw trace: (messages, collectives and thread teams)."""
    eo = event_order(raw)
    return _violated(groups(raw, eo), eo.time)


#: collective operations whose members cannot leave before the last one entered
SYNC_OPS = (CollectiveOp.BARRIER, CollectiveOp.INIT, CollectiveOp.FINALIZE, CollectiveOp.ALLREDUCE,
            CollectiveOp.ALLGATHER, CollectiveOp.ALLTOALL)  # fmt: skip


def built_violations(trace: Any) -> int:
    """Violations a built trace shows: messages received before sent, synchronising collectives left early.

    A cheap test on the tables the build made (no matching), to decide
    whether ``clock_correction="auto"`` corrects the trace.
    """
    m = trace.messages
    n = int(m["clock_violation"].to_numpy().sum()) if len(m) else 0
    return n + early_collectives([collective_extremes(trace.collectives)])


def collective_extremes(c: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per synchronising collective instance of some collective rows: (instance, latest begin, earliest end).

    The partial of :func:`early_collectives`: a trace in partitions computes
    one per partition.
    """
    if not len(c):
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    sync = np.isin(c["op"].to_numpy(), SYNC_OPS)
    return _extremes(c["instance"].to_numpy()[sync], c["begin"].to_numpy()[sync], c["end"].to_numpy()[sync])


def early_collectives(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> int:
    """Synchronising collective instances that a member left before another entered, from their extremes."""
    parts = [p for p in parts if len(p[0])]
    if not parts:
        return 0
    if len(parts) > 1:
        parts = [_extremes(*(np.concatenate([p[i] for p in parts]) for i in range(3)))]
    _, latest, first_end = parts[0]
    return int((first_end < latest).sum())


def _extremes(inst: np.ndarray, begin: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    u, k = np.unique(inst, return_inverse=True)
    k = k.ravel()
    latest = np.full(len(u), -np.inf)
    np.maximum.at(latest, k, begin)
    first_end = np.full(len(u), np.inf)
    np.minimum.at(first_end, k, end)
    return u, latest, first_end


@njit
def _forward(order, offsets, time, dep_off, dep_grp, in_grp_off, in_grp, remaining, gamma, latency):  # type: ignore[no-untyped-def]
    """Corrected times in happens-before order (Kahn's algorithm over locations); -inf where never reached."""
    n = time.shape[0]
    nloc = offsets.shape[0] - 1
    ng = remaining.shape[0]
    C = np.full(n, -np.inf)
    jump = np.zeros(n)
    gval = np.full(ng, -np.inf)
    left = remaining.copy()
    waiting = np.full(ng, -1, np.int64)  # head of the list of locations blocked on a group
    nxt = np.full(nloc, -1, np.int64)
    pos = offsets[:-1].copy()
    queue = np.empty(nloc + ng + 1, np.int64)  # a location is queued when unblocked: at most once per group
    qh = 0
    qt = 0
    for loc in range(nloc):
        queue[qt] = loc
        qt += 1
    while qh < qt:
        loc = queue[qh % queue.shape[0]]
        qh += 1
        while pos[loc] < offsets[loc + 1]:
            q = pos[loc]
            e = order[q]
            blocked = -1
            for k in range(dep_off[e], dep_off[e + 1]):
                if left[dep_grp[k]] > 0:
                    blocked = dep_grp[k]
                    break
            if blocked >= 0:
                nxt[loc] = waiting[blocked]
                waiting[blocked] = loc
                break
            if q > offsets[loc]:
                p = order[q - 1]
                c = max(time[e], C[p] + gamma * (time[e] - time[p]), C[p])
            else:
                c = time[e]
            internal = c
            for k in range(dep_off[e], dep_off[e + 1]):
                c = max(c, gval[dep_grp[k]] + latency)
            C[e] = c
            jump[e] = c - internal
            for k in range(in_grp_off[e], in_grp_off[e + 1]):
                g = in_grp[k]
                if c > gval[g]:
                    gval[g] = c
                left[g] -= 1
                if left[g] == 0:
                    w = waiting[g]
                    while w >= 0:
                        queue[qt % queue.shape[0]] = w
                        qt += 1
                        w2 = nxt[w]
                        nxt[w] = -1
                        w = w2
                    waiting[g] = -1
            pos[loc] += 1
    return C, jump


@njit
def _backward(order, offsets, time, C, bound, carry):  # type: ignore[no-untyped-def]
    """Carry each location's shifts backwards: an event moves as far as the one after it, up to its bound.

    Sweeping from a location's last event to its first, ``C_r = max(C_r,
    min(t_r + max(shift_{r+1}, carry_r), bound_r))`` with ``bound_r`` the
    latest time event ``r`` may take before a dependency on it breaks
    (infinite for events no other location depends on; compared as a time, so
    rounding never carries an event past it) and ``carry_r`` a shift it takes
    from another thread of its process (see :func:`_amortise_backward`): the
    intervals before a jump keep their lengths, the stretch moves as a whole.
    """
    for loc in range(offsets.shape[0] - 1):
        lo = offsets[loc]
        hi = offsets[loc + 1]
        nxt = -np.inf
        for q in range(hi - 1, lo - 1, -1):
            e = order[q]
            c = min(time[e] + max(nxt, carry[e]), bound[e])
            if c > C[e]:
                C[e] = c
            nxt = C[e] - time[e]
    return C


def _amortise_backward(eo: EventOrder, g: Groups, gout: np.ndarray, gin: np.ndarray, C: np.ndarray,
                       latency: float) -> np.ndarray:  # fmt: skip
    """Backward amortisation, swept until no event moves.

    Each sweep lets the events others depend on move up to the out events of
    their groups as the previous sweep left them, so a jump found late (a rank
    whose lagging clock only a later collective reveals) reaches back past the
    sends and collectives before it as far as the other ranks allow. The
    threads of a process share one clock: an event that starts an OpenMP team
    group (a fork, a worker's team end) also takes the shift of the events
    that end it (the workers' team begins, the join), so a master set forward
    inside or after a parallel region takes its workers along. Events only
    move forward and each bound comes from out events that can only have
    moved forward, so every dependency still holds after every sweep.
    """
    n = len(C)
    if not len(g):
        return _backward(eo.order, eo.offsets, eo.time, C, np.full(n, np.inf), np.full(n, -np.inf))
    team_in = g.kind[gin] == 2
    for _ in range(_SWEEPS):
        # how far each event that others depend on may move: to the earliest of its groups' out events, less latency
        first_out = np.full(len(g), np.inf)
        np.minimum.at(first_out, gout, C[g.out_ev])
        bound = np.full(n, np.inf)
        np.minimum.at(bound, g.in_ev, first_out[gin] - latency)
        carry = np.full(n, -np.inf)
        if team_in.any():
            out_shift = np.full(len(g), -np.inf)
            np.maximum.at(out_shift, gout, C[g.out_ev] - eo.time[g.out_ev])
            np.maximum.at(carry, g.in_ev[team_in], out_shift[gin[team_in]])
        new = _backward(eo.order, eo.offsets, eo.time, C.copy(), bound, carry)
        if np.array_equal(new, C):
            return new
        C = new
    log.info("backward amortisation stopped after %d sweeps with events still moving", _SWEEPS)
    return C


def _csr_of_events(n: int, ev: np.ndarray, grp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    o = np.argsort(ev, kind="stable")
    return np.r_[0, np.cumsum(np.bincount(ev, minlength=n))].astype(np.int64), grp[o].astype(np.int64)


def correct(raw: RawTrace, *, gamma: float = GAMMA, latency: float = 0.0) -> tuple[RawTrace, ClockReport]:
    """Correct the timestamps of ``raw`` with the controlled logical clock (see the module docstring).

    Returns a new raw trace (the input is not changed) and the report.
    """
    eo = event_order(raw)
    g = groups(raw, eo)
    n = len(eo.time)
    msgs, colls = _violated(g, eo.time)
    ng = len(g)
    gout = np.repeat(np.arange(ng), np.diff(g.out_off))
    gin = np.repeat(np.arange(ng), np.diff(g.in_off))
    dep_off, dep_grp = _csr_of_events(n, g.out_ev, gout)
    in_off, in_grp = _csr_of_events(n, g.in_ev, gin)
    remaining = np.diff(g.in_off).astype(np.int64)
    C, _ = _forward(eo.order, eo.offsets, eo.time, dep_off, dep_grp, in_off, in_grp, remaining, gamma, latency)
    unreached = ~np.isfinite(C)
    if unreached.any():  # a dependency cycle (an inconsistent trace): leave those events alone
        log.warning("%s: %d events lie on a dependency cycle; their timestamps are not corrected",
                    raw.attrs.get("source", "trace"), int(unreached.sum()))  # fmt: skip
        C[unreached] = eo.time[unreached]
    C = _amortise_backward(eo, g, gout, gin, C, latency)
    shift = C - eo.time
    tables = {}
    for name in TABLES:
        t = dict(getattr(raw, name))
        k = len(t["time"])
        if k:
            t["time"] = C[eo.start[name] : eo.start[name] + k].astype(np.float64)
        tables[name] = t
    out = dataclasses.replace(raw, **tables)
    rm, rc = _violated(g, C)
    rep = ClockReport(
        msgs + colls, msgs, colls, rm + rc, float(shift.max(initial=0.0)), float(shift.mean()) if n else 0.0
    )
    return out, rep


def skew_clock(raw: RawTrace, process: int, offset: float, drift: float = 0.0) -> RawTrace:
    """A copy of ``raw`` whose process ``process`` read a skewed clock: ``t + offset + drift * t`` (s, s/s).

    Every location of the process (its threads share the clock) and every
    event table is shifted; for testing and benchmarking the correction on a
    trace made inconsistent on purpose.
    """
    locs = np.flatnonzero(raw.locations["process"].to_numpy() == process)
    if not len(locs):
        raise ValueError(f"skew_clock: the trace has no process {process}")
    tables = {}
    for name in TABLES:
        t = dict(getattr(raw, name))
        if len(t["time"]):
            sel = np.isin(t["location"], locs)
            tt = np.array(t["time"], dtype=np.float64)
            tt[sel] += offset + drift * tt[sel]
            t["time"] = tt
        tables[name] = t
    return dataclasses.replace(raw, **tables)
