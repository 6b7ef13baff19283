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
instances); the collective ones then go to the partition of their waiting
process, and each partition sorts its processes' rows as the single-process
engine does, ties kept in its order (:func:`~perflow.trace.waittable.sorted_waits`,
:func:`merge_part`). A partition holds whole processes, so the whole table is
those tables' process blocks side by side (:func:`assemble`). The steps are
submitted at once, as one graph (reductions are tasks); the client waits once
for a small trace's tables, and for a large one fetches them in chunks after
their sizes: a Dask worker loads every result one fetch asks of it (from its
spill directory) into memory before sending, so one fetch of every table made
each worker hold all of its tables at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..pag.edges import test_calls
from ..pag.instances import Trace, conform
from ..pag.partitioned import Each
from .collwaits import collective_waits
from .parttrace import PartTrace, part_traces
from .pipeline import Built, part_of
from .rmawaits import rma_calls, rma_waits_of_calls
from .stages import PartTables, local_rows
from .threadwaits import thread_waits
from .waits import empty_waits, p2p_waits
from .waittable import KIND_DTYPE, WAIT_COLUMNS, sorted_waits

__all__ = [
    "program",
    "p2p_part",
    "coll_outbox",
    "coll_part",
    "by_process",
    "merge_part",
    "blocks",
    "assemble",
    "finish",
]


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
    stats = {  # the keys of _STATS
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
#: the statistics of the point-to-point parts (in their ``attrs``), summed by :func:`finish`
_STATS = ("clock_violations", "unattributed_messages", "test_completions")


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
    """All partitions' instances in the single-process order (process, thread, start, kind; its ties: the
    parts' ``_k1``, ``_k2``), with the point-to-point statistics summed in ``attrs``."""
    stats = {k: sum(int(p.attrs.get(k, 0)) for p in parts) for k in _STATS}
    out = sorted_waits(parts, ties=("_k1", "_k2"))
    out.attrs = stats
    return out


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


def by_process(w: pd.DataFrame, processes: np.ndarray, assign: np.ndarray, n_parts: int) -> list[pd.DataFrame]:
    """The rows of a wait table by the partition of their waiting process (a process no partition holds: 0)."""
    if n_parts == 1:
        return [w]
    dest = part_of(processes, assign, w["process"].to_numpy())
    dest[dest < 0] = 0
    order = np.argsort(dest, kind="stable")
    cut = np.searchsorted(dest[order], np.arange(n_parts + 1))
    return [w.iloc[order[cut[j] : cut[j + 1]]].reset_index(drop=True) for j in range(n_parts)]


def merge_part(pid: int, p2p: pd.DataFrame, coll: list[pd.DataFrame], thr: pd.DataFrame, rma: pd.DataFrame,
               processes: np.ndarray, assign: np.ndarray) -> pd.DataFrame:  # fmt: skip
    """Every wait-state instance of this partition's processes, in the single-process order, the point-to-point
    statistics in ``attrs``.

    The rows of one process are all here, in the order :func:`finish` gives them (point to point, collective
    rows from their owners in partition order, thread, RMA): the whole table is these tables' process blocks
    side by side (:func:`assemble`)."""
    if len(rma):
        d = part_of(processes, assign, rma["process"].to_numpy())
        d[d < 0] = 0
        rma = rma.iloc[np.flatnonzero(d == pid)]
    out = sorted_waits([p2p, *coll, thr, rma], ties=("_k1", "_k2"))
    out.attrs = {k: int(p2p.attrs.get(k, 0)) for k in _STATS}
    return out


def blocks(w: pd.DataFrame) -> dict[str, Any]:
    """The process blocks of a partition's sorted wait table (process, rows), its columns' dtypes and statistics."""
    p = w["process"].to_numpy()
    starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]]) if len(p) else np.zeros(0, np.int64)
    return {
        "process": p[starts].astype(np.int64),
        "count": np.diff(np.r_[starts, len(p)]).astype(np.int64),
        "dtypes": {c: w[c].dtype for c in WAIT_COLUMNS if c != "kind"},
        "stats": {k: int(w.attrs.get(k, 0)) for k in _STATS},
    }


def assemble(infos: list[dict[str, Any]], fetch: Callable[[list[int]], list[pd.DataFrame]],
             chunk_rows: int) -> pd.DataFrame:  # fmt: skip
    """The whole wait table from the partitions' sorted tables (:func:`merge_part`), fetched a few at a time.

    ``infos``: :func:`blocks` of each partition; ``fetch(parts)``: those partitions' tables. Each table's process
    blocks are copied to their place in columns allocated once: the client holds the table and one chunk of
    about ``chunk_rows`` rows, never the parts and a sorted copy at once."""
    stats = {k: sum(i["stats"][k] for i in infos) for k in _STATS}
    rows = [int(i["count"].sum()) for i in infos]
    full = [k for k, r in enumerate(rows) if r]
    if not full:
        out = empty_waits()
        out.attrs = stats
        return out
    proc = np.concatenate([infos[k]["process"] for k in full])
    cnt = np.concatenate([infos[k]["count"] for k in full])
    if len(np.unique(proc)) != len(proc):
        raise ValueError("the wait states of a process are in two partitions")
    order = np.argsort(proc, kind="stable")
    off = np.empty(len(proc), np.int64)
    off[order] = np.cumsum(cnt[order]) - cnt[order]  # where each block goes in the table
    n = int(cnt.sum())
    dtypes = {c: np.result_type(*(infos[k]["dtypes"][c] for k in full)) for c in WAIT_COLUMNS if c != "kind"}
    cols = {c: np.empty(n, t) for c, t in dtypes.items()}
    codes = np.empty(n, np.int8)
    first = np.cumsum([0, *(len(infos[k]["count"]) for k in full)])  # each partition's first block in proc
    groups: list[list[int]] = [[]]
    size = 0
    for k in full:
        if groups[-1] and size + rows[k] > chunk_rows:
            groups.append([])
            size = 0
        groups[-1].append(k)
        size += rows[k]
    at = {k: j for j, k in enumerate(full)}
    for g in groups:
        for k, t in zip(g, fetch(g), strict=True):
            b = slice(first[at[k]], first[at[k] + 1])
            c = cnt[b]
            dest = np.repeat(off[b] - (np.cumsum(c) - c), c) + np.arange(rows[k])
            for name, a in cols.items():
                a[dest] = t[name].to_numpy()
            codes[dest] = t["kind"].cat.codes.to_numpy()
    cols["kind"] = pd.Categorical.from_codes(codes, dtype=KIND_DTYPE)
    out = pd.DataFrame({c: cols[c] for c in WAIT_COLUMNS}, copy=False)
    out.attrs = stats
    return out


#: a trace of up to this many events gathers its partitions' wait tables at once (one wait of the client)
GATHER_AT_ONCE_EVENTS = 5_000_000
#: beyond, the client fetches them in chunks of about this many rows (what a worker unspills at once to send)
CHUNK_ROWS = 2_000_000


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
    collective instances are sent to owner partitions, their rows then to the partitions of their processes;
    each partition sorts its processes' rows. A small trace's tables come back at once (one wait); a large
    trace's (past :data:`GATHER_AT_ONCE_EVENTS`) are fetched in chunks of :data:`CHUNK_ROWS` rows after their
    sizes (:func:`assemble`): no worker loads all its tables from its spill directory at once to send them.
    """
    rt = b.runtime
    merged = _merged(b, names, window, late_receiver, early_reduce, collective_span, roles, regions)
    if b.n_events <= GATHER_AT_ONCE_EVENTS:
        got = rt.gather(merged)  # one graph, one wait
        return assemble([blocks(t) for t in got], lambda g: [got[k] for k in g], CHUNK_ROWS)
    infos = rt.gather(rt.map(blocks, Each(merged)))

    def fetch(g: list[int]) -> list[pd.DataFrame]:
        out = rt.gather([merged[k] for k in g])
        for k in g:
            merged[k] = None  # the worker may drop it
        return out

    return assemble(infos, fetch, CHUNK_ROWS)


def _merged(b: Built, names: np.ndarray, window: int, late_receiver: str, early_reduce: str, collective_span: str,
            roles: np.ndarray | None, regions: np.ndarray | None) -> list[Any]:  # fmt: skip
    """The runtime's references to each partition's sorted wait table (:func:`merge_part`); nothing waits."""
    rt, n = b.runtime, b.n_parts
    tb = b.tables
    pts, _ = part_traces(b)
    p2p = rt.map(p2p_part, Each(pts), names, int(window), late_receiver)
    cin = rt.exchange(rt.map(coll_outbox, Each(tb), n), "collective_rows")
    coll = rt.map(coll_part, b.defs.comms, early_reduce, Each(cin), collective_span)
    cout = rt.exchange(rt.map(by_process, Each(coll), b.processes, b.assign, n), "collective_waits")
    thr = rt.map(thread_part, Each(tb), roles, regions)
    rma = rt.submit(_rma_waits, rt.map(rma_part, Each(tb)), _rma_groups(b), names)
    return rt.map(merge_part, Each(list(range(n))), Each(p2p), Each(cout), Each(thr), rma, b.processes, b.assign)
