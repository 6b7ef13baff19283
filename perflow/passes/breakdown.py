"""Time breakdown: computation, point-to-point, collective, synchronisation, I/O and waiting.

Each vertex falls in one category (see :func:`perflow.sdk.profile.categories`):
MPI calls by :func:`perflow.kinds.mpi_class` of their name (point-to-point
and request completion are ``p2p``, data collectives ``collective``, barriers
and MPI_Init/Finalize ``sync``, MPI-IO ``io``, other MPI calls
``mpi``), other I/O vertices ``io``, work a GPU did (kernels, copies) ``gpu``,
explicit idle regions (a GPU stream's, a Charm++ PE's) ``idle``, everything
else ``computation``.
The breakdown sums an exclusive metric (by default ``time_exc``) per
category, so the categories of a process add up to its total time.

For a trace, the time a call spends waiting is moved out of its category
into ``wait`` (taken from the time of the thread that waited): the idle waiting time charged to each call by
:func:`perflow.passes.waitstates.waiting_time` (Late Sender, Late Receiver
and collective waits from the wait-state instance table, the union of a
call's waits, so never more than the call's duration). An MPI call whose
time lies partly in sampled callees (the MPI library's functions) has its
wait taken from its subtree's time on that process, in proportion.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, WaitSettings, pass_, settings_keywords
from perflow.sdk.profile import CATEGORIES, Grouped, as_pag, categories, grouped, resolve_metric, vertex_columns
from perflow.sdk.render import declare_aggregates

from ._waittime import charged_per_process
from .waitstates import waiting_time

__all__ = ["breakdown", "waiting_time", "BREAKDOWN_BY"]

BREAKDOWN_BY = ("process", "vertex", "vertex_process", "total")


@pass_(version="5", tags=("profile", "trace", "breakdown"))
@settings_keywords(WaitSettings, "wait_settings")
def breakdown(
    pag: PAG,
    *,
    metric: str = "time_exc",
    by: str = "process",
    waiting: bool = True,
    wide: bool = False,
    wait_settings: WaitSettings,
) -> pd.DataFrame:
    """Split a metric per process (or vertex) into computation, MPI classes, I/O and waiting time.

    ``value[g, c] = sum of the metric over the (vertex, process) pairs of
    group g whose vertex is in category c``, with waiting time moved from
    the waiting calls' categories to ``wait`` for traces (see the module
    docstring); ``share = value / sum over the categories of g``.

    Parameters
    ----------
    pag : PAG
    metric : str
        An exclusive metric (default ``time_exc``), so categories add up.
    by : {"process", "vertex", "vertex_process", "total"}
        Group rows per process (a stacked bar per rank), per vertex, per
        (vertex, process), or one group for the whole run.
    waiting : bool
        For traces and time metrics: separate waiting time (the idle wait
        states: Late Sender, Late Receiver, collective, thread and RMA waits)
        into the ``wait`` category.
    wide : bool
        One row per group with one column per category (plus ``total``)
        instead of the tidy long form.

    Returns
    -------
    pandas.DataFrame
        Tidy: the group columns (``process``; or ``vertex``, ``name``,
        ``call_path``; or both; none for ``total``), then ``category``,
        ``value`` and ``share``. Per process and in total every category of
        :data:`perflow.sdk.profile.CATEGORIES` has a row (maybe 0); per vertex only
        non-zero ones. Wide: the group columns, one column per category, ``total``.
    """
    pag = as_pag(pag)
    if by not in BREAKDOWN_BY:
        raise PassError(f"by must be one of {', '.join(BREAKDOWN_BY)}, not {by!r}")
    col = resolve_metric(pag, metric)
    info = pag.metric_info[col]
    if info.mode == "inclusive":
        raise PassError(f"breakdown needs an exclusive metric; {col!r} is inclusive (use its *_exc variant)")
    g = grouped(pag, col, "process")
    cat_names = list(CATEGORIES)
    cat_code = {c: i for i, c in enumerate(cat_names)}
    vcat = np.array([cat_code[c] for c in categories(pag)], dtype=np.int64) if pag.n_vertices else np.zeros(0, np.int64)
    x = g.value.copy()
    rows_v, rows_g = g.vertex, g.group
    rcat = vcat[rows_v]
    wait = np.zeros(len(x))
    if waiting and pag.trace is not None and info.unit == "s":
        wait = charged_per_process(pag, g, col, wait_settings)
    x = x - wait
    nc = len(cat_names)
    wcode = cat_code["wait"]
    floor = 1e-9 * float(np.abs(g.value).max()) if len(g.value) else 0.0
    if by == "vertex_process":
        return _with_units(_per_row(pag, g, col, x, wait, rcat, wcode, cat_names, floor, wide), info.unit)
    if by == "process":
        grp, n_grp = rows_g, g.n_groups
    elif by == "total":
        grp, n_grp = np.zeros(len(x), dtype=np.int64), 1
    else:
        grp, n_grp = rows_v, pag.n_vertices
    acc = np.bincount(grp * nc + rcat, weights=x, minlength=n_grp * nc)
    acc += np.bincount(grp * nc + wcode, weights=wait, minlength=n_grp * nc)
    mat = acc.reshape(n_grp, nc)
    if by == "vertex":
        # rounding residue of exclusive times (1e-9 of the largest value) is no time
        mat[np.abs(mat) <= floor] = 0.0
        present = np.flatnonzero(np.any(mat != 0, axis=1))
    else:
        present = np.arange(n_grp)
    tot = mat.sum(axis=1)
    keys = _group_columns(pag, g, by, present, rows_v, rows_g)
    if wide:
        df = keys.copy()
        for i, c in enumerate(cat_names):
            df[c] = mat[present, i]
        df["total"] = tot[present]
        return _with_units(df.reset_index(drop=True), info.unit, pag, by)
    sub = mat[present]
    if by == "vertex":
        gi, ci = np.nonzero(sub)
    else:
        gi = np.repeat(np.arange(len(present)), nc)
        ci = np.tile(np.arange(nc), len(present))
    return _with_units(
        _long(keys.iloc[gi].reset_index(drop=True), ci, sub[gi, ci], tot[present][gi], cat_names, col, by),
        info.unit,
        pag,
        by,
    )


def _with_units(df: pd.DataFrame, unit: str, pag: PAG | None = None, by: str = "process") -> pd.DataFrame:
    """Record the metric's unit for the value columns, and how they aggregate (report passes show both)."""
    cols = [*CATEGORIES, "total", "value"]
    df.attrs["units"] = {c: unit for c in cols if c in df.columns}
    if pag is not None and by in ("vertex", "total"):  # summed over processes (per process: over its threads)
        declare_aggregates(df, pag, [c for c in cols if c in df.columns])
    return df


def _long(
    df: pd.DataFrame, ci: np.ndarray, value: np.ndarray, total: np.ndarray, cat_names: list[str], col: str, by: str
) -> pd.DataFrame:
    df["category"] = pd.Categorical.from_codes(ci, categories=cat_names)
    df["value"] = value
    df["share"] = np.where(total != 0, value / np.where(total != 0, total, 1.0), 0.0)
    df.attrs.update({"metric": col, "by": by})
    return df


def _per_row(
    pag: PAG,
    g: Grouped,
    col: str,
    x: np.ndarray,
    wait: np.ndarray,
    rcat: np.ndarray,
    wcode: int,
    cat_names: list[str],
    floor: float,
    wide: bool,
) -> pd.DataFrame:
    """Breakdown per (vertex, process): each row has at most two categories, its own and ``wait``."""
    x = np.where(np.abs(x) <= floor, 0.0, x)
    wait = np.where(wait <= floor, 0.0, wait)
    tot = x + wait
    present = np.flatnonzero((x != 0) | (wait != 0))
    keys = _group_columns(pag, g, "vertex_process", present, g.vertex, g.group)
    if wide:
        df = keys.copy()
        xp, wp, cp = x[present], wait[present], rcat[present]
        for i, c in enumerate(cat_names):
            df[c] = np.where(cp == i, xp, 0.0) + (wp if i == wcode else 0.0)
        df["total"] = tot[present]
        return df
    own = x[present] != 0
    wt = wait[present] != 0
    gi = np.r_[np.flatnonzero(own), np.flatnonzero(wt)]
    ci = np.r_[rcat[present][own], np.full(int(wt.sum()), wcode)]
    val = np.r_[x[present][own], wait[present][wt]]
    order = np.lexsort((ci, gi))
    gi, ci, val = gi[order], ci[order], val[order]
    return _long(keys.iloc[gi].reset_index(drop=True), ci, val, tot[present][gi], cat_names, col, "vertex_process")


def _group_columns(
    pag: PAG, g: Grouped, by: str, present: np.ndarray, rows_v: np.ndarray, rows_g: np.ndarray
) -> pd.DataFrame:
    if by == "process":
        return pd.DataFrame({"process": g.process[present]})
    if by == "total":
        return pd.DataFrame(index=np.arange(len(present)))
    if by == "vertex":
        return vertex_columns(pag, present).drop(columns="kind")
    df = vertex_columns(pag, rows_v[present], categorical=True).drop(columns="kind")
    df["process"] = g.process[rows_g[present]]
    return df
