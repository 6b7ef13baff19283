"""Units, number formatting and column labels: one definition for every table, tree, set and report.

A column's unit decides how its numbers are shown:

=========== ==================================================== =====================
unit        shown as                                             guessed for columns
=========== ==================================================== =====================
``"s"``     ``1.23 s``, ``45.6 ms``, ``789 us``, ``12 ns``      ``time``, ``time_*``, ``*_time``, ``wait``,
                                                                 ``duration``, ``start``, ``end``, ``enter``,
                                                                 ``leave`` (and ``name:agg`` forms)
``"bytes"`` ``512 B``, ``4.00 KiB``, ``96.0 MiB``, ``2.00 GiB``  names containing ``bytes``
``"%"``     ``12.5%`` (values already in percent)               ``*_pct``, ``pct``, ``percent``, ``*%``
``"ratio"`` ``12.5%`` (fractions 0..1 shown as percent)         ``fraction``, ``share``, ``*_fraction``, ``*_share``
``"count"`` ``1,234`` (integers with thousands separators)      ``visits``, ``count``, ``calls``, ``n_*``
``""``      integers as is, other numbers with 4 significant
            digits
=========== ==================================================== =====================

A table declares its columns' units in ``df.attrs["units"]`` (column ->
unit) and how a column aggregates over processes or threads in
``df.attrs["aggregates"]`` (column -> ``"sum over 8 processes"``, see
:func:`aggregate_label`); :func:`column_label` turns both into a header such
as ``time_exc (sum over 8 processes) [s]``.

This module sits at the bottom of the package (like :mod:`perflow.kinds`):
the PAG's set displays, the flow's CSV output and the pass library's
renderers all format through it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "show",
    "guess_unit",
    "format_value",
    "format_column",
    "column_units",
    "aggregate_label",
    "column_label",
    "column_labels",
    "UNIT_SYMBOLS",
]

_TIME_NAMES = {"time", "wait", "duration", "start", "end", "enter", "leave", "send_time", "recv_time", "begin"}
_COUNT_NAMES = {"visits", "count", "calls", "messages", "instances"}
#: How a unit is written in a column header.
UNIT_SYMBOLS = {"s": "s", "bytes": "B", "%": "%", "ratio": "fraction", "count": "count"}


def show(x: Any) -> str:
    """A number as a user reads it: ``-100``, ``1e+300``, ``nan``, ``-1.32e+07`` (never ``np.float64(...)``)."""
    if isinstance(x, bool | np.bool_):
        return str(bool(x))
    if isinstance(x, int | np.integer):
        return str(int(x))
    try:
        f = float(x)
    except (TypeError, ValueError):
        return repr(x)
    if math.isfinite(f) and f == int(f) and abs(f) < 1e16:
        return str(int(f))
    return repr(f)  # the shortest text that reads back as the same double: '1e+300', '0.1', 'nan'


_SUFFIX = re.compile(r"\s\[([^\[\]]+)\]$")  # "gain [s]": the unit written in the name
_FROM_SYMBOL = {sym: unit for unit, sym in UNIT_SYMBOLS.items()}


def guess_unit(column: Any) -> str:
    """Guess the unit of a column from its name (see the module docstring).

    A name that says its unit, ``gain [s]`` or ``bytes_sent [B]``, has that unit.
    """
    m = _SUFFIX.search(str(column))
    if m and m.group(1) in _FROM_SYMBOL:
        return _FROM_SYMBOL[m.group(1)]
    name = str(column).lower()
    base = name.split(":")[0].strip()
    if "bytes" in base:
        return "bytes"
    if base in _TIME_NAMES or base.startswith("time_") or base.endswith(("_time", "_wait", "_duration")):
        return "s"
    if base.startswith("time") and not base.startswith("timestep"):
        return "s"
    if base in ("pct", "percent") or base.endswith(("_pct", "%", "_percent")):
        return "%"
    if base in ("fraction", "share", "ratio_of_total") or base.endswith(("_fraction", "_share")):
        return "ratio"
    if base in _COUNT_NAMES or base.startswith("n_"):
        return "count"
    return ""


def _sig(x: float, digits: int) -> str:
    """``x`` with ``digits`` significant digits but no exponent (``1234.5`` -> ``"1235"``)."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    x = float(f"{x:.{max(digits, math.floor(math.log10(abs(x))) + 1)}g}")  # never drop integer digits
    dec = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{dec}f}"


_TIME_SCALES = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))
_BYTE_SCALES = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def format_value(value: Any, unit: str = "", *, digits: int = 3) -> str:
    """Format one value for display.

    Parameters
    ----------
    value : Any
        A number (anything else is returned as ``str(value)``).
    unit : str
        ``"s"``, ``"bytes"``, ``"%"``, ``"ratio"``, ``"count"`` or ``""``.
    digits : int
        Significant digits of scaled numbers.

    Examples
    --------
    >>> format_value(0.0123, "s"), format_value(3 * 1024 ** 2, "bytes"), format_value(0.25, "ratio")
    ('12.3 ms', '3.00 MiB', '25.0%')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        return str(value)
    v = float(value)
    if not math.isfinite(v):
        return str(v)
    if unit == "s" and abs(v) < 1e-12:  # below a picosecond: rounding residue of a difference
        v = 0.0
    if unit == "s" and v != 0:  # round first, so 0.99999 s is "1.00 s", not "1000 ms"
        v = float(f"{v:.{max(digits, math.floor(math.log10(abs(v))) + 1)}g}")
    if unit == "s":
        if v == 0:
            return "0 s"
        a = abs(v)
        for scale, sym in _TIME_SCALES:
            if a >= scale or sym == "ns":
                return f"{_sig(v / scale, digits)} {sym}"
    if unit == "bytes":
        a = abs(v)
        for scale, sym in _BYTE_SCALES:
            if float(f"{a / scale:.{digits}g}") >= 1:  # 1048575.9 B is "1.00 MiB"
                return f"{_sig(v / scale, digits)} {sym}"
        return f"{v:.0f} B" if v == int(v) else f"{v:.1f} B"
    if unit == "%":
        return f"{v:.1f}%"
    if unit == "ratio":
        return f"{100 * v:.1f}%"
    if unit == "count" and v == int(v):
        return f"{int(v):,}"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.4g}"


def format_column(values: pd.Series, unit: str, *, digits: int = 3) -> list[str]:
    """Format a whole column (numbers by unit, categories and strings as text)."""
    if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
        return [format_value(x, unit, digits=digits) for x in values.to_numpy(dtype=np.float64, na_value=np.nan)]
    return ["" if (x is None or (isinstance(x, float) and math.isnan(x))) else str(x) for x in values.tolist()]


def column_units(df: pd.DataFrame, units: Mapping[str, str] | None, auto: bool = True) -> dict[str, str]:
    """Unit of each column: the explicit ``units`` mapping, then the units an analysis pass recorded in
    ``df.attrs["units"]``, else a guess from the name (when ``auto``)."""
    declared = dict(df.attrs.get("units", {}) or {})
    declared.update(units or {})
    return {c: declared.get(str(c), guess_unit(c) if auto else "") for c in df.columns}


def aggregate_label(agg: str, n_processes: int, n_locations: int | None = None) -> str:
    """How a value aggregates over processes or threads: ``"sum over 8 processes"``.

    With several threads per process (``n_locations > n_processes``) the
    aggregation runs over threads: ``"max over 16 threads of 8 processes"``.

    Examples
    --------
    >>> aggregate_label("sum", 8), aggregate_label("max", 8, 16), aggregate_label("mean", 1)
    ('sum over 8 processes', 'max over 16 threads of 8 processes', 'mean over 1 process')
    """
    n_locations = n_processes if n_locations is None else n_locations
    if n_locations > n_processes:
        return f"{agg} over {n_locations} threads of {n_processes} process{'es' if n_processes != 1 else ''}"
    return f"{agg} over {n_processes} process{'es' if n_processes != 1 else ''}"


def column_label(column: Any, unit: str = "", aggregate: str = "", *, with_unit: bool = False) -> str:
    """A column header: ``time_exc (sum over 8 processes) [s]`` (the unit only ``with_unit``).

    >>> column_label("time_exc", "s", "sum over 8 processes", with_unit=True)
    'time_exc (sum over 8 processes) [s]'
    """
    out = str(column)
    if aggregate:
        out += f" ({aggregate})"
    sym = UNIT_SYMBOLS.get(unit, unit) if with_unit else ""
    if sym and not str(column).endswith(f" [{sym}]"):  # "gain [s]" says its unit already
        out += f" [{sym}]"
    return out


def column_labels(
    df: pd.DataFrame, units: Mapping[str, str] | None = None, *, auto: bool = True, with_unit: bool = False
) -> list[str]:
    """Headers of every column of ``df`` with their aggregation (``df.attrs["aggregates"]``) and, on request, unit."""
    u = column_units(df, units, auto)
    agg = dict(df.attrs.get("aggregates", {}) or {})
    return [column_label(c, u[c], agg.get(str(c), ""), with_unit=with_unit) for c in df.columns]
