"""Preparing point-to-point events for matching, vectorised.

Point-to-point messages are matched FIFO per (communicator, source,
destination, tag): the k-th send from ``s`` to ``d`` with tag ``t`` on
communicator ``c`` (in posting order) is received by the k-th receive on
``d`` that took a message from ``s`` with tag ``t`` on ``c`` (in posting
order). MPI's non-overtaking rule makes this exact, including for wildcard
receives, because the trace records the actual source and tag at
completion. Non-blocking operations are tied to their completion through the
request id: the k-th post of request ``q`` on a location is completed by the
k-th completion of ``q`` there (ids are reused after completion).

The collective rows are :mod:`perflow.trace.collmatch`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._jit import njit
from ..errors import TraceError
from ..kinds import P2P
from .raw import RawTrace

__all__ = [
    "record_key",
    "nth_pairs",
    "rank_within",
    "to_world",
    "p2p_records",
    "p2p_threaded",
    "P2PRecords",
    "ssend_regions",
]


def _rank_codes_py(codes: np.ndarray, ncodes: int) -> np.ndarray:
    seen = np.zeros(ncodes, dtype=np.int64)
    out = np.empty(len(codes), dtype=np.int64)
    for i, c in enumerate(codes.tolist()):
        out[i] = seen[c]
        seen[c] += 1
    return out


try:  # pragma: no cover - exercised whenever numba is installed

    @njit
    def _rank_codes(codes, ncodes):  # type: ignore[no-untyped-def]
        seen = np.zeros(ncodes, np.int64)
        out = np.empty(codes.shape[0], np.int64)
        for i in range(codes.shape[0]):
            c = codes[i]
            out[i] = seen[c]
            seen[c] += 1
        return out

except ImportError:  # pragma: no cover
    _rank_codes = _rank_codes_py


def rank_within(key: np.ndarray) -> np.ndarray:
    """Occurrence number of each element among equal keys, in array order (0, 1, 2, ...).

    Linear: keys are counted directly when their range is small, else hashed
    to dense codes first; then one counting pass.
    """
    if len(key) == 0:
        return np.zeros(0, dtype=np.int64)
    key = np.asarray(key)
    if key.dtype.kind in "iu":
        lo, hi = int(key.min()), int(key.max())
        if lo >= 0 and hi < max(4 * len(key), 1 << 22):
            return _rank_codes(key.astype(np.int64, copy=False), hi + 1)
    codes, uniq = pd.factorize(key)
    return _rank_codes(codes.astype(np.int64), len(uniq))


def nth_pairs(key_a: np.ndarray, key_b: np.ndarray) -> np.ndarray:
    """Pair the k-th ``a`` with the k-th ``b`` of the same key.

    Both arrays must be in sequence order. Returns, for each ``a``, the index
    of its partner in ``b``, or -1. Linear time: ``b`` is bucketed by key
    (a counting sort), then each ``a`` looks up the slot of its rank.
    """
    key_a = np.asarray(key_a, dtype=np.int64)
    key_b = np.asarray(key_b, dtype=np.int64)
    if len(key_a) == len(key_b) and np.array_equal(key_a, key_b):  # the k-th a of a key is at the k-th b's place
        return np.arange(len(key_a), dtype=np.int64)
    out = np.full(len(key_a), -1, dtype=np.int64)
    if not len(key_a) or not len(key_b):
        return out
    lo = min(int(key_a.min()), int(key_b.min()))
    hi = max(int(key_a.max()), int(key_b.max()))
    if hi - lo < max(4 * (len(key_a) + len(key_b)), 1 << 22):  # a small range (the usual case): keys are codes
        ca, cb, ncodes = key_a - lo, key_b - lo, hi - lo + 1
    else:
        codes, uniq = pd.factorize(np.r_[key_a, key_b])
        codes, ncodes = codes.astype(np.int64), len(uniq)
        ca, cb = codes[: len(key_a)], codes[len(key_a) :]
    start = np.zeros(ncodes + 1, dtype=np.int64)  # where each code's bucket of b starts
    np.cumsum(np.bincount(cb, minlength=ncodes), out=start[1:])
    _pair_codes(ca, cb, start, out)
    return out


@njit
def _pair_codes(ca, cb, start, out):  # noqa: ANN001, ANN202
    """``out[i]``: index of the k-th ``b`` of code ``ca[i]``, ``i`` being its k-th ``a`` (left -1 when none).

    ``start[c]`` is where the bucket of code ``c`` starts among the ``b``
    sorted by code: the ``b`` are bucketed in order (a counting sort), then
    each ``a`` takes the next slot of its bucket.
    """
    fill = start[:-1].copy()
    slot = np.empty(len(cb), np.int64)
    for i in range(len(cb)):
        c = cb[i]
        slot[fill[c]] = i
        fill[c] += 1
    taken = start[:-1].copy()  # next slot of each bucket
    for i in range(len(ca)):
        c = ca[i]
        k = taken[c]
        if k < start[c + 1]:
            out[i] = slot[k]
        taken[c] = k + 1


def _request_key(loc: np.ndarray, request: np.ndarray, n_locations: int) -> np.ndarray:
    """One int64 per (location, request id): compact (``loc * span + request + 1``) when the ids are small
    non-negative numbers (or -1, none), as tracers number them, else the id's low 40 bits beside the location."""
    req = np.asarray(request, dtype=np.int64)
    if len(req) and int(req.min()) >= -1:
        span = int(req.max()) + 2
        if max(n_locations, 1) * span < (1 << 62):
            return loc * span + (req + 1)
    return loc * (1 << 40) + (req & ((1 << 40) - 1))


def record_key(comm: np.ndarray, src: np.ndarray, dst: np.ndarray, tag: np.ndarray) -> np.ndarray:
    """One dense int64 code per (communicator, source, destination, tag): equal tuples, equal codes.

    Sources and destinations are world ranks (non-negative); communicator
    and tag are coded together. Codes are only comparable within one call.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    comm = np.asarray(comm, dtype=np.int64)
    tag = np.asarray(tag, dtype=np.int64)
    n = int(max(src.max(initial=0), dst.max(initial=0))) + 1
    if len(comm):  # small ranges (the usual case): the code is arithmetic, no hashing
        c0, t0 = int(comm.min()), int(tag.min())
        nc, nt = int(comm.max()) - c0 + 1, int(tag.max()) - t0 + 1
        if nc * nt <= (1 << 24) and nc * nt * n * n < (1 << 62):
            key = comm - c0  # (((comm - c0) * nt + (tag - t0)) * n + src) * n + dst, in place: one new array
            key *= nt
            key += tag
            key -= t0
            key *= n
            key += src
            key *= n
            key += dst
            return key
    codes, uniq = pd.factorize((comm << 32) + (tag & 0xFFFFFFFF))
    if len(uniq) * n * n < (1 << 62):
        return (codes.astype(np.int64) * n + src) * n + dst
    key, _ = pd.factorize(codes.astype(np.int64) * n + src)  # pragma: no cover - huge rank counts
    key, _ = pd.factorize(key.astype(np.int64) * n + dst)
    return key.astype(np.int64)


def to_world(raw: RawTrace, comm: np.ndarray, local: np.ndarray) -> np.ndarray:
    """Translate communicator-local ranks to world ranks (-1 stays -1).

    Communicators without a definition are taken as the world communicator.
    """
    out = np.array(local, dtype=np.int64)  # one copy (also from int32 columns); ``local`` is read before out changes
    local = out
    if not raw.comms or not len(comm):
        return out
    # one gather from the members of every defined communicator laid end to end (no pass per communicator)
    ids = np.array(sorted(raw.comms), dtype=np.int64)
    members = [np.asarray(raw.comms[int(c)], dtype=np.int64) for c in ids]
    size = np.array([len(m) for m in members], dtype=np.int64)
    if all(np.array_equal(m, np.arange(len(m))) for m in members) and int(local.max()) < int(size.min(initial=0)):
        return out  # every communicator's rank i is world rank i and no rank is out of range: nothing to translate
    comm = np.asarray(comm, dtype=np.int64)
    start = np.zeros(len(ids), dtype=np.int64)
    np.cumsum(size[:-1], out=start[1:])
    at = np.minimum(np.searchsorted(ids, comm), len(ids) - 1)
    sel = (ids[at] == comm) & (local >= 0)  # communicators without a definition: the world's ranks
    ci, lr = at[sel], local[sel]
    bad = lr >= size[ci]
    if bad.any():  # the first such communicator (by id), its largest rank
        c = int(ci[bad].min())
        worst = int(lr[bad & (ci == c)].max())
        src = raw.attrs.get("source", "trace")
        raise TraceError(
            f"{src}: rank {worst} is outside communicator {int(ids[c])} "
            f"({raw.comm_names.get(int(ids[c]), '')!s}, {int(size[c])} members)"
        )
    out[sel] = np.concatenate(members)[start[ci] + lr]
    return out


@dataclass
class P2PRecords:
    """Point-to-point events prepared for matching (shared by the local and the distributed engine).

    ``s``/``r`` are the rows of sends (SEND, SSEND, ISEND) and of receive
    completions (RECV, IRECV); the other arrays are aligned with them or
    with all p2p rows as named. The process and thread of a row are looked
    up from its location (:meth:`proc_at`, :meth:`thr_at`): no event-long
    copies.
    """

    s: np.ndarray  # send rows
    r: np.ndarray  # receive-completion rows
    loc: np.ndarray  # per p2p row: its location (as stored)
    loc_proc: np.ndarray  # per location: its world rank (int32 when it fits)
    loc_thr: np.ndarray  # per location: its thread
    peer: np.ndarray  # per p2p row: the peer as a world rank
    comm: np.ndarray  # per p2p row (as stored)
    tag: np.ndarray  # per p2p row (as stored)
    send_complete: np.ndarray  # per send: instance completing it (the send's own for blocking sends)
    recv_post: np.ndarray  # per receive: instance that posted it
    mode: np.ndarray  # per send: 0 standard, 1 synchronous, 2 non-blocking
    order_s: np.ndarray  # positions in s, in posting order
    order_r: np.ndarray  # positions in r, in posting order

    def proc_at(self, rows: np.ndarray) -> np.ndarray:
        """World rank of the locations of p2p ``rows``."""
        return self.loc_proc[self.loc[rows]]

    def thr_at(self, rows: np.ndarray) -> np.ndarray:
        """Thread of the locations of p2p ``rows``."""
        return self.loc_thr[self.loc[rows]]

    @property
    def proc(self) -> np.ndarray:
        """Per p2p row: world rank of its location (int64, made on each call)."""
        return self.loc_proc.astype(np.int64)[self.loc]

    @property
    def thr(self) -> np.ndarray:
        """Per p2p row: thread of its location (int64, made on each call)."""
        return self.loc_thr.astype(np.int64)[self.loc]


def _narrow(values: np.ndarray) -> np.ndarray:
    """``values`` (integers) as int32 when they fit, else int64."""
    v = np.asarray(values, dtype=np.int64)
    if not len(v) or (int(v.min()) >= np.iinfo(np.int32).min and int(v.max()) <= np.iinfo(np.int32).max):
        return v.astype(np.int32)
    return v


def ssend_regions(raw: RawTrace) -> np.ndarray:
    """Region ids of MPI_Ssend/MPI_Issend (a standard send event inside them is synchronous)."""
    return np.flatnonzero(raw.regions["name"].astype(str).isin(["MPI_Ssend", "MPI_Issend"]).to_numpy())


def p2p_records(
    raw: RawTrace, enclosing: np.ndarray, callpath: np.ndarray, cp_region: np.ndarray, threaded: bool
) -> P2PRecords:
    """Prepare the point-to-point events of ``raw`` for FIFO matching.

    Non-blocking operations are tied to their completion (and receives to
    their posting) by request id: the k-th post of request ``q`` on a
    location pairs with the k-th completion of ``q`` there. Posting order is
    stream order when no process communicates from several locations
    (``threaded`` false); else time order, stream order breaking ties.
    """
    ev = raw.p2p_events
    n = len(ev["location"])
    kind = ev["kind"]
    loc = ev["location"].astype(np.int64)
    peer = to_world(raw, ev["comm"], ev["peer"]) if n else np.zeros(0, np.int64)
    req_key = _request_key(loc, ev["request"], len(raw.locations))
    del loc  # the widened locations were only for the request key
    s = np.flatnonzero((kind == P2P.SEND) | (kind == P2P.SSEND) | (kind == P2P.ISEND))
    r = np.flatnonzero((kind == P2P.RECV) | (kind == P2P.IRECV))
    isend = s[kind[s] == P2P.ISEND]
    comp = np.flatnonzero(kind == P2P.ISEND_COMPLETE)
    send_complete = enclosing[s].copy()
    if len(isend):
        j = nth_pairs(req_key[isend], req_key[comp])
        send_complete[np.searchsorted(s, isend)] = np.where(j >= 0, enclosing[comp[np.maximum(j, 0)]], -1)
    irecv = r[kind[r] == P2P.IRECV]
    reqs = np.flatnonzero(kind == P2P.IRECV_REQUEST)
    recv_post = enclosing[r].copy()
    recv_seq = r.copy()
    if len(irecv):
        j = nth_pairs(req_key[irecv], req_key[reqs])
        pos_in_r = np.searchsorted(r, irecv)
        recv_post[pos_in_r] = np.where(j >= 0, enclosing[reqs[np.maximum(j, 0)]], -1)
        recv_seq[pos_in_r] = np.where(j >= 0, reqs[np.maximum(j, 0)], irecv)
    t = ev["time"]
    order_s = np.lexsort((s, t[s])) if threaded else np.arange(len(s))
    order_r = np.lexsort((recv_seq, t[recv_seq])) if threaded else np.argsort(recv_seq, kind="stable")
    send_iv = enclosing[s]
    mode = np.where(kind[s] == P2P.ISEND, 2, np.where(kind[s] == P2P.SSEND, 1, 0)).astype(np.int8)
    ss = ssend_regions(raw)
    if len(ss) and len(s) and len(callpath):
        sync = (send_iv >= 0) & np.isin(cp_region[callpath[np.maximum(send_iv, 0)]], ss)
        mode[sync & (mode == 0)] = 1
    del req_key
    return P2PRecords(
        s,
        r,
        ev["location"],
        _narrow(raw.locations["process"].to_numpy()),
        _narrow(raw.locations["thread"].to_numpy()),
        peer,
        ev["comm"],
        ev["tag"],
        send_complete,
        recv_post,
        mode,
        order_s,
        order_r,
    )


def p2p_threaded(raw: RawTrace) -> bool:
    """Whether some process has point-to-point events on more than one of its locations."""
    loc = raw.p2p_events["location"]  # as stored (int32): compared and used as indices, not widened
    if not len(loc):
        return False
    if np.all(loc[1:] >= loc[:-1]):  # the contract: sorted by location
        used = loc[np.r_[True, loc[1:] != loc[:-1]]]
    else:
        used = np.unique(loc)
    proc = raw.locations["process"].to_numpy(dtype=np.int64)[used]
    return len(np.unique(proc)) != len(proc)
