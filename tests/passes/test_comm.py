"""Communication passes: matrices, collectives, sizes, time bins, summary, pattern classification."""

from __future__ import annotations

import numpy as np
import pytest

import perflow
from perflow.errors import PassError
from perflow.passes._pattern import classify_pattern
from perflow.passes.comm import comm_matrix, comm_over_time, comm_pattern, comm_summary, message_sizes

from .profile_data import literal, read_shared, ring_trace


def messages(pairs: list[tuple[int, int, int]], nprocs: int) -> perflow.PAG:
    """A trace with one blocking message per (sender, receiver, bytes), one after the other."""
    tb = perflow.TraceBuilder(nprocs=nprocs)
    for i, (s, d, b) in enumerate(pairs):
        tb.call(s, "MPI_Send", 2 * i, 2 * i + 0.5, send={"to": d, "bytes": b, "tag": i})
        tb.call(d, "MPI_Recv", 2 * i, 2 * i + 1.0, recv={"frm": s, "bytes": b, "tag": i})
    return tb.build()


def test_matrices_of_the_synthetic_ring() -> None:
    pag = ring_trace()  # 4 ranks x 3 iterations, 4096 bytes to each neighbour per iteration
    m = comm_matrix(pag)
    expect = np.zeros((4, 4), dtype=np.int64)
    for p in range(4):
        expect[p, (p + 1) % 4] = expect[p, (p - 1) % 4] = 3 * 4096
    assert np.array_equal(m.to_numpy(), expect)
    assert m.index.name == "sender" and m.columns.name == "receiver"
    assert np.array_equal(comm_matrix(pag, metric="count").to_numpy(), (expect > 0) * 3)
    t = comm_matrix(pag, metric="time")
    assert (t.to_numpy()[expect > 0] > 0).all() and (t.to_numpy()[expect == 0] == 0).all()
    # with collectives: 3 allreduces of 8 bytes: each rank sends 8 / 3 bytes to each of the 3 others per call
    mc = comm_matrix(pag, collectives=True).to_numpy()
    assert mc[0, 2] == pytest.approx(3 * 8 / 3) and mc[0, 1] == pytest.approx(3 * 4096 + 8)
    assert comm_matrix(pag, metric="count", collectives=True).to_numpy()[0, 2] == 3


def test_rooted_collectives() -> None:
    tb = perflow.TraceBuilder()
    for p in range(3):
        tb.call(p, "MPI_Bcast", 0, 1, coll={"root": 0, "sent": 100 if p == 0 else 0, "received": 0 if p == 0 else 100})
        tb.call(p, "MPI_Gather", 1, 2, coll={"root": 2, "sent": 10, "received": 30 if p == 2 else 0})
        tb.call(p, "MPI_Barrier", 2, 3, coll={})
    m = comm_matrix(tb.build(), collectives=True).to_numpy()
    assert m.tolist() == [[0, 100, 110], [0, 0, 10], [0, 0, 0]]


def test_message_sizes_and_time() -> None:
    pag = messages([(0, 1, 0), (0, 1, 1), (1, 0, 3), (1, 0, 1000), (0, 1, 1024)], nprocs=2)
    h = message_sizes(pag)
    assert h[["low", "high", "count"]].values.tolist() == [
        [0, 1, 1],
        [1, 2, 1],
        [2, 4, 1],
        [512, 1024, 1],
        [1024, 2048, 1],
    ]
    assert h["bytes"].tolist() == [0, 1, 3, 1000, 1024]
    custom = message_sizes(pag, bins=[0, 10, 2000])
    assert custom["count"].tolist() == [3, 2] and custom["share"].tolist() == [0.6, 0.4]
    tb = comm_over_time(pag, bins=2)
    # span 0..9; sends at 0, 2, 4 | 6, 8
    assert tb["messages"].tolist() == [3, 2] and tb["bytes"].tolist() == [4, 2024]
    with pytest.raises(PassError, match="bins must be at least two increasing edges"):
        message_sizes(pag, bins=[5])
    with pytest.raises(PassError, match="bins must be >= 1"):
        comm_over_time(pag, bins=0)


def test_summary() -> None:
    pag = messages([(0, 1, 10), (0, 2, 20), (2, 0, 5)], nprocs=3)
    s = comm_summary(pag).set_index("process")
    assert s.loc[0, ["msgs_sent", "bytes_sent", "msgs_recv", "bytes_recv"]].tolist() == [2, 30, 1, 5]
    assert s.loc[0, ["partners_out", "partners_in"]].tolist() == [2, 1]
    assert s.loc[1, ["msgs_recv", "bytes_recv", "partners_out"]].tolist() == [1, 10, 0]
    assert "late_sender_wait" in s.columns


def test_profiles_need_a_trace_for_timelines() -> None:
    pag = literal([{"name": "MPI_Send", "metrics": {"time_exc": [1.0, 1.0]}}], nprocs=2)
    assert comm_matrix(pag).to_numpy().sum() == 0
    assert comm_pattern(pag).attrs["pattern"] == "none"
    with pytest.raises(PassError, match="message_sizes needs a trace"):
        message_sizes(pag)
    with pytest.raises(PassError, match="metric must be one of bytes, count, time"):
        comm_matrix(pag, metric="wait")


@pytest.mark.parametrize(
    ("pairs", "nprocs", "pattern"),
    [
        ([(i, (i + 1) % 6, 100) for i in range(6)], 6, "ring"),
        ([(i, 0, 100) for i in range(1, 6)], 6, "gather/master-worker"),
        ([(i, j, 100) for i in range(5) for j in range(5) if i != j], 5, "all-to-all"),
        ([(0, 3, 9), (1, 5, 9), (2, 0, 9), (3, 4, 9), (4, 1, 9), (5, 2, 9), (0, 2, 9)], 6, "none"),
        ([(0, 1, 8), (1, 0, 8)], 2, "nearest-neighbour"),
    ],
)
def test_patterns(pairs: list[tuple[int, int, int]], nprocs: int, pattern: str) -> None:
    df = comm_pattern(messages(pairs, nprocs))
    assert df.attrs["pattern"] == pattern and df["pattern"].iloc[0] == pattern
    assert list(df.columns) == ["pattern", "matched", "score", "evidence"]
    assert sorted(df["pattern"]) == sorted(["none", "all-to-all", "gather/master-worker", "ring", "nearest-neighbour"])


def test_synthetic_ring_is_nearest_neighbour() -> None:
    df = comm_pattern(ring_trace())
    assert df.attrs["pattern"] == "nearest-neighbour"
    assert "(+1, -1)" in df["evidence"].iloc[0]
    # the allreduce's few bytes do not turn it into all-to-all
    assert comm_pattern(ring_trace(), collectives=True).attrs["pattern"] == "nearest-neighbour"


@pytest.mark.parametrize("periodic", [False, True])
def test_stencil_2d(periodic: bool) -> None:
    # 4 x 4 grid, up to 4 neighbours each: offsets +-1 and +-4; a periodic x wrap adds offsets +-3
    m = np.zeros((16, 16))
    for r in range(16):
        x, y = r % 4, r // 4
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            nx, ny = x + dx, y + dy
            if periodic:
                nx, ny = nx % 4, ny % 4
            if 0 <= nx < 4 and 0 <= ny < 4:
                m[r, nx + 4 * ny] = 1000
    df = classify_pattern(m, np.arange(16))
    assert df.attrs["pattern"] == "nearest-neighbour"
    assert ("5 rank offset(s)" if periodic else "4 rank offset(s) (+1, +4, -4, -1)") in df["evidence"].iloc[0]


def test_otf2_ping_pong() -> None:
    pag = read_shared("otf2", "ping-pong", "traces.otf2")
    m = comm_matrix(pag)
    assert m.to_numpy().tolist() == [[0, 4177920], [4177920, 0]]
    assert comm_matrix(pag, metric="count").to_numpy().tolist() == [[0, 8], [8, 0]]
    s = comm_summary(pag)
    assert s["msgs_sent"].tolist() == [8, 8] and s["bytes_sent"].tolist() == [4177920, 4177920]
    assert message_sizes(pag)["count"].sum() == 16
    assert comm_pattern(pag).attrs["pattern"] == "nearest-neighbour"
