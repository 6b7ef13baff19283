"""Findings: read off a run's tables by their columns, ranked by cost, merged per call path, with gains."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.passes.findings import findings, findings_markdown


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
    # root cause: 1.2 s of waiting over 4 processes = 0.3 s; the wait state: 0.8 / 4 = 0.2 s (its call's
    # imbalance of 0.3 s is the same waiting seen again: merged away); POP load balance: 0.4 - 0.3 = 0.1 s
    assert f["cost"].round(12).tolist() == [0.3, 0.2, 0.1]
    assert f["kind"].tolist() == ["root cause", "wait state", "efficiency"]
    assert f["where"].tolist() == ["main/compute", "main/MPI_Recv", "the whole run"]  # no PAG: no file:line
    assert f["processes"].tolist() == ["3", "2", ""]
    assert f["gain [s]"].iloc[0] == 0.25 and math.isnan(f["gain [s]"].iloc[1]) and f["gain [s]"].iloc[2] == 0.08
    assert f["what"].iloc[0] == "delays others: 1.20 s of waiting in total (Late Sender 1.00 s, Wait at N×N 200 ms)"
    assert f["what"].iloc[1] == "Late Sender: 800 ms in total, most on rank 2 (500 ms)"
    assert f["what"].iloc[2].startswith("load balance 75.0%: 100 ms of the runtime lost")
    assert f[["output", "row"]].values.tolist() == [["causes", 0], ["by_call_path", 0], ["metrics", 0]]
    text = findings_markdown(f, k=2)
    assert text.startswith("## Findings\n\n1. 300 ms (gain 250 ms)  main/compute on rank 3: delays others")
    assert "\n2. 200 ms  main/MPI_Recv on rank 2: Late Sender" in text and "1 more in index.html" in text


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
