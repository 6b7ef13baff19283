"""The definition and event forms a current Score-P (8.x, OTF2 3) writes, read by both decoders.

Written through the OTF2 C library (tests/otf2kit.py): MPI worlds as
``COMM_LOCATION_GROUPS`` groups, inter-communicators, RMA windows, I/O
paradigms/files/handles, calling contexts with interrupt generators, and
their events (non-blocking collectives, samples, I/O and RMA records).
"""

from __future__ import annotations

import numpy as np
import pytest

import perflow
from perflow.readers.otf2 import decode
from perflow.trace.analyses import WAIT_INSTANCES
from tests.otf2kit import (
    GT_COMM_GROUP,
    GT_COMM_LOCATION_GROUPS,
    CArchive,
    i64,
    u8,
    u32,
    u64,
)

DECODERS = ["fast", "bindings"]
US = 1e-6


def _mpi_world(a: CArchive, n: int, order: list[int]) -> tuple[list[int], int]:
    """``n`` MPI ranks; location k belongs to rank order[k] (so location order is not rank order)."""
    lgs = [a.location_group(f"MPI Rank {r}") for r in range(n)]
    locs = [a.location("Master thread", lgs[order[k]]) for k in range(n)]
    a.group(GT_COMM_LOCATION_GROUPS, "mpi", lgs)  # the world: location groups in rank order (OTF2 3)
    world = a.comm("MPI_COMM_WORLD", a.group(GT_COMM_GROUP, "mpi", list(range(n))))
    return locs, world


@pytest.fixture(scope="module")
def scorep8(tmp_path_factory):
    """Two ranks (location 0 is rank 1): a message, an MPI_Iallreduce, samples, I/O and RMA records."""
    a = CArchive(tmp_path_factory.mktemp("sp8") / "run", resolution=10**6)
    main = a.region("main")
    send = a.region("MPI_Send", "point2point", "mpi")
    recv = a.region("MPI_Recv", "point2point", "mpi")
    iall = a.region("MPI_Iallreduce", "coll_all2all", "mpi")
    wait = a.region("MPI_Wait", "point2point", "mpi")
    write = a.region("write", "file_io", "io")
    put = a.region("MPI_Put", "rma", "mpi")
    locs, world = _mpi_world(a, 2, [1, 0])
    r1, r0 = locs  # location 0 is rank 1
    a.inter_comm("intercomm", 1, 1)
    a.define("WriteRmaWin", a.s("win"), u32(world), u32(0), kind="rmawin")
    a.define("WriteIoRegularFile", a.s("/tmp/out.dat"), u32(0), kind="iofile")
    a.define("WriteIoParadigm", a.s("POSIX"), a.s("POSIX I/O"), u8(0), u32(0), u8(0), None, None, None,
             kind="ioparadigm")  # fmt: skip
    a.define("WriteIoHandle", a.s("fd 3"), u32(0), u32(0), u32(0), u32(world), u32(0xFFFFFFFF), kind="iohandle")
    kernel = a.region("kernel")
    a.define("WriteSourceCodeLocation", a.s("k.c"), u32(7), kind="scl")
    cc_main = a.define("WriteCallingContext", u32(main), u32(0), u32(0xFFFFFFFF), kind="cc")
    cc_kernel = a.define("WriteCallingContext", u32(kernel), u32(0), u32(cc_main), kind="cc")
    a.define("WriteInterruptGenerator", a.s("CPU"), u8(0), u8(1), i64(-6), u64(1000), kind="ig")  # 1 ms
    for loc in locs:
        a.enter(loc, 0, main)
    # rank 0 sends 64 bytes at 2; rank 1 receives in [1, 3]: Late Sender 1 us
    a.enter(r0, 2, send)
    a.event(r0, "MpiSend", 2, u32(1), u32(world), u32(5), u64(64))
    a.leave(r0, 3, send)
    a.enter(r1, 1, recv)
    a.event(r1, "MpiRecv", 3, u32(0), u32(world), u32(5), u64(64))
    a.leave(r1, 3, recv)
    # MPI_Iallreduce: rank 0 posts at 10, waits in [12, 30]; rank 1 posts at 20, waits in [25, 30]
    for loc, post, w0 in ((r0, 10, 12), (r1, 20, 25)):
        a.enter(loc, post, iall)
        a.event(loc, "NonBlockingCollectiveRequest", post, u64(9))
        a.leave(loc, post + 1, iall)
        a.enter(loc, w0, wait)
        a.event(loc, "NonBlockingCollectiveComplete", 30, u8(11), u32(world), u32(0xFFFFFFFF), u64(8), u64(8), u64(9))
        a.leave(loc, 30, wait)
    # rank 0: a write of 4096 bytes; an MPI_Put; samples in kernel
    a.enter(r0, 40, write)
    a.event(r0, "IoOperationBegin", 40, u32(0), u8(1), u32(0), u64(4096), u64(1))
    a.event(r0, "IoOperationComplete", 45, u32(0), u64(4096), u64(1))
    a.leave(r0, 45, write)
    a.event(r0, "RmaWinCreate", 46, u32(0))
    a.enter(r0, 47, put)
    a.event(r0, "RmaPut", 47, u32(0), u32(1), u64(128), u64(3))
    a.event(r0, "RmaOpCompleteBlocking", 48, u32(0), u64(3))
    a.leave(r0, 48, put)
    for t in (1050, 2050, 3050):
        a.event(r0, "CallingContextSample", t, u32(cc_kernel), u32(1), u32(0))
    for loc in locs:
        a.leave(loc, 4000, main)
    return a.close()


@pytest.mark.parametrize("decoder", DECODERS)
def test_definitions_and_events(scorep8, decoder):
    raw = decode(scorep8, decoder=decoder)
    assert raw.locations["process"].tolist() == [1, 0]
    assert raw.comms[0].tolist() == [0, 1]
    assert len(raw.comms[1]) == 0  # the inter-communicator
    skipped = raw.attrs["skipped_events"]
    assert skipped == {}
    rma = raw.rma_events  # RmaWinCreate, RmaPut, RmaOpCompleteBlocking of rank 0 (location 1)
    assert rma["kind"].tolist() == [0, 11, 14] and rma["location"].tolist() == [1, 1, 1]
    assert rma["win"].tolist() == [0, 0, 0] and rma["remote"].tolist() == [-1, 1, -1]
    assert rma["bytes"].tolist() == [0, 128, 0] and rma["matching"].tolist() == [-1, 3, 3]
    assert raw.attrs["rma_windows"] == {0: {"name": "win", "comm": 0}}
    io = raw.io_events
    assert io["kind"].tolist() == [0, 1] and io["mode"].tolist() == [1, -1]
    assert io["bytes"].tolist() == [4096, 4096] and io["handle"].tolist() == [0, 0]
    assert raw.attrs["io_handles"] == {0: "/tmp/out.dat"}
    assert len(raw.sample_events["time"]) == 3
    assert np.allclose(raw.sample_events["weight"], 1e-3)


def test_decoders_agree(scorep8):
    from tests.readers.test_otf2_decode import assert_same_tables

    assert_same_tables(decode(scorep8, decoder="bindings"), decode(scorep8, decoder="fast", jobs=0))


def test_messages_samples_and_nonblocking_collective_waits(scorep8):
    pag = perflow.read(scorep8)
    m = pag.trace.messages
    assert (m["send_process"].tolist(), m["recv_process"].tolist(), m["bytes"].tolist()) == ([0], [1], [64])
    w = pag.analyses.get(WAIT_INSTANCES)
    ls = w[w["kind"] == "late_sender"]
    assert ls["amount"].tolist() == pytest.approx([1 * US])
    # rank 0 waits in MPI_Wait from 12 until rank 1 posts its request at 20: 8 us (not until its Wait at 25)
    nxn = w[w["kind"] == "wait_nxn"]
    assert nxn["process"].tolist() == [0]
    assert nxn["amount"].tolist() == pytest.approx([8 * US])
    assert nxn["cause_process"].tolist() == [1] and nxn["cause_time"].tolist() == pytest.approx([20 * US])
    names = pag.vertex_table["name"].astype(str).to_numpy()
    assert names[pag.trace.intervals["vertex"].to_numpy()[int(nxn["interval"].iloc[0])]] == "MPI_Wait"
    # the samples: three 1 ms periods in kernel, below main on rank 0
    k = np.flatnonzero(names == "kernel")
    assert len(k) == 1
    t = pag.metrics.xs(int(k[0]), level="vertex")["time_inc"]
    assert float(t.sum()) == pytest.approx(3e-3)


def test_io_operations_on_their_calls(scorep8, tmp_path):
    pag = perflow.read(scorep8)
    io = pag.trace.io
    assert len(io) == 1
    row = io.iloc[0]
    assert (row["process"], row["mode"], row["bytes"], row["handle"]) == (0, 1, 4096, 0)
    assert (row["begin"], row["end"]) == (pytest.approx(40 * US), pytest.approx(45 * US))
    names = pag.vertex_table["name"].astype(str).to_numpy()
    v = int(pag.trace.intervals["vertex"].to_numpy()[int(row["interval"])])
    assert names[v] == "write" and str(pag.vertex_table["kind"].iloc[v]) == "io"
    assert pag.trace.io_handles == {0: "/tmp/out.dat"}
    m = pag.metrics
    assert float(m["io_bytes_written"].sum()) == 4096.0
    assert float(m.xs(v, level="vertex")["io_bytes_written"].sum()) == 4096.0
    assert float(m["io_bytes_read"].sum()) == 0.0
    from perflow.pag.persist import load, save

    back = load(save(pag, tmp_path / "saved"))
    assert back.trace.io_handles == {0: "/tmp/out.dat"} and len(back.trace.io) == 1
