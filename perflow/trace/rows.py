"""A partition's final metric rows: times, visits, samples, metric deltas and byte counts.

Each partition holds whole processes, so every ``(vertex, process, thread)``
metric row is computed completely inside one partition, equal to the row of a
one-partition build. Bytes sent by a message whose receive completed in
another partition come back to the sender in acknowledgements.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..kinds import IoMode
from ..pag.frames import make_metrics
from ..pag.pag import MetricInfo
from .omptree import OMP_METRICS
from .rma import TRANSFERS
from .stages import PartTables, local_rows
from .tally import align_rows

__all__ = ["metric_rows", "BYTE_METRICS"]

#: descriptions of the metrics the pipeline adds besides times and visits
BYTE_METRICS = {
    "bytes_sent": MetricInfo("bytes_sent", "bytes", "exclusive", "bytes sent by messages and collectives"),
    "bytes_recv": MetricInfo("bytes_recv", "bytes", "exclusive", "bytes received by messages and collectives"),
    "samples": MetricInfo("samples", "count", "exclusive", "timer samples in the region itself"),
    "io_bytes_read": MetricInfo("io_bytes_read", "bytes", "exclusive", "bytes read by I/O operations"),
    "io_bytes_written": MetricInfo("io_bytes_written", "bytes", "exclusive", "bytes written by I/O operations"),
    "rma_bytes_put": MetricInfo(
        "rma_bytes_put", "bytes", "exclusive", "bytes an RMA call moved to a target (MPI_Put, accumulates, atomics)"
    ),
    "rma_bytes_get": MetricInfo(
        "rma_bytes_get", "bytes", "exclusive", "bytes an RMA call fetched from a target (MPI_Get, fetching atomics)"
    ),
    **{k: MetricInfo(k, "s", "exclusive", d) for k, d in OMP_METRICS.items()},
}


def metric_rows(
    t: PartTables, messages: pd.DataFrame, acks: list[pd.DataFrame], loc_proc: np.ndarray, loc_thr: np.ndarray
) -> tuple[pd.DataFrame, dict[str, MetricInfo], bool]:
    """A partition's final metric rows: times, visits, metric deltas and byte counts.

    Parameters
    ----------
    t : PartTables
    messages : pandas.DataFrame
        Messages received in this partition (their ``send_interval`` may be elsewhere).
    acks : list of pandas.DataFrame
        ``send_interval``/``bytes`` of this partition's sends matched in other partitions.
    loc_proc, loc_thr : numpy.ndarray
        Process and thread of every global location.

    Returns
    -------
    (pandas.DataFrame, dict, bool)
        Rows with ``vertex``, ``process``, ``thread`` and metric columns;
        metric descriptions; whether any byte was attributed to a sending
        instance (the single-process engine only adds byte metrics then).
    """
    v, loc = t.metric_vertex, t.metric_loc
    n_vertices = int(v.max()) + 1 if len(v) else 0
    m = make_metrics(v, loc_proc[loc], loc_thr[loc], t.metric_cols, n_vertices=n_vertices, duplicates="sum")
    # the interval columns as they are (int32): only the rows that get bytes are gathered, then widened
    ivx, ivp, ivt = (t.intervals[c].to_numpy() for c in ("vertex", "process", "thread"))

    def keys(ii: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # (vertex, process, thread) of rows ii
        return ivx[ii].astype(np.int64), ivp[ii].astype(np.int64), ivt[ii].astype(np.int64)

    def local(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return local_rows(t.ginst, g)

    sent_i, sent_v, recv_i, recv_v = [], [], [], []
    if len(messages):
        b = messages["bytes"].to_numpy(dtype=np.float64)
        i, ok = local(messages["send_interval"].to_numpy())
        sent_i.append(i[ok])
        sent_v.append(b[ok])
        i, ok = local(messages["recv_interval"].to_numpy())
        recv_i.append(i[ok])
        recv_v.append(b[ok])
    for a in acks:
        if len(a):
            i, ok = local(a["send_interval"].to_numpy())
            sent_i.append(i[ok])
            sent_v.append(a["bytes"].to_numpy(dtype=np.float64)[ok])
    c = t.coll
    if len(c):
        i, ok = local(c["interval"].to_numpy())
        sent_i.append(i[ok])
        sent_v.append(c["sent"].to_numpy(dtype=np.float64)[ok])
        recv_i.append(i[ok])
        recv_v.append(c["received"].to_numpy(dtype=np.float64)[ok])
    has_sent = bool(sum(len(x) for x in sent_i))
    cols: dict[str, np.ndarray] = {}
    if sent_i or recv_i:
        for name, ii, vv in (("bytes_sent", sent_i, sent_v), ("bytes_recv", recv_i, recv_v)):
            ii_ = np.concatenate(ii) if ii else np.zeros(0, np.int64)
            vv_ = np.concatenate(vv) if vv else np.zeros(0)
            cols[name] = align_rows(m, *keys(ii_), vv_)
    io = t.io
    if io is not None and len(io):  # bytes of each I/O operation, on the call that issued it
        i, ok = local(io["interval"].to_numpy())
        mode = io["mode"].to_numpy()
        for name, code in (("io_bytes_read", IoMode.READ), ("io_bytes_written", IoMode.WRITE)):
            sel = ok & (mode == code)
            ii = i[sel]
            cols[name] = align_rows(m, *keys(ii), io["bytes"].to_numpy(dtype=np.float64)[sel])
    rma = t.rma
    if rma is not None and len(rma):  # bytes of each RMA transfer, on the call that issued it
        i, ok = local(rma["interval"].to_numpy())
        ok = ok & np.isin(rma["kind"].to_numpy(), np.array(TRANSFERS, dtype=np.int8))
        for name, col in (("rma_bytes_put", "bytes"), ("rma_bytes_get", "received")):
            v = rma[col].to_numpy(dtype=np.float64)
            sel = ok & (v > 0)
            ii = i[sel]
            cols[name] = align_rows(m, *keys(ii), v[sel])
    for name, (dv, dl, vals) in t.deltas.items():
        cols[name] = align_rows(m, dv, loc_proc[dl], loc_thr[dl], vals)
    for k, a in cols.items():
        m[k] = a
    return m.reset_index(), dict(t.delta_info), has_sent
