"""Partition traces: the trace a partition's analyses see, made once per built trace and kept on the workers.

The wait states (:mod:`perflow.trace.waitparts`), the replay plan
(:mod:`perflow.trace.replayparts`) and the delay costs run the single-process
kernels on a **partition trace** (:class:`PartTrace`): the partition's own
intervals (whole processes, :mod:`perflow.trace.pipeline`), the messages it
received or sent, in the whole trace's message order and with its message ids,
its collective rows and lock acquisitions, and, for the boundary messages (sender
and receiver in different partitions), *ghost* intervals: the other side's
calls (the send call and the call completing the send; the calls posting and
completing the receive), which are all any message-level formula reads of them.

It takes two exchanges of boundary records (only those cross partitions) and
one tiny reduction (a task: nothing waits on the client):

1. ``to_sender``: each receiver sends the sender's partition its boundary
   messages with its receive calls;
2. the senders group and rank every message they sent in the single-process
   order (without threads: by sending location and send row; with threads: by
   sending process, send time and send row) and report counts per group, summed
   into offsets;
3. ``to_receiver``: each sender numbers its messages and sends the receivers of
   boundary ones the message id and its send calls.

Everything is numpy columns: no merges, no per-row objects.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..pag.instances import MESSAGE_COLUMNS, Trace, conform
from ..pag.partitioned import Each
from .flat import FlatTimeline, Locations, flat_timeline, locations
from .pipeline import Built, part_of
from .stages import PartTables, local_rows

__all__ = ["PartTrace", "part_traces", "to_sender", "sender_state", "message_ids", "make_part_trace", "ROLES"]

#: the message's interval columns: the sender's two calls, then the receiver's two
ROLES = ("send_interval", "send_complete_interval", "recv_post_interval", "recv_interval")
_DATA = ("vertex", "enter", "leave")


def _role_data(t: PartTables, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vertex, enter and leave of the local intervals ``g`` (-1 / NaN where not local)."""
    i, ok = local_rows(t.ginst, np.asarray(g, dtype=np.int64))
    iv = t.intervals
    if not len(iv):
        return np.full(len(g), -1, np.int64), np.full(len(g), np.nan), np.full(len(g), np.nan)
    v = np.where(ok, iv["vertex"].to_numpy()[i], -1).astype(np.int64)
    e = np.where(ok, iv["enter"].to_numpy()[i], np.nan)
    lv = np.where(ok, iv["leave"].to_numpy()[i], np.nan)
    return v, e, lv


def _with_roles(t: PartTables, m: pd.DataFrame, rows: np.ndarray, roles: tuple[str, ...]) -> pd.DataFrame:
    """Rows ``rows`` of the message frame ``m`` (its schema's columns) with the local data of ``roles``."""
    cols = {c: m[c].to_numpy()[rows] for c in MESSAGE_COLUMNS}
    cols["send_row"] = m["send_row"].to_numpy()[rows]
    for r in roles:
        for k, a in zip(_DATA, _role_data(t, cols[r]), strict=True):
            cols[f"{r}:{k}"] = a
    return pd.DataFrame(cols, copy=False)


def to_sender(t: PartTables, messages: pd.DataFrame, processes: np.ndarray, assign: np.ndarray,
              n_parts: int) -> list[pd.DataFrame]:  # fmt: skip
    """Boundary messages received here, with their receive calls, by sender partition."""
    sp = part_of(processes, assign, messages["send_process"].to_numpy())
    return [_with_roles(t, messages, np.flatnonzero((sp == j) & (j != t.pid)), ROLES[2:]) for j in range(n_parts)]


@dataclass
class SenderState:
    """The sends of one partition: rows of its received messages sent here (``own``), then the boundary ones
    received elsewhere (``remote``, the ``to_sender`` records), with their group and rank in message order."""

    own: np.ndarray
    remote: pd.DataFrame
    group: np.ndarray
    rank: np.ndarray
    counts: np.ndarray
    msg_id: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def sender_state(t: PartTables, messages: pd.DataFrame, processes: np.ndarray, assign: np.ndarray,
                 p2p_off: np.ndarray, threaded: bool, n_groups: int, inbound: list[pd.DataFrame]) -> SenderState:  # fmt: skip
    """Group and rank this partition's sends in the single-process message order (see the module docstring)."""
    own = np.flatnonzero(part_of(processes, assign, messages["send_process"].to_numpy()) == t.pid)
    parts = [x for x in inbound if len(x)]
    remote = pd.concat(parts, ignore_index=True) if parts else _with_roles(t, messages, own[:0], ROLES[2:])

    def col(c: str) -> np.ndarray:
        return np.concatenate([messages[c].to_numpy()[own], remote[c].to_numpy()])

    row = col("send_row").astype(np.int64)
    if threaded:
        group = col("send_process").astype(np.int64)
        order = np.lexsort((row, col("send_time"), group))
    else:
        group = np.searchsorted(p2p_off, row, side="right") - 1
        order = np.lexsort((row, group))
    gs = group[order]
    starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]]) if len(gs) else np.zeros(0, np.int64)
    rank = np.empty(len(row), dtype=np.int64)
    rank[order] = np.arange(len(row)) - np.repeat(starts, np.diff(np.r_[starts, len(row)]))
    counts = np.bincount(group, minlength=n_groups) if len(group) else np.zeros(n_groups, dtype=np.int64)
    return SenderState(own, remote, group, rank, counts)


def message_ids(t: PartTables, st: SenderState, offsets: np.ndarray, processes: np.ndarray, assign: np.ndarray,
                n_parts: int) -> tuple[SenderState, list[pd.DataFrame]]:  # fmt: skip
    """The global message id of every send here; for the receivers of boundary ones: ``send_row``, ``msg_id``
    and the send calls' data."""
    msg_id = offsets[st.group] + st.rank
    out = SenderState(st.own, st.remote, st.group, st.rank, st.counts, msg_id)
    r = st.remote
    rid = msg_id[len(st.own) :]
    rp = part_of(processes, assign, r["recv_process"].to_numpy())
    cols: dict[str, np.ndarray] = {"send_row": r["send_row"].to_numpy(), "msg_id": rid}
    for role in ROLES[:2]:
        for k, a in zip(_DATA, _role_data(t, r[role].to_numpy()), strict=True):
            cols[f"{role}:{k}"] = a
    box = pd.DataFrame(cols, copy=False)
    return out, [box.iloc[np.flatnonzero((rp == j) & (j != t.pid))].reset_index(drop=True) for j in range(n_parts)]


@dataclass
class PartTrace:
    """A partition's trace (see the module docstring).

    Attributes
    ----------
    trace : Trace
        Intervals (own and ghost, grouped by (process, thread)), messages in message order, collective rows
        and locks, all with rows of this trace.
    gid : numpy.ndarray
        Global interval row of each interval.
    own : numpy.ndarray
        Whether each interval is the partition's (not a ghost).
    msg_ids : numpy.ndarray
        Global message id (row of ``trace.messages`` of the whole trace) of each message.
    here : numpy.ndarray
        Whether each message was received here.
    processes : numpy.ndarray
        The partition's processes.
    """

    trace: Trace
    gid: np.ndarray
    own: np.ndarray
    msg_ids: np.ndarray
    here: np.ndarray
    processes: np.ndarray
    _locs: Locations | None = None
    _flat: FlatTimeline | None = None

    @property
    def locs(self) -> Locations:
        """``locations(trace)``, made once."""
        if self._locs is None:
            self._locs = locations(self.trace)
        return self._locs

    @property
    def flat(self) -> FlatTimeline:
        """``flat_timeline(trace)``, made once."""
        if self._flat is None:
            self._flat = flat_timeline(self.trace, self.locs)
        return self._flat

    def to_global(self, w: pd.DataFrame, messages: bool = True) -> pd.DataFrame:
        """A wait table of this trace in global interval rows (and message ids)."""
        out = w.copy()
        for c in ("interval", "cause_interval"):
            v = out[c].to_numpy().astype(np.int64)
            out[c] = np.where(v >= 0, self.gid[np.maximum(v, 0)] if len(self.gid) else -1, -1)
        if messages:
            v = out["message"].to_numpy().astype(np.int64)
            out["message"] = np.where(v >= 0, self.msg_ids[np.maximum(v, 0)] if len(self.msg_ids) else -1, -1)
        return out


def make_part_trace(t: PartTables, messages: pd.DataFrame, st: SenderState, back: list[pd.DataFrame],
                    comms: dict[int, np.ndarray]) -> PartTrace:  # fmt: skip
    """The :class:`PartTrace` of a partition from its tables, its sender state with message ids and the
    ``to_receiver`` records it got."""
    ginst = np.asarray(t.ginst, dtype=np.int64)
    nr, n_own = len(messages), len(st.own)
    # message ids of the messages received here: own sends from the state, boundary ones from the records
    rid = np.full(nr, -1, np.int64)
    rid[st.own] = st.msg_id[:n_own]
    parts = [x for x in back if len(x)]
    rec = pd.concat(parts, ignore_index=True) if parts else None
    srow = messages["send_row"].to_numpy().astype(np.int64)
    far_send = np.zeros(nr, bool)
    if rec is not None:
        far_send[:] = rid < 0
        fr = np.flatnonzero(far_send)
        rs = rec["send_row"].to_numpy().astype(np.int64)
        o = np.argsort(rs, kind="stable")
        k = o[np.clip(np.searchsorted(rs[o], srow[fr]), 0, len(rs) - 1)]
        if not np.array_equal(rs[k], srow[fr]):
            raise ValueError("a boundary message received here has no record from its sender")
        rid[fr] = rec["msg_id"].to_numpy()[k]
    r = st.remote
    n_rem = len(r)
    # the messages: received here, then sent here and received elsewhere; in message order
    mcols = {c: np.concatenate([messages[c].to_numpy(), r[c].to_numpy()]) for c in MESSAGE_COLUMNS}
    msg_ids = np.concatenate([rid, st.msg_id[n_own:]])
    here = np.r_[np.ones(nr, bool), np.zeros(n_rem, bool)]
    # ghosts: the senders' calls of boundary messages received here, the receivers' calls of those sent here
    gh: dict[str, list[np.ndarray]] = {k: [] for k in ("gid", "process", "thread", "vertex", "enter", "leave")}
    for roles, side, src, sel in ((ROLES[:2], "send", rec, far_send), (ROLES[2:], "recv", r, None)):
        if src is None or not len(src):
            continue
        for role in roles:
            if sel is None:
                g = src[role].to_numpy().astype(np.int64)
                p, th = src[f"{side}_process"].to_numpy(), src[f"{side}_thread"].to_numpy()
                data = [src[f"{role}:{x}"].to_numpy() for x in _DATA]
            else:
                fr = np.flatnonzero(sel)
                g = messages[role].to_numpy().astype(np.int64)[fr]
                p = messages[f"{side}_process"].to_numpy()[fr]
                th = messages[f"{side}_thread"].to_numpy()[fr]
                data = [src[f"{role}:{x}"].to_numpy()[k] for x in _DATA]
            ok = g >= 0
            for name, a in zip(gh, (g, p, th, *data), strict=True):
                gh[name].append(np.asarray(a)[ok])
    gcat = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in gh.items()}
    ggid = gcat["gid"].astype(np.int64)
    _, first = np.unique(ggid, return_index=True)
    gp, gt = gcat["process"][first].astype(np.int64), gcat["thread"][first].astype(np.int64)
    go = first[np.lexsort((ggid[first], gcat["enter"][first], gt, gp))]
    iv = t.intervals
    n_iv, n_gh = len(iv), len(go)
    # own intervals are grouped by location in (process, thread) order; ghosts go between them by key
    key = iv["process"].to_numpy().astype(np.int64) * (1 << 32) + iv["thread"].to_numpy().astype(np.int64)
    gkey = gcat["process"][go].astype(np.int64) * (1 << 32) + gcat["thread"][go].astype(np.int64)
    if n_iv < 2 or bool(np.all(key[1:] >= key[:-1])):
        gpos = np.searchsorted(key, gkey, side="right") + np.arange(n_gh)
        is_gh = np.zeros(n_iv + n_gh, bool)
        is_gh[gpos] = True
        opos = np.flatnonzero(~is_gh)
    else:  # locations not in (process, thread) order: one stable sort
        at = np.empty(n_iv + n_gh, np.int64)
        at[np.argsort(np.r_[key, gkey], kind="stable")] = np.arange(n_iv + n_gh)
        opos, gpos = at[:n_iv], at[n_iv:]
        is_gh = np.zeros(n_iv + n_gh, bool)
        is_gh[gpos] = True
    gid = np.empty(n_iv + n_gh, np.int64)
    gid[opos], gid[gpos] = ginst, ggid[go]
    cols: dict[str, np.ndarray] = {}
    for c, ghost in (("process", gcat["process"]), ("thread", gcat["thread"]), ("vertex", gcat["vertex"]),
                     ("enter", gcat["enter"]), ("leave", gcat["leave"])):  # fmt: skip
        a = iv[c].to_numpy()
        out = np.empty(n_iv + n_gh, a.dtype)
        out[opos], out[gpos] = a, ghost[go]
        cols[c] = out
    ghost_sorted = ggid[go]
    gorder = np.argsort(ghost_sorted, kind="stable")

    def local(g: np.ndarray) -> np.ndarray:  # global interval rows -> rows of the partition trace (-1: none)
        g = np.asarray(g, dtype=np.int64)
        i, ok = local_rows(ginst, g)
        res = np.where(ok, opos[i] if n_iv else 0, -1)
        if n_gh:
            rest = np.flatnonzero(~ok & (g >= 0))
            j = np.clip(np.searchsorted(ghost_sorted[gorder], g[rest]), 0, n_gh - 1)
            hit = ghost_sorted[gorder][j] == g[rest]
            res[rest[hit]] = gpos[gorder[j[hit]]]
        return res

    parent = np.full(n_iv + n_gh, -1, np.int64)
    parent[opos] = local(iv["parent"].to_numpy())
    cols["parent"] = parent
    order = np.argsort(msg_ids, kind="stable")
    m = {c: a[order] for c, a in mcols.items()}
    for role in ROLES:
        m[role] = local(m[role])
    tc = t.coll if len(t.coll) else conform("collectives", None)
    coll = {c: tc[c].to_numpy() for c in conform("collectives", None).columns}
    coll["interval"] = local(coll["interval"])
    locks = conform("locks", t.locks) if t.locks is not None else conform("locks", None)
    if len(locks):
        locks = locks.copy()
        locks["interval"] = local(locks["interval"].to_numpy())
        locks["release_interval"] = local(locks["release_interval"].to_numpy())
    trace = Trace(pd.DataFrame(cols, copy=False), pd.DataFrame(m, copy=False), pd.DataFrame(coll, copy=False),
                  comms=dict(comms), locks=locks)  # fmt: skip
    return PartTrace(trace, gid, ~is_gh, msg_ids[order], here[order], np.asarray(t.processes, dtype=np.int64))


def _counts(st: SenderState) -> np.ndarray:
    return st.counts


def _summed(counts: list[np.ndarray]) -> np.ndarray:
    return np.sum(counts, axis=0)


def _total(counts: np.ndarray) -> int:
    return int(np.sum(counts))


def _numbered(t: PartTables, st: SenderState, counts: np.ndarray, processes: np.ndarray, assign: np.ndarray,
              n_parts: int) -> tuple[SenderState, list[pd.DataFrame]]:  # fmt: skip
    """:func:`message_ids` with the offsets of the groups' summed ``counts``."""
    return message_ids(t, st, np.cumsum(counts) - counts, processes, assign, n_parts)


def _first(x: tuple[Any, ...]) -> Any:
    return x[0]


def _second(x: tuple[Any, ...]) -> Any:
    return x[1]


_CACHE: dict[int, tuple[list[Any], int]] = {}


def part_traces(b: Built) -> tuple[list[Any], Any]:
    """The runtime's references to each partition's :class:`PartTrace`, and a reference to the number of
    messages (made once per built trace; nothing waits: the steps are submitted at once)."""
    key = id(b)
    if key not in _CACHE:
        rt, n = b.runtime, b.n_parts
        procs, assign = b.processes, b.assign
        tb, msg = b.tables, b.messages
        inbound = rt.exchange(rt.map(to_sender, Each(tb), Each(msg), procs, assign, n), "to_sender")
        threaded = bool(b.tree["threaded"])
        p2p_off = b.tree["p2p_off"]
        n_groups = int(procs.max()) + 1 if threaded and len(procs) else len(p2p_off)
        states = rt.map(sender_state, Each(tb), Each(msg), procs, assign, p2p_off, threaded, n_groups, Each(inbound))
        counts = rt.submit(_summed, rt.map(_counts, Each(states)))
        ids = rt.map(_numbered, Each(tb), Each(states), counts, procs, assign, n)
        back = rt.exchange(rt.map(_second, Each(ids)), "to_receiver")
        pts = rt.map(make_part_trace, Each(tb), Each(msg), Each(rt.map(_first, Each(ids))), Each(back), b.defs.comms)
        _CACHE[key] = (pts, rt.submit(_total, counts))
        weakref.finalize(b, _CACHE.pop, key, None)
    return _CACHE[key]
