"""POP efficiency metrics: the worked example on plain numbers, trace and profile PAGs, scaling across runs."""

from __future__ import annotations

import numpy as np
import pytest

import perflow.passes  # noqa: F401
from perflow import synthetic
from perflow.errors import PassError
from perflow.passes.pop import pop_efficiencies, pop_metrics, pop_scalability, pop_scaling
from perflow.trace.builder import TraceBuilder


def test_worked_example_on_numbers():
    e = pop_efficiencies([8, 6, 7, 5], runtime=10, ideal_runtime=9)
    assert e["load_balance"] == pytest.approx(0.8125)
    assert e["communication_efficiency"] == pytest.approx(0.8)
    assert e["parallel_efficiency"] == pytest.approx(0.65)
    assert e["serialisation_efficiency"] == pytest.approx(8 / 9)
    assert round(e["serialisation_efficiency"], 3) == 0.889
    assert e["transfer_efficiency"] == pytest.approx(0.9)
    assert e["communication_efficiency"] == pytest.approx(e["serialisation_efficiency"] * e["transfer_efficiency"])
    assert np.isnan(pop_efficiencies([8, 6], 10)["transfer_efficiency"])
    with pytest.raises(PassError, match="positive runtime"):
        pop_efficiencies([1, 2], 0)
    with pytest.raises(PassError, match="at least one location"):
        pop_efficiencies([], 1)


def test_scalability_on_numbers():
    s = pop_scalability([100, 110], [4, 8], [0.9, 0.8])
    assert s["computation_scalability"] == pytest.approx([1.0, 100 / 110])
    assert s["global_efficiency"] == pytest.approx([0.9, 0.8 * 100 / 110])
    w = pop_scalability([100, 220], [4, 8], [0.9, 0.8], scaling="weak")
    assert w["computation_scalability"] == pytest.approx([1.0, 25 / 27.5])
    c = pop_scalability([100, 110], [4, 8], [0.9, 0.8], instructions=[1e9, 1.1e9], cycles=[2e9, 2.2e9])
    assert c["instruction_scalability"] == pytest.approx([1.0, 1 / 1.1])
    assert c["ipc_scalability"] == pytest.approx([1.0, 1.0])
    with pytest.raises(PassError, match="reference run 5"):
        pop_scalability([1, 2], [1, 2], [1, 1], reference=5)


def _trace_example():
    tb = TraceBuilder()
    tb.call(0, "compute", 0, 4)
    tb.call(0, "MPI_Send", 4, 5, send={"to": 1, "bytes": 8})
    tb.call(0, "post", 5, 6)
    tb.call(1, "compute", 0, 1)
    tb.call(1, "MPI_Recv", 1, 5.5, recv={"frm": 0, "bytes": 8})
    tb.call(1, "post", 5.5, 9)
    return tb.build()


def test_pop_metrics_on_a_trace():
    # useful: P0 4 + 1 = 5, P1 1 + 3.5 = 4.5; runtime 9; ideal runtime 7.5 (critical path without MPI)
    m = pop_metrics(_trace_example()).set_index("metric")
    v = m["value"]
    assert v["load_balance"] == pytest.approx(4.75 / 5)
    assert v["communication_efficiency"] == pytest.approx(5 / 9)
    assert v["parallel_efficiency"] == pytest.approx(4.75 / 9)
    assert v["serialisation_efficiency"] == pytest.approx(5 / 7.5)
    assert v["transfer_efficiency"] == pytest.approx(7.5 / 9)
    assert m.loc["parallel_efficiency", "level"] == 0 and m.loc["transfer_efficiency", "level"] == 2


def test_pop_metrics_on_a_profile():
    m = pop_metrics(synthetic.profile(30, 4)).set_index("metric")["value"]
    assert 0 < m["parallel_efficiency"] <= 1
    assert m["parallel_efficiency"] == pytest.approx(m["load_balance"] * m["communication_efficiency"])
    assert np.isnan(m["transfer_efficiency"]) and np.isnan(m["ideal_runtime"])


def test_imbalance_lowers_load_balance():
    bal = pop_metrics(synthetic.trace(nprocs=4, iterations=10, noise=0.0)).set_index("metric")["value"]
    imb = pop_metrics(synthetic.trace(nprocs=4, iterations=10, noise=0.0, imbalance=1.0)).set_index("metric")["value"]
    assert bal["load_balance"] > 0.99
    # compute times 1, 4/3, 5/3, 2 (x base): LB close to 1.5 / 2
    assert imb["load_balance"] == pytest.approx(0.75, abs=0.02)


def test_pop_scaling_runs():
    pags = [synthetic.trace(nprocs=p, iterations=10, compute_time=4e-3 / p, noise=0.0) for p in (2, 4)]
    t = pop_scaling(pags)
    assert t["locations"].tolist() == [2, 4]
    assert t["computation_scalability"].iloc[0] == 1.0
    assert t["computation_scalability"].iloc[1] == pytest.approx(1.0, abs=0.02)
    assert t["global_efficiency"].tolist() == pytest.approx(
        (t["parallel_efficiency"] * t["computation_scalability"]).tolist()
    )
    assert t["speedup"].iloc[1] > 1.5
    assert "instruction_scalability" not in t.columns
    with_ctr = [
        p.with_metrics(PAPI_TOT_INS=np.full(len(p.metrics), 1e6 * (i + 1)), PAPI_TOT_CYC=np.full(len(p.metrics), 2e6))
        for i, p in enumerate(pags)
    ]
    t2 = pop_scaling(with_ctr)
    # run 1 has twice the rows with twice the instructions each, the same cycles per row
    assert t2["instruction_scalability"].tolist() == pytest.approx([1.0, 0.25])
    assert t2["ipc_scalability"].tolist() == pytest.approx([1.0, 2.0])
    with pytest.raises(PassError, match="non-empty list"):
        pop_scaling([])
    with pytest.raises(PassError, match="reference=7"):
        pop_scaling(pags, reference=7)
    with pytest.raises(PassError, match="scaling='linear'"):
        pop_scaling(pags, scaling="linear")
