"""Call sites apart: display call paths that tell two calls of one function from one place apart."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .analysis import Analysis

if TYPE_CHECKING:  # pragma: no cover
    from .pag import PAG

__all__ = ["call_site_paths", "source_labels", "CALL_SITE_PATHS", "SOURCE_LABELS"]


def call_site_paths(pag: PAG) -> np.ndarray:
    """Call paths for display, one per vertex, that tell call sites apart.

    Where two vertices share a call path (two calls of MPI_Send in one
    function), each gets its ``file:line`` -- ``main/solve/MPI_Send
    (solve.c:12)`` -- or, when that does not tell them apart either, its
    vertex id. Other call paths are left as they are. Computed once per PAG
    (:data:`CALL_SITE_PATHS`).
    """
    return pag.analyses.get(CALL_SITE_PATHS)  # type: ignore[no-any-return]


def _call_site_paths(pag: PAG, s: Any) -> np.ndarray:
    cps = pag.call_paths().to_numpy().astype(object)
    dup = pd.Series(cps).duplicated(keep=False).to_numpy()
    out = cps.copy()
    if dup.any():
        vt = pag.vertex_table
        idx = np.flatnonzero(dup)
        files = vt["file"].astype(str).to_numpy()[idx]
        lines = vt["line"].to_numpy()[idx]
        site = np.array([f"{f}:{ln}" if f and ln >= 0 else (f or "") for f, ln in zip(files, lines)], dtype=object)
        labels = np.array([f"{c} ({s})" if s else str(c) for c, s in zip(cps[idx], site)], dtype=object)
        still = pd.Series(labels).duplicated(keep=False).to_numpy()
        labels[still] = [f"{c} (vertex {v})" for c, v in zip(labels[still], idx[still])]
        out[idx] = labels
    out.flags.writeable = False
    return out


def source_labels(pag: PAG) -> np.ndarray:
    """``file:line`` of every vertex (the file's base name; ``""`` when unknown), computed once per PAG.

    Tables of root causes and of the critical path show it beside the call
    path, so a function is named with where it is, as hpcviewer does.
    """
    return pag.analyses.get(SOURCE_LABELS)  # type: ignore[no-any-return]


def _source_labels(pag: PAG, s: Any) -> np.ndarray:
    vt = pag.vertex_table
    files = vt["file"].astype(str).to_numpy()
    lines = vt["line"].to_numpy()
    out = np.array(
        [f"{os.path.basename(f)}:{ln}" if f and ln > 0 else "" for f, ln in zip(files, lines)],
        dtype=object,
    )
    out.flags.writeable = False
    return out


CALL_SITE_PATHS = Analysis(
    "pag.call_site_paths",
    compute=_call_site_paths,
    uses=frozenset({"vertices"}),
    doc="call paths that tell call sites apart",
)
SOURCE_LABELS = Analysis(
    "pag.source_labels", compute=_source_labels, uses=frozenset({"vertices"}), doc="file:line of every vertex"
)
