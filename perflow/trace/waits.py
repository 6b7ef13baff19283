"""Wait-state instances of a trace: point-to-point, collective and thread, after Scalasca.

:func:`wait_instances` returns one row per wait-state instance with the
columns of :data:`WAIT_COLUMNS`. Notation: ``E``/``L`` are the enter/leave
times of the MPI call (region instance) involved; ``s``/``r`` mark the sender
and receiver.

Point to point (:func:`p2p_waits`)
    * ``late_sender``: the receive waits for a send that starts late,
      ``max(0, min(Es, Lr) - Er)``, charged to the call that completes the
      receive (MPI_Recv, MPI_Wait*). A call completing several messages (a
      Waitall) takes the maximum over them, charged once; a completion in an
      MPI_Test* is not a wait.
    * ``late_sender_wrong_order_same`` / ``..._diff``: Late Sender instances
      whose message was received before one sent earlier (by the same or a
      different source): the last ``window`` Late Sender instances of each
      receiving location are kept, and when a later receive takes a message
      sent earlier than a kept one, that one moves here.
    * ``late_sender_completion``: after a Late Sender, the time the receive
      still needs once the send call has left, ``max(0, Lr - Ls)``.
    * ``late_receiver``: a send waits for the receive to be posted,
      ``Erq - Esc`` when ``Lsc > Erq`` (``sc`` the call completing the send,
      ``rq`` the call posting the receive), charged to the sender; which
      sends qualify is the ``late_receiver`` setting
      (:func:`perflow.pag.edges.late_receiver_sends`; by default every send
      completed in a blocking call, as Scalasca counts it). A call completing
      several sends takes the maximum over them, charged once.
    * A call that both receives and sends (MPI_Sendrecv, a Waitall over
      receives and sends) waits for both partners from its enter at once:
      its waits are a partition of its time. Late Sender comes first,
      ``[E, E + ls]``; Late Receiver takes the rest, ``[E + ls, E + lr]``
      when ``lr > ls`` (none otherwise); the completion follows both,
      ``[max(Ls, E + lr), L]``. No two wait states of one call overlap and
      their sum never exceeds the call's duration.

Collectives (:func:`perflow.trace.collwaits.collective_waits`), per participant ``i`` of an instance
    * ``wait_barrier`` / ``wait_nxn`` (barriers incl. MPI_Init/Finalize, and
      all-to-all data collectives): ``max(0, min(max_j E_j, L_i) - E_i)``;
    * ``barrier_completion`` / ``nxn_completion``:
      ``max(0, L_i - max(min_j L_j, min(max_j E_j, L_i)))``;
    * ``late_broadcast`` (1-to-N: Bcast, Scatter): non-roots wait for the
      root, ``max(0, min(E_root, L_i) - E_i)``;
    * ``early_reduce`` (N-to-1: Reduce, Gather): the root waits for the
      latest sender, ``max(0, min(max_{j != root} E_j, L_root) - E_root)``;
    * ``early_scan`` (Scan, Exscan): rank ``k`` waits for ranks ``0..k-1``,
      ``max(0, min(max_{j<k} E_j, L_k) - E_k)``.

Threads (:mod:`perflow.trace.threadwaits`): ``omp_barrier_wait`` /
``omp_ibarrier_wait`` (explicit / implicit OpenMP barriers),
``lock_contention_critical`` / ``lock_contention_api``.

RMA (:mod:`perflow.trace.rmawaits`): ``rma_wait_at_fence`` / ``_create`` /
``_free``, ``rma_late_post``, ``rma_early_wait``.

A data collective that moves zero bytes is no synchronisation point; a
barrier always is. Messages violating the clock condition are excluded and
counted (``attrs["clock_violations"]`` of the table).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from ..pag.edges import group_by_call, late_receiver_sends, message_late_sender, test_calls
from ..pag.instances import Trace
from . import collwaits, rmawaits, threadwaits
from .flat import Locations, locations, njit
from .waittable import (  # noqa: F401  (the table's definitions, importable from here as before)
    IDLE_KINDS,
    KIND_CODES,
    KIND_DTYPE,
    WAIT_COLUMNS,
    WAIT_KINDS,
    WaitKind,
    WaitSettings,
    _frame,
    empty_waits,
    sorted_waits,
)

__all__ = ["WAIT_COLUMNS", "WAIT_KINDS", "WaitKind", "WaitSettings", "wait_instances", "p2p_waits", "IDLE_KINDS"]

log = logging.getLogger(__name__)

#: Late Sender kinds by the wrong-order class of :func:`_wrong_order` (0 in order, 1 same, 2 different source)
_LS_KINDS = ("late_sender", "late_sender_wrong_order_same", "late_sender_wrong_order_diff")


@njit
def _wrong_order(gloc, gmin, glate, grep_st, grep_src, mstart, mst, msrc, window):  # type: ignore[no-untyped-def]
    """Classify Late Sender groups: 0 in order, 1 wrong order (same source), 2 (different source)."""
    ng = gloc.shape[0]
    cls = np.zeros(ng, np.int8)
    bg = np.empty(window, np.int64)
    bst = np.empty(window, np.float64)
    bsrc = np.empty(window, np.int64)
    alive = np.zeros(window, np.bool_)
    head = 0
    count = 0
    bmax = -np.inf
    for g in range(ng):
        if g > 0 and gloc[g] != gloc[g - 1]:
            head = 0
            count = 0
            bmax = -np.inf
            for j in range(window):
                alive[j] = False
        if count > 0 and gmin[g] < bmax:
            newmax = -np.inf
            for j in range(count):
                slot = (head + j) % window
                if not alive[slot]:
                    continue
                if bst[slot] > gmin[g]:
                    same = False
                    for m in range(mstart[g], mstart[g + 1]):
                        if msrc[m] == bsrc[slot] and mst[m] < bst[slot]:
                            same = True
                            break
                    cls[bg[slot]] = 1 if same else 2
                    alive[slot] = False
                elif bst[slot] > newmax:
                    newmax = bst[slot]
            bmax = newmax
        if glate[g]:
            if count < window:
                slot = (head + count) % window
                count += 1
            else:
                slot = head
                head = (head + 1) % window
            bg[slot] = g
            bst[slot] = grep_st[g]
            bsrc[slot] = grep_src[g]
            alive[slot] = True
            if grep_st[g] > bmax:
                bmax = grep_st[g]
    return cls


def p2p_waits(
    trace: Trace,
    names: np.ndarray | None = None,
    *,
    window: int = WaitSettings.wrong_order_window,
    late_receiver: str = WaitSettings.late_receiver,
    locs: Locations | None = None,
) -> pd.DataFrame:
    """Point-to-point wait-state instances (see the module docstring).

    Parameters
    ----------
    trace : Trace
    names : numpy.ndarray, optional
        Vertex names (to recognise MPI_Test* calls).
    window : int
        Late Sender instances kept per location for the wrong-order test (0 disables it).
    late_receiver : {"blocking", "synchronous", "none"}
        Which sends can suffer Late Receiver (:func:`perflow.pag.edges.late_receiver_sends`).
    locs : Locations, optional
        ``locations(trace)``, when already at hand.
    """
    m = trace.messages
    iv = trace.intervals
    stats = {"clock_violations": 0, "unattributed_messages": 0, "test_completions": 0}
    if not len(m):
        out = empty_waits()
        out.attrs.update(stats)
        return out
    enter = iv["enter"].to_numpy()
    leave = iv["leave"].to_numpy()
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    proc = iv["process"].to_numpy()
    thr = iv["thread"].to_numpy()
    is_test = test_calls(trace, names)
    si = m["send_interval"].to_numpy().astype(np.int64)
    ri = m["recv_interval"].to_numpy().astype(np.int64)
    cv = m["clock_violation"].to_numpy().astype(bool)
    known = (si >= 0) & (ri >= 0)
    stats["clock_violations"] = int((cv & known).sum())
    stats["unattributed_messages"] = int((~known).sum())
    ok = known & ~cv
    tst = ok & is_test[np.maximum(ri, 0)]
    stats["test_completions"] = int(tst.sum())
    ok &= ~tst
    rows = np.flatnonzero(ok)
    parts = []
    if len(rows):
        s_i, r_i = si[rows], ri[rows]
        es, ls, er, lr = enter[s_i], leave[s_i], enter[r_i], leave[r_i]
        idle = message_late_sender(np.ones(len(rows), dtype=bool), es, er, lr)
        rep, starts, order = group_by_call(r_i, idle, es)
        gidle = idle[rep]
        # completion: Lr - max Ls over the group's late messages
        late_ls = np.where(idle > 0, ls, -np.inf)[order]
        max_ls = np.maximum.reduceat(late_ls, starts) if len(starts) else np.zeros(0)
        g_r = r_i[rep]
        late = gidle > 0
        cls = np.zeros(len(rep), dtype=np.int8)
        if window > 0 and late.any():
            locs = locs if locs is not None else locations(trace)
            loc = locs.of_interval[g_r]
            gorder = np.lexsort((g_r, loc))  # receive order on each location
            st = m["send_time"].to_numpy()[rows]
            src = locs.lookup(m["send_process"].to_numpy()[rows], m["send_thread"].to_numpy()[rows])
            # messages of group j (in gorder) are order[starts[j]:starts[j+1]] after re-sorting groups
            mstart = np.r_[starts, len(order)]
            sizes = np.diff(mstart)[gorder]
            msg_rows = _regroup(order, mstart, gorder)
            gmin = np.minimum.reduceat(st[msg_rows], np.r_[0, np.cumsum(sizes)[:-1]]) if len(msg_rows) else np.zeros(0)
            c = _wrong_order(
                loc[gorder].astype(np.int64),
                gmin,
                late[gorder],
                st[rep[gorder]],
                src[rep[gorder]],
                np.r_[0, np.cumsum(sizes)].astype(np.int64),
                st[msg_rows],
                src[msg_rows].astype(np.int64),
                int(window),
            )
            cls[gorder] = c
        names_ls = np.array([KIND_CODES[k] for k in _LS_KINDS], dtype=np.int8)  # by code: no string per row
        L = np.flatnonzero(late)
        rr = rep[L]
        parts.append(
            _frame(
                len(L),
                names_ls[cls[L]],
                process=proc[g_r[L]],
                thread=thr[g_r[L]],
                start=er[rr],
                end=er[rr] + gidle[L],
                amount=gidle[L],
                vertex=vtx[g_r[L]],
                interval=g_r[L],
                cause_process=proc[s_i[rr]],
                cause_thread=thr[s_i[rr]],
                cause_time=es[rr],
                cause_interval=s_i[rr],
                message=rows[rr],
            )
        )
        ls_calls, ls_idle = g_r[L], gidle[L]
        comp = (g_r[late], lr[rep[late]], max_ls[late], rows[rep[late]])
    else:
        ls_calls, ls_idle, comp = np.zeros(0, np.int64), np.zeros(0), None
    lr_frame = _late_receiver(
        trace, names, late_receiver, known & ~cv, is_test, ls_calls, ls_idle, enter, leave, vtx, proc, thr
    )
    parts.append(lr_frame)
    if comp is not None:
        parts.append(_completion(*comp, lr_frame, vtx, proc, thr))
    out = pd.concat(parts, ignore_index=True) if parts else empty_waits()
    out.attrs.update(stats)
    if stats["clock_violations"]:
        log.warning(
            "%d messages violate the clock condition and were left out of the wait states", stats["clock_violations"]
        )
    return out


def _regroup(order: np.ndarray, mstart: np.ndarray, gorder: np.ndarray) -> np.ndarray:
    """Rows of ``order`` re-arranged so the runs ``mstart`` appear in the order ``gorder`` (vectorised)."""
    sizes = np.diff(mstart)[gorder]
    base = np.repeat(mstart[gorder], sizes)
    within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return order[base + within]


def _lookup(calls: np.ndarray, of_calls: np.ndarray, values: np.ndarray, absent: float = 0.0) -> np.ndarray:
    """``values`` of the distinct calls ``of_calls`` looked up for ``calls``; ``absent`` where a call has none."""
    if not len(of_calls) or not len(calls):
        return np.full(len(calls), absent)
    o = np.argsort(of_calls, kind="stable")
    k = np.minimum(np.searchsorted(of_calls[o], calls), len(o) - 1)
    return np.where(of_calls[o][k] == calls, values[o][k], absent)


def _late_receiver(  # type: ignore[no-untyped-def]
    trace, names, mode, ok, is_test, ls_calls, ls_idle, enter, leave, vtx, proc, thr
) -> pd.DataFrame:
    """Late Receiver per call completing sends: the largest over its sends, after the call's Late Sender."""
    m = trace.messages
    sel = late_receiver_sends(trace, names, mode, is_test) & ok
    rows = np.flatnonzero(sel)
    if not len(rows):
        return empty_waits()
    s_c = m["send_complete_interval"].to_numpy().astype(np.int64)[rows]
    r_q = m["recv_post_interval"].to_numpy().astype(np.int64)[rows]
    esc, lsc, erq = enter[s_c], leave[s_c], enter[r_q]
    idle = np.where(lsc > erq, np.maximum(0.0, erq - esc), 0.0)
    rep, _, _ = group_by_call(s_c, idle, erq)
    keep = rep[idle[rep] > 0]
    # a call that also receives (MPI_Sendrecv, a Waitall of sends and receives) waits for both partners from
    # its enter: its Late Sender [E, E + ls] comes first, Late Receiver takes the rest [E + ls, E + lr]
    before = _lookup(s_c[keep], ls_calls, ls_idle)
    keep, before = keep[idle[keep] > before], before[idle[keep] > before]
    g = s_c[keep]
    end = esc[keep] + idle[keep]
    start = esc[keep] + before
    return _frame(
        len(keep),
        "late_receiver",
        process=proc[g],
        thread=thr[g],
        start=start,
        end=end,
        amount=idle[keep] - before,
        vertex=vtx[g],
        interval=g,
        cause_process=proc[r_q[keep]],
        cause_thread=thr[r_q[keep]],
        cause_time=erq[keep],
        cause_interval=r_q[keep],
        message=rows[keep],
    )


def _completion(  # type: ignore[no-untyped-def]
    calls, leaves, max_ls, msgs, lr_frame, vtx, proc, thr
) -> pd.DataFrame:
    """Late Sender completion: the call's time after the late sends have left and after its Late Receiver."""
    lr_end = _lookup(calls, lr_frame["interval"].to_numpy(), lr_frame["end"].to_numpy(), -np.inf)
    comp = np.maximum(0.0, leaves - np.maximum(max_ls, lr_end))
    C = np.flatnonzero(comp > 0)
    g = calls[C]
    return _frame(
        len(C),
        "late_sender_completion",
        process=proc[g],
        thread=thr[g],
        start=leaves[C] - comp[C],
        end=leaves[C],
        amount=comp[C],
        vertex=vtx[g],
        interval=g,
        message=msgs[C],
    )


def wait_instances(
    trace: Trace,
    names: np.ndarray | None = None,
    *,
    window: int = WaitSettings.wrong_order_window,
    late_receiver: str = WaitSettings.late_receiver,
    early_reduce: str = WaitSettings.early_reduce,
    collective_span: str = WaitSettings.collective_span,
    locs: Locations | None = None,
    roles: np.ndarray | None = None,
    regions: np.ndarray | None = None,
) -> pd.DataFrame:
    """Every wait-state instance of ``trace``, sorted by (process, thread, start).

    The table has the columns of :data:`WAIT_COLUMNS`; ``attrs`` carries
    ``clock_violations``, ``unattributed_messages`` and ``test_completions``.
    A PAG computes it once (:data:`perflow.trace.analyses.WAIT_INSTANCES`).
    ``roles`` and ``regions`` (region role and region id of each vertex)
    enable the thread wait states (:mod:`perflow.trace.threadwaits`).
    """
    p = p2p_waits(trace, names, window=window, late_receiver=late_receiver, locs=locs)
    cw = collwaits.collective_waits(trace, early_reduce=early_reduce, collective_span=collective_span)
    tw = threadwaits.thread_waits(trace.intervals, trace.locks, roles, regions)
    rw = rmawaits.rma_waits(trace, names)
    out = sorted_waits([p, cw, tw, rw])
    out.attrs = dict(p.attrs)
    return out
