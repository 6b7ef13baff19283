"""Calling contexts of the time between region events: the deepest frame the two ends of a gap share."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.trace.builder import TraceBuilder
from perflow.trace.contexts import common_ancestor, depths, gap_vertex

#: a tree: 0 -> {1 -> {2, 3}, 4}
PARENT = np.array([-1, 0, 1, 1, 0])


def test_depths_and_common_ancestors() -> None:
    d = depths(PARENT)
    assert d.tolist() == [0, 1, 2, 2, 1]
    u, v = np.array([2, 2, 4, 3, 0]), np.array([3, 2, 3, 1, 0])
    assert common_ancestor(PARENT, d, u, v).tolist() == [1, 2, 0, 1, 0]
    assert gap_vertex(PARENT, d, u, v).tolist() == [1, 2, 0, 1, 0]
    assert gap_vertex(PARENT, d, np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == []
    # two trees: no common vertex
    two = np.array([-1, -1, 0])
    assert common_ancestor(two, depths(two), np.array([2]), np.array([1])).tolist() == [-1]


def _unwound() -> TraceBuilder:
    """An MPI call from main/solve/dot, two from main/solve/exchange, one sample in main/solve/spmv between."""
    tb = TraceBuilder()
    with tb.region(0, "prog", 0.0, 20.0):
        tb.call(0, "MPI_Allreduce", 2.0, 3.0, stack=["main", "solve", "dot"])
        tb.call(0, "MPI_Irecv", 6.0, 6.5, stack=["main", "solve", "exchange"])
        tb.sample(0, 9.0, ["main", "solve", "spmv"], 1.0)  # covers [8, 9]
        tb.call(0, "MPI_Irecv", 10.0, 11.0, stack=["main", "solve", "exchange"])
    return tb


def test_stretches_get_the_context_their_ends_share() -> None:
    pag = _unwound().build()
    paths = pag.call_paths().to_numpy()
    iv = pag.trace.intervals
    got = list(zip(paths[iv["vertex"]], iv["enter"], iv["leave"], iv["piece"], iv["samples"]))
    # [0, 2] from the program's start to a call in main/solve/dot shares nothing: the program's own;
    # [3, 6] between dot's call and exchange's is main/solve's; so are the gaps before and after the sample
    # in spmv; [11, 20] up to the program's end is the program's own again
    assert got == [
        ("prog", 0.0, 20.0, False, 0),
        ("prog/main/solve/dot/MPI_Allreduce", 2.0, 3.0, False, 0),
        ("prog/main/solve", 3.0, 6.0, True, 0),
        ("prog/main/solve/exchange/MPI_Irecv", 6.0, 6.5, False, 0),
        ("prog/main/solve", 6.5, 8.0, True, 0),
        ("prog/main/solve/spmv", 8.0, 9.0, True, 1),
        ("prog/main/solve", 9.0, 10.0, True, 0),
        ("prog/main/solve/exchange/MPI_Irecv", 10.0, 11.0, False, 0),
    ]
    m = pag.metrics.droplevel(["process", "thread"])
    t = {paths[v]: (m.loc[v, "time_inc"], m.loc[v, "time_exc"], m.loc[v, "visits"]) for v in m.index}
    assert t["prog"] == (20.0, 11.0, 1)
    assert t["prog/main"] == (9.0, 0.0, 0)
    assert t["prog/main/solve"] == (9.0, 5.5, 3)
    # per (call path, location): inclusive = exclusive + the children's inclusive
    par = pag.vertex_table["parent"].to_numpy()
    mm = m.reset_index()
    child = mm.assign(p=par[mm["vertex"]]).query("p >= 0").groupby("p")["time_inc"].sum()
    np.testing.assert_allclose(mm["time_inc"], mm["time_exc"] + child.reindex(mm["vertex"], fill_value=0).to_numpy())


def test_call_stacks_alone_attribute_the_stretches() -> None:
    """Without samples (a recording with --sample-rate 0): the MPI calls' stacks still say where time went."""
    raw = _unwound().raw()
    raw = dataclasses.replace(raw, sample_events={k: v[:0] for k, v in raw.sample_events.items()})
    pag = perflow.build_pag(raw)
    paths = pag.call_paths().to_numpy()
    iv = pag.trace.intervals
    assert "samples" not in iv.columns and iv["piece"].sum() == 2
    pieces = iv[iv["piece"]]
    # between the two calls from exchange nothing says exchange returned: the stretch is exchange's
    assert list(zip(paths[pieces["vertex"]], pieces["enter"], pieces["leave"])) == [
        ("prog/main/solve", 3.0, 6.0),
        ("prog/main/solve/exchange", 6.5, 10.0),
    ]


def test_a_trace_without_stacks_or_samples_has_no_pieces() -> None:
    tb = TraceBuilder()
    with tb.region(0, "main", 0.0, 4.0):
        tb.call(0, "MPI_Barrier", 1.0, 2.0)
    iv = tb.build().trace.intervals
    assert "piece" not in iv.columns and len(iv) == 2


def _many(nprocs: int, iterations: int, seed: int) -> perflow.RawTrace:
    """Processes alternating allreduces (from main/solve/dot) and sends (from main/halo) with computation
    between them, some of it sampled (in main/solve/spmv or main/io)."""
    rng = np.random.default_rng(seed)
    tb = TraceBuilder()
    t = np.zeros(nprocs)
    for p in range(nprocs):
        tb.enter(p, 0.0, "prog")
    for it in range(iterations):
        for p in range(nprocs):
            for _ in range(rng.integers(0, 3)):
                t[p] += rng.uniform(0.1, 1.0)
                tb.sample(p, t[p], ["main", "solve", "spmv"] if rng.random() < 0.7 else ["main", "io"], 0.5)
            t[p] += rng.uniform(0.1, 1.0)
        end = t.max() + 0.5
        for p in range(nprocs):
            tb.call(p, "MPI_Allreduce", t[p], end, coll={"bytes": 8}, stack=["main", "solve", "dot"])
            t[p] = end + rng.uniform(0.1, 1.0)
            dst = (p + 1) % nprocs
            tb.call(p, "MPI_Send", t[p], t[p] + 0.1, send={"to": dst, "tag": it, "bytes": 8}, stack=["main", "halo"])
            t[p] += 0.1 + rng.uniform(0.0, 0.5)
        for p in range(nprocs):
            src = (p - 1) % nprocs
            start = t[p]
            t[p] = max(start, t[src]) + 0.1
            tb.call(p, "MPI_Recv", start, t[p], recv={"frm": src, "tag": it, "bytes": 8}, stack=["main", "halo"])
    for p in range(nprocs):
        tb.leave(p, t.max() + 1.0)
    return tb.raw()


@pytest.mark.parametrize("jobs", [2, 3])
def test_unwound_partitions_give_the_same_pag(jobs: int) -> None:
    """Gap pieces are cut per location: partitions of processes give the one-partition PAG bit for bit."""
    raw = _many(5, 6, jobs)
    one, many = perflow.build_pag(raw, jobs=1), perflow.build_pag(raw, jobs=jobs)
    iv = one.trace.intervals
    assert (iv["piece"] & (iv["samples"] == 0)).sum() > 20 and (iv["samples"] > 0).sum() > 20
    pd.testing.assert_frame_equal(many.vertex_table, one.vertex_table)
    pd.testing.assert_frame_equal(many.metrics, one.metrics, check_exact=True)
    for t in ("intervals", "messages", "collectives"):
        pd.testing.assert_frame_equal(getattr(many.trace, t), getattr(one.trace, t), check_exact=True)
    assert len(one.trace.messages) == 5 * 6 and len(one.trace.collectives) == 5 * 6
