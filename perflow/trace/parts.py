"""What a built trace is made of: the PAG gathered from its partitions, and the partitions as analyses see them.

:func:`assemble` gathers a :class:`~perflow.trace.pipeline.Built` trace
into one :class:`~perflow.PAG` (its metrics table, and its instance tables
when asked). :class:`TracePart` presents one built partition through the
:class:`~perflow.pag.partitioned.Partition` interface, so that a
partitioned analysis runs on it where it lives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._arrays import unique
from ..pag.instances import Trace
from ..pag.pag import DEFAULT_METRICS, PAG, MetricInfo
from ..pag.partitioned import Each
from ..pag.vertices import normalize_vertices
from .numbering import concat_metric_rows, gather_trace, vertex_table
from .pipeline import Built
from .records import gather_messages
from .rows import BYTE_METRICS
from .stages import PartTables, local_rows

__all__ = ["assemble", "metric_names", "metric_info", "pag_attrs", "metrics_frame", "trace_tables", "vertices",
           "TracePart", "t_part", "t_gather_part"]  # fmt: skip


def vertices(b: Built) -> pd.DataFrame:
    """The top-down vertex table."""
    return normalize_vertices(vertex_table(b.defs.regions, b.tree["cp_parent"], b.tree["cp_region"]))


def _has_sent(b: Built) -> bool:
    return any(x["has_sent"] for x in b.info)


def metric_names(b: Built) -> list[str]:
    """Metric columns of the PAG (byte metrics only when some byte was attributed to a call)."""
    cols: list[str] = []
    for x in b.info:
        cols += [c for c in x["columns"] if c not in ("vertex", "process", "thread") and c not in cols]
    if not _has_sent(b):
        cols = [c for c in cols if c not in ("bytes_sent", "bytes_recv")]
    return cols


def metric_info(b: Built) -> dict[str, MetricInfo]:
    """Descriptions of the metrics."""
    info = {**DEFAULT_METRICS, **BYTE_METRICS}
    for x in b.info:
        info.update(x["metric_info"])
    return {m: info.get(m, MetricInfo(m)) for m in metric_names(b)}


def pag_attrs(b: Built) -> dict[str, Any]:
    """The PAG's attributes: the trace's own, process count, unmatched messages, clock violations."""
    attrs = {k: v for k, v in b.defs.attrs.items() if isinstance(v, str | int | float | bool)}
    loc_proc = b.defs.locations["process"].to_numpy(dtype=np.int64)
    n_msg = sum(x["n_messages"] for x in b.info)
    attrs.update(
        {
            "nprocs": int(len(unique(loc_proc))) if len(loc_proc) else 0,
            "unmatched_sends": int(sum(x["n_sends"] for x in b.info) - n_msg),
            "unmatched_recvs": int(sum(x["n_recvs"] for x in b.info) - n_msg),
            "clock_violations": int(sum(x["clock_violations"] for x in b.info)),
            "closed_open_instances": int(sum(x["n_closed"] for x in b.info)),
        }
    )
    return attrs


def t_metric_frame(rows: tuple[pd.DataFrame, Any, bool]) -> pd.DataFrame:
    """The metric rows of one partition."""
    return rows[0]


def metrics_frame(b: Built) -> pd.DataFrame:
    """The metrics table, gathered."""
    rows = b.runtime.gather(b.runtime.map(t_metric_frame, _each(b.rows)))
    if not _has_sent(b):
        rows = [r.drop(columns=["bytes_sent", "bytes_recv"], errors="ignore") for r in rows]
    return concat_metric_rows(rows, len(b.tree["cp_parent"]))


def t_gather_part(t: PartTables, messages: pd.DataFrame, coll: pd.DataFrame) -> dict[str, Any]:
    """The instance tables of one partition."""
    return {
        "intervals": t.intervals,
        "ginst": t.ginst,
        "messages": messages,
        "coll": coll,
        "locks": t.locks,
        "io": t.io,
        "rma": t.rma,
    }


def trace_tables(b: Built) -> Trace:
    """Intervals, messages and collectives, gathered."""
    rt = b.runtime
    parts = rt.gather(rt.map(t_gather_part, _each(b.tables), _each(b.messages), _each(b.coll)))
    return gather_trace(b.defs, b.tree["n_intervals"], parts, threaded=b.tree["threaded"])


def gathered_messages(b: Built, keep: tuple[str, ...] = ("late_sender_wait",)) -> pd.DataFrame:
    """Every matched message in the order of ``trace.messages``, with extra columns ``keep``."""
    return gather_messages(b.runtime.gather(list(b.messages)), keep=keep, threaded=b.tree["threaded"])


def assemble(b: Built, *, with_trace: bool = True) -> PAG:
    """The whole PAG of a built trace."""
    return PAG(
        vertices(b),
        metrics_frame(b),
        metric_info=metric_info(b),
        trace=trace_tables(b) if with_trace else None,
        attrs=pag_attrs(b),
    )


def _each(refs: list[Any]) -> Any:

    return Each(refs)


class TracePart:
    """One built partition, as a partitioned analysis sees it (:class:`~perflow.pag.partitioned.Partition`)."""

    def __init__(
        self,
        tables: PartTables,
        messages: pd.DataFrame,
        rows: tuple[pd.DataFrame, Any, bool],
        coll: pd.DataFrame,
        n_vertices: int,
    ) -> None:
        self.tables = tables
        self._messages = messages
        self._rows = rows[0]
        self._coll = coll
        self.n_vertices = n_vertices
        self.processes = tables.processes

    def metric_rows(self, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        r = self._rows
        if metric not in r.columns:
            return None
        return (
            r["vertex"].to_numpy().astype(np.int64),
            r["process"].to_numpy().astype(np.int64),
            r["thread"].to_numpy().astype(np.int64),
            r[metric].to_numpy(dtype=np.float64, na_value=np.nan),
        )

    def messages(self) -> pd.DataFrame:
        return self._messages

    def collectives(self) -> pd.DataFrame:
        return self._coll

    def interval_vertex(self, rows: np.ndarray) -> np.ndarray:
        i, ok = local_rows(self.tables.ginst, rows)
        vx = self.tables.intervals["vertex"].to_numpy().astype(np.int64)
        return np.where(ok, vx[i] if len(vx) else -1, -1)


def t_part(tables: PartTables, messages: pd.DataFrame, rows: Any, coll: pd.DataFrame, n_vertices: int) -> TracePart:
    """The :class:`TracePart` of one partition (built where the partition lives)."""
    return TracePart(tables, messages, rows, coll, n_vertices)
