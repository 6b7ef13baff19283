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

from perflow.errors import PassError
from perflow.flow.registry import pass_
from perflow.pag.pag import PAG

from ._common import as_pag, names_of, resolve_metric

__all__ = ["differential", "DIFF_SORTS"]

DIFF_SORTS = ("abs_diff", "diff", "ratio", "rel_change", "value_a", "value_b")


def _per_path(pag: PAG, col: str, agg: str, normalize: bool) -> pd.DataFrame:
    vals = pag.aggregate(col, agg).to_numpy()
    if normalize:
        inclusive = pag.metric_info[col].mode == "inclusive"
        total = vals[pag.roots].sum() if inclusive else vals.sum()
        vals = vals / total if total else vals * 0.0
    df = pd.DataFrame(
        {
            "call_path": pag.call_paths().to_numpy(),
            "name": names_of(pag),
            "vertex": np.arange(pag.n_vertices),
            "value": vals,
        }
    )
    return df.groupby("call_path", sort=False).agg(
        name=("name", "first"), vertex=("vertex", "first"), value=("value", "sum")
    )


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
    da = _per_path(pa, ca, agg, normalize)
    db = _per_path(pb, cb, agg, normalize)
    j = da.merge(db, how="outer", left_index=True, right_index=True, suffixes=("_a", "_b"))
    in_a = j["vertex_a"].notna().to_numpy()
    in_b = j["vertex_b"].notna().to_numpy()
    va = j["value_a"].fillna(0.0).to_numpy(dtype=np.float64)
    vb = j["value_b"].fillna(0.0).to_numpy(dtype=np.float64)
    diff = vb - va
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = vb / va
        rel = diff / va
    out = pd.DataFrame(
        {
            "call_path": j.index.to_numpy(),
            "name": j["name_a"].fillna(j["name_b"]).to_numpy(),
            "vertex_a": j["vertex_a"].fillna(-1).to_numpy(dtype=np.int64),
            "vertex_b": j["vertex_b"].fillna(-1).to_numpy(dtype=np.int64),
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
