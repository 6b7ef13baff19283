"""Compiled passes of :mod:`perflow.trace.syncpoints`: the collectives' synchronisation, one instance at a time.

:func:`collective_sync` walks the collective rows (sorted by instance) once, instance by instance, and gives
each row its operation time, release and whether it synchronised: the numpy form of the same rules made
~40 passes over every row (the per-instance sums, minima and maxima broadcast back to the rows). The
comparisons and extrema are numpy's (``np.maximum``/``np.minimum``: a NaN wins), so the figures are the
same bit for bit.
"""

from __future__ import annotations

import numpy as np

from .flat import njit

__all__ = ["collective_sync", "by_location_time_sorted"]


@njit
def _mx(a, b):  # type: ignore[no-untyped-def]
    """``np.maximum(a, b)`` of two floats (NaN propagates, ties give ``a``)."""
    return a if (a >= b or a != a) else b


@njit
def _mn(a, b):  # type: ignore[no-untyped-def]
    """``np.minimum(a, b)`` of two floats (NaN propagates, ties give ``a``)."""
    return a if (a <= b or a != a) else b


@njit
def _collective_sync(  # type: ignore[no-untyped-def]
    inst, civ, iv_enter, iv_leave, iv_vertex, begin, end, kind, sent, received, root, process
):
    n = inst.shape[0]
    E = np.empty(n, np.float64)
    Lr = np.empty(n, np.float64)
    leave = np.empty(n, np.float64)
    vertex = np.empty(n, np.int64)
    sync = np.zeros(n, np.bool_)
    release = np.empty(n, np.float64)
    for i in range(n):
        c = civ[i]
        if c >= 0:
            en = iv_enter[c]
            lv = iv_leave[c]
            vertex[i] = iv_vertex[c]
        else:
            en = begin[i]
            lv = end[i]
            vertex[i] = -1
        leave[i] = lv
        if begin[i] >= en:  # blocking: the operation's records (Scalasca's times)
            E[i] = begin[i]
            Lr[i] = _mn(_mx(end[i], begin[i]), lv)
        else:
            E[i] = en
            Lr[i] = lv
    s0 = 0
    while s0 < n:
        s1 = s0 + 1
        while s1 < n and inst[s1] == inst[s0]:
            s1 += 1
        moved = 0.0
        latest_e = E[s0]
        root_row = -1
        for i in range(s0, s1):
            moved += np.float64(sent[i] + received[i])
            if i > s0:
                latest_e = _mx(latest_e, E[i])
            if root_row < 0 and root[i] >= 0 and process[i] == root[i]:
                root_row = i
        has_root = root_row >= 0
        # pass 2: the kinds of the rows, the root's waiters, the latest sender
        any_wait = False
        latest_s = -np.inf
        for i in range(s0, s1):
            k = kind[i]
            is_root = root[i] >= 0 and process[i] == root[i]
            if k == 1 or (k == 0 and moved > 0):  # barrier-like, or all-to-all that moved data
                sync[i] = True
            if k == 2 and has_root and sent[root_row] > 0:  # 1-to-N
                if not is_root and received[i] > 0 and E[i] < E[root_row]:
                    sync[i] = True
                    any_wait = True
            if k == 3 and has_root:  # N-to-1
                se = E[i] if (not is_root and sent[i] > 0) else -np.inf
                latest_s = se if i == s0 else _mx(latest_s, se)
        first_latest = -1
        for i in range(s0, s1):
            k = kind[i]
            if k == 3 and has_root:
                is_root = root[i] >= 0 and process[i] == root[i]
                se = E[i] if (not is_root and sent[i] > 0) else -np.inf
                if first_latest < 0 and se == latest_s:
                    first_latest = i
        for i in range(s0, s1):
            k = kind[i]
            is_root = root[i] >= 0 and process[i] == root[i]
            if k == 2 and has_root and sent[root_row] > 0 and is_root and any_wait:
                sync[i] = True
            if k == 3 and has_root and E[root_row] < latest_s and (is_root or i == first_latest):
                sync[i] = True
        earliest = np.inf
        for i in range(s0, s1):
            if sync[i]:
                earliest = _mn(earliest, Lr[i])
        for i in range(s0, s1):
            k = kind[i]
            if k == 2 and has_root and sent[root_row] > 0:
                ref = E[root_row]
            elif k == 3 and has_root:
                ref = latest_s
            else:
                ref = latest_e
            if sync[i]:
                comp = _mx(0.0, Lr[i] - _mx(earliest, _mn(ref, Lr[i])))
            else:
                comp = 0.0
            release[i] = leave[i] - comp
        s0 = s1
    return E, release, sync, vertex


def collective_sync(
    inst: np.ndarray,
    civ: np.ndarray,
    iv_enter: np.ndarray,
    iv_leave: np.ndarray,
    iv_vertex: np.ndarray,
    c_cols: dict[str, np.ndarray],
    kind: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per collective row (sorted by ``inst``): the operation's time, the release, whether it synchronised
    and the call path of its call (-1 without one).

    ``c_cols`` holds the rows' ``begin``, ``end``, ``sent``, ``received``, ``root`` and ``process``;
    ``kind`` (of each row's operation) is 1 for barrier-like operations (every participant synchronises),
    0 for all-to-all ones (when data moved), 2 for 1-to-N, 3 for N-to-1 and 4 for the rest (scans,
    irregular all-to-all, handles).
    """
    f8, i8 = np.float64, np.int64
    return _collective_sync(
        np.ascontiguousarray(inst, i8), np.ascontiguousarray(civ, i8),
        np.ascontiguousarray(iv_enter, f8), np.ascontiguousarray(iv_leave, f8),
        np.ascontiguousarray(iv_vertex, i8),
        np.ascontiguousarray(c_cols["begin"], f8), np.ascontiguousarray(c_cols["end"], f8),
        np.ascontiguousarray(kind, np.int8), np.ascontiguousarray(c_cols["sent"], i8),
        np.ascontiguousarray(c_cols["received"], i8), np.ascontiguousarray(c_cols["root"], i8),
        np.ascontiguousarray(c_cols["process"], i8),
    )  # fmt: skip


@njit
def _by_location_time(loc, time, n_locs):  # type: ignore[no-untyped-def]
    n = loc.shape[0]
    off = np.zeros(n_locs + 1, np.int64)
    for i in range(n):
        off[loc[i] + 1] += 1
    for k in range(n_locs):
        off[k + 1] += off[k]
    fill = off[:-1].copy()
    out = np.empty(n, np.int64)
    for i in range(n):  # a stable counting sort by location
        out[fill[loc[i]]] = i
        fill[loc[i]] += 1
    for k in range(n_locs):  # then a stable sort by time within each location, unless already in order
        a, b = off[k], off[k + 1]
        ordered = True
        for j in range(a + 1, b):
            if time[out[j]] < time[out[j - 1]]:
                ordered = False
                break
        if not ordered:
            idx = out[a:b].copy()
            o = np.argsort(time[idx], kind="mergesort")
            for j in range(b - a):
                out[a + j] = idx[o[j]]
    return out


def by_location_time_sorted(loc: np.ndarray, time: np.ndarray, n_locs: int) -> np.ndarray | None:
    """``np.lexsort((time, loc))`` for locations in ``[0, n_locs)`` and float times without NaN, by a
    counting sort of the locations and a stable sort of each location's times (skipped when they are in
    order already); None when the input is outside that case."""
    if not len(loc) or loc.dtype.kind not in "iu" or time.dtype != np.float64:
        return None
    if int(loc.min()) < 0 or int(loc.max()) >= n_locs or np.isnan(time).any():
        return None
    return _by_location_time(np.ascontiguousarray(loc, np.int64), np.ascontiguousarray(time), int(n_locs))
