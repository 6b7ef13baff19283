"""Point-to-point wait states: worked examples, wrong order, Waitall, MPI_Test, clock violations, synthetic traces."""

from __future__ import annotations

import numpy as np
import pytest

import perflow.passes  # noqa: F401 - registers the passes
from perflow import synthetic
from perflow.errors import PassError
from perflow.flow.registry import get_pass
from perflow.passes.waitstates import late_sender, p2p_wait_states, wait_state_summary, wait_states
from perflow.trace.builder import TraceBuilder
from perflow.trace.waits import WAIT_COLUMNS


def _rows(df, kind):
    return df[df["kind"].astype(str) == kind]


def test_late_sender_worked_example():
    # P0 Send[5,6], P1 Recv[2,7]: Late Sender min(5, 7) - 2 = 3, completion 7 - 6 = 1
    tb = TraceBuilder()
    tb.call(0, "MPI_Send", 5, 6, send={"to": 1, "bytes": 8})
    tb.call(1, "MPI_Recv", 2, 7, recv={"frm": 0, "bytes": 8})
    w = wait_states(tb.build())
    assert set(WAIT_COLUMNS) <= set(w.columns) and "name" in w.columns
    ls = _rows(w, "late_sender")
    assert len(ls) == 1
    r = ls.iloc[0]
    assert (r["process"], r["start"], r["end"], r["amount"]) == (1, 2.0, 5.0, 3.0)
    assert r["name"] == "MPI_Recv" and r["cause_process"] == 0 and r["cause_time"] == 5.0
    comp = _rows(w, "late_sender_completion")
    assert comp["amount"].tolist() == [1.0] and comp["start"].tolist() == [6.0]


def test_late_receiver_worked_example():
    # P0 synchronous Send[1,5], P1 Recv[4,5]: Late Receiver 4 - 1 = 3, charged to the sender
    tb = TraceBuilder()
    tb.call(0, "MPI_Ssend", 1, 5, send={"to": 1, "bytes": 8, "sync": True})
    tb.call(1, "MPI_Recv", 4, 5, recv={"frm": 0, "bytes": 8})
    w = p2p_wait_states(tb.build())
    lr = _rows(w, "late_receiver")
    assert lr["amount"].tolist() == [3.0]
    assert lr["process"].tolist() == [0] and lr["name"].astype(str).tolist() == ["MPI_Ssend"]
    assert lr["cause_process"].tolist() == [1] and lr["cause_time"].tolist() == [4.0]
    assert _rows(w, "late_sender").empty  # the receive was posted late, the send was not


def test_late_receiver_modes():
    # a standard blocking send that left after its receive was posted is a Late Receiver by default (as in
    # Scalasca), not with late_receiver="synchronous"
    tb = TraceBuilder()
    tb.call(0, "MPI_Send", 1, 5, send={"to": 1, "bytes": 1 << 20})
    tb.call(1, "MPI_Recv", 4, 5, recv={"frm": 0, "bytes": 1 << 20})
    pag = tb.build()
    assert _rows(p2p_wait_states(pag), "late_receiver")["amount"].tolist() == [3.0]
    assert _rows(p2p_wait_states(pag, late_receiver="synchronous"), "late_receiver").empty
    assert _rows(p2p_wait_states(pag, late_receiver="none"), "late_receiver").empty
    with pytest.raises(
        PassError,
        match="pass 'p2p_wait_states': setting late_receiver='sometimes' is not one of 'blocking', 'synchronous', 'none'",
    ):
        p2p_wait_states(pag, late_receiver="sometimes")


def _waitall_trace(test: bool = False):
    tb = TraceBuilder()
    for p, t in ((0, 3.0), (1, 5.0)):  # P0 and P1 send to P2 at 3 and 5
        with tb.region(p, "MPI_Isend", t, t + 0.5):
            tb.isend(p, t, to=2, request=1, bytes=8)
        with tb.region(p, "MPI_Wait", t + 0.5, t + 1):
            tb.isend_complete(p, t + 1, request=1)
    for req, t in ((7, 0.0), (8, 0.5)):
        with tb.region(2, "MPI_Irecv", t, t + 0.5):
            tb.irecv_request(2, t, request=req)
    with tb.region(2, "MPI_Testall" if test else "MPI_Waitall", 1, 8):
        tb.irecv(2, 8, frm=0, request=7, bytes=8)
        tb.irecv(2, 8, frm=1, request=8, bytes=8)
    return tb.build()


def test_waitall_takes_the_maximum_once():
    w = wait_states(_waitall_trace())
    ls = _rows(w, "late_sender")
    # two late messages (senders enter at 3 and 5); the Waitall entered at 1 is charged once: 5 - 1
    assert ls["amount"].tolist() == [4.0]
    assert ls["cause_process"].tolist() == [1]
    assert _rows(w, "late_sender_completion")["amount"].tolist() == [2.5]  # 8 - max(Ls) = 8 - 5.5


def test_completion_in_test_is_no_wait():
    w = wait_states(_waitall_trace(test=True))
    assert w[w["process"] == 2].empty
    assert w.attrs["test_completions"] == 2


def _wrong_order_trace(same_source: bool):
    tb = TraceBuilder()
    if same_source:  # P0 sends tag 1 early and tag 2 late; P2 receives tag 2 first
        tb.call(0, "MPI_Send", 2, 3, send={"to": 2, "tag": 1, "bytes": 8})
        tb.call(0, "MPI_Send", 10, 11, send={"to": 2, "tag": 2, "bytes": 8})
        tb.call(2, "MPI_Recv", 1, 11.5, recv={"frm": 0, "tag": 2, "bytes": 8})
        tb.call(2, "MPI_Recv", 11.5, 12, recv={"frm": 0, "tag": 1, "bytes": 8})
    else:  # P0 sends late, P1 early; P2 receives from P0 first
        tb.call(0, "MPI_Send", 10, 11, send={"to": 2, "bytes": 8})
        tb.call(1, "MPI_Send", 2, 3, send={"to": 2, "bytes": 8})
        tb.call(2, "MPI_Recv", 1, 11.5, recv={"frm": 0, "bytes": 8})
        tb.call(2, "MPI_Recv", 11.5, 12, recv={"frm": 1, "bytes": 8})
    return tb.build()


@pytest.mark.parametrize("same", [True, False])
def test_wrong_order(same):
    pag = _wrong_order_trace(same)
    w = wait_states(pag)
    kind = "late_sender_wrong_order_same" if same else "late_sender_wrong_order_diff"
    assert _rows(w, kind)["amount"].tolist() == [9.0]
    assert _rows(w, "late_sender").empty
    # without the buffer it stays a plain Late Sender
    w0 = wait_states(pag, wrong_order_window=0)
    assert _rows(w0, "late_sender")["amount"].tolist() == [9.0]
    assert _rows(w0, kind).empty
    t = late_sender(pag)
    assert t["late_sender_total"].tolist() == [9.0]
    assert t[("wrong_order_same" if same else "wrong_order_diff")].tolist() == [9.0]


def test_clock_violation_is_excluded_and_counted():
    # the receive completes at 4, before the send at 5: the timestamps cannot be trusted
    tb = TraceBuilder()
    tb.call(0, "MPI_Send", 5, 6, send={"to": 1, "bytes": 8})
    tb.call(1, "MPI_Recv", 1, 4, recv={"frm": 0, "bytes": 8})
    tb.call(0, "MPI_Send", 7, 8, send={"to": 1, "bytes": 8})
    tb.call(1, "MPI_Recv", 6, 9, recv={"frm": 0, "bytes": 8})
    w = wait_states(tb.build(clock_correction="off"))  # uncorrected, as read
    assert w.attrs["clock_violations"] == 1
    assert _rows(w, "late_sender")["amount"].tolist() == [1.0]  # only the second message: 7 - 6


@pytest.fixture(scope="module")
def late_pag():
    return synthetic.trace(nprocs=6, iterations=40, late_sender=0.1, noise=0.0, seed=3)


def test_synthetic_late_sender_at_the_neighbours_waitall(late_pag):
    w = wait_states(late_pag)
    ls = w[w["kind"].astype(str).str.startswith("late_sender") & (w["kind"].astype(str) != "late_sender_completion")]
    assert len(ls) > 0
    assert set(ls["name"].astype(str)) == {"MPI_Waitall"}
    d = (ls["process"].to_numpy() - ls["cause_process"].to_numpy()) % 6
    assert set(d.tolist()) <= {1, 5}  # the waiting is caused by a ring neighbour
    # each late (iteration, rank) makes its two neighbours wait about late_delay (2 ms)
    late = late_pag.attrs["late_instances"]
    assert 0.5 * 2 * late * 2e-3 < ls["amount"].sum() <= 2 * late * 2e-3 * 1.01
    t = late_sender(late_pag)
    assert t["name"].astype(str).tolist() == ["MPI_Waitall"]
    assert t["call_path"].tolist() == ["main/timestep/exchange/MPI_Waitall"]
    assert t["late_sender_total"].iloc[0] == pytest.approx(ls["amount"].sum())


def test_no_injected_problem_no_late_sender():
    pag = synthetic.trace(nprocs=4, iterations=10, noise=0.0)
    w = wait_states(pag, kinds=["late_sender", "late_receiver"])
    assert w.empty


def test_summary_tables(late_pag):
    s = wait_state_summary(late_pag)
    assert {"vertex", "name", "call_path", "kind", "amount", "instances", "processes", "percent"} <= set(s.columns)
    assert s["amount"].is_monotonic_decreasing
    w = wait_states(late_pag)
    assert s["amount"].sum() == pytest.approx(w["amount"].sum())
    k = wait_state_summary(late_pag, by="kind")
    row = k[k["kind"] == "late_sender_completion"].iloc[0]
    assert not row["idle"]
    k2 = wait_state_summary(late_pag, by="kind", idle_only=True)
    assert "late_sender_completion" not in set(k2["kind"])
    p = wait_state_summary(late_pag, w, by="process")
    assert set(p["process"]) <= set(range(6))
    with pytest.raises(PassError, match="by='rank'"):
        wait_state_summary(late_pag, by="rank")
    with pytest.raises(PassError, match="lacks the columns"):
        wait_state_summary(late_pag, w.drop(columns=["amount"]))


def test_errors_name_the_pass():
    prof = synthetic.profile(20, 4)
    for name in ("wait_states", "p2p_wait_states", "late_sender", "wait_state_summary"):
        with pytest.raises(PassError, match=rf"pass '{name}' needs a trace-backed PAG"):
            get_pass(name)(prof)
    with pytest.raises(PassError, match="pass 'wait_states' needs a PAG as input, got DataFrame"):
        wait_states(prof.metrics)
    pag = synthetic.trace(nprocs=2, iterations=2)
    with pytest.raises(PassError, match="unknown wait-state kind"):
        wait_states(pag, kinds=["late_snder"])
    with pytest.raises(PassError, match="wrong_order_window must be >= 0"):
        wait_states(pag, wrong_order_window=-1)


def test_registered_with_documented_settings():
    spec = get_pass("wait_states")
    assert "trace" in spec.tags
    assert "wrong-order test" in spec.setting("wrong_order_window").doc
    assert spec.setting("late_receiver").default == "blocking"
    assert "as Scalasca counts" in spec.setting("late_receiver").doc
    assert [p.name for p in spec.inputs] == ["pag"]


def test_results_are_not_shared(late_pag):
    a = wait_states(late_pag)
    a["amount"] = -1.0
    b = wait_states(late_pag)
    assert (b["amount"] > 0).all()
    assert np.isfinite(b["start"]).all()


def test_summary_by_vertex_the_same_from_a_categorical_or_a_text_kind(late_pag):
    """The per-call-path summary groups a categorical kind by its names' ranks: the same table as from text."""
    import pandas as pd

    w = wait_states(late_pag)
    assert isinstance(w["kind"].dtype, pd.CategoricalDtype)
    names = list(w["kind"].cat.categories)
    shuffled = w.assign(kind=w["kind"].cat.reorder_categories(names[::-1]))  # categories out of text order
    as_text = w.assign(kind=w["kind"].astype(str))
    ref = wait_state_summary(late_pag, as_text, by="vertex")
    assert len(ref["kind"].unique()) > 1  # several kinds at one call path: the grouping order matters
    for table in (w, shuffled):
        got = wait_state_summary(late_pag, table, by="vertex")
        pd.testing.assert_frame_equal(got, ref, check_exact=True)
        assert got.to_csv() == ref.to_csv()
    missing = w.assign(kind=w["kind"].where(w.index % 7 != 0))  # a missing kind: the text path
    assert len(wait_state_summary(late_pag, missing, by="vertex")) > 0
