"""One definition of waiting time: waiting_time feeds wait_states' consumers (breakdown, comm_summary)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import perflow
from perflow import synthetic
from perflow.pag.literal import from_literal
from perflow.passes.breakdown import breakdown
from perflow.passes.comm import comm_summary
from perflow.passes.waitstates import WAIT_FAMILIES, wait_states, waiting_time
from perflow.trace.builder import TraceBuilder

REPO = Path(__file__).resolve().parents[2]
RING8_OTF2 = REPO / "examples" / "data" / "ring8" / "traces.otf2"


def _sendrecv_pair() -> perflow.PAG:
    # P0 Sendrecv[1,5] (synchronous send), P1 Sendrecv[4,5]: P0 waits [1,4] for the send (Late Sender 3)
    # and, at the same time, for the receive to be posted (3 s too): 3 s of waiting, not 6, all Late Sender
    # (the call's Late Sender comes first, Late Receiver only takes what is left)
    tb = TraceBuilder()
    tb.call(0, "compute", 0, 1)
    tb.call(0, "MPI_Sendrecv", 1, 5, send={"to": 1, "bytes": 8, "sync": True}, recv={"frm": 1, "bytes": 8})
    tb.call(1, "compute", 0, 4)
    tb.call(1, "MPI_Sendrecv", 4, 5, send={"to": 0, "bytes": 8, "sync": True}, recv={"frm": 0, "bytes": 8})
    return tb.build()


def test_overlapping_waits_of_one_call_count_once() -> None:
    pag = _sendrecv_pair()
    w = wait_states(pag)
    assert w["kind"].astype(str).tolist() == ["late_sender"]
    assert w["amount"].tolist() == [3.0] and (w["start"].iloc[0], w["end"].iloc[0]) == (1.0, 4.0)
    wt = waiting_time(pag)
    assert len(wt) == 1
    row = wt.iloc[0]
    assert (row["process"], row["late_sender"], row["late_receiver"], row["collective"], row["wait"]) == (
        0,
        3.0,
        0.0,
        0.0,
        3.0,
    )
    wide = breakdown(pag, wide=True).set_index("process")
    assert wide.loc[0, "wait"] == 3.0 and wide.loc[0, "p2p"] == 1.0  # the Sendrecv's 4 s: 3 waiting, 1 not
    cs = comm_summary(pag).set_index("process")
    assert cs.loc[0, "late_sender_wait"] == 3.0 and cs.loc[0, "late_receiver_wait"] == 0.0


def test_per_interval_and_settings() -> None:
    pag = _sendrecv_pair()
    per_call = waiting_time(pag, per="interval")
    iv = pag.trace.intervals
    i = int(per_call["interval"].iloc[0])
    assert iv["leave"].iat[i] - iv["enter"].iat[i] == 4.0
    # without Late Receiver the same call still waits 3 s, all of it Late Sender
    none = waiting_time(pag, late_receiver="none")
    assert none["late_receiver"].sum() == 0.0 and none["wait"].sum() == 3.0
    with pytest.raises(perflow.errors.PassError, match="per="):
        waiting_time(pag, per="rank")


def test_profile_has_no_waiting_time() -> None:
    pag = from_literal([{"name": "main", "metrics": {"time": 1.0}}])
    wt = waiting_time(pag)
    assert list(wt.columns) == ["vertex", "process", "thread", *WAIT_FAMILIES, "wait"] and not len(wt)


@pytest.fixture(scope="module")
def ring8() -> perflow.PAG:
    return perflow.read(str(RING8_OTF2))


def test_sample_rank2_late_sender_agrees(ring8: perflow.PAG) -> None:
    # rank 2 of the shipped sample: 44.5 ms Late Sender in MPI_Waitall (44.7 ms); the old formula in
    # comm_summary counted the concurrent receives of one Waitall twice (50.0 ms)
    w = wait_states(ring8)
    ls_kinds = list(WAIT_FAMILIES["late_sender"])
    from_instances = w[(w["process"] == 2) & w["kind"].isin(ls_kinds)]["amount"].sum()
    cs = comm_summary(ring8).set_index("process").loc[2, "late_sender_wait"]
    bd = breakdown(ring8, by="vertex_process")
    waitall = bd[(bd["process"] == 2) & (bd["name"] == "MPI_Waitall")].set_index("category")["value"]
    assert from_instances == pytest.approx(0.044534, abs=5e-7)
    same = pytest.approx(from_instances, rel=1e-12)  # equal up to the order of summation
    assert cs == same
    assert waitall["wait"] == same
    assert waitall["wait"] <= waitall.sum()  # the call's own time: waiting plus the rest
    assert waiting_time(ring8).query("process == 2")["late_sender"].sum() == same


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wait_never_exceeds_the_call(seed: int) -> None:
    pag = synthetic.trace(nprocs=6, iterations=4, seed=seed)
    per_call = waiting_time(pag, per="interval")
    iv = pag.trace.intervals
    dur = (iv["leave"] - iv["enter"]).to_numpy()[per_call["interval"].to_numpy()]
    assert (per_call["wait"].to_numpy() <= dur + 1e-12).all()
    fams = per_call[list(WAIT_FAMILIES)].sum(axis=1).to_numpy()
    assert np.allclose(fams, per_call["wait"].to_numpy())
