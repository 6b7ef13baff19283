"""Timestamp correction with the controlled logical clock (perflow.trace.clc): worked examples, a skewed real trace,
the modes of the ``clock_correction`` setting, and the benchmark generator's consistent traces."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.trace import clc
from perflow.trace.analyses import WAIT_INSTANCES
from perflow.trace.build import build_pag
from perflow.trace.builder import TraceBuilder
from tests.conftest import shared


def _receive_before_send(relay: bool = False) -> TraceBuilder:
    """P0 sends at 5; P1's clock is 2 s behind, so it records the receive at 3 (a violation).

    P0: main [0, 10], MPI_Send [5, 5.5].  P1: main [0, 10], work [0.5, 1], MPI_Recv [2, 3.5] receiving at 3.
    With ``relay``, P1 also sends to P2 in MPI_Send [1.5, 1.8] (at 1.5), which P2 receives in MPI_Recv
    [1, 2.7] at 2.6.
    """
    tb = TraceBuilder()
    tb.enter(0, 0.0, "main")
    tb.call(0, "MPI_Send", 5.0, 5.5, send={"to": 1, "tag": 7})
    tb.leave(0, 10.0)
    tb.enter(1, 0.0, "main")
    tb.call(1, "work", 0.5, 1.0)
    if relay:
        tb.call(1, "MPI_Send", 1.5, 1.8, send={"to": 2, "tag": 1})
        tb.enter(2, 0.0, "main")
        tb.enter(2, 1.0, "MPI_Recv")
        tb.recv(2, 2.6, 1, tag=1)
        tb.leave(2, 2.7)
        tb.leave(2, 10.0)
    tb.enter(1, 2.0, "MPI_Recv")
    tb.recv(1, 3.0, 0, tag=7)
    tb.leave(1, 3.5)
    tb.leave(1, 10.0)
    return tb


def test_a_lagging_clock_is_set_forward_as_a_whole() -> None:
    """The receive moves to the send (5); every event of P1 before it moves by the same 2 s (its local intervals
    keep their lengths), and after it the clock runs at gamma until it meets the original (10 stays 10 + ...)."""
    raw = _receive_before_send().raw()
    assert clc.violations(raw) == (1, 0)
    fixed, rep = clc.correct(raw, gamma=1.0)
    assert (rep.violations, rep.messages, rep.remaining) == (1, 1, 0) and rep.max_shift == pytest.approx(2.0)
    t = fixed.region_events["time"]
    loc = fixed.region_events["location"]
    np.testing.assert_allclose(t[loc == 0], raw.region_events["time"][loc == 0])  # the sender is right
    np.testing.assert_allclose(t[loc == 1], raw.region_events["time"][loc == 1] + 2.0)
    assert clc.violations(fixed) == (0, 0)
    # gamma < 1: after the jump the clock runs slower, 6.5 s of main after the receive take 6.5 * gamma
    fixed, _ = clc.correct(raw, gamma=0.9)
    assert fixed.region_events["time"][loc == 1][-1] == pytest.approx(5.0 + 0.9 * 0.5 + 0.9 * 6.5)


def test_a_send_never_moves_past_its_receive() -> None:
    """P1 also sends to P2 before its receive: that send moves only as far as P2's receive allows (1.1 s, to
    2.6), so the events before it move 1.1 s and those after it the whole 2 s."""
    raw = _receive_before_send(relay=True).raw()
    fixed, rep = clc.correct(raw, gamma=1.0)
    assert rep.remaining == 0 and clc.violations(fixed) == (0, 0)
    p = fixed.p2p_events
    send12 = p["time"][(p["location"] == 1) & (p["kind"] == 0)][0]
    recv12 = p["time"][(p["location"] == 2)][0]
    assert send12 == pytest.approx(recv12) and send12 - 1.5 == pytest.approx(1.1)  # moved 1.1 s, not 2
    t = fixed.region_events["time"][fixed.region_events["location"] == 1]
    orig = raw.region_events["time"][raw.region_events["location"] == 1]
    # before the send: 1.1 s; from the send on: 2 s (the gap opens inside the send, between post and leave)
    np.testing.assert_allclose((t - orig)[:4], 1.1)
    np.testing.assert_allclose((t - orig)[-3:], 2.0)


#: completion times and the Init/Finalize waits are as long as the slack that bounds what any correction can
#: recover of an offset (microseconds to milliseconds): they are not held to 1 %
_SLACK_SIZED = ("init_completion", "finalize_wait", "barrier_completion", "nxn_completion", "late_sender_completion")


def _waits(pag: perflow.PAG) -> pd.Series:
    w = pag.analyses.get(WAIT_INSTANCES)
    w = w[~w["kind"].astype(str).isin(_SLACK_SIZED)]
    return w.groupby(w["kind"].astype(str))["amount"].sum()


@pytest.mark.parametrize(
    ("prog", "proc", "kinds"),
    [
        ("late_sender", 1, {"late_sender", "late_sender_wrong_order_same", "wait_barrier"}),
        ("allreduce_imbalance", 3, {"wait_nxn"}),  # the last to arrive: the Allreduces do not reveal its lag
        ("omp_imbalance", 1, {"omp_ibarrier_wait", "lock_contention_critical", "omp_idle", "wait_barrier"}),
    ],
)
def test_a_skewed_rank_is_corrected_to_within_one_percent(prog: str, proc: int, kinds: set[str]) -> None:
    """One rank of a shared trace with a clock 50 ms behind and drifting (-1 ms/s): messages and collectives
    violate the clock condition; the correction restores every wait state within 1 %, threads included."""
    from perflow.readers.otf2 import decode

    raw = decode(shared("scorep-scalasca", prog, "traces.otf2"))
    assert clc.violations(raw) == (0, 0)
    skewed = clc.skew_clock(raw, proc, -0.05, -1e-3)
    msgs, colls = clc.violations(skewed)
    assert colls >= 1 and (msgs > 0) == (prog == "late_sender")
    orig = _waits(build_pag(raw, clock_correction="off"))
    fixed = build_pag(skewed)  # "auto": the build found violations and corrected them
    rep = fixed.attrs["clock_correction"]
    assert rep["violations"] == msgs + colls and rep["remaining"] == 0
    assert 0.04 < rep["max_shift"] < 0.06
    got = _waits(fixed)
    assert kinds <= set(orig.index)
    pd.testing.assert_index_equal(got.index, orig.index)
    assert np.all(np.abs(got - orig) <= 0.01 * orig), pd.concat([orig, got], axis=1)
    if prog == "late_sender":  # uncorrected, the receives came before the sends: left out of the wait states
        off = build_pag(skewed, clock_correction="off")
        assert off.trace.messages["clock_violation"].sum() == msgs and "late_sender" not in _waits(off).index


def test_skew_clock_names_a_missing_process() -> None:
    with pytest.raises(ValueError, match="no process 9"):
        clc.skew_clock(_receive_before_send().raw(), 9, 1.0)


def test_modes() -> None:
    raw = _receive_before_send().raw()
    assert "clock_correction" not in build_pag(raw, clock_correction="off").attrs
    assert build_pag(raw).attrs["clock_correction"]["violations"] == 1  # auto
    with perflow.clock_correction("off"):
        assert "clock_correction" not in build_pag(raw).attrs
    ok = TraceBuilder()
    ok.call(0, "MPI_Send", 1.0, 1.5, send={"to": 1})
    ok.call(1, "MPI_Recv", 0.5, 2.0, recv={"frm": 0})
    assert "clock_correction" not in build_pag(ok.raw()).attrs  # auto, nothing to correct
    assert build_pag(ok.raw(), clock_correction="on").attrs["clock_correction"]["max_shift"] == 0.0
    with pytest.raises(ValueError, match="clock_correction must be one of"):
        build_pag(raw, clock_correction="sometimes")


def test_benchmark_traces_satisfy_the_clock_condition(tmp_path) -> None:  # noqa: ANN001
    """benchmarks/make_otf2_trace.py: receives after sends, collectives left after the last enter."""
    import importlib.util

    from perflow.readers.otf2 import decode
    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location("make_otf2_trace", REPO / "benchmarks" / "make_otf2_trace.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    anchor = mod.make_trace(str(tmp_path / "t"), 2e4, ranks=16)
    raw = decode(anchor)
    assert clc.violations(raw) == (0, 0)
    pag = build_pag(raw, clock_correction="off")
    assert clc.built_violations(pag.trace) == 0 and len(pag.trace.messages) > 0
    w = pag.analyses.get(WAIT_INSTANCES)
    assert (w["kind"].astype(str) == "late_sender").any()  # the waiting is real: the halo exchange waits
    # skewed, every violation is corrected: none left by rounding (bounds compared as times, not shifts)
    fixed, rep = clc.correct(clc.skew_clock(raw, 1, -0.05, -1e-3))
    assert rep.messages > 0 and rep.collectives > 0 and rep.remaining == 0 and clc.violations(fixed) == (0, 0)
    assert clc.built_violations(build_pag(fixed, clock_correction="off").trace) == 0
