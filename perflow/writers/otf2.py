"""Write a :class:`~perflow.trace.raw.RawTrace` as an OTF2 archive.

The archive (anchor ``traces.otf2``, global definitions ``traces.def`` and
one event file per location under ``traces/``) is written by the OTF2 C
library bundled with the ``otf2`` package, so any OTF2 reader can open it;
the events go through compiled loops (numba), so writing runs at millions
of events per second (a small trace's go through the same loops interpreted:
see :mod:`perflow._jit`). See ``docs/formats.md`` ("Writers") for the mapping.

Only what OTF2 defines is written: collective events whose operation OTF2
has no code for (perflow's MPI_Init/MPI_Finalize markers, 100/101) are left
out, with their BEGIN (readers make MPI_Init/MPI_Finalize world barriers
from the region names); non-blocking collectives (``coll_events['request']``
>= 0) become NonBlockingCollectiveRequest/Complete events. Timer samples
become CallingContextSample events (interrupt generator 0, the sampling
period) whose calling context is the full path from the root: the call path
of the region instance the sample fell in, then the sample's own frames; its
unwind distance is the number of those frames. The system tree is machine
-> host (``locations['host']`` or ``attrs['hosts']``) -> process.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pandas as pd

from ..codecs.otf2.archive import ArchiveWriter
from ..codecs.otf2.wkernel import metric_groups
from ..errors import TraceError
from ..trace.contexts import stack_frames
from ..trace.match import nth_pairs
from ..trace.raw import RawTrace
from ..trace.scan import enclosing_instance, scan_regions

__all__ = ["write_otf2"]


def _ticks(t: np.ndarray, res: int, offset: int) -> np.ndarray:
    return (np.rint(t * float(res)).astype(np.int64) + offset).astype(np.uint64)


def _complete_comms(raw: RawTrace) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    """The raw comms, plus MPI_COMM_WORLD when missing and placeholders for undefined ids in events."""
    comms = {int(k): np.asarray(v, dtype=np.int64) for k, v in raw.comms.items()}
    names = {int(k): str(v) for k, v in raw.comm_names.items()}
    procs = np.array(sorted(set(raw.locations["process"].astype(int))), dtype=np.int64)
    if not any(n.upper() == "MPI_COMM_WORLD" for n in names.values()):
        cid = max(comms, default=-1) + 1
        comms[cid], names[cid] = procs, "MPI_COMM_WORLD"
    used = np.concatenate([raw.p2p_events["comm"], raw.coll_events["comm"], raw.thread_events["team"]])
    for cid in np.unique(used[used >= 0]).tolist():
        if cid not in comms:
            comms[cid], names[cid] = np.zeros(0, dtype=np.int64), f"undefined comm {cid}"
    return comms, names


#: largest OTF2_CollectiveOp value (DESTROY_HANDLE_AND_DEALLOCATE)
_MAX_OTF2_OP = 22


def _collective_matrix(raw: RawTrace) -> tuple[np.ndarray, np.ndarray]:
    """(keep mask, 8-row matrix) of the collective events as OTF2 can hold them.

    Kinds: 0 MpiCollectiveBegin, 1 MpiCollectiveEnd, 2 NonBlockingCollectiveRequest,
    3 NonBlockingCollectiveComplete. A BEGIN pairs with the END of the same
    request (non-blocking) or, per location, in order (blocking); pairs whose
    operation OTF2 does not define are dropped.
    """
    c = raw.coll_events
    n = len(c["kind"])
    req = np.asarray(c.get("request", np.full(n, -1)), dtype=np.int64)
    kind = c["kind"].astype(np.int64)
    loc = c["location"].astype(np.int64)
    op = c["op"].astype(np.int64)
    bad_end = (kind == 1) & ((op < 0) | (op > _MAX_OTF2_OP))
    keep = ~bad_end
    if bad_end.any():
        ends, begins = np.flatnonzero(kind == 1), np.flatnonzero(kind == 0)
        span = int(req.max()) + 2 if n else 1
        key_e = loc[ends] * span + np.where(req[ends] >= 0, req[ends] + 1, 0)
        key_b = loc[begins] * span + np.where(req[begins] >= 0, req[begins] + 1, 0)
        j = nth_pairs(key_e, key_b)
        drop = j[bad_end[ends] & (j >= 0)]
        keep[begins[drop]] = False
    nb = req >= 0
    kinds = np.where(nb, kind + 2, kind)
    m = np.vstack(
        [kinds]
        + [c[k].astype(np.int64) for k in ("op", "comm", "root", "sent", "received", "pos")]
        + [np.maximum(req, 0)]
    )
    return keep, m


def _calling_contexts(raw: RawTrace) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Calling contexts of the samples: (definitions, context ref and unwind distance per sample).

    The context of a sample is the call path of the region instance open at
    it (from the region events) followed by the sample's stack; contexts are
    numbered parents first. A sample outside every instance, with no frames,
    gets ref -1 (not written).
    """

    smp = raw.sample_events
    ev = raw.region_events
    res = scan_regions(ev["location"], ev["kind"], ev["region"], close_open=True)
    inst = enclosing_instance(res.open_after, ev["location"], smp["location"], smp["pos"])
    base = np.where(inst >= 0, res.callpath[np.maximum(inst, 0)], -1)
    frames = stack_frames(raw)
    pairs, inv = np.unique(np.stack([base, smp["stack"].astype(np.int64)], axis=1), axis=0, return_inverse=True)
    regions = raw.regions
    cc_of: dict[tuple[int, int], int] = {}
    rows: list[tuple[int, int]] = []  # (region, parent)

    def node(parent: int, region: int) -> int:
        k = cc_of.get((parent, region))
        if k is None:
            k = cc_of[(parent, region)] = len(rows)
            rows.append((region, parent))
        return k

    cp_node: dict[int, int] = {}

    def path(cp: int) -> int:
        if cp < 0:
            return -1
        if cp not in cp_node:
            chain = []
            c = cp
            while c >= 0 and c not in cp_node:
                chain.append(c)
                c = int(res.cp_parent[c])
            cur = cp_node.get(c, -1) if c >= 0 else -1
            for q in reversed(chain):
                cur = cp_node[q] = node(cur, int(res.cp_region[q]))
        return cp_node[cp]

    ref = np.full(len(pairs), -1, dtype=np.int64)
    unwind = np.zeros(len(pairs), dtype=np.int64)
    for i, (b, st) in enumerate(pairs.tolist()):
        cur = path(int(b))
        fr = frames.get(int(st), np.zeros(0, dtype=np.int64))
        for r in fr.tolist():
            cur = node(cur, int(r))
        ref[i], unwind[i] = cur, len(fr)
    defs = _context_table(rows, regions, _region_stack_leaves(raw, frames, node))
    inv = np.asarray(inv).ravel()
    return defs, ref[inv], unwind[inv]


def _region_stack_leaves(raw: RawTrace, frames: dict[int, np.ndarray], node: Any) -> set[int]:
    """Contexts standing for the call stacks of regions (``regions['stack']``): frames, then the region.

    Returns the contexts that end such a chain (marked with the property
    ``perflow::region_stack``, so that readers restore the region's stack).
    """
    leaves: set[int] = set()
    if "stack" not in raw.regions.columns:
        return leaves
    stacks = raw.regions["stack"].fillna(-1).astype(np.int64)
    for region, sid in zip(raw.regions.index.tolist(), stacks.tolist()):
        fr = frames.get(int(sid)) if sid >= 0 else None
        if fr is None or not len(fr):
            continue
        cur = -1
        for r in fr.tolist():
            cur = node(cur, int(r))
        leaves.add(node(cur, int(region)))
    return leaves


def _context_table(rows: list[tuple[int, int]], regions: pd.DataFrame, leaves: set[int]) -> pd.DataFrame:
    reg = np.array([r for r, _ in rows], dtype=np.int64)
    return pd.DataFrame(
        {
            "region": reg,
            "parent": np.array([p for _, p in rows], dtype=np.int64),
            "file": regions["file"].reindex(reg).fillna("").astype(str).to_numpy() if len(reg) else [],
            "line": regions["line"].reindex(reg).fillna(0).astype(np.int64).to_numpy() if len(reg) else [],
            "region_stack": np.isin(np.arange(len(reg)), sorted(leaves)),
        }
    )


def _hosts(raw: RawTrace) -> dict[int, str]:
    loc = raw.locations
    if "host" in loc.columns:
        return {int(p): str(h) for p, h in zip(loc["process"], loc["host"]) if isinstance(h, str) and h}
    hosts = [h for h in raw.attrs.get("hosts", []) or [] if h]
    if len(hosts) == 1:
        return {int(p): str(hosts[0]) for p in loc["process"]}
    return {}


def _metric_events(raw: RawTrace, ticks: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[tuple[int, ...]]]:
    """Group metric rows into OTF2 Metric events; return (matrix, group ticks, metric classes)."""

    m = raw.metric_events
    n = len(m["location"])
    if n == 0:
        return np.zeros((5, 0), dtype=np.int64), np.zeros(0, dtype=np.uint64), []
    ids = m["metric"].astype(np.int64)
    if ids.min() < 0:
        raise TraceError("metric_events refers to a negative metric id")
    starts = metric_groups(m["location"], m["pos"], m["time"], ids, int(ids.max()) + 1)
    lengths = np.diff(np.append(starts, n))
    if lengths.max() > 255:
        raise TraceError("more than 255 metric values share one time stamp and position")
    pad = np.full((len(starts), int(lengths.max())), -1, dtype=np.int64)
    col = np.arange(n) - np.repeat(starts, lengths)
    pad[np.repeat(np.arange(len(starts)), lengths), col] = ids
    keys, cls = np.unique(pad, axis=0, return_inverse=True)
    classes = [tuple(int(x) for x in k if x >= 0) for k in keys]
    g = np.vstack([cls.ravel(), starts, lengths, m["pos"][starts], m["location"][starts]]).astype(np.int64)
    return g, ticks[starts], classes


def write_otf2(raw: RawTrace, path: str | os.PathLike[str], *, timer_resolution: int = 1_000_000_000) -> str:
    """Write ``raw`` as an OTF2 archive.

    Parameters
    ----------
    raw : RawTrace
        The trace. Locations are (process, thread) pairs; ``comms`` map
        communicators to world ranks. ``MPI_COMM_WORLD`` (all processes) is
        added when no communicator has that name.
    path : str or os.PathLike
        The archive directory to create (the anchor becomes
        ``<path>/traces.otf2``), or the anchor path ``<dir>/<name>.otf2``.
    timer_resolution : int
        Ticks per second; times are rounded to the nearest tick.

    Returns
    -------
    str
        The anchor file's path.

    Raises
    ------
    FileExistsError
        When an archive already exists at ``path``.
    TraceError
        When ``raw`` breaks the raw-trace ordering contract.
    """

    raw.validate()
    res = int(timer_resolution)
    if res <= 0:
        raise ValueError(f"timer_resolution must be positive, not {timer_resolution!r}")
    tables = (raw.region_events, raw.p2p_events, raw.coll_events, raw.metric_events, raw.thread_events,
              raw.sample_events)  # fmt: skip
    tmin = min((float(t["time"].min()) for t in tables if len(t["time"])), default=0.0)
    offset = max(0, math.ceil(-tmin * res)) if tmin < 0 else 0
    ticks = [_ticks(t["time"], res, offset) for t in tables]
    g, gticks, classes = _metric_events(raw, ticks[3])
    comms, names = _complete_comms(raw)
    nloc = len(raw.locations)
    mvals = np.ascontiguousarray(raw.metric_events["value"], dtype=np.float64)

    def bounds(loc: np.ndarray) -> np.ndarray:
        return np.searchsorted(loc, np.arange(nloc + 1))

    keep, cm = _collective_matrix(raw)
    cm, cticks, cloc = cm[:, keep], ticks[2][keep], raw.coll_events["location"][keep]
    rb, pb, hb = (bounds(t["location"]) for t in (tables[0], tables[1], tables[4]))
    cb = bounds(cloc)
    gb = bounds(g[4]) if g.shape[1] else np.zeros(nloc + 1, dtype=np.int64)
    p, h, smp = raw.p2p_events, raw.thread_events, raw.sample_events
    pm = np.vstack([p[k].astype(np.int64) for k in ("kind", "peer", "comm", "tag", "bytes", "request", "pos")])
    hm = np.vstack([h[k].astype(np.int64) for k in ("kind", "team", "count", "pos", "lock", "order")])
    cc_defs, interrupt = None, None
    sm, sticks, sb = np.zeros((4, 0), dtype=np.int64), np.zeros(0, dtype=np.uint64), np.zeros(nloc + 1, np.int64)
    if len(smp["location"]) or "stack" in raw.regions.columns:
        cc_defs, cc_ref, unwind = _calling_contexts(raw)
    if len(smp["location"]):
        hz = float(raw.attrs.get("sample_rate") or 0)
        period = 1.0 / hz if hz > 0 else float(np.median(smp["weight"]))
        clock = "wall-clock" if raw.attrs.get("sample_clock") == "wall" else "CPU time"
        interrupt = (f"{clock} sampling", max(int(round(1e9 * period)), 1))
        # one CallingContextSample per timer period (a sample that stands for k periods is written k times)
        reps = np.where(cc_ref >= 0, np.maximum(1, np.rint(smp["weight"] / period)).astype(np.int64), 0)
        idx = np.repeat(np.arange(len(cc_ref)), reps)
        sm = np.vstack([cc_ref[idx], unwind[idx], np.zeros(len(idx), np.int64), smp["pos"][idx].astype(np.int64)])
        sticks, sb = ticks[5][idx], bounds(smp["location"][idx])
    w = ArchiveWriter(path, res, creator=str(raw.attrs.get("creator") or "perflow"))
    r = raw.region_events
    for i in range(nloc):
        w.begin_location(i)
        a, b = rb[i], rb[i + 1]
        w.write(
            (ticks[0][a:b], r["kind"][a:b], r["region"][a:b]),
            (np.ascontiguousarray(pm[:, pb[i] : pb[i + 1]]), ticks[1][pb[i] : pb[i + 1]]),
            (np.ascontiguousarray(cm[:, cb[i] : cb[i + 1]]), cticks[cb[i] : cb[i + 1]]),
            (np.ascontiguousarray(g[:4, gb[i] : gb[i + 1]]), gticks[gb[i] : gb[i + 1]], mvals),
            (np.ascontiguousarray(hm[:, hb[i] : hb[i + 1]]), ticks[4][hb[i] : hb[i + 1]]),
            int(a),
            (np.ascontiguousarray(sm[:, sb[i] : sb[i + 1]]), sticks[sb[i] : sb[i + 1]]),
        )
        w.end_location()
    length = int(max((int(t.max()) for t in ticks if len(t)), default=offset)) - offset
    metrics = raw.metrics if len(raw.metrics) else pd.DataFrame(columns=["name", "unit", "mode"])
    return w.close(
        raw.locations,
        raw.regions,
        comms,
        names,
        metrics,
        classes,
        offset,
        max(length, 0),
        calling_contexts=cc_defs,
        interrupt=interrupt,
        hosts=_hosts(raw),
    )
