"""RMA (MPI one-sided) wait states, after Scalasca, from the ``rma`` table of a trace.

Notation: ``E``/``L`` are the enter/leave times of the MPI call (the region
instance holding the RMA record).

Window collectives (``RmaCollectiveEnd`` records; the k-th on a window at
each process forms one instance with the k-th of the others)
    * ``rma_wait_at_fence`` (op BARRIER: ``MPI_Win_fence``),
      ``rma_wait_at_create`` (``MPI_Win_create``/``_allocate``...),
      ``rma_wait_at_free`` (``MPI_Win_free``): the time before the last
      process of the window's group entered, ``max(0, min(max_j E_j, L_i) - E_i)``.

General active target synchronisation (``RmaGroupSync`` records with a
sync level, in ``MPI_Win_post``/``start``/``complete``/``wait``/``test``,
each naming the group of the epoch's partners). The k-th access epoch
(start ... complete) of origin ``o`` on window ``w`` that names target ``t``
pairs with the k-th exposure epoch (post ... wait) of ``t`` on ``w`` that
names ``o``.
    * ``rma_late_post``: the origin waits for the last of its targets to
      post, ``P = max_t E_post(t)``: in ``MPI_Win_start`` ``P - E`` when the
      start leaves after ``P``; otherwise in ``MPI_Win_complete`` (a start
      that returns at once), ``P - E`` when it leaves after ``P`` and ``P > E``.
    * ``rma_early_wait``: the target's ``MPI_Win_wait`` waits for the last of
      its origins to enter ``MPI_Win_complete``,
      ``max(0, min(max_o E_complete(o), L) - E)``.

The records' region names decide the role of a group sync (``MPI_Win_*``,
any case); a group sync with sync level 0 (an ``MPI_Win_test`` that did not
end the epoch) is no synchronisation point.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..kinds import RmaEv
from ..pag.instances import Trace
from .waittable import _frame, empty_waits

__all__ = ["rma_waits", "rma_calls", "rma_waits_of_calls", "WINDOW_COLLECTIVE_KINDS"]

#: OTF2 collective op of a window collective -> wait-state kind
WINDOW_COLLECTIVE_KINDS = {
    0: "rma_wait_at_fence",  # BARRIER (MPI_Win_fence)
    17: "rma_wait_at_create",  # CREATE_HANDLE
    19: "rma_wait_at_create",  # ALLOCATE
    21: "rma_wait_at_create",  # CREATE_HANDLE_AND_ALLOCATE
    18: "rma_wait_at_free",  # DESTROY_HANDLE
    20: "rma_wait_at_free",  # DEALLOCATE
    22: "rma_wait_at_free",  # DESTROY_HANDLE_AND_DEALLOCATE
}
_ROLES = {"mpi_win_start": "S", "mpi_win_post": "P", "mpi_win_complete": "C", "mpi_win_wait": "W", "mpi_win_test": "W"}


#: the synchronisation records the wait states use
_SYNC_KINDS = np.array([RmaEv.COLLECTIVE_END, RmaEv.GROUP_SYNC], dtype=np.int8)


def rma_calls(rma: pd.DataFrame, intervals: pd.DataFrame, gid: np.ndarray | None = None) -> pd.DataFrame:
    """The synchronisation rows of ``rma`` that lie in a call, with the call's ``enter``, ``leave``, ``vertex``.

    ``gid``: the global interval row of each row of ``intervals`` (None: they are the global rows).
    """
    sel = np.isin(rma["kind"].to_numpy(), _SYNC_KINDS) & (rma["interval"].to_numpy() >= 0)
    cols = ["process", "thread", "interval", "kind", "win", "group", "op", "level"]
    r = rma.loc[sel, cols].reset_index(drop=True)
    g = r["interval"].to_numpy()
    if gid is None:
        i = g
    else:
        order = np.argsort(gid, kind="stable")
        i = order[np.searchsorted(gid, g, sorter=order)]
    r["enter"] = intervals["enter"].to_numpy()[i]
    r["leave"] = intervals["leave"].to_numpy()[i]
    r["vertex"] = intervals["vertex"].to_numpy().astype(np.int64)[i]
    return r


def _waits(kind: np.ndarray, amount: np.ndarray, rows: pd.DataFrame, cause: pd.DataFrame) -> pd.DataFrame:
    """Wait rows of the calls in ``rows`` waiting ``amount`` for the calls in ``cause``."""
    keep = amount > 0
    if not keep.any():
        return empty_waits()
    amount = amount[keep]
    rows, cause = rows[keep], cause[keep]
    enter = rows["enter"].to_numpy()
    return _frame(
        len(rows),
        np.asarray(kind)[keep],
        process=rows["process"].to_numpy(),
        thread=rows["thread"].to_numpy(),
        start=enter,
        end=enter + amount,
        amount=amount,
        vertex=rows["vertex"].to_numpy(),
        interval=rows["interval"].to_numpy(),
        cause_process=cause["process"].to_numpy(),
        cause_thread=cause["thread"].to_numpy(),
        cause_time=cause["enter"].to_numpy(),
        cause_interval=cause["interval"].to_numpy(),
    )


def window_collective_waits(calls: pd.DataFrame) -> pd.DataFrame:
    """Wait at Fence / Create / Free of every window collective instance (``calls``: see :func:`rma_calls`)."""
    ops = np.array(sorted(WINDOW_COLLECTIVE_KINDS), dtype=np.int16)
    sel = (calls["kind"].to_numpy() == RmaEv.COLLECTIVE_END) & np.isin(calls["op"].to_numpy(), ops)
    if not sel.any():
        return empty_waits()
    c = calls[sel].reset_index(drop=True)
    c["seq"] = c.groupby(["process", "win"], sort=False).cumcount()
    inst = c.groupby(["win", "seq"], sort=False)["enter"]
    last = c.loc[inst.idxmax().to_numpy()].set_index(["win", "seq"])  # the last process to enter
    cause = last.loc[pd.MultiIndex.from_frame(c[["win", "seq"]])].reset_index(drop=True)
    e = c["enter"].to_numpy()
    amount = np.maximum(0.0, np.minimum(cause["enter"].to_numpy(), c["leave"].to_numpy()) - e)
    kind = np.array([WINDOW_COLLECTIVE_KINDS[int(o)] for o in c["op"].to_numpy()], dtype=object)
    return _waits(kind, amount, c, cause)


def _expand(rows: pd.DataFrame, groups: dict[int, np.ndarray]) -> pd.DataFrame:
    """One row per (group sync, member of its group), with the member as ``partner``."""
    g = rows["group"].to_numpy()
    ids = np.unique(g)
    members = [np.asarray(groups.get(int(k), np.zeros(0)), dtype=np.int64) for k in ids]
    sizes = np.array([len(m) for m in members], dtype=np.int64)
    flat = np.concatenate(members) if members else np.zeros(0, np.int64)
    start = np.r_[0, np.cumsum(sizes)[:-1]] if len(sizes) else np.zeros(0, np.int64)
    gi = np.searchsorted(ids, g)
    n = sizes[gi]
    rep = np.repeat(np.arange(len(rows)), n)
    within = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    out = rows.iloc[rep].reset_index(drop=True)
    out["partner"] = flat[np.repeat(start[gi], n) + within]
    out["row"] = rep
    return out


def _epoch_pairs(x: pd.DataFrame, role: str, origin_is_self: bool) -> pd.DataFrame:
    """The (win, origin, target, k) keys of the group syncs of one role: the k-th such sync of that pair."""
    y = x[x["role"] == role].copy()
    y["origin"] = y["process"] if origin_is_self else y["partner"]
    y["target"] = y["partner"] if origin_is_self else y["process"]
    y["k"] = y.groupby(["win", "origin", "target"], sort=False).cumcount()
    return y


def _latest(pairs: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """Per group sync of ``pairs`` (by ``row``, in row order), the latest-entering matched call of ``other``."""
    keys = ["win", "origin", "target", "k"]
    m = pairs[[*keys, "row"]].merge(other[[*keys, "process", "thread", "interval", "enter"]], on=keys)
    return m.sort_values(["row", "enter"], kind="stable").groupby("row", sort=True).tail(1)


def gats_waits(calls: pd.DataFrame, groups: dict[int, np.ndarray], names: np.ndarray | None) -> pd.DataFrame:
    """Late Post and Early Wait of the general active target synchronisation epochs."""
    sel = (calls["kind"].to_numpy() == RmaEv.GROUP_SYNC) & (calls["level"].to_numpy() != 0)
    sel &= calls["group"].to_numpy() >= 0
    if not sel.any() or names is None:
        return empty_waits()
    g = calls[sel].reset_index(drop=True)
    name = pd.Series(np.asarray(names, dtype=object)[g["vertex"].to_numpy()]).str.lower()
    g["role"] = name.map(_ROLES).to_numpy()
    g = g[g["role"].notna()].reset_index(drop=True)
    x = _expand(g, groups)
    if not len(x):
        return empty_waits()
    start, post = _epoch_pairs(x, "S", True), _epoch_pairs(x, "P", False)
    complete, wait = _epoch_pairs(x, "C", True), _epoch_pairs(x, "W", False)
    out = []
    # Late Post: in MPI_Win_start when it leaves after the last post, else in MPI_Win_complete
    for origin_calls in (start, complete):
        m = _latest(origin_calls, post)
        if not len(m):
            continue
        rows = g.loc[m["row"].to_numpy()].reset_index(drop=True)
        p = m["enter"].to_numpy()
        amount = np.where(rows["leave"].to_numpy() > p, np.maximum(0.0, p - rows["enter"].to_numpy()), 0.0)
        kind = np.full(len(rows), "rma_late_post", dtype=object)
        out.append(_waits(kind, amount, rows, m.reset_index(drop=True)))
    # Early Wait: MPI_Win_wait waits for the last origin to enter MPI_Win_complete
    m = _latest(wait, complete)
    if len(m):
        rows = g.loc[m["row"].to_numpy()].reset_index(drop=True)
        e, lv = rows["enter"].to_numpy(), rows["leave"].to_numpy()
        amount = np.maximum(0.0, np.minimum(m["enter"].to_numpy(), lv) - e)
        kind = np.full(len(rows), "rma_early_wait", dtype=object)
        out.append(_waits(kind, amount, rows, m.reset_index(drop=True)))
    return pd.concat(out, ignore_index=True) if out else empty_waits()


def rma_waits_of_calls(calls: pd.DataFrame, groups: dict[int, np.ndarray], names: np.ndarray | None) -> pd.DataFrame:
    """The RMA wait states of the synchronisation calls ``calls`` (:func:`rma_calls`, of every process)."""
    if not len(calls):
        return empty_waits()
    return pd.concat([window_collective_waits(calls), gats_waits(calls, groups, names)], ignore_index=True)


def rma_waits(trace: Trace, names: np.ndarray | None) -> pd.DataFrame:
    """Every RMA wait-state instance of ``trace`` (``names``: the name of each vertex, for the GATS roles)."""
    if not len(trace.rma):
        return empty_waits()
    return rma_waits_of_calls(rma_calls(trace.rma, trace.intervals), trace.rma_groups, names)
