"""perflow's trace analyses under Scalasca's metric names, per call path and location (what a Cube user sees).

:func:`scalasca_metrics` turns the wait states (:data:`~perflow.trace.analyses.WAIT_INSTANCES`),
the critical path and the delay costs of a trace-backed PAG into one long
table: ``metric`` (Scalasca's unique metric name: ``mpi_latesender``,
``delay_barrier_longterm``, ...), ``vertex``, ``process``, ``thread``,
``value``, with the values a CUBE4 file stores: exclusive along the call tree,
inclusive along the metric tree (``mpi_latesender`` holds its wrong-order part
``mpi_latesender_wo`` too). :data:`METRICS` is the metric tree itself, in the
order of Scalasca's trace-analysis report (``scout.cubex``), and
:func:`perflow.writers.cube.write_cube` writes the table as a CUBE4 file.

Where the numbers come from:

* ``time``, ``visits``: the PAG's exclusive time and visits (with the OpenMP
  team layout of :mod:`perflow.trace.omptree`: a parallel region's fork and
  join on its thread are the region's time);
* wait states: each perflow kind adds its instances' amounts to one Scalasca
  metric (:data:`KIND_METRIC`; the counts ``mpi_sls_count``, ``mpi_cls_count``, ...
  count Late Sender and Late Receiver instances, split by whether the message
  carried data); ``omp_management``/``omp_fork`` are the PAG metrics
  ``omp_fork`` + ``omp_join`` and ``omp_fork``;
* message and collective counts and bytes (``syncs_*``, ``comms_*``,
  ``bytes_*``): per matched message, on the call that sent or completed it,
  and per recorded collective (MPI_Init and MPI_Finalize count through the
  communicator records Score-P 8 writes inside them);
* ``critical_path``: the critical path's time per call path and location;
* ``delay_X`` / ``delay_X_longterm``: the short-term and long-term delay
  costs of the wait states of category ``X`` (:data:`DELAY_CATEGORY`), with
  long-term costs filed under the wait they finally cause.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from .analyses import CRITICAL_PATH, DELAY_COSTS, WAIT_INSTANCES, CriticalSettings, DelaySettings, trace_of

__all__ = [
    "CubeMetric",
    "METRICS",
    "KIND_METRIC",
    "DELAY_CATEGORY",
    "ScalascaSettings",
    "scalasca_metrics",
    "metric_name",
]

#: where a Cube user finds the meaning of each metric (Scalasca 2.6's metric documentation)
HELP_URL = "https://apps.fz-juelich.de/scalasca/releases/scalasca/2.6/help/scalasca_patterns.html#{name}"


@dataclass(frozen=True)
class ScalascaSettings(CriticalSettings):
    """Settings of the analyses behind Scalasca's metrics: wait states, critical path, delay costs.

    Attributes
    ----------
    wrong_order_window, late_receiver, early_reduce, collective_span
        Those of :class:`~perflow.trace.waits.WaitSettings`.
    path_ends, follow_locks
        Those of :class:`~perflow.trace.analyses.CriticalSettings`.
    long_term_kind : {"caused", "first"}
        File long-term delay costs under the wait they finally cause (Scalasca's rule) or land on.
    """

    long_term_kind: Literal["caused", "first"] = "caused"


@dataclass(frozen=True)
class CubeMetric:
    """One metric of the report: its unique name, display name, parent in the metric tree, unit, type."""

    name: str
    display: str
    parent: str | None
    unit: str  # "sec", "occ" or "bytes"
    description: str

    @property
    def integer(self) -> bool:
        """Whether the values are counts (written as integers)."""
        return self.unit != "sec"


def _m(name: str, display: str, parent: str | None, unit: str, description: str) -> CubeMetric:
    return CubeMetric(name, display, parent, unit, description)


#: the metric tree of a trace analysis, in report order (parents before their children)
METRICS: tuple[CubeMetric, ...] = (
    _m("time", "Time", None, "sec", "time spent in the call path itself"),
    _m("visits", "Visits", None, "occ", "number of times the call path was entered"),
    _m("mpi_init_completion", "MPI Init Completion", None, "sec", "time in MPI_Init after the first process could leave"),
    _m("mpi_finalize_wait", "MPI Wait at Finalize", None, "sec", "waiting in MPI_Finalize for the last process"),
    _m("mpi_barrier_wait", "MPI Wait at Barrier", None, "sec", "waiting in a barrier for the last process"),
    _m("mpi_barrier_completion", "MPI Barrier Completion", None, "sec", "barrier time after the first process left"),
    _m("mpi_latesender", "MPI Late Sender", None, "sec", "a receive waiting for a send that starts late"),
    _m("mpi_latesender_wo", "MPI Late Sender, wrong order", "mpi_latesender", "sec",
       "Late Sender caused by messages received in another order than sent"),
    _m("mpi_lswo_different", "MPI Late Sender, wrong order, different sources", "mpi_latesender_wo", "sec",
       "wrong-order Late Sender, the earlier message from another source"),
    _m("mpi_lswo_same", "MPI Late Sender, wrong order, same source", "mpi_latesender_wo", "sec",
       "wrong-order Late Sender, the earlier message from the same source"),
    _m("mpi_latereceiver", "MPI Late Receiver", None, "sec", "a blocking send waiting for its receive to be posted"),
    _m("mpi_earlyreduce", "MPI Early Reduce", None, "sec", "the root of an N-to-1 collective waiting for the senders"),
    _m("mpi_earlyscan", "MPI Early Scan", None, "sec", "a rank waiting in a scan for the lower ranks"),
    _m("mpi_latebroadcast", "MPI Late Broadcast", None, "sec", "a non-root waiting for the root of a 1-to-N collective"),
    _m("mpi_wait_nxn", "MPI Wait at N x N", None, "sec", "waiting in an all-to-all collective for the last process"),
    _m("mpi_nxn_completion", "MPI N x N Completion", None, "sec", "all-to-all time after the first process left"),
    _m("omp_management", "OMP Management", None, "sec", "forking and joining OpenMP thread teams"),
    _m("omp_fork", "OMP Fork", "omp_management", "sec", "forking OpenMP thread teams"),
    _m("omp_ebarrier_wait", "OMP Wait at Explicit Barrier", None, "sec", "waiting at an explicit OpenMP barrier"),
    _m("omp_ibarrier_wait", "OMP Wait at Implicit Barrier", None, "sec", "waiting at an implicit OpenMP barrier"),
    _m("omp_lock_contention_critical", "OMP Critical Contention", None, "sec",
       "waiting to enter a critical section another thread holds"),
    _m("omp_lock_contention_api", "OMP Lock API Contention", None, "sec", "waiting for an OpenMP lock another holds"),
    _m("pthread_lock_contention_mutex_lock", "Pthread Mutex Lock Contention", None, "sec",
       "waiting for a POSIX threads mutex another thread holds"),
    _m("syncs_send", "MPI P2P Send Synchronizations", None, "occ", "sends of messages without data"),
    _m("mpi_slr_count", "MPI Late Receiver Synchronizations", "syncs_send", "occ",
       "Late Receiver instances of messages without data"),
    _m("syncs_recv", "MPI P2P Receive Synchronizations", None, "occ", "receives of messages without data"),
    _m("mpi_sls_count", "MPI Late Sender Synchronizations", "syncs_recv", "occ",
       "Late Sender instances of messages without data"),
    _m("mpi_slswo_count", "MPI Late Sender, wrong order, Synchronizations", "mpi_sls_count", "occ",
       "wrong-order Late Sender instances of messages without data"),
    _m("syncs_coll", "MPI Collective Synchronizations", None, "occ", "collective operations that moved no data"),
    _m("comms_send", "MPI P2P Send Communications", None, "occ", "sends of messages with data"),
    _m("mpi_clr_count", "MPI Late Receiver Communications", "comms_send", "occ",
       "Late Receiver instances of messages with data"),
    _m("comms_recv", "MPI P2P Receive Communications", None, "occ", "receives of messages with data"),
    _m("mpi_cls_count", "MPI Late Sender Communications", "comms_recv", "occ",
       "Late Sender instances of messages with data"),
    _m("mpi_clswo_count", "MPI Late Sender, wrong order, Communications", "mpi_cls_count", "occ",
       "wrong-order Late Sender instances of messages with data"),
    _m("comms_cxch", "MPI Collective Exchange Communications", None, "occ", "collectives that sent and received data"),
    _m("comms_csrc", "MPI Collective Communications as Source", None, "occ", "collectives that only sent data"),
    _m("comms_cdst", "MPI Collective Communications as Destination", None, "occ", "collectives that only received"),
    _m("bytes_sent", "MPI P2P Bytes Sent", None, "bytes", "bytes sent by point-to-point messages"),
    _m("bytes_rcvd", "MPI P2P Bytes Received", None, "bytes", "bytes received by point-to-point messages"),
    _m("bytes_cout", "MPI Collective Bytes Outgoing", None, "bytes", "bytes sent by collectives"),
    _m("bytes_cin", "MPI Collective Bytes Incoming", None, "bytes", "bytes received by collectives"),
    _m("mpi_rma_wait_at_create", "MPI Wait at Window Create", None, "sec", "window creation waiting for the last"),
    _m("mpi_rma_wait_at_free", "MPI Wait at Window Free", None, "sec", "MPI_Win_free waiting for the last process"),
    _m("mpi_rma_sync_late_post", "MPI Late Post (Synchronization)", None, "sec", "an origin waiting for a late post"),
    _m("mpi_rma_early_wait", "MPI Early Wait", None, "sec", "MPI_Win_wait waiting for the last origin"),
    _m("mpi_rma_wait_at_fence", "MPI Wait at Fence", None, "sec", "MPI_Win_fence waiting for the last process"),
    _m("critical_path", "Critical path", None, "sec", "time of the call path on the critical path"),
    *(
        _m(f"delay_{cat}{lt}", f"{label} Delay Costs{' (long-term)' if lt else ''}", None, "sec",
           f"{'long-term' if lt else 'short-term'} delay costs of the {label} wait states: extra work that caused "
           f"them{' through other wait states' if lt else ' directly'}")
        for cat, label in (
            ("latesender", "Late Sender"), ("latereceiver", "Late Receiver"), ("barrier", "MPI Barrier"),
            ("n2n", "MPI N x N Collective"), ("12n", "MPI 1-to-N Collective"), ("n21", "MPI N-to-1 Collective"),
            ("ompbarrier", "OpenMP Barrier"), ("ompidle", "OpenMP Idle Threads"),
        )
        for lt in ("", "_longterm")
    ),
)  # fmt: skip
_BY_NAME = {m.name: m for m in METRICS}

#: perflow wait kind -> the Scalasca metric its instances add to (a leaf; its ancestors get it too)
KIND_METRIC: dict[str, str] = {
    "late_sender": "mpi_latesender",
    "late_sender_wrong_order_same": "mpi_lswo_same",
    "late_sender_wrong_order_diff": "mpi_lswo_different",
    "late_receiver": "mpi_latereceiver",
    "wait_barrier": "mpi_barrier_wait",
    "barrier_completion": "mpi_barrier_completion",
    "finalize_wait": "mpi_finalize_wait",
    "init_completion": "mpi_init_completion",
    "wait_nxn": "mpi_wait_nxn",
    "nxn_completion": "mpi_nxn_completion",
    "late_broadcast": "mpi_latebroadcast",
    "early_reduce": "mpi_earlyreduce",
    "early_scan": "mpi_earlyscan",
    "omp_barrier_wait": "omp_ebarrier_wait",
    "omp_ibarrier_wait": "omp_ibarrier_wait",
    "lock_contention_critical": "omp_lock_contention_critical",
    "lock_contention_api": "omp_lock_contention_api",  # pthread_lock_contention_mutex_lock for POSIX mutexes
    "rma_wait_at_fence": "mpi_rma_wait_at_fence",
    "rma_wait_at_create": "mpi_rma_wait_at_create",
    "rma_wait_at_free": "mpi_rma_wait_at_free",
    "rma_late_post": "mpi_rma_sync_late_post",
    "rma_early_wait": "mpi_rma_early_wait",
}
#: perflow wait kind -> Scalasca's delay-cost category (``delay_<category>``); kinds without one have none
DELAY_CATEGORY: dict[str, str] = {
    "late_sender": "latesender",
    "late_sender_wrong_order_same": "latesender",
    "late_sender_wrong_order_diff": "latesender",
    "late_receiver": "latereceiver",
    "wait_barrier": "barrier",
    "wait_nxn": "n2n",
    "late_broadcast": "12n",
    "early_reduce": "n21",
    "omp_barrier_wait": "ompbarrier",
    "omp_ibarrier_wait": "ompbarrier",
    "omp_idle": "ompidle",
}


def metric_name(kind: str, *, delay: bool = False, long_term: bool = False) -> str | None:
    """The Scalasca metric of a perflow wait kind (its wait state, or with ``delay`` its delay costs), or None."""
    if not delay:
        return KIND_METRIC.get(kind)
    cat = DELAY_CATEGORY.get(kind)
    return None if cat is None else f"delay_{cat}{'_longterm' if long_term else ''}"


def _ancestors(name: str) -> list[str]:
    out = [name]
    while _BY_NAME[out[-1]].parent is not None:
        out.append(_BY_NAME[out[-1]].parent)  # type: ignore[arg-type]
    return out


def _rows(metric: str, vertex: Any, process: Any, thread: Any, value: Any) -> pd.DataFrame:
    n = len(vertex) if np.ndim(vertex) else len(np.atleast_1d(value))
    return pd.DataFrame(
        {
            "metric": np.repeat(metric, n) if np.ndim(metric) == 0 else np.asarray(metric),
            "vertex": np.broadcast_to(np.asarray(vertex, dtype=np.int64), (n,)),
            "process": np.broadcast_to(np.asarray(process, dtype=np.int64), (n,)),
            "thread": np.broadcast_to(np.asarray(thread, dtype=np.int64), (n,)),
            "value": np.broadcast_to(np.asarray(value, dtype=np.float64), (n,)),
        }
    )


def _pthread_api(pag: Any, vertex: np.ndarray) -> np.ndarray:
    """Per vertex id: whether it is a POSIX threads call (its lock contention is pthread's metric)."""
    vt = pag.vertex_table
    names = vt["name"].astype(str).to_numpy()
    v = np.asarray(vertex, dtype=np.int64)
    ok = (v >= 0) & (v < len(names))
    return ok & np.char.startswith(names[np.where(ok, v, 0)].astype(str), "pthread_")


def _wait_rows(pag: Any, w: pd.DataFrame) -> list[pd.DataFrame]:
    parts = []
    kind = w["kind"].astype(str).to_numpy()
    vertex = w["vertex"].to_numpy()
    leaf = np.array([KIND_METRIC.get(k, "") for k in kind], dtype=object)
    api = kind == "lock_contention_api"
    if api.any():
        leaf[api] = np.where(_pthread_api(pag, vertex[api]), "pthread_lock_contention_mutex_lock", leaf[api])
    for name in pd.unique(leaf):
        if not name:
            continue
        sel = leaf == name
        for anc in _ancestors(str(name)):
            parts.append(_rows(anc, vertex[sel], w["process"].to_numpy()[sel], w["thread"].to_numpy()[sel],
                               w["amount"].to_numpy()[sel]))  # fmt: skip
    # Late Sender / Late Receiver instance counts, split by whether the message carried data
    m = pag.trace.messages
    msg = w["message"].to_numpy().astype(np.int64)
    has_data = np.zeros(len(w), dtype=bool)
    ok = msg >= 0
    if len(m):
        has_data[ok] = m["bytes"].to_numpy()[msg[ok]] > 0
    ls = np.isin(kind, ("late_sender", "late_sender_wrong_order_same", "late_sender_wrong_order_diff"))
    wo = np.char.startswith(kind.astype(str), "late_sender_wrong_order")
    lr = kind == "late_receiver"
    for sel, comm, sync in (
        (ls, "mpi_cls_count", "mpi_sls_count"), (wo, "mpi_clswo_count", "mpi_slswo_count"),
        (lr, "mpi_clr_count", "mpi_slr_count"),
    ):  # fmt: skip
        for data, name in ((True, comm), (False, sync)):
            s = sel & ok & (has_data == data)
            if s.any():
                parts.append(_rows(name, vertex[s], w["process"].to_numpy()[s], w["thread"].to_numpy()[s], 1.0))
    return parts


def _traffic_rows(pag: Any) -> list[pd.DataFrame]:
    tr = pag.trace
    iv = tr.intervals
    ivx, ivp, ivt = (iv[c].to_numpy().astype(np.int64) for c in ("vertex", "process", "thread"))
    parts = []
    m = tr.messages
    if len(m):
        b = m["bytes"].to_numpy().astype(np.float64)
        for col, counts, nbytes in (("send_interval", "send", "bytes_sent"), ("recv_interval", "recv", "bytes_rcvd")):
            i = m[col].to_numpy().astype(np.int64)
            ok = i >= 0
            i, bb = i[ok], b[ok]
            data = bb > 0
            parts.append(_rows(f"syncs_{counts}", ivx[i[~data]], ivp[i[~data]], ivt[i[~data]], 1.0))
            parts.append(_rows(f"comms_{counts}", ivx[i[data]], ivp[i[data]], ivt[i[data]], 1.0))
            parts.append(_rows(nbytes, ivx[i[data]], ivp[i[data]], ivt[i[data]], bb[data]))
    c = tr.collectives
    if len(c):
        rec = (c["op"].to_numpy() < 100) & (c["interval"].to_numpy() >= 0)  # recorded, not synthesised
        c = c[rec]
        i = c["interval"].to_numpy().astype(np.int64)
        sent, recv = c["sent"].to_numpy().astype(np.float64), c["received"].to_numpy().astype(np.float64)
        for name, sel in (
            ("syncs_coll", (sent == 0) & (recv == 0)), ("comms_cxch", (sent > 0) & (recv > 0)),
            ("comms_csrc", (sent > 0) & (recv == 0)), ("comms_cdst", (sent == 0) & (recv > 0)),
        ):  # fmt: skip
            parts.append(_rows(name, ivx[i[sel]], ivp[i[sel]], ivt[i[sel]], 1.0))
        for name, v in (("bytes_cout", sent), ("bytes_cin", recv)):
            parts.append(_rows(name, ivx[i[v > 0]], ivp[i[v > 0]], ivt[i[v > 0]], v[v > 0]))
    return parts


def scalasca_metrics(pag: Any, settings: ScalascaSettings | None = None) -> pd.DataFrame:
    """perflow's analyses of a trace-backed PAG under Scalasca's metric names (see the module docstring).

    ``settings`` are those of the wait states, the critical path and the
    delay costs (Scalasca's rules by default). Returns ``metric``,
    ``vertex``, ``process``, ``thread``, ``value``: one row per non-zero
    value, metrics in :data:`METRICS` order, then by vertex, process, thread.
    """
    trace_of(pag)
    s = settings or ScalascaSettings()
    ws = s.waits()
    m = pag.metrics.reset_index()
    parts = [_rows("time", m["vertex"], m["process"], m["thread"], m["time_exc"])]
    parts.append(_rows("visits", m["vertex"], m["process"], m["thread"], m["visits"]))
    if "omp_fork" in m.columns:
        fork = m["omp_fork"].to_numpy()
        join = m["omp_join"].to_numpy() if "omp_join" in m.columns else 0.0
        parts.append(_rows("omp_management", m["vertex"], m["process"], m["thread"], fork + join))
        parts.append(_rows("omp_fork", m["vertex"], m["process"], m["thread"], fork))
    w = pag.analyses.get(WAIT_INSTANCES, ws)
    parts += _wait_rows(pag, w)
    parts += _traffic_rows(pag)
    cp = pag.analyses.get(
        CRITICAL_PATH, CriticalSettings(**asdict(ws), path_ends=s.path_ends, follow_locks=s.follow_locks)
    )
    seg = cp.segments
    parts.append(_rows("critical_path", seg["vertex"], seg["process"], seg["thread"], seg["end"] - seg["start"]))
    dc = pag.analyses.get(
        DELAY_COSTS, DelaySettings(**asdict(ws), long_term=True, long_term_kind=s.long_term_kind)
    ).costs
    dc = dc[~dc["propagating"].to_numpy()]
    names = [
        metric_name(str(k), delay=True, long_term=bool(lt))
        for k, lt in zip(dc["wait_kind"].astype(str), dc["long_term"].to_numpy())
    ]
    keep = np.array([n is not None for n in names], dtype=bool)
    if keep.any():
        d = dc[keep]
        parts.append(_rows(np.asarray(names, dtype=object)[keep], d["vertex"], d["process"], d["thread"], d["cost"]))
    out = pd.concat([p for p in parts if len(p)], ignore_index=True)
    out = out[(out["value"].to_numpy() != 0) & (out["vertex"].to_numpy() >= 0)]  # a call path to charge
    out = out.groupby(["metric", "vertex", "process", "thread"], sort=False, observed=True)["value"].sum().reset_index()
    rank = {mt.name: i for i, mt in enumerate(METRICS)}
    out["metric"] = pd.Categorical(out["metric"], categories=[mt.name for mt in METRICS])
    order = np.lexsort((out["thread"], out["process"], out["vertex"], out["metric"].map(rank).to_numpy()))
    return out.iloc[order].reset_index(drop=True)
