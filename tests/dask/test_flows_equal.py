"""Every shipped trace flow gives the same outputs on the Dask engine as in this process, on every kind of trace.

The traces: hand-made worked examples with 2 and 3 ranks, a trace of collectives only, a synthetic run with
late senders and a slow rank, and a program recorded by ``perflow record`` (timer samples and MPI call stacks).
"""

from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("distributed", reason="the Dask engine needs the perflow[dask] extra (dask, distributed)")

import perflow  # noqa: E402
from perflow.synthetic import raw_trace  # noqa: E402
from perflow.trace.build import build_pag  # noqa: E402
from perflow.trace.builder import TraceBuilder  # noqa: E402

#: the shipped flows that analyse one trace
FLOWS = ("wait_states", "critical_path", "root_cause", "pop", "variance", "mpi_profiler", "comm_pattern",
         "hotspot", "imbalance", "backtracking", "what_if")  # fmt: skip


def two_ranks() -> TraceBuilder:
    """Rank 0 computes 4 s and sends; rank 1 posts its receive at 1 s and waits 3 s (the worked Late Sender)."""
    tb = TraceBuilder(nprocs=2)
    for p in range(2):
        tb.enter(p, 0.0, "main")
        tb.call(p, "MPI_Init", 0.0, 0.5)
    tb.call(0, "compute", 0.5, 4.0)
    tb.call(0, "MPI_Send", 4.0, 4.5, send={"to": 1, "bytes": 64})
    tb.call(1, "compute", 0.5, 1.0)
    tb.call(1, "MPI_Recv", 1.0, 4.6, recv={"frm": 0, "bytes": 64})
    for p in range(2):
        tb.call(p, "MPI_Finalize", 5.0, 5.5)
        tb.leave(p, 6.0)
    return tb


def three_ranks() -> TraceBuilder:
    """A ring exchange with one slow rank, then an allreduce that the others wait in."""
    tb = TraceBuilder(nprocs=3)
    for p in range(3):
        tb.enter(p, 0.0, "main")
        t = 1.0 + (2.0 if p == 2 else 0.0)
        tb.call(p, "compute", 0.0, t)
        tb.call(p, "MPI_Send", t, t + 0.1, send={"to": (p + 1) % 3, "tag": 1, "bytes": 1024})
        tb.call(p, "MPI_Recv", t + 0.1, max(t + 0.2, 3.3 if p == 0 else t + 0.2),
                recv={"frm": (p - 1) % 3, "tag": 1, "bytes": 1024})  # fmt: skip
        tb.call(p, "MPI_Allreduce", 3.4 + 0.1 * p, 3.8, coll={"bytes": 8})
        tb.leave(p, 4.0)
    return tb


def collectives_only() -> TraceBuilder:
    """Three ranks and two barriers, no message."""
    tb = TraceBuilder(nprocs=3)
    for p in range(3):
        with tb.region(p, "main", 0.0, 4.0):
            tb.call(p, "work", 0.1, 0.5 + 0.3 * p)
            tb.call(p, "MPI_Barrier", 0.5 + 0.3 * p, 1.5, coll={"op": "barrier"})
            tb.call(p, "MPI_Barrier", 2.0 + 0.1 * (2 - p), 2.5, coll={"op": "barrier"})
    return tb


DATASETS = ("two_ranks", "three_ranks", "collectives_only", "synthetic", "recorded")


@pytest.fixture(scope="module")
def raws(request):  # type: ignore[no-untyped-def]
    cache: dict[str, object] = {}

    def get(name: str):  # type: ignore[no-untyped-def]
        if name not in cache:
            if name == "synthetic":
                cache[name] = raw_trace(nprocs=6, iterations=8, late_sender=0.3, slow_rank=2, imbalance=0.3, seed=9)
            elif name == "recorded":
                rec = request.getfixturevalue("recorded")
                cache[name] = rec("ring.c", "6", "500", n=4).raw  # the recorder tests' recording
            else:
                cache[name] = globals()[name]().raw()
        return cache[name]

    return get


def _same(got: object, exp: object, what: str) -> None:
    if isinstance(exp, pd.DataFrame):
        assert isinstance(got, pd.DataFrame), what
        drop = [c for c in exp.columns if "std" in str(c)]  # sqrt(E[x^2] - mean^2): rounding noise at flat spreads
        pd.testing.assert_frame_equal(
            got.drop(columns=drop), exp.drop(columns=drop), rtol=1e-9, check_dtype=False, obj=what
        )
    elif isinstance(exp, dict):
        assert got.keys() == exp.keys(), what  # type: ignore[union-attr]
        for k in exp:
            _same(got[k], exp[k], f"{what}.{k}")  # type: ignore[index]
    elif isinstance(exp, str | int | float | bool) or exp is None:
        assert got == exp, what
    else:  # figures and other objects: the same kind of thing
        assert type(got) is type(exp), what


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_trace_flow_on_both_engines(engine, raws, dataset: str) -> None:  # type: ignore[no-untyped-def]
    raw = raws(dataset)
    local = build_pag(raw)
    dist = engine.load(raw, n_partitions=min(3, local.n_processes)).pag()
    assert dist.gathered == set()
    # the what-if replay runs on the partitions: its plan and predictions gather no instance table
    got = perflow.run("what_if", pag=dist, jobs=1)
    assert got.ok and "trace" not in dist.gathered, got.errors
    for flow in FLOWS:
        exp = perflow.run(flow, pag=local, jobs=1)
        got = perflow.run(flow, pag=dist, jobs=1)
        assert exp.ok and got.ok, (dataset, flow, exp.errors, got.errors)
        assert got.outputs.keys() == exp.outputs.keys(), flow
        for name, value in exp.outputs.items():
            _same(got.outputs[name], value, f"{dataset}/{flow}/{name}")
