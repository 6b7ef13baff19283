"""The what-if replay: worked examples with hand-computed runtimes, protocols, scenarios, errors, properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perflow
from perflow import synthetic
from perflow.errors import PassError
from perflow.passes.whatif import what_if
from perflow.trace.builder import TraceBuilder


def _if(pag, *scenarios, **kw):
    """Predicted runtime per scenario."""
    t = what_if(pag, scenarios=list(scenarios), **kw)["what_if"]
    return dict(zip(t["scenario"], t["runtime_if [s]"]))


def overlapping(barrier: float = 0.0):
    """Rank 0 runs slow_a for 3 s, rank 1 slow_b for 2 s, at the same time, before a barrier (which takes
    ``barrier`` s after the last arrival); T = 5."""
    tb = TraceBuilder(nprocs=2)
    b = 4 + barrier
    with tb.region(0, "main", 0, 5):
        tb.call(0, "work", 0, 1)
        tb.call(0, "slow_a", 1, 4)
        tb.call(0, "MPI_Barrier", 4, b, coll={"op": "barrier"})
        tb.call(0, "post", b, 5)
    with tb.region(1, "main", 0, 5):
        tb.call(1, "work", 0, 1)
        tb.call(1, "slow_b", 1, 3)
        tb.call(1, "MPI_Barrier", 3, b, coll={"op": "barrier"})
        tb.call(1, "post", b, 5)
    return tb.build()


def test_removing_the_slower_of_two_overlapping_functions_saves_their_difference():
    pag = overlapping()
    t = what_if(pag, function="slow_a", scale=0)["what_if"].iloc[0]
    # slow_a takes 3 s, but rank 1 still needs its 2 s of slow_b before the barrier: 5 -> 4, not 5 - 3 = 2
    assert (t["runtime [s]"], t["runtime_if [s]"], t["gain [s]"], t["gain [%]"]) == (5.0, 4.0, 1.0, 20.0)
    assert t["path_ranks"].startswith("1 (75%)") and t["path_functions"].startswith("slow_b (50%)")
    got = _if(pag, "slow_b=0", "slow_a=0 & slow_b=0", "slow_a=balance", "slow_a=0.5", "slow_a@1=0")
    # slow_b is hidden behind slow_a; both gone: 2; slow_a balanced over the two ranks: 1.5 s on rank 0
    assert got == {"slow_b=0": 5.0, "slow_a=0 & slow_b=0": 2.0, "slow_a=balance": 4.0, "slow_a=0.5": 4.0,
                   "slow_a@1=0": 5.0}  # fmt: skip


def pipeline():
    """Rank 0 produces three items (2 s each) and sends each; rank 1 receives and consumes each (1 s); T = 7."""
    tb = TraceBuilder(nprocs=2)
    with tb.region(0, "main", 0, 6):
        for k in range(3):
            tb.call(0, "produce", 2 * k, 2 * k + 2)
            tb.call(0, "MPI_Send", 2 * k + 2, 2 * k + 2, send={"to": 1, "bytes": 8})
    with tb.region(1, "main", 0, 7):
        t = 0
        for k in range(3):
            tb.call(1, "MPI_Recv", t, 2 * k + 2, recv={"frm": 0, "bytes": 8})
            tb.call(1, "consume", 2 * k + 2, 2 * k + 3)
            t = 2 * k + 3
    return tb.build()


def test_a_faster_producer_saves_until_the_consumer_sets_the_pace():
    got = _if(pipeline(), "produce=0.5", "produce=0.25", "produce=0", "consume=0", "consume=2")
    # produce at 1 s: items at 1, 2, 3, each consumed in 1 s -> 4; at 0.5 s: items at 0.5, 1, 1.5, but the
    # consumer takes 1 s each -> 0.5 + 3 = 3.5; produce gone: 3 (the consumer's work); consume gone: 6;
    # consume doubled: items at 2, 4, 6 -> 2 + 2 (wait for item 2 until 4) ... ends at 6 + 2 = 8
    assert got == {"produce=0.5": 4.0, "produce=0.25": 3.5, "produce=0": 3.0, "consume=0": 6.0, "consume=2": 8.0}
    paths = what_if(pipeline(), function="produce", scale=0)
    assert paths["what_if"]["path_ranks"].iloc[0] == "1 (100%)"
    p = paths["paths"]
    assert p["name"].tolist() == ["consume"] and p["cp_time [s]"].tolist() == [3.0]


def chain():
    """0 -> 1 -> 2: rank 0 runs a (3 s) and sends; rank 1 runs b (1 s), receives, runs c (2 s), sends; rank 2
    runs d (2 s), receives, runs e (1 s); T = 6."""
    tb = TraceBuilder(nprocs=3)
    with tb.region(0, "main", 0, 3):
        tb.call(0, "a", 0, 3)
        tb.call(0, "MPI_Send", 3, 3, send={"to": 1, "bytes": 8})
    with tb.region(1, "main", 0, 5):
        tb.call(1, "b", 0, 1)
        tb.call(1, "MPI_Recv", 1, 3, recv={"frm": 0, "bytes": 8})
        tb.call(1, "c", 3, 5)
        tb.call(1, "MPI_Send", 5, 5, send={"to": 2, "bytes": 8})
    with tb.region(2, "main", 0, 6):
        tb.call(2, "d", 0, 2)
        tb.call(2, "MPI_Recv", 2, 5, recv={"frm": 1, "bytes": 8})
        tb.call(2, "e", 5, 6)
    return tb.build()


def test_three_rank_chain():
    got = _if(chain(), "a=0", "c=0", "a=0 & c=0", "b=0", "d=10", "a@1=0", "e=3")
    # a gone: rank 1 still runs b (1 s) first -> c ends at 3, e at 4; c gone: 4; both: rank 2's d (2 s)
    # sets the pace -> 3; b is hidden (6); d at 20 s: 21; a on rank 1 does not exist there: 6; e tripled: 8
    assert got == {"a=0": 4.0, "c=0": 4.0, "a=0 & c=0": 3.0, "b=0": 6.0, "d=10": 21.0, "a@1=0": 6.0, "e=3": 8.0}
    t = what_if(chain(), function="a", scale=0)["what_if"].iloc[0]
    # the path: b and c on rank 1 (the message from rank 0 is no longer waited for), then e on rank 2
    assert t["path_ranks"] == "1 (75%), 2 (25%)" and t["path_functions"] == "c (50%), b (25%), e (25%)"


def collectives_only():
    """Three ranks, two allreduces, no message: w1 takes 1, 2, 3 s, w2 1, 3, 2 s; the second allreduce
    moves data for 0.5 s after the last arrival; T = 6.5."""
    tb = TraceBuilder(nprocs=3)
    for p, (w1, w2) in enumerate(((1, 1), (2, 3), (3, 2))):
        with tb.region(p, "main", 0, 6.5):
            tb.call(p, "w1", 0, w1)
            tb.call(p, "MPI_Allreduce", w1, 3, coll={"bytes": 8})
            tb.call(p, "w2", 3, 3 + w2)
            tb.call(p, "MPI_Allreduce", 3 + w2, 6.5, coll={"bytes": 8})
    return tb.build()


def test_collective_only_program():
    got = _if(collectives_only(), "w1@2=0", "w2=balance", "network=0", "w1=0 & w2=0", "w2@1=0.5", "w1@0=4")
    # w1 gone on rank 2: the first allreduce ends at 2 (rank 1), w2 ends at 3, 5, 4 -> 5 + 0.5;
    # w2 balanced (2 s each): 3 + 2 + 0.5; no transfer time: 6; no work: the 0.5 s transfer;
    # w2 halved on rank 1: ranks arrive at 4, 4.5, 5 -> 5.5; w1 of rank 0 at 4 s: 4 + 3 + 0.5
    assert got == {"w1@2=0": 5.5, "w2=balance": 5.5, "network=0": 6.0, "w1=0 & w2=0": 0.5, "w2@1=0.5": 5.5,
                   "w1@0=4": 7.5}  # fmt: skip


def late_receiver_trace(nbytes: int):
    """Rank 0 sends ``nbytes`` at 0; rank 1 computes late_work until 3.5, then receives (3.5 to 4); rank 0's
    MPI_Send returns at 4 (it waited for the receive: rendezvous). T = 6."""
    tb = TraceBuilder(nprocs=2)
    with tb.region(0, "main", 0, 6):
        tb.call(0, "MPI_Send", 0, 4, send={"to": 1, "bytes": nbytes})
        tb.call(0, "post", 4, 6)
    with tb.region(1, "main", 0, 5):
        tb.call(1, "late_work", 0, 3.5)
        tb.call(1, "MPI_Recv", 3.5, 4, recv={"frm": 0, "bytes": nbytes})
        tb.call(1, "post", 4, 5)
    return tb.build()


def test_rendezvous_sends_wait_for_their_receiver_eager_ones_do_not():
    pag = late_receiver_trace(16 << 20)
    # the send waited 3.5 s for the receive (rendezvous): without late_work it is posted at 0, the 0.5 s
    # transfer follows, rank 0 ends at 0.5 + 2 = 2.5
    assert _if(pag, "late_work=0") == {"late_work=0": 2.5}
    # taken as eager, the send's 4 s would be its own work: nothing to gain
    assert _if(pag, "late_work=0", late_receiver="none") == {"late_work=0": 6.0}
    # an eager send (it returned before the receive was posted) never waits for its receiver
    tb = TraceBuilder(nprocs=2)
    with tb.region(0, "main", 0, 2):
        tb.call(0, "MPI_Send", 0, 0.1, send={"to": 1, "bytes": 8})
        tb.call(0, "post", 0.1, 2)
    with tb.region(1, "main", 0, 2):
        tb.call(1, "late", 0, 1)
        tb.call(1, "MPI_Recv", 1, 1.1, recv={"frm": 0, "bytes": 8})
        tb.call(1, "post", 1.1, 2)
    got = _if(tb.build(), "late=3", late_receiver="blocking")
    assert got == {"late=3": 4.0}  # rank 1 ends at 3 + 0.1 + 0.9; rank 0 still at 2


def test_synchronous_send_and_protocol_inference_by_size():
    from perflow.trace.replaydeps import protocol_evidence, rendezvous_limit

    tb = TraceBuilder(nprocs=2)
    with tb.region(0, "main", 0, 6):
        tb.call(0, "MPI_Ssend", 0, 4, send={"to": 1, "bytes": 8, "sync": True})
        tb.call(0, "post", 4, 6)
    with tb.region(1, "main", 0, 5):
        tb.call(1, "late_work", 0, 3.5)
        tb.call(1, "MPI_Recv", 3.5, 4, recv={"frm": 0, "bytes": 8})
        tb.call(1, "post", 4, 5)
    assert _if(tb.build(), "late_work=0") == {"late_work=0": 2.5}  # a synchronous send always waits
    m = {"bytes": np.array([8, 64, 4096, 1 << 20, 1 << 20]), "mode": np.zeros(5, np.int8)}
    import pandas as pd

    # 8 and 64 bytes returned before their receive was posted; 1 MiB waited; 4096 says nothing
    ev = protocol_evidence(pd.DataFrame(m), np.array([0, 0, 0, 0, 0.0]), np.array([1, 1, 1, 5, 5.0]),
                           np.array([2, 2, 0, 4, 4.5]))  # fmt: skip
    assert ev[0] == 64 and ev[1].tolist() == [1 << 20]
    assert rendezvous_limit([ev]) == (1 << 20) - 1
    assert rendezvous_limit([(64, np.zeros(0, np.int64))], eager_limit=65536) == 65536
    assert rendezvous_limit([(1 << 17, np.array([4096]))]) == 1 << 17  # sizes at or below an eager one stay eager


def test_scenario_forms_and_defaults():
    pag = overlapping()
    t = what_if(pag, function="slow_a", scale=[0, 0.5, 1])["what_if"]
    assert t["scenario"].tolist() == ["slow_a=0", "slow_a=0.5", "slow_a=1"]
    assert t["runtime_if [s]"].tolist() == [4.0, 4.0, 5.0]
    d = what_if(pag, scenarios=[{"function": "slow_a", "processes": [0], "scale": 0}, [{"network": 0}]])
    assert d["what_if"]["runtime_if [s]"].tolist() == [4.0, 5.0]
    t = what_if(pag, function="main/slow_a", scale=0, network=0)["what_if"]
    assert t["scenario"].tolist() == ["main/slow_a=0 & network=0"] and t["runtime_if [s]"].iloc[0] == 4.0
    assert what_if(pag, function="slow_*", scale=0)["what_if"]["runtime_if [s]"].iloc[0] == 2.0
    # nothing asked: an ideal network and the functions with the most time balanced and removed
    d = what_if(pag)["what_if"]
    assert d["scenario"].iloc[0].startswith("ideal network")
    assert {"slow_a=balance", "slow_a=0", "slow_b=0", "work=0", "post=0"} <= set(d["scenario"])
    assert d.attrs["replayed_runtime"] == 5.0 and "Replayed without changes: 5 s" in d.attrs["note"]


def test_callees_count_with_their_function():
    tb = TraceBuilder(nprocs=2)
    for p, inner in ((0, 3.0), (1, 1.0)):
        with tb.region(p, "main", 0, 5):
            with tb.region(p, "solve", 0, 1 + inner):
                tb.call(p, "kernel", 1, 1 + inner)
            tb.call(p, "MPI_Barrier", 1 + inner, 4, coll={"op": "barrier"})
            tb.call(p, "post", 4, 5)
    pag = tb.build()
    # solve with its callee kernel gone: 1 s; solve's own second only: rank 0 arrives at 3
    assert _if(pag, "solve=0") == {"solve=0": 1.0}
    assert _if(pag, "solve=0", callees=False) == {"solve=0": 4.0}


def test_window_and_region_of_interest():
    pag = pipeline()
    t = what_if(pag, function="produce", scale=0, window=[0, 4])["what_if"].iloc[0]
    # only the work recorded inside [0, 4] is replayed: rank 1's first consume (rank 0's work is gone)
    assert t["runtime [s]"] == 4.0 and t["runtime_if [s]"] == 1.0


def test_a_run_without_communication():
    tb = TraceBuilder(nprocs=1)
    tb.call(0, "a", 0, 2)
    tb.call(0, "b", 2, 3)
    t = what_if(tb.build(), function="a", scale=0.5)["what_if"].iloc[0]
    assert (t["runtime_if [s]"], t["path_functions"], t["path_ranks"]) == (2.0, "a (50%), b (50%)", "0 (100%)")


def test_errors_name_the_setting():
    pag = overlapping()
    with pytest.raises(
        PassError, match="function='slow' matches no call path or name; names containing it: slow_a, slow_b"
    ):
        what_if(pag, function="slow")
    with pytest.raises(PassError, match="scale=-1 must be a number >= 0 or 'balance'"):
        what_if(pag, function="slow_a", scale=-1)
    with pytest.raises(PassError, match="scale='fast' is neither a number nor 'balance'"):
        what_if(pag, function="slow_a", scale="fast")
    with pytest.raises(PassError, match=r"processes \[7\] are not in the trace \(it has 0-1\)"):
        what_if(pag, function="slow_a", processes=[7])
    with pytest.raises(PassError, match="'x-2' is not a rank or range"):
        what_if(pag, function="slow_a", processes="x-2")
    with pytest.raises(PassError, match="is not FUNCTION"):
        what_if(pag, scenarios=["slow_a"])
    with pytest.raises(PassError, match="unknown key"):
        what_if(pag, scenarios=[{"function": "slow_a", "speed": 2}])
    with pytest.raises(PassError, match="processes=1 needs a function"):
        what_if(pag, processes=1)
    with pytest.raises(PassError, match="needs a trace-backed PAG"):
        what_if(perflow.synthetic.profile(4, 2))
    with pytest.raises(PassError, match="late_receiver='maybe'"):
        what_if(pag, function="slow_a", late_receiver="maybe")


def test_flow_runs_and_reports():
    r = perflow.run("what_if", pag=overlapping())
    r.raise_for_status()
    assert "# perflow what-if" in r["report"] and "ideal network" in r["report"]
    flow = perflow.load_flow("what_if")
    flow.set("what_if.function", "slow_a")
    flow.set("what_if.scale", 0)
    r = perflow.run(flow, pag=overlapping())
    assert r["what_if"]["gain [s]"].tolist() == [1.0]


def test_findings_carry_their_gain():
    from perflow.passes.critical_path import critical_path_imbalance
    from perflow.passes.delay import root_cause
    from perflow.passes.pop import pop_metrics

    pag = overlapping(barrier=0.1)
    c = root_cause(pag)["causes"].set_index("name")
    # rank 1 waits 1 s at the barrier for slow_a; balancing slow_a (1.5 s per rank) saves that second
    assert c.loc["slow_a", "total"] == 1.0 and c.loc["slow_a", "gain [s]"] == pytest.approx(1.0)
    assert list(root_cause(pag)["causes"].columns[7:9]) == ["percent", "gain [s]"]
    imb = critical_path_imbalance(pag).set_index("name")
    # the critical-path imbalance says 1.5 (3 s on the path, 1.5 on average); the replay knows that rank 1's
    # slow_b (2 s) then sets the pace: 1
    assert imb.loc["slow_a", "cpi"] == 1.5 and imb.loc["slow_a", "gain [s]"] == pytest.approx(1.0)
    pop = pop_metrics(pag).set_index("metric")["gain [s]"]
    # useful time 4.9 and 3.9 s, balanced at 4.4: rank 0 arrives at 4 * 4.4 / 4.9, the barrier's 0.1 s, then
    # rank 1's post (0.9 * 4.4 / 3.9); with an ideal network without the 0.1 s; the network alone: 0.1 s
    u0, u1 = 4.4 / 4.9, 4.4 / 3.9
    assert pop["load_balance"] == pytest.approx(5 - (4 * u0 + 0.1 + 0.9 * u1))
    assert pop["parallel_efficiency"] == pytest.approx(5 - (4 * u0 + 0.9 * u1))
    assert pop["transfer_efficiency"] == pytest.approx(0.1) and pop["communication_efficiency"] == pytest.approx(0.1)
    assert np.isnan(pop["serialisation_efficiency"]) and np.isnan(pop["runtime"])
    assert np.isnan(root_cause(pag, gains=0)["causes"]["gain [s]"]).all()
    with pytest.raises(PassError, match="sort='size' is not one of 'total', 'gain'"):
        root_cause(pag, sort="size")


def test_sort_by_gain_ranks_what_saves_most_first():
    from perflow.passes.critical_path import critical_path_imbalance
    from perflow.passes.delay import root_cause

    pag = chain()
    by_total = root_cause(pag)["causes"]
    by_gain = root_cause(pag, sort="gain")["causes"]
    assert sorted(by_gain["gain [s]"].dropna(), reverse=True) == by_gain["gain [s]"].dropna().tolist()
    assert set(by_total["name"]) == set(by_gain["name"])
    g = critical_path_imbalance(pag, sort="gain")["gain [s]"].to_numpy()
    assert (np.diff(g[~np.isnan(g)]) <= 0).all()


def test_the_replayed_critical_path_is_the_critical_path():
    import pandas as pd

    from perflow.passes._whatif import Scenario, predict
    from perflow.passes.critical_path import critical_path

    pag = synthetic.trace(nprocs=5, iterations=6, seed=3, late_sender=0.3, imbalance=0.5)
    prof = critical_path(pag, path_ends="trace")["profile"]  # the replay's path runs to the end of the trace
    p = predict(pag, [Scenario(())], pag.trace.span, "test", settings="blocking")[0]
    names = [*pag.vertex_table["name"].astype(str), "<outside regions>"]
    got = pd.Series(p.path.by_vertex).groupby(names).sum()
    # nothing changed, the sends waiting as the wait states say: the path of the replay is the wait states' one
    # (the replay also counts the time before the path's first location starts, outside every region)
    for name, cp in zip(prof["name"].astype(str), prof["cp_time"], strict=True):
        assert got.get(name, 0.0) == pytest.approx(cp, abs=1e-12), name
    assert got.sum() == pytest.approx(p.runtime)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), nprocs=st.integers(2, 6), late=st.floats(0.0, 1.0),
       imbalance=st.floats(0.0, 2.0), factor=st.floats(0.0, 1.0))  # fmt: skip
def test_replay_reproduces_the_run_and_never_slows_down_when_work_shrinks(seed, nprocs, late, imbalance, factor):
    pag = synthetic.trace(nprocs=nprocs, iterations=4, seed=seed, late_sender=late, imbalance=imbalance)
    t = what_if(pag, scenarios=["compute=1", f"compute={factor}", f"network={factor}", "compute=balance"],
                late_receiver="blocking")["what_if"]  # fmt: skip
    T = t["runtime [s]"].iloc[0]
    eps = 1e-9 * T
    assert abs(t["runtime_if [s]"].iloc[0] - T) <= eps  # nothing changed: the recorded runtime
    assert t["runtime_if [s]"].iloc[1] <= T + eps and t["runtime_if [s]"].iloc[2] <= T + eps
    assert np.isfinite(t["runtime_if [s]"]).all() and (t["runtime_if [s]"] > 0).all()
