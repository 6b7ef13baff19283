"""The Dask runtime and executor: perflow's partitioned programs and analyses on a Dask cluster.

:class:`DaskRuntime` implements :class:`perflow.pag.partitioned.Runtime` with
futures: partition ``i``'s functions run on the worker it is pinned to, and
their results stay there until a later step needs them elsewhere, so the
trace pipeline (:func:`perflow.trace.pipeline.build`) and the partitioned
wait-state program run unchanged on the cluster. :class:`DaskExecutor`
computes analyses for the PAGs of a distributed trace: partitioned forms on
the workers (partials combined in a reduction tree, finished here), programs
on the runtime, anything else on the gathered tables. Nothing here knows a
pass or an analysis by name.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import PerflowError
from ..pag.partitioned import Each
from .memory import STREAM_REPLAY_EVENTS, register_sizeof

if TYPE_CHECKING:  # pragma: no cover
    from ..pag.analysis import Analysis, Settings
    from ..pag.pag import PAG
    from .dtrace import DistTrace
    from .engine import Engine

__all__ = ["DaskRuntime", "DaskExecutor", "ROUTE_ALL"]


register_sizeof()  # tell Dask's memory manager here what partitions weigh (the workers: the engine's plugin)


def _sizes(box: list[Any]) -> list[int]:
    return [len(x) for x in box]


def _pick(box: list[Any], j: int) -> Any:
    return box[j]


def _crossing(sizes: list[list[int]]) -> int:
    """Records of an exchange that go to another partition (``sizes[i][j]``: from ``i`` to ``j``)."""
    return int(sum(s[j] for i, s in enumerate(sizes) for j in range(len(s)) if i != j))


#: up to this many partitions an exchange routes every frame without first asking which are empty
ROUTE_ALL = 8


def _call_combine(combine: Callable[..., Any], settings: Any, *parts: Any) -> Any:
    return combine(list(parts), settings)


class DaskRuntime:
    """A :class:`~perflow.pag.partitioned.Runtime` over futures on an engine's workers."""

    def __init__(self, engine: Engine, n_parts: int) -> None:
        self.engine = engine
        self.n_parts = n_parts
        self._exchanged: dict[str, Any] = {}  # counts, or refs of counts not yet fetched
        #: times this runtime waited for results on the client (:meth:`gather`, :meth:`barrier`)
        self.round_trips = 0
        self._workers: list[str] | None = None
        #: a trace of more events streams its replay from the workers (perflow.trace.replaystream)
        self.stream_replay_above: float | None = STREAM_REPLAY_EVENTS

    @property
    def client(self) -> Any:
        """The Dask client."""
        return self.engine.client

    def _where(self, i: int) -> dict[str, Any]:
        """Where partition ``i``'s tasks run: its worker, asked of the scheduler once per runtime (a worker that
        left is replaced by another: ``allow_other_workers``)."""
        if self._workers is None:
            self._workers = self.engine.workers
        w = self.engine.worker_of(i, self.n_parts, self._workers)
        return {"workers": [w], "allow_other_workers": True, "pure": False}

    def map(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        out = []
        for i in range(self.n_parts):
            a = [x.values[i] if isinstance(x, Each) else x for x in args]
            out.append(self.client.submit(fn, *a, **self._where(i)))
        return out

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)

    def reduce(self, fn: Callable[..., Any], refs: list[Any], fan_in: int = 8) -> Any:
        level = list(refs)
        while len(level) > 1:
            level = [self.submit(fn, *level[i : i + fan_in]) for i in range(0, len(level), fan_in)]
        return level[0]

    def exchange(self, boxes: list[Any], what: str) -> list[list[Any]]:
        """Route frames between partitions, frame ``j`` of box ``i`` picked on ``i``'s worker.

        Up to :data:`ROUTE_ALL` partitions every frame is routed (empty ones cost a task each, no wait);
        beyond, the frames' sizes are fetched first (one round trip) and only non-empty frames move
        (and each partition's own). The records exchanged are counted on the workers, fetched when
        :attr:`exchanged` is read."""
        n = len(boxes)
        sizes = self.map(_sizes, Each(boxes))
        if n <= ROUTE_ALL:
            self._exchanged[what] = self.submit(_crossing, sizes)
            return [[self.client.submit(_pick, boxes[i], j, **self._where(i)) for i in range(n)] for j in range(n)]
        got = self.gather(sizes)
        inbound: list[list[Any]] = [[] for _ in range(n)]
        for i in range(n):
            for j in range(n):
                if got[i][j] or i == j:
                    inbound[j].append(self.client.submit(_pick, boxes[i], j, **self._where(i)))
        self._exchanged[what] = _crossing(got)
        return inbound

    @property
    def exchanged(self) -> dict[str, int]:
        """Records sent to another partition, per exchange (fetched from the workers on first read)."""
        late = [k for k, v in self._exchanged.items() if not isinstance(v, int)]
        if late:
            for k, v in zip(late, self.gather([self._exchanged[k] for k in late]), strict=True):
                self._exchanged[k] = int(v)
        return dict(self._exchanged)

    def gather(self, refs: list[Any]) -> list[Any]:
        from distributed import KilledWorker

        self.round_trips += 1
        try:
            return list(self.client.gather(list(refs)))
        except KilledWorker as e:
            raise PerflowError(f"a Dask worker died while running {e.task!r}: {e}") from None

    def barrier(self, refs: list[Any]) -> None:
        """Wait until the refs are computed (raises a task's error)."""
        from distributed import wait

        self.round_trips += 1
        wait(list(refs))
        bad = [f for f in refs if f.status == "error"]
        if bad:
            self.gather(bad[:1])


class DaskExecutor:
    """Computes the analyses of a distributed trace's PAGs (see the module docstring)."""

    def __init__(self, dist: DistTrace) -> None:
        self.dist = dist

    def run(self, analysis: Analysis, pag: PAG, settings: Settings) -> Any:
        dist = self.dist
        t0 = time.perf_counter()
        if analysis.partitioned:
            rt = dist.runtime
            partials = rt.map(analysis.partial, Each(dist.parts()), settings)
            combined = rt.reduce(functools.partial(_call_combine, analysis.combine, settings), partials)
            out = analysis.finish(pag, rt.gather([combined])[0], settings)
            form = "partitioned"
        elif analysis.program is not None:
            out = analysis.program(dist.built, pag, settings)
            form = "program"
        else:
            out = analysis.run_local(pag, settings)  # reads the PAG's tables: gathered on first use
            form = "gathered"
        dist.timings[f"analysis {analysis.name} ({form})"] = time.perf_counter() - t0
        return out

    def __repr__(self) -> str:
        return f"<DaskExecutor {self.dist!r}>"
