"""The raw trace: decoded events as columnar tables, before any analysis.

Every trace source (the OTF2 decoders, the recorder, Chrome traces, HPCToolkit
``trace.db``, :mod:`perflow.synthetic`) produces a :class:`RawTrace`;
:func:`perflow.trace.build.build_pag` turns one into a PAG. A raw trace holds
no Python object per event: each event class is a dict of equal-length numpy
arrays.

Ordering contract
-----------------
* ``locations`` rows are numbered ``0..L-1``; every event table's ``location``
  column refers to that number.
* ``region_events`` is sorted by ``location`` and, within a location, in
  stream order (the order in which the events were recorded; times are
  non-decreasing within a location).
* Every other event table carries ``pos``: the index into ``region_events``
  of the first region event that follows the event in its location's stream
  (equivalently, the number of region events, over all locations, that sort
  before it). Within a location, ``pos`` is non-decreasing in stream order,
  and each table is sorted by ``(location, pos)`` with ties in stream order.
  ``pos`` is what places a message or collective event inside its enclosing
  region instance; times alone cannot, as they tie.
* Times are float64 seconds since the trace's start (the OTF2 global offset).
* Ranks in ``p2p_events['peer']`` and ``coll_events['root']`` are
  communicator-local; ``comms`` maps them to world ranks (processes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import TraceError
from .rawcheck import ENTER, LEAVE, key_order, region_order

__all__ = [
    "RawTrace",
    "REGION_COLUMNS",
    "P2P_COLUMNS",
    "COLL_COLUMNS",
    "METRIC_COLUMNS",
    "SAMPLE_COLUMNS",
    "THREAD_COLUMNS",
    "IO_COLUMNS",
    "RMA_COLUMNS",
    "OPTIONAL_COLUMNS",
    "ENTER",
    "LEAVE",
    "empty_table",
    "TABLE_SCHEMAS",
]


#: region_events: location, time, kind (ENTER=0 / LEAVE=1), region (id into ``regions``).
REGION_COLUMNS: dict[str, np.dtype] = {
    "location": np.dtype(np.int32),
    "time": np.dtype(np.float64),
    "kind": np.dtype(np.int8),
    "region": np.dtype(np.int32),
}
#: p2p_events: kind is :class:`perflow.kinds.P2P`; request is -1 when none.
P2P_COLUMNS: dict[str, np.dtype] = {
    "location": np.dtype(np.int32),
    "time": np.dtype(np.float64),
    "kind": np.dtype(np.int8),
    "peer": np.dtype(np.int32),
    "comm": np.dtype(np.int32),
    "tag": np.dtype(np.int32),
    "bytes": np.dtype(np.int64),
    "request": np.dtype(np.int64),
    "pos": np.dtype(np.int64),
}
#: coll_events: kind is :class:`perflow.kinds.CollEv`; op is :class:`perflow.kinds.CollectiveOp`
#: (meaningful on END events); root is -1 when the operation has none.
COLL_COLUMNS: dict[str, np.dtype] = {
    "location": np.dtype(np.int32),
    "time": np.dtype(np.float64),
    "kind": np.dtype(np.int8),
    "op": np.dtype(np.int16),
    "comm": np.dtype(np.int32),
    "root": np.dtype(np.int32),
    "sent": np.dtype(np.int64),
    "received": np.dtype(np.int64),
    "pos": np.dtype(np.int64),
}
#: metric_events: one row per (event, metric member).
METRIC_COLUMNS: dict[str, np.dtype] = {
    "location": np.dtype(np.int32),
    "time": np.dtype(np.float64),
    "metric": np.dtype(np.int32),
    "value": np.dtype(np.float64),
    "pos": np.dtype(np.int64),
}

#: sample_events: a timer sample of a call stack (``stack`` is an id in ``stacks``),
#: worth ``weight`` seconds, taken inside whatever region instance is open at ``pos``.
SAMPLE_COLUMNS: dict[str, np.dtype] = {
    "location": np.dtype(np.int32),
    "time": np.dtype(np.float64),
    "stack": np.dtype(np.int32),
    "weight": np.dtype(np.float64),
    "pos": np.dtype(np.int64),
}

#: thread_events: OpenMP/pthread-style threading events. ``kind`` is
#: :class:`perflow.kinds.ThreadEv`; ``team`` is the thread team (communicator)
#: id or -1; ``count`` is the requested number of threads (fork) or -1.
THREAD_COLUMNS: dict[str, np.dtype] = {
    "location": np.dtype(np.int32),
    "time": np.dtype(np.float64),
    "kind": np.dtype(np.int8),
    "team": np.dtype(np.int32),
    "count": np.dtype(np.int32),
    "pos": np.dtype(np.int64),
}

#: io_events: I/O operations (OTF2's IoOperationBegin/Complete). ``kind`` is :class:`perflow.kinds.IoEv`;
#: ``handle`` the I/O handle id (names in ``attrs["io_handles"]``); ``mode`` the operation
#: (:class:`perflow.kinds.IoMode`); ``bytes`` requested (BEGIN) or transferred (COMPLETE); ``matching`` pairs
#: a BEGIN with its COMPLETE on the location (with the handle).
IO_COLUMNS: dict[str, np.dtype] = {
    "location": np.dtype(np.int32),
    "time": np.dtype(np.float64),
    "kind": np.dtype(np.int8),
    "handle": np.dtype(np.int32),
    "mode": np.dtype(np.int8),
    "bytes": np.dtype(np.int64),
    "matching": np.dtype(np.int64),
    "pos": np.dtype(np.int64),
}

#: rma_events: MPI one-sided / SHMEM records (OTF2's ``Rma*``). ``kind`` is :class:`perflow.kinds.RmaEv`;
#: ``win`` the window id (its communicator in ``attrs["rma_windows"]``); ``remote`` the target rank in the
#: window's communicator (the root of a window collective; -1 none); ``group`` the group of a GROUP_SYNC (its
#: members, world ranks, in ``attrs["rma_groups"]``; -1 none); ``op`` the collective op, lock, sync or atomic
#: type; ``level`` the sync level bits; ``bytes`` put or sent, ``received`` got; ``matching`` pairs a transfer
#: with its completion (the lock id on lock rows).
RMA_COLUMNS: dict[str, np.dtype] = {
    "location": np.dtype(np.int32),
    "time": np.dtype(np.float64),
    "kind": np.dtype(np.int8),
    "win": np.dtype(np.int32),
    "remote": np.dtype(np.int32),
    "group": np.dtype(np.int32),
    "op": np.dtype(np.int16),
    "level": np.dtype(np.int32),
    "bytes": np.dtype(np.int64),
    "received": np.dtype(np.int64),
    "matching": np.dtype(np.int64),
    "pos": np.dtype(np.int64),
}

#: Optional columns per table: ``{table: {column: (dtype, default)}}``. A source
#: that does not provide one gets it filled with the default.
#: ``coll_events['request']``: the request id of a non-blocking collective
#: (its BEGIN is in the I-call, its END in the Wait/Test that completed it), -1 when blocking.
#: ``thread_events['lock']``, ``['order']``: on ACQUIRE_LOCK / RELEASE_LOCK rows, the lock id (OpenMP lock,
#: critical section or pthread mutex, as the trace numbers them) and the acquisition number (per lock, in
#: acquisition order over all threads of the process); -1 on other rows.
OPTIONAL_COLUMNS: dict[str, dict[str, tuple[np.dtype, Any]]] = {
    "coll_events": {"request": (np.dtype(np.int64), -1)},
    "thread_events": {"lock": (np.dtype(np.int64), -1), "order": (np.dtype(np.int64), -1)},
}

#: the event tables and their columns
TABLE_SCHEMAS: dict[str, dict[str, np.dtype]] = {
    "region_events": REGION_COLUMNS,
    "p2p_events": P2P_COLUMNS,
    "coll_events": COLL_COLUMNS,
    "metric_events": METRIC_COLUMNS,
    "sample_events": SAMPLE_COLUMNS,
    "thread_events": THREAD_COLUMNS,
    "io_events": IO_COLUMNS,
    "rma_events": RMA_COLUMNS,
}
_TABLES = TABLE_SCHEMAS


def empty_table(columns: dict[str, np.dtype], n: int = 0) -> dict[str, np.ndarray]:
    """Return a dict of zero-filled arrays with the given columns and length."""
    return {k: np.zeros(n, dtype=dt) for k, dt in columns.items()}


def _frame(rows: list[dict[str, Any]] | pd.DataFrame | None, cols: dict[str, Any]) -> pd.DataFrame:
    df = pd.DataFrame(rows if rows is not None else [])
    if df.empty and not len(df.columns):
        df = pd.DataFrame({c: pd.Series([], dtype=type(d)) for c, d in cols.items()})
    for c, default in cols.items():
        if c not in df:
            df[c] = default
        elif df[c].isna().any():
            df[c] = df[c].fillna(default)
    return df


@dataclass
class RawTrace:
    """Decoded trace events and definitions, as columnar tables.

    Attributes
    ----------
    locations : pandas.DataFrame
        One row per location (stream of events), indexed ``0..L-1``, with
        columns ``process`` (world rank, int), ``thread`` (int), ``name`` (str)
        and ``type`` (``"cpu"``, ``"gpu"``, ``"metric"``).
    regions : pandas.DataFrame
        One row per region id, indexed by region id, with columns ``name``,
        ``role`` (OTF2 region role name in lower case, e.g. ``"function"``,
        ``"loop"``, ``"point2point"``), ``paradigm`` (``"mpi"``, ``"openmp"``,
        ``"user"``, ``"compiler"``, ...), ``file``, ``line``, ``module``;
        optionally ``stack``: an id in ``stacks`` (or -1) giving the call stack
        of the code that called the region, which the builder places between
        the enclosing instance and the region (see :mod:`perflow.trace.contexts`).
    comms : dict of int to numpy.ndarray
        Communicator id to the world ranks of its members, in communicator
        rank order (``comms[c][r]`` is the world rank of rank ``r`` of ``c``).
    comm_names : dict of int to str
        Communicator id to name (``"MPI_COMM_WORLD"``, ...).
    region_events, p2p_events, coll_events, metric_events, sample_events, thread_events, io_events, rma_events : dict
        Event tables (str to numpy.ndarray) with the columns of :data:`REGION_COLUMNS`,
        :data:`P2P_COLUMNS`, :data:`COLL_COLUMNS`, :data:`METRIC_COLUMNS`,
        :data:`SAMPLE_COLUMNS`, :data:`THREAD_COLUMNS`, :data:`IO_COLUMNS` and :data:`RMA_COLUMNS`.
    stacks : pandas.DataFrame
        Call stacks of the samples: columns ``stack``, ``depth`` (0 is the
        outermost frame below the enclosing region) and ``region`` (id into
        ``regions``); one row per frame.
    metrics : pandas.DataFrame
        Metric definitions indexed by metric id: ``name``, ``unit``, ``mode``
        (``"accumulated"``, ``"absolute"``, ...).
    attrs : dict
        Free-form metadata: ``source`` (file), ``creator``, ``timer_resolution``,
        ``ticks`` (total trace length in seconds), ...
    """

    locations: pd.DataFrame
    regions: pd.DataFrame
    region_events: dict[str, np.ndarray]
    p2p_events: dict[str, np.ndarray] = field(default_factory=lambda: empty_table(P2P_COLUMNS))
    coll_events: dict[str, np.ndarray] = field(default_factory=lambda: empty_table(COLL_COLUMNS))
    metric_events: dict[str, np.ndarray] = field(default_factory=lambda: empty_table(METRIC_COLUMNS))
    sample_events: dict[str, np.ndarray] = field(default_factory=lambda: empty_table(SAMPLE_COLUMNS))
    thread_events: dict[str, np.ndarray] = field(default_factory=lambda: empty_table(THREAD_COLUMNS))
    io_events: dict[str, np.ndarray] = field(default_factory=lambda: empty_table(IO_COLUMNS))
    rma_events: dict[str, np.ndarray] = field(default_factory=lambda: empty_table(RMA_COLUMNS))
    stacks: pd.DataFrame = field(default_factory=lambda: _frame(None, {"stack": 0, "depth": 0, "region": 0}))
    comms: dict[int, np.ndarray] = field(default_factory=dict)
    comm_names: dict[int, str] = field(default_factory=dict)
    metrics: pd.DataFrame = field(default_factory=lambda: _frame(None, {"name": "", "unit": "", "mode": ""}))
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.locations = _frame(self.locations, {"process": 0, "thread": 0, "name": "", "type": "cpu"})
        self.regions = _frame(
            self.regions, {"name": "", "role": "function", "paradigm": "user", "file": "", "line": 0, "module": ""}
        )
        for name, cols in _TABLES.items():
            table = getattr(self, name)
            fixed = {}
            n = None
            for c, dt in cols.items():
                if c not in table:
                    raise TraceError(f"raw trace table {name!r} lacks column {c!r}")
                a = np.ascontiguousarray(table[c], dtype=dt)
                if n is not None and len(a) != n:
                    raise TraceError(f"raw trace table {name!r}: column {c!r} has {len(a)} rows, expected {n}")
                n = len(a)
                fixed[c] = a
            for c, (dt, default) in OPTIONAL_COLUMNS.get(name, {}).items():
                if c in table:
                    a = np.ascontiguousarray(table[c], dtype=dt)
                    if len(a) != n:
                        raise TraceError(f"raw trace table {name!r}: column {c!r} has {len(a)} rows, expected {n}")
                    fixed[c] = a
                else:
                    fixed[c] = np.full(n or 0, default, dtype=dt)
            setattr(self, name, fixed)

    @property
    def n_events(self) -> int:
        """Total number of events over all tables (metric rows count once per member)."""
        return sum(len(getattr(self, t)["location"]) for t in _TABLES)

    @property
    def world_comm(self) -> int | None:
        """Id of the communicator named MPI_COMM_WORLD, or of the largest one."""
        for c, n in self.comm_names.items():
            if n.upper() in ("MPI_COMM_WORLD", "COMM_WORLD", "WORLD"):
                return c
        if not self.comms:
            return None
        return max(self.comms, key=lambda c: len(self.comms[c]))

    def drop_events(self, *tables: str) -> None:
        """Replace the event ``tables`` (all when none is named) by empty ones: their columns are freed once
        no view holds them (a build that owns the events drops each table once consumed)."""
        for t in tables or tuple(TABLE_SCHEMAS):
            setattr(self, t, empty_table(TABLE_SCHEMAS[t]))

    def table(self, name: str) -> pd.DataFrame:
        """Return one event table as a DataFrame (copies nothing it need not)."""
        if name not in _TABLES:
            raise KeyError(f"no event table {name!r}; tables are {sorted(_TABLES)}")
        return pd.DataFrame(getattr(self, name), copy=False)

    def validate(self) -> None:
        """Check the ordering contract; raise :class:`TraceError` on a violation."""
        src = self.attrs.get("source", "raw trace")
        ev = self.region_events
        loc = ev["location"]
        nloc = len(self.locations)
        o = region_order(loc, ev["time"], ev["region"])  # one pass over the region events
        if len(loc) and (o.loc_lo < 0 or o.loc_hi >= nloc):
            raise TraceError(f"{src}: region event refers to a location outside 0..{nloc - 1}")
        if o.ungrouped >= 0:
            raise TraceError(f"{src}: region events are not grouped by location")
        if o.back >= 0:
            i = o.back
            raise TraceError(
                f"{src}: time goes backwards on location {int(loc[i])} at region event {i} "
                f"({float(ev['time'][i - 1])!r} then {float(ev['time'][i])!r})"
            )
        if len(loc) and (o.reg_lo < 0 or o.reg_hi >= len(self.regions) and o.reg_hi not in self.regions.index):
            raise TraceError(f"{src}: region event refers to an undefined region id {o.reg_hi}")
        for name in [t for t in _TABLES if t != "region_events"]:
            t = getattr(self, name)
            bad, lo, hi = key_order(t["location"], t["pos"])
            if bad >= 0:
                raise TraceError(f"{src}: {name} is not sorted by (location, pos)")
            if len(t["pos"]) and (lo < 0 or hi > len(loc)):
                raise TraceError(f"{src}: {name} has a pos outside 0..{len(loc)}")
