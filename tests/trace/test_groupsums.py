"""perflow.trace.groupsums: pandas' group-by sums and running maxima, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from perflow.trace.groupsums import covered_to, dense_groups, group_sums, sorted_groups


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a, dtype=np.float64).tobytes()


def test_kahan_sums_equal_pandas_where_a_plain_sum_does_not() -> None:
    # 1e16 then many 1.0: a plain left-to-right sum loses every 1.0, Kahan (pandas) keeps them
    # (a second group between them: rows in group order are summed by np.add.reduceat, not by Kahan's sum)
    vals = np.r_[1e16, np.ones(1000), -1e16, 0.1 * np.arange(50), 7.0]
    labels = np.r_[np.zeros(len(vals) - 2, np.int64), 1, 0]
    assert not sorted_groups(labels) and sorted_groups(np.sort(labels))
    got = group_sums(labels, vals, 2)[:, 0]
    want = pd.Series(vals).groupby(labels).sum().to_numpy()
    assert _bits(got) == _bits(want)
    assert got[0] == math.fsum(vals[labels == 0]) != np.cumsum(vals[labels == 0])[-1]  # the compensation matters


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_group_sums_equal_pandas_on_random_tables(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 20_000
    keys = [rng.integers(-3, 40, n), rng.integers(0, 7, n), rng.integers(0, 3, n)]
    vals = rng.lognormal(0.0, 6.0, (n, 3)) * rng.choice([-1.0, 1.0], (n, 3))
    vals[rng.integers(0, n, 30), 1] = np.nan  # skipped, as pandas skips them
    vals[rng.integers(0, n, 3), 2] = np.inf
    frame = pd.DataFrame({"a": keys[0], "b": keys[1], "c": keys[2], "x": vals[:, 0], "y": vals[:, 1], "z": vals[:, 2]})
    want = frame.groupby(["a", "b", "c"], sort=True)[["x", "y", "z"]].sum().reset_index()
    groups = dense_groups(keys, 1 << 20)
    assert groups is not None
    label, gk = groups
    sums = group_sums(label, vals, len(gk[0]))
    for i, c in enumerate("abc"):
        np.testing.assert_array_equal(gk[i], want[c].to_numpy())
    for i, c in enumerate("xyz"):
        assert _bits(sums[:, i]) == _bits(want[c].to_numpy()), c


def test_dense_groups_refuse_a_key_space_beyond_the_limit() -> None:
    keys = [np.array([0, 10**6]), np.array([0, 10**6])]
    assert dense_groups(keys, 1 << 20) is None
    label, gk = dense_groups([np.array([5, 2, 5])], 10)  # type: ignore[misc]
    assert label.tolist() == [1, 0, 1] and gk[0].tolist() == [2, 5]


def test_covered_to_is_the_shifted_cummax_per_key() -> None:
    key = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2])
    end = np.array([3.0, 1.0, np.nan, 2.0, 5.0, 4.0, 1.0, 7.0, 0.5])
    prev = pd.Series(end).groupby(key, sort=False).cummax().shift(1).to_numpy()
    want = np.where(np.r_[True, key[1:] != key[:-1]], -np.inf, prev)
    got = covered_to(key, end)
    assert _bits(got) == _bits(want)
    assert got[:3].tolist() == [-np.inf, 3.0, 3.0] and np.isnan(got[3]) and got[4:6].tolist() == [-np.inf, 5.0]
