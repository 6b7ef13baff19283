"""Plot passes over processes: per-process bars, imbalance box plots, breakdown stacked bars.

Each pass returns a :class:`matplotlib.figure.Figure` built without pyplot
(Agg canvas, thread-safe) and saves it only when ``path`` is given.

>>> fig = plot_process_bars(pag, vertices=["compute"], metric="time_exc")
>>> fig = plot_imbalance(pag, k=8)                        # the 8 vertices with the largest max time
>>> fig = plot_breakdown(breakdown_table, by="process")   # stacked computation/p2p/collective/...
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflow.sdk import PAG, Figure, PassError, VertexSet, pass_
from perflow.sdk.figures import (
    CATEGORY_COLORS,
    PLOT_CATEGORIES,
    axis_scale,
    legend_outside,
    new_figure,
    palette,
    per_process,
    save_figure,
    unit_label,
)
from perflow.sdk.render import as_frame, guess_unit, numeric, require_columns

#: ``new_figure(width, height)``: a matplotlib Figure without pyplot that displays itself in notebooks
#: (as the figures of the plot passes do), for figures drawn by hand.
__all__ = ["plot_process_bars", "plot_imbalance", "plot_breakdown", "new_figure"]

PerProcessInput = PAG | VertexSet | pd.DataFrame


@pass_(version="1", tags=("plot",))
def plot_process_bars(
    data: PerProcessInput,
    pag: PAG | None = None,
    *,
    metric: str = "time_exc",
    vertices: list[str | int] | None = None,
    k: int = 3,
    label: str = "name",
    process: str = "process",
    show_mean: bool = True,
    title: str | None = None,
    width: float = 9.0,
    height: float = 4.0,
    path: str | None = None,
) -> Figure:
    """Bars of one metric per process, for one or a few vertices (grouped side by side).

    Parameters
    ----------
    data : PAG or VertexSet or DataFrame
        A PAG (vertices from ``vertices``, else the ``k`` with the largest
        maximum of ``metric``), a VertexSet (its first ``k`` vertices), a long
        table with ``process``, ``metric`` and ``label`` columns, or a table with
        a ``vertex`` column (an analysis result) together with ``pag``.
    pag : PAG, optional
        The PAG to read per-process values from when ``data`` is a table of vertices.
    metric : str
        The metric (or value column of a long table).
    vertices : list of str, optional
        Vertex names, call paths or ids to plot (PAG input).
    k : int
        At most this many vertices.
    label : str
        ``"name"`` or ``"call_path"`` for PAG input; the label column of a long table.
    process : str
        Process column of a long table.
    show_mean : bool
        Draw each vertex's mean across processes as a dashed line.
    title : str, optional
        Figure title.
    width, height : float
        Figure size in inches.
    path : str, optional
        Save the figure there (format from the suffix).

    Returns
    -------
    matplotlib.figure.Figure
        One axes; bar ``j`` of series ``i`` is the value of vertex ``i`` on process ``j``.
    """
    who = "plot_process_bars"
    labels, procs, values, unit = per_process(
        data, pag, metric=metric, vertices=vertices, k=k, rank_agg="max", label=label, process=process, who=who
    )
    f, u = axis_scale(values.ravel(), unit)
    fig = new_figure(width, height)
    ax = fig.add_subplot()
    n = max(len(labels), 1)
    w = 0.8 / n
    x = np.arange(len(procs))
    for i, (lab, c) in enumerate(zip(labels, palette(len(labels)))):
        ax.bar(x - 0.4 + w * (i + 0.5), values[i] * f, width=w, color=c, label=lab)
        if show_mean and len(procs):
            ax.axhline(values[i].mean() * f, color=c, linestyle="--", linewidth=1)
    ax.set_xticks(x, [str(p) for p in procs])
    if len(procs) > 32:
        step = int(np.ceil(len(procs) / 32))
        for j, t in enumerate(ax.get_xticklabels()):
            t.set_visible(j % step == 0)
    ax.set_xlabel("process")
    ax.set_ylabel(unit_label(metric, u))
    ax.set_title(title or f"{metric} per process")
    fig.tight_layout()
    if labels:
        legend_outside(ax)  # after the layout: the saved figure widens to hold it
    save_figure(fig, path)
    return fig


@pass_(version="1", tags=("plot",))
def plot_imbalance(
    data: PerProcessInput,
    pag: PAG | None = None,
    *,
    metric: str = "time_exc",
    vertices: list[str | int] | None = None,
    k: int = 10,
    label: str = "name",
    process: str = "process",
    horizontal: bool = False,
    title: str | None = None,
    width: float = 9.0,
    height: float = 4.5,
    path: str | None = None,
) -> Figure:
    """Box plots of a metric's distribution across processes, one box per vertex.

    A box spans the quartiles, whiskers reach 1.5 IQR, circles are outliers
    (often the slow processes) and a triangle marks the mean. Absent
    (vertex, process) pairs count as 0, as in every perflow aggregation.

    Parameters
    ----------
    data : PAG or VertexSet or DataFrame
        As in :func:`plot_process_bars` (PAG default: the ``k`` vertices with the largest maximum).
    pag : PAG, optional
        The PAG to read per-process values from when ``data`` is a table of vertices.
    metric : str
        The metric.
    vertices : list of str, optional
        Vertex names, call paths or ids (PAG input).
    k : int
        At most this many boxes.
    label : str
        ``"name"`` or ``"call_path"``; the label column of a long table.
    process : str
        Process column of a long table.
    horizontal : bool
        Horizontal boxes (better for long names).
    title : str, optional
        Figure title.
    width, height : float
        Figure size in inches.
    path : str, optional
        Save the figure there.

    Returns
    -------
    matplotlib.figure.Figure
    """
    who = "plot_imbalance"
    labels, _, values, unit = per_process(
        data, pag, metric=metric, vertices=vertices, k=k, rank_agg="max", label=label, process=process, who=who
    )
    if not labels:
        raise PassError(f"{who}: no vertices to plot")
    f, u = axis_scale(values.ravel(), unit)
    fig = new_figure(width, height)
    ax = fig.add_subplot()
    ax.boxplot(
        [row * f for row in values],
        tick_labels=labels,
        orientation="horizontal" if horizontal else "vertical",
        showmeans=True,
        patch_artist=True,
        boxprops={"facecolor": "#c6dbef"},
    )
    (ax.set_xlabel if horizontal else ax.set_ylabel)(unit_label(metric, u))
    if not horizontal:
        for t in ax.get_xticklabels():
            t.set_rotation(30)
            t.set_horizontalalignment("right")
    ax.set_title(title or f"{metric} across processes")
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def _breakdown_table(
    df: pd.DataFrame, by: str | None, categories: list[str] | None, category: str, value: str, who: str
) -> tuple[str, pd.DataFrame]:
    if by is None:
        by = next((c for c in ("process", "name", "call_path", "vertex") if c in df.columns), None)
        if by is None:
            raise PassError(f"{who}: no row column found (looked for process, name, call_path, vertex); set `by`")
    require_columns(df, [by], who, setting="by")
    if category in df.columns:  # long format
        if value not in df.columns and value == "time" and "value" in df.columns:
            value = "value"  # the breakdown pass's long form
        require_columns(df, [value], who, setting="value")
        long = pd.DataFrame(
            {"by": df[by].to_numpy(), "cat": df[category].astype(str).to_numpy(), "v": numeric(df, value, who)}
        )
        wide = long.pivot_table(index="by", columns="cat", values="v", aggfunc="sum", fill_value=0.0, sort=False)
        wide.index.name = by
    else:
        wide = df.groupby(by, sort=False).sum(numeric_only=True)
    if categories:
        require_columns(wide, categories, who, setting="categories")
        cats = list(categories)
    else:
        known = [c for c in PLOT_CATEGORIES if c in wide.columns]
        cats = known or [c for c in wide.columns if c not in ("vertex", "process", "thread", "depth", "parent")]
    if not cats:
        raise PassError(f"{who}: the input has no numeric category columns to stack")
    return by, wide[cats].astype(np.float64)


@pass_(version="1", tags=("plot",))
def plot_breakdown(
    data: pd.DataFrame,
    *,
    by: str | None = None,
    categories: list[str] | None = None,
    category: str = "category",
    value: str = "time",
    normalize: bool = False,
    max_rows: int | None = 64,
    horizontal: bool = False,
    title: str | None = None,
    width: float = 9.0,
    height: float = 4.5,
    path: str | None = None,
) -> Figure:
    """Stacked bars of a time breakdown: processes or vertices x categories.

    Categories are computation, p2p, collective, sync, wait, io (and any
    other columns you name). The input is wide (one row per process or vertex,
    one column per category) or long (columns ``by``, ``category`` and ``value``).

    Parameters
    ----------
    data : DataFrame
        The breakdown table.
    by : str, optional
        Row column (default: the first of process, name, call_path, vertex present).
    categories : list of str, optional
        Category columns to stack, bottom first (default: the known categories present,
        else every numeric column).
    category, value : str
        Category and value columns of a long table.
    normalize : bool
        Show each row as percentages of its total.
    max_rows : int, optional
        Keep the rows with the largest totals (all rows when None).
    horizontal : bool
        Horizontal bars.
    title : str, optional
        Figure title.
    width, height : float
        Figure size in inches.
    path : str, optional
        Save the figure there.

    Returns
    -------
    matplotlib.figure.Figure
        One bar segment (patch) per (row, category), one legend entry per category.
    """
    who = "plot_breakdown"
    by, wide = _breakdown_table(as_frame(data, who), by, categories, category, value, who)
    if max_rows is not None and len(wide) > max_rows:
        keep = np.argsort(-wide.sum(axis=1).to_numpy(), kind="stable")[:max_rows]
        wide = wide.iloc[np.sort(keep)]
    vals = wide.to_numpy()
    if normalize:
        tot = vals.sum(axis=1, keepdims=True)
        vals = np.divide(100.0 * vals, tot, out=np.zeros_like(vals), where=tot > 0)
        f, u, axis_name = 1.0, "%", "share of time"
    else:
        f, u = axis_scale(vals.sum(axis=1), guess_unit(value) or "s")
        axis_name = "time"
    fig = new_figure(width, height)
    ax = fig.add_subplot()
    pos = np.arange(len(wide))
    bottom = np.zeros(len(wide))
    cols = [CATEGORY_COLORS.get(str(c)) for c in wide.columns]
    extra = iter(palette(len(cols)))
    for j, c in enumerate(wide.columns):
        color = cols[j] or next(extra)
        if not np.any(vals[:, j]):  # a category with no time: neither a bar nor a legend entry
            continue
        seg = vals[:, j] * f
        if horizontal:
            ax.barh(pos, seg, left=bottom, color=color, label=str(c))
        else:
            ax.bar(pos, seg, bottom=bottom, color=color, label=str(c))
        bottom += seg
    ticks = [str(x) for x in wide.index]
    (ax.set_yticks if horizontal else ax.set_xticks)(pos, ticks)
    (ax.set_ylabel if horizontal else ax.set_xlabel)(by)
    (ax.set_xlabel if horizontal else ax.set_ylabel)(unit_label(axis_name, u))
    if not horizontal and max(map(len, ticks), default=0) > 4:
        for t in ax.get_xticklabels():
            t.set_rotation(30)
            t.set_horizontalalignment("right")
    ax.set_title(title or "time breakdown")
    fig.tight_layout()
    legend_outside(ax)  # after the layout: the saved figure widens to hold it
    save_figure(fig, path)
    return fig
