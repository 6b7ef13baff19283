"""Collective wait-state instances (formulas in :mod:`perflow.trace.waits`).

One row per waiting participant and kind, in the table format of
:data:`perflow.trace.waits.WAIT_COLUMNS`: Wait at Barrier / N x N and their
completion, Late Broadcast, Early Reduce, Early Scan. A data collective that
moves zero bytes is no synchronisation point; a barrier (and MPI_Init /
MPI_Finalize, which the trace builder turns into world barriers) always is.

MPI_Init and MPI_Finalize (world barriers) give Scalasca's two metrics of
their own instead: ``init_completion`` (the completion formula: time in
MPI_Init after the first process could leave) and ``finalize_wait`` (the wait
formula: waiting in MPI_Finalize for the last process to arrive); neither is a
Wait at Barrier.

``E_i``/``L_i`` are, by default (``collective_span="records"``, Scalasca's
rule), the times of the collective's own records: its ``MpiCollectiveBegin``
and ``MpiCollectiveEnd`` (Score-P 8 writes the END 1-6 us before the Leave),
so that waits and completions end where the operation ended;
``collective_span="call"`` takes the enter and leave of the MPI call instead.
Calls without records (MPI_Init, MPI_Finalize, inferred collectives) use the
call's enter and leave either way.

A non-blocking collective (MPI_Ibarrier, MPI_Iallreduce, ...: its request
posted in the I-call, completed in a Wait/Test) waits in the call that
completes it, from that call's enter, for the others' *requests*: every
formula reads "arrival" ``A_j = min(E_j, begin_j)`` (the request time, for a
non-blocking participant; the enter, for a blocking one) where it reads
``E_j`` of the others, and keeps ``E_i``/``L_i`` of the completing call for
the waiting participant itself.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..kinds import CollectiveOp
from ..pag.instances import Trace
from .flat import njit
from .waittable import _frame, empty_waits

__all__ = ["collective_waits", "COLLECTIVE_SPANS"]

_PAT_CODE = {"barrier": 0, "n2n": 1, "one2n": 2, "n2one": 3, "scan": 4}


def _pattern_table() -> np.ndarray:
    t = np.full(128, -1, dtype=np.int8)
    for op in CollectiveOp:
        if CollectiveOp.CREATE_HANDLE <= op <= CollectiveOp.DESTROY_HANDLE_AND_DEALLOCATE:
            continue
        t[int(op)] = _PAT_CODE[op.pattern]
    return t


_PATTERNS = _pattern_table()


@njit
def _scan_ref(start, n, rank, E):  # type: ignore[no-untyped-def]
    """Per row of a scan instance: the row with the latest enter among lower ranks (-1 for rank 0)."""
    ref = np.full(E.shape[0], -1, np.int64)
    for g in range(start.shape[0]):
        a = start[g]
        b = a + n[g]
        idx = np.argsort(rank[a:b], kind="mergesort") + a
        best = -1
        for q in idx:
            ref[q] = best
            if best < 0 or E[q] > E[best]:
                best = q
    return ref


#: values of the ``collective_span`` setting: the collective's records (Scalasca), or the MPI call
COLLECTIVE_SPANS = ("records", "call")


def collective_waits(trace: Trace, *, early_reduce: str = "latest", collective_span: str = "records") -> pd.DataFrame:
    """Collective wait-state instances (see the module docstring).

    Parameters
    ----------
    early_reduce : {"latest", "earliest"}
        Whether the root of an N-to-1 operation waits for the latest sender
        (default) or only until the first sender arrives (no data could be
        received before).
    collective_span : {"records", "call"}
        Where a blocking participant's operation begins and ends: at its
        MpiCollectiveBegin/End records (default, as Scalasca) or at the enter
        and leave of its MPI call.
    """
    if collective_span not in COLLECTIVE_SPANS:
        raise ValueError(f"collective_span must be one of {COLLECTIVE_SPANS}, not {collective_span!r}")
    c = trace.collectives
    if not len(c):
        return empty_waits()
    iv = trace.intervals
    inst = c["instance"].to_numpy().astype(np.int64)
    if len(inst) > 1 and np.any(np.diff(inst) < 0):
        c = c.sort_values(["instance", "process", "thread"], kind="stable").reset_index(drop=True)
        inst = c["instance"].to_numpy().astype(np.int64)
    row_iv = c["interval"].to_numpy().astype(np.int64)
    has = row_iv >= 0
    enter = iv["enter"].to_numpy()
    leave = iv["leave"].to_numpy()
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    begin = c["begin"].to_numpy()
    end = c["end"].to_numpy()
    E = np.where(has, enter[np.maximum(row_iv, 0)], begin)
    L = np.where(has, leave[np.maximum(row_iv, 0)], end)
    # arrival: a blocking call arrives when it enters; a non-blocking one (its BEGIN, the request, lies
    # before the call that completes it) when it posted its request
    A = np.minimum(E, begin)
    if collective_span == "records":  # a blocking participant's operation spans its own records
        blocking = begin >= E
        E = np.where(blocking, begin, E)
        L = np.where(blocking, np.minimum(np.maximum(end, E), L), L)
        A = np.minimum(E, begin)
    vertex = np.where(has, vtx[np.maximum(row_iv, 0)], -1)
    proc = c["process"].to_numpy()
    thr = c["thread"].to_numpy()
    op = c["op"].to_numpy().astype(np.int64)
    pat = np.where((op >= 0) & (op < len(_PATTERNS)), _PATTERNS[np.clip(op, 0, len(_PATTERNS) - 1)], -1)
    first = np.r_[True, inst[1:] != inst[:-1]]
    starts = np.flatnonzero(first)
    gid = np.cumsum(first) - 1
    n_in = np.diff(np.r_[starts, len(inst)])
    moved = np.add.reduceat((c["sent"].to_numpy() + c["received"].to_numpy()).astype(np.float64), starts)
    sync = (pat == 0) | ((pat > 0) & (moved[gid] > 0))
    latest = np.maximum.reduceat(A, starts)[gid]
    first_leave = np.minimum.reduceat(L, starts)[gid]
    rows = np.arange(len(inst))
    # the last arriver: first row (lowest process) with the latest arrival
    cand = np.where(A == latest, rows, len(rows))
    last_row = np.minimum.reduceat(cand, starts)[gid]
    parts = []

    def emit(sel: np.ndarray, kind: str, start: np.ndarray, amount: np.ndarray, cause: np.ndarray | None) -> None:
        k = np.flatnonzero(sel & (amount > 0))
        cols = dict(
            process=proc[k],
            thread=thr[k],
            start=start[k],
            end=start[k] + amount[k],
            amount=amount[k],
            vertex=vertex[k],
            interval=row_iv[k],
            instance=inst[k],
        )
        if cause is not None:
            cr = cause[k]
            cols.update(cause_process=proc[cr], cause_thread=thr[cr], cause_time=A[cr], cause_interval=row_iv[cr])
        parts.append(_frame(len(k), kind, **cols))

    released = np.minimum(latest, L)
    wait = np.maximum(0.0, released - E)
    comp = np.maximum(0.0, L - np.maximum(first_leave, released))
    init, fin = op == CollectiveOp.INIT, op == CollectiveOp.FINALIZE
    for code, wk, ck in ((0, "wait_barrier", "barrier_completion"), (1, "wait_nxn", "nxn_completion")):
        sel = sync & (pat == code) & ~init & ~fin
        emit(sel, wk, E, wait, last_row)
        emit(sel, ck, L - comp, comp, None)
    emit(sync & fin, "finalize_wait", E, wait, last_row)
    emit(sync & init, "init_completion", L - comp, comp, None)
    root = c["root"].to_numpy().astype(np.int64)
    is_root = (root >= 0) & (proc == root)
    # root row per instance (first matching row), -1 when none
    rc = np.where(is_root, rows, len(rows))
    root_row = np.minimum.reduceat(rc, starts)[gid]
    has_root = root_row < len(rows)
    rr = np.minimum(root_row, len(rows) - 1)
    sel = sync & (pat == 2) & has_root & ~is_root
    emit(sel, "late_broadcast", E, np.maximum(0.0, np.minimum(A[rr], L) - E), rr)
    sel = sync & (pat == 3) & has_root & is_root
    if sel.any():
        nonroot_A = np.where(is_root, -np.inf if early_reduce == "latest" else np.inf, A)
        red = np.maximum if early_reduce == "latest" else np.minimum
        ref = red.reduceat(nonroot_A, starts)[gid]
        pick = np.where(~is_root & (A == ref), rows, len(rows))
        ref_row = np.minimum(np.minimum.reduceat(pick, starts)[gid], len(rows) - 1)
        amt = np.where(np.isfinite(ref), np.maximum(0.0, np.minimum(ref, L) - E), 0.0)
        emit(sel, "early_reduce", E, amt, ref_row)
    sel = sync & (pat == 4)
    if sel.any():
        gsel = np.flatnonzero(np.add.reduceat(sel.astype(np.int64), starts) > 0)
        rank = _comm_rank(trace, c["comm"].to_numpy().astype(np.int64), proc.astype(np.int64))
        ref = _scan_ref(starts[gsel].astype(np.int64), n_in[gsel].astype(np.int64), rank, A)
        ok = ref >= 0
        amt = np.where(ok, np.maximum(0.0, np.minimum(A[np.maximum(ref, 0)], L) - E), 0.0)
        emit(sel & ok, "early_scan", E, amt, np.maximum(ref, 0))
    return pd.concat(parts, ignore_index=True) if parts else empty_waits()


def _comm_rank(trace: Trace, comm: np.ndarray, proc: np.ndarray) -> np.ndarray:
    """Rank of each world process within the communicator of its row (the world rank when unknown)."""
    rank = proc.copy()
    for cid in np.unique(comm):
        members = trace.comms.get(int(cid))
        if members is None:
            continue
        members = np.asarray(members, dtype=np.int64)
        sel = comm == cid
        inv = np.full(int(max(members.max(initial=0), proc[sel].max(initial=0))) + 1, -1, dtype=np.int64)
        inv[members] = np.arange(len(members))
        r = inv[proc[sel]]
        rank[sel] = np.where(r >= 0, r, proc[sel])
    return rank
