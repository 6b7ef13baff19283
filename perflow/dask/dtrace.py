"""A trace partitioned over Dask workers, and the analyses that run on it.

What runs where (see ``docs/scale-out.md``):

* **on every partition's worker**: the region scan, interval and metric
  computation, send/receive records, local message matching, Late Sender,
  collective rows and waits, partial statistics;
* **shuffled between workers**: the boundary send records (keyed by
  ``(comm, src, dst, tag)``, to the receiver's partition), the
  acknowledgements of matched boundary sends (back to the sender, for
  ``bytes_sent``), the merged numbering (to every worker);
* **reduced in a tree on workers**: the summaries (into the global numbering),
  collective per-instance partials, per-vertex statistics, communication
  matrix partials;
* **gathered to the client**: the calling-context tree, the final per-vertex
  results and, only when asked (:meth:`DistTrace.to_pag`,
  :meth:`DistTrace.messages`, :meth:`DistTrace.run_pass`), whole tables.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..pag.pag import DEFAULT_METRICS, PAG, MetricInfo
from ..pag.vertices import normalize_vertices
from ..trace.raw import RawTrace
from ..pag.instances import Trace
from . import tasks as T
from .analyses import Analyses
from .match import gather_messages
from .merge import BYTE_METRICS, concat_metric_rows, gather_trace, vertex_table
from .partition import Partitioning

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine
    from .lazy import DaskPAG

__all__ = ["DistTrace", "GATHER_WARN_EVENTS"]

log = logging.getLogger(__name__)

#: gathering a trace with more events than this onto the client logs a warning
GATHER_WARN_EVENTS = 20_000_000


class DistTrace(Analyses):
    """A trace whose partitions live on Dask workers (made by :meth:`perflow.dask.Engine.load`).

    Attributes
    ----------
    partitioning : Partitioning
        Which processes each partition holds, and the cut it achieves.
    timings : dict
        Seconds spent in each phase (``ingest``, ``scan``, ``merge``,
        ``finalize``, ``match``, ``metrics``, ``collectives``).
    """

    def __init__(
        self, engine: Engine, defs: RawTrace, partitioning: Partitioning, parts: list[Any], *,
        close_open: bool = False, validate: bool = True, infer: bool = False,
    ) -> None:  # fmt: skip
        self.engine = engine
        self.defs = defs
        self.partitioning = partitioning
        self._raw = parts
        self._n = len(parts)
        self._opts = (close_open, validate, infer)
        self.timings: dict[str, float] = {}
        self._built = False
        self._cache: dict[Any, Any] = {}

    # ------------------------------------------------------------------ plumbing
    @property
    def client(self) -> Any:
        """The Dask client."""
        return self.engine.client

    @property
    def n_parts(self) -> int:
        """Number of partitions."""
        return self._n

    def _on(self, i: int) -> dict[str, Any]:
        return {"workers": [self.engine.worker_of(i, self.n_parts)], "allow_other_workers": True, "pure": False}

    def _submit(self, fn: Any, *args: Any, where: int | None = None, **kw: Any) -> Any:
        opts = self._on(where) if where is not None else {"pure": False}
        return self.client.submit(fn, *args, **kw, **opts)

    def _gather(self, futs: Any) -> Any:
        try:
            return self.client.gather(futs)
        except T.RemoteFormatError as e:
            raise e.restore() from None

    def _wait(self, futs: list[Any], phase: str, t0: float) -> float:
        from distributed import wait

        wait(futs)
        bad = [f for f in futs if f.status == "error"]
        if bad:
            self._gather(bad[0])
        t1 = time.perf_counter()
        self.timings[phase] = self.timings.get(phase, 0.0) + t1 - t0
        return t1

    def _reduce(self, fn: Any, futs: list[Any], fan_in: int = 8) -> Any:
        """Combine futures in a tree of ``fn`` calls on the workers."""
        level = list(futs)
        while len(level) > 1:
            level = [self._submit(fn, *level[i : i + fan_in]) for i in range(0, len(level), fan_in)]
        return level[0]

    def _exchange(self, boxes: list[Any], what: str) -> list[list[Any]]:
        """Route ``boxes[i][j]`` (a frame from partition i to j) to partition j; only non-empty frames move."""
        n = len(boxes)
        sizes = self._gather([self._submit(T.t_sizes, b, where=i) for i, b in enumerate(boxes)])
        inbound: list[list[Any]] = [[] for _ in range(n)]
        for i in range(n):
            for j in range(n):
                if sizes[i][j] or i == j:
                    inbound[j].append(self._submit(T.t_pick, boxes[i], j, where=i))
        self._cache[what] = int(sum(sizes[i][j] for i in range(n) for j in range(n) if i != j))
        return inbound

    # ------------------------------------------------------------------ building
    def build(self) -> DistTrace:
        """Scan, number, finalise and match every partition (idempotent)."""
        if self._built:
            return self
        close_open, validate, infer = self._opts
        n = len(self._raw)
        nloc = len(self.defs.locations)
        t = time.perf_counter()
        states = [self._submit(T.t_scan, i, r, close_open, validate, infer, where=i) for i, r in enumerate(self._raw)]
        summ = [self._submit(T.t_summary, s, where=i) for i, s in enumerate(states)]
        t = self._wait(summ, "scan", t)
        self._n_events = int(sum(self._gather([self._submit(lambda s: s["n_events"], f) for f in summ])))
        merged = self._submit(T.t_merge, nloc, *summ, where=0)
        tree = self._gather(self._submit(T.t_tree, merged))
        t = self._wait([merged], "merge", t)
        self._tables = [self._submit(T.t_finalize, s, merged, where=i) for i, s in enumerate(states)]
        t = self._wait(self._tables, "finalize", t)
        del states, summ
        self._raw = []  # the raw partitions and scan states are released here
        p = self.partitioning
        boxes = [self._submit(T.t_outbox, tb, p.processes, p.assign, n, where=i) for i, tb in enumerate(self._tables)]
        inbound = self._exchange(boxes, "exchanged_send_records")
        matched = [
            self._submit(T.t_match, tb, p.processes, p.assign, n, *inbound[i], where=i)
            for i, tb in enumerate(self._tables)
        ]
        self._messages = [self._submit(T.t_first, m, where=i) for i, m in enumerate(matched)]
        # the records are consumed: later steps use tables without them (the old ones are released)
        self._tables = [self._submit(T.t_strip, tb, matched[i], where=i) for i, tb in enumerate(self._tables)]
        acks = self._exchange([self._submit(T.t_second, m, where=i) for i, m in enumerate(matched)], "exchanged_acks")
        t = self._wait(self._messages, "match", t)
        lp = self.defs.locations["process"].to_numpy(dtype=np.int64)
        lt = self.defs.locations["thread"].to_numpy(dtype=np.int64)
        self._rows = [
            self._submit(T.t_rows, tb, self._messages[i], lp, lt, *acks[i], where=i)
            for i, tb in enumerate(self._tables)
        ]
        t = self._wait(self._rows, "metrics", t)
        partials = [self._submit(T.t_coll_partial, tb, where=i) for i, tb in enumerate(self._tables)]
        self._coll_combined = self._reduce(T.t_coll_combine, partials)
        self._coll = [
            self._submit(T.t_coll_wait, tb, self._coll_combined, where=i) for i, tb in enumerate(self._tables)
        ]
        self._wait(self._coll, "collectives", t)
        self._tree = tree
        self._built = True
        info = self._gather(
            [self._submit(T.t_info, tb, self._rows[i], self._messages[i], where=i) for i, tb in enumerate(self._tables)]
        )
        cols: list[str] = []
        for x in info:
            cols += [c for c in x["columns"] if c not in ("vertex", "process", "thread") and c not in cols]
        self._has_sent = any(x["has_sent"] for x in info)
        if not self._has_sent:
            cols = [c for c in cols if c not in ("bytes_sent", "bytes_recv")]
        self._metric_names = cols
        self._info = info
        return self

    # ------------------------------------------------------------------ small results
    @property
    def n_events(self) -> int:
        """Events in the trace."""
        self.build()
        return self._n_events

    @property
    def n_vertices(self) -> int:
        """Vertices of the calling-context tree."""
        self.build()
        return len(self._tree["cp_parent"])

    @property
    def vertex_table(self) -> pd.DataFrame:
        """The top-down vertex table (as the single-process PAG's)."""
        if "vertices" not in self._cache:
            self.build()
            vt = vertex_table(self.defs.regions, self._tree["cp_parent"], self._tree["cp_region"])
            self._cache["vertices"] = normalize_vertices(vt)
        return self._cache["vertices"]

    @property
    def metric_names(self) -> list[str]:
        """Metric columns (as ``PAG.metric_names``)."""
        self.build()
        return list(self._metric_names)

    # ------------------------------------------------------------------ gathered results
    def _warn_gather(self, what: str) -> None:
        if self.n_events > GATHER_WARN_EVENTS:
            log.warning("gathering %s of a %d-event trace onto the client", what, self.n_events)

    def messages(self) -> pd.DataFrame:
        """All matched messages in the single-process order, plus ``late_sender_wait`` (gathered)."""
        self._warn_gather("the messages")
        parts = self._gather(self._messages)
        return gather_messages(parts, keep=("late_sender_wait",), threaded=self._tree["threaded"])

    def late_sender_wait(self) -> np.ndarray:
        """Late Sender wait of each message, aligned with :meth:`messages` (gathered)."""
        return self.messages()["late_sender_wait"].to_numpy()

    def collectives(self) -> pd.DataFrame:
        """All collective rows in the single-process order, plus ``wait`` and ``last`` (gathered)."""
        self._warn_gather("the collectives")
        parts = [c for c in self._gather(self._coll) if len(c)]
        if not parts:
            from ..pag.instances import conform

            df = conform("collectives", None)
            df["wait"], df["last"] = np.zeros(0), np.zeros(0, dtype=bool)
            return df
        c = pd.concat(parts, ignore_index=True).sort_values(["instance", "process", "thread"], kind="stable")
        return c.reset_index(drop=True)

    def collective_wait(self) -> np.ndarray:
        """Waiting time of each collective row, aligned with ``trace.collectives`` (gathered)."""
        return self.collectives()["wait"].to_numpy()

    def metrics_frame(self) -> pd.DataFrame:
        """The metrics table (gathered; one row per vertex and location), equal to ``build_pag(...).metrics``."""
        if "metrics" not in self._cache:
            self.build()
            rows = self._gather([self._submit(T.t_first, r, where=i) for i, r in enumerate(self._rows)])
            if not self._has_sent:
                rows = [r.drop(columns=["bytes_sent", "bytes_recv"], errors="ignore") for r in rows]
            self._cache["metrics"] = concat_metric_rows(rows, self.n_vertices)
        return self._cache["metrics"]

    def trace_tables(self) -> Trace:
        """Intervals, messages and collectives (gathered), equal to ``build_pag(...).trace``."""
        if "trace" not in self._cache:
            self._warn_gather("the instance tables (intervals, messages, collectives)")
            futs = [
                self._submit(T.t_gather_part, tb, self._messages[i], self._coll[i], where=i)
                for i, tb in enumerate(self._tables)
            ]
            parts = self._gather(futs)
            self._cache["trace"] = gather_trace(
                self.defs, self._tree["n_intervals"], parts, threaded=self._tree["threaded"]
            )
        return self._cache["trace"]

    def span(self) -> tuple[float, float]:
        """(first enter, last leave) over all intervals, as ``Trace.span``."""
        if "span" not in self._cache:
            self.build()
            parts = self._gather([self._submit(T.t_span, tb, where=i) for i, tb in enumerate(self._tables)])
            parts = [x for x in parts if x is not None]
            self._cache["span"] = (min(a for a, _ in parts), max(b for _, b in parts)) if parts else (0.0, 0.0)
        return self._cache["span"]

    def lazy_trace(self) -> Trace:
        """A Trace whose tables are gathered on first access (the ``trace`` of :meth:`pag`)."""
        from .lazy import LazyTrace

        if "lazy_trace" not in self._cache:
            self._cache["lazy_trace"] = LazyTrace(self)
        return self._cache["lazy_trace"]

    def to_pag(self) -> PAG:
        """The whole PAG on the client, equal to :func:`perflow.build_pag` of the same trace."""
        m = self.metrics_frame()
        info = self.metric_info
        return PAG(self.vertex_table, m, metric_info=info, trace=self.trace_tables(), attrs=self.pag_attrs())

    def pag_attrs(self) -> dict[str, Any]:
        """The attributes :func:`perflow.build_pag` records (without gathering anything)."""
        self.build()
        attrs = {k: v for k, v in self.defs.attrs.items() if isinstance(v, str | int | float | bool)}
        loc_proc = self.defs.locations["process"].to_numpy(dtype=np.int64)
        n_msg = sum(x["n_messages"] for x in self._info)
        attrs.update(
            {
                "nprocs": int(len(np.unique(loc_proc))) if len(loc_proc) else 0,
                "unmatched_sends": int(sum(x["n_sends"] for x in self._info) - n_msg),
                "unmatched_recvs": int(sum(x["n_recvs"] for x in self._info) - n_msg),
                "clock_violations": int(sum(x["clock_violations"] for x in self._info)),
                "closed_open_instances": int(sum(x["n_closed"] for x in self._info)),
            }
        )
        return attrs

    @property
    def metric_info(self) -> dict[str, MetricInfo]:
        """Descriptions of the metrics (as ``PAG.metric_info``)."""
        self.build()
        info = {**DEFAULT_METRICS, **BYTE_METRICS}
        for x in self._info:
            info.update(x["metric_info"])
        return {m: info.get(m, MetricInfo(m)) for m in self._metric_names}

    @property
    def n_metric_rows(self) -> int:
        """Rows of the (gathered) metrics table."""
        self.build()
        return int(sum(x["n_rows"] for x in self._info))

    def pag(self) -> DaskPAG:
        """A PAG backed by this trace: tables are gathered only when a pass without a distributed form reads them."""
        from .lazy import DaskPAG

        if "lazy" not in self._cache:
            self._cache["lazy"] = DaskPAG(self)
        return self._cache["lazy"]

    def run_pass(self, name: str, *inputs: Any, **settings: Any) -> Any:
        """Run a registered pass without a distributed form on the gathered PAG (logs a warning when large)."""
        from ..flow.registry import get_pass

        spec = get_pass(name)
        log.info("pass %r has no distributed form: running it on the gathered PAG", name)
        pag = self.to_pag()
        return spec.func(pag, *inputs, **settings)

    def summary(self) -> dict[str, Any]:
        """Events, partitions, cut and balance, timings."""
        s = {"events": self.n_events, "partitions": self.n_parts, **self.partitioning.summary()}
        s["exchanged_send_records"] = self._cache.get("exchanged_send_records", 0)
        s["exchanged_acks"] = self._cache.get("exchanged_acks", 0)
        s["timings"] = dict(self.timings)
        return s

    def __repr__(self) -> str:
        p = self.partitioning.summary()
        return f"<DistTrace parts={p['parts']} ranks={p['ranks']} cut={p['cut']:.0f} built={self._built}>"
