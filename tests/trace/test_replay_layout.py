"""The replay plan's compiled point layout equals the numpy formulation it replaced."""

from __future__ import annotations

import numpy as np

from perflow.trace import replaykernels as K
from perflow.trace.replayplan import _gather_points, _layout


def _reference(itime, iloc, ich, wb, wloc, wch, wlag, newid, n):  # type: ignore[no-untyped-def]
    loc = np.concatenate([iloc, wloc])
    sel = slice(None) if newid is None else newid[loc] >= 0
    if newid is not None:
        loc = newid[loc[sel]]
    time = np.concatenate([itime, wb])[sel]
    kind = np.concatenate([np.zeros(len(iloc), np.int8), np.full(len(wloc), K.WAIT, np.int8)])[sel]
    ch = np.concatenate([ich, wch])[sel]
    lag = np.concatenate([np.zeros(len(iloc)), wlag])[sel]
    o = np.argsort(time, kind="stable")
    time, kind, ch, lag, loc = time[o], kind[o], ch[o], lag[o], loc[o]
    pos = np.zeros(len(loc), np.int64)
    cnt = np.bincount(loc, minlength=n)
    for q in range(n):
        pos[loc == q] = np.arange(cnt[q])
    poff = np.r_[0, np.cumsum(cnt)].astype(np.int64)
    pseg = (poff[:-1] + np.arange(n))[loc] + pos
    ptl = np.empty(len(time))
    ptl[poff[loc] + pos] = time
    return time, kind, ch, lag, loc, pos, cnt, poff, pseg, ptl


def test_layout_matches_numpy() -> None:
    rng = np.random.default_rng(3)
    L, ni, nw = 7, 300, 200
    itime = rng.integers(0, 50, ni).astype(np.float64)  # many ties: the stable order matters
    wb = rng.integers(0, 50, nw).astype(np.float64)
    iloc, wloc = rng.integers(0, L, ni), rng.integers(0, L, nw)
    ich, wch = rng.integers(0, 40, ni), rng.integers(0, 40, nw)
    wlag = rng.random(nw)
    for own in (np.arange(L), np.array([1, 4, 5])):
        n = len(own)
        newid = None
        if n < L:
            newid = np.full(L + 1, -1, np.int64)
            newid[own] = np.arange(n)
        ref = _reference(itime, iloc, ich, wb, wloc, wch, wlag, newid, n)
        keep = None if newid is None else np.flatnonzero(newid[np.concatenate([iloc, wloc])] >= 0)
        t = np.concatenate([itime, wb]) if keep is None else np.concatenate([itime, wb])[keep]
        o = np.argsort(t, kind="stable")
        o = o if keep is None else keep[o]
        nid = np.zeros(0, np.int64) if newid is None else newid
        got = _gather_points(o, itime, iloc, ich, wb, wloc, wch, wlag, nid, K.WAIT)
        got = (*got, *_layout(got[4], got[0], n))
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b)
