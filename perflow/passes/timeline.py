"""Per-process timelines of a trace, with wait states, the critical path and messages overlaid.

Each location (process, or process.thread) is a row; region instances are
bars coloured by kind (computation, p2p, collective, sync, wait, io, other
MPI) or by region. Nested instances are painted over their parents, so what
shows at any moment is the innermost region.

Large traces stay fast: above ``max_intervals`` instances in the time window
the timeline is a *summary timeline* built from the binned summaries of
:mod:`perflow.passes._binned`: the window is cut into ``bins`` time bins, the
exclusive time of every category in every (row, bin) is computed in numpy,
and each row's band stacks the shares of *all* categories in each bin (an
image, drawn in constant time whatever the trace size). A strip above the
rows shows, per bin, how many processes are in each category (Vampir's
summary timeline). Wait states and the critical path follow the same rule:
drawn one by one when few are in the window, binned otherwise (the share of
each bin spent waiting, the row the path is on at each bin).
``reduce="sample"`` instead draws only the ``max_intervals`` longest instances.

>>> fig = plot_timeline(pag, waits, critical, messages=True, start=0.5, end=0.6)   # doctest: +SKIP
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, pass_
from perflow.sdk.figures import Figure, axis_scale, layout_free, new_figure, save_figure
from perflow.sdk.io import in_flow_run
from perflow.sdk.render import numeric, require_columns

from ._binned import (
    TimelineData,
    aggregate_bins,
    data_key,
    interval_categories,
    path_rows,
    path_runs,
    share_data,
    share_pixels,
    span_cover,
    timeline_data,
)

__all__ = ["plot_timeline", "interval_categories", "aggregate_bins"]

#: Wait-state colour (hatched boxes, or the binned overlay).
WAIT_RGBA = (0.85, 0.1, 0.1)


def _rects(row: np.ndarray, x0: np.ndarray, x1: np.ndarray, h: float) -> np.ndarray:
    y0, y1 = row - h / 2, row + h / 2
    return np.stack([np.c_[x0, y0], np.c_[x0, y1], np.c_[x1, y1], np.c_[x1, y0]], axis=1)


def overlay_table(df: pd.DataFrame, who: str, what: str, start: str = "start", end: str = "end") -> pd.DataFrame:
    """``process``, ``thread``, ``start``, ``end`` of a wait-state or path table (thread 0 when absent)."""
    require_columns(df, ["process", start, end], f"{who} ({what})")
    thread = df["thread"].to_numpy(np.int64) if "thread" in df.columns else np.zeros(len(df), np.int64)
    return pd.DataFrame(
        {
            "process": df["process"].to_numpy(np.int64),
            "thread": thread,
            "start": numeric(df, start, who),
            "end": numeric(df, end, who),
        }
    )


def _scaled_tick(x: float, _pos: object, *, factor: float) -> str:
    """Tick label of a time axis shown in a scaled unit (a module-level function: figures stay picklable)."""
    return f"{x * factor:g}"


def _band_image(shares: np.ndarray, rgba: np.ndarray, n_rows: int) -> np.ndarray:
    """RGBA pixels of the rows' bands: each bin's column stacks every category's share; a gap between rows."""
    sub = int(np.clip(600 // max(n_rows, 1), 2, 12))
    gap = 1 if sub >= 5 else 0
    idx = share_pixels(shares, sub - gap)
    if gap:
        idx = idx.reshape(n_rows, sub - gap, -1)
        idx = np.concatenate([np.full((n_rows, gap, idx.shape[2]), rgba.shape[0] - 1, np.int16), idx], axis=1)
        idx = idx.reshape(n_rows * sub, -1)
    return rgba.astype(np.float32)[idx]


def _draw_exact(ax: Any, pag: PAG, td: TimelineData, sel: np.ndarray, t0: float, t1: float, rgba: np.ndarray) -> int:
    depth = pag.vertex_table["depth"].to_numpy()[td.vertex[sel]]
    sel = sel[np.lexsort((depth, td.row[sel]))]  # per row, parents first so children paint over them
    b_row, b_c = td.row[sel], td.cat[sel]
    b_x0, b_x1 = np.maximum(td.enter[sel], t0), np.minimum(td.leave[sel], t1)
    cuts = np.searchsorted(b_row, np.arange(td.n_rows + 1))
    for r in range(td.n_rows):
        s = slice(cuts[r], cuts[r + 1])
        x0, x1 = b_x0[s], b_x1[s]
        ax.broken_barh(np.c_[x0, x1 - x0], (r - 0.4, 0.8), facecolors=rgba[b_c[s]], edgecolor="none", linewidth=0)
    return len(sel)


def _draw_summary(
    ax: Any, sax: Any, td: TimelineData, sel: np.ndarray, t0: float, t1: float, bins: int, rgba: np.ndarray
) -> tuple[int, np.ndarray]:
    shares = td.shares(t0, t1, bins, sel)
    palette = np.vstack([rgba, [1.0, 1.0, 1.0, 0.0]])  # the last entry: idle (transparent)
    img = _band_image(shares, palette, td.n_rows)
    layout_free(  # drawn once when saved (not also when measured for bbox_inches="tight")
        ax.imshow(
            img,
            extent=(t0, t1, td.n_rows - 0.5, -0.5),
            aspect="auto",
            interpolation="nearest",
            origin="upper",
            zorder=1,
        )
    )
    if sax is not None:
        centre = t0 + (np.arange(bins) + 0.5) * (t1 - t0) / bins
        sax.stackplot(centre, shares.sum(axis=0).T, colors=rgba, linewidth=0)
        sax.set_ylim(0, td.n_rows)
        sax.set_ylabel("processes", fontsize="small")
        sax.tick_params(labelbottom=False, labelsize="small")
        sax.set_title("summary: processes per category")
    return int((shares.sum(axis=2) > 1e-9).sum()), shares


def _draw_waits(ax: Any, ws: pd.DataFrame, td: TimelineData, t0: float, t1: float, bins: int, cap: int) -> Any:
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    wr = td.rows_of(ws["process"].to_numpy(), ws["thread"].to_numpy())
    s_, e_ = ws["start"].to_numpy(), ws["end"].to_numpy()
    ok = (wr >= 0) & (e_ > t0) & (s_ < t1)
    if ok.sum() <= cap:
        pc = PolyCollection(
            _rects(wr[ok], np.maximum(s_[ok], t0), np.minimum(e_[ok], t1), 0.8),
            facecolors=(*WAIT_RGBA, 0.25),
            edgecolors="#b00000",
            hatch="////",
            linewidths=0.8,
            label="wait states",
            zorder=3,
        )
        ax.add_collection(pc)
        return pc
    cover = span_cover(wr[ok], s_[ok], e_[ok], n_rows=td.n_rows, t0=t0, t1=t1, bins=bins)
    # a strip along the bottom quarter of each row's band: red, as opaque as the bin is spent waiting
    over = np.zeros((td.n_rows, 4, bins, 4), np.float32)
    over[:, 3, :, :3] = WAIT_RGBA
    over[:, 3, :, 3] = 0.9 * cover
    layout_free(
        ax.imshow(
            over.reshape(td.n_rows * 4, bins, 4),
            extent=(t0, t1, td.n_rows - 0.5, -0.5),
            aspect="auto",
            interpolation="nearest",
            zorder=3,
        )
    )
    return Patch(facecolor=(*WAIT_RGBA, 0.6), edgecolor="#b00000", label="wait states")


def _draw_path(ax: Any, cp: pd.DataFrame, td: TimelineData, t0: float, t1: float, bins: int, cap: int) -> Any:
    from matplotlib.collections import LineCollection

    cr = td.rows_of(cp["process"].to_numpy(), cp["thread"].to_numpy()).astype(np.float64)
    cr[cr < 0] = np.nan
    s_, e_ = cp["start"].to_numpy(), cp["end"].to_numpy()
    if ((e_ > t0) & (s_ < t1)).sum() <= cap:
        segs = [np.c_[s_, cr, e_, cr]]
        if len(cp) > 1:
            jump = cr[1:] != cr[:-1]
            segs.append(np.c_[e_[:-1], cr[:-1], s_[1:], cr[1:]][jump])
        allseg = np.concatenate(segs).reshape(-1, 2, 2)
        allseg = allseg[np.isfinite(allseg).all(axis=(1, 2))]
        lc = LineCollection(allseg, colors="black", linewidths=3, label="critical path", zorder=4)
        ax.add_collection(lc)
        return lc
    # zoomed out: a dash on the row the path is on in each bin (runs merged), no jumps
    ok = np.isfinite(cr)
    rows = path_rows(cr[ok], s_[ok], e_[ok], t0=t0, t1=t1, bins=bins)
    x0, x1, r = path_runs(rows, t0, t1)
    segs = np.stack([np.c_[x0, r], np.c_[x1, r]], axis=1)
    lc = LineCollection(segs, colors="black", linewidths=2.5, label="critical path", zorder=4)
    ax.add_collection(lc)
    return lc


def _draw_messages(ax: Any, pag: PAG, td: TimelineData, t0: float, t1: float, cap: int) -> Any:
    m = pag.trace.messages  # type: ignore[union-attr]
    sr = td.rows_of(m["send_process"].to_numpy(), m["send_thread"].to_numpy())
    rr = td.rows_of(m["recv_process"].to_numpy(), m["recv_thread"].to_numpy())
    st, rt = m["send_time"].to_numpy(), m["recv_time"].to_numpy()
    ok = np.flatnonzero((sr >= 0) & (rr >= 0) & (rt > t0) & (st < t1))
    if len(ok) > cap:
        ok = ok[np.unique(np.linspace(0, len(ok) - 1, cap).round().astype(np.int64))]
    return ax.quiver(
        st[ok],
        sr[ok],
        rt[ok] - st[ok],
        rr[ok] - sr[ok],
        angles="xy",
        scale_units="xy",
        scale=1,
        width=0.0015,
        headwidth=5,
        headlength=6,
        color="#333333",
        alpha=0.7,
        zorder=5,
        label="messages",
    )


@pass_(version="2", tags=("plot",))
def plot_timeline(
    pag: PAG,
    wait_states: pd.DataFrame | None = None,
    critical_path: pd.DataFrame | None = None,
    *,
    start: float | None = None,
    end: float | None = None,
    processes: list[int] | None = None,
    color_by: str = "kind",
    top_regions: int = 10,
    max_intervals: int = 20000,
    max_overlays: int = 2000,
    reduce: str = "aggregate",
    bins: int = 1500,
    summary: bool = True,
    messages: bool = False,
    max_messages: int = 2000,
    title: str | None = None,
    width: float = 12.0,
    height: float | None = None,
    path: str | None = None,
) -> Figure:
    """A timeline per process (row) of a trace's region instances, with optional overlays.

    Parameters
    ----------
    pag : PAG
        A trace-backed PAG (``pag.trace.intervals``).
    wait_states : DataFrame, optional
        Wait states to overlay in red: columns ``process``, ``start``, ``end``
        (``thread``, ``kind``, ``amount`` optional). Hatched boxes when at most
        ``max_overlays`` are in the window, else the share of each bin spent waiting.
    critical_path : DataFrame, optional
        Critical-path segments, drawn as a thick black line through the rows
        (with jumps between processes): columns ``process``, ``start``, ``end``
        (``thread`` optional), in path order or sorted by ``start``. Above
        ``max_overlays`` segments in the window, a dash per run of bins on the
        same row, without the jumps.
    start, end : float, optional
        Time window in seconds (default: the whole trace).
    processes : list of int, optional
        Processes to show (default: all).
    color_by : str
        ``"kind"`` (computation, p2p, collective, sync, wait, io, mpi) or ``"region"``.
    top_regions : int
        With ``color_by="region"``, the regions with the most exclusive time get
        their own colour; the rest are ``other``.
    max_intervals : int
        Above this many instances in the window, summarise or sample (see ``reduce``).
    max_overlays : int
        Above this many wait states (critical-path segments) in the window, they are binned too.
    reduce : str
        ``"aggregate"`` (each row's band stacks the share of every category per time bin)
        or ``"sample"`` (the longest instances).
    bins : int
        Time bins of the summary.
    summary : bool
        With ``reduce="aggregate"``, add a strip above the rows with the number of
        processes in each category per bin.
    messages : bool
        Draw point-to-point messages as arrows from send to receive completion.
    max_messages : int
        At most this many message arrows (evenly subsampled).
    title : str, optional
        Figure title.
    width, height : float
        Figure size in inches (height default: from the number of rows).
    path : str, optional
        Save the figure there.

    Returns
    -------
    matplotlib.figure.Figure
        The first axes holds the timeline (x data in seconds): exact and
        sampled modes draw one ``broken_barh`` collection per row, the
        aggregated mode one RGBA image; then the wait states (a PolyCollection
        or an image, legend "wait states"), the critical path (a LineCollection
        or a line) and a quiver labelled ``"messages"`` when requested.
        ``fig.perflow_timeline`` records ``mode`` ("exact", "aggregated" or
        "sampled"), ``intervals`` (instances in the window) and ``bars``
        (bars drawn, or non-empty (row, bin) cells when aggregated).
    """
    who = "plot_timeline"
    if reduce not in ("aggregate", "sample"):
        raise PassError(f"{who}: reduce must be 'aggregate' or 'sample', not {reduce!r}")
    if pag.trace is None or not len(pag.trace.intervals):
        raise PassError(f"{who}: the PAG has no trace instances (pag.trace is empty); a timeline needs a trace")
    if bins < 1:
        raise PassError(f"{who}: bins must be at least 1, not {bins}")
    t_lo, t_hi = pag.trace.span
    t0 = t_lo if start is None else float(start)
    t1 = t_hi if end is None else float(end)
    if not t1 > t0:
        raise PassError(f"{who}: the time window is empty (start={t0}, end={t1})")
    ws = overlay_table(wait_states, who, "wait_states") if wait_states is not None else None
    cp = overlay_table(critical_path, who, "critical_path") if critical_path is not None else None
    td = timeline_data(pag, processes=processes, color_by=color_by, top_regions=top_regions, who=who)
    share = in_flow_run()  # a flow run: its page may draw the same columns
    from matplotlib.colors import to_rgba_array
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    full = t0 <= td.span[0] and t1 >= td.span[1]
    sel = np.arange(len(td.row)) if full else td.in_window(t0, t1)
    n_in = len(sel)
    mode = "exact" if n_in <= max_intervals else ("aggregated" if reduce == "aggregate" else "sampled")
    n_rows = td.n_rows
    rgba = to_rgba_array(td.colors)
    with_strip = mode == "aggregated" and summary
    fig = new_figure(width, height or max(2.5, 0.3 * n_rows + 1.6) + (1.2 if with_strip else 0.0))
    if with_strip:
        fig.set_layout_engine("constrained")
        gs = fig.add_gridspec(2, 1, height_ratios=[1.0, max(2.0, 0.3 * n_rows + 0.6)])
        ax = fig.add_subplot(gs[1])
        sax = fig.add_subplot(gs[0], sharex=ax)
    else:
        ax, sax = fig.add_subplot(), None
    if mode == "aggregated":
        bars, _ = _draw_summary(ax, sax, td, sel, t0, t1, bins, rgba)
    else:
        if mode == "sampled":
            dur = np.minimum(td.leave[sel], t1) - np.maximum(td.enter[sel], t0)
            sel = sel[np.sort(np.argsort(-dur, kind="stable")[:max_intervals])]
        bars = _draw_exact(ax, pag, td, sel, t0, t1, rgba)
    handles: list[Any] = [Patch(facecolor=c, label=n) for n, c in zip(td.names, td.colors)]
    if ws is not None:
        handles.append(_draw_waits(ax, ws, td, t0, t1, bins, max_overlays))
    if cp is not None:
        handles.append(_draw_path(ax, cp, td, t0, t1, bins, max_overlays))
    if messages:
        handles.append(_draw_messages(ax, pag, td, t0, t1, max_messages))
    f, unit = axis_scale(np.array([t1 - t0]), "s")
    ax.xaxis.set_major_formatter(FuncFormatter(functools.partial(_scaled_tick, factor=f)))
    ax.set_xlim(t0, t1)
    ax.set_ylim(n_rows - 0.5, -0.5)
    labels = td.labels()
    step = max(1, int(np.ceil(n_rows / 40)))
    ax.set_yticks(np.arange(0, n_rows, step), labels[::step])
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("process")
    suffix = {"aggregated": " (aggregated)", "sampled": f" (longest {max_intervals} instances)"}.get(mode, "")
    (fig.suptitle if with_strip else ax.set_title)((title or "timeline") + suffix)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    if not with_strip:
        fig.tight_layout()
    fig.perflow_timeline = {"mode": mode, "intervals": int(n_in), "bars": int(bars)}  # type: ignore[attr-defined]
    if share:
        share_data(fig, pag, td, data_key(processes, color_by, top_regions))
    save_figure(fig, path)
    return fig
