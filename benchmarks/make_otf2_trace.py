"""Generate an MPI-like OTF2 trace of a given size, for the decoder benchmarks.

Every rank runs the same iteration: nested compute regions, a halo exchange
with its ring neighbours (MPI_Irecv/MPI_Isend/MPI_Waitall), a blocking
MPI_Send/MPI_Recv pair with its partner rank (rank ^ 1), an MPI_Allreduce on
MPI_COMM_WORLD and an MPI_Bcast on a row communicator of 8 ranks; optionally
a 3-member PAPI-like metric at every iteration start. Messages match across
ranks, and the timestamps satisfy the clock condition: every receive
completes after its send (plus a latency of 1 us), every rank leaves the
MPI_Allreduce after the last one entered and a row's MPI_Bcast after its
root entered, as on a real machine (so a rank that computes longer makes
others wait). The per-event durations are drawn first for all ranks, the
timeline then follows the dependencies iteration by iteration (vectorised
over the ranks); events are written one chunk of iterations at a time.

Usage::

    python benchmarks/make_otf2_trace.py --events 2e6 --out /tmp/otf2-2M
    python benchmarks/make_otf2_trace.py --events 20e6 --ranks 64 --out /tmp/otf2-20M
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflow.codecs.otf2.archive import ArchiveWriter  # noqa: E402
from perflow.kinds import P2P, CollectiveOp  # noqa: E402

REGIONS = [
    ("main", "function", "user"),
    ("iteration", "loop", "user"),
    ("compute", "function", "user"),
    ("kernel", "function", "user"),
    ("MPI_Irecv", "point2point", "mpi"),
    ("MPI_Isend", "point2point", "mpi"),
    ("MPI_Waitall", "point2point", "mpi"),
    ("MPI_Send", "point2point", "mpi"),
    ("MPI_Recv", "point2point", "mpi"),
    ("MPI_Allreduce", "coll_all2all", "mpi"),
    ("MPI_Bcast", "coll_one2all", "mpi"),
]
R = {name: i for i, (name, _, _) in enumerate(REGIONS)}
ROW = 8  # ranks per row communicator
ENTER, LEAVE = 0, 1


def _template(metrics: bool) -> list[tuple]:
    """One iteration: (table, fields...) per event, in stream order.

    region: ("r", kind, region); p2p: ("p", kind, peer-rule, tag, bytes, request-slot);
    coll: ("c", kind, op, comm, root, sent, received); metric: ("m",).
    """
    t: list[tuple] = [("r", ENTER, R["iteration"])]
    if metrics:
        t.append(("m",))
    t += [("r", ENTER, R["compute"]), ("r", ENTER, R["kernel"]), ("r", LEAVE, R["kernel"]), ("r", LEAVE, R["compute"])]
    t += [("r", ENTER, R["MPI_Irecv"]), ("p", P2P.IRECV_REQUEST, "none", 0, 0, 0), ("r", LEAVE, R["MPI_Irecv"])]
    t += [("r", ENTER, R["MPI_Isend"]), ("p", P2P.ISEND, "right", 1, 65536, 1), ("r", LEAVE, R["MPI_Isend"])]
    t += [("r", ENTER, R["compute"]), ("r", LEAVE, R["compute"])]
    t += [("r", ENTER, R["MPI_Waitall"]), ("p", P2P.IRECV, "left", 1, 65536, 0)]
    t += [("p", P2P.ISEND_COMPLETE, "none", 0, 0, 1), ("r", LEAVE, R["MPI_Waitall"])]
    t += [("r", ENTER, "first"), ("p", "first", "partner", 2, 4096, -1), ("r", LEAVE, "first")]
    t += [("r", ENTER, "second"), ("p", "second", "partner", 2, 4096, -1), ("r", LEAVE, "second")]
    t += [("r", ENTER, R["MPI_Allreduce"]), ("c", 0, 0, 0, 0, 0, 0)]
    t += [("c", 1, CollectiveOp.ALLREDUCE, 0, -1, 8, 8), ("r", LEAVE, R["MPI_Allreduce"])]
    t += [("r", ENTER, R["MPI_Bcast"]), ("c", 0, 0, 0, 0, 0, 0)]
    t += [("c", 1, CollectiveOp.BCAST, "row", 0, "bcast_sent", 1024), ("r", LEAVE, R["MPI_Bcast"])]
    t.append(("r", LEAVE, R["iteration"]))
    return t


#: the latency of a message or a collective (ns)
LATENCY = 1_000


def _slot(tmpl: list[tuple], want: tuple) -> int:
    """Index of the first template event whose leading fields are ``want``."""
    return next(j for j, e in enumerate(tmpl) if e[: len(want)] == want)


def timeline(ranks: int, iters: int, tmpl: list[tuple], seed: int, t0: int = 1_000) -> np.ndarray:
    """Tick of every template event of every iteration and rank, ``(ranks, iters, events)``, causally consistent.

    Durations are drawn per rank (MPI calls short, compute longer and
    rank-dependent); a receive completes no earlier than its send plus
    :data:`LATENCY`, a collective's END no earlier than the BEGINs it waits for.
    """
    k = len(tmpl)
    dur = np.empty((ranks, iters, k), dtype=np.int32)
    for rank in range(ranks):
        rng = np.random.default_rng(seed * 100_003 + rank)
        dur[rank] = rng.integers(200, 2000, size=(iters, k), dtype=np.int32)
        dur[rank, :, 2] += 20_000 + 1_000 * (rank % 7)
    r = np.arange(ranks)
    even = r % 2 == 0
    partner = np.where((r ^ 1) < ranks, r ^ 1, r)
    left = (r - 1) % ranks
    root = (r // ROW) * ROW
    j_isend = _slot(tmpl, ("p", P2P.ISEND))
    j_irecv = _slot(tmpl, ("p", P2P.IRECV))
    j_first = _slot(tmpl, ("p", "first"))
    j_second = _slot(tmpl, ("p", "second"))
    coll = [j for j, e in enumerate(tmpl) if e[0] == "c"]
    (j_arb, j_are, j_bcb, j_bce) = coll
    bcast_root = r == root
    ticks = np.empty((ranks, iters, k), dtype=np.int64)
    clock = np.full(ranks, t0, dtype=np.int64)
    for it in range(iters):
        row = ticks[:, it]
        for j in range(k):
            clock = clock + dur[:, it, j]
            if j == j_irecv:  # the halo message from the left neighbour, sent this iteration
                clock = np.maximum(clock, row[left, j_isend] + LATENCY)
            elif j == j_first:  # odd ranks receive what their even partner sends first
                clock = np.where(~even & (partner != r), np.maximum(clock, clock[partner] + LATENCY), clock)
            elif j == j_second:  # then even ranks receive what the odd ones send
                clock = np.where(even & (partner != r), np.maximum(clock, clock[partner] + LATENCY), clock)
            elif j == j_are:
                clock = np.maximum(clock, row[:, j_arb].max() + LATENCY)
            elif j == j_bce:
                clock = np.where(bcast_root, clock, np.maximum(clock, row[root, j_bcb] + LATENCY))
            row[:, j] = clock
    return ticks


def _chunk(rank: int, nranks: int, it0: int, n: int, tmpl: list[tuple], ticks: np.ndarray) -> tuple:
    """Arrays of iterations it0..it0+n-1 of one rank (pos local to the chunk); ``ticks`` are this rank's."""
    even = rank % 2 == 0
    partner = rank ^ 1 if (rank ^ 1) < nranks else rank
    right, left = (rank + 1) % nranks, (rank - 1) % nranks
    ticks = ticks[it0 : it0 + n].astype(np.uint64)
    rng = np.random.default_rng(it0 * 7919 + rank)
    reg_slots = [j for j, e in enumerate(tmpl) if e[0] == "r"]
    nr = len(reg_slots)
    reg_before = np.cumsum([0] + [1 if e[0] == "r" else 0 for e in tmpl])[:-1]
    its = np.arange(it0, it0 + n, dtype=np.int64)
    rk = np.array([tmpl[j][1] for j in reg_slots], dtype=np.int8)
    rid = []
    for j in reg_slots:
        r = tmpl[j][2]
        if r == "first":
            r = R["MPI_Send"] if even else R["MPI_Recv"]
        elif r == "second":
            r = R["MPI_Recv"] if even else R["MPI_Send"]
        rid.append(r)
    region = (np.tile(rk, n), np.tile(np.array(rid, dtype=np.int32), n), ticks[:, reg_slots].ravel())

    def rows(kind: str) -> list[int]:
        return [j for j, e in enumerate(tmpl) if e[0] == kind]

    pj = rows("p")
    p = np.empty((7, n * len(pj)), dtype=np.int64)
    for q, j in enumerate(pj):
        _, kind, peer, tag, nbytes, req = tmpl[j]
        if kind == "first":
            kind = P2P.SEND if even else P2P.RECV
        elif kind == "second":
            kind = P2P.RECV if even else P2P.SEND
        peer = {"none": -1, "right": right, "left": left, "partner": partner}[peer]
        sl = slice(q, None, len(pj))
        p[0, sl], p[1, sl], p[2, sl], p[3, sl], p[4, sl] = kind, peer, 0 if peer >= 0 else -1, tag, nbytes
        p[5, sl] = its * 2 + req if req >= 0 else -1
        p[6, sl] = (its - it0) * nr + reg_before[j]
    pt = ticks[:, pj].ravel()
    cj = rows("c")
    c = np.empty((7, n * len(cj)), dtype=np.int64)
    row_comm = 2 + rank // ROW
    for q, j in enumerate(cj):
        _, kind, op, comm, root, sent, recv = tmpl[j]
        sl = slice(q, None, len(cj))
        comm = row_comm if comm == "row" else comm
        if sent == "bcast_sent":
            sent = 1024 * (min(ROW, nranks - ROW * (rank // ROW)) - 1) if rank % ROW == 0 else 0
        c[0, sl], c[1, sl], c[2, sl], c[3, sl], c[4, sl], c[5, sl] = kind, op, comm, root, sent, recv
        if kind == 0:
            c[1, sl], c[2, sl], c[3, sl] = -1, -1, -1
        c[6, sl] = (its - it0) * nr + reg_before[j]
    ct = ticks[:, cj].ravel()
    mj = rows("m")
    if mj:
        nm = n * len(mj)
        g = np.vstack([np.zeros(nm), np.arange(nm) * 3, np.full(nm, 3), (its - it0) * nr + reg_before[mj[0]]])
        g = g.astype(np.int64)
        mvals = rng.integers(1, 1 << 20, size=(nm, 3)).cumsum(axis=0).astype(np.float64).ravel()
        gt = ticks[:, mj[0]].ravel()
    else:
        g, gt, mvals = np.zeros((4, 0), dtype=np.int64), np.zeros(0, dtype=np.uint64), np.zeros(0)
    h = np.zeros((4, 0), dtype=np.int64)
    return region, (p, pt), (c, ct), (g, gt, mvals), (h, np.zeros(0, dtype=np.uint64)), int(ticks[-1, -1])


def make_trace(
    out: str, events: float, ranks: int = 64, metrics: bool = False, chunk: int = 2048, seed: int = 1
) -> str:
    """Write the trace; return the anchor path."""
    tmpl = _template(metrics)
    per_iter = sum(1 for e in tmpl if e[0] != "m") + (3 if metrics else 0)  # metric rows count per member
    iters = max(1, int(round(float(events) / (ranks * per_iter))))
    w = ArchiveWriter(out, 1_000_000_000, creator="perflow make_otf2_trace")
    tend = 0
    ticks = timeline(ranks, iters, tmpl, seed, t0=2_000)
    for rank in range(ranks):
        w.begin_location(rank)
        # main region brackets the iterations
        w.write(*_bare_region(ENTER, R["main"], 1_000))
        t = 1_000
        for it0 in range(0, iters, chunk):
            n = min(chunk, iters - it0)
            *parts, t = _chunk(rank, ranks, it0, n, tmpl, ticks[rank])
            w.write(*_reorder(parts))
        w.write(*_bare_region(LEAVE, R["main"], t + 1_000))
        tend = max(tend, t + 1_000)
        w.end_location()
    locations = pd.DataFrame({"process": np.arange(ranks), "thread": 0, "name": "Master thread", "type": "cpu"})
    regions = pd.DataFrame(
        [
            {"name": n, "role": r, "paradigm": p, "file": "bench.c", "line": 10 + i}
            for i, (n, r, p) in enumerate(REGIONS)
        ]
    )
    comms = {0: np.arange(ranks), 1: np.zeros(0, dtype=np.int64)}
    names = {0: "MPI_COMM_WORLD", 1: "MPI_COMM_SELF"}
    for k in range((ranks + ROW - 1) // ROW):
        comms[2 + k] = np.arange(k * ROW, min(ranks, (k + 1) * ROW))
        names[2 + k] = f"row {k}"
    metric_defs = (
        pd.DataFrame({"name": ["PAPI_TOT_CYC", "PAPI_L2_TCM", "PAPI_BR_MSP"], "unit": "#", "mode": "accumulated_start"})
        if metrics
        else pd.DataFrame(columns=["name", "unit", "mode"])
    )
    classes = [(0, 1, 2)] if metrics else []
    return w.close(locations, regions, comms, names, metric_defs, classes, 0, tend)


def _bare_region(kind: int, region: int, t: int) -> tuple:
    e64 = np.zeros((7, 0), dtype=np.int64)
    eu = np.zeros(0, dtype=np.uint64)
    reg = (np.array([t], dtype=np.uint64), np.array([kind], dtype=np.int8), np.array([region], dtype=np.int32))
    return (
        reg,
        (e64, eu),
        (e64, eu),
        (np.zeros((4, 0), dtype=np.int64), eu, np.zeros(0)),
        (np.zeros((4, 0), dtype=np.int64), eu),
        0,
    )


def _reorder(parts: list) -> tuple:
    (rk, rid, rt), p, c, g, h = parts
    return (rt, rk, rid), p, c, g, h, 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=float, default=2e6, help="approximate number of events (default 2e6)")
    ap.add_argument("--ranks", type=int, default=64, help="MPI ranks (locations), default 64")
    ap.add_argument("--metrics", action="store_true", help="add a 3-member metric at every iteration start")
    ap.add_argument("--out", required=True, help="archive directory to create")
    a = ap.parse_args(argv)
    t = time.perf_counter()
    anchor = make_trace(a.out, a.events, a.ranks, a.metrics)
    dt = time.perf_counter() - t
    size = sum(f.stat().st_size for f in Path(a.out).rglob("*") if f.is_file())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"wrote {anchor}: {size / 1e6:.1f} MB in {dt:.1f} s, peak RSS {rss:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
