"""The replay plan over partitions (the Dask engine's form) equals the plan of the whole trace."""

from __future__ import annotations

import numpy as np
import pytest

from perflow import synthetic
from perflow.trace.analyses import REPLAY_PLAN, ReplaySettings, vertex_roles
from perflow.trace.build import build_pag
from perflow.trace.builder import TraceBuilder
from perflow.trace.replay import Rates, run_many


def partitioned_plan(raw, pag, n_parts: int, **settings):  # noqa: ANN001, ANN201
    from perflow.pag.partitioned import LocalRuntime
    from perflow.trace.pipeline import BuildOptions, build
    from perflow.trace.replayparts import program
    from perflow.trace.split import definitions_only, split_blocks

    parts, processes, assign = split_blocks(raw, n_parts)
    rt = LocalRuntime(n_parts, jobs=1)
    try:
        built = build(rt, parts, definitions_only(raw), processes, assign, BuildOptions(False, True, False))
        roles, regions = vertex_roles(pag)
        names = pag.vertex_table["name"].astype(str).to_numpy()
        return program(built, names, ReplaySettings(**settings), roles=roles, regions=regions)
    finally:
        rt.close()


def scan_and_rendezvous():
    """Three ranks: a large send that waits for its receiver, an eager one, a scan, a broadcast."""
    tb = TraceBuilder(nprocs=3)
    with tb.region(0, "main", 0, 10):
        tb.call(0, "MPI_Send", 0, 4, send={"to": 1, "bytes": 1 << 24})
        tb.call(0, "MPI_Send", 4, 4.1, send={"to": 2, "bytes": 8})
        tb.call(0, "w", 4.1, 6)
        tb.call(0, "MPI_Scan", 6, 8, coll={"op": "scan", "bytes": 8})
        tb.call(0, "MPI_Bcast", 8, 9, coll={"op": "bcast", "root": 0, "bytes": 8})
    with tb.region(1, "main", 0, 10):
        tb.call(1, "late", 0, 3.5)
        tb.call(1, "MPI_Recv", 3.5, 4, recv={"frm": 0, "bytes": 1 << 24})
        tb.call(1, "w", 4, 7)
        tb.call(1, "MPI_Scan", 7, 8, coll={"op": "scan", "bytes": 8})
        tb.call(1, "MPI_Bcast", 8.5, 9, coll={"op": "bcast", "root": 0, "bytes": 8})
    with tb.region(2, "main", 0, 10):
        tb.call(2, "w", 0, 5)
        tb.call(2, "MPI_Recv", 5, 5.1, recv={"frm": 0, "bytes": 8})
        tb.call(2, "w", 5.1, 8)
        tb.call(2, "MPI_Scan", 8, 8.2, coll={"op": "scan", "bytes": 8})
        tb.call(2, "MPI_Bcast", 8.2, 9, coll={"op": "bcast", "root": 0, "bytes": 8})
    return tb.raw()


@pytest.mark.parametrize(("dataset", "n_parts"), [("synthetic", 3), ("synthetic", 2), ("scan", 3), ("scan", 2)])
def test_partitioned_plan_equals_the_whole_trace_plan(dataset: str, n_parts: int) -> None:
    if dataset == "synthetic":
        raw = synthetic.raw_trace(nprocs=6, iterations=6, late_sender=0.3, slow_rank=2, imbalance=0.3, seed=9)
    else:
        raw = scan_and_rendezvous()
    pag = build_pag(raw)
    for lr in ("auto", "synchronous"):
        whole = pag.analyses.get(REPLAY_PLAN, late_receiver=lr)
        parts = partitioned_plan(raw, pag, n_parts, late_receiver=lr)
        assert (parts.process == whole.process).all() and (parts.thread == whole.thread).all()
        assert len(parts.ptime) == len(whole.ptime) and parts.counts == whole.counts
        # the same points (points of different locations at one time may come in another order)
        kp, kw = (np.lexsort((p.pkind & 3, p.ploc, p.ptime)) for p in (parts, whole))
        assert np.array_equal(parts.ptime[kp], whole.ptime[kw]) and np.array_equal(parts.ploc[kp], whole.ploc[kw])
        assert parts.xd.sum() == pytest.approx(whole.xd.sum())
        t0, t1 = pag.trace.span
        nv = pag.n_vertices
        rng = np.random.default_rng(1)
        rates = [Rates.uniform(np.ones(nv), 1.0), Rates.uniform(rng.uniform(0, 2, nv), 0.5)]
        rates += [Rates.uniform(rng.uniform(0, 1, nv), 0.0) for _ in range(3)]
        np.testing.assert_allclose(run_many(parts, rates, (t0, t1)), run_many(whole, rates, (t0, t1)), rtol=1e-12)
        assert run_many(whole, rates[:1], (t0, t1))[0] == pytest.approx(t1 - t0)
