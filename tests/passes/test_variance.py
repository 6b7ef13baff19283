"""Performance variance: normalisation worked example, snippet grouping, the time-slice matrix, slow regions."""

from __future__ import annotations

import numpy as np
import pytest

import perflow
import perflow.passes  # noqa: F401
from perflow import synthetic
from perflow.errors import PassError
from perflow.passes.variance import variance
from perflow.trace.builder import TraceBuilder
from perflow.trace.snippets import cluster_within, normalised_performance, performance_matrix


def test_normalisation_worked_example():
    perf = normalised_performance(np.array([100, 102, 99, 150, 101]) * 1e-6)
    assert perf.round(3).tolist() == [0.99, 0.971, 1.0, 0.66, 0.98]
    g = normalised_performance(np.array([2.0, 1.0, 4.0, 8.0]), np.array([0, 0, 1, 1]))
    assert g.tolist() == [0.5, 1.0, 1.0, 0.5]


def _snippet_trace(durations_us, *, between="work"):
    tb = TraceBuilder()
    t = 0.0
    tb.call(0, "MPI_Barrier", t, t + 1e-6, coll={})
    t += 1e-6
    for d in durations_us:
        tb.call(0, between, t, t + d * 1e-6)
        t += d * 1e-6
        tb.call(0, "MPI_Barrier", t, t + 1e-6, coll={})
        t += 1e-6
    return tb.build()


def test_worked_example_trace():
    r = variance(_snippet_trace([100, 102, 99, 150, 101]), slices=5)
    inst = r["instances"]
    comp = inst[inst["kind"] == "computation"]
    assert comp["perf"].round(3).tolist() == [0.99, 0.971, 1.0, 0.66, 0.98]
    assert comp["slow"].tolist() == [False, False, False, True, False]
    assert set(comp["site"].astype(str)) == {"MPI_Barrier -> MPI_Barrier"}
    slow = r["slow"]
    assert len(slow) == 1 and slow["kind"].iloc[0] == "computation"
    # the slow slice lies inside the 150 us instance ([305, 455] us; slices are 111.6 us wide)
    assert 305e-6 <= slow["start"].iloc[0] < slow["end"].iloc[0] <= 455e-6
    assert slow["perf"].iloc[0] == pytest.approx(0.66)
    g = r["groups"].set_index("kind").loc["computation"]
    assert (g["instances"], g["slow"], g["t_min"]) == (5, 1, pytest.approx(99e-6))
    assert r["matrix"].shape == (1, 5)


def test_small_groups_and_different_work_are_not_compared():
    r = variance(_snippet_trace([100, 102, 99, 150]), slices=4)
    assert (r["instances"]["kind"] == "computation").sum() == 0  # only 4 instances
    assert r["slow"].empty
    tb = TraceBuilder()
    t = 0.0
    tb.call(0, "MPI_Barrier", t, t + 1e-6, coll={})
    t += 1e-6
    for i, d in enumerate([100, 100, 100, 100, 100, 300, 300, 300, 300, 300]):
        tb.call(0, "work" if i < 5 else "other", t, t + d * 1e-6)  # different regions: different groups
        t += d * 1e-6
        tb.call(0, "MPI_Barrier", t, t + 1e-6, coll={})
        t += 1e-6
    inst = variance(tb.build())["instances"]
    comp = inst[inst["kind"] == "computation"]
    assert comp["group"].nunique() == 2 and np.allclose(comp["perf"], 1.0)


def test_sampled_snippets_are_one_group_named_by_the_code_they_ran():
    """Samples between the calls (0 to 3 per snippet) change neither the grouping nor the timing; they name the code."""
    tb = TraceBuilder()
    tb.define_region("solve", file="/src/solver.c", line=42)
    tb.enter(0, 0.0, "main", file="app.c", line=1)
    t = 0.0
    tb.call(0, "MPI_Barrier", t, t + 1e-6, coll={})
    t += 1e-6
    for d, n in zip([100, 102, 99, 150, 101], [3, 3, 1, 0, 3]):
        e = t + d * 1e-6
        for k in range(n):  # samples of `solve` tiling n quarters of the snippet
            tb.sample(0, t + (k + 1) * 0.25 * (e - t), ["solve"], 0.25 * (e - t))
        tb.call(0, "MPI_Barrier", e, e + 1e-6, coll={})
        t = e + 1e-6
    tb.leave(0, t)
    r = variance(tb.build(), slices=5)
    comp = r["instances"][r["instances"]["kind"] == "computation"]
    assert comp["group"].nunique() == 1
    assert comp["perf"].round(3).tolist() == [0.99, 0.971, 1.0, 0.66, 0.98]
    # three quarters sampled in solve: solve; one quarter or none: main's own code
    solve, main = "solve (solver.c:42)", "main (app.c:1)"
    assert comp["code"].tolist() == [solve, solve, main, main, solve]
    assert r["groups"].set_index("kind").loc["computation", "code"] == solve  # 303 us against 249 us
    assert r["slow"]["code"].tolist() == [main]  # the slow one (150 us) held no sample


def test_cluster_within_tolerance():
    assert cluster_within(np.zeros(4), np.array([100.0, 101.0, 103.0, 200.0])).tolist() == [0, 0, 1, 2]
    assert cluster_within(np.array([0, 1, 0]), np.array([5.0, 5.0, 5.05])).tolist() == [0, 1, 0]


def test_matrix_is_overlap_weighted():
    # slices of width 1 over [0, 4); a 1.0 instance on [0.5, 2.5] and a 0.5 instance on [1.5, 2.0]
    m = performance_matrix(
        np.array([0, 0]), np.array([0.5, 1.5]), np.array([2.5, 2.0]), np.array([1.0, 0.5]), 0.0, 4.0, 4
    )
    assert m.weight[0].tolist() == [0.5, 1.5, 0.5, 0.0]
    assert m.values[0, :3].tolist() == pytest.approx([1.0, (1.0 * 1 + 0.5 * 0.5) / 1.5, 1.0])
    assert np.isnan(m.values[0, 3])


def test_synthetic_slow_rank_is_found():
    pag = synthetic.trace(nprocs=6, iterations=40, slow_rank=4, seed=5)
    r = variance(pag, slices=8)
    slow = r["slow"]
    assert set(slow["process"]) == {4}
    assert (slow["kind"] == "computation").all()
    assert slow["slices"].sum() == 8  # slow the whole run
    assert r["matrix"].loc[4].max() < 0.6 < r["matrix"].drop(index=4).min().min()
    # compared only with itself, the slow rank is not slow
    assert variance(pag, slices=8, per_process=True)["slow"].empty


def test_errors():
    pag = _snippet_trace([100] * 5)
    with pytest.raises(PassError, match="slices must be >= 1"):
        variance(pag, slices=0)
    with pytest.raises(PassError, match="threshold must be in"):
        variance(pag, threshold=1.5)
    with pytest.raises(PassError, match="no counter column 'PAPI_TOT_INS'"):
        variance(pag, counter="PAPI_TOT_INS")
    with pytest.raises(PassError, match="pass 'variance' needs a trace-backed PAG"):
        variance(synthetic.profile(10, 2))


def test_instruction_counter_splits_groups():
    pag = _snippet_trace([100] * 5 + [200] * 5)
    iv = pag.trace.intervals.copy()
    work = (pag.vertex_table["name"].astype(str) == "work").to_numpy()[iv["vertex"].to_numpy()]
    # the slow half of the instances also executes twice the instructions: different work, not variance
    iv["PAPI_TOT_INS"] = 0.0
    iv.loc[work, "PAPI_TOT_INS"] = [1e6] * 5 + [2e6] * 5
    tr = pag.trace
    with_ctr = perflow.PAG(
        pag.vertex_table, pag.metrics, trace=perflow.Trace(iv, tr.messages, tr.collectives, tr.comms, tr.comm_names)
    )
    plain = variance(pag)["instances"]
    assert plain[plain["kind"] == "computation"]["slow"].sum() == 5
    counted = variance(with_ctr)["instances"]  # PAPI_TOT_INS is picked up by default
    comp = counted[counted["kind"] == "computation"]
    assert comp["group"].nunique() == 2 and not comp["slow"].any()
    assert variance(with_ctr, counter="PAPI_TOT_INS")["slow"].empty
