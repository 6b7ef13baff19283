"""Collective dependencies of a replay (:mod:`perflow.trace.replaydeps`): who waits for whom in a collective.

A participant arrives at ``A_j = min(E_j, begin_j)`` (its request, for a
non-blocking one; its enter otherwise, as in :mod:`perflow.trace.collwaits`)
and waits in its call ``[E_i, L_i]``: every participant of a barrier or an
all-to-all operation, and the root of an N-to-1 operation, for the latest
arrival (``early_reduce="earliest"``: the root for the earliest non-root);
the non-roots of a 1-to-N operation for the root; scan rank ``k`` for the
ranks below it. A data collective that moves no bytes is no dependency.
What needs all participants of an instance (bytes moved, latest and root
arrival) is :func:`instance_stats`, which a partition computes for its
participants and :func:`combine_instance_stats` merges.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..pag.instances import Trace
from .collwaits import _PATTERNS, _comm_rank
from .flat import Locations

__all__ = ["collective_dependencies", "collective_times", "instance_stats", "combine_instance_stats", "scan_rows"]


def collective_times(trace: Trace) -> tuple[np.ndarray, ...]:
    """Per collective row (table order): enter ``E`` and leave ``L`` of its call, arrival ``A = min(E, begin)``."""
    c = trace.collectives
    iv = trace.intervals
    row_iv = c["interval"].to_numpy().astype(np.int64)
    has = (row_iv >= 0) & (len(iv) > 0)
    begin, end = c["begin"].to_numpy(), c["end"].to_numpy()
    E = np.where(has, iv["enter"].to_numpy()[np.maximum(row_iv, 0)] if len(iv) else begin, begin)
    L = np.where(has, iv["leave"].to_numpy()[np.maximum(row_iv, 0)] if len(iv) else end, end)
    return E, L, np.minimum(E, begin)


def instance_stats(trace: Trace, n_instances: int) -> np.ndarray:
    """Per collective instance (rows of an ``(4, n_instances)`` array): bytes moved, latest arrival, the
    root's arrival, the earliest arrival of a non-root; a partial result when ``trace`` holds some of the
    participants (combine with :func:`combine_instance_stats`)."""
    c = trace.collectives
    out = np.empty((4, n_instances))
    out[0], out[1], out[2], out[3] = 0.0, -np.inf, -np.inf, np.inf
    if not len(c):
        return out
    _, _, A = collective_times(trace)
    inst = c["instance"].to_numpy().astype(np.int64)
    proc = c["process"].to_numpy().astype(np.int64)
    root = c["root"].to_numpy().astype(np.int64)
    is_root = (root >= 0) & (proc == root)
    np.add.at(out[0], inst, (c["sent"].to_numpy() + c["received"].to_numpy()).astype(np.float64))
    np.maximum.at(out[1], inst, A)
    np.maximum.at(out[2], inst[is_root], A[is_root])
    np.minimum.at(out[3], inst[~is_root], A[~is_root])
    return out


def combine_instance_stats(parts: list[np.ndarray]) -> np.ndarray:
    """The whole trace's :func:`instance_stats` from those of its parts."""
    out = parts[0].copy()
    for p in parts[1:]:
        out[0] += p[0]
        np.maximum(out[1], p[1], out=out[1])
        np.maximum(out[2], p[2], out=out[2])
        np.minimum(out[3], p[3], out=out[3])
    return out


def scan_rows(trace: Trace) -> pd.DataFrame:
    """The participants of scans: ``instance``, ``rank`` (in the communicator), ``process``, ``thread``, ``arrival``."""
    c = trace.collectives
    op = c["op"].to_numpy().astype(np.int64)
    pat = np.where((op >= 0) & (op < len(_PATTERNS)), _PATTERNS[np.clip(op, 0, len(_PATTERNS) - 1)], -1)
    k = np.flatnonzero(pat == 4)
    _, _, A = collective_times(trace)
    proc = c["process"].to_numpy().astype(np.int64)
    rank = _comm_rank(trace, c["comm"].to_numpy().astype(np.int64)[k], proc[k])
    out = pd.DataFrame({"instance": c["instance"].to_numpy()[k].astype(np.int64), "rank": rank, "process": proc[k],
                        "thread": c["thread"].to_numpy()[k].astype(np.int64), "arrival": A[k]})  # fmt: skip
    return out.sort_values(["instance", "rank", "process", "thread"], kind="stable").reset_index(drop=True)


def collective_dependencies(d, trace: Trace, locs: Locations, early_reduce: str, n_instances: int | None,  # type: ignore[no-untyped-def]
                            stats: np.ndarray | None, scans: pd.DataFrame | None) -> None:  # fmt: skip
    """Add the collective dependencies of ``trace`` to ``d`` (a :class:`~perflow.trace.replaydeps.Dependencies`)."""
    c = trace.collectives
    base = d.n_channels
    G = int(n_instances) if n_instances is not None else (int(c["instance"].max()) + 1 if len(c) else 0)
    scans = scans if scans is not None else scan_rows(trace)
    d.n_channels += 3 * G + len(scans)
    if not len(c):
        return
    stats = stats if stats is not None else instance_stats(trace, G)
    inst = c["instance"].to_numpy().astype(np.int64)
    E, L, A = collective_times(trace)
    proc = c["process"].to_numpy().astype(np.int64)
    loc = locs.lookup(proc, c["thread"].to_numpy())
    op = c["op"].to_numpy().astype(np.int64)
    pat = np.where((op >= 0) & (op < len(_PATTERNS)), _PATTERNS[np.clip(op, 0, len(_PATTERNS) - 1)], -1)
    sync = (pat == 0) | ((pat > 0) & (stats[0][inst] > 0))
    root = c["root"].to_numpy().astype(np.int64)
    is_root = (root >= 0) & (proc == root)
    ch_all, ch_root, ch_min = base + inst, base + G + inst, base + 2 * G + inst
    latest = stats[1][inst]
    # every participant of a barrier or all-to-all waits for all; the root of an N-to-1 operation too
    reduce_all = (pat == 3) & (early_reduce == "latest")
    _collective_wait(d, sync & ((pat <= 1) & (pat >= 0) | (reduce_all & is_root)), loc, E, L, latest, ch_all)
    d.issue(np.where(sync & (((pat <= 1) & (pat >= 0)) | reduce_all), loc, -1), A, ch_all)
    # the non-roots of a 1-to-N operation wait for the root
    a_root = stats[2][inst]
    _collective_wait(d, sync & (pat == 2) & ~is_root & np.isfinite(a_root), loc, E, L, a_root, ch_root)
    d.issue(np.where(sync & (pat == 2) & is_root, loc, -1), A, ch_root)
    # early_reduce="earliest": the root of an N-to-1 operation waits for the first sender only
    if early_reduce == "earliest":
        first = stats[3][inst]
        w = sync & (pat == 3) & is_root & np.isfinite(first)
        _collective_wait(d, w, loc, E, L, first, ch_min)
        d.issue(np.where(sync & (pat == 3) & ~is_root, loc, -1), A, ch_min)
        d.min_channels.append(np.unique(ch_min[w]))
    # scan: rank k waits for the ranks below it; each lower rank issues into the channel of rank k
    if len(scans) and (pat == 4).any():
        s_inst = scans["instance"].to_numpy()
        s_key = np.stack([s_inst, scans["process"].to_numpy(), scans["thread"].to_numpy()])
        s_rank, s_arr = scans["rank"].to_numpy(), scans["arrival"].to_numpy()
        k = np.flatnonzero(sync & (pat == 4))
        pos = _find_rows(s_key, inst[k], proc[k], c["thread"].to_numpy()[k].astype(np.int64))
        # waits of the rows here: max arrival below their rank
        lo = np.searchsorted(s_inst, inst[k])  # first scan row of the instance
        lower = np.full(len(k), -np.inf)
        for j in range(len(k)):  # scans are few; their participants are few
            r = s_rank[pos[j]]
            a = lo[j]
            b = int(np.searchsorted(s_inst, inst[k[j]], side="right"))
            below = s_arr[a:b][s_rank[a:b] < r]
            if len(below):
                lower[j] = below.max()
            # issues of this row into the channels of the higher ranks of its instance
            hi = np.flatnonzero(s_rank[a:b] > r) + a
            d.issue(np.full(len(hi), loc[k[j]]), np.full(len(hi), A[k[j]]), base + 3 * G + hi)
        w = np.isfinite(lower)
        ch = base + 3 * G + pos
        _collective_wait(d, w, loc[k], E[k], L[k], lower, ch)


def _find_rows(key: np.ndarray, inst: np.ndarray, proc: np.ndarray, thr: np.ndarray) -> np.ndarray:
    """Row of each (instance, process, thread) in the scan table (whose rows ``key`` are)."""
    width = int(max(key[2].max(initial=0), thr.max(initial=0))) + 1
    pw = int(max(key[1].max(initial=0), proc.max(initial=0))) + 1
    k_all = (key[0] * pw + key[1]) * width + key[2]
    order = np.argsort(k_all, kind="stable")
    q = (inst * pw + proc) * width + thr
    return order[np.searchsorted(k_all[order], q)]


def _collective_wait(d, sel: np.ndarray, loc: np.ndarray, E: np.ndarray, L: np.ndarray, src: np.ndarray,
                     ch: np.ndarray) -> None:  # fmt: skip
    honoured = sel & (src <= L)
    d.skip("collectives", loc[sel & ~honoured])
    k = np.flatnonzero(honoured)
    d.wait("collectives", loc[k], E[k], np.maximum(E[k], src[k]), ch[k])
