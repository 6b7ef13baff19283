"""Calling contexts that a trace knows without Enter/Leave events: sampled stacks and call stacks of regions.

Two sources add vertices to the calling-context tree built by the scan:

* **timer samples** (``raw.sample_events`` with ``raw.stacks``): a sample
  taken inside a region instance extends that instance's call path by the
  sampled frames; the time it covers becomes an instance of the leaf frame
  (a *piece*, :mod:`perflow.trace.pieces`), and every added vertex above the
  leaf gets the piece's time as inclusive time;
* **region call stacks** (an optional ``stack`` column of ``raw.regions``,
  an id in ``raw.stacks``): a recorder that intercepts MPI calls knows the
  stack of the code that called them; such a region is placed below those
  frames instead of directly below its enclosing instance. The added
  vertices get the region instances' inclusive time.

The time between two region events of a location that no sample covers
(the *gaps* of a stretch, :mod:`perflow.trace.pieces`) gets the calling
context both its ends share: :func:`stretch_ends` gives the vertex at each
end of every stretch (the caller frame of an MPI call with a stack, a
sample's leaf) and :func:`common_ancestor` their deepest common vertex.

Added vertices are *synthetic*: no Enter/Leave event makes them. Those that
are the leaf of a sample have pieces as instances; the others have none (no
visits), only the inclusive time of what lies below them. Synthetic vertices
with the same parent and region are one vertex, so samples and call stacks
share paths; one with the parent and region of a call path that Enter/Leave
events made (on any location) is that call path (see
:mod:`perflow.trace.numbering`), with its time added to that call path's row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .raw import ENTER, RawTrace
from .scan import enclosing_instance
from .tally import dense_keys

__all__ = [
    "TreeGrower",
    "stack_frames",
    "attach_region_stacks",
    "attach_samples",
    "depths",
    "common_ancestor",
    "gap_vertex",
    "stretch_ends",
]


def stack_frames(raw: RawTrace) -> dict[int, np.ndarray]:
    """Stack id to its region ids, outermost first."""
    st = raw.stacks
    if not len(st):
        return {}
    st = st.sort_values(["stack", "depth"], kind="stable")
    return {int(s): g["region"].to_numpy(dtype=np.int64) for s, g in st.groupby("stack", sort=True)}


class TreeGrower:
    """The calling-context tree as growable parent/region lists; new vertices are synthetic."""

    def __init__(self, cp_parent: np.ndarray, cp_region: np.ndarray) -> None:
        self.n_real = len(cp_parent)
        self.parent = cp_parent.tolist()
        self.region = cp_region.tolist()
        self._map: dict[tuple[int, int], int] = {}

    def chain(self, base: int, frames: np.ndarray) -> int:
        """The vertex reached from ``base`` by the frames, creating synthetic vertices as needed."""
        cur = base
        for r in frames.tolist():
            nxt = self._map.get((cur, r))
            if nxt is None:
                nxt = len(self.parent)
                self._map[(cur, r)] = nxt
                self.parent.append(cur)
                self.region.append(r)
            cur = nxt
        return cur

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(cp_parent, cp_region)`` as arrays."""
        return np.asarray(self.parent, dtype=np.int64), np.asarray(self.region, dtype=np.int64)

    def synthetic_ancestors(self, start: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each element, its synthetic vertices walking up from ``start`` (inclusive).

        Returns a list of ``(element index, vertex)`` array pairs, one per level.
        """
        parent = np.asarray(self.parent, dtype=np.int64)
        out = []
        cur = np.asarray(start, dtype=np.int64).copy()
        idx = np.arange(len(cur))
        while len(cur):
            ok = cur >= self.n_real
            idx, cur = idx[ok], cur[ok]
            if not len(cur):
                break
            out.append((idx, cur))
            cur = parent[cur]
        return out


def attach_region_stacks(
    raw: RawTrace, res: Any, tree: TreeGrower, frames: dict[int, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Re-parent call paths of regions that carry a call stack; return (vertex, location, inclusive) rows.

    The rows give every synthetic vertex above a re-parented call path the
    inclusive time of that call path's instances.
    """
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    if "stack" not in raw.regions.columns or not len(res.callpath):
        return empty
    reg_stack = raw.regions["stack"].to_numpy(dtype=np.float64)
    reg_stack = np.where(np.isfinite(reg_stack), reg_stack, -1).astype(np.int64)
    cp_stack = reg_stack[res.cp_region]
    moved = np.flatnonzero(cp_stack >= 0)
    if not len(moved):
        return empty
    # a call path keeps its id; only its parent changes (its descendants follow it)
    for cp in moved.tolist():
        f = frames.get(int(cp_stack[cp]))
        if f is None or not len(f):
            continue
        tree.parent[cp] = tree.chain(tree.parent[cp], f)
    new_parent = np.asarray(tree.parent, dtype=np.int64)
    inst = np.flatnonzero(np.isin(res.callpath, moved))
    loc = raw.region_events["location"][res.enter[inst]].astype(np.int64)
    leave_t = np.where(res.leave[inst] >= 0, raw.region_events["time"][np.maximum(res.leave[inst], 0)], np.nan)
    inc = leave_t - raw.region_events["time"][res.enter[inst]]
    ok = np.isfinite(inc)
    inst, loc, inc = inst[ok], loc[ok], inc[ok]
    vs, ls, xs = [], [], []
    for idx, v in tree.synthetic_ancestors(new_parent[res.callpath[inst]]):
        vs.append(v)
        ls.append(loc[idx])
        xs.append(inc[idx])
    if not vs:
        return empty
    return np.concatenate(vs), np.concatenate(ls), np.concatenate(xs)


def attach_samples(raw: RawTrace, res: Any, tree: TreeGrower, frames: dict[int, np.ndarray]) -> dict[str, np.ndarray]:
    """Extend the tree by the sampled stacks; per sample its enclosing instance, its call path and its leaf.

    Returns a dict with ``open`` (the local instance open at the sample, -1
    none), ``base`` (that instance's call path, -1 none) and ``leaf`` (the
    vertex reached from ``base`` by the sampled frames: ``base`` itself when
    the stack adds none, else a synthetic vertex). :mod:`perflow.trace.pieces`
    turns them into region instances.
    """
    samp = raw.sample_events
    open_inst = enclosing_instance(res.open_after, raw.region_events["location"], samp["location"], samp["pos"])
    base_cp = np.where(open_inst >= 0, res.callpath[np.maximum(open_inst, 0)], -1)
    stack = samp["stack"].astype(np.int64)
    width = int(stack.max(initial=0)) + 2  # stack ids from -1
    uniq, inv = dense_keys((base_cp + 1) * width + stack + 1)  # one tree walk per distinct (call path, stack)
    none = np.zeros(0, np.int64)
    leaf = np.array(
        [tree.chain(int(k // width) - 1, frames.get(int(k % width) - 1, none)) for k in uniq.tolist()], dtype=np.int64
    )
    return {"open": open_inst, "base": base_cp, "leaf": leaf[inv]}


def depths(parent: np.ndarray) -> np.ndarray:
    """Depth of every vertex of a tree given by its parent array (roots: 0)."""
    parent = np.asarray(parent, dtype=np.int64)
    d = np.zeros(len(parent), dtype=np.int64)
    cur = parent.copy()
    live = np.flatnonzero(cur >= 0)
    while len(live):
        d[live] += 1
        cur[live] = parent[cur[live]]
        live = live[cur[live] >= 0]
    return d


def _lift(parent: np.ndarray, depth: np.ndarray, v: np.ndarray, to: np.ndarray) -> np.ndarray:
    """The ancestor of each ``v`` at depth ``to`` (``v`` itself when it is not deeper)."""
    v = v.copy()
    live = np.flatnonzero(depth[v] > to)
    while len(live):
        v[live] = parent[v[live]]
        live = live[depth[v[live]] > to[live]]
    return v


def common_ancestor(parent: np.ndarray, depth: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The deepest common ancestor of each pair (``u[i]``, ``v[i]``) of vertices of one tree (-1: none).

    Examples
    --------
    >>> par = np.array([-1, 0, 1, 1, 0])
    >>> common_ancestor(par, depths(par), np.array([2, 2, 4]), np.array([3, 2, 3])).tolist()
    [1, 2, 0]
    """
    parent = np.asarray(parent, dtype=np.int64)
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    d = np.minimum(depth[u], depth[v])
    u, v = _lift(parent, depth, u, d), _lift(parent, depth, v, d)
    live = np.flatnonzero(u != v)
    while len(live):
        u[live], v[live] = parent[u[live]], parent[v[live]]
        live = live[(u[live] != v[live]) & (u[live] >= 0)]
    return np.where(u == v, u, -1)


def gap_vertex(parent: np.ndarray, depth: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The calling context of gaps between ends ``a`` and ``b``: their deepest common vertex (one walk per pair)."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if not len(a):
        return a
    pairs, inv = np.unique(np.stack([a, b]), axis=1, return_inverse=True)
    return common_ancestor(parent, depth, pairs[0], pairs[1])[np.asarray(inv).ravel()]


def stretch_ends(raw: RawTrace, res: Any, parent: np.ndarray) -> dict[str, np.ndarray]:
    """Every stretch of a partition (the time between two region events of a location inside an instance).

    Returns ``k`` (the stretch follows region event ``k``; ``k + 1`` is on the
    same location), ``open`` (the local instance open in it), ``base`` (its
    call path) and the vertex at each end, ``left`` and ``right``, in the
    grown tree ``parent``: at the end of a child instance (or the start of
    one), that child's parent vertex, which its region call stack may have
    moved below frames (the caller of an MPI call); at the start or end of
    the open instance itself, its own call path (the program's root region
    starts before ``main``: its first stretch up to a sample or an MPI call
    stays its own).
    """
    ev = raw.region_events
    loc, kind = ev["location"], ev["kind"]
    n = len(loc)
    k = np.flatnonzero(loc[1:] == loc[:-1]) if n > 1 else np.zeros(0, np.int64)
    inst = res.open_after[k] if len(k) else np.zeros(0, np.int64)
    ok = inst >= 0
    k, inst = k[ok].astype(np.int64), inst[ok].astype(np.int64)
    base = res.callpath[inst].astype(np.int64)
    ev_inst = np.full(n, -1, dtype=np.int64)
    ev_inst[res.enter] = np.arange(len(res.enter))
    closed = res.leave >= 0
    ev_inst[res.leave[closed]] = np.flatnonzero(closed)
    parent = np.asarray(parent, dtype=np.int64)

    def child_end(e: np.ndarray) -> np.ndarray:
        c = ev_inst[e]
        return parent[res.callpath[np.maximum(c, 0)]]

    left = np.where(kind[k] == ENTER, base, child_end(k))
    right = np.where(kind[k + 1] == ENTER, child_end(k + 1), base)
    return {"k": k, "open": inst, "base": base, "left": left, "right": right}
