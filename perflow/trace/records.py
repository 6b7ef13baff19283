"""FIFO message matching over partitions: send and receive records, and an exchange of boundary send records.

Messages are matched FIFO: the k-th send of a key ``(comm, source,
destination, tag)`` in posting order pairs with the k-th receive of that key
in posting order (:mod:`perflow.trace.match` prepares the events). Every send
of a key is on the source process and every receive on the destination
process, and partitions hold whole processes, so:

1. each partition turns its point-to-point events into **send records** and
   **receive records** (:func:`p2p_records`), numbering each record ``k``
   within its key in posting order, exactly as the single-process engine
   orders them (time, then stream order);
2. send records whose destination process is in another partition are the
   **boundary records**; each partition's records are split by destination
   partition (:func:`outbox`) and sent there;
3. each partition joins its receive records with the send records addressed
   to it (its own and the inbound boundary ones) on ``(key, k)``
   (:func:`match_records`). The ``k``-th send pairs with the ``k``-th receive
   of the same key: FIFO order is preserved by construction.

The message rows of a boundary message live in the receiver's partition;
the receiver acknowledges the matched boundary sends to their senders (send
interval and bytes), which need them for ``bytes_sent``. Concatenating every
partition's rows in the order of their send events (:func:`gather_messages`)
gives ``trace.messages``, whatever the partitioning (a whole trace is one
partition).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..pag.instances import MESSAGE_COLUMNS, conform, stack_rows, take_or, take_rows
from .match import p2p_records as prepare_p2p
from .match import rank_within, record_key
from .raw import RawTrace

__all__ = ["KEY", "p2p_records", "outbox", "match_records", "gather_messages"]

#: the matching key of a message, plus its FIFO number within the key
KEY = ["comm", "src", "dst", "tag", "k"]


def _fifo(comm: np.ndarray, src: np.ndarray, dst: np.ndarray, tag: np.ndarray, order: np.ndarray) -> np.ndarray:
    """FIFO number of each record within its key, ``order`` being the posting order."""
    key = record_key(comm, src, dst, tag)
    k = np.empty(len(comm), dtype=np.int64)
    k[order] = rank_within(key[order])
    return k


def p2p_records(
    raw: RawTrace,
    enclosing: np.ndarray,
    callpath: np.ndarray,
    cp_region: np.ndarray,
    ginst: np.ndarray,
    t_enter: np.ndarray,
    t_leave: np.ndarray,
    p2p_row: np.ndarray,
    *,
    threaded: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Send and receive records of one partition's point-to-point events.

    Parameters
    ----------
    raw : RawTrace
        The partition's events (global location ids).
    enclosing : numpy.ndarray
        Local region instance open at each p2p event (-1 when none).
    callpath, cp_region : numpy.ndarray
        Call path of each local instance, and region of each call path.
    ginst : numpy.ndarray
        Global interval row of each local instance.
    t_enter, t_leave : numpy.ndarray
        Enter and leave time of each local instance.
    p2p_row : numpy.ndarray
        Global p2p-event row of each local p2p event (ties in send time are
        broken by it, as in the single-process engine).
    threaded : bool
        Whether any process of the trace has point-to-point events on
        several locations: then posting order is time order (stream order
        breaking ties), else stream order, as in the single-process engine.

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame)
        Send records (columns :data:`KEY`, ``send_process``, ``send_thread``,
        ``bytes``, ``send_interval``, ``send_complete_interval``,
        ``send_time``, ``mode``, ``send_enter``, ``send_row``) and receive
        records (:data:`KEY`, ``recv_process``, ``recv_thread``,
        ``recv_post_interval``, ``recv_interval``, ``recv_time``,
        ``recv_enter``, ``recv_leave``). Interval columns are global rows.
    """
    ev = raw.p2p_events
    t = ev["time"]

    def glob(iv: np.ndarray) -> np.ndarray:
        return take_or(ginst, iv, -1)  # local -1 (no instance) -> global -1

    rec = prepare_p2p(raw, enclosing, callpath, cp_region, threaded)
    s, r, peer, comm, tag = rec.s, rec.r, rec.peer, rec.comm, rec.tag
    order_s, order_r, send_complete, recv_post, mode = (
        rec.order_s,
        rec.order_r,
        rec.send_complete,
        rec.recv_post,
        rec.mode,
    )
    send_iv = enclosing[s]
    # each key column gathered once, at the sends only, in the narrow dtypes of the messages schema
    c_s, p_s, d_s, t_s = comm[s], rec.proc_at(s), peer[s], tag[s]
    sends = pd.DataFrame(
        {
            "comm": c_s,
            "src": p_s,
            "dst": d_s,
            "tag": t_s,
            "k": _fifo(c_s, p_s, d_s, t_s, order_s),
            "send_process": p_s.copy(),
            "send_thread": rec.thr_at(s),
            "bytes": ev["bytes"][s],
            "send_interval": glob(send_iv),
            "send_complete_interval": glob(send_complete),
            "send_time": t[s],
            "mode": mode,
            "send_enter": take_or(t_enter, send_iv, np.nan),
            "send_row": p2p_row[s],
        },
        copy=False,
    )
    recv_iv = enclosing[r]
    c_r, p_r, s_r, t_r = comm[r], rec.proc_at(r), peer[r], tag[r]
    recvs = pd.DataFrame(
        {
            "comm": c_r,
            "src": s_r,
            "dst": p_r,
            "tag": t_r,
            "k": _fifo(c_r, s_r, p_r, t_r, order_r),
            "recv_process": p_r.copy(),
            "recv_thread": rec.thr_at(r),
            "recv_post_interval": glob(recv_post),
            "recv_interval": glob(recv_iv),
            "recv_time": t[r],
            "recv_enter": take_or(t_enter, recv_iv, np.nan),
            "recv_leave": take_or(t_leave, recv_iv, np.nan),
        },
        copy=False,
    )
    return sends, recvs


def outbox(sends: pd.DataFrame, part_of_dst: np.ndarray, n_parts: int) -> list[pd.DataFrame]:
    """Split send records by the partition of their destination process.

    Records whose destination is in no partition (``part_of_dst`` -1) go
    nowhere: they are unmatched sends.
    """
    if n_parts == 1:
        return [sends if bool((part_of_dst == 0).all()) else take_rows(sends, np.flatnonzero(part_of_dst == 0))]
    order = np.argsort(part_of_dst, kind="stable")
    bounds = np.searchsorted(part_of_dst[order], np.arange(n_parts + 1))
    return [take_rows(sends, order[bounds[i] : bounds[i + 1]]) for i in range(n_parts)]


def match_records(recvs: pd.DataFrame, inbound: list[pd.DataFrame]) -> pd.DataFrame:
    """Join receive records with the send records addressed to this partition on ``(key, k)``.

    Returns one row per matched message with the message columns of
    ``Trace.messages`` plus ``send_row`` (global row of the send event, for
    ordering), ``send_enter``, ``recv_enter`` and ``recv_leave`` (for wait
    states). A hash join on one integer per record: linear.
    """
    sends = [x for x in inbound if len(x)]
    if not sends or not len(recvs):
        return _empty_messages()
    s = pd.concat(sends, ignore_index=True) if len(sends) > 1 else sends[0]
    ns = len(s)
    both = {c: np.r_[s[c].to_numpy(), recvs[c].to_numpy()] for c in KEY}
    key = record_key(both["comm"], both["src"], both["dst"], both["tag"])
    k = both["k"].astype(np.int64)
    kmax = int(k.max(initial=0)) + 1
    if int(key.max(initial=0)) + 1 < (1 << 62) // kmax:
        key = key * kmax + k
    else:  # pragma: no cover - astronomically many keys
        key = pd.MultiIndex.from_arrays([key, k]).factorize()[0].astype(np.int64)
    pos = pd.Index(key[:ns]).get_indexer(key[ns:])
    hit = np.flatnonzero(pos >= 0)
    cols = {c: s[c].to_numpy()[pos[hit]] for c in s.columns if c not in ("src", "dst", "k")}
    cols.update({c: recvs[c].to_numpy()[hit] for c in recvs.columns if c not in KEY})
    cols["clock_violation"] = cols["send_time"] > cols["recv_time"]
    return pd.DataFrame(cols, copy=False)


def _empty_messages() -> pd.DataFrame:
    df = conform("messages", None)
    for c, dt in (("send_row", np.int64), ("send_enter", np.float64), ("recv_enter", np.float64)):
        df[c] = np.zeros(0, dtype=dt)
    df["recv_leave"] = np.zeros(0)
    return df


def gather_messages(parts: list[pd.DataFrame], *, keep: tuple[str, ...] = (), threaded: bool = True) -> pd.DataFrame:
    """Concatenate per-partition message rows in the single-process order and schema.

    Without threads the single-process table lists messages in the order of
    their send events (``send_row``); with threads it is sorted by
    ``(send_process, send_time)``, stably from posting order, i.e. by
    ``(send_process, send_time, send_row)``. ``keep`` names extra columns to
    keep (``send_row``, ``late_sender_wait``, ...).
    """
    parts = [p for p in parts if len(p)] or [_empty_messages()]
    row = np.concatenate([p["send_row"].to_numpy() for p in parts])
    if threaded:
        proc = np.concatenate([p["send_process"].to_numpy() for p in parts])
        order = np.lexsort((row, np.concatenate([p["send_time"].to_numpy() for p in parts]), proc))
    else:
        order = np.argsort(row, kind="stable")
    if len(order) and np.all(order[1:] > order[:-1]):
        order = None  # already in order
    columns = list(MESSAGE_COLUMNS) + [c for c in keep if c in parts[0].columns]
    return conform("messages", stack_rows(parts, columns, order))
