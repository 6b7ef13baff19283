"""Wait-state instances over partitions: the partitioned form of :func:`perflow.trace.waits.wait_instances`.

The whole-trace table is built by :func:`~perflow.trace.waits.p2p_waits`
and :func:`~perflow.trace.collwaits.collective_waits`; :func:`program` runs
those very functions where the partitions live and maps their ids back (a
runtime's partitions: :mod:`perflow.trace.pipeline`):

* Point-to-point waits run on each partition's **partition trace**
  (:mod:`perflow.trace.parttrace`, made once per built trace and shared with
  the replay plan): its own intervals, every message it received or sent, in
  the whole trace's message order and with its message ids, and ghost
  intervals for the other side's calls of boundary messages. Late Sender (and
  its wrong-order and completion parts) is charged to the call that completes
  a receive, decided in receive order per receiving location: the receiver's
  partition holds all messages it received. Late Receiver is charged to the
  call that completes a send: the sender's partition holds all messages it sent.
* Collective instances are sent, whole, to an owner partition (instance
  modulo partitions) with the enter/leave of each participant's call; each
  row's call is one interval of a small trace there.
* Thread waits are local to a process; RMA synchronisation calls are few and
  evaluated together on the client.

Each partition keeps only the instances charged to its own calls (or owned
instances), and the client sorts the rows as the single-process engine
does, ties kept in its order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..pag.edges import test_calls
from ..pag.instances import Trace, conform
from ..pag.partitioned import Each
from .collwaits import collective_waits
from .parttrace import PartTrace, part_traces
from .pipeline import Built
from .rmawaits import rma_calls, rma_waits_of_calls
from .stages import PartTables, local_rows
from .threadwaits import thread_waits
from .waits import WAIT_COLUMNS, empty_waits, p2p_waits

__all__ = ["program", "p2p_part", "coll_outbox", "coll_part", "finish"]


def p2p_part(pt: PartTrace, names: np.ndarray, window: int, late_receiver: str) -> pd.DataFrame:
    """Point-to-point wait-state instances charged to this partition's calls (global ids), with stats in attrs.

    :func:`~perflow.trace.waits.p2p_waits` runs on the partition trace: every message a receive call here
    completed, and every message a send call here issued, are in it."""
    trace = pt.trace
    w = p2p_waits(trace, names, window=window, late_receiver=late_receiver, locs=pt.locs)
    m = trace.messages
    si, ri = m["send_interval"].to_numpy(), m["recv_interval"].to_numpy()
    known = (si >= 0) & (ri >= 0)
    cv = m["clock_violation"].to_numpy()
    tst = known & ~cv & test_calls(trace, names)[np.maximum(ri, 0)] if len(m) else np.zeros(0, dtype=bool)
    here = pt.here
    stats = {
        "clock_violations": int((cv & known & here).sum()),
        "unattributed_messages": int((~known & here).sum()),
        "test_completions": int((tst & here).sum()),
    }
    iv = w["interval"].to_numpy().astype(np.int64)
    keep = np.flatnonzero((iv >= 0) & pt.own[np.maximum(iv, 0)]) if len(iv) else np.zeros(0, np.int64)
    out = pt.to_global(w.iloc[keep].reset_index(drop=True))
    out["_k1"] = out["interval"].to_numpy()
    out["_k2"] = 0
    out.attrs = stats
    return out


_COLL = tuple(conform("collectives", None).columns)


def coll_outbox(t: PartTables, n_parts: int) -> list[pd.DataFrame]:
    """This partition's collective rows with their calls' vertex, enter and leave, by owner partition (instance
    modulo partitions)."""
    c = t.coll if len(t.coll) else conform("collectives", None)
    cols = {k: c[k].to_numpy() for k in _COLL}
    i, ok = local_rows(t.ginst, cols["interval"].astype(np.int64))
    iv = t.intervals
    if len(iv):
        cols["iv:vertex"] = np.where(ok, iv["vertex"].to_numpy()[i], -1).astype(np.int32)
        cols["iv:enter"] = np.where(ok, iv["enter"].to_numpy()[i], np.nan)
        cols["iv:leave"] = np.where(ok, iv["leave"].to_numpy()[i], np.nan)
    else:
        cols["iv:vertex"] = np.full(len(c), -1, np.int32)
        cols["iv:enter"] = cols["iv:leave"] = np.full(len(c), np.nan)
    if n_parts == 1:
        return [pd.DataFrame(cols, copy=False)]
    owner = cols["instance"].astype(np.int64) % n_parts
    return [pd.DataFrame({k: a[owner == j] for k, a in cols.items()}, copy=False) for j in range(n_parts)]


def coll_part(comms: dict[int, np.ndarray], early_reduce: str, inbound: list[pd.DataFrame],
              collective_span: str = "records") -> pd.DataFrame:  # fmt: skip
    """Collective wait-state instances of the instances this partition owns (global ids).

    The instances' rows come whole; each row's call is an interval of a small trace (row ``i``: interval ``i``)."""
    parts = [x for x in inbound if len(x)]
    if not parts:
        out = empty_waits()
        out["_k1"], out["_k2"] = np.zeros(0, np.int64), np.zeros(0, np.int64)
        return out
    c = {k: np.concatenate([p[k].to_numpy() for p in parts]) for k in parts[0].columns}
    order = np.lexsort((c["thread"], c["process"], c["instance"]))
    c = {k: a[order] for k, a in c.items()}
    g = c["interval"].astype(np.int64)
    n = len(g)
    iv = pd.DataFrame({"process": c["process"], "thread": c["thread"], "vertex": c["iv:vertex"],
                       "enter": c["iv:enter"], "leave": c["iv:leave"], "parent": np.full(n, -1, np.int64)}, copy=False)  # fmt: skip
    local = {k: c[k] for k in _COLL}
    local["interval"] = np.where(g >= 0, np.arange(n), -1)
    trace = Trace(iv, collectives=pd.DataFrame(local, copy=False), comms=dict(comms))
    w = collective_waits(trace, early_reduce=early_reduce, collective_span=collective_span)
    for col in ("interval", "cause_interval"):
        v = w[col].to_numpy().astype(np.int64)
        w[col] = np.where(v >= 0, g[np.maximum(v, 0)] if n else -1, -1)
    w["_k1"] = w["instance"].to_numpy()
    w["_k2"] = w["process"].to_numpy().astype(np.int64) * (1 << 20) + w["thread"].to_numpy()
    return w


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
    dtype = empty_waits()["kind"].dtype

    def cat(c: str) -> np.ndarray:
        return np.concatenate([p[c].to_numpy() for p in rows])

    codes = np.concatenate([p["kind"].astype(dtype).cat.codes.to_numpy() for p in rows])
    order = np.lexsort((cat("_k2"), cat("_k1"), codes, cat("start"), cat("thread"), cat("process")))
    # one column at a time: the parts' rows and the sorted table, never a third copy (at 200 M events the
    # table is the largest thing on the client)
    out = {c: cat(c)[order] for c in WAIT_COLUMNS if c != "kind"}
    out["kind"] = pd.Categorical.from_codes(codes[order], dtype=dtype)
    res = pd.DataFrame({c: out[c] for c in WAIT_COLUMNS}, copy=False)
    res.attrs = stats
    return res


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

    Runs on the partition traces (:func:`perflow.trace.parttrace.part_traces`, made once per built trace);
    collective instances are sent to owner partitions; only the instance table comes back.
    """
    rt, n = b.runtime, b.n_parts
    tb = b.tables
    pts, _ = part_traces(b)
    p2p = rt.map(p2p_part, Each(pts), names, int(window), late_receiver)
    cin = rt.exchange(rt.map(coll_outbox, Each(tb), n), "collective_rows")
    coll = rt.map(coll_part, b.defs.comms, early_reduce, Each(cin), collective_span)
    thr = rt.map(thread_part, Each(tb), roles, regions)
    rma = _rma_waits(rt.gather(rt.map(rma_part, Each(tb))), _rma_groups(b), names)
    return finish([*rt.gather(p2p + coll + thr), rma])
