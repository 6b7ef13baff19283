"""Memory of the Dask engine: what partition objects weigh, and how many partitions a trace gets.

Dask's workers keep every task result in memory until its worker passes the
*target* fraction of its memory limit, then write the least recently used
results to their local directory (spilling) and read them back when a task
needs them. That only works if Dask knows what a result weighs: for objects
it does not know, :func:`dask.sizeof.sizeof` says about 100 bytes, so a
partition's tables (hundreds of megabytes) would count as *unmanaged*
memory, never be spilled, and the worker would pause and then be killed.
:func:`deep_nbytes` weighs perflow's partition objects (the numpy arrays and
pandas frames they hold, each counted once), and :class:`SizeofPlugin`
registers it in every worker process (also workers that join later): the
results live on the workers, where Dask weighs them.

The other half is to cut a large trace into partitions small enough that a
worker holds only a few at a time: :func:`partitions_for` picks the number
from the trace's events (``events_per_partition``) so that the working set
of one task stays a fraction of a worker's memory while the rest waits on
disk.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd

from ..pag.instances import Trace
from ..trace.critical import CriticalPath
from ..trace.criticalparts import PartView
from ..trace.flat import FlatTimeline, Locations
from ..trace.parts import TracePart
from ..trace.parttrace import PartTrace, SenderState
from ..trace.raw import RawTrace
from ..trace.replayplan import PlanPart
from ..trace.replaystream import Prepared
from ..trace.stages import PartState, PartTables

try:
    from dask.sizeof import sizeof
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # pragma: no cover - without the dask extra nothing is weighed or registered
    sizeof = None
    WorkerPlugin = object  # type: ignore[misc,assignment]

#: perflow's types that partition results are made of (kept on workers between tasks)
PARTITION_TYPES = (PartState, PartTables, TracePart, RawTrace, Trace, PartView, FlatTimeline, Locations,
                   SenderState, PartTrace, CriticalPath, PlanPart, Prepared)  # fmt: skip

__all__ = [
    "deep_nbytes",
    "register_sizeof",
    "SizeofPlugin",
    "partitions_for",
    "EVENTS_PER_PARTITION",
    "STREAM_REPLAY_EVENTS",
]

#: a trace of more events keeps its replay plan on the workers and streams the replay
#: (:mod:`perflow.trace.replaystream`): the whole plan takes about 30 bytes per event on the client
STREAM_REPLAY_EVENTS = 30_000_000

#: default events per partition for a trace larger than its workers hold at once (about 0.5 GB at the build's peak)
EVENTS_PER_PARTITION = 4_000_000


def deep_nbytes(obj: Any, _seen: set[int] | None = None, _depth: int = 0) -> int:
    """Bytes held by the numpy arrays and pandas objects inside ``obj`` (dataclasses, objects, containers),
    each counted once."""
    seen = set() if _seen is None else _seen
    if id(obj) in seen or _depth > 8:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        base = obj.base if isinstance(obj.base, np.ndarray) else None
        if base is not None:  # a view: count its base once
            return deep_nbytes(base, seen, _depth + 1) if id(base) not in seen else 0
        return int(obj.nbytes)
    if isinstance(obj, pd.DataFrame | pd.Series | pd.Index):
        return int(sizeof(obj))
    if isinstance(obj, dict):
        return sum(deep_nbytes(v, seen, _depth + 1) for v in obj.values()) + 64 * len(obj)
    if isinstance(obj, list | tuple | set | frozenset):
        return sum(deep_nbytes(v, seen, _depth + 1) for v in obj) + 8 * len(obj)
    if isinstance(obj, str | bytes | int | float | bool | type(None)):
        return int(sizeof(obj))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        vals = [getattr(obj, f.name, None) for f in dataclasses.fields(obj)]
    elif hasattr(obj, "__dict__"):
        vals = list(vars(obj).values())
    else:
        return int(sizeof(obj))
    return 64 + sum(deep_nbytes(v, seen, _depth + 1) for v in vals)


def register_sizeof() -> None:
    """Register :func:`deep_nbytes` as Dask's size of perflow's partition objects (in this process)."""
    if sizeof is None:  # pragma: no cover - without dask
        return
    for t in PARTITION_TYPES:
        sizeof.register(t)(deep_nbytes)


class SizeofPlugin(WorkerPlugin):
    """A Dask worker plugin that registers :func:`register_sizeof` in every worker process."""

    name = "perflow-sizeof"

    def setup(self, worker: Any) -> None:
        register_sizeof()


def partitions_for(n_events: float, n_workers: int, n_processes: int, per_partition: float | None) -> int:
    """Partitions of a trace: one per worker, or more so that none holds more than ``per_partition`` events.

    Never more than one per process (a partition holds whole processes); ``per_partition`` ``None`` or
    ``0`` keeps one per worker.
    """
    k = max(1, n_workers)
    if per_partition and n_events > per_partition * k:
        k = max(k, math.ceil(n_events / per_partition))
        k = math.ceil(k / n_workers) * n_workers  # the same number of partitions on every worker
    return int(max(1, min(k, max(n_processes, 1))))
