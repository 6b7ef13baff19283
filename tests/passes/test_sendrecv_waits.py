"""Late Receiver by timing, and the waits of a call that both sends and receives as a partition of its time.

Hand-computed worked examples (TraceBuilder traces): an MPI_Sendrecv waiting first for its sender, then
for its receiver; one whose Late Sender covers the Late Receiver; a Waitall of a send and a receive; which
sends can suffer Late Receiver under each ``late_receiver`` setting; and a property test over random
Sendrecv rings (no two waits of one call overlap, their sum never exceeds the call).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perflow.passes  # noqa: F401 - registers the passes
from perflow.passes.delay import root_cause
from perflow.passes.waitstates import p2p_wait_states, wait_states, waiting_time
from perflow.trace.builder import TraceBuilder
from tests.invariants.checks import waits_partition_calls


def _rows(w, kind):  # type: ignore[no-untyped-def]
    return w[w["kind"].astype(str) == kind]


def _spans(w):  # type: ignore[no-untyped-def]
    """(process, kind, start, end, cause_process) of each wait, in time order."""
    return [
        (int(r.process), str(r.kind), float(r.start), float(r.end), int(r.cause_process))
        for r in w.sort_values(["process", "start"]).itertuples()
    ]


def _sendrecv_then_receiver():  # type: ignore[no-untyped-def]
    # P0 prep[0,1], Send[1,2] -> P1; P1 Sendrecv[0,8] (sends to P2, receives from P0); P2 slow[0,6], Recv[6,8].
    # P1 waits for P0's send until 1 (Late Sender 1) and for P2 to post its receive until 6: the Late Receiver
    # takes what the Late Sender leaves, [1, 6] (5 s, not 6 from the enter), and the completion is [6, 8].
    tb = TraceBuilder()
    tb.call(0, "prep", 0, 1)
    tb.call(0, "MPI_Send", 1, 2, send={"to": 1, "bytes": 8})
    tb.call(1, "MPI_Sendrecv", 0, 8, send={"to": 2, "bytes": 8}, recv={"frm": 0, "bytes": 8})
    tb.call(2, "slow", 0, 6)
    tb.call(2, "MPI_Recv", 6, 8, recv={"frm": 1, "bytes": 8})
    return tb.build()


def test_sendrecv_waits_for_sender_then_receiver() -> None:
    pag = _sendrecv_then_receiver()
    w = wait_states(pag)
    assert _spans(w) == [
        (1, "late_sender", 0.0, 1.0, 0),
        (1, "late_receiver", 1.0, 6.0, 2),
        (1, "late_sender_completion", 6.0, 8.0, -1),
    ]  # 1 + 5 + 2 = 8, the Sendrecv's duration (before: 1 + 6 + 6 = 13 s in an 8 s call)
    lr = _rows(w, "late_receiver").iloc[0]
    assert (lr["amount"], lr["cause_time"], str(lr["name"])) == (5.0, 6.0, "MPI_Sendrecv")
    wt = waiting_time(pag).set_index("process")
    assert (wt.loc[1, "late_sender"], wt.loc[1, "late_receiver"], wt.loc[1, "wait"]) == (1.0, 5.0, 6.0)
    rc = root_cause(pag)
    s = rc["summary"].iloc[0]
    assert (s["total_wait"], s["attributed"], s["unattributed"]) == (6.0, 6.0, 0.0)
    causes = rc["causes"].set_index("name")
    # P2's slow work delays the Sendrecv by 5 s (Late Receiver), P0's prep by 1 s (Late Sender)
    assert causes.loc["slow", "total"] == pytest.approx(5.0) and causes.loc["slow", "top_process"] == 2
    assert causes.loc["prep", "total"] == pytest.approx(1.0) and causes.loc["prep", "top_process"] == 0
    assert rc["causes"]["name"].iloc[0] == "slow"
    # without Late Receiver the Sendrecv waits 1 s, and the completion starts when the late send left (2)
    none = wait_states(pag, late_receiver="none")
    assert _spans(none) == [(1, "late_sender", 0.0, 1.0, 0), (1, "late_sender_completion", 2.0, 8.0, -1)]


def test_late_sender_covering_the_late_receiver_leaves_it_nothing() -> None:
    # P0 Send[5,6] -> P1; P1 Sendrecv[0,8]; P2 Recv[3,8] posted at 3: P1 waits for the send until 5 (Late
    # Sender 5); the receiver was ready at 3, inside that wait, so there is no Late Receiver; completion [6, 8]
    tb = TraceBuilder()
    tb.call(0, "work", 0, 5)
    tb.call(0, "MPI_Send", 5, 6, send={"to": 1, "bytes": 8})
    tb.call(1, "MPI_Sendrecv", 0, 8, send={"to": 2, "bytes": 8}, recv={"frm": 0, "bytes": 8})
    tb.call(2, "work", 0, 3)
    tb.call(2, "MPI_Recv", 3, 8, recv={"frm": 1, "bytes": 8})
    w = wait_states(tb.build())
    assert _spans(w) == [(1, "late_sender", 0.0, 5.0, 0), (1, "late_sender_completion", 6.0, 8.0, -1)]


def _waitall_of_send_and_receive():  # type: ignore[no-untyped-def]
    # P1: Isend[0,0.5] -> P2, Irecv[0.5,1] <- P0, Waitall[1,9] completes both; P0 work[0,3], Send[3,3.5] -> P1;
    # P2 work[0,7], Recv[7,9] <- P1
    tb = TraceBuilder()
    tb.call(0, "work", 0, 3)
    tb.call(0, "MPI_Send", 3, 3.5, send={"to": 1, "bytes": 8})
    with tb.region(1, "MPI_Isend", 0, 0.5):
        tb.isend(1, 0, to=2, request=1, bytes=8)
    with tb.region(1, "MPI_Irecv", 0.5, 1):
        tb.irecv_request(1, 0.5, request=2)
    with tb.region(1, "MPI_Waitall", 1, 9):
        tb.irecv(1, 9, frm=0, request=2, bytes=8)
        tb.isend_complete(1, 9, request=1)
    tb.call(2, "work", 0, 7)
    tb.call(2, "MPI_Recv", 7, 9, recv={"frm": 1, "bytes": 8})
    return tb.build()


def test_waitall_of_a_send_and_a_receive_partitions_its_time() -> None:
    pag = _waitall_of_send_and_receive()
    # Late Sender 3 - 1 = 2 [1, 3]; Late Receiver 7 - 1 = 6 from the enter, 4 after the Late Sender [3, 7];
    # completion 9 - max(3.5, 7) = 2 [7, 9]: 2 + 4 + 2 = 8, the Waitall's duration
    assert _spans(p2p_wait_states(pag)) == [
        (1, "late_sender", 1.0, 3.0, 0),
        (1, "late_receiver", 3.0, 7.0, 2),
        (1, "late_sender_completion", 7.0, 9.0, -1),
    ]
    # only synchronous sends: the standard Isend never waits for its receiver; the completion runs from 3.5
    assert _spans(p2p_wait_states(pag, late_receiver="synchronous")) == [
        (1, "late_sender", 1.0, 3.0, 0),
        (1, "late_sender_completion", 3.5, 9.0, -1),
    ]


@pytest.mark.parametrize(
    ("sender", "blocking", "synchronous"),
    [
        ("MPI_Send", 3.0, None),  # a standard send that left after the receive was posted (rendezvous)
        ("MPI_Ssend", 3.0, 3.0),
        ("MPI_Bsend", None, None),  # buffered and ready sends never wait for their receiver
        ("MPI_Rsend", None, None),
        ("MPI_Isend+MPI_Wait", 2.5, None),  # the Wait blocks: 3 - 0.5
        ("MPI_Isend+MPI_Test", None, None),  # a completion in MPI_Test is no wait
        ("MPI_Issend+MPI_Wait", 2.5, 2.5),
    ],
)
def test_which_sends_can_wait_for_their_receiver(
    sender: str, blocking: float | None, synchronous: float | None
) -> None:
    # P0 sends at 0 and completes the send at 5; P1 posts its receive at 3 (Recv[3,6])
    tb = TraceBuilder()
    if "+" in sender:
        post, done = sender.split("+")
        with tb.region(0, post, 0, 0.5):
            tb.isend(0, 0, to=1, request=1, bytes=1 << 20)
        with tb.region(0, done, 0.5, 5):
            tb.isend_complete(0, 5, request=1)
    else:
        tb.call(0, sender, 0, 5, send={"to": 1, "bytes": 1 << 20, "sync": sender == "MPI_Ssend"})
    tb.call(1, "MPI_Recv", 3, 6, recv={"frm": 0, "bytes": 1 << 20})
    pag = tb.build()
    for mode, expected in (("blocking", blocking), ("synchronous", synchronous), ("none", None)):
        lr = _rows(p2p_wait_states(pag, late_receiver=mode), "late_receiver")
        assert lr["amount"].tolist() == ([] if expected is None else [expected]), (sender, mode)
    assert _rows(p2p_wait_states(pag), "late_receiver")["amount"].tolist() == ([] if blocking is None else [blocking])


def test_a_send_that_left_before_the_receive_was_posted_is_no_late_receiver() -> None:
    # an eager MPI_Send[0,1]; the receive is posted at 3: the send did not wait for it
    tb = TraceBuilder()
    tb.call(0, "MPI_Send", 0, 1, send={"to": 1, "bytes": 8})
    tb.call(1, "MPI_Recv", 3, 4, recv={"frm": 0, "bytes": 8})
    assert _rows(wait_states(tb.build()), "late_receiver").empty


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(2, 5),
    enters=st.lists(st.integers(0, 20), min_size=5, max_size=5),
    lengths=st.lists(st.integers(1, 20), min_size=5, max_size=5),
    direction=st.sampled_from([1, -1]),
)
def test_sendrecv_ring_waits_never_overlap(n: int, enters: list[int], lengths: list[int], direction: int) -> None:
    # a ring of MPI_Sendrecv with random enters and durations; each call must last at least until its
    # partners arrived (a real run cannot leave before), so the durations are made long enough
    E = [float(e) for e in enters[:n]]
    last = max(E)
    tb = TraceBuilder()
    for p in range(n):
        if E[p] > 0:
            tb.call(p, "work", 0, E[p])
        tb.call(
            p,
            "MPI_Sendrecv",
            E[p],
            last + lengths[p],
            send={"to": (p + direction) % n, "bytes": 8},
            recv={"frm": (p - direction) % n, "bytes": 8},
        )
    pag = tb.build()
    for mode in ("blocking", "synchronous", "none"):
        waits_partition_calls(pag, late_receiver=mode)
    w = waiting_time(pag, per="interval")
    iv = pag.trace.intervals
    dur = (iv["leave"] - iv["enter"]).to_numpy()[w["interval"].to_numpy()]
    assert (w["wait"].to_numpy() <= dur + 1e-12).all()
    # each Sendrecv waits until the later of its two partners arrived, once
    idle = wait_states(pag)
    idle = idle[idle["kind"].isin(["late_sender", "late_receiver"]).to_numpy()]
    per_proc = idle.groupby("process")["amount"].sum()
    for p in range(n):
        expected = max(0.0, max(E[(p - direction) % n], E[(p + direction) % n]) - E[p])
        assert per_proc.get(p, 0.0) == pytest.approx(expected), p


def test_late_receiver_equals_scalasca_on_the_shared_score_p_trace() -> None:
    # Scalasca 2.6's mpi_latereceiver per call path and rank (scout.cubex) against the default wait states of
    # the same Score-P trace; its 8 MPI_Send calls are all candidates, but no receive was posted while one ran
    import numpy as np

    import perflow
    from perflow.pag.edges import late_receiver_sends
    from perflow.readers import cube
    from tests.conftest import shared

    folder = shared("scorep-scalasca", "late_sender")
    pag = perflow.read(str(folder / "traces.otf2"))
    scout = cube.read(folder / "scout.cubex")
    names = scout.vertex_table["name"].astype(str).to_numpy()
    lr = scout.metrics["mpi_latereceiver"]
    v, p = (lr.index.get_level_values(k).to_numpy() for k in ("vertex", "process"))
    theirs = pd_series(lr.to_numpy(), names[v], p)
    w = _rows(wait_states(pag), "late_receiver")
    ours = pd_series(w["amount"].to_numpy(), w["name"].astype(str).to_numpy(), w["process"].to_numpy())
    assert set(theirs.index.get_level_values(0)) >= {"MPI_Send", "MPI_Recv"}  # the call paths are there
    assert (ours.reindex(theirs.index, fill_value=0.0) - theirs).abs().max() < 1e-9
    assert ours.abs().sum() == theirs.abs().sum() == 0.0
    tr = pag.trace
    cand = late_receiver_sends(tr, pag.vertex_table["name"].astype(str).to_numpy(), "blocking")
    assert cand.sum() == len(tr.messages) == 8
    iv, m = tr.intervals, tr.messages
    sc = m["send_complete_interval"].to_numpy()
    entered, left = iv["enter"].to_numpy()[sc], iv["leave"].to_numpy()[sc]
    posted = iv["enter"].to_numpy()[m["recv_post_interval"].to_numpy()]
    assert not np.any((entered < posted) & (posted < left))
    assert np.sum(posted < entered) == 4  # late senders (4 of the 8): the receive waited, not the send


def pd_series(values, name, process):  # type: ignore[no-untyped-def]
    import pandas as pd

    return pd.Series(values, index=pd.MultiIndex.from_arrays([name, process])).groupby(level=[0, 1]).sum()
