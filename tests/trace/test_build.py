"""From events to a PAG: metrics, messages, collectives, samples, metric events, errors."""

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow import CollectiveOp, TraceBuilder
from perflow.errors import TraceError
from perflow.pag.edges import collective_wait, late_sender_wait


def critical_path_example() -> perflow.PAG:
    """The issue's worked example: P0 compute[0,4] Send[4,5] post[5,6]; P1 compute[0,1] Recv[1,5.5] post[5.5,9]."""
    tb = TraceBuilder()
    tb.call(0, "compute", 0, 4)
    tb.call(0, "MPI_Send", 4, 5, send={"to": 1, "bytes": 8})
    tb.call(0, "post", 5, 6)
    tb.call(1, "compute", 0, 1)
    tb.call(1, "MPI_Recv", 1, 5.5, recv={"frm": 0, "bytes": 8})
    tb.call(1, "post", 5.5, 9)
    return tb.build()


def test_metrics_from_intervals():
    pag = critical_path_example()
    m = pag.metrics
    cp = pag.vertex("compute").id
    assert m.loc[(cp, 0, 0), "time_exc"] == 4 and m.loc[(cp, 1, 0), "time_exc"] == 1
    assert pag.aggregate("visits").tolist() == [2, 1, 2, 1]
    assert pag.vertex("MPI_Send").value("bytes_sent") == 8
    assert pag.vertex("MPI_Recv").value("bytes_recv") == 8
    assert pag.trace.span == (0.0, 9.0)


def test_nested_exclusive_time_and_call_paths():
    tb = TraceBuilder()
    with tb.region(0, "main", 0, 10):
        with tb.region(0, "solve", 1, 9):
            tb.call(0, "kernel", 2, 5)
            tb.call(0, "kernel", 6, 7)
        tb.call(0, "kernel", 9, 10)  # same region, other call path
    pag = tb.build()
    paths = pag.call_paths().tolist()
    assert paths == ["main", "main/solve", "main/solve/kernel", "main/kernel"]
    m = pag.metrics.droplevel(["process", "thread"])
    assert m["time_inc"].tolist() == [10, 8, 4, 1]
    assert m["time_exc"].tolist() == [1, 4, 4, 1]
    assert m["visits"].tolist() == [1, 1, 2, 1]


def test_late_sender_wait_of_the_worked_example():
    tb = TraceBuilder()
    tb.call(0, "MPI_Send", 5, 6, send={"to": 1})
    tb.call(1, "MPI_Recv", 2, 7, recv={"frm": 0})
    pag = tb.build()
    assert late_sender_wait(pag.trace).tolist() == [3.0]
    e = pag.parallel.edges.filter(kind="p2p").to_frame()
    assert e[["src_process", "dst_process", "count", "wait"]].values.tolist() == [[0, 1, 1, 3.0]]


def test_fifo_matching_with_tags_wildcards_and_request_reuse():
    tb = TraceBuilder()
    # rank 0 sends three messages to rank 1: tags 5, 7, 5 (bytes tell them apart)
    tb.call(0, "MPI_Send", 0, 1, send={"to": 1, "tag": 5, "bytes": 100})
    tb.call(0, "MPI_Send", 1, 2, send={"to": 1, "tag": 7, "bytes": 200})
    tb.enter(0, 2, "MPI_Isend")
    tb.isend(0, 2.5, 1, request=9, tag=5, bytes=300)
    tb.leave(0, 3)
    tb.enter(0, 3, "MPI_Wait")
    tb.isend_complete(0, 3.5, request=9)
    tb.leave(0, 4)
    # rank 1 posts two irecvs reusing no ids, then one blocking receive with tag 7
    tb.enter(1, 0, "MPI_Irecv")
    tb.irecv_request(1, 0.1, request=1)
    tb.leave(1, 0.2)
    tb.enter(1, 0.3, "MPI_Irecv")
    tb.irecv_request(1, 0.4, request=2)
    tb.leave(1, 0.5)
    tb.call(1, "MPI_Recv", 0.6, 2.5, recv={"frm": 0, "tag": 7, "bytes": 200})
    tb.enter(1, 5, "MPI_Waitall")
    # completions recorded in the other order: request 2 first; both from rank 0 with tag 5
    tb.irecv(1, 5.1, 0, request=2, tag=5, bytes=300)
    tb.irecv(1, 5.2, 0, request=1, tag=5, bytes=100)
    tb.leave(1, 6)
    pag = tb.build()
    msg = pag.trace.messages.sort_values("send_time")
    # FIFO in posting order: the first tag-5 message goes to the first posted irecv (request 1)
    assert msg["bytes"].tolist() == [100, 200, 300]
    assert msg["recv_time"].tolist() == [5.2, 2.5, 5.1]
    iv = pag.trace.intervals
    names = pag.vertex_table["name"].astype(str).to_numpy()

    def where(col):
        return [names[iv["vertex"].iat[i]] if i >= 0 else None for i in msg[col]]

    assert where("send_interval") == ["MPI_Send", "MPI_Send", "MPI_Isend"]
    assert where("send_complete_interval") == ["MPI_Send", "MPI_Send", "MPI_Wait"]
    assert where("recv_post_interval") == ["MPI_Irecv", "MPI_Recv", "MPI_Irecv"]
    assert where("recv_interval") == ["MPI_Waitall", "MPI_Recv", "MPI_Waitall"]
    assert msg["mode"].tolist() == [0, 0, 2]
    assert pag.attrs["unmatched_sends"] == 0 and pag.attrs["unmatched_recvs"] == 0


def test_sub_communicator_ranks_translate_to_world_ranks():
    tb = TraceBuilder(nprocs=4)
    tb.comm(3, [1, 3], "odd")  # comm-local rank 0 is world 1, rank 1 is world 3
    tb.call(1, "MPI_Send", 0, 1, send={"to": 1, "comm": 3, "bytes": 4})
    tb.call(3, "MPI_Recv", 0, 2, recv={"frm": 0, "comm": 3, "bytes": 4})
    for p in (1, 3):
        tb.call(p, "MPI_Bcast", 3, 4, coll={"root": 1, "bytes": 8, "comm": 3})
    pag = tb.build()
    msg = pag.trace.messages
    assert msg[["send_process", "recv_process", "comm"]].values.tolist() == [[1, 3, 3]]
    c = pag.trace.collectives
    assert c["root"].tolist() == [3, 3] and c["op"].tolist() == [CollectiveOp.BCAST] * 2


def test_rank_outside_communicator_is_an_error():
    tb = TraceBuilder(nprocs=2)
    tb.comm(2, [0, 1])
    tb.call(0, "MPI_Send", 0, 1, send={"to": 5, "comm": 2})
    with pytest.raises(TraceError, match="rank 5 is outside communicator 2"):
        tb.build()


def _violating() -> TraceBuilder:
    tb = TraceBuilder()
    tb.call(0, "MPI_Send", 5, 6, send={"to": 1})
    tb.call(1, "MPI_Recv", 1, 3, recv={"frm": 0})  # completes before the send was issued
    return tb


def test_clock_condition_violation_is_flagged_and_not_used():
    pag = _violating().build(clock_correction="off")
    assert pag.trace.messages["clock_violation"].tolist() == [True]
    assert pag.attrs["clock_violations"] == 1
    assert late_sender_wait(pag.trace).tolist() == [0.0]


def test_clock_condition_violation_is_corrected_by_default(caplog):
    pag = _violating().build()
    assert pag.trace.messages["clock_violation"].tolist() == [False]
    assert pag.attrs["clock_correction"]["violations"] == 1
    assert "corrected 1 clock-condition violations" in caplog.text


def test_unmatched_messages_are_counted():
    tb = TraceBuilder()
    tb.call(0, "MPI_Send", 0, 1, send={"to": 1})
    tb.call(0, "MPI_Send", 1, 2, send={"to": 1})
    tb.call(1, "MPI_Recv", 0, 3, recv={"frm": 0})
    pag = tb.build()
    assert len(pag.trace.messages) == 1
    assert pag.attrs["unmatched_sends"] == 1 and pag.attrs["unmatched_recvs"] == 0


def test_barrier_worked_example_waits():
    tb = TraceBuilder()
    for p, (enter, leave) in enumerate([(1, 6.5), (3, 6.6), (6, 7.0)]):
        tb.call(p, "MPI_Barrier", enter, leave, coll={})
    pag = tb.build()
    c = pag.trace.collectives
    assert c["instance"].nunique() == 1 and c["op"].tolist() == [CollectiveOp.BARRIER] * 3
    assert collective_wait(pag.trace).tolist() == [5.0, 3.0, 0.0]
    edges = pag.parallel.edges.filter(kind="collective").to_frame()
    assert edges["src_process"].unique().tolist() == [2]  # from the last arriver
    assert sorted(edges["wait"].tolist()) == [3.0, 5.0]


def test_zero_byte_data_collective_is_no_synchronisation_point():
    tb = TraceBuilder()
    for p, e in enumerate([1, 5]):
        tb.call(p, "MPI_Allreduce", e, 6, coll={"bytes": 0})
    assert collective_wait(tb.build().trace).tolist() == [0.0, 0.0]


def test_collective_instances_group_by_occurrence():
    tb = TraceBuilder()
    for p in range(3):
        tb.call(p, "MPI_Allreduce", 0, 1, coll={"bytes": 8})
        tb.call(p, "MPI_Allreduce", 2 + p, 5, coll={"bytes": 8})
    c = tb.build().trace.collectives
    assert c.groupby("instance")["process"].apply(list).tolist() == [[0, 1, 2], [0, 1, 2]]
    assert c.groupby("instance")["begin"].max().tolist() == [0, 4]


def test_init_and_finalize_become_world_barriers():
    tb = TraceBuilder()
    for p, t in enumerate([0.0, 0.5]):
        tb.call(p, "MPI_Init", t, 1)
        tb.call(p, "MPI_Finalize", 2, 3)
    c = tb.build().trace.collectives
    assert sorted(c["op"].unique().tolist()) == [CollectiveOp.INIT, CollectiveOp.FINALIZE]
    assert c["instance"].nunique() == 2 and (c["comm"] == 0).all()


def test_infer_collectives_for_sources_without_events():
    tb = TraceBuilder()
    for p in range(2):
        tb.call(p, "MPI_Barrier", p, 3)
    assert len(tb.build().trace.collectives) == 0
    c = tb.build(infer_collectives=True).trace.collectives
    assert c["instance"].tolist() == [0, 0] and c["op"].tolist() == [CollectiveOp.BARRIER] * 2


def test_samples_extend_the_tree_and_move_exclusive_time():
    tb = TraceBuilder()
    with tb.region(0, "main", 0, 10):
        tb.sample(0, 1, ["solve", "dot"], 0.5)
        tb.sample(0, 2, ["solve", "dot"], 0.5)
        tb.sample(0, 3, ["solve"], 0.5)
    pag = tb.build()
    assert pag.call_paths().tolist() == ["main", "main/solve", "main/solve/dot"]
    m = pag.metrics.droplevel(["process", "thread"])
    # dot's two samples cover [0.5, 1] and [1.5, 2]: one piece [0.5, 2] (the gap between them is dot's too);
    # solve's covers [2.5, 3]
    assert m["time_inc"].tolist() == [10, 2.0, 1.5]
    assert m["time_exc"].tolist() == [8.0, 0.5, 1.5]
    assert m["samples"].tolist() == [0, 1, 2]
    assert m["visits"].tolist() == [1, 1, 1]


def test_metric_events_give_inclusive_deltas():
    tb = TraceBuilder()
    tb.enter(0, 0, "main")
    tb.metric(0, 0, "cycles", 100)
    tb.enter(0, 1, "kernel")
    tb.metric(0, 1, "cycles", 150)
    tb.metric(0, 4, "cycles", 450)
    tb.leave(0, 4)
    tb.metric(0, 5, "cycles", 500)
    tb.leave(0, 5)
    pag = tb.build()
    assert pag.metrics["cycles"].tolist() == [400.0, 300.0]
    assert pag.metric_info["cycles"].mode == "inclusive"


def test_unbalanced_events_give_a_clear_error():
    tb = TraceBuilder()
    tb.enter(0, 0, "main")
    tb.enter(0, 1, "solve")
    tb.leave(0, 2)
    with pytest.raises(TraceError, match="location 0: Enter events without a Leave .* truncated"):
        tb.build()
    pag = tb.build(close_open=True)
    assert pag.attrs["closed_open_instances"] == 1
    assert pag.metrics["time_inc"].tolist() == [2.0, 1.0]


def test_mismatched_leave_names_the_event():
    raw = perflow.RawTrace(
        locations=pd.DataFrame({"process": [0]}),
        regions=pd.DataFrame({"name": ["a", "b"]}),
        region_events={"location": [0, 0], "time": [0.0, 1.0], "kind": [0, 1], "region": [0, 1]},
        attrs={"source": "x.otf2"},
    )
    with pytest.raises(
        TraceError,
        match=r"x.otf2: location 0, region event 1 of the location at t=1.000000000: a Leave whose region differs.*'b'",
    ):
        perflow.build_pag(raw)


def test_raw_trace_contract_violations():
    raw = perflow.RawTrace(
        locations=pd.DataFrame({"process": [0]}),
        regions=pd.DataFrame({"name": ["a"]}),
        region_events={"location": [0, 0], "time": [2.0, 1.0], "kind": [0, 1], "region": [0, 0]},
    )
    with pytest.raises(TraceError, match="time goes backwards on location 0"):
        perflow.build_pag(raw)
    with pytest.raises(TraceError, match="lacks column 'region'"):
        perflow.RawTrace(locations=None, regions=None, region_events={"location": [], "time": [], "kind": []})


def test_synthetic_is_deterministic_and_has_the_documented_shape():
    a = perflow.synthetic.raw_trace(nprocs=4, iterations=5, seed=3, late_sender=0.3)
    b = perflow.synthetic.raw_trace(nprocs=4, iterations=5, seed=3, late_sender=0.3)
    c = perflow.synthetic.raw_trace(nprocs=4, iterations=5, seed=4, late_sender=0.3)
    assert a.n_events == 4 * (6 + 28 * 5)
    np.testing.assert_array_equal(a.region_events["time"], b.region_events["time"])
    assert not np.array_equal(a.region_events["time"], c.region_events["time"])
    a.validate()
    pag = perflow.build_pag(a)
    assert len(pag.trace.messages) == 4 * 5 * 2
    assert pag.attrs["unmatched_sends"] == 0 and pag.attrs["clock_violations"] == 0
    assert pag.trace.collectives["instance"].nunique() == 5 + 2  # allreduces + init + finalize


def test_synthetic_slow_rank_and_late_senders_show_up():
    pag = perflow.synthetic.trace(nprocs=6, iterations=20, slow_rank=4, slow_factor=3.0, noise=0.0)
    comp = pag.vertex("main/timestep/compute").metrics["time_exc"]
    assert comp.idxmax()[0] == 4
    assert comp.max() == pytest.approx(3 * comp.min())
    # rank 4's ring neighbours wait for its halo messages and so arrive last at the allreduce
    coll = pag.parallel.edges.filter(kind="collective").to_frame()
    assert set(coll.loc[coll["src_name"] == "MPI_Allreduce", "src_process"]) <= {3, 5}
    c = pag.trace.collectives.assign(wait=collective_wait(pag.trace))
    wait = c[c["op"] == CollectiveOp.ALLREDUCE].groupby("process")["wait"].sum()
    assert wait[[0, 1, 2]].min() > 10 * wait[[3, 4, 5]].max()
    late = perflow.synthetic.trace(nprocs=6, iterations=30, late_sender=0.2, noise=0.0, seed=2)
    w = late_sender_wait(late.trace)
    assert (w > 1e-3).sum() >= 2 * late.attrs["late_instances"] * 0.5


def test_region_call_stacks_and_samples_share_synthetic_vertices():
    """A recorder knows who called an MPI function: the region's `stack` places it below those frames."""
    regions = pd.DataFrame(
        {
            "name": ["prog", "MPI_Send", "main", "solve", "kernel"],
            "paradigm": ["user", "mpi", "user", "user", "user"],
            "stack": [-1, 0, -1, -1, -1],
        }
    )
    stacks = pd.DataFrame(
        {"stack": [0, 0, 1, 1, 1, 2], "depth": [0, 1, 0, 1, 2, 0], "region": [2, 3, 2, 3, 4, 2]}
    )  # 0: main/solve, 1: main/solve/kernel, 2: main
    raw = perflow.RawTrace(
        locations=pd.DataFrame({"process": [0]}),
        regions=regions,
        stacks=stacks,
        region_events={
            "location": [0, 0, 0, 0],
            "time": [0.0, 2.0, 3.0, 10.0],
            "kind": [0, 0, 1, 1],
            "region": [0, 1, 1, 0],
        },
        sample_events={"location": [0, 0], "time": [5.0, 6.0], "stack": [1, 2], "weight": [1.0, 0.5], "pos": [3, 3]},
    )
    pag = perflow.build_pag(raw)
    paths = pag.call_paths().tolist()
    m = pag.metrics.droplevel(["process", "thread"])
    got = {paths[v]: (m.loc[v, "time_inc"], m.loc[v, "time_exc"], m.loc[v, "visits"]) for v in range(pag.n_vertices)}
    # the samples' pieces (kernel over [4, 5], main over [5.5, 6]) are instances: one visit each
    assert got == {
        "prog": (10.0, 7.5, 1),
        "prog/main": (2.5, 0.5, 1),
        "prog/main/solve": (2.0, 0.0, 0),
        "prog/main/solve/MPI_Send": (1.0, 1.0, 1),
        "prog/main/solve/kernel": (1.0, 1.0, 1),
    }
    # the instance tables keep the measured nesting: the MPI_Send instance's and the pieces' parent is prog
    iv = pag.trace.intervals
    assert iv["parent"].tolist() == [-1, 0, 0, 0]
    assert [paths[v] for v in iv["vertex"]] == [
        "prog",
        "prog/main/solve/MPI_Send",
        "prog/main/solve/kernel",
        "prog/main",
    ]
    assert iv["enter"].tolist() == [0.0, 2.0, 4.0, 5.5] and iv["leave"].tolist() == [10.0, 3.0, 5.0, 6.0]
    assert iv["samples"].tolist() == [0, 0, 1, 1]


@pytest.mark.parametrize("jobs", [2, 3, 5])
def test_partitions_built_at_once_give_the_same_pag(jobs: int) -> None:
    """build_pag cuts a trace into partitions of consecutive processes run in threads: same PAG as one partition."""
    from perflow.synthetic import raw_trace

    raw = raw_trace(nprocs=7, iterations=6, late_sender=0.3, imbalance=0.4, slow_rank=3, seed=jobs)
    one, many = perflow.build_pag(raw, jobs=1), perflow.build_pag(raw, jobs=jobs)
    pd.testing.assert_frame_equal(many.vertex_table, one.vertex_table)
    pd.testing.assert_frame_equal(many.metrics, one.metrics, check_exact=True)
    for t in ("intervals", "messages", "collectives"):
        pd.testing.assert_frame_equal(getattr(many.trace, t), getattr(one.trace, t), check_exact=True)
    assert many.attrs == one.attrs


def test_stack_frames_that_are_recorded_call_paths_are_those_vertices() -> None:
    """A region on one location whose call stack is a call path recorded on another (a GPU kernel and the
    host calls that launched it) hangs below that call path's vertex, not below a copy of it."""
    regions = pd.DataFrame(
        {"name": ["main", "launch", "kernel"], "paradigm": ["user", "cuda", "cuda"], "stack": [-1, -1, 0]}
    )
    stacks = pd.DataFrame({"stack": [0, 0], "depth": [0, 1], "region": [0, 1]})  # main/launch
    raw = perflow.RawTrace(
        locations=pd.DataFrame({"process": [0, 0], "thread": [0, 1], "type": ["cpu", "gpu"]}),
        regions=regions,
        stacks=stacks,
        region_events={
            "location": [0, 0, 0, 0, 1, 1, 1, 1],
            "time": [0.0, 1.0, 2.0, 10.0, 2.0, 5.0, 6.0, 7.0],
            "kind": [0, 0, 1, 1, 0, 1, 0, 1],
            "region": [0, 1, 1, 0, 2, 2, 2, 2],
        },
    )
    for jobs in (1, 2):
        pag = perflow.build_pag(raw, jobs=jobs)
        assert sorted(pag.call_paths()) == ["main", "main/launch", "main/launch/kernel"]
        m = pag.metrics
        main, launch, kernel = (pag.vertex(p).id for p in ("main", "main/launch", "main/launch/kernel"))
        # on the GPU location the host frames carry the kernels' 4 s as inclusive time, no visits
        assert m.loc[(launch, 0, 1), ["time_inc", "time_exc", "visits"]].tolist() == [4.0, 0.0, 0.0]
        assert m.loc[(main, 0, 1), ["time_inc", "visits"]].tolist() == [4.0, 0.0]
        assert m.loc[(launch, 0, 0), ["time_inc", "visits"]].tolist() == [1.0, 1.0]
        assert m.loc[(kernel, 0, 1), ["time_exc", "visits"]].tolist() == [4.0, 2.0]
        assert pag.trace.locations["type"].tolist() == ["cpu", "gpu"]
