"""The communication heatmap: a process x process matrix of bytes, messages or waiting time.

>>> fig = plot_comm_matrix(pag, value="bytes", log=True)
>>> fig = plot_comm_matrix(matrix_df)                 # square frame: index senders, columns receivers
>>> fig = plot_comm_matrix(edges_df, src="send_process", dst="recv_process", value="bytes")
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, pass_
from perflow.sdk.figures import Figure, new_figure, save_figure, value_formatter
from perflow.sdk.render import as_frame, format_value, guess_unit, numeric, require_columns

__all__ = ["plot_comm_matrix", "comm_matrix_array"]

_SRC = ("src", "sender", "send_process", "src_process", "source", "from")
_DST = ("dst", "receiver", "recv_process", "dst_process", "dest", "target", "to")


def comm_matrix_array(
    data: PAG | pd.DataFrame | np.ndarray,
    *,
    value: str = "bytes",
    src: str | None = None,
    dst: str | None = None,
    kinds: list[str] | None = None,
    who: str = "plot_comm_matrix",
) -> tuple[np.ndarray, list[str], list[str]]:
    """The matrix (rows: senders, columns: receivers) and its row and column labels.

    Accepts a PAG (point-to-point edges of the parallel view, or the ``kinds`` given),
    a square matrix (ndarray or DataFrame without sender/receiver columns) or a
    long table with sender, receiver and ``value`` columns.
    """
    if isinstance(data, np.ndarray):
        if data.ndim != 2:
            raise PassError(f"{who}: a communication matrix must be 2-D, got shape {data.shape}")
        return data.astype(np.float64), [str(i) for i in range(data.shape[0])], [str(i) for i in range(data.shape[1])]
    if isinstance(data, PAG):
        if value not in ("bytes", "count", "time", "wait"):
            raise PassError(f"{who}: edge value must be bytes, count, time or wait, not {value!r}")
        procs = data.processes
        et = data.parallel.edges.filter(kind=kinds or ["p2p"]).to_frame()
        n = len(procs)
        mat = np.zeros((n, n))
        if len(et):
            i = np.searchsorted(procs, et["src_process"].to_numpy())
            j = np.searchsorted(procs, et["dst_process"].to_numpy())
            np.add.at(mat, (i, j), et[value].to_numpy(dtype=np.float64))
        labels = [str(p) for p in procs]
        return mat, labels, labels
    if not isinstance(data, pd.DataFrame):
        raise PassError(f"{who}: expected a PAG, a DataFrame or a 2-D array, got a {type(data).__name__}")
    raw_index = data.index
    df = data
    s = src or next((c for c in _SRC if c in df.columns), None)
    d = dst or next((c for c in _DST if c in df.columns), None)
    if s is None and d is None:  # a square matrix
        try:
            mat = df.to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise PassError(f"{who}: a matrix table must be all numbers; or name the sender/receiver columns") from None
        return mat, [str(x) for x in raw_index], [str(c) for c in df.columns]
    df = as_frame(df, who)
    require_columns(df, [s or "src", d or "dst", value], who)
    sv, dv = df[s].to_numpy(), df[d].to_numpy()
    labels_arr = np.unique(np.r_[sv, dv])
    mat = np.zeros((len(labels_arr), len(labels_arr)))
    np.add.at(mat, (np.searchsorted(labels_arr, sv), np.searchsorted(labels_arr, dv)), numeric(df, value, who))
    labels = [str(x) for x in labels_arr]
    return mat, labels, labels


@pass_(version="1", tags=("plot",))
def plot_comm_matrix(
    data: PAG | pd.DataFrame,
    *,
    value: str = "bytes",
    src: str | None = None,
    dst: str | None = None,
    kinds: list[str] | None = None,
    log: bool = False,
    cmap: str = "viridis",
    annotate: bool | None = None,
    title: str | None = None,
    width: float = 6.5,
    height: float = 5.5,
    path: str | None = None,
) -> Figure:
    """Heatmap of a process x process communication matrix (rows send, columns receive).

    Parameters
    ----------
    data : PAG or DataFrame
        A PAG (its point-to-point edges), a square matrix table (index:
        senders, columns: receivers; the output of a communication-matrix
        analysis) or a long table with sender, receiver and value columns.
    value : str
        What to show: for a PAG ``"bytes"``, ``"count"``, ``"time"`` or
        ``"wait"``; for a long table, the value column.
    src, dst : str, optional
        Sender and receiver columns of a long table (default: the first of
        src/sender/send_process/src_process/... and dst/receiver/recv_process/...).
    kinds : list of str, optional
        Edge kinds to count for a PAG (default ``["p2p"]``; add ``"collective"``).
    log : bool
        Logarithmic colour scale (empty cells are left blank).
    cmap : str
        Matplotlib colormap.
    annotate : bool, optional
        Write the value in each cell (default: when there are at most 16 processes).
    title : str, optional
        Figure title.
    width, height : float
        Figure size in inches.
    path : str, optional
        Save the figure there.

    Returns
    -------
    matplotlib.figure.Figure
        Two axes: the heatmap (an image whose array is the matrix) and its colorbar.
    """
    who = "plot_comm_matrix"
    mat, rows, cols = comm_matrix_array(data, value=value, src=src, dst=dst, kinds=kinds, who=who)
    unit = guess_unit(value)
    fig = new_figure(width, height)
    ax = fig.add_subplot()
    import matplotlib
    from matplotlib.colors import LogNorm, Normalize

    cm = matplotlib.colormaps[cmap].with_extremes(bad="white")
    norm: Any
    shown = mat
    if log:
        pos = mat[mat > 0]
        if not len(pos):
            raise PassError(f"{who}: nothing was communicated; a log colour scale needs positive values")
        lo, hi = float(pos.min()), float(pos.max())
        norm = LogNorm(vmin=lo if lo < hi else hi / 10, vmax=hi)  # one distinct value: show it at the top
        shown = np.ma.masked_less_equal(mat, 0)
    else:
        norm = Normalize(vmin=0.0, vmax=float(mat.max()) if mat.size and mat.max() > 0 else 1.0)
    im = ax.imshow(shown, cmap=cm, norm=norm, interpolation="nearest", aspect="auto")
    cb = fig.colorbar(im, ax=ax)
    cb.set_label(value)  # the ticks carry the unit, as the cells do (2.00 KiB, 12.3 ms)
    if unit in ("bytes", "s", "count"):
        cb.ax.yaxis.set_major_formatter(value_formatter(unit))
        if unit == "bytes" and not log and norm.vmax:  # ticks at round numbers of KiB/MiB, not of 1000 bytes
            from matplotlib.ticker import FixedLocator, MaxNLocator

            scale = 1024.0 ** max(0, int(np.floor(np.log(max(norm.vmax, 1.0)) / np.log(1024))))
            ticks = MaxNLocator(6, steps=[1, 2, 2.5, 4, 5, 8, 10]).tick_values(0, norm.vmax / scale) * scale
            cb.ax.yaxis.set_major_locator(FixedLocator(ticks[ticks <= norm.vmax * 1.0001]))
    ax.set_xlabel("receiver")
    ax.set_ylabel("sender")
    step = max(1, int(np.ceil(max(len(rows), len(cols)) / 32)))
    ax.set_xticks(np.arange(0, len(cols), step), cols[::step])
    ax.set_yticks(np.arange(0, len(rows), step), rows[::step])
    if annotate is None:
        annotate = max(len(rows), len(cols)) <= 16
    if annotate:
        lim = norm.vmax if norm.vmax is not None else 1.0
        for i in range(mat.shape[0]):
            for j in range(mat.shape[1]):
                if mat[i, j]:
                    dark = norm(mat[i, j]) < 0.6 if lim else True
                    ax.text(
                        j,
                        i,
                        format_value(mat[i, j], unit),
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if dark else "black",
                    )
    ax.set_title(title or f"communication matrix ({value})")
    fig.tight_layout()
    save_figure(fig, path)
    return fig
