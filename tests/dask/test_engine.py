"""Distributed results equal single-process results, on a LocalCluster of 2 in-process workers."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask", reason="the Dask engine needs the perflow[dask] extra (dask, distributed)")
pytest.importorskip("distributed", reason="the Dask engine needs the perflow[dask] extra (dask, distributed)")

from perflow.errors import FormatError, MetricError, PassError, TraceError  # noqa: E402
from perflow.pag.edges import collective_wait, late_sender_wait  # noqa: E402
from perflow.passes.comm import comm_matrix  # noqa: E402
from perflow.passes.imbalance import imbalance  # noqa: E402
from perflow.synthetic import raw_trace  # noqa: E402
from perflow.trace.build import build_pag  # noqa: E402
from perflow.trace.builder import TraceBuilder  # noqa: E402
from tests.conftest import shared  # noqa: E402

from .example_analysis import WAITS_BY_VERTEX  # noqa: E402


@pytest.fixture(scope="module")
def synthetic() -> tuple:
    raw = raw_trace(nprocs=12, iterations=15, slow_rank=5, late_sender=0.2, imbalance=0.5, seed=3)
    return raw, build_pag(raw)


def assert_same_pag(pag, ref) -> None:  # type: ignore[no-untyped-def]
    pd.testing.assert_frame_equal(pag.vertex_table, ref.vertex_table)
    pd.testing.assert_frame_equal(pag.metrics, ref.metrics, check_exact=True)
    for t in ("intervals", "messages", "collectives"):
        pd.testing.assert_frame_equal(getattr(pag.trace, t), getattr(ref.trace, t), check_exact=True)
    assert pag.metric_info == ref.metric_info
    assert pag.attrs == ref.attrs


def dense_ref(ref, metric: str, across: str) -> np.ndarray:  # type: ignore[no-untyped-def]
    """(vertex x group) matrix of a metric from the single-process PAG, independently of the engine's code."""
    m = ref.metrics.reset_index()
    if across == "process":
        m = m.groupby(["vertex", "process"], as_index=False)[metric].sum()
        groups = np.unique(m["process"])
        g = np.searchsorted(groups, m["process"])
    else:
        loc = ref.locations
        key = loc["process"].to_numpy() * 1000 + loc["thread"].to_numpy()
        g = np.searchsorted(key, m["process"].to_numpy() * 1000 + m["thread"].to_numpy())
        groups = key
    d = np.zeros((ref.n_vertices, len(groups)))
    d[m["vertex"].to_numpy(), g] = m[metric].to_numpy()
    return d


def test_pag_equals_single_process(engine, synthetic) -> None:  # type: ignore[no-untyped-def]
    raw, ref = synthetic
    dt = engine.load(raw)
    assert dt.n_parts == 2
    # a ring of 12 ranks cut into two arcs: 2 of 12 links cross, 2 x 15 messages each way on each
    assert dt.partitioning.cut == 2 * 2 * 15
    assert dt.summary()["exchanged_send_records"] == 2 * 2 * 15
    assert_same_pag(dt.to_pag(), ref)


def test_wait_states_equal_single_process(engine, synthetic) -> None:  # type: ignore[no-untyped-def]
    raw, ref = synthetic
    dt = engine.load(raw, partition="round_robin")  # every message crosses partitions
    assert dt.summary()["exchanged_send_records"] == len(ref.trace.messages)
    ls = late_sender_wait(ref.trace)
    assert (ls > 0).sum() > 10  # the injected late senders make receivers wait
    np.testing.assert_array_equal(dt.messages()["late_sender_wait"].to_numpy(), ls)
    cw = collective_wait(ref.trace)
    c = dt.collectives()
    np.testing.assert_array_equal(c["wait"].to_numpy(), cw)
    assert c.groupby("instance")["last"].sum().eq(1).all()
    # an analysis declared in one file of the tests runs on the workers, with no change to perflow.dask
    pag = dt.pag()
    wv = pag.analyses.get(WAITS_BY_VERTEX)
    assert pag.gathered == set()
    pd.testing.assert_frame_equal(wv, ref.analyses.get(WAITS_BY_VERTEX), rtol=1e-12)
    ivv = ref.trace.intervals["vertex"].to_numpy()
    exp_ls = np.bincount(ivv[ref.trace.messages["recv_interval"].to_numpy()], weights=ls, minlength=ref.n_vertices)
    exp_cw = np.bincount(ivv[ref.trace.collectives["interval"].to_numpy()], weights=cw, minlength=ref.n_vertices)
    np.testing.assert_allclose(wv["late_sender"].to_numpy(), exp_ls, rtol=1e-12)
    np.testing.assert_allclose(wv["collective_wait"].to_numpy(), exp_cw, rtol=1e-12)
    assert wv.loc[wv["late_sender"].idxmax(), "name"] == "MPI_Waitall"
    assert wv.loc[wv["collective_wait"].idxmax(), "name"] == "MPI_Allreduce"


def test_aggregates_and_imbalance_from_partials(engine, synthetic) -> None:  # type: ignore[no-untyped-def]
    raw, ref = synthetic
    dt = engine.load(raw, n_partitions=3)  # more partitions than workers
    assert dt.metric_names == ref.metric_names
    for metric in ("time_exc", "time_inc", "visits", "bytes_sent"):
        scale = float(np.abs(ref.metrics[metric]).max())
        for agg in ("sum", "mean", "max", "min", "std", "count"):
            exp = ref.aggregate(metric, agg)
            got = dt.aggregate(metric, agg)
            assert got.name == exp.name
            if agg in ("max", "min", "count"):
                np.testing.assert_array_equal(got.to_numpy(), exp.to_numpy())
            else:  # sums are re-associated across partitions; std = sqrt(E[x^2] - mean^2) loses ~half the digits
                np.testing.assert_allclose(got.to_numpy(), exp.to_numpy(), rtol=1e-12, atol=1e-7 * scale)
    d = dense_ref(ref, "time_exc", "process")
    pag = dt.pag()
    imb = imbalance(pag, metric="time_exc").set_index("vertex")
    v = imb.index.to_numpy()
    np.testing.assert_allclose(imb["max"], d[v].max(axis=1), rtol=0)
    np.testing.assert_allclose(imb["mean"], d[v].mean(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(imb["max_process"], d[v].argmax(axis=1))
    np.testing.assert_allclose(imb["imbalance_time"], d[v].max(axis=1) - d[v].mean(axis=1), rtol=1e-9)
    assert imb["imbalance_time"].is_monotonic_decreasing
    comp = imb[imb["name"] == "compute"].iloc[0]
    assert comp["max_process"] == 5  # the slow rank
    assert comp["call_path"] == "main/timestep/compute"
    loc = imbalance(pag, metric="visits", across="location", criterion="load_balance")
    assert "max_thread" in loc.columns
    assert pag.gathered == set()  # statistics are combined from the partitions' partials
    with pytest.raises(MetricError, match="unknown metric 'tim'"):
        dt.aggregate("tim")
    with pytest.raises(PassError, match="unknown imbalance criterion"):
        imbalance(pag, criterion="worst")


def test_median_runs_on_gathered_data(engine, synthetic, caplog) -> None:  # type: ignore[no-untyped-def]
    raw, ref = synthetic
    dt = engine.load(raw)
    with caplog.at_level(logging.WARNING, logger="perflow.dask.lazy"):
        got = dt.aggregate("time_exc", "median")
    assert "median has no partitioned form" in caplog.text
    pd.testing.assert_series_equal(got, ref.aggregate("time_exc", "median"))


def test_comm_matrix(engine, synthetic) -> None:  # type: ignore[no-untyped-def]
    raw, ref = synthetic
    pag = engine.load(raw).pag()
    m = ref.trace.messages
    for metric in ("bytes", "count", "time"):
        got = comm_matrix(pag, metric=metric)
        pd.testing.assert_frame_equal(got, comm_matrix(ref, metric=metric), rtol=1e-12)
        P = 12
        w = {
            "bytes": m["bytes"].to_numpy(dtype=float),
            "count": np.ones(len(m)),
            "time": np.maximum(0.0, m["recv_time"].to_numpy() - m["send_time"].to_numpy()),
        }[metric]
        exp = np.bincount(m["send_process"] * P + m["recv_process"], weights=w, minlength=P * P).reshape(P, P)
        np.testing.assert_allclose(got.to_numpy(dtype=float), exp, rtol=1e-12)
        assert got.index.name == "sender" and got.columns.name == "receiver"
    # ring: rank 3 sends 15 messages of 4096 bytes to each neighbour
    assert comm_matrix(pag).loc[3, 4] == 15 * 4096
    assert pag.gathered == set()


def _fifo_trace() -> TraceBuilder:
    """Two senders, one receiver; same tags repeated (FIFO must decide), a wildcard-like receive order, a Ssend."""
    tb = TraceBuilder()
    for p in range(4):
        tb.enter(p, 0.0, "main")
    # rank 0 sends three messages with tag 7 to rank 2 at increasing times; rank 1 two with tag 7
    for i, t in enumerate((1.0, 2.0, 3.0)):
        tb.call(0, "MPI_Send", t, t + 0.1, send={"to": 2, "tag": 7, "bytes": 100 + i})
    for i, t in enumerate((1.5, 2.5)):
        tb.call(1, "MPI_Ssend", t, t + 0.1, send={"to": 2, "tag": 7, "bytes": 200 + i})
    # rank 2 receives them interleaved by source, late, in blocking receives
    for frm, t in ((1, 4.0), (0, 5.0), (0, 6.0), (1, 7.0), (0, 8.0)):
        tb.call(2, "MPI_Recv", t, t + 0.5, recv={"frm": frm, "tag": 7, "bytes": 0})
    # rank 3 posts a non-blocking receive from rank 0 that never gets a message (unmatched)
    tb.enter(3, 1.0, "MPI_Irecv")
    tb.irecv_request(3, 1.0, 5)
    tb.leave(3, 1.1)
    tb.enter(3, 2.0, "MPI_Wait")
    tb.irecv(3, 9.0, 0, 5, tag=9, bytes=8)
    tb.leave(3, 9.0)
    for p in range(4):  # a barrier that rank 3 enters last
        tb.call(p, "MPI_Barrier", 9.1 + 0.1 * p, 10.0, coll={"op": "barrier"})
        tb.leave(p, 11.0)
    return tb


def test_fifo_matching_across_partitions(engine) -> None:  # type: ignore[no-untyped-def]
    raw = _fifo_trace().raw()
    ref = build_pag(raw)
    # every sender in another partition than its receiver
    dt = engine.load(raw, partition=np.array([0, 1, 2, 0]), n_partitions=3)
    assert dt.n_parts == 3
    pag = dt.to_pag()
    assert_same_pag(pag, ref)
    m = pag.trace.messages
    # the k-th receive from a source gets that source's k-th send
    got = m.sort_values("recv_time")[["send_process", "bytes"]].to_numpy().tolist()
    assert got == [[1, 200], [0, 100], [0, 101], [1, 201], [0, 102]]
    assert m.loc[m["send_process"] == 1, "mode"].tolist() == [1, 1]  # inside MPI_Ssend: synchronous
    assert pag.attrs["unmatched_recvs"] == 1 and pag.attrs["unmatched_sends"] == 0
    np.testing.assert_array_equal(dt.messages()["late_sender_wait"].to_numpy(), late_sender_wait(ref.trace))
    np.testing.assert_array_equal(dt.collectives()["wait"].to_numpy(), collective_wait(ref.trace))
    np.testing.assert_allclose(dt.collectives()["wait"].to_numpy(), [0.3, 0.2, 0.1, 0.0], rtol=1e-12)


def test_otf2_ingest_on_workers(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from perflow.readers.otf2 import decode, fast_available
    from perflow.writers.otf2 import write_otf2

    if not fast_available():
        pytest.skip("the fast OTF2 decoder (numba, llvmlite, otf2 C library) is not available")
    raw = raw_trace(nprocs=6, iterations=8, late_sender=0.3, imbalance=0.4, seed=5)
    anchor = write_otf2(raw, tmp_path / "run")
    ref = build_pag(decode(anchor, jobs=0))
    dt = engine.load(tmp_path / "run", scout_events=40)
    # the scouted prefix (about one iteration) found the ring: two arcs, 2 of 6 links cut
    assert dt.partitioning.assign.tolist() in ([0, 0, 0, 1, 1, 1], [1, 1, 1, 0, 0, 0])
    assert dt.summary()["exchanged_send_records"] == 2 * 2 * 8
    assert set(dt.timings) >= {"scout", "ingest", "scan", "match"}
    assert_same_pag(dt.to_pag(), ref)
    np.testing.assert_array_equal(dt.messages()["late_sender_wait"].to_numpy(), late_sender_wait(ref.trace))


def test_scorep_openmp_trace_loads_on_the_workers_as_here(engine) -> None:  # type: ignore[no-untyped-def]
    """Score-P 8's ProgramBegin opens an artificial program region that no definition declares (id 253 here):
    every partition and the client must have the region table of the whole archive's read."""
    from perflow.readers.otf2 import decode, fast_available

    if not fast_available():
        pytest.skip("the fast OTF2 decoder (numba, llvmlite, otf2 C library) is not available")
    anchor = shared("scorep-scalasca", "omp_imbalance", "traces.otf2")  # 2 ranks x 2 OpenMP threads
    raw = decode(anchor)
    ref = build_pag(raw)
    dt = engine.load(anchor)
    assert dt.n_parts == 2
    pd.testing.assert_frame_equal(dt.defs.regions, raw.regions)
    assert dt.defs.regions["name"].iloc[-1] == raw.regions["name"].iloc[-1] == "omp_imbalance"
    assert_same_pag(dt.to_pag(), ref)


def test_uncorrected_clock_violations_are_counted_and_logged(engine, synthetic, caplog) -> None:  # type: ignore[no-untyped-def]
    from perflow.trace import clc

    raw = clc.skew_clock(synthetic[0], 5, -0.05)  # rank 5's clock 50 ms early: its messages arrive before sent
    ref = build_pag(raw, clock_correction="off")
    n_msg = int(ref.trace.messages["clock_violation"].sum())
    n_coll = clc.built_violations(ref.trace) - n_msg
    assert n_msg > 0 and n_coll > 0
    with caplog.at_level(logging.WARNING, logger="perflow.dask.dtrace"):
        dt = engine.load(raw)
    assert dt.clock_violations == dt.summary()["clock_violations"] == {"messages": n_msg, "collectives": n_coll}
    assert f"{n_msg + n_coll} clock-condition violations ({n_msg} messages" in caplog.text
    assert "the Dask engine does no clock correction (clock_correction='auto')" in caplog.text
    caplog.clear()
    with clc.clock_correction("off"), caplog.at_level(logging.WARNING, logger="perflow.dask.dtrace"):
        engine.load(raw)
    assert "clock" not in caplog.text


def test_errors(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tb = TraceBuilder()
    tb.enter(0, 0.0, "main")
    tb.leave(0, 1.0)
    tb.enter(1, 0.0, "main")
    raw = tb.raw()
    with pytest.raises(TraceError, match="location 1: Enter events without a Leave"):
        engine.load(raw)
    ok = engine.load(raw, close_open=True).to_pag()
    assert ok.attrs["closed_open_instances"] == 1
    with pytest.raises(FormatError, match="nothing"):
        engine.load(tmp_path / "nothing")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "traces.otf2").write_bytes(b"\x03\x42OTF2\x00" + b"\x00" * 40)
    with pytest.raises(FormatError, match="traces.def: global definitions file of the archive is missing"):
        engine.load(bad)


def test_corrupt_event_file_fails_on_the_worker_with_one_clear_error(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from perflow.readers.otf2 import fast_available
    from perflow.writers.otf2 import write_otf2

    if not fast_available():
        pytest.skip("the fast OTF2 decoder (numba, llvmlite, otf2 C library) is not available")
    write_otf2(raw_trace(nprocs=4, iterations=30, seed=1), tmp_path / "run")
    evt = tmp_path / "run" / "traces" / "2.evt"
    data = evt.read_bytes()
    evt.write_bytes(data[: len(data) // 2] + b"\xff" * 64)
    with pytest.raises(FormatError, match=r"2\.evt"):
        engine.load(tmp_path / "run", scout_events=0)


def _threads_metrics_comms() -> TraceBuilder:
    """Two threads per process, a counter metric, a sub-communicator with a rooted collective, MPI_Init."""
    tb = TraceBuilder(nprocs=4)
    tb.comm(5, [3, 1], "pair")  # comm rank 0 = world 3, comm rank 1 = world 1
    for p in range(4):
        tb.enter(p, 0.0, "main")
        tb.call(p, "MPI_Init", 0.0, 0.3 + 0.1 * p)
        tb.enter(p, 0.6, "worker", thread=1)
        tb.metric(p, 0.7, "PAPI_TOT_INS", 1000.0 * p)
        with tb.region(p, "compute", 0.7, 1.0 + 0.2 * p):
            tb.metric(p, 0.8, "PAPI_TOT_INS", 1000.0 * p + 50 * (p + 1))
        tb.metric(p, 1.5, "PAPI_TOT_INS", 1000.0 * p + 80 * (p + 1))
    # thread 1 of rank 0 sends to thread 1 of rank 2 (message peers are processes)
    tb.call(0, "MPI_Send", 1.0, 1.1, send={"to": 2, "tag": 3, "bytes": 64}, thread=1)
    tb.call(2, "MPI_Recv", 0.9, 1.4, recv={"frm": 0, "tag": 3, "bytes": 64}, thread=1)
    # a Bcast on the pair communicator rooted at its rank 0 (world 3); rank 1 enters first and waits
    tb.call(1, "MPI_Bcast", 1.5, 2.0, coll={"root": 0, "sent": 0, "received": 32, "comm": 5})
    tb.call(3, "MPI_Bcast", 1.8, 2.0, coll={"root": 0, "sent": 32, "received": 0, "comm": 5})
    for p in range(4):
        tb.leave(p, 2.5, thread=1)
        tb.leave(p, 3.0)
    return tb


def test_threads_metrics_subcommunicators_and_an_empty_partition(engine) -> None:  # type: ignore[no-untyped-def]
    raw = _threads_metrics_comms().raw()
    for infer in (False, True):
        ref = build_pag(raw, infer_collectives=infer)
        assert "PAPI_TOT_INS" in ref.metric_names and len(ref.trace.messages) == 1
        # partition 1 of 3 is empty; the message and the Bcast cross partitions
        dt = engine.load(raw, partition=np.array([0, 2, 2, 0]), infer_collectives=infer)
        assert dt.n_parts == 3
        assert_same_pag(dt.to_pag(), ref)
        np.testing.assert_array_equal(dt.collectives()["wait"].to_numpy(), collective_wait(ref.trace))
    c = ref.trace.collectives
    bcast = c[c["op"] == 1]
    assert bcast["root"].tolist() == [3, 3]  # the communicator-local root translated to the world rank


def test_posting_order_follows_the_single_process_rule(engine) -> None:  # type: ignore[no-untyped-def]
    """Send events out of time order on one location: stream order decides without threads, time with threads."""
    for threads in (False, True):
        tb = TraceBuilder(nprocs=2)
        for p in range(2):
            tb.enter(p, 0.0, "main")
        tb.enter(0, 1.0, "MPI_Send")
        tb.send(0, 3.0, 1, tag=1, bytes=10)  # recorded first, stamped later
        tb.send(0, 2.0, 1, tag=1, bytes=20)
        tb.leave(0, 4.0)
        if threads:
            tb.enter(0, 1.0, "helper", thread=1)
            tb.send(0, 1.5, 1, tag=2, bytes=30, thread=1)
            tb.leave(0, 2.0, thread=1)
        for t in (5.0, 6.0):
            tb.call(1, "MPI_Recv", t, t + 0.5, recv={"frm": 0, "tag": 1, "bytes": 0})
        if threads:
            tb.call(1, "MPI_Recv", 7.0, 7.5, recv={"frm": 0, "tag": 2, "bytes": 0})
        for p in range(2):
            tb.leave(p, 9.0)
        raw = tb.raw()
        ref = build_pag(raw, validate=False)
        dt = engine.load(raw, validate=False, partition="round_robin")
        assert_same_pag(dt.to_pag(), ref)
        first = ref.trace.messages.sort_values("recv_time")["bytes"].iloc[0]
        assert first == (20 if threads else 10)


def _sampled_and_stacked() -> TraceBuilder:
    """A recording-like trace: MPI calls under recorded call stacks, and timer samples of user code."""
    tb = TraceBuilder(nprocs=4)
    # call stacks of the code that called MPI (as perflow record resolves them): main -> halo -> MPI_Send
    for p in range(4):
        tb.enter(p, 0.0, "main")
        for it in range(3):
            t = 1.0 + 3 * it
            w = 2.0 if p == 1 else 1.0  # rank 1 computes twice as long
            # a sample covers the `weight` seconds before its time stamp (within the stretch it fell in)
            tb.sample(p, t + 0.4 * w, ["timestep", "solve"], 0.4 * w)
            tb.sample(p, t + 0.6 * w, ["timestep", "solve", "dot"], 0.2 * w)
            if p == 2:
                tb.sample(p, t + 0.7, ["timestep", "io"], 0.1)
            tb.call(p, "MPI_Allreduce", t + w, t + 2.5, coll={"bytes": 8}, stack=["timestep", "reduce"])
            nb = (p + 1) % 4
            tb.call(
                p, "MPI_Send", t + 2.6, t + 2.7, send={"to": nb, "tag": it, "bytes": 64}, stack=["timestep", "halo"]
            )
            tb.call(p, "MPI_Recv", t + 2.7, t + 2.9, recv={"frm": (p - 1) % 4, "tag": it, "bytes": 64},
                    stack=["timestep", "halo"])  # fmt: skip
        tb.leave(p, 12.0)
    return tb


def test_samples_and_call_stacks_go_through_the_partitions(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Recorder output (samples, region call stacks) builds on the workers into the single-process PAG."""
    from perflow.readers.otf2 import decode, fast_available
    from perflow.writers.otf2 import write_otf2

    raw = _sampled_and_stacked().raw()
    assert len(raw.sample_events["location"]) and "stack" in raw.regions.columns
    ref = build_pag(raw)
    assert {"solve", "dot", "halo", "reduce"} <= set(ref.vertex_table["name"].astype(str))
    for load in ({}, {"partition": "round_robin", "n_partitions": 4}, {"partition": np.array([0, 1, 1, 0])}):
        dt = engine.load(raw, **load)
        assert_same_pag(dt.to_pag(), ref)
    if fast_available():  # from OTF2, each worker decoding its locations: their samples' stacks come along
        anchor = write_otf2(raw, tmp_path / "run")
        assert_same_pag(engine.load(anchor).to_pag(), build_pag(decode(anchor)))
    # rank 1 spent twice as long in solve: the sampled time says so
    solve = ref.vertex("main/timestep/solve").id
    t = ref.metrics.xs(solve, level="vertex")["time_inc"]
    assert t.loc[(1, 0)] == pytest.approx(2 * t.loc[(0, 0)])
    # the samples' pieces are interval rows, numbered the same on the workers
    assert (ref.trace.intervals["samples"] > 0).sum() == 4 * 3 * 2 + 3


def test_sample_pieces_of_a_larger_trace_go_through_the_partitions(engine) -> None:  # type: ignore[no-untyped-def]
    """Samples in the gaps of a 6-rank trace: any partitioning gives the single-process intervals and metrics."""
    from tests.trace.test_pieces import _with_samples

    raw = _with_samples(raw_trace(nprocs=6, iterations=4, late_sender=0.3, imbalance=0.4, slow_rank=2, seed=5), 5)
    ref = build_pag(raw)
    assert (ref.trace.intervals["samples"] > 0).sum() > 20
    for load in ({"partition": "round_robin", "n_partitions": 3}, {"partition": np.array([1, 0, 1, 0, 0, 1])}):
        assert_same_pag(engine.load(raw, **load).to_pag(), ref)


def test_bench_dask_measures_what_the_local_engine_computes(engine, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """benchmarks/bench_dask.py keeps working (issue 28): its measurement of the Dask engine on a small OTF2
    trace runs, its figures are there, and its results equal the local engine's."""
    import sys

    import perflow
    from tests.conftest import REPO

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_dask
        from make_otf2_trace import make_trace
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    make_trace(str(tmp_path / "t"), 6000, 4)
    fns = bench_dask._passes()
    pag = perflow.read(tmp_path / "t")
    local = bench_dask._results({name: f(pag) for name, f in fns.items()})
    out = bench_dask.measure(engine, str(tmp_path / "t"), fns, keep=True)
    assert bench_dask._same(out["results"], local) == []
    assert set(out["times"]) == {"load", *fns} and out["events"] > 0
    assert len(out["worker_cpu"]) == 2 and out["phases"] and out["forms"], out
