"""The compiled kernel of the delay analysis (:mod:`perflow.trace.delays`, whose docstring has the formulas).

:func:`_kernel` walks the idle wait states from the last to the first and forms the short- and long-term
delay costs of each: the synchronisation interval on each side (:func:`_prev_point`), the exclusive time per
call path in it (:func:`perflow.trace.flat.window_sums`) less the waiting at the synchronisation points
inside it (:func:`_less_waiting`), and the costs in proportion to the delays.
"""

from __future__ import annotations

import numpy as np

from .flat import gallop, njit, window_sums

#: points searched back one by one for the last shared one before only group points (collectives) are tried
_MAXSTEP = 64


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
def _less_waiting(j0, j1, sp_wait, sp_vtx, inner, nvert, acc, mark, touched, nt):  # type: ignore[no-untyped-def]
    """Take the waiting at synchronisation points ``j0..j1-1`` off ``acc`` per call path (marking each
    touched one); return the new ``nt`` and the waiting taken.

    Waiting beyond the call's own time in the window is taken off the time spent off the CPU inside
    the call (``inner[v]``, its ``off_cpu`` child; -1 none): waiting while descheduled is waiting.
    """
    W = 0.0
    for j in range(j0, j1):
        if sp_wait[j] > 0.0:
            v = sp_vtx[j] if sp_vtx[j] >= 0 else nvert
            if not mark[v]:
                mark[v] = True
                touched[nt] = v
                nt += 1
            acc[v] -= sp_wait[j]
            W += sp_wait[j]
            u = inner[v]
            if u >= 0 and acc[v] < 0.0 and acc[u] > 0.0:  # (acc[u] > 0: already touched by the window sums)
                move = min(-acc[v], acc[u])
                acc[u] -= move
                acc[v] += move
    return nt, W


@njit
def _involves(sp_partner, sp_group, g_off, g_loc, j, other):  # type: ignore[no-untyped-def]
    p = sp_partner[j]
    if p >= 0:
        return p == other
    g = sp_group[j]
    if g < 0:
        return False
    k = _find_i64(g_loc, g_off[g], g_off[g + 1], other)
    return k < g_off[g + 1] and g_loc[k] == other


@njit
def _prev_point(sp_off, sp_t, sp_cls, sp_partner, sp_group, g_off, g_loc, last_grp, loc, other, t_end, cls, hint):  # type: ignore[no-untyped-def]
    """Index of ``loc``'s last point of class ``cls`` before ``t_end`` shared with ``other`` (-1 none), and
    the index of its first point at or after ``t_end`` (searched from ``hint[loc]``, which it updates)."""
    lo = sp_off[loc]
    end = gallop(sp_t, lo, sp_off[loc + 1], t_end, hint[loc], False)
    hint[loc] = end
    j = end - 1
    steps = 0
    while j >= lo:
        if sp_cls[j] == cls and (cls == 1 or _involves(sp_partner, sp_group, g_off, g_loc, j, other)):
            return j, end
        j -= 1
        steps += 1
        if steps >= _MAXSTEP:  # long runs of other points: from here on only group points (collectives)
            j = last_grp[j] if j >= lo else -1
            while j >= lo:
                if sp_cls[j] == cls and _involves(sp_partner, sp_group, g_off, g_loc, j, other):
                    return j, end
                j = last_grp[j - 1] if j - 1 >= lo else -1
            return -1, end
    return -1, end


@njit
def _kernel(  # type: ignore[no-untyped-def]
    order, w_loc, w_start, w_amount, w_cloc, w_ctime, w_kind, w_cls, w_cap, nkind,
    time, vertex, offsets, lstart, nvert,
    sp_off, sp_t, sp_rel, sp_wait, sp_vtx, sp_wid, sp_cls, sp_partner, sp_group, g_off, g_loc, last_grp,
    inner, long_term, file_first, acc, seen,
):  # fmt: skip
    """The delay costs of the waits ``order`` (see the module docstring), summed per key ``((delayer *
    (nvert + 1) + vertex) * nkind + kind) * 4 + flags`` (flags: 1 propagating, 2 long-term) into ``acc``
    (``seen``: keys met) when it has room for every key, else listed (key, cost) in the order met: the
    same sums either way (each key's costs added in that order)."""
    dense = acc.shape[0] > 0
    V = nvert + 1
    nw = order.shape[0]
    pos = np.full(w_loc.shape[0], -1, np.int64)  # -1: a wait not analysed (what reaches it is lost)
    for q in range(nw):
        pos[order[q]] = q
    carried = np.zeros((w_loc.shape[0] if long_term else 1, nkind), np.float64)
    accS = np.zeros(nvert + 1, np.float64)
    accR = np.zeros(nvert + 1, np.float64)
    mark = np.zeros(nvert + 1, np.bool_)
    touched = np.empty(nvert + 1, np.int64)
    cap = 1024
    o_key = np.empty(cap if not dense else 0, np.int64)
    o_c = np.empty(cap if not dense else 0, np.float64)
    n = 0
    unattributed = 0.0
    lost = 0.0
    # search cursors per location (the waits come in time order, last first: each search starts near)
    f_hint = offsets[:-1].copy()
    sp_hint = sp_off[:-1].copy()
    # the delayer's window sums of the last wait (the waits of one collective share them): reused as they are
    c_v = np.empty(nvert + 1, np.int64)
    c_a = np.empty(nvert + 1, np.float64)
    cS, caS, cY, cn = -1, 0.0, 0.0, 0
    for q in range(nw):
        w = order[q]
        R = w_loc[w]
        S = w_cloc[w]
        X = w_start[w]
        Y = w_ctime[w]
        k = w_kind[w]
        cls = w_cls[w]
        if cls == 2:  # an idle worker: the master from the join before the stretch to the fork after it
            aS = X
            jS0 = gallop(sp_t, sp_off[S], sp_off[S + 1], X, sp_hint[S], False)
            jS1 = gallop(sp_t, jS0, sp_off[S + 1], Y, jS0, False)
            aR = X
            bR = X
            jR0 = 0
            jR1 = 0
        else:
            pR, jR1 = _prev_point(
                sp_off, sp_t, sp_cls, sp_partner, sp_group, g_off, g_loc, last_grp, R, S, X, cls, sp_hint
            )
            pS, jS1 = _prev_point(
                sp_off, sp_t, sp_cls, sp_partner, sp_group, g_off, g_loc, last_grp, S, R, Y, cls, sp_hint
            )
            aR = sp_rel[pR] if pR >= 0 else lstart[R]
            aS = sp_rel[pS] if pS >= 0 else lstart[S]
            jR0 = pR + 1 if pR >= 0 else sp_off[R]
            jS0 = pS + 1 if pS >= 0 else sp_off[S]
            bR = X
        nt = 0
        if S == cS and aS == caS and Y == cY:  # the delayer's window of the wait before (a collective's)
            for t in range(cn):
                v = c_v[t]
                touched[t] = v
                mark[v] = True
                accS[v] = c_a[t]
            nt = cn
        else:
            nt = window_sums(time, vertex, offsets, S, aS, Y, 1.0, nvert, accS, mark, touched, nt, f_hint)
            cS, caS, cY, cn = S, aS, Y, nt
            for t in range(nt):
                c_v[t] = touched[t]
                c_a[t] = accS[touched[t]]
        nt = window_sums(time, vertex, offsets, R, aR, bR, 1.0, nvert, accR, mark, touched, nt, f_hint)
        # waiting at the delayer's (and the waiter's) points inside its interval is no work
        nt, W = _less_waiting(jS0, jS1, sp_wait, sp_vtx, inner, nvert, accS, mark, touched, nt)
        nt, _ = _less_waiting(jR0, jR1, sp_wait, sp_vtx, inner, nvert, accR, mark, touched, nt)
        D = 0.0
        for t in range(nt):
            v = touched[t]
            d = max(accS[v], 0.0) - max(accR[v], 0.0)
            if d > 0.0:
                D += d
        A = w_amount[w]
        denom = D + W
        inflow = 0.0
        if long_term:
            for K in range(nkind):
                inflow += carried[w, K]
        if denom <= 0.0 or A + inflow <= 0.0:
            unattributed += A + inflow
        else:
            scale = A / denom
            if w_cap[w] and scale > 1.0:
                unattributed += A - denom
                scale = 1.0
            for t in range(nt):
                v = touched[t]
                d = max(accS[v], 0.0) - max(accR[v], 0.0)
                if d <= 0.0:
                    continue
                for K in range(-1, nkind if long_term else 0):
                    c = scale * d if K < 0 else carried[w, K] / denom * d
                    if c <= 0.0:
                        continue
                    key = ((S * V + v) * nkind + (k if (K < 0 or file_first) else K)) * 4 + (0 if K < 0 else 2)
                    if dense:
                        acc[key] += c
                        seen[key] = True
                        continue
                    if n == cap:
                        cap *= 2
                        o_key, o_c = _grow(o_key, o_c, n, cap)
                    o_key[n] = key
                    o_c[n] = c
                    n += 1
            for j in range(jS0, jS1):  # the propagating shares
                wj = sp_wait[j]
                if wj <= 0.0:
                    continue
                if not long_term:
                    key = ((S * V + (sp_vtx[j] if sp_vtx[j] >= 0 else nvert)) * nkind + k) * 4 + 1
                    if dense:
                        acc[key] += scale * wj
                        seen[key] = True
                        continue
                    if n == cap:
                        cap *= 2
                        o_key, o_c = _grow(o_key, o_c, n, cap)
                    o_key[n] = key
                    o_c[n] = scale * wj
                    n += 1
                    continue
                target = sp_wid[j]
                ok = target >= 0 and pos[target] > q
                if ok:
                    carried[target, k] += scale * wj
                else:
                    lost += scale * wj
                for K in range(nkind):
                    c = carried[w, K] / denom * wj
                    if ok:
                        carried[target, K] += c
                    else:
                        lost += c
        for t in range(nt):
            v = touched[t]
            accS[v] = 0.0
            accR[v] = 0.0
            mark[v] = False
    return o_key[:n], o_c[:n], unattributed, lost


@njit
def _grow(o_key, o_c, n, cap):  # type: ignore[no-untyped-def]
    a1 = np.empty(cap, np.int64)
    a2 = np.empty(cap, np.float64)
    a1[:n] = o_key[:n]
    a2[:n] = o_c[:n]
    return a1, a2
