"""Waiting time charged to calls: the one definition every consumer takes (breakdown, comm_summary, reports).

From the wait-state instance table (:func:`perflow.sdk.trace.waits_for`):
per call instance, the length of the union of its idle wait-state instances
(so never more than the call's duration), split over the families Late
Sender, Late Receiver, collective and thread (OpenMP barriers, lock
contention) in that order of precedence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from perflow.sdk import PAG, WAIT_INSTANCES, Analysis, Grouped, WaitSettings, grouped, settings_dict, settings_keywords
from perflow.sdk.profile import location_key
from perflow.sdk.trace import IDLE_KINDS, WAIT_KINDS, check_choice, covered_to, dense_groups, group_sums, sorted_groups

__all__ = [
    "WAIT_FAMILIES",
    "waiting_time",
    "charge_waits",
    "charged_per_process",
    "WAITING_TIME",
    "WaitingTimeSettings",
]

_LS_KINDS = ("late_sender", "late_sender_wrong_order_same", "late_sender_wrong_order_diff")

#: Families of idle wait-state kinds, in the order in which overlapping waits of one call are charged.
WAIT_FAMILIES: dict[str, tuple[str, ...]] = {
    "late_sender": _LS_KINDS,
    "late_receiver": ("late_receiver",),
    "collective": tuple(k for k in IDLE_KINDS if WAIT_KINDS[k].family == "collective"),
    "thread_sync": tuple(k for k in IDLE_KINDS if WAIT_KINDS[k].family == "thread"),  # OpenMP barriers, locks
    "rma_sync": tuple(k for k in IDLE_KINDS if WAIT_KINDS[k].family == "rma"),  # fences, late posts, early waits
}
_WT_COLS = ["vertex", "process", "thread", *WAIT_FAMILIES, "wait"]
#: (vertex, process, thread) combinations up to which the per-vertex table is summed in a compiled pass
_DENSE_GROUPS = 1 << 24


def _lexsort(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """``np.lexsort(keys)`` (last key primary), in linear time when the rows are in that order already
    (the wait table is in call order: the usual case)."""
    n = len(keys[0])
    if any(k.dtype.kind == "f" and np.isnan(k).any() for k in keys):
        return np.lexsort(keys)
    tie = np.ones(max(n - 1, 0), dtype=bool)  # rows equal to the next one on the keys checked so far
    for k in keys[::-1]:
        a, b = k[:-1], k[1:]
        if (tie & (b < a)).any():
            return np.lexsort(keys)
        tie &= b == a
    return np.arange(n)


def _union_per_key(key: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row (sorted by key, then start): the part of ``[start, end]`` not covered by earlier rows of its key."""
    if not len(key):
        return np.zeros(0)
    return np.maximum(0.0, end - np.maximum(start, covered_to(key, end)))


def _families(kind: pd.Series) -> np.ndarray:
    """The index in :data:`WAIT_FAMILIES` of each row's kind (-1 none); a categorical by its codes."""
    if isinstance(kind.dtype, pd.CategoricalDtype):
        cats = kind.cat.categories
        of = np.full(len(cats) + 1, -1, dtype=np.int8)  # the last slot: code -1 (missing)
        for i, ks in enumerate(WAIT_FAMILIES.values()):
            of[:-1][cats.isin(ks)] = i
        return of[kind.cat.codes.to_numpy()]
    fam = np.full(len(kind), -1, dtype=np.int8)
    for i, ks in enumerate(WAIT_FAMILIES.values()):
        fam[kind.isin(ks).to_numpy()] = i
    return fam


@dataclass(frozen=True)
class WaitingTimeSettings(WaitSettings):
    """The wait-state settings, and whether the table has a row per call path or per call instance."""

    per: Literal["vertex", "interval"] = "vertex"

    def waits(self) -> WaitSettings:
        """The wait-state part."""
        return WaitSettings(**{k: getattr(self, k) for k in settings_dict(WaitSettings())})


@settings_keywords(WaitSettings, "wait_settings")
def waiting_time(pag: PAG, *, per: str = "vertex", wait_settings: WaitSettings) -> pd.DataFrame:
    """Idle waiting time charged to each call path (or call instance), from the wait-state instance table.

    The one definition every consumer uses. Per call instance (row of
    ``pag.trace.intervals``) the waiting time ``wait`` is the length of the
    union of the waiting periods of its idle wait-state instances (Late
    Sender, Late Receiver, collective waits; completion kinds are not idle),
    so it never exceeds the call's duration. When one call waits in several
    ways at once the overlap is charged once, to the first family of
    :data:`WAIT_FAMILIES`; so ``late_sender + late_receiver + collective +
    thread_sync + rma_sync == wait`` on every row. The wait states of one
    call do not overlap (an MPI_Sendrecv's Late Sender and Late Receiver are
    a partition of its time: :mod:`perflow.trace.waits`), so each family
    column equals the sum of the instances' ``amount`` in :func:`wait_states`.

    Parameters
    ----------
    pag : PAG
        A PAG; without a trace the table is empty.
    per : {"vertex", "interval"}
        One row per (vertex, process, thread) that waited, or per call instance
        (then with an ``interval`` column).

    Returns
    -------
    pandas.DataFrame
        ``vertex``, ``process``, ``thread``, ``late_sender``, ``late_receiver``,
        ``collective``, ``thread_sync`` (OpenMP barriers and locks), ``wait`` (seconds), sorted by the key columns.
    """
    check_choice("waiting_time", "per", per, ("vertex", "interval"))
    cols = _WT_COLS if per == "vertex" else ["interval", *_WT_COLS]
    if not isinstance(pag, PAG) or pag.trace is None or not pag.trace.n_intervals:
        return pd.DataFrame({c: np.zeros(0, np.float64 if c in (*WAIT_FAMILIES, "wait") else np.int64) for c in cols})
    return pag.analyses.get(  # type: ignore[no-any-return]
        WAITING_TIME, owner="waiting_time", per=per, **settings_dict(wait_settings)
    )


def _waiting_time(pag: PAG, s: WaitingTimeSettings) -> pd.DataFrame:
    cols = _WT_COLS if s.per == "vertex" else ["interval", *_WT_COLS]
    per = s.per
    w = pag.analyses.get(WAIT_INSTANCES, s.waits())
    fam = _families(w["kind"])
    rows = np.flatnonzero(fam >= 0)
    iv = w["interval"].to_numpy()[rows].astype(np.int64)
    key = np.where(iv >= 0, iv, -1 - np.arange(len(iv)))  # a wait without a known call is charged alone
    fam, start, end = fam[rows], w["start"].to_numpy()[rows], w["end"].to_numpy()[rows]
    if len(key) and (key[1:] >= key[:-1]).all():  # in call order (the usual case): no sort
        new = np.r_[True, key[1:] != key[:-1]]
        first = np.flatnonzero(new)
        ukey, inv = key[first], np.cumsum(new) - 1
    else:
        ukey, first, inv = np.unique(key, return_index=True, return_inverse=True)
    del iv, key  # the client's working set at 200 M events: every row-long temporary counts
    nf = len(WAIT_FAMILIES)
    o = _lexsort((start, inv))  # the union of all waits of a call
    union = np.bincount(inv[o], weights=_union_per_key(inv[o], start[o], end[o]), minlength=len(ukey))
    o = _lexsort((start, fam, inv))  # the union of each family's waits of a call
    fk = inv[o] * nf + fam[o]  # (the same additions in the same order as np.add.at on the 2-D table)
    del inv, fam
    per_fam = np.bincount(fk, weights=_union_per_key(fk, start[o], end[o]), minlength=len(ukey) * nf)
    del fk, o, start, end
    charged = per_fam.reshape(len(ukey), nf)  # charged in place, column after column
    left = union.astype(np.float64)
    for i in range(nf):  # overlapping waits of one call go to the first family
        charged[:, i] = np.minimum(charged[:, i], np.maximum(left, 0.0))
        left -= charged[:, i]
    del left, union
    src = rows[first]
    keys = {c: w[c].to_numpy()[src].astype(np.int64) for c in ("vertex", "process", "thread")}
    wait = charged.sum(axis=1)
    groups = dense_groups(list(keys.values()), _DENSE_GROUPS) if per == "vertex" else None
    if groups is not None and not sorted_groups(groups[0]):  # pandas' group-by sum compiled: the same Kahan sums
        label, gk = groups
        sums = group_sums(label, np.column_stack([charged, wait]), len(gk[0]))
        cols_out = dict(zip(keys, gk, strict=True)) | {f: sums[:, i] for i, f in enumerate([*WAIT_FAMILIES, "wait"])}
        return pd.DataFrame(cols_out)[cols]
    out = pd.DataFrame({"interval": np.where(ukey >= 0, ukey, -1), **keys})
    for i, f in enumerate(WAIT_FAMILIES):
        out[f] = charged[:, i]
    out["wait"] = wait
    if per == "interval":
        return out[cols].sort_values(["process", "thread", "interval"], kind="stable").reset_index(drop=True)
    g = out.groupby(["vertex", "process", "thread"], sort=True)[[*WAIT_FAMILIES, "wait"]].sum().reset_index()
    return g[cols]


#: the waiting time charged to each call path or call instance (:func:`waiting_time`), computed once per PAG
WAITING_TIME = Analysis(
    "passes.waiting_time",
    compute=_waiting_time,
    settings=WaitingTimeSettings,
    uses=frozenset({"trace", "vertices"}),
    doc="idle waiting time charged to each call path (or call instance), per wait family",
)


def charge_waits(
    pag: PAG,
    vertex: np.ndarray,
    process: np.ndarray,
    exclusive: np.ndarray,
    *,
    thread: np.ndarray | None = None,
    wait_settings: WaitSettings | None = None,
) -> np.ndarray:
    """The waiting time of :func:`waiting_time` charged to rows of exclusive time (vertex, process, time).

    An MPI call whose time lies partly in sampled callees (the MPI library's
    functions below it) waits there too: the wait of (vertex, process) is
    taken from the exclusive time of that vertex first, then from its
    descendants on that process in proportion, and never exceeds their sum. Without callees a call's
    wait lands on its own row. Rows are one per (vertex, process) (threads
    summed), or with ``thread`` one per (vertex, process, thread): a wait is
    then taken from the time on the thread that waited only (a GPU kernel
    below the call that waited for it runs on another location). Returns the
    wait of each row; ``wait_settings`` are those of :func:`waiting_time`.
    """
    vertex = np.asarray(vertex, dtype=np.int64)
    process = np.asarray(process, dtype=np.int64)
    x = np.maximum(np.asarray(exclusive, dtype=np.float64), 0.0)
    out = np.zeros(len(x))
    wt = waiting_time(pag, wait_settings=wait_settings)
    wt = wt[wt["vertex"].to_numpy() >= 0]
    if not len(wt) or not len(x):
        return out
    if thread is not None:  # locations as the groups
        process = location_key(process, np.asarray(thread, dtype=np.int64))
        wt = wt.assign(process=location_key(wt["process"].to_numpy(), wt["thread"].to_numpy()))
    n = max(pag.n_vertices, 1)
    pre = np.asarray(pag.tree_index.preorder, dtype=np.int64)
    size = np.asarray(pag.tree_index.size, dtype=np.int64)
    procs = np.unique(process)
    row_key = np.searchsorted(procs, process) * n + pre[vertex]
    o = np.argsort(row_key, kind="stable")
    keys, xs = row_key[o], x[o]
    cum = np.r_[0.0, np.cumsum(xs)]
    per = wt.groupby(["vertex", "process"], sort=False)["wait"].sum()
    wv = per.index.get_level_values(0).to_numpy().astype(np.int64)
    wp = per.index.get_level_values(1).to_numpy().astype(np.int64)
    gi = np.searchsorted(procs, wp)
    ok = (gi < len(procs)) & (procs[np.minimum(gi, len(procs) - 1)] == wp)
    wv, gi, w = wv[ok], gi[ok], per.to_numpy()[ok]
    lo = np.searchsorted(keys, gi * n + pre[wv])  # the subtree of wv on that process: a run of rows
    hi = np.searchsorted(keys, gi * n + pre[wv] + size[wv])
    # the call's own row first (an OpenMP critical waits before its protected block runs), the rest from its
    # callees in proportion (an MPI call waiting inside sampled library functions)
    has_own = (lo < hi) & (keys[np.minimum(lo, len(keys) - 1)] == gi * n + pre[wv])
    own = np.where(has_own, xs[np.minimum(lo, len(xs) - 1)], 0.0)
    take = np.minimum(w, own)
    first = lo + has_own
    total = cum[hi] - cum[first]
    rest = w - take
    frac = np.where(total > 0, np.minimum(1.0, rest / np.where(total > 0, total, 1.0)), 0.0)
    diff = np.zeros(len(xs) + 1)
    np.add.at(diff, first, frac)
    np.add.at(diff, hi, -frac)
    charged = np.minimum(1.0, np.cumsum(diff)[:-1]) * xs
    np.add.at(charged, lo[has_own], take[has_own])
    out[o] = np.minimum(charged, xs)
    return out


def charged_per_process(pag: PAG, g: Grouped, metric: str, wait_settings: WaitSettings | None = None) -> np.ndarray:
    """:func:`charge_waits` per location, summed onto the rows of ``g`` (``metric`` grouped per process).

    The one way breakdown and critical path charge waits: a thread's wait
    comes out of that thread's time.
    """
    gl = grouped(pag, metric, "location")
    wl = charge_waits(
        pag, gl.vertex, gl.process[gl.group], gl.value, thread=gl.thread[gl.group], wait_settings=wait_settings
    )
    n_p = max(len(g.process), 1)
    key_g = g.vertex * n_p + g.group
    key_l = gl.vertex * n_p + np.searchsorted(g.process, gl.process[gl.group])
    return np.bincount(np.searchsorted(key_g, key_l), weights=wl, minlength=len(key_g))[: len(key_g)]
