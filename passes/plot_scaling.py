"""Scaling curves: time versus process count per vertex, with the fitted model and a prediction.

The model is the one of the scalability analysis, ``T(P) = a + b log2 P``.
Measurements are markers, the fit a dashed line over the measured range
(extended to the target scale), the prediction at the target a star.

>>> fig = plot_scaling(times, fits, target=4096)   # times: name, nprocs, time; fits: name, a, b
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, NullLocator

from perflow.errors import PassError
from perflow.flow.registry import pass_

from ._figure import new_figure, palette, save_figure
from ._render import as_frame, format_value, numeric, require_columns

__all__ = ["plot_scaling", "fit_log2"]


def fit_log2(nprocs: np.ndarray, time: np.ndarray) -> tuple[float, float]:
    """Least-squares fit of ``time = a + b log2(nprocs)``; returns ``(a, b)`` (b = 0 with one distinct P)."""
    x = np.log2(np.asarray(nprocs, dtype=np.float64))
    y = np.asarray(time, dtype=np.float64)
    if len(np.unique(x)) < 2:
        return float(y.mean()) if len(y) else float("nan"), 0.0
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b)


def _label_column(df: pd.DataFrame, label: str, who: str) -> str:
    if label in df.columns:
        return label
    alt = next((c for c in ("name", "call_path", "vertex", "label") if c in df.columns), None)
    if alt is None:
        require_columns(df, [label], who, setting="label")
    return str(alt)


@pass_(version="1", tags=("plot",))
def plot_scaling(
    data: pd.DataFrame,
    fits: pd.DataFrame | None = None,
    *,
    label: str = "name",
    nprocs: str = "nprocs",
    time: str = "time",
    a: str = "a",
    b: str = "b",
    target: int | None = None,
    k: int = 8,
    title: str | None = None,
    width: float = 8.0,
    height: float = 5.0,
    path: str | None = None,
) -> Figure:
    """Log-log curves of time against process count per vertex, with the fitted ``a + b log2 P``.

    Parameters
    ----------
    data : DataFrame
        Tidy measurements: one row per (vertex, run) with ``label``, ``nprocs`` and ``time`` columns.
    fits : DataFrame, optional
        One row per vertex with ``label``, ``a`` and ``b`` columns (the
        scalability analysis output). Without it, each curve is fitted here
        by least squares.
    label : str
        Column naming the vertex (default ``name``; falls back to call_path, vertex).
    nprocs, time : str
        Process-count and time columns of ``data``.
    a, b : str
        Intercept and slope columns of ``fits``.
    target : int, optional
        Process count to extrapolate to (default: the ``target`` column of ``fits``, if any).
    k : int
        At most this many curves: those with the largest time at the largest scale.
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
        whose y data is ``a + b log2 P``) and, with a target, a prediction marker
        (``"<vertex> @ P=<target>"``). Non-positive fitted values are not drawn (log axis).
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
    params: dict[str, tuple[float, float]] = {}
    if fits is not None:
        fdf = as_frame(fits, who)
        flab = _label_column(fdf, label, who)
        require_columns(fdf, [a], who, setting="a")
        require_columns(fdf, [b], who, setting="b")
        for n, av, bv in zip(fdf[flab].astype(str), numeric(fdf, a, who), numeric(fdf, b, who)):
            params[n] = (float(av), float(bv))
        if target is None and "target" in fdf.columns and len(fdf):
            target = int(fdf["target"].iloc[0])
    pmax = tidy["P"].max() if len(tidy) else 1.0
    at_max = tidy[tidy["P"] == pmax].groupby("label", sort=False)["T"].sum()
    order = at_max.sort_values(ascending=False, kind="stable").index.tolist()
    order += [n for n in dict.fromkeys(tidy["label"]) if n not in order]
    order = order[: max(k, 1)]
    fig = new_figure(width, height)
    ax = fig.add_subplot()
    ps = np.sort(tidy["P"].unique())
    xmax = max(float(ps.max()) if len(ps) else 1.0, float(target or 0))
    handles: list = []
    for name, color in zip(order, palette(len(order))):
        g = tidy[tidy["label"] == name].groupby("P", sort=True)["T"].mean()
        x, y = g.index.to_numpy(), g.to_numpy()
        handles += ax.plot(x, np.where(y > 0, y, np.nan), "o-", color=color, label=name)
        av, bv = params[name] if name in params else fit_log2(x, y)
        if not np.isfinite(av) or not np.isfinite(bv):
            continue
        xs = np.unique(np.r_[x, xmax]) if target else x
        fit = av + bv * np.log2(xs)
        ax.plot(xs, np.where(fit > 0, fit, np.nan), "--", color=color, label=f"{name} fit")
        if target:
            pred = av + bv * np.log2(target)
            ax.plot(
                [target], [pred if pred > 0 else np.nan], "*", color=color, markersize=12, label=f"{name} @ P={target}"
            )
            if pred > 0:
                ax.annotate(
                    format_value(pred, "s"), (target, pred), textcoords="offset points", xytext=(5, 5), fontsize=7
                )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = np.unique(np.r_[ps, [target] if target else []])
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(int(t)) if float(t).is_integer() else f"{t:g}" for t in ticks])
    if target:
        ax.axvline(target, color="gray", linestyle=":", linewidth=1)
    ax.set_xlabel("processes")
    ax.set_ylabel(f"{time} (s)")
    ax.set_title(title or "scaling: T(P) = a + b log2 P")
    handles.append(Line2D([], [], color="gray", linestyle="--", label="fit a + b log2 P"))
    if target:
        handles.append(
            Line2D([], [], color="gray", marker="*", linestyle="", markersize=10, label=f"prediction at P={target}")
        )
    ax.legend(handles=handles, loc="best", fontsize="small")
    fig.tight_layout()
    save_figure(fig, path)
    return fig
