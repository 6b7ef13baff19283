"""Distributed wait-state instances and the wait-state passes on the Dask engine equal the single-process ones."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed", reason="the Dask engine needs the perflow[dask] extra (dask, distributed)")

from perflow.synthetic import raw_trace  # noqa: E402
from perflow.trace.analyses import WAIT_INSTANCES  # noqa: E402
from perflow.trace.build import build_pag  # noqa: E402
from perflow.trace.builder import TraceBuilder  # noqa: E402
from perflow.trace.waits import wait_instances  # noqa: E402

SETTINGS = (
    {},
    {"window": 0},
    {"late_receiver": "synchronous", "early_reduce": "earliest"},
    {"late_receiver": "none"},
)

#: the wait-state passes and the settings of theirs that reach the wait-state table
WAIT_PASSES = {
    "wait_states": ("wrong_order_window", "late_receiver", "early_reduce"),
    "p2p_wait_states": ("wrong_order_window", "late_receiver"),
    "late_sender": ("wrong_order_window",),
    "wait_state_summary": (),
    "collective_wait_states": ("early_reduce",),
    "collective_waits_by_operation": ("early_reduce",),
}


def dist_waits(dt, window: int = 100, **settings):  # type: ignore[no-untyped-def]
    """The wait-state table of a distributed trace, computed on the workers (its partitioned program)."""
    return dt.pag().analyses.get(WAIT_INSTANCES, wrong_order_window=window, **settings)


def _wait_kinds_trace() -> TraceBuilder:
    """Six ranks showing every wait-state kind (see the timeline in the comments)."""
    tb = TraceBuilder(nprocs=6)
    tb.comm(5, [2, 0, 1], "scan")
    for p in range(6):
        tb.enter(p, 0.0, "main")
    # wrong order, same source: P0 sends tag 1 early and tag 2 late, P2 receives tag 2 first
    tb.call(0, "MPI_Send", 2, 3, send={"to": 2, "tag": 1, "bytes": 8})
    tb.call(0, "MPI_Send", 10, 11, send={"to": 2, "tag": 2, "bytes": 8})
    tb.call(2, "MPI_Recv", 1, 11.5, recv={"frm": 0, "tag": 2, "bytes": 8})
    tb.call(2, "MPI_Recv", 11.5, 12, recv={"frm": 0, "tag": 1, "bytes": 8})
    # wrong order, different sources: P3 sends late, P4 early; P5 receives from P3 first
    tb.call(4, "MPI_Send", 2, 3, send={"to": 5, "bytes": 8})
    tb.call(3, "MPI_Send", 10, 11, send={"to": 5, "bytes": 8})
    tb.call(5, "MPI_Recv", 1, 11.5, recv={"frm": 3, "bytes": 8})
    tb.call(5, "MPI_Recv", 11.5, 12, recv={"frm": 4, "bytes": 8})
    # late receiver: P1's MPI_Ssend waits for P0 to post its receive
    tb.call(1, "MPI_Ssend", 13, 17, send={"to": 0, "bytes": 8, "sync": True})
    tb.call(0, "MPI_Recv", 16, 17, recv={"frm": 1, "bytes": 8})
    # a Waitall on P2 completing two late messages from P3 and P4
    for p, t in ((3, 14.0), (4, 16.0)):
        with tb.region(p, "MPI_Isend", t, t + 0.5):
            tb.isend(p, t, to=2, request=1, bytes=8)
        with tb.region(p, "MPI_Wait", t + 0.5, t + 1):
            tb.isend_complete(p, t + 1, request=1)
    for req, t in ((7, 13.0), (8, 13.5)):
        with tb.region(2, "MPI_Irecv", t, t + 0.5):
            tb.irecv_request(2, t, request=req)
    with tb.region(2, "MPI_Waitall", 14, 20):
        tb.irecv(2, 20, frm=3, request=7, bytes=8)
        tb.irecv(2, 20, frm=4, request=8, bytes=8)
    # a completion inside MPI_Testall (no wait) on P5, from P1
    with tb.region(1, "MPI_Isend", 17.5, 18):
        tb.isend(1, 17.5, to=5, request=3, bytes=8)
    with tb.region(1, "MPI_Wait", 18, 18.5):
        tb.isend_complete(1, 18.5, request=3)
    with tb.region(5, "MPI_Irecv", 13, 13.5):
        tb.irecv_request(5, 13, request=9)
    with tb.region(5, "MPI_Testall", 18.6, 19):
        tb.irecv(5, 19, frm=1, request=9, bytes=8)
    # a clock violation: P1's receive completes before P4's send starts
    tb.call(1, "MPI_Recv", 18.6, 18.8, recv={"frm": 4, "bytes": 8})
    tb.call(4, "MPI_Send", 19, 19.5, send={"to": 1, "bytes": 8})
    # collectives: late broadcast (root 0), early reduce (root 1), early scan on comm 5, a barrier
    bcast = {0: 23, 1: 21, 2: 21.5, 3: 22, 4: 21, 5: 22.5}
    reduce = {0: 25, 1: 24, 2: 26, 3: 25.5, 4: 26.5, 5: 25.2}
    barrier = {0: 31, 1: 30, 2: 30.5, 3: 31.5, 4: 30.2, 5: 30.8}
    scan = {0: 28, 1: 27.5, 2: 28.5}
    for p in range(6):
        tb.call(p, "MPI_Bcast", bcast[p], 24, coll={"root": 0, "bytes": 8})
        tb.call(p, "MPI_Reduce", reduce[p], 27, coll={"root": 1, "bytes": 8})
        if p in scan:
            tb.call(p, "MPI_Scan", scan[p], 29, coll={"bytes": 8, "comm": 5})
        tb.call(p, "MPI_Barrier", barrier[p], 32, coll={"op": "barrier"})
        tb.leave(p, 40)
    return tb


def test_every_wait_kind_equals_single_process(engine) -> None:  # type: ignore[no-untyped-def]
    raw = _wait_kinds_trace().raw()
    ref = build_pag(raw, clock_correction="off")  # the engine does not correct clocks: its violation stays
    names = ref.vertex_table["name"].astype(str).to_numpy()
    kinds = set(wait_instances(ref.trace, names)["kind"].astype(str))
    assert kinds >= {
        "late_sender", "late_sender_completion", "late_sender_wrong_order_same", "late_sender_wrong_order_diff",
        "late_receiver", "late_broadcast", "early_reduce", "early_scan", "wait_barrier",
    }  # fmt: skip
    # every rank in its own partition (all messages and collectives cross), and 3 partitions over 2 workers
    for load in ({"partition": "round_robin", "n_partitions": 6}, {"partition": "round_robin", "n_partitions": 3}):
        dt = engine.load(raw, **load)
        for settings in SETTINGS:
            exp = wait_instances(ref.trace, names, **settings)
            waited = dt.runtime.round_trips
            got = dist_waits(dt, **settings)
            assert dt.runtime.round_trips == waited + 1  # one graph (partition traces included), one wait
            pd.testing.assert_frame_equal(got, exp, check_exact=True)
            assert got.attrs == exp.attrs == {"clock_violations": 1, "unattributed_messages": 0, "test_completions": 1}
    # worked numbers: the Waitall waits once for the later of its two senders (P4 enters at 16)
    got = dist_waits(dt)
    ls = got[(got["kind"] == "late_sender") & (got["process"] == 2)]
    assert ls["amount"].max() == 16.0 - 14.0 and ls.loc[ls["amount"].idxmax(), "cause_process"] == 4
    lr = got[got["kind"] == "late_receiver"]
    assert lr["amount"].tolist() == [3.0] and lr["process"].tolist() == [1]  # the Ssend at 13, the receive at 16


def test_synthetic_wait_states_equal_single_process(engine) -> None:  # type: ignore[no-untyped-def]
    raw = raw_trace(nprocs=10, iterations=12, slow_rank=4, late_sender=0.3, imbalance=0.3, seed=7)
    ref = build_pag(raw)
    names = ref.vertex_table["name"].astype(str).to_numpy()
    dt = engine.load(raw, n_partitions=3)
    exp = wait_instances(ref.trace, names)
    assert {"late_sender", "wait_nxn"} <= set(exp["kind"].astype(str))
    pd.testing.assert_frame_equal(dist_waits(dt), exp, check_exact=True)


def test_wait_states_fetched_in_chunks(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A large trace's wait tables come back a few partitions at a time (here: one), equal all the same."""
    from perflow.trace import waitparts

    raw = _wait_kinds_trace().raw()
    ref = build_pag(raw, clock_correction="off")
    names = ref.vertex_table["name"].astype(str).to_numpy()
    monkeypatch.setattr(waitparts, "GATHER_AT_ONCE_EVENTS", 0)
    monkeypatch.setattr(waitparts, "CHUNK_ROWS", 1)
    dt = engine.load(raw, partition="round_robin", n_partitions=6)
    waited = dt.runtime.round_trips
    got = dist_waits(dt)
    exp = wait_instances(ref.trace, names)
    pd.testing.assert_frame_equal(got, exp, check_exact=True)
    assert got.attrs == exp.attrs
    # the tables' sizes, then one fetch per partition with wait states
    assert dt.runtime.round_trips == waited + 1 + int(exp["process"].nunique())


def test_wait_state_passes_run_without_gathering_the_trace(engine) -> None:  # type: ignore[no-untyped-def]
    from perflow.flow.registry import get_pass

    specs = {name: get_pass(name) for name in WAIT_PASSES}
    raw = _wait_kinds_trace().raw()
    ref = build_pag(raw, clock_correction="off")  # the engine does not correct clocks: its violation stays
    pag = engine.load(raw, partition="round_robin").pag()
    for name, spec in sorted(specs.items(), key=lambda kv: kv[0] == "wait_state_summary"):  # the gathering one last
        for settings in ({}, {"early_reduce": "earliest"} if "early_reduce" in WAIT_PASSES[name] else {}):
            got, exp = spec.func(pag, **settings), spec.func(ref, **settings)
            pd.testing.assert_frame_equal(got, exp, check_exact=True, check_categorical=False)
        if name != "wait_state_summary":  # it also counts locations, which reads the intervals
            assert "trace" not in pag.gathered, name
    assert any("trace.wait_instances (program)" in k for k in pag.dist.timings)
    with pytest.raises(Exception, match="late_receiver='sometimes'"):
        specs["wait_states"].func(pag, late_receiver="sometimes")


def test_errors(engine) -> None:  # type: ignore[no-untyped-def]
    from perflow.errors import PerflowError

    dt = engine.load(raw_trace(nprocs=3, iterations=2))
    with pytest.raises(PerflowError, match="setting early_reduce='never' is not one of 'latest', 'earliest'"):
        dist_waits(dt, early_reduce="never")
    with pytest.raises(PerflowError, match="wrong_order_window must be >= 0, got -1"):
        dist_waits(dt, window=-1)
    assert np.isfinite(dt.span()).all()


def _no_gather(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Gathering a distributed trace's instance tables (or its messages, collectives) to the client raises."""
    from perflow.dask.dtrace import DistTrace

    def refuse(self, *a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("the trace was gathered to the client")

    for name in ("trace_tables", "messages", "collectives", "to_pag"):
        monkeypatch.setattr(DistTrace, name, refuse)


def _assert_same_path(got, exp) -> None:  # type: ignore[no-untyped-def]
    pd.testing.assert_frame_equal(got.segments, exp.segments, check_exact=True)
    pd.testing.assert_frame_equal(got.hops, exp.hops, check_exact=True)
    assert np.array_equal(got.cp_time, exp.cp_time)
    assert (got.outside, got.start, got.end) == (exp.outside, exp.start, exp.end)


def test_critical_path_and_pop_run_on_the_partitions(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from perflow.passes.critical_path import critical_path
    from perflow.passes.pop import pop_metrics
    from perflow.trace.analyses import CRITICAL_PATH

    raw = raw_trace(nprocs=10, iterations=12, slow_rank=4, late_sender=0.3, imbalance=0.3, seed=7)
    ref = build_pag(raw)
    pag = engine.load(raw, n_partitions=3).pag()
    _no_gather(monkeypatch)
    for settings in ({}, {"path_ends": "trace", "late_receiver": "synchronous"}):
        _assert_same_path(pag.analyses.get(CRITICAL_PATH, **settings), ref.analyses.get(CRITICAL_PATH, **settings))
    got, exp = critical_path(pag), critical_path(ref)
    pd.testing.assert_frame_equal(got["segments"], exp["segments"], check_exact=True)
    # exclusive times are summed per partition: equal to rounding
    pd.testing.assert_frame_equal(got["profile"], exp["profile"], check_exact=False, rtol=1e-12)
    pd.testing.assert_frame_equal(got["summary"], exp["summary"], check_exact=False, rtol=1e-12)
    pd.testing.assert_frame_equal(pop_metrics(pag), pop_metrics(ref), check_exact=False, rtol=1e-12)
    pd.testing.assert_frame_equal(pop_metrics(pag, region="main"), pop_metrics(ref, region="main"), rtol=1e-12)
    forms = " ".join(pag.dist.timings)
    for a in ("critical_path", "replay_plan", "exclusive_by_vertex", "vertex_spans", "location_keys"):
        assert f"trace.{a} (program)" in forms, a
    assert "trace" not in pag.gathered
