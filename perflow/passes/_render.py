"""Shared helpers of the output passes: input coercion, unit formatting, table rendering.

Units
-----
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

An analysis pass can declare its columns' units in ``df.attrs["units"]`` (a
dict of column name to unit); declared units win over guesses, an explicit
``units`` setting wins over both. Text, Markdown and HTML renderings format
numbers this way; CSV keeps the raw values.
"""

from __future__ import annotations

import html
import logging
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perflow.errors import PassError

__all__ = [
    "as_frame",
    "require_columns",
    "guess_unit",
    "format_value",
    "format_column",
    "render_frame",
    "write_text",
    "TABLE_FORMATS",
]

log = logging.getLogger(__name__)

TABLE_FORMATS = ("text", "markdown", "html", "csv")
_TIME_NAMES = {"time", "wait", "duration", "start", "end", "enter", "leave", "send_time", "recv_time", "begin"}
_COUNT_NAMES = {"visits", "count", "calls", "messages", "instances"}


# ---------------------------------------------------------------------- inputs
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


# ---------------------------------------------------------------------- units
def guess_unit(column: Any) -> str:
    """Guess the unit of a column from its name (see the module docstring)."""
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


# ---------------------------------------------------------------------- rendering
def _is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_frame(
    df: pd.DataFrame,
    fmt: str = "text",
    *,
    units: Mapping[str, str] | None = None,
    auto_units: bool = True,
    digits: int = 3,
    title: str | None = None,
    max_rows: int | None = None,
    who: str = "render_table",
) -> str:
    """Render a DataFrame as aligned text, Markdown, an HTML table or CSV.

    Parameters
    ----------
    df : pandas.DataFrame
        The table (its index is not shown; see :func:`as_frame`).
    fmt : {"text", "markdown", "html", "csv"}
        Output format.
    units : mapping of str to str, optional
        Unit per column (overrides the guess from the column name).
    auto_units : bool
        Guess units from column names.
    digits : int
        Significant digits of scaled numbers.
    title : str, optional
        A caption (text: a first line; Markdown: bold line; HTML: ``<caption>``; CSV: ignored).
    max_rows : int, optional
        Show at most this many rows, then a line saying how many were left out.
    """
    if fmt not in TABLE_FORMATS:
        raise PassError(f"{who}: unknown format {fmt!r}; choose one of {', '.join(TABLE_FORMATS)}")
    n_total = len(df)
    if max_rows is not None and n_total > max_rows:
        df = df.iloc[: max(int(max_rows), 0)]
    more = n_total - len(df)
    if fmt == "csv":
        return df.to_csv(index=False, lineterminator="\n")
    u = column_units(df, units, auto_units)
    cols = [str(c) for c in df.columns]
    cells = [format_column(df[c], u[c], digits=digits) for c in df.columns]
    right = [_is_numeric(df[c]) for c in df.columns]
    rows = list(zip(*cells)) if cells else [() for _ in range(len(df))]
    note = f"... {more} more row{'s' if more != 1 else ''}" if more else ""
    if fmt == "text":
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(cols)]

        def line(vals: Iterable[str]) -> str:
            return "  ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(vals, widths, right)).rstrip()

        out = ([title] if title else []) + [line(cols), "  ".join("-" * w for w in widths)]
        out += [line(r) for r in rows] + ([note] if note else [])
        return "\n".join(out) + "\n"
    if fmt == "markdown":
        head = "| " + " | ".join(_md_escape(c) for c in cols) + " |"
        sep = "| " + " | ".join("---:" if r else ":---" for r in right) + " |"
        body = ["| " + " | ".join(_md_escape(v) for v in r) + " |" for r in rows]
        out = ([f"**{_md_escape(title)}**", ""] if title else []) + [head, sep] + body + (["", note] if note else [])
        return "\n".join(out) + "\n"
    esc = html.escape
    th = "".join(f'<th style="text-align:{"right" if r else "left"}">{esc(c)}</th>' for c, r in zip(cols, right))
    trs = [
        "<tr>"
        + "".join(f'<td style="text-align:{"right" if rr else "left"}">{esc(v)}</td>' for v, rr in zip(r, right))
        + "</tr>"
        for r in rows
    ]
    cap = f"<caption>{esc(title)}</caption>" if title else ""
    foot = f'<p class="perflow-more">{esc(note)}</p>' if note else ""
    return (
        f'<table class="perflow-table">{cap}<thead><tr>{th}</tr></thead><tbody>'
        + "".join(trs)
        + "</tbody></table>"
        + foot
        + "\n"
    )


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def write_text(text: str, path: str | Path | None) -> Path | None:
    """Write ``text`` to ``path`` (creating parent folders) when a path is given."""
    if path is None or path == "":
        return None
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    log.info("wrote %s (%d characters)", p, len(text))
    return p


def slug(text: str) -> str:
    """A file-name-safe version of ``text``."""
    return _SAFE.sub("-", text).strip("-").lower() or "item"
