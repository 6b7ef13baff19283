"""The gains of the findings: predicted savings of balancing call paths, and those behind the POP factors.

Every finding of ``root_cause``, ``critical_path_imbalance`` and
``pop_metrics`` carries a ``gain [s]``: the runtime the what-if replay
(:mod:`perflow.passes._whatif`) saves if the finding were fixed. The gains
of a table are replayed in one compiled pass (:func:`perflow.trace.replay.run_many`)
and cached per PAG (:data:`BALANCE_GAINS`), so the passes of a flow that
report the same call path share them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perflow.sdk import PAG, Analysis, Settings
from perflow.sdk.trace import Plan, Rates, ReplayMode, ReplaySettings, require_trace, run_many

from ._whatif import BALANCE, Change, Scenario, _vertex_time, rates_for, replay_plan

__all__ = ["BalanceSettings", "BALANCE_GAINS", "balance_gains", "pop_replays"]


@dataclass(frozen=True)
class BalanceSettings(Settings):
    """Balance scenarios of :data:`BALANCE_GAINS`: each of ``vertices`` (comma-separated ids) on its own, its
    work balanced over all locations in ``[t0, t1]``, replayed with sends waiting as ``late_receiver`` says."""

    vertices: str = ""
    t0: float = 0.0
    t1: float = 0.0
    late_receiver: ReplayMode = ReplaySettings.late_receiver


def _balance_gains(pag: PAG, s: BalanceSettings) -> dict[int, float]:
    plan = replay_plan(pag, "balance_gains", s.late_receiver)
    verts = [int(v) for v in s.vertices.split(",") if v]
    w = (s.t0, s.t1)
    # each vertex's work per location in one pass over the plan's pieces (the same sums, in the same order,
    # as one pass per scenario), only for the vertices asked about
    vmap = np.full(pag.n_vertices, -1, np.int64)
    vmap[verts] = np.arange(len(verts))
    x = np.zeros((pag.n_vertices, plan.n_locations))
    x[verts] = _vertex_time(plan, vmap, len(verts), w)
    rates = [
        rates_for(pag, plan, Scenario((Change(v, None, BALANCE),)), w, "balance_gains", callees=False, vertex_times=x)
        for v in verts
    ]
    runtimes = run_many(plan, rates, w)
    return {v: (s.t1 - s.t0) - float(r) for v, r in zip(verts, runtimes, strict=True)}


#: predicted savings of balancing call paths, one replay pass for all of them (cached per PAG, list and
#: window; :func:`balance_gains` reuses what earlier lists computed, so the passes of a flow share them)
BALANCE_GAINS = Analysis(
    "whatif.balance_gains", compute=_balance_gains, settings=BalanceSettings, uses=frozenset({"trace", "vertices"}),
    doc="predicted runtime saving of balancing each of some call paths' work over the locations (s)",
)  # fmt: skip


def balance_gains(pag: PAG, vertices: np.ndarray, window: tuple[float, float] | None, pass_name: str, *,
                  late_receiver: ReplayMode = ReplaySettings.late_receiver, rows: int = -1) -> np.ndarray:  # fmt: skip
    """Predicted saving (s) of balancing each vertex's own work across all locations (NaN for -1 and, with
    ``rows >= 0``, for all but the first ``rows``)."""
    require_trace(pag, pass_name)
    t0, t1 = (float(x) for x in (window if window is not None else pag.trace.span))
    v = np.asarray(vertices, dtype=np.int64)
    out = np.full(len(v), np.nan)
    ok = np.flatnonzero(v >= 0)
    if rows >= 0:
        ok = ok[ok < rows]
    if not len(ok):
        return out
    known: dict[int, float] = {}
    for name, st in pag.analyses.entries():  # what earlier lists of this window computed
        if name == BALANCE_GAINS.name and (st.t0, st.t1, st.late_receiver) == (t0, t1, late_receiver):
            known.update(pag.analyses.get(BALANCE_GAINS, st))
    todo = sorted({int(x) for x in v[ok]} - set(known))
    if todo:
        known.update(pag.analyses.get(
            BALANCE_GAINS, owner=f"pass {pass_name!r}", vertices=",".join(map(str, todo)), t0=t0, t1=t1,
            late_receiver=late_receiver,
        ))  # fmt: skip
    out[ok] = [known[int(x)] for x in v[ok]]
    return out


def pop_replays(pag: PAG, useful: np.ndarray, window: tuple[float, float], pass_name: str,
                settings: ReplaySettings | str | None, gains: bool) -> tuple[np.ndarray, float, dict[str, float], Plan]:  # fmt: skip
    """What the POP metrics need of the replay over ``window``, in one pass: each location's useful time, the
    runtime on an ideal network (computation at its speed, everything else taking no time but its waiting)
    and, with ``gains``, the predicted savings behind the factors: every location's computation balanced
    (``load_balance``), an ideal network (``transfer_efficiency``, ``communication_efficiency``: the part
    of their loss a faster network recovers), both (``parallel_efficiency``)."""
    plan = replay_plan(pag, pass_name, settings)
    t0, t1 = float(window[0]), float(window[1])
    useful = np.asarray(useful, dtype=bool)
    vmap = np.where(useful, 0, -1).astype(np.int64)
    x = _vertex_time(plan, vmap, 1, (t0, t1))[0]
    rates = [Rates.uniform(useful.astype(np.float64), 0.0, useful)]
    if gains:
        F = np.where(x > 0, x.mean() / np.where(x > 0, x, 1.0), 1.0)[None, :] if len(x) else np.ones((1, 1))
        rates += [Rates(np.ones(len(useful)), vmap, F, 1.0, useful), Rates(useful.astype(np.float64), vmap, F, 0.0, useful)]  # fmt: skip
    runs = run_many(plan, rates, (t0, t1))
    T, ideal = t1 - t0, float(runs[0])
    g = {}
    if gains:
        g = {"load_balance": T - float(runs[1]), "transfer_efficiency": T - ideal, "communication_efficiency": T - ideal,
             "parallel_efficiency": T - float(runs[2])}  # fmt: skip
    return x, ideal, g, plan
