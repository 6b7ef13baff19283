"""Root-cause (delay) analysis: worked examples, synchronisation intervals, long-term propagation, synthetic slow rank."""

from __future__ import annotations

import pytest

import perflow.passes  # noqa: F401
from perflow import synthetic
from perflow.errors import PassError
from perflow.passes.delay import root_cause
from perflow.trace.builder import TraceBuilder


def _costs(t, prop=None):
    bp = t["by_process"]
    col = "total" if prop is None else ("propagating" if prop else "cost")
    return {(int(p), str(n)): round(c, 9) for p, n, c in zip(bp["process"], bp["name"], bp[col]) if c > 1e-12}


def test_worked_example():
    # P0 compute[0,4] then Send at 4; P1 compute[0,1] then Recv[1,5.5]: compute on P0 costs 3
    tb = TraceBuilder()
    tb.call(0, "compute", 0, 4)
    tb.call(0, "MPI_Send", 4, 4.5, send={"to": 1, "bytes": 8})
    tb.call(1, "compute", 0, 1)
    tb.call(1, "MPI_Recv", 1, 5.5, recv={"frm": 0, "bytes": 8})
    t = root_cause(tb.build())
    assert _costs(t) == {(0, "compute"): 3.0}
    c = t["causes"].iloc[0]
    assert (c["name"], c["cost"], c["percent"], c["top_process"]) == ("compute", 3.0, 100.0, 0)
    assert c["causes"] == "late_sender:3"
    s = t["summary"].iloc[0]
    assert (s["total_wait"], s["attributed"], s["unattributed"]) == (3.0, 3.0, 0.0)


def test_only_since_the_previous_synchronisation_point():
    # a barrier synchronises P0 and P1 at 11; the Late Sender after it only compares what came after
    tb = TraceBuilder()
    tb.call(0, "setup", 0, 10)
    tb.call(0, "MPI_Barrier", 10, 11, coll={})
    tb.call(0, "compute", 11, 15)
    tb.call(0, "MPI_Send", 15, 15.5, send={"to": 1, "bytes": 8})
    tb.call(1, "setup", 0, 2)
    tb.call(1, "MPI_Barrier", 2, 11, coll={})
    tb.call(1, "compute", 11, 12)
    tb.call(1, "MPI_Recv", 12, 16, recv={"frm": 0, "bytes": 8})
    t = root_cause(tb.build())
    assert _costs(t) == {(0, "compute"): 3.0, (0, "setup"): 8.0}
    kinds = dict(zip(t["causes"]["name"].astype(str), t["causes"]["causes"]))
    assert kinds == {"setup": "wait_barrier:8", "compute": "late_sender:3"}


def _chain():
    # P0 is slow; P1 waits for P0 (4 s) and then makes P2 wait (4.5 s)
    tb = TraceBuilder()
    tb.call(0, "compute", 0, 5)
    tb.call(0, "MPI_Send", 5, 5.5, send={"to": 1, "bytes": 8})
    tb.call(1, "compute", 0, 1)
    tb.call(1, "MPI_Recv", 1, 5.5, recv={"frm": 0, "bytes": 8})
    tb.call(1, "MPI_Send", 5.5, 6, send={"to": 2, "bytes": 8})
    tb.call(2, "compute", 0, 1)
    tb.call(2, "MPI_Recv", 1, 6.5, recv={"frm": 1, "bytes": 8})
    return tb.build()


def test_short_term_costs_show_propagation():
    t = root_cause(_chain())
    # P2's wait (5.5 - 1 = 4.5): P1 spent 0.5 s more in MPI_Recv without waiting, and 4 s waiting
    assert _costs(t, prop=False) == {(0, "compute"): 4.0, (1, "MPI_Recv"): 0.5}
    assert _costs(t, prop=True) == {(1, "MPI_Recv"): 4.0}
    s = t["summary"].iloc[0]
    assert s["total_wait"] == 8.5 and s["propagating"] == 4.0 and s["mode"] == "short-term"


def test_long_term_costs_reach_the_root_cause():
    t = root_cause(_chain(), long_term=True)
    assert _costs(t) == {(0, "compute"): 8.0, (1, "MPI_Recv"): 0.5}
    s = t["summary"].iloc[0]
    assert (s["attributed"], s["propagating"], s["lost"]) == (8.5, 0.0, 0.0)


@pytest.fixture(scope="module")
def slow_pag():
    return synthetic.trace(nprocs=8, iterations=30, slow_rank=3, seed=2)


def test_synthetic_slow_rank_compute_is_blamed(slow_pag):
    lt = root_cause(slow_pag, long_term=True)
    top = lt["by_process"].iloc[0]
    assert (top["process"], top["name"]) == (3, "compute")
    assert top["percent"] > 90
    assert lt["causes"]["name"].astype(str).iloc[0] == "compute"
    st = root_cause(slow_pag)
    direct = st["by_process"].sort_values("cost", ascending=False).iloc[0]
    assert (direct["process"], direct["name"]) == (3, "compute")
    # in the short term the Allreduce waits are charged to the slow rank's neighbours' waiting
    prop = st["by_process"].sort_values("propagating", ascending=False).iloc[0]
    assert prop["process"] in (2, 4) and prop["name"] == "MPI_Waitall"
    s = st["summary"].iloc[0]
    assert s["attributed"] + s["unattributed"] == pytest.approx(s["total_wait"])


def test_error_without_trace():
    with pytest.raises(PassError, match="pass 'root_cause' needs a trace-backed PAG"):
        root_cause(synthetic.profile(10, 2))


def test_time_off_the_cpu_inside_a_waiting_call_is_waiting():
    # P0's MPI_Send [1, 5] waits 3.8 s for P1 (Late Receiver) and is off the CPU in [2, 4] inside the
    # call; P2 waits 4 s for P0's next send. Of P0's 4 s in the call, 3.8 s are waiting (propagating,
    # back to P1's compute) even where P0 was descheduled; only the 0.2 s after P1 arrived delay P2.
    tb = TraceBuilder()
    tb.call(0, "compute", 0, 1)
    tb.enter(0, 1, "MPI_Send")
    tb.send(0, 1, 1, bytes=8)
    tb.call(0, "off_cpu", 2, 4, role="artificial", paradigm="measurement_system")
    tb.leave(0, 5)
    tb.call(0, "MPI_Send", 5, 5.1, send={"to": 2, "bytes": 8})
    tb.call(1, "compute", 0, 4.8)
    tb.call(1, "MPI_Recv", 4.8, 5, recv={"frm": 0, "bytes": 8})
    tb.call(2, "compute", 0, 1)
    tb.call(2, "MPI_Recv", 1, 5.1, recv={"frm": 0, "bytes": 8})
    pag = tb.build()
    short = root_cause(pag)
    assert _costs(short, prop=False) == {(1, "compute"): 3.8, (0, "off_cpu"): 0.2}
    assert _costs(short, prop=True) == {(0, "MPI_Send"): 3.8}
    long = root_cause(pag, long_term=True)
    assert _costs(long) == {(1, "compute"): 7.6, (0, "off_cpu"): 0.2}
    s = long["summary"].iloc[0]
    assert (s["total_wait"], s["off_cpu"]) == pytest.approx((7.8, 0.2))
    off = long["off_cpu"].iloc[0]
    assert (off["name"], off["total"]) == ("MPI_Send", pytest.approx(0.2))  # the call it was off the CPU in
