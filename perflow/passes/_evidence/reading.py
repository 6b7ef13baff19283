"""Reading a run's tables for findings: the candidate finding, and the helpers every table shape uses.

:class:`Candidate` is one finding before merging (``perflow.passes.findings``
merges and ranks them); :class:`Helpers` holds the tables that refine
candidates (wait instances, root causes per process, critical-path segments,
outlier processes, the what-if table's balance gains); :func:`rank_list`
writes processes as ranges; :func:`has`, :func:`num`, :func:`over`,
:func:`top`, :func:`where_cols` and :func:`fmt` read columns and rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk.render import format_value

from ..whatif import GAIN  # the column the what-if replay adds to tables: the predicted gain of fixing a row

__all__ = ["Candidate", "Helpers", "rank_list", "has", "num", "over", "top", "where_cols", "fmt", "GAIN"]


def rank_list(procs: Any, limit: int = 6) -> str:
    """Processes as ranges in the given order's sorted set: ``[1, 6, 7, 0]`` -> ``0-1, 6-7``."""
    ps = sorted({int(p) for p in procs if int(p) >= 0})
    if not ps:
        return ""
    runs: list[tuple[int, int]] = []
    for p in ps:
        if runs and p == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], p)
        else:
            runs.append((p, p))
    shown = [f"{a}" if a == b else (f"{a}-{b}" if b > a + 1 else f"{a}, {b}") for a, b in runs]
    more = len(shown) - limit
    return ", ".join(shown[:limit]) + (f" and {more} more" if more > 0 else "")


@dataclass
class Candidate:
    """One candidate finding before merging (see ``perflow.passes.findings``)."""

    kind: str
    what: str
    cost: float
    vertex: int = -1
    call_path: str = ""
    processes: list[int] = field(default_factory=list)
    gain: float = math.nan
    output: str = ""
    row: int = -1
    window: tuple[float, float] | None = None
    context: bool = False  # a hotspot: where the time goes, listed after the problems
    label: str = ""  # where, when the finding has no call path (a slow range's code)
    short: str = ""  # a few words for the "also" of a merged line ("Late Sender 154 ms")
    amount: float = math.nan  # a wait state's or a root cause's waiting time, a hotspot's time, over processes (s)
    wait_kind: str = ""  # a wait state's kind (``late_receiver``)
    explains: dict[str, float] = field(default_factory=dict)  # a root cause's waiting caused, per wait kind (s)
    explained: bool = False  # a wait state the root causes explain (shown with them, not on its own)
    lead: str = ""  # words that open a root cause's line whatever it explains ("off the CPU here ..., ")
    tail: str = ""  # words that close a root cause's line whatever it explains ("; through [vdso] ...")
    share: float = math.nan  # a hotspot's share of the time


def has(df: Any, *cols: str) -> bool:
    return isinstance(df, pd.DataFrame) and len(df) > 0 and set(cols) <= set(map(str, df.columns))


def num(row: pd.Series, col: str, default: float = math.nan) -> float:
    try:
        v = float(row[col])
    except (KeyError, TypeError, ValueError):
        return default
    return v if math.isfinite(v) else default


def over(df: pd.DataFrame, col: str, n_default: int) -> int:
    """How many locations a column sums over: from ``attrs["aggregates"]`` ("sum over 8 processes")."""
    label = str((df.attrs.get("aggregates", {}) or {}).get(col, ""))
    m = re.search(r"over (\d+) threads", label) or re.search(r"over (\d+) process", label)
    return int(m.group(1)) if m else n_default


def top(procs: np.ndarray, values: np.ndarray, share: float = 0.5) -> list[int]:
    """The processes with at least ``share`` of the largest value, largest first."""
    if not len(procs):
        return []
    s = pd.Series(values).groupby(procs).sum().sort_values(ascending=False, kind="stable")
    s = s[s > 0]
    if not len(s):
        return []
    return [int(p) for p in s.index[s.to_numpy() >= share * float(s.iloc[0])]]


class Helpers:
    """The tables that refine candidates: wait instances, causes per process, path segments, outliers."""

    def __init__(self, values: Mapping[str, Any]):
        self.waits = self.by_process = self.segments = self.outliers = None
        self._wait_cols: tuple[np.ndarray, np.ndarray | None] | None = None
        for v in values.values():
            if not isinstance(v, pd.DataFrame):
                continue
            if self.waits is None and has(v, "process", "start", "end", "kind", "amount", "vertex"):
                self.waits = v
            elif self.by_process is None and has(v, "process", "vertex", "cost") and "top_process" not in v:
                self.by_process = v
            elif self.segments is None and has(v, "process", "start", "end", "vertex") and "kind" not in v:
                self.segments = v
            elif self.outliers is None and has(v, "vertex", "process", "excess"):
                self.outliers = v
        # the what-if table: "NAME=balance" scenarios predict the gain of balancing a function
        self.balance: dict[str, float] = {}
        for v in values.values():
            if has(v, "scenario", GAIN):
                for sc, g in zip(v["scenario"].astype(str), pd.to_numeric(v[GAIN], errors="coerce")):
                    m = re.fullmatch(r"\s*([^=&]+?)\s*=\s*balance\s*", sc)
                    if m and math.isfinite(g):
                        self.balance[m.group(1)] = float(g)

    def balance_gain(self, call_path: str) -> float:
        """The what-if gain of balancing this call path (by its path or its function's name), NaN if none."""
        if not self.balance or not call_path:
            return math.nan
        return self.balance.get(call_path, self.balance.get(call_path.rsplit("/", 1)[-1], math.nan))

    def _wait_rows(self, vertex: int, kind: str) -> np.ndarray:
        """Positions, ascending, of the wait rows of ``vertex`` and ``kind`` (the columns read once per table)."""
        w = self.waits
        if self._wait_cols is None:
            k = w["kind"]
            codes = k.cat.codes.to_numpy() if isinstance(k.dtype, pd.CategoricalDtype) else None
            self._wait_cols = (w["vertex"].to_numpy(), codes)
        vert, codes = self._wait_cols
        m = vert == vertex
        if codes is None:
            m &= (w["kind"] == kind).to_numpy()
        else:  # what ``w["kind"] == kind`` gives, by the codes: no match when kind is not a category
            cats = w["kind"].cat.categories
            m &= codes == cats.get_loc(kind) if kind in cats else False
        return np.flatnonzero(m)

    def wait_detail(self, vertex: int, kind: str) -> tuple[list[int], tuple[float, float] | None, str]:
        w = self.waits
        if w is None:
            return [], None, ""
        rows = self._wait_rows(vertex, kind)
        if not len(rows):
            return [], None, ""
        amt = w["amount"].to_numpy(dtype=np.float64)[rows]
        procs = top(w["process"].to_numpy()[rows], amt)
        i = int(np.argmax(amt))
        s, e = float(w["start"].to_numpy()[rows][i]), float(w["end"].to_numpy()[rows][i])
        who = ""
        if "cause_process" in w.columns:
            cause = [p for p in top(w["cause_process"].to_numpy()[rows], amt, share=0.5) if p >= 0]  # -1: nobody's
            if cause:
                who = f"for rank{'s' if len(cause) > 1 else ''} {rank_list(cause, 3)}"
        return procs, (s, e), who

    def cause_processes(self, vertex: int) -> list[int]:
        b = self.by_process
        if b is None:
            return []
        m = b["vertex"].to_numpy() == vertex
        return top(b["process"].to_numpy()[m], b["cost"].to_numpy(dtype=np.float64)[m])

    def path_processes(self, vertex: int) -> tuple[list[int], tuple[float, float] | None]:
        s = self.segments
        if s is None:
            return [], None
        m = s["vertex"].to_numpy() == vertex
        if not m.any():
            return [], None
        st, en = s["start"].to_numpy(dtype=np.float64)[m], s["end"].to_numpy(dtype=np.float64)[m]
        i = int(np.argmax(en - st))
        return top(s["process"].to_numpy()[m], en - st), (float(st[i]), float(en[i]))

    def outlier_processes(self, vertex: int) -> list[int]:
        o = self.outliers
        if o is None:
            return []
        m = o["vertex"].to_numpy() == vertex
        return top(o["process"].to_numpy()[m], o["excess"].to_numpy(dtype=np.float64)[m], share=0.0)


def where_cols(row: pd.Series) -> tuple[int, str]:
    v = int(num(row, "vertex", -1)) if "vertex" in row else -1
    return v, str(row["call_path"]) if "call_path" in row and isinstance(row["call_path"], str) else ""


def fmt(x: float) -> str:

    return format_value(x, "s")
