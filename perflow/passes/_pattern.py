"""Classification of a communication matrix into a named pattern (used by :func:`perflow.passes.comm.comm_pattern`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["classify_pattern", "PATTERNS"]

PATTERNS = ("none", "all-to-all", "gather/master-worker", "ring", "nearest-neighbour")


def classify_pattern(
    mat: np.ndarray, axis: np.ndarray, *, max_degree: int = 26, dense: float = 0.9, hub_share: float = 0.8
) -> pd.DataFrame:
    """Test each pattern on a sender x receiver matrix and pick the first that matches.

    Let ``M`` be the matrix without its diagonal, ``A`` the pairs that
    communicate significantly (``M > 0.01 *`` the mean of the non-zero entries,
    so that the few bytes of a small reduction do not make every pair count), the *active* processes those with any traffic (``Pa`` of
    them), degrees the numbers of distinct peers, and the offset of a pair
    ``(i, j)`` the rank distance ``(j - i) mod P`` over the ``P`` processes of
    the axis. The patterns, tried in this order:

    1. ``none``: ``M`` is all zeros.
    2. ``all-to-all``: ``Pa >= 3`` and ``A`` has at least ``dense * Pa (Pa - 1)`` pairs.
    3. ``gather/master-worker``: ``Pa >= 3``; one process ``h`` takes part
       (as sender or receiver) in at least ``hub_share`` of the traffic and
       talks to at least half of the other active processes.
    4. ``ring``: ``Pa = P >= 3``; every process has exactly one receiver and
       one sender, all at the same offset ``d``.
    5. ``nearest-neighbour``: ``P = 2`` with traffic (a pairwise exchange), or
       every process has at most ``D = min(max_degree, Pa - 2)`` peers and
       the ``n90`` heaviest offsets that carry 90% of the traffic are few:
       ``n90 <= D``, or ``n90 <= 2 D`` and ``n90 <= (P - 1) / 2`` (the same few
       relative neighbours everywhere, as in a stencil; periodic boundaries
       of a grid add wrap-around offsets).

    If nothing matches, the pattern is ``none`` (irregular). The ``score`` of
    a candidate is the statistic its test thresholds (density, hub share,
    share of the ring offset, share of the top offsets).
    """
    M = np.array(mat, dtype=np.float64, copy=True)
    P = len(axis)
    if P:
        np.fill_diagonal(M, 0.0)
    total = float(M.sum())
    rows: dict[str, tuple[bool, float, str]] = {}
    if total <= 0:
        rows["none"] = (True, 1.0, "no communication between processes")
        for p in PATTERNS[1:]:
            rows[p] = (False, 0.0, "no communication between processes")
        return _frame(rows, "none")
    A = M > 0.01 * M[M > 0].mean()  # pairs with a negligible share (e.g. of a small reduction) do not count
    active = np.flatnonzero(A.any(axis=0) | A.any(axis=1))
    Pa = len(active)
    nnz = int(A.sum())
    outdeg, indeg = A.sum(axis=1), A.sum(axis=0)
    maxdeg = int(max(outdeg.max(), indeg.max()))
    pairs = Pa * (Pa - 1)
    density = nnz / pairs if pairs else 0.0
    rows["all-to-all"] = (
        Pa >= 3 and density >= dense,
        density,
        f"{nnz} of the {pairs} ordered pairs of {Pa} active processes communicate ({density:.0%})",
    )
    through = (M.sum(axis=1) + M.sum(axis=0)) / total
    h = int(np.argmax(through))
    hdeg = int((A[h] | A[:, h]).sum())
    rows["gather/master-worker"] = (
        Pa >= 3 and through[h] >= hub_share and hdeg >= max(2, (Pa - 1) / 2),
        float(through[h]),
        f"process {axis[h]} takes part in {through[h]:.0%} of the traffic, with {hdeg} of {Pa - 1} possible peers",
    )
    si, di = np.nonzero(A)
    off = (di - si) % P
    w_off = np.bincount(off, weights=M[si, di], minlength=P)
    top_off = int(np.argmax(w_off))
    ring_share = float(w_off[top_off] / total)
    is_ring = Pa == P >= 3 and bool(np.all(outdeg == 1)) and bool(np.all(indeg == 1)) and len(np.unique(off)) == 1
    rows["ring"] = (
        is_ring,
        ring_share,
        f"every process sends only to (rank + {top_off}) mod {P}"
        if is_ring
        else f"offset {top_off} carries {ring_share:.0%} of the traffic; out-degrees {int(outdeg.min())}-{int(outdeg.max())}",
    )
    order = np.argsort(-w_off, kind="stable")
    cum = np.cumsum(w_off[order]) / total
    n90 = int(np.searchsorted(cum, 0.9 - 1e-12) + 1)
    n_top = max(maxdeg, 1)
    top_share = float(cum[min(n_top, len(cum)) - 1])
    offs = ", ".join(f"{'+' if o <= P // 2 else '-'}{o if o <= P // 2 else P - o}" for o in order[: min(n90, 8)])
    if P == 2:
        nn, ev, score = True, "two processes exchanging messages (pairwise)", 1.0
    else:
        nn = maxdeg <= min(max_degree, Pa - 2) and (n90 <= n_top or (n90 <= 2 * n_top and n90 <= (P - 1) / 2))
        ev = (
            f"at most {maxdeg} peers per process; {n90} rank offset(s) ({offs}) carry 90% of the traffic "
            f"({top_share:.0%} on the top {min(n_top, P)})"
        )
        score = top_share
    rows["nearest-neighbour"] = (bool(nn), score, ev)
    chosen = next((p for p in PATTERNS[1:] if rows[p][0]), "none")
    rows["none"] = (
        chosen == "none",
        1.0 if chosen == "none" else 0.0,
        "irregular: no pattern matched" if chosen == "none" else f"matched {chosen}",
    )
    return _frame(rows, chosen)


def _frame(rows: dict[str, tuple[bool, float, str]], chosen: str) -> pd.DataFrame:
    names = [chosen] + [p for p in PATTERNS if p != chosen]
    df = pd.DataFrame(
        {
            "pattern": names,
            "matched": [bool(rows[p][0]) for p in names],
            "score": [float(rows[p][1]) for p in names],
            "evidence": [rows[p][2] for p in names],
        }
    )
    df.attrs["pattern"] = chosen
    return df
