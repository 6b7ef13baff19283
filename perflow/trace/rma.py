"""RMA records of a partition: the ``rma`` table of :class:`~perflow.pag.instances.Trace`.

A trace's ``Rma*`` records (written by Score-P's MPI one-sided and SHMEM
adapters inside the calls they describe) become one row each, on the region
instance open at the record (the ``MPI_Put``, ``MPI_Win_fence``,
``MPI_Win_start``, ... call). A transfer (``PUT``, ``GET``, ``ATOMIC``) is
paired per location with the k-th local completion (``OP_COMPLETE_BLOCKING``
or ``OP_COMPLETE_NON_BLOCKING``) of the same window and matching id, which
then gives the transfer its ``complete`` time and ``complete_interval``
instead of a row of its own. Target ranks (``remote``), given in the
window's communicator, become world ranks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._arrays import unique
from ..kinds import RmaEv
from ..pag.instances import conform, take_or
from .match import nth_pairs
from .raw import RawTrace

__all__ = ["rma_rows", "TRANSFERS", "world_remote"]

#: the transfer kinds
TRANSFERS = (RmaEv.PUT, RmaEv.GET, RmaEv.ATOMIC)
_LOCAL_COMPLETIONS = (RmaEv.OP_COMPLETE_BLOCKING, RmaEv.OP_COMPLETE_NON_BLOCKING)


def world_remote(
    win: np.ndarray, remote: np.ndarray, windows: dict[int, Any], comms: dict[int, np.ndarray]
) -> np.ndarray:
    """World rank of each ``remote`` (a rank in the communicator of window ``win``); -1 where unknown."""
    out = np.full(len(remote), -1, dtype=np.int32)
    for w in unique(win):
        info = windows.get(int(w))
        members = comms.get(int(info["comm"])) if info is not None else None
        if members is None or not len(members):
            continue
        sel = np.flatnonzero((win == w) & (remote >= 0) & (remote < len(members)))
        out[sel] = np.asarray(members, dtype=np.int64)[remote[sel]]
    return out


def rma_rows(
    raw: RawTrace, enclosing: np.ndarray, ginst: np.ndarray, loc_proc: np.ndarray, loc_thr: np.ndarray
) -> pd.DataFrame:
    """One row per RMA record (completions folded into their transfers), columns of
    :data:`perflow.pag.instances.RMA_COLUMNS`.

    ``enclosing`` is the local region instance open at each RMA event (-1
    none), ``ginst`` the global interval row of each local instance.
    """
    ev = raw.rma_events
    n = len(ev["kind"])
    if not n:
        return conform("rma", None)
    kind = ev["kind"]
    loc = ev["location"].astype(np.int64)
    t = np.flatnonzero(np.isin(kind, np.array(TRANSFERS, dtype=np.int8)))
    c = np.flatnonzero(np.isin(kind, np.array(_LOCAL_COMPLETIONS, dtype=np.int8)))
    complete = np.full(n, np.nan)
    complete_at = np.full(n, -1, dtype=np.int64)
    keep = np.ones(n, dtype=bool)
    if len(t) and len(c):
        both = np.r_[t, c]
        _, code = np.unique(np.stack([loc[both], ev["win"][both], ev["matching"][both]]), axis=1, return_inverse=True)
        code = np.asarray(code).ravel()
        j = nth_pairs(code[: len(t)], code[len(t) :])
        got = j >= 0
        cc = c[j[got]]
        complete[t[got]] = ev["time"][cc]
        complete_at[t[got]] = take_or(ginst, enclosing[cc], -1)
        keep[cc] = False
    rows = np.flatnonzero(keep)
    lr = loc[rows]
    windows = {int(k): v for k, v in (raw.attrs.get("rma_windows") or {}).items()}
    out = pd.DataFrame(
        {
            "process": loc_proc[lr],
            "thread": loc_thr[lr],
            "interval": take_or(ginst, enclosing[rows], -1),
            "kind": kind[rows],
            "win": ev["win"][rows],
            "remote": world_remote(ev["win"][rows], ev["remote"][rows], windows, raw.comms),
            "group": ev["group"][rows],
            "op": ev["op"][rows],
            "level": ev["level"][rows],
            "bytes": ev["bytes"][rows],
            "received": ev["received"][rows],
            "matching": ev["matching"][rows],
            "time": ev["time"][rows],
            "complete": complete[rows],
            "complete_interval": complete_at[rows],
        }
    )
    out = out.sort_values(["process", "thread"], kind="stable").reset_index(drop=True)
    return conform("rma", out)
