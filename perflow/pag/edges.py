"""The waiting-time formulas of the instance model, and the parallel view's edges built with them.

One definition each, used by the wait-state analysis (:mod:`perflow.trace.waits`),
the trace pipeline's partitioned stages and the parallel view:

* :func:`message_late_sender`: a message's Late Sender, ``max(0, min(Es, Lr) - Er)``;
* :func:`charged_late_sender`: the Late Sender *waiting time*, per call
  completing receives the largest of its messages', once (a Waitall waits for
  its last message), none in MPI_Test*;
* :func:`late_receiver_sends`: which sends can suffer a Late Receiver under
  each ``late_receiver`` setting (:data:`LATE_RECEIVER_MODES`);
* :func:`collective_row_wait`: a collective participant's wait,
  ``max(0, min(latest enter, L_i) - E_i)`` for synchronising collectives.

Messages become ``p2p`` edges from the sender's (call path, process, thread)
to the receiver's, with count, bytes, transfer time (receive completion minus
send, clipped at zero) and the Late Sender waiting time charged to the
receiving call (so the edges into a call add up to the waits the
``wait_states`` pass reports). Collective instances become ``collective``
edges from the last participant to arrive to each other participant,
carrying that participant's waiting time.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np
import pandas as pd

from .._jit import njit
from ..kinds import CollectiveOp
from .instances import Trace

if TYPE_CHECKING:  # pragma: no cover
    from ..pag.parallel import ParallelView

__all__ = [
    "EDGE_KINDS",
    "edge_kinds",
    "charged_late_sender",
    "group_by_call",
    "test_calls",
    "message_edges",
    "collective_edges",
    "message_late_sender",
    "late_sender_wait",
    "late_receiver_sends",
    "LateReceiver",
    "LATE_RECEIVER_MODES",
    "collective_row_wait",
    "collective_wait",
    "last_arrivers",
    "SYNC_OPS",
]


EDGE_KINDS = ("call", "p2p", "collective", "thread")
EDGE_DTYPE = pd.CategoricalDtype(list(EDGE_KINDS))


def edge_kinds(kind: str, n: int) -> pd.Categorical:
    """``n`` copies of one edge kind as a categorical (no per-row strings)."""
    return pd.Categorical.from_codes(np.full(n, EDGE_KINDS.index(kind), dtype=np.int8), dtype=EDGE_DTYPE)


#: collective operations that synchronise even when they move no data
SYNC_OPS = (CollectiveOp.BARRIER, CollectiveOp.INIT, CollectiveOp.FINALIZE)


def message_late_sender(
    ok: np.ndarray, send_enter: np.ndarray, recv_enter: np.ndarray, recv_leave: np.ndarray
) -> np.ndarray:
    """The one definition of a message's Late Sender wait: ``max(0, min(Es, Lr) - Er)`` where ``ok``, else 0.

    ``Es`` is the enter of the call that issued the send, ``Er``/``Lr`` the
    enter/leave of the call that completed the receive; ``ok`` marks messages
    whose send and receive calls are known and that respect the clock
    condition. The wait-state analysis (:mod:`perflow.trace.waits`) charges
    these per receive call; the parallel view sums them per edge.
    """
    w = np.zeros(len(ok))
    w[ok] = np.maximum(0.0, np.minimum(send_enter[ok], recv_leave[ok]) - recv_enter[ok])
    return w


#: MPI_Test* calls: a receive completed there was not waited for
TEST_CALL = re.compile(r"^P?MPI_Test", re.IGNORECASE)


def test_calls(trace: Trace, names: np.ndarray | None) -> np.ndarray:
    """Per interval: is it an MPI_Test* call (``names``: the vertex names; None: no call is)."""
    v = trace.intervals["vertex"].to_numpy()
    if names is None or not len(v):
        return np.zeros(len(v), dtype=bool)
    vt = np.array([bool(TEST_CALL.match(str(n))) for n in names], dtype=bool)
    return vt[v] if len(vt) else np.zeros(len(v), dtype=bool)


#: Which sends can wait for their receiver (the ``late_receiver`` setting; see :func:`late_receiver_sends`).
LateReceiver = Literal["blocking", "synchronous", "none"]
LATE_RECEIVER_MODES: tuple[str, ...] = get_args(LateReceiver)

#: blocking sends that never wait for the receiver: buffered and ready mode
_NO_WAIT_SEND = re.compile(r"^P?MPI_[BR]send$", re.IGNORECASE)
#: synchronous-mode sends (a non-blocking one is told by its call's name: its message mode is "non-blocking")
_SYNC_SEND = re.compile(r"^P?MPI_I?ssend$", re.IGNORECASE)


def late_receiver_sends(
    trace: Trace, names: np.ndarray | None, mode: str, is_test: np.ndarray | None = None
) -> np.ndarray:
    """Per message: can its send suffer a Late Receiver under the ``late_receiver`` setting ``mode``?

    The one definition the wait states and the ideal-network replay use:

    * ``"blocking"``: the send completes in a call that blocks, as Scalasca
      counts ``mpi_latereceiver``: a blocking standard or synchronous send
      (MPI_Send, MPI_Ssend; the send half of MPI_Sendrecv and
      MPI_Sendrecv_replace, which Scalasca leaves out) or an MPI_Wait*
      completing a non-blocking send; not MPI_Bsend and MPI_Rsend (buffered
      and ready sends never wait for the receiver), not MPI_Test*;
    * ``"synchronous"``: synchronous-mode sends only (MPI_Ssend, MPI_Issend),
      not completed in MPI_Test*;
    * ``"none"``: no send.

    Only messages whose completing call and receive-posting call are known,
    and that respect the clock condition, can qualify; ``names`` are the vertex names (None: no call is recognised
    by name), ``is_test`` the :func:`test_calls` of the trace when at hand.
    """
    m = trace.messages
    if mode not in LATE_RECEIVER_MODES:
        raise ValueError(f"late_receiver must be one of {', '.join(map(repr, LATE_RECEIVER_MODES))}, not {mode!r}")
    if mode == "none" or not len(m):
        return np.zeros(len(m), dtype=bool)
    sc = m["send_complete_interval"].to_numpy().astype(np.int64)
    rq = m["recv_post_interval"].to_numpy().astype(np.int64)
    sel = (sc >= 0) & (rq >= 0) & ~m["clock_violation"].to_numpy().astype(bool)
    if mode == "synchronous":
        sync = m["mode"].to_numpy() == 1
        if names is not None and len(names):
            si = m["send_interval"].to_numpy().astype(np.int64)
            by_name = np.array([bool(_SYNC_SEND.match(str(n))) for n in names], dtype=bool)
            ok = si >= 0
            sync[ok] |= by_name[trace.intervals["vertex"].to_numpy()[si[ok]]]
        sel &= sync
    rows = np.flatnonzero(sel)
    if not len(rows):
        return sel
    calls = sc[rows]
    sel[rows] = ~(is_test if is_test is not None else test_calls(trace, names))[calls]
    if mode == "blocking" and names is not None and len(names):
        no_wait = np.array([bool(_NO_WAIT_SEND.match(str(n))) for n in names], dtype=bool)
        sel[rows] &= ~no_wait[trace.intervals["vertex"].to_numpy()[calls]]
    return sel


@njit
def _best_of_runs(order, call, value, tie):  # type: ignore[no-untyped-def]
    """Over the runs of equal ``call`` in ``order``: each run's start and its row with the largest ``value``
    (ties: the largest ``tie``, then the last row), as the last row of a stable sort by (call, value, tie)."""
    n = order.shape[0]
    reps = np.empty(n, np.int64)
    starts = np.empty(n, np.int64)
    g = 0
    i = 0
    while i < n:
        best = order[i]
        c = call[best]
        starts[g] = i
        j = i + 1
        while j < n and call[order[j]] == c:
            r = order[j]
            if value[r] > value[best] or (value[r] == value[best] and tie[r] >= tie[best]):
                best = r
            j += 1
        reps[g] = best
        g += 1
        i = j
    return reps[:g], starts[:g]


def group_by_call(call: np.ndarray, value: np.ndarray, tie: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per call: the row of its largest value (ties: the largest ``tie``), run starts in sorted order, the order.

    A call that completes several receives (MPI_Waitall) waits once, for the
    message that arrives last: its Late Sender is the largest of its
    messages', charged to that message (the representative). The order
    holds the rows by call (stable: one sort of the calls, none when they are
    in order already); the runs of one call are ``order[starts[j]:starts[j + 1]]``.
    """
    call = np.asarray(call, dtype=np.int64)
    if len(call) > 1 and not (call[1:] >= call[:-1]).all():
        order = np.argsort(call, kind="stable")
    else:
        order = np.arange(len(call), dtype=np.int64)
    rep, starts = _best_of_runs(
        order.astype(np.int64, copy=False), call, np.asarray(value, np.float64), np.asarray(tie, np.float64)
    )
    return rep, starts, order


def charged_late_sender(trace: Trace, names: np.ndarray | None) -> np.ndarray:
    """Late Sender charged to each message: the receive call's wait, on the message it waited for, else 0.

    The one definition of the Late Sender *waiting time* (what the
    ``wait_states`` pass reports and the parallel view's p2p edges carry): per
    call completing receives, the largest :func:`message_late_sender` of its
    messages, once; 0 for completions in MPI_Test* calls, messages whose
    calls are unknown or that violate the clock condition.
    """
    m = trace.messages
    out = np.zeros(len(m))
    if not len(m):
        return out
    iv = trace.intervals
    si = m["send_interval"].to_numpy().astype(np.int64)
    ri = m["recv_interval"].to_numpy().astype(np.int64)
    ok = (si >= 0) & (ri >= 0) & ~m["clock_violation"].to_numpy().astype(bool)
    ok &= ~test_calls(trace, names)[np.maximum(ri, 0)]
    rows = np.flatnonzero(ok)
    if not len(rows):
        return out
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    es = enter[si[rows]]
    idle = message_late_sender(np.ones(len(rows), dtype=bool), es, enter[ri[rows]], leave[ri[rows]])
    rep, _, _ = group_by_call(ri[rows], idle, es)
    out[rows[rep]] = idle[rep]
    return out


def late_sender_wait(trace: Trace) -> np.ndarray:
    """Late Sender waiting time of each message of a trace (:func:`message_late_sender`)."""
    m = trace.messages
    iv = trace.intervals
    si = m["send_interval"].to_numpy()
    ri = m["recv_interval"].to_numpy()
    ok = (si >= 0) & (ri >= 0) & ~m["clock_violation"].to_numpy()
    enter = iv["enter"].to_numpy()
    leave = iv["leave"].to_numpy()
    si0, ri0 = np.maximum(si, 0), np.maximum(ri, 0)
    if not len(enter):
        return np.zeros(len(m))
    return message_late_sender(ok, enter[si0], enter[ri0], leave[ri0])


def last_arrivers(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per collective row: the latest enter of its instance, and whether the row is the last arriver.

    Ties are broken by the lowest (process, thread); exactly one row per instance is the last arriver.
    """
    c = trace.collectives
    if not len(c):
        return np.zeros(0), np.zeros(0, dtype=bool)
    inst = c["instance"].to_numpy()
    begin = c["begin"].to_numpy()
    n_inst = int(inst.max()) + 1
    latest = np.full(n_inst, -np.inf)
    np.maximum.at(latest, inst, begin)
    cand = begin == latest[inst]
    # first candidate row per instance (rows are sorted by instance, process, thread)
    first = np.full(n_inst, len(inst))
    np.minimum.at(first, inst[cand], np.flatnonzero(cand))
    is_last = np.zeros(len(inst), dtype=bool)
    is_last[first[first < len(inst)]] = True
    return latest[inst], is_last


def collective_row_wait(
    op: np.ndarray, latest: np.ndarray, begin: np.ndarray, end: np.ndarray, moved: np.ndarray
) -> np.ndarray:
    """The one definition of a collective participant's wait: ``max(0, min(latest enter, L_i) - E_i)``.

    ``latest`` is the latest enter of the row's instance, ``moved`` the bytes
    its instance moved over all participants: a data collective that moves
    nothing is no synchronisation point (0), while barriers and
    MPI_Init/Finalize always are.
    """
    w = np.maximum(0.0, np.minimum(latest, end) - begin)
    sync = np.isin(op, SYNC_OPS) | (moved > 0)
    return np.where(sync, w, 0.0)


def collective_wait(trace: Trace) -> np.ndarray:
    """Waiting time of each collective row of a trace (:func:`collective_row_wait`)."""
    c = trace.collectives
    if not len(c):
        return np.zeros(0)
    latest, _ = last_arrivers(trace)
    inst = c["instance"].to_numpy()
    moved = np.bincount(inst, weights=(c["sent"].to_numpy() + c["received"].to_numpy()).astype(np.float64))
    return collective_row_wait(c["op"].to_numpy(), latest, c["begin"].to_numpy(), c["end"].to_numpy(), moved[inst])


def _interval_rows(view: ParallelView, trace: Trace, rows: np.ndarray) -> np.ndarray:
    iv = trace.intervals
    out = np.full(len(rows), -1, dtype=np.int64)
    ok = rows >= 0
    r = rows[ok]
    out[ok] = view.rows(iv["vertex"].to_numpy()[r], iv["process"].to_numpy()[r], iv["thread"].to_numpy()[r])
    return out


def _group(src: np.ndarray, dst: np.ndarray, kind: str, **vals: np.ndarray) -> pd.DataFrame:
    ok = (src >= 0) & (dst >= 0)
    df = pd.DataFrame({"src": src[ok], "dst": dst[ok], **{k: v[ok] for k, v in vals.items()}})
    if not len(df):
        return pd.DataFrame(columns=["src", "dst", "kind", "count", "bytes", "time", "wait"])
    df["count"] = 1
    g = df.groupby(["src", "dst"], sort=True).sum().reset_index()

    g["kind"] = edge_kinds(kind, len(g))
    return g[["src", "dst", "kind", "count", "bytes", "time", "wait"]]


def message_edges(view: ParallelView, trace: Trace) -> pd.DataFrame:
    """Aggregate matched messages into ``p2p`` edges."""
    m = trace.messages
    if not len(m):
        return _group(
            np.zeros(0, np.int64), np.zeros(0, np.int64), "p2p", bytes=np.zeros(0), time=np.zeros(0), wait=np.zeros(0)
        )
    src = _interval_rows(view, trace, m["send_interval"].to_numpy())
    dst = _interval_rows(view, trace, m["recv_interval"].to_numpy())
    transfer = np.maximum(0.0, m["recv_time"].to_numpy() - m["send_time"].to_numpy())
    names = view._pag.vertex_table["name"].astype(str).to_numpy()
    return _group(
        src,
        dst,
        "p2p",
        bytes=m["bytes"].to_numpy(),
        time=transfer,
        wait=charged_late_sender(trace, names),
    )


def collective_edges(view: ParallelView, trace: Trace) -> pd.DataFrame:
    """Aggregate collective instances into edges from the last arriver to each other participant."""
    c = trace.collectives
    if not len(c):
        return message_edges(view, Trace(trace.intervals))  # empty frame with the right columns
    _, is_last = last_arrivers(trace)
    inst = c["instance"].to_numpy()
    row = _interval_rows(view, trace, c["interval"].to_numpy())
    n_inst = int(inst.max()) + 1
    last_row = np.full(n_inst, -1, dtype=np.int64)
    last_row[inst[is_last]] = row[is_last]
    src = last_row[inst]
    others = ~is_last
    wait = collective_wait(trace)
    return _group(
        src[others],
        row[others],
        "collective",
        bytes=c["received"].to_numpy()[others],
        time=(c["end"].to_numpy() - c["begin"].to_numpy())[others],
        wait=wait[others],
    )
