"""Array helpers shared by every layer: sort-based set operations.

numpy 2.3+ computes ``np.unique(a)`` (without ``return_*`` arguments, also
behind ``np.setdiff1d`` and ``np.union1d``) with a hash table, which on
this project's machines is 10-100 times slower than sorting once there are
more than a few thousand distinct values (1.5 s against 0.03 s for a million
int64). These helpers sort. They return what the numpy functions return.

:func:`release_free_heap` gives the C heap's free pages back to the system
after a build that made large temporary arrays.
"""

from __future__ import annotations

import contextlib
import ctypes
import os

import numpy as np

__all__ = ["unique", "setdiff_sorted", "in_sorted", "release_free_heap"]

_TRIM: list = []


def release_free_heap() -> bool:
    """Return the free pages of the C heap to the operating system (glibc's ``malloc_trim``).

    glibc keeps memory freed by large temporaries (numpy arrays of a trace
    build, many of them made in worker threads, whose arenas are trimmed
    lazily) resident in its arenas; after a 20 M-event read that is ~1.2 GB
    more resident than the PAG's own tables. This hands it back. A no-op
    (False) where the C library has no ``malloc_trim`` (musl, macOS, Windows).
    """
    if not _TRIM:
        fn = None
        if os.name == "posix":
            with contextlib.suppress(OSError, AttributeError):
                fn = ctypes.CDLL(None).malloc_trim
                fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
        _TRIM.append(fn)
    fn = _TRIM[0]
    return bool(fn(0)) if fn is not None else False


def unique(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``a`` (as ``np.unique(a)``; NaNs collapse to one)."""
    a = np.asarray(a).ravel()
    if len(a) < 2:
        return a.copy()
    s = np.sort(a)
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    if s.dtype.kind in "fc" and np.isnan(s[-1]):
        first = int(np.searchsorted(s, np.nan, side="left")) if s.dtype.kind == "f" else int(np.argmax(np.isnan(s)))
        keep[first + 1 :] = False
        keep[first] = True
    return s[keep]


def in_sorted(sorted_values: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Whether each element of ``x`` is in ``sorted_values`` (ascending): one binary search each."""
    x = np.asarray(x)
    if not len(sorted_values):
        return np.zeros(x.shape, dtype=bool)
    i = np.searchsorted(sorted_values, x)
    np.minimum(i, len(sorted_values) - 1, out=i)
    return sorted_values[i] == x


def setdiff_sorted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``a`` not in ``b`` (as ``np.setdiff1d(a, b)``)."""
    ua = unique(a)
    return ua[~in_sorted(unique(b), ua)]
