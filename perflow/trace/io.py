"""I/O operations of a partition: the ``io`` table of :class:`~perflow.pag.instances.Trace`.

A trace's I/O events (OTF2's ``IoOperationBegin``/``IoOperationComplete``,
written by Score-P's POSIX, ISO C and MPI-IO adapters inside the I/O call's
region) are paired per location by (handle, matching id), the k-th begin
with the k-th completion. An operation belongs to the region instance open at
its begin (the ``write``/``MPI_File_write`` call, or the call that issued a
non-blocking one); its bytes are those the completion reports (the request's
when it never completed).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._arrays import setdiff_sorted
from ..kinds import IoEv
from ..pag.instances import conform, take_or
from .match import nth_pairs
from .raw import RawTrace

__all__ = ["io_rows"]


def io_rows(
    raw: RawTrace, enclosing: np.ndarray, ginst: np.ndarray, loc_proc: np.ndarray, loc_thr: np.ndarray
) -> pd.DataFrame:
    """One row per I/O operation, in the columns of :data:`perflow.pag.instances.IO_COLUMNS`.

    ``enclosing`` is the local region instance open at each I/O event (-1
    none), ``ginst`` the global interval row of each local instance.
    """
    ev = raw.io_events
    kind = ev["kind"]
    b = np.flatnonzero(kind == IoEv.BEGIN)
    c = np.flatnonzero(kind == IoEv.COMPLETE)
    if not len(b) and not len(c):
        return conform("io", None)
    loc = ev["location"].astype(np.int64)
    both = np.r_[b, c]
    _, code = np.unique(np.stack([loc[both], ev["handle"][both], ev["matching"][both]]), axis=1, return_inverse=True)
    code = np.asarray(code).ravel()
    j = nth_pairs(code[: len(b)], code[len(b) :])
    got = j >= 0
    cc = c[np.maximum(j, 0)] if len(c) else np.zeros(len(b), dtype=np.int64)
    lone = setdiff_sorted(np.arange(len(c)), j[got])  # completions without a begin
    first = np.r_[b, c[lone]]
    last = np.r_[np.where(got, cc, b), c[lone]]
    mode = np.r_[ev["mode"][b], np.full(len(lone), -1, dtype=np.int8)]
    nbytes = np.r_[np.where(got, ev["bytes"][cc] if len(c) else 0, ev["bytes"][b]), ev["bytes"][c[lone]]]
    lf = loc[first]
    out = pd.DataFrame(
        {
            "process": loc_proc[lf],
            "thread": loc_thr[lf],
            "interval": take_or(ginst, enclosing[first], -1),
            "handle": ev["handle"][first],
            "mode": mode,
            "bytes": nbytes,
            "begin": ev["time"][first],
            "end": ev["time"][last],
        }
    )
    out = out.sort_values(["process", "thread", "begin"], kind="stable").reset_index(drop=True)
    return conform("io", out)
