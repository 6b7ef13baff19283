"""The replay streamed from the partitions (perflow.trace.replaystream) equals the run of the combined plan."""

from __future__ import annotations

import numpy as np
import pytest

from perflow import synthetic
from perflow.passes._whatif import _vertex_time
from perflow.trace.analyses import ReplaySettings, vertex_roles
from perflow.trace.build import build_pag
from perflow.trace.replay import Rates, run_many, run_plan
from perflow.trace.replayplan import combine_parts
from perflow.trace.replaystream import StreamPlan

from .test_replay_parts import scan_and_rendezvous


@pytest.fixture(scope="module", params=["synthetic", "scan"])
def built_parts(request):  # noqa: ANN001, ANN201
    from perflow.pag.partitioned import LocalRuntime
    from perflow.trace.pipeline import BuildOptions, build
    from perflow.trace.replayparts import part_refs
    from perflow.trace.split import definitions_only, split_blocks

    if request.param == "synthetic":
        raw = synthetic.raw_trace(nprocs=6, iterations=40, late_sender=0.3, slow_rank=2, imbalance=0.3, seed=9)
    else:
        raw = scan_and_rendezvous()
    pag = build_pag(raw)
    parts, processes, assign = split_blocks(raw, 3)
    rt = LocalRuntime(3, jobs=1)
    built = build(rt, parts, definitions_only(raw), processes, assign, BuildOptions(False, True, False))
    roles, regions = vertex_roles(pag)
    names = pag.vertex_table["name"].astype(str).to_numpy()
    refs = part_refs(built, names, ReplaySettings(), roles=roles, regions=regions)
    yield pag, rt, refs
    rt.close()


@pytest.mark.parametrize("chunk", [2, 1 << 20])
def test_streamed_run_equals_the_combined_plan_bit_for_bit(built_parts, chunk: int) -> None:  # noqa: ANN001
    pag, rt, refs = built_parts
    whole = combine_parts(rt.gather(refs))
    sp = StreamPlan(rt, refs, chunk_points=chunk)
    assert sp.n_points == len(whole.ptime) and sp.dependencies == whole.dependencies and sp.counts == whole.counts
    assert (sp.process == whole.process).all() and (sp.thread == whole.thread).all()
    if chunk == 2 and len(whole.ptime) > 50:
        assert len(sp.bounds()) > 10  # really in many chunks
    t0, t1 = pag.trace.span
    nv = pag.n_vertices
    rng = np.random.default_rng(3)
    rates = [Rates.uniform(np.ones(nv), 1.0), Rates.uniform(rng.uniform(0, 2, nv), 0.5)]
    rates += [Rates.uniform(rng.uniform(0, 1, nv) > 0.4, 0.0)]
    F = rng.uniform(0.5, 1.5, (2, len(whole.process)))
    rates += [Rates(rng.uniform(0, 2, nv), rng.integers(-1, 2, nv), F, 0.2, rng.uniform(0, 1, nv) > 0.5)]
    mid = t0 + 0.4 * (t1 - t0)
    for r in rates:
        for w in ((t0, t1), (t0 + 0.1 * (t1 - t0), mid)):
            a, b = run_plan(sp, r, w), run_plan(whole, r, w)
            assert np.array_equal(a.ends, b.ends) and np.array_equal(a.useful, b.useful)
            assert a.carried == b.carried and a.runtime == b.runtime
        assert np.array_equal(run_many(sp, rates, w), run_many(whole, rates, w))  # POP's gains
    vmap = rng.integers(-1, 3, nv)
    assert np.array_equal(_vertex_time(sp, vmap, 3, (t0, mid)), _vertex_time(whole, vmap, 3, (t0, mid)))


def test_what_needs_the_whole_plan_gathers_it(built_parts, caplog) -> None:  # noqa: ANN001
    pag, rt, refs = built_parts
    whole = combine_parts(rt.gather(refs))
    sp = StreamPlan(rt, refs, chunk_points=4)
    with caplog.at_level("WARNING", logger="perflow.trace.replaystream"):
        assert np.array_equal(sp.ptime, whole.ptime) and sp.n_slots == whole.n_slots
    assert "gathering the replay plan" in caplog.text
    r = Rates.uniform(np.ones(pag.n_vertices), 0.0)
    a, b = run_plan(sp, r, pag.trace.span, path=True), run_plan(whole, r, pag.trace.span, path=True)
    assert np.array_equal(a.bind, b.bind) and np.array_equal(a.ends, b.ends)
