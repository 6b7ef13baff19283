"""Root causes of wait states: delay costs per call path, after Scalasca's delay analysis.

For a wait state of ``A`` seconds on location ``R`` (the waiter) caused by
location ``S`` (the delayer: the late sender, the last process to reach a
collective, the last thread at an OpenMP barrier, the master thread of idle
worker threads, ...):

1. the *synchronisation interval* on each side runs from the last
   synchronisation point (:mod:`perflow.trace.syncpoints`: a message that made
   someone wait, a synchronising collective, an OpenMP barrier or fork) that
   location shared with the other before the wait -- from that point's
   *release*, the part of its call after the synchronisation let it go -- or
   from the start of the location when there is none, to where ``R`` starts to
   wait and where ``S`` enters the call that releases ``R`` (``cause_time``).
   MPI wait states look for MPI points shared with the partner, OpenMP ones
   for the thread's previous OpenMP point; an idle worker thread's interval is
   empty and its master's runs from the join before the stretch (or its
   start) to the fork that ends it;
2. the *delay* of call path ``c`` is ``d(c) = max(0, N_S(c) - N_R(c))``,
   ``N_X(c)`` being ``c``'s exclusive time on ``X`` within the interval minus
   the waiting time of the synchronisation points inside it; ``W`` is the
   waiting time of ``S``'s synchronisation points inside its interval;
3. the **short-term cost** of ``c`` is ``A * d(c) / (D + W)`` with
   ``D = sum d`` (for Late Sender and Late Receiver at most ``d(c)``: a wait
   longer than ``D + W`` leaves the rest unattributed); the share
   ``A * W / (D + W)`` is *propagating*: it is due to ``S``'s own waiting
   (reported per call path where ``S`` waited, short-term);
4. with **long-term** costs, waits are handled from the last to the first and
   each propagating share flows to the wait states of ``S``'s synchronisation
   points inside the interval, in proportion to their waiting time; a wait
   state that received ``C`` this way charges ``C * d(c) / (D + W)`` of it as
   long-term cost to its own delays and passes ``C * W / (D + W)`` on, so all
   waiting time ends up on the call paths that did the extra work. A long-term
   cost is filed under the kind of the wait state it finally causes (the
   first of the chain, going back: ``long_term_kind="caused"``, Scalasca's
   rule) or under the kind of the wait state whose delays it lands on
   (``"first"``, the first wait of the chain in time).

Waits without any delay or waiting on the delayer (``D + W = 0``) stay
unattributed. MPI_Finalize's wait is a synchronisation point but is not
analysed itself (as in Scalasca); lock contention, Early Scan and RMA waits
are analysed but are no synchronisation points, so that the time they wait
counts as work in other intervals (as in Scalasca, which analyses them not).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..pag.instances import Trace
from .delaykernels import _kernel
from .flat import FlatTimeline, Locations, flat_timeline, locations
from .syncpoints import LS_KINDS, SyncPoints, sync_points
from .waits import IDLE_KINDS

__all__ = [
    "DelayResult",
    "delay_costs",
    "off_cpu_children",
    "sum_partials",
    "cost_frame",
    "LONG_TERM_KINDS",
    "NOT_ANALYSED",
]


@dataclass(frozen=True)
class DelayResult:
    """Delay costs aggregated per (delaying location, call path, wait kind, propagating).

    Attributes
    ----------
    costs : pandas.DataFrame
        ``process``, ``thread`` (the delayer), ``vertex`` (-1 outside every
        region), ``wait_kind``, ``propagating`` (bool: a short-term share due
        to the delayer's own waiting, on the call path where it waited),
        ``long_term`` (bool: a cost carried from a later wait state), ``cost`` (s).
    total_wait : float
        Waiting time analysed.
    unattributed : float
        Waiting time without any positive delay.
    lost : float
        Long-term share that could not be passed on (ties in time order).
    """

    costs: pd.DataFrame
    total_wait: float
    unattributed: float
    lost: float


def off_cpu_children(parent: np.ndarray, off_cpu: np.ndarray) -> np.ndarray:
    """Per vertex, its child that is time off the CPU (``off_cpu``: a mask per vertex), -1 when none."""
    out = np.full(len(parent), -1, np.int64)
    kids = np.flatnonzero(np.asarray(off_cpu, dtype=bool) & (np.asarray(parent) >= 0))
    out[np.asarray(parent)[kids]] = kids
    return out


#: idle kinds the delay analysis leaves out: MPI_Finalize's wait (a synchronisation point, but no delay metric)
NOT_ANALYSED = ("finalize_wait",)
#: kinds whose short-term cost is at most the delay found (Scalasca caps Late Sender and Late Receiver costs)
_CAPPED = (*LS_KINDS, "late_receiver")
_OMP = ("omp_barrier_wait", "omp_ibarrier_wait", "lock_contention_critical", "lock_contention_api")


def _kind_codes(kind: pd.Series) -> tuple[np.ndarray, list[str]]:
    """The codes and categories of a wait table's ``kind`` column (categorical; text made categorical)."""
    cat = kind.array if isinstance(kind.dtype, pd.CategoricalDtype) else pd.Categorical(kind.astype(str))
    return np.asarray(cat.codes, dtype=np.int64), [str(c) for c in cat.categories]


#: keys (delayer, vertex, kind, flags) up to which the kernel sums the costs in place
_DENSE_KEYS = 1 << 22
#: values of the ``long_term_kind`` setting
LONG_TERM_KINDS = ("caused", "first")


def delay_costs(
    trace: Trace,
    waits: pd.DataFrame,
    n_vertices: int,
    *,
    long_term: bool = False,
    long_term_kind: str = "caused",
    locs: Locations | None = None,
    flat: FlatTimeline | None = None,
    roles: np.ndarray | None = None,
    regions: np.ndarray | None = None,
    off_cpu: np.ndarray | None = None,
    sync: SyncPoints | None = None,
) -> DelayResult:
    """Delay costs of the idle wait states in ``waits`` (a wait-state instance table of ``trace``).

    ``locs`` and ``flat`` are ``locations(trace)`` and ``flat_timeline(trace)``, when already at hand;
    ``roles`` and ``regions`` (region role and region id of each vertex) enable the OpenMP
    synchronisation points. ``off_cpu`` (per vertex, the vertex of the time off the CPU below it,
    -1 none: :func:`off_cpu_children`) makes time a delayer spent off the CPU inside a waiting
    call count as that waiting, not as work. ``long_term_kind`` files long-term costs under the kind of the wait they
    finally cause ("caused") or of the wait they land on ("first"; see the module docstring). ``sync`` is
    ``sync_points(trace, waits, locs, roles, regions)`` when already at hand (a PAG caches it: ``SYNC_POINTS``).
    """
    if long_term_kind not in LONG_TERM_KINDS:
        raise ValueError(f"long_term_kind must be one of {LONG_TERM_KINDS}, not {long_term_kind!r}")
    locs = locs if locs is not None else locations(trace)
    flat = flat if flat is not None else flat_timeline(trace, locs)
    L = len(locs)
    kinds = [k for k in IDLE_KINDS if k not in NOT_ANALYSED]
    # the kinds by their categorical codes (never as strings), the columns as arrays of the idle rows only
    kcodes, kcats = _kind_codes(waits["kind"])
    to_k = np.array([kinds.index(c) if c in kinds else -1 for c in kcats], dtype=np.int64)
    idle_rows = np.flatnonzero((kcodes >= 0) & (to_k[np.maximum(kcodes, 0)] >= 0)) if len(to_k) else kcodes[:0]
    col = lambda c: waits[c].to_numpy()[idle_rows]  # noqa: E731
    w_loc = locs.lookup(col("process"), col("thread"))
    w_cloc = locs.lookup(col("cause_process"), col("cause_thread"))
    w_kind = to_k[kcodes[idle_rows]]
    cls_of = np.array([2 if k == "omp_idle" else 1 if k in _OMP else 0 for k in kinds], dtype=np.int64)
    w_cls = cls_of[w_kind]
    w_cap = np.isin(np.array(kinds, dtype=object), _CAPPED)[w_kind]
    sel = np.flatnonzero((w_loc >= 0) & (w_cloc >= 0) & (w_cloc != w_loc))
    tau = col("end")
    start = col("start")
    amount = col("amount")
    order = sel[np.lexsort((-start[sel], -tau[sel]))]  # last wait first
    sp = sync if sync is not None else sync_points(trace, waits, locs, roles, regions)
    inner = np.full(int(n_vertices) + 1, -1, np.int64)  # the last slot: time outside every region
    if off_cpu is not None:
        inner[: int(n_vertices)] = off_cpu
    to_idle = np.full(len(waits), -1, dtype=np.int64)
    to_idle[idle_rows] = np.arange(len(idle_rows))
    sp_wid = np.where(sp.wid >= 0, to_idle[np.maximum(sp.wid, 0)], -1) if len(sp.wid) else sp.wid
    is_grp = sp.group >= 0
    last_grp = np.where(is_grp, np.arange(len(is_grp)), -1)
    if len(last_grp):  # per point: the last group point at or before it (on its location; -1 none)
        last_grp = np.maximum.accumulate(last_grp)
        loc_of = np.repeat(np.arange(L), np.diff(sp.offsets))
        first_of_loc = sp.offsets[loc_of]
        last_grp = np.where(last_grp >= first_of_loc, last_grp, -1)
    V = int(n_vertices) + 1
    K = len(kinds)
    R = L * V * K * 4  # keys (delayer, vertex, kind, flags): summed in the kernel when few enough
    dense = R <= _DENSE_KEYS
    acc, seen = np.zeros(R if dense else 0), np.zeros(R if dense else 0, dtype=bool)
    o_key, o_c, unattributed, lost = _kernel(
        order.astype(np.int64, copy=False),
        w_loc.astype(np.int64, copy=False),
        start.astype(np.float64, copy=False),
        amount.astype(np.float64, copy=False),
        w_cloc.astype(np.int64, copy=False),
        col("cause_time").astype(np.float64, copy=False),
        w_kind,
        w_cls,
        w_cap,
        len(kinds),
        flat.time,
        flat.vertex,
        flat.offsets,
        flat.start(),
        int(n_vertices),
        sp.offsets,
        sp.time,
        sp.release,
        sp.wait,
        sp.vertex,
        sp_wid.astype(np.int64, copy=False),
        sp.cls,
        sp.partner,
        sp.group,
        sp.group_off,
        sp.group_loc,
        last_grp.astype(np.int64, copy=False),
        inner,
        bool(long_term),
        long_term_kind == "first",
        acc,
        seen,
    )
    uk, cost = (np.flatnonzero(seen), acc[seen]) if dense else sum_partials([o_key], [o_c])
    costs = cost_frame(uk, cost, locs.process, locs.thread, int(n_vertices), kinds)
    return DelayResult(costs, float(amount[sel].sum()), float(unattributed), float(lost))


def sum_partials(keys: list[np.ndarray], costs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The sum per key of listed (key, cost) partials (the kernel's, or several partitions'), keys sorted.

    Each key's costs are added in the order listed, starting from 0, as the kernel's in-place sums add
    them: a key listed by one part only (a delayer's costs are formed where it lives) sums bit for bit
    as the whole trace's kernel does."""
    k = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    c = np.concatenate(costs) if costs else np.zeros(0)
    uk, inv = np.unique(k, return_inverse=True)
    return uk, np.bincount(inv.ravel(), weights=c, minlength=len(uk))


def cost_frame(
    uk: np.ndarray, cost: np.ndarray, process: np.ndarray, thread: np.ndarray, n_vertices: int, kinds: list[str]
) -> pd.DataFrame:
    """:attr:`DelayResult.costs` of the kernel's keys ``uk`` (sorted) and their costs; ``process`` and
    ``thread`` of each location number the keys use."""
    K, V = len(kinds), n_vertices + 1
    flag = uk % 4
    kk = (uk // 4) % K
    vv = (uk // 4 // K) % V
    ll = uk // 4 // K // V
    return pd.DataFrame(
        {
            "process": process[ll].astype(np.int32),
            "thread": thread[ll].astype(np.int32),
            "vertex": np.where(vv >= n_vertices, -1, vv).astype(np.int64),
            "wait_kind": pd.Categorical.from_codes(kk.astype(np.int32), categories=kinds),
            "propagating": (flag & 1).astype(bool),
            "long_term": (flag & 2).astype(bool),
            "cost": cost,
        }
    )
