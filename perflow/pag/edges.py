"""Aggregating trace instances into parallel-view edges.

Messages become ``p2p`` edges from the sender's (call path, process, thread)
to the receiver's, with count, bytes, transfer time (receive completion minus
send, clipped at zero) and Late Sender waiting time. Collective instances
become ``collective`` edges from the last participant to arrive to each other
participant, carrying that participant's waiting time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..kinds import CollectiveOp
from .instances import Trace

if TYPE_CHECKING:  # pragma: no cover
    from ..pag.parallel import ParallelView

__all__ = [
    "message_edges",
    "collective_edges",
    "message_late_sender",
    "late_sender_wait",
    "collective_row_wait",
    "collective_wait",
    "last_arrivers",
    "SYNC_OPS",
]


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
    from ..pag.parallel import edge_kinds

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
    return _group(
        src,
        dst,
        "p2p",
        bytes=m["bytes"].to_numpy(),
        time=transfer,
        wait=late_sender_wait(trace),
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
