"""The dependencies a trace replay keeps: issue points, wait points and the waiting they explain.

Every dependency of the recorded run becomes one or more **issue points**
(a location, a trace time, a channel: "this location got here") and **wait
points** (a location, the waiting period ``[a, b]`` it spent in the call, the
channel it waits on, a lag). In the replay (:mod:`perflow.trace.replay`) a
wait point happens at ``max(local, channel + lag)``: ``local`` is where the
location's own work since its previous point brings it (the waiting period
removed, it is recomputed), ``channel`` the latest (for a MIN channel the
earliest) replayed time of the points issued into it. The recorded waiting
period is exactly the time the trace shows the location blocked, so a replay
without changes reproduces every recorded timestamp.

=================================  ===========================================  =================================
dependency                         issue point (source)                         wait point (waiter, ``[a, b]``)
=================================  ===========================================  =================================
message                            enter of the send call ``Es``                call completing the receive:
                                                                                ``[Er, max(Er, min(Es, Lr))]``
rendezvous / synchronous send      enter of the call posting the receive        call completing the send:
                                   ``Erq``                                      ``[Esc, max(Esc, min(Erq, Lsc))]``
barrier, all-to-all, N-to-1 root   each participant's arrival ``A_j``           ``[E_i, max(E_i, max_j A_j)]``
1-to-N non-root                    the root's arrival                           ``[E_i, max(E_i, A_root)]``
scan rank ``k``                    arrivals of ranks below ``k``                ``[E_k, max(E_k, max_{j<k} A_j)]``
OpenMP barrier (explicit/implicit) each thread's enter                          as a barrier
lock acquisition ``k``             release of acquisition ``k - 1``             ``[E, max(E, min(R, L))]``
fork of a parallel region          the master's enter of its instance           a worker's idle time before its
                                                                                instance, lag = start-up delay
join                               each worker's leave of its instance          the master's leave (no waiting)
=================================  ===========================================  =================================

``A_j = min(E_j, begin_j)`` is when a participant arrives (its request, for a
non-blocking collective), as in :mod:`perflow.trace.collwaits`; ``Es`` is the
enter of the send call, as in the Late Sender definition
(:func:`perflow.pag.edges.message_late_sender`). A dependency the trace shows
was not honoured (a message received before it was sent, a participant
leaving before the one it depends on arrived) is left out and counted.

Which sends wait for their receive (``late_receiver``): as the wait states
count Late Receiver (:func:`perflow.pag.edges.late_receiver_sends`:
``"blocking"``, every send completed in a blocking call; ``"synchronous"``,
MPI_Ssend/MPI_Issend; ``"none"``), or ``"auto"``: of the sends completed in a
blocking call, the synchronous ones and those whose size the trace shows to
use the rendezvous protocol (:func:`rendezvous_limit`) -- the replay asks
which sends *would* wait if their receiver were later, not which did.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
import pandas as pd

from ..pag.edges import LATE_RECEIVER_MODES, late_receiver_sends, test_calls
from ..pag.instances import Trace
from .flat import Locations
from .replaycolls import collective_dependencies
from .replaythreads import thread_dependencies

__all__ = [
    "Dependencies",
    "dependencies",
    "protocol_evidence",
    "rendezvous_limit",
    "trace_protocol_evidence",
    "SEND_MODES",
    "ReplayMode",
    "DEFAULT_EAGER_LIMIT",
]

#: Which sends wait for their receive to be posted in a replay: "auto" (by protocol), or as the wait states say.
ReplayMode = Literal["auto", "blocking", "synchronous", "none"]
SEND_MODES: tuple[str, ...] = get_args(ReplayMode)
assert set(SEND_MODES) == {"auto", *LATE_RECEIVER_MODES}
#: Bytes above which ``late_receiver="auto"`` takes a standard send the trace says nothing about as rendezvous.
DEFAULT_EAGER_LIMIT = 65536


@dataclass
class Dependencies:
    """Issue and wait points of a trace (or of some of its locations), in no particular order.

    Channels ``0 .. n_channels - 1`` are global (messages, collectives);
    channels from ``n_channels`` on are this part's own (threads: they never
    leave a process), renumbered when parts are combined.
    """

    iloc: list[np.ndarray] = field(default_factory=list)
    itime: list[np.ndarray] = field(default_factory=list)
    ich: list[np.ndarray] = field(default_factory=list)
    wloc: list[np.ndarray] = field(default_factory=list)
    wa: list[np.ndarray] = field(default_factory=list)
    wb: list[np.ndarray] = field(default_factory=list)
    wch: list[np.ndarray] = field(default_factory=list)
    wlag: list[np.ndarray] = field(default_factory=list)
    n_channels: int = 0
    n_local: int = 0
    min_channels: list[np.ndarray] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    wkind: list[np.ndarray] = field(default_factory=list)
    skipped_kind: list[np.ndarray] = field(default_factory=list)
    skipped_loc: list[np.ndarray] = field(default_factory=list)

    def _code(self, kind: str) -> int:
        if kind not in self.kinds:
            self.kinds.append(kind)
        return self.kinds.index(kind)

    def issue(self, loc: np.ndarray, time: np.ndarray, ch: np.ndarray) -> None:
        ok = loc >= 0
        self.iloc.append(np.asarray(loc, np.int64)[ok])
        self.itime.append(np.asarray(time, np.float64)[ok])
        self.ich.append(np.asarray(ch, np.int64)[ok])

    def wait(self, kind: str, loc: np.ndarray, a: np.ndarray, b: np.ndarray, ch: np.ndarray, lag: np.ndarray | None = None) -> None:  # fmt: skip
        ok = loc >= 0
        n = int(ok.sum())
        self.wloc.append(np.asarray(loc, np.int64)[ok])
        self.wa.append(np.asarray(a, np.float64)[ok])
        self.wb.append(np.asarray(b, np.float64)[ok])
        self.wch.append(np.asarray(ch, np.int64)[ok])
        self.wlag.append(np.zeros(n) if lag is None else np.asarray(lag, np.float64)[ok])
        self.wkind.append(np.full(n, self._code(kind), np.int16))

    def skip(self, kind: str, loc: np.ndarray) -> None:
        """Dependencies of ``kind`` left out, one per waiting location in ``loc`` (-1: not held here)."""
        loc = np.asarray(loc, np.int64)
        loc = loc[loc >= 0]
        if len(loc):
            self.skipped_loc.append(loc)
            self.skipped_kind.append(np.full(len(loc), self._code(kind), np.int16))

    def counts(self, keep: np.ndarray | None = None) -> dict[str, int]:
        """Dependencies per kind, and ``"skipped KIND"`` ones, of the locations ``keep`` marks (default all)."""
        out: dict[str, int] = {}
        for locs, kinds, prefix in ((self.wloc, self.wkind, ""), (self.skipped_loc, self.skipped_kind, "skipped ")):
            if not locs:
                continue
            loc, kind = np.concatenate(locs), np.concatenate(kinds)
            if keep is not None:
                kind = kind[keep[loc]]
            for code, n in zip(*np.unique(kind, return_counts=True), strict=True):
                out[prefix + self.kinds[int(code)]] = int(n)
        return out

    @property
    def skipped(self) -> int:
        """Dependencies left out (untrusted timestamps)."""
        return sum(v for k, v in self.counts().items() if k.startswith("skipped "))

    def arrays(self) -> tuple[np.ndarray, ...]:
        """``(iloc, itime, ich, wloc, wa, wb, wch, wlag)`` as flat arrays."""
        cat = [np.concatenate(x) if x else np.zeros(0, dt) for x, dt in (
            (self.iloc, np.int64), (self.itime, np.float64), (self.ich, np.int64), (self.wloc, np.int64),
            (self.wa, np.float64), (self.wb, np.float64), (self.wch, np.int64), (self.wlag, np.float64))]  # fmt: skip
        return tuple(cat)


def protocol_evidence(
    m: pd.DataFrame, esc: np.ndarray, lsc: np.ndarray, erq: np.ndarray, mixed: np.ndarray | None = None
) -> tuple[int, np.ndarray]:
    """What some messages show of the send protocol: the largest eager size, and the sizes that waited.

    A standard or non-blocking send that completed before its receive was
    posted (``Lsc < Erq``) was eager; one that waited for it -- the receive
    was posted after the call completing the send began, the call left after
    it, and at least half of the call lay before it -- shows rendezvous.
    ``esc``, ``lsc``, ``erq`` (NaN where unknown): enter and leave of the call
    completing the send, enter of the call posting the receive; ``mixed``:
    the call completing the send also completes a receive (an
    MPI_Sendrecv, a Waitall over both), so its waiting says nothing about
    the send.
    """
    nbytes = m["bytes"].to_numpy().astype(np.int64)
    mode = m["mode"].to_numpy()
    ok = np.isfinite(esc) & np.isfinite(lsc) & np.isfinite(erq) & (mode != 1)
    if mixed is not None:
        ok &= ~mixed
    eager = ok & (lsc < erq)
    waited = ok & (erq > esc) & (lsc >= erq) & (erq - esc >= 0.5 * (lsc - esc))
    return (int(nbytes[eager].max()) if eager.any() else -1), np.unique(nbytes[waited])


def rendezvous_limit(evidence: list[tuple[int, np.ndarray]], eager_limit: int = DEFAULT_EAGER_LIMIT) -> int:
    """Bytes above which a standard send is rendezvous, from the :func:`protocol_evidence` of the messages.

    MPI switches protocol at a message size: sizes up to the largest eager one
    are eager; larger ones are rendezvous from the smallest size that waited,
    or, when none did, above ``eager_limit``.
    """
    e_max = max((e for e, _ in evidence), default=-1)
    waited = np.concatenate([w for _, w in evidence]) if evidence else np.zeros(0, np.int64)
    above = waited[waited > e_max]
    return int(above.min()) - 1 if len(above) else max(e_max, int(eager_limit))


def _send_calls(trace: Trace, names: np.ndarray | None, is_test: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per message: can its send wait for the receive (it completes in a blocking call, as the wait states
    count Late Receiver: :func:`perflow.pag.edges.late_receiver_sends`), is it synchronous, ``Esc``, ``Lsc``,
    ``Erq`` (NaN where it cannot wait), the rows of the calls completing the send and posting the receive, and
    whether its waiting says nothing of the protocol (synchronous, or the call also completes a receive)."""
    m = trace.messages
    iv = trace.intervals
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    ri = m["recv_interval"].to_numpy().astype(np.int64)
    sc = m["send_complete_interval"].to_numpy().astype(np.int64)
    rq = m["recv_post_interval"].to_numpy().astype(np.int64)
    cand = late_receiver_sends(trace, names, "blocking", is_test) & (m["send_interval"].to_numpy() >= 0) & (ri >= 0)
    sync = late_receiver_sends(trace, names, "synchronous", is_test) & cand
    esc = np.where(cand, enter[np.maximum(sc, 0)], np.nan)
    lsc = np.where(cand, leave[np.maximum(sc, 0)], np.nan)
    erq = np.where(cand, enter[np.maximum(rq, 0)], np.nan)
    mixed = sync | np.isin(sc, ri[ri >= 0])
    return cand, sync, esc, lsc, erq, sc, rq, mixed


def trace_protocol_evidence(
    trace: Trace, names: np.ndarray | None, senders: np.ndarray | None = None
) -> tuple[int, np.ndarray]:
    """:func:`protocol_evidence` of a trace's messages (those sent by the processes ``senders``, for a part:
    the sender's side sees whether the call completing the send also completed a receive)."""
    m = trace.messages
    if not len(m):
        return -1, np.zeros(0, np.int64)
    _, _, esc, lsc, erq, _, _, mixed = _send_calls(trace, names, test_calls(trace, names))
    if senders is not None:
        mine = np.isin(m["send_process"].to_numpy(), senders)
        m, esc, lsc, erq, mixed = m[mine], esc[mine], lsc[mine], erq[mine], mixed[mine]
    return protocol_evidence(m, esc, lsc, erq, mixed)


def _p2p(d: Dependencies, trace: Trace, locs: Locations, names: np.ndarray | None, late_receiver: str,
         eager_limit: int, rendezvous_above: int | None, own: np.ndarray | None, n_messages: int | None) -> None:  # fmt: skip
    m = trace.messages
    M = len(m) if n_messages is None else int(n_messages)
    d.n_channels += 2 * M
    if not len(m):
        return
    iv = trace.intervals
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    si = m["send_interval"].to_numpy().astype(np.int64)
    ri = m["recv_interval"].to_numpy().astype(np.int64)
    cv = m["clock_violation"].to_numpy().astype(bool)
    known = (si >= 0) & (ri >= 0)
    ok = known & ~cv
    d.skip("messages", locs.of_interval[ri[known & cv]])
    rows = np.flatnonzero(ok)
    mid = _ids(m, own)
    es, er, lr = enter[si[rows]], enter[ri[rows]], leave[ri[rows]]
    b = np.maximum(er, np.minimum(es, lr))
    is_test = test_calls(trace, names)
    tst = is_test[ri[rows]]  # a completion found by MPI_Test* was not waited for: a dependency without waiting
    d.issue(locs.of_interval[si[rows]], es, mid[rows])
    d.wait("messages", locs.of_interval[ri[rows]], np.where(tst, b, er), b, mid[rows])
    if late_receiver == "none":
        return
    cand, sync, esc, lsc, erq, sc, rq, mixed = _send_calls(trace, names, is_test)
    if late_receiver == "synchronous":
        sel = sync
    elif late_receiver == "blocking":
        sel = cand
    else:
        above = (
            rendezvous_above
            if rendezvous_above is not None
            else rendezvous_limit([protocol_evidence(m, esc, lsc, erq, mixed)], eager_limit)
        )
        sel = cand & (sync | (m["bytes"].to_numpy() > above))
    honoured = sel & (erq <= lsc)
    d.skip("rendezvous sends", locs.of_interval[sc[sel & ~honoured & sync]])
    k = np.flatnonzero(honoured)
    d.issue(locs.of_interval[rq[k]], erq[k], M + mid[k])
    d.wait("rendezvous sends", locs.of_interval[sc[k]], esc[k], np.maximum(esc[k], erq[k]), M + mid[k])


def _ids(m: pd.DataFrame, own: np.ndarray | None) -> np.ndarray:
    """Channel of each message row: its row in the whole trace's message table (``own`` for a part's rows)."""
    return np.arange(len(m), dtype=np.int64) if own is None else np.asarray(own, dtype=np.int64)


def dependencies(
    trace: Trace,
    locs: Locations,
    *,
    names: np.ndarray | None = None,
    late_receiver: str = "synchronous",
    early_reduce: str = "latest",
    eager_limit: int = DEFAULT_EAGER_LIMIT,
    rendezvous_above: int | None = None,
    roles: np.ndarray | None = None,
    regions: np.ndarray | None = None,
    message_ids: np.ndarray | None = None,
    n_messages: int | None = None,
    n_instances: int | None = None,
    instances: np.ndarray | None = None,
    scans: pd.DataFrame | None = None,
    interval_ids: np.ndarray | None = None,
) -> Dependencies:
    """The dependencies of ``trace`` (see the module docstring).

    Parameters
    ----------
    trace : Trace
        The whole trace, or a partition's part of it (its intervals and the
        messages and collective rows that touch them).
    locs : Locations
        ``locations(trace)``.
    names : numpy.ndarray, optional
        Vertex names (MPI_Test* completions are no waiting).
    late_receiver : {"auto", "synchronous", "blocking", "none"}
        Which sends wait for their receive to be posted.
    early_reduce : {"latest", "earliest"}
        The root of an N-to-1 collective waits for the latest sender or the first.
    eager_limit : int
        With ``late_receiver="auto"``: bytes above which a send the trace says nothing about is rendezvous.
    rendezvous_above : int, optional
        With ``late_receiver="auto"``: the limit already found (:func:`rendezvous_limit`), for a part.
    roles, regions : numpy.ndarray, optional
        Region role and region id per vertex (OpenMP barriers, fork and join).
    message_ids, n_messages : optional
        For a part: the row in the whole trace's message table of each of its
        message rows, and the number of messages of the whole trace.
    n_instances, instances, scans : optional
        For a part: the number of collective instances of the whole trace,
        their :func:`instance_stats` and :func:`scan_rows` (a part holds some
        of the participants; :mod:`perflow.trace.replaycolls`).
    interval_ids : numpy.ndarray, optional
        Global row of each interval (a part's intervals); threads are numbered per process from them.
    """
    if late_receiver not in SEND_MODES:
        raise ValueError(f"late_receiver must be one of {SEND_MODES}, not {late_receiver!r}")
    if early_reduce not in ("latest", "earliest"):
        raise ValueError(f"early_reduce must be 'latest' or 'earliest', not {early_reduce!r}")
    d = Dependencies()
    _p2p(d, trace, locs, names, late_receiver, eager_limit, rendezvous_above, message_ids, n_messages)

    collective_dependencies(d, trace, locs, early_reduce, n_instances, instances, scans)

    thread_dependencies(d, trace, locs, roles, regions, interval_ids)
    return d
