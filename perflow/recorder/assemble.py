"""Assemble the recorder's per-process data into a :class:`~perflow.trace.raw.RawTrace`.

* One location per recorded thread: thread 0 of each rank (``process`` = world
  rank), then its OpenMP worker threads 1, 2, ... (recorded through OMPT).
* ``region_events``: the program's root region around everything, and one
  region instance per recorded MPI call (regions: see :mod:`.regions`).
* With compiler instrumentation (``perflow cc``): one region instance per
  recorded user-function call, the MPI calls and samples nested inside.
* ``p2p_events``/``coll_events``: as recorded (MPI_Init and MPI_Finalize carry
  none: the trace builder makes them world barriers from their names); a
  non-blocking collective has its BEGIN in the I-call and its END in the
  Wait/Test that completed it, both with its ``request`` id.
* ``metric_events``: for MPI-IO calls, the accumulated counters
  ``io_bytes_read``/``io_bytes_written`` of the location, taken right after
  the call's Enter and before its Leave (the builder's per-instance deltas
  are the bytes of each call).
* ``sample_events`` with ``stacks``: timer samples of the computation (none
  inside MPI calls), each worth the timer periods it stands for (native) or
  the CPU time since the previous tick (Python); a worker thread's samples
  each stand for one period of its CPU time.
* time off the CPU (descheduled, blocked): instances of the region
  ``off_cpu``, outside MPI calls with the call stack of the sample that
  measured it, inside an MPI call as a child of the call (see :mod:`.offcpu`).
* ``thread_events``: OpenMP forks, joins, team begins and ends, lock
  acquisitions and releases, as the OTF2 reader reads Score-P's (see
  :func:`~perflow.recorder.eventrows.thread_rows`), next to the OpenMP regions (parallel, barriers,
  critical sections, lock calls, tasks, worksharing).
* ``rma_events``: MPI one-sided records as Score-P writes them (windows,
  window collectives, group syncs, locks, transfers and their local
  completions), with ``attrs["rma_windows"]``/``["rma_groups"]``; see
  :mod:`.rmarows`.
* ``comms``: communicator ids mapped to the world ranks of their members.
* ``attrs["function_calls"]``: with compiler instrumentation, per location
  and function region, the calls counted (``visits``), recorded, dropped by
  ``--min-call`` (with their total time) and whether the function was
  switched off (``off`` 1) or excluded by the filter file (``off`` 2); what
  ``perflow score`` estimates the cost of recording from.

Times are put on one time line with each process's offset between its
monotonic clock and the real-time clock (processes on one host share the
monotonic clock, so the median offset is used for all of them).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import FormatError
from ..trace.raw import (
    COLL_COLUMNS,
    METRIC_COLUMNS,
    P2P_COLUMNS,
    REGION_COLUMNS,
    RMA_COLUMNS,
    SAMPLE_COLUMNS,
    THREAD_COLUMNS,
    RawTrace,
)
from .decode import ProcessData, read_dir
from .eventrows import (
    IO_METRICS,
    THR_EXTRA,
    coll_rows,
    comms_of,
    concat,
    fill_send_bytes,
    io_rows,
    lock_ids,
    p2p_rows,
    thread_rows,
)
from .functions import FN, R_COLL, R_ENTER, R_IO, R_LEAVE, R_OFF, R_P2P, R_RMA, R_THR
from .incomplete import missing
from .offcpu import Placed, off_cpu_windows
from .regions import NativeFrames, PythonFrames, RegionTable
from .rmarows import rma_definitions, rma_rows

__all__ = ["assemble", "load_recording", "CALL_COLUMNS"]

#: Columns of ``attrs["function_calls"]["rows"]``.
CALL_COLUMNS = ("location", "region", "visits", "recorded", "dropped", "dropped_time", "off")

log = logging.getLogger(__name__)


def _offsets(procs: list[ProcessData]) -> np.ndarray:
    off = np.array([float(p.meta.get("clock_offset", 0.0)) for p in procs])
    hosts = {p.meta.get("host", "") for p in procs}
    if len(hosts) == 1:
        off[:] = np.median(off)
    return off


def _close_open(ev: np.ndarray, src: str, last_sample: float = -np.inf, root: bool = True) -> np.ndarray:
    """Append LEAVE records for regions left open (a process that died or exited inside MPI).

    They are stamped with the last time stamp of the stream or of its samples
    (``last_sample``, on the stream's clock: a rank that hung in computation
    was sampled after its last region record). ``root``: the stream is a
    process's initial thread, which starts with the program's root region (a
    worker thread's starts with its first region).
    """
    typ = ev["type"]
    reg = (typ == R_ENTER) | (typ == R_LEAVE)
    if not reg.any():
        if not root:
            return ev
        raise FormatError(src, "no region events (the process did not start recording)")
    first = np.flatnonzero(reg)[0]
    if typ[first] != R_ENTER or (root and ev["fn"][first] != FN["program"]):
        raise FormatError(src, "event stream does not start with the program's root region")
    delta = np.where(typ == R_ENTER, 1, np.where(typ == R_LEAVE, -1, 0))
    depth = np.cumsum(delta)
    if depth.min() < 0:
        raise FormatError(src, f"region leave without enter at event {int(np.argmax(depth < 0))}")
    opened = int(depth[-1]) if len(depth) else 0
    if opened == 0:
        return ev
    log.warning("%s: %d region(s) left open at the end; closing them at the last time stamp", src, opened)
    enters = np.flatnonzero(typ == R_ENTER)
    sufmin = np.minimum.accumulate(depth[::-1])[::-1]
    extra = np.zeros(opened, dtype=ev.dtype)
    extra["type"] = R_LEAVE
    extra["t"] = max(float(ev["t"].max()), last_sample)
    extra["comm"] = -1
    for k, level in enumerate(range(opened, 0, -1)):  # innermost open region first
        cand = enters[(depth[enters] == level) & (sufmin[enters] >= level)]
        extra["fn"][k] = ev["fn"][cand[-1]] if len(cand) else FN["program"]
    return np.concatenate([ev, extra])


def _region_ids(ev: np.ndarray, enter_region: np.ndarray) -> np.ndarray:
    """Region id of every region record: ENTERs given, LEAVEs matched to their ENTER by nesting level."""
    typ = ev["type"]
    isreg = (typ == R_ENTER) | (typ == R_LEAVE)
    t = typ[isreg]
    delta = np.where(t == R_ENTER, 1, -1)
    depth = np.cumsum(delta)
    level = np.where(t == R_ENTER, depth, depth + 1)
    out = np.empty(len(t), np.int32)
    ent = t == R_ENTER
    out[ent] = enter_region
    idx = np.arange(len(t))
    for lv in np.unique(level):
        e = idx[ent & (level == lv)]
        lv_leave = idx[~ent & (level == lv)]
        k = np.searchsorted(e, lv_leave) - 1
        out[lv_leave] = out[e[k]]
    return out


def assemble(procs: list[ProcessData], source: str = "", attrs: dict | None = None) -> RawTrace:
    """Build a raw trace from decoded processes (one per rank, sorted by rank).

    Parameters
    ----------
    procs : list of ProcessData
    source : str
        Recorded directory, for messages and ``attrs['source']``.
    attrs : dict, optional
        Extra metadata for ``RawTrace.attrs``.

    Returns
    -------
    RawTrace
    """
    kind = procs[0].kind
    exe = procs[0].meta.get("exe", "")
    table = RegionTable(Path(exe).name or "program", exe)
    frames = PythonFrames(table) if kind == "python" else NativeFrames(table)
    streams = [(s, i) for i, p in enumerate(procs) for s in (p, *p.threads)]  # (thread stream, its process)
    if isinstance(frames, NativeFrames):
        frames.prepare([s for s, _ in streams])
    off = _offsets(procs)
    t0 = min(float(s.events["t"][0]) + off[i] for s, i in streams if len(s.events))

    comm_ids, comm_members, comm_names = comms_of(procs)
    rdefs = rma_definitions(procs, comm_ids)
    reg_parts, p2p_parts, coll_parts, smp_parts, met_parts, rma_parts, thr_parts = [], [], [], [], [], [], []
    nreg_total = 0
    calls: list[list] = []
    for loc, (p, pi) in enumerate(streams):
        o = off[pi]
        if isinstance(frames, NativeFrames) and p.thread == 0:
            calls += [[loc, frames.user_region(p, a), *st] for a, st in p.calls.items()]
        src = f"{source}/p{p.pid}" + (f".t{p.thread}" if p.thread else "")
        last = float(p.sample_time.max()) if len(p.sample_time) else -np.inf
        ev = _close_open(np.asarray(p.events), src, last, root=p.thread == 0)
        typ = ev["type"]
        time = ev["t"] + o - t0
        isreg = (typ == R_ENTER) | (typ == R_LEAVE)
        ent = typ == R_ENTER
        # one region per distinct (function, call site, context, enclosing user function): resolve those only
        keys = ["fn", "addr", "ctx", "utop"]
        triples = pd.DataFrame(
            {
                "fn": ev["fn"][ent].astype(np.int64),
                "addr": ev["addr"][ent].view(np.int64),
                "ctx": ev["n1"][ent],
                "utop": ev["n2"][ent],
            }
        )
        inverse = triples.groupby(keys, sort=False).ngroup().to_numpy()  # by first appearance
        uniq = triples.drop_duplicates()
        mask = 0xFFFFFFFFFFFFFFFF
        ids = np.array(
            [
                0 if f == 0 else frames.call_region(p, int(f), int(a) & mask, int(c), int(u) & mask)
                for f, a, c, u in zip(uniq["fn"], uniq["addr"], uniq["ctx"], uniq["utop"])
            ],
            dtype=np.int32,
        )
        enter_region = ids[inverse] if len(uniq) else np.zeros(0, np.int32)
        regions = _region_ids(ev, enter_region)
        rtime = time[isreg]
        rkind = np.where(typ[isreg] == R_ENTER, 0, 1).astype(np.int8)
        before = np.cumsum(isreg) - isreg  # region records before each record
        nsmp = len(p.sample_time)
        stime = p.sample_time + o - t0
        # time off the CPU: in the stretches (from the samples' windows) and inside MPI calls (OFF records)
        isoff = typ == R_OFF
        oins = [before[isoff]]
        # inside the MPI call: between its Enter (the record before) and its Leave (the record after)
        lo = rtime[np.clip(before[isoff] - 1, 0, None)] if len(rtime) else time[isoff]
        hi = rtime[np.clip(before[isoff], None, len(rtime) - 1)] if len(rtime) else time[isoff]
        ostart = [np.clip(time[isoff], lo, hi)]
        oend = [np.clip(time[isoff] + ev["addr"][isoff].view(np.float64), ostart[0], hi)]
        oreg = [np.full(int(isoff.sum()), table.off_cpu(-1) if isoff.any() else -1, np.int32)]
        if nsmp:
            utop = p.sample_utop if len(p.sample_utop) == nsmp else np.zeros(nsmp)
            stacks = np.array([frames.sample_stack(p, f, int(u)) for f, u in zip(p.sample_frames, utop)], np.int32)
            nan = np.full(nsmp, np.nan)
            start = p.sample_start + o - t0 if len(p.sample_start) == nsmp else nan
            cpu = p.sample_cpu if len(p.sample_cpu) == nsmp else nan
            hz = float(p.meta.get("hz", 0) or 0)
            gone = off_cpu_windows(
                rtime, stime, p.sample_nregion, p.sample_weight, start, cpu, 1 / hz if hz else np.inf
            )
            oins.append(p.sample_nregion[gone.sample])
            ostart.append(gone.start)
            oend.append(gone.end)
            oreg.append(np.array([table.off_cpu(int(s)) for s in stacks[gone.sample]], np.int32))
        placed = Placed(rtime, rkind, regions, *(np.concatenate(a) for a in (oins, ostart, oend, oreg)))
        rtime, rkind, regions = placed.time, placed.kind, placed.region
        before_unplaced, before = before, placed.position(before, time)
        if nsmp:
            smp_parts.append(
                {
                    "location": np.full(nsmp, loc, np.int32),
                    "time": stime,
                    "stack": stacks,
                    "weight": p.sample_weight,
                    "pos": nreg_total + placed.position(p.sample_nregion, stime),
                }
            )
        nreg = len(rtime)
        reg_parts.append(
            {
                "location": np.full(nreg, loc, np.int32),
                "time": rtime,
                "kind": rkind,
                "region": regions,
            }
        )
        cmap = comm_ids[pi]
        lut = np.full(max(cmap, default=0) + 1, -1, np.int32)
        for local, glob in cmap.items():
            lut[local] = glob
        for mask, parts, make in (
            (typ == R_P2P, p2p_parts, p2p_rows),
            (typ == R_COLL, coll_parts, coll_rows),
        ):
            if mask.any():
                rows = make(ev[mask], time[mask], loc, nreg_total + before[mask])
                c = ev["comm"][mask]
                valid = (c >= 0) & (c < len(lut))
                rows["comm"] = np.where(valid, lut[np.where(valid, c, 0)], -1)
                parts.append(rows)
        rma = typ == R_RMA
        if rma.any():
            rma_parts.append(rma_rows(ev[rma], time[rma], loc, nreg_total + before[rma], rdefs, pi))
        thr = typ == R_THR
        if thr.any():
            thr_parts.append(thread_rows(ev[thr], time[thr], loc, nreg_total + before[thr], pi))
        io = typ == R_IO
        if io.any():
            met_parts.append(io_rows(ev[io], time[io], time, typ, loc, nreg_total, before_unplaced[io], placed))
        nreg_total += nreg

    p2p = concat(p2p_parts, P2P_COLUMNS)
    ranks = np.array([s.rank for s, _ in streams], np.int64)
    fill_send_bytes(p2p, ranks, comm_members)
    locations = pd.DataFrame(
        {
            "process": ranks,
            "thread": [s.thread for s, _ in streams],
            "name": [f"rank {s.rank}" + (f" thread {s.thread}" if s.thread else "") for s, _ in streams],
            "type": "cpu",
            "host": [s.meta.get("host", "") for s, _ in streams],
        }
    )
    region_events = concat(reg_parts, REGION_COLUMNS)
    meta = {
        "source": source,
        "creator": "perflow record",
        "program": exe,
        "kind": kind,
        "timer_resolution": 1e-9,
        "ticks": float(region_events["time"].max()) if len(region_events["time"]) else 0.0,
        "sample_rate": int(procs[0].meta.get("hz", 0) or 0),
        # the sampling timer's clock ("timer wall" / "timer thread-cpu" / "timer itimer-prof" lines)
        "sample_clock": "wall" if procs[0].meta.get("timer") == "wall" else "cpu",
        "root_region": 0,
        "hosts": sorted({p.meta.get("host", "") for p in procs}),
        **_openmp_attrs(procs),
        **(rdefs.attrs() if rma_parts else {}),
        **({"function_calls": {"columns": list(CALL_COLUMNS), "rows": calls}} if calls else {}),
        **(attrs or {}),
    }
    notes = missing(procs, off, t0)
    if notes:  # an interrupted or crashed run: say which ranks, from when
        meta["incomplete"] = "\n".join(notes)
        for n in notes:
            log.warning("%s: %s", source, n)
    raw = RawTrace(
        locations=locations,
        regions=table.regions_frame(),
        region_events=region_events,
        p2p_events=p2p,
        coll_events=concat(coll_parts, {**COLL_COLUMNS, "request": np.dtype(np.int64)}),
        sample_events=concat(smp_parts, SAMPLE_COLUMNS),
        metric_events=concat(met_parts, METRIC_COLUMNS),
        rma_events=concat(rma_parts, RMA_COLUMNS),
        thread_events=lock_ids(concat(thr_parts, {**THREAD_COLUMNS, **THR_EXTRA})),
        **({"metrics": IO_METRICS.copy()} if met_parts else {}),
        stacks=table.stacks_frame(),
        comms=comm_members,
        comm_names=comm_names,
        attrs=meta,
    )
    raw.validate()
    return raw


def _openmp_attrs(procs: list[ProcessData]) -> dict:
    """How OpenMP threads were recorded: ``threads`` per process and ``openmp`` (the OMPT runtime, or the
    OpenMP runtime without OMPT found in the program, whose worker threads were not recorded)."""
    tool = next((p.meta["omp_tool"] for p in procs if "omp_tool" in p.meta), "")
    runtime = next((p.meta["omp_runtime"] for p in procs if "omp_runtime" in p.meta), "")
    if not tool and not runtime:
        return {}
    out = {"threads": max(1 + len(p.threads) for p in procs)}
    if tool:
        out["openmp"] = "OMPT: " + tool.split(None, 1)[-1]
    else:
        out["openmp"] = f"{runtime} (no OMPT: only the initial thread recorded)"
    return out


def load_recording(path: str | Path, attrs: dict | None = None) -> RawTrace:
    """Decode and assemble a directory of recorder output (``<out>/raw``).

    Raises
    ------
    FormatError
        When the directory holds no usable data.
    """
    return assemble(read_dir(path), source=str(path), attrs=attrs)
