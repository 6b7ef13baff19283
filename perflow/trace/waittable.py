"""The wait-state instance table: its settings, kinds, columns and assembly (one definition for every family).

:mod:`perflow.trace.waits` (point to point), :mod:`~perflow.trace.collwaits`,
:mod:`~perflow.trace.threadwaits` and :mod:`~perflow.trace.rmawaits` make their
rows with :func:`_frame`; :func:`sorted_waits` joins them in the table's order.
The ``kind`` column is a categorical of :data:`KIND_DTYPE`: rows are made from
its codes, never from a string per row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from ..pag.edges import LateReceiver
from ..pag.settings import Settings, SettingsError

__all__ = [
    "WaitSettings",
    "WaitKind",
    "WAIT_KINDS",
    "IDLE_KINDS",
    "KIND_DTYPE",
    "KIND_CODES",
    "WAIT_COLUMNS",
    "empty_waits",
    "sorted_waits",
]


@dataclass(frozen=True)
class WaitSettings(Settings):
    """Settings of the wait-state analysis (and of everything computed from its table): declared once here.

    Every pass that reads the wait states takes these as its keyword
    settings (:func:`perflow.pag.settings.settings_keywords`), and the
    functions of this module default to them.

    Attributes
    ----------
    wrong_order_window : int
        Late Sender instances remembered per receiving location for the
        wrong-order test (messages received in another order than sent; 0: off).
    late_receiver : {"blocking", "synchronous", "none"}
        Sends that can wait for their receiver: "blocking" (every send
        completed in a blocking call: MPI_Send, MPI_Ssend, the send half of
        MPI_Sendrecv, MPI_Wait* of a non-blocking send; as Scalasca counts
        Late Receiver), "synchronous" (only MPI_Ssend and MPI_Issend) or "none".
    early_reduce : {"latest", "earliest"}
        The root of an N-to-1 collective waits for the "latest" sender, or
        only until the "earliest" one arrives.
    collective_span : {"records", "call"}
        A blocking collective's operation spans its MpiCollectiveBegin/End
        records (Scalasca's rule) or its MPI call's enter and leave
        (:mod:`perflow.trace.collwaits`).
    """

    wrong_order_window: int = 100
    late_receiver: LateReceiver = "blocking"
    early_reduce: Literal["latest", "earliest"] = "latest"
    collective_span: Literal["records", "call"] = "records"

    def check(self) -> None:
        if self.wrong_order_window < 0:
            raise SettingsError(f"setting wrong_order_window must be >= 0, got {self.wrong_order_window}")


@dataclass(frozen=True)
class WaitKind:
    """A wait-state kind: its family (``p2p``/``collective``), whether it is idle time, and what it means."""

    name: str
    family: str
    idle: bool
    description: str


WAIT_KINDS: dict[str, WaitKind] = {
    k.name: k
    for k in (
        WaitKind("late_sender", "p2p", True, "receiver waits for a send that starts late"),
        WaitKind(
            "late_sender_wrong_order_same",
            "p2p",
            True,
            "Late Sender caused by messages received out of order (same source)",
        ),
        WaitKind(
            "late_sender_wrong_order_diff",
            "p2p",
            True,
            "Late Sender caused by messages received out of order (different sources)",
        ),
        WaitKind("late_sender_completion", "p2p", False, "receive still running after the late send has left"),
        WaitKind("late_receiver", "p2p", True, "blocking send waits for the receive to be posted"),
        WaitKind("wait_barrier", "collective", True, "waiting in a barrier for the last process to arrive"),
        WaitKind("barrier_completion", "collective", False, "barrier time after the first process has left"),
        WaitKind("wait_nxn", "collective", True, "waiting in an all-to-all collective for the last process to arrive"),
        WaitKind("nxn_completion", "collective", False, "all-to-all collective time after the first process has left"),
        WaitKind("finalize_wait", "collective", True, "waiting in MPI_Finalize for the last process to arrive"),
        WaitKind("init_completion", "collective", False, "MPI_Init time after the first process could leave"),
        WaitKind("late_broadcast", "collective", True, "non-root waits for the root of a 1-to-N collective"),
        WaitKind("early_reduce", "collective", True, "root of an N-to-1 collective waits for the senders"),
        WaitKind("early_scan", "collective", True, "rank waits in a scan for lower ranks"),
        WaitKind("omp_barrier_wait", "thread", True, "thread waits at an explicit OpenMP barrier for its team"),
        WaitKind(
            "omp_ibarrier_wait",
            "thread",
            True,
            "thread waits at an implicit OpenMP barrier (end of a parallel region or worksharing construct)",
        ),
        WaitKind(
            "omp_idle", "idle", True, "worker thread idle while its master runs outside every OpenMP team (no call)"
        ),
        WaitKind("lock_contention_critical", "thread", True, "thread waits to enter a critical section another holds"),
        WaitKind("lock_contention_api", "thread", True, "thread waits for a lock another holds (OpenMP lock, mutex)"),
        WaitKind("rma_wait_at_fence", "rma", True, "MPI_Win_fence waits for the last process of the window to enter"),
        WaitKind("rma_wait_at_create", "rma", True, "window creation waits for the last process of the window"),
        WaitKind("rma_wait_at_free", "rma", True, "MPI_Win_free waits for the last process of the window to enter"),
        WaitKind("rma_late_post", "rma", True, "origin waits in MPI_Win_start/complete for a target to post"),
        WaitKind("rma_early_wait", "rma", True, "MPI_Win_wait waits for the last origin to enter MPI_Win_complete"),
    )
}
#: Kinds that are idle time (excludes the completion kinds).
IDLE_KINDS = tuple(k for k, w in WAIT_KINDS.items() if w.idle)
KIND_DTYPE = pd.CategoricalDtype(list(WAIT_KINDS))

#: Columns of the wait-state instance table.
WAIT_COLUMNS: dict[str, str] = {
    "process": "waiting process (world rank)",
    "thread": "waiting thread",
    "start": "start of the waiting period (s)",
    "end": "end of the waiting period (s)",
    "kind": "wait-state kind (see WAIT_KINDS)",
    "amount": "waiting time, end - start (s)",
    "vertex": "call path of the MPI call that waits (-1 unknown)",
    "interval": "row in trace.intervals of that call (-1 unknown)",
    "cause_process": "process that was waited for (-1 for completion kinds)",
    "cause_thread": "its thread",
    "cause_time": "when the awaited process entered its call (the end of the wait, normally)",
    "cause_interval": "row in trace.intervals of the awaited call (-1 unknown)",
    "message": "row in trace.messages (-1 for collectives)",
    "instance": "collective instance (-1 for messages)",
}
_DTYPES = {
    "process": np.int32,
    "thread": np.int32,
    "start": np.float64,
    "end": np.float64,
    "amount": np.float64,
    "vertex": np.int64,
    "interval": np.int64,
    "cause_process": np.int32,
    "cause_thread": np.int32,
    "cause_time": np.float64,
    "cause_interval": np.int64,
    "message": np.int64,
    "instance": np.int64,
}


#: Code of each kind in :data:`KIND_DTYPE` (the wait table's ``kind`` column is categorical).
KIND_CODES: dict[str, int] = {k: i for i, k in enumerate(WAIT_KINDS)}


def _frame(n: int, kind: str | np.ndarray, **cols: np.ndarray) -> pd.DataFrame:
    """``n`` rows of the wait table: ``kind`` one name, an array of names, or an integer array of
    :data:`KIND_CODES` (no strings made per row); missing columns -1 (NaN for times)."""
    out: dict[str, object] = {}
    for c in WAIT_COLUMNS:
        if c == "kind":
            out[c] = _kinds(n, kind)
        elif c in cols:
            out[c] = np.asarray(cols[c]).astype(_DTYPES[c], copy=False)
        else:
            fill = np.nan if _DTYPES[c] is np.float64 else -1
            out[c] = np.full(n, fill, dtype=_DTYPES[c])
    return pd.DataFrame(out, copy=False)


def _kinds(n: int, kind: str | np.ndarray) -> pd.Categorical:
    if isinstance(kind, str):
        if kind not in KIND_CODES:
            raise ValueError(f"unknown wait-state kind {kind!r} (known: {', '.join(WAIT_KINDS)})")
        return pd.Categorical.from_codes(np.full(n, KIND_CODES[kind], np.int8), dtype=KIND_DTYPE)
    k = np.asarray(kind)
    if k.dtype.kind in "iu":
        return pd.Categorical.from_codes(k.astype(np.int8, copy=False), dtype=KIND_DTYPE)
    return pd.Categorical(k.astype(object, copy=False), dtype=KIND_DTYPE)


def empty_waits() -> pd.DataFrame:
    """A wait-state table with no rows."""
    return _frame(0, np.zeros(0, dtype=object))


def sorted_waits(parts: list[pd.DataFrame], ties: tuple[str, ...] = ()) -> pd.DataFrame:
    """The wait tables ``parts`` as one, sorted by (process, thread, start, kind) with ties in their order
    (a stable sort: what ``sort_values`` of those columns gives), sorted on the columns' arrays.

    ``ties``: more columns of the parts (not kept) that order rows of equal keys first, most significant
    first (the partitioned program's tie keys, :mod:`perflow.trace.waitparts`)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty_waits()

    def cat(c: str) -> np.ndarray:
        return np.concatenate([p[c].to_numpy() for p in parts])

    keys = {c: cat(c) for c in ("process", "thread", "start", *ties)}
    codes = np.concatenate([p["kind"].cat.codes.to_numpy() for p in parts])
    order = np.lexsort((*(keys[c] for c in reversed(ties)), codes, keys["start"], keys["thread"], keys["process"]))
    # the other columns one at a time: the parts and the sorted table, never a third copy of the whole table
    # (at 200 M events it is the largest thing on a Dask client)
    out = {c: (_kinds(len(order), codes[order]) if c == "kind" else (keys.pop(c) if c in keys else cat(c))[order])
           for c in WAIT_COLUMNS}  # fmt: skip
    return pd.DataFrame(out, copy=False)
