"""Differential analysis: two runs aligned by call path, largest changes first.

Two PAGs (two runs, two versions of the code, two scales, two inputs) are
aligned by the call path of their vertices (``pag.call_paths()``, e.g.
``"main/solve/MPI_Allreduce"``). For every call path present in either run,
with ``a`` and ``b`` the metric aggregated across processes in the first and
second run (0 where the path is absent)::

    diff       = b - a
    ratio      = b / a            (inf if a == 0 < b; nan if both are 0)
    rel_change = (b - a) / a      (same conventions)

``status`` says where the path exists: ``both``, ``only_a`` or ``only_b``.
With ``normalize=True``, ``a`` and ``b`` are first divided by their run's
total (the sum over all vertices for an exclusive metric, over the roots for
an inclusive one), so the comparison is of shares rather than of absolute
values (useful between runs of different length). Call paths that occur on
several vertices of one PAG are summed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, pass_
from perflow.sdk.profile import align, as_pag, resolve_metric

__all__ = ["differential", "difference", "DIFF_SORTS"]

DIFF_SORTS = ("abs_diff", "diff", "ratio", "rel_change", "value_a", "value_b")


def _per_vertex(pag: PAG, col: str, agg: str, normalize: bool) -> np.ndarray:
    vals = pag.aggregate(col, agg).to_numpy()
    if normalize:
        inclusive = pag.metric_info[col].mode == "inclusive"
        total = vals[pag.roots].sum() if inclusive else vals.sum()
        vals = vals / total if total else vals * 0.0
    return vals


def _first_vertex(m: np.ndarray, n_u: int) -> np.ndarray:
    """For each union vertex, the first vertex of a run with its call path (-1 when absent)."""
    out = np.full(n_u, -1, dtype=np.int64)
    out[m[::-1]] = np.arange(len(m) - 1, -1, -1)
    return out


@pass_(version="1", tags=("profile", "differential"))
def differential(
    a: PAG,
    b: PAG,
    *,
    metric: str = "time_exc",
    agg: str = "sum",
    normalize: bool = False,
    sort: str = "abs_diff",
    k: int | None = None,
    min_change: float = 0.0,
) -> pd.DataFrame:
    """Per call path: the metric in run ``a`` and run ``b``, their difference and ratio.

    See the module docstring for the formulas and conventions.

    Parameters
    ----------
    a, b : PAG
        The baseline run and the run to compare with it.
    metric : str
        Metric to compare (must exist in both runs).
    agg : str
        Aggregation across processes (sum, mean, max, ...).
    normalize : bool
        Compare shares of each run's total instead of absolute values.
    sort : {"abs_diff", "diff", "ratio", "rel_change", "value_a", "value_b"}
        Order of the rows, largest first (``abs_diff``: largest change in either direction).
    k : int, optional
        Keep the first ``k`` rows.
    min_change : float
        Drop rows whose absolute difference is at most this.

    Returns
    -------
    pandas.DataFrame
        ``call_path``, ``name``, ``vertex_a``, ``vertex_b`` (-1 when absent),
        ``value_a``, ``value_b``, ``diff``, ``ratio``, ``rel_change``, ``status``.
    """
    pa, pb = as_pag(a), as_pag(b)
    if sort not in DIFF_SORTS:
        raise PassError(f"sort must be one of {', '.join(DIFF_SORTS)}, not {sort!r}")
    ca, cb = resolve_metric(pa, metric), resolve_metric(pb, metric)
    al = align([pa, pb])
    mat = al.matrix([_per_vertex(pa, ca, agg, normalize), _per_vertex(pb, cb, agg, normalize)])
    in_a, in_b = al.presence[:, 0], al.presence[:, 1]
    va = np.nan_to_num(mat[:, 0], nan=0.0)
    vb = np.nan_to_num(mat[:, 1], nan=0.0)
    diff = vb - va
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = vb / va
        rel = diff / va
    out = pd.DataFrame(
        {
            "call_path": al.vertices["call_path"].to_numpy(),
            "name": al.vertices["name"].to_numpy(),
            "vertex_a": _first_vertex(al.maps[0], al.n_vertices),
            "vertex_b": _first_vertex(al.maps[1], al.n_vertices),
            "value_a": va,
            "value_b": vb,
            "diff": diff,
            "ratio": ratio,
            "rel_change": rel,
            "status": np.where(in_a & in_b, "both", np.where(in_a, "only_a", "only_b")),
        }
    )
    if min_change > 0:
        out = out[np.abs(diff) > min_change]
    key = {"abs_diff": np.abs(out["diff"].to_numpy())}.get(sort, None)
    if key is None:
        key = out[sort].to_numpy(dtype=np.float64)
    key = np.where(np.isnan(key), -np.inf, key)
    order = np.lexsort((out["call_path"].to_numpy().astype(str), -key))
    out = out.iloc[order].reset_index(drop=True)
    if k is not None:
        out = out.head(max(int(k), 0))
    out.attrs.update({"metric": ca, "agg": agg, "normalize": normalize})
    return out


@pass_(version="1", tags=("profile", "differential"))
def difference(
    a: PAG,
    b: PAG,
    *,
    metric: str | None = None,
    by: str = "vertex",
    agg: str = "sum",
    fill: float = 0.0,
) -> PAG:
    """``b - a`` as a PAG aligned by call path: the difference to explore with any other pass.

    Parameters
    ----------
    a, b : PAG
        The baseline run and the run to compare with it.
    metric : str, optional
        Compare one metric (default: every metric both runs have).
    by : {"vertex", "location", "auto"}
        ``vertex`` (default): each run aggregated per vertex over its
        processes with ``agg`` first (runs at different scales compare);
        ``location``: per (vertex, process, thread) (same processes needed);
        ``auto``: ``location`` when both have the same processes, else an error.
    agg : str
        Aggregation over processes and threads for ``by="vertex"``.
    fill : float
        The missing side of a call path found in one run only (0 or nan).

    Returns
    -------
    PAG
        The union tree (vertex column ``status``: ``both``, ``only_left``
        (in ``b`` only) or ``only_right`` (in ``a`` only)) with the differences as metrics.
    """
    pa, pb = as_pag(a), as_pag(b)
    metrics = None
    if metric is not None:
        ca, cb = resolve_metric(pa, metric), resolve_metric(pb, metric)
        if ca != cb:
            raise PassError(f"metric {metric!r} is {ca!r} in a but {cb!r} in b")
        metrics = [ca]
    return pb.sub(pa, fill=fill, by=by, agg=agg, metrics=metrics)
