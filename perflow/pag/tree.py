"""Vectorised operations on a tree stored as a parent array.

The top-down view stores its calling-context tree as ``parent[v]`` (``-1`` for
roots). These helpers compute depth, pre-order numbering, subtree sizes,
ancestor and descendant sets with a number of numpy passes proportional to
the depth of the tree, never a Python loop per vertex.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._arrays import unique
from ..errors import PAGError

__all__ = ["TreeIndex", "tree_index", "ancestors_mask", "descendants_mask"]


@dataclass(frozen=True)
class TreeIndex:
    """Derived structure of a tree: depth, pre-order position and subtree size.

    Attributes
    ----------
    depth : numpy.ndarray
        Depth of each vertex (roots have depth 0).
    preorder : numpy.ndarray
        Position of each vertex in a depth-first pre-order walk that visits
        children in increasing vertex id.
    size : numpy.ndarray
        Number of vertices in each vertex's subtree, itself included.
    order : numpy.ndarray
        The vertices in pre-order (the inverse permutation of ``preorder``).
    """

    depth: np.ndarray
    preorder: np.ndarray
    size: np.ndarray
    order: np.ndarray


def _depths(parent: np.ndarray) -> np.ndarray:
    n = len(parent)
    depth = np.full(n, -1, dtype=np.int64)
    roots = parent < 0
    depth[roots] = 0
    frontier = np.flatnonzero(roots)
    # children grouped by parent, for a level-by-level walk
    order = np.argsort(parent, kind="stable")
    sorted_parent = parent[order]
    start = np.searchsorted(sorted_parent, np.arange(n), side="left")
    stop = np.searchsorted(sorted_parent, np.arange(n), side="right")
    level = 0
    seen = len(frontier)
    while len(frontier):
        level += 1
        counts = stop[frontier] - start[frontier]
        if counts.sum() == 0:
            break
        idx = np.repeat(start[frontier], counts) + (
            np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        )
        frontier = order[idx]
        depth[frontier] = level
        seen += len(frontier)
    if seen != n:
        bad = int(np.flatnonzero(depth < 0)[0])
        raise PAGError(f"the calling-context tree has a cycle or a dangling parent at vertex {bad}")
    return depth


def tree_index(parent: np.ndarray) -> TreeIndex:
    """Compute depth, pre-order numbering and subtree sizes of a tree.

    Parameters
    ----------
    parent : numpy.ndarray
        ``parent[v]`` is the parent of vertex ``v`` or ``-1`` for a root.

    Returns
    -------
    TreeIndex

    Raises
    ------
    PAGError
        If the parent array has a cycle or refers to a missing vertex.
    """
    parent = np.asarray(parent, dtype=np.int64)
    n = len(parent)
    if n == 0:
        e = np.zeros(0, dtype=np.int64)
        return TreeIndex(e, e, e, e)
    if parent.max() >= n or parent.min() < -1:
        bad = int(np.flatnonzero((parent >= n) | (parent < -1))[0])
        raise PAGError(f"vertex {bad} has parent {int(parent[bad])}, which is not a vertex")
    depth = _depths(parent)
    maxd = int(depth.max())
    by_depth = np.argsort(depth, kind="stable")  # within a depth, increasing id
    bounds = np.searchsorted(depth[by_depth], np.arange(maxd + 2))
    size = np.ones(n, dtype=np.int64)
    for d in range(maxd, 0, -1):
        lv = by_depth[bounds[d] : bounds[d + 1]]
        np.add.at(size, parent[lv], size[lv])
    preorder = np.zeros(n, dtype=np.int64)
    # roots: consecutive blocks in increasing id
    roots = by_depth[bounds[0] : bounds[1]]
    preorder[roots] = np.cumsum(size[roots]) - size[roots]
    for d in range(1, maxd + 1):
        lv = by_depth[bounds[d] : bounds[d + 1]]  # increasing id within the level
        p = parent[lv]
        o = np.argsort(p, kind="stable")  # group siblings, keep id order
        lv, p = lv[o], p[o]
        csum = np.cumsum(size[lv])
        first = np.r_[True, p[1:] != p[:-1]]
        group_start = np.maximum.accumulate(np.where(first, np.arange(len(lv)), 0))
        before = csum - size[lv] - (csum[group_start] - size[lv[group_start]])
        preorder[lv] = preorder[p] + 1 + before
    order = np.empty(n, dtype=np.int64)
    order[preorder] = np.arange(n)
    return TreeIndex(depth=depth, preorder=preorder, size=size, order=order)


def descendants_mask(index: TreeIndex, vertices: np.ndarray, *, include_self: bool = False) -> np.ndarray:
    """Boolean mask of all vertices below any of ``vertices``.

    Uses the pre-order intervals ``[preorder[v], preorder[v] + size[v])`` and a
    difference array, so the cost is linear in the size of the tree.
    """
    n = len(index.preorder)
    diff = np.zeros(n + 1, dtype=np.int64)
    vertices = np.asarray(vertices, dtype=np.int64)
    lo = index.preorder[vertices] + (0 if include_self else 1)
    hi = index.preorder[vertices] + index.size[vertices]
    np.add.at(diff, lo, 1)
    np.add.at(diff, hi, -1)
    covered_pre = np.cumsum(diff[:n]) > 0
    return covered_pre[index.preorder]


def ancestors_mask(parent: np.ndarray, vertices: np.ndarray, *, include_self: bool = False) -> np.ndarray:
    """Boolean mask of all vertices above any of ``vertices`` (walks up level by level)."""
    parent = np.asarray(parent, dtype=np.int64)
    mask = np.zeros(len(parent), dtype=bool)
    frontier = unique(np.asarray(vertices, dtype=np.int64))
    if include_self:
        mask[frontier] = True
    frontier = parent[frontier]
    frontier = frontier[frontier >= 0]
    while len(frontier):
        frontier = frontier[~mask[frontier]]
        mask[frontier] = True
        frontier = unique(parent[frontier])
        frontier = frontier[frontier >= 0]
    return mask
