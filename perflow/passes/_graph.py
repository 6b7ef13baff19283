"""Graph helpers of the selection passes: parallel-view traversals and edges of subgraphs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from perflow.sdk import PAG, PassError
from perflow.sdk.profile import EDGE_KINDS, edge_mask

__all__ = ["slice_ids"]


def slice_ids(
    pag: PAG, seeds: np.ndarray, *, backward: bool, kinds: Sequence[str] | None = None, max_steps: int | None = None
) -> np.ndarray:
    """Parallel vertex ids reachable from ``seeds`` along (or against) parallel-view edges, seeds included.

    One sparse breadth-first search (scipy.sparse.csgraph) from a virtual
    source joined to every seed; with ``max_steps``, one sparse
    matrix-vector product per step instead.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order

    view = pag.parallel
    et = view.edge_table
    n = len(view)
    sel = np.ones(len(et), dtype=bool)
    if kinds is not None:
        bad = [k for k in kinds if k not in EDGE_KINDS]
        if bad:
            raise PassError(f"unknown edge kind {bad[0]!r}; kinds are {', '.join(EDGE_KINDS)}")
        sel = edge_mask(et, kinds)
    src, dst = et["src"].to_numpy()[sel], et["dst"].to_numpy()[sel]
    if backward:
        src, dst = dst, src
    seeds = np.unique(np.asarray(seeds, dtype=np.int64))
    if max_steps is not None:
        adj = csr_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n, n))
        seen = np.zeros(n, dtype=bool)
        seen[seeds] = True
        frontier = seen.copy()
        for _ in range(max_steps):
            nxt = (adj.T @ frontier.astype(np.int8)) > 0
            frontier = nxt & ~seen
            if not frontier.any():
                break
            seen |= frontier
        return np.flatnonzero(seen)
    s = np.r_[src, np.full(len(seeds), n)]
    d = np.r_[dst, seeds]
    adj = csr_matrix((np.ones(len(s), dtype=np.int8), (s, d)), shape=(n + 1, n + 1))
    order = breadth_first_order(adj, n, directed=True, return_predecessors=False)
    return np.sort(order[order < n])
