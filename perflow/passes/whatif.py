"""What if a function were faster, balanced or gone, or the network faster: the run replayed with other durations.

The recorded trace is replayed (:mod:`perflow.trace.replay`) with the changed
durations, keeping every message, collective, barrier and thread dependency
and each location's order of work; waiting is recomputed, not subtracted.
So removing the slower of two overlapping slow functions saves only their
difference, and speeding up one stage of a pipeline saves only until another
stage sets the pace. Scenarios and their text form: :mod:`perflow.passes._whatif`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, pass_, settings_keywords
from perflow.sdk.trace import (
    OUTSIDE,
    ReplaySettings,
    call_path_column,
    check_choice,
    mpi_vertex_mask,
    name_column,
    require_trace,
)

from ._roi import SPANS, trace_window
from ._whatif import BALANCE, Change, Prediction, Scenario, predict, scenarios_from

__all__ = ["what_if", "what_if_table", "default_scenarios", "GAIN"]

#: The column every finding's predicted saving is reported in.
GAIN = "gain [s]"

_COLUMNS = ["scenario", "runtime [s]", "runtime_if [s]", GAIN, "gain [%]", "path_functions", "path_ranks"]


def default_scenarios(pag: PAG, window: tuple[float, float], top: int = 5) -> list[Scenario]:
    """What to ask when nothing is asked: an ideal network, and the ``top`` computation functions by time
    balanced and removed."""
    time_v = pag.aggregate("time_exc").to_numpy()  # partitioned on an engine: nothing is gathered
    comp = ~mpi_vertex_mask(pag)
    names = pag.vertex_table["name"].astype(str).to_numpy()
    by_name = pd.Series(np.where(comp, time_v, 0.0)).groupby(names).sum().sort_values(ascending=False, kind="stable")
    by_name = by_name[by_name > 0]
    out = [Scenario((Change(None, None, 0.0),), "ideal network (transfer time 0)")]
    for name in by_name.index[:top]:
        out.append(Scenario((Change(str(name), None, BALANCE),)))
        out.append(Scenario((Change(str(name), None, 0.0),)))
    return out


def _shares(values: np.ndarray, labels: np.ndarray, top: int) -> str:
    total = float(values.sum())
    if not total > 0:
        return ""
    o = np.argsort(-values, kind="stable")[:top]
    return ", ".join(f"{labels[i]} ({100.0 * values[i] / total:.0f}%)" for i in o if values[i] > 0)


def what_if_table(pag: PAG, preds: list[Prediction], window: tuple[float, float], top: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """The ``what_if`` table (one row per prediction) and the ``paths`` table (its critical paths per call path)."""
    n = pag.n_vertices
    T = float(window[1] - window[0])
    labels = np.array([*name_column(pag, np.arange(n)).astype(str), OUTSIDE], dtype=object)
    rows, paths = [], []
    for p in preds:
        T_if = p.runtime
        fun = ranks = ""
        if p.path is not None:
            cv = p.path.by_vertex
            g = pd.Series(cv).groupby(labels).sum()  # per function name
            fun = _shares(g.to_numpy(), g.index.to_numpy(), top)
            st = p.path.stretches
            per = st.groupby("process")["time"].sum() if len(st) else pd.Series(dtype=float)
            ranks = _shares(per.to_numpy(), per.index.to_numpy(), top)
            keep = np.flatnonzero(cv > 0)
            v = np.where(keep < n, keep, -1)
            paths.append(
                pd.DataFrame(
                    {
                        "scenario": p.scenario.name(),
                        "vertex": v,
                        "name": labels[keep],
                        "call_path": call_path_column(pag, v),
                        "cp_time [s]": cv[keep],
                        "cp_percent": 100.0 * cv[keep] / T_if if T_if > 0 else 0.0,
                    }
                ).sort_values("cp_time [s]", ascending=False, kind="stable")
            )
        rows.append((p.scenario.name(), T, T_if, T - T_if, 100.0 * (T - T_if) / T if T > 0 else np.nan, fun, ranks))
    table = pd.DataFrame(rows, columns=_COLUMNS)
    cols = ["scenario", "vertex", "name", "call_path", "cp_time [s]", "cp_percent"]
    path_t = pd.concat(paths, ignore_index=True) if paths else pd.DataFrame(columns=cols)
    return table, path_t.reset_index(drop=True)


@pass_(
    version="1",
    tags=("trace", "what-if", "replay"),
    outputs={"what_if": pd.DataFrame, "paths": pd.DataFrame},
)
@settings_keywords(ReplaySettings, "replay_settings")
def what_if(
    pag: PAG,
    *,
    function: Any = None,
    processes: Any = None,
    scale: Any = 0.0,
    network: float | None = None,
    scenarios: Any = None,
    callees: bool = True,
    span: str = "run",
    window: list[float] | None = None,
    region: str | None = None,
    top: int = 3,
    replay_settings: ReplaySettings,
) -> dict[str, pd.DataFrame]:
    """Predicted runtime if a function were faster, balanced or removed, or the network faster.

    The trace is replayed with the changed durations: every message,
    collective, barrier and thread dependency and each location's order are
    kept, eager sends do not wait for their receiver and rendezvous sends do,
    and waiting is recomputed (see docs/passes-trace.md, "What-if replay").

    Outputs
    -------
    what_if
        One row per scenario: ``scenario``, ``runtime [s]`` (as recorded, of
        the window), ``runtime_if [s]`` (predicted), ``gain [s]``, ``gain [%]``,
        and the critical path of the predicted run: ``path_functions`` and
        ``path_ranks`` (the functions and ranks it runs through, with their
        shares of its length).
    paths
        The critical paths: per scenario and call path ``cp_time [s]``
        (predicted time on the path) and ``cp_percent`` (of the predicted runtime).

    Parameters
    ----------
    function : str, int or list, optional
        What to change: a function name, a call path (``main/solve``), a glob
        over call paths and names (``*/pack*``) or a vertex id; a list changes
        several at once. Without ``function``, ``network`` and ``scenarios``:
        an ideal network, and the five functions with the most time balanced
        and removed.
    processes : int, list or str, optional
        The processes it changes on (``[1, 3]`` or ``"0,2-3"``; default all).
    scale : float, "balance" or list
        Factor on the function's time (0 removes it, 0.5 halves it), or
        ``"balance"``: each location's time in it set to the mean over the
        locations of those processes; a list gives one scenario per value.
    network : float, optional
        Factor on the time of communication calls beyond their waiting (0: an ideal network).
    scenarios : str, mapping or list, optional
        Several scenarios, one row each: text such as ``"solve@1=0.5 & network=0"``
        or mappings with ``function``, ``processes``, ``scale``, ``network``.
    callees : bool
        A function's time includes its callees (MPI calls in there excluded).
    span : str
        Region of interest without window or region: "run" (the whole trace) or
        "init_finalize" (from the end of MPI_Init to the start of MPI_Finalize).
    window : list of float, optional
        Region of interest ``[start, end]`` in trace time (s).
    region : str, optional
        Region of interest: the span of a call path's instances.
    top : int
        Functions and ranks named in ``path_functions`` / ``path_ranks``.
    """
    require_trace(pag, "what_if")
    check_choice("what_if", "span", span, SPANS)
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise PassError(f"pass 'what_if': top={top!r} must be a positive integer")
    t0, t1, desc = trace_window(pag, "what_if", region=region, window=window, span=span)
    sc = scenarios_from("what_if", function=function, processes=processes, scale=scale, network=network,
                        scenarios=scenarios)  # fmt: skip
    if not sc:
        sc = default_scenarios(pag, (t0, t1))
    base = predict(pag, [Scenario((), "as recorded (replayed)")], (t0, t1), "what_if", settings=replay_settings, path=False)[0]  # fmt: skip
    preds = predict(pag, sc, (t0, t1), "what_if", settings=replay_settings, callees=callees)
    table, paths = what_if_table(pag, preds, (t0, t1), top)
    T = t1 - t0
    table.attrs.update(region=desc, replayed_runtime=base.runtime)
    note = f"Region of interest: {desc}. Replayed without changes: {base.runtime:.6g} s of {T:.6g} s recorded."
    if T > 0 and abs(base.runtime - T) > 0.01 * T:
        note += (" The replay does not reproduce the recording within 1% (dependencies with untrusted timestamps, "
                 "or waiting the trace does not explain): read the gains against the replayed runtime.")  # fmt: skip
    table.attrs["note"] = note
    return {"what_if": table, "paths": paths}
