"""A trace whose partitions live on Dask workers: the trace pipeline run on a :class:`~.runtime.DaskRuntime`.

:meth:`perflow.dask.Engine.load` makes a :class:`DistTrace`. Building it runs
the stages of :mod:`perflow.trace.pipeline` (the very functions
:func:`perflow.build_pag` runs in one partition) on the workers; the results
stay there. :meth:`DistTrace.pag` is a :class:`~.lazy.DaskPAG` whose analyses
run on the workers and whose tables are gathered only when a pass reads them;
:meth:`DistTrace.to_pag` gathers everything (equal to ``build_pag`` of the
same trace).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._arrays import unique
from ..pag.instances import Trace, conform
from ..pag.pag import PAG, MetricInfo
from ..pag.partitioned import Each
from ..trace import parts as P
from ..trace.clc import collective_extremes, early_collectives
from ..trace.clcmode import mode as clc_mode
from ..trace.partition import Partitioning
from ..trace.pipeline import BuildOptions, Built, build
from ..trace.raw import RawTrace
from .lazy import DaskPAG, LazyTrace
from .runtime import DaskRuntime

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine
    from .lazy import DaskPAG

__all__ = ["DistTrace", "GATHER_WARN_EVENTS"]

log = logging.getLogger(__name__)

#: gathering a trace with more events than this onto the client logs a warning
GATHER_WARN_EVENTS = 20_000_000


def _unique_locations(rows: tuple[pd.DataFrame, Any, bool]) -> np.ndarray:
    r = rows[0]
    return unique(r["process"].to_numpy().astype(np.int64) * (1 << 32) + r["thread"].to_numpy().astype(np.int64))


class DistTrace:
    """A trace built on Dask workers (made by :meth:`perflow.dask.Engine.load`).

    Attributes
    ----------
    partitioning : Partitioning
        Which processes each partition holds, and the cut it achieves.
    timings : dict
        Seconds spent in each phase (``scout``, ``ingest``, ``scan``, ``merge``,
        ``finalize``, ``match``, ``metrics``, ``collectives``, analyses).
    clock_violations : dict
        After the build: clock-condition violations (``messages``,
        ``collectives``). The Dask engine does not correct them (a logged
        warning says so); :func:`perflow.read` does (``clock_correction``).
    """

    def __init__(
        self, engine: Engine, defs: RawTrace, partitioning: Partitioning, raws: list[Any], *,
        close_open: bool = False, validate: bool = True, infer: bool = False,
    ) -> None:  # fmt: skip
        self.engine = engine
        self.defs = defs
        self.partitioning = partitioning
        self.runtime = DaskRuntime(engine, len(raws))
        self._raws = raws
        self._opts = BuildOptions(close_open, validate, infer)
        self.timings: dict[str, float] = {}
        self._built: Built | None = None
        self._cache: dict[str, Any] = {}
        #: clock-condition violations the build found (``messages``, ``collectives``); not corrected here
        self.clock_violations: dict[str, int] = {}

    # ------------------------------------------------------------------ building
    @property
    def n_parts(self) -> int:
        """Number of partitions."""
        return self.runtime.n_parts

    @property
    def built(self) -> Built:
        """The pipeline's results (building on first use)."""
        self.build()
        assert self._built is not None
        return self._built

    def build(self) -> DistTrace:
        """Run the trace pipeline on the workers (idempotent)."""
        if self._built is None:
            p = self.partitioning
            self._built = build(self.runtime, self._raws, self.defs, p.processes, p.assign, self._opts)
            self.timings.update(self._built.timings)
            self._raws = []  # the raw partitions are released
            self._check_clocks()
        return self

    def _check_clocks(self) -> None:
        """Count the clock-condition violations; the Dask engine does not correct them: say so.

        ``perflow.read`` (and :func:`perflow.build_pag`) correct the timestamps
        of a trace that violates the clock condition (``clock_correction="auto"``,
        :mod:`perflow.trace.clc`); here the analyses see the recorded times.
        """
        b = self._built
        assert b is not None
        messages = int(sum(x["clock_violations"] for x in b.info))
        rt = self.runtime
        collectives = early_collectives(rt.gather(rt.map(collective_extremes, Each(b.coll))))
        self.clock_violations = {"messages": messages, "collectives": collectives}
        how = clc_mode(None)
        if messages + collectives and how != "off":
            log.warning(
                "%s: %d clock-condition violations (%d messages received before sent, %d collectives left before "
                "their last member entered) are not corrected: the Dask engine does no clock correction "
                "(clock_correction=%r); perflow.read corrects them",
                self.defs.attrs.get("source", "trace"), messages + collectives, messages, collectives, how,
            )  # fmt: skip

    def parts(self) -> list[Any]:
        """Futures of the partitions as partitioned analyses see them (:class:`~perflow.trace.parts.TracePart`)."""
        if "parts" not in self._cache:
            b = self.built
            self._cache["parts"] = self.runtime.map(
                P.t_part, Each(b.tables), Each(b.messages), Each(b.rows), Each(b.coll), self.n_vertices
            )
        return self._cache["parts"]

    # ------------------------------------------------------------------ small facts
    @property
    def n_events(self) -> int:
        """Events in the trace."""
        return self.built.n_events

    @property
    def n_vertices(self) -> int:
        """Vertices of the calling-context tree."""
        return len(self.built.tree["cp_parent"])

    @property
    def vertex_table(self) -> pd.DataFrame:
        """The top-down vertex table."""
        if "vertices" not in self._cache:
            self._cache["vertices"] = P.vertices(self.built)
        return self._cache["vertices"]

    @property
    def metric_names(self) -> list[str]:
        """Metric columns."""
        return P.metric_names(self.built)

    @property
    def metric_info(self) -> dict[str, MetricInfo]:
        """Descriptions of the metrics."""
        return P.metric_info(self.built)

    @property
    def n_metric_rows(self) -> int:
        """Rows of the (gathered) metrics table."""
        return int(sum(x["n_rows"] for x in self.built.info))

    def pag_attrs(self) -> dict[str, Any]:
        """The PAG's attributes (nothing is gathered)."""
        return P.pag_attrs(self.built)

    def gathered(self, table: str) -> bool:
        """Whether ``table`` (``"metrics"``, ``"trace"``) has been gathered to the client."""
        return table in self._cache

    def locations(self) -> pd.DataFrame:
        """The (process, thread) locations with metric rows, sorted (only their keys are gathered)."""
        if "locations" not in self._cache:
            rt = self.runtime
            keys = rt.gather(rt.map(_unique_locations, Each(self.built.rows)))
            k = unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
            self._cache["locations"] = pd.DataFrame({"process": k >> 32, "thread": k & ((1 << 32) - 1)})
        return self._cache["locations"]

    def span(self) -> tuple[float, float]:
        """(first enter, last leave) over all intervals."""
        s = [x["span"] for x in self.built.info if x["span"] is not None]
        return (min(a for a, _ in s), max(b for _, b in s)) if s else (0.0, 0.0)

    # ------------------------------------------------------------------ gathered results
    def _warn_gather(self, what: str) -> None:
        if self.n_events > GATHER_WARN_EVENTS:
            log.warning("gathering %s of a %d-event trace onto the client", what, self.n_events)

    def metrics_frame(self) -> pd.DataFrame:
        """The metrics table (gathered), equal to ``build_pag(...).metrics``."""
        if "metrics" not in self._cache:
            self._cache["metrics"] = P.metrics_frame(self.built)
        return self._cache["metrics"]

    def trace_tables(self) -> Trace:
        """Intervals, messages and collectives (gathered), equal to ``build_pag(...).trace``."""
        if "trace" not in self._cache:
            self._warn_gather("the instance tables (intervals, messages, collectives)")
            self._cache["trace"] = P.trace_tables(self.built)
        return self._cache["trace"]

    def messages(self) -> pd.DataFrame:
        """All matched messages in the order of ``trace.messages``, plus ``late_sender_wait`` (gathered)."""
        self._warn_gather("the messages")
        return P.gathered_messages(self.built)

    def collectives(self) -> pd.DataFrame:
        """All collective rows in the order of ``trace.collectives``, plus ``wait`` and ``last`` (gathered)."""
        self._warn_gather("the collectives")
        parts = [c for c in self.runtime.gather(list(self.built.coll)) if len(c)]
        if not parts:
            df = conform("collectives", None)
            df["wait"], df["last"] = np.zeros(0), np.zeros(0, dtype=bool)
            return df
        c = pd.concat(parts, ignore_index=True)
        order = np.lexsort((c["thread"].to_numpy(), c["process"].to_numpy(), c["instance"].to_numpy()))
        return c.take(order).reset_index(drop=True)

    def to_pag(self) -> PAG:
        """The whole PAG on the client, equal to :func:`perflow.build_pag` of the same trace."""
        t0 = time.perf_counter()
        pag = PAG(
            self.vertex_table, self.metrics_frame(), metric_info=self.metric_info, trace=self.trace_tables(),
            attrs=self.pag_attrs(),
        )  # fmt: skip
        self.timings["gather"] = time.perf_counter() - t0
        return pag

    def lazy_trace(self) -> Trace:
        """A Trace whose tables are gathered on first access (the ``trace`` of :meth:`pag`)."""

        if "lazy_trace" not in self._cache:
            self._cache["lazy_trace"] = LazyTrace(self)
        return self._cache["lazy_trace"]

    def pag(self) -> DaskPAG:
        """A PAG backed by this trace: analyses run on the workers, tables are gathered when a pass reads them."""

        if "lazy" not in self._cache:
            self._cache["lazy"] = DaskPAG(self)
        return self._cache["lazy"]

    def aggregate(self, metric: str, agg: str = "sum") -> pd.Series:
        """One metric aggregated across locations per vertex, as :meth:`perflow.PAG.aggregate` (on the workers)."""
        return self.pag().aggregate(metric, agg)

    def summary(self) -> dict[str, Any]:
        """Events, partitions, cut and balance, records exchanged, the client's waits, timings."""
        s = {"events": self.n_events, "partitions": self.n_parts, **self.partitioning.summary()}
        s.update({f"exchanged_{k}": v for k, v in self.runtime.exchanged.items()})
        s["round_trips"] = self.runtime.round_trips  # the client's waits for results, loading included
        s["clock_violations"] = dict(self.clock_violations)
        s["timings"] = dict(self.timings)
        return s

    def __repr__(self) -> str:
        p = self.partitioning.summary()
        built = self._built is not None
        return f"<DistTrace parts={p['parts']} ranks={p['ranks']} cut={p['cut']:.0f} built={built}>"
