"""The replay streamed from the partitions: a run of the replay plan that never holds the plan in one place.

:func:`perflow.trace.replayparts.program` gathers every partition's
:class:`~perflow.trace.replayplan.PlanPart` and combines them into one
:class:`~perflow.trace.replay.Plan` (points of the whole trace in replay
order, the pieces of every segment): about 30 bytes per event, more than the
trace's own tables, and more again while they are combined. For a trace that
does not fit in one process, :func:`program` returns a :class:`StreamPlan`
instead: the parts stay where they were made, and a run
(:meth:`StreamPlan.run_streamed`, called by :func:`perflow.trace.replay.run_plan`)
goes in three steps:

1. each partition rates the pieces of its segments (the very
   ``_seg_work`` of :func:`perflow.trace.replaykernels.run`): one number per
   segment, and the useful work per location;
2. the points come to the client in chunks of consecutive replay time (each
   partition's points are already in replay order: a chunk is a slice of
   each), are merged in the order :func:`~perflow.trace.replayplan.combine_parts`
   gives them, and are replayed with the state (each location's time, each
   channel's value) carried from chunk to chunk (:func:`_advance`);
3. the work of each location's segments after its last replayed point
   comes back and is added as the kernel's final loop adds it.

:func:`~perflow.trace.replay.run_many` (POP's gains) is one such run per set
of rates, with ``run_many``'s sums, and
:func:`~perflow.trace.replaykernels.vertex_time` runs on each partition's
pieces (per location: nothing crosses).

Every sum is taken in the kernel's order, so a run equals
``run_plan(combine_parts(parts), ...)`` bit for bit. Channels are indexed
by their number rather than by a reused slot (one value per channel: the
state is 9 bytes per channel, not per point). What needs the whole plan (the
replay's critical path, the what-if rates, the plan's point arrays)
materialises it on first use, with a logged warning.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..pag.partitioned import Each
from . import replaykernels as K
from .flat import njit
from .pipeline import Built
from .replay import Plan, Rates, Run
from .replayparts import part_refs
from .replayplan import PlanPart, combine_parts

__all__ = ["StreamPlan", "Prepared", "program", "CHUNK_POINTS"]

log = logging.getLogger(__name__)

#: points replayed per chunk on the client (about 37 bytes each)
CHUNK_POINTS = 2_000_000
#: at most this many points of a partition per sampled point time (to cut the chunks)
_SAMPLE_STEP = 1 << 14


@njit
def _segment_work(soff, xs, xd, xv, lseg, lnseg, vfac, vmap, F, ofac, useful, t0, t1):  # type: ignore[no-untyped-def]
    """The rated work of every segment (each location's segments in order) and the useful work per location."""
    n = lseg.shape[0]
    w = np.zeros(soff.shape[0] - 1)
    uacc = np.zeros(n)
    for q in range(n):
        for s in range(lseg[q], lseg[q] + lnseg[q]):
            w[s] = K._seg_work(s, q, soff, xs, xd, xv, vfac, vmap, F, ofac, useful, t0, t1, uacc)
    return w, uacc


@njit
def _advance(ptime, pkind, ploc, pch, plag, pw, t1, ideal, cval, has, done):  # type: ignore[no-untyped-def]
    """Replay one chunk of points (in replay order) on the carried state; the dependencies carried and whether
    a point past ``t1`` ended the replay. The body of :func:`perflow.trace.replaykernels.run`'s loop."""
    carried = 0
    for i in range(ptime.shape[0]):
        if ptime[i] > t1:
            return carried, True
        loc = ploc[i]
        acc = 0.0
        acc += pw[i]
        v = ideal[loc] + acc
        c = pch[i]
        k = pkind[i]
        if not (k & K.WAIT):
            if not has[c] or (v < cval[c] if k & K.MIN else v > cval[c]):
                cval[c] = v
                has[c] = True
        elif has[c]:
            carried += 1
            src = cval[c] + plag[i]
            if src > v:
                v = src
        ideal[loc] = v
        done[loc] += 1
    return carried, False


@njit
def _add_tails(ideal, gid, count, vals, each):  # type: ignore[no-untyped-def]
    """Add each location's work after its last replayed point: summed first and added once (as
    :func:`~perflow.trace.replaykernels.run` does), or added segment by segment (``each``: as ``run_many``)."""
    k = 0
    for q in range(gid.shape[0]):
        g = gid[q]
        acc = 0.0
        for _ in range(count[q]):
            if each:
                ideal[g] += vals[k]
            else:
                acc += vals[k]
            k += 1
        if not each:
            ideal[g] += acc


@dataclass
class Prepared:
    """One run's rated segments of a partition's plan (kept where the part is)."""

    part: PlanPart
    w: np.ndarray
    uacc: np.ndarray
    gid: np.ndarray
    ch0: int


def _facts(p: PlanPart, step: int) -> dict[str, Any]:
    return {
        "process": p.process, "thread": p.thread, "lnseg": p.lnseg, "lstart": p.lstart, "lend": p.lend,
        "pre_wait": p.pre_wait, "n_channels": p.n_channels, "n_local": p.n_local, "counts": p.counts,
        "n_points": len(p.ptime), "n_waits": int(((p.pkind & K.WAIT) != 0).sum()),
        "sample": p.ptime[::step][~np.isnan(p.ptime[::step])],
    }  # fmt: skip


def _prepare(p: PlanPart, gid: np.ndarray, ch0: int, rates: Rates, F: np.ndarray, t0: float, t1: float) -> Prepared:
    w, uacc = _segment_work(
        p.soff, p.xs, p.xd, p.xv.astype(np.int64, copy=False), p.lseg, p.lnseg, rates.vfac, rates.vmap, F,
        float(rates.ofac), rates.useful, t0, t1,
    )  # fmt: skip
    return Prepared(p, w, uacc, gid, ch0)


def _chunk(x: Prepared, lo: float, hi: float) -> tuple[np.ndarray, ...]:
    """The points with ``lo <= time < hi`` (``hi`` inf: to the end, also points without a time), in global ids."""
    p = x.part
    i0 = int(np.searchsorted(p.ptime, lo, side="left")) if lo > -math.inf else 0
    i1 = int(np.searchsorted(p.ptime, hi, side="left")) if hi < math.inf else len(p.ptime)
    sl = slice(i0, i1)
    ch = p.pch[sl].astype(np.int64)
    ch = np.where(ch >= p.n_channels, ch + x.ch0, ch)
    return p.ptime[sl], p.pkind[sl], x.gid[p.ploc[sl]], ch, p.plag[sl], x.w[p.pseg[sl]]


def _tail(x: Prepared, done: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The work of each location's segments after its ``done`` replayed points: their number and values."""
    lseg, lnseg = x.part.lseg, x.part.lnseg
    count = (lnseg - done).astype(np.int64)
    if not len(count):
        return count, np.zeros(0)
    idx = np.repeat(lseg + done - np.r_[0, np.cumsum(count)[:-1]], count) + np.arange(int(count.sum()))
    return count, x.w[idx]


def _vertex_time_part(p: PlanPart, vmap: np.ndarray, R: int, t0: float, t1: float) -> np.ndarray:
    return K.vertex_time(p.soff, p.xs, p.xd, p.xv.astype(np.int64, copy=False), p.lseg, p.lnseg, vmap, R, t0, t1)


def _uacc(x: Prepared) -> np.ndarray:
    return x.uacc


class StreamPlan:
    """A replay plan whose parts stay on the partitions (see the module docstring).

    It answers what the plan's users ask of a whole one: ``process``, ``thread``, ``counts``,
    ``n_locations``, ``skipped``, ``dependencies``, :meth:`pre`; a run without a path
    (:func:`perflow.trace.replay.run_plan`) is streamed; anything else materialises the plan.
    """

    def __init__(self, runtime: Any, refs: list[Any], chunk_points: int = CHUNK_POINTS) -> None:
        self._rt, self._refs, self.chunk_points = runtime, refs, int(chunk_points)
        self._plan: Plan | None = None
        self._step = max(1, min(_SAMPLE_STEP, self.chunk_points // 8))
        facts = runtime.gather(runtime.map(_facts, Each(refs), self._step))
        self.n_channels = int(facts[0]["n_channels"]) if facts else 0
        proc = np.concatenate([f["process"] for f in facts]).astype(np.int64)
        thr = np.concatenate([f["thread"] for f in facts]).astype(np.int64)
        order = np.lexsort((thr, proc))
        gid = np.empty(len(order), np.int64)
        gid[order] = np.arange(len(order))
        loc0 = np.cumsum([0] + [len(f["process"]) for f in facts])
        self._gids = [gid[loc0[i] : loc0[i + 1]] for i in range(len(facts))]
        self._ch0 = np.cumsum([0] + [int(f["n_local"]) for f in facts])
        cat = lambda k: np.concatenate([f[k] for f in facts])[order]  # noqa: E731
        self.process, self.thread = proc[order], thr[order]
        self.lnseg, self.lstart, self.lend, self.pre_wait = cat("lnseg"), cat("lstart"), cat("lend"), cat("pre_wait")
        self.counts: dict[str, int] = {}
        for f in facts:
            for k, v in f["counts"].items():
                self.counts[k] = self.counts.get(k, 0) + v
        self.n_points = int(sum(f["n_points"] for f in facts))
        self._n_waits = int(sum(f["n_waits"] for f in facts))
        self._sample = np.sort(np.concatenate([f["sample"] for f in facts])) if facts else np.zeros(0)

    n_locations = Plan.n_locations
    skipped = Plan.skipped
    pre = Plan.pre

    @property
    def dependencies(self) -> int:
        """Wait points (dependencies carried)."""
        return self._n_waits

    def memory_bytes(self) -> int:
        """Bytes held here (the parts are on the partitions)."""
        return int(sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray)))

    def bounds(self) -> np.ndarray:
        """Point times that cut the replay into chunks of about ``chunk_points`` points (ascending)."""
        per = max(1, self.chunk_points // self._step)
        b = np.unique(self._sample[per::per]) if len(self._sample) > per else np.zeros(0)
        return np.r_[-math.inf, b, math.inf]

    def run_streamed(self, rates: Rates, window: tuple[float, float]) -> Run:
        """:func:`perflow.trace.replay.run_plan` of the combined plan (no path), streamed from the parts."""
        return self._run(rates, window, each=False)

    def run_many_streamed(self, rates: list[Rates], window: tuple[float, float]) -> np.ndarray:
        """:func:`perflow.trace.replay.run_many` of the combined plan: the runtime of each set of rates (one
        streamed run each, with the kernel's sums)."""
        return np.array([self._run(r, window, each=True).runtime for r in rates], dtype=np.float64)

    def vertex_time_streamed(self, vmap: np.ndarray, R: int, window: tuple[float, float]) -> np.ndarray:
        """:func:`perflow.trace.replaykernels.vertex_time` of the combined plan, ``(R, L)``: per partition."""
        rt = self._rt
        vm = np.asarray(vmap, dtype=np.int64)
        got = rt.gather(rt.map(_vertex_time_part, Each(self._refs), vm, int(R), float(window[0]), float(window[1])))
        out = np.zeros((int(R), self.n_locations))
        for g, x in zip(self._gids, got, strict=True):
            out[:, g] = x
        return out

    def _run(self, rates: Rates, window: tuple[float, float], each: bool) -> Run:
        rt, L = self._rt, self.n_locations
        t0, t1 = float(window[0]), float(window[1])
        F = rates.F if rates.F.shape[1] == L else np.ones((max(rates.F.shape[0], 1), L))
        F = np.ascontiguousarray(F, dtype=np.float64)
        r = Rates(np.asarray(rates.vfac, np.float64), np.asarray(rates.vmap, np.int64), np.ones((1, 1)),
                  float(rates.ofac), np.asarray(rates.useful, bool))  # fmt: skip
        Fs = [np.ascontiguousarray(F[:, g]) for g in self._gids]
        prep = rt.map(_prepare, Each(self._refs), Each(self._gids), Each(list(self._ch0[:-1])), r, Each(Fs), t0, t1)
        ideal = self.pre(t0, t1) * float(rates.ofac)
        n_ch = self.n_channels + int(self._ch0[-1])
        cval, has = np.zeros(max(n_ch, 1)), np.zeros(max(n_ch, 1), dtype=np.bool_)
        done = np.zeros(L, np.int64)
        carried, b = 0, self.bounds()
        nxt = rt.map(_chunk, Each(prep), b[0], b[1])  # the next chunk is on its way while one is replayed
        for j in range(len(b) - 1):
            got = rt.gather(nxt)
            if j + 2 < len(b):
                nxt = rt.map(_chunk, Each(prep), b[j + 1], b[j + 2])
            cols = [np.concatenate([g[c] for g in got]) for c in range(6)]
            del got
            o = np.lexsort((cols[1] & K.WAIT, cols[0]))  # as combine_parts orders the points
            c, stop = _advance(*(a[o] for a in cols), t1, ideal, cval, has, done)
            carried += int(c)
            if stop:
                break
        tails = rt.gather(rt.map(_tail, Each(prep), Each([done[g] for g in self._gids])))
        useful = np.zeros(L)
        for g, (count, vals), u in zip(self._gids, tails, rt.gather(rt.map(_uacc, Each(prep))), strict=True):
            _add_tails(ideal, g, count, vals, each)
            useful[g] = u
        del prep
        return Run(t0, t1, ideal, useful, carried, np.zeros(0, np.int64), np.full(L, -1, np.int64))

    def materialise(self) -> Plan:
        """The whole plan, gathered and combined here (once)."""
        if self._plan is None:
            log.warning("gathering the replay plan of %d points onto the client (the replay's path or several "
                        "runs at once need it whole)", self.n_points)  # fmt: skip
            self._plan = combine_parts(self._rt.gather(self._refs))
        return self._plan

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.materialise(), name)

    def __repr__(self) -> str:
        return f"<StreamPlan {self.n_points} points on {len(self._refs)} partitions, {self.n_locations} locations>"


def program(b: Built, names: np.ndarray, settings: Any, *, roles: np.ndarray | None = None,
            regions: np.ndarray | None = None) -> Plan | StreamPlan:  # fmt: skip
    """The replay plan of a built trace: combined here (:func:`perflow.trace.replayparts.program`), or a
    :class:`StreamPlan` when the trace has more events than its runtime's ``stream_replay_above``."""
    rt = b.runtime
    refs = part_refs(b, names, settings, roles=roles, regions=regions)
    above = getattr(rt, "stream_replay_above", None)
    if above is None or b.n_events <= above:
        return combine_parts(rt.gather(refs))
    return StreamPlan(rt, refs, int(getattr(rt, "stream_chunk_points", CHUNK_POINTS)))
