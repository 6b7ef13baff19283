"""Preparing collective events for matching, vectorised: the collective participant rows.

Collective instances: the k-th collective on communicator ``c`` on each
member location is instance k of ``c`` (MPI requires every member to call
collectives on a communicator in the same order); a process that calls
collectives from several threads (locations) numbers them over its threads
in time order (MPI requires such calls to be ordered by the program).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..kinds import COLLECTIVE_NAMES, CollectiveOp, CollEv
from .match import nth_pairs, rank_within, to_world
from .raw import RawTrace

__all__ = [
    "collective_event_rows",
    "collective_begin_pairs",
    "collective_seq",
    "synthesised_collective_rows",
]


def _several_locations(loc: np.ndarray, loc_proc: np.ndarray) -> bool:
    """Whether some process has rows on more than one of its locations (``loc``: location id of each row,
    ``loc_proc``: the process of each location); a count per location, no sort of the rows."""
    if not len(loc):
        return False
    used = np.flatnonzero(np.bincount(loc, minlength=len(loc_proc)))
    proc = loc_proc[used]
    return len(np.unique(proc)) != len(proc)


def collective_begin_pairs(raw: RawTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """The END rows of ``raw.coll_events``, the BEGIN rows, and per END the index (into the BEGIN rows) of its
    BEGIN (-1 none), and, when the trace has non-blocking collectives, the row each END is ordered by (its
    BEGIN's, else its own; None otherwise).

    A non-blocking collective pairs by request id, the others by order on their location.
    """
    ev = raw.coll_events
    kind = ev["kind"]
    ends = np.flatnonzero(kind == CollEv.END)
    begins = np.flatnonzero(kind == CollEv.BEGIN)
    req = ev.get("request")
    order = None
    if not len(ends):
        return ends, begins, np.zeros(0, np.int64), order
    loc_e = ev["location"][ends].astype(np.int64)  # gathered, then widened (not the whole column)
    loc_b = ev["location"][begins].astype(np.int64)
    if req is not None and (req >= 0).any():
        j = np.full(len(ends), -1, dtype=np.int64)
        e_nb, b_nb = req[ends] >= 0, req[begins] >= 0
        sub = nth_pairs(loc_e[~e_nb], loc_b[~b_nb])
        j[np.flatnonzero(~e_nb)] = np.where(sub >= 0, np.flatnonzero(~b_nb)[np.maximum(sub, 0)], -1)
        span = int(req.max()) + 2
        sub = nth_pairs(loc_e[e_nb] * span + req[ends][e_nb], loc_b[b_nb] * span + req[begins][b_nb])
        j[np.flatnonzero(e_nb)] = np.where(sub >= 0, np.flatnonzero(b_nb)[np.maximum(sub, 0)], -1)
        order = np.where(j >= 0, begins[np.maximum(j, 0)], ends)
    else:
        j = nth_pairs(loc_e, loc_b)
    return ends, begins, j, order


def collective_seq(raw: RawTrace, ends: np.ndarray, order: np.ndarray | None, begin_t: np.ndarray) -> np.ndarray:
    """The instance number of each END row of ``raw.coll_events`` (``ends``, ``order`` as
    :func:`collective_begin_pairs` gives them; ``begin_t`` the time each started): the k-th collective of its
    location on its communicator, in BEGIN order when the trace has non-blocking collectives; a process that
    calls collectives from several threads (locations) numbers them over its threads in time order.

    The one numbering of collective instances: the build and the clock correction both use it.
    """
    ev = raw.coll_events
    comm = ev["comm"][ends].astype(np.int64)
    lo = ev["location"][ends].astype(np.int64)
    loc_proc = raw.locations["process"].to_numpy(dtype=np.int64)
    if _several_locations(lo, loc_proc):  # number each (comm, process)'s collectives over its threads, in time order
        key = comm * (1 << 32) + loc_proc[lo]
        by = np.lexsort((ends if order is None else order, begin_t, key))
    elif order is None:
        return rank_within(comm * (1 << 32) + lo)
    else:  # number each (comm, location)'s collectives in BEGIN order
        key = comm * (1 << 32) + lo
        by = np.lexsort((order, key))
    seq = np.empty(len(ends), dtype=np.int64)
    seq[by] = rank_within(key[by])
    return seq


def collective_event_rows(raw: RawTrace, enclosing: np.ndarray, t_enter: np.ndarray) -> pd.DataFrame:
    """One row per recorded collective (its END event, paired with its BEGIN on the same location).

    Columns: ``row`` (of the END in ``coll_events``), ``location``,
    ``key_comm``/``seq`` (the instance key: the ``seq``-th collective of the
    location on communicator ``key_comm``), ``process``, ``thread``,
    ``interval`` (the enclosing instance), ``op``, ``comm``, ``root`` (world
    rank or -1), ``sent``, ``received``, ``begin``, ``end``. Without a BEGIN,
    ``begin`` is the enclosing instance's enter time.

    A non-blocking collective (``request`` >= 0: BEGIN in the I-call, END in
    the Wait/Test that completed it) pairs by request id, the others by
    order; instances are numbered in the order of their BEGINs (MPI starts
    the collectives of a communicator in the same order on every member,
    whatever the order in which they complete).
    """
    ev = raw.coll_events
    ends, begins, j, order = collective_begin_pairs(raw)
    if not len(ends):
        return pd.DataFrame()
    iv = enclosing[ends]
    fallback = np.where(iv >= 0, t_enter[np.maximum(iv, 0)] if len(t_enter) else 0.0, ev["time"][ends])
    begin_t = np.where(j >= 0, ev["time"][begins[np.maximum(j, 0)]], fallback)
    comm = ev["comm"][ends].astype(np.int64)
    root_local = ev["root"][ends].astype(np.int64)
    root = np.where(root_local >= 0, to_world(raw, comm, np.maximum(root_local, 0)), -1)
    lo = ev["location"][ends].astype(np.int64)
    seq = collective_seq(raw, ends, order, begin_t)
    return pd.DataFrame(
        {
            "row": ends,
            "location": lo,
            "key_comm": comm,
            "seq": seq,
            "process": raw.locations["process"].to_numpy(dtype=np.int64)[lo],
            "thread": raw.locations["thread"].to_numpy(dtype=np.int64)[lo],
            "interval": iv,
            "op": ev["op"][ends],
            "comm": comm,
            "root": root,
            "sent": ev["sent"][ends],
            "received": ev["received"][ends],
            "begin": begin_t,
            "end": ev["time"][ends],
        },
        copy=False,
    )


def _handle_record(kind: np.ndarray, op: np.ndarray, enclosing: np.ndarray) -> np.ndarray:
    """Per collective event: whether it belongs to a communicator-handle record (an END with a handle op, or
    a BEGIN in a call whose ENDs are all handle records)."""
    handle_op = (op >= CollectiveOp.CREATE_HANDLE) & (op <= CollectiveOp.DESTROY_HANDLE_AND_DEALLOCATE)
    end = kind == CollEv.END
    real_end = end & ~handle_op
    if not real_end.any():
        return np.ones(len(kind), dtype=bool)
    has_real = np.isin(enclosing, enclosing[real_end & (enclosing >= 0)])
    return (end & handle_op) | (~end & ~has_real)


def synthesised_collective_rows(
    raw: RawTrace,
    enclosing: np.ndarray,
    callpath: np.ndarray,
    cp_region: np.ndarray,
    inst_loc: np.ndarray,
    t_enter: np.ndarray,
    t_leave: np.ndarray,
    infer: bool,
) -> pd.DataFrame:
    """Collective rows for MPI calls without collective events: MPI_Init/MPI_Finalize, every collective with ``infer``.

    ``enclosing`` is the instance enclosing each collective event: calls
    that hold a recorded collective are not synthesised, except for the
    communicator-handle records (``CREATE_HANDLE``/``DESTROY_HANDLE``, ...)
    that Score-P 8 writes inside MPI_Init and MPI_Finalize, which synchronise
    nothing by themselves. ``callpath`` (with the call paths'
    regions ``cp_region``), ``inst_loc``, ``t_enter`` and ``t_leave`` describe
    each region instance. The k-th call of an
    operation on a (process, thread) is the k-th instance, keyed apart from
    recorded communicators. Columns as :func:`collective_event_rows`, without
    ``row`` and ``location``.
    """
    names = raw.regions["name"].astype(str).to_numpy()
    ops = np.full(len(names), -1, dtype=np.int64)
    for i, nm in enumerate(names):
        op = COLLECTIVE_NAMES.get(nm)
        if op is not None and (infer or op in (CollectiveOp.INIT, CollectiveOp.FINALIZE)):
            ops[i] = int(op)
    cp_ops = ops[cp_region] if len(cp_region) else np.zeros(0, np.int64)
    if not len(callpath) or not (cp_ops >= 0).any():
        return pd.DataFrame()
    cand = np.flatnonzero(cp_ops[callpath] >= 0)
    if len(cand):
        ev = raw.coll_events
        held = (enclosing >= 0) & ~_handle_record(ev["kind"], ev["op"], enclosing)
        cand = cand[~np.isin(cand, enclosing[held])]
    if not len(cand):
        return pd.DataFrame()
    world = raw.world_comm
    wc = -1 if world is None else int(world)
    op = cp_ops[callpath[cand]]
    lc = inst_loc[cand]
    p = raw.locations["process"].to_numpy(dtype=np.int64)[lc]
    t = raw.locations["thread"].to_numpy(dtype=np.int64)[lc]
    return pd.DataFrame(
        {
            "key_comm": -(op + 2),
            "seq": rank_within(op * (1 << 32) + p * 1024 + t),
            "process": p,
            "thread": t,
            "interval": cand,
            "op": op,
            "comm": np.full(len(cand), wc),
            "root": np.full(len(cand), -1),
            "sent": np.zeros(len(cand), dtype=np.int64),
            "received": np.zeros(len(cand), dtype=np.int64),
            "begin": t_enter[cand],
            "end": t_leave[cand],
        },
        copy=False,
    )
