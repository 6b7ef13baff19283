"""Recording the project's own Fortran MPI programs (use mpi and mpif.h bindings)."""

from __future__ import annotations

import pytest

from perflow.kinds import P2P, CollectiveOp, CollEv

from .conftest import count, site_line

pytestmark = pytest.mark.mpi


def test_pingpong(recorded) -> None:  # noqa: ANN001
    run = recorded("pingpong.f90", "4", "256", n=2)
    assert run.result.status == 0 and run.stdout == "pingpong.f90: 4 round trips of 256 bytes\n"
    p = run.p2p()
    assert len(p) == 16  # each call recorded once
    assert count(p, rank=0, kind=P2P.SEND, peer=1, tag=10, bytes=256, comm=0) == 4
    assert count(p, rank=0, kind=P2P.RECV, peer=1, tag=11, bytes=256) == 4
    assert count(p, rank=1, kind=P2P.RECV, peer=0, tag=10, bytes=256) == 4
    assert count(p, rank=1, kind=P2P.SEND, peer=0, tag=11, bytes=256) == 4
    assert not (run.coll()["op"] >= CollectiveOp.INIT).any()
    calls = run.calls()
    assert count(calls, name="MPI_Init") == count(calls, name="MPI_Finalize") == 2
    for rank, name, tag in ((0, "MPI_Send", "f_ping_send"), (1, "MPI_Recv", "f_pong_recv")):
        sel = calls[(calls["rank"] == rank) & (calls["name"] == name)]
        assert len(sel) == 4 and set(sel["line"]) == {site_line("pingpong.f90", tag)}
        assert set(sel["caller"]) == {"MAIN__"}


def test_ring_mpif_h_nonblocking(recorded) -> None:  # noqa: ANN001
    run = recorded("ring.f90", "5")
    p = run.p2p()
    for r in range(4):
        right, left = (r + 1) % 4, (r - 1) % 4
        assert count(p, rank=r, kind=P2P.ISEND, peer=right, tag=7, bytes=8000) == 5
        assert count(p, rank=r, kind=P2P.ISEND_COMPLETE, peer=right, tag=7, bytes=8000) == 5
        assert count(p, rank=r, kind=P2P.IRECV_REQUEST, peer=left, tag=7) == 5
        assert count(p, rank=r, kind=P2P.IRECV, peer=left, tag=7, bytes=8000) == 5
    calls = run.calls()
    for name, tag in (("MPI_Irecv", "f_halo_irecv"), ("MPI_Isend", "f_halo_isend"), ("MPI_Waitall", "f_halo_waitall")):
        sel = calls[calls["name"] == name]
        assert len(sel) == 20 and set(sel["line"]) == {site_line("ring.f90", tag)}
        assert set(sel["caller"]) == {"halo"}  # the Fortran name, without the trailing underscore
    c = run.coll()
    red = c[(c["op"] == CollectiveOp.REDUCE) & (c["kind"] == CollEv.END)].set_index("rank")
    assert red["received"].to_dict() == {0: 8, 1: 0, 2: 0, 3: 0}


def test_imbalance(recorded) -> None:  # noqa: ANN001
    run = recorded("imbalance.f90")
    slow = run.cpu_time(3, "compute_slow")  # the work done (samples stand for wall time, off the CPU too)
    assert slow > 0.05
    for r in range(3):
        assert slow > 2 * run.cpu_time(r, "compute")
    c = run.coll()
    ar = c[(c["op"] == CollectiveOp.ALLREDUCE) & (c["kind"] == CollEv.END)]
    assert ar.groupby("rank").size().to_dict() == {0: 4, 1: 4, 2: 4, 3: 4}
    calls = run.calls()
    assert set(calls[calls["name"] == "MPI_Allreduce"]["line"]) == {site_line("imbalance.f90", "f_allreduce")}


def test_late_sender(recorded) -> None:  # noqa: ANN001
    delay = 0.1
    run = recorded("late_sender.f90", "3", str(delay), n=2)
    calls = run.calls()
    sends = calls[(calls["name"] == "MPI_Send") & (calls["rank"] == 0)].sort_values("enter")
    recvs = calls[(calls["name"] == "MPI_Recv") & (calls["rank"] == 1)].sort_values("enter")
    assert len(sends) == len(recvs) == 3
    lag = sends["enter"].to_numpy() - recvs["enter"].to_numpy()
    assert (lag > 0.8 * delay).all() and (lag < delay + 0.5).all()


def test_subcommunicator(recorded) -> None:  # noqa: ANN001
    run = recorded("subcomm.f90")
    raw = run.raw
    halves = sorted(raw.comms[c].tolist() for c in raw.comms if "split" in raw.comm_names[c])
    assert halves == [[0, 2], [1, 3]]
    p = run.p2p()
    sends = p[p["kind"] == P2P.SEND]
    assert sorted(sends["rank"]) == [0, 1]
    for _, s in sends.iterrows():
        assert raw.comms[int(s["comm"])][int(s["peer"])] == s["rank"] + 2
    calls = run.calls()
    assert set(calls[calls["name"] == "MPI_Comm_split"]["line"]) == {site_line("subcomm.f90", "f_split")}
    assert set(calls[calls["name"] == "MPI_Bcast"]["line"]) == {site_line("subcomm.f90", "f_bcast")}
