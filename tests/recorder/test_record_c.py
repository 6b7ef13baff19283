"""Recording the project's own C MPI programs (compiled here with the MPI wrapper)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from perflow.errors import RecordError
from perflow.kinds import OFF_CPU, P2P, CollectiveOp, CollEv

from .conftest import count, site_line

pytestmark = pytest.mark.mpi


def _names(raw, stack_id: int) -> list[str]:  # noqa: ANN001
    st = raw.stacks[raw.stacks["stack"] == stack_id].sort_values("depth")
    return raw.regions["name"].reindex(st["region"]).tolist()


def test_pingpong_messages(recorded) -> None:  # noqa: ANN001
    run = recorded("pingpong.c", "5", "1000", n=2)
    assert run.result.status == 0
    p = run.p2p()
    assert len(p) == 20
    assert count(p, rank=0, kind=P2P.SEND, peer=1, tag=10, bytes=1000, comm=0) == 5
    assert count(p, rank=0, kind=P2P.RECV, peer=1, tag=11, bytes=1000, comm=0) == 5
    assert count(p, rank=1, kind=P2P.RECV, peer=0, tag=10, bytes=1000, comm=0) == 5
    assert count(p, rank=1, kind=P2P.SEND, peer=0, tag=11, bytes=1000, comm=0) == 5
    # MPI_Init/MPI_Finalize: regions only, no collective records (OTF2 has no operation for them)
    assert not (run.coll()["op"] >= CollectiveOp.INIT).any()
    calls = run.calls()
    assert count(calls, name="MPI_Init") == count(calls, name="MPI_Finalize") == 2
    assert run.raw.comm_names[0] == "MPI_COMM_WORLD"
    assert run.raw.comms[0].tolist() == [0, 1]
    # each send lies inside its MPI_Send region instance: the next region event is that call's LEAVE, past an
    # off_cpu instance the recorder places inside the call when the rank was descheduled in it (offcpu.py)
    ev = run.raw.region_events
    names = run.raw.regions["name"].reindex(ev["region"]).to_numpy()
    mpi = np.flatnonzero(names != OFF_CPU)
    sends = p[p["kind"] == P2P.SEND]
    nxt = mpi[np.searchsorted(mpi, sends["pos"].to_numpy())]
    assert (ev["kind"][nxt] == 1).all()
    assert set(names[nxt]) == {"MPI_Send"}


def test_long_run_flushes_in_chunks(recorded) -> None:  # noqa: ANN001
    # 12,000 round trips: 72,000 event records per rank, more than two 32,768-record buffers
    run = recorded("pingpong.c", "12000", "8", n=2)
    p = run.p2p()
    assert count(p, rank=0, kind=P2P.SEND, tag=10, bytes=8) == 12000
    assert count(p, rank=1, kind=P2P.RECV, tag=10, bytes=8) == 12000
    assert len(p) == 48000
    ev = run.raw.region_events
    names = run.raw.regions["name"].to_numpy()[ev["region"]]
    # root, Init, Finalize and 24,000 calls per rank (and maybe some time off the CPU inside them)
    assert (names != "off_cpu").sum() == 2 * (2 + 2 * 24000 + 2 * 2)
    assert all((np.diff(ev["time"][ev["location"] == loc]) >= 0).all() for loc in (0, 1))


@pytest.mark.parametrize("flags", [(), ("-no-pie",)], ids=["pie", "no-pie"])
def test_pingpong_call_sites(recorded, flags: tuple) -> None:  # noqa: ANN001
    run = recorded("pingpong.c", "5", "1000", n=2, flags=flags)
    calls = run.calls()
    for rank, name, tag in (
        (0, "MPI_Send", "ping_send"),
        (0, "MPI_Recv", "ping_recv"),
        (1, "MPI_Recv", "pong_recv"),
        (1, "MPI_Send", "pong_send"),
    ):
        sel = calls[(calls["rank"] == rank) & (calls["name"] == name)]
        assert len(sel) == 5
        assert set(sel["caller"]) == {"ping_pong"}
        assert set(sel["line"]) == {site_line("pingpong.c", tag)}
        assert {Path(f).name for f in sel["file"]} == {"pingpong.c"}
    send = run.raw.regions[(run.raw.regions["name"] == "MPI_Send")].iloc[0]
    assert _names(run.raw, int(send["stack"])) == ["main", "ping_pong"]


def test_ring_nonblocking(recorded) -> None:  # noqa: ANN001
    run = recorded("ring.c", "6", "500")
    p = run.p2p()
    for r in range(4):
        right, left = (r + 1) % 4, (r - 1) % 4
        assert count(p, rank=r, kind=P2P.ISEND, peer=right, tag=7, bytes=4000) == 6
        assert count(p, rank=r, kind=P2P.ISEND_COMPLETE, peer=right, tag=7, bytes=4000) == 6
        assert count(p, rank=r, kind=P2P.IRECV_REQUEST, peer=-1, tag=7, bytes=4000) == 6  # MPI_ANY_SOURCE
        assert count(p, rank=r, kind=P2P.IRECV, peer=left, tag=7, bytes=4000) == 6  # the actual source
    posted = p[p["kind"].isin([P2P.ISEND, P2P.IRECV_REQUEST])].set_index(["location", "request"]).sort_index()
    done = p[p["kind"].isin([P2P.ISEND_COMPLETE, P2P.IRECV])].set_index(["location", "request"]).sort_index()
    assert posted.index.equals(done.index)  # every request completes exactly once
    assert (done["time"].to_numpy() >= posted["time"].to_numpy()).all()
    ev, names = run.raw.region_events, run.raw.regions["name"]
    assert set(names.reindex(ev["region"][done["pos"]])) == {"MPI_Waitall"}
    calls = run.calls()
    for name, tag in (("MPI_Irecv", "halo_irecv"), ("MPI_Isend", "halo_isend"), ("MPI_Waitall", "halo_waitall")):
        sel = calls[calls["name"] == name]
        assert len(sel) == 24 and set(sel["caller"]) == {"halo"}
        assert set(sel["line"]) == {site_line("ring.c", tag)}
    c = run.coll()
    red = c[(c["op"] == CollectiveOp.REDUCE) & (c["kind"] == CollEv.END)]
    assert sorted(red["rank"]) == [0, 1, 2, 3] and set(red["root"]) == {0}
    assert red.set_index("rank")["received"].to_dict() == {0: 8, 1: 0, 2: 0, 3: 0}
    assert set(red["sent"]) == {8}


def test_ring_persistent_requests(recorded) -> None:  # noqa: ANN001
    run = recorded("ring.c", "4", "500", "persistent")
    p = run.p2p()
    for r in range(4):
        right, left = (r + 1) % 4, (r - 1) % 4
        assert count(p, rank=r, kind=P2P.ISEND, peer=right, tag=7, bytes=4000) == 4  # one per MPI_Startall
        assert count(p, rank=r, kind=P2P.ISEND_COMPLETE, peer=right, tag=7, bytes=4000) == 4
        assert count(p, rank=r, kind=P2P.IRECV, peer=left, tag=7, bytes=4000) == 4
    assert p.groupby(["location", "request"]).size().eq(2).all()  # each start is its own request instance
    calls = run.calls()
    assert calls[calls["name"] == "MPI_Startall"]["line"].eq(site_line("ring.c", "startall")).all()
    assert len(calls[calls["name"] == "MPI_Send_init"]) == 4


def test_imbalance_samples(recorded) -> None:  # noqa: ANN001
    run = recorded("imbalance.c", "4", "20000000", "4")
    w = run.sample_weight_by_function().set_index(["rank", "function"])["weight"]
    slow = run.cpu_time(3, "compute_slow")  # the work done (samples stand for wall time, off the CPU too)
    assert slow > 0.05 and w.get((3, "compute_slow"), 0.0) >= slow
    for r in range(3):
        assert slow > 2 * run.cpu_time(r, "compute")
        assert (r, "compute_slow") not in w.index
    c = run.coll()
    ar = c[(c["op"] == CollectiveOp.ALLREDUCE) & (c["kind"] == CollEv.END)]
    assert ar.groupby("rank").size().to_dict() == {0: 4, 1: 4, 2: 4, 3: 4}
    assert set(ar["sent"]) == {8} and set(ar["received"]) == {8} and set(ar["comm"]) == {0}
    calls = run.calls()
    wait = calls[calls["name"] == "MPI_Allreduce"].groupby("rank")["duration"].sum()
    assert wait[0] > wait[3]  # the others wait for the slow rank
    assert set(calls[calls["name"] == "MPI_Allreduce"]["line"]) == {site_line("imbalance.c", "allreduce")}


def test_late_sender(recorded) -> None:  # noqa: ANN001
    delay = 0.1
    run = recorded("late_sender.c", "3", str(delay), n=2)
    calls = run.calls()
    sends = calls[(calls["name"] == "MPI_Send") & (calls["rank"] == 0)].sort_values("enter")
    recvs = calls[(calls["name"] == "MPI_Recv") & (calls["rank"] == 1)].sort_values("enter")
    assert len(sends) == len(recvs) == 3
    lag = sends["enter"].to_numpy() - recvs["enter"].to_numpy()
    assert (lag > 0.8 * delay).all() and (lag < delay + 0.5).all()
    assert (recvs["duration"].to_numpy() > 0.8 * delay).all()  # the receiver waits for the late sender
    assert set(sends["line"]) == {site_line("late_sender.c", "late_send")}
    assert set(recvs["line"]) == {site_line("late_sender.c", "early_recv")}
    # the sender computes in delay() (CPU time: the share, as the machine may be busy)
    total = run.raw.sample_events["weight"][run.raw.sample_events["location"] == 0].sum()
    assert run.inclusive_weight(0, "delay") > 0.5 * total > 0


def test_subcommunicator(recorded) -> None:  # noqa: ANN001
    run = recorded("subcomm.c")
    raw = run.raw
    halves = {raw.comm_names[c]: raw.comms[c].tolist() for c in raw.comms if "split" in raw.comm_names[c]}
    assert sorted(halves.values()) == [[0, 2], [1, 3]]
    p = run.p2p()
    sends = p[p["kind"] == P2P.SEND].set_index("rank")
    recvs = p[p["kind"] == P2P.RECV].set_index("rank")
    assert sorted(sends.index) == [0, 1] and sorted(recvs.index) == [2, 3]
    for r in (0, 1):  # comm-local peer 1 is world rank r + 2
        s = sends.loc[r]
        assert (s["peer"], s["tag"], s["bytes"]) == (1, 5, 4)
        assert raw.comms[int(s["comm"])][int(s["peer"])] == r + 2
        assert raw.comms[int(recvs.loc[r + 2]["comm"])][int(recvs.loc[r + 2]["peer"])] == r
    c = run.coll()
    bc = c[(c["op"] == CollectiveOp.BCAST) & (c["kind"] == CollEv.END)].set_index("rank")
    assert set(bc["root"]) == {1}  # comm-local: world ranks 2 and 3 are the roots
    assert bc["sent"].to_dict() == {0: 0, 1: 0, 2: 4, 3: 4}
    assert bc["received"].to_dict() == {0: 4, 1: 4, 2: 0, 3: 0}
    assert bc.loc[0, "comm"] == bc.loc[2, "comm"] != bc.loc[1, "comm"]
    calls = run.calls()
    assert set(calls[calls["name"] == "MPI_Comm_split"]["line"]) == {site_line("subcomm.c", "split")}


def test_cxx_program(recorded) -> None:  # noqa: ANN001
    run = recorded("cxx_ring.cpp", "3")
    p = run.p2p()
    for r in range(4):
        assert count(p, rank=r, kind=P2P.SEND, peer=(r + 1) % 4, tag=9, bytes=800) == 3
        assert count(p, rank=r, kind=P2P.RECV, peer=(r - 1) % 4, tag=9, bytes=800) == 3
    calls = run.calls()
    sr = calls[calls["name"] == "MPI_Sendrecv"]
    assert len(sr) == 12 and set(sr["line"]) == {site_line("cxx_ring.cpp", "cxx_sendrecv")}
    (caller,) = set(sr["caller"])
    assert caller.startswith("double halo::exchange<double>(std::vector<double")  # demangled


def test_output_and_exit_status_unchanged(recorded, build, plain) -> None:  # noqa: ANN001
    status, out = plain([build("subcomm.c"), "3"])
    run = recorded("subcomm.c", "3")
    assert status == 3 and run.result.status == 3
    assert sorted(run.stdout.splitlines()) == sorted(out.splitlines())
    assert len(out.splitlines()) == 2
    assert run.raw is not None and len(run.raw.locations) == 4  # the data is there even so
    status, out = plain([build("pingpong.c"), "5", "1000"], n=2)
    run = recorded("pingpong.c", "5", "1000", n=2)
    assert status == 0 and run.stdout == out == "pingpong: 5 round trips of 1000 bytes, counter 5\n"


def test_timeout_kills_the_run(recorded) -> None:  # noqa: ANN001
    with pytest.raises(RecordError, match=r"did not finish within 2 s and was killed"):
        recorded("late_sender.c", "2", "60", n=2, timeout=2.0)


def test_raw_trace_round_trip(recorded, tmp_path: Path) -> None:  # noqa: ANN001
    from perflow.trace.store import load_raw, save_raw

    raw = recorded("ring.c", "6", "500").raw
    back = load_raw(save_raw(raw, tmp_path / "r.npz"))
    for t in ("region_events", "p2p_events", "coll_events", "sample_events"):
        for col, a in getattr(raw, t).items():
            np.testing.assert_array_equal(getattr(back, t)[col], a)
    assert back.regions[["name", "file", "line", "caller", "stack"]].equals(
        raw.regions[["name", "file", "line", "caller", "stack"]]
    )
    assert {k: v.tolist() for k, v in back.comms.items()} == {k: v.tolist() for k, v in raw.comms.items()}
    assert back.attrs["command"] == raw.attrs["command"]
