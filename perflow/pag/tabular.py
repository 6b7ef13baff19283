"""Tables from the PAG's objects and checks on their columns: shared by every layer that reads tables.

:func:`as_frame` turns a DataFrame, Series, vertex or edge set (anything with ``to_frame()``) into
a DataFrame whose ids stay columns; :func:`require_columns` and :func:`numeric` raise one clear
:class:`~perflow.errors.PassError` naming the column, the setting and the columns present.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..errors import PassError

__all__ = ["as_frame", "require_columns", "numeric"]


def as_frame(data: Any, who: str, *, metrics: Iterable[str] | None = None) -> pd.DataFrame:
    """A DataFrame from a DataFrame, Series, VertexSet, EdgeSet or parallel set.

    A named index (``vertex`` of ``VertexSet.to_frame()``, ``id`` of parallel
    sets) becomes the first column(s), so ids kept in the index are not lost;
    an unnamed index is dropped.

    Raises
    ------
    PassError
        When ``data`` is none of these.
    """
    if isinstance(data, pd.Series):
        data = data.to_frame()
    elif not isinstance(data, pd.DataFrame):
        to_frame = getattr(data, "to_frame", None)
        if to_frame is None:
            raise PassError(f"{who}: cannot make a table from a {type(data).__name__}; give a DataFrame or a set")
        data = to_frame(metrics) if metrics is not None else to_frame()
    idx = data.index
    names = [n for n in idx.names if n is not None and n not in data.columns]
    if len(names) == idx.nlevels:
        data = data.reset_index()
    elif not (isinstance(idx, pd.RangeIndex) and idx.start == 0 and idx.step == 1):
        data = data.reset_index(drop=True)
    return data


def require_columns(df: pd.DataFrame, columns: Iterable[str | None], who: str, *, setting: str = "") -> None:
    """Raise one clear :class:`PassError` naming the first column of ``columns`` that ``df`` lacks."""
    for c in columns:
        if c is not None and c not in df.columns:
            what = f" (setting {setting}={c!r})" if setting else ""
            have = ", ".join(map(str, df.columns)) or "none"
            raise PassError(f"{who}: the input has no column {c!r}{what}; its columns are: {have}")


def numeric(df: pd.DataFrame, column: str, who: str) -> np.ndarray:
    """``df[column]`` as float64, raising a clear error for non-numeric data."""
    try:
        return df[column].to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        raise PassError(f"{who}: column {column!r} is not numeric (dtype {df[column].dtype})") from None


# ---------------------------------------------------------------------- rendering
