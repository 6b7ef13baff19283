"""The critical path of a trace: a backward walk over wait states, compiled.

The critical path is the longest path through the happens-before graph of the
run (local execution, messages entering at their receive completion,
collective instances, OpenMP forks and barriers). Waiting time is exactly
where one location depends on another, so the path is found backwards: start
at its end and walk back along that location's timeline; at the end ``tau`` of
a wait state (a Late Sender, Late Receiver, collective or OpenMP barrier wait;
lock contention with ``follow_locks``) the path leaves the waiting location and
continues, at the same time ``tau``, on the location it waited for (the sender,
the receiver, the last to arrive, the root, the thread releasing the lock); at the start of
a worker thread's copy of a parallel region (its team's fork) it continues on
the thread that forked the team; it stops at the start of a location. Each
wait is met at most once and time strictly decreases at each jump, so the walk
is linear in the number of wait states (plus a binary search per jump).

Where the path ends and starts (``path_ends``):

* ``"finalize"`` (default, Scalasca's rule): it ends where the last process
  enters MPI_Finalize and starts, on the location the walk arrives at, where
  that location entered MPI_Init (MPI_Init_thread): start-up and shut-down of
  the MPI library are not on it. A trace without MPI_Finalize ends at its last
  event; a location without MPI_Init starts at its first event;
* ``"trace"``: it ends at the end of the location that finishes last and
  starts at the first event of the location the walk arrives at.

Path segments are then charged to the innermost open region instance of each
location (the flat timeline of :mod:`perflow.trace.flat`), which gives the
critical-path time per call path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._arrays import unique
from ..pag.instances import Trace
from .flat import FlatTimeline, Locations, flat_timeline, locations, njit
from .threadwaits import fork_edges
from .waits import IDLE_KINDS

__all__ = [
    "CriticalPath",
    "critical_path",
    "SEGMENT_COLUMNS",
    "PATH_ENDS",
    "charge_hops",
    "wait_edges",
    "walk",
    "assemble",
    "mpi_marks",
    "mpi_ends",
]

#: Columns of the critical-path segment table.
SEGMENT_COLUMNS: dict[str, str] = {
    "process": "process the path runs on",
    "thread": "thread the path runs on",
    "start": "segment start (s)",
    "end": "segment end (s)",
    "vertex": "call path executing there (innermost open region; -1 outside every region)",
    "interval": "row in trace.intervals of that region instance (-1 outside every region)",
}


@dataclass(frozen=True)
class CriticalPath:
    """Result of :func:`critical_path`.

    Attributes
    ----------
    segments : pandas.DataFrame
        Path pieces in time order with the columns of :data:`SEGMENT_COLUMNS`.
    hops : pandas.DataFrame
        One row per stretch of the path on one location: ``process``,
        ``thread``, ``start``, ``end`` (time order).
    cp_time : numpy.ndarray
        Critical-path time per vertex (length ``n_vertices``).
    outside : float
        Path time outside every region.
    start, end : float
        Where the path starts and ends; ``length = end - start``.
    """

    segments: pd.DataFrame
    hops: pd.DataFrame
    cp_time: np.ndarray
    outside: float
    start: float
    end: float

    @property
    def length(self) -> float:
        """Length of the critical path (s)."""
        return self.end - self.start


@njit
def _bsearch_left(a, lo, hi, x):  # type: ignore[no-untyped-def]
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


#: values of the ``path_ends`` setting
PATH_ENDS = ("finalize", "trace")


@njit
def _walk(eoff, etau, edst, lstart, cur, t):  # type: ignore[no-untyped-def]
    cap = etau.shape[0] + 1
    hl = np.empty(cap, np.int64)
    ha = np.empty(cap, np.float64)
    hb = np.empty(cap, np.float64)
    n = 0
    done = False
    while not done:
        lo = eoff[cur]
        hi = eoff[cur + 1]
        j = _bsearch_left(etau, lo, hi, t) - 1
        hl[n] = cur
        hb[n] = t
        if j < lo or etau[j] < lstart[cur] or n == cap - 1:
            ha[n] = min(lstart[cur], t)
            done = True
        else:
            ha[n] = etau[j]
            t = etau[j]
            cur = edst[j]
        n += 1
    return hl[:n], ha[:n], hb[:n]


@njit
def _pieces(time, owner, vertex, offsets, hl, ha, hb):  # type: ignore[no-untyped-def]
    """The flat-timeline slots each hop covers, clipped to it, in path (time) order: hop, start, end, owner
    interval and its vertex of every piece (hops were found backwards)."""
    cap = 1024
    ph = np.empty(cap, np.int64)
    pa = np.empty(cap, np.float64)
    pb = np.empty(cap, np.float64)
    po = np.empty(cap, np.int64)
    pv = np.empty(cap, np.int64)
    n = 0
    for h in range(hl.shape[0] - 1, -1, -1):
        loc = hl[h]
        a = ha[h]
        b = hb[h]
        lo = offsets[loc]
        hi = offsets[loc + 1]
        if hi - lo < 2 or b <= a:
            continue
        # last event at or before a
        k = lo
        x = hi
        while k < x:
            mid = (k + x) >> 1
            if time[mid] <= a:
                k = mid + 1
            else:
                x = mid
        k = max(k - 1, lo)
        while k < hi - 1 and time[k] < b:
            s = max(time[k], a)
            e = min(time[k + 1], b)
            if e > s:
                if n == cap:
                    cap *= 2
                    ph2 = np.empty(cap, np.int64)
                    pa2 = np.empty(cap, np.float64)
                    pb2 = np.empty(cap, np.float64)
                    po2 = np.empty(cap, np.int64)
                    pv2 = np.empty(cap, np.int64)
                    ph2[:n] = ph[:n]
                    pa2[:n] = pa[:n]
                    pb2[:n] = pb[:n]
                    po2[:n] = po[:n]
                    pv2[:n] = pv[:n]
                    ph, pa, pb, po, pv = ph2, pa2, pb2, po2, pv2
                ph[n] = h
                pa[n] = s
                pb[n] = e
                po[n] = owner[k]
                pv[n] = vertex[k]
                n += 1
            k += 1
    return ph[:n], pa[:n], pb[:n], po[:n], pv[:n]


#: the pieces of a path (:func:`charge_hops`): hop, start, end, owner interval, vertex
Pieces = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def charge_hops(flat: FlatTimeline, hl: np.ndarray, ha: np.ndarray, hb: np.ndarray) -> Pieces:
    """Cut the hops ``(location, start, end)`` of a path into the exclusive pieces of ``flat``, in path order."""
    return _pieces(flat.time, flat.owner, flat.vertex, flat.offsets, hl.astype(np.int64), ha, hb)


def wait_edges(waits: pd.DataFrame, locs: Locations, follow_locks: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the path may jump: (waiting location, location waited for, end of the wait) of the idle waits."""
    kinds = [k for k in IDLE_KINDS if follow_locks or not k.startswith("lock_contention")]
    sel = np.flatnonzero(waits["kind"].isin(kinds).to_numpy() & (waits["cause_process"].to_numpy() >= 0))
    col = lambda c: waits[c].to_numpy()[sel]  # noqa: E731  (the five columns, not a copy of the whole table)
    src = locs.lookup(col("process"), col("thread"))
    dst = locs.lookup(col("cause_process"), col("cause_thread"))
    return src, dst, col("end")


def walk(
    n_locations: int, src: np.ndarray, dst: np.ndarray, tau: np.ndarray, lstart: np.ndarray, cur: int, t_end: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hops of the path (location, start, end; last first) from ``cur`` at ``t_end`` along the edges."""
    ok = (src >= 0) & (dst >= 0) & (src != dst)
    src, dst, tau = src[ok], dst[ok], tau[ok]
    order = np.lexsort((tau, src))
    src, dst, tau = src[order], dst[order], tau[order]
    eoff = np.searchsorted(src, np.arange(n_locations + 1)).astype(np.int64)
    return _walk(eoff, tau.astype(np.float64), dst.astype(np.int64), lstart, cur, t_end)


def assemble(
    process: np.ndarray, thread: np.ndarray, hops: tuple[np.ndarray, np.ndarray, np.ndarray], pieces: Pieces,
    n_vertices: int,
) -> CriticalPath:  # fmt: skip
    """The :class:`CriticalPath` of its hops and pieces (``process``, ``thread``: per location): pieces of
    one interval that follow each other on a location are merged into one segment; the time per vertex
    is summed piece by piece in path order."""
    hl, ha, hb = hops
    ph, pa, pb, po, pv = pieces
    pl = hl[ph]
    n = len(ph)
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = (po[1:] != po[:-1]) | (pl[1:] != pl[:-1]) | (pa[1:] != pb[:-1])
    first = np.flatnonzero(new)
    last = np.r_[first[1:], n] - 1
    cp = np.bincount(np.where(pv >= 0, pv, n_vertices), weights=pb - pa, minlength=n_vertices + 1)
    segments = pd.DataFrame(
        {
            "process": process[pl[first]].astype(np.int32),
            "thread": thread[pl[first]].astype(np.int32),
            "start": pa[first],
            "end": pb[last],
            "vertex": pv[first].astype(np.int64),
            "interval": po[first].astype(np.int64),
        }
    )
    hops_ = pd.DataFrame({"process": process[hl[::-1]], "thread": thread[hl[::-1]], "start": ha[::-1], "end": hb[::-1]})
    return CriticalPath(segments, hops_, cp[:n_vertices].copy(), float(cp[n_vertices]), float(ha[-1]), float(hb[0]))


def critical_path(
    trace: Trace,
    waits: pd.DataFrame,
    n_vertices: int,
    *,
    locs: Locations | None = None,
    flat: FlatTimeline | None = None,
    path_ends: str = "finalize",
    follow_locks: bool = False,
    names: np.ndarray | None = None,
    roles: np.ndarray | None = None,
    regions: np.ndarray | None = None,
) -> CriticalPath:
    """Find the critical path of ``trace`` given its wait-state instances.

    Parameters
    ----------
    trace : Trace
    waits : pandas.DataFrame
        The wait-state instance table (:func:`perflow.trace.waits.wait_instances`).
    n_vertices : int
        Number of top-down vertices (length of ``cp_time``).
    locs, flat : optional
        ``locations(trace)`` and ``flat_timeline(trace)``, when already at hand.
    path_ends : {"finalize", "trace"}
        Where the path ends and starts (see the module docstring).
    follow_locks : bool
        Whether lock contention moves the path to the thread that held the
        lock; by default (Scalasca's rule) the path stays on the waiting
        thread, whose waiting is then on the path.
    names : numpy.ndarray, optional
        Vertex names (to find MPI_Init and MPI_Finalize; without them the path spans the trace).
    roles, regions : numpy.ndarray, optional
        Region role and region id of each vertex (to find the OpenMP teams' forks).
    """
    if path_ends not in PATH_ENDS:
        raise ValueError(f"path_ends must be one of {PATH_ENDS}, not {path_ends!r}")
    locs = locs if locs is not None else locations(trace)
    flat = flat if flat is not None else flat_timeline(trace, locs)
    L = len(locs)
    if L == 0:
        empty = pd.DataFrame({c: np.zeros(0) for c in SEGMENT_COLUMNS})
        hops = pd.DataFrame({c: np.zeros(0) for c in ("process", "thread", "start", "end")})
        return CriticalPath(empty, hops, np.zeros(n_vertices), 0.0, 0.0, 0.0)
    lstart = flat.start()
    lend = flat.end()
    src, dst, tau = wait_edges(waits, locs, follow_locks)
    if roles is not None and regions is not None:  # a worker's team begins at its fork, on the forking thread
        fp, ft, mp_, mt, ftau = fork_edges(trace.intervals, roles, regions)
        src = np.r_[src, locs.lookup(fp, ft)]
        dst = np.r_[dst, locs.lookup(mp_, mt)]
        tau = np.r_[tau, ftau]
    cur, t_end = int(np.argmax(lend)), float(lend[np.argmax(lend)])
    if path_ends == "finalize" and names is not None:
        t_fin, fin_locs, first_init = mpi_marks(trace.intervals, locs, names)
        cur, t_end, lstart = mpi_ends(t_fin, fin_locs, first_init, lstart, cur, t_end)
    hops = walk(L, src, dst, tau, lstart, cur, t_end)
    return assemble(locs.process, locs.thread, hops, charge_hops(flat, *hops), int(n_vertices))


def mpi_marks(iv: pd.DataFrame, locs: Locations, names: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """The latest enter into MPI_Finalize (-inf: none), the locations entering it then, and each location's
    first enter into MPI_Init (MPI_Init_thread; inf: none)."""
    vname = np.asarray(names).astype(str)
    v = iv["vertex"].to_numpy()
    enter = iv["enter"].to_numpy()
    fin = np.flatnonzero(np.isin(v, np.flatnonzero(vname == "MPI_Finalize")))  # vertices by name, not every interval
    t_fin, fin_locs = -np.inf, np.zeros(0, np.int64)
    if len(fin):
        t_fin = float(enter[fin].max())
        fin_locs = unique(locs.of_interval[fin[enter[fin] == t_fin]])
    ini = np.flatnonzero(np.isin(v, np.flatnonzero(np.isin(vname, ["MPI_Init", "MPI_Init_thread"]))))
    first = np.full(len(locs), np.inf)
    if len(ini):
        np.minimum.at(first, locs.of_interval[ini], enter[ini])
    return t_fin, fin_locs, first


def mpi_ends(
    t_fin: float, fin_locs: np.ndarray, first_init: np.ndarray, lstart: np.ndarray, cur: int, t_end: float
) -> tuple[int, float, np.ndarray]:
    """Scalasca's ends (:func:`mpi_marks`): the latest enter into MPI_Finalize (on the lowest location entering
    it then), and each location's start moved to its first MPI_Init enter."""
    if np.isfinite(t_fin) and len(fin_locs):
        t_end, cur = float(t_fin), int(fin_locs.min())
    has = np.isfinite(first_init)
    if has.any():
        lstart = lstart.copy()
        lstart[has] = np.maximum(lstart[has], first_init[has])
    return cur, t_end, lstart
