"""pandas export of a PAG: long tables of metrics with call paths.

:func:`to_dataframe` gives one row per (vertex, process, thread) that has
data, with the vertex's call path, name, kind, file and line beside the
metrics; with ``agg=`` one row per vertex with metrics aggregated across
processes and threads (dense semantics, see :meth:`perflow.PAG.aggregate`).
:func:`to_csv` and :func:`to_parquet` write that table.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from .._atomic import atomic_path
from ..pag.pag import PAG

__all__ = ["to_dataframe", "to_csv", "to_parquet"]

_VERTEX_COLS = ["call_path", "name", "kind", "depth", "file", "line"]


def to_dataframe(
    pag: PAG, metrics: Iterable[str] | None = None, *, agg: str | None = None, sep: str = "/"
) -> pd.DataFrame:
    """The PAG's metrics as a long table.

    Parameters
    ----------
    pag : PAG
    metrics : iterable of str, optional
        Metric columns to include (default: all).
    agg : str, optional
        Aggregate across processes and threads (``"sum"``, ``"mean"``,
        ``"max"``...) and give one row per vertex instead.
    sep : str
        Separator of the call paths.

    Returns
    -------
    pandas.DataFrame
        Columns ``vertex``, ``process``, ``thread`` (not with ``agg``), the
        vertex columns ``call_path``, ``name``, ``kind``, ``depth``, ``file``,
        ``line``, then the metrics.
    """
    names = list(metrics) if metrics is not None else pag.metric_names
    for m in names:
        pag.check_metric(m)
    vt = pag.vertex_table
    info = pd.DataFrame(
        {
            "call_path": pag.call_paths(sep).to_numpy(),
            "name": vt["name"].astype(str).to_numpy(),
            "kind": vt["kind"].astype(str).to_numpy(),
            "depth": vt["depth"].to_numpy(),
            "file": vt["file"].astype(str).to_numpy(),
            "line": vt["line"].to_numpy(),
        }
    )
    if agg is not None:
        out = info.copy()
        out.insert(0, "vertex", range(len(out)))
        for m in names:
            out[m] = pag.aggregate(m, agg).to_numpy()
        return out
    m = pag.metrics[names].reset_index()
    v = m["vertex"].to_numpy()
    out = pd.concat([m[["vertex", "process", "thread"]], info.iloc[v].reset_index(drop=True), m[names]], axis=1)
    return out


def to_csv(pag: PAG, path: str | os.PathLike[str], **kwargs: object) -> Path:
    """Write :func:`to_dataframe` (keyword arguments go to it) as CSV."""

    out = Path(path)
    table = to_dataframe(pag, **kwargs)  # type: ignore[arg-type]
    with atomic_path(out) as tmp:
        table.to_csv(tmp, index=False)
    return out


def to_parquet(pag: PAG, path: str | os.PathLike[str], **kwargs: object) -> Path:
    """Write :func:`to_dataframe` (keyword arguments go to it) as Parquet."""
    out = Path(path)
    to_dataframe(pag, **kwargs).to_parquet(out, index=False)  # type: ignore[arg-type]
    return out
