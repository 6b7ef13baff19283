"""Findings: read off a run's tables by their columns, ranked by cost, merged per call path, with gains."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.passes.delay import root_cause
from perflow.passes.findings import findings, findings_markdown
from perflow.trace.builder import TraceBuilder


def _tables() -> dict[str, pd.DataFrame]:
    """A root-cause table, a wait-state summary, an imbalance table and POP metrics of a 4-process run."""
    causes = pd.DataFrame(
        {
            "vertex": [3], "name": ["compute"], "call_path": ["main/compute"], "cost": [1.2], "propagating": [0.0],
            "total": [1.2], "top_process": [3], "causes": ["late_sender:1.0, wait_nxn:0.2"], "gain [s]": [0.25],
        }
    )  # fmt: skip
    causes.attrs["aggregates"] = {"total": "sum over 4 processes"}
    waits = pd.DataFrame(
        {
            "vertex": [7], "name": ["MPI_Recv"], "call_path": ["main/MPI_Recv"], "kind": ["late_sender"],
            "amount": [0.8], "instances": [10], "processes": [3], "max_process": [2], "max_process_time": [0.5],
        }
    )  # fmt: skip
    waits.attrs["aggregates"] = {"amount": "sum over 4 processes"}
    imb = pd.DataFrame(
        {"vertex": [7], "name": ["MPI_Recv"], "call_path": ["main/MPI_Recv"], "mean": [0.2], "max": [0.5],
         "max_process": [2], "imbalance_time": [0.3]}
    )  # fmt: skip
    pop = pd.DataFrame(
        {
            "metric": ["load_balance", "serialisation_efficiency", "transfer_efficiency", "runtime", "ideal_runtime",
                       "useful_max", "useful_mean"],
            "value": [0.75, 0.98, 0.99, 0.5, 0.45, 0.4, 0.3],
            "unit": ["ratio", "ratio", "ratio", "s", "s", "s", "s"],
            "gain [s]": [0.08, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
        }
    )  # fmt: skip
    return {"causes": causes, "by_call_path": waits, "vertices": imb, "metrics": pop}


def test_costs_hand_computed_and_ranked() -> None:
    f = findings(_tables())
    # root cause: 1.2 s of waiting over 4 processes = 0.3 s; it explains 1.0 s of Late Sender, more than the
    # 0.8 s wait state of that kind, which is said on its line and not again (nor its call's imbalance of
    # 0.3 s: the same waiting seen again); POP load balance: 0.4 - 0.3 = 0.1 s
    assert f["cost"].round(12).tolist() == [0.3, 0.1]
    assert f["kind"].tolist() == ["root cause", "efficiency"]
    assert f["where"].tolist() == ["main/compute", "the whole run"]  # no PAG: no file:line
    assert f["processes"].tolist() == ["3", ""]
    assert f["gain [s]"].tolist() == [0.25, 0.08]
    assert f["what"].iloc[0] == (
        "delays others: 1.20 s of waiting in total; explains 800 ms of Late Sender waiting in MPI_Recv on rank 2"
    )
    assert f["what"].iloc[1].startswith("load balance 75.0%: 100 ms of the runtime lost")
    assert f[["output", "row"]].values.tolist() == [["causes", 0], ["metrics", 0]]
    text = findings_markdown(f, k=1)
    assert text.startswith("## Findings\n\n1. 300 ms (gain 250 ms)  main/compute on rank 3: delays others")
    assert "1 more in index.html" in text


def test_a_wait_state_keeps_what_no_cause_explains() -> None:
    """One kind's waiting is shared among its wait states by amount; the unexplained rest stays a finding."""
    t = _tables()
    t["causes"]["causes"] = ["late_sender:0.4, wait_barrier:0.8"]  # nobody waits at a barrier here
    t["by_call_path"] = pd.DataFrame(
        {
            "vertex": [7, 8, 9], "call_path": ["main/MPI_Recv", "main/MPI_Wait", "main/MPI_Finalize"],
            "kind": ["late_sender", "late_sender", "finalize_wait"], "amount": [0.6, 0.2, 0.1],
            "max_process": [2, 1, 0],
        }
    )  # fmt: skip
    t["by_call_path"].attrs["aggregates"] = {"amount": "sum over 4 processes"}
    f = findings(t).set_index("where")
    # Late Sender: 0.4 s explained of 0.8 s, 0.3 s at MPI_Recv and 0.1 s at MPI_Wait: each keeps half
    assert f.loc["main/MPI_Recv", "cost"] == pytest.approx(0.3 / 4)
    assert f.loc["main/MPI_Wait", "cost"] == pytest.approx(0.1 / 4)
    assert f.loc["main/MPI_Recv", "what"].endswith("; 300 ms of it explained by compute, 300 ms by no root cause")
    assert f.loc["main/MPI_Finalize", "cost"] == pytest.approx(0.1 / 4)  # nobody explains it: whole
    assert f.loc["main/compute", "what"] == (
        "delays others: 1.20 s of waiting in total; explains 300 ms of Late Sender waiting in MPI_Recv on rank 2, "
        "100 ms of Late Sender waiting in MPI_Wait on rank 1"
    )
    assert f["kind"].iloc[0] == "root cause"


def test_a_cause_comes_before_the_waiting_it_explains() -> None:
    """A hand-made late receiver: the work that delays the receive ranks above the send's waiting, which it explains.

    P0 prep [0,1], MPI_Send [1,6] of 16 MiB to P1; P1 late_recv_work [0,3], unpack [3,5], MPI_Recv [5,6]:
    P0 waits 4 s (Late Receiver). The delays since the start are late_recv_work 3 s and unpack 2 s (P0's prep
    is no delay of P1's), so they cost 4 * 3/5 = 2.4 s and 4 * 2/5 = 1.6 s. P2 computes [0,4], P3 [0,6], and
    all end in MPI_Finalize [., 7]: P2 waits 2 s there, a wait the delay analysis leaves out (nobody explains
    it). Per process (4): 0.6 s, 0.4 s, the Late Receiver 1.0 s (explained: said on the causes' lines), 0.5 s.
    """
    tb = TraceBuilder()
    tb.call(0, "prep", 0, 1)
    tb.call(0, "MPI_Send", 1, 6, send={"to": 1, "bytes": 1 << 24})
    tb.call(1, "late_recv_work", 0, 3)
    tb.call(1, "unpack", 3, 5)
    tb.call(1, "MPI_Recv", 5, 6, recv={"frm": 0, "bytes": 1 << 24})
    for p, t in ((0, 6), (1, 6), (2, 4), (3, 6)):
        if p >= 2:
            tb.call(p, "compute", 0, t)
        tb.call(p, "MPI_Finalize", t, 7, coll={})
    pag = tb.build()
    f = findings(root_cause(pag, gains=0, long_term=True), pag)  # the root_cause flow's long-term table
    problems = f[~f["context"]]
    assert problems["where"].tolist() == ["late_recv_work", "MPI_Finalize", "unpack"]
    assert problems["cost"].tolist() == pytest.approx([0.6, 0.5, 0.4])
    assert problems["what"].iloc[0] == (
        "delays others: 2.40 s of waiting in total; explains 2.40 s of Late Receiver waiting in MPI_Send on rank 0"
    )
    assert problems["what"].iloc[2].endswith("explains 1.60 s of Late Receiver waiting in MPI_Send on rank 0")
    assert problems["what"].iloc[1].startswith("finalize wait for rank")
    assert "MPI_Send" not in set(f["where"])  # the symptom is no finding of its own


def test_without_a_gain_column_and_without_tables() -> None:
    t = _tables()
    t["causes"] = t["causes"].drop(columns=["gain [s]"])
    t["metrics"] = t["metrics"].drop(columns=["gain [s]"])
    f = findings(t)
    assert f["gain [s]"].isna().all() and "gain" not in findings_markdown(f)
    assert len(findings({})) == 0 and findings_markdown(findings({})) == ""


@pytest.fixture(scope="module")
def ring8() -> perflow.PAG:
    return perflow.load("examples/data/ring8.pag")


def test_the_sample_trace(ring8: perflow.PAG) -> None:
    """critical_path on ring8: rank 3's slow compute first (its critical-path imbalance), then the waits it causes."""
    result = perflow.run("critical_path", pag=ring8, outputs=["summary", "profile", "imbalance", "segments"])
    f = findings(result.outputs, ring8)
    top = f.iloc[0]
    prof = result.outputs["profile"].set_index("vertex")
    assert top["vertex"] == 3 and top["processes"] == "3" and top["source"] == "synthetic.c:50"
    assert top["cost"] == pytest.approx(prof.loc[3, "cpi"])
    seg = result.outputs["segments"]
    s = seg[seg["vertex"] == 3]
    i = int(np.argmax((s["end"] - s["start"]).to_numpy()))
    assert (top["t0"], top["t1"]) == (s["start"].iloc[i], s["end"].iloc[i])  # the timeline zooms to it
    # the wait states come from the PAG (no wait table among the outputs): Wait at N x N in MPI_Allreduce
    waits = f[f["kind"] == "wait state"]
    assert waits["where"].iloc[0] == "MPI_Allreduce (synthetic.c:100)"
    assert waits["output"].iloc[0] == ""  # not a table of the page


def test_findings_from_the_pag_alone(ring8: perflow.PAG) -> None:
    """``perflow view`` of a trace: its load imbalance (max - mean over processes, by hand) and wait states."""
    f = findings({}, ring8)
    x = ring8.metrics["time_exc"].xs(3, level="vertex").to_numpy()
    comp = f[f["vertex"] == 3].iloc[0]
    assert comp["kind"] == "load imbalance" and comp["processes"] == "3"
    assert comp["cost"] == pytest.approx(x.max() - x.sum() / len(ring8.processes))
    assert set(f["kind"]) >= {"wait state", "load imbalance"}
    profile = perflow.read("tests/data/hatchet/hatchet-graph-literal.json")  # one process, no trace
    g = findings({}, profile)
    assert len(g) and set(g["kind"]) == {"hotspot"} and g["context"].all()


def test_the_table_with_gains_is_read() -> None:
    """critical_path's profile and imbalance tables have one shape: the one with ``gain [s]`` gives the finding."""
    prof = pd.DataFrame(
        {"vertex": [3], "call_path": ["main/compute"], "cp_time": [0.5], "mean_nonwait": [0.3], "cpi": [0.2]}
    )
    imb = prof.assign(**{"gain [s]": [0.15]})
    f = findings({"profile": prof, "imbalance": imb})
    assert len(f) == 1 and f["output"].iloc[0] == "imbalance" and f["gain [s]"].iloc[0] == 0.15
    assert f["what"].iloc[0] == "critical-path imbalance 200 ms (500 ms on the path, 300 ms per process on average)"


def test_what_if_balance_scenarios_give_their_gain() -> None:
    """The what_if table's ``compute=balance`` scenario: the gain of the finding about compute."""
    t = _tables()
    t["causes"] = t["causes"].drop(columns=["gain [s]"])
    t["what_if"] = pd.DataFrame({"scenario": ["compute=balance", "compute=0"], "gain [s]": [0.12, 0.4]})
    f = findings(t)
    assert f.set_index("where").loc["main/compute", "gain [s]"] == 0.12  # balancing, not removing it


def test_a_wait_nobody_caused_names_no_rank() -> None:
    # a collective's completion wait has no single cause (cause_process -1): no "for rank " with nothing after
    from perflow.passes._evidence.reading import Helpers

    waits = pd.DataFrame(
        {
            "process": [2, 3],
            "start": [1.0, 1.0],
            "end": [2.0, 2.5],
            "kind": pd.Categorical(["barrier_completion"] * 2),
            "amount": [1.0, 1.5],
            "vertex": [5, 5],
            "cause_process": [-1, -1],
        }
    )
    procs, window, who = Helpers({"waits": waits}).wait_detail(5, "barrier_completion")
    assert (procs, window, who) == ([3, 2], (1.0, 2.5), "")
    waits["cause_process"] = [0, 0]
    assert Helpers({"waits": waits}).wait_detail(5, "barrier_completion")[2] == "for rank 0"
