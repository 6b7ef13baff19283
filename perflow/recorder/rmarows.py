"""The recorder's MPI one-sided records as ``rma_events`` rows (see ``csrc/pfrec_rma.c``).

The rows have the columns and meanings the OTF2 reader gives Score-P's
``Rma*`` records (:data:`perflow.trace.raw.RMA_COLUMNS`, kinds
:class:`perflow.kinds.RmaEv`), so that :mod:`perflow.trace.rma` and the RMA
wait states treat both alike:

* windows are numbered over all ranks: a window is the n-th created over a
  communicator (the same n on every member, creation being collective), and
  ``attrs["rma_windows"]`` maps its id to ``{"name", "comm"}``;
* the groups of ``MPI_Win_post``/``MPI_Win_start`` are numbered by their
  members, and ``attrs["rma_groups"]`` maps each id to the world ranks;
* ``remote`` stays a rank of the window's communicator (the trace builder
  makes it a world rank), ``matching`` pairs a transfer with its local
  completion on the location, ``level`` is the sync level of window
  collectives and group syncs.
"""

from __future__ import annotations

import numpy as np

from ..kinds import RmaEv
from .decode import ProcessData

__all__ = ["RmaDefs", "rma_definitions", "rma_rows"]

_LEVEL_KINDS = np.array([RmaEv.COLLECTIVE_END, RmaEv.GROUP_SYNC], dtype=np.uint8)
_MATCH_KINDS = np.array(
    [
        RmaEv.PUT,
        RmaEv.GET,
        RmaEv.ATOMIC,
        RmaEv.OP_COMPLETE_BLOCKING,
        RmaEv.OP_COMPLETE_NON_BLOCKING,
        RmaEv.REQUEST_LOCK,
        RmaEv.RELEASE_LOCK,
    ],
    dtype=np.uint8,
)


class RmaDefs:
    """Global window and group ids of every process's local ones.

    Attributes
    ----------
    windows : dict of int to dict
        Window id to ``{"name": str, "comm": int}`` (``comm`` a communicator id, -1 unknown).
    groups : dict of int to list of int
        Group id to the world ranks of its members.
    win_lut, group_lut : list of numpy.ndarray
        Per process, local id to global id (-1 unknown).
    """

    def __init__(self) -> None:
        self.windows: dict[int, dict] = {}
        self.groups: dict[int, list[int]] = {}
        self.win_lut: list[np.ndarray] = []
        self.group_lut: list[np.ndarray] = []

    def attrs(self) -> dict[str, dict]:
        """``rma_windows`` and ``rma_groups`` for ``RawTrace.attrs`` (empty without windows)."""
        return {"rma_windows": self.windows, "rma_groups": self.groups} if self.windows else {}


def _lut(pairs: list[tuple[int, int]]) -> np.ndarray:
    out = np.full(max((k for k, _ in pairs), default=-1) + 1, -1, np.int32)
    for k, v in pairs:
        out[k] = v
    return out


def rma_definitions(procs: list[ProcessData], comm_ids: list[dict[int, int]]) -> RmaDefs:
    """Number the windows and groups of ``procs``; ``comm_ids`` maps each process's local communicator ids."""
    d = RmaDefs()
    by_win: dict[tuple, int] = {}
    by_group: dict[tuple[int, ...], int] = {}
    for loc, p in enumerate(procs):
        wins = []
        for lid, lcomm, ordinal in p.windows:
            comm = comm_ids[loc].get(lcomm, -1)
            key = (comm, ordinal) if comm >= 0 and ordinal >= 0 else ("local", loc, lid)
            if key not in by_win:
                by_win[key] = len(by_win)
                d.windows[by_win[key]] = {"name": f"window {len(by_win) - 1}", "comm": int(comm)}
            wins.append((lid, by_win[key]))
        groups = []
        for lid, ranks in p.groups.items():
            key = tuple(int(r) for r in ranks)
            if key not in by_group:
                by_group[key] = len(by_group)
                d.groups[by_group[key]] = list(key)
            groups.append((lid, by_group[key]))
        d.win_lut.append(_lut(wins))
        d.group_lut.append(_lut(groups))
    return d


def _map(lut: np.ndarray, local: np.ndarray) -> np.ndarray:
    ok = (local >= 0) & (local < len(lut))
    return np.where(ok, lut[np.where(ok, local, 0)] if len(lut) else -1, -1).astype(np.int32)


def rma_rows(
    ev: np.ndarray, time: np.ndarray, loc: int, pos: np.ndarray, defs: RmaDefs, proc: int | None = None
) -> dict[str, np.ndarray]:
    """``rma_events`` columns of one thread's RMA records ``ev`` (at ``time``, ``pos`` region records before)
    on location ``loc`` of process index ``proc`` (``loc`` when None)."""
    kind = ev["kind"]
    proc = loc if proc is None else proc
    addr = ev["addr"].view(np.int64)
    return {
        "location": np.full(len(ev), loc, np.int32),
        "time": time,
        "kind": kind.astype(np.int8),
        "win": _map(defs.win_lut[proc], ev["b"]),
        "remote": ev["a"],
        "group": _map(defs.group_lut[proc], ev["comm"]),
        "op": ev["fn"].astype(np.int16),
        "level": np.where(np.isin(kind, _LEVEL_KINDS), addr, 0).astype(np.int32),
        "bytes": ev["n1"],
        "received": ev["n2"],
        "matching": np.where(np.isin(kind, _MATCH_KINDS), addr, -1),
        "pos": pos,
    }
