"""A partition's interval rows and metric sums in global numbering: region instances and sample pieces.

Both read a :class:`~perflow.trace.stages.PartState` after the scan
(:func:`perflow.trace.stages.scan_part`): the region instances, the sample
pieces (:mod:`perflow.trace.pieces`) and the order of both per location.
The metric sums come from the same rows as the intervals, so that per
(vertex, location) ``time_inc = time_exc + sum of the children's time_inc``
and ``visits`` is the number of interval rows.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._jit import SMALL, njit
from .omptree import OMP_METRICS
from .tally import dense_keys

if TYPE_CHECKING:
    from .stages import PartState

__all__ = ["interval_rows", "metric_sums", "SharedRows"]


def interval_rows(
    st: PartState,
    cp_map: np.ndarray,
    grow: np.ndarray,
    ginst: np.ndarray,
    loc_proc: np.ndarray,
    loc_thr: np.ndarray,
    sampled: bool,
    pieced: bool = False,
    teams: bool = False,
    shared: SharedRows | None = None,
) -> pd.DataFrame:
    """The partition's interval rows in global numbering: region instances and sample pieces, in pre-order.

    With ``sampled`` (the trace has samples) a ``samples`` column holds the
    samples each piece was made of (0 for instances of recorded regions);
    with ``pieced`` (the trace has samples or region call stacks) a ``piece``
    column tells pieces (:mod:`perflow.trace.pieces`: computation known from
    samples and call stacks, not from Enter/Leave events) from region instances.
    With ``teams`` (the trace forks OpenMP teams) ``omp_fork``/``omp_join``
    hold the time each parallel-region instance spans beyond its recorded
    enter and leave (:mod:`perflow.trace.omptree`; 0 elsewhere).
    With ``shared`` (partitions built in one process) the columns are
    written into its arrays at the partition's global rows, when these are
    one range, so that gathering the partitions copies nothing.
    """
    res, pc = st.res, st.pieces
    n_rows = len(st.row_loc)
    at = None  # the partition's first global row, when its rows are one range of the shared columns
    if shared is not None and n_rows and int(grow[-1]) - int(grow[0]) == n_rows - 1 and int(grow[-1]) < shared.n:
        at = int(grow[0])  # global rows increase along the partition's rows (global_rows)

    def dest(name: str, dtype: Any) -> np.ndarray:
        if at is None:
            return np.empty(n_rows, dtype=dtype)
        assert shared is not None
        return shared.column(name, dtype)[at : at + n_rows]

    none = np.zeros(0, np.int64)
    pv, pp, pn = (pc.vertex, pc.parent, pc.n) if pc is not None else (none, none, none)
    pe, pl = (pc.enter, pc.leave) if pc is not None else (np.zeros(0), np.zeros(0))

    only_inst = not len(st.row_of_piece)  # no pieces: the rows are the instances, in order (pieces.row_order)

    def rows(name: str, inst: np.ndarray, piece: np.ndarray, dtype: Any) -> np.ndarray:
        out = dest(name, dtype)  # a copy, never a view into the scan's buffers
        if only_inst:
            out[:] = inst
        else:
            out[st.row_of_inst] = inst
            out[st.row_of_piece] = piece
        return out

    def gathered(name: str, values: np.ndarray, idx: np.ndarray, dtype: Any) -> np.ndarray:
        return np.take(values.astype(dtype, copy=False), idx, out=dest(name, dtype))  # one row-long gather

    ginst_or_none = np.append(ginst, -1).astype(np.int64, copy=False)  # local -1 (no instance) -> global -1

    def glob(local_inst: np.ndarray) -> np.ndarray:
        return ginst_or_none[local_inst]

    cols = {
        "process": gathered("process", loc_proc, st.row_loc, np.int32),  # per location first
        "thread": gathered("thread", loc_thr, st.row_loc, np.int32),
    }
    if only_inst:  # computed straight into place
        cols["vertex"] = gathered("vertex", cp_map, res.callpath, np.int32)
    else:
        cols["vertex"] = rows("vertex", cp_map.astype(np.int32)[res.callpath], cp_map[pv], np.int32)
    cols["enter"] = rows("enter", st.t_enter, pe, np.float64)
    cols["leave"] = rows("leave", st.t_leave, pl, np.float64)
    if only_inst:
        cols["parent"] = gathered("parent", ginst_or_none, res.parent, np.int64)
    else:
        cols["parent"] = rows("parent", glob(res.parent), glob(pp), np.int64)
    if sampled:
        cols["samples"] = rows("samples", np.zeros(len(st.inst_loc), np.int32), pn, np.int32)
    if pieced:
        cols["piece"] = rows("piece", np.zeros(len(st.inst_loc), bool), np.ones(len(pv), bool), bool)
    if teams:
        zero = np.zeros(len(st.inst_loc))
        for name in OMP_METRICS:
            cols[name] = rows(name, st.inst_metrics.get(name, zero), np.zeros(len(pv)), np.float64)
    return pd.DataFrame(cols, copy=False)


class SharedRows:
    """The interval columns of all partitions built in one process: each writes its rows' slice.

    Columns are made on first use (``column``), ``n`` rows each; partitions
    whose rows are one range of global rows write there
    (:func:`interval_rows`), and gathering them is taking the arrays whole
    (:func:`perflow.pag.instances.stack_rows`).
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self._cols: dict[tuple[str, np.dtype], np.ndarray] = {}
        self._lock = threading.Lock()

    def column(self, name: str, dtype: Any) -> np.ndarray:
        """The shared column ``name`` of ``dtype`` (made now, uninitialised, on the first call)."""
        key = (name, np.dtype(dtype))
        with self._lock:
            col = self._cols.get(key)
            if col is None:
                col = self._cols[key] = np.empty(self.n, dtype=key[1])
            return col


def metric_sums(st: PartState, nloc: int, sampled: bool = False) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Time, visits and samples summed per (local vertex, location): sorted keys ``vertex * nloc + location``.

    Every interval row (region instance or sample piece) gives its vertex
    ``time_inc``, ``time_exc`` (less what its children and pieces cover) and
    one visit; synthetic vertices without rows (frames above re-parented call
    paths and above pieces) get the inclusive time of what lies below them;
    ``samples`` counts the samples that cover time, on the vertex of their
    piece, or of their instance when their stack ends there. With ``sampled``
    (the trace has samples, in any partition) every partition has the
    ``samples`` column, 0 where it has none, so that the partitions' columns
    come in one order (that of a build in one partition).
    """
    uniq, cols = _metric_sums(st, nloc)
    if sampled and "samples" not in cols:  # right after visits, where the other partitions have it
        zeros = np.zeros(len(uniq))
        cols = {k: v for c, col in cols.items() for k, v in ((c, col), ("samples", zeros))[: 2 if c == "visits" else 1]}
    return uniq, cols


def _metric_sums(st: PartState, nloc: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    nloc = max(nloc, 1)
    # (key, time_inc, time_exc, counts a visit, samples or None) per kind of row
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, bool, np.ndarray | None]] = [
        (st.res.callpath * nloc + st.inst_loc, st.inc, st.exc, True, None)
    ]
    if st.syn_rows is not None and len(st.syn_rows[0]):
        sv, sl, sx = st.syn_rows
        parts.append((sv * nloc + sl, sx, np.zeros(len(sv)), False, None))
    pc = st.pieces
    if pc is not None:
        d = pc.leave - pc.enter
        parts.append((pc.vertex * nloc + pc.location, d, d, True, pc.n.astype(np.float64)))
        z = np.zeros(len(pc.direct_vertex))
        parts.append((pc.direct_vertex * nloc + pc.direct_location, z, z, False, np.ones(len(z))))
    if len(parts) == 1 and not st.inst_metrics:  # region instances only (the common case): one fused pass
        fused = _instance_sums(st.res.callpath, st.inst_loc, st.inc, st.exc, nloc)
        if fused is not None:
            return fused
    key = np.concatenate([q[0] for q in parts]).astype(np.int64, copy=False)
    uniq, inv = dense_keys(key)
    m = len(uniq)
    cols = {
        "time_inc": np.bincount(inv, weights=np.concatenate([q[1] for q in parts]), minlength=m),
        "time_exc": np.bincount(inv, weights=np.concatenate([q[2] for q in parts]), minlength=m),
    }
    visits = np.zeros(m)
    samples = np.zeros(m)
    at = 0
    for q in parts:  # visits and samples from the slices of ``inv`` that have them (unweighted where possible)
        sl = inv[at : at + len(q[0])]
        at += len(q[0])
        if q[3]:
            visits += np.bincount(sl, minlength=m)
        if q[4] is not None:
            samples += np.bincount(sl, weights=q[4], minlength=m)
    cols["visits"] = visits
    if pc is not None and len(st.raw.sample_events["location"]):
        cols["samples"] = samples
    n_inst = len(st.inst_loc)
    for name, per_inst in st.inst_metrics.items():  # e.g. the OpenMP team layout's omp_fork/omp_join
        cols[name] = np.bincount(inv[:n_inst], weights=per_inst, minlength=m)
    return uniq, cols


def _instance_sums(
    callpath: np.ndarray, loc: np.ndarray, inc: np.ndarray, exc: np.ndarray, nloc: int
) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
    """:func:`metric_sums` of region instances alone, without the key, inverse and weight temporaries.

    The same sums as ``dense_keys`` and ``bincount`` give (each bin adds its
    elements in element order); None when the keys are not a small dense
    range (then the general path sorts them) or the partition is small.
    """
    n = len(callpath)
    if n <= SMALL:  # small: numpy's few passes are quick, and the kernels would run interpreted (perflow._jit)
        return None
    kmax = int(callpath.max()) * nloc + int(loc.max())
    if int(callpath.min()) < 0 or int(loc.min()) < 0 or kmax >= max(4 * n, 1 << 22):
        return None
    present = np.zeros(kmax + 1, dtype=np.int64)
    uniq = _mark_keys(callpath, loc, nloc, present)
    m = len(uniq)
    t_inc, t_exc, visits = np.zeros(m), np.zeros(m), np.zeros(m)
    _add_instances(callpath, loc, nloc, present, inc, exc, t_inc, t_exc, visits)
    return uniq, {"time_inc": t_inc, "time_exc": t_exc, "visits": visits}


@njit
def _mark_keys(callpath, loc, nloc, present):  # noqa: ANN001, ANN202
    """Mark the keys ``callpath * nloc + loc`` present, then number them: ``present[k]`` = rank of key k; the keys."""
    for i in range(len(callpath)):
        present[callpath[i] * nloc + loc[i]] = 1
    m = 0
    for k in range(len(present)):
        if present[k]:
            present[k] = m
            m += 1
        else:
            present[k] = -1
    uniq = np.empty(m, np.int64)
    for k in range(len(present)):
        if present[k] >= 0:
            uniq[present[k]] = k
    return uniq


@njit
def _add_instances(callpath, loc, nloc, rank, inc, exc, t_inc, t_exc, visits):  # noqa: ANN001, ANN202
    for i in range(len(callpath)):
        j = rank[callpath[i] * nloc + loc[i]]
        t_inc[j] += inc[i]
        t_exc[j] += exc[i]
        visits[j] += 1.0
