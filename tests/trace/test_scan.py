"""The compiled enter/leave scan against its pure-Python reference."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perflow.trace import scan


@st.composite
def streams(draw, valid=True):
    nloc = draw(st.integers(1, 4))
    loc, kind, region = [], [], []
    for lc in range(nloc):
        stack = []
        for _ in range(draw(st.integers(0, 30))):
            if stack and draw(st.booleans()):
                r = stack.pop()
                if not valid and draw(st.integers(0, 9)) == 0:
                    r = (r + 1) % 5
                loc.append(lc), kind.append(1), region.append(r)
            else:
                r = draw(st.integers(0, 4))
                stack.append(r)
                loc.append(lc), kind.append(0), region.append(r)
        if valid or draw(st.booleans()):
            while stack:
                loc.append(lc), kind.append(1), region.append(stack.pop())
    return np.array(loc, dtype=np.int64), np.array(kind, dtype=np.int8), np.array(region, dtype=np.int64)


def _same(a, b):
    for f in ("enter", "leave", "parent", "callpath", "cp_parent", "cp_region"):
        assert getattr(a, f).tolist() == getattr(b, f).tolist(), f
    assert (a.error, a.error_at) == (b.error, b.error_at)
    if not a.error:
        assert a.open_after.tolist() == b.open_after.tolist()


@settings(max_examples=150, deadline=None)
@given(streams(valid=True))
def test_compiled_scan_equals_reference_on_nested_streams(s):
    a, b = scan.scan_regions(*s), scan.scan_regions_py(*s)
    assert a.error == 0
    _same(a, b)


@settings(max_examples=150, deadline=None)
@given(streams(valid=False), st.booleans())
def test_compiled_scan_equals_reference_on_broken_streams(s, close):
    _same(scan.scan_regions(*s, close_open=close), scan.scan_regions_py(*s, close_open=close))


@settings(max_examples=100, deadline=None)
@given(streams(valid=True), st.integers(0, 2**16))
def test_compiled_times_equal_reference(s, seed):
    """Enter/leave times and the children's inclusive time the compiled scan sums as it goes."""
    t = np.cumsum(np.random.default_rng(seed).random(len(s[0])))
    a, b = scan.scan_regions(*s, time=t), scan.scan_regions_py(*s, time=t)
    for f in ("t_enter", "t_leave"):
        assert getattr(a, f).tolist() == getattr(b, f).tolist(), f
    np.testing.assert_allclose(a.child_inc, b.child_inc, rtol=1e-12, atol=0)


def test_scan_by_hand():
    # loc 0: A( B() C() )   loc 1: A( B() )
    loc = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    kind = np.array([0, 0, 1, 0, 1, 1, 0, 0, 1, 1])
    reg = np.array([0, 1, 1, 2, 2, 0, 0, 1, 1, 0])
    r = scan.scan_regions(loc, kind, reg)
    assert r.enter.tolist() == [0, 1, 3, 6, 7]
    assert r.leave.tolist() == [5, 2, 4, 9, 8]
    assert r.parent.tolist() == [-1, 0, 0, -1, 3]
    assert r.callpath.tolist() == [0, 1, 2, 0, 1]  # same path on both locations shares an id
    assert r.cp_parent.tolist() == [-1, 0, 0]
    assert r.open_after.tolist() == [0, 1, 0, 2, 0, -1, 3, 4, 3, -1]


@pytest.mark.parametrize(
    "kind,region,code",
    [([1], [0], 1), ([0, 1], [0, 1], 2), ([0, 0, 1], [0, 1, 1], 3)],
)
def test_scan_error_codes(kind, region, code):
    n = len(kind)
    r = scan.scan_regions(np.zeros(n, dtype=np.int64), np.array(kind), np.array(region))
    assert r.error == code
