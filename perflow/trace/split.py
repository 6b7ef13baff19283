"""Cutting a raw trace into partitions of whole processes (the pipeline's first stage), and the traffic that guides it.

:func:`traffic` is the cheap first pass: per-process event counts and the
point-to-point traffic between world ranks (messages and bytes per ordered
pair), from the send events alone. :func:`split_raw` cuts an in-memory
:class:`~perflow.trace.raw.RawTrace` into one raw trace per partition: the
same definition tables (so ``location`` keeps global ids) and the events of
the partition's locations, with ``pos`` renumbered into the partition's own
region events.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._arrays import unique
from ..kinds import P2P
from .match import to_world
from .raw import TABLE_SCHEMAS, RawTrace

__all__ = ["traffic", "send_traffic", "split_raw", "split_blocks", "location_parts", "definitions_only", "EVENT_TABLES"]

EVENT_TABLES = tuple(TABLE_SCHEMAS)  # region_events first


def traffic(raw: RawTrace) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """Per-process event counts and the send traffic between world ranks.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, pandas.DataFrame)
        Sorted processes, their event counts, and one row per (``src``,
        ``dst``) pair of world ranks with ``count`` and ``bytes`` of the sends.
    """
    loc_proc = raw.locations["process"].to_numpy(dtype=np.int64)
    procs = unique(loc_proc)
    n_loc = np.zeros(len(loc_proc), dtype=np.int64)
    for t in EVENT_TABLES:
        n_loc += np.bincount(getattr(raw, t)["location"], minlength=len(loc_proc))[: len(loc_proc)]
    events = np.bincount(np.searchsorted(procs, loc_proc), weights=n_loc, minlength=len(procs))
    return procs, events, send_traffic(raw.p2p_events, loc_proc, raw)


def send_traffic(p2p: dict[str, np.ndarray], loc_proc: np.ndarray, raw: RawTrace) -> pd.DataFrame:
    """``src``, ``dst``, ``count``, ``bytes`` of the send events of a p2p table (peers translated to world ranks)."""
    kind = p2p["kind"]
    s = np.flatnonzero((kind == P2P.SEND) | (kind == P2P.SSEND) | (kind == P2P.ISEND))
    src = loc_proc[p2p["location"][s]]
    dst = to_world(raw, p2p["comm"][s], p2p["peer"][s]) if len(s) else np.zeros(0, np.int64)
    df = pd.DataFrame({"src": src, "dst": dst, "count": np.ones(len(s), dtype=np.int64), "bytes": p2p["bytes"][s]})
    return df.groupby(["src", "dst"], sort=True)[["count", "bytes"]].sum().reset_index()


def location_parts(raw: RawTrace, part_of_process: np.ndarray | None, processes: np.ndarray) -> np.ndarray:
    """Partition of every location (that of its process; -1 for processes not assigned)."""
    lp = raw.locations["process"].to_numpy(dtype=np.int64)
    if part_of_process is None or not len(processes):
        return np.zeros(len(lp), dtype=np.int64)
    i = np.clip(np.searchsorted(processes, lp), 0, len(processes) - 1)
    return np.where(processes[i] == lp, part_of_process[i], -1)


def definitions_only(raw: RawTrace) -> RawTrace:
    """A raw trace with ``raw``'s definitions and no events (what the client keeps)."""
    return RawTrace(
        locations=raw.locations,
        regions=raw.regions,
        region_events={"location": [], "time": [], "kind": [], "region": []},
        stacks=raw.stacks,
        comms=raw.comms,
        comm_names=raw.comm_names,
        metrics=raw.metrics,
        attrs=dict(raw.attrs),
    )


def split_raw(raw: RawTrace, loc_part: np.ndarray, n_parts: int) -> list[RawTrace]:
    """Cut ``raw`` into ``n_parts`` raw traces by the partition of each location."""
    loc_part = np.asarray(loc_part, dtype=np.int64)
    rloc = raw.region_events["location"].astype(np.int64)
    nloc = len(raw.locations)
    gstart = np.searchsorted(rloc, np.arange(nloc))
    out = []
    for p in range(n_parts):
        keep_loc = loc_part == p
        sel = keep_loc[rloc] if len(rloc) else np.zeros(0, dtype=bool)
        reg = {c: a[sel] for c, a in raw.region_events.items()}
        lloc = reg["location"].astype(np.int64)
        lstart = np.searchsorted(lloc, np.arange(nloc))
        tables = {"region_events": reg}
        for t in EVENT_TABLES[1:]:
            tab = getattr(raw, t)
            loc = tab["location"].astype(np.int64)
            m = keep_loc[loc] if len(loc) else np.zeros(0, dtype=bool)
            sub = {c: a[m] for c, a in tab.items()}
            if "pos" in sub and len(sub["pos"]):
                sl = sub["location"].astype(np.int64)
                sub["pos"] = sub["pos"] - gstart[sl] + lstart[sl]
            tables[t] = sub
        out.append(
            RawTrace(
                locations=raw.locations,
                regions=raw.regions,
                stacks=raw.stacks,
                comms=raw.comms,
                comm_names=raw.comm_names,
                metrics=raw.metrics,
                attrs=dict(raw.attrs),
                **tables,
            )
        )
    return out


def split_blocks(raw: RawTrace, k: int) -> tuple[list[RawTrace], np.ndarray, np.ndarray] | None:
    """Cut ``raw`` into at most ``k`` partitions of consecutive processes with similar event counts, without copying.

    Every event table is grouped by location, so when each process's
    locations are consecutive a partition's events are slices (views) of
    the trace's arrays; only ``pos`` is renumbered. Returns the partitions,
    the sorted processes and the partition of each, or ``None`` when the
    processes' locations are interleaved (use :func:`split_raw`).
    """
    lp = raw.locations["process"].to_numpy(dtype=np.int64)
    procs = unique(lp)
    if len(lp) > 1 and np.any(np.diff(lp) < 0):
        return None
    nloc = len(lp)
    counts = np.zeros(nloc, dtype=np.int64)
    for t in EVENT_TABLES:  # grouped by location: the bounds of each location's rows, no pass over the rows
        loc = getattr(raw, t)["location"]
        counts += np.diff(np.searchsorted(loc, np.arange(nloc + 1, dtype=loc.dtype)))
    per_proc = np.bincount(np.searchsorted(procs, lp), weights=counts, minlength=len(procs))
    k = max(1, min(k, len(procs)))
    cum = np.cumsum(per_proc)
    total = float(cum[-1]) if len(cum) else 0.0
    # the first process of partition i is the one where the running count passes i/k of the total
    cuts = np.searchsorted(cum, total * np.arange(1, k) / k, side="right") + 1 if total else np.zeros(0, np.int64)
    cuts = unique(np.clip(cuts, 1, max(len(procs) - 1, 1)))
    assign = np.zeros(len(procs), dtype=np.int64)
    for c in cuts:
        assign[c:] += 1
    n_parts = int(assign.max()) + 1 if len(assign) else 1
    loc_part = assign[np.searchsorted(procs, lp)] if nloc else np.zeros(0, np.int64)
    loc_bounds = np.searchsorted(loc_part, np.arange(n_parts + 1)) if nloc else np.zeros(n_parts + 1, np.int64)
    parts = []
    for p in range(n_parts):
        lo_loc, hi_loc = int(loc_bounds[p]), int(loc_bounds[p + 1])
        tables = {}
        reg_lo = 0
        for t in EVENT_TABLES:
            tab = getattr(raw, t)
            loc = tab["location"]
            lo, hi = np.searchsorted(loc, np.array([lo_loc, hi_loc], dtype=loc.dtype))  # not a widened copy of loc
            sub = {c: a[lo:hi] for c, a in tab.items()}
            if t == "region_events":
                reg_lo = int(lo)
            elif "pos" in sub:
                sub["pos"] = sub["pos"] - reg_lo
            tables[t] = sub
        parts.append(
            RawTrace(
                locations=raw.locations, regions=raw.regions, stacks=raw.stacks, comms=raw.comms,
                comm_names=raw.comm_names, metrics=raw.metrics, attrs=dict(raw.attrs), **tables,
            )
        )  # fmt: skip
    return parts, procs, assign
