"""The Dask engine: a cluster connection and the loading of traces into partitions.

>>> from perflow.dask import Engine
>>> with Engine(n_workers=2) as eng:                          # doctest: +SKIP
...     dt = eng.load("scorep-run/traces.otf2")                # partitioned by communication affinity
...     dt.imbalance("time_exc").head()
...     dt.comm_matrix("bytes")

``Engine()`` starts a :class:`distributed.LocalCluster`; ``Engine(scheduler=
"tcp://host:8786")`` connects to a running scheduler (dask-jobqueue,
dask-mpi, ``dask scheduler``); ``Engine(client=...)`` uses an existing
client. Partition ``i`` of ``n`` is pinned to worker ``i * W // n`` (workers
sorted by address), so consecutive partitions of the recursive bisection
share a worker.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import numpy as np

from ..errors import PerflowError
from ..readers.otf2 import is_otf2
from ..trace.partition import Partitioning, partition_ranks
from ..trace.raw import RawTrace
from ..trace.split import definitions_only, location_parts, split_raw, traffic
from .dtrace import DistTrace
from .ingest import ingest_otf2, scout_otf2
from .memory import EVENTS_PER_PARTITION, SizeofPlugin, partitions_for

__all__ = ["Engine", "require_dask"]

log = logging.getLogger(__name__)


def quiet_libraries() -> None:
    """Dask's, Bokeh's and Tornado's start-up and shut-down chatter is not perflow's output.

    Their loggers (which Dask configures at INFO) show warnings only, and the nannies' shut-down
    notices ("still alive, killing") errors only, unless perflow itself logs at DEBUG
    (``perflow -v``). A level a user set on them stays.
    """
    if logging.getLogger("perflow").getEffectiveLevel() <= logging.DEBUG:
        return
    for name, level in (("distributed", logging.WARNING), ("distributed.nanny", logging.ERROR),
                        ("bokeh", logging.WARNING), ("tornado", logging.WARNING)):  # fmt: skip
        lg = logging.getLogger(name)
        if lg.level in (logging.NOTSET, logging.INFO, logging.DEBUG):  # Dask's own configuration sets INFO
            lg.setLevel(level)


def require_dask() -> Any:
    """Import :mod:`distributed`, or raise a PerflowError saying how to install it."""
    try:
        import distributed
    except ImportError:  # pragma: no cover - exercised without the extra
        raise PerflowError(
            "the Dask engine needs dask and distributed: pip install 'perflow[dask]' (or pip install dask distributed)"
        ) from None
    return distributed


class Engine:
    """Run perflow's trace analyses on a Dask cluster (an engine of :mod:`perflow.flow.engine`).

    Parameters
    ----------
    scheduler : str, optional
        Address of a running Dask scheduler (``"tcp://host:8786"``) or the path
        of a scheduler file. ``None`` starts a local cluster.
    n_workers : int, optional
        Workers of the local cluster (default: the number of CPU cores).
    threads_per_worker : int
        Threads per local worker. The analyses are numpy/numba code that
        holds the GIL part of the time; one thread per worker process is best.
    processes : bool
        Local workers as processes (default) or threads of this process.
    memory_limit : str or int
        Memory limit per local worker (``"auto"``: RAM shared equally).
    client : distributed.Client, optional
        Use this client instead (not closed by :meth:`close`).
    load_options : dict, optional
        Options of :meth:`load` used when a flow reads a trace on this engine
        (``partition``, ``n_partitions``, ``scout_events``, ...).
    **cluster_kwargs
        More :class:`distributed.LocalCluster` arguments.
    """

    name = "dask"

    def __init__(
        self,
        scheduler: str | None = None,
        *,
        n_workers: int | None = None,
        threads_per_worker: int = 1,
        processes: bool = True,
        memory_limit: str | int = "auto",
        client: Any = None,
        load_options: dict[str, Any] | None = None,
        **cluster_kwargs: Any,
    ) -> None:
        distributed = require_dask()
        quiet_libraries()
        self.load_options = dict(load_options or {})
        self._own = client is None
        self.cluster = None
        if client is not None:
            self.client = client
        elif scheduler:
            if os.path.isfile(scheduler):
                self.client = distributed.Client(scheduler_file=scheduler)
            else:
                self.client = distributed.Client(scheduler)
        else:
            self.cluster = distributed.LocalCluster(
                n_workers=n_workers or os.cpu_count() or 1,
                threads_per_worker=threads_per_worker,
                processes=processes,
                memory_limit=memory_limit,
                dashboard_address=cluster_kwargs.pop("dashboard_address", ":0"),
                **cluster_kwargs,
            )
            self.client = distributed.Client(self.cluster)
            self.client.wait_for_workers(len(self.cluster.workers), timeout=120)
        self.client.register_plugin(SizeofPlugin())  # Dask must know what partitions weigh
        log.info("Dask engine on %s with %d workers", self.client.scheduler.address, len(self.workers))

    @property
    def workers(self) -> list[str]:
        """Addresses of the workers, sorted (waits up to a minute for a first worker to join)."""
        w = self.client.scheduler_info(n_workers=-1)["workers"]
        if not w:
            try:
                self.client.wait_for_workers(1, timeout=60)
            except TimeoutError:
                raise PerflowError(f"no Dask worker joined the scheduler at {self.client.scheduler.address}") from None
            w = self.client.scheduler_info(n_workers=-1)["workers"]
        return sorted(w)

    def worker_of(self, part: int, n_parts: int, workers: list[str] | None = None) -> str:
        """The worker partition ``part`` of ``n_parts`` is pinned to (among ``workers``, default
        :attr:`workers`: a call to the scheduler; pass the list when placing many tasks)."""
        w = self.workers if workers is None else workers
        if not w:
            raise PerflowError("the Dask cluster has no workers")
        return w[part * len(w) // max(n_parts, 1)]

    def close(self) -> None:
        """Close the client and the local cluster this engine started."""
        if self._own:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<perflow.dask.Engine {self.client.scheduler.address} workers={len(self.workers)}>"

    # ------------------------------------------------------------------ the engine protocol
    def read(self, path: Any, format: str | None = None, **options: Any) -> Any:  # noqa: A002
        """An OTF2 trace loaded on the cluster, as a :class:`~.lazy.DaskPAG`; ``None`` for other data.

        Called by :func:`perflow.read` when this engine runs a flow; other
        formats are read locally (they are profiles, or traces that need a
        whole-file reader). Declining logs why (at INFO, ``perflow.dask.engine``).
        """
        if not isinstance(path, str | os.PathLike):
            log.info("the Dask engine declines to read %r: not a path; reading it here", path)
            return None
        if format not in (None, "otf2"):
            log.info("the Dask engine declines to read %s: it reads OTF2 traces, not %s data; reading it here",
                     path, format)  # fmt: skip
            return None

        if not is_otf2(path):
            log.info("the Dask engine declines to read %s: not an OTF2 archive; reading it here", path)
            return None
        opts = {**self.load_options, **{k: v for k, v in options.items() if k in ("close_open", "infer_collectives")}}
        log.info("reading %s on the Dask engine", path)
        return self.load(path, **opts).pag()

    # ------------------------------------------------------------------ loading
    def load(
        self,
        source: RawTrace | str | os.PathLike[str],
        *,
        n_partitions: int | None = None,
        events_per_partition: float | None = EVENTS_PER_PARTITION,
        partition: str | np.ndarray = "affinity",
        tol: float = 0.05,
        weight: str = "count",
        scout_events: int = 1 << 14,
        close_open: bool = False,
        validate: bool = True,
        infer_collectives: bool = False,
        build: bool = True,
    ) -> DistTrace:
        """Partition a trace over the workers and build it there.

        Parameters
        ----------
        source : RawTrace or path
            An in-memory raw trace (scattered from here), or an OTF2 archive
            (anchor file or its directory) that every worker can read: each
            worker decodes its own locations with the fast decoder.
        n_partitions : int, optional
            Partitions (default: one per worker, or more for a large trace, see
            ``events_per_partition``; at most one per process).
        events_per_partition : float, optional
            Without ``n_partitions``: cut a trace of more than this many events
            per worker into partitions of about this many events (a multiple
            of the workers), so that a worker holds few at a time and Dask
            spills the others to its local directory (``None``: one per worker).
        partition : {"affinity", "block", "round_robin"} or array
            How ranks are assigned (see :mod:`perflow.dask.partition`), or an
            explicit partition per process (sorted world ranks).
        tol : float
            Balance tolerance of the affinity partitioner.
        weight : {"count", "bytes"}
            Edge weight of the communication graph: messages or bytes.
        scout_events : int
            For OTF2: events per location the traffic pass decodes (a
            prefix of each location; 0 decodes nothing and partitions by
            event counts alone, in rank order).
        close_open, validate, infer_collectives : bool
            As for :func:`perflow.build_pag`.
        build : bool
            Build right away (else on first use).
        """
        if weight not in ("count", "bytes"):
            raise ValueError(f"weight must be 'count' or 'bytes', not {weight!r}")
        nw = len(self.workers)
        timings: dict[str, float] = {}
        if isinstance(source, RawTrace):
            t0 = time.perf_counter()
            procs, events, tr = traffic(source)
            k = n_partitions or partitions_for(float(np.sum(events)), nw, len(procs), events_per_partition)
            p = self._partition(procs, events, tr, k, partition, tol, weight)
            loc_part = location_parts(source, p.assign, p.processes)
            parts = split_raw(source, loc_part, p.n_parts)
            workers = self.workers
            futs = [
                self.client.scatter(part, workers=[self.worker_of(i, p.n_parts, workers)], hash=False)
                for i, part in enumerate(parts)
            ]
            del parts
            defs = definitions_only(source)
            timings["scatter"] = time.perf_counter() - t0
        else:
            src = scout_otf2(self, os.fspath(source), scout_events)
            k = n_partitions or partitions_for(float(src.weights.sum()), nw, len(src.processes), events_per_partition)
            p = self._partition(src.processes, src.weights, src.traffic, k, partition, tol, weight)
            futs = ingest_otf2(self, src, p)
            defs, timings = src.raw, src.timings
        dt = DistTrace(self, defs, p, futs, close_open=close_open, validate=validate, infer=infer_collectives)
        dt.timings.update(timings)
        if build:
            dt.build()
        return dt

    def _partition(
        self, procs: np.ndarray, events: np.ndarray, tr: Any, k: int, method: Any, tol: float, weight: str
    ) -> Partitioning:
        w = tr[weight].to_numpy(dtype=np.float64) if len(tr) else np.zeros(0)
        src = tr["src"].to_numpy() if len(tr) else np.zeros(0, np.int64)
        dst = tr["dst"].to_numpy() if len(tr) else np.zeros(0, np.int64)
        return partition_ranks(procs, events, (src, dst, w), k, method=method, tol=tol)
