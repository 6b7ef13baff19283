"""Writing flow outputs to files and showing them as text.

Each value goes to the format that fits it:

=====================================  =====================
value                                  file
=====================================  =====================
PAG                                    ``NAME.pag/`` (saved PAG)
DataFrame, Series                      ``NAME.csv``
vertex / edge set (``to_frame()``)     ``NAME.csv``
matplotlib Figure (``savefig``)        ``NAME.png``
str                                    ``NAME.txt``
dict, list, number, bool, None         ``NAME.json``
other objects with ``_repr_html_``     ``NAME.html``
anything else                          ``NAME.txt`` (its repr)
=====================================  =====================
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perflow.units import column_labels

__all__ = ["write_value", "as_text", "SMALL_TABLE_ROWS"]

#: Tables with at most this many rows are printed by ``perflow run``.
SMALL_TABLE_ROWS = 50


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, os.PathLike):
        return os.fspath(o)
    return str(o)


def _frame(value: Any) -> pd.DataFrame | pd.Series | None:
    if isinstance(value, pd.DataFrame | pd.Series):
        return value
    if hasattr(value, "to_frame") and hasattr(value, "_ids"):
        return value.to_frame()
    return None


def write_value(value: Any, directory: str | os.PathLike[str], name: str) -> Path:
    """Write ``value`` to ``directory`` as ``name`` plus the fitting extension; return the path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    safe = name.replace("/", "_")
    if type(value).__name__ == "PAG" and hasattr(value, "save"):
        return Path(value.save(d / f"{safe}.pag"))
    frame = _frame(value)
    if frame is not None:
        p = d / f"{safe}.csv"
        out = frame.copy(deep=False)
        if not isinstance(frame.columns, pd.MultiIndex):  # headers say the unit and how a column aggregates
            out.columns = column_labels(frame, with_unit=True)
        out.to_csv(p, index=not isinstance(frame.index, pd.RangeIndex))
        return p
    if hasattr(value, "savefig"):
        p = d / f"{safe}.png"
        value.savefig(p, dpi=150, bbox_inches="tight")
        return p
    if isinstance(value, str):
        p = d / f"{safe}.txt"
        p.write_text(value if value.endswith("\n") else value + "\n", encoding="utf-8")
        return p
    if value is None or isinstance(value, dict | list | tuple | bool | int | float | np.integer | np.floating):
        p = d / f"{safe}.json"
        p.write_text(json.dumps(value, indent=2, default=_json_default) + "\n", encoding="utf-8")
        return p
    if hasattr(value, "_repr_html_"):
        p = d / f"{safe}.html"
        p.write_text(value._repr_html_(), encoding="utf-8")
        return p
    p = d / f"{safe}.txt"
    p.write_text(repr(value) + "\n", encoding="utf-8")
    return p


def as_text(value: Any, *, max_rows: int = SMALL_TABLE_ROWS) -> str | None:
    """The value as text for a terminal, or ``None`` when it is not a report (PAG, figure, big table)."""
    if isinstance(value, str):
        return value.rstrip("\n")
    frame = _frame(value)
    if frame is not None:
        if len(frame) > max_rows:
            return None
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            return frame.to_string()
    if value is None or isinstance(value, dict | list | tuple | bool | int | float | np.integer | np.floating):
        text = json.dumps(value, indent=2, default=_json_default)
        return text if len(text) <= 4000 else None
    return None
