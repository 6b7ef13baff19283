"""Fixed-workload snippets of a trace and their normalised performance (after vSensor and Vapro).

A *snippet* is a piece of one location's timeline whose work should be the
same every time it runs:

* a **computation** snippet is the code between two consecutive
  communication calls (outermost MPI calls) of a location, identified by the
  pair of call sites (their call paths) and by the regions entered in
  between (their number and call paths): same pair, same visits. Sample
  pieces (interval rows with ``samples`` > 0, :mod:`perflow.trace.pieces`)
  are not counted: they record what ran, not what was called, and differ
  from one instance to the next with the sampling;
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

from ..kinds import OFF_CPU, MPIClass, mpi_class
from ..pag.instances import Trace
from .flat import FlatTimeline, Locations, flat_timeline, locations, njit, subtree_sizes

__all__ = ["snippet_table", "normalised_performance", "performance_matrix", "cluster_within", "window_code", "Matrix"]


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
        g = np.asarray(group)
        dense = g.dtype.kind in "iu" and len(g) and g.min() >= 0 and g.max() < 4 * len(g) + 16
        g = g.astype(np.int64) if dense else pd.factorize(g)[0].astype(np.int64)
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


def _combine(small: list[tuple[np.ndarray, int]], large: list[np.ndarray]) -> np.ndarray:
    """One dense int64 id per distinct row of integer columns.

    ``small`` columns come with their range (values in ``0..range-1``) and are
    mixed arithmetically while the product fits in int64; ``large`` ones (and
    the rest) are factorised pairwise, so nothing overflows.
    """
    n = len(small[0][0]) if small else len(large[0])
    key = np.zeros(n, dtype=np.int64)
    span = 1
    rest = list(large)
    for col, rng in small:
        rng = max(int(rng), 1)
        if span * rng < (1 << 62):
            key = key * rng + np.asarray(col, dtype=np.int64)
            span *= rng
        else:
            rest.append(col)
    for col in rest:
        codes, uniq = pd.factorize(np.asarray(col, dtype=np.int64))
        key, _ = pd.factorize(key * max(len(uniq), 1) + codes)
        key = key.astype(np.int64)
    if not rest:
        key = pd.factorize(key)[0].astype(np.int64)
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


def window_code(
    flat: FlatTimeline, loc: np.ndarray, start: np.ndarray, end: np.ndarray, skip: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The call path with the most exclusive time in each time window of a location, and that time.

    Windows are ``(loc[i], start[i], end[i])`` with bounds at event times
    (the leave of one call, the enter of the next); windows of one location
    do not overlap. Exclusive time comes from the flat timeline, so a
    sampled run counts its sample pieces and an instrumented one its region
    instances. A window without any region time gives vertex -1. Vertices
    where ``skip`` (per vertex) is true are never the answer (time off the CPU).

    Examples
    --------
    Location 0 runs ``main`` (vertex 0) from 0 to 10 with ``solve`` (vertex
    1) over [2, 5] and ``io`` (vertex 2) over [6, 7]:

    >>> from perflow.pag.instances import Trace
    >>> from perflow.trace.flat import flat_timeline
    >>> tr = Trace(pd.DataFrame({"process": [0, 0, 0], "thread": 0, "vertex": [0, 1, 2],
    ...     "enter": [0.0, 2.0, 6.0], "leave": [10.0, 5.0, 7.0], "parent": [-1, 0, 0]}))
    >>> v, t = window_code(flat_timeline(tr), np.array([0, 0]), np.array([2.0, 6.0]), np.array([6.0, 10.0]))
    >>> v.tolist(), t.tolist()
    ([1, 0], [3.0, 3.0])
    """
    loc = np.asarray(loc, dtype=np.int64)
    nw = len(loc)
    out_v, out_t = np.full(nw, -1, dtype=np.int64), np.zeros(nw)
    counts = np.diff(flat.offsets)
    if not nw or not counts.sum():
        return out_v, out_t
    sloc = np.repeat(np.arange(len(counts)), counts)
    ks = np.flatnonzero(np.r_[sloc[1:] == sloc[:-1], False] & (flat.vertex >= 0))
    if skip is not None and len(ks):
        ks = ks[~np.asarray(skip, dtype=bool)[flat.vertex[ks]]]
    a, b = flat.time[ks], flat.time[ks + 1]
    live = b > a
    ks, a, b = ks[live], a[live], b[live]
    # the window holding each slot: per location, the last window starting at or before the slot
    wo = np.lexsort((np.asarray(start, np.float64), loc))
    w_loc, w_start, w_end = loc[wo], np.asarray(start, np.float64)[wo], np.asarray(end, np.float64)[wo]
    L = len(counts)
    wb = np.searchsorted(w_loc, np.arange(L + 1))
    s_loc = sloc[ks]
    sb = np.searchsorted(s_loc, np.arange(L + 1))
    wi = np.full(len(ks), -1, dtype=np.int64)
    for lc in np.flatnonzero((np.diff(wb) > 0) & (np.diff(sb) > 0)).tolist():
        lo, hi = sb[lc], sb[lc + 1]
        j = np.searchsorted(w_start[wb[lc] : wb[lc + 1]], a[lo:hi], side="right") - 1
        wi[lo:hi] = np.where(j >= 0, j + wb[lc], -1)
    ok = wi >= 0
    ok[ok] &= b[ok] <= w_end[wi[ok]]
    s = np.flatnonzero(ok)
    if not len(s):
        return out_v, out_t
    w = wo[wi[s]]
    V = int(flat.vertex.max()) + 1
    vv = flat.vertex[ks[s]]
    dur = (b - a)[s]
    if nw * V <= max(8 * len(s), 1 << 22):  # a dense (window, vertex) table: argmax per row, ties to the lowest vertex
        tab = np.bincount(w * V + vv, weights=dur, minlength=nw * V).reshape(nw, V)
        top = tab.argmax(axis=1)
        best = tab[np.arange(nw), top]
        has = best > 0
        out_v[has] = top[has]
        out_t[has] = best[has]
        return out_v, out_t
    key, inv = np.unique(w * V + vv, return_inverse=True)
    tot = np.bincount(inv.ravel(), weights=dur, minlength=len(key))
    kw, kv = key // V, key % V
    order = np.lexsort((-kv, tot, kw))  # per window the largest time last (ties: the lowest vertex)
    top = order[np.r_[kw[order][1:] != kw[order][:-1], True]]
    out_v[kw[top]] = kv[top]
    out_t[kw[top]] = tot[top]
    return out_v, out_t


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
    locs: Locations | None = None,
    flat: FlatTimeline | None = None,
) -> pd.DataFrame:
    """One row per snippet instance of a fixed-workload group, with its normalised performance.

    Columns: ``process``, ``thread``, ``start``, ``end``, ``kind``
    ("computation" / "communication"), ``group``, ``from_vertex``,
    ``to_vertex`` (the call sites around a computation snippet; both the call
    for a communication snippet), ``code_vertex`` (the call path with the
    most exclusive time inside a computation snippet, see
    :func:`window_code`; the call for a communication snippet), ``time``
    (s), ``perf`` (``t_min / t``). ``locs`` and ``flat`` are
    ``locations(trace)`` and ``flat_timeline(trace)`` when at hand.
    """
    iv = trace.intervals
    n = len(iv)
    cols = ["process", "thread", "start", "end", "kind", "group", "from_vertex", "to_vertex", "code_vertex", "time"]
    cols.append("perf")
    if n == 0:
        return pd.DataFrame({c: [] for c in cols})
    locs = locs if locs is not None else locations(trace)
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
    size = subtree_sizes(trace, locs)
    # computation snippets between consecutive calls of one location
    a, b = calls[:-1], calls[1:]
    same = cloc[:-1] == cloc[1:]
    a, b = a[same], b[same]
    lo = pos_of[a] + size[a]  # first position after call a's subtree
    hi = pos_of[b]  # position of call b
    # the regions entered in between; pieces (the ``piece`` column) say what ran, not what was called, and
    # vary with the sampling, and so does time off the CPU: they do not change a snippet's identity
    rec = ~iv["piece"].to_numpy() if "piece" in iv.columns else np.ones(n, dtype=bool)
    off_cpu = np.asarray(names, dtype=object) == OFF_CPU
    rec &= ~off_cpu[vtx]
    cprefix = np.r_[0, np.cumsum(rec[order])]
    count = cprefix[hi] - cprefix[lo]
    vprefix = np.r_[0, np.cumsum(np.where(rec, vtx + 1, 0)[order])]
    vsum = vprefix[hi] - vprefix[lo]
    t_comp = leave[a].copy()
    e_comp = enter[b].copy()
    comp_counter = None
    if counter is not None:
        cval = iv[counter].to_numpy(dtype=np.float64)
        # counter of a snippet: sum over the intervals entered in it whose parent is outside it
        snip_of_pos = np.full(n, -1, dtype=np.int64)
        npos = hi - lo
        has = npos > 0
        rep = np.repeat(np.flatnonzero(has), npos[has])
        within = np.arange(int(npos[has].sum())) - np.repeat(np.cumsum(npos[has]) - npos[has], npos[has])
        snip_of_pos[np.repeat(lo[has], npos[has]) + within] = rep
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
    first = np.r_[a, cc]  # the call opening each snippet (computation) or the call itself
    last = np.r_[b, cc]
    kind = np.r_[np.zeros(len(a), np.int8), np.ones(len(cc), np.int8)]
    fv, tv, loc = vtx[first], vtx[last], locs.of_interval[first]
    nvert = int(vtx.max(initial=0)) + 1
    small = [(fv, nvert), (tv, nvert), (kind, 2)]
    if per_process:
        small.append((loc, len(locs)))
    group = _combine(small, [np.r_[count, np.full(len(cc), -1)], np.r_[vsum, nb[cc].astype(np.int64)]])
    time = np.r_[e_comp - t_comp, c_time]
    if counter is not None:
        cval = iv[counter].to_numpy(dtype=np.float64)
        group = cluster_within(group, np.r_[comp_counter, cval[cc]], tolerance)
    ok = time > 0
    sizes = np.bincount(group[ok], minlength=int(group.max(initial=-1)) + 1)
    keep = np.flatnonzero(ok & (sizes[group] >= min_instances) if len(sizes) else ok)
    g = pd.factorize(group[keep])[0].astype(np.int64)
    loc = loc[keep]
    ka = keep[keep < len(a)]
    kc = keep[keep >= len(a)] - len(a)
    perf = normalised_performance(time[keep], g)
    flat = flat if flat is not None else flat_timeline(trace, locs)
    code, _ = window_code(flat, locs.of_interval[a[ka]], t_comp[ka], e_comp[ka], skip=off_cpu)
    return pd.DataFrame(
        {
            "process": locs.process[loc].astype(np.int32),
            "thread": locs.thread[loc].astype(np.int32),
            "start": np.r_[t_comp[ka], enter[cc[kc]]],
            "end": np.r_[e_comp[ka], leave[cc[kc]]],
            "kind": pd.Categorical.from_codes(kind[keep], categories=["computation", "communication"]),
            "group": g,
            "from_vertex": fv[keep],
            "to_vertex": tv[keep],
            "code_vertex": np.r_[code, vtx[cc[kc]]],
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

    def __add__(self, other: Matrix) -> Matrix:
        """The matrix of both sets of instances together (same processes and slices)."""
        num = np.nan_to_num(self.values) * self.weight + np.nan_to_num(other.values) * other.weight
        den = self.weight + other.weight
        with np.errstate(invalid="ignore", divide="ignore"):
            vals = np.where(den > 0, num / den, np.nan)
        return Matrix(self.processes, self.edges, vals, den)


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
    """Overlap-weighted mean of ``perf`` per (process, time slice), in linear time.

    Each instance adds its overlap with its first and last slice directly and
    the full width of the slices in between through a difference array.
    """
    procs = np.unique(process) if processes is None else np.asarray(processes)
    P, S = len(procs), max(int(slices), 1)
    edges = np.linspace(t0, t1, S + 1)
    w = (t1 - t0) / S if t1 > t0 else 1.0
    num = np.zeros(P * S)
    den = np.zeros(P * S)
    if len(process):
        row = np.searchsorted(procs, process).astype(np.int64)
        a = np.clip(start, t0, t1)
        b = np.clip(end, t0, t1)
        s0 = np.clip(((a - t0) // w).astype(np.int64), 0, S - 1)
        s1 = np.clip(((b - t0) // w).astype(np.int64), 0, S - 1)
        one = s0 == s1
        head = np.where(one, b - a, edges[np.minimum(s0 + 1, S)] - a)
        num += np.bincount(row * S + s0, weights=head * perf, minlength=P * S)
        den += np.bincount(row * S + s0, weights=head, minlength=P * S)
        m = np.flatnonzero(~one)
        if len(m):
            tail = b[m] - edges[s1[m]]
            num += np.bincount(row[m] * S + s1[m], weights=tail * perf[m], minlength=P * S)
            den += np.bincount(row[m] * S + s1[m], weights=tail, minlength=P * S)
            f = m[s1[m] > s0[m] + 1]
            if len(f):
                lo, hi = row[f] * (S + 1) + s0[f] + 1, row[f] * (S + 1) + s1[f]
                idx = np.r_[lo, hi]
                dn = np.bincount(idx, weights=np.r_[w * perf[f], -w * perf[f]], minlength=P * (S + 1))
                dd = np.bincount(idx, weights=np.r_[np.full(len(f), w), np.full(len(f), -w)], minlength=P * (S + 1))
                num += np.cumsum(dn.reshape(P, S + 1), axis=1)[:, :S].ravel()
                den += np.cumsum(dd.reshape(P, S + 1), axis=1)[:, :S].ravel()
    num, den = num.reshape(P, S), den.reshape(P, S)
    with np.errstate(invalid="ignore", divide="ignore"):
        vals = np.where(den > 0, num / den, np.nan)
    return Matrix(procs, edges, vals, den)
