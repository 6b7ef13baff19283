"""Names and state layout shared by the OTF2 decoders (no numba import here).

State layout of the fast decoder's callbacks (indices into one int64 vector)::

    S_ERR, S_ERRREF      error code set by a callback, offending reference
    S_OFF, S_RES         global offset (ticks, as int64 bits), timer resolution (float64 bits)
    S_RMAP, S_NRMAP      region ref -> dense id map (int32*), its length
    S_MOFF, S_NMREF      metric ref CSR offsets (int64*), number of metric refs
    S_MMEM               metric members (int32*)
    S_PROG               program name (string ref) of the location's ProgramBegin, -1 none
    table blocks         per table (TABLE_BASE): row count, capacity, one pointer per column
    S_SKIP..             one counter per skipped record type (SKIPPED_EVENTS order)
"""

from __future__ import annotations

import numpy as np

from ...trace import raw

#: every OTF2 3.x event record type, as named by OTF2_EvtReaderCallbacks_Set<Name>Callback
ALL_EVENTS = (
    "BufferFlush MeasurementOnOff Enter Leave MpiSend MpiIsend MpiIsendComplete MpiIrecvRequest MpiRecv MpiIrecv "
    "MpiRequestTest MpiRequestCancelled MpiCollectiveBegin MpiCollectiveEnd OmpFork OmpJoin OmpAcquireLock "
    "OmpReleaseLock OmpTaskCreate OmpTaskSwitch OmpTaskComplete Metric ParameterString ParameterInt "
    "ParameterUnsignedInt RmaWinCreate RmaWinDestroy RmaCollectiveBegin RmaCollectiveEnd RmaGroupSync "
    "RmaRequestLock RmaAcquireLock RmaTryLock RmaReleaseLock RmaSync RmaWaitChange RmaPut RmaGet RmaAtomic "
    "RmaOpCompleteBlocking RmaOpCompleteNonBlocking RmaOpTest RmaOpCompleteRemote ThreadFork ThreadJoin "
    "ThreadTeamBegin ThreadTeamEnd ThreadAcquireLock ThreadReleaseLock ThreadTaskCreate ThreadTaskSwitch "
    "ThreadTaskComplete ThreadCreate ThreadBegin ThreadWait ThreadEnd CallingContextEnter CallingContextLeave "
    "CallingContextSample IoCreateHandle IoDestroyHandle IoDuplicateHandle IoSeek IoChangeStatusFlags "
    "IoDeleteFile IoOperationBegin IoOperationTest IoOperationIssued IoOperationComplete IoOperationCancelled "
    "IoAcquireLock IoReleaseLock IoTryLock ProgramBegin ProgramEnd NonBlockingCollectiveRequest "
    "NonBlockingCollectiveComplete CommCreate CommDestroy MpiProbe MpiMrecv MpiImrecvRequest MpiImrecv"
).split()

HANDLED_EVENTS = (
    "Enter Leave MpiSend MpiIsend MpiIsendComplete MpiIrecvRequest MpiRecv MpiIrecv MpiRequestTest "
    "MpiRequestCancelled MpiCollectiveBegin MpiCollectiveEnd Metric ThreadFork ThreadJoin ThreadTeamBegin "
    "ThreadTeamEnd ThreadCreate ThreadBegin ThreadWait ThreadEnd OmpFork OmpJoin CallingContextSample "
    "NonBlockingCollectiveRequest NonBlockingCollectiveComplete ThreadAcquireLock ThreadReleaseLock "
    "OmpAcquireLock OmpReleaseLock IoOperationBegin IoOperationComplete ProgramBegin ProgramEnd"
).split() + [n for n in ALL_EVENTS if n.startswith("Rma")]

#: record types perflow counts in attrs["skipped_events"] and otherwise ignores
SKIPPED_EVENTS = tuple(n for n in ALL_EVENTS if n not in HANDLED_EVENTS)

#: per-location columns of each table (the raw-trace columns without ``location``; ``pos`` is location-local)
TABLE_COLUMNS: dict[str, dict[str, np.dtype]] = {
    "region_events": {c: d for c, d in raw.REGION_COLUMNS.items() if c != "location"},
    "p2p_events": {c: d for c, d in raw.P2P_COLUMNS.items() if c != "location"},
    "coll_events": {
        **{c: d for c, d in raw.COLL_COLUMNS.items() if c != "location"},
        "request": raw.OPTIONAL_COLUMNS["coll_events"]["request"][0],
    },
    "metric_events": {c: d for c, d in raw.METRIC_COLUMNS.items() if c != "location"},
    "thread_events": {
        **{c: d for c, d in raw.THREAD_COLUMNS.items() if c != "location"},
        **{c: d for c, (d, _) in raw.OPTIONAL_COLUMNS["thread_events"].items()},
    },
    # while decoding, ``stack`` holds the OTF2 calling-context ref and ``weight`` the unwind distance
    # (turned into a stack id and the sampling period by _assemble)
    "sample_events": {c: d for c, d in raw.SAMPLE_COLUMNS.items() if c != "location"},
    "io_events": {c: d for c, d in raw.IO_COLUMNS.items() if c != "location"},
    "rma_events": {c: d for c, d in raw.RMA_COLUMNS.items() if c != "location"},
}

S_ERR, S_ERRREF, S_OFF, S_RES, S_RMAP, S_NRMAP, S_MOFF, S_NMREF, S_MMEM, S_PROG = range(10)
TABLE_BASE: dict[str, int] = {}
_i = 10
for _name, _cols in TABLE_COLUMNS.items():
    TABLE_BASE[_name] = _i
    _i += 2 + len(_cols)
S_SKIP = _i
STATE_LEN = S_SKIP + len(SKIPPED_EVENTS)

ERR_REGION, ERR_METRIC, ERR_FULL = 1, 2, 3


def _col(table: str, column: str) -> int:
    return TABLE_BASE[table] + 2 + list(TABLE_COLUMNS[table]).index(column)


# State slots as plain module constants (numba freezes them at compile time).
REG_N = TABLE_BASE["region_events"]
REG_T, REG_K, REG_R = (_col("region_events", c) for c in ("time", "kind", "region"))
P2P_N = TABLE_BASE["p2p_events"]
P2P_T, P2P_K, P2P_PEER, P2P_COMM, P2P_TAG, P2P_BYTES, P2P_REQ, P2P_POS = (
    _col("p2p_events", c) for c in ("time", "kind", "peer", "comm", "tag", "bytes", "request", "pos")
)
COLL_N = TABLE_BASE["coll_events"]
COLL_T, COLL_K, COLL_OP, COLL_COMM, COLL_ROOT, COLL_SENT, COLL_RECV, COLL_POS, COLL_REQ = (
    _col("coll_events", c) for c in ("time", "kind", "op", "comm", "root", "sent", "received", "pos", "request")
)
MET_N = TABLE_BASE["metric_events"]
MET_T, MET_M, MET_V, MET_POS = (_col("metric_events", c) for c in ("time", "metric", "value", "pos"))
THR_N = TABLE_BASE["thread_events"]
THR_T, THR_K, THR_TEAM, THR_COUNT, THR_POS, THR_LOCK, THR_ORDER = (
    _col("thread_events", c) for c in ("time", "kind", "team", "count", "pos", "lock", "order")
)
SMP_N = TABLE_BASE["sample_events"]
SMP_T, SMP_S, SMP_W, SMP_POS = (_col("sample_events", c) for c in ("time", "stack", "weight", "pos"))
IO_N = TABLE_BASE["io_events"]
IO_T, IO_K, IO_H, IO_M, IO_B, IO_MATCH, IO_POS = (
    _col("io_events", c) for c in ("time", "kind", "handle", "mode", "bytes", "matching", "pos")
)
RMA_N = TABLE_BASE["rma_events"]
RMA_T, RMA_K, RMA_W, RMA_R, RMA_G, RMA_OP, RMA_LV, RMA_B, RMA_RB, RMA_MATCH, RMA_POS = (
    _col("rma_events", c)
    for c in ("time", "kind", "win", "remote", "group", "op", "level", "bytes", "received", "matching", "pos")
)
