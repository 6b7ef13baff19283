"""Regions of interest of the POP metrics: a call path, a time window, or the span between MPI_Init and MPI_Finalize."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError
from perflow.sdk.profile import descendants_mask
from perflow.sdk.trace import VERTEX_SPANS, check_choice, require_trace

__all__ = ["region_vertices", "trace_window", "init_finalize_vertices", "inclusive_per_location", "SPANS"]

#: What the region of interest defaults to for traces.
SPANS = ("init_finalize", "run")
_INIT = ("mpi_init", "mpi_init_thread", "pmpi_init", "pmpi_init_thread")
_FINALIZE = ("mpi_finalize", "pmpi_finalize")


def region_vertices(pag: PAG, region: str, pass_name: str) -> np.ndarray:
    """The vertices a region of interest names: a call path (``main/solve``), else every vertex of that name.

    Vertices nested below another match are left out (their time is inside it).
    """
    cps = pag.call_paths().to_numpy().astype(str)
    hit = np.flatnonzero(cps == region)
    if not len(hit):
        hit = np.flatnonzero(pag.vertex_table["name"].astype(str).to_numpy() == region)
    if not len(hit):
        close = [c for c in cps if region in c][:5]
        hint = f"; call paths containing it: {', '.join(close)}" if close else ""
        raise PassError(f"pass {pass_name!r}: region={region!r} is neither a call path nor a vertex name{hint}")
    below = descendants_mask(pag.tree_index, hit)  # strictly below some hit
    return hit[~below[hit]]


def trace_window(
    pag: PAG,
    pass_name: str,
    *,
    region: str | None = None,
    window: Sequence[float] | None = None,
    span: str = "init_finalize",
) -> tuple[float, float, str]:
    """The region of interest of a trace as a time window ``(t0, t1, description)``."""
    trace = require_trace(pag, pass_name)
    if region is not None and window is not None:
        raise PassError(f"pass {pass_name!r}: give a region or a window, not both")
    t_start, t_end = trace.span  # (reduced where the trace lives; its intervals are read only when needed)
    if window is not None:
        if len(window) != 2 or not float(window[1]) > float(window[0]):
            raise PassError(f"pass {pass_name!r}: window must be [start, end] with start < end, got {list(window)!r}")
        t0, t1 = max(float(window[0]), t_start), min(float(window[1]), t_end)
        if not t1 > t0:
            raise PassError(
                f"pass {pass_name!r}: window {list(window)!r} does not overlap the trace ({t_start:g} to {t_end:g} s)"
            )
        return t0, t1, f"time window [{t0:.9g}, {t1:.9g}] s"
    if region is not None:
        sp = pag.analyses.get(VERTEX_SPANS).iloc[region_vertices(pag, region, pass_name)]
        if not sp["count"].to_numpy().any():
            raise PassError(f"pass {pass_name!r}: region={region!r} has no instances in the trace")
        t0, t1 = float(np.nanmin(sp["first_enter"].to_numpy())), float(np.nanmax(sp["last_leave"].to_numpy()))
        return t0, t1, f"instances of {region} [{t0:.9g}, {t1:.9g}] s"
    check_choice(pass_name, "span", span, SPANS)
    if span == "run":
        return t_start, t_end, f"whole run [{t_start:.9g}, {t_end:.9g}] s"
    names = pag.vertex_table["name"].astype(str).str.lower().to_numpy()
    sp = pag.analyses.get(VERTEX_SPANS)  # per vertex: first and last enter and leave of its instances
    has = sp["count"].to_numpy() > 0
    init, fin = has & np.isin(names, _INIT), has & np.isin(names, _FINALIZE)
    t0 = float(sp["first_leave"].to_numpy()[init].min()) if init.any() else t_start
    t1 = float(sp["last_enter"].to_numpy()[fin].max()) if fin.any() else t_end
    if not t1 > t0:  # MPI_Finalize before MPI_Init ended: nothing between them
        return t_start, t_end, f"whole run [{t_start:.9g}, {t_end:.9g}] s (nothing between MPI_Init and MPI_Finalize)"
    what = " and ".join(
        w for w, ok in (("the end of MPI_Init", init.any()), ("the start of MPI_Finalize", fin.any())) if ok
    )
    desc = f"between {what} [{t0:.9g}, {t1:.9g}] s" if what else f"whole run [{t0:.9g}, {t1:.9g}] s"
    return t0, t1, desc


def init_finalize_vertices(pag: PAG) -> np.ndarray:
    """The outermost MPI_Init(_thread) and MPI_Finalize vertices (their PMPI forms too)."""
    names = pag.vertex_table["name"].astype(str).str.lower().to_numpy()
    hit = np.flatnonzero(np.isin(names, _INIT + _FINALIZE))
    return hit[~descendants_mask(pag.tree_index, hit)[hit]] if len(hit) else hit


def inclusive_per_location(pag: PAG, vertices: np.ndarray) -> pd.Series:
    """Inclusive time of ``vertices`` summed per (process, thread)."""
    m = pag.metrics
    sel = np.isin(np.asarray(m.index.codes[0]), vertices)
    s = pd.Series(m["time_inc"].to_numpy(dtype=np.float64)[sel], index=m.index[sel])
    return s.groupby(level=["process", "thread"]).sum()
