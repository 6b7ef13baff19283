"""Compiled loops that write one location's events through the OTF2 C API.

The C functions are called from numba code through their addresses (passed
as arguments, so the compiled code can be cached): :func:`_ccall` emits an
indirect call with every argument widened to a 64-bit integer, which the
System V x86-64 and AAPCS64 calling conventions pass exactly like the
narrower integer parameters of the OTF2 functions (all in registers: no OTF2
event writer takes more than eight arguments). Small locations are written by
the same loops interpreted (see :mod:`perflow._jit`), calling the C functions
through :mod:`ctypes` with the same convention, so that writing a small trace
does not start numba.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..._jit import intrinsic, njit

__all__ = ["FUNCTIONS", "emit_location", "metric_groups", "pre_flush"]

#: OTF2 event-writer functions used, in the order of the address table passed to emit_location
FUNCTIONS = (
    "Enter Leave MpiSend MpiIsend MpiIsendComplete MpiIrecvRequest MpiRecv MpiIrecv MpiRequestTest "
    "MpiRequestCancelled MpiCollectiveBegin MpiCollectiveEnd Metric ThreadFork ThreadJoin ThreadTeamBegin "
    "ThreadTeamEnd ThreadCreate ThreadBegin ThreadWait ThreadEnd NonBlockingCollectiveRequest "
    "NonBlockingCollectiveComplete CallingContextSample ThreadAcquireLock ThreadReleaseLock"
).split()
(F_ENTER, F_LEAVE, F_SEND, F_ISEND, F_ISEND_COMPLETE, F_IRECV_REQUEST, F_RECV, F_IRECV, F_REQUEST_TEST,
 F_REQUEST_CANCELLED, F_COLL_BEGIN, F_COLL_END, F_METRIC, F_FORK, F_JOIN, F_TEAM_BEGIN, F_TEAM_END,
 F_CREATE, F_BEGIN, F_WAIT, F_END, F_NBC_REQUEST, F_NBC_COMPLETE, F_SAMPLE, F_ACQUIRE,
 F_RELEASE) = range(len(FUNCTIONS))  # fmt: skip

_P2P_FN = np.array(
    [F_SEND, F_ISEND, F_ISEND_COMPLETE, F_RECV, F_IRECV_REQUEST, F_IRECV, F_REQUEST_TEST, F_REQUEST_CANCELLED, F_SEND]
)
_THREAD_FN = np.array(
    [F_FORK, F_JOIN, F_TEAM_BEGIN, F_TEAM_END, F_CREATE, F_BEGIN, F_WAIT, F_END, F_ACQUIRE, F_RELEASE]
)
_PARADIGM_OPENMP = 3
_M32 = 0xFFFFFFFF
_MASK8 = 0xFF


_PROTOTYPES: dict[tuple[int, int], ctypes._CFuncPtr] = {}


def _ccall_py(addr: int, args: tuple) -> int:
    """:func:`_ccall` interpreted: the same call through ctypes (every argument widened to int64)."""
    key = (int(addr), len(args))
    fn = _PROTOTYPES.get(key)
    if fn is None:
        fn = _PROTOTYPES[key] = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_int64] * len(args))(key[0])
    return fn(*(int(a) for a in args))


@intrinsic(python=_ccall_py)
def _ccall(typingctx, addr, args):  # noqa: ANN001, ANN202
    """Call the C function at ``addr`` with the int64 tuple ``args``; return its int32 result."""
    from llvmlite import ir
    from numba import types

    n = len(args)
    if not all(isinstance(t, types.Integer) for t in args):
        return None
    sig = types.int32(types.int64, args)

    def codegen(context, builder, signature, llargs):  # noqa: ANN001, ANN202
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(ir.IntType(32), [i64] * n)
        addr = context.cast(builder, llargs[0], signature.args[0], types.int64)
        fn = builder.inttoptr(addr, fnty.as_pointer())
        vals = [
            context.cast(builder, builder.extract_value(llargs[1], k), t, types.int64)
            for k, t in enumerate(signature.args[1])
        ]
        return builder.call(fn, vals)

    return sig, codegen


@ctypes.CFUNCTYPE(ctypes.c_uint8, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_bool)
def _pre_flush(user_data, file_type, location, caller_data, final):  # noqa: ANN001, ANN201
    """OTF2 pre-flush callback: always flush full buffers to disk (OTF2_FLUSH); called once per full buffer."""
    return 1


class _Callback:
    """A C function pointer (``.address``) kept alive with its module."""

    def __init__(self, fn: ctypes._CFuncPtr) -> None:
        self.fn = fn
        self.address = ctypes.cast(fn, ctypes.c_void_p).value


pre_flush = _Callback(_pre_flush)


@njit(nogil=False)
def metric_groups(loc, pos, time, metric, n_members):  # noqa: ANN001, ANN201
    """Split metric rows into OTF2 Metric events.

    Consecutive rows of one location with the same time and ``pos`` form one
    event, unless a member repeats (then a new event starts). Returns the
    start row of every event.
    """
    n = len(loc)
    starts = np.empty(n, dtype=np.int64)
    stamp = np.full(max(n_members, 1), -1, dtype=np.int64)
    g = -1
    for i in range(n):
        m = metric[i]
        new = (
            i == 0
            or loc[i] != loc[i - 1]
            or pos[i] != pos[i - 1]
            or time[i] != time[i - 1]
            or (0 <= m < n_members and stamp[m] == g)
        )
        if new:
            g += 1
            starts[g] = i
        if 0 <= m < n_members:
            stamp[m] = g
    return starts[: g + 1]


@njit(nogil=False, small=20_000)  # some 20 us an event interpreted
def emit_location(w, fn, base, rt, rk, rr, p, pi, c, ci, g, gi, mvals, mtypes, h, hi, s, si):  # noqa: ANN001, ANN201, PLR0913
    """Write one location's events in stream order; return 0 or the first OTF2 error code.

    ``w`` is the OTF2_EvtWriter*, ``fn`` the address table (FUNCTIONS order),
    ``base`` the global index of the location's first region event; ``rt``,
    ``rk``, ``rr``: ticks, kind, region of its region events. ``p``/``c``/``g``/``h``/``s``
    are int64 matrices (one row per column) of the p2p, collective, metric-event,
    thread and sample rows of the location, ``pi``/``ci``/``gi``/``hi``/``si`` their uint64 ticks:

    * p: kind, peer, comm, tag, bytes, request, pos
    * c: kind, op, comm, root, sent, received, pos, request (kind 0/1: MpiCollectiveBegin/End;
      2/3: NonBlockingCollectiveRequest/Complete of ``request``)
    * g: class, first value row, number of values, pos
    * h: kind, team, count, pos, lock, order (kinds 8/9: ThreadAcquireLock/ThreadReleaseLock, OpenMP model)
    * s: calling context, unwind distance, interrupt generator, pos (CallingContextSample)

    Non-region events due before region event ``k`` (pos <= base + k) are
    written first, in time order (ties: metric, thread, p2p, collective, sample).
    OTF2 needs non-decreasing time stamps along a location: an event stamped
    before the one written last (a clock glitch of the source) gets its time.
    """
    nr, np_, nc, ng, nh, ns = len(rt), p.shape[1], c.shape[1], g.shape[1], h.shape[1], s.shape[1]
    ir_ = ip = ic = ig = ih = is_ = 0
    last_t = np.uint64(0)
    vaddr = mvals.ctypes.data
    taddr = mtypes.ctypes.data
    while True:
        cur = base + ir_
        last = ir_ >= nr
        best = -1
        bt = np.uint64(0)
        if ig < ng and (last or g[3, ig] <= cur):
            best, bt = 0, gi[ig]
        if ih < nh and (last or h[3, ih] <= cur) and (best < 0 or hi[ih] < bt):
            best, bt = 1, hi[ih]
        if ip < np_ and (last or p[6, ip] <= cur) and (best < 0 or pi[ip] < bt):
            best, bt = 2, pi[ip]
        if ic < nc and (last or c[6, ic] <= cur) and (best < 0 or ci[ic] < bt):
            best, bt = 3, ci[ic]
        if is_ < ns and (last or s[3, is_] <= cur) and (best < 0 or si[is_] < bt):
            best, bt = 4, si[is_]
        if best < 0:
            if last:
                return 0
            f = F_ENTER if rk[ir_] == 0 else F_LEAVE
            tr = rt[ir_] if rt[ir_] > last_t else last_t
            last_t = tr
            rc = _ccall(fn[f], (w, 0, np.int64(tr), np.int64(rr[ir_]) & _M32))
            ir_ += 1
            if rc != 0:
                return rc
            continue
        if bt < last_t:
            bt = last_t
        last_t = bt
        if best == 0:
            k = g[2, ig]
            rc = _ccall(fn[F_METRIC], (w, 0, np.int64(bt), g[0, ig], k & _MASK8, taddr, vaddr + 8 * g[1, ig]))
            ig += 1
        elif best == 1:
            kind = h[0, ih]
            f = _THREAD_FN[kind]
            if kind == 0:
                rc = _ccall(fn[f], (w, 0, np.int64(bt), np.int64(_PARADIGM_OPENMP), h[2, ih] & _M32))
            elif kind == 1:
                rc = _ccall(fn[f], (w, 0, np.int64(bt), np.int64(_PARADIGM_OPENMP)))
            elif kind <= 3:
                rc = _ccall(fn[f], (w, 0, np.int64(bt), h[1, ih] & _M32))
            elif kind >= 8:
                rc = _ccall(fn[f], (w, 0, np.int64(bt), np.int64(_PARADIGM_OPENMP), h[4, ih] & _M32, h[5, ih] & _M32))
            else:
                rc = _ccall(fn[f], (w, 0, np.int64(bt), h[1, ih] & _M32, np.int64(0)))
            ih += 1
        elif best == 2:
            kind = p[0, ip]
            f = _P2P_FN[kind]
            peer, comm, tag = p[1, ip] & _M32, p[2, ip] & _M32, p[3, ip] & _M32
            if kind == 0 or kind == 3 or kind == 8:
                rc = _ccall(fn[f], (w, 0, np.int64(bt), peer, comm, tag, p[4, ip]))
            elif kind == 1 or kind == 5:
                rc = _ccall(fn[f], (w, 0, np.int64(bt), peer, comm, tag, p[4, ip], p[5, ip]))
            else:
                rc = _ccall(fn[f], (w, 0, np.int64(bt), p[5, ip]))
            ip += 1
        elif best == 3:
            ck = c[0, ic]
            if ck == 0:
                rc = _ccall(fn[F_COLL_BEGIN], (w, 0, np.int64(bt)))
            elif ck == 1:
                args = (w, 0, np.int64(bt), c[1, ic] & _MASK8, c[2, ic] & _M32, c[3, ic] & _M32, c[4, ic], c[5, ic])
                rc = _ccall(fn[F_COLL_END], args)
            elif ck == 2:
                rc = _ccall(fn[F_NBC_REQUEST], (w, 0, np.int64(bt), c[7, ic]))
            else:
                rc = _ccall(
                    fn[F_NBC_COMPLETE],
                    (w, 0, np.int64(bt), c[1, ic] & _MASK8, c[2, ic] & _M32, c[3, ic] & _M32, c[4, ic], c[5, ic],
                     c[7, ic]),
                )  # fmt: skip
            ic += 1
        else:
            rc = _ccall(fn[F_SAMPLE], (w, 0, np.int64(bt), s[0, is_] & _M32, s[1, is_] & _M32, s[2, is_] & _M32))
            is_ += 1
        if rc != 0:
            return rc
