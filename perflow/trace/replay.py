"""The replay of a trace: its recorded run with other durations, every dependency kept.

One engine serves the ideal-network replay behind the POP metrics, the
what-if predictions and the critical path of a predicted run:

1. A **plan** (:func:`build_plan`, computed once per trace and settings;
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
from typing import Any

import numpy as np
import pandas as pd

from ..pag.instances import Trace
from . import replaykernels as K
from .flat import FlatTimeline, Locations, flat_timeline, locations
from .replaydeps import SEND_MODES, Dependencies, dependencies

__all__ = [
    "Plan",
    "Rates",
    "Run",
    "Replay",
    "ReplayPath",
    "build_plan",
    "plan_part",
    "combine_parts",
    "run_plan",
    "replay_path",
    "replay",
    "LATE_RECEIVER_MODES",
]

#: Which sends wait for their receive to be posted (``auto``: synchronous ones, and rendezvous sends by size).
LATE_RECEIVER_MODES = SEND_MODES


@dataclass(frozen=True)
class Plan:
    """The dependency points and the work between them of a trace (see the module docstring).

    Points (in replay order): ``ptime`` (trace time), ``pkind`` (0 issue,
    1 wait), ``ploc``, ``pch`` (channel), ``plag``, ``pseg`` (the segment that
    ends at the point). Pieces: ``soff`` (CSR by segment), ``xs``, ``xd``,
    ``xv``. Per location (sorted by process, thread): ``process``, ``thread``,
    ``lseg``/``lnseg`` (its segments), ``lpts``/``lpt0`` (its points in
    order), ``lstart``/``lend`` (first and last event), ``pre_wait`` (its
    time before the first event is waiting: a forked thread).
    """

    process: np.ndarray
    thread: np.ndarray
    ptime: np.ndarray
    pkind: np.ndarray
    ploc: np.ndarray
    pch: np.ndarray
    plag: np.ndarray
    pseg: np.ndarray
    is_min: np.ndarray
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
        return int((self.pkind == K.WAIT).sum())

    def pre(self, t0: float, t1: float) -> np.ndarray:
        """Each location's time before its first event inside ``[t0, t1]`` (0 where it is waiting)."""
        x = np.clip(np.minimum(self.lstart, t1) - t0, 0.0, None)
        return np.where(self.pre_wait | (self.lnseg == 0), 0.0, x)

    def memory_bytes(self) -> int:
        """Bytes held by the plan's arrays."""
        return int(sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray)))


@dataclass
class PlanPart:
    """:func:`plan_part` of some locations: their points sorted per location, their pieces, their own channels."""

    process: np.ndarray
    thread: np.ndarray
    ptime: np.ndarray
    pkind: np.ndarray
    ploc: np.ndarray
    pch: np.ndarray
    plag: np.ndarray
    pseg: np.ndarray
    min_channels: np.ndarray
    soff: np.ndarray
    xs: np.ndarray
    xd: np.ndarray
    xv: np.ndarray
    lseg: np.ndarray
    lnseg: np.ndarray
    lstart: np.ndarray
    lend: np.ndarray
    pre_wait: np.ndarray
    n_channels: int
    n_local: int
    counts: dict[str, int]


def plan_part(deps: Dependencies, locs: Locations, flat: FlatTimeline, own: np.ndarray | None = None) -> PlanPart:
    """The plan of some locations (``own``: their ids in ``locs``; default all) from their dependencies."""
    L = len(locs)
    own = np.arange(L) if own is None else np.asarray(own, dtype=np.int64)
    keep = np.zeros(L, dtype=bool)
    keep[own] = True
    newid = np.full(L + 1, -1, dtype=np.int64)
    newid[own] = np.arange(len(own))
    iloc, itime, ich, wloc, wa, wb, wch, wlag = deps.arrays()
    loc = np.concatenate([iloc, wloc])
    sel = keep[loc] if len(loc) else np.zeros(0, dtype=bool)
    loc = newid[loc[sel]]
    time = np.concatenate([itime, wb])[sel]
    kind = np.concatenate([np.zeros(len(iloc), np.int8), np.ones(len(wloc), np.int8)])[sel]
    ch = np.concatenate([ich, wch])[sel]
    lag = np.concatenate([np.zeros(len(iloc)), wlag])[sel]
    order = np.lexsort((kind, time, loc))
    loc, time, kind, ch, lag = loc[order], time[order], kind[order], ch[order], lag[order]
    n = len(own)
    poff = np.searchsorted(loc, np.arange(n + 1)).astype(np.int64)
    pseg = np.arange(len(loc), dtype=np.int64) + loc  # segment j of a location ends at its point j
    wsel = keep[wloc] & (wb > wa) if len(wloc) else np.zeros(0, dtype=bool)
    w_l, w_a, w_b = newid[wloc[wsel]], wa[wsel], wb[wsel]
    wo = np.lexsort((w_a, w_l))
    ws, we, woff = K.merge_waits(w_l[wo], w_a[wo], w_b[wo], n)
    # the flat timeline of the own locations, in their order
    fo = flat.offsets
    sizes = (fo[own + 1] - fo[own]).astype(np.int64)
    if len(own) == L:
        ftime, fvert, foff = flat.time, flat.vertex, fo.astype(np.int64)
    else:
        idx = np.concatenate([np.arange(fo[q], fo[q + 1]) for q in own]) if len(own) else np.zeros(0, np.int64)
        ftime, fvert = flat.time[idx], flat.vertex[idx]
        foff = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    soff, xs, xd, xv = K.cut_pieces(ftime, fvert.astype(np.int64), foff, time, poff, ws, we, woff)
    has = sizes > 0
    lstart = np.where(has, ftime[np.minimum(foff[:-1], max(len(ftime) - 1, 0))], 0.0) if len(ftime) else np.zeros(n)
    lend = np.where(has, ftime[np.maximum(foff[1:] - 1, 0)], 0.0) if len(ftime) else np.zeros(n)
    pre_wait = np.zeros(n, dtype=bool)
    early = w_a <= lstart[w_l] if len(w_l) else np.zeros(0, dtype=bool)
    pre_wait[w_l[early]] = True
    mins = np.unique(np.concatenate(deps.min_channels)) if deps.min_channels else np.zeros(0, np.int64)
    return PlanPart(
        locs.process[own], locs.thread[own], time, kind, loc, ch, lag, pseg, mins, soff, xs, xd, xv,
        (poff[:-1] + np.arange(n)).astype(np.int64), (np.diff(poff) + 1).astype(np.int64),
        lstart, lend, pre_wait, deps.n_channels, deps.n_local, dict(deps.counts),
    )  # fmt: skip


def combine_parts(parts: list[PlanPart]) -> Plan:
    """The plan of the whole trace from the plans of its parts (disjoint locations, one channel numbering)."""
    N = parts[0].n_channels
    proc = np.concatenate([p.process for p in parts]).astype(np.int64)
    thr = np.concatenate([p.thread for p in parts]).astype(np.int64)
    gorder = np.lexsort((thr, proc))  # global location ids: sorted by (process, thread)
    gid = np.empty(len(gorder), np.int64)
    gid[gorder] = np.arange(len(gorder))
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ("ptime", "pkind", "ploc", "pch", "plag", "pseg", "xs", "xd", "xv")
    }
    soffs, lseg, lnseg, lstart, lend, prew, mins = [], [], [], [], [], [], []
    counts: dict[str, int] = {}
    loc0 = seg0 = piece0 = ch0 = 0
    for p in parts:
        cols["ptime"].append(p.ptime)
        cols["pkind"].append(p.pkind)
        cols["ploc"].append(gid[loc0 + p.ploc])
        cols["pch"].append(np.where(p.pch >= N, p.pch + ch0, p.pch))
        cols["plag"].append(p.plag)
        cols["pseg"].append(p.pseg + seg0)
        for k in ("xs", "xd", "xv"):
            cols[k].append(getattr(p, k))
        soffs.append(p.soff[:-1] + piece0)
        lseg.append(p.lseg + seg0)
        lnseg.append(p.lnseg)
        lstart.append(p.lstart)
        lend.append(p.lend)
        prew.append(p.pre_wait)
        mins.append(np.where(p.min_channels >= N, p.min_channels + ch0, p.min_channels))
        for k, v in p.counts.items():
            counts[k] = counts.get(k, 0) + v
        loc0 += len(p.process)
        seg0 += len(p.soff) - 1
        piece0 += len(p.xs)
        ch0 += p.n_local
    cat = {k: np.concatenate(v) for k, v in cols.items()}
    soff = np.r_[np.concatenate(soffs), piece0].astype(np.int64)
    order = np.lexsort((cat["pkind"], cat["ptime"]))  # issuers before waiters at equal times; stable per location
    pt = {k: cat[k][order] for k in ("ptime", "pkind", "ploc", "pch", "plag", "pseg")}
    n_ch = N + ch0
    is_min = np.zeros(max(n_ch, 1), dtype=bool)
    m = np.concatenate(mins) if mins else np.zeros(0, np.int64)
    is_min[m.astype(np.int64)] = True
    ls, lns = np.concatenate(lseg)[gorder], np.concatenate(lnseg)[gorder]
    lpts = np.argsort(pt["ploc"], kind="stable").astype(np.int64)
    npts = np.bincount(pt["ploc"], minlength=len(gorder)) if len(pt["ploc"]) else np.zeros(len(gorder), np.int64)
    lpt0 = (np.cumsum(npts) - npts).astype(np.int64)
    return Plan(
        proc[gorder], thr[gorder], pt["ptime"], pt["pkind"].astype(np.int8), pt["ploc"].astype(np.int64),
        pt["pch"].astype(np.int64), pt["plag"], pt["pseg"].astype(np.int64), is_min, soff, cat["xs"], cat["xd"],
        cat["xv"].astype(np.int64), ls, lns, lpts, lpt0, np.concatenate(lstart)[gorder],
        np.concatenate(lend)[gorder], np.concatenate(prew)[gorder], counts,
    )  # fmt: skip


def build_plan(
    trace: Trace,
    *,
    names: np.ndarray | None = None,
    late_receiver: str = "synchronous",
    early_reduce: str = "latest",
    eager_limit: int | None = None,
    roles: np.ndarray | None = None,
    regions: np.ndarray | None = None,
    locs: Locations | None = None,
    flat: FlatTimeline | None = None,
) -> Plan:
    """The replay plan of a whole trace (the one-part run of :func:`plan_part` and :func:`combine_parts`).

    Settings as in :func:`perflow.trace.replaydeps.dependencies`.
    """
    locs = locs if locs is not None else locations(trace)
    flat = flat if flat is not None else flat_timeline(trace, locs)
    kw: dict[str, Any] = {} if eager_limit is None else {"eager_limit": int(eager_limit)}
    deps = dependencies(
        trace, locs, names=names, late_receiver=late_receiver, early_reduce=early_reduce, roles=roles,
        regions=regions, **kw,
    )  # fmt: skip
    return combine_parts([plan_part(deps, locs, flat)])


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
    t0, t1 = float(window[0]), float(window[1])
    F = rates.F if rates.F.shape[1] == plan.n_locations else np.ones((max(rates.F.shape[0], 1), plan.n_locations))
    ends, useful, carried, bind, lastp = K.run(
        plan.ptime, plan.pkind, plan.ploc, plan.pch, plan.plag, plan.pseg, plan.is_min, len(plan.is_min),
        plan.soff, plan.xs, plan.xd, plan.xv, plan.lseg, plan.lnseg, plan.pre(t0, t1),
        rates.vfac, rates.vmap, np.ascontiguousarray(F, dtype=np.float64), float(rates.ofac), rates.useful,
        t0, t1, bool(path),
    )  # fmt: skip
    return Run(t0, t1, ends, useful, int(carried), bind, lastp)


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
    begin = np.where(hp >= 0, plan.ptime[np.maximum(hp, 0)], np.maximum(plan.lstart[hl], run.t0))
    nxt = np.r_[hp[1:], -1]
    src = run.bind[np.maximum(nxt, 0)] if len(run.bind) else np.zeros(len(nxt), np.int64)
    stop = np.where(nxt >= 0, plan.ptime[np.maximum(src, 0)], np.minimum(plan.lend[hl], run.t1))
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
    late_receiver: str = "synchronous",
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
        :func:`build_plan` of the trace with that ``late_receiver``, when at hand (a PAG caches it).
    names, locs, flat : optional
        Vertex names, ``locations(trace)`` and ``flat_timeline(trace)`` for building the plan.
    """
    if late_receiver not in LATE_RECEIVER_MODES:
        raise ValueError(f"late_receiver must be one of {LATE_RECEIVER_MODES}, not {late_receiver!r}")
    span = trace.span
    t0, t1 = (float(span[0]), float(span[1])) if window is None else (float(window[0]), float(window[1]))
    if not t1 >= t0:
        raise ValueError(f"the replay window ends before it starts: [{t0}, {t1}]")
    plan = (
        plan if plan is not None else build_plan(trace, names=names, late_receiver=late_receiver, locs=locs, flat=flat)
    )
    useful = np.asarray(useful_vertex, dtype=bool)
    r = run_plan(plan, Rates.uniform(useful.astype(np.float64), 0.0, useful), (t0, t1))
    table = pd.DataFrame(
        {"process": plan.process, "thread": plan.thread, "useful": r.useful, "ideal_end": r.ends}, copy=False
    )
    return Replay(t0, t1, r.runtime, table, r.carried, plan.skipped)
