"""Per-process timelines of a trace, with wait states, the critical path and messages overlaid.

Each location (process, or process.thread) is a row; region instances are
bars coloured by kind (computation, p2p, collective, sync, wait, io, other
MPI) or by region. Nested instances are painted over their parents, so what
shows at any moment is the innermost region.

Large traces stay fast: above ``max_intervals`` instances in the time window
the timeline is *aggregated*: the window is cut into bins per row, the
exclusive time of each category in each bin is summed (vectorised: each
instance adds its overlap to its own category and removes it from its
parent's), and each bin shows its dominant category, runs of equal bins
merged into one bar. ``reduce="sample"`` instead draws only the
``max_intervals`` longest instances.

>>> fig = plot_timeline(pag, waits, critical, messages=True, start=0.5, end=0.6)   # doctest: +SKIP
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_rgba_array
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from perflow.errors import PassError
from perflow.flow.registry import pass_
from perflow.kinds import MPIClass, mpi_class
from perflow.pag.pag import PAG

from ._figure import CATEGORIES, CATEGORY_COLORS, axis_scale, new_figure, palette, save_figure
from ._render import numeric, require_columns

__all__ = ["plot_timeline", "interval_categories", "aggregate_bins"]

_MPI_CAT = {
    MPIClass.P2P: "p2p",
    MPIClass.COLLECTIVE: "collective",
    MPIClass.SYNC: "sync",
    MPIClass.WAIT: "wait",
    MPIClass.IO: "io",
}


def interval_categories(pag: PAG, color_by: str, top_regions: int) -> tuple[np.ndarray, list[str], list[str]]:
    """Category code per *vertex*, the category names and their colours.

    ``color_by="kind"``: computation / p2p / collective / sync / wait / io /
    mpi (other MPI calls). ``color_by="region"``: the ``top_regions`` names with
    the most exclusive time, the rest as ``other``.
    """
    vt = pag.vertex_table
    names = vt["name"].astype(str).to_numpy()
    if color_by == "kind":
        kinds = vt["kind"].astype(str).to_numpy()
        uniq, inv = np.unique(names, return_inverse=True)
        cat_of_name = []
        for n in uniq.tolist():
            c = mpi_class(n)
            cat_of_name.append("computation" if c is None else _MPI_CAT.get(c, "mpi"))
        cats = np.asarray(cat_of_name, dtype=object)[inv]
        cats = np.where((kinds == "io") & (cats == "computation"), "io", cats)
        present = [c for c in CATEGORIES if c in set(cats.tolist())]
        code = {c: i for i, c in enumerate(present)}
        return np.array([code[c] for c in cats], dtype=np.int64), present, [CATEGORY_COLORS[c] for c in present]
    if color_by == "region":
        tr = pag.trace
        iv = tr.intervals if tr is not None else None
        if iv is not None and len(iv):
            dur = (iv["leave"] - iv["enter"]).to_numpy()
            par = iv["parent"].to_numpy()
            exc = dur.copy()
            np.subtract.at(exc, par[par >= 0], dur[par >= 0])
            per_name = pd.Series(exc).groupby(names[iv["vertex"].to_numpy()]).sum()
        else:
            per_name = pd.Series(dtype=float)
        top = per_name.sort_values(ascending=False, kind="stable").index[:top_regions].tolist()
        labels = [*top, "other"]
        code = {n: i for i, n in enumerate(top)}
        vcode = np.array([code.get(n, len(top)) for n in names], dtype=np.int64)
        return vcode, labels, [*palette(len(top)), CATEGORY_COLORS["other"]]
    raise PassError(f"plot_timeline: color_by must be 'kind' or 'region', not {color_by!r}")


def aggregate_bins(
    row: np.ndarray,
    enter: np.ndarray,
    leave: np.ndarray,
    cat: np.ndarray,
    parent_cat: np.ndarray,
    *,
    n_rows: int,
    n_cats: int,
    t0: float,
    t1: float,
    bins: int,
) -> np.ndarray:
    """Exclusive time per (row, bin, category) of nested intervals clipped to [t0, t1).

    Each interval adds its overlap with each bin to its own category and
    subtracts it from its parent's category (``parent_cat`` -1: no parent).
    Returns an array of shape ``(n_rows, bins, n_cats)``.
    """
    w = (t1 - t0) / bins
    a = np.clip(enter, t0, t1)
    b = np.clip(leave, t0, t1)
    ia = np.minimum(((a - t0) / w).astype(np.int64), bins - 1)
    ib = np.minimum(((b - t0) / w).astype(np.int64), bins - 1)
    size = n_rows * bins * n_cats
    out = np.zeros(size)
    full = np.zeros(size)  # difference array over bins, for the fully covered bins
    for c, sign in ((cat, 1.0), (parent_cat, -1.0)):
        ok = c >= 0
        r, c, a_, b_, ia_, ib_ = row[ok], c[ok], a[ok], b[ok], ia[ok], ib[ok]
        base = r * bins * n_cats + c
        same = ia_ == ib_
        out += sign * np.bincount(base[same] + ia_[same] * n_cats, weights=b_[same] - a_[same], minlength=size)
        d = ~same
        first = t0 + (ia_[d] + 1) * w - a_[d]
        last = b_[d] - (t0 + ib_[d] * w)
        out += sign * np.bincount(base[d] + ia_[d] * n_cats, weights=first, minlength=size)
        out += sign * np.bincount(base[d] + ib_[d] * n_cats, weights=last, minlength=size)
        span = d & (ib_ > ia_ + 1)
        full += sign * w * np.bincount(base[span] + (ia_[span] + 1) * n_cats, minlength=size)
        full -= sign * w * np.bincount(base[span] + ib_[span] * n_cats, minlength=size)
    cover = np.cumsum(full.reshape(n_rows, bins, n_cats), axis=1)
    return out.reshape(n_rows, bins, n_cats) + cover


def _rows(pag: PAG, processes: list[int] | None) -> pd.DataFrame:
    iv = pag.trace.intervals  # type: ignore[union-attr]
    locs = iv[["process", "thread"]].drop_duplicates().sort_values(["process", "thread"]).reset_index(drop=True)
    if processes is not None:
        locs = locs[locs["process"].isin(list(processes))].reset_index(drop=True)
    return locs


def _row_of(locs: pd.DataFrame, process: np.ndarray, thread: np.ndarray) -> np.ndarray:
    key = pd.MultiIndex.from_arrays([locs["process"].to_numpy(np.int64), locs["thread"].to_numpy(np.int64)])
    q = pd.MultiIndex.from_arrays([np.asarray(process, np.int64), np.asarray(thread, np.int64)])
    return (
        pd.Series(np.arange(len(locs)), index=key).reindex(q).to_numpy(dtype=np.float64, na_value=-1).astype(np.int64)
    )


def _rects(row: np.ndarray, x0: np.ndarray, x1: np.ndarray, h: float) -> np.ndarray:
    y0, y1 = row - h / 2, row + h / 2
    return np.stack([np.c_[x0, y0], np.c_[x0, y1], np.c_[x1, y1], np.c_[x1, y0]], axis=1)


def _overlay_table(df: pd.DataFrame, who: str, what: str, start: str, end: str) -> pd.DataFrame:
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


@pass_(version="1", tags=("plot",))
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
    reduce: str = "aggregate",
    bins: int = 1500,
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
        Wait states to overlay as hatched red boxes: columns ``process``, ``start``,
        ``end`` (``thread``, ``kind``, ``amount`` optional).
    critical_path : DataFrame, optional
        Critical-path segments, drawn as a thick black line through the rows
        (with jumps between processes): columns ``process``, ``start``, ``end``
        (``thread`` optional), in path order or sorted by ``start``.
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
        Above this many instances in the window, aggregate or sample (see ``reduce``).
    reduce : str
        ``"aggregate"`` (dominant category per time bin) or ``"sample"`` (the longest instances).
    bins : int
        Time bins per row when aggregating (fewer with very many rows).
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
        One axes: one ``broken_barh`` collection per row (x data in seconds),
        then a PolyCollection labelled ``"wait states"``, a LineCollection
        labelled ``"critical path"`` and a quiver labelled ``"messages"`` when
        requested; ``fig.perflow_timeline`` records ``mode`` ("exact",
        "aggregated" or "sampled"), ``intervals`` (instances in the window)
        and ``bars`` (bars drawn).
    """
    who = "plot_timeline"
    if pag.trace is None or not len(pag.trace.intervals):
        raise PassError(f"{who}: the PAG has no trace instances (pag.trace is empty); a timeline needs a trace")
    if reduce not in ("aggregate", "sample"):
        raise PassError(f"{who}: reduce must be 'aggregate' or 'sample', not {reduce!r}")
    iv = pag.trace.intervals
    t_lo, t_hi = pag.trace.span
    t0 = t_lo if start is None else float(start)
    t1 = t_hi if end is None else float(end)
    if not t1 > t0:
        raise PassError(f"{who}: the time window is empty (start={t0}, end={t1})")
    locs = _rows(pag, processes)
    if not len(locs):
        raise PassError(f"{who}: none of the processes {processes} has trace data")
    vcat, cat_names, cat_colors = interval_categories(pag, color_by, top_regions)
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    sel = (leave > t0) & (enter < t1)
    row_all = _row_of(locs, iv["process"].to_numpy(), iv["thread"].to_numpy())
    sel &= row_all >= 0
    idx = np.flatnonzero(sel)
    vert = iv["vertex"].to_numpy()
    depth = pag.vertex_table["depth"].to_numpy()[vert[idx]]
    n_rows = len(locs)
    fig = new_figure(width, height or max(2.5, 0.3 * n_rows + 1.6))
    ax = fig.add_subplot()
    mode = "exact"
    if len(idx) > max_intervals and reduce == "aggregate":
        mode = "aggregated"
        nb = int(np.clip(max_intervals // max(n_rows, 1), min(50, bins), bins))
        par = iv["parent"].to_numpy()[idx]
        pcat = np.where(par >= 0, vcat[vert[np.maximum(par, 0)]], -1)
        cov = aggregate_bins(
            row_all[idx],
            enter[idx],
            leave[idx],
            vcat[vert[idx]],
            pcat,
            n_rows=n_rows,
            n_cats=len(cat_names),
            t0=t0,
            t1=t1,
            bins=nb,
        )
        dom = cov.argmax(axis=2)
        has = cov.max(axis=2) > 1e-12 * (t1 - t0)
        flat_c = np.where(has, dom, -1).ravel()
        br = np.r_[True, (flat_c[1:] != flat_c[:-1]) | (np.arange(1, flat_c.size) % nb == 0)]
        starts = np.flatnonzero(br)
        lens = np.diff(np.r_[starts, flat_c.size])
        keep = flat_c[starts] >= 0
        starts, lens = starts[keep], lens[keep]
        w = (t1 - t0) / nb
        b_row, b_c = starts // nb, flat_c[starts]
        b_x0, b_x1 = t0 + (starts % nb) * w, t0 + (starts % nb + lens) * w
    else:
        if len(idx) > max_intervals:
            mode = "sampled"
            dur = np.minimum(leave[idx], t1) - np.maximum(enter[idx], t0)
            idx = idx[np.sort(np.argsort(-dur, kind="stable")[:max_intervals])]
            depth = pag.vertex_table["depth"].to_numpy()[vert[idx]]
        order = np.lexsort((depth, row_all[idx]))  # per row, parents first so children paint over them
        idx = idx[order]
        b_row, b_c = row_all[idx], vcat[vert[idx]]
        b_x0, b_x1 = np.maximum(enter[idx], t0), np.minimum(leave[idx], t1)
    rgba = to_rgba_array(cat_colors)
    cuts = np.searchsorted(b_row, np.arange(n_rows + 1))  # bars are sorted by row
    for r in range(n_rows):
        s = slice(cuts[r], cuts[r + 1])
        x0, x1 = b_x0[s], b_x1[s]
        ax.broken_barh(np.c_[x0, x1 - x0], (r - 0.4, 0.8), facecolors=rgba[b_c[s]], edgecolor="none", linewidth=0)
    handles = [Patch(facecolor=c, label=n) for n, c in zip(cat_names, cat_colors)]
    if wait_states is not None:
        ws = _overlay_table(wait_states, who, "wait_states", "start", "end")
        wr = _row_of(locs, ws["process"].to_numpy(), ws["thread"].to_numpy())
        ok = (wr >= 0) & (ws["end"].to_numpy() > t0) & (ws["start"].to_numpy() < t1)
        pc = PolyCollection(
            _rects(wr[ok], np.maximum(ws["start"].to_numpy()[ok], t0), np.minimum(ws["end"].to_numpy()[ok], t1), 0.8),
            facecolors=(0.85, 0.1, 0.1, 0.25),
            edgecolors="#b00000",
            hatch="////",
            linewidths=0.8,
            label="wait states",
            zorder=3,
        )
        ax.add_collection(pc)
        handles.append(pc)
    if critical_path is not None:
        cp = _overlay_table(critical_path, who, "critical_path", "start", "end")
        cr = _row_of(locs, cp["process"].to_numpy(), cp["thread"].to_numpy()).astype(np.float64)
        cr[cr < 0] = np.nan
        s_, e_ = cp["start"].to_numpy(), cp["end"].to_numpy()
        segs = [np.c_[s_, cr, e_, cr]]
        if len(cp) > 1:
            jump = cr[1:] != cr[:-1]
            segs.append(np.c_[e_[:-1], cr[:-1], s_[1:], cr[1:]][jump])
        allseg = np.concatenate(segs).reshape(-1, 2, 2)
        allseg = allseg[np.isfinite(allseg).all(axis=(1, 2))]
        lc = LineCollection(allseg, colors="black", linewidths=3, label="critical path", zorder=4)
        ax.add_collection(lc)
        handles.append(lc)
    if messages:
        m = pag.trace.messages
        sr = _row_of(locs, m["send_process"].to_numpy(), m["send_thread"].to_numpy())
        rr = _row_of(locs, m["recv_process"].to_numpy(), m["recv_thread"].to_numpy())
        st, rt = m["send_time"].to_numpy(), m["recv_time"].to_numpy()
        ok = np.flatnonzero((sr >= 0) & (rr >= 0) & (rt > t0) & (st < t1))
        if len(ok) > max_messages:
            ok = ok[np.unique(np.linspace(0, len(ok) - 1, max_messages).round().astype(np.int64))]
        q = ax.quiver(
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
        handles.append(q)
    f, unit = axis_scale(np.array([t1 - t0]), "s")
    ax.xaxis.set_major_formatter(FuncFormatter(functools.partial(_scaled_tick, factor=f)))
    ax.set_xlim(t0, t1)
    ax.set_ylim(n_rows - 0.5, -0.5)
    threaded = (locs["thread"] != 0).any()
    labels = [f"{p}.{t}" if threaded else str(p) for p, t in zip(locs["process"], locs["thread"])]
    step = max(1, int(np.ceil(n_rows / 40)))
    ax.set_yticks(np.arange(0, n_rows, step), labels[::step])
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("process")
    suffix = {"aggregated": " (aggregated)", "sampled": f" (longest {max_intervals} instances)"}.get(mode, "")
    ax.set_title((title or "timeline") + suffix)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    fig.tight_layout()
    fig.perflow_timeline = {"mode": mode, "intervals": int(sel.sum()), "bars": int(len(b_x0))}  # type: ignore[attr-defined]
    save_figure(fig, path)
    return fig
