"""Write a :class:`~perflow.trace.raw.RawTrace` as an OTF2 archive.

The archive (anchor ``traces.otf2``, global definitions ``traces.def`` and
one event file per location under ``traces/``) is written by the OTF2 C
library bundled with the ``otf2`` package, so any OTF2 reader can open it;
the events go through compiled loops (numba), so writing runs at millions
of events per second (a small trace's go through the same loops interpreted:
see :mod:`perflow._jit`). See ``docs/formats.md`` ("Writers") for the mapping.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..trace.raw import RawTrace

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


def _metric_events(raw: RawTrace, ticks: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[tuple[int, ...]]]:
    """Group metric rows into OTF2 Metric events; return (matrix, group ticks, metric classes)."""
    from ..readers.otf2._wkernel import metric_groups

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
    from ..readers.otf2._archive import ArchiveWriter

    raw.validate()
    res = int(timer_resolution)
    if res <= 0:
        raise ValueError(f"timer_resolution must be positive, not {timer_resolution!r}")
    tables = (raw.region_events, raw.p2p_events, raw.coll_events, raw.metric_events, raw.thread_events)
    tmin = min((float(t["time"].min()) for t in tables if len(t["time"])), default=0.0)
    offset = max(0, math.ceil(-tmin * res)) if tmin < 0 else 0
    ticks = [_ticks(t["time"], res, offset) for t in tables]
    g, gticks, classes = _metric_events(raw, ticks[3])
    comms, names = _complete_comms(raw)
    nloc = len(raw.locations)
    mvals = np.ascontiguousarray(raw.metric_events["value"], dtype=np.float64)

    def bounds(loc: np.ndarray) -> np.ndarray:
        return np.searchsorted(loc, np.arange(nloc + 1))

    rb, pb, cb, hb = (bounds(t["location"]) for t in (tables[0], tables[1], tables[2], tables[4]))
    gb = bounds(g[4]) if g.shape[1] else np.zeros(nloc + 1, dtype=np.int64)
    p, c, h = raw.p2p_events, raw.coll_events, raw.thread_events
    pm = np.vstack([p[k].astype(np.int64) for k in ("kind", "peer", "comm", "tag", "bytes", "request", "pos")])
    cm = np.vstack([c[k].astype(np.int64) for k in ("kind", "op", "comm", "root", "sent", "received", "pos")])
    hm = np.vstack([h[k].astype(np.int64) for k in ("kind", "team", "count", "pos")])
    w = ArchiveWriter(path, res, creator=str(raw.attrs.get("creator") or "perflow"))
    r = raw.region_events
    for i in range(nloc):
        w.begin_location(i)
        a, b = rb[i], rb[i + 1]
        w.write(
            (ticks[0][a:b], r["kind"][a:b], r["region"][a:b]),
            (np.ascontiguousarray(pm[:, pb[i] : pb[i + 1]]), ticks[1][pb[i] : pb[i + 1]]),
            (np.ascontiguousarray(cm[:, cb[i] : cb[i + 1]]), ticks[2][cb[i] : cb[i + 1]]),
            (np.ascontiguousarray(g[:4, gb[i] : gb[i + 1]]), gticks[gb[i] : gb[i + 1]], mvals),
            (np.ascontiguousarray(hm[:, hb[i] : hb[i + 1]]), ticks[4][hb[i] : hb[i + 1]]),
            int(a),
        )
        w.end_location()
    length = int(max((int(t.max()) for t in ticks if len(t)), default=offset)) - offset
    metrics = raw.metrics if len(raw.metrics) else pd.DataFrame(columns=["name", "unit", "mode"])
    return w.close(raw.locations, raw.regions, comms, names, metrics, classes, offset, max(length, 0))
