"""Wait-state instances over partitions: the partitioned form of :func:`perflow.trace.waits.wait_instances`.

The whole-trace table is built by :func:`~perflow.trace.waits.p2p_waits`
and :func:`~perflow.trace.collwaits.collective_waits`; :func:`program` runs
those very functions on small **partition-local traces** and maps their ids
back (a runtime's partitions: :mod:`perflow.trace.pipeline`):

* Late Sender (and its wrong-order and completion parts) is charged to the
  call that completes a receive: grouped by receive interval, decided in
  receive order per receiving location. The receiver's partition holds all
  messages it received; the sender's side of a boundary message (enter and
  leave of the send call and of the call completing the send) comes from
  the sender (``to_receiver`` records).
* Late Receiver is charged to the call that completes a send: grouped by it.
  The sender's partition gets the receiver's side of its boundary messages
  (``to_sender`` records: the message row and its receive calls).
* Message ids (the ``message`` column: a row of ``trace.messages``) are
  numbered where the sends are, from per-location (or, with threads,
  per-process) counts combined on the client.
* Collective instances are sent, whole, to an owner partition (instance
  modulo partitions) with the enter/leave of each participant's call.

Each partition keeps only the instances charged to its own calls (or owned
instances), and the client sorts the rows as the single-process engine
does, ties kept in its order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..pag.edges import test_calls
from ..pag.instances import Trace, conform
from ..pag.partitioned import Each
from .collwaits import collective_waits
from .pipeline import Built, part_of
from .rmawaits import rma_calls, rma_waits_of_calls
from .stages import PartTables, local_rows
from .threadwaits import thread_waits
from .waits import empty_waits, p2p_waits

__all__ = [
    "program",
    "SenderState",
    "to_sender",
    "sender_state",
    "message_ids",
    "p2p_part",
    "coll_outbox",
    "coll_part",
    "finish",
]

_ROLES = ("send_interval", "send_complete_interval", "recv_post_interval", "recv_interval")


def _local_rows(t: PartTables, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return local_rows(t.ginst, g)


def _role_data(t: PartTables, g: np.ndarray) -> dict[str, np.ndarray]:
    """Vertex, enter and leave of local intervals ``g`` (NaN / -1 where not local)."""
    i, ok = _local_rows(t, np.asarray(g, dtype=np.int64))
    iv = t.intervals
    return {
        "vertex": np.where(ok, iv["vertex"].to_numpy().astype(np.int64)[i] if len(iv) else -1, -1),
        "enter": np.where(ok, iv["enter"].to_numpy()[i] if len(iv) else np.nan, np.nan),
        "leave": np.where(ok, iv["leave"].to_numpy()[i] if len(iv) else np.nan, np.nan),
    }


def _with_roles(t: PartTables, m: pd.DataFrame, roles: tuple[str, ...]) -> pd.DataFrame:
    out = m.copy()
    for r in roles:
        for k, a in _role_data(t, m[r].to_numpy()).items():
            out[f"{r}:{k}"] = a
    return out


def to_sender(
    t: PartTables, messages: pd.DataFrame, processes: np.ndarray, assign: np.ndarray, n_parts: int
) -> list[pd.DataFrame]:
    """Boundary messages received here, with their receive calls, by sender partition."""
    sp = part_of(processes, assign, messages["send_process"].to_numpy().astype(np.int64))
    m = _with_roles(t, messages, ("recv_post_interval", "recv_interval"))
    return [m[(sp == j) & (j != t.pid)].reset_index(drop=True) for j in range(n_parts)]


@dataclass
class SenderState:
    """The matched sends of one partition: its own messages and the boundary ones received elsewhere."""

    sent: pd.DataFrame
    group: np.ndarray
    rank: np.ndarray
    counts: np.ndarray


def sender_state(
    t: PartTables,
    messages: pd.DataFrame,
    processes: np.ndarray,
    assign: np.ndarray,
    p2p_off: np.ndarray,
    threaded: bool,
    n_groups: int,
    inbound: list[pd.DataFrame],
) -> SenderState:
    """Group and rank this partition's matched sends in the single-process message order.

    Without threads messages are ordered by send event (group: the sending
    location, rank by event row); with threads by (sending process, send
    time, event row) (group: the process).
    """
    own = messages[part_of(processes, assign, messages["send_process"].to_numpy().astype(np.int64)) == t.pid]
    parts = [own.assign(_remote=False)] + [x.assign(_remote=True) for x in inbound if len(x)]
    sent = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)
    row = sent["send_row"].to_numpy().astype(np.int64)
    if threaded:
        group = sent["send_process"].to_numpy().astype(np.int64)
        order = np.lexsort((row, sent["send_time"].to_numpy(), group))
    else:
        group = np.searchsorted(p2p_off, row, side="right") - 1
        order = np.lexsort((row, group))
    gs = group[order]
    first = np.r_[True, gs[1:] != gs[:-1]] if len(gs) else np.zeros(0, dtype=bool)
    starts = np.flatnonzero(first)
    rank = np.empty(len(row), dtype=np.int64)
    rank[order] = np.arange(len(row)) - np.repeat(starts, np.diff(np.r_[starts, len(row)]))
    counts = np.bincount(group, minlength=n_groups) if len(group) else np.zeros(n_groups, dtype=np.int64)
    return SenderState(sent, group, rank, counts)


def message_ids(
    t: PartTables, st: SenderState, offsets: np.ndarray, processes: np.ndarray, assign: np.ndarray, n_parts: int
) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """Global message ids of the matched sends; records for the receivers of boundary ones.

    Returns the sent messages (with ``msg_id`` and the send calls' data) and,
    per receiver partition, ``send_row``, ``msg_id`` and the send calls' data.
    """
    sent = _with_roles(t, st.sent, ("send_interval", "send_complete_interval"))
    sent["msg_id"] = offsets[st.group] + st.rank
    rp = part_of(processes, assign, sent["recv_process"].to_numpy().astype(np.int64))
    cols = ["send_row", "msg_id"] + [f"{r}:{k}" for r in _ROLES[:2] for k in ("vertex", "enter", "leave")]
    boxes = [sent.loc[(rp == j) & (j != t.pid), cols].reset_index(drop=True) for j in range(n_parts)]
    return sent, boxes


def _local_trace(rows: pd.DataFrame) -> tuple[Trace, np.ndarray]:
    """A Trace of ``rows`` (message rows carrying every role's interval data) and the global id of each interval."""
    recs = []
    for r in _ROLES:
        side = "send" if r.startswith("send") else "recv"
        recs.append(
            pd.DataFrame(
                {
                    "gid": rows[r].to_numpy().astype(np.int64),
                    "process": rows[f"{side}_process"].to_numpy(),
                    "thread": rows[f"{side}_thread"].to_numpy(),
                    "vertex": rows[f"{r}:vertex"].to_numpy(),
                    "enter": rows[f"{r}:enter"].to_numpy(),
                    "leave": rows[f"{r}:leave"].to_numpy(),
                }
            )
        )
    rec = pd.concat(recs, ignore_index=True)
    rec = rec[rec["gid"].to_numpy() >= 0].drop_duplicates("gid").sort_values("gid", kind="stable")
    gids = rec["gid"].to_numpy()
    iv = pd.DataFrame(
        {
            "process": rec["process"].to_numpy(),
            "thread": rec["thread"].to_numpy(),
            "vertex": rec["vertex"].to_numpy(),
            "enter": rec["enter"].to_numpy(),
            "leave": rec["leave"].to_numpy(),
            "parent": np.full(len(rec), -1),
        }
    )
    m = rows.copy()
    for r in _ROLES:
        g = m[r].to_numpy().astype(np.int64)
        m[r] = np.where(g >= 0, np.searchsorted(gids, g), -1)
    return Trace(iv, conform("messages", m)), gids


def p2p_part(
    t: PartTables,
    messages: pd.DataFrame,
    sent: pd.DataFrame,
    names: np.ndarray,
    window: int,
    late_receiver: str,
    inbound: list[pd.DataFrame],
) -> pd.DataFrame:
    """Point-to-point wait-state instances charged to this partition's calls (global ids), with stats in attrs."""
    recv = messages
    # the sender's side of every message received here: own sends from ``sent``, others from ``inbound``
    side = pd.concat(
        [sent.loc[~sent["_remote"].to_numpy(), ["send_row", "msg_id"] + _side_cols()]] + [x for x in inbound if len(x)],
        ignore_index=True,
    )
    recv = _with_roles(t, recv, ("recv_post_interval", "recv_interval")).merge(side, on="send_row", how="left")
    boundary_sent = sent[sent["_remote"].to_numpy()].drop(columns=["_remote"])
    rows = pd.concat([recv.assign(_here=True), boundary_sent.assign(_here=False)], ignore_index=True)
    rows = rows.sort_values("msg_id", kind="stable").reset_index(drop=True)
    trace, gids = _local_trace(rows)
    w = p2p_waits(trace, names, window=window, late_receiver=late_receiver)
    here = rows["_here"].to_numpy()
    m = trace.messages
    si, ri = m["send_interval"].to_numpy(), m["recv_interval"].to_numpy()
    known = (si >= 0) & (ri >= 0)
    cv = m["clock_violation"].to_numpy()
    tst = known & ~cv & test_calls(trace, names)[np.maximum(ri, 0)] if len(m) else np.zeros(0, dtype=bool)
    stats = {
        "clock_violations": int((cv & known & here).sum()),
        "unattributed_messages": int((~known & here).sum()),
        "test_completions": int((tst & here).sum()),
    }
    out = _to_global(w, gids, rows["msg_id"].to_numpy())
    own = _local_rows(t, out["interval"].to_numpy().astype(np.int64))[1]
    out = out[own].reset_index(drop=True)
    out["_k1"] = out["interval"].to_numpy()
    out["_k2"] = 0
    out.attrs = stats
    return out


def _side_cols() -> list[str]:
    return [f"{r}:{k}" for r in _ROLES[:2] for k in ("vertex", "enter", "leave")]


def _to_global(w: pd.DataFrame, gids: np.ndarray, msg_ids: np.ndarray | None) -> pd.DataFrame:
    out = w.copy()
    for c in ("interval", "cause_interval"):
        v = out[c].to_numpy().astype(np.int64)
        out[c] = np.where(v >= 0, gids[np.maximum(v, 0)] if len(gids) else -1, -1)
    if msg_ids is not None:
        v = out["message"].to_numpy().astype(np.int64)
        out["message"] = np.where(v >= 0, msg_ids[np.maximum(v, 0)] if len(msg_ids) else -1, -1)
    return out


def coll_outbox(t: PartTables, n_parts: int) -> list[pd.DataFrame]:
    """This partition's collective rows with their calls' data, by owner partition (instance modulo partitions)."""
    c = t.coll.drop(columns=["wait", "last"], errors="ignore")
    if not len(c):
        return [c] * n_parts
    c = c.copy()
    for k, a in _role_data(t, c["interval"].to_numpy()).items():
        c[f"iv:{k}"] = a
    owner = c["instance"].to_numpy() % n_parts
    return [c[owner == j].reset_index(drop=True) for j in range(n_parts)]


def coll_part(
    comms: dict[int, np.ndarray], early_reduce: str, inbound: list[pd.DataFrame], collective_span: str = "records"
) -> pd.DataFrame:
    """Collective wait-state instances of the instances this partition owns (global ids)."""
    parts = [x for x in inbound if len(x)]
    if not parts:
        out = empty_waits()
        out["_k1"], out["_k2"] = np.zeros(0, np.int64), np.zeros(0, np.int64)
        return out
    c = pd.concat(parts, ignore_index=True).sort_values(["instance", "process", "thread"], kind="stable")
    c = c.reset_index(drop=True)
    g = c["interval"].to_numpy().astype(np.int64)
    has = g >= 0
    gids = np.unique(g[has])
    pos = np.searchsorted(gids, g[has])
    n = len(gids)
    iv = {k: np.zeros(n, dtype=dt) for k, dt in (("process", np.int32), ("thread", np.int32), ("vertex", np.int32))}
    iv.update({"enter": np.zeros(n), "leave": np.zeros(n), "parent": np.full(n, -1)})
    iv["process"][pos] = c["process"].to_numpy()[has]
    iv["thread"][pos] = c["thread"].to_numpy()[has]
    iv["vertex"][pos] = c["iv:vertex"].to_numpy()[has]
    iv["enter"][pos] = c["iv:enter"].to_numpy()[has]
    iv["leave"][pos] = c["iv:leave"].to_numpy()[has]
    local = c.drop(columns=[x for x in c.columns if x.startswith("iv:")])
    local["interval"] = np.where(has, np.searchsorted(gids, g), -1)
    trace = Trace(pd.DataFrame(iv), collectives=conform("collectives", local), comms=dict(comms))
    out = _to_global(collective_waits(trace, early_reduce=early_reduce, collective_span=collective_span), gids, None)
    out["_k1"] = out["instance"].to_numpy()
    out["_k2"] = out["process"].to_numpy().astype(np.int64) * (1 << 20) + out["thread"].to_numpy()
    return out


def finish(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """All partitions' instances in the single-process order (process, thread, start, kind; its ties)."""
    stats = {"clock_violations": 0, "unattributed_messages": 0, "test_completions": 0}
    for p in parts:
        for k in stats:
            stats[k] += int(p.attrs.get(k, 0))
    rows = [p for p in parts if len(p)]
    if not rows:
        out = empty_waits()
        out.attrs.update(stats)
        return out
    out = pd.concat(rows, ignore_index=True)
    out = out.sort_values(["process", "thread", "start", "kind", "_k1", "_k2"], kind="stable")
    out = out.drop(columns=["_k1", "_k2"]).reset_index(drop=True)
    out = out[list(empty_waits().columns)]
    out.attrs = stats
    return out


def t_counts(st: SenderState) -> np.ndarray:
    """The per-group counts of a sender state."""
    return st.counts


def t_first(x: tuple[Any, ...]) -> Any:
    """Element 0 of a pair."""
    return x[0]


def t_second(x: tuple[Any, ...]) -> Any:
    """Element 1 of a pair."""
    return x[1]


def thread_part(t: PartTables, roles: np.ndarray | None, regions: np.ndarray | None) -> pd.DataFrame:
    """Thread wait states of a partition's processes (whole processes: nothing to exchange)."""
    locks = t.locks if t.locks is not None else conform("locks", None)
    out = thread_waits(t.intervals, locks, roles, regions, np.asarray(t.ginst, dtype=np.int64))
    out["_k1"] = out["interval"].to_numpy().astype(np.int64)
    out["_k2"] = out["process"].to_numpy().astype(np.int64) * (1 << 20) + out["thread"].to_numpy()
    return out


def _rma_groups(b: Built) -> dict[int, np.ndarray]:
    groups = b.defs.attrs.get("rma_groups") or {}
    return {int(k): np.asarray(v, dtype=np.int64) for k, v in groups.items()}


def rma_part(t: PartTables) -> pd.DataFrame:
    """The RMA synchronisation calls of a partition (:func:`perflow.trace.rmawaits.rma_calls`), global rows."""
    if t.rma is None or not len(t.rma):
        return rma_calls(conform("rma", None), t.intervals)
    return rma_calls(t.rma, t.intervals, np.asarray(t.ginst, dtype=np.int64))


def _rma_waits(calls: list[pd.DataFrame], groups: dict[int, np.ndarray], names: np.ndarray) -> pd.DataFrame:
    """The RMA wait states, from every partition's synchronisation calls (few rows: computed in one place)."""
    rows = [c for c in calls if len(c)]
    out = rma_waits_of_calls(pd.concat(rows, ignore_index=True) if rows else calls[0], groups, names)
    out["_k1"] = out["interval"].to_numpy().astype(np.int64)
    out["_k2"] = out["process"].to_numpy().astype(np.int64) * (1 << 20) + out["thread"].to_numpy()
    return out


def program(
    b: Built,
    names: np.ndarray,
    *,
    window: int,
    late_receiver: str,
    early_reduce: str,
    collective_span: str = "records",
    roles: np.ndarray | None = None,
    regions: np.ndarray | None = None,
) -> pd.DataFrame:
    """Every wait-state instance of a built trace, equal to :func:`perflow.trace.waits.wait_instances`.

    Boundary records are exchanged between partitions, collective instances
    are sent to owner partitions; only the instance table comes back.
    """
    rt, n = b.runtime, b.n_parts
    procs, assign = b.processes, b.assign
    tb, msg = b.tables, b.messages
    boxes = rt.map(to_sender, Each(tb), Each(msg), procs, assign, n)
    inbound = rt.exchange(boxes, "to_sender")
    threaded = bool(b.tree["threaded"])
    p2p_off = b.tree["p2p_off"]
    n_groups = int(procs.max()) + 1 if threaded and len(procs) else len(p2p_off)
    states = rt.map(sender_state, Each(tb), Each(msg), procs, assign, p2p_off, threaded, n_groups, Each(inbound))
    counts = np.sum(rt.gather(rt.map(t_counts, Each(states))), axis=0)
    offsets = np.cumsum(counts) - counts
    ids = rt.map(message_ids, Each(tb), Each(states), offsets, procs, assign, n)
    sent = rt.map(t_first, Each(ids))
    inbound = rt.exchange(rt.map(t_second, Each(ids)), "to_receiver")
    p2p = rt.map(p2p_part, Each(tb), Each(msg), Each(sent), names, int(window), late_receiver, Each(inbound))
    cin = rt.exchange(rt.map(coll_outbox, Each(tb), n), "collective_rows")
    coll = rt.map(coll_part, b.defs.comms, early_reduce, Each(cin), collective_span)
    thr = rt.map(thread_part, Each(tb), roles, regions)
    rma = _rma_waits(rt.gather(rt.map(rma_part, Each(tb))), _rma_groups(b), names)
    return finish([*rt.gather(p2p + coll + thr), rma])
