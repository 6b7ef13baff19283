"""Synthetic MPI-like traces with injected problems, generated without a loop per event.

Every process runs::

    main
      MPI_Init                        (a world barrier)
      timestep   x iterations         (a loop region)
        compute                       (imbalance, slow rank, late senders, noise)
        exchange
          MPI_Irecv  from left, MPI_Irecv from right
          MPI_Isend  to right,  MPI_Isend to left
          MPI_Waitall                 (waits for the neighbours' messages)
        MPI_Allreduce                 (everyone leaves after the last arrival)
      MPI_Finalize

with ring neighbours ``left = p - 1`` and ``right = p + 1`` (mod P). That is
18 region events, 8 point-to-point events and 2 collective events per
process and iteration (28 events), plus 6 region events per process.
The same seed always gives the same trace.

>>> pag = perflow.synthetic.trace(nprocs=8, iterations=20, slow_rank=3, seed=1)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from .kinds import P2P, CollectiveOp, CollEv, VertexKind
from .pag.literal import complete_time_metrics
from .pag.pag import PAG
from .trace.build import build_pag
from .trace.raw import RawTrace

__all__ = ["trace", "raw_trace", "profile", "SyntheticSpec", "EVENTS_PER_ITERATION", "iterations_for"]

EVENTS_PER_ITERATION = 28
_REGIONS = [
    ("main", "function", "user"),
    ("MPI_Init", "function", "mpi"),
    ("MPI_Finalize", "function", "mpi"),
    ("timestep", "loop", "user"),
    ("compute", "function", "user"),
    ("exchange", "function", "user"),
    ("MPI_Irecv", "point2point", "mpi"),
    ("MPI_Isend", "point2point", "mpi"),
    ("MPI_Waitall", "point2point", "mpi"),
    ("MPI_Allreduce", "coll_all2all", "mpi"),
]
R_MAIN, R_INIT, R_FIN, R_STEP, R_COMP, R_EXCH, R_IRECV, R_ISEND, R_WAIT, R_ALLRED = range(10)
# per iteration: (kind, region) of the 18 region events in stream order
_ITER_KIND = np.array([0, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 0, 1, 1], dtype=np.int8)
_ITER_REGION = np.array(
    [
        R_STEP,
        R_COMP,
        R_COMP,
        R_EXCH,
        R_IRECV,
        R_IRECV,
        R_IRECV,
        R_IRECV,
        R_ISEND,
        R_ISEND,
        R_ISEND,
        R_ISEND,
        R_WAIT,
        R_WAIT,
        R_EXCH,
        R_ALLRED,
        R_ALLRED,
        R_STEP,
    ],
    dtype=np.int32,
)


@dataclass(frozen=True)
class SyntheticSpec:
    """Parameters of a synthetic trace (see :func:`trace`)."""

    nprocs: int = 8
    iterations: int = 10
    seed: int = 0
    compute_time: float = 1e-3
    imbalance: float = 0.0
    slow_rank: int | None = None
    slow_factor: float = 2.0
    late_sender: float = 0.0
    late_delay: float = 2e-3
    noise: float = 0.02
    msg_bytes: int = 4096
    latency: float = 2e-6
    bandwidth: float = 5e9
    call_time: float = 1e-6


def iterations_for(events: float, nprocs: int) -> int:
    """Iterations that give about ``events`` events with ``nprocs`` processes."""
    return max(1, int(round((events / nprocs - 6) / EVENTS_PER_ITERATION)))


def raw_trace(**kwargs: Any) -> RawTrace:
    """Generate the events of a synthetic run as a :class:`RawTrace` (parameters as :func:`trace`)."""
    s = SyntheticSpec(**kwargs)
    P, N, e = s.nprocs, s.iterations, s.call_time
    if P < 1 or N < 0:
        raise ValueError("nprocs must be >= 1 and iterations >= 0")
    rng = np.random.default_rng(s.seed)
    ranks = np.arange(P)
    c = np.full((N, P), s.compute_time)
    if P > 1:
        c *= 1.0 + s.imbalance * ranks / (P - 1)
    if s.slow_rank is not None:
        if not 0 <= s.slow_rank < P:
            raise ValueError(f"slow_rank {s.slow_rank} is not a process of 0..{P - 1}")
        c[:, s.slow_rank] *= s.slow_factor
    if s.noise:
        c *= rng.lognormal(0.0, s.noise, size=(N, P))
    late = rng.random((N, P)) < s.late_sender if s.late_sender else np.zeros((N, P), dtype=bool)
    c += late * s.late_delay
    left, right = (ranks - 1) % P, (ranks + 1) % P
    transfer = s.latency + s.msg_bytes / s.bandwidth
    start = rng.uniform(0.0, 50 * e, size=P)
    init_leave = start.max() + 20 * e
    # iteration-relative times (T = start of the iteration, common to all)
    a0 = c  # compute ends, exchange begins
    send_right = a0 + 2 * e
    send_left = a0 + 3 * e
    w0 = a0 + 4 * e
    arr_left = send_right[:, left] + transfer  # message from my left neighbour (its send to the right)
    arr_right = send_left[:, right] + transfer
    w1 = np.maximum(np.maximum(w0, arr_left), arr_right) + e
    ar_cost = 2 * e * max(1.0, np.log2(P))
    dur = w1.max(axis=1) + ar_cost  # iteration length
    L = init_leave + np.cumsum(dur)  # iteration ends; the next one starts at exactly the same time
    T = np.r_[init_leave, L[:-1]][:N]
    fin_enter = L[-1] if N else init_leave
    fin_leave = fin_enter + 10 * e

    # region events: (P, 3 + 18N + 3)
    it_t = (
        np.stack(
            [
                np.zeros((N, P)),
                np.zeros((N, P)),
                a0,
                a0,
                a0,
                a0 + e,
                a0 + e,
                send_right,
                send_right,
                send_left,
                send_left,
                w0,
                w0,
                w1,
                w1,
                w1,
                np.zeros((N, P)),
                np.zeros((N, P)),
            ],
            axis=2,
        )
        + T[:, None, None]
    )  # (N, P, 18)
    it_t[:, :, 16:] = L[:, None, None]
    per = 6 + 18 * N
    times = np.empty((P, per))
    times[:, 0] = start
    times[:, 1] = start
    times[:, 2] = init_leave
    times[:, 3 : 3 + 18 * N] = it_t.transpose(1, 0, 2).reshape(P, 18 * N)
    times[:, per - 3] = fin_enter
    times[:, per - 2] = fin_leave
    times[:, per - 1] = fin_leave
    kinds = np.r_[np.int8(0), 0, 1, np.tile(_ITER_KIND, N), 0, 1, 1].astype(np.int8)
    regs = np.r_[R_MAIN, R_INIT, R_INIT, np.tile(_ITER_REGION, N), R_FIN, R_FIN, R_MAIN].astype(np.int32)
    region_events = {
        "location": np.repeat(ranks.astype(np.int32), per),
        "time": times.ravel(),
        "kind": np.tile(kinds, P),
        "region": np.tile(regs, P),
    }

    # point-to-point: (P, N, 8)
    base = (ranks[:, None] * per + 3 + 18 * np.arange(N)[None, :])[:, :, None]  # index of the timestep enter
    p2p_pos = base + np.array([5, 7, 9, 11, 13, 13, 13, 13])[None, None, :]
    p2p_kind = np.array(
        [
            P2P.IRECV_REQUEST,
            P2P.IRECV_REQUEST,
            P2P.ISEND,
            P2P.ISEND,
            P2P.IRECV,
            P2P.IRECV,
            P2P.ISEND_COMPLETE,
            P2P.ISEND_COMPLETE,
        ],
        dtype=np.int8,
    )
    Tt = T[None, :, None]
    cp = c.T[:, :, None]  # (P, N, 1)
    w1p = w1.T[:, :, None]
    p2p_time = (
        np.concatenate([cp + 0, cp + e, cp + 2 * e, cp + 3 * e, w1p, w1p, w1p, w1p], axis=2) + Tt
    )  # same expressions as the enclosing region events
    peer = np.zeros((P, N, 8), dtype=np.int32)
    peer[:, :, [0, 1, 6, 7]] = -1
    peer[:, :, 2] = right[:, None]
    peer[:, :, 3] = left[:, None]
    peer[:, :, 4] = left[:, None]
    peer[:, :, 5] = right[:, None]
    tag = np.array([-1, -1, 0, 1, 0, 1, -1, -1], dtype=np.int32)
    nbytes = np.array([0, 0, 1, 1, 1, 1, 0, 0], dtype=np.int64) * s.msg_bytes
    req = np.array([0, 1, 2, 3, 0, 1, 2, 3], dtype=np.int64)
    n_p2p = P * N * 8
    p2p_events = {
        "location": np.repeat(ranks.astype(np.int32), N * 8),
        "time": p2p_time.ravel(),
        "kind": np.tile(p2p_kind, P * N),
        "peer": peer.ravel(),
        "comm": np.zeros(n_p2p, dtype=np.int32),
        "tag": np.tile(tag, P * N),
        "bytes": np.tile(nbytes, P * N),
        "request": np.tile(req, P * N),
        "pos": p2p_pos.ravel(),
    }

    # collectives: (P, N, 2)
    coll_time = np.stack([w1.T + T[None, :], np.repeat(L[None, :], P, 0)], axis=2)
    n_coll = P * N * 2
    coll_events = {
        "location": np.repeat(ranks.astype(np.int32), N * 2),
        "time": coll_time.ravel(),
        "kind": np.tile(np.array([CollEv.BEGIN, CollEv.END], dtype=np.int8), P * N),
        "op": np.tile(np.array([-1, CollectiveOp.ALLREDUCE], dtype=np.int16), P * N),
        "comm": np.zeros(n_coll, dtype=np.int32),
        "root": np.full(n_coll, -1, dtype=np.int32),
        "sent": np.tile(np.array([0, 8], dtype=np.int64), P * N),
        "received": np.tile(np.array([0, 8], dtype=np.int64), P * N),
        "pos": (base + 16).repeat(2, axis=2).ravel(),
    }
    regions = pd.DataFrame(
        [
            {"name": n, "role": r, "paradigm": p, "file": "synthetic.c", "line": 10 * (i + 1), "module": "synthetic"}
            for i, (n, r, p) in enumerate(_REGIONS)
        ]
    )
    return RawTrace(
        locations=pd.DataFrame({"process": ranks, "thread": 0, "name": [f"rank {p}" for p in ranks], "type": "cpu"}),
        regions=regions,
        region_events=region_events,
        p2p_events=p2p_events,
        coll_events=coll_events,
        comms={0: ranks.copy()},
        comm_names={0: "MPI_COMM_WORLD"},
        attrs={
            "source": "perflow.synthetic",
            "creator": "perflow.synthetic",
            "late_instances": int(late.sum()),
            **{f"synthetic_{k}": v for k, v in asdict(s).items() if v is not None},
        },
    )


def trace(
    nprocs: int = 8,
    iterations: int = 10,
    *,
    seed: int = 0,
    compute_time: float = 1e-3,
    imbalance: float = 0.0,
    slow_rank: int | None = None,
    slow_factor: float = 2.0,
    late_sender: float = 0.0,
    late_delay: float = 2e-3,
    noise: float = 0.02,
    msg_bytes: int = 4096,
    raw: bool = False,
) -> Any:
    """A synthetic MPI-like trace as a PAG (or as a :class:`RawTrace` with ``raw=True``).

    Parameters
    ----------
    nprocs, iterations : int
        Processes and time steps.
    seed : int
        Seed of the random generator: same seed, same trace.
    compute_time : float
        Base compute time per iteration, in seconds.
    imbalance : float
        Linear load imbalance: rank ``p`` computes ``1 + imbalance * p / (P - 1)`` times the base.
    slow_rank : int, optional
        A rank whose compute takes ``slow_factor`` times longer.
    late_sender : float
        Probability per (iteration, rank) that the rank's compute is delayed by
        ``late_delay`` seconds, which makes its neighbours wait in MPI_Waitall.
    noise : float
        Standard deviation of the log-normal noise on compute times.
    msg_bytes : int
        Bytes per halo message.
    raw : bool
        Return the :class:`RawTrace` instead of building the PAG.
    """
    r = raw_trace(
        nprocs=nprocs,
        iterations=iterations,
        seed=seed,
        compute_time=compute_time,
        imbalance=imbalance,
        slow_rank=slow_rank,
        slow_factor=slow_factor,
        late_sender=late_sender,
        late_delay=late_delay,
        noise=noise,
        msg_bytes=msg_bytes,
    )
    if raw:
        return r

    return build_pag(r)


def profile(nvertices: int = 1000, nprocs: int = 64, *, fanout: int = 4, seed: int = 0, imbalance: float = 0.2) -> Any:
    """A synthetic profile PAG: a random calling-context tree with per-process times.

    Used for benchmarks of profile passes (no trace). Exclusive times are
    log-normal per vertex, scaled per process by ``1 + imbalance * u`` with a
    random ``u`` in [0, 1) per (vertex, process); every vertex has data on
    every process.
    """

    rng = np.random.default_rng(seed)
    parent = np.r_[-1, (np.arange(1, nvertices) - 1) // max(fanout, 1)]
    is_mpi = rng.random(nvertices) < 0.1
    is_mpi[0] = False
    names = np.where(
        is_mpi,
        np.array([f"MPI_{n}" for n in ("Allreduce", "Send", "Recv", "Wait")])[rng.integers(0, 4, nvertices)],
        np.char.add("func_", np.arange(nvertices).astype(str)),
    )
    kinds = np.where(is_mpi, VertexKind.MPI.value, VertexKind.FUNCTION.value)
    vt = pd.DataFrame({"name": names, "kind": kinds, "parent": parent, "file": "app.c", "line": np.arange(nvertices)})
    base = rng.lognormal(-7, 1.5, size=nvertices)
    v = np.repeat(np.arange(nvertices), nprocs)
    p = np.tile(np.arange(nprocs), nvertices)
    exc = base[v] * (1 + imbalance * rng.random(nvertices * nprocs))
    visits = np.repeat(rng.integers(1, 100, size=nvertices), nprocs).astype(np.float64)
    m = pd.DataFrame({"vertex": v, "process": p, "time_exc": exc, "visits": visits})
    return complete_time_metrics(
        PAG.from_frames(vt, m, attrs={"source": "perflow.synthetic.profile", "nprocs": nprocs})
    )
