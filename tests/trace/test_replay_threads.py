"""The replay's thread dependencies: OpenMP barriers, critical sections and locks, fork and join (worked examples)."""

from __future__ import annotations

import numpy as np
import pytest

import perflow
from perflow.passes.whatif import what_if
from perflow.trace.analyses import REPLAY_PLAN
from perflow.trace.builder import TraceBuilder
from perflow.trace.replay import Rates, run_plan
from tests.otf2kit import omp_example


def _if(pag, *scenarios):  # noqa: ANN001, ANN202
    t = what_if(pag, scenarios=list(scenarios))["what_if"]
    return dict(zip(t["scenario"], t["runtime_if [s]"]))


def forked():
    """A master thread runs seq (2 s), forks a team of two (the worker enters 0.5 s later), both work (4 and
    5.5 s) up to a barrier, then post (1 s); after the join the master runs end (1 s); T = 10."""
    tb = TraceBuilder(nprocs=1)
    par = {"role": "parallel", "paradigm": "openmp"}
    bar = {"role": "barrier", "paradigm": "openmp"}
    with tb.region(0, "main", 0, 10):
        tb.call(0, "seq", 0, 2)
        with tb.region(0, "!$omp parallel", 2, 9, **par):
            tb.call(0, "work_a", 2, 6)
            tb.call(0, "!$omp barrier", 6, 8, **bar)
            tb.call(0, "post", 8, 9)
        tb.call(0, "end", 9, 10)
    with tb.region(0, "!$omp parallel", 2.5, 9, thread=1, **par):
        tb.call(0, "work_b", 2.5, 8, thread=1)
        tb.call(0, "!$omp barrier", 8, 8, thread=1, **bar)
        tb.call(0, "post", 8, 9, thread=1)
    return tb.build()


def test_fork_barrier_and_join():
    pag = forked()
    assert pag.analyses.get(REPLAY_PLAN).counts == {"thread barriers": 2, "forks": 1, "joins": 1}
    # work_b halved: the worker reaches the barrier at 5.25, the master at 6; posts until 7, end until 8.
    # seq gone: the team forks at 0, the worker enters at 0.5 and reaches the barrier at 6 -> 8 (without the
    # fork the worker would start at its recorded 2.5 and nothing would be gained); post gone (on process 0:
    # both threads) joins at 8, end until 9; work_a is hidden behind work_b
    assert _if(pag, "work_b=0.5", "seq=0", "post@0=0", "work_a=0") == {
        "work_b=0.5": 8.0, "seq=0": 8.0, "post@0=0": 9.0, "work_a=0": 10.0}  # fmt: skip


@pytest.fixture(scope="module")
def omp(tmp_path_factory):  # noqa: ANN001, ANN201
    return perflow.read(omp_example(tmp_path_factory.mktemp("omp") / "run"))


def test_openmp_example_replays_exactly_and_predicts(omp) -> None:  # noqa: ANN001
    plan = omp.analyses.get(REPLAY_PLAN)
    assert plan.counts == {"locks": 3, "thread barriers": 9, "forks": 4, "joins": 2}
    assert plan.pre_wait.tolist() == [False, True, True]  # the workers wait for the first fork
    t0, t1 = omp.trace.span
    r = run_plan(plan, Rates.uniform(np.ones(omp.n_vertices), 1.0), (t0, t1))
    np.testing.assert_allclose(r.ends, plan.lend - t0, atol=1e-12)  # nothing changed: every end as recorded
    got = {k: round((1.9e-4 - v) * 1e6, 6) for k, v in _if(omp, "*sblock*=0", "work=0").items()}
    # (us, see tests/otf2kit.omp_example) no critical sections: all three pass the lock at 70, the implicit
    # barrier's last arrival at 70 instead of 110: 40 saved. No work: the barrier at 14 + 2, the critical
    # sections 16-26-41-56, the implicit barrier left at 66 (54 saved); parallel #2 forks at 86, the lock
    # passes at 88, the last thread reaches the implicit barrier at 90, + 18 = 108, end 118 (72 saved)
    assert got == {"*sblock*=0": 40.0, "work=0": 72.0}
