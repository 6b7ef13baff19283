"""Distributed top-down metrics: per-partition rows, partial statistics and their combination.

Each partition owns whole processes, so every ``(vertex, process, thread)``
metric row is computed completely inside one partition, bit-identical to the
single-process row. Per-vertex statistics across processes are combined
from per-partition partials (:func:`partial_stats`, :func:`combine_stats`):
sums and sums of squares add up, maxima and minima reduce, the process of the
maximum is the lowest among the partitions' candidates. Dense semantics as in
:meth:`perflow.PAG.aggregate`: a location (or process) without a row for a
vertex counts 0. Sums are re-associated across partitions, so sums, means
and standard deviations equal the single-process values to rounding
(relative 1e-12), while maxima, minima, counts and the argmax are exact.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..pag.frames import make_metrics
from ..pag.imbalance import IMBALANCE_CRITERIA
from ..pag.imbalance import imbalance_measures as _measures
from ..pag.pag import MetricInfo
from ..trace.build import align_rows
from .local import PartTables

__all__ = [
    "metric_rows",
    "partial_stats",
    "combine_stats",
    "finish_stats",
    "aggregate_values",
    "imbalance_measures",
    "IMBALANCE_CRITERIA",
    "ACROSS",
    "comm_partial",
]

ACROSS = ("process", "location")


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
    ivx = t.intervals["vertex"].to_numpy().astype(np.int64)
    ivp = t.intervals["process"].to_numpy().astype(np.int64)
    ivt = t.intervals["thread"].to_numpy().astype(np.int64)

    def local(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        i = np.searchsorted(t.ginst, g)
        ok = (g >= 0) & (i < len(t.ginst))
        ok[ok] &= t.ginst[i[ok]] == g[ok]
        return i, ok

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
            cols[name] = align_rows(m, ivx[ii_], ivp[ii_], ivt[ii_], vv_)
    for name, (dv, dl, vals) in t.deltas.items():
        cols[name] = align_rows(m, dv, loc_proc[dl], loc_thr[dl], vals)
    for k, a in cols.items():
        m[k] = a
    return m.reset_index(), dict(t.delta_info), has_sent


def partial_stats(rows: pd.DataFrame, metric: str, across: str, n_vertices: int) -> dict[str, np.ndarray]:
    """Per-vertex partial statistics of one metric over this partition's groups.

    ``across="location"`` takes every (process, thread) row as a group,
    ``"process"`` sums the threads of each process first.
    """
    if across not in ACROSS:
        raise ValueError(f"across must be one of {', '.join(ACROSS)}, not {across!r}")
    if not len(rows) or metric not in rows.columns:
        z = np.zeros(n_vertices)
        return {"sum": z, "sumsq": z, "count": np.zeros(n_vertices, np.int64), "max": np.full(n_vertices, -np.inf),
                "min": np.full(n_vertices, np.inf), "argmax": np.full(n_vertices, -1, np.int64),
                "argthr": np.full(n_vertices, -1, np.int64)}  # fmt: skip
    v = rows["vertex"].to_numpy().astype(np.int64)
    p = rows["process"].to_numpy().astype(np.int64)
    th = rows["thread"].to_numpy().astype(np.int64)
    x = np.nan_to_num(rows[metric].to_numpy(dtype=np.float64, na_value=np.nan), nan=0.0)
    if across == "process" and len(v):
        key = v * (int(p.max()) + 1) + p
        order = np.argsort(key, kind="stable")
        key, v, p, x = key[order], v[order], p[order], x[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        x = np.add.reduceat(x, starts)
        v, p = v[starts], p[starts]
        th = np.full(len(v), -1, dtype=np.int64)
    else:
        order = np.lexsort((th, p, v))
        v, p, th, x = v[order], p[order], th[order], x[order]
    count = np.bincount(v, minlength=n_vertices)
    mx = np.full(n_vertices, -np.inf)
    mn = np.full(n_vertices, np.inf)
    np.maximum.at(mx, v, x)
    np.minimum.at(mn, v, x)
    argmax = np.full(n_vertices, -1, dtype=np.int64)
    argthr = np.full(n_vertices, -1, dtype=np.int64)
    hit = np.flatnonzero(x == mx[v])
    if len(hit):
        uv, first = np.unique(v[hit], return_index=True)
        argmax[uv] = p[hit[first]]
        argthr[uv] = th[hit[first]]
    return {
        "sum": np.bincount(v, weights=x, minlength=n_vertices),
        "sumsq": np.bincount(v, weights=x * x, minlength=n_vertices),
        "count": count,
        "max": mx,
        "min": mn,
        "argmax": argmax,
        "argthr": argthr,
    }


def combine_stats(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Combine per-partition partials (sums add, extrema reduce, lowest (process, thread) at the maximum)."""
    out = {k: parts[0][k].copy() for k in parts[0]}
    for q in parts[1:]:
        out["sum"] = out["sum"] + q["sum"]
        out["sumsq"] = out["sumsq"] + q["sumsq"]
        out["count"] = out["count"] + q["count"]
        better = (q["max"] > out["max"]) | (
            (q["max"] == out["max"])
            & (q["argmax"] >= 0)
            & (
                (out["argmax"] < 0)
                | (q["argmax"] * (1 << 20) + q["argthr"] < out["argmax"] * (1 << 20) + out["argthr"])
            )
        )
        out["argmax"] = np.where(better, q["argmax"], out["argmax"])
        out["argthr"] = np.where(better, q["argthr"], out["argthr"])
        out["max"] = np.maximum(out["max"], q["max"])
        out["min"] = np.minimum(out["min"], q["min"])
    return out


def finish_stats(c: dict[str, np.ndarray], n_groups: int) -> dict[str, np.ndarray]:
    """Per-vertex sum, mean, max, min, std, count, argmax (group process), n with dense semantics."""
    n = max(n_groups, 1)
    count = c["count"]
    has = count > 0
    absent = count < n
    mx = np.where(has, c["max"], 0.0)
    mn = np.where(has, c["min"], 0.0)
    raised = absent & has & (mx < 0)
    mx = np.where(absent & has, np.maximum(mx, 0.0), mx)
    mn = np.where(absent & has, np.minimum(mn, 0.0), mn)
    mean = c["sum"] / n
    std = np.sqrt(np.maximum(c["sumsq"] / n - mean * mean, 0.0))
    argmax = np.where(raised | ~has, -1, c["argmax"])
    argthr = np.where(raised | ~has, -1, c["argthr"])
    return {"sum": c["sum"], "mean": mean, "max": mx, "min": mn, "std": std, "count": count.astype(np.int64),
            "argmax": argmax, "argthr": argthr, "n": np.full(len(count), n_groups, dtype=np.int64),
            "row_max": c["max"], "row_min": c["min"]}  # fmt: skip


def aggregate_values(stats: dict[str, np.ndarray], agg: str) -> np.ndarray:
    """One aggregation of :meth:`perflow.PAG.aggregate` from finished stats (``median`` has no distributed form)."""
    if agg == "count":
        return stats["count"].astype(np.float64)
    if agg not in ("sum", "mean", "max", "min", "std"):
        raise ValueError(f"aggregation {agg!r} has no distributed form; use sum, mean, max, min, std or count")
    return np.asarray(stats[agg], dtype=np.float64)


def imbalance_measures(st: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Load-imbalance measures per vertex from finished stats (the ``imbalance`` pass's formulas)."""
    return _measures(st["mean"], st["max"], st["min"], st["std"], st["n"])


def comm_partial(messages: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per (sender, receiver) process sums of one partition's received messages."""
    if metric not in ("bytes", "count", "time"):
        raise ValueError(f"metric must be one of bytes, count, time, not {metric!r}")
    s = messages["send_process"].to_numpy().astype(np.int64)
    d = messages["recv_process"].to_numpy().astype(np.int64)
    if metric == "count":
        w = np.ones(len(s))
    elif metric == "bytes":
        w = messages["bytes"].to_numpy(dtype=np.float64)
    else:
        w = np.maximum(0.0, messages["recv_time"].to_numpy() - messages["send_time"].to_numpy())
    df = pd.DataFrame({"src": s, "dst": d, "w": w})
    return df.groupby(["src", "dst"], sort=True)["w"].sum().reset_index()
