"""Root causes of wait states: delay costs per call path, after Scalasca's delay analysis.

For a wait state of ``A`` seconds on location ``R`` (the waiter) caused by
location ``S`` (the delayer: the late sender, the last process to reach a
collective, ...):

1. the *synchronisation interval* starts at the previous synchronisation
   point ``R`` and ``S`` share -- the latest message exchanged between them
   (its send-call leave on the sender, its receive-completion leave on the
   receiver) or collective instance both took part in (their leaves), that
   lies before the wait on both sides -- or at the start of each location
   when there is none (the search looks back a bounded number of steps; when it
   finds nothing, each side's own last collective bounds its interval, which keeps
   the cost linear); it ends where ``R`` starts to wait and where ``S``
   enters the call that releases ``R`` (``cause_time``);
2. the *delay* of call path ``c`` is ``d(c) = max(0, N_S(c) - N_R(c))``,
   ``N_X(c)`` being ``c``'s exclusive time on ``X`` within the interval minus
   the waiting time charged to ``c`` there; waiting time that ``S`` spent
   itself gives the *propagating* delay ``d_W(c) = max(0, W_S(c) - W_R(c))``;
3. the wait is scaled onto the delays: the **short-term cost** of ``c`` is
   ``A * d(c) / D`` and its propagating cost ``A * d_W(c) / D`` with
   ``D = sum d + sum d_W`` (so the costs of one wait add up to ``A``);
4. with **long-term** costs, waits are handled from the last to the first:
   the propagating share ``(A + inflow) * sum d_W / D`` is passed on to the
   wait states of ``S`` inside the interval (in proportion to their time
   there), whose own costs then carry it further back, so all waiting time
   ends up on the call paths that really did the extra work.

Waits without any positive delay (``D = 0``) stay unattributed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..kinds import CollectiveOp
from ..pag.instances import Trace
from .flat import FlatTimeline, Locations, flat_timeline, locations, njit, window_sums
from .waits import IDLE_KINDS

__all__ = ["DelayResult", "delay_costs"]

_MAXSTEP = 64


@dataclass(frozen=True)
class DelayResult:
    """Delay costs aggregated per (delaying location, call path, wait kind, propagating).

    Attributes
    ----------
    costs : pandas.DataFrame
        ``process``, ``thread`` (the delayer), ``vertex`` (-1 outside every
        region), ``wait_kind``, ``propagating`` (bool), ``cost`` (s).
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


@njit
def _last_le(a, lo, hi, x):  # type: ignore[no-untyped-def]
    """Last index in a[lo:hi] with a[i] <= x, or lo - 1."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@njit
def _find_i64(a, lo, hi, x):  # type: ignore[no-untyped-def]
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit
def _kernel(  # type: ignore[no-untyped-def]
    order,
    w_loc,
    w_start,
    w_amount,
    w_cloc,
    w_ctime,
    w_kind,
    time,
    vertex,
    offsets,
    lstart,
    nvert,
    nloc,
    mkey,
    mta,
    mtb,
    co,
    c_leave,
    c_inst,
    io,
    i_loc,
    i_leave,
    wo,
    ws_start,
    ws_end,
    ws_vertex,
    ws_id,
    long_term,
):
    nw = order.shape[0]
    # processing order of the analysed waits; -1 for the others (no known cause on another location),
    # which take no inflow: a long-term share passed to one of them is lost, not left uncounted
    pos = np.full(w_loc.shape[0], -1, np.int64)
    for q in range(nw):
        pos[order[q]] = q
    inflow = np.zeros(w_loc.shape[0], np.float64)
    accN = np.zeros(nvert + 1, np.float64)
    accW = np.zeros(nvert + 1, np.float64)
    mark = np.zeros(nvert + 1, np.bool_)
    touched = np.empty(nvert + 1, np.int64)
    cap = 1024
    o_w = np.empty(cap, np.int64)
    o_v = np.empty(cap, np.int64)
    o_c = np.empty(cap, np.float64)
    o_p = np.empty(cap, np.bool_)
    n = 0
    unattributed = 0.0
    lost = 0.0
    for q in range(nw):
        w = order[q]
        R = w_loc[w]
        S = w_cloc[w]
        X = w_start[w]
        Y = w_ctime[w]
        sR = lstart[R]
        sS = lstart[S]
        best = -np.inf
        # previous message between R and S before the wait on both sides
        key = R * nloc + S
        g0 = _find_i64(mkey, 0, mkey.shape[0], key)
        g1 = _find_i64(mkey, g0, mkey.shape[0], key + 1)
        j = _last_le(mta, g0, g1, X)
        steps = 0
        while j >= g0 and mtb[j] > Y and steps < _MAXSTEP:
            j -= 1
            steps += 1
        if j >= g0 and mtb[j] <= Y:
            best = mta[j]
            sR = max(sR, mta[j])
            sS = max(sS, mtb[j])
        # previous collective both took part in
        j = _last_le(c_leave, co[R], co[R + 1], X)
        steps = 0
        while j >= co[R] and steps < _MAXSTEP:
            inst = c_inst[j]
            k = _find_i64(i_loc, io[inst], io[inst + 1], S)
            if k < io[inst + 1] and i_loc[k] == S and i_leave[k] <= Y:
                if c_leave[j] > best:
                    best = c_leave[j]
                    sR = max(lstart[R], c_leave[j])
                    sS = max(lstart[S], i_leave[k])
                break
            j -= 1
            steps += 1
        if best == -np.inf:
            # nothing shared found within the search budget: each side's own last collective bounds
            # its interval (keeps the cost linear; exact whenever the two do share one)
            j = _last_le(c_leave, co[R], co[R + 1], X)
            if j >= co[R]:
                sR = max(sR, c_leave[j])
            j = _last_le(c_leave, co[S], co[S + 1], Y)
            if j >= co[S]:
                sS = max(sS, c_leave[j])
        total = w_amount[w] + inflow[w]
        # exclusive time in the windows
        nt = 0
        nt = window_sums(time, vertex, offsets, S, sS, Y, 1.0, nvert, accN, mark, touched, nt)
        nt = window_sums(time, vertex, offsets, R, sR, X, -1.0, nvert, accN, mark, touched, nt)
        # waiting time in the windows (taken out of the exclusive time)
        sumov = 0.0
        for side in range(2):
            loc = S if side == 0 else R
            a = sS if side == 0 else sR
            b = Y if side == 0 else X
            sign = 1.0 if side == 0 else -1.0
            i = _last_le(ws_start, wo[loc], wo[loc + 1], a)
            if i < wo[loc]:
                i = wo[loc]
            while i < wo[loc + 1] and ws_start[i] < b:
                s = max(ws_start[i], a)
                e = min(ws_end[i], b)
                if e > s and ws_id[i] != w:
                    v = ws_vertex[i]
                    if v < 0:
                        v = nvert
                    if not mark[v]:
                        mark[v] = True
                        touched[nt] = v
                        nt += 1
                    accW[v] += sign * (e - s)
                    # the waiting period leaves the exclusive time of what the timeline shows then: the
                    # waiting call, or its callees (time off the CPU inside it, sampled library functions)
                    nt = window_sums(time, vertex, offsets, loc, s, e, -sign, nvert, accN, mark, touched, nt)
                    if side == 0:
                        sumov += e - s
                i += 1
        D = 0.0
        DW = 0.0
        for t in range(nt):
            v = touched[t]
            if accN[v] > 0:
                D += accN[v]
            if accW[v] > 0:
                DW += accW[v]
        if D + DW <= 0.0 or total <= 0.0:
            unattributed += total
        else:
            scale = total / (D + DW)
            for t in range(nt):
                v = touched[t]
                for prop in range(2):
                    val = accN[v] if prop == 0 else accW[v]
                    if val <= 0.0 or (prop == 1 and long_term):
                        continue
                    if n == cap:
                        cap *= 2
                        a1 = np.empty(cap, np.int64)
                        a2 = np.empty(cap, np.int64)
                        a3 = np.empty(cap, np.float64)
                        a4 = np.empty(cap, np.bool_)
                        a1[:n] = o_w[:n]
                        a2[:n] = o_v[:n]
                        a3[:n] = o_c[:n]
                        a4[:n] = o_p[:n]
                        o_w, o_v, o_c, o_p = a1, a2, a3, a4
                    o_w[n] = w
                    o_v[n] = v
                    o_c[n] = val * scale
                    o_p[n] = prop == 1
                    n += 1
            if long_term and DW > 0.0:
                share = DW * scale
                if sumov <= 0.0:
                    lost += share
                else:
                    i = _last_le(ws_start, wo[S], wo[S + 1], sS)
                    if i < wo[S]:
                        i = wo[S]
                    while i < wo[S + 1] and ws_start[i] < Y:
                        s = max(ws_start[i], sS)
                        e = min(ws_end[i], Y)
                        if e > s and ws_id[i] != w:
                            part = share * (e - s) / sumov
                            if pos[ws_id[i]] > q:
                                inflow[ws_id[i]] += part
                            else:
                                lost += part
                        i += 1
        for t in range(nt):
            v = touched[t]
            accN[v] = 0.0
            accW[v] = 0.0
            mark[v] = False
    return o_w[:n], o_v[:n], o_c[:n], o_p[:n], unattributed, lost


def _offsets(sorted_keys: np.ndarray, n: int) -> np.ndarray:
    return np.searchsorted(sorted_keys, np.arange(n + 1)).astype(np.int64)


def delay_costs(
    trace: Trace,
    waits: pd.DataFrame,
    n_vertices: int,
    *,
    long_term: bool = False,
    locs: Locations | None = None,
    flat: FlatTimeline | None = None,
) -> DelayResult:
    """Delay costs of the idle wait states in ``waits`` (a wait-state instance table of ``trace``).

    ``locs`` and ``flat`` are ``locations(trace)`` and ``flat_timeline(trace)``, when already at hand.
    """
    locs = locs if locs is not None else locations(trace)
    flat = flat if flat is not None else flat_timeline(trace, locs)
    L = len(locs)
    iv = trace.intervals
    leave = iv["leave"].to_numpy()
    idle = waits[waits["kind"].isin(IDLE_KINDS).to_numpy()]
    w_loc = locs.lookup(idle["process"].to_numpy(), idle["thread"].to_numpy())
    w_cloc = locs.lookup(idle["cause_process"].to_numpy(), idle["cause_thread"].to_numpy())
    kinds = list(IDLE_KINDS)
    w_kind = pd.Categorical(idle["kind"].astype(str), categories=kinds).codes.astype(np.int64)
    # all idle waits, per location, for the waiting-time part of each window
    ok_all = w_loc >= 0
    ids = np.flatnonzero(ok_all)
    ws_order = ids[np.lexsort((idle["start"].to_numpy()[ids], w_loc[ids]))]
    ws_loc = w_loc[ws_order]
    # the waits analysed: with a known cause on another location
    sel = np.flatnonzero(ok_all & (w_cloc >= 0) & (w_cloc != w_loc))
    tau = idle["end"].to_numpy()
    start = idle["start"].to_numpy()
    order = sel[np.lexsort((-start[sel], -tau[sel]))]  # last wait first
    # messages as synchronisation points
    m = trace.messages
    si = m["send_interval"].to_numpy().astype(np.int64)
    ri = m["recv_interval"].to_numpy().astype(np.int64)
    mok = (si >= 0) & (ri >= 0) & ~m["clock_violation"].to_numpy().astype(bool)
    sl = locs.of_interval[si[mok]] if L else np.zeros(0, np.int64)
    rl = locs.of_interval[ri[mok]] if L else np.zeros(0, np.int64)
    ts, tr = leave[si[mok]], leave[ri[mok]]
    ma, mb = np.r_[sl, rl], np.r_[rl, sl]
    mta, mtb = np.r_[ts, tr], np.r_[tr, ts]
    mkey = ma * max(L, 1) + mb
    mo = np.lexsort((mta, mkey))
    # synchronising collectives
    c = trace.collectives
    cint = c["interval"].to_numpy().astype(np.int64)
    cl = locs.lookup(c["process"].to_numpy(), c["thread"].to_numpy())
    cleave = np.where(cint >= 0, leave[np.maximum(cint, 0)], c["end"].to_numpy())
    inst = c["instance"].to_numpy().astype(np.int64)
    op = c["op"].to_numpy()
    barrier = np.isin(op, [CollectiveOp.BARRIER, CollectiveOp.INIT, CollectiveOp.FINALIZE])
    n_inst = int(inst.max()) + 1 if len(inst) else 0
    moved = np.bincount(
        inst, weights=(c["sent"].to_numpy() + c["received"].to_numpy()).astype(np.float64), minlength=n_inst
    )
    csync = (cl >= 0) & (barrier | (moved[inst] > 0 if len(inst) else barrier))
    cr = np.flatnonzero(csync)
    by_loc = cr[np.lexsort((cleave[cr], cl[cr]))]
    by_inst = cr[np.lexsort((cl[cr], inst[cr]))]
    o_w, o_v, o_c, o_p, unattributed, lost = _kernel(
        order.astype(np.int64),
        w_loc.astype(np.int64),
        start.astype(np.float64),
        idle["amount"].to_numpy().astype(np.float64),
        w_cloc.astype(np.int64),
        idle["cause_time"].to_numpy().astype(np.float64),
        w_kind,
        flat.time,
        flat.vertex,
        flat.offsets,
        flat.start(),
        int(n_vertices),
        int(L),
        mkey[mo].astype(np.int64),
        mta[mo].astype(np.float64),
        mtb[mo].astype(np.float64),
        _offsets(cl[by_loc], L),
        cleave[by_loc].astype(np.float64),
        inst[by_loc],
        _offsets(inst[by_inst], n_inst),
        cl[by_inst].astype(np.int64),
        cleave[by_inst].astype(np.float64),
        _offsets(ws_loc, L),
        start[ws_order].astype(np.float64),
        tau[ws_order].astype(np.float64),
        idle["vertex"].to_numpy().astype(np.int64)[ws_order],
        ws_order.astype(np.int64),
        bool(long_term),
    )
    dloc = w_cloc[o_w]
    V = int(n_vertices) + 1
    K = len(kinds)
    key = ((dloc * V + o_v) * K + w_kind[o_w]) * 2 + o_p.astype(np.int64)
    uk, inv = np.unique(key, return_inverse=True)
    cost = np.bincount(inv, weights=o_c, minlength=len(uk))
    prop = (uk % 2).astype(bool)
    kk = (uk // 2) % K
    vv = (uk // 2 // K) % V
    ll = uk // 2 // K // V
    costs = pd.DataFrame(
        {
            "process": locs.process[ll].astype(np.int32),
            "thread": locs.thread[ll].astype(np.int32),
            "vertex": np.where(vv >= n_vertices, -1, vv).astype(np.int64),
            "wait_kind": pd.Categorical.from_codes(kk.astype(np.int32), categories=kinds),
            "propagating": prop,
            "cost": cost,
        }
    )
    return DelayResult(costs, float(idle["amount"].to_numpy()[sel].sum()), float(unattributed), float(lost))
