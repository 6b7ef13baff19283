"""Differential pass: alignment by call path, paths in one run only, normalisation, ordering."""

from __future__ import annotations

import numpy as np
import pytest

import perflow
from perflow.errors import MetricError, PassError
from perflow.passes.differential import differential

from .profile_data import literal, read_shared


@pytest.fixture(scope="module")
def runs() -> tuple[perflow.PAG, perflow.PAG]:
    a = literal(
        [
            {
                "name": "solve",
                "metrics": {"time_exc": [1.0, 1.0]},
                "children": [{"name": "MPI_Allreduce", "metrics": {"time_exc": [1.0, 1.0]}}],
            },
            {"name": "setup", "metrics": {"time_exc": [2.0, 2.0]}},
            {"name": "old_io", "metrics": {"time_exc": [0.5, 0.5]}},
        ],
        nprocs=2,
    )
    # b: ids differ (new_kernel comes first), solve slower, Allreduce much slower, old_io gone
    b = literal(
        [
            {"name": "new_kernel", "metrics": {"time_exc": [0.25, 0.25]}},
            {"name": "setup", "metrics": {"time_exc": [2.0, 2.0]}},
            {
                "name": "solve",
                "metrics": {"time_exc": [1.5, 1.5]},
                "children": [{"name": "MPI_Allreduce", "metrics": {"time_exc": [4.0, 2.0]}}],
            },
        ],
        nprocs=2,
    )
    return a, b


def test_worked_example(runs: tuple[perflow.PAG, perflow.PAG]) -> None:
    a, b = runs
    df = differential(a, b).set_index("call_path")
    # sums over 2 processes: Allreduce 2 -> 6, solve 2 -> 3, old_io 1 -> 0, new_kernel 0 -> 0.5, setup 4 -> 4
    r = df.loc["main/solve/MPI_Allreduce"]
    assert (r["value_a"], r["value_b"], r["diff"], r["ratio"], r["rel_change"]) == (2.0, 6.0, 4.0, 3.0, 2.0)
    assert (r["vertex_a"], r["vertex_b"], r["status"]) == (2, 4, "both")
    gone = df.loc["main/old_io"]
    assert (gone["value_b"], gone["diff"], gone["vertex_b"], gone["status"]) == (0.0, -1.0, -1, "only_a")
    new = df.loc["main/new_kernel"]
    assert (new["value_a"], new["status"], new["vertex_a"]) == (0.0, "only_b", -1)
    assert new["ratio"] == np.inf and new["rel_change"] == np.inf
    assert np.isnan(df.loc["main", "ratio"])  # 0 / 0
    assert df.loc["main/setup", "diff"] == 0.0
    order = differential(a, b)["call_path"].tolist()
    assert order[:3] == ["main/solve/MPI_Allreduce", "main/old_io", "main/solve"]  # |diff| 4, 1, 1 (ties by path)


def test_settings(runs: tuple[perflow.PAG, perflow.PAG]) -> None:
    a, b = runs
    assert differential(a, b, agg="max", k=1)[["call_path", "diff"]].values.tolist() == [
        ["main/solve/MPI_Allreduce", 3.0]
    ]
    assert differential(a, b, sort="diff")["call_path"].iloc[-1] == "main/old_io"
    assert differential(a, b, sort="ratio")["call_path"].iloc[0] == "main/new_kernel"
    assert len(differential(a, b, min_change=0.75)) == 3
    norm = differential(a, b, normalize=True).set_index("call_path")
    # totals: a 9 (2 + 2 + 4 + 1), b 13.5 (0.5 + 4 + 3 + 6)
    assert norm.loc["main/setup", "value_a"] == pytest.approx(4 / 9)
    assert norm.loc["main/setup", "value_b"] == pytest.approx(4 / 13.5)
    assert norm["value_a"].sum() == pytest.approx(1.0) and norm["value_b"].sum() == pytest.approx(1.0)
    inc = differential(a, b, metric="time_inc").set_index("call_path")
    assert inc.loc["main", "diff"] == pytest.approx(4.5)  # 13.5 - 9


def test_errors(runs: tuple[perflow.PAG, perflow.PAG]) -> None:
    a, b = runs
    with pytest.raises(PassError, match="sort must be one of"):
        differential(a, b, sort="size")
    with pytest.raises(MetricError, match="unknown metric 'bytes_sent'"):
        differential(a, b, metric="bytes_sent")


def test_synthetic_versions() -> None:
    base = perflow.synthetic.trace(nprocs=4, iterations=4, seed=0)
    slow = perflow.synthetic.trace(nprocs=4, iterations=4, seed=0, slow_rank=1)
    df = differential(base, slow, agg="max")
    assert df["name"].iloc[0] == "compute"
    assert (df["status"] == "both").all()


def test_real_runs_two_scales() -> None:
    a = read_shared("scaling", "lulesh-caliper", "27_cores.cali", format="caliper")
    b = read_shared("scaling", "lulesh-caliper", "64_cores.cali", format="caliper")
    df = differential(a, b, agg="max")
    assert len(df) >= 45 and (df["status"] == "both").sum() > 0
