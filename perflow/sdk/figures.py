"""The SDK for figures: figures without pyplot, axis units, colours, per-process data.

Every figure is a :class:`matplotlib.figure.Figure` with an Agg canvas
attached and no pyplot state, so plot passes can run in threads of the flow
scheduler and never open windows. Close nothing: the figure is garbage
collected with its last reference.

Figures show themselves in notebooks: :func:`new_figure` makes a
:class:`perflow.sdk.mplfig.PerflowFigure`, a ``Figure`` subclass whose
``_repr_png_`` gives IPython a PNG, so a figure displays as the last
expression of a cell without ``%matplotlib inline`` (see docs/viewing.md).

This module does not import matplotlib: importing the pass library or
validating a flow stays cheap. :data:`perflow.flow.types.Figure` stands for
``matplotlib.figure.Figure`` in pass signatures and imports matplotlib only
when asked whether a value is one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import progress
from .._atomic import atomic_path
from ..errors import PassError
from ..flow.types import Figure  # matplotlib itself is imported when a figure is made
from ..flow.writes import output_path
from ..pag.pag import PAG
from ..pag.sets import VertexSet
from ..pag.sites import call_site_paths
from .render import as_frame, format_value, guess_unit, numeric, require_columns

__all__ = [
    "Figure",
    "new_figure",
    "save_figure",
    "layout_free",
    "axis_scale",
    "CATEGORY_COLORS",
    "PLOT_CATEGORIES",
    "palette",
    "per_process",
    "vertex_ids",
    "vertex_labels",
    "legend_outside",
    "value_formatter",
    "unit_label",
]

log = logging.getLogger(__name__)

#: The breakdown categories (:data:`perflow.sdk.profile.CATEGORIES`) in display order, with ``other``;
#: and their colours.
PLOT_CATEGORIES = ("computation", "p2p", "collective", "sync", "wait", "io", "mpi", "gpu", "idle", "off_cpu", "other")
CATEGORY_COLORS = {
    "computation": "#8fbc8f",
    "p2p": "#4c72b0",
    "collective": "#dd8452",
    "sync": "#8172b3",
    "wait": "#c44e52",
    "io": "#937860",
    "mpi": "#64b5cd",
    "gpu": "#e6b422",
    "other": "#bbbbbb",
    "idle": "#eeeeee",
    "off_cpu": "#d9d0c1",
}


def new_figure(width: float = 8.0, height: float = 4.5, *, dpi: int = 100) -> Figure:
    """A new figure with an Agg canvas (no pyplot, no global state) that displays itself in notebooks."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazily: matplotlib is heavy

    from .mplfig import PerflowFigure  # the one lazy import here: importing mplfig imports matplotlib

    fig = PerflowFigure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def layout_free(image: Any) -> Any:
    """``image`` (an ``AxesImage``, as ``imshow`` returns it) made to skip the measuring draw of savefig.

    The pixels drawn are the same (:class:`perflow.sdk.mplfig.LayoutFreeImage`); a figure with a
    large image saved with ``bbox_inches="tight"`` resamples it once instead of twice.
    """
    from .mplfig import LayoutFreeImage

    if type(image) is LayoutFreeImage.__mro__[1]:
        image.__class__ = LayoutFreeImage
    return image


def save_figure(fig: Any, path: str | Path | None, *, dpi: int | None = None, setting: str = "path") -> Path | None:
    """Save ``fig`` to ``path`` (format from the suffix; atomically) when a path is given.

    Under a flow run the path (the value of the pass's ``setting``) must be
    allowed by the run's write policy (:func:`perflow.flow.writes.output_path`).
    """
    p = output_path(path, setting=setting)
    if p is None:
        return None
    with progress.task(f"rendering {p.name}"), atomic_path(p) as tmp:
        fig.savefig(tmp, dpi=dpi or fig.dpi, bbox_inches="tight")
    log.debug("wrote %s", p)
    return p


def axis_scale(values: np.ndarray, unit: str) -> tuple[float, str]:
    """A factor and unit name that bring ``values`` to a readable axis range (``(1e3, "ms")``)."""
    finite = np.abs(values[np.isfinite(values)]) if len(values) else np.zeros(0)
    top = float(finite.max()) if len(finite) else 0.0
    if unit == "s":
        for f, name in ((1.0, "s"), (1e3, "ms"), (1e6, "us")):
            if top * f >= 1.0:
                return f, name
        return (1e9, "ns") if top > 0 else (1.0, "s")
    if unit == "bytes":
        for k, name in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
            if top >= 1024**k:
                return 1.0 / 1024**k, name
        return 1.0, "B"
    if unit in ("%", "ratio"):
        return (100.0 if unit == "ratio" else 1.0), "%"
    return 1.0, ""


def palette(n: int) -> list[Any]:
    """``n`` distinct colours (tab10, then tab20, then a sampled colormap)."""
    import matplotlib

    if n <= 10:
        return [matplotlib.colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [matplotlib.colormaps["tab20"](i) for i in range(n)]
    cmap = matplotlib.colormaps["turbo"]
    return [cmap(x) for x in np.linspace(0.05, 0.95, n)]


# ---------------------------------------------------------------------- vertices
def vertex_ids(pag: PAG, vertices: Sequence[int | str] | VertexSet | None, who: str) -> np.ndarray:
    """Vertex ids from ids, names or call paths (each name must be unique), or a VertexSet."""
    if vertices is None:
        return np.zeros(0, dtype=np.int64)
    if isinstance(vertices, VertexSet):
        return np.asarray(vertices.ids, dtype=np.int64)
    if isinstance(vertices, str | int | np.integer):
        vertices = [vertices]
    out = []
    for v in vertices:
        try:
            out.append(pag.vertex(int(v) if isinstance(v, int | np.integer) else str(v)).id)
        except Exception as exc:  # PAGError with a clear message
            raise PassError(f"{who}: {exc}") from None
    return np.asarray(out, dtype=np.int64)


def vertex_labels(pag: PAG, ids: np.ndarray, label: str = "name") -> list[str]:
    """Display labels of vertices: names (repeated names get their file:line, else their id) or call paths."""
    if label == "call_path":
        return [str(x) for x in call_site_paths(pag)[ids]]
    vt = pag.vertex_table
    names = [str(x) for x in vt["name"].to_numpy()[ids]]
    sites = [
        f"{f}:{ln}" if f and ln >= 0 else ""
        for f, ln in zip(vt["file"].astype(str).to_numpy()[ids], vt["line"].to_numpy()[ids])
    ]
    dup = {n for n in names if names.count(n) > 1}
    labels = [f"{n} ({s})" if n in dup and s else n for n, s in zip(names, sites)]
    again = {x for x in labels if labels.count(x) > 1}
    return [f"{x} [{i}]" if x in again else x for x, i in zip(labels, ids.tolist())]


def per_process(
    data: Any,
    pag: PAG | None,
    *,
    metric: str,
    vertices: Sequence[int | str] | None,
    k: int,
    rank_agg: str,
    label: str,
    process: str,
    who: str,
) -> tuple[list[str], np.ndarray, np.ndarray, str]:
    """Per-process values of one metric for a few vertices (dense: no data counts as 0).

    ``data`` is a PAG (vertices: the ``vertices`` setting, else the top ``k``
    by ``rank_agg`` of the metric), a VertexSet (its first ``k`` vertices), a
    long table with ``process``, ``metric`` and ``label`` columns, or a table
    with a ``vertex`` column naming vertices of ``pag``.

    Returns
    -------
    labels : list of str
        One per vertex (row of ``values``).
    processes : numpy.ndarray
        Process ids (columns of ``values``).
    values : numpy.ndarray
        ``(len(labels), len(processes))`` float64 array.
    unit : str
        Unit of the metric.
    """
    if isinstance(data, pd.DataFrame | pd.Series):
        df = as_frame(data, who)
        if process in df.columns:
            require_columns(df, [metric], who, setting="metric")
            lab = (
                label
                if label in df.columns
                else next((c for c in ("name", "call_path", "vertex") if c in df.columns), None)
            )
            if lab is None:
                raise PassError(f"{who}: the input has no column {label!r} (setting label) to name the series by")
            vals = numeric(df, metric, who)
            long = pd.DataFrame({"label": df[lab].astype(str).to_numpy(), "process": df[process].to_numpy(), "v": vals})
            wide = long.pivot_table(
                index="label", columns="process", values="v", aggfunc="sum", fill_value=0.0, sort=False
            )
            order = list(dict.fromkeys(long["label"]))[: max(k, 1)]
            wide = wide.loc[order]
            return order, wide.columns.to_numpy(), wide.to_numpy(dtype=np.float64), guess_unit(metric)
        if "vertex" in df.columns and pag is not None:
            ids = df["vertex"].to_numpy(dtype=np.int64)[: max(k, 1)]
        elif "vertex" in df.columns:
            raise PassError(f"{who}: the table names vertices but no PAG was given to read per-process values from")
        else:
            raise PassError(f"{who}: the input has no column {process!r} (setting process) and no 'vertex' column")
    elif isinstance(data, VertexSet):
        pag = data.pag
        ids = np.asarray(data.ids[: max(k, 1)], dtype=np.int64)
    elif isinstance(data, PAG):
        pag = data
        ids = vertex_ids(pag, vertices, who)
        if not len(ids):
            try:
                ids = pag.vertices.sort_by(metric, rank_agg).top(k).ids
            except Exception as exc:
                raise PassError(f"{who}: {exc}") from None
    else:
        raise PassError(f"{who}: expected a PAG, a VertexSet or a DataFrame, got a {type(data).__name__}")
    assert pag is not None
    ids = ids[np.sort(np.unique(ids, return_index=True)[1])]  # drop repeats, keep order
    try:
        pag.check_metric(metric)
    except Exception as exc:
        raise PassError(f"{who}: {exc}") from None
    procs = pag.processes
    m = pag.metrics
    vcodes = np.asarray(m.index.codes[0], dtype=np.int64)
    rows = np.flatnonzero(np.isin(vcodes, ids))
    pvals = m.index.get_level_values("process").to_numpy()[rows]
    lut = np.full(pag.n_vertices, -1, dtype=np.int64)
    lut[ids] = np.arange(len(ids))
    r = lut[vcodes[rows]]
    values = np.zeros((len(ids), len(procs)))
    np.add.at(values, (r, np.searchsorted(procs, pvals)), m[metric].to_numpy(dtype=np.float64)[rows])
    unit = pag.metric_info[metric].unit if metric in pag.metric_info else guess_unit(metric)
    return vertex_labels(pag, ids, label), procs, values, unit


def legend_outside(ax: Any, **kw: Any) -> Any:
    """A legend right of the axes, never over the data (the figure widens to hold it when saved)."""
    kw.setdefault("fontsize", "small")
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False, **kw)


def value_formatter(unit: str) -> Any:
    """A tick formatter writing values with their unit (``2.00 KiB``, ``12.3 ms``), as the tables do."""
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda x, _pos: format_value(x, unit, digits=3))


def unit_label(name: str, unit: str) -> str:
    """``"time_exc (ms)"`` or just ``"visits"``."""
    return f"{name} ({unit})" if unit else name
