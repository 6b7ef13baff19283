"""The vertex table of the top-down view: columns, dtypes, normalisation; metric-column order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..errors import PAGError
from ..kinds import VertexKind
from .tree import tree_index

__all__ = ["VERTEX_COLUMNS", "normalize_vertices", "is_normalized", "canonical_order"]

#: Columns of the vertex table (extra columns are kept as vertex attributes).
VERTEX_COLUMNS = ["name", "kind", "parent", "depth", "module", "file", "line"]
_KIND_CATEGORIES = pd.CategoricalDtype([k.value for k in VertexKind])


def _categorical(values: Any, fill: str = "") -> pd.Categorical:
    s = pd.Series(values, copy=False)
    if isinstance(s.dtype, pd.CategoricalDtype):
        if s.isna().any():
            s = s.cat.add_categories([fill]) if fill not in s.cat.categories else s
            s = s.fillna(fill)
        return pd.Categorical(s)
    return pd.Categorical(s.fillna(fill).astype(str))


def normalize_vertices(vertices: pd.DataFrame | Mapping[str, Any]) -> pd.DataFrame:
    """Return a vertex table with the standard columns, dtypes and a RangeIndex.

    Accepts a DataFrame (or mapping of columns) with at least ``name`` and
    ``parent``; ``kind``, ``module``, ``file`` and ``line`` are optional.
    ``depth`` is recomputed from ``parent``.
    """
    df = pd.DataFrame(vertices, copy=False) if not isinstance(vertices, pd.DataFrame) else vertices
    for c in ("name", "parent"):
        if c not in df.columns:
            raise PAGError(f"vertex table lacks the column {c!r}")
    n = len(df)
    parent = np.asarray(df["parent"].to_numpy(dtype=np.float64, na_value=-1), dtype=np.int64)
    tix = tree_index(parent)
    if "kind" in df.columns:
        raw_kind = pd.Series(df["kind"].to_numpy(), dtype=object)
        valid = {k.value for k in VertexKind}
        names = {str(getattr(k, "value", k)) for k in raw_kind.unique()}
        bad = sorted(names - valid)
        if bad:
            raise PAGError(f"unknown vertex kind {bad[0]!r}; kinds are {', '.join(sorted(valid))}")
        kind = raw_kind.map(lambda k: str(getattr(k, "value", k)))
    else:
        kind = pd.Series([VertexKind.FUNCTION.value] * n)
    out = pd.DataFrame(
        {
            "name": _categorical(df["name"].to_numpy()),
            "kind": pd.Categorical(kind.to_numpy(), dtype=_KIND_CATEGORIES),
            "parent": parent,
            "depth": tix.depth.astype(np.int32),
            "module": _categorical(df["module"].to_numpy() if "module" in df.columns else [""] * n),
            "file": _categorical(df["file"].to_numpy() if "file" in df.columns else [""] * n),
            "line": (
                df["line"].to_numpy(dtype=np.float64, na_value=-1).astype(np.int32)
                if "line" in df.columns
                else np.full(n, -1, dtype=np.int32)
            ),
        }
    )
    for c in df.columns:
        if c not in out.columns and c not in ("id", "vertex"):
            out[c] = df[c].to_numpy()
    out.index = pd.RangeIndex(n, name="vertex")
    return out


def is_normalized(df: pd.DataFrame) -> bool:
    return (
        all(c in df.columns for c in VERTEX_COLUMNS)
        and isinstance(df["name"].dtype, pd.CategoricalDtype)
        and df["kind"].dtype == _KIND_CATEGORIES
        and isinstance(df.index, pd.RangeIndex)
    )


_FIRST = ["time_inc", "time_exc", "visits"]


def canonical_order(columns: Iterable[Any]) -> list[Any]:
    """Metric columns with ``time_inc``, ``time_exc``, ``visits`` first, the rest in their order."""
    cols = list(columns)
    return [c for c in _FIRST if c in cols] + [c for c in cols if c not in _FIRST]
