"""The replay plan over partitions: the partitioned form of :func:`perflow.trace.replayplan.build_plan`.

Each partition (whole processes, :mod:`perflow.trace.pipeline`) makes the
plan of its own locations (:func:`~perflow.trace.replayplan.plan_part`) from
its **partition trace** (:mod:`perflow.trace.parttrace`, made once per built
trace and shared with the wait states): its intervals, the messages it sent or
received, numbered as the whole trace numbers them, with the other side's
calls of boundary messages as ghost intervals, its collective rows and its
lock acquisitions. What needs every partition is reduced first (by a task:
the steps are submitted as one graph, and the client waits once, for the
parts) and handed to all: the number of messages, each collective instance's bytes moved and
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

from ..pag.partitioned import Each
from .parttrace import PartTrace, part_traces
from .pipeline import Built
from .replay import Plan
from .replaycolls import combine_instance_stats, instance_stats, scan_rows
from .replaydeps import DEFAULT_EAGER_LIMIT, dependencies, rendezvous_limit, trace_protocol_evidence
from .replayplan import PlanPart, combine_parts, plan_part

__all__ = ["program", "part_refs"]


def _facts(pt: PartTrace, names: np.ndarray) -> dict[str, Any]:
    trace = pt.trace
    c = trace.collectives
    return {
        "evidence": trace_protocol_evidence(trace, names, pt.processes),
        "instances": int(c["instance"].max()) + 1 if len(c) else 0,
        "scans": scan_rows(trace),
    }


def _shared(facts: list[dict[str, Any]], eager_limit: int) -> dict[str, Any]:
    """What every partition's plan needs of all: the number of collective instances, the scan participants
    in the single-process order and the rendezvous size."""
    scans = pd.concat([f["scans"] for f in facts], ignore_index=True)
    scans = scans.sort_values(["instance", "rank", "process", "thread"], kind="stable").reset_index(drop=True)
    return {
        "instances": max((f["instances"] for f in facts), default=0),
        "scans": scans,
        "above": rendezvous_limit([f["evidence"] for f in facts], eager_limit),
    }


def _stats(pt: PartTrace, shared: dict[str, Any]) -> np.ndarray:
    return instance_stats(pt.trace, shared["instances"])


def _part(pt: PartTrace, names: np.ndarray, late_receiver: str, early_reduce: str,
          n_messages: int, shared: dict[str, Any], stats: np.ndarray,
          roles: np.ndarray | None, regions: np.ndarray | None) -> PlanPart:  # fmt: skip
    trace, locs = pt.trace, pt.locs
    deps = dependencies(
        trace, locs, names=names, late_receiver=late_receiver, early_reduce=early_reduce, roles=roles,
        regions=regions, message_ids=pt.msg_ids, n_messages=n_messages, n_instances=shared["instances"],
        instances=stats, scans=shared["scans"], rendezvous_above=shared["above"],
    )  # fmt: skip
    own = np.flatnonzero(np.isin(locs.process, pt.processes))
    return plan_part(deps, locs, pt.flat, own)


def program(b: Built, names: np.ndarray, settings: Any, *, roles: np.ndarray | None = None,
            regions: np.ndarray | None = None) -> Plan:  # fmt: skip
    """The replay plan of a built trace (``settings``: :class:`perflow.trace.analyses.ReplaySettings`),
    equal to :func:`~perflow.trace.replayplan.build_plan` of the whole trace."""
    rt = b.runtime
    return combine_parts(rt.gather(part_refs(b, names, settings, roles=roles, regions=regions)))


def part_refs(b: Built, names: np.ndarray, settings: Any, *, roles: np.ndarray | None = None,
              regions: np.ndarray | None = None) -> list[Any]:  # fmt: skip
    """The runtime's references to each partition's :class:`~perflow.trace.replayplan.PlanPart` (left where
    they are made: :func:`program` gathers and combines them, :mod:`perflow.trace.replaystream` streams them)."""
    rt = b.runtime
    pts, n_messages = part_traces(b)
    limit = int(getattr(settings, "eager_limit", DEFAULT_EAGER_LIMIT))
    shared = rt.submit(_shared, rt.map(_facts, Each(pts), names), limit)
    stats = rt.submit(combine_instance_stats, rt.map(_stats, Each(pts), shared))
    return rt.map(
        _part, Each(pts), names, settings.late_receiver, settings.early_reduce, n_messages, shared, stats, roles,
        regions,
    )  # fmt: skip
