"""The critical path over partitions: the partitioned form of :func:`perflow.trace.critical.critical_path`.

A partition holds whole processes (:mod:`perflow.trace.pipeline`), so each
location's flat timeline (:mod:`perflow.trace.flat`) is built where its
intervals are, once per built trace (:func:`part_views`). The path is found in
three steps, of which only the middle one runs on the client, on small arrays:

1. each partition reports its locations, their first and last event, the
   MPI_Init and MPI_Finalize marks of Scalasca's path ends
   (:func:`~perflow.trace.critical.mpi_marks`) and its OpenMP fork edges
   (the client waits once for all of it);
2. the client numbers the locations as the whole trace does, takes the jumps
   from the wait-state instances (computed on the partitions,
   :mod:`perflow.trace.waitparts`) and walks the path backwards
   (:func:`~perflow.trace.critical.walk`): its hops, one per stretch on one
   location;
3. each partition cuts the hops on its own locations into exclusive pieces
   (:func:`~perflow.trace.critical.charge_hops`); the pieces (as many as the
   path's slots) are put back in path order and assembled
   (:func:`~perflow.trace.critical.assemble`), the time per call path summed
   in the same order as the whole-trace path: the result is bit-identical.

No interval or event leaves its partition.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..pag.instances import Trace, conform
from ..pag.partitioned import Each
from .critical import PATH_ENDS, CriticalPath, Pieces, assemble, charge_hops, mpi_ends, mpi_marks, wait_edges, walk
from .flat import FlatTimeline, Locations, flat_timeline, locations
from .pipeline import Built
from .stages import PartTables, local_rows
from .threadwaits import fork_edges

__all__ = ["PartView", "part_view", "part_views", "global_locations", "program"]


@dataclass(frozen=True)
class PartView:
    """A partition's intervals as the trace analyses see them: local parents, locations, flat timeline.

    ``ginst`` is the global interval row of each local one (``owner`` of the flat timeline is local).
    """

    trace: Trace
    locs: Locations
    flat: FlatTimeline
    ginst: np.ndarray


def part_view(t: PartTables) -> PartView:
    """The :class:`PartView` of a partition's tables (runs where they live)."""
    iv = t.intervals
    ginst = np.asarray(t.ginst, dtype=np.int64)
    i, ok = local_rows(ginst, iv["parent"].to_numpy().astype(np.int64))
    table = pd.DataFrame({c: iv[c].to_numpy() for c in ("process", "thread", "vertex", "enter", "leave")})
    table["parent"] = np.where(ok, i, -1).astype(np.int64)
    trace = Trace(table, conform("messages", None), conform("collectives", None))
    locs = locations(trace)
    return PartView(trace, locs, flat_timeline(trace, locs), ginst)


_VIEWS: dict[int, list[Any]] = {}


def part_views(b: Built) -> list[Any]:
    """The runtime's references to each partition's :class:`PartView` (made once per built trace)."""
    key = id(b)
    if key not in _VIEWS:
        _VIEWS[key] = b.runtime.map(part_view, Each(b.tables))
        weakref.finalize(b, _VIEWS.pop, key, None)
    return _VIEWS[key]


def _keys(v: PartView) -> tuple[np.ndarray, np.ndarray]:
    return v.locs.process.astype(np.int64), v.locs.thread.astype(np.int64)


def global_locations(
    b: Built, keys: list[tuple[np.ndarray, np.ndarray]] | None = None
) -> tuple[Locations, list[np.ndarray]]:
    """The trace's locations numbered as :func:`~perflow.trace.flat.locations` of the whole trace does
    (process and thread only), and the global number of each partition's locations (increasing).

    ``keys``: each partition's (process, thread) keys when already fetched (else fetched here)."""
    if keys is None:
        keys = b.runtime.gather(b.runtime.map(_keys, Each(part_views(b))))
    proc = np.concatenate([k[0] for k in keys]) if keys else np.zeros(0, np.int64)
    thr = np.concatenate([k[1] for k in keys]) if keys else np.zeros(0, np.int64)
    order = np.lexsort((thr, proc))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    bounds = np.cumsum([0] + [len(k[0]) for k in keys])
    e = np.zeros(0, np.int64)
    glocs = Locations(proc[order], thr[order], e, e, np.zeros(1, np.int64))
    return glocs, [rank[bounds[p] : bounds[p + 1]] for p in range(len(keys))]


def _facts(v: PartView, names: np.ndarray | None, roles: np.ndarray | None, regions: np.ndarray | None) -> dict:
    f: dict[str, Any] = {"start": v.flat.start(), "end": v.flat.end()}
    if names is not None:
        t_fin, fin_locs, first = mpi_marks(v.trace.intervals, v.locs, names)
        f.update(t_fin=t_fin, fin_locs=fin_locs, first_init=first)
    if roles is not None and regions is not None:
        f["forks"] = fork_edges(v.trace.intervals, roles, regions)
    return f


def _charge(v: PartView, hops: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], mine: np.ndarray) -> Pieces:
    """Pieces of the hops on this partition's locations (``hops``: global hop number, global location,
    start, end; ``mine``: the global number of each local location), in global numbers."""
    h, hl, ha, hb = hops
    ph, pa, pb, po, pv = charge_hops(v.flat, np.searchsorted(mine, hl), ha, hb)
    return h[ph], pa, pb, np.where(po >= 0, v.ginst[np.maximum(po, 0)], -1), pv


def program(
    b: Built,
    waits: pd.DataFrame,
    n_vertices: int,
    *,
    path_ends: str = "finalize",
    follow_locks: bool = False,
    names: np.ndarray | None = None,
    roles: np.ndarray | None = None,
    regions: np.ndarray | None = None,
) -> CriticalPath:
    """The critical path of a built trace given its wait-state instances, equal to
    :func:`~perflow.trace.critical.critical_path` of the whole trace (arguments as there)."""
    if path_ends not in PATH_ENDS:
        raise ValueError(f"path_ends must be one of {PATH_ENDS}, not {path_ends!r}")
    rt = b.runtime
    views = part_views(b)
    ends = path_ends == "finalize" and names is not None
    n = len(views)
    got = rt.gather(
        [*rt.map(_keys, Each(views)), *rt.map(_facts, Each(views), names if ends else None, roles, regions)]
    )
    glocs, mine = global_locations(b, got[:n])
    facts = got[n:]
    L = len(glocs)
    if L == 0:
        empty = pd.DataFrame({c: np.zeros(0) for c in ("process", "thread", "start", "end", "vertex", "interval")})
        hops = pd.DataFrame({c: np.zeros(0) for c in ("process", "thread", "start", "end")})
        return CriticalPath(empty, hops, np.zeros(n_vertices), 0.0, 0.0, 0.0)
    lstart, lend = np.zeros(L), np.zeros(L)
    for f, g in zip(facts, mine, strict=True):
        lstart[g], lend[g] = f["start"], f["end"]
    src, dst, tau = wait_edges(waits, glocs, follow_locks)
    if roles is not None and regions is not None:  # a worker's team begins at its fork, on the forking thread
        fk = [f["forks"] for f in facts]
        fp, ft, mp_, mt, ftau = (np.concatenate([x[i] for x in fk]) for i in range(5))
        src = np.r_[src, glocs.lookup(fp, ft)]
        dst = np.r_[dst, glocs.lookup(mp_, mt)]
        tau = np.r_[tau, ftau]
    cur, t_end = int(np.argmax(lend)), float(lend[np.argmax(lend)])
    if ends:
        t_fin = max(f["t_fin"] for f in facts)
        fin = [g[f["fin_locs"]] for f, g in zip(facts, mine, strict=True) if f["t_fin"] == t_fin]
        first = np.full(L, np.inf)
        for f, g in zip(facts, mine, strict=True):
            first[g] = f["first_init"]
        cur, t_end, lstart = mpi_ends(t_fin, np.concatenate(fin) if fin else np.zeros(0, np.int64), first, lstart,
                                      cur, t_end)  # fmt: skip
    hl, ha, hb = walk(L, src, dst, tau, lstart, cur, t_end)
    owner = np.empty(L, np.int64)
    for p, g in enumerate(mine):
        owner[g] = p
    hp = owner[hl]
    sel = [np.flatnonzero(hp == p) for p in range(len(mine))]
    pieces = rt.gather(rt.map(_charge, Each(views), Each([(s, hl[s], ha[s], hb[s]) for s in sel]), Each(mine)))
    cat = [np.concatenate([x[i] for x in pieces]) for i in range(5)]
    order = np.argsort(-cat[0], kind="stable")  # path order: hops last first, pieces in time order within one
    return assemble(glocs.process, glocs.thread, (hl, ha, hb), tuple(c[order] for c in cat), int(n_vertices))
