"""The replay plan over partitions: the partitioned form of :func:`perflow.trace.replayplan.build_plan`.

Each partition (whole processes, :mod:`perflow.trace.pipeline`) makes the
plan of its own locations (:func:`~perflow.trace.replayplan.plan_part`) from
a **partition trace**: its intervals, the messages it sent or received
(the other side's calls -- enter and leave of the send call, of the call
completing the send, of the calls posting and completing the receive --
come through the exchanges of :mod:`perflow.trace.waitparts`, which also
number the messages as the whole trace does), its collective rows and its
lock acquisitions. What needs every partition is reduced first and handed
to all: the number of messages, each collective instance's bytes moved and
arrivals (:func:`~perflow.trace.replaydeps.instance_stats`), the scan
participants, and, for ``late_receiver="auto"``, what the messages show of
the send protocol. The parts (points, pieces: a fraction of the trace's
size) are gathered and combined on the client (:func:`~perflow.trace.replayplan.combine_parts`),
equal to the plan of the whole trace.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..pag.instances import Trace, conform
from ..pag.partitioned import Each
from .flat import flat_timeline, locations
from .pipeline import Built
from .replay import Plan
from .replaycolls import combine_instance_stats, instance_stats, scan_rows
from .replaydeps import DEFAULT_EAGER_LIMIT, dependencies, rendezvous_limit, trace_protocol_evidence
from .replayplan import PlanPart, combine_parts, plan_part
from .stages import PartTables, local_rows
from .waitparts import (
    _ROLES,
    _side_cols,
    _with_roles,
    message_ids,
    sender_state,
    t_counts,
    t_first,
    t_second,
    to_sender,
)

__all__ = ["program", "part_trace"]


def part_trace(t: PartTables, messages: pd.DataFrame, sent: pd.DataFrame, inbound: list[pd.DataFrame],
               comms: dict[int, np.ndarray]) -> tuple[Trace, np.ndarray, np.ndarray]:  # fmt: skip
    """The partition trace of ``t`` (see the module docstring), the global id of each of its messages, and
    which of its locations belong to the partition."""
    side = pd.concat(
        [sent.loc[~sent["_remote"].to_numpy(), ["send_row", "msg_id", *_side_cols()]]] + [x for x in inbound if len(x)],
        ignore_index=True,
    )
    recv = _with_roles(t, messages, ("recv_post_interval", "recv_interval")).merge(side, on="send_row", how="left")
    rows = pd.concat([recv, sent[sent["_remote"].to_numpy()].drop(columns=["_remote"])], ignore_index=True)
    rows = rows.drop_duplicates("msg_id").sort_values("msg_id", kind="stable").reset_index(drop=True)
    ginst = np.asarray(t.ginst, dtype=np.int64)
    iv = t.intervals
    own = pd.DataFrame({c: iv[c].to_numpy() for c in ("process", "thread", "vertex", "enter", "leave")})
    own["gid"] = ginst
    own["parent"] = iv["parent"].to_numpy().astype(np.int64)  # global rows, made local below
    recs = []
    for r in _ROLES:  # the other side's calls of the boundary messages
        g = rows[r].to_numpy().astype(np.int64)
        far = (g >= 0) & ~local_rows(ginst, g)[1]
        side_ = "send" if r.startswith("send") else "recv"
        recs.append(pd.DataFrame({
            "process": rows[f"{side_}_process"].to_numpy()[far], "thread": rows[f"{side_}_thread"].to_numpy()[far],
            "vertex": rows[f"{r}:vertex"].to_numpy()[far], "enter": rows[f"{r}:enter"].to_numpy()[far],
            "leave": rows[f"{r}:leave"].to_numpy()[far], "gid": g[far], "parent": -1,
        }))  # fmt: skip
    far = pd.concat(recs, ignore_index=True).drop_duplicates("gid")
    far = far.sort_values(["process", "thread", "enter", "gid"], kind="stable")
    table = pd.concat([own, far], ignore_index=True)
    key = table["process"].to_numpy().astype(np.int64) * (1 << 32) + table["thread"].to_numpy().astype(np.int64)
    table = table.iloc[np.argsort(key, kind="stable")].reset_index(drop=True)
    gid = table["gid"].to_numpy().astype(np.int64)
    srt = np.argsort(gid, kind="stable")

    def local(g: np.ndarray) -> np.ndarray:  # global interval rows -> rows of the partition trace
        g = np.asarray(g, dtype=np.int64)
        i = np.clip(np.searchsorted(gid[srt], g), 0, max(len(gid) - 1, 0))
        return np.where((g >= 0) & (len(gid) > 0) & (gid[srt][i] == g), srt[i], -1) if len(gid) else np.full(len(g), -1)

    table["parent"] = local(table["parent"].to_numpy())
    m = rows.copy()
    for r in _ROLES:
        m[r] = local(m[r].to_numpy())
    coll = t.coll.drop(columns=["wait", "last", "key"], errors="ignore").copy()
    coll["interval"] = local(coll["interval"].to_numpy())
    locks = conform("locks", t.locks) if t.locks is not None else conform("locks", None)
    if len(locks):
        locks = locks.copy()
        locks["interval"] = local(locks["interval"].to_numpy())
        locks["release_interval"] = local(locks["release_interval"].to_numpy())
    trace = Trace(table.drop(columns=["gid"]), conform("messages", m), conform("collectives", coll), comms=dict(comms),
                  locks=locks)  # fmt: skip
    procs = np.asarray(t.processes, dtype=np.int64)
    return trace, rows["msg_id"].to_numpy().astype(np.int64), procs


def _facts(pt: tuple[Trace, np.ndarray, np.ndarray], names: np.ndarray) -> dict[str, Any]:
    trace = pt[0]
    c = trace.collectives
    return {
        "evidence": trace_protocol_evidence(trace, names, pt[2]),
        "instances": int(c["instance"].max()) + 1 if len(c) else 0,
        "scans": scan_rows(trace),
    }


def _stats(pt: tuple[Trace, np.ndarray, np.ndarray], n_instances: int) -> np.ndarray:
    return instance_stats(pt[0], n_instances)


def _part(pt: tuple[Trace, np.ndarray, np.ndarray], names: np.ndarray, late_receiver: str, early_reduce: str,
          n_messages: int, n_instances: int, stats: np.ndarray, scans: pd.DataFrame, above: int,
          roles: np.ndarray | None, regions: np.ndarray | None) -> PlanPart:  # fmt: skip
    trace, msg_ids, procs = pt
    locs = locations(trace)
    deps = dependencies(
        trace, locs, names=names, late_receiver=late_receiver, early_reduce=early_reduce, roles=roles,
        regions=regions, message_ids=msg_ids, n_messages=n_messages, n_instances=n_instances, instances=stats,
        scans=scans, rendezvous_above=above,
    )  # fmt: skip
    own = np.flatnonzero(np.isin(locs.process, procs))
    return plan_part(deps, locs, flat_timeline(trace, locs), own)


def program(b: Built, names: np.ndarray, settings: Any, *, roles: np.ndarray | None = None,
            regions: np.ndarray | None = None) -> Plan:  # fmt: skip
    """The replay plan of a built trace (``settings``: :class:`perflow.trace.analyses.ReplaySettings`),
    equal to :func:`~perflow.trace.replayplan.build_plan` of the whole trace."""
    rt, n = b.runtime, b.n_parts
    procs, assign = b.processes, b.assign
    tb, msg = b.tables, b.messages
    inbound = rt.exchange(rt.map(to_sender, Each(tb), Each(msg), procs, assign, n), "to_sender")
    threaded = bool(b.tree["threaded"])
    p2p_off = b.tree["p2p_off"]
    n_groups = int(procs.max()) + 1 if threaded and len(procs) else len(p2p_off)
    states = rt.map(sender_state, Each(tb), Each(msg), procs, assign, p2p_off, threaded, n_groups, Each(inbound))
    counts = np.sum(rt.gather(rt.map(t_counts, Each(states))), axis=0)
    offsets = np.cumsum(counts) - counts
    ids = rt.map(message_ids, Each(tb), Each(states), offsets, procs, assign, n)
    back = rt.exchange(rt.map(t_second, Each(ids)), "to_receiver")
    pts = rt.map(part_trace, Each(tb), Each(msg), Each(rt.map(t_first, Each(ids))), Each(back), b.defs.comms)
    facts = rt.gather(rt.map(_facts, Each(pts), names))
    G = max((f["instances"] for f in facts), default=0)
    stats = combine_instance_stats(rt.gather(rt.map(_stats, Each(pts), G)))
    scans = pd.concat([f["scans"] for f in facts], ignore_index=True)
    scans = scans.sort_values(["instance", "rank", "process", "thread"], kind="stable").reset_index(drop=True)
    limit = int(getattr(settings, "eager_limit", DEFAULT_EAGER_LIMIT))
    above = rendezvous_limit([f["evidence"] for f in facts], limit)
    parts = rt.gather(rt.map(
        _part, Each(pts), names, settings.late_receiver, settings.early_reduce, int(np.sum(counts)), G, stats,
        scans, above, roles, regions,
    ))  # fmt: skip
    return combine_parts(parts)
