"""Computation as region instances: samples and call stacks tile a location's exclusive time into pieces.

Between two recorded events a location runs code that no Enter/Leave event
describes: the *stretch* between region events ``k`` and ``k + 1`` of a
location is exclusive time of the instance open after event ``k`` (the
program's root region, usually, or the innermost instrumented function).
Timer samples taken in that stretch (``pos = k + 1``) say what ran there,
and the call stacks of the regions at its ends (an MPI call's caller, see
:mod:`perflow.trace.contexts`) where the stretch began and ended.

A sample at time ``t`` worth ``w`` seconds stands for the period that ended
at ``t``; it **covers**

    [max(t - w, end of the previous sample's cover, stretch start), min(t, stretch end)]

(empty when that is not a positive span: a sample stamped at or before
what earlier ones covered adds no time). The rest of the stretch are
**gaps**: before its first sample, between two samples, after its last one,
or all of a stretch without samples. A gap gets the deepest calling context
its two ends share (:func:`perflow.trace.contexts.gap_vertex`): a sample's
leaf, or the caller frame of the region instance that ends or starts the
stretch; the start or end of the enclosing instance itself shares nothing
below it. Time off the CPU is not a gap: a recorder that measures it writes
it as region instances of its own (``off_cpu``), which end stretches.

Covers and gaps of a stretch in time order, with their contexts, are cut
into **pieces**: runs of consecutive ones in the same context below the
enclosing instance become one region instance of that vertex, whose parent
is the enclosing instance (a function that ran through several sampling
periods is one instance, the time between its samples included). Runs in
the enclosing instance's own call path stay its exclusive time. Samples whose
stack adds no frame end the runs around them.

The pieces are ordered with the instances of their location: a stretch
follows region event ``k``, so its pieces sort after every instance entered
at or before event ``k`` and before the next one (sort key ``2 * k + 1``
against ``2 * enter event`` of the instances), which keeps the interval rows
a pre-order of the instance tree. Everything is computed per location, so
partitions of whole processes give the same pieces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .contexts import gap_vertex
from .raw import RawTrace

__all__ = ["Pieces", "stretch_pieces", "previous_max", "row_order"]


@dataclass
class Pieces:
    """Sample pieces of one partition, and the samples that fell directly in an instance.

    Attributes
    ----------
    location, parent, vertex : numpy.ndarray
        Per piece: location, enclosing local instance (-1 outside every
        instance), local vertex of the leaf frame.
    enter, leave : numpy.ndarray
        The piece's span (s).
    n : numpy.ndarray
        Samples merged into the piece.
    key : numpy.ndarray
        Sort key among the location's instances (``2 * pos - 1``; an
        instance's is ``2 * enter event``).
    direct_vertex, direct_location : numpy.ndarray
        One element per sample that covers time but whose stack ends in the
        enclosing instance's own call path (no piece): that vertex and location.
    """

    location: np.ndarray
    parent: np.ndarray
    vertex: np.ndarray
    enter: np.ndarray
    leave: np.ndarray
    n: np.ndarray
    key: np.ndarray
    direct_vertex: np.ndarray
    direct_location: np.ndarray

    def __len__(self) -> int:
        return len(self.enter)


def previous_max(group: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Largest ``x`` over the earlier elements of the same group (``-inf`` for a group's first).

    ``group`` must be sorted ascending. Exact (a running maximum of ranks,
    no arithmetic on the values).

    Examples
    --------
    >>> previous_max(np.array([0, 0, 0, 1, 1]), np.array([3.0, 1.0, 5.0, 2.0, 0.0])).tolist()
    [-inf, 3.0, 3.0, -inf, 2.0]
    """
    n = len(x)
    out = np.full(n, -np.inf)
    if n < 2:
        return out
    order = np.lexsort((x, group))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    best = order[np.maximum.accumulate(rank)]  # the element holding the running maximum
    same = group[1:] == group[:-1]
    out[1:] = np.where(same, x[best[:-1]], -np.inf)
    return out


def _covers(
    raw: RawTrace, open_inst: np.ndarray, t_leave: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per sample: location, position, cover start, cover end and whether it covers time."""
    samp = raw.sample_events
    ev_loc, ev_t = raw.region_events["location"], raw.region_events["time"]
    loc = samp["location"].astype(np.int64)
    pos = samp["pos"].astype(np.int64)
    t = samp["time"].astype(np.float64)
    w = samp["weight"].astype(np.float64)
    ne = len(ev_loc)
    if ne:
        pc, nc = np.clip(pos - 1, 0, ne - 1), np.clip(pos, 0, ne - 1)
        has_prev = (pos >= 1) & (ev_loc[pc] == loc)
        has_next = (pos < ne) & (ev_loc[nc] == loc)
        s0 = np.where(has_prev, ev_t[pc], -np.inf)
        s1 = np.where(has_next, ev_t[nc], np.inf)
    else:
        s0, s1 = np.full(len(t), -np.inf), np.full(len(t), np.inf)
        has_next = np.zeros(len(t), dtype=bool)
    # after a location's last event inside an instance closed there (close_open): the instance ends the stretch
    cut = ~has_next & (open_inst >= 0)
    if cut.any():
        s1 = np.where(cut, t_leave[np.maximum(open_inst, 0)], s1)
    end = np.minimum(t, s1)
    start = np.maximum(np.maximum(t - w, s0), previous_max(loc, end))
    return loc, pos, start, end, end > start


def stretch_pieces(
    raw: RawTrace,
    ends: dict[str, np.ndarray],
    parent: np.ndarray,
    depth: np.ndarray,
    t_leave: np.ndarray,
    smp: dict[str, np.ndarray] | None = None,
) -> Pieces:
    """Cut every stretch of a partition into pieces: sample covers and the gaps between them.

    Parameters
    ----------
    raw : RawTrace
        The partition (its ``sample_events`` and ``region_events``).
    ends : dict
        The stretches (:func:`perflow.trace.contexts.stretch_ends`).
    parent, depth : numpy.ndarray
        The grown calling-context tree (local vertices) and each vertex's depth.
    t_leave : numpy.ndarray
        Leave time of each local instance.
    smp : dict, optional
        Per sample (:func:`perflow.trace.contexts.attach_samples`): ``open``
        (the enclosing local instance, -1 none), ``base`` (its call path) and
        ``leaf`` (the local vertex of its leaf frame, ``base`` when the stack
        adds none). None without samples.
    """
    ev_t = raw.region_events["time"]
    ev_loc = raw.region_events["location"].astype(np.int64)
    ks, sbase = ends["k"], ends["base"]
    none_i, none_f = np.zeros(0, np.int64), np.zeros(0)
    # segments: (location, stretch key, start, end, vertex, base, parent, samples)
    seg: list[tuple[np.ndarray, ...]] = []
    direct_v, direct_l = none_i, none_i
    has = np.zeros(len(ks), dtype=bool)
    if smp is not None and len(smp["leaf"]):
        open_inst, base, leaf = (np.asarray(smp[c], dtype=np.int64) for c in ("open", "base", "leaf"))
        loc, pos, start, end, held = _covers(raw, open_inst, t_leave)
        direct = held & (leaf == base) & (base >= 0)
        direct_v, direct_l = base[direct], loc[direct]
        h = np.flatnonzero(held)
        seg.append(
            (loc[h], 2 * pos[h] - 1, start[h], end[h], leaf[h], base[h], open_inst[h], np.ones(len(h), np.int64))
        )
        # the stretch of each covering sample (none before a location's first event or outside every instance)
        si = np.clip(np.searchsorted(ks, pos[h] - 1), 0, max(len(ks) - 1, 0))
        inside = (ks[si] == pos[h] - 1) & (ev_loc[np.clip(pos[h] - 1, 0, None)] == loc[h]) if len(ks) else si < 0
        hs, si = h[inside], si[inside]
        if len(hs):
            has[si] = True
            first = np.r_[True, si[1:] != si[:-1]]
            last = np.r_[si[1:] != si[:-1], True]
            # between two samples of a stretch: the context both share
            a, b = hs[:-1][~first[1:]], hs[1:][~first[1:]]
            g = gap_vertex(parent, depth, leaf[a], leaf[b])
            seg.append((loc[b], 2 * pos[b] - 1, end[a], start[b], g, base[b], open_inst[b], np.zeros(len(b), np.int64)))
            # before the first sample and after the last: the context shared with the stretch's ends
            f, sf = hs[first], si[first]
            g = gap_vertex(parent, depth, ends["left"][sf], leaf[f])
            seg.append(
                (loc[f], 2 * pos[f] - 1, ev_t[ks[sf]], start[f], g, base[f], open_inst[f], np.zeros(len(f), np.int64))
            )
            z, sz = hs[last], si[last]
            g = gap_vertex(parent, depth, leaf[z], ends["right"][sz])
            seg.append(
                (loc[z], 2 * pos[z] - 1, end[z], ev_t[ks[sz] + 1], g, base[z], open_inst[z], np.zeros(len(z), np.int64))
            )
    e = np.flatnonzero(~has)  # stretches without samples: the context of their two ends
    if len(e):
        k = ks[e]
        g = gap_vertex(parent, depth, ends["left"][e], ends["right"][e])
        seg.append(
            (ev_loc[k], 2 * k + 1, ev_t[k], ev_t[k + 1], g, sbase[e], ends["open"][e], np.zeros(len(e), np.int64))
        )
    if not seg:
        return Pieces(none_i, none_i, none_i, none_f, none_f, none_i, none_i, direct_v, direct_l)
    sl, sk, s0, s1, sv, sb, sp, sn = (np.concatenate(c) for c in zip(*seg))
    keep = (s1 > s0) & (sv != sb)  # time in the open instance's own call path stays its exclusive time
    keep |= (sn > 0) & (s1 > s0)  # (samples there end runs of other leaves)
    sl, sk, s0, s1, sv, sb, sp, sn = (c[keep] for c in (sl, sk, s0, s1, sv, sb, sp, sn))
    if not len(sl):
        return Pieces(none_i, none_i, none_i, none_f, none_f, none_i, none_i, direct_v, direct_l)
    order = np.lexsort((s0, sk, sl))
    sl, sk, s0, s1, sv, sb, sp, sn = (c[order] for c in (sl, sk, s0, s1, sv, sb, sp, sn))
    # runs of consecutive segments of one stretch in the same context become one piece
    join = (sl[1:] == sl[:-1]) & (sk[1:] == sk[:-1]) & (sv[1:] == sv[:-1])
    first, final = np.r_[True, ~join], np.r_[~join, True]
    grp = np.cumsum(first) - 1
    deeper = sv[first] != sb[first]  # runs below the open instance are pieces
    head, tail = np.flatnonzero(first)[deeper], np.flatnonzero(final)[deeper]
    n = np.bincount(grp, weights=sn, minlength=len(deeper))[deeper].astype(np.int64)
    return Pieces(
        location=sl[head],
        parent=sp[head].astype(np.int64),
        vertex=sv[head].astype(np.int64),
        enter=s0[head],
        leave=s1[tail],
        n=n,
        key=sk[head],
        direct_vertex=direct_v.astype(np.int64),
        direct_location=direct_l,
    )


def row_order(
    inst_loc: np.ndarray, inst_enter_event: np.ndarray, pieces: Pieces | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Interval rows of a partition: instances and pieces of each location in pre-order.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        The location of each row (grouped ascending), the row of each local
        instance and the row of each piece.
    """
    n = len(inst_loc)
    if pieces is None or not len(pieces):
        return inst_loc, np.arange(n, dtype=np.int64), np.zeros(0, dtype=np.int64)
    loc = np.r_[inst_loc, pieces.location].astype(np.int64)
    key = np.r_[2 * inst_enter_event.astype(np.int64), pieces.key]
    order = np.lexsort((np.arange(len(loc)), key, loc))
    row = np.empty(len(loc), dtype=np.int64)
    row[order] = np.arange(len(loc))
    return loc[order], row[:n], row[n:]
