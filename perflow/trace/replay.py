"""Ideal-network replay of a trace: the runtime the run would have with instantaneous communication.

The replay keeps each location's computation, in program order and with its
measured durations, and lets every MPI operation take no time except waiting
for what it depends on:

* a receive completes once its matching send has been issued (in the replay);
* a synchronous send, and a send completed in a blocking call that left
  after its receive was posted (``late_receiver="blocking"``, the default, as
  the wait states count Late Receiver), completes once its matching receive
  has been posted;
* a synchronising collective completes once the participants it depends on
  have arrived: every participant for a barrier or an all-to-all operation and
  for the root of an N-to-1 operation, the root for the other participants of
  a 1-to-N operation, the lower ranks in a scan. A data collective that moves
  no bytes is no synchronisation point (as in :mod:`perflow.trace.collwaits`).

"Computation" is time spent in a vertex that the caller marks useful
(:func:`replay` takes the mask; the POP pass marks everything outside MPI,
OpenMP and threading calls), so the replay's runtime ``T_ideal`` is at least
the largest computation time of a location. Dependencies are replayed in the
order of their real timestamps, and only those the trace shows were honoured
(a message received after it was sent, a participant leaving after the one it
depends on arrived); each replayed event therefore happens no later than its
real counterpart (relative to the start of the window) and ``T_ideal`` is at
most the real runtime. Both bounds hold by construction, which keeps POP's
serialisation and transfer efficiencies within [0, 1].

A time window ``[t0, t1]`` restricts the replay to a region of interest:
every location starts at ideal time 0 at ``t0`` (what happened before is
taken as done), only computation inside the window counts, and the replay
ends at ``t1``. At equal timestamps an operation that issues something (a
send, an arrival at a collective, a posted receive) is replayed before one
that waits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..pag.edges import LATE_RECEIVER_MODES, late_receiver_sends
from ..pag.instances import Trace
from .collwaits import _PATTERNS, _comm_rank
from .flat import FlatTimeline, Locations, flat_timeline, locations, njit
from .waits import WaitSettings

__all__ = ["Replay", "replay", "LATE_RECEIVER_MODES"]

# point kinds of the replay (issuers sort before waiters at equal times)
_SEND, _ARRIVE, _POST = 0, 1, 2  # issue points
_RECV, _COMPLETE, _SSEND = 3, 4, 5  # waiting points
# dependency classes of a collective participant
_NONE, _ALL, _ROOT, _SCAN = 0, 1, 2, 3


@dataclass(frozen=True)
class Replay:
    """Result of :func:`replay`.

    Attributes
    ----------
    t0, t1 : float
        The window replayed (trace time, s); ``runtime = t1 - t0``.
    ideal_runtime : float
        Runtime of the replay: the latest ideal end of a location.
    locations : pandas.DataFrame
        One row per (process, thread): ``process``, ``thread``, ``useful``
        (computation inside the window, s), ``ideal_end`` (when the location
        finishes in the replay, s after ``t0``).
    dependencies : int
        Dependencies the replay carried (messages, synchronous sends, collective participants).
    skipped : int
        Dependencies left out because the trace shows they were not honoured (clock violations).
    """

    t0: float
    t1: float
    ideal_runtime: float
    locations: pd.DataFrame
    dependencies: int
    skipped: int

    @property
    def runtime(self) -> float:
        """Length of the window (s)."""
        return self.t1 - self.t0


@njit
def _useful_at(time, cum, slot_useful, lo, hi, t):  # type: ignore[no-untyped-def]
    """Computation time of one location (events ``lo:hi``) before time ``t``."""
    if hi <= lo or t <= time[lo]:
        return 0.0
    a = lo
    b = hi
    while a < b:  # first event after t
        m = (a + b) >> 1
        if time[m] <= t:
            a = m + 1
        else:
            b = m
    k = a - 1
    if k >= hi - 1:
        return cum[hi - 1]
    return cum[k] + (t - time[k]) * slot_useful[k]


@njit
def _run(  # type: ignore[no-untyped-def]
    ptime,
    pkind,
    ploc,
    pref,
    time,
    cum,
    slot_useful,
    offsets,
    t0,
    t1,
    n_msg,
    coll_inst,
    coll_class,
    coll_rank,
    members,
    inst_start,
    root_row,
):
    L = offsets.shape[0] - 1
    last_ideal = np.zeros(L)
    last_u = np.zeros(L)
    for q in range(L):
        last_u[q] = _useful_at(time, cum, slot_useful, offsets[q], offsets[q + 1], t0)
    sent = np.full(n_msg, -1.0)  # ideal issue time of each message's send, -1 before it is replayed
    posted = np.full(n_msg, -1.0)
    n_coll = coll_inst.shape[0]
    arrived = np.full(n_coll, -1.0)
    n_inst = inst_start.shape[0] - 1
    inst_max = np.full(max(n_inst, 1), -1.0)
    carried = 0
    skipped = 0
    for i in range(ptime.shape[0]):
        t = ptime[i]
        if t > t1:
            break
        loc = ploc[i]
        tc = max(t, t0)
        u = _useful_at(time, cum, slot_useful, offsets[loc], offsets[loc + 1], tc)
        ideal = last_ideal[loc] + (u - last_u[loc])
        k = pkind[i]
        r = pref[i]
        if k == _SEND:
            sent[r] = ideal
        elif k == _POST:
            posted[r] = ideal
        elif k == _ARRIVE:
            arrived[r] = ideal
            g = coll_inst[r]
            if ideal > inst_max[g]:
                inst_max[g] = ideal
        elif k == _RECV:
            if sent[r] >= 0.0:
                ideal = max(ideal, sent[r])
                carried += 1
            else:
                skipped += 1
        elif k == _SSEND:
            if posted[r] >= 0.0:
                ideal = max(ideal, posted[r])
                carried += 1
            else:
                skipped += 1
        else:  # collective completion
            c = coll_class[r]
            g = coll_inst[r]
            if c == _ALL:
                ideal = max(ideal, inst_max[g])
                carried += 1
            elif c == _ROOT:
                rr = root_row[g]
                if rr >= 0 and arrived[rr] >= 0.0:
                    ideal = max(ideal, arrived[rr])
                    carried += 1
                else:
                    skipped += 1
            elif c == _SCAN:
                for q in range(inst_start[g], inst_start[g + 1]):
                    j = members[q]
                    if coll_rank[j] < coll_rank[r] and arrived[j] >= 0.0:
                        ideal = max(ideal, arrived[j])
                carried += 1
        last_ideal[loc] = ideal
        last_u[loc] = u
    ends = np.zeros(L)
    useful = np.zeros(L)
    for q in range(L):
        u1 = _useful_at(time, cum, slot_useful, offsets[q], offsets[q + 1], t1)
        ends[q] = last_ideal[q] + (u1 - last_u[q])
        useful[q] = u1 - _useful_at(time, cum, slot_useful, offsets[q], offsets[q + 1], t0)
    return ends, useful, carried, skipped


def collective_classes(trace: Trace) -> tuple[np.ndarray, ...]:
    """Per collective row: instance number, dependency class, rank in its communicator; then the rows
    grouped by instance (``members``), where each instance starts in ``members``, and its root row."""
    c0 = trace.collectives
    n = len(c0)
    if not n:
        z = np.zeros(0, np.int64)
        return z, z, z, z, np.zeros(1, np.int64), z
    members = np.argsort(c0["instance"].to_numpy(), kind="stable").astype(np.int64)
    c = c0.iloc[members]
    inst = c["instance"].to_numpy().astype(np.int64)
    proc = c["process"].to_numpy().astype(np.int64)
    op = c["op"].to_numpy().astype(np.int64)
    pat = np.where((op >= 0) & (op < len(_PATTERNS)), _PATTERNS[np.clip(op, 0, len(_PATTERNS) - 1)], -1)
    first = np.r_[True, inst[1:] != inst[:-1]]
    starts = np.flatnonzero(first)
    gid = np.cumsum(first) - 1
    moved = np.add.reduceat((c["sent"].to_numpy() + c["received"].to_numpy()).astype(np.float64), starts)
    sync = (pat == 0) | ((pat > 0) & (moved[gid] > 0))
    root = c["root"].to_numpy().astype(np.int64)
    is_root = (root >= 0) & (proc == root)
    rows = np.arange(n)
    rc = np.where(is_root, rows, n)
    root_row = np.minimum.reduceat(rc, starts)
    root_row = np.where(root_row < n, members[np.minimum(root_row, n - 1)], -1)
    cls = np.full(n, _NONE, dtype=np.int64)
    cls[sync & ((pat == 0) | (pat == 1))] = _ALL
    cls[sync & (pat == 2) & ~is_root] = _ROOT
    cls[sync & (pat == 3) & is_root] = _ALL
    cls[sync & (pat == 4)] = _SCAN
    rank = _comm_rank(trace, c["comm"].to_numpy().astype(np.int64), proc)
    back = np.empty(n, np.int64)  # from the grouped order back to table rows
    back[members] = np.arange(n)
    return (
        gid[back].astype(np.int64),
        cls[back],
        rank[back].astype(np.int64),
        members,
        np.r_[starts, n].astype(np.int64),
        root_row.astype(np.int64),
    )


def replay_points(
    trace: Trace, late_receiver: str, locs: Locations | None = None, names: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """The replay's points (time, kind, location, reference), sorted by time with issuers first.

    The sends that wait for their receive to be posted are those of the wait
    states (:func:`perflow.pag.edges.late_receiver_sends`; ``names``: the vertex names).
    """
    locs = locs if locs is not None else locations(trace)
    m = trace.messages
    times, kinds, locs_, refs = [], [], [], []

    def add(t: np.ndarray, kind: int, loc: np.ndarray, ref: np.ndarray) -> None:
        ok = loc >= 0
        times.append(np.asarray(t, np.float64)[ok])
        kinds.append(np.full(int(ok.sum()), kind, np.int64))
        locs_.append(loc[ok].astype(np.int64))
        refs.append(ref[ok].astype(np.int64))

    if len(m):
        rows = np.arange(len(m))
        sloc = locs.lookup(m["send_process"].to_numpy(), m["send_thread"].to_numpy())
        rloc = locs.lookup(m["recv_process"].to_numpy(), m["recv_thread"].to_numpy())
        add(m["send_time"].to_numpy(), _SEND, sloc, rows)
        add(m["recv_time"].to_numpy(), _RECV, rloc, rows)
        sel = late_receiver_sends(trace, names, late_receiver)
        if sel.any():
            sc = m["send_complete_interval"].to_numpy().astype(np.int64)
            rq = m["recv_post_interval"].to_numpy().astype(np.int64)
            iv = trace.intervals
            enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
            # a synchronous send always waits for the posted receive; another blocking send only where the
            # trace shows it did (it left after the receive was posted: Late Receiver by timing)
            k = np.flatnonzero(sel)
            k = k[(m["mode"].to_numpy()[k] == 1) | (leave[sc[k]] > enter[rq[k]])]
            add(enter[rq[k]], _POST, rloc[k], k)
            add(leave[sc[k]], _SSEND, sloc[k], k)
    c = trace.collectives
    if len(c):
        cloc = locs.lookup(c["process"].to_numpy(), c["thread"].to_numpy())
        rows = np.arange(len(c))
        add(c["begin"].to_numpy(), _ARRIVE, cloc, rows)
        add(c["end"].to_numpy(), _COMPLETE, cloc, rows)
    if not times:
        z = np.zeros(0, np.int64)
        return np.zeros(0), z, z, z
    t = np.concatenate(times)
    k = np.concatenate(kinds)
    lo = np.concatenate(locs_)
    r = np.concatenate(refs)
    issuer = (k >= _RECV).astype(np.int64)
    order = np.lexsort((issuer, t))
    return t[order], k[order], lo[order], r[order]


def replay(
    trace: Trace,
    useful_vertex: np.ndarray,
    *,
    window: tuple[float, float] | None = None,
    late_receiver: str = WaitSettings.late_receiver,
    locs: Locations | None = None,
    flat: FlatTimeline | None = None,
    points: tuple[np.ndarray, ...] | None = None,
    collectives: tuple[np.ndarray, ...] | None = None,
) -> Replay:
    """Replay ``trace`` on an ideal network (see the module docstring).

    Parameters
    ----------
    trace : Trace
    useful_vertex : numpy.ndarray of bool
        Per top-down vertex: is its exclusive time computation. Time outside
        every region is not.
    window : (float, float), optional
        The region of interest ``[t0, t1]`` in trace time (default: the trace's span).
    late_receiver : {"blocking", "synchronous", "none"}
        Which sends wait for their receive to be posted (as in the wait
        states: :func:`perflow.pag.edges.late_receiver_sends`).
    locs, flat, points, collectives : optional
        ``locations(trace)``, ``flat_timeline(trace)``,
        ``replay_points(trace, late_receiver)`` and
        ``collective_classes(trace)`` when already at hand (a PAG caches them:
        :data:`perflow.trace.analyses.REPLAY_POINTS`, ...).

    Returns
    -------
    Replay
    """
    if late_receiver not in LATE_RECEIVER_MODES:
        raise ValueError(f"late_receiver must be one of {LATE_RECEIVER_MODES}, not {late_receiver!r}")
    useful_vertex = np.asarray(useful_vertex, dtype=bool)
    span = trace.span
    t0, t1 = (float(span[0]), float(span[1])) if window is None else (float(window[0]), float(window[1]))
    if not t1 >= t0:
        raise ValueError(f"the replay window ends before it starts: [{t0}, {t1}]")
    locs = locs if locs is not None else locations(trace)
    flat = flat if flat is not None else flat_timeline(trace, locs)
    n = len(flat.time)
    vtx = flat.vertex
    inside = (vtx >= 0) & (vtx < len(useful_vertex))
    slot_useful = np.zeros(n)
    slot_useful[inside] = useful_vertex[vtx[inside]]
    last = flat.offsets[1:] - 1
    slot_useful[last[last >= 0]] = 0.0  # no slot after a location's last event
    dur = np.r_[np.diff(flat.time), 0.0] if n else np.zeros(0)
    inc = np.maximum(dur, 0.0) * slot_useful
    before = np.cumsum(inc) - inc  # useful time before each event, from the first event of the trace
    base = np.r_[before, 0.0][flat.offsets[:-1]]
    cum = before - np.repeat(base, np.diff(flat.offsets))  # ... from the first event of its location
    pts = points if points is not None else replay_points(trace, late_receiver, locs)
    coll = collectives if collectives is not None else collective_classes(trace)
    ends, useful, carried, skipped = _run(
        *pts, flat.time, cum, slot_useful, flat.offsets.astype(np.int64), t0, t1, len(trace.messages), *coll
    )
    table = pd.DataFrame(
        {"process": locs.process, "thread": locs.thread, "useful": useful, "ideal_end": ends}, copy=False
    )
    return Replay(t0, t1, float(ends.max()) if len(ends) else 0.0, table, int(carried), int(skipped))
