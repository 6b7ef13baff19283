"""Scaling curves: time versus process count per vertex, with the fitted model and a prediction.

The model is the one of the scalability analysis, ``log2 T = a + b log2 P``,
or, given a table of Extra-P models (``scaling_models``, ``non_scalable_paths``:
columns ``model``, ``c0``, ``c1``, ``i1_p``, ``j1_p``...), each row's model.
Measurements are markers, the fit a dashed line over the measured range
(extended to the target scale), the prediction at the target a star. Given
the scalability table as ``fits``, the figure shows the call paths that table
lists (the ones it flags), in its order, and marks poor fits in the legend.

>>> fig = plot_scaling(times, fits, target=4096)   # times: name, nprocs, time; fits: name, a, b
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PassError, pass_
from perflow.sdk.figures import Figure, legend_outside, new_figure, palette, save_figure, value_formatter
from perflow.sdk.render import as_frame, format_value, numeric, require_columns

from .models import evaluate, frame_models

__all__ = ["plot_scaling", "fit_log2"]


def fit_log2(nprocs: np.ndarray, time: np.ndarray) -> tuple[float, float]:
    """Least-squares fit of ``log2 T = a + b log2 P`` (the scalability pass's model); returns ``(a, b)``.

    Zero and negative times are left out; with fewer than two distinct process
    counts left, ``b`` is 0 and ``a`` the log2 of the mean time.
    """
    p = np.asarray(nprocs, dtype=np.float64)
    t = np.asarray(time, dtype=np.float64)
    ok = t > 0
    x, y = np.log2(p[ok]), np.log2(t[ok])
    if len(np.unique(x)) < 2:
        return (float(np.log2(t[ok].mean())) if ok.any() else float("nan")), 0.0
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b)


def model(a: float, b: float, nprocs: np.ndarray | float) -> np.ndarray:
    """The fitted time ``2 ** (a + b log2 P)``."""
    return np.exp2(a + b * np.log2(np.asarray(nprocs, dtype=np.float64)))


def _label_column(df: pd.DataFrame, label: str, who: str) -> str:
    if label in df.columns:
        return label
    alt = next((c for c in ("name", "call_path", "vertex", "label") if c in df.columns), None)
    if alt is None:
        require_columns(df, [label], who, setting="label")
    return str(alt)


@pass_(version="3", tags=("plot",))
def plot_scaling(
    data: pd.DataFrame,
    fits: pd.DataFrame | None = None,
    *,
    label: str = "name",
    nprocs: str = "nprocs",
    time: str = "time",
    a: str = "intercept",
    b: str = "slope",
    target: int | None = None,
    k: int = 8,
    title: str | None = None,
    width: float = 8.0,
    height: float = 5.0,
    path: str | None = None,
) -> Figure:
    """Log-log curves of time against process count per vertex, with the fit ``log2 T = a + b log2 P``.

    Parameters
    ----------
    data : DataFrame
        Tidy measurements: one row per (vertex, run) with ``label``, ``nprocs`` and ``time`` columns.
    fits : DataFrame, optional
        One row per vertex with ``label`` and the fit's intercept ``a`` and
        slope ``b`` of ``log2 T = a + b log2 P`` (the ``scalability`` pass's
        ``intercept`` and ``slope`` columns). The figure then shows the
        vertices of this table, in its order (the call paths the scalability
        table flags), matched on ``call_path`` when both tables have it; rows
        with ``poor_fit`` are marked in the legend with their ``r2``. A table
        of Extra-P models (``model``, ``c0``, ``c1``, ``i1_p``, ``j1_p``, ...:
        ``scaling_models``, ``non_scalable_paths``) draws each row's model
        instead, named in the legend (poor fits with why: the ``fit`` column). Without
        it, each curve is fitted here by least squares.
    label : str
        Column naming the vertex (default ``name``; falls back to call_path, vertex).
    nprocs, time : str
        Process-count and time columns of ``data``.
    a, b : str
        Intercept and slope columns of ``fits`` (``a``/``b`` are used when the
        named columns are absent and those exist).
    target : int, optional
        Process count to extrapolate to (default: the ``target`` column of ``fits``, if any).
    k : int
        At most this many curves: the first rows of ``fits``, else those with
        the largest time at the largest scale.
    title : str, optional
        Figure title.
    width, height : float
        Figure size in inches.
    path : str, optional
        Save the figure there.

    Returns
    -------
    matplotlib.figure.Figure
        Per vertex, a measured line (label: the vertex), a fit line (``"<vertex> fit"``,
        whose y data is ``2 ** (a + b log2 P)``) and, with a target, a prediction marker
        (``"<vertex> @ P=<target>"``).
    """
    who = "plot_scaling"
    df = as_frame(data, who)
    lab = _label_column(df, label, who)
    require_columns(df, [nprocs], who, setting="nprocs")
    require_columns(df, [time], who, setting="time")
    tidy = pd.DataFrame(
        {"label": df[lab].astype(str).to_numpy(), "P": numeric(df, nprocs, who), "T": numeric(df, time, who)}
    )
    if (tidy["P"] <= 0).any():
        raise PassError(f"{who}: process counts in {nprocs!r} must be positive")
    params: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
    pmnf = False
    poor: dict[str, str] = {}
    texts: dict[str, str] = {}
    chosen: list[str] = []
    if fits is not None:
        fdf = as_frame(fits, who)
        flab = _label_column(fdf, label, who)
        pmnf = {"c0", "model"} <= set(fdf.columns) and a not in fdf.columns  # Extra-P models (scaling_models)
        if pmnf:
            coef, expo = frame_models(fdf, ["p"])
        elif a not in fdf.columns and b not in fdf.columns and {"a", "b"} <= set(fdf.columns):
            a, b = "a", "b"
        if not pmnf:
            require_columns(fdf, [a], who, setting="a")
            require_columns(fdf, [b], who, setting="b")
        if "call_path" in fdf.columns and "call_path" in df.columns:  # match on the call path, show the label
            to_label = dict(zip(df["call_path"].astype(str), tidy["label"]))
            keys = [to_label.get(c) for c in fdf["call_path"].astype(str)]
        else:
            keys = list(fdf[flab].astype(str))
        r2 = numeric(fdf, "r2", who) if "r2" in fdf.columns else np.full(len(fdf), np.nan)
        bad = fdf["poor_fit"].to_numpy(dtype=bool) if "poor_fit" in fdf.columns else np.zeros(len(fdf), bool)
        avs = numeric(fdf, a, who) if not pmnf else np.zeros(len(fdf))
        bvs = numeric(fdf, b, who) if not pmnf else np.zeros(len(fdf))
        for row, (n, av, bv, q, r) in enumerate(zip(keys, avs, bvs, bad, r2)):
            if n is None:
                continue
            if pmnf:
                c, e = coef[row : row + 1], expo[row : row + 1]
                params[n] = lambda P, c=c, e=e: evaluate(c, e, np.asarray(P, dtype=np.float64).reshape(-1, 1))[0]
            else:
                params[n] = lambda P, av=float(av), bv=float(bv): model(av, bv, P)
            chosen.append(n)
            if pmnf:
                texts[n] = str(fdf["model"].iloc[row])
            if q and pmnf and "fit" in fdf.columns and str(fdf["fit"].iloc[row]):
                poor[n] = str(fdf["fit"].iloc[row])  # why the fit is poor (scaling_models)
            elif q:
                poor[n] = f"SMAPE {fdf['smape'].iloc[row]:.0f} %" if pmnf and "smape" in fdf.columns else f"r2 {r:.2f}"
        if target is None and "target" in fdf.columns and len(fdf):
            target = int(fdf["target"].iloc[0])
        if target is None and "target" in fdf.attrs:
            target = int(fdf.attrs["target"])
    if chosen:  # the vertices the fits table lists, in its order
        order = list(dict.fromkeys(n for n in chosen if n in set(tidy["label"])))[: max(k, 1)]
    else:
        pmax = tidy["P"].max() if len(tidy) else 1.0
        at_max = tidy[tidy["P"] == pmax].groupby("label", sort=False)["T"].sum()
        order = at_max.sort_values(ascending=False, kind="stable").index.tolist()
        order += [n for n in dict.fromkeys(tidy["label"]) if n not in order]
        order = order[: max(k, 1)]
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, NullLocator

    fig = new_figure(width, height)
    ax = fig.add_subplot()
    ps = np.sort(tidy["P"].unique())
    xmax = max(float(ps.max()) if len(ps) else 1.0, float(target or 0))
    handles: list = []
    said: dict[Any, str] = {}  # a curve's predicted value, for its legend entry
    for name, color in zip(order, palette(len(order))):
        g = tidy[tidy["label"] == name].groupby("P", sort=True)["T"].mean()
        x, y = g.index.to_numpy(), g.to_numpy()
        shown = f"{name}: {texts[name]}" if name in texts else name
        shown = f"{shown} (poor fit, {poor[name]})" if name in poor else shown
        handles += ax.plot(x, np.where(y > 0, y, np.nan), "o-", color=color, label=shown)
        if name in params:
            curve = params[name]
        else:
            av, bv = fit_log2(x, y)
            if not np.isfinite(av) or not np.isfinite(bv):
                continue
            curve = lambda P, av=av, bv=bv: model(av, bv, P)  # noqa: E731
        xs = np.unique(np.r_[x, xmax]) if target else x
        if name in texts and len(xs) > 1:  # a model is a curve: evaluate it between the points too
            xs = np.unique(np.r_[xs, np.geomspace(float(xs.min()), float(xs.max()), 64)])
        fit = np.asarray(curve(xs), dtype=np.float64)
        fit = np.where(fit > 0, fit, np.nan)
        ax.plot(xs, fit, "--", color=color, label=f"{name} fit")
        if target:
            pred = float(np.asarray(curve(np.array([float(target)])), dtype=np.float64).ravel()[0])
            # the predicted value goes in the legend: labels beside the stars would overlap
            star = ax.plot(
                [target], [pred if pred > 0 else np.nan], "*", color=color, markersize=12, label=f"{name} @ P={target}"
            )
            if pred > 0:  # said in the legend beside its curve: labels beside the stars would overlap
                said[handles[-1]] = f"; {format_value(pred, 's')} at P={target}"
            del star
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = np.unique(np.r_[ps, [target] if target else []])
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(int(t)) if float(t).is_integer() else f"{t:g}" for t in ticks])
    if target:
        ax.axvline(target, color="gray", linestyle=":", linewidth=1)
    ax.set_xlabel("processes")
    ax.set_ylabel(time)
    ax.yaxis.set_major_formatter(value_formatter("s"))  # 10.0 ms, 1.00 s: the unit on every tick
    form = "model c0 + c·p^i·log2(p)^j" if pmnf else "fit log2 T = a + b log2 P"
    ax.set_title(title or f"scaling: {form.split(' ', 1)[1]}")
    handles.append(Line2D([], [], color="gray", linestyle="--", label=form))
    if target:
        handles.append(
            Line2D([], [], color="gray", marker="*", linestyle="", markersize=10, label=f"prediction at P={target}")
        )
    fig.tight_layout()
    labels = [f"{h.get_label()}{said.get(h, '')}" for h in handles]
    legend_outside(ax, handles=handles, labels=labels)  # after the layout: the saved figure widens to hold it
    save_figure(fig, path)
    return fig
