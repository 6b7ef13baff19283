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
  inside MPI calls), each worth one timer period of the main thread's CPU
  time (native) or the CPU time since the previous tick (Python).
* ``thread_events``: OpenMP forks, joins, team begins and ends, lock
  acquisitions and releases, as the OTF2 reader reads Score-P's (see
  :func:`_thread_rows`), next to the OpenMP regions (parallel, barriers,
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
from ..kinds import P2P, ThreadEv
from ..trace.raw import (
    COLL_COLUMNS,
    METRIC_COLUMNS,
    P2P_COLUMNS,
    REGION_COLUMNS,
    RMA_COLUMNS,
    SAMPLE_COLUMNS,
    THREAD_COLUMNS,
    RawTrace,
    empty_table,
)
from .decode import ProcessData, read_dir
from .functions import FN, R_COLL, R_ENTER, R_IO, R_LEAVE, R_P2P, R_RMA, R_THR
from .incomplete import missing
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


def _close_open(ev: np.ndarray, src: str, root: bool = True) -> np.ndarray:
    """Append LEAVE records for regions left open (a process that died or exited inside MPI).

    ``root``: the stream is a process's initial thread, which starts with the
    program's root region (a worker thread's starts with its first region).
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
    extra["t"] = ev["t"].max()
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

    comm_ids, comm_members, comm_names = _comms(procs)
    rdefs = rma_definitions(procs, comm_ids)
    reg_parts, p2p_parts, coll_parts, smp_parts, met_parts, rma_parts, thr_parts = [], [], [], [], [], [], []
    nreg_total = 0
    calls: list[list] = []
    for loc, (p, pi) in enumerate(streams):
        o = off[pi]
        if isinstance(frames, NativeFrames) and p.thread == 0:
            calls += [[loc, frames.user_region(p, a), *st] for a, st in p.calls.items()]
        src = f"{source}/p{p.pid}" + (f".t{p.thread}" if p.thread else "")
        ev = _close_open(np.asarray(p.events), src, root=p.thread == 0)
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
        nreg = int(isreg.sum())
        reg_parts.append(
            {
                "location": np.full(nreg, loc, np.int32),
                "time": time[isreg],
                "kind": np.where(typ[isreg] == R_ENTER, 0, 1).astype(np.int8),
                "region": regions,
            }
        )
        before = np.cumsum(isreg) - isreg  # region records before each record
        cmap = comm_ids[pi]
        lut = np.full(max(cmap, default=0) + 1, -1, np.int32)
        for local, glob in cmap.items():
            lut[local] = glob
        for mask, parts, make in (
            (typ == R_P2P, p2p_parts, _p2p_rows),
            (typ == R_COLL, coll_parts, _coll_rows),
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
            thr_parts.append(_thread_rows(ev[thr], time[thr], loc, nreg_total + before[thr], pi))
        io = typ == R_IO
        if io.any():
            met_parts.append(_io_rows(ev[io], time[io], time, typ, loc, nreg_total + before[io]))
        if len(p.sample_time):
            utop = p.sample_utop if len(p.sample_utop) == len(p.sample_frames) else np.zeros(len(p.sample_frames))
            stacks = np.array([frames.sample_stack(p, f, int(u)) for f, u in zip(p.sample_frames, utop)], np.int32)
            smp_parts.append(
                {
                    "location": np.full(len(stacks), loc, np.int32),
                    "time": p.sample_time + o - t0,
                    "stack": stacks,
                    "weight": p.sample_weight,
                    "pos": nreg_total + p.sample_nregion,
                }
            )
        nreg_total += nreg

    p2p = _concat(p2p_parts, P2P_COLUMNS)
    ranks = np.array([s.rank for s, _ in streams], np.int64)
    _fill_send_bytes(p2p, ranks, comm_members)
    locations = pd.DataFrame(
        {
            "process": ranks,
            "thread": [s.thread for s, _ in streams],
            "name": [f"rank {s.rank}" + (f" thread {s.thread}" if s.thread else "") for s, _ in streams],
            "type": "cpu",
            "host": [s.meta.get("host", "") for s, _ in streams],
        }
    )
    region_events = _concat(reg_parts, REGION_COLUMNS)
    meta = {
        "source": source,
        "creator": "perflow record",
        "program": exe,
        "kind": kind,
        "timer_resolution": 1e-9,
        "ticks": float(region_events["time"].max()) if len(region_events["time"]) else 0.0,
        "sample_rate": int(procs[0].meta.get("hz", 0) or 0),
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
        coll_events=_concat(coll_parts, {**COLL_COLUMNS, "request": np.dtype(np.int64)}),
        sample_events=_concat(smp_parts, SAMPLE_COLUMNS),
        metric_events=_concat(met_parts, METRIC_COLUMNS),
        rma_events=_concat(rma_parts, RMA_COLUMNS),
        thread_events=_lock_ids(_concat(thr_parts, {**THREAD_COLUMNS, **_THR_EXTRA})),
        **({"metrics": _IO_METRICS.copy()} if met_parts else {}),
        stacks=table.stacks_frame(),
        comms=comm_members,
        comm_names=comm_names,
        attrs=meta,
    )
    raw.validate()
    return raw


#: the thread-event columns besides THREAD_COLUMNS: lock and order (optional in a raw trace), and the
#: process index (to number the locks per process; dropped by _lock_ids)
_THR_EXTRA = {"lock": np.dtype(np.int64), "order": np.dtype(np.int64), "proc": np.dtype(np.int64)}


def _thread_rows(ev: np.ndarray, time: np.ndarray, loc: int, pos: np.ndarray, proc: int) -> dict[str, np.ndarray]:
    """``thread_events`` rows of one thread's thread records (see ``csrc/pfrec_omp.c``).

    As the OTF2 reader reads Score-P's ``ThreadFork``/``Join``/``TeamBegin``/
    ``TeamEnd``/``AcquireLock``/``ReleaseLock``: ``count`` the requested team
    size of a fork (-1 elsewhere), ``team`` -1 (the recorder defines no
    thread-team communicators), ``lock`` and ``order`` on the lock rows (the
    lock's OMPT wait id until :func:`_lock_ids` numbers them).
    """
    kind = ev["kind"].astype(np.int8)
    is_lock = (kind == ThreadEv.ACQUIRE_LOCK) | (kind == ThreadEv.RELEASE_LOCK)
    return {
        "location": np.full(len(ev), loc, np.int32),
        "time": time,
        "kind": kind,
        "team": np.full(len(ev), -1, np.int32),
        "count": np.where(kind == ThreadEv.FORK, ev["a"], -1).astype(np.int32),
        "lock": np.where(is_lock, ev["n1"], -1),
        "order": np.where(is_lock, ev["n2"], -1),
        "pos": pos,
        "proc": np.full(len(ev), proc, np.int64),
    }


def _lock_ids(rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Number each process's locks 0, 1, ... in the order of their first acquisition (their wait ids are
    addresses, meaningless across runs), and drop the process column."""
    proc, wait = rows.pop("proc"), rows["lock"]
    has = wait != -1
    if has.any():
        i = np.flatnonzero(has)
        first = (
            pd.DataFrame({"proc": proc[i], "wait": wait[i], "t": rows["time"][i]})
            .groupby(["proc", "wait"], sort=False)["t"]
            .min()
        )
        ranked = first.reset_index().sort_values(["proc", "t", "wait"], kind="stable")
        ranked["id"] = ranked.groupby("proc").cumcount()
        ids = pd.MultiIndex.from_frame(ranked[["proc", "wait"]])
        at = ids.get_indexer(pd.MultiIndex.from_arrays([proc[i], wait[i]]))
        out = wait.copy()
        out[i] = ranked["id"].to_numpy()[at]
        rows["lock"] = out
    return rows


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


def _p2p_rows(ev: np.ndarray, time: np.ndarray, loc: int, pos: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "location": np.full(len(ev), loc, np.int32),
        "time": time,
        "kind": ev["kind"].astype(np.int8),
        "peer": ev["a"],
        "tag": ev["b"],
        "bytes": ev["n1"],
        "request": ev["n2"],
        "pos": pos,
    }


def _coll_rows(ev: np.ndarray, time: np.ndarray, loc: int, pos: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "location": np.full(len(ev), loc, np.int32),
        "time": time,
        "kind": ev["kind"].astype(np.int8),
        "op": ev["fn"].astype(np.int16),
        "root": ev["a"],
        "sent": ev["n1"],
        "received": ev["n2"],
        "request": ev["addr"].astype(np.int64) - 1,
        "pos": pos,
    }


#: Metrics of MPI-IO calls (ids 0 and 1 of ``metric_events``).
_IO_METRICS = pd.DataFrame(
    {"name": ["io_bytes_read", "io_bytes_written"], "unit": "bytes", "mode": "accumulated_start"}
)


def _io_rows(
    ev: np.ndarray, time: np.ndarray, all_time: np.ndarray, typ: np.ndarray, loc: int, pos: np.ndarray
) -> dict[str, np.ndarray]:
    """Two rows of one accumulated counter per MPI-IO record: the total before the call and after it.

    The IO record sits right before the call's Leave, with no region record
    between the call's Enter and it, so both rows share ``pos``; the first is
    stamped with the Enter's time.
    """
    metric = np.where(ev["a"] == 2, 1, 0).astype(np.int32)
    nbytes = ev["addr"].astype(np.float64)
    after = np.zeros(len(ev))
    for m in (0, 1):
        sel = metric == m
        after[sel] = np.cumsum(nbytes[sel])
    before = after - nbytes
    # the Enter of each call: the last region record before the IO record
    isreg = np.flatnonzero((typ == R_ENTER) | (typ == R_LEAVE))
    at = np.flatnonzero(typ == R_IO)
    enter_t = all_time[isreg[np.searchsorted(isreg, at) - 1]]
    n = len(ev)
    inter = np.empty(2 * n, np.int64)
    inter[0::2], inter[1::2] = np.arange(n), np.arange(n)
    return {
        "location": np.full(2 * n, loc, np.int32),
        "time": np.ravel(np.column_stack([enter_t, time])),
        "metric": metric[inter],
        "value": np.ravel(np.column_stack([before, after])),
        "pos": pos[inter],
    }


def _concat(parts: list[dict[str, np.ndarray]], cols: dict[str, np.dtype]) -> dict[str, np.ndarray]:
    if not parts:
        return empty_table(cols)
    return {c: np.concatenate([np.asarray(p[c], dtype=dt) for p in parts]) for c, dt in cols.items()}


def _comms(procs: list[ProcessData]) -> tuple[list[dict[int, int]], dict[int, np.ndarray], dict[int, str]]:
    """Global communicator ids: world is 0; the rest numbered by first appearance."""
    by_key: dict[int, int] = {}
    members: dict[int, np.ndarray] = {}
    names: dict[int, str] = {}
    per_proc: list[dict[int, int]] = []
    count: dict[str, int] = {}
    for p in procs:
        local: dict[int, int] = {}
        for lid, key, creator, ranks in p.comms:
            gid = by_key.get(key)
            if gid is None:
                gid = by_key[key] = len(by_key)
                members[gid] = ranks
                if creator in ("MPI_COMM_WORLD", "MPI_COMM_SELF"):
                    names[gid] = creator
                else:
                    count[creator] = count.get(creator, 0) + 1
                    names[gid] = f"{creator}#{count[creator]}"
            elif not np.array_equal(members[gid], ranks):
                log.warning("communicator %s has different members on rank %d", names[gid], p.rank)
            local[lid] = gid
        per_proc.append(local)
    return per_proc, members, names


def _fill_send_bytes(p2p: dict[str, np.ndarray], ranks: np.ndarray, comms: dict[int, np.ndarray]) -> None:
    """Fill unknown send sizes (-1, from mpi4py's pickled sends) from the matching receives (``ranks``: the
    rank of each location)."""
    unknown = p2p["bytes"] < 0
    if not unknown.any():
        return
    df = pd.DataFrame({k: p2p[k] for k in ("location", "time", "kind", "peer", "comm", "tag", "bytes", "request")})
    rank = ranks[df["location"].to_numpy()]
    world_peer = np.full(len(df), -1, np.int64)
    for c, m in comms.items():
        sel = (df["comm"].to_numpy() == c) & (df["peer"].to_numpy() >= 0) & (df["peer"].to_numpy() < len(m))
        world_peer[sel] = m[df["peer"].to_numpy()[sel]]
    df["me"], df["other"] = rank, world_peer
    sends = df[df["kind"].isin([P2P.SEND, P2P.SSEND, P2P.ISEND])].copy()
    recvs = df[df["kind"].isin([P2P.RECV, P2P.IRECV])].copy()
    sends["src"], sends["dst"] = sends["me"], sends["other"]
    recvs["src"], recvs["dst"] = recvs["other"], recvs["me"]
    key = ["src", "dst", "comm", "tag"]
    sends["n"] = sends.sort_values("time", kind="stable").groupby(key).cumcount()
    recvs["n"] = recvs.sort_values("time", kind="stable").groupby(key).cumcount()
    m = sends.reset_index().merge(recvs[key + ["n", "bytes"]], on=key + ["n"], how="left", suffixes=("", "_r"))
    m = m[(m["bytes"] < 0) & m["bytes_r"].notna()]
    p2p["bytes"][m["index"].to_numpy()] = m["bytes_r"].to_numpy(np.int64)
    # completions of non-blocking sends inherit the size of their ISEND (same location and request)
    isend = df.loc[df["kind"] == P2P.ISEND, ["location", "request"]].assign(b=p2p["bytes"][df["kind"] == P2P.ISEND])
    done = df[(df["kind"] == P2P.ISEND_COMPLETE) & (df["bytes"] < 0)].reset_index()
    j = done.merge(isend, on=["location", "request"], how="inner")
    p2p["bytes"][j["index"].to_numpy()] = j["b"].to_numpy(np.int64)
    p2p["bytes"][p2p["bytes"] < 0] = 0


def load_recording(path: str | Path, attrs: dict | None = None) -> RawTrace:
    """Decode and assemble a directory of recorder output (``<out>/raw``).

    Raises
    ------
    FormatError
        When the directory holds no usable data.
    """
    return assemble(read_dir(path), source=str(path), attrs=attrs)
