"""Hotspot pass: worked example, inclusive shares, selections, real data."""

from __future__ import annotations

import numpy as np
import pytest

import perflow
from perflow.errors import MetricError, PassError
from perflow.passes.hotspot import hotspot, hotspot_set

from .profile_data import literal, read_shared, slow_rank_trace


@pytest.fixture(scope="module")
def pag() -> perflow.PAG:
    # exclusive times on 4 processes; totals: a 20, b 10, c 6, d 4 (main 0) -> grand total 40
    return literal(
        [
            {
                "name": "a",
                "metrics": {"time_exc": [2.0, 4.0, 6.0, 8.0]},
                "children": [
                    {"name": "MPI_Wait", "metrics": {"time_exc": [4.0, 0.0, 0.0, 0.0]}},
                ],
            },
            {"name": "b", "metrics": {"time_exc": [2.5, 2.5, 2.5, 2.5]}},
            {"name": "MPI_Allreduce", "metrics": {"time_exc": [0.0, 0.0, 0.0, 6.0]}},
        ],
        nprocs=4,
    )


def test_worked_example(pag: perflow.PAG) -> None:
    df = hotspot(pag, k=3)
    assert df["name"].tolist() == ["a", "b", "MPI_Allreduce"]
    assert df["value"].tolist() == [20.0, 10.0, 6.0]
    assert np.allclose(df["share"], [0.5, 0.25, 0.15])
    assert df["max"].tolist() == [8.0, 2.5, 6.0]
    assert df["mean"].tolist() == [5.0, 2.5, 1.5]
    assert df["max_process"].tolist() == [3, 0, 3]
    assert df["call_path"].tolist() == ["main/a", "main/b", "main/MPI_Allreduce"]
    assert df.attrs["total"] == 40.0 and df.attrs["metric"] == "time_exc"
    assert list(df.columns) == ["vertex", "name", "kind", "call_path", "value", "share", "max", "mean", "max_process"]
    full = hotspot(pag, k=100)
    assert np.isclose(full["share"].sum(), 1.0)


def test_aggregations_and_filters(pag: perflow.PAG) -> None:
    df = hotspot(pag, agg="max", k=2)
    assert df["name"].tolist() == ["a", "MPI_Allreduce"]  # max: a 8, Allreduce 6, MPI_Wait 4, b 2.5
    assert df["value"].tolist() == [8.0, 6.0]
    mpi = hotspot(pag, kind="mpi")
    assert mpi["name"].tolist() == ["MPI_Allreduce", "MPI_Wait"]
    assert np.allclose(mpi["share"], [0.15, 0.1])  # shares stay relative to the whole run
    assert hotspot(pag, name="MPI_W*")["name"].tolist() == ["MPI_Wait"]
    assert hotspot(pag, min_share=0.2)["name"].tolist() == ["a", "b"]
    assert hotspot(pag, metric="time_exc", agg="count", k=1)["value"].tolist() == [4.0]


def test_inclusive(pag: perflow.PAG) -> None:
    df = hotspot(pag, mode="inclusive", k=3)
    # inclusive: main 40, a 24 (20 + MPI_Wait 4), b 10; shares relative to the root total 40
    assert df["name"].tolist() == ["main", "a", "b"]
    assert df["value"].tolist() == [40.0, 24.0, 10.0]
    assert np.allclose(df["share"], [1.0, 0.6, 0.25])
    assert hotspot(pag, metric="time_inc", k=1)["value"].tolist() == [40.0]
    assert hotspot(pag, metric="time", mode="exclusive", k=1)["value"].tolist() == [20.0]


def test_set_output(pag: perflow.PAG) -> None:
    vs = hotspot_set(pag, k=2)
    assert isinstance(vs, perflow.VertexSet)
    assert vs.names() == ["a", "b"]
    assert hotspot_set(pag.vertices.filter(kind="mpi"), k=1).names() == ["MPI_Allreduce"]


def test_errors(pag: perflow.PAG) -> None:
    with pytest.raises(MetricError, match="unknown metric 'tim_exc'"):
        hotspot(pag, metric="tim_exc")
    with pytest.raises(PassError, match="unknown aggregation 'avg'"):
        hotspot(pag, agg="avg")
    with pytest.raises(PassError, match="mode must be 'exclusive' or 'inclusive'"):
        hotspot(pag, mode="self")
    with pytest.raises(PassError, match="k must be >= 0"):
        hotspot(pag, k=-2)


def test_slow_rank_trace() -> None:
    df = hotspot(slow_rank_trace(), k=3, agg="max")
    assert df["name"].iloc[0] == "compute"
    assert df["max_process"].iloc[0] == 3


@pytest.mark.parametrize(
    ("fmt", "parts"), [("hpctoolkit", ("hpctoolkit", "cpi-xml")), ("cube", ("cube", "scorep-cpi", "profile.cubex"))]
)
def test_real_cpi_profiles(fmt: str, parts: tuple[str, ...]) -> None:
    pag = read_shared(*parts, format=fmt)
    df = hotspot(pag, k=pag.n_vertices)
    assert np.isclose(df["share"].sum(), 1.0)
    total = pag.aggregate("time_exc").sum()
    assert np.isclose(df.attrs["total"], total)
    if parts[0] == "hpctoolkit":
        # README fact: exclusive time summed over all nodes and ranks is 3,998,242 microseconds
        assert np.isclose(total, 3.998242, rtol=1e-6) or np.isclose(total, 3998242, rtol=1e-6)
    assert (df["max"] >= df["mean"] - 1e-12).all()
