"""Collective wait states: worked examples for every pattern, zero-byte collectives, MPI_Init, synthetic traces."""

from __future__ import annotations

import pytest

import perflow.passes  # noqa: F401
from perflow import synthetic
from perflow.errors import PassError
from perflow.passes.collectives import collective_wait_states, collective_waits_by_operation
from perflow.trace.builder import TraceBuilder


def _coll(calls, name, **coll):
    tb = TraceBuilder()
    for p, (e, lv) in enumerate(calls):
        tb.call(p, name, e, lv, coll=dict(coll))
    return tb.build()


def _by(w, kind):
    sel = w[w["kind"].astype(str) == kind]
    return dict(zip(sel["process"].tolist(), [round(x, 9) for x in sel["amount"].tolist()]))


def test_barrier_worked_example():
    # E = (1, 3, 6), L = (6.5, 6.6, 7.0): waits (5, 3, 0), completions (0, 0.1, 0.5)
    w = collective_wait_states(_coll([(1, 6.5), (3, 6.6), (6, 7.0)], "MPI_Barrier"))
    assert _by(w, "wait_barrier") == {0: 5.0, 1: 3.0}
    assert _by(w, "barrier_completion") == {1: 0.1, 2: 0.5}
    waits = w[w["kind"].astype(str) == "wait_barrier"]
    assert set(waits["cause_process"]) == {2} and set(waits["cause_time"]) == {6.0}
    assert waits["end"].tolist() == [6.0, 6.0]


def test_nxn_and_zero_bytes():
    calls = [(1, 6.5), (3, 6.6), (6, 7.0)]
    w = collective_wait_states(_coll(calls, "MPI_Allreduce", bytes=8))
    assert _by(w, "wait_nxn") == {0: 5.0, 1: 3.0}
    assert _by(w, "nxn_completion") == {1: 0.1, 2: 0.5}
    # a data collective that moves nothing is no synchronisation point ...
    assert collective_wait_states(_coll(calls, "MPI_Allreduce", bytes=0)).empty
    # ... a barrier always is
    assert _by(collective_wait_states(_coll(calls, "MPI_Barrier", bytes=0)), "wait_barrier") == {0: 5.0, 1: 3.0}


def test_late_broadcast():
    # root 0 enters at 5; the others enter at 1 and 2 and wait for it
    w = collective_wait_states(_coll([(5, 6), (1, 6), (2, 6.5)], "MPI_Bcast", root=0, bytes=8))
    assert _by(w, "late_broadcast") == {1: 4.0, 2: 3.0}
    assert set(w["cause_process"]) == {0}
    assert _by(w, "wait_nxn") == {}


def test_early_reduce():
    # the root enters at 1, the senders at 3 and 4
    pag = _coll([(1, 5), (3, 5), (4, 5)], "MPI_Reduce", root=0, bytes=8)
    w = collective_wait_states(pag)
    assert _by(w, "early_reduce") == {0: 3.0}
    assert w["cause_process"].tolist() == [2]
    w = collective_wait_states(pag, early_reduce="earliest")
    assert _by(w, "early_reduce") == {0: 2.0}
    with pytest.raises(PassError, match="early_reduce"):
        collective_wait_states(pag, early_reduce="last")


def test_early_scan_in_communicator_order():
    # ranks 0, 1, 2 enter at 3, 1, 2: rank 1 waits for rank 0 (2 s), rank 2 for max(3, 1) (1 s)
    w = collective_wait_states(_coll([(3, 5), (1, 5), (2, 5)], "MPI_Scan", bytes=8))
    assert _by(w, "early_scan") == {1: 2.0, 2: 1.0}
    # on a communicator whose rank order is world ranks (2, 0, 1): rank 0 = world 2 (enters at 2)
    tb = TraceBuilder()
    tb.comm(5, [2, 0, 1])
    for p, (e, lv) in enumerate([(3, 5), (1, 5), (2, 5)]):
        tb.call(p, "MPI_Scan", e, lv, coll={"bytes": 8, "comm": 5})
    w = collective_wait_states(tb.build())
    # world 0 (comm rank 1) waits for world 2 (enter 2): 2 - 3 < 0 -> no wait
    # world 1 (comm rank 2) waits for max(E(world 2), E(world 0)) = 3: 3 - 1 = 2
    assert _by(w, "early_scan") == {1: 2.0}


def test_init_is_a_world_barrier():
    """Scalasca's two metrics of MPI_Init/MPI_Finalize: no wait in MPI_Init (start-up is not waiting), its
    completion after the first process could leave; the wait in MPI_Finalize for the last to arrive."""
    tb = TraceBuilder()
    tb.call(0, "MPI_Init", 0, 2)
    tb.call(1, "MPI_Init", 1.5, 2.25)
    tb.call(0, "MPI_Finalize", 3, 4)
    tb.call(1, "MPI_Finalize", 3.5, 4)
    w = collective_wait_states(tb.build())
    got = list(zip(w["kind"].astype(str), w["name"].astype(str), w["process"], w["amount"]))
    assert got == [("finalize_wait", "MPI_Finalize", 0, 0.5), ("init_completion", "MPI_Init", 1, 0.25)]


def test_synthetic_slow_rank_makes_everyone_wait_in_allreduce():
    pag = synthetic.trace(nprocs=6, iterations=20, slow_rank=3, noise=0.0)
    t = collective_waits_by_operation(pag)
    top = t.iloc[0]
    assert top["name"] == "MPI_Allreduce" and top["kind"] == "wait_nxn"
    # the slow rank's neighbours wait for it in the exchange and reach the Allreduce last
    assert top["last_arriver"] in (2, 4)
    w = collective_wait_states(pag)
    per_proc = w[w["kind"].astype(str) == "wait_nxn"].groupby("process")["amount"].sum()
    assert per_proc.get(3, 0.0) < 0.05 * per_proc.max()  # the slow rank itself hardly waits there
    assert per_proc.drop([2, 3, 4], errors="ignore").min() > 0.5e-3 * 20  # the others wait ~1 ms per iteration


def test_error_without_trace():
    with pytest.raises(PassError, match="pass 'collective_wait_states' needs a trace-backed PAG"):
        collective_wait_states(synthetic.profile(10, 2))
