"""Findings read off a run's tables: each known table shape gives candidate findings (see ``findings``).

A table is recognised by its columns, never by the flow that made it, so a user's flow that
outputs a wait-state summary or a root-cause table gets findings too:

=================================  ===========================================  ===========================
table (columns)                    finding                                      cost (time lost per process)
=================================  ===========================================  ===========================
root causes (vertex, cost, total,  a call path whose delays make others wait    total / locations
top_process)
off the CPU (the same and          a call path the delaying thread was off the  total / locations
off_cpu_vertex)                    CPU in, making others wait
waits per call path (vertex,       a wait state at an MPI call                  amount / locations
kind, amount, max_process)
critical-path imbalance (vertex,   a call path that keeps the critical path     cpi
cpi)                               longer than its mean
load imbalance (vertex,            a call path slower on some processes         imbalance_time
imbalance_time, max_process)
POP metrics (metric, value, unit)  an efficiency below 95%                      the seconds it stands for
scalability (call_path, loss)      a call path that does not scale              loss
scalability fits (call_path,       a call path whose time grows with the scale  predicted - last measured
slope, predicted)
slow ranges (process, start, end,  a process slow for a while (variance)        lost
lost)
backtracking roots (vertex,        a process abnormally slow in a call path     value - mean
process, value, mean,
symptom_vertex)
differences (call_path, diff,      a call path that takes longer in run b       diff / locations
value_a, value_b)
hotspots (vertex, value, share)    where the time goes (context, ranked last)   value / locations
=================================  ===========================================  ===========================

Helper tables refine these: the wait-state instances (which processes wait, for whom, the
longest wait to zoom to), the root causes per process, the critical-path segments and the
outlier processes. A ``gain [s]`` column (the what-if replay's predicted gain of fixing a row)
is carried over when a table has one; the ``what_if`` table's ``NAME=balance`` scenarios give
their gain to the findings about that function.
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
from perflow.sdk.trace import wait_label

from .whatif import GAIN  # the column the what-if replay adds to tables: the predicted gain of fixing a row

__all__ = ["Candidate", "candidates", "rank_list", "GAIN"]


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
    amount: float = math.nan  # a wait state's or a root cause's waiting time, summed over processes (s)
    wait_kind: str = ""  # a wait state's kind (``late_receiver``)
    explains: dict[str, float] = field(default_factory=dict)  # a root cause's waiting caused, per wait kind (s)
    explained: bool = False  # a wait state the root causes explain (shown with them, not on its own)
    lead: str = ""  # words that open a root cause's line whatever it explains ("off the CPU here ..., ")


def _has(df: Any, *cols: str) -> bool:
    return isinstance(df, pd.DataFrame) and len(df) > 0 and set(cols) <= set(map(str, df.columns))


def _num(row: pd.Series, col: str, default: float = math.nan) -> float:
    try:
        v = float(row[col])
    except (KeyError, TypeError, ValueError):
        return default
    return v if math.isfinite(v) else default


def _over(df: pd.DataFrame, col: str, n_default: int) -> int:
    """How many locations a column sums over: from ``attrs["aggregates"]`` ("sum over 8 processes")."""
    label = str((df.attrs.get("aggregates", {}) or {}).get(col, ""))
    m = re.search(r"over (\d+) threads", label) or re.search(r"over (\d+) process", label)
    return int(m.group(1)) if m else n_default


def _top(procs: np.ndarray, values: np.ndarray, share: float = 0.5) -> list[int]:
    """The processes with at least ``share`` of the largest value, largest first."""
    if not len(procs):
        return []
    s = pd.Series(values).groupby(procs).sum().sort_values(ascending=False, kind="stable")
    s = s[s > 0]
    if not len(s):
        return []
    return [int(p) for p in s.index[s.to_numpy() >= share * float(s.iloc[0])]]


class _Helpers:
    """The tables that refine candidates: wait instances, causes per process, path segments, outliers."""

    def __init__(self, values: Mapping[str, Any]):
        self.waits = self.by_process = self.segments = self.outliers = None
        for v in values.values():
            if not isinstance(v, pd.DataFrame):
                continue
            if self.waits is None and _has(v, "process", "start", "end", "kind", "amount", "vertex"):
                self.waits = v
            elif self.by_process is None and _has(v, "process", "vertex", "cost") and "top_process" not in v:
                self.by_process = v
            elif self.segments is None and _has(v, "process", "start", "end", "vertex") and "kind" not in v:
                self.segments = v
            elif self.outliers is None and _has(v, "vertex", "process", "excess"):
                self.outliers = v
        # the what-if table: "NAME=balance" scenarios predict the gain of balancing a function
        self.balance: dict[str, float] = {}
        for v in values.values():
            if _has(v, "scenario", GAIN):
                for sc, g in zip(v["scenario"].astype(str), pd.to_numeric(v[GAIN], errors="coerce")):
                    m = re.fullmatch(r"\s*([^=&]+?)\s*=\s*balance\s*", sc)
                    if m and math.isfinite(g):
                        self.balance[m.group(1)] = float(g)

    def balance_gain(self, call_path: str) -> float:
        """The what-if gain of balancing this call path (by its path or its function's name), NaN if none."""
        if not self.balance or not call_path:
            return math.nan
        return self.balance.get(call_path, self.balance.get(call_path.rsplit("/", 1)[-1], math.nan))

    def wait_detail(self, vertex: int, kind: str) -> tuple[list[int], tuple[float, float] | None, str]:
        w = self.waits
        if w is None:
            return [], None, ""
        m = (w["vertex"].to_numpy() == vertex) & (w["kind"] == kind).to_numpy()  # (by the categorical's codes)
        if not m.any():
            return [], None, ""
        amt = w["amount"].to_numpy(dtype=np.float64)[m]
        procs = _top(w["process"].to_numpy()[m], amt)
        i = int(np.argmax(amt))
        s, e = float(w["start"].to_numpy()[m][i]), float(w["end"].to_numpy()[m][i])
        who = ""
        if "cause_process" in w.columns:
            cause = _top(w["cause_process"].to_numpy()[m], amt, share=0.5)
            if cause:
                who = f"for rank{'s' if len(cause) > 1 else ''} {rank_list(cause, 3)}"
        return procs, (s, e), who

    def cause_processes(self, vertex: int) -> list[int]:
        b = self.by_process
        if b is None:
            return []
        m = b["vertex"].to_numpy() == vertex
        return _top(b["process"].to_numpy()[m], b["cost"].to_numpy(dtype=np.float64)[m])

    def path_processes(self, vertex: int) -> tuple[list[int], tuple[float, float] | None]:
        s = self.segments
        if s is None:
            return [], None
        m = s["vertex"].to_numpy() == vertex
        if not m.any():
            return [], None
        st, en = s["start"].to_numpy(dtype=np.float64)[m], s["end"].to_numpy(dtype=np.float64)[m]
        i = int(np.argmax(en - st))
        return _top(s["process"].to_numpy()[m], en - st), (float(st[i]), float(en[i]))

    def outlier_processes(self, vertex: int) -> list[int]:
        o = self.outliers
        if o is None:
            return []
        m = o["vertex"].to_numpy() == vertex
        return _top(o["process"].to_numpy()[m], o["excess"].to_numpy(dtype=np.float64)[m], share=0.0)


def _where_cols(row: pd.Series) -> tuple[int, str]:
    v = int(_num(row, "vertex", -1)) if "vertex" in row else -1
    return v, str(row["call_path"]) if "call_path" in row and isinstance(row["call_path"], str) else ""


def _fmt(x: float) -> str:

    return format_value(x, "s")


def _root_causes(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate]) -> None:
    _causes(name, df, h, n, out, off_cpu=False)


def _off_cpu(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate]) -> None:
    _causes(name, df, h, n, out, off_cpu=True)


def _kinds_caused(text: Any) -> dict[str, float]:
    """A ``causes`` cell ("kind:seconds, ...") as seconds per wait kind."""
    explains: dict[str, float] = {}
    if isinstance(text, str) and text:
        for item in text.split(","):
            k, _, amount = item.strip().partition(":")
            try:
                a = float(amount)
            except ValueError:
                continue
            if k and math.isfinite(a) and a > 0:
                explains[k] = explains.get(k, 0.0) + a
    return explains


def _causes(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate], *, off_cpu: bool) -> None:
    """Root causes: a call path whose delays make others wait (``off_cpu``: while off the CPU in it)."""
    total = df["total"].to_numpy(dtype=np.float64)
    keep = total >= 0.01 * max(float(np.nansum(total)), 1e-300)
    if off_cpu and "percent" in df.columns:  # and at least 1% of all the waiting analysed (not noise)
        keep &= pd.to_numeric(df["percent"], errors="coerce").fillna(0.0).to_numpy() >= 1.0
    locs = _over(df, "total", n)
    for i in np.flatnonzero(keep):
        row = df.iloc[i]
        v, cp = _where_cols(row)
        ov = int(_num(row, "off_cpu_vertex", -1)) if off_cpu else -1
        procs = h.cause_processes(ov if off_cpu else v) or [int(_num(row, "top_process", -1))]
        explains = _kinds_caused(row.get("causes"))  # the waiting caused per wait kind
        parts = [f"{wait_label(k)} {_fmt(a)}" for k, a in explains.items()]
        kinds = f" ({', '.join(parts)})" if parts else ""
        what = f"delays others: {_fmt(float(total[i]))} of waiting in total{kinds}"
        short = f"root cause of {_fmt(float(total[i]))} of waiting"
        lead = "off the CPU here (descheduled, or blocked in a system call), " if off_cpu else ""
        if off_cpu:  # the thread was descheduled (an oversubscribed node) or blocked in a system call here
            what, short = lead + what, f"off the CPU: {short}"
        out.append(
            Candidate(
                "root cause",
                what,
                float(total[i]) / locs,
                v,
                cp,
                procs,
                _num(row, GAIN),
                name,
                int(i),
                short=short,
                amount=float(total[i]),
                explains=explains,
                lead=lead,
            )
        )


def _waits(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate]) -> None:
    amount = df["amount"].to_numpy(dtype=np.float64)
    keep = amount >= 0.01 * max(float(np.nansum(amount)), 1e-300)
    locs = _over(df, "amount", n)
    for i in np.flatnonzero(keep):
        row = df.iloc[i]
        v, cp = _where_cols(row)
        kind = str(row["kind"])
        procs, window, who = h.wait_detail(v, kind)
        procs = procs or [int(_num(row, "max_process", -1))]
        worst = _num(row, "max_process_time")
        extra = f", most on rank {int(_num(row, 'max_process', -1))} ({_fmt(worst)})" if math.isfinite(worst) else ""
        what = f"{wait_label(kind)}{f' {who}' if who else ''}: {_fmt(float(amount[i]))} in total{extra}"
        short = f"{wait_label(kind)} {_fmt(float(amount[i]))}"
        out.append(
            Candidate(
                "wait state",
                what,
                float(amount[i]) / locs,
                v,
                cp,
                procs,
                _num(row, GAIN),
                name,
                int(i),
                window,
                short=short,
                amount=float(amount[i]),
                wait_kind=kind,
            )
        )


def _cpi(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate]) -> None:
    cpi = df["cpi"].to_numpy(dtype=np.float64)
    top = float(np.nanmax(cpi)) if len(cpi) else 0.0
    for i in np.flatnonzero(cpi >= 0.05 * max(top, 1e-300)):
        row = df.iloc[i]
        v, cp = _where_cols(row)
        if v < 0:
            continue
        procs, window = h.path_processes(v)
        on = _num(row, "cp_time")
        what = f"critical-path imbalance {_fmt(float(cpi[i]))}" + (
            f" ({_fmt(on)} on the path, {_fmt(_num(row, 'mean_nonwait'))} per process on average)"
            if math.isfinite(on)
            else ""
        )
        short = f"critical-path imbalance {_fmt(float(cpi[i]))}"
        out.append(
            Candidate(
                "critical-path imbalance",
                what,
                float(cpi[i]),
                v,
                cp,
                procs,
                _num(row, GAIN),
                name,
                int(i),
                window,
                short=short,
            )
        )


def _imbalance(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate]) -> None:
    it = df["imbalance_time"].to_numpy(dtype=np.float64)
    top = float(np.nanmax(it)) if len(it) else 0.0
    for i in np.flatnonzero(it >= 0.05 * max(top, 1e-300)):
        row = df.iloc[i]
        v, cp = _where_cols(row)
        mp = int(_num(row, "max_process", -1))
        procs = h.outlier_processes(v) or [mp]
        what = f"load imbalance: {_fmt(_num(row, 'max'))} on rank {mp}, {_fmt(_num(row, 'mean'))} on average"
        short = f"load imbalance {_fmt(float(it[i]))} (rank {mp})"
        out.append(
            Candidate("load imbalance", what, float(it[i]), v, cp, procs, _num(row, GAIN), name, int(i), short=short)
        )


_POP_LOSS = {  # efficiency -> (seconds it stands for, what is lost)
    "load_balance": (lambda m: m["useful_max"] - m["useful_mean"], "useful work spread unevenly over the processes"),
    "serialisation_efficiency": (lambda m: m["ideal_runtime"] - m["useful_max"], "dependencies between processes"),
    "transfer_efficiency": (
        lambda m: m["runtime"] - m["ideal_runtime"],
        "time to move data (an ideal network would save it)",
    ),
}


def _pop(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate]) -> None:
    vals = {str(k): float(v) for k, v in zip(df["metric"], pd.to_numeric(df["value"], errors="coerce"))}
    gains = dict(zip(df["metric"].astype(str), pd.to_numeric(df[GAIN], errors="coerce"))) if GAIN in df else {}
    window = None
    if math.isfinite(vals.get("window_start", math.nan)) and math.isfinite(vals.get("window_end", math.nan)):
        window = (vals["window_start"], vals["window_end"])
    for metric, (loss, why) in _POP_LOSS.items():
        eff = vals.get(metric, math.nan)
        if not math.isfinite(eff) or eff >= 0.95:
            continue
        try:
            cost = float(loss(vals))
        except KeyError:
            continue
        if not math.isfinite(cost) or cost <= 0:
            continue
        row = int(np.flatnonzero(df["metric"].astype(str).to_numpy() == metric)[0])
        what = f"{metric.replace('_', ' ')} {100 * eff:.1f}%: {_fmt(cost)} of the runtime lost to {why}"
        out.append(
            Candidate(
                "efficiency", what, cost, gain=float(gains.get(metric, math.nan)), output=name, row=row, window=window
            )
        )


def _scalability(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate]) -> None:
    loss = df["loss"].to_numpy(dtype=np.float64)
    for i in np.flatnonzero(loss > 0)[:10]:
        row = df.iloc[i]
        v, cp = _where_cols(row)
        model = f", model {row['model']}" if "model" in row and isinstance(row["model"], str) else ""
        cause = ""
        if isinstance(row.get("cause"), str) and row["cause"]:
            cause = f"; root cause {row['cause']}" + (
                f" ({row['source']})" if isinstance(row.get("source"), str) and row["source"] else ""
            )
        what = f"does not scale: {_fmt(float(loss[i]))} lost against ideal scaling at the largest run{model}{cause}"
        out.append(Candidate("scalability", what, float(loss[i]), v, cp, [], _num(row, GAIN), name, int(i)))


def _slow(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate]) -> None:
    lost = df["lost"].to_numpy(dtype=np.float64)
    for i in np.flatnonzero(lost > 0)[:10]:
        row = df.iloc[i]
        code = str(row["code"]) if isinstance(row.get("code"), str) else ""
        s, e = _num(row, "start"), _num(row, "end")
        what = f"slow from {_fmt(s)} to {_fmt(e)}: {_fmt(float(lost[i]))} lost"
        p = int(_num(row, "process", -1))
        out.append(
            Candidate("variance", what, float(lost[i]), -1, "", [p], _num(row, GAIN), name, int(i), (s, e), label=code)
        )


def _abnormal(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate]) -> None:
    seen: set[tuple[int, int]] = set()
    for i in range(len(df)):
        row = df.iloc[i]
        v, cp = _where_cols(row)
        p = int(_num(row, "process", -1))
        excess = _num(row, "value") - _num(row, "mean")
        if (v, p) in seen or not math.isfinite(excess) or excess <= 0:
            continue
        seen.add((v, p))
        what = (
            f"abnormally slow: {_fmt(_num(row, 'value'))} against {_fmt(_num(row, 'mean'))} on average"
            f" (backtracked from {row.get('symptom_name', 'a symptom')})"
        )
        out.append(Candidate("root cause", what, excess, v, cp, [p], _num(row, GAIN), name, i))


def _changes(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate]) -> None:
    diff = df["diff"].to_numpy(dtype=np.float64)
    locs = _over(df, "diff", n)
    for i in np.flatnonzero(diff > 0)[:10]:
        row = df.iloc[i]
        a, b = _num(row, "value_a"), _num(row, "value_b")
        rel = f" (+{100 * (b - a) / a:.0f}%)" if a > 0 else " (new)"
        run = f" in run {row['run']}" if "run" in row and isinstance(row["run"], str) else ""
        what = f"takes {_fmt(float(diff[i]))} longer{run}{rel}: {_fmt(a)} -> {_fmt(b)}"
        cp = str(row["call_path"])
        short = f"+{_fmt(float(diff[i]))}{run}"
        out.append(
            Candidate("change", what, float(diff[i]) / locs, -1, cp, [], _num(row, GAIN), name, int(i), short=short)
        )


def _growth(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate]) -> None:
    """The scalability fits: a call path whose time grows with the scale costs its predicted growth."""
    last = [c for c in df.columns if str(c).startswith("T@")]
    if not last:
        return
    at = pd.to_numeric(df[last[-1]], errors="coerce").to_numpy(dtype=np.float64)
    pred = pd.to_numeric(df["predicted"], errors="coerce").to_numpy(dtype=np.float64)
    grow = pred - at
    flagged = df["non_scalable"].to_numpy(dtype=bool) if "non_scalable" in df.columns else np.ones(len(df), bool)
    target = df.attrs.get("target")
    at_p = f" at P={target:g}" if isinstance(target, int | float) else ""
    for i in np.flatnonzero(flagged & (grow > 0))[:10]:
        row = df.iloc[i]
        v, cp = _where_cols(row)
        fit = " (poor fit)" if bool(row.get("poor_fit", False)) else ""
        what = f"grows with the scale: {_fmt(at[i])} at {last[-1][2:].split(' ')[0]} processes, {_fmt(pred[i])} predicted{at_p}{fit}"
        out.append(Candidate("scalability", what, float(grow[i]), v, cp, [], _num(row, GAIN), name, int(i)))


def _hotspots(name: str, df: pd.DataFrame, h: _Helpers, n: int, out: list[Candidate]) -> None:
    value = df["value"].to_numpy(dtype=np.float64)
    locs = _over(df, "value", n)
    for i in range(min(3, len(df))):
        row = df.iloc[i]
        v, cp = _where_cols(row)
        share = _num(row, "share")
        what = (
            f"{100 * share:.1f}% of the time ({_fmt(float(value[i]))} in total)"
            if math.isfinite(share)
            else f"{_fmt(float(value[i]))}"
        )
        mp = int(_num(row, "max_process", -1))
        out.append(
            Candidate(
                "hotspot",
                what,
                float(value[i]) / locs,
                v,
                cp,
                [mp] if mp >= 0 else [],
                _num(row, GAIN),
                name,
                i,
                context=True,
            )
        )


#: (required columns, extractor), tried in this order on every table.
EXTRACTORS = (
    (("vertex", "off_cpu_vertex", "cost", "total", "top_process"), _off_cpu),
    (("vertex", "cost", "total", "top_process"), _root_causes),
    (("vertex", "kind", "amount", "max_process"), _waits),
    (("vertex", "cpi"), _cpi),
    (("vertex", "imbalance_time", "max_process"), _imbalance),
    (("metric", "value", "unit"), _pop),
    (("call_path", "loss"), _scalability),
    (("call_path", "slope", "predicted"), _growth),
    (("process", "start", "end", "lost"), _slow),
    (("vertex", "process", "value", "mean", "symptom_vertex"), _abnormal),
    (("call_path", "diff", "value_a", "value_b"), _changes),
    (("vertex", "value", "share", "max_process"), _hotspots),
)


def candidates(values: Mapping[str, Any], n_locations: int) -> list[Candidate]:
    """Candidate findings of every recognised table among ``values`` (name -> value).

    One table per shape: the first one with a ``gain [s]`` column, else the first (a flow lists
    its main table first; ``critical_path``'s profile and imbalance tables have one shape).
    """
    h = _Helpers(values)
    shapes: dict[Any, list[tuple[str, pd.DataFrame]]] = {}
    for name, v in values.items():
        if not isinstance(v, pd.DataFrame):
            continue
        for cols, fn in EXTRACTORS:
            if _has(v, *cols):
                shapes.setdefault(fn, []).append((str(name), v))
                break
    out: list[Candidate] = []
    for _, fn in EXTRACTORS:
        tables = shapes.get(fn, [])
        if tables:
            name, v = next(((n, t) for n, t in tables if GAIN in t.columns), tables[0])
            fn(name, v, h, max(n_locations, 1), out)
    for c in out:  # a call path whose balancing the what-if table predicts
        if not math.isfinite(c.gain) and not c.context and c.kind != "wait state":
            c.gain = h.balance_gain(c.call_path)
    return out
