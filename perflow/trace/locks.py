"""Lock acquisitions of a partition: the ``locks`` table of :class:`~perflow.pag.instances.Trace`.

A trace's ACQUIRE_LOCK / RELEASE_LOCK thread events (OTF2's
``ThreadAcquireLock``/``ThreadReleaseLock`` and ``OmpAcquireLock``/
``OmpReleaseLock``: OpenMP locks and critical sections, pthread mutexes)
carry a lock id and an acquisition number. The acquisition ``k`` of a lock
is paired with the release of the same (process, lock, acquisition number)
(its ``k``-th one when a trace repeats numbers), and each is placed in the
region instance open at it. Locks are process-local, and a partition holds
whole processes, so every pair is found inside one partition.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..kinds import ThreadEv
from ..pag.instances import conform, take_or
from .match import nth_pairs
from .raw import RawTrace

__all__ = ["lock_rows"]


def lock_rows(
    raw: RawTrace, enclosing: np.ndarray, ginst: np.ndarray, loc_proc: np.ndarray, loc_thr: np.ndarray
) -> pd.DataFrame:
    """One row per lock acquisition, in the columns of :data:`perflow.pag.instances.LOCK_COLUMNS`.

    Parameters
    ----------
    raw : RawTrace
        The partition.
    enclosing : numpy.ndarray
        The local region instance open at each thread event (-1 none).
    ginst : numpy.ndarray
        Global interval row of each local instance.
    loc_proc, loc_thr : numpy.ndarray
        Process and thread of each location.
    """
    ev = raw.thread_events
    kind = ev["kind"]
    acq = np.flatnonzero(kind == ThreadEv.ACQUIRE_LOCK)
    if not len(acq):
        return conform("locks", None)
    rel = np.flatnonzero(kind == ThreadEv.RELEASE_LOCK)
    loc = ev["location"].astype(np.int64)
    both = np.r_[acq, rel]
    trip = np.stack([loc_proc[loc[both]], ev["lock"][both], ev["order"][both]])
    _, code = np.unique(trip, axis=1, return_inverse=True)
    code = np.asarray(code).ravel()
    j = nth_pairs(code[: len(acq)], code[len(acq) :])
    got = j >= 0
    r = rel[np.maximum(j, 0)] if len(rel) else np.zeros(len(acq), dtype=np.int64)
    la = loc[acq]
    out = pd.DataFrame(
        {
            "process": loc_proc[la],
            "thread": loc_thr[la],
            "interval": take_or(ginst, enclosing[acq], -1),
            "lock": ev["lock"][acq],
            "order": ev["order"][acq],
            "acquire": ev["time"][acq],
            "release": np.where(got, ev["time"][r] if len(rel) else np.nan, np.nan),
            "release_interval": np.where(got, take_or(ginst, enclosing[r], -1) if len(rel) else -1, -1),
        }
    )
    out = out.sort_values(["process", "lock", "order"], kind="stable").reset_index(drop=True)
    return conform("locks", out)
