"""The reference OTF2 decoder: the ``otf2`` Python bindings' event reader.

Slow (one Python object per event, ~0.1-0.2 M events/s) but independent of
the fast decoder's machinery; the tests check that both give identical
tables. Events arrive merged in time order; each goes to its location's
typed column buffers (:class:`array.array`), so stream order per location is
kept.
"""

from __future__ import annotations

from array import array
from collections import Counter
from typing import Any

import numpy as np

from ...errors import FormatError
from ...kinds import P2P, CollEv, IoEv, RmaEv, ThreadEv
from ._assemble import assemble, concat_parts
from ._defs import Defs
from ._layout import TABLE_COLUMNS

__all__ = ["decode_events"]

_TYPECODE = {np.dtype(np.int8): "b", np.dtype(np.int16): "h", np.dtype(np.int32): "i", np.dtype(np.int64): "q"}
_UNDEF32 = 0xFFFFFFFF
_UNDEF64 = 0xFFFFFFFFFFFFFFFF


def _s32(x: Any) -> int:
    """OTF2 uint32 (or a definition object, or None) -> perflow int32 (-1 for undefined)."""
    if x is None:
        return -1
    if hasattr(x, "_ref"):
        x = x._ref
    x = int(x)
    return x - (1 << 32) if x >= (1 << 31) else x


def _s64(x: Any) -> int:
    x = int(x)
    return x - (1 << 64) if x >= (1 << 63) else x


class _Loc:
    """Column buffers of one location. Times are kept as OTF2 ticks and converted at the end."""

    __slots__ = ("cols", "skipped")

    def __init__(self) -> None:
        self.cols: dict[str, dict[str, array]] = {}
        for table, cols in TABLE_COLUMNS.items():
            self.cols[table] = {
                c: array("Q" if c == "time" else ("d" if dt == np.float64 else _TYPECODE[np.dtype(dt)]))
                for c, dt in cols.items()
            }


def _row(loc: _Loc, table: str, time: int, **values: int | float) -> None:
    cols = loc.cols[table]
    cols["time"].append(time)
    if "pos" in cols:
        cols["pos"].append(len(loc.cols["region_events"]["time"]))
    for c, v in values.items():
        cols[c].append(v)


def decode_events(reader: Any, defs: Defs, present: list[bool] | None = None) -> tuple[Any, np.ndarray]:
    """Read every event through ``reader`` (an open :class:`otf2.reader.Reader`) and build the RawTrace.

    Returns the RawTrace and the number of event records decoded per location.

    ``present[i]`` false: location ``i`` has no event file (and declares no events); it is not read.
    """
    index = {int(r): i for i, r in enumerate(defs.loc_refs)}
    events = reader.events
    if present is not None and not all(present):
        wanted = {int(r) for r, p in zip(defs.loc_refs, present) if p}
        events = reader.events([loc for loc in reader.definitions.locations if int(loc._ref) in wanted])
    locs = [_Loc() for _ in range(len(index))]
    skipped: Counter[str] = Counter()
    rmap = defs.region_map
    moff, mmem = defs.metric_offsets, defs.metric_members

    def p2p(lo: _Loc, ev: Any, kind: int, peer: Any, with_msg: bool, req: Any) -> None:
        if with_msg:
            _row(
                lo,
                "p2p_events",
                ev.time,
                kind=kind,
                peer=_s32(peer),
                comm=_s32(ev.communicator),
                tag=_s32(ev.msg_tag),
                bytes=_s64(ev.msg_length),
                request=-1 if req is None else _s64(req),
            )
        else:
            _row(lo, "p2p_events", ev.time, kind=kind, peer=-1, comm=-1, tag=-1, bytes=0, request=_s64(req))

    decoded = np.zeros(len(index), dtype=np.int64)
    program: str | None = None
    prog_region = len(defs.regions)  # the artificial program region (see _assemble.program_region)
    for location, ev in events:
        li = index[int(location._ref)]
        decoded[li] += 1
        lo = locs[li]
        name = type(ev).__name__
        if name in ("Enter", "Leave"):
            ref = int(ev.region._ref)
            d = int(rmap[ref]) if ref < len(rmap) else -1
            if d < 0:
                raise FormatError(defs.source, f"undefined region {ref}")
            _row(lo, "region_events", ev.time, kind=0 if name == "Enter" else 1, region=d)
        elif name == "ProgramBegin":
            if program is None:
                program = str(ev.program_name) if ev.program_name is not None else ""
            _row(lo, "region_events", ev.time, kind=0, region=prog_region)
        elif name == "ProgramEnd":
            _row(lo, "region_events", ev.time, kind=1, region=prog_region)
        elif name == "MpiSend":
            p2p(lo, ev, P2P.SEND, ev.receiver, True, None)
        elif name == "MpiIsend":
            p2p(lo, ev, P2P.ISEND, ev.receiver, True, ev.request_id)
        elif name == "MpiRecv":
            p2p(lo, ev, P2P.RECV, ev.sender, True, None)
        elif name == "MpiIrecv":
            p2p(lo, ev, P2P.IRECV, ev.sender, True, ev.request_id)
        elif name == "MpiIsendComplete":
            p2p(lo, ev, P2P.ISEND_COMPLETE, None, False, ev.request_id)
        elif name == "MpiIrecvRequest":
            p2p(lo, ev, P2P.IRECV_REQUEST, None, False, ev.request_id)
        elif name == "MpiRequestTest":
            p2p(lo, ev, P2P.REQUEST_TEST, None, False, ev.request_id)
        elif name == "MpiRequestCancelled":
            p2p(lo, ev, P2P.REQUEST_CANCELLED, None, False, ev.request_id)
        elif name in ("MpiCollectiveBegin", "NonBlockingCollectiveRequest"):
            req = _s64(ev.request_id) if name == "NonBlockingCollectiveRequest" else -1
            _row(
                lo, "coll_events", ev.time, kind=CollEv.BEGIN, op=-1, comm=-1, root=-1, sent=0, received=0, request=req
            )
        elif name in ("MpiCollectiveEnd", "NonBlockingCollectiveComplete"):
            _row(
                lo,
                "coll_events",
                ev.time,
                kind=CollEv.END,
                op=int(ev.collective_op.value),
                comm=_s32(ev.communicator),
                root=_s32(ev.root),
                sent=_s64(ev.size_sent),
                received=_s64(ev.size_received),
                request=_s64(ev.request_id) if name == "NonBlockingCollectiveComplete" else -1,
            )
        elif name == "CallingContextSample":
            cc = _s32(ev.calling_context)
            _row(lo, "sample_events", ev.time, stack=cc, weight=float(ev.unwind_distance))
        elif name == "Metric":
            ref = int(ev.metric._ref)
            a, b = int(moff[ref]), int(moff[ref + 1])
            for k, v in enumerate(ev.values[: b - a]):
                _row(lo, "metric_events", ev.time, metric=int(mmem[a + k]), value=float(v))
        elif name in ("ThreadFork", "OmpFork"):
            n = _s32(ev.number_of_requested_threads)
            _row(lo, "thread_events", ev.time, kind=ThreadEv.FORK, team=-1, count=n, lock=-1, order=-1)
        elif name in ("ThreadJoin", "OmpJoin"):
            _row(lo, "thread_events", ev.time, kind=ThreadEv.JOIN, team=-1, count=-1, lock=-1, order=-1)
        elif name == "IoOperationBegin":
            mode = int(getattr(ev.mode, "value", ev.mode))
            h, b, mt = _s32(ev.handle), _s64(ev.bytes_request), _s64(ev.matching_id)
            _row(lo, "io_events", ev.time, kind=IoEv.BEGIN, handle=h, mode=mode, bytes=b, matching=mt)
        elif name == "IoOperationComplete":
            h, b, mt = _s32(ev.handle), _s64(ev.bytes_result), _s64(ev.matching_id)
            _row(lo, "io_events", ev.time, kind=IoEv.COMPLETE, handle=h, mode=-1, bytes=b, matching=mt)
        elif name.startswith("Rma"):
            _rma_row(lo, name, ev)
        elif name in _LOCKS:
            lock, order = int(ev.lock_id), int(ev.acquisition_order)
            _row(lo, "thread_events", ev.time, kind=_LOCKS[name], team=-1, count=-1, lock=lock, order=order)
        elif name in _THREAD_TEAM:
            team = _s32(ev.thread_team)
            _row(lo, "thread_events", ev.time, kind=_THREAD_TEAM[name], team=team, count=-1, lock=-1, order=-1)
        elif name in _THREAD_CONTINGENT:
            team = _s32(ev.thread_contingent)
            _row(lo, "thread_events", ev.time, kind=_THREAD_CONTINGENT[name], team=team, count=-1, lock=-1, order=-1)
        else:
            skipped[name] += 1
    parts = [_finish(lo, defs) for lo in locs]
    del locs
    tables, counts = concat_parts(parts)
    return assemble(defs, tables, counts, dict(skipped), "bindings", program), decoded


def _num(x: Any) -> int:
    """An OTF2 enum or flag value (or a plain int) -> int."""
    return int(getattr(x, "value", x))


def _rma_row(lo: _Loc, name: str, ev: Any) -> None:
    """One ``rma_events`` row of an ``Rma*`` record (the columns of :data:`perflow.trace.raw.RMA_COLUMNS`)."""
    kind = RmaEv[_RMA_KIND[name]]
    v = {"win": -1, "remote": -1, "group": -1, "op": -1, "level": 0, "bytes": 0, "received": 0, "matching": -1}
    if hasattr(ev, "win"):
        v["win"] = _s32(ev.win)
    if kind == RmaEv.COLLECTIVE_END:
        v.update(remote=_s32(ev.root), op=_num(ev.collective_op), level=_num(ev.sync_level))
        v.update(bytes=_s64(ev.bytes_sent), received=_s64(ev.bytes_received))
    elif kind == RmaEv.GROUP_SYNC:
        v.update(group=_s32(ev.group), level=_num(ev.sync_level))
    elif name in ("RmaRequestLock", "RmaAcquireLock", "RmaTryLock", "RmaReleaseLock"):
        v.update(remote=_s32(ev.remote), matching=_s64(ev.lock_id))
        if hasattr(ev, "lock_type"):
            v["op"] = _num(ev.lock_type)
    elif kind == RmaEv.SYNC:
        v.update(remote=_s32(ev.remote), op=_num(ev.sync_type))
    elif kind in (RmaEv.PUT, RmaEv.GET):
        v.update(remote=_s32(ev.remote), matching=_s64(ev.matching_id))
        v["bytes" if kind == RmaEv.PUT else "received"] = _s64(ev.bytes)
    elif kind == RmaEv.ATOMIC:
        v.update(remote=_s32(ev.remote), op=_num(ev.type), matching=_s64(ev.matching_id))
        v.update(bytes=_s64(ev.bytes_sent), received=_s64(ev.bytes_received))
    elif hasattr(ev, "matching_id"):
        v["matching"] = _s64(ev.matching_id)
    _row(lo, "rma_events", ev.time, kind=int(kind), **v)


#: OTF2 record name -> RmaEv member name
_RMA_KIND = {
    "RmaWinCreate": "WIN_CREATE",
    "RmaWinDestroy": "WIN_DESTROY",
    "RmaCollectiveBegin": "COLLECTIVE_BEGIN",
    "RmaCollectiveEnd": "COLLECTIVE_END",
    "RmaGroupSync": "GROUP_SYNC",
    "RmaRequestLock": "REQUEST_LOCK",
    "RmaAcquireLock": "ACQUIRE_LOCK",
    "RmaTryLock": "TRY_LOCK",
    "RmaReleaseLock": "RELEASE_LOCK",
    "RmaSync": "SYNC",
    "RmaWaitChange": "WAIT_CHANGE",
    "RmaPut": "PUT",
    "RmaGet": "GET",
    "RmaAtomic": "ATOMIC",
    "RmaOpCompleteBlocking": "OP_COMPLETE_BLOCKING",
    "RmaOpCompleteNonBlocking": "OP_COMPLETE_NON_BLOCKING",
    "RmaOpTest": "OP_TEST",
    "RmaOpCompleteRemote": "OP_COMPLETE_REMOTE",
}

_LOCKS = {
    "ThreadAcquireLock": ThreadEv.ACQUIRE_LOCK,
    "ThreadReleaseLock": ThreadEv.RELEASE_LOCK,
    "OmpAcquireLock": ThreadEv.ACQUIRE_LOCK,
    "OmpReleaseLock": ThreadEv.RELEASE_LOCK,
}
_THREAD_TEAM = {"ThreadTeamBegin": ThreadEv.TEAM_BEGIN, "ThreadTeamEnd": ThreadEv.TEAM_END}
_THREAD_CONTINGENT = {
    "ThreadCreate": ThreadEv.CREATE,
    "ThreadBegin": ThreadEv.BEGIN,
    "ThreadWait": ThreadEv.WAIT,
    "ThreadEnd": ThreadEv.END,
}


class _Done:
    __slots__ = ("tables",)

    def __init__(self, tables: dict[str, dict[str, np.ndarray]]) -> None:
        self.tables = tables


def _finish(lo: _Loc, defs: Defs) -> _Done:
    off = np.uint64(defs.global_offset)
    res = np.float64(defs.timer_resolution)
    tables = {}
    for table, cols in lo.cols.items():
        out = {}
        for c, buf in cols.items():
            a = np.frombuffer(buf, dtype=np.uint64 if c == "time" else TABLE_COLUMNS[table][c]).copy()
            if c == "time":
                a = (a - off).view(np.int64).astype(np.float64) / res
            out[c] = a
        tables[table] = out
    return _Done(tables)
