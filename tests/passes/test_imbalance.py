"""Imbalance passes: the worked example t = [4, 6, 8, 10], dense semantics, outliers, threads, real data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.errors import MetricError, PassError
from perflow.passes.imbalance import imbalance, imbalance_outliers, imbalanced_vertices, outlier_vertices

from .profile_data import literal, read_shared, slow_rank_trace


@pytest.fixture(scope="module")
def worked() -> perflow.PAG:
    return literal(
        [
            {"name": "work", "metrics": {"time_exc": [4.0, 6.0, 8.0, 10.0]}},
            {"name": "even", "metrics": {"time_exc": [5.0, 5.0, 5.0, 5.0]}},
            {"name": "only_rank0", "metrics": {"time_exc": {0: 4.0}}},
        ],
        nprocs=4,
    )


def test_worked_example(worked: perflow.PAG) -> None:
    df = imbalance(worked).set_index("name")
    w = df.loc["work"]
    assert w["mean"] == 7.0 and w["max"] == 10.0 and w["min"] == 4.0 and w["n"] == 4
    assert w["imbalance"] == pytest.approx(0.30)
    assert w["imbalance_time"] == pytest.approx(3.0)
    assert w["percent_imbalance"] == pytest.approx(42.857, abs=1e-3)
    assert w["craypat_percent"] == pytest.approx(40.0)
    assert w["load_balance"] == pytest.approx(0.70)
    assert w["max_over_mean"] == pytest.approx(10 / 7)
    # std of [4, 6, 8, 10] is sqrt(5); min-max-normalised values [0, 1/3, 2/3, 1] have std sqrt(5)/6
    assert w["std"] == pytest.approx(np.sqrt(5))
    assert w["normalized_std"] == pytest.approx(np.sqrt(5) / 6)
    assert w["max_process"] == 3
    e = df.loc["even"]
    assert e["imbalance"] == 0.0 and e["load_balance"] == 1.0 and e["normalized_std"] == 0.0


def test_dense_semantics(worked: perflow.PAG) -> None:
    # only rank 0 ran it: values [4, 0, 0, 0], mean 1, imbalance (4-1)/4, CrayPat 75% * 4/3 = 100%
    r = imbalance(worked).set_index("name").loc["only_rank0"]
    assert r["mean"] == 1.0 and r["min"] == 0.0 and r["max_process"] == 0
    assert r["imbalance"] == pytest.approx(0.75)
    assert r["craypat_percent"] == pytest.approx(100.0)
    assert r["percent_imbalance"] == pytest.approx(300.0)


def test_ranking_and_threshold(worked: perflow.PAG) -> None:
    df = imbalance(worked)
    assert df["name"].tolist() == ["work", "only_rank0", "even"]  # imbalance time 3, 3 (tie: lower id first), 0
    assert df["imbalance_time"].tolist() == [3.0, 3.0, 0.0]
    assert imbalance(worked, criterion="percent_imbalance", threshold=50)["name"].tolist() == ["only_rank0"]
    assert imbalance(worked, criterion="load_balance", threshold=0.8)["name"].tolist() == ["only_rank0", "work"]
    assert "main" not in imbalance(worked)["name"].tolist()  # no time: skipped
    assert imbalanced_vertices(worked).names() == ["only_rank0", "work"]  # normalised std 0.433, 0.373 > 0.15
    assert imbalanced_vertices(worked, threshold=0.4).names() == ["only_rank0"]
    assert imbalanced_vertices(worked, min_share=0.2).names() == ["work"]  # only_rank0 is 4 of 52


def test_outliers(worked: perflow.PAG) -> None:
    # work: 10 > 1.3 * 7 = 9.1 on rank 3; only_rank0: 4 > 1.3 on rank 0
    df = imbalance_outliers(worked)
    assert list(zip(df["name"], df["process"])) == [("work", 3), ("only_rank0", 0)]  # excess 3, 3: by vertex id
    assert df["ratio"].tolist() == [pytest.approx(10 / 7), 4.0]
    assert df["excess"].tolist() == [3.0, 3.0]
    assert len(imbalance_outliers(worked, k=1.5)) == 1
    pv = outlier_vertices(worked)
    assert sorted(pv) == [(1, 3, 0), (3, 0, 0)]
    with pytest.raises(PassError, match="k must be positive"):
        imbalance_outliers(worked, k=0)


def test_threads() -> None:
    # vertex on 2 processes x 2 threads: process 0 threads [1, 3], process 1 threads [2, 2]
    vt = pd.DataFrame({"name": ["main", "loop"], "parent": [-1, 0]})
    m = pd.DataFrame(
        {"vertex": [1, 1, 1, 1], "process": [0, 0, 1, 1], "thread": [0, 1, 0, 1], "time_exc": [1.0, 3.0, 2.0, 2.0]}
    )
    pag = perflow.PAG.from_frames(vt, m)
    by_proc = imbalance(pag).iloc[0]
    assert by_proc["n"] == 2 and by_proc["imbalance"] == 0.0  # 4 and 4
    by_loc = imbalance(pag, across="location").iloc[0]
    assert by_loc["n"] == 4 and by_loc["max"] == 3.0 and by_loc["mean"] == 2.0
    assert (by_loc["max_process"], by_loc["max_thread"]) == (0, 1)
    out = imbalance_outliers(pag, across="location")
    assert list(zip(out["process"], out["thread"])) == [(0, 1)]
    with pytest.raises(
        PassError, match="pass 'imbalance': setting across='thread' is not one of 'process', 'location'"
    ):
        imbalance(pag, across="thread")


def test_errors(worked: perflow.PAG) -> None:
    with pytest.raises(PassError, match="unknown imbalance criterion 'variance'"):
        imbalance(worked, criterion="variance")
    with pytest.raises(MetricError, match="unknown metric 'cycles'"):
        imbalance(worked, metric="cycles")


def test_slow_rank_trace() -> None:
    pag = slow_rank_trace()
    comp = imbalance(pag).set_index("name").loc["compute"]
    assert comp["max_process"] == 3
    assert comp["max_over_mean"] == pytest.approx(2 / (9 / 8), rel=0.05)  # one rank at 2x of 8
    out = imbalance_outliers(pag)
    c = out[out["name"] == "compute"]
    assert c["process"].tolist() == [3]


def test_vectorised_matches_numpy_on_synthetic_profile() -> None:
    pag = perflow.synthetic.profile(300, 16, seed=3)
    df = imbalance(pag).set_index("vertex").sort_index()
    dense = np.zeros((pag.n_vertices, 16))
    vf = pag.parallel.vertex_frame
    dense[vf["vertex"], vf["process"]] = pag.metrics["time_exc"].to_numpy()
    mx, mean = dense.max(axis=1), dense.mean(axis=1)
    ids = df.index.to_numpy()
    assert np.allclose(df["imbalance"], (mx - mean)[ids] / mx[ids])
    assert np.allclose(df["normalized_std"], dense.std(axis=1)[ids] / (mx - dense.min(axis=1))[ids])


def test_real_profile() -> None:
    pag = read_shared("tau", "cpi-mpi", format="tau")
    df = imbalance(pag)
    assert len(df) > 0
    assert ((df["load_balance"] > 0) & (df["load_balance"] <= 1 + 1e-12)).all()
    assert (df["max"] >= df["mean"] - 1e-12).all()
