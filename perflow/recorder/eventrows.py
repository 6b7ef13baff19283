"""The rows of each recorded event kind, as :mod:`perflow.recorder.assemble` puts them in a raw trace.

* :func:`p2p_rows`, :func:`coll_rows`: point-to-point and collective records;
* :func:`thread_rows` and :func:`lock_ids`: OpenMP forks, joins, teams and
  locks, as the OTF2 reader reads Score-P's;
* :func:`io_rows`: the accumulated MPI-IO byte counters (:data:`IO_METRICS`);
* :func:`comms_of`: global communicator ids, members and names;
* :func:`fill_send_bytes`: send sizes mpi4py left unknown, from the matching receives;
* :func:`concat`: one kind's per-location parts as one table.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from ..kinds import P2P, ThreadEv
from ..trace.raw import empty_table
from .decode import ProcessData
from .functions import R_ENTER, R_IO, R_LEAVE
from .offcpu import Placed

__all__ = [
    "THR_EXTRA",
    "IO_METRICS",
    "thread_rows",
    "lock_ids",
    "p2p_rows",
    "coll_rows",
    "io_rows",
    "concat",
    "comms_of",
    "fill_send_bytes",
]

log = logging.getLogger(__name__)


#: the thread-event columns besides THREAD_COLUMNS: lock and order (optional in a raw trace), and the
#: process index (to number the locks per process; dropped by lock_ids)
THR_EXTRA = {"lock": np.dtype(np.int64), "order": np.dtype(np.int64), "proc": np.dtype(np.int64)}


def thread_rows(ev: np.ndarray, time: np.ndarray, loc: int, pos: np.ndarray, proc: int) -> dict[str, np.ndarray]:
    """``thread_events`` rows of one thread's thread records (see ``csrc/pfrec_omp.c``).

    As the OTF2 reader reads Score-P's ``ThreadFork``/``Join``/``TeamBegin``/
    ``TeamEnd``/``AcquireLock``/``ReleaseLock``: ``count`` the requested team
    size of a fork (-1 elsewhere), ``team`` -1 (the recorder defines no
    thread-team communicators), ``lock`` and ``order`` on the lock rows (the
    lock's OMPT wait id until :func:`lock_ids` numbers them).
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


def lock_ids(rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
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


def p2p_rows(ev: np.ndarray, time: np.ndarray, loc: int, pos: np.ndarray) -> dict[str, np.ndarray]:
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


def coll_rows(ev: np.ndarray, time: np.ndarray, loc: int, pos: np.ndarray) -> dict[str, np.ndarray]:
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
IO_METRICS = pd.DataFrame({"name": ["io_bytes_read", "io_bytes_written"], "unit": "bytes", "mode": "accumulated_start"})


def io_rows(
    ev: np.ndarray,
    time: np.ndarray,
    all_time: np.ndarray,
    typ: np.ndarray,
    loc: int,
    pos0: int,
    nreg: np.ndarray,
    placed: Placed,
) -> dict[str, np.ndarray]:
    """Two rows of one accumulated counter per MPI-IO record: the total before the call and after it.

    The IO record sits right before the call's Leave, with no region record
    between the call's Enter and it (``nreg``: the region records before it,
    without the off-CPU intervals); both rows go right after the Enter, before
    an off-CPU interval inside the call (whose bytes they are not), and the
    first is stamped with the Enter's time.
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
    pos = pos0 + placed.position(nreg, enter_t)
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


def concat(parts: list[dict[str, np.ndarray]], cols: dict[str, np.dtype]) -> dict[str, np.ndarray]:
    if not parts:
        return empty_table(cols)
    return {c: np.concatenate([np.asarray(p[c], dtype=dt) for p in parts]) for c, dt in cols.items()}


def comms_of(procs: list[ProcessData]) -> tuple[list[dict[int, int]], dict[int, np.ndarray], dict[int, str]]:
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


def fill_send_bytes(p2p: dict[str, np.ndarray], ranks: np.ndarray, comms: dict[int, np.ndarray]) -> None:
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
