"""The synchronisation points are computed once per PAG and wait settings, and shared by the delay analyses."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.pag.base import off_cpu_flags
from perflow.passes.delay import root_cause
from perflow.trace import analyses as A
from perflow.trace import syncpoints as S
from perflow.trace.delays import delay_costs, off_cpu_children


@pytest.fixture
def pag():  # noqa: ANN201
    return perflow.synthetic.trace(nprocs=8, iterations=10, slow_rank=3, seed=1)


@pytest.fixture
def counted(monkeypatch):  # noqa: ANN001, ANN201
    calls = []

    def count(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return S.sync_points(*args, **kwargs)

    monkeypatch.setattr(A, "sync_points", count)
    return calls


def test_short_and_long_term_share_the_points(pag, counted) -> None:  # noqa: ANN001
    root_cause(pag)
    root_cause(pag, long_term=True)
    pag.analyses.get(A.DELAY_COSTS, long_term=True, long_term_kind="first")
    assert len(counted) == 1  # the later passes reuse the cached points
    pag.analyses.get(A.DELAY_COSTS, late_receiver="none")  # other wait settings: another wait table
    assert len(counted) == 2


def test_shared_points_give_the_same_costs(pag) -> None:  # noqa: ANN001
    w = pag.analyses.get(A.WAIT_INSTANCES)
    roles, regions = A.vertex_roles(pag)
    sp = pag.analyses.get(A.SYNC_POINTS)
    off_cpu = off_cpu_children(pag.vertex_table["parent"].to_numpy(), off_cpu_flags(A._names(pag), roles))
    fresh = S.sync_points(pag.trace, w, pag.analyses.get(A.LOCATIONS), roles, regions)
    for f in S.SyncPoints.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(sp, f), getattr(fresh, f))
    for long_term in (False, True):
        cached = pag.analyses.get(A.DELAY_COSTS, long_term=long_term)
        alone = delay_costs(pag.trace, w, pag.n_vertices, long_term=long_term, roles=roles, regions=regions,
                            off_cpu=off_cpu)  # fmt: skip
        assert len(cached.costs)
        pd.testing.assert_frame_equal(cached.costs, alone.costs, check_exact=True)
        assert (cached.total_wait, cached.unattributed, cached.lost) == (
            alone.total_wait,
            alone.unattributed,
            alone.lost,
        )


def test_first_match_table_and_sort_agree() -> None:
    rng = np.random.default_rng(3)
    for _ in range(100):
        n, m = rng.integers(1, 60, 2)
        keys = (rng.integers(0, 5, n), rng.integers(0, 4, n))
        query = (rng.integers(0, 5, m), rng.integers(0, 4, m))
        value = rng.integers(0, 1000, n)
        kc, qc = keys[0] * 4 + keys[1], query[0] * 4 + query[1]
        exp = [value[np.flatnonzero(kc == x)[0]] if (kc == x).any() else -1 for x in qc]
        np.testing.assert_array_equal(S._first_match(keys, query, value), exp)
        wide = (keys[0] * 10**9, keys[1])  # too many possible keys for a table: the sort
        np.testing.assert_array_equal(S._first_match(wide, (query[0] * 10**9, query[1]), value), exp)


def test_by_location_time_is_lexsort() -> None:
    rng = np.random.default_rng(4)
    loc = rng.integers(0, 9, 5000)
    time = np.round(rng.random(5000), 2)  # many ties
    time[::11] = np.nan
    np.testing.assert_array_equal(S.by_location_time(loc, time, 9), np.lexsort((time, loc)))
    np.testing.assert_array_equal(S.by_location_time(loc, time, 40000), np.lexsort((time, loc)))


def test_collective_sync_by_hand():
    """The compiled per-instance rules on hand-worked instances: a barrier, a broadcast whose receiver waited
    for the root, a reduce whose root waited for the latest sender, an allreduce that moved nothing."""
    from perflow.kinds import CollectiveOp
    from perflow.trace.synckernels import collective_sync
    from perflow.trace.syncpoints import _OP_KIND

    op = np.array([CollectiveOp.BARRIER] * 2 + [CollectiveOp.BCAST] * 2 + [CollectiveOp.REDUCE] * 3
                  + [CollectiveOp.ALLREDUCE] * 2)  # fmt: skip
    cols = dict(
        begin=np.array([0, 2, 5, 1, 0, 4, 4, 1, 2], float),
        end=np.array([3, 3, 6, 7, 9, 5, 6, 3, 3], float),
        sent=np.array([0, 0, 10, 0, 0, 8, 8, 0, 0]),
        received=np.array([0, 0, 0, 10, 0, 0, 0, 0, 0]),
        root=np.array([-1, -1, 0, 0, 0, 0, 0, -1, -1]),
        process=np.array([0, 1, 0, 1, 0, 1, 2, 0, 1]),
    )
    inst = np.array([0, 0, 2, 2, 4, 4, 4, 6, 6])
    civ = np.full(9, -1)
    none = np.zeros(0)
    E, release, sync, vertex = collective_sync(inst, civ, none, none, none.astype(int), cols, _OP_KIND[op.astype(int)])
    assert E.tolist() == [0, 2, 5, 1, 0, 4, 4, 1, 2]
    assert sync.tolist() == [True, True, True, True, True, True, False, False, False]
    # broadcast: the receiver is released at the root's leave (6), not its own (7); reduce: the root at 5
    assert release[sync].tolist() == [3, 3, 6, 6, 5, 5]
    assert vertex.tolist() == [-1] * 9


def test_calls_without_wait_rows_give_points_of_no_wait(pag) -> None:  # noqa: ANN001
    """A trace with collective calls but an empty wait table (a partition where nothing waited): every
    collective point still synchronises, with no wait state (``wid`` -1) and no waiting time."""
    w = pag.analyses.get(A.WAIT_INSTANCES)
    roles, regions = A.vertex_roles(pag)
    locs = pag.analyses.get(A.LOCATIONS)
    full = S.sync_points(pag.trace, w, locs, roles, regions)
    empty = S.sync_points(pag.trace, w.iloc[:0], locs, roles, regions)
    coll, alone = full.group >= 0, empty.group >= 0  # the collective points: grouped by instance
    assert coll.sum() == alone.sum() == len(empty.time) > 0  # the message points came from wait rows: gone
    for f in ("time", "release", "vertex", "group"):
        np.testing.assert_array_equal(getattr(full, f)[coll], getattr(empty, f)[alone])
    assert (empty.wid == -1).all() and (empty.wait == 0).all()
    assert (full.wid[coll] >= 0).any()  # some of them had a wait state before
