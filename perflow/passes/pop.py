"""POP efficiency metrics (the POP Centre of Excellence's hierarchy), for one run and across runs.

With ``U_p`` the useful (computation) time of location ``p`` (time outside
MPI calls and their callees, and outside OpenMP and threading runtime calls),
``T`` the runtime and ``T_ideal`` the runtime on an ideal network, all
measured over a region of interest:

===========================  ==========================================
load balance                 ``LB = mean(U) / max(U)``
communication efficiency     ``CommE = max(U) / T``
serialisation efficiency     ``SerE = max(U) / T_ideal``
transfer efficiency          ``TE = T_ideal / T``  (``CommE = SerE * TE``)
parallel efficiency          ``PE = LB * CommE = mean(U) / T``
===========================  ==========================================

``T_ideal`` comes from replaying the trace on an ideal network
(:func:`perflow.trace.replay.replay`): each location's computation in program
order, communication and synchronisation taking no time beyond waiting for
their dependencies. The replay never takes less than a location's computation
nor longer than the real run, so every efficiency lies in [0, 1].

The region of interest is, for a trace, a time window: by default from the
end of ``MPI_Init`` (the earliest one) to the start of ``MPI_Finalize`` (the
latest one), so that start-up and shut-down do not count; or the whole run;
or an explicit ``[t0, t1]``; or the span of a call path's instances. For a
profile it is the whole run or a call path's subtree (runtime: the largest
inclusive time of that call path on a location).

Across runs, against a reference run ``r`` (the one with the fewest locations
by default): computation scalability ``CompS = sum(U_r) / sum(U)`` for strong
scaling, ``(sum(U_r) / P_r) / (sum(U) / P)`` for weak scaling; global
efficiency ``GE = PE * CompS``. When the PAGs carry the counters
``PAPI_TOT_INS`` and ``PAPI_TOT_CYC``, instruction and IPC scalability are
added (``CompS`` is their product with frequency scalability).

:func:`pop_efficiencies` and :func:`pop_scalability` compute the same
numbers from plain numbers and arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, pass_, settings_keywords
from perflow.sdk.profile import descendants_mask
from perflow.sdk.trace import ReplaySettings, check_choice, ideal_replay, non_useful_mask, require_trace

from ._gains import pop_replays
from ._roi import SPANS, inclusive_per_location, init_finalize_vertices, region_vertices, trace_window
from .whatif import GAIN

__all__ = [
    "pop_efficiencies",
    "pop_scalability",
    "useful_time",
    "pop_metrics",
    "pop_scaling",
    "DEFAULT_NON_USEFUL",
    "ideal_runtime",
    "trace_window",
    "region_vertices",
]

#: Vertex kinds whose exclusive time is not useful computation.
DEFAULT_NON_USEFUL = ("mpi", "openmp", "thread")

_DESCRIPTIONS = {
    "parallel_efficiency": (0, "mean useful time / runtime"),
    "load_balance": (1, "mean useful time / max useful time"),
    "communication_efficiency": (1, "max useful time / runtime"),
    "serialisation_efficiency": (2, "max useful time / runtime on an ideal network"),
    "transfer_efficiency": (2, "runtime on an ideal network / runtime"),
    "runtime": (-1, "runtime of the region of interest (s)"),
    "ideal_runtime": (-1, "runtime on an ideal network: replay with instantaneous communication (s)"),
    "useful_mean": (-1, "mean useful time per location (s)"),
    "useful_max": (-1, "max useful time of a location (s)"),
    "useful_total": (-1, "useful time summed over locations (s)"),
    "locations": (-1, "number of (process, thread) locations"),
    "window_start": (-1, "start of the region of interest (trace time, s; NaN for profiles)"),
    "window_end": (-1, "end of the region of interest (trace time, s; NaN for profiles)"),
}


def pop_efficiencies(useful: Any, runtime: float, ideal_runtime: float | None = None) -> dict[str, float]:
    """POP efficiencies from per-location useful times, the runtime and (optionally) the ideal runtime.

    Parameters
    ----------
    useful : array_like
        Useful (computation) time of each location, in seconds.
    runtime : float
        Runtime of the run.
    ideal_runtime : float, optional
        Runtime on an ideal network; without it serialisation and transfer
        efficiency are NaN.

    Returns
    -------
    dict
        ``load_balance``, ``communication_efficiency``,
        ``parallel_efficiency``, ``serialisation_efficiency``,
        ``transfer_efficiency``, ``useful_mean``, ``useful_max``,
        ``useful_total``, ``runtime``, ``ideal_runtime``.

    Examples
    --------
    >>> e = pop_efficiencies([8, 6, 7, 5], 10, 9)
    >>> round(e["load_balance"], 4), e["communication_efficiency"], e["parallel_efficiency"]
    (0.8125, 0.8, 0.65)
    """
    u = np.asarray(useful, dtype=np.float64).ravel()
    if not len(u):
        raise PassError("POP metrics need the useful time of at least one location")
    if not runtime > 0:
        raise PassError(f"POP metrics need a positive runtime, got {runtime!r}")
    mean, mx = float(u.mean()), float(u.max())
    ideal = float(ideal_runtime) if ideal_runtime is not None and ideal_runtime >= 0 else np.nan
    return {
        "parallel_efficiency": mean / runtime,
        "load_balance": mean / mx if mx > 0 else np.nan,
        "communication_efficiency": mx / runtime,
        "serialisation_efficiency": mx / ideal if ideal > 0 else np.nan,
        "transfer_efficiency": ideal / runtime,
        "runtime": float(runtime),
        "ideal_runtime": ideal,
        "useful_mean": mean,
        "useful_max": mx,
        "useful_total": float(u.sum()),
        "locations": float(len(u)),
    }


def pop_scalability(
    useful_total: Any,
    nprocs: Any,
    parallel_efficiency: Any,
    *,
    scaling: str = "strong",
    reference: int = 0,
    instructions: Any = None,
    cycles: Any = None,
) -> dict[str, np.ndarray]:
    """Computation scalability and global efficiency of several runs against a reference run.

    Parameters
    ----------
    useful_total, nprocs, parallel_efficiency : array_like
        Per run: total useful time, number of locations, parallel efficiency.
    scaling : {"strong", "weak"}
        Strong scaling keeps the total work fixed, weak scaling the work per location.
    reference : int
        Index of the reference run.
    instructions, cycles : array_like, optional
        Per run: total useful instructions and cycles (for instruction and IPC scalability).

    Returns
    -------
    dict of numpy.ndarray
        ``computation_scalability``, ``global_efficiency`` and, with counters,
        ``instruction_scalability``, ``ipc_scalability``, ``frequency_scalability``.

    Examples
    --------
    >>> s = pop_scalability([100, 110], [4, 8], [0.9, 0.8])
    >>> [round(x, 4) for x in s["computation_scalability"]], [round(x, 4) for x in s["global_efficiency"]]
    ([1.0, 0.9091], [0.9, 0.7273])
    """
    u = np.asarray(useful_total, dtype=np.float64)
    p = np.asarray(nprocs, dtype=np.float64)
    pe = np.asarray(parallel_efficiency, dtype=np.float64)
    if scaling not in ("strong", "weak"):
        raise PassError(f"scaling must be 'strong' or 'weak', got {scaling!r}")
    if not 0 <= reference < len(u):
        raise PassError(f"reference run {reference} is not one of the {len(u)} runs")
    with np.errstate(divide="ignore", invalid="ignore"):
        if scaling == "strong":
            comp = u[reference] / u
        else:
            comp = (u[reference] / p[reference]) / (u / p)
        out = {"computation_scalability": comp, "global_efficiency": pe * comp}
        if instructions is not None and cycles is not None:
            ins = np.asarray(instructions, dtype=np.float64)
            cyc = np.asarray(cycles, dtype=np.float64)
            if scaling == "strong":
                ins_s = ins[reference] / ins
            else:
                ins_s = (ins[reference] / p[reference]) / (ins / p)
            ipc = ins / cyc
            ipc_s = ipc / ipc[reference]
            out["instruction_scalability"] = ins_s
            out["ipc_scalability"] = ipc_s
            out["frequency_scalability"] = comp / (ins_s * ipc_s)
    return out


def useful_time(pag: PAG, non_useful: Sequence[str] = DEFAULT_NON_USEFUL) -> pd.Series:
    """Useful time per (process, thread): exclusive time of the vertices whose kind is not in ``non_useful``.

    Callees of MPI calls (the MPI library's functions in sampled call paths) are MPI time too.
    """
    m = pag.metrics
    if "time_exc" not in m.columns:
        raise PassError("POP metrics need the metric 'time_exc'")
    v = np.asarray(m.index.codes[0])
    useful = ~non_useful_mask(pag, tuple(non_useful))
    x = m["time_exc"].to_numpy(dtype=np.float64) * useful[v]
    s = pd.Series(x, index=m.index).groupby(level=["process", "thread"]).sum()
    locs = pag.locations
    full = pd.MultiIndex.from_arrays(
        [locs["process"].to_numpy(), locs["thread"].to_numpy()], names=["process", "thread"]
    )
    return s.reindex(full, fill_value=0.0)


def _profile_numbers(
    pag: PAG, non_useful: Sequence[str], region: str | None, pass_name: str, span: str = "run"
) -> tuple[np.ndarray, float, str]:
    """Useful time per location and runtime of a profile (whole run, without MPI_Init/Finalize, or a subtree)."""
    m = pag.metrics
    if "time_inc" not in m.columns:
        raise PassError(f"pass {pass_name!r}: POP metrics need the metric 'time_inc' (or a trace) to know the runtime")
    if region is None:
        top, desc = np.asarray(pag.roots), "whole run"
        u = useful_time(pag, non_useful).to_numpy()
    else:
        top, desc = region_vertices(pag, region, pass_name), f"subtree of {region}"
        inside = descendants_mask(pag.tree_index, top, include_self=True)
        v = np.asarray(m.index.codes[0])
        useful = ~non_useful_mask(pag, tuple(non_useful)) & inside
        x = m["time_exc"].to_numpy(dtype=np.float64) * useful[v]
        s = pd.Series(x, index=m.index).groupby(level=["process", "thread"]).sum()
        locs = pag.locations
        full = pd.MultiIndex.from_arrays([locs["process"].to_numpy(), locs["thread"].to_numpy()])
        u = s.reindex(full, fill_value=0.0).to_numpy()
    per_loc = inclusive_per_location(pag, top)
    if region is None and span == "init_finalize":  # they run first and last: the rest is the span between them
        hit = init_finalize_vertices(pag)
        if len(hit):
            rest = per_loc.sub(inclusive_per_location(pag, hit), fill_value=0.0)
            if rest.max() > 0:  # else the run is nothing but MPI_Init and MPI_Finalize: keep it whole
                per_loc, desc = rest, "whole run without MPI_Init and MPI_Finalize"
    return u, float(per_loc.max()) if len(per_loc) else 0.0, desc


def ideal_runtime(
    pag: PAG,
    pass_name: str = "ideal_runtime",
    *,
    window: Sequence[float] | None = None,
    non_useful: Sequence[str] = DEFAULT_NON_USEFUL,
    replay_settings: ReplaySettings | None = None,
) -> float:
    """Runtime of a trace (or of a window of it) on an ideal network: the replay's, as POP uses it."""
    require_trace(pag, pass_name)
    useful = ~non_useful_mask(pag, tuple(non_useful))
    w = None if window is None else (float(window[0]), float(window[1]))
    rs = replay_settings or ReplaySettings()
    return ideal_replay(pag, useful, window=w, settings=rs).ideal_runtime


def _run_numbers(
    pag: PAG,
    pass_name: str,
    non_useful: Sequence[str],
    *,
    region: str | None = None,
    window: Sequence[float] | None = None,
    span: str = "init_finalize",
    replay_settings: ReplaySettings,
    gains: bool = False,
) -> tuple[dict[str, float], dict[str, Any]]:
    if not isinstance(pag, PAG):
        raise PassError(f"pass {pass_name!r} needs PAGs as input, got {type(pag).__name__}")
    if pag.trace is None or not pag.trace.n_intervals:
        if window is not None:
            raise PassError(f"pass {pass_name!r}: a time window needs a trace; this PAG is a profile")
        check_choice(pass_name, "span", span, SPANS)
        u, runtime, desc = _profile_numbers(pag, non_useful, region, pass_name, span)
        e = pop_efficiencies(u, runtime, None)
        e.update(window_start=np.nan, window_end=np.nan)
        return e, {"region": desc}

    t0, t1, desc = trace_window(pag, pass_name, region=region, window=window, span=span)
    useful = ~non_useful_mask(pag, tuple(non_useful))
    u, ideal, g, plan = pop_replays(pag, useful, (t0, t1), pass_name, replay_settings, gains)
    e = pop_efficiencies(u, t1 - t0, ideal)
    e.update(window_start=t0, window_end=t1)
    info = {"region": desc, "dependencies": plan.dependencies, "dependencies_skipped": plan.skipped, "gains": g}
    return e, info


@pass_(version="3", tags=("trace", "profile", "pop"))
@settings_keywords(ReplaySettings, "replay_settings")
def pop_metrics(
    pag: PAG,
    *,
    non_useful: list[str] | None = None,
    region: str | None = None,
    window: list[float] | None = None,
    span: str = "init_finalize",
    replay_settings: ReplaySettings,
) -> pd.DataFrame:
    """POP efficiency metrics of one run: parallel efficiency and its factors.

    One row per metric with ``metric``, ``value``, ``level`` (0 parallel
    efficiency, 1 its factors, 2 the factors of communication efficiency,
    -1 raw numbers), ``unit``, ``gain [s]`` and ``description``. The gain is
    the predicted saving in runtime (the what-if replay,
    :mod:`perflow.passes.whatif`, over the region of interest) if the
    factor's loss were fixed: every location's computation balanced
    (load balance), an ideal network (transfer and communication
    efficiency: the part of the loss a faster network recovers), both
    (parallel efficiency); NaN for serialisation (no change of durations
    removes it: it needs other dependencies) and the raw numbers, and for
    profiles. Useful time is time outside
    MPI calls (and their callees), OpenMP and threading calls, per (process,
    thread), inside the region of interest (``attrs["region"]`` says which).
    For traces the ideal runtime comes from an ideal-network replay
    (:func:`perflow.trace.replay.replay`); for profiles serialisation and
    transfer efficiency are NaN and the runtime is the largest inclusive time
    of the region's root on a location.

    Parameters
    ----------
    non_useful : list of str, optional
        Vertex kinds whose time is not useful (default: mpi, openmp, thread).
    region : str, optional
        Region of interest: a call path (``main/solve``) or a vertex name. For a
        trace, the window from its first enter to its last leave; for a
        profile, its subtree.
    window : list of float, optional
        Region of interest of a trace as ``[start, end]`` in trace time (s).
    span : str
        Without region or window: ``"init_finalize"`` (default; from the end of
        MPI_Init to the start of MPI_Finalize, or the whole run when the trace
        has neither; for a profile the runtime without the time in MPI_Init and
        MPI_Finalize) or ``"run"`` (the whole run).
    """
    nu = tuple(non_useful) if non_useful is not None else DEFAULT_NON_USEFUL
    e, info = _run_numbers(
        pag, "pop_metrics", nu, region=region, window=window, span=span, replay_settings=replay_settings, gains=True
    )
    g = info.pop("gains", {})
    rows = [(k, e[k], lvl, _unit(k), g.get(k, np.nan), d) for k, (lvl, d) in _DESCRIPTIONS.items()]
    df = pd.DataFrame(rows, columns=["metric", "value", "level", "unit", GAIN, "description"])
    df.attrs.update(info)
    note = f"Region of interest: {info['region']}."
    if info.get("dependencies_skipped"):
        note += f" {info['dependencies_skipped']} dependencies with untrusted timestamps were left out of the replay."
    df.attrs["note"] = note
    return df


def _unit(metric: str) -> str:
    if metric == "locations":
        return "count"
    return (
        "s"
        if metric in ("runtime", "ideal_runtime", "window_start", "window_end") or metric.startswith("useful")
        else "ratio"
    )


def _counter_total(pag: PAG, name: str, non_useful: Sequence[str]) -> float | None:
    if name not in pag.metric_names:
        return None
    mi = pag.metric_info.get(name)
    useful = ~non_useful_mask(pag, tuple(non_useful))
    col = pag.aggregate(name, "sum").to_numpy()
    if mi is not None and mi.mode == "inclusive":  # exclusive share: own minus children
        parent = pag.vertex_table["parent"].to_numpy()
        child_sum = np.bincount(parent[parent >= 0], weights=col[parent >= 0], minlength=len(col))
        col = col - child_sum
    return float(col[useful].sum())


@pass_(version="3", tags=("trace", "profile", "pop", "scaling"))
@settings_keywords(ReplaySettings, "replay_settings")
def pop_scaling(
    pags: list[PAG],
    *,
    scaling: str = "strong",
    reference: int | None = None,
    non_useful: list[str] | None = None,
    region: str | None = None,
    span: str = "init_finalize",
    replay_settings: ReplaySettings,
) -> pd.DataFrame:
    """POP metrics across runs of one program at different scales.

    One row per run, sorted by ``locations``: ``run`` (position in the input),
    ``locations``, ``runtime``, ``speedup`` (reference runtime / runtime),
    ``useful_total``, the single-run efficiencies (``parallel_efficiency``,
    ``load_balance``, ``communication_efficiency``,
    ``serialisation_efficiency``, ``transfer_efficiency``),
    ``computation_scalability`` and ``global_efficiency`` (and
    ``instruction_scalability``, ``ipc_scalability``,
    ``frequency_scalability`` when every run has PAPI_TOT_INS and PAPI_TOT_CYC).

    Parameters
    ----------
    scaling : str
        "strong" (fixed total work) or "weak" (fixed work per location).
    reference : int, optional
        Input position of the reference run (default: the one with the fewest locations).
    non_useful : list of str, optional
        Vertex kinds whose time is not useful (default: mpi, openmp, thread).
    region : str, optional
        Region of interest in every run (a call path or vertex name; see pop_metrics).
    span : str
        Default region of interest of traces: "init_finalize" or "run".
    """
    check_choice("pop_scaling", "scaling", scaling, ("strong", "weak"))
    if not isinstance(pags, list | tuple) or not pags:
        raise PassError("pass 'pop_scaling' needs a non-empty list of PAGs (one per run)")
    nu = tuple(non_useful) if non_useful is not None else DEFAULT_NON_USEFUL
    runs = [
        _run_numbers(p, "pop_scaling", nu, region=region, span=span, replay_settings=replay_settings)[0] for p in pags
    ]
    df = pd.DataFrame(runs)
    df.insert(0, "run", np.arange(len(runs)))
    df["locations"] = df["locations"].astype(int)
    ref = int(np.argmin(df["locations"].to_numpy())) if reference is None else int(reference)
    if not 0 <= ref < len(runs):
        raise PassError(f"pass 'pop_scaling': reference={reference} is not a run position 0..{len(runs) - 1}")
    ins = [_counter_total(p, "PAPI_TOT_INS", nu) for p in pags]
    cyc = [_counter_total(p, "PAPI_TOT_CYC", nu) for p in pags]
    have = all(x is not None for x in ins + cyc)
    s = pop_scalability(
        df["useful_total"],
        df["locations"],
        df["parallel_efficiency"],
        scaling=scaling,
        reference=ref,
        instructions=ins if have else None,
        cycles=cyc if have else None,
    )
    for k, v in s.items():
        df[k] = v
    df["speedup"] = df["runtime"].iloc[ref] / df["runtime"]
    first = [
        "run",
        "locations",
        "runtime",
        "speedup",
        "useful_total",
        "parallel_efficiency",
        "load_balance",
        "communication_efficiency",
        "serialisation_efficiency",
        "transfer_efficiency",
        "computation_scalability",
        "global_efficiency",
    ]
    rest = [c for c in ("instruction_scalability", "ipc_scalability", "frequency_scalability") if c in df.columns]
    return df[first + rest].sort_values("locations", kind="stable").reset_index(drop=True)
