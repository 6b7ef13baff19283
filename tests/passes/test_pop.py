"""POP efficiency metrics: the worked example on plain numbers, trace and profile PAGs, scaling across runs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perflow
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
    # useful: P0 4 + 1 = 5, P1 1 + 3.5 = 4.5; runtime 9; ideal runtime 7.5 (the receive completes when
    # the send is issued, at 4; P1 then computes 3.5)
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


def _three_ranks():
    """The worked example of docs/passes-trace.md (POP): three ranks, a message, a barrier, MPI_Init/Finalize."""
    tb = TraceBuilder()
    for p in range(3):
        tb.call(p, "MPI_Init", 0, 1, coll={"op": "init"})
    tb.call(0, "compute", 1, 4)
    tb.call(0, "MPI_Send", 4, 4.5, send={"to": 1, "bytes": 8})
    tb.call(0, "compute", 4.5, 6)
    tb.call(0, "MPI_Barrier", 6, 9, coll={})
    tb.call(0, "compute", 9, 9.5)
    tb.call(1, "compute", 1, 2)
    tb.call(1, "MPI_Recv", 2, 5, recv={"frm": 0, "bytes": 8})
    tb.call(1, "compute", 5, 8.5)
    tb.call(1, "MPI_Barrier", 8.5, 9, coll={})
    tb.call(1, "compute", 9, 9.5)
    tb.call(2, "compute", 1, 7)
    tb.call(2, "MPI_Barrier", 7, 9, coll={})
    tb.call(2, "compute", 9, 10)
    for p, t in ((0, 9.5), (1, 9.5), (2, 10.0)):
        tb.call(p, "MPI_Finalize", t, 10.5, coll={"op": "finalize"})
    return tb.build()


def test_pop_worked_example_hand_computed():
    # region of interest: end of MPI_Init (1) to the start of the last MPI_Finalize (10): T = 9
    # useful: P0 3 + 1.5 + 0.5 = 5, P1 1 + 3.5 + 0.5 = 5, P2 6 + 1 = 7; mean 17/3, max 7
    # ideal replay (from 1): P0 sends at 3, reaches the barrier at 4.5; P1's receive completes at 3, it
    # reaches the barrier at 6.5; P2 at 6; everyone leaves at 6.5; ends 7, 7, 7.5 -> T_ideal 7.5
    m = pop_metrics(_three_ranks())
    v = m.set_index("metric")["value"]
    assert (v["window_start"], v["window_end"], v["runtime"], v["ideal_runtime"]) == (1.0, 10.0, 9.0, 7.5)
    assert (v["useful_max"], v["useful_total"]) == (7.0, 17.0)
    assert v["load_balance"] == pytest.approx(17 / 21)  # 0.8095
    assert v["communication_efficiency"] == pytest.approx(7 / 9)  # 0.7778
    assert v["parallel_efficiency"] == pytest.approx(17 / 27)  # 0.6296
    assert v["serialisation_efficiency"] == pytest.approx(7 / 7.5)  # 0.9333
    assert v["transfer_efficiency"] == pytest.approx(7.5 / 9)  # 0.8333
    assert "MPI_Init" in m.attrs["region"] and "MPI_Finalize" in m.attrs["region"]
    assert m.set_index("metric").loc["runtime", "unit"] == "s"
    assert m.set_index("metric").loc["load_balance", "unit"] == "ratio"
    # the report shows each value in its row's unit and says which region it measured
    from perflow.passes.report import render_table

    text = render_table(m, format="markdown")
    assert "| parallel_efficiency | 63.0% | 0 | ratio |" in text and "| runtime | 9.00 s | -1 | s |" in text
    assert "Region of interest: between the end of MPI_Init and the start of MPI_Finalize [1, 10] s." in text
    # the whole run: MPI_Init and MPI_Finalize count as (non-useful) runtime, 10.5 s
    run = pop_metrics(_three_ranks(), span="run").set_index("metric")["value"]
    assert (run["runtime"], run["ideal_runtime"]) == (10.5, 7.5)
    assert run["parallel_efficiency"] == pytest.approx(17 / 3 / 10.5)
    # an explicit window [4, 9]: useful P0 1.5, P1 3.5, P2 3; everyone leaves the barrier at ideal 3.5
    w = pop_metrics(_three_ranks(), window=[4, 9]).set_index("metric")["value"]
    assert (w["runtime"], w["ideal_runtime"], w["useful_total"]) == (5.0, 3.5, 8.0)
    assert w["transfer_efficiency"] == pytest.approx(0.7)


def test_pop_region_of_interest_by_call_path():
    pag = _three_ranks()
    v = pop_metrics(pag, region="MPI_Barrier").set_index("metric")["value"]
    assert (v["window_start"], v["window_end"]) == (6.0, 9.0)
    # in [6, 9]: P1 computes 2.5 (6 to 8.5), P2 1 (6 to 7), P0 nothing; barrier left at ideal 2.5
    assert (v["useful_max"], v["useful_total"], v["ideal_runtime"]) == (2.5, 3.5, 2.5)
    with pytest.raises(PassError, match="region='solve' is neither a call path nor a vertex name"):
        pop_metrics(pag, region="solve")
    with pytest.raises(PassError, match="not both"):
        pop_metrics(pag, region="compute", window=[1, 2])
    with pytest.raises(PassError, match="start < end"):
        pop_metrics(pag, window=[3, 2])
    with pytest.raises(PassError, match="does not overlap"):
        pop_metrics(pag, window=[20, 30])
    with pytest.raises(PassError, match="span='middle'"):
        pop_metrics(pag, span="middle")


def test_pop_region_of_a_profile():
    pag = synthetic.profile(30, 4)
    sub = pag.call_paths().iloc[1]
    v = pop_metrics(pag, region=sub).set_index("metric")["value"]
    whole = pop_metrics(pag).set_index("metric")["value"]
    assert 0 < v["runtime"] <= whole["runtime"] and v["useful_total"] <= whole["useful_total"]
    assert 0 <= v["parallel_efficiency"] <= 1
    with pytest.raises(PassError, match="needs a trace"):
        pop_metrics(pag, window=[0, 1])


def test_pop_on_ping_pong_takes_the_span_after_mpi_init():
    from tests.conftest import shared

    pag = perflow.read(str(shared("otf2", "ping-pong", "traces.otf2")))
    v = pop_metrics(pag).set_index("metric")["value"]
    run = pop_metrics(pag, span="run").set_index("metric")["value"]
    # MPI_Init takes most of the 0.2 s run; between MPI_Init and MPI_Finalize the ranks compute half the time
    assert run["parallel_efficiency"] < 0.05
    assert v["runtime"] < 0.1 * run["runtime"]
    assert v["parallel_efficiency"] > 0.3
    assert v["useful_max"] <= v["ideal_runtime"] <= v["runtime"]


def _check_pop(v, eps=1e-9):
    for k in (
        "parallel_efficiency",
        "load_balance",
        "communication_efficiency",
        "serialisation_efficiency",
        "transfer_efficiency",
    ):
        assert -eps <= v[k] <= 1 + eps, (k, v[k])
    assert v["parallel_efficiency"] == pytest.approx(v["load_balance"] * v["communication_efficiency"], rel=1e-9)
    assert v["communication_efficiency"] == pytest.approx(
        v["serialisation_efficiency"] * v["transfer_efficiency"], rel=1e-9
    )


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 100_000),
    nprocs=st.integers(2, 8),
    iterations=st.integers(1, 6),
    late=st.floats(0.0, 1.0),
    imbalance=st.floats(0.0, 3.0),
    slow=st.booleans(),
)
def test_pop_bounds_and_identities_on_random_traces(seed, nprocs, iterations, late, imbalance, slow):
    pag = synthetic.trace(
        nprocs=nprocs,
        iterations=iterations,
        seed=seed,
        late_sender=late,
        imbalance=imbalance,
        slow_rank=nprocs - 1 if slow else None,
    )
    for span in ("init_finalize", "run"):
        _check_pop(pop_metrics(pag, span=span).set_index("metric")["value"])
