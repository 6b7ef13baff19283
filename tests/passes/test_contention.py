"""Contention passes: across runs at several co-location levels, and inside a trace."""

from __future__ import annotations

import numpy as np
import pytest

import perflow
from perflow.errors import PassError
from perflow.passes.contention import contention, instance_concurrency, trace_contention


def run(c: int) -> perflow.PAG:
    """8 processes at co-location level c: checkpoint writes slow down as sqrt(c) at constant visits;
    compute is constant; exchange does 4c visits, so its growth is more work, not contention."""
    P = 8
    return perflow.PAG.from_literal(
        {
            "name": "main",
            "metrics": {"time_exc": [0.0] * P, "visits": [1] * P},
            "children": [
                {"name": "write_checkpoint", "kind": "io", "metrics": {"time_exc": [c**0.5] * P, "visits": [10] * P}},
                {"name": "compute", "metrics": {"time_exc": [5.0] * P, "visits": [100] * P}},
                {"name": "exchange", "metrics": {"time_exc": [0.04 * c * c] * P, "visits": [4 * c] * P}},
            ],
        },
        attrs={"colocation": c},
    )


@pytest.fixture(scope="module")
def runs() -> list[perflow.PAG]:
    return [run(c) for c in (1, 2, 4, 8)]


def test_across_runs(runs: list[perflow.PAG]) -> None:
    df = contention(runs, level_key="colocation")
    assert df["name"].tolist() == ["write_checkpoint"]
    r = df.iloc[0]
    assert r["slope"] == pytest.approx(0.5) and r["r2"] == pytest.approx(1.0)
    assert r["workload_change"] == 0.0
    assert [r[f"t/visit@{c}"] for c in (1, 2, 4, 8)] == pytest.approx([0.1 * c**0.5 for c in (1, 2, 4, 8)])
    full = contention(runs[::-1], level_key="colocation", all_vertices=True).set_index("name")
    assert full.loc["exchange", "slope"] == pytest.approx(1.0)  # 0.01 * c per visit
    assert full.loc["exchange", "workload_change"] == pytest.approx(7.0)  # 32 / 4 - 1
    assert not full.loc["exchange", "contended"] and not full.loc["compute", "contended"]
    assert full.loc["compute", "slope"] == pytest.approx(0.0, abs=1e-12)
    same = contention(runs, levels=[1, 2, 4, 8])
    assert same["name"].tolist() == ["write_checkpoint"]
    assert contention(runs, level_key="colocation", slope_threshold=0.6).empty


def test_across_runs_errors(runs: list[perflow.PAG]) -> None:
    with pytest.raises(PassError, match="two or more runs"):
        contention(runs[:1])
    with pytest.raises(PassError, match="at least two distinct values"):
        contention(runs)  # every run has 8 processes: no level difference
    with pytest.raises(PassError, match="3 levels given for 4 runs"):
        contention(runs, levels=[1, 2, 3])
    no_visits = perflow.PAG.from_literal({"name": "f", "metrics": {"time_exc": [1.0]}})
    with pytest.raises(PassError, match="needs a 'visits' metric"):
        contention([no_visits, no_visits], levels=[1, 2])


def test_instance_concurrency() -> None:
    v = np.array([0, 0, 0, 1, 1])
    enter = np.array([0.0, 1.0, 5.0, 0.0, 0.5])
    leave = np.array([2.0, 3.0, 6.0, 1.0, 0.6])
    # midpoints 1, 2, 5.5 | 0.5, 0.55: [0,2) and [1,3) overlap at 1 and at 2 ([0,2) has left at 2)
    assert instance_concurrency(v, enter, leave).tolist() == [2, 1, 1, 2, 2]


@pytest.fixture(scope="module")
def io_trace() -> perflow.PAG:
    """8 ranks in phases: `group` ranks write at once and each write takes 0.5 * group;
    then `group` ranks compute for 1.0 regardless of how many run."""
    tb = perflow.TraceBuilder()
    t = 0.0
    for group in (1, 2, 4, 8, 2, 4):
        for p in range(group):
            tb.call(p, "compute", t, t + 1.0)
        t += 1.0
        for p in range(group):
            tb.call(p, "fwrite", t, t + 0.5 * group)
        t += 4.0
    return tb.build()


def test_trace_contention(io_trace: perflow.PAG) -> None:
    df = trace_contention(io_trace, min_instances=4)
    assert df["name"].tolist() == ["fwrite"]
    r = df.iloc[0]
    assert r["kind"] == "io" and r["instances"] == 21 and r["max_concurrency"] == 8
    assert r["slope"] == pytest.approx(1.0) and r["correlation"] == pytest.approx(1.0)
    full = trace_contention(io_trace, min_instances=4, all_vertices=True).set_index("name")
    assert full.loc["compute", "slope"] == pytest.approx(0.0, abs=1e-9)
    assert not full.loc["compute", "contended"]
    assert trace_contention(io_trace, kind="io", min_instances=4)["name"].tolist() == ["fwrite"]
    assert trace_contention(io_trace, name="compute", min_instances=4).empty
    assert trace_contention(io_trace, min_instances=50).empty


def test_trace_contention_needs_a_trace(runs: list[perflow.PAG]) -> None:
    with pytest.raises(PassError, match="trace_contention needs a trace"):
        trace_contention(runs[0])
