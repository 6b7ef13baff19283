"""Exclusive time per (row, time bin, category) of nested intervals: the binned summaries of a timeline.

Each interval adds its overlap with every bin to its own category and subtracts it from its
parent's, so a cell holds the time its category is the innermost one. The static timeline, the
interactive page's summary pyramid and the wait-state strips (``perflow.passes._binned``) all bin
through :func:`bin_exclusive`.

Two ways compute the same numbers, bit for bit:

- **numpy** (small inputs): per colouring, ``np.bincount`` of each interval's first and last
  bin (own category added, parent's subtracted) and a difference array over the bins it covers
  fully, summed along the bins. It allocates about twenty arrays of the output's size
  (rows x bins x categories): at 8,192 bins, 64 rows and 11 categories, 46 MB each.
- **a compiled kernel** (large inputs, or ``PERFLOW_JIT=compile``): one pass over the intervals
  sorted by row, every colouring at once; a row's accumulators (a few MB) are summed into the
  output before the next row starts. It keeps the numpy version's order of floating-point
  operations (each cell's terms in interval order, the four sums and the covered bins combined
  as there), so the results are identical.
"""

from __future__ import annotations

import sys

import numpy as np

from .. import _jit
from .._jit import njit

__all__ = ["bin_exclusive", "stack_pixels", "KERNEL_MIN"]

#: Intervals from which the compiled kernel is used (in ``auto`` mode): below, numpy's start-up-free path.
KERNEL_MIN = 200_000


def bin_exclusive(
    row: np.ndarray,
    enter: np.ndarray,
    leave: np.ndarray,
    colourings: list[tuple[np.ndarray, np.ndarray, int]],
    *,
    n_rows: int,
    t0: float,
    t1: float,
    bins: int,
    kernel: bool | None = None,
) -> list[np.ndarray]:
    """Exclusive time per (row, bin, category) of nested intervals clipped to ``[t0, t1)``, per colouring.

    Parameters
    ----------
    row, enter, leave : ndarray
        Per interval: its row (``0 .. n_rows - 1``) and times.
    colourings : list of (cat, parent_cat, n_cats)
        Per colouring, each interval's category and its parent's (-1: no parent), and the number
        of categories.
    n_rows, t0, t1, bins
        The output's rows and time bins.
    kernel : bool, optional
        Force the compiled kernel (True) or numpy (False); default: the kernel from
        :data:`KERNEL_MIN` intervals on, or always under ``PERFLOW_JIT=compile``.

    Returns
    -------
    list of ndarray
        Per colouring, ``(n_rows, bins, n_cats)`` float64 seconds.
    """
    if kernel is None:
        kernel = len(row) >= KERNEL_MIN or _jit.mode() == "compile"
    if kernel and _jit.mode() != "python" and len(colourings):
        return _bin_compiled(row, enter, leave, colourings, n_rows=n_rows, t0=t0, t1=t1, bins=bins)
    return _bin_numpy(row, enter, leave, colourings, n_rows=n_rows, t0=t0, t1=t1, bins=bins)


def _bin_numpy(row, enter, leave, colourings, *, n_rows, t0, t1, bins):  # type: ignore[no-untyped-def]
    w = (t1 - t0) / bins
    a = np.clip(enter, t0, t1)
    b = np.clip(leave, t0, t1)
    ia = np.minimum(((a - t0) / w).astype(np.int64), bins - 1)
    ib = np.minimum(((b - t0) / w).astype(np.int64), bins - 1)
    same = ia == ib
    first = np.where(same, b - a, t0 + (ia + 1) * w - a)
    last = np.where(same, 0.0, b - (t0 + ib * w))
    span = ib > ia + 1
    row64 = row.astype(np.int64)
    results = []
    for cat, parent_cat, n_cats in colourings:
        size = n_rows * bins * n_cats
        out = np.zeros(size)
        full = np.zeros(size)  # difference array over bins, for the fully covered bins
        base_row = row64 * (bins * n_cats)
        for c, add in ((cat, True), (parent_cat, False)):
            base = base_row + c
            ok = c >= 0
            if not ok.all():
                base = base[ok]
                ia_, ib_, first_, last_, span_ = ia[ok], ib[ok], first[ok], last[ok], span[ok]
            else:
                ia_, ib_, first_, last_, span_ = ia, ib, first, last, span
            op = np.add if add else np.subtract  # in place: the same sums as adding (+1 or -1) * each term
            op(out, np.bincount(base + ia_ * n_cats, weights=first_, minlength=size), out=out)
            op(out, np.bincount(base + ib_ * n_cats, weights=last_, minlength=size), out=out)
            bs = base[span_]
            op(full, w * np.bincount(bs + (ia_[span_] + 1) * n_cats, minlength=size), out=full)
            op(full, -w * np.bincount(bs + ib_[span_] * n_cats, minlength=size), out=full)
        cover = np.cumsum(full.reshape(n_rows, bins, n_cats), axis=1)
        results.append(out.reshape(n_rows, bins, n_cats) + cover)
    return results


def _bin_compiled(row, enter, leave, colourings, *, n_rows, t0, t1, bins):  # type: ignore[no-untyped-def]
    row = np.asarray(row, dtype=np.int64)
    n = len(row)
    if n and not bool(np.all(row[1:] >= row[:-1])):
        order = np.argsort(row, kind="stable")  # per row in input order: each cell's terms in the same order
        row_ptr = np.searchsorted(row[order], np.arange(n_rows + 1)).astype(np.int64)
    else:
        order = np.zeros(0, dtype=np.int64)  # sorted already: the intervals in place
        row_ptr = np.searchsorted(row, np.arange(n_rows + 1)).astype(np.int64)
    k = len(colourings)
    if max((int(nc) for _, _, nc in colourings), default=0) > 32767:
        raise ValueError("bin_exclusive: at most 32767 categories per colouring")
    cats = np.empty((k, n), dtype=np.int16)
    pcats = np.empty((k, n), dtype=np.int16)
    ncats = np.empty(k, dtype=np.int64)
    for j, (cat, parent_cat, n_cats) in enumerate(colourings):
        cats[j], pcats[j], ncats[j] = cat, parent_cat, n_cats
    offs = np.r_[0, np.cumsum(ncats)].astype(np.int64)
    out = np.empty(n_rows * bins * int(offs[-1]))
    _bin_rows(
        order, row_ptr, np.ascontiguousarray(enter, np.float64), np.ascontiguousarray(leave, np.float64),
        cats, pcats, offs, float(t0), float(t1), int(bins), out,
    )  # fmt: skip
    return [
        out[n_rows * bins * offs[j] : n_rows * bins * offs[j + 1]].reshape(n_rows, bins, int(ncats[j]))
        for j in range(k)
    ]


@njit(python=False)
def _bin_rows(order, row_ptr, enter, leave, cats, pcats, offs, t0, t1, bins, out):  # type: ignore[no-untyped-def]
    """Fill ``out`` (colouring blocks of ``(rows, bins, n_cats)``) one row at a time, as :func:`_bin_numpy` sums."""
    n_rows = row_ptr.shape[0] - 1
    k = offs.shape[0] - 1
    in_place = order.shape[0] == 0
    tot = offs[k]
    w = (t1 - t0) / bins
    # a row's accumulators, per (bin, category of any colouring): own first/last, parent's first/last
    s1 = np.zeros((bins, tot))
    s2 = np.zeros((bins, tot))
    s3 = np.zeros((bins, tot))
    s4 = np.zeros((bins, tot))
    c1 = np.zeros((bins, tot), np.int64)
    c2 = np.zeros((bins, tot), np.int64)
    c3 = np.zeros((bins, tot), np.int64)
    c4 = np.zeros((bins, tot), np.int64)
    for r in range(n_rows):
        for p in range(row_ptr[r], row_ptr[r + 1]):
            i = p if in_place else order[p]
            a = min(max(enter[i], t0), t1)
            b = min(max(leave[i], t0), t1)
            ia = min(np.int64((a - t0) / w), bins - 1)
            ib = min(np.int64((b - t0) / w), bins - 1)
            if ia == ib:
                first = b - a
                last = 0.0
            else:
                first = t0 + (ia + 1) * w - a
                last = b - (t0 + ib * w)
            span = ib > ia + 1
            for j in range(k):
                c = cats[j, i]
                if c >= 0:
                    s1[ia, offs[j] + c] += first
                    s2[ib, offs[j] + c] += last
                    if span:
                        c1[ia + 1, offs[j] + c] += 1
                        c2[ib, offs[j] + c] += 1
                c = pcats[j, i]
                if c >= 0:
                    s3[ia, offs[j] + c] += first
                    s4[ib, offs[j] + c] += last
                    if span:
                        c3[ia + 1, offs[j] + c] += 1
                        c4[ib, offs[j] + c] += 1
        cover = np.zeros(tot)  # the covered bins' running sum (numpy: a cumulative sum along the bins)
        for t in range(bins):
            for j in range(k):
                nc = offs[j + 1] - offs[j]
                base = n_rows * bins * offs[j] + (r * bins + t) * nc
                for cc in range(nc):
                    col = offs[j] + cc
                    full = (((0.0 + w * c1[t, col]) + -w * c2[t, col]) - w * c3[t, col]) - -w * c4[t, col]
                    cover[col] = full if t == 0 else cover[col] + full
                    o = (((0.0 + s1[t, col]) + s2[t, col]) - s3[t, col]) - s4[t, col]
                    out[base + cc] = o + cover[col]
                    s1[t, col] = s2[t, col] = s3[t, col] = s4[t, col] = 0.0
                    c1[t, col] = c2[t, col] = c3[t, col] = c4[t, col] = 0
    return out


def stack_pixels(shares: np.ndarray, sub: int, *, kernel: bool | None = None) -> np.ndarray:
    """A category index per pixel: each row a band of ``sub`` pixels stacking its bins' shares.

    ``shares`` is ``(rows, bins, categories)`` in fractions of a bin; the result is
    ``(rows * sub, bins)`` of ``int16`` with the first category at the bottom of each band and
    ``categories`` (one past the last) where the bin is idle: pixel ``j`` of a band (from the top)
    shows the category whose stack covers height ``1 - (j + 0.5) / sub``. The compiled kernel gives
    the same pixels; by default it is used when numba runs already in this process (a large trace's
    analyses or binning started it) or under ``PERFLOW_JIT=compile``: a small trace starts no numba for it.
    """
    n_rows, bins, n_cats = shares.shape
    h = 1.0 - (np.arange(sub) + 0.5) / sub
    if kernel is None:
        kernel = "numba" in sys.modules or _jit.mode() == "compile"
    if kernel and _jit.mode() != "python":
        idx = np.empty((n_rows, sub, bins), dtype=np.int16)
        _stack_rows(np.ascontiguousarray(shares, np.float64), h, idx)
        return idx.reshape(n_rows * sub, bins)
    cum = np.cumsum(np.clip(shares, 0.0, None), axis=2)
    idx = np.empty((n_rows, sub, bins), dtype=np.int16)
    for j in range(sub):
        idx[:, j, :] = (cum < h[j]).sum(axis=2)
    return idx.reshape(n_rows * sub, bins)


@njit(python=False)
def _stack_rows(shares, h, idx):  # type: ignore[no-untyped-def]
    """:func:`stack_pixels` per (row, bin): the same running sum of the clipped shares, the same comparisons."""
    n_rows, bins, n_cats = shares.shape
    sub = h.shape[0]
    cum = np.empty(n_cats)
    for r in range(n_rows):
        for t in range(bins):
            s = 0.0
            for c in range(n_cats):
                x = shares[r, t, c]
                x = 0.0 if x < 0.0 else x  # np.clip(x, 0.0, None); NaN stays NaN
                s = x if c == 0 else s + x
                cum[c] = s
            for j in range(sub):
                k = 0
                for c in range(n_cats):
                    if cum[c] < h[j]:
                        k += 1
                idx[r, j, t] = k
    return idx
