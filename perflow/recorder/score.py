"""``perflow score``: what recording each function costs, and a filter file that removes the costly ones.

After Score-P's ``scorep-score``: from a recording of a program built with
``perflow cc``/``cxx``/``fc``, one row per instrumented function and per MPI
function (summed over the ranks):

* ``type``: ``MPI`` (an MPI function), ``COM`` (a user function that calls
  MPI, directly or below it), ``USR`` (a user function that does not);
* ``visits``: its calls, counted by the recorder's hooks (recorded or not:
  calls dropped by ``--min-call``, calls after the function was switched
  off, calls of functions the filter excluded);
* ``events``, ``bytes``: the records a recording of every visit writes (an
  Enter and a Leave per visit, plus an MPI call's message and collective
  records), at 48 bytes each;
* ``time``: inclusive time, from the recorded calls plus the measured time
  of the dropped ones; the calls never timed (after a function was switched
  off) are estimated at the dropped calls' mean; nan for functions the filter
  excluded (never timed);
* ``time/visit``, and ``overhead``: what recording every visit costs,
  ``visits x`` :data:`CALL_COST` (a recorded call of an instrumented
  function: two clock reads and two records, measured by
  ``benchmarks/bench_instrumentation.py``; :data:`MPI_CALL_COST` for an MPI
  call), in seconds and as a share of the function's time.

The filter (:func:`score_filter`, Score-P syntax) excludes the ``USR``
functions whose time per visit is below ``threshold`` (default 10 us, where a
recorded call adds more than about 1 % to the function) or that the
recorder switched off as too short; ``COM`` and ``MPI`` functions and
``main`` are kept. The column ``flt`` shows ``-`` for what a filter
excludes, ``+`` for what it keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import FormatError
from ..trace.raw import RawTrace
from .filters import Filter, Rule, glob_escape

__all__ = ["score", "score_filter", "score_text", "CALL_COST", "MPI_CALL_COST", "RECORD_BYTES", "THRESHOLD"]

#: Seconds a recorded call of an instrumented function costs (Enter and Leave records, two clock reads).
CALL_COST = 1.2e-7
#: Seconds a recorded MPI call costs (the wrapper, its records and a cached call context).
MPI_CALL_COST = 1.5e-7
#: Bytes of one event record.
RECORD_BYTES = 48
#: Default time per visit (seconds) below which ``score_filter`` excludes a USR function.
THRESHOLD = 1e-5

_COLUMNS = ["flt", "type", "visits", "events", "bytes", "time", "time_pct", "time_per_visit", "overhead",
            "overhead_pct", "region", "file", "line"]  # fmt: skip


def _instances(raw: RawTrace) -> pd.DataFrame:
    """Every region instance: location, region, enter and leave index and time (nesting matched by level)."""
    ev = raw.region_events
    n = len(ev["time"])
    if not n:
        return pd.DataFrame({c: [] for c in ("location", "region", "ienter", "ileave", "duration")})
    loc = np.asarray(ev["location"], np.int64)
    kind = np.asarray(ev["kind"])
    delta = np.where(kind == 0, 1, -1)
    depth = np.cumsum(delta)
    starts = np.r_[0, np.flatnonzero(np.diff(loc)) + 1]
    base = np.repeat(depth[starts] - delta[starts], np.diff(np.r_[starts, n]))
    depth = depth - base  # per location
    level = np.where(kind == 0, depth, depth + 1)
    order = np.lexsort((np.arange(n), level, loc))
    k = kind[order]
    enters = order[k == 0]
    leaves = order[k == 1]
    m = min(len(enters), len(leaves))
    # within a (location, level) the records alternate Enter, Leave: pair them in order
    enters, leaves = enters[:m], leaves[:m]
    ok = (loc[enters] == loc[leaves]) & (level[enters] == level[leaves]) & (leaves > enters)
    enters, leaves = enters[ok], leaves[ok]
    t = np.asarray(ev["time"], np.float64)
    return pd.DataFrame(
        {
            "location": loc[enters],
            "region": np.asarray(ev["region"], np.int64)[enters],
            "ienter": enters,
            "ileave": leaves,
            "duration": t[leaves] - t[enters],
        }
    )


@dataclass
class Score:
    """The table of :func:`score` and the run's totals."""

    table: pd.DataFrame
    ranks: int
    run_time: float
    events: int

    def totals(self) -> pd.DataFrame:
        """``ALL`` and one row per type, as the first lines of ``scorep-score``."""
        rows = []
        for name, sel in [("ALL", slice(None))] + [(t, self.table["type"] == t) for t in ("USR", "COM", "MPI")]:
            d = self.table.loc[sel]
            if name != "ALL" and not len(d):
                continue
            v = float(d["visits"].sum())
            # inclusive times of nested functions overlap: the run time for ALL, MPI calls do not nest
            tm = self.run_time if name == "ALL" else float(np.nansum(d["time"])) if name == "MPI" else np.nan
            rows.append(
                {
                    "flt": "",
                    "type": name,
                    "visits": int(v),
                    "events": int(d["events"].sum()),
                    "bytes": int(d["bytes"].sum()),
                    "time": tm,
                    "time_pct": 100.0 * tm / self.run_time if self.run_time > 0 else np.nan,
                    "time_per_visit": tm / v if v else np.nan,
                    "overhead": float(d["overhead"].sum()),
                    "overhead_pct": 100.0 * float(d["overhead"].sum()) / tm if tm > 0 else np.nan,  # nan-safe
                    "region": name,
                }
            )
        return pd.DataFrame(rows)


def score(raw: RawTrace) -> Score:
    """Per-function cost of recording a run (see the module docstring).

    Raises
    ------
    FormatError
        When the run has no instrumented function and no MPI call to score.
    """
    regions = raw.regions
    inst = _instances(raw)
    n = len(raw.region_events["time"])
    is_mpi = (regions["paradigm"] == "mpi").to_numpy()
    # records inside each MPI instance (messages, collectives, ...): by the region record that follows them
    extra = np.zeros(n + 1, np.int64)
    for tab in (raw.p2p_events, raw.coll_events, raw.rma_events, raw.metric_events):
        pos = np.asarray(tab.get("pos", []), np.int64)
        if len(pos):
            extra += np.bincount(np.minimum(pos, n), minlength=n + 1)
    cum_extra = np.r_[0, np.cumsum(extra[:n])]
    reg_all = np.asarray(raw.region_events["region"], np.int64)
    kinds = np.asarray(raw.region_events["kind"])
    mpi_enter = (kinds == 0) & is_mpi[reg_all] if n else np.zeros(0, bool)
    cum_mpi = np.r_[0, np.cumsum(mpi_enter)]
    inst["mpi_inside"] = cum_mpi[inst["ileave"].to_numpy()] - cum_mpi[inst["ienter"].to_numpy() + 1]
    inst["records"] = 2 + cum_extra[inst["ileave"].to_numpy() + 1] - cum_extra[inst["ienter"].to_numpy() + 1]
    inst = inst[inst["region"] != int(raw.attrs.get("root_region", 0))]
    per = inst.groupby("region").agg(
        visits=("duration", "size"),
        time=("duration", "sum"),
        records=("records", "sum"),
        com=("mpi_inside", "max"),
    )
    # the recorder's own counts: visits of every instrumented function, recorded or not
    calls = raw.attrs.get("function_calls")
    if calls and calls.get("rows"):
        c = pd.DataFrame(calls["rows"], columns=calls["columns"]).groupby("region").sum(numeric_only=True)
        c["off"] = pd.DataFrame(calls["rows"], columns=calls["columns"]).groupby("region")["off"].max()
        hook = c[["visits", "recorded", "dropped", "dropped_time", "off"]].rename(columns={"visits": "visits_hook"})
        per = per.join(hook, how="outer")
        have = per["visits_hook"].notna()
        # time of the calls never timed: at the mean of the measured short calls (unknown when filtered)
        untimed = (per["visits_hook"] - per["recorded"]).clip(lower=0)
        mean_short = per["dropped_time"] / per["dropped"].where(per["dropped"] > 0)
        est = untimed * mean_short.fillna(0.0)
        time = per["time"].fillna(0.0) + per["dropped_time"].fillna(0.0) + est
        time = time.where(~(have & (per["off"] == 2) & (per["recorded"] == 0)), np.nan)
        per["time"] = np.where(have, time, per["time"])
        per["visits"] = np.where(have, per["visits_hook"], per["visits"])
        per["records"] = np.where(have, 2 * per["visits_hook"], per["records"])
        per["off"] = per["off"].fillna(0)
    else:
        per["off"] = 0
    if not len(per):
        raise FormatError(raw.attrs.get("source", "run"), "nothing to score: no instrumented function and no MPI call")
    per["com"] = per["com"].fillna(0)
    # user functions on the calling context of an MPI call are COM too
    stacks = raw.stacks
    if stacks is not None and len(stacks):
        mpi_stacks = regions.loc[is_mpi & (regions["stack"].to_numpy() >= 0), "stack"].unique()
        on_path = stacks.loc[stacks["stack"].isin(mpi_stacks), "region"].unique()
        per.loc[per.index.isin(on_path), "com"] = 1
    rid = per.index.to_numpy(np.int64)
    mpi = is_mpi[rid]
    typ = np.where(mpi, "MPI", np.where(per["com"].to_numpy() > 0, "COM", "USR"))
    visits = per["visits"].to_numpy(np.float64)
    time = per["time"].to_numpy(np.float64)
    overhead = visits * np.where(mpi, MPI_CALL_COST, CALL_COST)
    table = pd.DataFrame(
        {
            "flt": "",
            "type": typ,
            "visits": visits.astype(np.int64),
            "events": per["records"].to_numpy(np.int64),
            "bytes": per["records"].to_numpy(np.int64) * RECORD_BYTES,
            "time": time,
            "time_per_visit": np.where(visits > 0, time / np.maximum(visits, 1), np.nan),
            "overhead": overhead,
            "off": per["off"].to_numpy(np.int64),
        },
        index=rid,
    )
    # MPI functions are one region per call site: one row per function name, as a user sees them
    names = regions["name"].to_numpy()[rid]
    table["region"] = names
    table["file"] = np.where(mpi, "", regions["file"].to_numpy()[rid])
    table["line"] = np.where(mpi, 0, regions["line"].to_numpy()[rid])
    key = np.where(mpi, names, rid.astype(str))
    table = (
        table.groupby(key, sort=False)
        .agg(
            flt=("flt", "first"),
            type=("type", "first"),
            visits=("visits", "sum"),
            events=("events", "sum"),
            bytes=("bytes", "sum"),
            time=("time", "sum"),
            overhead=("overhead", "sum"),
            off=("off", "max"),
            region=("region", "first"),
            file=("file", "first"),
            line=("line", "first"),
        )  # fmt: skip
        .reset_index(drop=True)
    )
    table["time"] = table["time"].where(table["time"] > 0, np.nan).where(table["visits"] > 0, 0.0)
    rt = _run_time(raw)
    table["time_pct"] = 100.0 * table["time"] / rt if rt > 0 else np.nan
    table["time_per_visit"] = table["time"] / table["visits"].where(table["visits"] > 0)
    table["overhead_pct"] = 100.0 * table["overhead"] / table["time"]
    table = table.sort_values(["bytes", "region"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return Score(table[[*_COLUMNS, "off"]], len(raw.locations), rt, int(n))


def _run_time(raw: RawTrace) -> float:
    """The root region's time summed over the locations (rank-seconds)."""
    ev = raw.region_events
    if not len(ev["time"]):
        return 0.0
    loc = np.asarray(ev["location"])
    t = np.asarray(ev["time"], np.float64)
    return float(sum(t[loc == k].max() - t[loc == k].min() for k in np.unique(loc)))


def score_filter(sc: Score, threshold: float = THRESHOLD) -> Filter:
    """A filter excluding the ``USR`` functions shorter than ``threshold`` per visit, or switched off as too short."""
    t = sc.table
    short = (t["time_per_visit"] < threshold) | (t["off"] == 1)
    sel = (t["type"] == "USR") & short & (t["region"] != "main") & (t["visits"] > 0)
    names = sorted(set(t.loc[sel, "region"]))
    return Filter(names=[Rule(include=False, pattern=glob_escape(n)) for n in names], source="perflow score")


def apply_filter(sc: Score, flt: Filter) -> None:
    """Fill the ``flt`` column: ``-`` for the functions ``flt`` excludes, ``+`` for the others."""
    t = sc.table
    excl = [flt.excludes(r, f) if ty != "MPI" else False for r, f, ty in zip(t["region"], t["file"], t["type"])]
    t["flt"] = np.where(excl, "-", "+")


def score_text(sc: Score, *, top: int | None = None) -> str:
    """The report as ``scorep-score -r`` prints it: totals, the effect of the filter, then one row per function."""
    t = sc.table
    excl = t["flt"] == "-"
    ov_all = float(t["overhead"].sum())
    ov_kept = float(t.loc[~excl, "overhead"].sum())
    lines = [
        f"ranks: {sc.ranks}   recorded events: {sc.events:,}   run time: {sc.run_time:.4g} rank-seconds",
        f"recording every call: {int(t['events'].sum()):,} events ({_size(int(t['bytes'].sum()))}), estimated "
        f"overhead {ov_all:.3g} s ({_pct(ov_all, sc.run_time)} of the run time)",
    ]
    if excl.any():
        lines.append(
            f"with the filter (flt '-': {int(excl.sum())} functions excluded): "
            f"{int(t.loc[~excl, 'events'].sum()):,} events ({_size(int(t.loc[~excl, 'bytes'].sum()))}), estimated "
            f"overhead {ov_kept:.3g} s ({_pct(ov_kept, sc.run_time)})"
        )
    head = (
        f"{'flt':>3} {'type':>4} {'visits':>12} {'events':>12} {'bytes':>10} {'time[s]':>9} {'time[%]':>7} "
        f"{'time/visit[us]':>14} {'overhead[s]':>11} {'overhead[%]':>11}  region"
    )
    lines += ["", head]

    def row(r: pd.Series) -> str:
        def num(v: float, f: str) -> str:
            return format(v, f) if np.isfinite(v) else "-"

        return (
            f"{r['flt']:>3} {r['type']:>4} {int(r['visits']):>12,} {int(r['events']):>12,} {_size(int(r['bytes'])):>10} "
            f"{num(r['time'], '.4g'):>9} {num(r['time_pct'], '.1f'):>7} "
            f"{num(r['time_per_visit'] * 1e6, '.4g'):>14} {num(r['overhead'], '.3g'):>11} "
            f"{num(r['overhead_pct'], '.1f'):>11}  {r['region']}"
        )

    for _, r in sc.totals().iterrows():
        lines.append(row(r))
    lines.append("")
    shown = t if top is None else t.head(top)
    for _, r in shown.iterrows():
        lines.append(row(r))
    if top is not None and len(t) > top:
        lines.append(f"... {len(t) - top} more (--top 0 shows all)")
    return "\n".join(lines)


def _size(b: int) -> str:
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= f:
            return f"{b / f:.1f} {unit}"
    return f"{b} B"


def _pct(x: float, of: float) -> str:
    return f"{100.0 * x / of:.2g} %" if of > 0 else "-"
