"""Fixtures for the OTF2 reader/writer tests: sample data lookup and small generated traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perflow.kinds import P2P, CollectiveOp, CollEv, ThreadEv
from perflow.trace.raw import RawTrace

from ..conftest import shared_data_dir


@pytest.fixture(scope="session")
def otf2_sample():
    """Return a function name -> path of a shared OTF2 sample trace (skips when the data is absent)."""

    def get(name: str) -> Path:
        root = shared_data_dir()
        p = root / "otf2" / name if root else None
        if p is None or not (p / "traces.otf2").is_file():
            pytest.skip(f"shared sample data otf2/{name} not found (set PERFLOW_SHARED_DATA)")
        return p

    return get


# --- a hand-built trace: 2 processes x 2 threads + a metric location --------------------------------------------
REGIONS = [
    ("main", "function", "user"),
    ("MPI_Send", "point2point", "mpi"),
    ("MPI_Recv", "point2point", "mpi"),
    ("MPI_Isend", "point2point", "mpi"),
    ("MPI_Irecv", "point2point", "mpi"),
    ("MPI_Wait", "point2point", "mpi"),
    ("MPI_Allreduce", "coll_all2all", "mpi"),
    ("MPI_Bcast", "coll_one2all", "mpi"),
    ("!$omp parallel", "parallel", "openmp"),
    ("work", "function", "compiler"),
]
MAIN, SEND, RECV, ISEND, IRECV, WAIT, ALLRED, BCAST, PAR, WORK = range(len(REGIONS))
WORLD, SELF, SUB, TEAM0, TEAM1 = range(5)


def _stream_p0_master() -> list[tuple]:
    return [
        ("enter", 1.0, MAIN),
        ("metric", 1.0, 0, 100.0),
        ("metric", 1.0, 1, 5.0),
        ("enter", 1.1, SEND),
        ("p2p", 1.15, P2P.SEND, 1, WORLD, 7, 1000, -1),
        ("leave", 1.2, SEND),
        ("enter", 1.3, IRECV),
        ("p2p", 1.32, P2P.IRECV_REQUEST, -1, -1, -1, 0, 11),
        ("leave", 1.35, IRECV),
        ("enter", 1.4, ISEND),
        ("p2p", 1.42, P2P.ISEND, 0, SUB, 8, 2048, 12),  # SUB rank 0 is world rank 1
        ("leave", 1.45, ISEND),
        ("enter", 1.5, WAIT),
        ("p2p", 1.5, P2P.REQUEST_TEST, -1, -1, -1, 0, 11),
        ("p2p", 1.55, P2P.IRECV, 1, WORLD, 9, 512, 11),
        ("p2p", 1.56, P2P.ISEND_COMPLETE, -1, -1, -1, 0, 12),
        ("leave", 1.6, WAIT),
        ("enter", 1.7, ALLRED),
        ("coll", 1.7, CollEv.BEGIN, -1, -1, -1, 0, 0),
        ("coll", 1.8, CollEv.END, CollectiveOp.ALLREDUCE, WORLD, -1, 8, 8),
        ("leave", 1.8, ALLRED),
        ("enter", 1.9, BCAST),
        ("coll", 1.9, CollEv.BEGIN, -1, -1, -1, 0, 0),
        ("coll", 2.0, CollEv.END, CollectiveOp.BCAST, WORLD, 0, 100, 0),
        ("leave", 2.0, BCAST),
        ("thread", 2.1, ThreadEv.FORK, -1, 2),
        ("thread", 2.1, ThreadEv.TEAM_BEGIN, TEAM0, -1),
        ("enter", 2.1, PAR),
        ("enter", 2.2, WORK),
        ("leave", 2.3, WORK),
        ("leave", 2.4, PAR),
        ("thread", 2.4, ThreadEv.TEAM_END, TEAM0, -1),
        ("thread", 2.5, ThreadEv.JOIN, -1, -1),
        ("thread", 2.6, ThreadEv.CREATE, TEAM0, -1),
        ("thread", 2.7, ThreadEv.WAIT, TEAM0, -1),
        ("p2p", 2.8, P2P.REQUEST_CANCELLED, -1, -1, -1, 0, 13),
        ("leave", 3.0, MAIN),
        ("metric", 3.0, 0, 900.0),
        ("metric", 3.0, 1, 50.0),
    ]


def _stream_worker(team: int, begin: float) -> list[tuple]:
    return [
        ("thread", begin, ThreadEv.TEAM_BEGIN, team, -1),
        ("enter", begin + 0.02, PAR),
        ("enter", 2.2, WORK),
        ("leave", 2.3, WORK),
        ("leave", 2.38, PAR),
        ("thread", 2.4, ThreadEv.TEAM_END, team, -1),
        ("thread", 2.65, ThreadEv.BEGIN, team, -1),
        ("thread", 2.69, ThreadEv.END, team, -1),
    ]


def _stream_p1_master() -> list[tuple]:
    return [
        ("enter", 1.0, MAIN),
        ("enter", 1.05, RECV),
        ("p2p", 1.15, P2P.RECV, 0, WORLD, 7, 1000, -1),
        ("leave", 1.2, RECV),
        ("enter", 1.3, ISEND),
        ("p2p", 1.31, P2P.ISEND, 0, WORLD, 9, 512, 21),
        ("leave", 1.33, ISEND),
        ("enter", 1.34, IRECV),
        ("p2p", 1.34, P2P.IRECV_REQUEST, -1, -1, -1, 0, 22),
        ("leave", 1.36, IRECV),
        ("enter", 1.4, WAIT),
        ("p2p", 1.43, P2P.IRECV, 1, SUB, 8, 2048, 22),  # SUB rank 1 is world rank 0
        ("p2p", 1.44, P2P.ISEND_COMPLETE, -1, -1, -1, 0, 21),
        ("leave", 1.6, WAIT),
        ("enter", 1.65, ALLRED),
        ("coll", 1.65, CollEv.BEGIN, -1, -1, -1, 0, 0),
        ("coll", 1.8, CollEv.END, CollectiveOp.ALLREDUCE, WORLD, -1, 8, 8),
        ("leave", 1.8, ALLRED),
        ("enter", 1.85, BCAST),
        ("coll", 1.85, CollEv.BEGIN, -1, -1, -1, 0, 0),
        ("coll", 2.0, CollEv.END, CollectiveOp.BCAST, WORLD, 0, 0, 100),
        ("leave", 2.0, BCAST),
        ("thread", 2.1, ThreadEv.FORK, -1, 2),
        ("thread", 2.1, ThreadEv.TEAM_BEGIN, TEAM1, -1),
        ("enter", 2.1, PAR),
        ("leave", 2.4, PAR),
        ("thread", 2.4, ThreadEv.TEAM_END, TEAM1, -1),
        ("thread", 2.5, ThreadEv.JOIN, -1, -1),
        ("leave", 3.0, MAIN),
    ]


def raw_from_streams(streams: list[list[tuple]], locations: pd.DataFrame, **defs) -> RawTrace:
    """Build a RawTrace from per-location event lists (computing ``pos`` as the raw-trace contract says)."""
    rows: dict[str, list[tuple]] = {k: [] for k in ("region", "p2p", "coll", "metric", "thread")}
    nreg = 0
    for loc, events in enumerate(streams):
        for ev in events:
            kind, t, *rest = ev
            if kind in ("enter", "leave"):
                rows["region"].append((loc, t, 0 if kind == "enter" else 1, rest[0]))
                nreg += 1
            else:
                rows[kind].append((loc, t, *rest, nreg))
    cols = {
        "region": ("location", "time", "kind", "region"),
        "p2p": ("location", "time", "kind", "peer", "comm", "tag", "bytes", "request", "pos"),
        "coll": ("location", "time", "kind", "op", "comm", "root", "sent", "received", "pos"),
        "metric": ("location", "time", "metric", "value", "pos"),
        "thread": ("location", "time", "kind", "team", "count", "pos"),
    }
    tables = {k: {c: np.array([r[i] for r in rows[k]]) for i, c in enumerate(cols[k])} for k in cols}
    for k, t in tables.items():
        for c in cols[k]:
            if len(t[c]) == 0:
                t[c] = np.zeros(0)
    return RawTrace(
        locations=locations,
        region_events=tables["region"],
        p2p_events=tables["p2p"],
        coll_events=tables["coll"],
        metric_events=tables["metric"],
        thread_events=tables["thread"],
        **defs,
    )


def small_raw() -> RawTrace:
    """The hand-built trace: every event class, sub-communicator rank translation, threads, a metric location."""
    locations = pd.DataFrame(
        {
            "process": [0, 0, 1, 1, 0],
            "thread": [0, 1, 0, 1, 2],
            "name": ["Master thread", "OMP thread 1", "Master thread", "OMP thread 1", "power meter"],
            "type": ["cpu", "cpu", "cpu", "cpu", "metric"],
        }
    )
    regions = pd.DataFrame(
        [{"name": n, "role": r, "paradigm": p, "file": "app.c" if p != "mpi" else "", "line": 0} for n, r, p in REGIONS]
    )
    regions.loc[MAIN, "line"] = 12
    metrics = pd.DataFrame(
        {
            "name": ["PAPI_TOT_CYC", "PAPI_L2_TCM", "power"],
            "unit": ["#", "#", "W"],
            "mode": ["accumulated_start", "accumulated_start", "absolute_point"],
            "base": [10, 10, 10],
            "exponent": [0, 0, 0],
        }
    )
    comms = {
        WORLD: np.array([0, 1]),
        SELF: np.zeros(0, dtype=np.int64),
        SUB: np.array([1, 0]),
        TEAM0: np.array([0, 0]),
        TEAM1: np.array([1, 1]),
    }
    names = {WORLD: "MPI_COMM_WORLD", SELF: "MPI_COMM_SELF", SUB: "sub", TEAM0: "team p0", TEAM1: "team p1"}
    power = [("metric", 1.0, 2, 41.5), ("metric", 2.0, 2, 55.25), ("metric", 3.0, 2, 40.0)]
    streams = [_stream_p0_master(), _stream_worker(TEAM0, 2.1), _stream_p1_master(), _stream_worker(TEAM1, 2.1), power]
    return raw_from_streams(
        streams, locations, regions=regions, comms=comms, comm_names=names, metrics=metrics, attrs={"creator": "test"}
    )


@pytest.fixture
def small_trace(tmp_path):
    """(RawTrace, anchor path) of :func:`small_raw` written with perflow's OTF2 writer."""
    from perflow.writers.otf2 import write_otf2

    raw = small_raw()
    anchor = write_otf2(raw, tmp_path / "small", timer_resolution=1_000_000_000)
    return raw, Path(anchor)


def write_with_bindings(path: Path) -> Path:
    """A trace written by the ``otf2`` package's own writer (independent of perflow's writer).

    Two MPI ranks with two threads each. The location groups are defined in
    the order B, A but the MPI ``COMM_LOCATIONS`` group lists A's master thread
    first, so A is world rank 0. Locations are defined interleaved
    (A0, B0, A1, B1). Rank A sends 3 messages of 100 bytes to B on a
    communicator whose rank order is (B, A); thread 1 of each rank enters a
    region once; A records a 2-member metric twice.
    """
    import otf2
    from otf2.enums import GroupType, LocationType, Paradigm, RegionRole, Type

    with otf2.writer.open(str(path), timer_resolution=1000) as tr:
        d = tr.definitions
        node = d.system_tree_node("node")
        grp_b = d.location_group("Rank B", system_tree_parent=node)
        grp_a = d.location_group("Rank A", system_tree_parent=node)
        a0 = d.location("A master", type=LocationType.CPU_THREAD, group=grp_a)
        b0 = d.location("B master", type=LocationType.CPU_THREAD, group=grp_b)
        a1 = d.location("A thread 1", type=LocationType.CPU_THREAD, group=grp_a)
        b1 = d.location("B thread 1", type=LocationType.CPU_THREAD, group=grp_b)
        main = d.region("main", region_role=RegionRole.FUNCTION, paradigm=Paradigm.USER, source_file="x.c",
                        begin_line_number=3)  # fmt: skip
        send = d.region("MPI_Send", region_role=RegionRole.POINT2POINT, paradigm=Paradigm.MPI)
        recv = d.region("MPI_Recv", region_role=RegionRole.POINT2POINT, paradigm=Paradigm.MPI)
        task = d.region("task", region_role=RegionRole.FUNCTION, paradigm=Paradigm.USER)
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=[a0, b0])
        gw = d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[a0, b0])
        gr = d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[b0, a0])
        world = d.comm("MPI_COMM_WORLD", group=gw)
        rev = d.comm("reversed", group=gr)
        cyc = d.metric_member("cycles", unit="#", value_type=Type.UINT64)
        ins = d.metric_member("instructions", unit="#", value_type=Type.INT64)
        mclass = d.metric_class([cyc, ins])
        wa, wb = tr.event_writer_from_location(a0), tr.event_writer_from_location(b0)
        wa.enter(10, main)
        wa.metric(10, mclass, [1000, 2000])
        wb.enter(10, main)
        for k in range(3):
            t = 20 + 10 * k
            wa.enter(t, send)
            wa.mpi_send(t + 1, 0, rev, k, 100)  # rank 0 of "reversed" is B
            wa.leave(t + 2, send)
            wb.enter(t, recv)
            wb.mpi_recv(t + 3, 0, world, k, 100)
            wb.leave(t + 4, recv)
        wa.metric(60, mclass, [5000, 7000])
        wa.leave(70, main)
        wb.leave(70, main)
        for w in (tr.event_writer_from_location(a1), tr.event_writer_from_location(b1)):
            w.enter(40, task)
            w.leave(50, task)
    return path / "traces.otf2"
