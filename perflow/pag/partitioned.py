"""Partitions and executors: what lets one definition of an analysis (or of the trace pipeline) run anywhere.

A **partition** holds whole processes of a run. A partitioned analysis sees
it through the :class:`Partition` interface: its metric rows, the messages
whose receive completed in it, and its collective rows, with global ids
(vertex ids, interval rows) so that partial results from several partitions
can be combined. :class:`PAGPartition` presents a whole PAG as one partition;
the trace pipeline's partitions (:mod:`perflow.trace.pipeline`) and the Dask
engine's present theirs.

A **runtime** runs per-partition functions: ``map`` one function over the
partitions, ``exchange`` frames between them, ``reduce`` results in a tree,
``gather`` them here. :class:`LocalRuntime` does it in this process (one
partition or several); an engine (``perflow.dask``) does it on workers, the
values living where they were computed. Programs written against a runtime
(the trace pipeline, multi-round analyses) run unchanged on both.

An **executor** computes an :class:`~perflow.pag.analysis.Analysis` for a
PAG's :class:`~perflow.pag.analysis.AnalysisManager`. :data:`LOCAL` runs the
local form; an engine's executor runs partitioned forms where the data are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from .edges import collective_wait, last_arrivers, late_sender_wait
from .instances import conform

if TYPE_CHECKING:  # pragma: no cover
    from .analysis import Analysis, Settings
    from .pag import PAG

__all__ = [
    "Partition",
    "PAGPartition",
    "Runtime",
    "LocalRuntime",
    "Each",
    "Executor",
    "LocalExecutor",
    "LOCAL",
]


@runtime_checkable
class Partition(Protocol):
    """One partition as a partitioned analysis sees it (global ids throughout)."""

    n_vertices: int

    def metric_rows(self, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """``(vertex, process, thread, value)`` of this partition's rows of a metric, sorted; None if absent."""
        ...

    def messages(self) -> pd.DataFrame:
        """Messages received here (columns of ``Trace.messages``, plus ``late_sender_wait``)."""
        ...

    def collectives(self) -> pd.DataFrame:
        """This partition's collective rows (``Trace.collectives`` columns, plus ``wait`` and ``last``)."""
        ...

    def interval_vertex(self, rows: np.ndarray) -> np.ndarray:
        """Vertex of each global interval row held here (-1 for rows held elsewhere or -1)."""
        ...


class PAGPartition:
    """A whole PAG as a single partition."""

    def __init__(self, pag: PAG) -> None:
        self.pag = pag
        self.n_vertices = pag.n_vertices

    def metric_rows(self, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        m = self.pag._metrics
        if metric not in m.columns:
            return None
        idx = m.index
        plev = idx.levels[1].to_numpy().astype(np.int64)
        tlev = idx.levels[2].to_numpy().astype(np.int64)
        v = np.asarray(idx.codes[0], dtype=np.int64)
        p = plev[np.asarray(idx.codes[1])] if len(plev) else np.zeros(0, np.int64)
        t = tlev[np.asarray(idx.codes[2])] if len(tlev) else np.zeros(0, np.int64)
        return v, p, t, m[metric].to_numpy(dtype=np.float64, na_value=np.nan)

    def messages(self) -> pd.DataFrame:

        tr = self.pag.trace
        if tr is None:
            df = conform("messages", None)
            df["late_sender_wait"] = np.zeros(0)
            return df
        df = tr.messages.copy(deep=False)
        df["late_sender_wait"] = late_sender_wait(tr)
        return df

    def collectives(self) -> pd.DataFrame:

        tr = self.pag.trace
        df = conform("collectives", None) if tr is None else tr.collectives.copy(deep=False)
        if tr is None or not len(df):
            df["wait"], df["last"] = np.zeros(len(df)), np.zeros(len(df), dtype=bool)
            return df
        df["wait"] = collective_wait(tr)
        df["last"] = last_arrivers(tr)[1]
        return df

    def interval_vertex(self, rows: np.ndarray) -> np.ndarray:
        tr = self.pag.trace
        rows = np.asarray(rows, dtype=np.int64)
        if tr is None:
            return np.full(len(rows), -1, dtype=np.int64)
        return tr.interval_vertex(rows)


@dataclass(frozen=True)
class Each:
    """A per-partition argument of :meth:`Runtime.map`: ``values[i]`` goes to partition ``i``."""

    values: Sequence[Any]


@runtime_checkable
class Runtime(Protocol):
    """Runs functions on partitions (see the module docstring). ``Ref`` is whatever the runtime uses."""

    n_parts: int

    def map(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """``fn`` on every partition, with :class:`Each` arguments split and others shared; refs of the results."""
        ...

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn`` once, anywhere; a ref of the result."""
        ...

    def reduce(self, fn: Callable[..., Any], refs: list[Any], fan_in: int = 8) -> Any:
        """Combine refs in a tree of ``fn(*some)`` calls; a ref of the result."""
        ...

    def exchange(self, boxes: list[Any], what: str) -> list[list[Any]]:
        """Route frame ``j`` of each partition's box (a list of ``n_parts`` frames) to partition ``j``."""
        ...

    def gather(self, refs: list[Any]) -> list[Any]:
        """The values of refs, here."""
        ...


class LocalRuntime:
    """A runtime that runs everything in this process (refs are the values).

    With ``jobs > 1`` the partitions' functions run in a pool of threads (the
    compiled kernels and most numpy operations release the GIL), results in
    partition order either way.
    """

    def __init__(self, n_parts: int = 1, jobs: int = 1) -> None:
        self.n_parts = n_parts
        self.jobs = max(1, min(jobs, n_parts))
        self.exchanged: dict[str, int] = {}
        self._pool: Any = None

    def _args(self, args: tuple[Any, ...], i: int) -> list[Any]:
        return [a.values[i] if isinstance(a, Each) else a for a in args]

    def map(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        if self.jobs == 1:
            return [fn(*self._args(args, i)) for i in range(self.n_parts)]
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.jobs, thread_name_prefix="perflow-part")
        futs = [self._pool.submit(fn, *self._args(args, i)) for i in range(self.n_parts)]
        return [f.result() for f in futs]

    def close(self) -> None:
        """Stop the thread pool (if any)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    def reduce(self, fn: Callable[..., Any], refs: list[Any], fan_in: int = 8) -> Any:
        level = list(refs)
        while len(level) > 1:
            level = [fn(*level[i : i + fan_in]) for i in range(0, len(level), fan_in)]
        return level[0]

    def exchange(self, boxes: list[Any], what: str) -> list[list[Any]]:
        n = len(boxes)
        self.exchanged[what] = sum(len(boxes[i][j]) for i in range(n) for j in range(n) if i != j)
        return [[boxes[i][j] for i in range(n)] for j in range(n)]

    def gather(self, refs: list[Any]) -> list[Any]:
        return list(refs)


@runtime_checkable
class Executor(Protocol):
    """Computes analyses for an analysis manager."""

    def run(self, analysis: Analysis, pag: PAG, settings: Settings) -> Any:
        """The result of ``analysis`` on ``pag``."""
        ...


class LocalExecutor:
    """Runs the local form of every analysis in this process."""

    def run(self, analysis: Analysis, pag: PAG, settings: Settings) -> Any:
        return analysis.run_local(pag, settings)

    def __repr__(self) -> str:
        return "<LocalExecutor>"


#: the executor of PAGs that no engine owns
LOCAL = LocalExecutor()
