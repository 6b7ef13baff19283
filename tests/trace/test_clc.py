"""Timestamp correction with the controlled logical clock (perflow.trace.clc): worked examples, a skewed real trace,
the modes of the ``clock_correction`` setting, and the benchmark generator's consistent traces."""

from __future__ import annotations

import dataclasses

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


def _skew(raw: perflow.RawTrace, loc: int, offset: float, drift: float) -> perflow.RawTrace:
    tables = {}
    for name in clc.TABLES:
        t = dict(getattr(raw, name))
        if len(t["time"]):
            sel = t["location"] == loc
            tt = t["time"].copy()
            tt[sel] += offset + drift * tt[sel]
            t["time"] = tt
        tables[name] = t
    return dataclasses.replace(raw, **tables)


def _idle(pag: perflow.PAG) -> pd.Series:
    w = pag.analyses.get(WAIT_INSTANCES)
    idle = w[w["kind"].isin(["late_sender", "late_sender_wrong_order_same", "wait_barrier"])]
    return idle.groupby(idle["kind"].astype(str))["amount"].sum()


def test_a_skewed_rank_is_corrected_to_within_one_percent() -> None:
    """Rank 1 of the shared late_sender trace with a clock 50 ms behind and drifting (-1 ms/s): its receives come
    before the sends; the correction restores Late Sender, wrong order and Wait at Barrier within 1 %."""
    from perflow.readers.otf2 import decode

    raw = decode(shared("scorep-scalasca", "late_sender", "traces.otf2"))
    assert clc.violations(raw) == (0, 0)
    skewed = _skew(raw, 1, -0.05, -1e-3)
    msgs, colls = clc.violations(skewed)
    assert msgs == 4 and colls >= 1
    orig = _idle(build_pag(raw, clock_correction="off"))
    off = build_pag(skewed, clock_correction="off")
    assert off.trace.messages["clock_violation"].sum() == msgs  # left out of the wait states
    assert "late_sender" not in _idle(off).index
    fixed = build_pag(skewed)  # "auto": the build found violations and corrected them
    rep = fixed.attrs["clock_correction"]
    assert rep["violations"] == msgs + colls and rep["remaining"] == 0
    assert 0.04 < rep["max_shift"] < 0.06
    got = _idle(fixed)
    pd.testing.assert_index_equal(got.index, orig.index)
    assert np.all(np.abs(got - orig) <= 0.01 * orig), pd.concat([orig, got], axis=1)


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
