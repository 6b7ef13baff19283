"""OTF2 decoding: facts of the real Score-P samples, and both decoders on generated traces."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from perflow.kinds import P2P, CollectiveOp, CollEv, ThreadEv
from perflow.readers.otf2 import decode, fast_available, is_otf2
from perflow.trace.raw import RawTrace

from .conftest import ALLRED, BCAST, MAIN, SEND, SUB, WORLD, small_raw, write_with_bindings

TABLES = ("region_events", "p2p_events", "coll_events", "metric_events", "thread_events")

# a hang guard on each test's body; compiling the fast decoder's callbacks (a cold kernel cache: minutes under
# load) happens once in the ``engine`` fixture, outside it
pytestmark = pytest.mark.timeout(120, func_only=True)


def assert_same_tables(a: RawTrace, b: RawTrace) -> None:
    """Every event table column identical (values and dtypes), and the definitions tables equal."""
    for t in TABLES:
        for c in getattr(a, t):
            x, y = getattr(a, t)[c], getattr(b, t)[c]
            assert x.dtype == y.dtype, (t, c)
            np.testing.assert_array_equal(x, y, err_msg=f"{t}.{c}")
    pd.testing.assert_frame_equal(a.locations, b.locations)
    pd.testing.assert_frame_equal(a.regions, b.regions)
    pd.testing.assert_frame_equal(a.metrics, b.metrics)
    assert a.comm_names == b.comm_names
    assert a.comms.keys() == b.comms.keys()
    for k in a.comms:
        np.testing.assert_array_equal(a.comms[k], b.comms[k])
    assert a.attrs["skipped_events"] == b.attrs["skipped_events"]


def comm_matrix(raw: RawTrace) -> np.ndarray:
    """Bytes sent between world ranks, from the send events (peer translated through comms)."""
    p = raw.p2p_events
    sends = np.isin(p["kind"], [P2P.SEND, P2P.ISEND])
    procs = raw.locations["process"].to_numpy()
    n = int(procs.max()) + 1
    m = np.zeros((n, n), dtype=np.int64)
    for loc, comm, peer, nbytes in zip(p["location"][sends], p["comm"][sends], p["peer"][sends], p["bytes"][sends]):
        m[procs[loc], raw.comms[int(comm)][peer]] += nbytes
    return m


@pytest.fixture(scope="module", params=["fast", "bindings"])
def engine(request):
    if request.param == "fast" and fast_available():
        from perflow.readers.otf2._callbacks import callback_addresses

        callback_addresses()  # compiled, or loaded from the kernel cache, before the first test's clock starts
    return request.param


# --- the real Score-P samples ----------------------------------------------------------------------------------
def test_ping_pong_facts(otf2_sample, engine):
    raw = decode(otf2_sample("ping-pong"), decoder=engine)
    raw.validate()
    assert raw.attrs["decoder"] == engine
    assert raw.attrs["creator"].startswith("Score-P")
    # 120 events: 2 ProgramBegin, 42 Enter, 42 Leave, 16 MpiSend, 16 MpiRecv, 2 ProgramEnd; ProgramBegin/End are
    # the enter and leave of the artificial program region above main
    kinds = raw.region_events["kind"]
    assert (kinds == 0).sum() == 44 and (kinds == 1).sum() == 44
    prog = raw.region_events["region"] == len(raw.regions) - 1
    assert prog.sum() == 4 and raw.regions.iloc[-1][["role", "paradigm"]].tolist() == [
        "artificial",
        "measurement_system",
    ]
    assert raw.attrs["skipped_events"] == {}
    p = raw.p2p_events
    assert (p["kind"] == P2P.SEND).sum() == 16 and (p["kind"] == P2P.RECV).sum() == 16
    assert len(p["kind"]) == 32 and raw.n_events == 120
    # each rank sends 8 messages, 4,177,920 bytes in total to the other
    for loc in (0, 1):
        assert ((p["location"] == loc) & (p["kind"] == P2P.SEND)).sum() == 8
    np.testing.assert_array_equal(comm_matrix(raw), [[0, 4177920], [4177920, 0]])
    assert raw.locations["process"].tolist() == [0, 1]
    assert raw.locations["thread"].tolist() == [0, 0]
    assert raw.locations["type"].tolist() == ["cpu", "cpu"]
    assert raw.comm_names[raw.world_comm] == "MPI_COMM_WORLD"
    np.testing.assert_array_equal(raw.comms[raw.world_comm], [0, 1])
    assert len(raw.comms[[k for k, v in raw.comm_names.items() if v == "MPI_COMM_SELF"][0]]) == 0
    send = raw.regions.index[raw.regions["name"] == "MPI_Send"][0]
    assert raw.regions.loc[send, "role"] == "point2point" and raw.regions.loc[send, "paradigm"] == "mpi"
    # every send lies inside an MPI_Send region instance: the region event before its pos is Enter(MPI_Send)
    s = p["kind"] == P2P.SEND
    before = p["pos"][s] - 1
    assert (raw.region_events["region"][before] == send).all() and (raw.region_events["kind"][before] == 0).all()
    assert 2.09e9 < raw.attrs["timer_resolution"] < 2.1e9  # ticks per second of the run's TSC
    assert 0.15 < raw.attrs["trace_length"] < 0.3
    assert raw.region_events["time"].min() >= 0


def test_ping_pong_papi_metrics(otf2_sample, engine):
    raw = decode(otf2_sample("ping-pong-papi"), decoder=engine)
    raw.validate()
    # 204 events: 84 Metric events with 3 members each, and the same messages as ping-pong
    assert list(raw.metrics["name"]) == ["PAPI_TOT_CYC", "PAPI_L2_TCM", "PAPI_BR_MSP"]
    assert set(raw.metrics["mode"]) == {"accumulated_start"}
    m = raw.metric_events
    assert len(m["metric"]) == 84 * 3
    assert np.bincount(m["metric"]).tolist() == [84, 84, 84]
    assert len(raw.region_events["kind"]) + len(raw.p2p_events["kind"]) + 84 == 204  # ProgramBegin/End: region events
    np.testing.assert_array_equal(comm_matrix(raw), [[0, 4177920], [4177920, 0]])
    # accumulated counters never decrease along a location
    for loc in (0, 1):
        for k in range(3):
            v = m["value"][(m["location"] == loc) & (m["metric"] == k)]
            assert (np.diff(v) >= 0).all()


@pytest.fixture(params=["one child", "workers"])
def fast_path(request, monkeypatch):
    """Run the fast decoder both ways: small traces in one child, or definitions + parallel workers."""
    if request.param == "workers":
        import perflow.readers.otf2._decode as d

        monkeypatch.setattr(d, "SMALL_TRACE_BYTES", 0)
    return request.param


@pytest.mark.parametrize("name", ["ping-pong", "ping-pong-papi"])
def test_engines_identical_on_samples(otf2_sample, name, fast_path):
    a = decode(otf2_sample(name), decoder="bindings")
    for jobs in (0, 1, 2):
        assert_same_tables(a, decode(otf2_sample(name), decoder="fast", jobs=jobs))


# --- generated traces ------------------------------------------------------------------------------------------
def test_small_trace_decodes_to_what_was_written(small_trace, engine):
    raw, anchor = small_trace
    got = decode(anchor, decoder=engine)
    got.validate()
    expect = small_raw()
    # BEGIN rows carry the op, communicator and root of their END (documented propagation)
    c = expect.coll_events
    begins = np.flatnonzero(c["kind"] == CollEv.BEGIN)
    for col in ("op", "comm", "root"):
        c[col][begins] = c[col][begins + 1]
    for t in TABLES:
        for col in getattr(expect, t):
            np.testing.assert_array_equal(
                getattr(got, t)[col], getattr(expect, t)[col].astype(getattr(got, t)[col].dtype)
            )
    pd.testing.assert_frame_equal(got.locations, expect.locations)
    pd.testing.assert_frame_equal(got.regions, expect.regions.astype({"line": np.int64}))
    pd.testing.assert_frame_equal(got.metrics, expect.metrics)
    assert got.comm_names == expect.comm_names
    assert {k: v.tolist() for k, v in got.comms.items()} == {0: [0, 1], 1: [], 2: [1, 0], 3: [0, 0], 4: [1, 1]}
    assert got.attrs["skipped_events"] == {}


def test_small_trace_hand_checked(small_trace):
    _, anchor = small_trace
    raw = decode(anchor, decoder="fast")
    p, c, t, m = raw.p2p_events, raw.coll_events, raw.thread_events, raw.metric_events
    # p2p kinds in stream order on location 0
    assert p["kind"][p["location"] == 0].tolist() == [
        P2P.SEND, P2P.IRECV_REQUEST, P2P.ISEND, P2P.REQUEST_TEST, P2P.IRECV, P2P.ISEND_COMPLETE, P2P.REQUEST_CANCELLED,
    ]  # fmt: skip
    # the Isend on the sub-communicator goes to comm-local rank 0, which is world rank 1
    isend = np.flatnonzero((p["location"] == 0) & (p["kind"] == P2P.ISEND))[0]
    assert p["comm"][isend] == SUB and raw.comms[SUB][p["peer"][isend]] == 1 and p["request"][isend] == 12
    assert comm_matrix(raw).tolist() == [[0, 1000 + 2048], [512, 0]]
    # requests: -1 where the record has none
    assert p["request"][(p["kind"] == P2P.SEND) | (p["kind"] == P2P.RECV)].tolist() == [-1, -1]
    # region events: location 0 has 18 (9 instances), its Enter(MPI_Send) is the second one
    r = raw.region_events
    assert (r["location"] == 0).sum() == 18 and r["region"][1] == SEND and r["region"][0] == MAIN
    assert p["pos"][0] == 2  # the send lies between Enter(MPI_Send) (index 1) and Leave(MPI_Send) (index 2)
    # collectives: ends carry op/comm/root/sizes; the broadcast root is comm-local 0
    ends = c["kind"] == CollEv.END
    assert c["op"][ends].tolist() == [CollectiveOp.ALLREDUCE, CollectiveOp.BCAST] * 2
    assert c["root"][ends].tolist() == [-1, 0, -1, 0]
    assert c["sent"][ends].tolist() == [8, 100, 8, 0] and c["received"][ends].tolist() == [8, 0, 8, 100]
    assert c["sent"][~ends].tolist() == [0, 0, 0, 0]
    assert (r["region"][c["pos"][c["location"] == 0] - 1] == [ALLRED, ALLRED, BCAST, BCAST]).all()
    assert c["comm"].tolist() == [WORLD] * 8
    # threads
    assert t["kind"][t["location"] == 0].tolist() == [
        ThreadEv.FORK, ThreadEv.TEAM_BEGIN, ThreadEv.TEAM_END, ThreadEv.JOIN, ThreadEv.CREATE, ThreadEv.WAIT,
    ]  # fmt: skip
    assert t["count"][t["kind"] == ThreadEv.FORK].tolist() == [2, 2]
    assert t["team"][t["kind"] == ThreadEv.TEAM_BEGIN].tolist() == [3, 3, 4, 4]
    # metrics: one row per member; the metric location's rows sit at pos = all region events before it
    assert m["value"][m["location"] == 0].tolist() == [100.0, 5.0, 900.0, 50.0]
    assert m["metric"][m["location"] == 4].tolist() == [2, 2, 2]
    assert (m["pos"][m["location"] == 4] == len(r["kind"])).all()
    assert m["pos"][m["location"] == 0].tolist() == [1, 1, 18, 18]
    np.testing.assert_allclose(r["time"][:2], [1.0, 1.1], rtol=0, atol=1e-9)


def test_trace_from_the_otf2_writer(tmp_path, engine):
    """Definitions as the otf2 package writes them: world ranks from COMM_LOCATIONS, threads within groups."""
    anchor = write_with_bindings(tmp_path / "bw")
    raw = decode(anchor, decoder=engine)
    raw.validate()
    loc = raw.locations
    assert loc["name"].tolist() == ["A master", "B master", "A thread 1", "B thread 1"]
    assert loc["process"].tolist() == [0, 1, 0, 1]  # A is world rank 0 although its group was defined second
    assert loc["thread"].tolist() == [0, 0, 1, 1]
    assert {k: v.tolist() for k, v in raw.comms.items()} == {0: [0, 1], 1: [1, 0]}
    np.testing.assert_array_equal(comm_matrix(raw), [[0, 300], [0, 0]])
    assert raw.attrs["timer_resolution"] == 1000 and raw.attrs["global_offset"] == 10
    np.testing.assert_allclose(raw.p2p_events["time"][:3], [0.011, 0.021, 0.031])
    assert raw.metric_events["value"].tolist() == [1000.0, 2000.0, 5000.0, 7000.0]
    assert raw.metric_events["pos"].tolist() == [1, 1, 7, 7]
    assert raw.regions.loc[0].tolist() == ["main", "function", "user", "x.c", 3, ""]
    if engine == "fast":
        assert_same_tables(decode(anchor, decoder="bindings"), raw)


def test_generated_mpi_trace_engines_identical(tmp_path, fast_path):
    """The benchmark generator's trace (64 ranks would be slow with bindings: use 8) with metrics."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from make_otf2_trace import make_trace

    anchor = make_trace(str(tmp_path / "gen"), 20_000, ranks=8, metrics=True, chunk=64)
    fast = decode(anchor, decoder="fast", jobs=2)
    fast.validate()
    assert fast.n_events > 19_000
    assert_same_tables(decode(anchor, decoder="bindings"), fast)
    assert set(np.unique(fast.coll_events["op"])) == {CollectiveOp.ALLREDUCE, CollectiveOp.BCAST}
    # every blocking send has a receive of the same size on its partner
    p = fast.p2p_events
    assert p["bytes"][p["kind"] == P2P.SEND].sum() == p["bytes"][p["kind"] == P2P.RECV].sum()


def test_wrong_declared_event_counts_spill(tmp_path, fast_path):
    """A location with more events than its definition declares still decodes completely (spill path)."""
    from perflow.codecs.otf2.archive import ArchiveWriter
    from perflow.writers import otf2 as w

    raw = small_raw()
    real_close = ArchiveWriter.close

    def lying_close(self, *args, **kwargs):
        self.n_events = {k: 1 for k in self.n_events}  # declare 1 event per location
        return real_close(self, *args, **kwargs)

    ArchiveWriter.close = lying_close
    try:
        anchor = w.write_otf2(raw, tmp_path / "lying")
    finally:
        ArchiveWriter.close = real_close
    assert_same_tables(decode(anchor, decoder="bindings"), decode(anchor, decoder="fast", jobs=2))
    assert len(decode(anchor, decoder="fast", jobs=0).region_events["time"]) == len(raw.region_events["time"])


def test_auto_engine(small_trace, monkeypatch, caplog):
    _, anchor = small_trace
    assert fast_available()
    assert decode(anchor).attrs["decoder"] == "fast"
    import perflow.readers.otf2._decode as d

    monkeypatch.setattr(d, "fast_available", lambda: False)
    with caplog.at_level(logging.WARNING, logger="perflow.readers.otf2"):
        raw = decode(anchor)
    assert raw.attrs["decoder"] == "bindings"
    assert "fast OTF2 decoder unavailable" in caplog.text


def test_decode_accepts_directory_and_rejects_bad_arguments(small_trace):
    raw, anchor = small_trace
    assert decode(anchor.parent, decoder="fast").n_events == raw.n_events
    with pytest.raises(ValueError, match="decoder must be one of"):
        decode(anchor, decoder="turbo")
    with pytest.raises(ValueError, match="jobs must be"):
        decode(anchor, jobs=-1)


def test_is_otf2(small_trace, tmp_path, otf2_sample):
    _, anchor = small_trace
    assert is_otf2(anchor) and is_otf2(anchor.parent) and is_otf2(otf2_sample("ping-pong"))
    (tmp_path / "x.otf2").write_text("hello")
    assert not is_otf2(tmp_path / "x.otf2")
    assert not is_otf2(tmp_path / "missing.otf2")
    assert not is_otf2(anchor.parent / "traces.def")
    assert not is_otf2(tmp_path)  # several candidates or none


def test_reader_registry_hooks(otf2_sample):
    """perflow.read / read_otf2 / format detection use this package's detect() and read()."""
    import perflow
    from perflow.readers import detect_format

    p = otf2_sample("ping-pong")
    # the directory is a Score-P experiment (scorep.cfg): read as its trace, format "scorep" (see test_scorep_folder.py)
    assert detect_format(p) == "scorep" and detect_format(p / "traces.otf2") == "otf2"
    pag = perflow.read_otf2(p, jobs=1)
    assert pag.attrs["format"] == "otf2"
    assert pag.n_vertices > 1 and "bytes_sent" in pag.metrics
    assert pag.metrics["bytes_sent"].sum() == 2 * 4177920
