"""Matching a call-path pattern along the root-to-leaf paths of a tree, with array operations.

A pattern is a sequence of steps ``(wildcard, mask)``: wildcard ``"."`` takes
exactly one vertex, ``"*"`` zero or more; ``mask[v]`` says whether vertex ``v``
satisfies the step's predicate. (Hatchet's ``"+"`` is ``"."`` then ``"*"``, an
integer ``k`` is ``k`` times ``"."``: see :mod:`perflow.pag.query`.) The result
is every vertex on some matched path, with Hatchet's semantics:

* a match is a downward path ``s .. e`` that may start at any vertex;
* a ``"*"`` that is not last is lazy: it stops at the first vertex that
  satisfies the next step, and its chain may not end at a leaf;
* a last ``"*"`` takes every vertex below that satisfies its predicate;
* a pattern starting with ``"*"`` also starts at vertices that satisfy the
  second step (the ``"*"`` then matches nothing).

Instead of walking paths, the matcher keeps one boolean array per step:
``F[j][u]`` -- some match of the first ``j`` steps ends at ``u`` -- computed
top-down, and ``L[j][u]`` -- the remaining steps can be matched below ``u`` --
computed bottom-up. A vertex is in the result when both hold for some step
(or it lies inside a ``"*"`` chain joining two such states). Each ``"*"``
step costs one numpy pass per tree level; no Python code runs per vertex.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Levels", "levels", "match_paths"]


@dataclass(frozen=True)
class Levels:
    """The tree as parent array and vertices grouped by depth."""

    parent: np.ndarray
    by_depth: tuple[np.ndarray, ...]

    @property
    def n(self) -> int:
        return len(self.parent)

    def any_child(self, mask: np.ndarray) -> np.ndarray:
        """``out[u]``: some child of ``u`` is in ``mask``."""
        out = np.zeros(self.n, dtype=bool)
        c = np.flatnonzero(mask & (self.parent >= 0))
        out[self.parent[c]] = True
        return out

    def down(self, start: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """``out[v] = keep[v] and (start[parent] or out[parent])``: chains of ``keep`` hanging below ``start``."""
        out = np.zeros(self.n, dtype=bool)
        for lv in self.by_depth[1:]:
            p = self.parent[lv]
            out[lv] = keep[lv] & (start[p] | out[p])
        return out

    def up(self, keep: np.ndarray, end: np.ndarray) -> np.ndarray:
        """``out[v] = keep[v] and (end[v] or out[some child])``: ``keep`` vertices with a ``keep`` chain to ``end``."""
        out = np.zeros(self.n, dtype=bool)
        below = np.zeros(self.n, dtype=bool)
        for lv in reversed(self.by_depth):
            out[lv] = keep[lv] & (end[lv] | below[lv])
            hit = lv[out[lv]]
            p = self.parent[hit]
            below[p[p >= 0]] = True
        return out


def levels(parent: np.ndarray, depth: np.ndarray) -> Levels:
    """Group the vertices of a tree by depth."""
    parent = np.asarray(parent, dtype=np.int64)
    depth = np.asarray(depth, dtype=np.int64)
    if not len(parent):
        return Levels(parent, ())
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    return Levels(parent, tuple(order[bounds[d] : bounds[d + 1]] for d in range(len(bounds) - 1)))


def match_paths(tree: Levels, steps: Sequence[tuple[str, np.ndarray]]) -> np.ndarray:
    """Mask of the vertices on paths that match ``steps`` (see the module docstring).

    Parameters
    ----------
    tree : Levels
        The tree (:func:`levels`).
    steps : sequence of (str, numpy.ndarray)
        ``("." or "*", predicate mask)`` per step; at least one.

    Returns
    -------
    numpy.ndarray
        Boolean mask over the vertices.
    """
    k, n = len(steps), tree.n
    if k == 0:
        raise ValueError("a pattern needs at least one step")
    wild = [w for w, _ in steps]
    pred = [np.asarray(m, dtype=bool) for _, m in steps]
    has_parent = tree.parent >= 0
    par = np.where(has_parent, tree.parent, 0)
    leaf = ~tree.any_child(np.ones(n, dtype=bool))

    # forward: F[j][u] = a match of steps < j ends at u (u consumed), step j comes next
    F = [np.zeros(n, dtype=bool) for _ in range(k + 1)]
    if wild[0] == ".":
        F[1] |= pred[0]
    else:
        F[0] |= pred[0]  # the start vertex is the first of the "*"
        if k > 1:  # or the "*" matches nothing and the start vertex takes step 1
            if wild[1] == ".":
                F[2] |= pred[1]
            else:
                F[0] |= pred[1]  # Hatchet restarts "*", "*" patterns at step 0
    star: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for j in range(k):
        if wild[j] == ".":
            F[j + 1] |= pred[j] & has_parent & F[j][par]
            continue
        if j < k - 1:  # lazy: a vertex satisfying the next step ends the chain
            nxt = tree.any_child(pred[j + 1])
            chain, end_zero, end_chain = pred[j] & ~pred[j + 1], leaf | nxt, nxt
        else:  # last: the chain ends where the predicate fails or at a leaf
            stop = leaf | tree.any_child(~pred[j])
            chain, end_zero, end_chain = pred[j], stop, stop
        reach = tree.down(F[j], chain)
        F[j + 1] |= (F[j] & end_zero) | (reach & end_chain)
        star[j] = (chain, end_zero, end_chain, reach)

    # backward: live[u] = the steps from j on can be matched below u; keep states that are reached and live
    live = np.ones(n, dtype=bool)
    out = F[k].copy()
    for j in range(k - 1, -1, -1):
        if wild[j] == ".":
            live = tree.any_child(pred[j] & live)
        else:
            chain, end_zero, end_chain, reach = star[j]
            tail = tree.up(chain, end_chain & live)
            out |= reach & tail
            live = (end_zero & live) | tree.any_child(tail)
        out |= F[j] & live
    return out
