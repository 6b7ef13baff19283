"""Instance-level trace data kept inside a trace-backed PAG.

A :class:`Trace` holds the region instances (intervals), the matched
point-to-point messages and the collective instances of a run as pandas
tables. Every row refers to top-down vertices by id and to region instances by
row number in ``intervals``; the parallel view aggregates these tables.

Columns
-------
intervals
    ``process``, ``thread`` (int32), ``vertex`` (int32, the call path),
    ``enter``, ``leave`` (float64 seconds), ``parent`` (int64 row of the
    enclosing interval, -1 at the top). Sorted by (process, thread) and, within
    a location, in enter order.
messages
    ``send_process``, ``send_thread``, ``recv_process``, ``recv_thread``,
    ``comm``, ``tag``, ``bytes``; ``send_interval`` (the region instance that
    issued the send: MPI_Send or MPI_Isend), ``send_complete_interval`` (where
    the send completed: the same for a blocking send, the Wait/Test for a
    non-blocking one, -1 when unknown), ``recv_post_interval`` (where the
    receive was posted: MPI_Recv or MPI_Irecv, -1 when unknown),
    ``recv_interval`` (where the receive completed: MPI_Recv or the
    Wait/Test); ``send_time``, ``recv_time`` (times of the send and
    receive-completion events); ``mode`` (0 standard, 1 synchronous,
    2 non-blocking); ``clock_violation`` (the send event is later than the
    receive completion: the timestamps cannot be trusted for this message).
locations
    One row per location of the source: ``process``, ``thread`` (int32),
    ``name`` and ``type`` (``"cpu"``, ``"gpu"``, ...; see
    :class:`perflow.trace.raw.RawTrace`); empty when the source named none.
    A GPU stream is a location of type ``"gpu"`` whose thread number follows
    its process's CPU threads.
collectives
    One row per (instance, participant): ``instance`` (int64), ``process``,
    ``thread``, ``interval`` (row in intervals of the MPI call), ``op``
    (:class:`perflow.kinds.CollectiveOp`), ``comm``, ``root`` (world rank or
    -1), ``sent``, ``received`` (bytes), ``begin``, ``end`` (times of the
    collective begin/end events, or the call's enter/leave).
locks
    One row per lock acquisition (OpenMP locks and critical sections,
    pthread mutexes): ``process``, ``thread`` (the acquiring thread),
    ``interval`` (the region instance open at the acquisition: the lock call
    or critical construct, -1 when none), ``lock`` (the trace's lock id),
    ``order`` (acquisition number of the lock, over all threads),
    ``acquire``, ``release`` (times; NaN when never released),
    ``release_interval`` (the instance open at the release, -1 when none).
    Sorted by (process, lock, order).
io
    One row per I/O operation: ``process``, ``thread``, ``interval`` (the
    region instance open at its begin: the I/O call, -1 when none),
    ``handle`` (the trace's I/O handle id; names in ``io_handles``), ``mode``
    (:class:`perflow.kinds.IoMode`: 0 read, 1 write, 2 flush; -1 unknown),
    ``bytes`` (transferred), ``begin``, ``end`` (times). Sorted by (process,
    thread, begin).
rma
    One row per RMA record (MPI one-sided communication, SHMEM) except the
    completions, which are folded into their transfers: ``process``,
    ``thread``, ``interval`` (the region instance open at the record: the
    ``MPI_Put``/``MPI_Win_fence``/... call, -1 when none), ``kind``
    (:class:`perflow.kinds.RmaEv`), ``win`` (window id; its communicator in
    ``rma_windows``), ``remote`` (world rank of the target, or of the root of
    a window collective; -1 none), ``group`` (the group of a group sync, its
    world ranks in ``rma_groups``; -1 none), ``op`` (collective op, lock,
    sync or atomic type), ``level`` (sync level bits), ``bytes`` (put or
    sent), ``received`` (got), ``matching`` (transfer id, lock id on lock
    rows), ``time``; on transfers ``complete`` (time of the local completion,
    NaN when none) and ``complete_interval``. Sorted by (process, thread),
    stream order within.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "Trace",
    "stack_rows",
    "take_rows",
    "take_or",
    "location_table",
    "INTERVAL_COLUMNS",
    "MESSAGE_COLUMNS",
    "COLLECTIVE_COLUMNS",
    "LOCK_COLUMNS",
    "IO_COLUMNS",
    "RMA_COLUMNS",
]

INTERVAL_COLUMNS = {
    "process": np.int32,
    "thread": np.int32,
    "vertex": np.int32,
    "enter": np.float64,
    "leave": np.float64,
    "parent": np.int64,
}
MESSAGE_COLUMNS = {
    "send_process": np.int32,
    "send_thread": np.int32,
    "recv_process": np.int32,
    "recv_thread": np.int32,
    "comm": np.int32,
    "tag": np.int32,
    "bytes": np.int64,
    "send_interval": np.int64,
    "send_complete_interval": np.int64,
    "recv_post_interval": np.int64,
    "recv_interval": np.int64,
    "send_time": np.float64,
    "recv_time": np.float64,
    "mode": np.int8,
    "clock_violation": np.bool_,
}
COLLECTIVE_COLUMNS = {
    "instance": np.int64,
    "process": np.int32,
    "thread": np.int32,
    "interval": np.int64,
    "op": np.int16,
    "comm": np.int32,
    "root": np.int32,
    "sent": np.int64,
    "received": np.int64,
    "begin": np.float64,
    "end": np.float64,
}

LOCK_COLUMNS = {
    "process": np.int32,
    "thread": np.int32,
    "interval": np.int64,
    "lock": np.int64,
    "order": np.int64,
    "acquire": np.float64,
    "release": np.float64,
    "release_interval": np.int64,
}

IO_COLUMNS = {
    "process": np.int32,
    "thread": np.int32,
    "interval": np.int64,
    "handle": np.int32,
    "mode": np.int8,
    "bytes": np.int64,
    "begin": np.float64,
    "end": np.float64,
}

RMA_COLUMNS = {
    "process": np.int32,
    "thread": np.int32,
    "interval": np.int64,
    "kind": np.int8,
    "win": np.int32,
    "remote": np.int32,
    "group": np.int32,
    "op": np.int16,
    "level": np.int32,
    "bytes": np.int64,
    "received": np.int64,
    "matching": np.int64,
    "time": np.float64,
    "complete": np.float64,
    "complete_interval": np.int64,
}

TABLE_SCHEMAS = {
    "intervals": INTERVAL_COLUMNS,
    "messages": MESSAGE_COLUMNS,
    "collectives": COLLECTIVE_COLUMNS,
    "locks": LOCK_COLUMNS,
    "io": IO_COLUMNS,
    "rma": RMA_COLUMNS,
}


def conform(name: str, df: pd.DataFrame | dict[str, Any] | None) -> pd.DataFrame:
    """Return ``df`` with exactly the schema's columns and dtypes (missing ones raise)."""
    schema = TABLE_SCHEMAS[name]
    if df is None:
        return pd.DataFrame({c: np.zeros(0, dtype=t) for c, t in schema.items()})
    if isinstance(df, dict):
        df = pd.DataFrame(df, copy=False)
    missing = [c for c in schema if c not in df.columns]
    if missing:
        raise ValueError(f"trace table {name!r} lacks columns {missing}")
    out = pd.DataFrame(
        {c: np.ascontiguousarray(df[c].to_numpy(), dtype=t) for c, t in schema.items()},
        copy=False,
    )
    extra = [c for c in df.columns if c not in schema]
    for c in extra:
        out[c] = df[c].to_numpy()
    return out


def stack_rows(frames: list[pd.DataFrame], columns: list[str], order: np.ndarray | None = None) -> pd.DataFrame:
    """``columns`` of the frames one after the other, rows taken in ``order`` (None: as they come).

    Column by column in numpy: one copy of each column, whatever the pandas
    version (``concat`` then ``take`` then ``reset_index`` copies up to three times).
    In an ``order`` (a permutation of the stacked rows), each frame's rows
    are scattered straight to their places, with no stacked column in between.
    Columns that are consecutive slices of one array (partitions that wrote
    into shared columns) are taken as that array's slice, without a copy.
    """
    cols = {}
    if order is None or len(frames) == 1:
        for c in columns:
            parts = [f[c].to_numpy() for f in frames]
            a = parts[0] if len(parts) == 1 else _joined(parts)
            if a is None:
                a = np.concatenate(parts)
            cols[c] = a[order] if order is not None else a
        return pd.DataFrame(cols, copy=False)
    n = sum(len(f) for f in frames)
    where = np.empty(n, dtype=np.int64)  # the place of each stacked row
    where[order] = np.arange(n)
    for c in columns:
        parts = [f[c].to_numpy() for f in frames]
        out = np.empty(n, dtype=np.result_type(*parts))  # the dtype np.concatenate gives
        start = 0
        for a in parts:
            out[where[start : start + len(a)]] = a
            start += len(a)
        cols[c] = out
    return pd.DataFrame(cols, copy=False)


def _joined(parts: list[np.ndarray]) -> np.ndarray | None:
    """The slice of one array that ``parts`` are consecutive slices of, in order; None when they are not."""
    root = parts[0].base
    if not isinstance(root, np.ndarray) or root.ndim != 1 or not root.flags.c_contiguous:
        return None
    addr = parts[0].__array_interface__["data"][0]
    start = addr - root.__array_interface__["data"][0]
    for a in parts:
        if a.base is not root or a.dtype != root.dtype or a.ndim != 1 or not a.flags.c_contiguous:
            return None
        if a.__array_interface__["data"][0] != addr:
            return None
        addr += a.nbytes
    k = start // root.itemsize
    return root[k : k + sum(len(a) for a in parts)]


def take_rows(frame: pd.DataFrame, rows: np.ndarray, columns: list[str] | None = None) -> pd.DataFrame:
    """Rows ``rows`` of ``frame`` (some ``columns``), with a fresh range index: one copy per column."""
    cols = list(frame.columns) if columns is None else columns
    return pd.DataFrame({c: frame[c].to_numpy()[rows] for c in cols}, copy=False)


def take_or(values: np.ndarray, idx: np.ndarray, fill: Any) -> np.ndarray:
    """``values[idx]``, with ``fill`` where ``idx`` is -1 (no row): one gather.

    ``idx`` holds row numbers or -1; ``values`` may be empty (then every
    ``idx`` must be -1). The result's dtype holds both ``values`` and ``fill``.
    """
    values = np.asarray(values)
    idx = np.asarray(idx)
    dtype = np.result_type(values.dtype, np.min_scalar_type(fill))
    if not len(values):
        return np.full(len(idx), fill, dtype=dtype)
    out = values.take(np.maximum(idx, 0)).astype(dtype, copy=False)  # the cost is that of idx, not of values
    out[idx < 0] = fill
    return out


def location_table(locations: pd.DataFrame | dict[str, Any] | None) -> pd.DataFrame:
    """``process``, ``thread``, ``name``, ``type`` of some locations (name ``""`` and type ``"cpu"`` when absent)."""
    df = pd.DataFrame(locations if locations is not None else {}, copy=False)
    n = len(df)
    return pd.DataFrame(
        {
            "process": df["process"].to_numpy(np.int32) if "process" in df else np.zeros(n, np.int32),
            "thread": df["thread"].to_numpy(np.int32) if "thread" in df else np.zeros(n, np.int32),
            "name": df["name"].astype(str).to_numpy(object) if "name" in df else np.full(n, "", dtype=object),
            "type": df["type"].astype(str).to_numpy(object) if "type" in df else np.full(n, "cpu", dtype=object),
        }
    )


@dataclass(frozen=True)
class Trace:
    """Instance-level data of a trace-backed PAG (see the module docstring for columns)."""

    intervals: pd.DataFrame
    messages: pd.DataFrame = field(default_factory=lambda: conform("messages", None))
    collectives: pd.DataFrame = field(default_factory=lambda: conform("collectives", None))
    comms: dict[int, np.ndarray] = field(default_factory=dict)
    comm_names: dict[int, str] = field(default_factory=dict)
    locks: pd.DataFrame = field(default_factory=lambda: conform("locks", None))
    io: pd.DataFrame = field(default_factory=lambda: conform("io", None))
    #: I/O handle id -> name (the file, when the trace names one)
    io_handles: dict[int, str] = field(default_factory=dict)
    locations: pd.DataFrame = field(default_factory=lambda: location_table(None))
    rma: pd.DataFrame = field(default_factory=lambda: conform("rma", None))
    #: RMA window id -> {"name": str, "comm": communicator id}
    rma_windows: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: group id (of RMA group syncs) -> world ranks of its members
    rma_groups: dict[int, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "intervals", conform("intervals", self.intervals))
        object.__setattr__(self, "messages", conform("messages", self.messages))
        object.__setattr__(self, "collectives", conform("collectives", self.collectives))
        object.__setattr__(self, "locks", conform("locks", self.locks))
        object.__setattr__(self, "io", conform("io", self.io))
        object.__setattr__(self, "rma", conform("rma", self.rma))
        object.__setattr__(self, "locations", location_table(self.locations))

    def locations_of_type(self, kind: str) -> pd.DataFrame:
        """The ``process``/``thread`` rows of :attr:`locations` of one type (``"gpu"``: the GPU streams)."""
        loc = self.locations
        return loc.loc[loc["type"].to_numpy() == kind, ["process", "thread"]].reset_index(drop=True)

    @property
    def n_intervals(self) -> int:
        """Number of region instances."""
        return len(self.intervals)

    @property
    def span(self) -> tuple[float, float]:
        """(first enter, last leave) over all intervals."""
        iv = self.intervals
        if not len(iv):
            return (0.0, 0.0)
        return float(iv["enter"].min()), float(iv["leave"].max())

    def memory_bytes(self) -> int:
        """Bytes held by the three tables."""
        return int(
            sum(
                t.memory_usage(index=True, deep=False).sum()
                for t in (self.intervals, self.messages, self.collectives, self.locks, self.io, self.rma)
            )
        )

    def interval_vertex(self, rows: np.ndarray) -> np.ndarray:
        """Vertex (call path) of each interval row; -1 stays -1."""
        rows = np.asarray(rows, dtype=np.int64)
        v = self.intervals["vertex"].to_numpy()
        out = np.full(len(rows), -1, dtype=np.int64)
        ok = rows >= 0
        out[ok] = v[rows[ok]]
        return out
