"""Save the results of the three passes of ``bench_scale.py`` as Parquet files and compare two engines' column by column.

One directory per engine and trace (``<trace>.<engine>/``), one Parquet file per table: ``waits``
(the wait-state instance table, rows sorted), ``cp_summary``, ``cp_profile``, ``cp_segments`` (the
critical path's) and ``pop``. The comparison reads one column of both sides at a time (never two whole
tables of a 200 M-event trace as Python objects, which is what the JSON of earlier sessions held):
integers, strings and categories must be equal; floats are reported as exact when every value is
bit-equal (NaN equal to NaN), else by their largest relative difference, which must be within
``RTOL`` (1e-9: the engines sum in different orders only where they split a sum over partitions).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

RTOL = 1e-9
TABLES = ("waits", "cp_summary", "cp_profile", "cp_segments", "pop")
# the wait table's row order: its identity first (a row is one wait of one process at one time)
WAIT_KEYS = ("process", "thread", "start", "end", "instance", "message", "interval", "vertex")


def tables(out: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """The frames compared between the engines, from ``{pass name: result}`` of the three passes."""
    w = out["wait_states"]
    keys = [c for c in WAIT_KEYS if c in w.columns]
    keys += [c for c in w.columns if c not in keys and not isinstance(w[c].dtype, pd.CategoricalDtype)]
    cp = out["critical_path"]
    res = {"waits": w.sort_values(keys, kind="stable").reset_index(drop=True)}
    for k in ("summary", "profile", "segments"):
        if isinstance(cp.get(k), pd.DataFrame):
            res[f"cp_{k}"] = cp[k].reset_index(drop=True)
    res["pop"] = out["pop_metrics"].reset_index(drop=True)
    return res


def save(out: dict[str, Any], directory: str | Path) -> dict[str, int]:
    """Write the compared tables of ``out`` under ``directory`` (created); ``{table: rows}``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    rows = {}
    for name, df in tables(out).items():
        df.to_parquet(d / f"{name}.parquet", index=False)
        rows[name] = len(df)
    return rows


def _column(a: pd.Series, b: pd.Series) -> tuple[bool, str]:
    """(equal within the tolerance, how) for one column of both sides (same length)."""
    if isinstance(a.dtype, pd.CategoricalDtype) or isinstance(b.dtype, pd.CategoricalDtype):
        ca = a.astype("category")
        cb = b.astype("category")
        # b's codes in a's categories (-1: a value a does not have), then one integer comparison
        remap = np.asarray(ca.cat.categories.get_indexer(cb.cat.categories), dtype=np.int64)
        codes_b = np.where(cb.cat.codes.to_numpy() < 0, -1, remap[cb.cat.codes.to_numpy()])
        ok = bool(np.array_equal(ca.cat.codes.to_numpy(), codes_b))
        return ok, "equal" if ok else f"{int((ca.cat.codes.to_numpy() != codes_b).sum())} values differ"
    x, y = a.to_numpy(), b.to_numpy()
    if x.dtype.kind == "f" or y.dtype.kind == "f":
        x, y = x.astype(np.float64), y.astype(np.float64)
        nan = np.isnan(x) & np.isnan(y)
        if np.array_equal(x[~nan], y[~nan]) and np.array_equal(np.isnan(x), np.isnan(y)):
            return True, "exact"
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.abs(x - y) / np.maximum(np.maximum(np.abs(x), np.abs(y)), 1e-300)
        rel[nan | (x == y)] = 0.0
        worst = float(np.nanmax(np.where(np.isnan(rel), np.inf, rel)))
        return worst <= RTOL, f"max relative difference {worst:.1e}"
    ok = bool(np.array_equal(x, y)) if x.dtype.kind != "O" else bool((a.astype(str) == b.astype(str)).all())
    return ok, "equal" if ok else f"{int((x != y).sum())} values differ"


def compare(mine: str | Path, theirs: str | Path) -> tuple[list[str], list[str]]:
    """Compare two saved result directories column by column: (lines describing every table, differences)."""
    lines, bad = [], []
    for name in TABLES:
        fa, fb = Path(mine, f"{name}.parquet"), Path(theirs, f"{name}.parquet")
        if not fa.exists() and not fb.exists():
            continue
        if not (fa.exists() and fb.exists()):
            bad.append(f"{name}: saved by one engine only")
            continue
        import pyarrow.parquet as pq

        sa, sb = pq.read_schema(fa), pq.read_schema(fb)
        cols_a = [c for c in sa.names if not c.startswith("__index")]
        cols_b = [c for c in sb.names if not c.startswith("__index")]
        if cols_a != cols_b:
            bad.append(f"{name}: columns {cols_a} vs {cols_b}")
            continue
        how: dict[str, list[str]] = {}
        n = None
        for c in cols_a:
            a = pd.read_parquet(fa, columns=[c])[c]
            b = pd.read_parquet(fb, columns=[c])[c]
            if len(a) != len(b):
                bad.append(f"{name}: {len(a)} vs {len(b)} rows")
                break
            n = len(a)
            ok, h = _column(a, b)
            how.setdefault(h, []).append(c)
            if not ok:
                bad.append(f"{name}.{c}: {h}")
        lines.append(f"{name} ({n} rows): " + "; ".join(f"{h}: {', '.join(cs)}" for h, cs in how.items()))
    return lines, bad
