"""Compiled callbacks of the OTF2 ``Rma*`` records (MPI one-sided communication, SHMEM) for the fast decoder.

Each record becomes one row of ``rma_events`` (columns in :data:`perflow.trace.raw.RMA_COLUMNS`, kinds
:class:`perflow.kinds.RmaEv`); see :mod:`._callbacks` for the state vector the rows are appended through.
"""

from __future__ import annotations

import numpy as np

from ..._jit import cfunc, njit
from ...kinds import RmaEv
from . import _layout as L
from ._cbkit import U8, U32, U64, carray, f64, fail, i8, i16, i32, i64, seconds, sig

__all__ = ["RMA_HANDLERS"]

_U32 = np.int64(0xFFFFFFFF)


@njit(python=False)
def _s32(x):  # noqa: ANN001, ANN202 - OTF2 uint32 (OTF2_UNDEFINED_UINT32 -> -1)
    v = np.int64(x)
    return np.int32(-1) if v == _U32 else np.int32(v)


@njit(python=False)
def _rma(ud, t, kind, win, remote, group, op, level, nbytes, received, matching):  # noqa: ANN001, ANN202
    st = carray(ud, (L.STATE_LEN,), np.int64)
    stf = carray(ud, (L.STATE_LEN,), np.float64)
    i = st[L.RMA_N]
    if i >= st[L.RMA_N + 1]:
        return fail(st, L.ERR_FULL, 0)
    f64(st[L.RMA_T])[i] = seconds(st, stf, t)
    i8(st[L.RMA_K])[i] = kind
    i32(st[L.RMA_W])[i] = _s32(win)
    i32(st[L.RMA_R])[i] = _s32(remote)
    i32(st[L.RMA_G])[i] = _s32(group)
    i16(st[L.RMA_OP])[i] = op
    i32(st[L.RMA_LV])[i] = level
    i64(st[L.RMA_B])[i] = nbytes
    i64(st[L.RMA_RB])[i] = received
    i64(st[L.RMA_MATCH])[i] = matching
    i64(st[L.RMA_POS])[i] = st[L.REG_N]
    st[L.RMA_N] = i + 1
    return 0


_N = np.uint32(0xFFFFFFFF)  # an absent reference
_Z, _M1 = np.int64(0), np.int64(-1)


@njit(python=False)
def _win_only(ud, t, kind, win):  # noqa: ANN001, ANN202
    return _rma(ud, t, kind, win, _N, _N, np.int16(-1), np.int32(0), _Z, _Z, _M1)


@njit(python=False)
def _lock(ud, t, kind, win, remote, lock, ltype):  # noqa: ANN001, ANN202
    return _rma(ud, t, kind, win, remote, _N, np.int16(ltype), np.int32(0), _Z, _Z, np.int64(lock))


@njit(python=False)
def _complete(ud, t, kind, win, matching):  # noqa: ANN001, ANN202
    return _rma(ud, t, kind, win, _N, _N, np.int16(-1), np.int32(0), _Z, _Z, np.int64(matching))


@cfunc(sig(U32), nopython=True)
def cb_win_create(loc, t, ev, ud, al, win):  # noqa: ANN001, ANN201
    return _win_only(ud, t, 0, win)


@cfunc(sig(U32), nopython=True)
def cb_win_destroy(loc, t, ev, ud, al, win):  # noqa: ANN001, ANN201
    return _win_only(ud, t, 1, win)


@cfunc(sig(), nopython=True)
def cb_coll_begin(loc, t, ev, ud, al):  # noqa: ANN001, ANN201
    return _win_only(ud, t, 2, _N)


@cfunc(sig(U8, U32, U32, U32, U64, U64), nopython=True)
def cb_coll_end(loc, t, ev, ud, al, op, level, win, root, sent, received):  # noqa: ANN001, ANN201
    return _rma(ud, t, 3, win, root, _N, np.int16(op), np.int32(level), np.int64(sent), np.int64(received), _M1)


@cfunc(sig(U32, U32, U32), nopython=True)
def cb_group_sync(loc, t, ev, ud, al, level, win, group):  # noqa: ANN001, ANN201
    return _rma(ud, t, 4, win, _N, group, np.int16(-1), np.int32(level), _Z, _Z, _M1)


@cfunc(sig(U32, U32, U64, U8), nopython=True)
def cb_request_lock(loc, t, ev, ud, al, win, remote, lock, ltype):  # noqa: ANN001, ANN201
    return _lock(ud, t, 5, win, remote, lock, ltype)


@cfunc(sig(U32, U32, U64, U8), nopython=True)
def cb_acquire_lock(loc, t, ev, ud, al, win, remote, lock, ltype):  # noqa: ANN001, ANN201
    return _lock(ud, t, 6, win, remote, lock, ltype)


@cfunc(sig(U32, U32, U64, U8), nopython=True)
def cb_try_lock(loc, t, ev, ud, al, win, remote, lock, ltype):  # noqa: ANN001, ANN201
    return _lock(ud, t, 7, win, remote, lock, ltype)


@cfunc(sig(U32, U32, U64), nopython=True)
def cb_release_lock(loc, t, ev, ud, al, win, remote, lock):  # noqa: ANN001, ANN201
    return _lock(ud, t, 8, win, remote, lock, -1)


@cfunc(sig(U32, U32, U8), nopython=True)
def cb_sync(loc, t, ev, ud, al, win, remote, stype):  # noqa: ANN001, ANN201
    return _rma(ud, t, 9, win, remote, _N, np.int16(stype), np.int32(0), _Z, _Z, _M1)


@cfunc(sig(U32), nopython=True)
def cb_wait_change(loc, t, ev, ud, al, win):  # noqa: ANN001, ANN201
    return _win_only(ud, t, 10, win)


@cfunc(sig(U32, U32, U64, U64), nopython=True)
def cb_put(loc, t, ev, ud, al, win, remote, nbytes, matching):  # noqa: ANN001, ANN201
    return _rma(ud, t, 11, win, remote, _N, np.int16(-1), np.int32(0), np.int64(nbytes), _Z, np.int64(matching))


@cfunc(sig(U32, U32, U64, U64), nopython=True)
def cb_get(loc, t, ev, ud, al, win, remote, nbytes, matching):  # noqa: ANN001, ANN201
    return _rma(ud, t, 12, win, remote, _N, np.int16(-1), np.int32(0), _Z, np.int64(nbytes), np.int64(matching))


@cfunc(sig(U32, U32, U8, U64, U64, U64), nopython=True)
def cb_atomic(loc, t, ev, ud, al, win, remote, atype, sent, received, matching):  # noqa: ANN001, ANN201
    s, r, m = np.int64(sent), np.int64(received), np.int64(matching)
    return _rma(ud, t, 13, win, remote, _N, np.int16(atype), np.int32(0), s, r, m)


@cfunc(sig(U32, U64), nopython=True)
def cb_complete_blocking(loc, t, ev, ud, al, win, matching):  # noqa: ANN001, ANN201
    return _complete(ud, t, 14, win, matching)


@cfunc(sig(U32, U64), nopython=True)
def cb_complete_non_blocking(loc, t, ev, ud, al, win, matching):  # noqa: ANN001, ANN201
    return _complete(ud, t, 15, win, matching)


@cfunc(sig(U32, U64), nopython=True)
def cb_op_test(loc, t, ev, ud, al, win, matching):  # noqa: ANN001, ANN201
    return _complete(ud, t, 16, win, matching)


@cfunc(sig(U32, U64), nopython=True)
def cb_complete_remote(loc, t, ev, ud, al, win, matching):  # noqa: ANN001, ANN201
    return _complete(ud, t, 17, win, matching)


RMA_HANDLERS = {
    "RmaWinCreate": cb_win_create,
    "RmaWinDestroy": cb_win_destroy,
    "RmaCollectiveBegin": cb_coll_begin,
    "RmaCollectiveEnd": cb_coll_end,
    "RmaGroupSync": cb_group_sync,
    "RmaRequestLock": cb_request_lock,
    "RmaAcquireLock": cb_acquire_lock,
    "RmaTryLock": cb_try_lock,
    "RmaReleaseLock": cb_release_lock,
    "RmaSync": cb_sync,
    "RmaWaitChange": cb_wait_change,
    "RmaPut": cb_put,
    "RmaGet": cb_get,
    "RmaAtomic": cb_atomic,
    "RmaOpCompleteBlocking": cb_complete_blocking,
    "RmaOpCompleteNonBlocking": cb_complete_non_blocking,
    "RmaOpTest": cb_op_test,
    "RmaOpCompleteRemote": cb_complete_remote,
}
# the kinds written above, in record order, are the RmaEv values
assert [int(RmaEv[n]) for n in [m.name for m in RmaEv]] == list(range(len(RMA_HANDLERS)))
