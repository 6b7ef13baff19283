"""Per-group running maxima and sums of sorted rows, compiled, bit for bit as pandas' group-by forms them.

:func:`covered_to` is ``Series(end).groupby(key, sort=False).cummax().shift(1)`` with each key's first
row at ``-inf`` (the rows sorted by key); :func:`group_sums` is ``DataFrame.groupby(keys, sort=True).sum()``
on float columns whose groups are not in row order: pandas (3.1) adds each group's values in row order with
Kahan compensation, and so do these (the same additions in the same order, NaN skipped, a compensation that
is not finite reset to 0). When the rows are sorted by group (and hold no NaN) pandas sums with
``np.add.reduceat`` instead: :func:`sorted_groups` tells a caller to leave those to pandas.
Both spare the factorising, the index building and the temporary frames of a group-by over millions of rows.
"""

from __future__ import annotations

import numpy as np

from .flat import njit

__all__ = ["covered_to", "group_sums", "dense_groups", "sorted_groups"]


@njit
def _covered_to(key, end):  # type: ignore[no-untyped-def]
    n = key.shape[0]
    out = np.empty(n, np.float64)
    acc = -np.inf
    prev = -np.inf
    for i in range(n):
        if i == 0 or key[i] != key[i - 1]:
            out[i] = -np.inf
            acc = -np.inf
        else:
            out[i] = prev
        v = end[i]
        if v != v:  # pandas' cummax (skipna): NaN out, the running maximum kept
            prev = np.nan
        else:
            if v > acc:
                acc = v
            prev = acc
    return out


def covered_to(key: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row of ``key`` (sorted: each key's rows contiguous), the largest ``end`` of the earlier rows of
    its key (``-inf`` for a key's first row; NaN after a NaN ``end``, as pandas' cummax and shift give)."""
    return _covered_to(np.ascontiguousarray(key), np.ascontiguousarray(end, dtype=np.float64))


@njit
def _kahan(labels, values, ngroups):  # type: ignore[no-untyped-def]
    n, k = values.shape
    s = np.zeros((ngroups, k), np.float64)
    c = np.zeros((ngroups, k), np.float64)
    for i in range(n):
        lab = labels[i]
        if lab < 0:
            continue
        for j in range(k):
            val = values[i, j]
            if val == val:
                y = val - c[lab, j]
                t = s[lab, j] + y
                c[lab, j] = t - s[lab, j] - y
                if not abs(c[lab, j]) < np.inf:  # pandas resets a compensation that is not finite
                    c[lab, j] = 0.0
                s[lab, j] = t
    return s


def group_sums(labels: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Sums per group (``labels``: the group of each row, -1 none) of the columns of ``values`` (rows x
    columns), added in row order with Kahan compensation as pandas' group-by sum adds them."""
    vals = np.ascontiguousarray(values, dtype=np.float64)
    if vals.ndim == 1:
        vals = vals[:, None]
    return _kahan(np.ascontiguousarray(labels, dtype=np.int64), vals, int(n_groups))  # type: ignore[no-any-return]


def dense_groups(keys: list[np.ndarray], limit: int) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """The group of each row for integer ``keys`` (columns), groups numbered in the keys' sorted order, and
    each group's keys; None when the keys' value ranges span more than ``limit`` combinations."""
    n = len(keys[0])
    if not n:
        return np.zeros(0, np.int64), [k[:0].astype(np.int64) for k in keys]
    lows = [int(k.min()) for k in keys]
    sizes = [int(k.max()) - lo + 1 for k, lo in zip(keys, lows, strict=True)]
    if float(np.prod(np.array(sizes, dtype=np.float64))) > limit:
        return None
    code = np.zeros(n, np.int64)
    for k, lo, size in zip(keys, lows, sizes, strict=True):
        code *= size
        code += k.astype(np.int64, copy=False) - lo
    present = np.zeros(int(np.prod(sizes)), bool)
    present[code] = True
    used = np.flatnonzero(present)
    number = np.cumsum(present) - 1
    out, rest = [], used
    for lo, size in zip(lows[::-1], sizes[::-1], strict=True):
        out.append(rest % size + lo)
        rest = rest // size
    return number[code], out[::-1]


def sorted_groups(labels: np.ndarray) -> bool:
    """Whether the rows are in group order (pandas then sums them with ``np.add.reduceat``, not Kahan's sum)."""
    return bool((labels[1:] >= labels[:-1]).all())
