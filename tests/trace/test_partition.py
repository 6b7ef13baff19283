"""The affinity partitioner: worked example, balance, and the alternatives (no Dask needed)."""

from __future__ import annotations

import numpy as np
import pytest

from perflow.trace.partition import (
    block,
    comm_graph,
    cut_weight,
    partition_graph,
    partition_ranks,
    round_robin,
)


def _example() -> tuple:
    # w(0,1) = 10, w(2,3) = 10, w(1,2) = 1, given as directed traffic that sums to those weights
    return np.array([0, 2, 1]), np.array([1, 3, 2]), np.array([10.0, 10.0, 1.0])


def test_worked_example_affinity_cuts_1_round_robin_21() -> None:
    src, dst, w = _example()
    g = comm_graph(src, dst, w, 4)
    assert g.toarray().tolist() == [[0, 10, 0, 0], [10, 0, 1, 0], [0, 1, 0, 10], [0, 0, 10, 0]]
    assert cut_weight(g, round_robin(4, 2)) == 21.0
    a = partition_graph(g, np.ones(4), 2)
    assert cut_weight(g, a) == 1.0
    assert a[0] == a[1] and a[2] == a[3] and a[0] != a[2]
    p = partition_ranks(np.arange(4), np.ones(4), (src, dst, w), 2)
    assert p.cut == 1.0 and p.total_comm == 21.0 and p.imbalance == 1.0
    assert partition_ranks(np.arange(4), np.ones(4), (src, dst, w), 2, method="round_robin").cut == 21.0


def test_traffic_in_both_directions_adds_up() -> None:
    g = comm_graph(np.array([0, 1, 1]), np.array([1, 0, 0]), np.array([3.0, 4.0, 1.0]), 2)
    assert g[0, 1] == g[1, 0] == 8.0


def test_grid_beats_round_robin_and_stays_balanced() -> None:
    n = 16
    idx = np.arange(n * n).reshape(n, n)
    src = np.r_[idx[:, :-1].ravel(), idx[:-1, :].ravel()]
    dst = np.r_[idx[:, 1:].ravel(), idx[1:, :].ravel()]
    for k in (2, 3, 4, 8):
        p = partition_ranks(np.arange(n * n), np.ones(n * n), (src, dst, np.ones(len(src))), k, tol=0.05)
        assert p.imbalance <= 1.05 + 1e-9
        assert p.cut < cut_weight(p.graph, round_robin(n * n, k)) / 3
        assert p.cut <= cut_weight(p.graph, block(np.ones(n * n), k))
        assert set(np.unique(p.assign)) == set(range(k))
    # 2 parts of a 16 x 16 grid: the best cut is one grid line (16 edges)
    assert partition_ranks(np.arange(n * n), np.ones(n * n), (src, dst, np.ones(len(src))), 2).cut == 16.0


def test_event_weights_are_balanced_not_rank_counts() -> None:
    # a ring of 8 where rank 0 has as many events as the other 7 together
    s = np.arange(8)
    w = np.r_[7.0, np.ones(7)]
    p = partition_ranks(s, w, (s, (s + 1) % 8, np.ones(8)), 2)
    assert sorted(p.part_weights.tolist()) == [7.0, 7.0]
    assert p.members(int(p.assign[0])).tolist() == [0]


def test_block_and_explicit_partitions() -> None:
    assert block(np.ones(6), 3).tolist() == [0, 0, 1, 1, 2, 2]
    assert block(np.array([4.0, 1, 1, 1, 1]), 2).tolist() == [0, 1, 1, 1, 1]
    p = partition_ranks(np.array([5, 3, 9]), np.ones(3), ([], [], []), 2, method=np.array([1, 0, 1]))
    assert p.processes.tolist() == [3, 5, 9] and p.assign.tolist() == [0, 1, 1] and p.method == "given"
    assert p.part_of(np.array([9, 3, 4])).tolist() == [1, 0, -1]


def test_more_parts_than_ranks_and_errors() -> None:
    p = partition_ranks(np.arange(3), np.ones(3), ([0], [1], [1.0]), 8)
    assert p.n_parts == 3 and sorted(p.assign.tolist()) == [0, 1, 2]
    with pytest.raises(ValueError, match="partition method must be one of"):
        partition_ranks(np.arange(3), np.ones(3), ([], [], []), 2, method="metis")
    with pytest.raises(ValueError, match="one part per process"):
        partition_ranks(np.arange(3), np.ones(3), ([], [], []), 2, method=np.array([0, 1]))
    with pytest.raises(ValueError, match="tol must be non-negative"):
        partition_graph(comm_graph([0], [1], None, 2), np.ones(2), 2, tol=-1)


def test_ranks_that_never_talk() -> None:
    """No point-to-point traffic at all (a trace of collectives only): balanced by events, no crash."""
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    p = partition_ranks(np.arange(3), np.array([10.0, 10.0, 10.0]), none, 2)
    assert sorted(np.bincount(p.assign, minlength=2).tolist()) == [1, 2]
    assert p.cut == 0
