"""What-if scenarios on a trace-backed PAG: changes to durations, resolved to replay rates, replayed.

A **scenario** is one or more **changes** made at once:

* a function (a vertex name, a call path, a glob over call paths and names,
  or a vertex id) on some or all processes, its work scaled by a factor
  (``0`` removes it, ``0.5`` halves it) or **balanced**: on each location its
  time set to the mean over the locations of those processes;
* the network: the time of communication calls beyond their waiting scaled.

The text form (the ``scenarios`` setting of ``what_if``) writes one change as
``FUNCTION[@PROCESSES]=SCALE`` or ``network=SCALE`` and joins the changes of
one scenario with ``&``: ``"solve=0.5"``, ``"pack@0,2-3=balance & network=0"``.
Every scenario is replayed by the one engine (:mod:`perflow.trace.replay`);
:func:`predict` returns the predicted runtimes and the critical paths.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

import numpy as np

from perflow.sdk import PAG, PassError
from perflow.sdk.profile import descendants_mask
from perflow.sdk.trace import (
    REPLAY_PLAN,
    Plan,
    Rates,
    ReplayPath,
    ReplaySettings,
    Run,
    mpi_vertex_mask,
    replay_path,
    require_trace,
    run_plan,
    vertex_time,
)

__all__ = [
    "Change",
    "Scenario",
    "Prediction",
    "parse_scenario",
    "scenarios_from",
    "predict",
    "rates_for",
    "replay_plan",
    "vertex_times",
]

BALANCE = "balance"


@dataclass(frozen=True)
class Change:
    """One change of a scenario: ``function`` (None: the network) on ``processes`` (None: all) by ``scale``."""

    function: str | int | None = None
    processes: tuple[int, ...] | None = None
    scale: float | str = 0.0

    def label(self) -> str:
        """The change in the text form."""
        if self.function is None:
            return f"network={_num(self.scale)}"
        procs = f"@{_ranges(self.processes)}" if self.processes is not None else ""
        return f"{self.function}{procs}={_num(self.scale)}"


@dataclass(frozen=True)
class Scenario:
    """Changes made at once, and a label for the table."""

    changes: tuple[Change, ...]
    label: str = ""

    def name(self) -> str:
        """Its label, or its changes in the text form."""
        return self.label or " & ".join(c.label() for c in self.changes)


def _num(x: float | str) -> str:
    return x if isinstance(x, str) else f"{float(x):g}"


def _ranges(procs: tuple[int, ...]) -> str:
    out, p = [], sorted(set(procs))
    i = 0
    while i < len(p):
        j = i
        while j + 1 < len(p) and p[j + 1] == p[j] + 1:
            j += 1
        out.append(str(p[i]) if i == j else f"{p[i]}-{p[j]}")
        i = j + 1
    return ",".join(out)


def parse_processes(value: Any, pass_name: str) -> tuple[int, ...] | None:
    """Processes from ``None`` (all), an int, a list of ints, or text such as ``"0,2-3"``."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "all")):
        return None
    if isinstance(value, bool):
        raise PassError(f"pass {pass_name!r}: processes={value!r} is not a process list")
    if isinstance(value, int):
        return (int(value),)
    if isinstance(value, list | tuple):
        out = []
        for v in value:
            if isinstance(v, bool) or not isinstance(v, int | str):
                raise PassError(f"pass {pass_name!r}: processes={value!r}: {v!r} is not a process")
            out.extend(parse_processes(v, pass_name) or ())
        return tuple(sorted(set(out)))
    if isinstance(value, str):
        out = []
        for part in value.replace(" ", "").split(","):
            a, dash, b = part.partition("-")
            try:
                lo, hi = int(a), int(b if dash else a)
            except ValueError:
                raise PassError(
                    f"pass {pass_name!r}: processes={value!r}: {part!r} is not a rank or range a-b"
                ) from None
            if hi < lo or lo < 0:
                raise PassError(f"pass {pass_name!r}: processes={value!r}: empty range {part!r}")
            out.extend(range(lo, hi + 1))
        return tuple(sorted(set(out)))
    raise PassError(f"pass {pass_name!r}: processes={value!r} is not a process list")


def parse_scale(value: Any, pass_name: str, what: str = "scale") -> float | str:
    """A scale: a number >= 0 or ``"balance"``."""
    if isinstance(value, str):
        v = value.strip().lower()
        if v == BALANCE:
            return BALANCE
        try:
            value = float(v)
        except ValueError:
            raise PassError(f"pass {pass_name!r}: {what}={value!r} is neither a number nor 'balance'") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value) or value < 0:
        raise PassError(f"pass {pass_name!r}: {what}={value!r} must be a number >= 0 or 'balance'")
    return float(value)


def _change(item: Any, pass_name: str) -> Change:
    if isinstance(item, Change):
        return item
    if isinstance(item, dict):
        unknown = sorted(set(item) - {"function", "processes", "scale", "network"})
        if unknown:
            raise PassError(f"pass {pass_name!r}: unknown key(s) {unknown} in scenario {item!r} "
                            "(keys: function, processes, scale, network)")  # fmt: skip
        if "network" in item:
            if "function" in item:
                raise PassError(f"pass {pass_name!r}: scenario {item!r}: give function or network in one change")
            net = parse_scale(item["network"], pass_name, "network")
            if net == BALANCE:
                raise PassError(f"pass {pass_name!r}: network={item['network']!r} must be a number >= 0")
            return Change(None, None, net)
        if "function" not in item:
            raise PassError(f"pass {pass_name!r}: scenario {item!r} names no function and no network")
        return Change(_function(item["function"], pass_name), parse_processes(item.get("processes"), pass_name),
                      parse_scale(item.get("scale", 0.0), pass_name))  # fmt: skip
    if isinstance(item, str):
        text = item.strip()
        lhs, eq, rhs = text.rpartition("=")
        if not eq or not lhs.strip():
            raise PassError(
                f"pass {pass_name!r}: scenario change {item!r} is not FUNCTION[@PROCESSES]=SCALE or network=SCALE"
            )
        lhs = lhs.strip()
        if lhs.lower() == "network":
            return _change({"network": rhs}, pass_name)
        func, at, procs = lhs.rpartition("@") if "@" in lhs else (lhs, "", "")
        return _change({"function": func.strip(), "processes": procs if at else None, "scale": rhs}, pass_name)
    raise PassError(f"pass {pass_name!r}: a scenario change is a string or a mapping, not {type(item).__name__}")


def _function(value: Any, pass_name: str) -> str | int:
    if isinstance(value, bool) or not isinstance(value, int | str) or (isinstance(value, str) and not value.strip()):
        raise PassError(f"pass {pass_name!r}: function={value!r} is not a name, call path, glob or vertex id")
    return value if isinstance(value, int) else value.strip()


def parse_scenario(item: Any, pass_name: str) -> Scenario:
    """One scenario from its text form, a mapping, or a list of changes."""
    if isinstance(item, Scenario):
        return item
    if isinstance(item, str):
        parts = [p for p in item.split("&")]
        if any(not p.strip() for p in parts):
            raise PassError(f"pass {pass_name!r}: scenario {item!r} has an empty change")
        return Scenario(tuple(_change(p, pass_name) for p in parts))
    if isinstance(item, dict):
        return Scenario((_change(item, pass_name),))
    if isinstance(item, list | tuple) and item:
        return Scenario(tuple(_change(p, pass_name) for p in item))
    raise PassError(f"pass {pass_name!r}: a scenario is text, a mapping or a list of changes, not {item!r}")


def scenarios_from(
    pass_name: str,
    *,
    function: Any = None,
    processes: Any = None,
    scale: Any = 0.0,
    network: Any = None,
    scenarios: Any = None,
) -> list[Scenario]:
    """The scenarios the ``what_if`` settings describe: ``scenarios``, else one per ``scale`` of ``function``
    (with the ``network`` change, if any, in each), else the network change alone; [] when none is given."""
    out: list[Scenario] = []
    if scenarios is not None:
        items = [scenarios] if isinstance(scenarios, str | dict) else list(scenarios)
        if not items:
            raise PassError(f"pass {pass_name!r}: scenarios is empty")
        out += [parse_scenario(s, pass_name) for s in items]
    net = None
    if network is not None:
        net = _change({"network": network}, pass_name)
    if function is not None:
        funcs = function if isinstance(function, list | tuple) else [function]
        procs = parse_processes(processes, pass_name)
        scales = scale if isinstance(scale, list | tuple) else [scale]
        if not scales:
            raise PassError(f"pass {pass_name!r}: scale is an empty list")
        for sc in scales:
            changes = tuple(Change(_function(f, pass_name), procs, parse_scale(sc, pass_name)) for f in funcs)
            out.append(Scenario(changes + ((net,) if net else ())))
    elif net is not None:
        out.append(Scenario((net,)))
    elif processes is not None:
        raise PassError(f"pass {pass_name!r}: processes={processes!r} needs a function")
    return out


def resolve_vertices(pag: PAG, function: str | int, pass_name: str, *, callees: bool = True) -> np.ndarray:
    """The vertices a change names: a vertex id, a call path, else every vertex of that name, else a glob over
    call paths and names; with ``callees`` their subtrees too (the MPI calls in there only when the function is one)."""
    n = pag.n_vertices
    if isinstance(function, int):
        if not 0 <= function < n:
            raise PassError(f"pass {pass_name!r}: function={function} is not a vertex id (0..{n - 1})")
        hit = np.array([function], dtype=np.int64)
    else:
        cps = pag.call_paths().to_numpy().astype(str)
        names = pag.vertex_table["name"].astype(str).to_numpy()
        hit = np.flatnonzero(cps == function)
        if not len(hit):
            hit = np.flatnonzero(names == function)
        if not len(hit) and any(ch in function for ch in "*?["):
            pat = fnmatch.translate(function)
            import re

            rx = re.compile(pat)
            hit = np.flatnonzero([bool(rx.match(c)) or bool(rx.match(m)) for c, m in zip(cps, names, strict=True)])
        if not len(hit):
            close = sorted({m for m in names if function.lower() in m.lower()})[:5]
            hint = f"; names containing it: {', '.join(close)}" if close else ""
            raise PassError(f"pass {pass_name!r}: function={function!r} matches no call path or name{hint}")
    if not callees:
        return hit
    mpi = mpi_vertex_mask(pag)
    below = descendants_mask(pag.tree_index, hit, include_self=True)
    if not mpi[hit].any():
        below &= ~mpi
    return np.flatnonzero(below)


@dataclass(frozen=True)
class Prediction:
    """A replayed scenario: its run and, when asked for, its critical path."""

    scenario: Scenario
    run: Run
    path: ReplayPath | None

    @property
    def runtime(self) -> float:
        """Predicted runtime of the window (s)."""
        return self.run.runtime


def replay_plan(pag: PAG, pass_name: str, settings: ReplaySettings | str | None = None) -> Plan:
    """The PAG's replay plan (computed once per PAG and settings; a str: ``late_receiver``)."""
    require_trace(pag, pass_name)
    if isinstance(settings, str):
        settings = ReplaySettings(late_receiver=settings)
    return pag.analyses.get(REPLAY_PLAN, settings or ReplaySettings(), owner=f"pass {pass_name!r}")


def _location_mask(pag: PAG, plan: Plan, procs: tuple[int, ...] | None, pass_name: str) -> np.ndarray:
    if procs is None:
        return np.ones(plan.n_locations, dtype=bool)
    have = set(np.unique(plan.process).tolist())
    missing = sorted(set(procs) - have)
    if missing:
        raise PassError(f"pass {pass_name!r}: processes {missing} are not in the trace (it has {_ranges(tuple(have))})")
    return np.isin(plan.process, procs)


def rates_for(pag: PAG, plan: Plan, scenario: Scenario, window: tuple[float, float], pass_name: str, *,
              callees: bool = True, vertex_times: np.ndarray | None = None) -> Rates:  # fmt: skip
    """The replay rates of a scenario: work at its recorded speed, changed as the scenario says.

    ``vertex_times``: each vertex's own work per location in ``window`` (:func:`vertex_times`), when at hand.
    """
    n, L = pag.n_vertices, plan.n_locations
    mpi = mpi_vertex_mask(pag)
    vfac = np.ones(n)
    vmap = np.full(n, -1, np.int64)
    rows: list[np.ndarray] = []
    for ch in scenario.changes:
        if ch.function is None:
            vfac[mpi] *= float(ch.scale)
            continue
        verts = resolve_vertices(pag, ch.function, pass_name, callees=callees)
        where = _location_mask(pag, plan, ch.processes, pass_name)
        row = np.ones(L)
        if ch.scale == BALANCE:
            if vertex_times is not None:
                x = vertex_times[verts].sum(axis=0)
            else:
                one = np.full(n, -1, np.int64)
                one[verts] = 0
                x = _vertex_time(plan, one, 1, window)[0]
            mean = x[where].mean() if where.any() else 0.0
            sel = where & (x > 0)
            row[sel] = mean / x[sel]
        else:
            row[where] = float(ch.scale)
        for old in np.unique(vmap[verts]):  # compose with earlier changes of the same vertices
            mine = verts[vmap[verts] == old]
            rows.append(row * (rows[old] if old >= 0 else 1.0))
            vmap[mine] = len(rows) - 1
    F = np.vstack(rows) if rows else np.ones((1, L))
    return Rates(vfac, vmap, F, 1.0, ~mpi)


def vertex_times(plan: Plan, n_vertices: int, window: tuple[float, float]) -> np.ndarray:
    """Each vertex's own work (waiting excluded) per location inside ``window``: ``(n_vertices, locations)``."""
    return _vertex_time(plan, np.arange(n_vertices, dtype=np.int64), n_vertices, window)


def _vertex_time(plan: Plan, vmap: np.ndarray, R: int, window: tuple[float, float]) -> np.ndarray:
    streamed = getattr(plan, "vertex_time_streamed", None)  # a plan left on its partitions (trace.replaystream)
    if streamed is not None:
        return streamed(vmap, R, window)
    return vertex_time(
        plan.soff, plan.xs, plan.xd, plan.xv, plan.lseg, plan.lnseg, vmap, R, float(window[0]), float(window[1])
    )


def predict(pag: PAG, scenarios: list[Scenario], window: tuple[float, float], pass_name: str, *,
            settings: ReplaySettings | str | None = None, callees: bool = True, path: bool = True) -> list[Prediction]:  # fmt: skip
    """Replay each scenario over ``window`` (``settings``: of the replay plan); with ``path`` also its critical path."""
    plan = replay_plan(pag, pass_name, settings)
    out = []
    for sc in scenarios:
        rates = rates_for(pag, plan, sc, window, pass_name, callees=callees)
        r = run_plan(plan, rates, window, path=path)
        out.append(Prediction(sc, r, replay_path(plan, r, rates, pag.n_vertices) if path else None))
    return out
