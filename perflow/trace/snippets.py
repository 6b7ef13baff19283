"""Fixed-workload snippets of a trace and their normalised performance (after vSensor and Vapro).

A *snippet* is a piece of one location's timeline whose work should be the
same every time it runs:

* a **computation** snippet is the code between two consecutive
  communication calls (outermost MPI calls) of a location, identified by the
  pair of call sites (their call paths) and by the regions entered in
  between (their number and call paths): same pair, same visits;
* a **communication** snippet is one MPI call (not a setup call such as
  MPI_Init), identified by its call path and the bytes it moves; given a
  wait-state table it is timed without its wait-state time (completion parts
  included), so that waiting caused by others is not taken for slow
  communication. A trace that records no messages and no collective bytes
  (HPCToolkit, Chrome traces) gives computation snippets only.

With a per-instance instruction counter (an interval column), instances of a
group are further split so that counts within a cluster stay within a
relative tolerance (2 %) of its smallest one. Groups with fewer than
``min_instances`` instances are dropped. Each instance's performance is
``t_min / t`` over its group (1 = as fast as the fastest). The
process x time-slice matrix holds, per cell, the overlap-weighted mean
performance of the instances overlapping it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..kinds import MPIClass, mpi_class
from .flat import locations, njit, subtree_sizes
from .tables import Trace

__all__ = ["snippet_table", "normalised_performance", "performance_matrix", "cluster_within", "Matrix"]


def normalised_performance(times: np.ndarray, group: np.ndarray | None = None) -> np.ndarray:
    """``t_min / t`` per element, ``t_min`` taken within each group (one group when ``group`` is None).

    Examples
    --------
    >>> normalised_performance(np.array([100, 102, 99, 150, 101.0])).round(3).tolist()
    [0.99, 0.971, 1.0, 0.66, 0.98]
    """
    t = np.asarray(times, dtype=np.float64)
    if group is None:
        g = np.zeros(len(t), dtype=np.int64)
    else:
        g = pd.factorize(np.asarray(group))[0].astype(np.int64)
    if not len(t):
        return np.zeros(0)
    tmin = np.full(int(g.max()) + 1, np.inf)
    np.minimum.at(tmin, g, t)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t > 0, tmin[g] / t, np.nan)


@njit
def _cluster(values, starts, tol):  # type: ignore[no-untyped-def]
    out = np.empty(values.shape[0], np.int64)
    c = -1
    for g in range(starts.shape[0] - 1):
        base = -1.0
        for i in range(starts[g], starts[g + 1]):
            if base < 0 or values[i] > base * (1.0 + tol):
                c += 1
                base = values[i]
            out[i] = c
    return out


def cluster_within(group: np.ndarray, values: np.ndarray, tol: float = 0.02) -> np.ndarray:
    """Split groups so each cluster's values lie within ``tol`` (relative) of its smallest one; new group ids."""
    g = pd.factorize(np.asarray(group))[0].astype(np.int64)
    v = np.asarray(values, dtype=np.float64)
    order = np.lexsort((v, g))
    gs = g[order]
    starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1], True]) if len(gs) else np.zeros(1, np.int64)
    c = _cluster(v[order], starts.astype(np.int64), float(tol))
    out = np.empty(len(g), dtype=np.int64)
    out[order] = c
    return out


def _combine(columns: list[np.ndarray]) -> np.ndarray:
    """One dense int64 id per distinct row of several integer columns (factorised pairwise: no overflow)."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for col in columns:
        codes, uniq = pd.factorize(np.asarray(col, dtype=np.int64))
        key, _ = pd.factorize(key * max(len(uniq), 1) + codes)
        key = key.astype(np.int64)
    return key


def _bytes_per_interval(trace: Trace) -> np.ndarray:
    n = len(trace.intervals)
    b = np.zeros(n, dtype=np.float64)
    m = trace.messages
    for col in ("send_interval", "recv_interval"):
        iv = m[col].to_numpy()
        ok = iv >= 0
        b += np.bincount(iv[ok], weights=m["bytes"].to_numpy()[ok].astype(np.float64), minlength=n)
    c = trace.collectives
    iv = c["interval"].to_numpy()
    ok = iv >= 0
    b += np.bincount(
        iv[ok], weights=(c["sent"].to_numpy() + c["received"].to_numpy())[ok].astype(np.float64), minlength=n
    )
    return b


def snippet_table(
    trace: Trace,
    names: np.ndarray,
    kinds: np.ndarray,
    *,
    waits: pd.DataFrame | None = None,
    counter: str | None = None,
    tolerance: float = 0.02,
    min_instances: int = 5,
    per_process: bool = False,
) -> pd.DataFrame:
    """One row per snippet instance of a fixed-workload group, with its normalised performance.

    Columns: ``process``, ``thread``, ``start``, ``end``, ``kind``
    ("computation" / "communication"), ``group``, ``from_vertex``,
    ``to_vertex`` (the call sites around a computation snippet; both the call
    for a communication snippet), ``time`` (s), ``perf`` (``t_min / t``).
    """
    iv = trace.intervals
    n = len(iv)
    cols = ["process", "thread", "start", "end", "kind", "group", "from_vertex", "to_vertex", "time", "perf"]
    if n == 0:
        return pd.DataFrame({c: [] for c in cols})
    locs = locations(trace)
    order = locs.order
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    parent = iv["parent"].to_numpy().astype(np.int64)
    enter = iv["enter"].to_numpy()
    leave = iv["leave"].to_numpy()
    is_mpi_v = np.asarray(kinds) == "mpi"
    setup_v = np.array([mpi_class(str(x)) in (MPIClass.SETUP, None) for x in names], dtype=bool) & is_mpi_v
    mpi_i = is_mpi_v[vtx]
    outer = mpi_i & ~np.where(parent >= 0, mpi_i[np.maximum(parent, 0)], False)
    # communication calls in stream order per location
    pos_of = np.empty(n, dtype=np.int64)
    pos_of[order] = np.arange(n)
    calls = order[outer[order]]
    cloc = locs.of_interval[calls]
    size = subtree_sizes(trace)
    # computation snippets between consecutive calls of one location
    a, b = calls[:-1], calls[1:]
    same = cloc[:-1] == cloc[1:]
    a, b = a[same], b[same]
    lo = pos_of[a] + size[a]  # first position after call a's subtree
    hi = pos_of[b]  # position of call b
    count = hi - lo
    vprefix = np.r_[0, np.cumsum(vtx[order] + 1)]
    vsum = vprefix[hi] - vprefix[lo]
    t_comp = leave[a].copy()
    e_comp = enter[b].copy()
    comp_counter = None
    if counter is not None:
        cval = iv[counter].to_numpy(dtype=np.float64)
        # counter of a snippet: sum over the intervals entered in it whose parent is outside it
        snip_of_pos = np.full(n, -1, dtype=np.int64)
        has = count > 0
        rep = np.repeat(np.flatnonzero(has), count[has])
        within = np.arange(int(count[has].sum())) - np.repeat(np.cumsum(count[has]) - count[has], count[has])
        snip_of_pos[np.repeat(lo[has], count[has]) + within] = rep
        par_pos = np.where(parent[order] >= 0, pos_of[np.maximum(parent[order], 0)], -1)
        sp = snip_of_pos
        maximal = (sp >= 0) & ((par_pos < 0) | (sp[np.maximum(par_pos, 0)] != sp))
        comp_counter = np.bincount(sp[maximal], weights=cval[order][maximal], minlength=len(a))
    # communication snippets
    nb = _bytes_per_interval(trace)
    cc = calls[~setup_v[vtx[calls]]]
    coll = trace.collectives
    if not len(trace.messages) and not (coll["sent"].to_numpy() + coll["received"].to_numpy()).any():
        cc = cc[:0]  # the trace records no communication (HPCToolkit, Chrome): the work of a call is unknown
    c_time = leave[cc] - enter[cc]
    if waits is not None and len(waits):
        wk = waits[waits["interval"].to_numpy() >= 0]
        wsum = np.bincount(wk["interval"].to_numpy(), weights=wk["amount"].to_numpy(), minlength=n)
        c_time = np.maximum(0.0, c_time - wsum[cc])
    kind = np.r_[np.zeros(len(a), np.int8), np.ones(len(cc), np.int8)]
    keys = [
        np.r_[vtx[a], vtx[cc]],
        np.r_[vtx[b], vtx[cc]],
        np.r_[count, np.full(len(cc), -1)],
        np.r_[vsum, nb[cc].astype(np.int64)],
        kind,
    ]
    if per_process:
        keys.append(np.r_[locs.of_interval[a], locs.of_interval[cc]])
    group = _combine(keys)
    time = np.r_[e_comp - t_comp, c_time]
    start = np.r_[t_comp, enter[cc]]
    end = np.r_[e_comp, leave[cc]]
    if counter is not None:
        cval = iv[counter].to_numpy(dtype=np.float64)
        cnt = np.r_[comp_counter, cval[cc]]
        group = cluster_within(group, cnt, tolerance)
    ok = time > 0
    sizes = np.bincount(group[ok], minlength=int(group.max(initial=-1)) + 1)
    keep = ok & (sizes[group] >= min_instances) if len(sizes) else ok
    g = pd.factorize(group[keep])[0]
    loc = np.r_[locs.of_interval[a], locs.of_interval[cc]][keep]
    perf = normalised_performance(time[keep], g)
    return pd.DataFrame(
        {
            "process": locs.process[loc].astype(np.int32),
            "thread": locs.thread[loc].astype(np.int32),
            "start": start[keep],
            "end": end[keep],
            "kind": pd.Categorical.from_codes(kind[keep], categories=["computation", "communication"]),
            "group": g.astype(np.int64),
            "from_vertex": np.r_[vtx[a], vtx[cc]][keep],
            "to_vertex": np.r_[vtx[b], vtx[cc]][keep],
            "time": time[keep],
            "perf": perf,
        }
    )


@dataclass(frozen=True)
class Matrix:
    """A process x time-slice matrix of overlap-weighted mean performance.

    ``values[i, j]`` is the mean for process ``processes[i]`` in slice ``j``
    (``edges[j]`` to ``edges[j + 1]``), NaN where no instance overlaps;
    ``weight`` is the overlapped time behind each cell.
    """

    processes: np.ndarray
    edges: np.ndarray
    values: np.ndarray
    weight: np.ndarray


def performance_matrix(
    process: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    perf: np.ndarray,
    t0: float,
    t1: float,
    slices: int,
    processes: np.ndarray | None = None,
) -> Matrix:
    """Overlap-weighted mean of ``perf`` per (process, time slice), in linear time (difference arrays)."""
    procs = np.unique(process) if processes is None else np.asarray(processes)
    P, S = len(procs), max(int(slices), 1)
    edges = np.linspace(t0, t1, S + 1)
    w = (t1 - t0) / S if t1 > t0 else 1.0
    num = np.zeros((P, S + 1))
    den = np.zeros((P, S + 1))
    if len(process):
        row = np.searchsorted(procs, process).astype(np.int64)
        a = np.clip(start, t0, t1)
        b = np.clip(end, t0, t1)
        s0 = np.clip(((a - t0) // w).astype(np.int64), 0, S - 1)
        s1 = np.clip(((b - t0) // w).astype(np.int64), 0, S - 1)
        one = s0 == s1
        # the first slice gets the overlap up to its end (the whole instance when it ends there too),
        # the last slice the rest, the slices between the full width (through a difference array)
        head = np.where(one, b - a, edges[np.minimum(s0 + 1, S)] - a)
        tail = np.where(one, 0.0, b - edges[s1])
        full = (s1 > s0 + 1).astype(np.float64) * w
        idx = [row * (S + 1) + s0, row * (S + 1) + s1, row * (S + 1) + s0 + 1, row * (S + 1) + s1]
        size = P * (S + 1)

        def acc(wts: list[np.ndarray]) -> np.ndarray:
            return np.bincount(np.concatenate(idx), weights=np.concatenate(wts), minlength=size).reshape(P, S + 1)

        num = acc([head * perf, tail * perf, np.zeros(len(a)), np.zeros(len(a))])
        den = acc([head, tail, np.zeros(len(a)), np.zeros(len(a))])
        num += np.cumsum(acc([np.zeros(len(a)), np.zeros(len(a)), full * perf, -full * perf]), axis=1)
        den += np.cumsum(acc([np.zeros(len(a)), np.zeros(len(a)), full, -full]), axis=1)
    num, den = num[:, :S], den[:, :S]
    with np.errstate(invalid="ignore", divide="ignore"):
        vals = np.where(den > 0, num / den, np.nan)
    return Matrix(procs, edges, vals, den)
