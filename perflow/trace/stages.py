"""The per-partition stages of the trace pipeline: region scan, then finalisation with the global numbering.

A partition is a :class:`~perflow.trace.raw.RawTrace` holding the events of
some whole processes (a whole trace is one partition). It keeps the trace's
full definition tables, so its ``location`` column holds *global* location
ids; only ``pos`` is local (an index into the partition's own region events).
Everything here is plain numpy/pandas; :mod:`perflow.trace.pipeline` runs it
on a runtime (this process, or an engine's workers).

Two steps, with a small exchange of metadata in between:

1. :func:`scan_part` pairs Enter/Leave events (the compiled scan of
   :mod:`perflow.trace.scan`), computes inclusive/exclusive times, grows the
   calling-context tree by region call stacks and sampled stacks
   (:mod:`perflow.trace.contexts`), cuts the stretches between region events into pieces
   and orders them with the instances of each location
   (:mod:`perflow.trace.pieces`), finds the instance enclosing every
   message and collective event, and returns a :class:`PartState` whose
   :func:`summarize` is small: the partition's local calling-context tree
   with the first appearance of each call path, row counts per location and
   the keys of its collective instances.
2. The summaries are merged (:mod:`perflow.trace.numbering`) into global
   call-path ids, interval offsets and collective instance ids, and
   :func:`finalize` turns the state into global tables: intervals (instances
   and sample pieces, :mod:`perflow.trace.partrows`), metric rows,
   send/receive records and collective rows. Messages and collectives refer
   to the global row of their instance, which counts the pieces before it.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._arrays import unique
from ..errors import TraceError
from ..pag.instances import take_or
from .collmatch import collective_event_rows, synthesised_collective_rows
from .contexts import TreeGrower, attach_region_stacks, attach_samples, depths, stack_frames, stretch_ends
from .io import io_rows
from .locks import lock_rows
from .match import p2p_threaded
from .omptree import team_contexts
from .partrows import interval_rows, metric_sums
from .pieces import Pieces, row_order, stretch_pieces
from .raw import RawTrace
from .records import p2p_records
from .rma import rma_rows
from .rowindex import global_rows, local_rows, offset_in_location, within_location
from .scan import SCAN_ERRORS, ScanResult, enclosing_instance, scan_regions
from .tally import child_time, exclusive_from_children, last_time_per_location, metric_deltas

__all__ = [
    "PartState",
    "PartTables",
    "scan_part",
    "summarize",
    "finalize",
    "within_location",
    "global_rows",
    "local_rows",
    "offset_in_location",
]

log = logging.getLogger(__name__)


@dataclass
class PartState:
    """What a partition keeps between the scan and the finalisation (lives on a worker)."""

    pid: int
    raw: RawTrace
    res: ScanResult
    inst_loc: np.ndarray
    t_enter: np.ndarray
    t_leave: np.ndarray
    inc: np.ndarray
    exc: np.ndarray
    closed: np.ndarray
    p2p_open: np.ndarray
    coll_open: np.ndarray
    coll: pd.DataFrame
    infer: bool = False
    #: the local calling-context tree after call stacks and samples grew it: scan call paths first
    #: (ids ``0..n_scan-1``, their parents possibly re-pointed to stack frames), then synthetic vertices
    cp_parent: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cp_region: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: inclusive time of synthetic vertices above region instances and pieces: (local vertex, location, time)
    syn_rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    #: the samples' pieces (:mod:`perflow.trace.pieces`), or None without samples
    pieces: Pieces | None = None
    #: interval rows of the partition (instances and pieces in pre-order): location of each row,
    #: row of each local instance (empty without pieces: row i is instance i), row of each piece
    row_loc: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    row_of_inst: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    row_of_piece: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: the local instance open at each thread event and I/O event (-1 none)
    thr_open: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    io_open: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    rma_open: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: OpenMP teams (perflow.trace.omptree): where each call path appears first, and per-instance metrics
    cp_first: tuple[np.ndarray, np.ndarray] | None = None
    inst_metrics: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class PartTables:
    """A partition's results in global numbering (lives on a worker).

    ``ginst`` is the global interval row of each local instance (increasing);
    ``metric_vertex``/``metric_loc``/``metric_cols`` are the per-(vertex,
    location) sums (global vertex ids) before byte metrics; ``sends``/``recvs`` are the message records;
    ``coll`` the collective rows (single-process columns plus ``key``).
    """

    pid: int
    processes: np.ndarray
    ginst: np.ndarray
    intervals: pd.DataFrame
    metric_vertex: np.ndarray
    metric_loc: np.ndarray
    metric_cols: dict[str, np.ndarray]
    deltas: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
    delta_info: dict[str, Any]
    sends: pd.DataFrame
    recvs: pd.DataFrame
    coll: pd.DataFrame
    n_closed: int = 0
    n_sends: int = -1
    n_recvs: int = -1
    attrs: dict[str, Any] = field(default_factory=dict)
    #: lock acquisitions (:func:`perflow.trace.locks.lock_rows`), global interval rows
    locks: pd.DataFrame | None = None
    #: I/O operations (:func:`perflow.trace.io.io_rows`), global interval rows
    io: pd.DataFrame | None = None
    #: RMA records (:func:`perflow.trace.rma.rma_rows`), global interval rows
    rma: pd.DataFrame | None = None


def _scan_error(raw: RawTrace, code: int, at: int) -> TraceError:
    src = raw.attrs.get("source", "trace")
    what = SCAN_ERRORS.get(code, f"error {code}")
    if code == 3:
        return TraceError(f"{src}: location {at}: {what}; pass close_open=True to close them at the last event")
    ev = raw.region_events
    loc = int(ev["location"][at])
    idx = int(offset_in_location(ev["location"], np.array([at]))[0])
    reg = int(ev["region"][at])
    rname = raw.regions["name"].iloc[reg] if 0 <= reg < len(raw.regions) else reg
    return TraceError(
        f"{src}: location {loc}, region event {idx} of the location at t={ev['time'][at]:.9f}: {what} "
        f"(region {rname!r})"
    )


def scan_part(
    pid: int, raw: RawTrace, *, close_open: bool = False, validate: bool = True, infer: bool = False
) -> PartState:
    """Scan one partition's region events and grow its calling-context tree (step 1).

    Raises
    ------
    TraceError
        On unmatched Enter/Leave events or a broken ordering contract, naming
        the global location.
    """
    if validate:
        raw.validate()
    ev = raw.region_events
    rloc = ev["location"]
    res = scan_regions(rloc, ev["kind"], ev["region"], close_open=close_open, time=ev["time"])
    if res.error:
        raise _scan_error(raw, res.error, res.error_at)
    assert res.t_enter is not None and res.t_leave is not None and res.child_inc is not None
    inst_loc = rloc[res.enter].astype(np.int64)
    t_enter, t_leave = res.t_enter, res.t_leave
    closed = res.leave >= 0
    if closed.all():
        child = res.child_inc
    else:  # a truncated trace: instances left open close at their location's last event
        last = last_time_per_location(raw, len(raw.locations))
        t_leave = t_leave.copy()
        t_leave[~closed] = last[inst_loc[~closed]]
        log.warning("%s: closing %d region instances left open", raw.attrs.get("source", "trace"), (~closed).sum())
        child = None
    thr_open = enclosing_instance(res.open_after, rloc, raw.thread_events["location"], raw.thread_events["pos"])
    # OpenMP teams: workers below the forking call path, parallel regions from fork to join (perflow.trace.omptree)
    teams = team_contexts(raw, res, thr_open, inst_loc, t_enter, t_leave)
    if teams is not None:
        res, t_enter, t_leave, child = teams.res, teams.t_enter, teams.t_leave, None
    inc = t_leave - t_enter
    if child is None:
        child = child_time(inc, res.parent)
    exc = exclusive_from_children(inc, child, t_leave)
    p2p_open = enclosing_instance(res.open_after, rloc, raw.p2p_events["location"], raw.p2p_events["pos"])
    coll_open = enclosing_instance(res.open_after, rloc, raw.coll_events["location"], raw.coll_events["pos"])
    st = PartState(pid, raw, res, inst_loc, t_enter, t_leave, inc, exc, closed, p2p_open, coll_open, pd.DataFrame())
    st.infer = infer
    st.thr_open = thr_open
    st.io_open = enclosing_instance(res.open_after, rloc, raw.io_events["location"], raw.io_events["pos"])
    st.rma_open = enclosing_instance(res.open_after, rloc, raw.rma_events["location"], raw.rma_events["pos"])
    # calling contexts without Enter/Leave events: region call stacks and samples extend the tree
    tree = TreeGrower(res.cp_parent, res.cp_region)
    frames = stack_frames(raw)
    syn = [attach_region_stacks(raw, res, tree, frames)]
    if teams is not None:
        syn.append(teams.ancestor_rows)
        st.cp_first, st.inst_metrics = teams.first, teams.inst_metrics
    sampled = len(raw.sample_events["location"]) > 0
    if sampled or len(syn[0][0]) or _has_stacks(raw):
        # every stretch between two region events becomes pieces: sample covers, and the gaps between them in
        # the calling context their two ends share
        smp = attach_samples(raw, res, tree, frames) if sampled else None
        parent = np.asarray(tree.parent, dtype=np.int64)
        ends = stretch_ends(raw, res, parent)
        pc = st.pieces = stretch_pieces(raw, ends, parent, depths(parent), t_leave, smp)
        # a piece's time is inclusive time of the synthetic frames between its leaf and its instance
        dur = pc.leave - pc.enter
        for i, v in tree.synthetic_ancestors(parent[pc.vertex]):
            syn.append((v, pc.location[i], dur[i]))
        if len(pc):  # the instances' exclusive time loses what their pieces cover
            st.exc = exclusive_from_children(inc, child + child_time(pc.leave - pc.enter, pc.parent, len(inc)), t_leave)
    st.syn_rows = tuple(np.concatenate(a) for a in zip(*syn))  # type: ignore[assignment]
    if st.pieces is not None and len(st.pieces):
        st.row_loc, st.row_of_inst, st.row_of_piece = row_order(inst_loc, res.enter, st.pieces)
    else:  # the rows are the instances, in order (row_of_inst stays empty: no instance-long arange)
        st.row_loc = inst_loc
    st.cp_parent, st.cp_region = tree.arrays()
    st.coll = _collective_rows(st, infer)
    # what finalisation does not read is not kept until it runs (an event-long and an instance-long array)
    st.res = dataclasses.replace(res, open_after=np.zeros(0, np.int64), child_inc=None)
    st.coll_open = np.zeros(0, np.int64)
    return st


def _has_stacks(raw: RawTrace) -> bool:
    """Whether some region carries a call stack (``regions['stack']`` >= 0)."""
    if "stack" not in raw.regions.columns or not len(raw.stacks):
        return False
    return bool((raw.regions["stack"].fillna(-1).to_numpy() >= 0).any())


def summarize(st: PartState) -> dict[str, Any]:
    """The small metadata of step 1 that is merged into the global numbering (see :mod:`.numbering`)."""
    res = st.res
    rloc = st.raw.region_events["location"]
    ncp = len(res.cp_parent)
    if ncp and st.cp_first is not None:  # numbered by the team layout (perflow.trace.omptree)
        cp_loc, first_ev = st.cp_first
        cp_off = offset_in_location(rloc, first_ev)
    elif ncp:
        # call paths are numbered in order of first appearance: a new one is the running maximum plus one
        cm = np.maximum.accumulate(res.callpath)
        first_inst = np.flatnonzero(np.r_[True, cm[1:] > cm[:-1]])
        first_ev = res.enter[first_inst]
        cp_loc = rloc[first_ev].astype(np.int64)
        cp_off = offset_in_location(rloc, first_ev)
    else:
        cp_loc = cp_off = np.zeros(0, dtype=np.int64)
    nloc = len(st.raw.locations)
    c = st.coll
    if len(c):
        uk, idx = _first_of_each(c["key"].to_numpy())
        ckey = (uk, c["first_cls"].to_numpy()[idx], c["first_loc"].to_numpy()[idx], c["first_off"].to_numpy()[idx])
    else:
        ckey = tuple(np.zeros(0, dtype=np.int64) for _ in range(4))
    return {
        "pid": st.pid,
        "cp_parent": res.cp_parent,  # the parent the scan saw: with the region, a call path's identity
        "cp_region": res.cp_region,
        "cp_loc": cp_loc,
        "cp_off": cp_off,
        "final_parent": st.cp_parent[:ncp],  # the parent after call stacks re-pointed it (a stack frame)
        "syn_parent": st.cp_parent[ncp:],  # synthetic vertices: local parent and region
        "syn_region": st.cp_region[ncp:],
        "n_inst": np.bincount(st.row_loc, minlength=nloc),  # interval rows: instances and sample pieces
        "n_samples": len(st.raw.sample_events["location"]),
        "omp_teams": bool(st.inst_metrics),  # OpenMP teams: interval rows get omp_fork/omp_join columns
        "n_p2p": np.bincount(st.raw.p2p_events["location"], minlength=nloc),
        # processes with point-to-point events on several locations (threads): then posting order is time order
        "p2p_threaded": p2p_threaded(st.raw),
        "coll_keys": ckey,
        "n_events": st.raw.n_events,
    }


def _first_of_each(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_index=True)`` by hashing: the rows of an instance key are sorted, not all rows."""
    codes, uniq = pd.factorize(key, sort=False)  # codes numbered in order of first appearance
    cm = np.maximum.accumulate(codes)
    first = np.flatnonzero(np.r_[True, cm[1:] > cm[:-1]])  # the k-th new code's row is code k's first
    order = np.argsort(uniq, kind="stable")
    return np.asarray(uniq)[order], first[order]


def _collective_rows(st: PartState, infer: bool) -> pd.DataFrame:
    """Collective participant rows as :func:`perflow.trace.collmatch.collective_event_rows` builds them, before numbering.

    Extra columns: ``key`` (the single-process instance key ``key_comm * 2**32
    + seq``), ``local_iv`` (local instance) and ``first_cls``/``first_loc``/
    ``first_off`` (where the row sorts in the single-process row order).
    """
    raw = st.raw
    parts = []
    ev_rows = collective_event_rows(raw, st.coll_open, st.t_enter)
    if len(ev_rows):
        loc = raw.coll_events["location"]  # sorted location ids (int32): searched as they are
        parts.append(
            pd.DataFrame(
                {
                    "key": ev_rows["key_comm"].to_numpy() * (1 << 32) + ev_rows["seq"].to_numpy(),
                    "first_cls": np.zeros(len(ev_rows), dtype=np.int64),
                    "first_loc": ev_rows["location"].to_numpy(),
                    "first_off": offset_in_location(loc, ev_rows["row"].to_numpy()),
                    **_common_columns(ev_rows),
                },
                copy=False,
            )
        )
    syn = synthesised_collective_rows(
        raw, st.coll_open, st.res.callpath, st.res.cp_region, st.inst_loc, st.t_enter, st.t_leave, infer
    )
    if len(syn):
        cand = syn["interval"].to_numpy()
        parts.append(
            pd.DataFrame(
                {
                    "key": syn["key_comm"].to_numpy() * (1 << 32) + syn["seq"].to_numpy(),
                    "first_cls": np.ones(len(syn), dtype=np.int64),
                    "first_loc": st.inst_loc[cand],
                    "first_off": offset_in_location(st.inst_loc, cand),
                    **_common_columns(syn),
                },
                copy=False,
            )
        )
    if not parts:
        return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in ("key", "first_cls", "first_loc", "first_off")})
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def _common_columns(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    out = {c: rows[c].to_numpy() for c in ("process", "thread")}
    out["local_iv"] = rows["interval"].to_numpy()
    out.update({c: rows[c].to_numpy() for c in ("op", "comm", "root", "sent", "received", "begin", "end")})
    return out


def finalize(st: PartState, maps: dict[str, Any]) -> PartTables:
    """Step 2: global ids for call paths, intervals and collective instances.

    ``maps`` holds ``cp_map`` (local call path -> global vertex, this
    partition's), ``inst_off`` and ``p2p_off`` (global row offset of each
    location's intervals and p2p events), ``coll_keys``/``coll_ids``
    (sorted instance keys and their global instance ids) and ``threaded``
    (whether any process has point-to-point events on several threads).
    With ``release`` true the state's arrays are dropped once consumed (the
    caller never uses the state again); with ``release_events`` true so are
    the partition's raw event tables (the build owns them).
    """
    raw, res = st.raw, st.res
    nloc = len(raw.locations)
    free = bool(maps.get("release_events"))
    cp_map = np.asarray(maps["cp_map"], dtype=np.int64)
    loc_proc = raw.locations["process"].to_numpy(dtype=np.int64)
    loc_thr = raw.locations["thread"].to_numpy(dtype=np.int64)
    grow = global_rows(st.row_loc, maps["inst_off"])  # global row of every local row
    ginst = grow[st.row_of_inst] if st.pieces is not None and len(st.pieces) else grow  # ... of every local instance
    sampled = bool(maps.get("sampled", False))
    procs = unique(loc_proc[unique(raw.region_events["location"])]) if nloc else np.zeros(0, np.int64)
    if free:  # the scan consumed the region and collective events (st.coll); the metric deltas need the count only
        raw.drop_events("coll_events")
        raw.region_events = {"location": raw.region_events["location"]}
    # the sums first: their instance-long inputs go before the interval columns are made (a lower peak)
    uniq, cols = metric_sums(st, nloc, sampled)
    pieced = sampled or _has_stacks(raw)
    deltas_raw, delta_info = metric_deltas(raw, res, st.inst_loc)
    if maps.get("release"):  # the state is not used again (a run in this process): its sums' inputs go now
        st.inc = st.exc = np.zeros(0)
        st.res = res = dataclasses.replace(res, enter=np.zeros(0, np.int64), leave=np.zeros(0, np.int64))
    if free:
        raw.drop_events("region_events", "metric_events", "sample_events")
    # the send/receive records before the interval columns: the p2p events go back before those are made
    p2p_row = global_rows(raw.p2p_events["location"], maps["p2p_off"])
    sends, recvs = p2p_records(
        raw,
        st.p2p_open,
        res.callpath,
        res.cp_region,
        ginst,
        st.t_enter,
        st.t_leave,
        p2p_row,
        threaded=maps.get("threaded", True),
    )
    del p2p_row
    if maps.get("release"):
        st.p2p_open = np.zeros(0, np.int64)
    if free:
        raw.drop_events("p2p_events")
    intervals = interval_rows(
        st,
        cp_map,
        grow,
        ginst,
        loc_proc,
        loc_thr,
        sampled,
        pieced,
        bool(maps.get("omp_teams", False)),
        maps.get("shared_rows"),
    )
    deltas = {}
    for name, (k, vals) in deltas_raw.items():
        lv = cp_map[k // max(nloc, 1)]
        lo = k % max(nloc, 1)
        deltas[name] = (lv, lo, vals)
    coll = st.coll
    if len(coll):
        ck = coll["key"].to_numpy()
        inst = maps["coll_ids"][np.searchsorted(maps["coll_keys"], ck)]
        liv = coll["local_iv"].to_numpy()
        coll = pd.DataFrame(
            {
                "instance": inst,
                "process": coll["process"].to_numpy(),
                "thread": coll["thread"].to_numpy(),
                "interval": take_or(ginst, liv, -1),
                **{c: coll[c].to_numpy() for c in ("op", "comm", "root", "sent", "received", "begin", "end")},
            },
            copy=False,
        )
    locks = lock_rows(raw, st.thr_open, ginst, loc_proc, loc_thr)
    io = io_rows(raw, st.io_open, ginst, loc_proc, loc_thr)
    rma = rma_rows(raw, st.rma_open, ginst, loc_proc, loc_thr)
    if free:
        raw.drop_events()
    return PartTables(
        st.pid,
        procs,
        grow,
        intervals,
        cp_map[uniq // max(nloc, 1)] if len(uniq) else np.zeros(0, np.int64),
        uniq % max(nloc, 1),
        cols,
        deltas,
        delta_info,
        sends,
        recvs,
        coll,
        int((~st.closed).sum()),
        locks=locks,
        io=io,
        rma=rma,
    )
