"""The ideal-network replay: worked examples per dependency kind, windows, untrusted timestamps, bounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perflow import synthetic
from perflow.sdk.trace import non_useful_mask
from perflow.trace.builder import TraceBuilder
from perflow.trace.replay import replay


def _replay(pag, **kw):
    return replay(pag.trace, ~non_useful_mask(pag, ("mpi",)), **kw)


def _ends(r):
    return dict(zip(r.locations["process"].tolist(), r.locations["ideal_end"].tolist()))


def test_message_waits_for_its_send_only():
    # P0 computes 4 then sends; P1 computes 1, receives (really at 5.5), computes 3.5:
    # ideally the receive completes when the send is issued (4), so P1 ends at 7.5 and P0 at 5
    tb = TraceBuilder()
    tb.call(0, "compute", 0, 4)
    tb.call(0, "MPI_Send", 4, 5, send={"to": 1, "bytes": 8})
    tb.call(0, "post", 5, 6)
    tb.call(1, "compute", 0, 1)
    tb.call(1, "MPI_Recv", 1, 5.5, recv={"frm": 0, "bytes": 8})
    tb.call(1, "post", 5.5, 9)
    r = _replay(tb.build())
    assert _ends(r) == {0: 5.0, 1: 7.5}
    assert r.ideal_runtime == 7.5 and r.runtime == 9.0
    assert r.locations["useful"].tolist() == [5.0, 4.5]
    # the message only: an 8-byte send is eager ("auto", the default); with late_receiver="blocking" also the
    # send's wait for the receive posted at 1 (it left at 5, after it), as the wait states count Late Receiver
    assert (r.dependencies, r.skipped) == (1, 0)
    assert (_replay(tb.build(), late_receiver="blocking").dependencies, r.skipped) == (2, 0)
    assert (_replay(tb.build(), late_receiver="synchronous").dependencies, r.skipped) == (1, 0)


def test_barrier_waits_for_the_last_arriver():
    tb = TraceBuilder()
    tb.call(0, "compute", 0, 1)
    tb.call(0, "MPI_Barrier", 1, 6.5, coll={})
    tb.call(0, "post", 6.5, 10)
    tb.call(1, "compute", 0, 6)
    tb.call(1, "MPI_Barrier", 6, 6.6, coll={})
    tb.call(1, "post", 6.6, 7)
    r = _replay(tb.build())
    assert _ends(r) == {0: 9.5, 1: 6.4}


def test_broadcast_waits_for_the_root_only():
    # root 0 arrives at 3; rank 1 at 1 waits for it; rank 2 arrives at 5 and waits for nobody
    tb = TraceBuilder()
    for p, arrive in ((0, 3.0), (1, 1.0), (2, 5.0)):
        tb.call(p, "compute", 0, arrive)
        tb.call(p, "MPI_Bcast", arrive, 6, coll={"root": 0, "bytes": 8})
        tb.call(p, "post", 6, 7)
    r = _replay(tb.build())
    assert _ends(r) == {0: 4.0, 1: 4.0, 2: 6.0}


def test_reduce_root_waits_for_everyone():
    tb = TraceBuilder()
    for p, arrive in ((0, 1.0), (1, 4.0), (2, 2.0)):
        tb.call(p, "compute", 0, arrive)
        tb.call(p, "MPI_Reduce", arrive, 5, coll={"root": 0, "bytes": 8})
        tb.call(p, "post", 5, 6)
    r = _replay(tb.build())
    assert _ends(r) == {0: 5.0, 1: 5.0, 2: 3.0}


def test_empty_data_collective_is_no_dependency():
    tb = TraceBuilder()
    for p, arrive in ((0, 1.0), (1, 4.0)):
        tb.call(p, "compute", 0, arrive)
        tb.call(p, "MPI_Allreduce", arrive, 5, coll={"bytes": 0})
        tb.call(p, "post", 5, 6)
    assert _ends(_replay(tb.build())) == {0: 2.0, 1: 5.0}


def test_synchronous_send_waits_for_the_posted_receive():
    tb = TraceBuilder()
    tb.call(0, "MPI_Ssend", 1, 5, send={"to": 1, "bytes": 8, "sync": True})
    tb.call(0, "post", 5, 6)
    tb.call(1, "compute", 0, 4)
    tb.call(1, "MPI_Recv", 4, 5, recv={"frm": 0, "bytes": 8})
    pag = tb.build()
    assert _ends(_replay(pag)) == {0: 5.0, 1: 4.0}
    assert _ends(_replay(pag, late_receiver="none")) == {0: 1.0, 1: 4.0}
    with pytest.raises(ValueError, match="late_receiver"):
        _replay(pag, late_receiver="always")


def test_window_starts_every_location_at_zero():
    tb = TraceBuilder()
    tb.call(0, "compute", 0, 4)
    tb.call(0, "MPI_Send", 4, 5, send={"to": 1, "bytes": 8})
    tb.call(0, "post", 5, 6)
    tb.call(1, "compute", 0, 1)
    tb.call(1, "MPI_Recv", 1, 5.5, recv={"frm": 0, "bytes": 8})
    tb.call(1, "post", 5.5, 9)
    r = _replay(tb.build(), window=(3.0, 8.0))
    # P0: compute [3,4] (1), send at ideal 1, post [5,6] (1): ends at 2; P1: receive done at ideal 1, post [5.5,8]
    assert r.locations["useful"].tolist() == [2.0, 2.5]
    assert _ends(r) == {0: 2.0, 1: 3.5}
    assert r.runtime == 5.0
    with pytest.raises(ValueError, match="ends before it starts"):
        _replay(tb.build(), window=(5.0, 4.0))


def test_untrusted_message_is_not_replayed():
    # the receive completes (at 3) before the send is issued (at 5): the timestamps cannot be trusted,
    # the dependency is left out and counted, and the replay still ends no later than the run
    tb = TraceBuilder()
    tb.call(0, "compute", 0, 5)
    tb.call(0, "MPI_Send", 5, 6, send={"to": 1, "bytes": 8})
    tb.call(1, "compute", 0, 2)
    tb.call(1, "MPI_Recv", 2, 3, recv={"frm": 0, "bytes": 8})
    tb.call(1, "post", 3, 6)
    r = _replay(tb.build(clock_correction="off"))  # uncorrected, as read
    assert (r.dependencies, r.skipped) == (0, 1)
    assert _ends(r) == {0: 5.0, 1: 5.0}


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    nprocs=st.integers(2, 7),
    iterations=st.integers(1, 5),
    late=st.floats(0.0, 1.0),
    imbalance=st.floats(0.0, 2.0),
    lo=st.floats(0.0, 1.0),
    width=st.floats(0.05, 1.0),
)
def test_replay_is_bounded_by_computation_and_the_run(seed, nprocs, iterations, late, imbalance, lo, width):
    pag = synthetic.trace(nprocs=nprocs, iterations=iterations, seed=seed, late_sender=late, imbalance=imbalance)
    t0, t1 = pag.trace.span
    a = t0 + lo * (t1 - t0)
    b = min(t1, a + width * (t1 - t0))
    for window in (None, (a, b)):
        r = _replay(pag, window=window)
        u = r.locations["useful"].to_numpy()
        eps = 1e-9 * max(r.runtime, 1e-9)
        assert (u >= -eps).all() and (u <= r.runtime + eps).all()
        assert u.max() - eps <= r.ideal_runtime <= r.runtime + eps
        assert (r.locations["ideal_end"].to_numpy() >= u - eps).all()
        assert np.isfinite(r.ideal_runtime)


def test_replay_blocks_give_the_same_run_and_a_malformed_plan_is_refused():
    # the segments' work comes a block of points at a time: any block size gives the very same numbers
    from perflow.trace import replaykernels as K
    from perflow.trace.replay import Rates, run_many, run_plan
    from perflow.trace.replayplan import build_plan

    pag = synthetic.trace(nprocs=4, iterations=6, seed=5, late_sender=0.3, imbalance=0.5)
    plan = build_plan(pag.trace)
    useful = ~non_useful_mask(pag, ("mpi", "openmp", "thread"))
    rates = Rates.uniform(np.where(useful, 0.7, 1.3), 0.5, useful)
    t0, t1 = pag.trace.span
    w = (t0 + 0.1 * (t1 - t0), t1 - 0.2 * (t1 - t0))
    ref = run_plan(plan, rates, w, path=True)
    F = np.ascontiguousarray(rates.F if rates.F.shape[1] == plan.n_locations else np.ones((1, plan.n_locations)))
    head = (plan.ptime, plan.pkind, plan.ploc, plan.pslot, plan.plag, plan.pseg, plan.n_slots, plan.soff, plan.xs,
            plan.xd, plan.xv, plan.lseg, plan.lnseg, plan.lpts, plan.lpt0, plan.pre(*w))  # fmt: skip
    for block in (1, 3, 7):
        ends, u, carried, bind, lastp = K.run(*head, rates.vfac, rates.vmap, F, rates.ofac, rates.useful, *w, True,
                                              block)  # fmt: skip
        assert ends.tolist() == ref.ends.tolist() and u.tolist() == ref.useful.tolist()
        assert (carried, bind.tolist(), lastp.tolist()) == (ref.carried, ref.bind.tolist(), ref.lastp.tolist())
    many = run_many(plan, [rates, Rates.uniform(useful.astype(float), 0.0, useful)], w)
    vf = np.stack([rates.vfac, useful.astype(float)])
    vm = np.stack([rates.vmap, rates.vmap])
    FF = np.ones((2, 1, plan.n_locations))
    ends = K.run_many(*head, vf, vm, FF, np.array([0.5, 0.0]), *w, 5)
    assert ends.max(axis=1).tolist() == many.tolist() and many[0] == ref.runtime
    pseg = plan.pseg.copy()
    pseg[0] += 1  # the first point claims its location's second segment
    bad = head[:5] + (pseg,) + head[6:]
    with pytest.raises(ValueError, match="does not end the next segment"):
        K.run(*bad, rates.vfac, rates.vmap, F, rates.ofac, rates.useful, *w, False, 4)
