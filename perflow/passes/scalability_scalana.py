"""The ScalAna paradigm: non-scalable call paths across runs, then their root causes in the largest run.

ScalAna (Jin et al., SC'20) finds the root causes of poor scaling in two
steps, which the ``scalana`` flow chains with the backtracking pass:

1. **Non-scalable call paths** (:func:`non_scalable_paths`), from runs at
   three or more process counts ``P_1 < ... < P_R``. Per call path, with
   ``T_r`` its time in run ``r`` (the metric aggregated across processes,
   by default the maximum) and ``P_f`` the smallest scale where it has a
   time, the *ideal* time at scale ``P`` is ``T_f · P_f / P`` for strong
   scaling (``mode="strong"``: the work is divided among the processes) and
   ``T_f`` for weak scaling. Two measures of what scaling costs:

   * the **scaling loss** at the largest scale, ``loss = T_R - ideal(P_R)``:
     the time lost relative to ideal scaling, measured;
   * the **model loss** at the target scale ``P*`` (default ``2 P_R``),
     ``model_loss = f(P*) - ideal(P*)``, with ``f`` the call path's
     performance model (:func:`perflow.passes.scalability_models.scaling_models`;
     in strong mode the terms ``p^-i`` are tried too): what the model's
     growth predicts will be lost.

   A call path is non-scalable when its loss, or the model loss of a model
   that is not a poor fit, reaches ``min_share`` of the run time of the
   largest run (the largest per-process sum of the metric); the rows are
   ranked by loss, then model loss. The model loss of a poor fit
   (:mod:`perflow.passes.scalability_models`: SMAPE, adjusted R², or a
   leave-one-out or extrapolation error too large) is an extrapolation the
   data do not support: it neither makes a path non-scalable nor ranks it,
   and the ``extrapolation`` column says so (``"poor fit: ..."``) instead of
   giving a predicted loss.

2. **Causes** (:func:`causal_paths`): the non-scalable call paths of the
   largest run are the symptoms of :func:`perflow.passes.backtrack.backtrack`,
   which walks the parallel view of that run backwards (across the
   communication edge a waiting vertex waited on, else to what ran before
   on the same process) to an abnormal vertex (a computation vertex much
   slower on its process than on average). ``causal_paths`` joins each
   symptom with its cause (name, ``file:line``, process) and writes the
   path walked as text.

Worked example (strong scaling, P = 2, 4, 8, run time 1 s at P = 8): a
path taking 0.4, 0.2, 0.1 s has loss 0; one taking 0.08, 0.16, 0.32 s (a
serial part whose work grows with P) has ideal time 0.08 · 2 / 8 = 0.02 s
at P = 8, loss 0.30 s (30 % of the run: non-scalable), model ``0.04·p``
and model loss at P = 16 of 0.64 - 0.01 = 0.63 s.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, VertexSet, pass_
from perflow.sdk.profile import resolve_metric

from .scalability_models import run_parameters, scaling_models

__all__ = ["non_scalable_paths", "causal_paths", "scaling_loss", "SCALING_MODES"]

SCALING_MODES = ("strong", "weak")
#: Default share of the largest run's time a call path must lose to count as non-scalable.
MIN_SHARE = 0.05


def scaling_loss(
    scales: np.ndarray, times: np.ndarray, target: float, predicted: np.ndarray, mode: str
) -> dict[str, np.ndarray]:
    """Ideal times, scaling loss at the largest scale and model loss at the target, per row.

    Parameters
    ----------
    scales : numpy.ndarray
        Increasing process counts, shape ``(R,)``.
    times : numpy.ndarray
        Times ``(m, R)``; nan where a run lacks the path.
    target : float
        Scale of the model loss.
    predicted : numpy.ndarray
        The model at ``target`` per row.
    mode : {"strong", "weak"}
        Ideal scaling.

    Returns
    -------
    dict
        ``ideal`` (at the largest scale), ``loss``, ``ideal_target`` and ``model_loss``.
    """
    if mode not in SCALING_MODES:
        raise PassError(f"mode must be one of {', '.join(SCALING_MODES)}, not {mode!r}")
    have = np.isfinite(times)
    first = np.argmax(have, axis=1)
    rows = np.arange(len(times))
    t_f = np.where(have.any(axis=1), times[rows, first], np.nan)
    p_f = scales[first]
    if mode == "strong":
        ideal, ideal_t = t_f * p_f / scales[-1], t_f * p_f / target
    else:
        ideal, ideal_t = t_f, t_f
    return {
        "ideal": ideal,
        "loss": times[:, -1] - ideal,
        "ideal_target": ideal_t,
        "model_loss": predicted - ideal_t,
    }


def _run_time(pag: PAG, metric: str) -> float:
    """The largest per-process sum of ``metric``: the run time of the slowest process for exclusive time."""
    col = resolve_metric(pag, metric)
    rows = pag.rows
    if not len(rows):
        return 0.0
    tot = np.bincount(rows.process_code, weights=np.asarray(rows.column(col), dtype=np.float64))
    return float(tot.max())


@pass_(
    version="1",
    tags=("profile", "scalability"),
    outputs={"table": pd.DataFrame, "models": pd.DataFrame, "vertices": VertexSet, "largest": PAG},
)
def non_scalable_paths(
    runs: list[PAG],
    *,
    mode: str = "strong",
    metric: str = "time_exc",
    agg: str = "max",
    scales: list[float] | None = None,
    scale_key: str | None = None,
    target: float | None = None,
    min_share: float = MIN_SHARE,
    max_terms: int = 1,
    k: int | None = None,
) -> dict[str, object]:
    """The non-scalable call paths of runs at three or more scales, by scaling loss and by model growth.

    See the module docstring for the measures.

    Parameters
    ----------
    runs : list of PAG
        Runs of one program at three or more process counts (any order).
    mode : {"strong", "weak"}
        Strong scaling (a fixed problem divided among the processes: ideal
        time ``T_f P_f / P``) or weak scaling (ideal time constant).
    metric : str
        Metric (default exclusive time).
    agg : str
        Aggregation across the processes of a run (default max).
    scales : list of float, optional
        Process counts of the runs, in the order given.
    scale_key : str, optional
        Run attribute holding the process count.
    target : float, optional
        Scale of the model loss (default twice the largest).
    min_share : float
        Loss, as a share of the largest run's time, that makes a path non-scalable.
    max_terms : int
        Terms of the models besides the constant.
    k : int, optional
        Keep the first ``k`` non-scalable paths.

    Returns
    -------
    dict
        ``table``: the non-scalable call paths, ranked (``call_path``,
        ``name``, ``vertex`` in the largest run, ``model``, ``lead``,
        ``loss`` and ``share`` of the run time, ``model_loss``, ``by_loss``,
        ``by_model``, ``extrapolation`` (the model loss as text, or why
        the fit is too poor to extrapolate), ``poor_fit``, ``fit``,
        ``smape``, ``cv_smape``, ``extrap_smape``, ``ar2``, ``predicted``,
        ``ideal``, then ``T@<P>`` per run); ``models``: every
        call path's model with the same columns and ``non_scalable``;
        ``vertices``: the non-scalable paths present in the largest run as
        its vertices, in rank order; ``largest``: the largest run.
    """
    if mode not in SCALING_MODES:
        raise PassError(f"mode must be one of {', '.join(SCALING_MODES)}, not {mode!r}")
    if not 0 <= min_share < 1:
        raise PassError(f"min_share must be in [0, 1), not {min_share}")
    order, X, _, _ = run_parameters(runs, scales=scales, scale_key=scale_key)
    largest = runs[int(order[-1])]
    s = X[:, 0]
    fits = scaling_models(
        runs,
        metric=metric,
        agg=agg,
        scales=scales,
        scale_key=scale_key,
        target=target,
        negative=mode == "strong",
        max_terms=max_terms,
    )
    tcols = [c for c in fits.columns if c.startswith("T@")]
    times = fits[tcols].to_numpy(dtype=np.float64)
    tgt = float(fits.attrs["target"])
    lossd = scaling_loss(s, times, tgt, fits["predicted"].to_numpy(dtype=np.float64), mode)
    run_time = _run_time(largest, metric)
    thr = float(min_share) * run_time
    poor = fits["poor_fit"].to_numpy(dtype=bool)
    by_loss = np.nan_to_num(lossd["loss"], nan=-np.inf) >= thr
    by_model = (np.nan_to_num(lossd["model_loss"], nan=-np.inf) >= thr) & ~poor
    if thr <= 0:  # an empty largest run: nothing is lost
        by_loss[:] = False
        by_model[:] = False
    out = fits[["call_path", "name", "vertex", "model", "lead"]].copy()
    out["loss"] = lossd["loss"]
    out["share"] = lossd["loss"] / run_time if run_time > 0 else np.nan
    out["model_loss"] = lossd["model_loss"]
    out["by_loss"] = by_loss
    out["by_model"] = by_model
    out["non_scalable"] = by_loss | by_model
    out["extrapolation"] = [
        f"poor fit: {why}" if bad else ("" if not np.isfinite(ml) else f"{ml:.4g} s at P={tgt:g}")
        for bad, why, ml in zip(poor, fits["fit"].to_numpy(), lossd["model_loss"])
    ]
    for c in ("poor_fit", "fit", "smape", "cv_smape", "extrap_smape", "ar2", "predicted"):
        out[c] = fits[c].to_numpy()
    out["ideal"] = lossd["ideal"]
    for c in fits.columns:
        if c.startswith(("c", "i", "j")) and c[1:2].isdigit():  # the model's coefficients and exponents
            out[c] = fits[c].to_numpy()
    for c in tcols:
        out[c] = fits[c].to_numpy()
    key1 = np.nan_to_num(out["loss"].to_numpy(dtype=np.float64), nan=-np.inf)
    key2 = np.nan_to_num(out["model_loss"].to_numpy(dtype=np.float64), nan=-np.inf)
    key2[out["poor_fit"].to_numpy(dtype=bool)] = -np.inf  # an extrapolation from a poor fit ranks nothing
    out = out.iloc[np.lexsort((out["call_path"].to_numpy().astype(str), -key2, -key1))].reset_index(drop=True)
    table = out[out["non_scalable"].to_numpy()].reset_index(drop=True)
    if k is not None:
        table = table.head(max(int(k), 0))
    in_largest = np.isfinite(table[tcols[-1]].to_numpy(dtype=np.float64))
    vertices = VertexSet(largest, table["vertex"].to_numpy(dtype=np.int64)[in_largest], ordered=True)
    attrs = {
        **fits.attrs,
        "mode": mode,
        "run_time": run_time,
        "min_share": float(min_share),
        "note": (
            f"{mode.capitalize()} scaling: ideal time T_f·P_f/P"
            if mode == "strong"
            else "Weak scaling: ideal time constant"
        )
        + f" from the smallest scale with the path; loss = measured - ideal at P={s[-1]:g}, model_loss ="
        f" model - ideal at P={tgt:g}; non-scalable when either reaches {min_share:g} of the largest run's"
        f" time ({run_time:.4g} s); the model losses of poor fits are extrapolations the data do not support:"
        f" they neither select nor rank a path (column extrapolation). {fits.attrs['note']}",
    }
    units = dict(fits.attrs.get("units", {}))
    units.update({"loss": "s", "model_loss": "s", "ideal": "s", "share": "ratio"})
    attrs["units"] = units
    out.attrs.update(attrs)
    table.attrs.update(attrs)
    return {"table": table, "models": out, "vertices": vertices, "largest": largest}


def _walk_text(steps: pd.DataFrame) -> str:
    """``A (rank 3) <-collective- B (rank 0) <-program- C (rank 0)``: one backtracking path, symptom first."""
    parts = []
    for via, name, proc in zip(steps["via"], steps["name"], steps["process"]):
        node = f"{name} (rank {int(proc)})"
        parts.append(node if via == "start" else f"<-{via}- {node}")
    return " ".join(parts)


@pass_(version="1", tags=("profile", "trace", "scalability", "root-cause"))
def causal_paths(table: pd.DataFrame, root_causes: pd.DataFrame, paths: pd.DataFrame) -> pd.DataFrame:
    """Each non-scalable call path with the root cause its backtracking path reached.

    Parameters
    ----------
    table : DataFrame
        The non-scalable paths (``non_scalable_paths``'s ``table``).
    root_causes, paths : DataFrame
        The ``root_causes`` and ``paths`` outputs of ``backtrack`` run from
        the non-scalable vertices of the largest run.

    Returns
    -------
    pandas.DataFrame
        One row per backtracking path, in the order of the table:
        ``call_path`` (the non-scalable path), ``cause`` (the root cause's
        name, "" when the walk found none), ``source`` (its ``file:line``),
        ``cause_process``, ``loss``, ``share``, ``model``,
        ``symptom_process`` (where the walk started), ``steps``, ``wait``
        (waiting time on the communication edges crossed),
        ``cause_call_path`` and ``walk`` (the path as text, symptom first).
    """
    for what, df, need in (
        ("table", table, ("call_path", "vertex")),
        ("root_causes", root_causes, ("path", "vertex", "name", "process", "source")),
        ("paths", paths, ("path", "step", "vertex", "process", "name", "via")),
    ):
        missing = [c for c in need if c not in df.columns]
        if missing:
            raise PassError(f"causal_paths: {what} lacks the column(s) {', '.join(missing)}")
    starts = paths[paths["step"].to_numpy() == 0]
    rows = []
    tv = table.set_index("vertex", drop=False)
    tv = tv[~tv.index.duplicated()]
    rc = root_causes.set_index("path")
    for pid, steps in paths.groupby("path", sort=True):
        start = starts[starts["path"] == pid]
        if not len(start):
            continue
        v = int(start["vertex"].iloc[0])
        sym = tv.loc[v] if v in tv.index else None
        cause = rc.loc[pid] if pid in rc.index else None
        rows.append(
            {
                "call_path": sym["call_path"] if sym is not None else str(start["name"].iloc[0]),
                "model": sym["model"] if sym is not None and "model" in tv.columns else "",
                "loss": float(sym["loss"]) if sym is not None and "loss" in tv.columns else np.nan,
                "share": float(sym["share"]) if sym is not None and "share" in tv.columns else np.nan,
                "symptom_process": int(start["process"].iloc[0]),
                "cause": str(cause["name"]) if cause is not None else "",
                "source": str(cause["source"]) if cause is not None else "",
                "cause_process": int(cause["process"]) if cause is not None else -1,
                "cause_call_path": str(cause["call_path"]) if cause is not None and "call_path" in rc.columns else "",
                "steps": int(cause["steps"]) if cause is not None and "steps" in rc.columns else len(steps) - 1,
                "wait": float(cause["wait"]) if cause is not None and "wait" in rc.columns else 0.0,
                "walk": _walk_text(steps.sort_values("step")),
            }
        )
    out = pd.DataFrame(
        rows,
        columns=[
            "call_path",
            "cause",
            "source",
            "cause_process",
            "loss",
            "share",
            "model",
            "symptom_process",
            "steps",
            "wait",
            "cause_call_path",
            "walk",
        ],
    )
    found = int((out["cause"] != "").sum())
    out.attrs["note"] = (
        f"{found} of {len(out)} non-scalable call paths traced back to a root cause (an abnormal vertex of the"
        " largest run); walk: the backtracking path, symptom first, '<-collective-'/'<-p2p-' across a"
        " communication edge, '<-program-' to what ran before on the same process."
    )
    out.attrs["units"] = {"loss": "s", "share": "ratio", "wait": "s"}
    return out
