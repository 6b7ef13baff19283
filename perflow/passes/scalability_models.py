"""Scaling models per call path: Extra-P's performance-model normal form over runs at several scales.

``scaling_models`` aligns the runs by call path (the metric aggregated
across the processes of each run, by default the maximum: the slowest
process decides) and fits every call path with :func:`perflow.passes.models.fit_models`:
sums of terms ``c·p^i·log2(p)^j`` chosen by leave-one-out cross-validation,
with the fitted model as text, its quality and a flag for poor fits; with a
second run parameter (``params=["problem_size"]``), two-parameter models.

The runs are a list of PAGs with a scale each (``scales=[...]``, else each
run's ``nprocs`` attribute or a common alias, else its number of
processes) and, for a second parameter, a run attribute naming it. One
function, :func:`run_parameters`, turns runs into that parameter table: an
ensemble of runs with a metadata table plugs in there.

A fit is *poor* (``poor_fit``) when its prediction is unreliable, for one of
these reasons (the ``fit`` column names the first that applies, empty for a
good fit):

* its SMAPE over the measurements exceeds ``max_smape`` percent (it does not
  follow the measurements);
* a model with terms explains little of the variation (adjusted R² below
  ``min_ar2``);
* a model with terms does not survive cross-validation: its leave-one-out
  error (``cv_smape``, mean over the points) or its error at the largest
  scale when fitted without it (``extrap_smape``) exceeds ``max_cv``
  percent, or a point is not determined by the others (nan).

The last test is the one that catches a term chosen from few points: with
three scales a one-term model leaves one degree of freedom, so among the 56
shapes one almost always fits closely (a high R², a small SMAPE); the
leave-one-out errors show whether the shape predicts a point it was not
fitted to. NPB CG at 2, 4, 8 ranks, ``MPI_Init`` 0.35, 0.36, 0.64 s: the model
``0.3467 + 6.362e-05·p^3·log2(p)^2`` has SMAPE 0.55 % and adjusted R² 0.999,
but fitted to 2 and 4 ranks it predicts 0.535 s at 8 (``extrap_smape``
17.8 %): a poor fit, so its 4.5 s at 16 ranks is not a prediction.

The formulas of every figure are in ``docs/passes-profile.md`` ("Fit quality").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, pass_

from . import models as pmnf
from .scalability import MIN_R2, align_runs, run_scales, scale_labels

__all__ = ["scaling_models", "run_parameters", "model_table", "fit_verdict", "MAX_SMAPE", "MAX_CV"]

#: Default largest SMAPE (percent) of a fit that is not poor.
MAX_SMAPE = 10.0
#: Default largest leave-one-out error (percent, mean and at the largest scale) of a model with terms that is not poor.
MAX_CV = 10.0


def run_parameters(
    runs: Sequence[PAG],
    *,
    scales: Sequence[float] | None = None,
    scale_key: str | None = None,
    params: Sequence[str] | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """The parameter table of a list of runs, ordered by scale.

    Parameters
    ----------
    runs : sequence of PAG
        The runs.
    scales : sequence of float, optional
        Process count of each run, in the order given (default: from the run attributes).
    scale_key : str, optional
        Run attribute holding the process count.
    params : sequence of str, optional
        Further run attributes to model (e.g. ``["problem_size"]``); one at most.
        A parameter with the same value in every run is dropped (see the notes).

    Returns
    -------
    tuple
        ``order`` (run indices sorted by the parameters), ``X`` (runs x
        parameters, in that order), the parameter names for model text
        (``p`` then the attribute names) and notes.
    """
    s = run_scales(runs, scales, scale_key)
    cols = [s]
    names = ["p"]
    notes: list[str] = []
    for key in params or ():
        vals = []
        for i, pag in enumerate(runs):
            v = pag.attrs.get(key)
            where = pag.attrs.get("source", f"run {i}")
            if v is None:
                raise PassError(f"{where}: the run has no attribute {key!r} to model (params={list(params or ())})")
            try:
                f = float(v)
            except (TypeError, ValueError):
                raise PassError(f"{where}: run attribute {key!r} is {v!r}, not a number") from None
            if not f > 0:
                raise PassError(f"{where}: run attribute {key!r} is {f:g}; model parameters must be positive")
            vals.append(f)
        if len(set(vals)) == 1:
            notes.append(f"parameter {key!r} is {vals[0]:g} in every run: it is not modelled")
            continue
        cols.append(np.asarray(vals))
        names.append(key)
    if len(names) > 2:
        raise PassError(f"models of at most two parameters are supported, got {', '.join(names)}")
    X = np.column_stack(cols)
    order = np.lexsort(X.T[::-1])
    return order, X[order], names, notes


def model_table(models: pmnf.Models) -> pd.DataFrame:
    """The model columns of a scaling table: text, leading term, quality, then the coefficients and exponents."""
    df = pd.DataFrame(
        {
            "model": models.text(),
            "lead": models.lead(),
            "n_points": models.n_points,
            "smape": models.smape,
            "cv_smape": models.cv_smape,
            "extrap_smape": models.extrap_smape,
            "ar2": models.ar2,
        }
    )
    return pd.concat([df, models.frame()], axis=1)


def fit_verdict(
    models: pmnf.Models, *, max_smape: float = MAX_SMAPE, min_ar2: float = MIN_R2, max_cv: float = MAX_CV
) -> np.ndarray:
    """Why each row's model is a poor fit ("" when it is not), by the rules of the module docstring.

    Returns
    -------
    numpy.ndarray
        Text per row, e.g. ``"extrapolation error 17.8 % > 10 %"``.
    """
    out = np.full(len(models), "", dtype=object)
    terms = models.n_terms > 0
    sm, ar2, cv, ex = models.smape, models.ar2, models.cv_smape, models.extrap_smape
    for r in np.flatnonzero(models.fitted):
        if not sm[r] <= max_smape:
            out[r] = f"SMAPE {sm[r]:.3g} % > {max_smape:g} %"
        elif not terms[r]:
            continue
        elif np.isfinite(ar2[r]) and ar2[r] < min_ar2:
            out[r] = f"adjusted R² {ar2[r]:.3g} < {min_ar2:g}"
        elif not (np.isfinite(cv[r]) and np.isfinite(ex[r])):
            out[r] = "not cross-validated: a point is not determined by the others"
        elif ex[r] > max_cv:
            out[r] = f"extrapolation error {ex[r]:.3g} % > {max_cv:g} %"
        elif cv[r] > max_cv:
            out[r] = f"cross-validation error {cv[r]:.3g} % > {max_cv:g} %"
    return out


@pass_(version="1", tags=("profile", "scalability"))
def scaling_models(
    runs: list[PAG],
    *,
    metric: str = "time_exc",
    agg: str = "max",
    params: list[str] | None = None,
    scales: list[float] | None = None,
    scale_key: str | None = None,
    target: float | None = None,
    negative: bool = False,
    max_terms: int = 1,
    max_smape: float = MAX_SMAPE,
    min_ar2: float = MIN_R2,
    max_cv: float = MAX_CV,
    k: int | None = None,
) -> pd.DataFrame:
    """Fit an Extra-P performance model to every call path over runs at three or more scales.

    See :mod:`perflow.passes.models` for the normal form and the selection.

    Parameters
    ----------
    runs : list of PAG
        Runs of the same program at three or more process counts (any order).
    metric : str
        Metric to model (default exclusive time).
    agg : str
        Aggregation across the processes of a run (default max).
    params : list of str, optional
        A run attribute to model besides the process count (e.g. ``problem_size``).
    scales : list of float, optional
        Process counts of the runs, in the order given (overrides attributes).
    scale_key : str, optional
        Run attribute holding the process count.
    target : float, optional
        Process count to predict at (default twice the largest; other
        parameters at their value in the largest run).
    negative : bool
        Also try terms that shrink with ``p`` (``p^-i``; for strong scaling).
    max_terms : int
        Terms besides the constant (1, or 2 with five or more scales).
    max_smape : float
        Fits with a larger SMAPE (percent) are flagged ``poor_fit``.
    min_ar2 : float
        Models with terms and a lower adjusted R² are flagged ``poor_fit``.
    max_cv : float
        Models with terms whose leave-one-out error (``cv_smape``) or
        extrapolation error (``extrap_smape``) exceeds this (percent) are flagged ``poor_fit``.
    k : int, optional
        Keep the first ``k`` rows.

    Returns
    -------
    pandas.DataFrame
        One row per call path with a positive value in some run, the largest
        predicted value first: ``call_path``, ``name``, ``vertex`` (id in the
        largest run having the path), ``model`` (text), ``lead`` (its
        fastest-growing term), ``n_points``, ``smape``, ``cv_smape`` and
        ``extrap_smape`` (percent), ``ar2``, ``poor_fit``, ``fit`` (why the
        fit is poor, "" when it is not), ``predicted`` (at the target),
        ``growth`` (predicted over the model at the largest scale), the
        coefficients and exponents (``c0``, ``c1``, ``i1_p``, ``j1_p``, ...),
        then the measurements ``T@<P>`` per run. ``df.attrs``: ``scales``,
        ``params``, ``target``, ``note``.
    """
    if len(runs) < 3:
        raise PassError(f"scaling models need runs at three or more scales, got {len(runs)}")
    order, X, names, notes = run_parameters(runs, scales=scales, scale_key=scale_key, params=params)
    runs_sorted = [runs[i] for i in order]
    if len(np.unique(X[:, 0])) < 3 and len(names) == 1:
        raise PassError(f"scaling models need three or more distinct process counts, got {X[:, 0].tolist()}")
    tgt = float(target) if target is not None else 2.0 * float(X[:, 0].max())
    if not tgt > 0:
        raise PassError(f"target scale must be positive, not {target}")
    meta, mat = align_runs(runs_sorted, metric, agg, missing=np.nan)
    keep = (np.nan_to_num(mat) > 0).any(axis=1)
    meta, mat = meta[keep], mat[keep]
    fit = pmnf.fit_models(X, mat, params=names, max_terms=max_terms, negative=negative)
    at = X[-1].copy()
    at[0] = tgt
    values = fit.evaluate(np.vstack([at, X[-1]]))
    pred, last = values[:, 0], values[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        growth = np.where(last > 0, pred / np.where(last > 0, last, 1.0), np.nan)
    mt = model_table(fit)
    verdict = fit_verdict(fit, max_smape=max_smape, min_ar2=min_ar2, max_cv=max_cv)
    df = pd.DataFrame(
        {
            "call_path": meta.index.to_numpy(),
            "name": meta["name"].to_numpy(),
            "vertex": meta["vertex"].to_numpy(dtype=np.int64),
        }
    )
    df = pd.concat([df, mt.iloc[:, :7]], axis=1)
    df["poor_fit"] = (verdict != "") & fit.fitted
    df["fit"] = verdict
    df["predicted"] = pred
    df["growth"] = growth
    df = pd.concat([df, mt.iloc[:, 7:]], axis=1)
    labels = scale_labels(X[:, 0]) if len(names) == 1 else [_point_label(x, names) for x in X]
    for j, lab in enumerate(labels):
        df[lab] = mat[:, j]
    df = df[fit.fitted]
    key = np.nan_to_num(df["predicted"].to_numpy(dtype=np.float64), nan=-np.inf)
    df = df.iloc[np.lexsort((df["call_path"].to_numpy().astype(str), -key))].reset_index(drop=True)
    if k is not None:
        df = df.head(max(int(k), 0))
    notes = notes + fit.notes
    n_poor = int(df["poor_fit"].sum())
    over = f"{agg} over the processes of each run"
    df.attrs.update(
        {
            "scales": X[:, 0].tolist(),
            "params": names,
            "points": X.tolist(),
            "target": tgt,
            "metric": metric,
            "agg": agg,
            "note": " ".join(
                [
                    "Models c0 + c·p^i·log2(p)^j chosen by leave-one-out cross-validation (cv_smape);"
                    f" poor_fit: SMAPE above {max_smape:g} %, or a model with terms whose adjusted R² is below"
                    f" {min_ar2:g} or whose leave-one-out error (cv_smape) or error at the largest scale when"
                    f" fitted without it (extrap_smape) is above {max_cv:g} % ({n_poor} of {len(df)} fits are"
                    " poor; column fit says why): its predictions are not reliable.",
                    *notes,
                ]
            ),
            "units": {
                "predicted": "s",
                **{lab: "s" for lab in labels},
                "smape": "%",
                "cv_smape": "%",
                "extrap_smape": "%",
                "growth": "ratio",
            },
            "aggregates": {lab: over for lab in labels},
        }
    )
    return df


def _point_label(x: np.ndarray, names: Sequence[str]) -> str:
    return "T@" + ",".join(f"{n}={v:g}" for n, v in zip(names, x))
