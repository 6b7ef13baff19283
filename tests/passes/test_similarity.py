"""Process similarity: groups and outliers on hand-made vectors and on a slow-rank trace."""

from __future__ import annotations

import pytest

import perflow
from perflow.errors import PassError
from perflow.passes.similarity import process_similarity, ranges

from .profile_data import literal, read_shared, slow_rank_trace


@pytest.fixture(scope="module")
def pag() -> perflow.PAG:
    # 6 processes: 0-3 alike, 4 spends 5 s more in io, 5 is alike to 0-3 but 1% slower
    return literal(
        [
            {"name": "compute", "metrics": {"time_exc": [10, 10, 10, 10, 10, 10.1]}},
            {"name": "io", "metrics": {"time_exc": [1, 1, 1, 1, 6, 1]}},
        ],
        nprocs=6,
    )


def test_groups_and_outliers(pag: perflow.PAG) -> None:
    res = process_similarity(pag)
    procs, groups = res["processes"], res["groups"]
    assert procs["cluster"].tolist() == [0, 0, 0, 0, 1, 0]
    assert procs["outlier"].tolist() == [False, False, False, False, True, False]
    # mean total (11 * 4 + 16 + 11.1) / 6 = 11.85; main group's mean vector: compute 10.02, io 1;
    # process 4 (10, 6) is |10 - 10.02| + |6 - 1| = 5.02 away
    assert procs.loc[4, "distance"] == pytest.approx(5.02 / 11.85, rel=1e-9)
    assert procs.loc[0, "distance"] == pytest.approx(0.02 / 11.85, rel=1e-9)
    assert groups["size"].tolist() == [5, 1]
    assert groups["processes"].tolist() == ["0-3,5", "4"]
    assert groups.loc[1, "name"] == "io" and groups.loc[1, "difference"] == pytest.approx(5.0)
    assert groups.loc[0, "vertex"] == -1


def test_settings(pag: perflow.PAG) -> None:
    fine = process_similarity(pag, threshold=0.005)["groups"]
    assert fine["processes"].tolist() == ["0-3", "4", "5"]
    assert process_similarity(pag, n_clusters=1)["groups"]["size"].tolist() == [6]
    assert process_similarity(pag, method="ward", n_clusters=2)["groups"]["processes"].tolist() == ["0-3,5", "4"]
    assert process_similarity(pag, outlier_size=0)["processes"]["outlier"].sum() == 0
    with pytest.raises(PassError, match="method must be one of"):
        process_similarity(pag, method="kmeans")
    with pytest.raises(PassError, match="n_clusters must be >= 1"):
        process_similarity(pag, n_clusters=0)


def test_ranges() -> None:
    assert ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert ranges([]) == ""


def test_slow_rank_trace() -> None:
    res = process_similarity(slow_rank_trace())
    g = res["groups"]
    # the slow rank and its two waiting neighbours stand apart from the rest
    assert g["processes"].tolist() == ["0-1,5-7", "2,4", "3"]
    assert g.loc[2, "name"] == "compute" and bool(g.loc[2, "outlier"])


def test_real_profile() -> None:
    pag = read_shared("caliper", "lulesh-json", "lulesh-annotation-profile.json", format="caliper")
    res = process_similarity(pag)
    assert res["processes"]["cluster_size"].sum() >= len(res["processes"])
    assert res["groups"]["size"].sum() == len(res["processes"])
