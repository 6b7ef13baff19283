"""Scalability analysis across runs at several process counts (after ScalAna).

Given runs at process counts ``P_1 < ... < P_R`` (from each run's
``attrs["nprocs"]`` or a given attribute, else its number of processes),
every call path gets the time ``T_r`` (a metric aggregated across the
processes of run ``r``, by default the maximum: the slowest process decides)
and a power-law fit by least squares on the runs where ``T_r > 0``::

    log2 T = a + b * log2 P

    b = (n Sxy - Sx Sy) / (n Sxx - Sx^2),  a = (Sy - b Sx) / n

with ``x = log2 P``, ``y = log2 T`` and the sums over the ``n`` usable runs
(at least 2 with distinct scales, else no fit). The slope ``b`` is the
scaling exponent: ``-1`` is perfect strong scaling (time halves when the
processes double), ``0`` perfect weak scaling (constant time), and ``b > 0``
means the time grows with the scale. The fit predicts ``T(P*) = 2^(a + b
log2 P*)`` at a target scale ``P*``. A call path is *non-scalable* when ``b``
exceeds a threshold (default 0: its time grows with the process count);
those are ranked by their predicted time at the target scale.

Every fit carries its quality: ``r2`` (the coefficient of determination
of the fit in log-log space, 1 for a perfect power law) and ``rel_error``
(the largest relative error of the fitted time at a measured scale,
``max |T_fit / T - 1|``). A fit through three or more points with ``r2``
below ``min_r2`` (default 0.8) is flagged ``poor_fit``: its slope and
prediction describe the data badly. A fit through two points is exact by
construction, so its quality cannot be judged (``df.attrs["note"]`` says so).

Worked examples at P = 4, 8, 16, 32: T = [8, 4, 2, 1] gives b = -1 and
T(64) = 0.5; T = [0.5, 0.6, 0.7, 0.8] gives b = 0.2257 and T(64) = 0.947;
T = [2, 2, 2, 2] gives b = 0. T = [1, 4, 1, 4] gives b = 0.4, a = -0.4,
r2 = 0.2 (log2 T = [0, 2, 0, 2] against the fit [0.4, 0.8, 1.2, 1.6]) and a
relative error of 2^1.2 - 1 = 1.30 at P = 16: a poor fit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, VertexSet, pass_
from perflow.sdk.profile import names_of, resolve_metric, run_scale

from ._runs import read_runs, short_labels

__all__ = [
    "scalability",
    "non_scalable_vertices",
    "scaling_data",
    "read_runs",
    "fit_loglog",
    "align_runs",
    "SCALABILITY_RANKS",
]

SCALABILITY_RANKS = ("predicted", "slope", "growth")


def fit_loglog(scales: np.ndarray, values: np.ndarray) -> dict[str, np.ndarray]:
    """Row-wise least-squares fit of ``log2 values = a + b log2 scales``, skipping values <= 0.

    Parameters
    ----------
    scales : numpy.ndarray
        Process counts, shape ``(R,)``.
    values : numpy.ndarray
        Times, shape ``(n, R)``.

    Returns
    -------
    dict
        ``slope``, ``intercept``, ``r2``, ``rel_error`` (the largest ``|T_fit / T - 1|``
        over the points used; nan without a fit) and ``n_points`` per row.
    """
    x = np.log2(np.asarray(scales, dtype=np.float64))[None, :]
    v = np.asarray(values, dtype=np.float64)
    ok = v > 0
    y = np.where(ok, np.log2(np.where(ok, v, 1.0)), 0.0)
    xm = np.where(ok, x, 0.0)
    n = ok.sum(axis=1).astype(np.float64)
    sx, sy = xm.sum(axis=1), y.sum(axis=1)
    sxx, sxy = (xm * xm).sum(axis=1), (xm * y).sum(axis=1)
    den = n * sxx - sx * sx
    fit = (n >= 2) & (np.abs(den) > 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(fit, (n * sxy - sx * sy) / np.where(fit, den, 1.0), np.nan)
        a = np.where(fit, (sy - b * sx) / np.where(n > 0, n, 1.0), np.nan)
        resid = np.where(ok, y - (a[:, None] + b[:, None] * x), 0.0)
        ybar = sy / np.where(n > 0, n, 1.0)
        sst = (np.where(ok, y - ybar[:, None], 0.0) ** 2).sum(axis=1)
        ssr = (resid**2).sum(axis=1)
        r2 = np.where(fit, np.where(sst > 1e-24, 1.0 - ssr / np.where(sst > 1e-24, sst, 1.0), 1.0), np.nan)
        rel = np.where(ok, np.abs(np.exp2(-resid) - 1.0), 0.0).max(axis=1, initial=0.0)  # T_fit / T = 2^-resid
        rel = np.where(fit, rel, np.nan)
    return {"slope": b, "intercept": a, "r2": r2, "rel_error": rel, "n_points": n.astype(np.int64)}


def align_runs(runs: Sequence[PAG], metric: str, agg: str, *, missing: float = 0.0) -> tuple[pd.DataFrame, np.ndarray]:
    """Metric values of several runs aligned by call path.

    Returns a frame indexed by call path with ``name`` and, for the last run
    that has the path, ``vertex`` and ``run`` (its index), plus the value
    matrix ``(paths, runs)`` with ``missing`` (default 0) where a run lacks
    the path (call paths on several vertices of one run are summed).
    """
    frames = []
    for i, pag in enumerate(runs):
        col = resolve_metric(pag, metric)
        frames.append(
            pd.DataFrame(
                {
                    "call_path": pag.call_paths().to_numpy(),
                    "name": names_of(pag),
                    "vertex": np.arange(pag.n_vertices),
                    "run": i,
                    "value": pag.aggregate(col, agg).to_numpy(),
                }
            )
        )
    allf = pd.concat(frames, ignore_index=True)
    summed = allf.groupby(["call_path", "run"], sort=False)["value"].sum()
    mat = summed.unstack("run").reindex(columns=range(len(runs))).fillna(missing)
    meta = (
        allf.sort_values("run", kind="stable")
        .groupby("call_path", sort=False)
        .agg(name=("name", "last"), vertex=("vertex", "last"), run=("run", "last"))
    )
    meta = meta.reindex(mat.index)
    return meta, mat.to_numpy(dtype=np.float64)


def run_scales(runs: Sequence[PAG], scales: Sequence[float] | None, scale_key: str | None) -> np.ndarray:
    """The scale (process count) of each run: ``scales`` as given, else from the runs' attributes."""
    if scales is not None:
        if len(scales) != len(runs):
            raise PassError(f"{len(scales)} scales given for {len(runs)} runs")
        s = np.asarray(scales, dtype=np.float64)
    else:
        s = np.array([run_scale(p, scale_key) for p in runs], dtype=np.float64)
    if (s <= 0).any():
        raise PassError(f"process counts must be positive, got {s.tolist()}")
    return s


#: Default quality a fit must reach: r2 at least this (fits through 3 or more points).
MIN_R2 = 0.8


@pass_(version="2", tags=("profile", "scalability"))
def scalability(
    runs: list[PAG],
    *,
    metric: str = "time_exc",
    agg: str = "max",
    target: float | None = None,
    slope_threshold: float = 0.0,
    k: int | None = None,
    rank_by: str = "predicted",
    all_vertices: bool = False,
    scale_key: str | None = None,
    scales: list[float] | None = None,
    complete_only: bool = False,
    min_r2: float = MIN_R2,
) -> pd.DataFrame:
    """Fit ``log2 T = a + b log2 P`` per call path over several runs and rank the non-scalable ones.

    See the module docstring for the model and worked examples.

    Parameters
    ----------
    runs : list of PAG
        Runs of the same program at two or more process counts (any order).
    metric : str
        Metric to model (default exclusive time).
    agg : str
        Aggregation across the processes of a run (default max).
    target : float, optional
        Process count to predict at (default: twice the largest scale).
    slope_threshold : float
        A call path is non-scalable when its slope exceeds this (0: time grows
        with the scale; for strong scaling, e.g. -0.5 flags paths far from the ideal -1).
    k : int, optional
        Keep the first ``k`` rows.
    rank_by : {"predicted", "slope", "growth"}
        Order of the rows, largest first: predicted time at the target, slope,
        or growth (predicted time over the time at the largest measured scale).
    all_vertices : bool
        Report every call path with a fit, not only the non-scalable ones.
    scale_key : str, optional
        Run attribute holding the process count (default ``nprocs`` or a
        common alias, else the number of processes with data).
    scales : list of float, optional
        Process counts of the runs, in the order given (overrides attributes).
    complete_only : bool
        Skip call paths with a zero time in any run (by default zero times
        are left out of the fit of that path, which needs two usable runs).
    min_r2 : float
        Fits through three or more points with a lower ``r2`` are flagged ``poor_fit``.

    Returns
    -------
    pandas.DataFrame
        ``call_path``, ``name``, ``vertex`` (id in the largest run having the
        path), ``n_points``, ``slope``, ``intercept``, ``r2``, ``rel_error``,
        ``poor_fit``, ``predicted``, ``growth``, ``non_scalable``, then
        ``T@<P>`` for every run in increasing scale. ``df.attrs`` holds
        ``scales``, ``target``, ``min_r2`` and ``note`` (what the quality flags
        mean and how many fits are poor; reports print it under the table).
    """
    if len(runs) < 2:
        raise PassError(f"scalability needs runs at two or more scales, got {len(runs)}")
    if rank_by not in SCALABILITY_RANKS:
        raise PassError(f"rank_by must be one of {', '.join(SCALABILITY_RANKS)}, not {rank_by!r}")
    s = run_scales(runs, scales, scale_key)
    order = np.argsort(s, kind="stable")
    runs_sorted = [runs[i] for i in order]
    s = s[order]
    if len(np.unique(s)) < 2:
        raise PassError(f"the runs must have at least two distinct process counts, got {s.tolist()}")
    tgt = float(target) if target is not None else 2.0 * float(s[-1])
    if tgt <= 0:
        raise PassError(f"target scale must be positive, not {target}")
    meta, mat = align_runs(runs_sorted, metric, agg)
    fit = fit_loglog(s, mat)
    if complete_only:
        incomplete = (mat <= 0).any(axis=1)
        fit["slope"] = np.where(incomplete, np.nan, fit["slope"])
    with np.errstate(over="ignore", invalid="ignore"):
        pred = np.exp2(fit["intercept"] + fit["slope"] * np.log2(tgt))
    last = mat[:, -1]
    growth = np.where(last > 0, pred / np.where(last > 0, last, 1.0), np.nan)
    df = pd.DataFrame(
        {
            "call_path": meta.index.to_numpy(),
            "name": meta["name"].to_numpy(),
            "vertex": meta["vertex"].to_numpy(dtype=np.int64),
            "n_points": fit["n_points"],
            "slope": fit["slope"],
            "intercept": fit["intercept"],
            "r2": fit["r2"],
            "rel_error": fit["rel_error"],
            "poor_fit": (fit["n_points"] >= 3) & (np.nan_to_num(fit["r2"], nan=1.0) < float(min_r2)),
            "predicted": pred,
            "growth": growth,
            "non_scalable": np.nan_to_num(fit["slope"], nan=-np.inf) > slope_threshold,
        }
    )
    labels = scale_labels(s)
    for j, lab in enumerate(labels):
        df[lab] = mat[:, j]
    # the vertex id refers to the largest run holding the path
    df = df[np.isfinite(df["slope"].to_numpy())]
    if not all_vertices:
        df = df[df["non_scalable"].to_numpy()]
    key = np.nan_to_num(df[rank_by].to_numpy(dtype=np.float64), nan=-np.inf)
    df = df.iloc[np.lexsort((df["call_path"].to_numpy().astype(str), -key))].reset_index(drop=True)
    if k is not None:
        df = df.head(max(int(k), 0))
    over = f"{agg} over the processes of each run"
    df.attrs.update(
        {
            "scales": s.tolist(),
            "target": tgt,
            "metric": metric,
            "agg": agg,
            "min_r2": float(min_r2),
            "note": _quality_note(df, float(min_r2), len(s)),
            "units": {"predicted": "s", **{lab: "s" for lab in labels}, "rel_error": "ratio"},
            "aggregates": {lab: over for lab in labels},
        }
    )
    return df


def _quality_note(df: pd.DataFrame, min_r2: float, n_runs: int) -> str:
    """What the fit-quality columns say about the rows of a scalability table."""
    out = (
        f"Fit quality: r2 of log2 T = a + b log2 P over the runs; poor_fit marks fits with r2 below {min_r2:g} "
        "(their slope and prediction are unreliable); rel_error is the largest relative error at a measured scale."
    )
    poor = df[df["poor_fit"].to_numpy(dtype=bool)] if len(df) else df
    if len(poor):
        names = ", ".join(f"{c} (r2 {r:.2f})" for c, r in zip(poor["call_path"].head(5), poor["r2"].head(5)))
        more = f" and {len(poor) - 5} more" if len(poor) > 5 else ""
        out += f" {len(poor)} of {len(df)} fits are poor: {names}{more}."
    if n_runs == 2:
        out += " With two runs every fit passes through both points: its quality cannot be judged."
    return out


def scale_labels(s: np.ndarray) -> list[str]:
    """A unique label per scale: ``T@8``, ``T@16``, a repeated scale primed (``T@8'``)."""
    out: list[str] = []
    for x in s:
        lab = f"T@{x:g}"
        while lab in out:
            lab += "'"
        out.append(lab)
    return out


@pass_(version="1", tags=("profile", "scalability", "select"))
def non_scalable_vertices(
    runs: list[PAG],
    *,
    metric: str = "time_exc",
    agg: str = "max",
    target: float | None = None,
    slope_threshold: float = 0.0,
    k: int | None = None,
    scale_key: str | None = None,
) -> VertexSet:
    """The non-scalable call paths of :func:`scalability` as vertices of the largest run (ranked).

    Paths absent from the largest run are left out (they have no vertex there).

    Parameters
    ----------
    runs : list of PAG
        Runs at two or more process counts.
    metric : str
        Metric to model.
    agg : str
        Aggregation across processes.
    target : float, optional
        Scale to predict at (default twice the largest).
    slope_threshold : float
        Slope above which a path is non-scalable.
    k : int, optional
        Keep the first ``k``.
    scale_key : str, optional
        Run attribute holding the process count.
    """
    s = run_scales(runs, None, scale_key)
    largest = runs[int(np.argsort(s, kind="stable")[-1])]
    df = scalability(
        runs, metric=metric, agg=agg, target=target, slope_threshold=slope_threshold, k=None, scale_key=scale_key
    )
    paths = largest.call_paths().to_numpy()
    df = df[np.isin(df["call_path"].to_numpy(), paths)]
    if k is not None:
        df = df.head(max(int(k), 0))
    lookup = pd.Series(np.arange(len(paths)), index=paths)
    lookup = lookup[~lookup.index.duplicated()]
    return VertexSet(largest, lookup.loc[df["call_path"].to_numpy()].to_numpy(), ordered=True)


@pass_(version="1", tags=("profile", "scalability"))
def scaling_data(
    runs: list[PAG],
    *,
    metric: str = "time_exc",
    agg: str = "max",
    scale_key: str | None = None,
    scales: list[float] | None = None,
) -> pd.DataFrame:
    """The measurements behind :func:`scalability` as a tidy table: one row per (call path, run).

    Parameters
    ----------
    runs : list of PAG
        Runs at several process counts.
    metric : str
        Metric (default exclusive time).
    agg : str
        Aggregation across the processes of a run (default max).
    scale_key : str, optional
        Run attribute holding the process count.
    scales : list of float, optional
        Process counts of the runs, in the order given.

    Returns
    -------
    pandas.DataFrame
        ``call_path``, ``name``, ``label`` (the shortest tail of the call
        path that tells it apart from the others, for legends), ``nprocs``,
        ``time`` (the aggregated metric; 0 where the run lacks the path),
        sorted by call path and process count.
    """
    if not runs:
        raise PassError("scaling_data needs at least one run")
    s = run_scales(runs, scales, scale_key)
    meta, mat = align_runs(runs, metric, agg)
    n_paths, n_runs = mat.shape
    df = pd.DataFrame(
        {
            "call_path": np.repeat(meta.index.to_numpy(), n_runs),
            "name": np.repeat(meta["name"].to_numpy(), n_runs),
            "label": np.repeat(short_labels(meta.index.to_numpy()), n_runs),
            "nprocs": np.tile(s, n_paths),
            "time": mat.ravel(),
        }
    )
    return df.sort_values(["call_path", "nprocs"], kind="stable").reset_index(drop=True)
