"""Large tables written as CSV fast, as the same text ``DataFrame.to_csv`` writes.

``perflow run --output`` writes every table of a run as ``NAME.csv`` (:func:`perflow.flow.outputs.write_value`).
pandas' writer spends most of its time turning each cell into a Python object and a string
(a critical path of 20 M events: 228,000 segments, 1.3 s). :func:`write_csv` formats each column
at once instead (integers through a table of their strings when they are small, floats with
Python's ``repr``, categories once per category) and joins the rows, in chunks of
:data:`CHUNK_ROWS` rows so that memory stays bounded. The text is what ``to_csv(index=False)``
writes, byte for byte (``tests/flow/test_csvtext.py`` checks it against pandas on generated
tables): pandas formats a float64 column with numpy's ``astype(str)``, which gives ``repr``'s
shortest round-trip digits; missing values are empty; a field holding a comma, a quote or a line
break is quoted, its quotes doubled (the csv module's ``QUOTE_MINIMAL``).

A table this writer does not cover (an index to write, MultiIndex columns, nullable, object,
date or complex columns, a single column, text with a carriage return or a NUL) is written by
pandas, as are small tables (fewer than :data:`FAST_MIN_ROWS` rows), where pandas' own cost is small.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import IO

import numpy as np
import pandas as pd

__all__ = ["write_csv", "csv_columns", "FAST_MIN_ROWS", "CHUNK_ROWS"]

#: Rows from which :func:`write_csv` formats the table itself.
FAST_MIN_ROWS = 20_000
#: Rows formatted and written at a time.
CHUNK_ROWS = 100_000
#: Integers below this (and not negative) are formatted through a table of their strings.
_SMALL_INT = 1 << 16
_SPECIAL = (",", '"', "\n")


def _quote(s: str) -> str:
    """A field as the csv module writes it (``QUOTE_MINIMAL``, double quotes doubled)."""
    return '"' + s.replace('"', '""') + '"' if any(c in s for c in _SPECIAL) else s


def _plain_text(values: list[str]) -> bool | None:
    """True when no value needs quoting, False when some do, None when one holds what only pandas writes."""
    joined = "\x1f".join(values)
    if "\r" in joined or "\0" in joined:
        return None
    return not any(c in joined for c in _SPECIAL)


Formatter = Callable[[int, int], list[str]]


def _column(col: pd.Series) -> Formatter | None:
    """A function giving the CSV fields of rows ``[a, b)`` of ``col``, or None when pandas must write it."""
    dt = col.dtype
    if isinstance(dt, pd.CategoricalDtype):
        cats = dt.categories
        if len(cats) and not (pd.api.types.is_string_dtype(cats.dtype) or cats.dtype == object):
            return None  # numbers or dates as categories: pandas writes them
        names = [str(c) for c in cats.tolist()]
        if any(not isinstance(c, str) for c in cats.tolist()) or _plain_text(names) is None:
            return None
        lut = np.array([*(_quote(n) for n in names), ""], dtype=object)  # code -1 (missing): empty
        codes = np.asarray(col.cat.codes.to_numpy(), dtype=np.int64)
        return lambda a, b: lut[codes[a:b]].tolist()
    if isinstance(dt, pd.StringDtype):
        vals = col.to_numpy(dtype=object, na_value="")
        if any(not isinstance(v, str) for v in vals[:1000].tolist()):
            return None
        plain = _plain_text(vals.tolist())
        if plain is None:
            return None
        if plain:
            return lambda a, b: vals[a:b].tolist()
        return lambda a, b: [_quote(v) for v in vals[a:b].tolist()]
    if not isinstance(dt, np.dtype):
        return None
    arr = col.to_numpy()
    if dt.kind == "b":
        lut = np.array(["False", "True"], dtype=object)
        return lambda a, b: lut[arr[a:b].astype(np.int64)].tolist()
    if dt.kind in "iu":
        if len(arr) and int(arr.min()) >= 0 and int(arr.max()) < _SMALL_INT:
            lut = np.array([str(i) for i in range(int(arr.max()) + 1)], dtype=object)
            return lambda a, b: lut[arr[a:b]].tolist()
        return lambda a, b: list(map(str, arr[a:b].tolist()))
    if dt == np.float64:
        return lambda a, b: _floats(arr[a:b], lambda x: list(map(repr, x.tolist())))
    if dt.kind == "f":  # float32, float16: numpy's shortest digits of that type, as pandas writes them
        return lambda a, b: _floats(arr[a:b], lambda x: x.astype(str).tolist())
    return None


def _floats(x: np.ndarray, fmt: Callable[[np.ndarray], list[str]]) -> list[str]:
    out = fmt(x)
    for i in np.flatnonzero(np.isnan(x)).tolist():
        out[i] = ""
    return out


def csv_columns(frame: pd.DataFrame) -> list[Formatter] | None:
    """The formatters of ``frame``'s columns, or None when :func:`write_csv` leaves the table to pandas."""
    if frame.shape[1] < 2 or isinstance(frame.columns, pd.MultiIndex):
        return None
    labels = [str(c) for c in frame.columns]
    if any(not isinstance(c, str) for c in frame.columns) or _plain_text(labels) is None:
        return None
    cols = []
    for j in range(frame.shape[1]):
        f = _column(frame.iloc[:, j])
        if f is None:
            return None
        cols.append(f)
    return cols


def _write_fast(frame: pd.DataFrame, cols: list[Formatter], fh: IO[str]) -> None:
    fh.write(",".join(_quote(str(c)) for c in frame.columns) + "\n")
    n = len(frame)
    for a in range(0, n, CHUNK_ROWS):
        b = min(n, a + CHUNK_ROWS)
        fh.write("\n".join(map(",".join, zip(*(f(a, b) for f in cols)))) + "\n")


def write_csv(frame: pd.DataFrame, path: str | os.PathLike[str], *, index: bool, fast: bool | None = None) -> bool:
    """Write ``frame`` to ``path`` as ``frame.to_csv(path, index=index)`` does; True when formatted here.

    ``fast``: force this writer (True: still pandas when the table is not covered) or pandas
    (False); default: this writer from :data:`FAST_MIN_ROWS` rows.
    """
    use = (len(frame) >= FAST_MIN_ROWS) if fast is None else fast
    cols = csv_columns(frame) if use and not index else None
    if cols is None:
        frame.to_csv(path, index=index)
        return False
    with open(path, "w", encoding="utf-8", newline="") as fh:
        _write_fast(frame, cols, fh)
    return True
