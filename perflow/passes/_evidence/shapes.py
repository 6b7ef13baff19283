"""Candidate findings by table shape: one extractor per kind of table (root causes, wait states, ...).

Each extractor reads one table recognised by its columns (:data:`EXTRACTORS`,
tried in order; see :mod:`perflow.passes._evidence`) and appends its
:class:`~perflow.passes._evidence.reading.Candidate` findings.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from perflow.sdk.trace import wait_label

from .reading import GAIN, Candidate, Helpers, fmt, num, over, where_cols

__all__ = ["EXTRACTORS", "OFF_CPU_LEAD", "cause_text", "hotspot_text"]


def _root_causes(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate]) -> None:
    _causes(name, df, h, n, out, off_cpu=False)


def _off_cpu(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate]) -> None:
    _causes(name, df, h, n, out, off_cpu=True)


def _kinds_caused(text: object) -> dict[str, float]:
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


#: How a root cause found off the CPU opens its line (the thread was descheduled, as on an oversubscribed
#: node, or blocked in a system call, in that call path).
OFF_CPU_LEAD = "off the CPU here (descheduled, or blocked in a system call), "


def cause_text(total: float, explains: dict[str, float], lead: str, tail: str = "") -> tuple[str, str]:
    """A root cause's line and its few words, from the waiting it causes in all and per wait kind."""
    parts = [f"{wait_label(k)} {fmt(a)}" for k, a in explains.items()]
    kinds = f" ({', '.join(parts)})" if parts else ""
    what = f"{lead}delays others: {fmt(total)} of waiting in total{kinds}{tail}"
    short = f"{'off the CPU: ' if lead.startswith(OFF_CPU_LEAD) else ''}root cause of {fmt(total)} of waiting"
    return what, short


def hotspot_text(share: float, value: float) -> str:
    """A hotspot's line: its share of the time and its time in all."""
    return f"{100 * share:.1f}% of the time ({fmt(value)} in total)" if math.isfinite(share) else f"{fmt(value)}"


def _causes(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate], *, off_cpu: bool) -> None:
    """Root causes: a call path whose delays make others wait (``off_cpu``: while off the CPU in it)."""
    total = df["total"].to_numpy(dtype=np.float64)
    keep = total >= 0.01 * max(float(np.nansum(total)), 1e-300)
    if off_cpu and "percent" in df.columns:  # and at least 1% of all the waiting analysed (not noise)
        keep &= pd.to_numeric(df["percent"], errors="coerce").fillna(0.0).to_numpy() >= 1.0
    locs = over(df, "total", n)
    lead = OFF_CPU_LEAD if off_cpu else ""
    for i in np.flatnonzero(keep):
        row = df.iloc[i]
        v, cp = where_cols(row)
        ov = int(num(row, "off_cpu_vertex", -1)) if off_cpu else -1
        procs = h.cause_processes(ov if off_cpu else v) or [int(num(row, "top_process", -1))]
        explains = _kinds_caused(row.get("causes"))  # the waiting caused per wait kind
        what, short = cause_text(float(total[i]), explains, lead)
        out.append(
            Candidate(
                "root cause",
                what,
                float(total[i]) / locs,
                v,
                cp,
                procs,
                num(row, GAIN),
                name,
                int(i),
                short=short,
                amount=float(total[i]),
                explains=explains,
                lead=lead,
            )
        )


def _waits(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate]) -> None:
    amount = df["amount"].to_numpy(dtype=np.float64)
    keep = amount >= 0.01 * max(float(np.nansum(amount)), 1e-300)
    locs = over(df, "amount", n)
    for i in np.flatnonzero(keep):
        row = df.iloc[i]
        v, cp = where_cols(row)
        kind = str(row["kind"])
        procs, window, who = h.wait_detail(v, kind)
        procs = procs or [int(num(row, "max_process", -1))]
        worst = num(row, "max_process_time")
        extra = f", most on rank {int(num(row, 'max_process', -1))} ({fmt(worst)})" if math.isfinite(worst) else ""
        what = f"{wait_label(kind)}{f' {who}' if who else ''}: {fmt(float(amount[i]))} in total{extra}"
        short = f"{wait_label(kind)} {fmt(float(amount[i]))}"
        out.append(
            Candidate(
                "wait state",
                what,
                float(amount[i]) / locs,
                v,
                cp,
                procs,
                num(row, GAIN),
                name,
                int(i),
                window,
                short=short,
                amount=float(amount[i]),
                wait_kind=kind,
            )
        )


def _cpi(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate]) -> None:
    cpi = df["cpi"].to_numpy(dtype=np.float64)
    top = float(np.nanmax(cpi)) if len(cpi) else 0.0
    for i in np.flatnonzero(cpi >= 0.05 * max(top, 1e-300)):
        row = df.iloc[i]
        v, cp = where_cols(row)
        if v < 0:
            continue
        procs, window = h.path_processes(v)
        on = num(row, "cp_time")
        what = f"critical-path imbalance {fmt(float(cpi[i]))}" + (
            f" ({fmt(on)} on the path, {fmt(num(row, 'mean_nonwait'))} per process on average)"
            if math.isfinite(on)
            else ""
        )
        short = f"critical-path imbalance {fmt(float(cpi[i]))}"
        out.append(
            Candidate(
                "critical-path imbalance",
                what,
                float(cpi[i]),
                v,
                cp,
                procs,
                num(row, GAIN),
                name,
                int(i),
                window,
                short=short,
            )
        )


def _imbalance(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate]) -> None:
    it = df["imbalance_time"].to_numpy(dtype=np.float64)
    top = float(np.nanmax(it)) if len(it) else 0.0
    for i in np.flatnonzero(it >= 0.05 * max(top, 1e-300)):
        row = df.iloc[i]
        v, cp = where_cols(row)
        mp = int(num(row, "max_process", -1))
        procs = h.outlier_processes(v) or [mp]
        what = f"load imbalance: {fmt(num(row, 'max'))} on rank {mp}, {fmt(num(row, 'mean'))} on average"
        short = f"load imbalance {fmt(float(it[i]))} (rank {mp})"
        out.append(
            Candidate("load imbalance", what, float(it[i]), v, cp, procs, num(row, GAIN), name, int(i), short=short)
        )


_POP_LOSS = {  # efficiency -> (seconds it stands for, what is lost)
    "load_balance": (lambda m: m["useful_max"] - m["useful_mean"], "useful work spread unevenly over the processes"),
    "serialisation_efficiency": (lambda m: m["ideal_runtime"] - m["useful_max"], "dependencies between processes"),
    "transfer_efficiency": (
        lambda m: m["runtime"] - m["ideal_runtime"],
        "time to move data (an ideal network would save it)",
    ),
}


def _pop(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate]) -> None:
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
        what = f"{metric.replace('_', ' ')} {100 * eff:.1f}%: {fmt(cost)} of the runtime lost to {why}"
        out.append(
            Candidate(
                "efficiency", what, cost, gain=float(gains.get(metric, math.nan)), output=name, row=row, window=window
            )
        )


def _scalability(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate]) -> None:
    loss = df["loss"].to_numpy(dtype=np.float64)
    for i in np.flatnonzero(loss > 0)[:10]:
        row = df.iloc[i]
        v, cp = where_cols(row)
        model = f", model {row['model']}" if "model" in row and isinstance(row["model"], str) else ""
        cause = ""
        if isinstance(row.get("cause"), str) and row["cause"]:
            cause = f"; root cause {row['cause']}" + (
                f" ({row['source']})" if isinstance(row.get("source"), str) and row["source"] else ""
            )
        what = f"does not scale: {fmt(float(loss[i]))} lost against ideal scaling at the largest run{model}{cause}"
        out.append(Candidate("scalability", what, float(loss[i]), v, cp, [], num(row, GAIN), name, int(i)))


def _slow(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate]) -> None:
    lost = df["lost"].to_numpy(dtype=np.float64)
    for i in np.flatnonzero(lost > 0)[:10]:
        row = df.iloc[i]
        code = str(row["code"]) if isinstance(row.get("code"), str) else ""
        s, e = num(row, "start"), num(row, "end")
        what = f"slow from {fmt(s)} to {fmt(e)}: {fmt(float(lost[i]))} lost"
        p = int(num(row, "process", -1))
        out.append(
            Candidate("variance", what, float(lost[i]), -1, "", [p], num(row, GAIN), name, int(i), (s, e), label=code)
        )


def _abnormal(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate]) -> None:
    seen: set[tuple[int, int]] = set()
    for i in range(len(df)):
        row = df.iloc[i]
        v, cp = where_cols(row)
        p = int(num(row, "process", -1))
        excess = num(row, "value") - num(row, "mean")
        if (v, p) in seen or not math.isfinite(excess) or excess <= 0:
            continue
        seen.add((v, p))
        what = (
            f"abnormally slow: {fmt(num(row, 'value'))} against {fmt(num(row, 'mean'))} on average"
            f" (backtracked from {row.get('symptom_name', 'a symptom')})"
        )
        out.append(Candidate("root cause", what, excess, v, cp, [p], num(row, GAIN), name, i))


def _changes(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate]) -> None:
    diff = df["diff"].to_numpy(dtype=np.float64)
    locs = over(df, "diff", n)
    for i in np.flatnonzero(diff > 0)[:10]:
        row = df.iloc[i]
        a, b = num(row, "value_a"), num(row, "value_b")
        rel = f" (+{100 * (b - a) / a:.0f}%)" if a > 0 else " (new)"
        run = f" in run {row['run']}" if "run" in row and isinstance(row["run"], str) else ""
        what = f"takes {fmt(float(diff[i]))} longer{run}{rel}: {fmt(a)} -> {fmt(b)}"
        cp = str(row["call_path"])
        short = f"+{fmt(float(diff[i]))}{run}"
        out.append(
            Candidate("change", what, float(diff[i]) / locs, -1, cp, [], num(row, GAIN), name, int(i), short=short)
        )


def _growth(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate]) -> None:
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
        v, cp = where_cols(row)
        fit = " (poor fit)" if bool(row.get("poor_fit", False)) else ""
        what = f"grows with the scale: {fmt(at[i])} at {last[-1][2:].split(' ')[0]} processes, {fmt(pred[i])} predicted{at_p}{fit}"
        out.append(Candidate("scalability", what, float(grow[i]), v, cp, [], num(row, GAIN), name, int(i)))


def _hotspots(name: str, df: pd.DataFrame, h: Helpers, n: int, out: list[Candidate]) -> None:
    value = df["value"].to_numpy(dtype=np.float64)
    locs = over(df, "value", n)
    for i in range(min(3, len(df))):
        row = df.iloc[i]
        v, cp = where_cols(row)
        share = num(row, "share")
        what = hotspot_text(share, float(value[i]))
        mp = int(num(row, "max_process", -1))
        out.append(
            Candidate(
                "hotspot",
                what,
                float(value[i]) / locs,
                v,
                cp,
                [mp] if mp >= 0 else [],
                num(row, GAIN),
                name,
                i,
                context=True,
                amount=float(value[i]),
                share=share,
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
