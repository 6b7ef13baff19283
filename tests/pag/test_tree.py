import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perflow.errors import PAGError
from perflow.pag.tree import ancestors_mask, descendants_mask, tree_index


def _py_preorder(parent):
    children = {}
    for v, p in enumerate(parent):
        children.setdefault(int(p), []).append(v)
    out, stack = [], list(reversed(children.get(-1, [])))
    while stack:
        v = stack.pop()
        out.append(v)
        stack.extend(reversed(children.get(v, [])))
    return out


@st.composite
def forests(draw):
    n = draw(st.integers(1, 60))
    parent = [-1]
    for i in range(1, n):
        parent.append(draw(st.integers(-1, i - 1)))
    return np.array(parent)


def test_small_tree_by_hand():
    #      0        5
    #    1   2      6
    #   3 4
    parent = np.array([-1, 0, 0, 1, 1, -1, 5])
    t = tree_index(parent)
    assert t.depth.tolist() == [0, 1, 1, 2, 2, 0, 1]
    assert t.order.tolist() == [0, 1, 3, 4, 2, 5, 6]
    assert t.size.tolist() == [5, 3, 1, 1, 1, 2, 1]
    assert np.flatnonzero(descendants_mask(t, [1])).tolist() == [3, 4]
    assert np.flatnonzero(descendants_mask(t, [1, 5], include_self=True)).tolist() == [1, 3, 4, 5, 6]
    assert np.flatnonzero(ancestors_mask(parent, [4])).tolist() == [0, 1]
    assert np.flatnonzero(ancestors_mask(parent, [4, 6], include_self=True)).tolist() == [0, 1, 4, 5, 6]


@settings(max_examples=60, deadline=None)
@given(forests())
def test_preorder_matches_depth_first_walk(parent):
    t = tree_index(parent)
    assert t.order.tolist() == _py_preorder(parent)
    # subtree sizes: count descendants by walking up from every vertex
    size = np.ones(len(parent), dtype=int)
    for v in range(len(parent)):
        p = parent[v]
        while p >= 0:
            size[p] += 1
            p = parent[p]
    assert t.size.tolist() == size.tolist()


@settings(max_examples=40, deadline=None)
@given(forests(), st.data())
def test_descendants_and_ancestors_agree(parent, data):
    t = tree_index(parent)
    sel = data.draw(st.lists(st.integers(0, len(parent) - 1), min_size=1, max_size=5))
    desc = descendants_mask(t, np.array(sel))
    for v in range(len(parent)):
        # v is a descendant of a selected vertex iff a selected vertex is a proper ancestor of v
        anc = set(np.flatnonzero(ancestors_mask(parent, [v])).tolist())
        assert desc[v] == bool(anc & set(sel))


def test_cycle_and_dangling_parent_are_errors():
    with pytest.raises(PAGError, match="cycle or a dangling parent"):
        tree_index(np.array([-1, 2, 1]))
    with pytest.raises(PAGError, match="vertex 1 has parent 7"):
        tree_index(np.array([-1, 7]))
