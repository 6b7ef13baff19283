"""Global numbering from the partitions' summaries, and gathering of partition tables.

The numbering does not depend on how the processes are partitioned, so a
trace built in one partition and in several gives the same tables:

* **call paths** (top-down vertices from Enter/Leave events) are numbered in
  order of first appearance in the region-event stream (locations in order,
  each in stream order). Each partition reports its local tree and, per local
  call path, the ``(location, offset)`` of the Enter that created it. Sorting
  all of them by ``(location, offset)`` and walking the sorted list with a map
  from ``(global parent, region)`` to id gives that order; a parent always
  sorts before its children.
* **synthetic vertices** (frames of region call stacks and of sampled stacks,
  :mod:`perflow.trace.contexts`) follow, level by level from the call paths
  down: at each level the new vertices are numbered by ``(global parent,
  region)``, one vertex per distinct pair; a frame whose ``(global parent,
  region)`` is a call path of Enter/Leave events (on any location) is that
  call path, so that a call stack recorded on one location (a GPU kernel's
  launching stack) reaches the vertices another location recorded. A call
  path that a call stack re-parents keeps its id; its parent becomes the
  stack's innermost frame.
* **intervals** and **p2p rows**: both are grouped by location, so the global
  row of the ``i``-th interval row (event) of location ``l`` is the number of
  rows (events) of locations before ``l`` plus ``i``. A location's interval
  rows are its region instances and its sample pieces
  (:mod:`perflow.trace.pieces`) in pre-order; both are known per location in
  the scan, so the count does not depend on the partitioning either.
* **collective instances**: the single-process engine numbers instance keys
  ``(communicator, sequence)`` by first appearance in its row order (recorded
  collectives in location order, then synthesised MPI_Init/Finalize calls);
  each partition reports its keys' first ``(class, location, offset)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..pag.frames import make_metrics
from ..pag.instances import (
    COLLECTIVE_COLUMNS,
    INTERVAL_COLUMNS,
    IO_COLUMNS,
    LOCK_COLUMNS,
    RMA_COLUMNS,
    Trace,
    conform,
    stack_rows,
)
from .raw import RawTrace
from .records import gather_messages
from .tally import region_kinds

__all__ = ["merge_summaries", "vertex_table", "gather_trace", "concat_metric_rows"]


def merge_summaries(summaries: list[dict[str, Any]], n_locations: int) -> dict[str, Any]:
    """Merge the partitions' summaries into global ids.

    Returns
    -------
    dict
        ``cp_parent``, ``cp_region`` (the global calling-context tree),
        ``cp_maps`` (per partition id: local call path -> global vertex),
        ``inst_off``, ``p2p_off`` (global row offsets per location),
        ``coll_keys``, ``coll_ids`` (sorted instance keys and their ids),
        ``n_intervals``, ``n_instances``, ``threaded`` (a process has
        point-to-point events on several locations), ``sampled`` (the trace
        has timer samples: its interval rows get a ``samples`` column).
    """
    rows = []
    for s in summaries:
        n = len(s["cp_parent"])
        if n:
            rows.append(
                np.stack([np.full(n, s["pid"]), np.arange(n), s["cp_parent"], s["cp_region"], s["cp_loc"], s["cp_off"]])
            )
    allr = np.concatenate(rows, axis=1) if rows else np.zeros((6, 0), dtype=np.int64)
    order = np.lexsort((allr[5], allr[4]))
    gid: dict[tuple[int, int], int] = {}
    path: dict[tuple[int, int], int] = {}
    cp_parent: list[int] = []
    cp_region: list[int] = []
    for pid, j, par, reg in allr[:4, order].T.tolist():
        pg = gid[(pid, par)] if par >= 0 else -1
        key = (pg, reg)
        g = path.get(key)
        if g is None:
            g = path[key] = len(cp_parent)
            cp_parent.append(pg)
            cp_region.append(reg)
        gid[(pid, j)] = g
    n_real = len(cp_parent)
    # the parent after call stacks: real call paths re-pointed to a stack frame, synthetic ones below
    local_parent: dict[tuple[int, int], int] = {}
    syn_todo: list[tuple[int, int, int, int]] = []  # (pid, local id, local parent, region)
    for s in summaries:
        n = len(s["cp_parent"])
        fp = np.asarray(s.get("final_parent", s["cp_parent"]), dtype=np.int64)
        for j in np.flatnonzero(fp != s["cp_parent"]).tolist():
            local_parent[(s["pid"], j)] = int(fp[j])
        sp = np.asarray(s.get("syn_parent", np.zeros(0, np.int64)), dtype=np.int64)
        sr = np.asarray(s.get("syn_region", np.zeros(0, np.int64)), dtype=np.int64)
        syn_todo += [(s["pid"], n + i, int(p), int(r)) for i, (p, r) in enumerate(zip(sp.tolist(), sr.tolist()))]
    syn_path: dict[tuple[int, int], int] = {}
    while syn_todo:
        ready = [t for t in syn_todo if t[2] < 0 or (t[0], t[2]) in gid]
        if not ready:  # pragma: no cover - a parent always precedes its synthetic children
            raise ValueError("synthetic vertices whose parents are never numbered")
        keys = sorted({(gid[(p, par)] if par >= 0 else -1, reg) for p, _, par, reg in ready})
        for key in keys:
            if key not in syn_path and key in path:  # a frame that an Enter/Leave call path already is
                syn_path[key] = path[key]
            elif key not in syn_path:
                syn_path[key] = len(cp_parent)
                cp_parent.append(key[0])
                cp_region.append(key[1])
        for p, j, par, reg in ready:
            gid[(p, j)] = syn_path[(gid[(p, par)] if par >= 0 else -1, reg)]
        done = set(ready)
        syn_todo = [t for t in syn_todo if t not in done]
    for (p, j), lp in local_parent.items():  # real call paths whose parent is a stack frame
        cp_parent[gid[(p, j)]] = gid[(p, lp)]
    cp_maps = {}
    for s in summaries:
        n = len(s["cp_parent"]) + len(s.get("syn_parent", ()))
        cp_maps[s["pid"]] = np.array([gid[(s["pid"], j)] for j in range(n)], dtype=np.int64)

    def offsets(name: str) -> np.ndarray:
        tot = np.zeros(n_locations, dtype=np.int64)
        for s in summaries:
            tot += s[name]
        off = np.zeros(n_locations + 1, dtype=np.int64)
        np.cumsum(tot, out=off[1:])
        return off

    inst_off = offsets("n_inst")
    p2p_off = offsets("n_p2p")
    keys = [s["coll_keys"] for s in summaries if len(s["coll_keys"][0])]
    if keys:
        k, cls, loc, off = (np.concatenate([x[i] for x in keys]) for i in range(4))
        order = np.lexsort((off, loc, cls))
        coll_keys, first = np.unique(k[order], return_index=True)
        coll_ids = np.empty(len(first), dtype=np.int64)
        coll_ids[np.argsort(first, kind="stable")] = np.arange(len(first))
    else:
        coll_keys = coll_ids = np.zeros(0, dtype=np.int64)
    return {
        "cp_parent": np.asarray(cp_parent, dtype=np.int64),
        "cp_region": np.asarray(cp_region, dtype=np.int64),
        "cp_maps": cp_maps,
        "n_real": n_real,
        "inst_off": inst_off[:-1],
        "p2p_off": p2p_off[:-1],
        "n_intervals": int(inst_off[-1]),
        "coll_keys": coll_keys,
        "coll_ids": coll_ids,
        "n_instances": len(coll_keys),
        "threaded": any(bool(s["p2p_threaded"]) for s in summaries),
        "sampled": any(int(s.get("n_samples", 0)) > 0 for s in summaries),
        "omp_teams": any(bool(s.get("omp_teams", False)) for s in summaries),
    }


def vertex_table(regions: pd.DataFrame, cp_parent: np.ndarray, cp_region: np.ndarray) -> pd.DataFrame:
    """The top-down vertex table of the global calling-context tree (as :func:`perflow.build_pag` makes it)."""
    kinds = region_kinds(regions)
    return pd.DataFrame(
        {
            "name": regions["name"].astype(str).to_numpy()[cp_region],
            "kind": kinds[cp_region],
            "parent": cp_parent,
            "module": regions["module"].astype(str).to_numpy()[cp_region],
            "file": regions["file"].astype(str).to_numpy()[cp_region],
            "line": regions["line"].to_numpy(dtype=np.int64)[cp_region],
            "region": cp_region,
            # the trace's region role (OTF2's: "barrier", "implicit_barrier", "parallel", "critical", ...)
            "role": pd.Categorical(regions["role"].astype(str).str.lower().to_numpy()[cp_region]),
        }
    )


def concat_metric_rows(parts: list[pd.DataFrame], n_vertices: int) -> pd.DataFrame:
    """Concatenate per-partition metric rows (``vertex``, ``process``, ``thread`` + metrics) into one table.

    A metric some partitions lack is 0 there (dense semantics).
    """
    parts = [p for p in parts if len(p)]
    if not parts:
        return make_metrics(np.zeros(0), np.zeros(0), None, {}, n_vertices=n_vertices)
    cols: list[str] = []
    for p in parts:
        cols += [c for c in p.columns if c not in ("vertex", "process", "thread") and c not in cols]
    key = {c: np.concatenate([p[c].to_numpy() for p in parts]) for c in ("vertex", "process", "thread")}
    vals = {
        c: np.concatenate([p[c].to_numpy(dtype=np.float64) if c in p.columns else np.zeros(len(p)) for p in parts])
        for c in cols
    }
    return make_metrics(key["vertex"], key["process"], key["thread"], vals, n_vertices=n_vertices, duplicates="error")


def gather_trace(defs: RawTrace, n_intervals: int, parts: list[dict[str, Any]], *, threaded: bool = True) -> Trace:
    """The single-process :class:`~perflow.pag.instances.Trace` from gathered partition tables.

    ``parts`` are dicts with ``intervals`` (+ ``ginst``, their global rows),
    ``messages`` and ``coll``; ``defs`` carries the communicators.
    """
    iv = conform("intervals", None)
    if n_intervals:
        have = [p for p in parts if len(p["intervals"])]
        rows = np.concatenate([p["ginst"] for p in have])
        order = None if np.all(rows[1:] > rows[:-1]) else np.argsort(rows, kind="stable")
        extra = [c for c in have[0]["intervals"].columns if c not in INTERVAL_COLUMNS]  # e.g. samples
        iv = stack_rows([p["intervals"] for p in have], list(INTERVAL_COLUMNS) + extra, order)
    messages = gather_messages([p["messages"] for p in parts], threaded=threaded)
    coll = [p["coll"].drop(columns=["wait", "last"], errors="ignore") for p in parts if len(p["coll"])]
    if coll:
        key = [np.concatenate([c[k].to_numpy() for c in coll]) for k in ("thread", "process", "instance")]
        order = np.lexsort(key)
        collectives = conform("collectives", stack_rows(coll, list(COLLECTIVE_COLUMNS), order))
    else:
        collectives = conform("collectives", None)
    lk = [p["locks"] for p in parts if p.get("locks") is not None and len(p["locks"])]
    locks = None
    if lk:
        key = [np.concatenate([x[k].to_numpy() for x in lk]) for k in ("order", "lock", "process")]
        locks = stack_rows(lk, list(LOCK_COLUMNS), np.lexsort(key))
    io = [p["io"] for p in parts if p.get("io") is not None and len(p["io"])]
    io_table = None
    if io:
        key = [np.concatenate([x[k].to_numpy() for x in io]) for k in ("begin", "thread", "process")]
        io_table = stack_rows(io, list(IO_COLUMNS), np.lexsort(key))
    handles = {int(k): str(v) for k, v in (defs.attrs.get("io_handles") or {}).items()}
    rma = [p["rma"] for p in parts if p.get("rma") is not None and len(p["rma"])]
    rma_table = None
    if rma:  # by (process, thread), stream order within (each location lies in one partition)
        key = [np.concatenate([x[k].to_numpy() for x in rma]) for k in ("thread", "process")]
        rma_table = stack_rows(rma, list(RMA_COLUMNS), np.lexsort(key))
    windows = {int(k): dict(v) for k, v in (defs.attrs.get("rma_windows") or {}).items()}
    groups = {int(k): np.asarray(v, dtype=np.int64) for k, v in (defs.attrs.get("rma_groups") or {}).items()}
    return Trace(
        iv,
        messages,
        collectives,
        comms=dict(defs.comms),
        comm_names=dict(defs.comm_names),
        locks=locks,
        io=io_table,
        io_handles=handles,
        locations=defs.locations,
        rma=rma_table,
        rma_windows=windows,
        rma_groups=groups,
    )
