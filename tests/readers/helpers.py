"""Checks shared by the reader tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

import perflow


def check_times(pag: perflow.PAG, *, consistent: bool = True, rtol: float = 1e-6, atol: float = 1e-9) -> None:
    """inclusive >= exclusive on every row; with ``consistent``, inc = exc + children's inc per location."""
    m = pag.metrics
    inc = m["time_inc"].to_numpy()
    exc = m["time_exc"].to_numpy()
    assert np.all(inc >= exc - atol - rtol * np.abs(inc)), "time_inc < time_exc somewhere"
    if not consistent:
        return
    parent = pag.vertex_table["parent"].to_numpy()
    df = m[["time_inc"]].reset_index()
    df["parent"] = parent[df["vertex"].to_numpy()]
    child = df[df["parent"] >= 0].groupby(["parent", "process", "thread"])["time_inc"].sum()
    child.index = child.index.set_names(["vertex", "process", "thread"])
    kids = child.reindex(m.index, fill_value=0.0).to_numpy()
    np.testing.assert_allclose(inc, exc + kids, rtol=rtol, atol=atol)


def value(pag: perflow.PAG, path: str, metric: str, process: int = 0, thread: int = 0) -> float:
    """One metric cell addressed by call path."""
    v = pag.vertex(path).id
    return float(pag.metrics.loc[(v, process, thread), metric])


def paths(pag: perflow.PAG) -> pd.Series:
    return pag.call_paths()
