"""The linear-time pairing helpers of message matching against plain Python references."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perflow.trace.match import _rank_codes_py, nth_pairs, rank_within

keys = st.lists(st.integers(-3, 6) | st.sampled_from([2**40 + 1, -(2**50)]), max_size=40)


@settings(max_examples=200, deadline=None)
@given(keys)
def test_rank_within(k):
    seen: dict[int, int] = {}
    want = []
    for x in k:
        want.append(seen.get(x, 0))
        seen[x] = seen.get(x, 0) + 1
    assert rank_within(np.array(k, dtype=np.int64)).tolist() == want


@settings(max_examples=200, deadline=None)
@given(keys, keys)
def test_nth_pairs(a, b):
    positions: dict[int, list[int]] = {}
    for j, x in enumerate(b):
        positions.setdefault(x, []).append(j)
    used: dict[int, int] = {}
    want = []
    for x in a:
        r = used.get(x, 0)
        used[x] = r + 1
        want.append(positions[x][r] if r < len(positions.get(x, [])) else -1)
    assert nth_pairs(np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)).tolist() == want


def test_reference_counting_kernel():
    assert _rank_codes_py(np.array([0, 1, 0, 0, 2]), 3).tolist() == [0, 0, 1, 2, 0]
