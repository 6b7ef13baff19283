"""Recursive bisection with greedy graph growing and Fiduccia-Mattheyses refinement (see :mod:`.partition`)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

__all__ = ["recurse", "kway_refine", "cut_of"]


def cut_of(graph: sp.csr_matrix, side: np.ndarray) -> float:
    """Weight of the edges of a symmetric graph between different sides."""
    coo = graph.tocoo()
    return float(coo.data[side[coo.row] != side[coo.col]].sum()) / 2.0


def _peripheral(g: sp.csr_matrix, start: int) -> int:
    """The last rank reached by a breadth-first search from the last rank reached from ``start``."""
    order = breadth_first_order(g, start, directed=False, return_predecessors=False)
    order = breadth_first_order(g, int(order[-1]), directed=False, return_predecessors=False)
    return int(order[-1])


def _grow(g: sp.csr_matrix, deg: np.ndarray, vw: np.ndarray, seed: int, hi: float, target: float) -> np.ndarray:
    """Greedy graph growing: side 0 grows from ``seed`` to about ``target`` weight (never above ``hi``)."""
    n = g.shape[0]
    side = np.ones(n, dtype=np.int8)
    conn = np.zeros(n)  # weight to side 0
    ip, ix, dat = g.indptr, g.indices, g.data
    w0 = 0.0
    v = seed
    while True:
        side[v] = 0
        w0 += vw[v]
        nb = ix[ip[v] : ip[v + 1]]
        conn[nb] += dat[ip[v] : ip[v + 1]]
        if w0 >= target:
            break
        cand = (side == 1) & (w0 + vw <= hi)
        if not cand.any():
            break
        gain = np.where(cand, 2.0 * conn - deg, -np.inf)
        v = int(np.argmax(gain))
    return side


def _fm(g: sp.csr_matrix, vw: np.ndarray, side: np.ndarray, lo: float, hi: float, max_passes: int = 8) -> np.ndarray:
    """Fiduccia-Mattheyses refinement of a bisection; side-0 weight kept within [lo, hi]."""
    n = g.shape[0]
    ip, ix, dat = g.indptr, g.indices, g.data
    side = side.copy()
    target = (lo + hi) / 2.0
    rows = np.repeat(np.arange(n), np.diff(ip))
    for _ in range(max_passes):
        same = side[rows] == side[ix]
        # float even without edges (bincount of nothing is an integer array)
        ext = np.bincount(rows, weights=np.where(same, 0.0, dat), minlength=n).astype(np.float64)
        inn = np.bincount(rows, weights=np.where(same, dat, 0.0), minlength=n).astype(np.float64)
        gain = ext - inn
        w0 = float(vw[side == 0].sum())
        cut = float(ext.sum()) / 2.0
        start_cut, start_dev = cut, _dev(w0, lo, hi, target)
        best = (start_dev > 0, cut, start_dev)
        best_len = 0
        moves: list[int] = []
        locked = np.zeros(n, dtype=bool)
        stall = 0
        limit = max(25, n // 4)
        while stall < limit:
            nw0 = np.where(side == 0, w0 - vw, w0 + vw)
            dev_now = _dev(w0, lo, hi, target)
            ok = ~locked & ((nw0 >= lo) & (nw0 <= hi) | (np.abs(nw0 - target) < abs(w0 - target)) & (dev_now > 0))
            if not ok.any():
                break
            v = int(np.argmax(np.where(ok, gain, -np.inf)))
            cut -= gain[v]
            w0 = float(nw0[v])
            nb = ix[ip[v] : ip[v + 1]]
            wt = dat[ip[v] : ip[v + 1]]
            gain[nb] += np.where(side[nb] == side[v], 2.0 * wt, -2.0 * wt)
            gain[v] = -gain[v]
            side[v] = 1 - side[v]
            locked[v] = True
            moves.append(v)
            dev = _dev(w0, lo, hi, target)
            state = (dev > 0, cut, dev)
            if state < best:
                best, best_len, stall = state, len(moves), 0
            else:
                stall += 1
        for v in moves[best_len:]:
            side[v] = 1 - side[v]
        if not (best[1] < start_cut - 1e-12 or (best[2] < start_dev)):
            break
    return side


def _dev(w0: float, lo: float, hi: float, target: float) -> float:
    """How far a side-0 weight is outside [lo, hi] (0 inside)."""
    return max(lo - w0, w0 - hi, 0.0)


def _bisect(g: sp.csr_matrix, vw: np.ndarray, frac: float, tol: float, seed: int, tries: int) -> np.ndarray:
    n = g.shape[0]
    total = float(vw.sum())
    target = frac * total
    half = float(vw.max()) / 2.0 if n else 0.0
    lo = target - max(tol * (1.0 - frac) * total, half)
    hi = target + max(tol * frac * total, half)
    deg = np.asarray(g.sum(axis=1)).ravel()
    rng = np.random.default_rng(seed)
    seeds = [_peripheral(g, int(np.argmin(deg)))] if g.nnz else [0]
    seeds += [int(s) for s in rng.choice(n, size=min(tries, n), replace=False)]
    best_side, best_key = None, None
    for s in dict.fromkeys(seeds):
        side = _fm(g, vw, _grow(g, deg, vw, s, hi, target), lo, hi)
        w0 = float(vw[side == 0].sum())
        key = (_dev(w0, lo, hi, target) > 0, cut_of(g, side), abs(w0 - target))
        if best_key is None or key < best_key:
            best_side, best_key = side, key
    return best_side


def recurse(
    g: sp.csr_matrix, vw: np.ndarray, idx: np.ndarray, k: int, first: int, out: np.ndarray, tol: float, seed: int
) -> None:
    if k <= 1 or len(idx) <= 1:
        out[idx] = first
        return
    if len(idx) <= k:
        out[idx] = first + np.arange(len(idx))
        return
    k1 = k // 2
    sub = g[idx][:, idx].tocsr()
    side = _bisect(sub, vw[idx], k1 / k, tol, seed, tries=3)
    recurse(g, vw, idx[side == 0], k1, first, out, tol, seed + 1)
    recurse(g, vw, idx[side == 1], k - k1, first + k1, out, tol, seed + 2)


def kway_refine(g: sp.csr_matrix, vw: np.ndarray, assign: np.ndarray, k: int, cap: float, sweeps: int = 3) -> None:
    """Greedy k-way boundary refinement in place: move a rank to the part it is most connected to."""
    ip, ix, dat = g.indptr, g.indices, g.data
    pw = np.bincount(assign, weights=vw, minlength=k)
    for _ in range(sweeps):
        moved = 0
        for v in range(g.shape[0]):
            nb = ix[ip[v] : ip[v + 1]]
            if not len(nb):
                continue
            conn = np.bincount(assign[nb], weights=dat[ip[v] : ip[v + 1]], minlength=k).astype(np.float64)
            p = assign[v]
            conn_p = conn[p]
            conn[p] = -np.inf
            conn[pw + vw[v] > cap] = -np.inf
            q = int(np.argmax(conn))
            if conn[q] > conn_p and pw[p] - vw[v] > 0:
                assign[v] = q
                pw[p] -= vw[v]
                pw[q] += vw[v]
                moved += 1
        if not moved:
            break
