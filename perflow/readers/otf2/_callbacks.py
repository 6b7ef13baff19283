"""Compiled OTF2 event callbacks for the fast decoder.

The OTF2 C library calls one C function per event record. Those functions
are numba ``cfunc``\\ s (and, for the records perflow skips, tiny counters
generated with llvmlite); none touches a Python object. They append to
preallocated numpy columns whose addresses, row counts and capacities live in
one ``int64`` *state* vector passed to OTF2 as the callbacks' ``userData``.

The state layout is described in :mod:`._layout`.
"""

from __future__ import annotations

import threading

import numpy as np

from ..._jit import cfunc, njit
from ...kinds import P2P, CollEv, ThreadEv
from . import _layout as L
from ._cbkit import U8, U32, U64, VP, carray, f64, fail, i8, i16, i32, i64, seconds, sig
from ._rmacb import RMA_HANDLERS

__all__ = ["callback_addresses"]


_TYPE_UINT64, _TYPE_INT64 = 4, 8


@njit(python=False)
def _region(ud, t, kind, region):  # noqa: ANN001, ANN202
    st = carray(ud, (L.STATE_LEN,), np.int64)
    if region >= st[L.S_NRMAP]:
        return fail(st, L.ERR_REGION, region)
    d = i32(st[L.S_RMAP])[region]
    if d < 0:
        return fail(st, L.ERR_REGION, region)
    return _region_row(ud, t, kind, d)


@njit(python=False)
def _region_row(ud, t, kind, d):  # noqa: ANN001, ANN202
    st = carray(ud, (L.STATE_LEN,), np.int64)
    stf = carray(ud, (L.STATE_LEN,), np.float64)
    i = st[L.REG_N]
    if i >= st[L.REG_N + 1]:
        return fail(st, L.ERR_FULL, 0)
    f64(st[L.REG_T])[i] = seconds(st, stf, t)
    i8(st[L.REG_K])[i] = kind
    i32(st[L.REG_R])[i] = d
    st[L.REG_N] = i + 1
    return 0


@njit(python=False)
def _p2p(ud, t, kind, peer, comm, tag, nbytes, request):  # noqa: ANN001, ANN202
    st = carray(ud, (L.STATE_LEN,), np.int64)
    stf = carray(ud, (L.STATE_LEN,), np.float64)
    i = st[L.P2P_N]
    if i >= st[L.P2P_N + 1]:
        return fail(st, L.ERR_FULL, 0)
    f64(st[L.P2P_T])[i] = seconds(st, stf, t)
    i8(st[L.P2P_K])[i] = kind
    i32(st[L.P2P_PEER])[i] = peer
    i32(st[L.P2P_COMM])[i] = comm
    i32(st[L.P2P_TAG])[i] = tag
    i64(st[L.P2P_BYTES])[i] = nbytes
    i64(st[L.P2P_REQ])[i] = request
    i64(st[L.P2P_POS])[i] = st[L.REG_N]
    st[L.P2P_N] = i + 1
    return 0


@njit(python=False)
def _coll(ud, t, kind, op, comm, root, sent, received, request):  # noqa: ANN001, ANN202
    st = carray(ud, (L.STATE_LEN,), np.int64)
    stf = carray(ud, (L.STATE_LEN,), np.float64)
    i = st[L.COLL_N]
    if i >= st[L.COLL_N + 1]:
        return fail(st, L.ERR_FULL, 0)
    f64(st[L.COLL_T])[i] = seconds(st, stf, t)
    i8(st[L.COLL_K])[i] = kind
    i16(st[L.COLL_OP])[i] = op
    i32(st[L.COLL_COMM])[i] = comm
    i32(st[L.COLL_ROOT])[i] = root
    i64(st[L.COLL_SENT])[i] = sent
    i64(st[L.COLL_RECV])[i] = received
    i64(st[L.COLL_POS])[i] = st[L.REG_N]
    i64(st[L.COLL_REQ])[i] = request
    st[L.COLL_N] = i + 1
    return 0


@njit(python=False)
def _sample(ud, t, context, unwind):  # noqa: ANN001, ANN202
    st = carray(ud, (L.STATE_LEN,), np.int64)
    stf = carray(ud, (L.STATE_LEN,), np.float64)
    i = st[L.SMP_N]
    if i >= st[L.SMP_N + 1]:
        return fail(st, L.ERR_FULL, 0)
    f64(st[L.SMP_T])[i] = seconds(st, stf, t)
    i32(st[L.SMP_S])[i] = context
    f64(st[L.SMP_W])[i] = unwind
    i64(st[L.SMP_POS])[i] = st[L.REG_N]
    st[L.SMP_N] = i + 1
    return 0


@njit(python=False)
def _thread_row(ud, t, kind, team, count, lock, order):  # noqa: ANN001, ANN202
    st = carray(ud, (L.STATE_LEN,), np.int64)
    stf = carray(ud, (L.STATE_LEN,), np.float64)
    i = st[L.THR_N]
    if i >= st[L.THR_N + 1]:
        return fail(st, L.ERR_FULL, 0)
    f64(st[L.THR_T])[i] = seconds(st, stf, t)
    i8(st[L.THR_K])[i] = kind
    i32(st[L.THR_TEAM])[i] = team
    i32(st[L.THR_COUNT])[i] = count
    i64(st[L.THR_POS])[i] = st[L.REG_N]
    i64(st[L.THR_LOCK])[i] = lock
    i64(st[L.THR_ORDER])[i] = order
    st[L.THR_N] = i + 1
    return 0


@njit(python=False)
def _thread(ud, t, kind, team, count):  # noqa: ANN001, ANN202
    return _thread_row(ud, t, kind, team, count, np.int64(-1), np.int64(-1))


@njit(python=False)
def _lock(ud, t, kind, lock, order):  # noqa: ANN001, ANN202
    return _thread_row(ud, t, kind, np.int32(-1), np.int32(-1), np.int64(lock), np.int64(order))


# --- region events ---------------------------------------------------------
@cfunc(sig(U32), nopython=True)
def cb_enter(loc, t, ev, ud, al, region):  # noqa: ANN001, ANN201
    return _region(ud, t, 0, region)


@cfunc(sig(U32), nopython=True)
def cb_leave(loc, t, ev, ud, al, region):  # noqa: ANN001, ANN201
    return _region(ud, t, 1, region)


# --- program begin/end: the instance of the artificial program region -------------
# (its dense region id is the element after the region map: see _fast._read_location)
@njit(python=False)
def _program(ud, t, kind):  # noqa: ANN001, ANN202
    st = carray(ud, (L.STATE_LEN,), np.int64)
    return _region_row(ud, t, kind, i32(st[L.S_RMAP])[st[L.S_NRMAP]])


@cfunc(sig(U32, U32, VP), nopython=True)
def cb_program_begin(loc, t, ev, ud, al, name, nargs, args):  # noqa: ANN001, ANN201
    st = carray(ud, (L.STATE_LEN,), np.int64)
    st[L.S_PROG] = np.int64(name)
    return _program(ud, t, 0)


@cfunc(sig("int64"), nopython=True)
def cb_program_end(loc, t, ev, ud, al, status):  # noqa: ANN001, ANN201
    return _program(ud, t, 1)


# --- point-to-point --------------------------------------------------------
@cfunc(sig(U32, U32, U32, U64), nopython=True)
def cb_mpi_send(loc, t, ev, ud, al, peer, comm, tag, length):  # noqa: ANN001, ANN201
    return _p2p(ud, t, 0, np.int32(peer), np.int32(comm), np.int32(tag), np.int64(length), np.int64(-1))


@cfunc(sig(U32, U32, U32, U64), nopython=True)
def cb_mpi_recv(loc, t, ev, ud, al, peer, comm, tag, length):  # noqa: ANN001, ANN201
    return _p2p(ud, t, 3, np.int32(peer), np.int32(comm), np.int32(tag), np.int64(length), np.int64(-1))


@cfunc(sig(U32, U32, U32, U64, U64), nopython=True)
def cb_mpi_isend(loc, t, ev, ud, al, peer, comm, tag, length, req):  # noqa: ANN001, ANN201
    return _p2p(ud, t, 1, np.int32(peer), np.int32(comm), np.int32(tag), np.int64(length), np.int64(req))


@cfunc(sig(U32, U32, U32, U64, U64), nopython=True)
def cb_mpi_irecv(loc, t, ev, ud, al, peer, comm, tag, length, req):  # noqa: ANN001, ANN201
    return _p2p(ud, t, 5, np.int32(peer), np.int32(comm), np.int32(tag), np.int64(length), np.int64(req))


@njit(python=False)
def _request_only(ud, t, kind, req):  # noqa: ANN001, ANN202
    return _p2p(ud, t, kind, np.int32(-1), np.int32(-1), np.int32(-1), np.int64(0), np.int64(req))


@cfunc(sig(U64), nopython=True)
def cb_mpi_isend_complete(loc, t, ev, ud, al, req):  # noqa: ANN001, ANN201
    return _request_only(ud, t, 2, req)


@cfunc(sig(U64), nopython=True)
def cb_mpi_irecv_request(loc, t, ev, ud, al, req):  # noqa: ANN001, ANN201
    return _request_only(ud, t, 4, req)


@cfunc(sig(U64), nopython=True)
def cb_mpi_request_test(loc, t, ev, ud, al, req):  # noqa: ANN001, ANN201
    return _request_only(ud, t, 6, req)


@cfunc(sig(U64), nopython=True)
def cb_mpi_request_cancelled(loc, t, ev, ud, al, req):  # noqa: ANN001, ANN201
    return _request_only(ud, t, 7, req)


# --- collectives -----------------------------------------------------------
@cfunc(sig(), nopython=True)
def cb_mpi_collective_begin(loc, t, ev, ud, al):  # noqa: ANN001, ANN201
    return _coll(ud, t, 0, np.int16(-1), np.int32(-1), np.int32(-1), np.int64(0), np.int64(0), np.int64(-1))


@cfunc(sig(U8, U32, U32, U64, U64), nopython=True)
def cb_mpi_collective_end(loc, t, ev, ud, al, op, comm, root, sent, received):  # noqa: ANN001, ANN201
    return _coll(
        ud, t, 1, np.int16(op), np.int32(comm), np.int32(root), np.int64(sent), np.int64(received), np.int64(-1)
    )


# non-blocking collectives: BEGIN at the request, END at the completion, both with the request id
@cfunc(sig(U64), nopython=True)
def cb_nbc_request(loc, t, ev, ud, al, req):  # noqa: ANN001, ANN201
    return _coll(ud, t, 0, np.int16(-1), np.int32(-1), np.int32(-1), np.int64(0), np.int64(0), np.int64(req))


@cfunc(sig(U8, U32, U32, U64, U64, U64), nopython=True)
def cb_nbc_complete(loc, t, ev, ud, al, op, comm, root, sent, received, req):  # noqa: ANN001, ANN201
    return _coll(
        ud, t, 1, np.int16(op), np.int32(comm), np.int32(root), np.int64(sent), np.int64(received), np.int64(req)
    )


# --- samples ------------------------------------------------------------------
@cfunc(sig(U32, U32, U32), nopython=True)
def cb_calling_context_sample(loc, t, ev, ud, al, context, unwind, generator):  # noqa: ANN001, ANN201
    return _sample(ud, t, np.int32(context), np.float64(unwind))


# --- metrics ---------------------------------------------------------------
@cfunc(sig(U32, U8, VP, VP), nopython=True)
def cb_metric(loc, t, ev, ud, al, metric, n, type_ids, values):  # noqa: ANN001, ANN201
    st = carray(ud, (L.STATE_LEN,), np.int64)
    stf = carray(ud, (L.STATE_LEN,), np.float64)
    if metric >= st[L.S_NMREF]:
        return fail(st, L.ERR_METRIC, metric)
    offs = i64(st[L.S_MOFF])
    a = offs[metric]
    b = offs[metric + 1]
    if b <= a:
        return fail(st, L.ERR_METRIC, metric)
    m = min(b - a, np.int64(n))
    i = st[L.MET_N]
    if i + m > st[L.MET_N + 1]:
        return fail(st, L.ERR_FULL, 0)
    if m <= 0:
        return 0
    tids = carray(type_ids, (m,), np.uint8)
    vu = carray(values, (m,), np.uint64)
    vi = carray(values, (m,), np.int64)
    vf = carray(values, (m,), np.float64)
    members = i32(st[L.S_MMEM])
    tm = seconds(st, stf, t)
    pos = st[L.REG_N]
    pt, pm, pv, pp = f64(st[L.MET_T]), i32(st[L.MET_M]), f64(st[L.MET_V]), i64(st[L.MET_POS])
    for k in range(m):
        ty = tids[k]
        if ty == _TYPE_UINT64:
            v = np.float64(vu[k])
        elif ty == _TYPE_INT64:
            v = np.float64(vi[k])
        else:
            v = vf[k]
        pt[i + k] = tm
        pm[i + k] = members[a + k]
        pv[i + k] = v
        pp[i + k] = pos
    st[L.MET_N] = i + m
    return 0


# --- threads ---------------------------------------------------------------
@cfunc(sig(U8, U32), nopython=True)
def cb_thread_fork(loc, t, ev, ud, al, model, n):  # noqa: ANN001, ANN201
    return _thread(ud, t, 0, np.int32(-1), np.int32(n))


@cfunc(sig(U8), nopython=True)
def cb_thread_join(loc, t, ev, ud, al, model):  # noqa: ANN001, ANN201
    return _thread(ud, t, 1, np.int32(-1), np.int32(-1))


@cfunc(sig(U32), nopython=True)
def cb_omp_fork(loc, t, ev, ud, al, n):  # noqa: ANN001, ANN201
    return _thread(ud, t, 0, np.int32(-1), np.int32(n))


@cfunc(sig(), nopython=True)
def cb_omp_join(loc, t, ev, ud, al):  # noqa: ANN001, ANN201
    return _thread(ud, t, 1, np.int32(-1), np.int32(-1))


@cfunc(sig(U32), nopython=True)
def cb_thread_team_begin(loc, t, ev, ud, al, team):  # noqa: ANN001, ANN201
    return _thread(ud, t, 2, np.int32(team), np.int32(-1))


@cfunc(sig(U32), nopython=True)
def cb_thread_team_end(loc, t, ev, ud, al, team):  # noqa: ANN001, ANN201
    return _thread(ud, t, 3, np.int32(team), np.int32(-1))


@cfunc(sig(U32, U64), nopython=True)
def cb_thread_create(loc, t, ev, ud, al, team, seq):  # noqa: ANN001, ANN201
    return _thread(ud, t, 4, np.int32(team), np.int32(-1))


@cfunc(sig(U32, U64), nopython=True)
def cb_thread_begin(loc, t, ev, ud, al, team, seq):  # noqa: ANN001, ANN201
    return _thread(ud, t, 5, np.int32(team), np.int32(-1))


@cfunc(sig(U32, U64), nopython=True)
def cb_thread_wait(loc, t, ev, ud, al, team, seq):  # noqa: ANN001, ANN201
    return _thread(ud, t, 6, np.int32(team), np.int32(-1))


@cfunc(sig(U32, U64), nopython=True)
def cb_thread_end(loc, t, ev, ud, al, team, seq):  # noqa: ANN001, ANN201
    return _thread(ud, t, 7, np.int32(team), np.int32(-1))


# --- locks (OpenMP locks and critical sections, pthread mutexes) -------------------
@cfunc(sig(U8, U32, U32), nopython=True)
def cb_thread_acquire_lock(loc, t, ev, ud, al, model, lock, order):  # noqa: ANN001, ANN201
    return _lock(ud, t, 8, lock, order)


@cfunc(sig(U8, U32, U32), nopython=True)
def cb_thread_release_lock(loc, t, ev, ud, al, model, lock, order):  # noqa: ANN001, ANN201
    return _lock(ud, t, 9, lock, order)


@cfunc(sig(U32, U32), nopython=True)
def cb_omp_acquire_lock(loc, t, ev, ud, al, lock, order):  # noqa: ANN001, ANN201
    return _lock(ud, t, 8, lock, order)


@cfunc(sig(U32, U32), nopython=True)
def cb_omp_release_lock(loc, t, ev, ud, al, lock, order):  # noqa: ANN001, ANN201
    return _lock(ud, t, 9, lock, order)


# --- I/O operations ----------------------------------------------------------
@njit(python=False)
def _io(ud, t, kind, handle, mode, nbytes, matching):  # noqa: ANN001, ANN202
    st = carray(ud, (L.STATE_LEN,), np.int64)
    stf = carray(ud, (L.STATE_LEN,), np.float64)
    i = st[L.IO_N]
    if i >= st[L.IO_N + 1]:
        return fail(st, L.ERR_FULL, 0)
    f64(st[L.IO_T])[i] = seconds(st, stf, t)
    i8(st[L.IO_K])[i] = kind
    i32(st[L.IO_H])[i] = handle
    i8(st[L.IO_M])[i] = mode
    i64(st[L.IO_B])[i] = nbytes
    i64(st[L.IO_MATCH])[i] = matching
    i64(st[L.IO_POS])[i] = st[L.REG_N]
    st[L.IO_N] = i + 1
    return 0


@cfunc(sig(U32, U8, U32, U64, U64), nopython=True)
def cb_io_begin(loc, t, ev, ud, al, handle, mode, flags, nbytes, matching):  # noqa: ANN001, ANN201
    return _io(ud, t, 0, np.int32(handle), np.int8(mode), np.int64(nbytes), np.int64(matching))


@cfunc(sig(U32, U64, U64), nopython=True)
def cb_io_complete(loc, t, ev, ud, al, handle, nbytes, matching):  # noqa: ANN001, ANN201
    return _io(ud, t, 1, np.int32(handle), np.int8(-1), np.int64(nbytes), np.int64(matching))


_HANDLERS = {
    "Enter": cb_enter,
    "Leave": cb_leave,
    "MpiSend": cb_mpi_send,
    "MpiIsend": cb_mpi_isend,
    "MpiIsendComplete": cb_mpi_isend_complete,
    "MpiIrecvRequest": cb_mpi_irecv_request,
    "MpiRecv": cb_mpi_recv,
    "MpiIrecv": cb_mpi_irecv,
    "MpiRequestTest": cb_mpi_request_test,
    "MpiRequestCancelled": cb_mpi_request_cancelled,
    "MpiCollectiveBegin": cb_mpi_collective_begin,
    "MpiCollectiveEnd": cb_mpi_collective_end,
    "Metric": cb_metric,
    "ThreadFork": cb_thread_fork,
    "ThreadJoin": cb_thread_join,
    "ThreadTeamBegin": cb_thread_team_begin,
    "ThreadTeamEnd": cb_thread_team_end,
    "ThreadCreate": cb_thread_create,
    "ThreadBegin": cb_thread_begin,
    "ThreadWait": cb_thread_wait,
    "ThreadEnd": cb_thread_end,
    "OmpFork": cb_omp_fork,
    "OmpJoin": cb_omp_join,
    "CallingContextSample": cb_calling_context_sample,
    "NonBlockingCollectiveRequest": cb_nbc_request,
    "NonBlockingCollectiveComplete": cb_nbc_complete,
    "ThreadAcquireLock": cb_thread_acquire_lock,
    "ThreadReleaseLock": cb_thread_release_lock,
    "OmpAcquireLock": cb_omp_acquire_lock,
    "OmpReleaseLock": cb_omp_release_lock,
    "IoOperationBegin": cb_io_begin,
    "IoOperationComplete": cb_io_complete,
    "ProgramBegin": cb_program_begin,
    "ProgramEnd": cb_program_end,
}
_HANDLERS.update(RMA_HANDLERS)
assert set(_HANDLERS) == set(L.HANDLED_EVENTS)
# The kinds written above are the perflow enum values; keep them in step.
assert (P2P.SEND, P2P.ISEND, P2P.ISEND_COMPLETE, P2P.RECV, P2P.IRECV_REQUEST, P2P.IRECV) == (0, 1, 2, 3, 4, 5)
assert (P2P.REQUEST_TEST, P2P.REQUEST_CANCELLED, CollEv.BEGIN, CollEv.END) == (6, 7, 0, 1)
assert [int(k) for k in ThreadEv] == list(range(10))

_skip_engine = None
_skip_addresses: dict[str, int] = {}
#: the skip counters are compiled once per process, by one thread: the Dask engine's threaded workers decode at once
_skip_lock = threading.Lock()


def _skip_counters() -> dict[str, int]:
    """Compile one counting callback per skipped record type with llvmlite (once per process, thread-safe).

    The addresses are published only complete and only with the engine that
    owns their code kept alive: a second engine compiled by a racing thread
    would free the first one's code when dropped, and a decoder forked while
    the table held such addresses died of SIGSEGV on its first skipped record.
    """
    global _skip_engine, _skip_addresses
    if _skip_addresses:
        return _skip_addresses
    with _skip_lock:
        if not _skip_addresses:
            _skip_engine, _skip_addresses = _compile_skip_counters()
    return _skip_addresses


def _compile_skip_counters() -> tuple[object, dict[str, int]]:
    """The llvmlite engine holding the counting callbacks (keep it alive) and their addresses."""
    import llvmlite.binding as llvm
    import llvmlite.ir as ir

    i64, i32, i8p = ir.IntType(64), ir.IntType(32), ir.IntType(8).as_pointer()
    module = ir.Module(name="perflow_otf2_skip")
    fnty = ir.FunctionType(i32, [i64, i64, i64, i8p, i8p])
    for k, name in enumerate(L.SKIPPED_EVENTS):
        fn = ir.Function(module, fnty, name=f"perflow_skip_{name}")
        b = ir.IRBuilder(fn.append_basic_block())
        base = b.bitcast(fn.args[3], i64.as_pointer())
        slot = b.gep(base, [ir.Constant(i64, L.S_SKIP + k)])
        b.store(b.add(b.load(slot), ir.Constant(i64, 1)), slot)
        b.ret(ir.Constant(i32, 0))
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    tm = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    return engine, {name: engine.get_function_address(f"perflow_skip_{name}") for name in L.SKIPPED_EVENTS}


def callbacks_ready() -> bool:
    """Whether the callbacks are compiled (or loaded from the cache) in this process already."""
    return bool(_skip_addresses) or any(f.ready for f in _HANDLERS.values())


def callback_addresses() -> dict[str, int]:
    """Return ``{record type name: C function address}`` for every OTF2 event record type."""
    out = {name: f.address for name, f in _HANDLERS.items()}
    out.update(_skip_counters())
    return out
