"""Resource contention: vertices that get slower per unit of work as more processes compete.

A vertex suffers *contention* when its time per visit grows with the number
of processes competing for a shared resource (a file system, the memory
bandwidth or network link of a node) while its workload stays constant.
Two tests, one across runs and one inside a trace.

**Across runs** (:func:`contention`): runs that differ in the contention
level ``c`` (co-located processes per node, concurrently active processes,
or by default the number of processes). Per call path and run, with
processes ``p`` and the metric summed over them::

    t_c = sum_p time / sum_p visits          (time per visit)
    w_c = sum_p visits / N_c                 (visits per process)
    b_c = sum_p bytes / sum_p visits         (bytes per visit, if the PAG has byte metrics)

and ``log2 t_c = a + s log2 c`` is fitted by least squares. The path is
*contended* when ``s > slope_threshold`` (default 0.1) while the workload is
constant: ``max(w)/min(w) - 1 <= tolerance`` and the same for ``b``
(default 5%). A path whose visits or bytes change with ``c`` is not
contended, it just does more work.

**Inside a trace** (:func:`trace_contention`): for every instance ``i`` of a
vertex, its duration ``d_i = leave - enter`` and its concurrency ``c_i``, the
number of instances of the same vertex (on any process and thread, ``i``
included) active at its midpoint ``(enter + leave) / 2`` (active at ``t``:
``enter <= t < leave``). Per vertex, ``log2 d = a + s log2 c`` is fitted over
its instances, with the Pearson correlation ``r`` of ``log2 c`` and ``log2 d``.
The vertex is contended when it has at least ``min_instances`` instances at
two or more concurrency levels, ``s > slope_threshold``, ``r >=
min_correlation``, and its workload per instance is constant: the bytes its
instances send and receive (messages and collectives) vary by at most
``tolerance`` (coefficient of variation); instances that move no bytes
(e.g. POSIX I/O regions, whose sizes a trace does not record) count as
constant work. The midpoint concurrency is a cheap stand-in for the mean
concurrency over the instance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, pass_
from perflow.sdk.profile import as_pag, run_scale, vertex_columns

from .scalability import align_runs, fit_loglog

__all__ = ["contention", "trace_contention", "instance_concurrency"]


@pass_(version="1", tags=("profile", "contention"))
def contention(
    runs: list[PAG],
    *,
    levels: list[float] | None = None,
    level_key: str | None = None,
    metric: str = "time_exc",
    slope_threshold: float = 0.1,
    tolerance: float = 0.05,
    all_vertices: bool = False,
) -> pd.DataFrame:
    """Call paths whose time per visit grows with the contention level across runs at constant workload.

    See the module docstring for the definitions.

    Parameters
    ----------
    runs : list of PAG
        Two or more runs at different contention levels.
    levels : list of float, optional
        The contention level of each run, in the order given.
    level_key : str, optional
        Run attribute holding the level (e.g. ``"colocation"``); default the
        process count (``nprocs`` or the number of processes with data).
    metric : str
        Time metric (default exclusive time).
    slope_threshold : float
        Slope of log2(time per visit) over log2(level) above which time grows with contention.
    tolerance : float
        Largest relative variation of visits per process and bytes per visit for constant workload.
    all_vertices : bool
        Report every call path with a fit, not only the contended ones.

    Returns
    -------
    pandas.DataFrame
        ``call_path``, ``name``, ``vertex`` (in the last run having it),
        ``slope``, ``r2``, ``workload_change`` (max/min - 1 of visits per
        process), ``bytes_change`` (of bytes per visit, 0 without byte
        metrics), ``contended``, then ``t/visit@<c>`` per run by increasing
        level. Contended paths first, by slope.
    """
    if len(runs) < 2:
        raise PassError(f"contention needs two or more runs, got {len(runs)}")
    if levels is not None:
        if len(levels) != len(runs):
            raise PassError(f"{len(levels)} levels given for {len(runs)} runs")
        c = np.asarray(levels, dtype=np.float64)
    else:
        c = np.array([run_scale(p, level_key) for p in runs], dtype=np.float64)
    if (c <= 0).any() or len(np.unique(c)) < 2:
        raise PassError(f"contention levels must be positive with at least two distinct values, got {c.tolist()}")
    order = np.argsort(c, kind="stable")
    runs = [runs[i] for i in order]
    c = c[order]
    for p in runs:
        if "visits" not in p.metric_names:
            raise PassError("contention needs a 'visits' metric in every run (time per visit)")
    meta, t = align_runs(runs, metric, "sum")
    _, vis = align_runs(runs, "visits", "sum")
    nproc = np.array([max(len(p.processes), 1) for p in runs], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_visit = np.where(vis > 0, t / np.where(vis > 0, vis, 1.0), 0.0)
        w = vis / nproc[None, :]
        has = (vis > 0).all(axis=1)
        wchange = np.where(has, w.max(axis=1) / np.where(has, w.min(axis=1), 1.0) - 1.0, np.inf)
        bchange = np.zeros(len(meta))
        byte_cols = [m for m in ("bytes_sent", "bytes_recv") if all(m in p.metric_names for p in runs)]
        if byte_cols:
            b = sum(align_runs(runs, m, "sum")[1] for m in byte_cols)
            bpv = np.where(vis > 0, b / np.where(vis > 0, vis, 1.0), 0.0)
            moved = bpv.max(axis=1) > 0
            bchange = np.where(
                moved, bpv.max(axis=1) / np.where(bpv.min(axis=1) > 0, bpv.min(axis=1), np.nan) - 1.0, 0.0
            )
            bchange = np.nan_to_num(bchange, nan=np.inf)
    fit = fit_loglog(c, per_visit)
    slope = fit["slope"]
    ok = np.isfinite(slope)
    contended = (
        ok & (np.nan_to_num(slope, nan=-np.inf) > slope_threshold) & (wchange <= tolerance) & (bchange <= tolerance)
    )
    df = pd.DataFrame(
        {
            "call_path": meta.index.to_numpy(),
            "name": meta["name"].to_numpy(),
            "vertex": meta["vertex"].to_numpy(dtype=np.int64),
            "slope": slope,
            "r2": fit["r2"],
            "workload_change": wchange,
            "bytes_change": bchange,
            "contended": contended,
        }
    )
    for j, lev in enumerate(c):
        df[f"t/visit@{lev:g}"] = per_visit[:, j]
    df = df[ok] if all_vertices else df[contended]
    key = np.nan_to_num(df["slope"].to_numpy(), nan=-np.inf)
    df = df.iloc[np.lexsort((df["call_path"].to_numpy().astype(str), -key, ~df["contended"].to_numpy()))]
    df = df.reset_index(drop=True)
    df.attrs.update({"levels": c.tolist(), "metric": metric})
    return df


def instance_concurrency(vertex: np.ndarray, enter: np.ndarray, leave: np.ndarray) -> np.ndarray:
    """Per instance: how many instances of the same vertex are active at its midpoint (itself included).

    Vectorised with integer ranks of all times and one ``searchsorted`` per
    bound on keys ``vertex * R + rank``.
    """
    vertex = np.asarray(vertex, dtype=np.int64)
    mid = 0.5 * (enter + leave)
    allt = np.concatenate([enter, leave, mid])
    uniq, rank = np.unique(allt, return_inverse=True)
    R = len(uniq) + 1
    n = len(vertex)
    re, rl, rm = rank[:n], rank[n : 2 * n], rank[2 * n :]
    ke = np.sort(vertex * R + re)
    kl = np.sort(vertex * R + rl)
    q = vertex * R + rm
    started = np.searchsorted(ke, q, side="right")
    ended = np.searchsorted(kl, q, side="right")
    return started - ended


@pass_(version="1", tags=("trace", "contention"))
def trace_contention(
    pag: PAG,
    *,
    kind: str | list[str] | None = None,
    name: str | list[str] | None = None,
    min_instances: int = 8,
    slope_threshold: float = 0.1,
    min_correlation: float = 0.5,
    tolerance: float = 0.05,
    all_vertices: bool = False,
) -> pd.DataFrame:
    """Vertices whose instances take longer when more instances of them run at the same time.

    See the module docstring for the definitions.

    Parameters
    ----------
    pag : PAG
        A trace.
    kind : str or list of str, optional
        Only vertices of these kinds (e.g. ``"io"``).
    name : str or list of str, optional
        Only vertices whose names match these globs.
    min_instances : int
        Fewest instances for a fit.
    slope_threshold : float
        Slope of log2(duration) over log2(concurrency) above which duration grows with concurrency.
    min_correlation : float
        Smallest Pearson correlation of log2(concurrency) and log2(duration).
    tolerance : float
        Largest coefficient of variation of the bytes per instance for constant work.
    all_vertices : bool
        Report every vertex with a fit, not only the contended ones.

    Returns
    -------
    pandas.DataFrame
        ``vertex``, ``name``, ``kind``, ``call_path``, ``instances``,
        ``max_concurrency``, ``slope``, ``correlation``, ``bytes_cv``,
        ``mean_duration``, ``contended``; contended vertices first, by slope.
    """
    pag = as_pag(pag)
    tr = pag.trace
    if tr is None:
        raise PassError("trace_contention needs a trace (region instances); use contention() across runs for profiles")
    iv = tr.intervals
    v = iv["vertex"].to_numpy().astype(np.int64)
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    keep = np.ones(pag.n_vertices, dtype=bool)
    if kind is not None or name is not None:
        keep[:] = False
        keep[pag.vertices.filter(kind=kind, name=name).ids] = True
    sel = keep[v] & (leave > enter)
    v, enter, leave = v[sel], enter[sel], leave[sel]
    rows = np.flatnonzero(sel)
    conc = instance_concurrency(v, enter, leave).astype(np.float64)
    x, y = np.log2(np.maximum(conc, 1.0)), np.log2(leave - enter)
    nv = pag.n_vertices
    nb = np.zeros(len(iv))
    for col, b in (("send_interval", "bytes"), ("recv_interval", "bytes")):
        r = tr.messages[col].to_numpy()
        ok = r >= 0
        np.add.at(nb, r[ok], tr.messages[b].to_numpy(dtype=np.float64)[ok])
    c = tr.collectives
    ci = c["interval"].to_numpy()
    ok = ci >= 0
    np.add.at(nb, ci[ok], (c["sent"].to_numpy(dtype=np.float64) + c["received"].to_numpy(dtype=np.float64))[ok])
    bts = nb[rows]

    def s(w: np.ndarray) -> np.ndarray:
        return np.bincount(v, weights=w, minlength=nv)

    n = np.bincount(v, minlength=nv).astype(np.float64)
    sx, sy, sxx, syy, sxy = s(x), s(y), s(x * x), s(y * y), s(x * y)
    sb, sbb = s(bts), s(bts * bts)
    cmax = np.zeros(nv)
    np.maximum.at(cmax, v, conc)
    cmin = np.full(nv, np.inf)
    np.minimum.at(cmin, v, conc)
    with np.errstate(divide="ignore", invalid="ignore"):
        vx = n * sxx - sx * sx
        vy = n * syy - sy * sy
        fit = (n >= max(min_instances, 2)) & (cmax > cmin) & (vx > 1e-12)
        slope = np.where(fit, (n * sxy - sx * sy) / np.where(fit, vx, 1.0), np.nan)
        corr = np.where(fit & (vy > 1e-12), (n * sxy - sx * sy) / np.sqrt(np.where(vy > 0, vx * vy, 1.0)), 0.0)
        bmean = sb / np.where(n > 0, n, 1.0)
        bcv = np.where(bmean > 0, np.sqrt(np.maximum(sbb / np.where(n > 0, n, 1.0) - bmean**2, 0.0)) / bmean, 0.0)
        mean_d = s(leave - enter) / np.where(n > 0, n, 1.0)
    contended = (
        fit & (np.nan_to_num(slope, nan=-np.inf) > slope_threshold) & (corr >= min_correlation) & (bcv <= tolerance)
    )
    ids = np.flatnonzero(fit if all_vertices else contended)
    ids = ids[np.lexsort((ids, -np.nan_to_num(slope[ids], nan=-np.inf), ~contended[ids]))]
    df = vertex_columns(pag, ids)
    df["instances"] = n[ids].astype(np.int64)
    df["max_concurrency"] = cmax[ids].astype(np.int64)
    df["slope"] = slope[ids]
    df["correlation"] = corr[ids]
    df["bytes_cv"] = bcv[ids]
    df["mean_duration"] = mean_d[ids]
    df["contended"] = contended[ids]
    return df
