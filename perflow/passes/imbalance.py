"""Load imbalance across processes (or process/thread locations), per vertex.

For a vertex with values ``x_1..x_N`` on its ``N`` groups (processes with
threads summed, or every (process, thread) location; a group without data
counts 0), with ``mean = sum(x)/N``, ``max``, ``min`` and population
standard deviation ``std``:

=====================  ====================================  ===================
column                 formula                               t = [4, 6, 8, 10]
=====================  ====================================  ===================
``max_over_mean``      max / mean                            1.4286
``imbalance``          (max - mean) / max                    0.30
``imbalance_time``     max - mean (time lost to waiting)     3
``percent_imbalance``  100 * (max / mean - 1)                42.86
``craypat_percent``    100 * (max - mean) / max * N / (N-1)  40.0
``load_balance``       mean / max                            0.70
``normalized_std``     std / (max - min), the standard       0.3727
                       deviation of the min-max-normalised
                       values (x - min) / (max - min)
=====================  ====================================  ===================

A vertex with ``max == 0`` has no imbalance (every ratio is 0, load balance
1); ``craypat_percent`` is 0 when ``N == 1`` and ``normalized_std`` is 0 when
``max == min``. PerFlow flags a vertex as imbalanced when ``normalized_std >
0.15``; a single group is an outlier when ``x_p > k * mean`` (``k = 1.3`` by
default).

Time a recorded thread spent off the CPU (the ``off_cpu`` vertices, see
:func:`perflow.sdk.profile.off_cpu_mask`) is no code's load: it is left out
of the tables and outliers (``breakdown`` shows it per process).

Everything is computed for all vertices at once from the integer codes of
the metrics index (``np.bincount`` and ``np.maximum.reduceat``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflow.sdk import PAG, VERTEX_STATS, ParallelVertexSet, PassError, VertexSet, pass_
from perflow.sdk.profile import (
    IMBALANCE_CRITERIA,
    Grouped,
    as_pag,
    grouped,
    imbalance_measures,
    off_cpu_mask,
    resolve_metric,
    selected_vertices,
    vertex_columns,
)

__all__ = [
    "imbalance",
    "imbalanced_vertices",
    "imbalance_outliers",
    "outlier_vertices",
    "imbalance_table",
    "IMBALANCE_CRITERIA",
    "imbalance_stats",
]


def imbalance_stats(
    mean: np.ndarray, mx: np.ndarray, mn: np.ndarray, std: np.ndarray, n: np.ndarray
) -> dict[str, np.ndarray]:
    """The imbalance measures of the module docstring (see :mod:`perflow.pag.imbalance`)."""
    return imbalance_measures(mean, mx, mn, std, n)


def _floor(st: dict[str, np.ndarray], min_value: float) -> float:
    """``min_value``, raised to a noise floor of 1e-9 of the largest magnitude (rounding residue of exclusive times)."""
    has = st["count"] > 0
    top = float(np.max(np.abs(np.r_[st["row_max"][has], st["row_min"][has]]), initial=0.0))
    return max(min_value, 1e-9 * top)


def imbalance_table(
    data: PAG | VertexSet,
    *,
    metric: str = "time_exc",
    across: str = "process",
    criterion: str = "imbalance_time",
    threshold: float | None = None,
    min_value: float = 0.0,
    k: int | None = None,
) -> pd.DataFrame:
    """The computation behind :func:`imbalance` (see there)."""
    pag = as_pag(data)
    col = resolve_metric(pag, metric)
    if criterion not in IMBALANCE_CRITERIA:
        raise PassError(f"unknown imbalance criterion {criterion!r}; choose one of {', '.join(IMBALANCE_CRITERIA)}")
    st = pag.analyses.get(VERTEX_STATS, owner="pass 'imbalance'", metric=col, across=across)
    meas = imbalance_stats(st["mean"], st["max"], st["min"], st["std"], st["n"])
    ids = selected_vertices(data)
    ids = np.arange(pag.n_vertices) if ids is None else np.asarray(ids)
    keep = (st["max"][ids] > _floor(st, min_value)) & ~off_cpu_mask(pag)[ids]
    if threshold is not None:
        crit = meas[criterion][ids]
        keep &= (crit <= threshold) if criterion == "load_balance" else (crit > threshold)
    ids = ids[keep]
    key = meas[criterion][ids]
    order = np.lexsort((ids, key if criterion == "load_balance" else -key))
    ids = ids[order]
    if k is not None:
        ids = ids[: max(int(k), 0)]
    df = vertex_columns(pag, ids)
    df["n"] = st["n"][ids]
    for c in ("mean", "max", "min", "std"):
        df[c] = st[c][ids]
    df["max_process"] = st["argmax_process"][ids]
    if across == "location":
        df["max_thread"] = st["argmax_thread"][ids]
    for c in IMBALANCE_CRITERIA:
        df[c] = meas[c][ids]
    u = pag.metric_info[col].unit
    units = {c: u for c in ("mean", "max", "min", "std", "imbalance_time")}
    units.update({"percent_imbalance": "%", "craypat_percent": "%", "imbalance": "ratio", "load_balance": "ratio"})
    df.attrs.update({"metric": col, "across": across, "criterion": criterion, "units": units})
    return df


@pass_(version="2", tags=("profile", "imbalance"))
def imbalance(
    data: PAG | VertexSet,
    *,
    metric: str = "time_exc",
    across: str = "process",
    criterion: str = "imbalance_time",
    threshold: float | None = None,
    min_value: float = 0.0,
    k: int | None = None,
) -> pd.DataFrame:
    """Load-imbalance measures of every vertex across processes (see the module docstring for formulas).

    Parameters
    ----------
    data : PAG or VertexSet
        The run, or the vertices to report.
    metric : str
        Metric to compare across processes (default exclusive time).
    across : {"process", "location"}
        Compare processes (threads summed) or every (process, thread) location.
    criterion : str
        Column to rank (and threshold) by: imbalance_time (default),
        imbalance, max_over_mean, percent_imbalance, craypat_percent,
        normalized_std or load_balance (smaller is worse; ranked ascending).
    threshold : float, optional
        Keep only vertices whose criterion exceeds this value (for
        load_balance: is at most this value).
    min_value : float
        Skip vertices whose maximum is at most this value (default: skip
        vertices with no time; values below 1e-9 of the largest value in the
        run always count as no time, so rounding residue is never imbalance).
    k : int, optional
        Keep the first ``k`` rows.

    Returns
    -------
    pandas.DataFrame
        One row per vertex, worst first: ``vertex``, ``name``, ``kind``,
        ``call_path``, ``n`` (groups), ``mean``, ``max``, ``min``, ``std``,
        ``max_process`` (and ``max_thread`` for locations), then
        ``max_over_mean``, ``imbalance``, ``imbalance_time``,
        ``percent_imbalance``, ``craypat_percent``, ``normalized_std``, ``load_balance``.
    """
    return imbalance_table(
        data, metric=metric, across=across, criterion=criterion, threshold=threshold, min_value=min_value, k=k
    )


@pass_(version="2", tags=("profile", "imbalance", "select"))
def imbalanced_vertices(
    data: PAG | VertexSet,
    *,
    metric: str = "time_exc",
    across: str = "process",
    criterion: str = "normalized_std",
    threshold: float = 0.15,
    min_share: float = 0.0,
) -> VertexSet:
    """Vertices whose imbalance criterion exceeds a threshold (default PerFlow's test: normalised std > 0.15).

    Parameters
    ----------
    data : PAG or VertexSet
    metric : str
        Metric compared across processes.
    across : {"process", "location"}
        Processes (threads summed) or (process, thread) locations.
    criterion : str
        An imbalance column (see :func:`imbalance`).
    threshold : float
        Criterion value above which a vertex is imbalanced (for load_balance: at or below which).
    min_share : float
        Ignore vertices whose summed metric is below this fraction of the metric summed over all vertices.

    Returns
    -------
    VertexSet
        Ordered worst first.
    """
    pag = as_pag(data)
    col = resolve_metric(pag, metric)
    df = imbalance_table(data, metric=col, across=across, criterion=criterion, threshold=threshold)
    if min_share > 0:
        tot = pag.aggregate(col, "sum").to_numpy()
        df = df[tot[df["vertex"].to_numpy()] >= min_share * tot.sum()]
    return VertexSet(pag, df["vertex"].to_numpy(), ordered=True)


def _outlier_rows(
    pag: PAG, col: str, across: str, k: float, min_value: float, ids: np.ndarray | None
) -> tuple[pd.DataFrame, Grouped]:
    g = grouped(pag, col, across)
    st = g.stats()
    mean_r = st["mean"][g.vertex]
    hit = (g.value > k * mean_r) & (g.value > _floor(st, min_value)) & ~off_cpu_mask(pag)[g.vertex]
    if ids is not None:
        hit &= np.isin(g.vertex, ids)
    rows = np.flatnonzero(hit)
    return pd.DataFrame(
        {"vertex": g.vertex[rows], "group": g.group[rows], "value": g.value[rows], "mean": mean_r[rows]}
    ), g


@pass_(version="2", tags=("profile", "imbalance"))
def imbalance_outliers(
    data: PAG | VertexSet,
    *,
    metric: str = "time_exc",
    k: float = 1.3,
    across: str = "process",
    min_value: float = 0.0,
) -> pd.DataFrame:
    """Per-process outliers: (vertex, process) pairs whose value exceeds ``k`` times the vertex's mean.

    ``x[v, p] > k * mean_p x[v, p]``, with the mean over all ``N`` processes
    (a process without data counts 0). Sorted by excess ``x - mean``, largest first.

    Parameters
    ----------
    data : PAG or VertexSet
    metric : str
        Metric to test.
    k : float
        Outlier factor (> 0).
    across : {"process", "location"}
        Processes (threads summed) or (process, thread) locations.
    min_value : float
        Ignore values at or below this.

    Returns
    -------
    pandas.DataFrame
        ``vertex``, ``name``, ``kind``, ``call_path``, ``process`` (and
        ``thread`` for locations), ``value``, ``mean``, ``ratio`` (value / mean), ``excess`` (value - mean).
    """
    if k <= 0:
        raise PassError(f"the outlier factor k must be positive, not {k}")
    pag = as_pag(data)
    col = resolve_metric(pag, metric)
    raw, g = _outlier_rows(pag, col, across, k, min_value, selected_vertices(data))
    excess = raw["value"].to_numpy() - raw["mean"].to_numpy()
    order = np.lexsort((raw["group"].to_numpy(), raw["vertex"].to_numpy(), -excess))
    raw = raw.iloc[order].reset_index(drop=True)
    df = vertex_columns(pag, raw["vertex"].to_numpy(), categorical=True)
    grp = raw["group"].to_numpy()
    df["process"] = g.process[grp]
    if across == "location":
        df["thread"] = g.thread[grp]
    df["value"] = raw["value"].to_numpy()
    df["mean"] = raw["mean"].to_numpy()
    df["ratio"] = df["value"] / df["mean"]
    df["excess"] = excess[order]
    df.attrs.update({"metric": col, "k": k})
    unit = pag.metric_info[col].unit if col in pag.metric_info else ""
    if unit in ("s", "bytes", "count"):  # value, mean and excess are in the metric's unit
        df.attrs["units"] = {"value": unit, "mean": unit, "excess": unit, "ratio": ""}
    return df


@pass_(version="2", tags=("profile", "imbalance", "select", "parallel"))
def outlier_vertices(
    data: PAG | VertexSet,
    *,
    metric: str = "time_exc",
    k: float = 1.3,
    min_value: float = 0.0,
) -> ParallelVertexSet:
    """The parallel vertices (all threads of each outlier (vertex, process)) of :func:`imbalance_outliers`.

    Parameters
    ----------
    data : PAG or VertexSet
    metric : str
        Metric to test.
    k : float
        Outlier factor: ``x[v, p] > k * mean``.
    min_value : float
        Ignore values at or below this.
    """
    df = imbalance_outliers(data, metric=metric, k=k, min_value=min_value)
    pag = as_pag(data)
    vf = pag.parallel.vertex_frame
    np_ = max(len(pag.processes), 1)
    want = df["vertex"].to_numpy() * np_ + np.searchsorted(pag.processes, df["process"].to_numpy())
    have = vf["vertex"].to_numpy() * np_ + np.searchsorted(pag.processes, vf["process"].to_numpy())
    return ParallelVertexSet(pag, np.flatnonzero(np.isin(have, want)))
