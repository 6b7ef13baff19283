"""Call sites apart: display call paths that tell two calls of one function from one place apart."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # pragma: no cover
    from .pag import PAG

__all__ = ["call_site_paths"]

_SITE_CACHE: weakref.WeakKeyDictionary[Any, np.ndarray] = weakref.WeakKeyDictionary()


def call_site_paths(pag: PAG) -> np.ndarray:
    """Call paths for display, one per vertex, that tell call sites apart.

    Where two vertices share a call path (two calls of MPI_Send in one
    function), each gets its ``file:line`` -- ``main/solve/MPI_Send
    (solve.c:12)`` -- or, when that does not tell them apart either, its
    vertex id. Other call paths are left as they are.
    """
    cached = _SITE_CACHE.get(pag)
    if cached is not None:
        return cached
    cps = pag.call_paths().to_numpy().astype(object)
    dup = pd.Series(cps).duplicated(keep=False).to_numpy()
    out = cps.copy()
    if dup.any():
        vt = pag._vertices
        idx = np.flatnonzero(dup)
        files = vt["file"].astype(str).to_numpy()[idx]
        lines = vt["line"].to_numpy()[idx]
        site = np.array([f"{f}:{ln}" if f and ln >= 0 else (f or "") for f, ln in zip(files, lines)], dtype=object)
        labels = np.array([f"{c} ({s})" if s else str(c) for c, s in zip(cps[idx], site)], dtype=object)
        still = pd.Series(labels).duplicated(keep=False).to_numpy()
        labels[still] = [f"{c} (vertex {v})" for c, v in zip(labels[still], idx[still])]
        out[idx] = labels
    out.flags.writeable = False
    _SITE_CACHE[pag] = out
    return out
