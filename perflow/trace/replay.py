"""The replay of a trace: its recorded run with other durations, every dependency kept.

One engine serves the ideal-network replay behind the POP metrics, the
what-if predictions and the critical path of a predicted run:

1. A **plan** (:func:`perflow.trace.replayplan.build_plan`, computed once per trace and settings;
   :data:`perflow.trace.analyses.REPLAY_PLAN`) holds the dependencies of
   the run (:mod:`perflow.trace.replaydeps`: messages, rendezvous and
   synchronous sends, collectives, OpenMP barriers, locks, fork and join) as
   issue and wait points in the order of their timestamps, and each
   location's work between consecutive points as pieces (start, length,
   vertex) with its waiting removed (:func:`~perflow.trace.replaykernels.cut_pieces`).
2. A **run** (:func:`run_plan`) replays the points for one set of
   :class:`Rates` (how fast each vertex's work goes on each location, and
   the time outside every region): each location advances by its rated work,
   in program order; a wait point happens no earlier than the points it
   waits for. Local order, eager versus rendezvous sends and the recorded
   order of lock acquisitions are kept; waiting is recomputed.
3. The **critical path** of a run (:func:`replay_path`) follows the binding
   waits back from the location that ends last.

With every rate 1 the replay reproduces the recorded timestamps (up to
dependencies the trace shows were not honoured, which are left out and
counted). The ideal network (:func:`replay`) is the run where communication
and synchronisation calls take no time but their waiting: rate 1 for
computation, 0 for everything else.

A time window ``[t0, t1]`` restricts a run to a region of interest: every
location starts at replayed time 0 at ``t0`` (plus its time before its first
event, when that is counted), only work inside the window counts, and the
run ends at ``t1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..pag.instances import Trace
from . import replayblocks as B
from . import replaykernels as K
from .flat import FlatTimeline, Locations
from .replaydeps import SEND_MODES

__all__ = [
    "Plan",
    "Rates",
    "Run",
    "Replay",
    "ReplayPath",
    "run_plan",
    "run_many",
    "replay_path",
    "replay",
    "LATE_RECEIVER_MODES",
]

#: Which sends wait for their receive to be posted (``auto``: synchronous ones, and rendezvous sends by size).
LATE_RECEIVER_MODES = SEND_MODES


@dataclass(frozen=True)
class Plan:
    """The dependency points and the work between them of a trace (see the module docstring).

    Points (in replay order): ``ptime`` (trace time), ``pkind`` (bits:
    :data:`~perflow.trace.replaykernels.WAIT`, ``MIN`` -- a channel that keeps
    the earliest issue --, ``FIRST`` -- the channel's first point), ``ploc``,
    ``pslot`` (the channel's slot: channels that are no longer needed hand
    their slot on, so the replay's state stays small), ``plag``, ``pseg`` (the
    segment that ends at the point). Pieces: ``soff`` (CSR by segment),
    ``xs``, ``xd``, ``xv``. Per location (sorted by process, thread): ``process``, ``thread``,
    ``lseg``/``lnseg`` (its segments), ``lpts``/``lpt0`` (its points in
    order), ``lstart``/``lend`` (first and last event), ``pre_wait`` (its
    time before the first event is waiting: a forked thread).
    """

    process: np.ndarray
    thread: np.ndarray
    ptime: np.ndarray
    pkind: np.ndarray
    ploc: np.ndarray
    pslot: np.ndarray
    plag: np.ndarray
    pseg: np.ndarray
    n_slots: int
    soff: np.ndarray
    xs: np.ndarray
    xd: np.ndarray
    xv: np.ndarray
    lseg: np.ndarray
    lnseg: np.ndarray
    lpts: np.ndarray
    lpt0: np.ndarray
    lstart: np.ndarray
    lend: np.ndarray
    pre_wait: np.ndarray
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def n_locations(self) -> int:
        """Locations replayed."""
        return len(self.process)

    @property
    def skipped(self) -> int:
        """Dependencies left out because the trace shows they were not honoured."""
        return sum(v for k, v in self.counts.items() if k.startswith("skipped "))

    @property
    def dependencies(self) -> int:
        """Wait points (dependencies carried)."""
        return int(((self.pkind & K.WAIT) != 0).sum())

    def pre(self, t0: float, t1: float) -> np.ndarray:
        """Each location's time before its first event inside ``[t0, t1]`` (0 where it is waiting)."""
        x = np.clip(np.minimum(self.lstart, t1) - t0, 0.0, None)
        return np.where(self.pre_wait | (self.lnseg == 0), 0.0, x)

    def memory_bytes(self) -> int:
        """Bytes held by the plan's arrays."""
        return int(sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray)))


@dataclass(frozen=True)
class Rates:
    """How fast work goes in a run: ``vfac[v] * F[vmap[v], loc]`` per second of vertex ``v`` (``F`` where
    ``vmap[v] >= 0``), ``ofac`` outside every region; ``useful`` marks the vertices whose work is computation."""

    vfac: np.ndarray
    vmap: np.ndarray
    F: np.ndarray
    ofac: float
    useful: np.ndarray

    @classmethod
    def uniform(cls, vfac: np.ndarray, ofac: float, useful: np.ndarray | None = None) -> Rates:
        """Rates that are the same on every location."""
        vfac = np.asarray(vfac, dtype=np.float64)
        u = vfac > 0 if useful is None else np.asarray(useful, dtype=bool)
        return cls(vfac, np.full(len(vfac), -1, np.int64), np.ones((1, 1)), float(ofac), u)


@dataclass(frozen=True)
class Run:
    """One run of a plan: ``ends`` and ``useful`` per location (s after ``t0``), ``runtime`` (the latest end)."""

    t0: float
    t1: float
    ends: np.ndarray
    useful: np.ndarray
    carried: int
    bind: np.ndarray
    lastp: np.ndarray

    @property
    def runtime(self) -> float:
        """The run's runtime: the latest replayed end of a location."""
        return float(self.ends.max()) if len(self.ends) else 0.0


def run_plan(plan: Plan, rates: Rates, window: tuple[float, float], *, path: bool = False) -> Run:
    """Replay ``plan`` with ``rates`` over ``window`` (``path``: keep what :func:`replay_path` needs)."""
    streamed = getattr(plan, "run_streamed", None)  # a plan left on its partitions (perflow.trace.replaystream)
    if streamed is not None and not path:
        return streamed(rates, window)
    t0, t1 = float(window[0]), float(window[1])
    F = rates.F if rates.F.shape[1] == plan.n_locations else np.ones((max(rates.F.shape[0], 1), plan.n_locations))
    ends, useful, carried, bind, lastp = K.run(
        plan.ptime, plan.pkind, plan.ploc, plan.pslot, plan.plag, plan.pseg, plan.n_slots, plan.soff, plan.xs, plan.xd, plan.xv, plan.lseg, plan.lnseg, plan.lpts, plan.lpt0, plan.pre(t0, t1),
        rates.vfac, rates.vmap, np.ascontiguousarray(F, dtype=np.float64), float(rates.ofac), rates.useful,
        t0, t1, bool(path), B.BLOCK,
    )  # fmt: skip
    return Run(t0, t1, ends, useful, int(carried), bind, lastp)


def run_many(plan: Plan, rates: list[Rates], window: tuple[float, float]) -> np.ndarray:
    """The runtimes of several runs of ``plan`` over ``window`` in one pass (one per set of rates)."""
    S, L = len(rates), plan.n_locations
    if not S:
        return np.zeros(0)
    streamed = getattr(plan, "run_many_streamed", None)  # a plan left on its partitions (perflow.trace.replaystream)
    if streamed is not None:
        return streamed(rates, window)
    nv = max(len(r.vfac) for r in rates)
    R = max(r.F.shape[0] for r in rates)
    vfac = np.ones((S, nv))
    vmap = np.full((S, nv), -1, np.int64)
    F = np.ones((S, R, max(L, 1)))
    ofac = np.zeros(S)
    for i, r in enumerate(rates):
        vfac[i, : len(r.vfac)] = r.vfac
        vmap[i, : len(r.vmap)] = r.vmap
        if r.F.shape[1] == L:
            F[i, : r.F.shape[0]] = r.F
        ofac[i] = r.ofac
    t0, t1 = float(window[0]), float(window[1])
    ends = K.run_many(
        plan.ptime, plan.pkind, plan.ploc, plan.pslot, plan.plag, plan.pseg, plan.n_slots, plan.soff,
        plan.xs, plan.xd, plan.xv, plan.lseg, plan.lnseg, plan.lpts, plan.lpt0, plan.pre(t0, t1), vfac, vmap, F,
        ofac, t0, t1, B.BLOCK,
    )  # fmt: skip
    return ends.max(axis=1) if L else np.zeros(S)


@dataclass(frozen=True)
class ReplayPath:
    """The critical path of a run: ``stretches`` (``process``, ``thread``, ``start``, ``end`` in trace time,
    ``time``: replayed work there, in path order), ``by_vertex`` (replayed work per vertex; index
    ``n_vertices``: outside every region and lags), ``by_location`` (per location)."""

    stretches: pd.DataFrame
    by_vertex: np.ndarray
    by_location: np.ndarray


def replay_path(plan: Plan, run: Run, rates: Rates, n_vertices: int) -> ReplayPath:
    """The critical path of ``run`` (made with ``path=True``)."""
    L = plan.n_locations
    if not L or not len(run.bind) and len(plan.ptime):
        z = np.zeros(0)
        st = pd.DataFrame({"process": z, "thread": z, "start": z, "end": z, "time": z})
        return ReplayPath(st, np.zeros(n_vertices + 1), np.zeros(L))
    start = int(np.argmax(run.ends))
    hl, ha, hb, hp = K.walk(
        plan.ploc, plan.pkind, plan.pseg, run.bind, plan.lseg, plan.lnseg, plan.lpts, plan.lpt0, run.lastp, start
    )
    F = rates.F if rates.F.shape[1] == L else np.ones((max(rates.F.shape[0], 1), L))
    cpv, cpl, cph = K.charge(
        hl, ha, hb, plan.soff, plan.xs, plan.xd, plan.xv, rates.vfac, rates.vmap, np.ascontiguousarray(F),
        float(rates.ofac), run.t0, run.t1, int(n_vertices), L,
    )  # fmt: skip
    hl, hp, cph = hl[::-1], hp[::-1], cph[::-1]
    pt = plan.ptime if len(plan.ptime) else np.zeros(1)
    begin = np.where(hp >= 0, pt[np.maximum(hp, 0)], np.maximum(plan.lstart[hl], run.t0))
    nxt = np.r_[hp[1:], -1]
    src = run.bind[np.maximum(nxt, 0)] if len(run.bind) else np.zeros(len(nxt), np.int64)
    stop = np.where(nxt >= 0, pt[np.maximum(src, 0)], np.minimum(plan.lend[hl], run.t1))
    rest = run.runtime - float(cpv.sum())  # lags and time before the first event: outside the path's pieces
    cpv[n_vertices] += max(rest, 0.0)
    st = pd.DataFrame(
        {"process": plan.process[hl], "thread": plan.thread[hl], "start": begin, "end": stop, "time": cph}
    )
    return ReplayPath(st, cpv, cpl)


@dataclass(frozen=True)
class Replay:
    """Result of :func:`replay` (the ideal network).

    Attributes
    ----------
    t0, t1 : float
        The window replayed (trace time, s); ``runtime = t1 - t0``.
    ideal_runtime : float
        Runtime of the replay: the latest ideal end of a location.
    locations : pandas.DataFrame
        One row per (process, thread): ``process``, ``thread``, ``useful``
        (computation inside the window, s), ``ideal_end`` (when the location
        finishes in the replay, s after ``t0``).
    dependencies : int
        Dependencies the replay carried.
    skipped : int
        Dependencies left out because the trace shows they were not honoured (clock violations).
    """

    t0: float
    t1: float
    ideal_runtime: float
    locations: pd.DataFrame
    dependencies: int
    skipped: int

    @property
    def runtime(self) -> float:
        """Length of the window (s)."""
        return self.t1 - self.t0


def replay(
    trace: Trace,
    useful_vertex: np.ndarray,
    *,
    window: tuple[float, float] | None = None,
    late_receiver: str = "auto",
    plan: Plan | None = None,
    names: np.ndarray | None = None,
    locs: Locations | None = None,
    flat: FlatTimeline | None = None,
) -> Replay:
    """Replay ``trace`` on an ideal network: computation (``useful_vertex``) at its recorded speed, every
    other call and the time outside every region taking no time but its waiting.

    Parameters
    ----------
    trace : Trace
    useful_vertex : numpy.ndarray of bool
        Per top-down vertex: is its exclusive time computation.
    window : (float, float), optional
        The region of interest ``[t0, t1]`` in trace time (default: the trace's span).
    late_receiver : {"synchronous", "blocking", "none", "auto"}
        Which sends wait for their receive to be posted.
    plan : Plan, optional
        :func:`~perflow.trace.replayplan.build_plan` of the trace with that ``late_receiver``, when at hand
        (a PAG caches it).
    names, locs, flat : optional
        Vertex names, ``locations(trace)`` and ``flat_timeline(trace)`` for building the plan.
    """
    if late_receiver not in LATE_RECEIVER_MODES:
        raise ValueError(f"late_receiver must be one of {LATE_RECEIVER_MODES}, not {late_receiver!r}")
    span = trace.span
    t0, t1 = (float(span[0]), float(span[1])) if window is None else (float(window[0]), float(window[1]))
    if not t1 >= t0:
        raise ValueError(f"the replay window ends before it starts: [{t0}, {t1}]")
    if plan is None:
        plan = replayplan.build_plan(trace, names=names, late_receiver=late_receiver, locs=locs, flat=flat)
    useful = np.asarray(useful_vertex, dtype=bool)
    r = run_plan(plan, Rates.uniform(useful.astype(np.float64), 0.0, useful), (t0, t1))
    table = pd.DataFrame(
        {"process": plan.process, "thread": plan.thread, "useful": r.useful, "ideal_end": r.ends}, copy=False
    )
    return Replay(t0, t1, r.runtime, table, r.carried, plan.skipped)


# The replay plan builds on this module (imports it at its top): the module, not its
# names, is imported here, last, so that either can be imported first.
from . import replayplan  # noqa: E402
