"""The shipped trace-analysis flows: they validate, run, and report what was injected."""

from __future__ import annotations

import pytest

import perflow
from perflow.errors import StepError

FLOWS = {
    "wait_states": "MPI_Waitall",
    "critical_path": "compute",
    "root_cause": "compute",
    "pop": "parallel_efficiency",
    "variance": "computation",
}


@pytest.fixture(scope="module")
def pag():
    return perflow.synthetic.trace(nprocs=6, iterations=20, slow_rank=4, late_sender=0.05, seed=3)


@pytest.mark.parametrize("name", list(FLOWS))
def test_flow_runs(name, pag):
    flow = perflow.load_flow(name)
    flow.validate()
    result = perflow.run(flow, pag=pag, jobs=2)
    result.raise_for_status()
    report = result["report"]
    assert report.startswith("# perflow ")
    assert FLOWS[name] in report


def test_flow_findings(pag):
    r = perflow.run("root_cause", pag=pag)
    top = r["by_process"].iloc[0]
    assert (top["process"], top["name"]) == (4, "compute")
    cp = perflow.run("critical_path", pag=pag)
    assert cp["summary"]["length"].iloc[0] > 0
    assert len(cp["timeline"].axes) == 1
    w = perflow.run("wait_states", pag=pag)
    assert w["late_sender"]["name"].astype(str).tolist() == ["MPI_Waitall"]
    assert set(w["waits"]["kind"].astype(str)) >= {"late_sender", "wait_nxn"}
    v = perflow.run("variance", pag=pag)
    assert v["slow"]["process"].iloc[0] == 4


def test_flow_on_a_profile_fails_clearly():
    r = perflow.run("critical_path", pag=perflow.synthetic.profile(10, 2))
    assert not r.ok
    with pytest.raises(StepError, match="needs a trace-backed PAG"):
        r["summary"]
