"""Critical-path analysis of traces (after Scalasca's critical-path profile).

The critical path is the longest path through the happens-before graph of a
run: local execution on each location, messages entering at their receive
completion, collective instances. It is found by a compiled backward walk
(:mod:`perflow.trace.critical`): from the end of the location that finishes
last, back along its timeline; at the end of a wait state the path moves, at
the same time, to the location waited for (the late sender, the receiver of a
synchronous send, the last process to reach a collective, the root). The
time the path spends in each call path is its critical-path time ``CP(c)``.

Derived numbers:

* critical-path imbalance ``cpi(c) = max(0, CP(c) - (time(c) - waits(c)) / N)``
  with ``time(c)`` the exclusive time of ``c`` summed over the ``N``
  locations and ``waits(c)`` the idle wait-state time charged to ``c``;
  a call path that is on the path longer than it runs on average (without
  its waiting) makes the run longer than a balanced one would be;
* the runtime on an ideal network ``T_ideal`` of the whole run, from the
  ideal-network replay that POP's metrics use
  (:func:`perflow.passes.pop.ideal_runtime`); the path length minus its MPI
  time is an upper bound of it, not always a tight one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, WaitSettings, pass_, settings_keywords
from perflow.sdk.profile import grouped, off_cpu_mask
from perflow.sdk.render import declare_aggregates
from perflow.sdk.trace import (
    OUTSIDE,
    CriticalSettings,
    call_path_column,
    check_choice,
    cp_for,
    exclusive_by_vertex,
    mpi_vertex_mask,
    n_locations,
    name_column,
    require_trace,
    source_column,
)

from ._gains import balance_gains
from ._waittime import charged_per_process
from .pop import ideal_runtime
from .whatif import GAIN

__all__ = ["critical_path", "critical_path_imbalance", "critical_path_tables"]

_PROFILE_COLS = ["vertex", "name", "call_path", "kind", "cp_time", "cp_percent", "time", "wait", "mean_nonwait", "cpi"]


def critical_path_tables(pag: PAG, pass_name: str, settings: WaitSettings | None = None) -> dict[str, Any]:
    """Segments, per-call-path profile and one-row summary of the critical path (see :func:`critical_path`).

    ``settings``: :class:`~perflow.trace.analyses.CriticalSettings` (or wait settings only).
    """
    trace = require_trace(pag, pass_name)
    cs = settings if isinstance(settings, CriticalSettings) else None
    ws = cs.waits() if cs is not None else (settings or WaitSettings())
    cp, waits = cp_for(pag, pass_name, cs if cs is not None else ws)
    n = pag.n_vertices
    time_v, outside_t = exclusive_by_vertex(pag, pass_name)
    g = grouped(pag, "time_exc", "process")  # waits charged as breakdown charges them (the one definition)
    charged = charged_per_process(pag, g, "time_exc", ws)
    wait_v = np.bincount(g.vertex, weights=charged, minlength=n)[:n]
    N = n_locations(pag)
    mean_nonwait = (time_v - wait_v) / N
    cpi = np.maximum(0.0, cp.cp_time - mean_nonwait)
    cpi[cpi <= 1e-12 * max(cp.length, 1e-300)] = 0.0  # rounding noise
    keep = np.flatnonzero((cp.cp_time > 0) | (time_v > 0))
    length = cp.length
    kinds = pag.vertex_table["kind"].astype(str).to_numpy()
    prof = pd.DataFrame(
        {
            "vertex": keep,
            "name": name_column(pag, keep),
            "call_path": call_path_column(pag, keep),
            "source": source_column(pag, keep),
            "kind": kinds[keep],
            "cp_time": cp.cp_time[keep],
            "cp_percent": 100.0 * cp.cp_time[keep] / length if length > 0 else 0.0,
            "time": time_v[keep],
            "wait": wait_v[keep],
            "mean_nonwait": mean_nonwait[keep],
            "cpi": cpi[keep],
        }
    )
    if cp.outside > 0 or outside_t > 0:
        out_row = pd.DataFrame(
            {
                "vertex": [-1],
                "name": [OUTSIDE],
                "call_path": [OUTSIDE],
                "kind": [""],
                "cp_time": [cp.outside],
                "cp_percent": [100.0 * cp.outside / length if length > 0 else 0.0],
                "time": [outside_t],
                "wait": [0.0],
                "mean_nonwait": [outside_t / N],
                "cpi": [max(0.0, cp.outside - outside_t / N)],
            }
        )
        prof = pd.concat([prof.astype({"name": object}), out_row], ignore_index=True)
    prof = prof.sort_values("cp_time", ascending=False, kind="stable").reset_index(drop=True)[_PROFILE_COLS]
    declare_aggregates(prof, pag, {"time": "sum", "wait": "sum", "mean_nonwait": "mean"})
    prof.attrs["units"] = {c: "s" for c in ("cp_time", "time", "wait", "mean_nonwait", "cpi")}
    mpi = mpi_vertex_mask(pag)
    mpi_on_path = float(cp.cp_time[mpi].sum())
    t0, t1 = trace.span
    seg = cp.segments.copy()
    seg.insert(seg.columns.get_loc("vertex") + 1, "name", name_column(pag, seg["vertex"].to_numpy()))
    summary = pd.DataFrame(
        {
            "length": [length],
            "start": [cp.start],
            "end": [cp.end],
            "runtime": [t1 - t0],
            "ideal_runtime": [ideal_runtime(pag, pass_name)],  # the replay POP uses (its plan is shared)
            "mpi_on_path": [mpi_on_path],
            "hops": [len(cp.hops)],
            "processes_on_path": [int(cp.hops["process"].nunique()) if len(cp.hops) else 0],
            "imbalance": [float(cpi.sum())],
        }
    )
    summary.attrs["units"] = {
        c: "s" for c in ("length", "start", "end", "runtime", "ideal_runtime", "mpi_on_path", "imbalance")
    }
    return {"segments": seg, "profile": prof, "summary": summary, "hops": cp.hops.copy()}


@pass_(
    version="7",
    tags=("trace", "critical-path"),
    outputs={"segments": pd.DataFrame, "profile": pd.DataFrame, "summary": pd.DataFrame},
)
@settings_keywords(CriticalSettings, "cp_settings")
def critical_path(pag: PAG, *, cp_settings: CriticalSettings) -> dict[str, pd.DataFrame]:
    """The critical path of a trace: its segments, its time per call path, and a summary.

    Outputs
    -------
    segments
        The path in time order, cut at region boundaries: ``process``,
        ``thread``, ``start``, ``end`` (s), ``vertex`` and ``name`` (the
        innermost region running there; -1 / "<outside regions>" between
        top-level regions), ``interval`` (its row in ``pag.trace.intervals``).
    profile
        One row per call path with time: ``vertex``, ``name``, ``call_path``,
        ``kind``, ``cp_time`` (time on the path, s), ``cp_percent`` (of the
        path length), ``time`` (exclusive time summed over locations),
        ``wait`` (idle waiting time charged there, :func:`perflow.passes.waitstates.waiting_time`), ``mean_nonwait``
        (``(time - wait) / N``), ``cpi`` (critical-path imbalance
        ``max(0, cp_time - mean_nonwait)``). Sorted by ``cp_time``.
    summary
        One row: ``length`` (path length), ``start``, ``end``, ``runtime``
        (trace span), ``ideal_runtime`` (runtime of the whole run on an ideal
        network, as in pop_metrics with span="run"),
        ``mpi_on_path``, ``hops`` (stretches on one location),
        ``processes_on_path``, ``imbalance`` (sum of ``cpi``).
    """
    t = critical_path_tables(pag, "critical_path", cp_settings)
    return {k: t[k] for k in ("segments", "profile", "summary")}


@pass_(version="5", tags=("trace", "critical-path", "imbalance"))
@settings_keywords(CriticalSettings, "cp_settings")
def critical_path_imbalance(
    pag: PAG, *, min_percent: float = 0.0, gains: int = 20, sort: str = "cpi", cp_settings: CriticalSettings
) -> pd.DataFrame:
    """Call paths by critical-path imbalance: how much longer each keeps the run than it would if balanced.

    The ``profile`` output of ``critical_path`` sorted by ``cpi`` (critical-path
    imbalance ``max(0, CP(c) - (time(c) - waits(c)) / N)``, in seconds), with
    ``cpi_percent`` (of the path length) and ``gain [s]`` added: the
    predicted saving in runtime if the call path's work were balanced over
    the locations (the what-if replay, :mod:`perflow.passes.whatif`; the cpi
    is the critical path's estimate of it, the gain the replay's, which
    accounts for the next-longest path); rows with ``cpi_percent`` below
    ``min_percent`` are left out, and so is time a recorded thread spent off
    the CPU (the ``off_cpu`` call paths: no code's; ``critical_path``'s
    profile shows it).

    Parameters
    ----------
    min_percent : float
        Smallest critical-path imbalance, in percent of the path length, to report.
    gains : int
        Rows (from the top) whose gain is predicted (-1: all, 0: none).
    sort : str
        Order of the rows: by "cpi" or by predicted "gain".
    """
    check_choice("critical_path_imbalance", "sort", sort, ("cpi", "gain"))
    if isinstance(gains, bool) or not isinstance(gains, int) or gains < -1:
        raise PassError(f"pass 'critical_path_imbalance': gains={gains!r} must be a number of rows (-1: all, 0: none)")
    t = critical_path_tables(pag, "critical_path_imbalance", cp_settings)
    prof = t["profile"]
    length = float(t["summary"]["length"].iloc[0])
    prof = prof.assign(cpi_percent=100.0 * prof["cpi"] / length if length > 0 else 0.0)
    v = prof["vertex"].to_numpy()
    code = ~np.where(v >= 0, off_cpu_mask(pag)[np.maximum(v, 0)], False)  # time off the CPU is no code's
    prof = prof[(prof["cpi"] > 0) & (prof["cpi_percent"] >= min_percent) & code]
    prof = prof.sort_values("cpi", ascending=False, kind="stable").reset_index(drop=True)
    prof[GAIN] = balance_gains(pag, prof["vertex"].to_numpy(), None, "critical_path_imbalance", rows=gains)
    if sort == "gain":
        prof = prof.sort_values(GAIN, ascending=False, kind="stable", na_position="last").reset_index(drop=True)
    return prof
