"""Sampled computation as instances: the pieces that timer samples cut out of a location's exclusive time."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.trace.builder import TraceBuilder
from perflow.trace.pieces import previous_max


def _sampled() -> perflow.PAG:
    """main over [0, 10] with io over [4, 5]; samples (time, weight, stack below main) hand-placed."""
    tb = TraceBuilder()
    tb.enter(0, 0.0, "main")
    tb.sample(0, 2.0, ["solve"], 1.0)  # covers [1, 2]
    tb.sample(0, 2.5, ["solve"], 1.0)  # [2, 2.5]: starts where the last ended, same leaf -> one piece [1, 2.5]
    tb.sample(0, 3.5, ["solve", "dot"], 0.5)  # [3, 3.5]; the gap [2.5, 3] is solve's (both ends are in it)
    tb.call(0, "io", 4.0, 5.0)
    tb.sample(0, 5.2, ["solve"], 1.0)  # [5, 5.2]: the stretch starts when io leaves
    tb.sample(0, 5.2, ["solve"], 1.0)  # the same time stamp again: nothing left to cover
    tb.sample(0, 7.0, [], 1.0)  # in main's own code: [6, 7] stays main's, counted there (and [5.2, 6]: the
    # context solve's and this sample share is main)
    tb.sample(0, 7.5, ["solve"], 1.0)  # [7, 7.5]: not before what the last sample covered (and main's came between)
    tb.sample(0, 9.0, ["solve"], 0.5)  # [8.5, 9], solve again: one piece [7, 9] with the gap between the two
    tb.leave(0, 10.0)
    tb.sample(0, 12.0, ["solve"], 1.0)  # outside every instance: a top-level piece [11, 12]
    return tb.build()


def test_samples_tile_the_stretches_into_pieces() -> None:
    pag = _sampled()
    paths = pag.call_paths().to_numpy()
    iv = pag.trace.intervals
    got = list(zip(paths[iv["vertex"]], iv["enter"], iv["leave"], iv["parent"], iv["samples"]))
    # rows in pre-order: a stretch's pieces follow the instances entered before it
    assert got == [
        ("main", 0.0, 10.0, -1, 0),
        ("main/solve", 1.0, 3.0, 0, 2),
        ("main/solve/dot", 3.0, 3.5, 0, 1),
        ("main/io", 4.0, 5.0, 0, 0),
        ("main/solve", 5.0, 5.2, 0, 1),
        ("main/solve", 7.0, 9.0, 0, 2),
        ("solve", 11.0, 12.0, -1, 1),
    ]


def test_metrics_come_from_the_pieces() -> None:
    pag = _sampled()
    m = pag.metrics.droplevel(["process", "thread"])
    paths = pag.call_paths().to_numpy()
    got = {paths[v]: tuple(m.loc[v, ["time_inc", "time_exc", "visits", "samples"]].round(12)) for v in m.index}
    assert got == {
        "main": (10.0, 4.3, 1, 1),  # 10 - 2 - 0.5 - 1 (io) - 0.2 - 2
        "main/io": (1.0, 1.0, 1, 0),
        "main/solve": (4.7, 4.2, 3, 5),  # three pieces of five samples, and dot below
        "main/solve/dot": (0.5, 0.5, 1, 1),
        "solve": (1.0, 1.0, 1, 1),
    }


def test_visits_count_the_pieces_and_exclusive_time_partitions_inclusive_time() -> None:
    pag = _sampled()
    m = pag.metrics.reset_index()
    par = pag.vertex_table["parent"].to_numpy()
    child = m.assign(p=par[m["vertex"]]).query("p >= 0").groupby("p")["time_inc"].sum()
    np.testing.assert_allclose(
        m["time_inc"], m["time_exc"] + child.reindex(m["vertex"], fill_value=0.0).to_numpy(), rtol=0, atol=1e-12
    )
    rows = pag.trace.intervals.groupby("vertex").size()
    assert (rows.reindex(m["vertex"]).to_numpy() == m["visits"].to_numpy()).all()


def test_a_trace_without_samples_has_no_samples_column() -> None:
    tb = TraceBuilder()
    tb.call(0, "main", 0.0, 1.0)
    assert "samples" not in tb.build().trace.intervals.columns


def test_previous_max() -> None:
    g = np.array([0, 0, 0, 1, 1, 2])
    x = np.array([3.0, 1.0, 5.0, 2.0, 0.0, 7.0])
    assert previous_max(g, x).tolist() == [-np.inf, 3.0, 3.0, -np.inf, 2.0, -np.inf]
    assert previous_max(np.zeros(0, np.int64), np.zeros(0)).tolist() == []


def _with_samples(raw: perflow.RawTrace, seed: int) -> perflow.RawTrace:
    """A synthetic trace with timer samples added in the gaps between region events of every location."""
    rng = np.random.default_rng(seed)
    regions = pd.concat(
        [
            raw.regions,
            pd.DataFrame(
                {
                    "name": ["solve", "dot"],
                    "role": "function",
                    "paradigm": "user",
                    "file": "s.c",
                    "line": [5, 9],
                    "module": "s",
                }
            ),
        ],  # fmt: skip
        ignore_index=True,
    )
    solve, dot = len(raw.regions), len(raw.regions) + 1
    stacks = pd.DataFrame({"stack": [0, 1, 1, 2], "depth": [0, 0, 1, 0], "region": [solve, solve, dot, dot]})
    ev = raw.region_events
    n = len(ev["time"])
    k = np.sort(rng.choice(np.arange(1, n), size=n // 3, replace=False))
    k = k[ev["location"][k] == ev["location"][k - 1]]
    k = np.repeat(k, rng.integers(1, 4, size=len(k)))  # several samples in some gaps
    a, b = ev["time"][k - 1], ev["time"][k]
    t = a + (b - a) * rng.random(len(k))
    t = t[np.lexsort((t, k))]  # in time order within a gap (k is sorted, so a, b, k stay aligned)
    samples = {
        "location": ev["location"][k].astype(np.int32),
        "time": t,
        "stack": rng.integers(0, 3, size=len(k)).astype(np.int32),
        "weight": (b - a) * rng.uniform(0.1, 0.6, size=len(k)),
        "pos": k.astype(np.int64),
    }
    return dataclasses.replace(raw, regions=regions, stacks=stacks, sample_events=samples)


def test_a_partition_without_samples_gives_the_columns_in_the_one_partition_order() -> None:
    """Samples on the last process only: the first partition has none, yet its metric rows carry ``samples``
    (0) where the others have it, so the partitions' metrics come in one order (that of ``jobs=1``)."""
    from perflow.synthetic import raw_trace

    raw = _with_samples(raw_trace(nprocs=4, iterations=3, late_sender=0.3, seed=5), 2)
    procs = raw.locations["process"].to_numpy()
    keep = np.isin(raw.sample_events["location"], np.flatnonzero(procs == procs.max()))
    raw = dataclasses.replace(raw, sample_events={k: v[keep] for k, v in raw.sample_events.items()})
    assert 0 < keep.sum() < len(keep)
    one, many = perflow.build_pag(raw, jobs=1), perflow.build_pag(raw, jobs=2)
    assert list(many.metrics.columns) == list(one.metrics.columns) and "samples" in one.metrics.columns
    pd.testing.assert_frame_equal(many.metrics, one.metrics, check_exact=True)


@pytest.mark.parametrize("jobs", [2, 3])
def test_sampled_partitions_built_at_once_give_the_same_pag(jobs: int) -> None:
    """Pieces are numbered per location: partitions of consecutive processes give the one-partition PAG."""
    from perflow.synthetic import raw_trace

    raw = _with_samples(raw_trace(nprocs=5, iterations=4, late_sender=0.3, imbalance=0.4, slow_rank=2, seed=jobs), jobs)
    one, many = perflow.build_pag(raw, jobs=1), perflow.build_pag(raw, jobs=jobs)
    assert (one.trace.intervals["samples"] > 0).sum() > 10
    pd.testing.assert_frame_equal(many.vertex_table, one.vertex_table)
    pd.testing.assert_frame_equal(many.metrics, one.metrics, check_exact=True)
    for t in ("intervals", "messages", "collectives"):
        pd.testing.assert_frame_equal(getattr(many.trace, t), getattr(one.trace, t), check_exact=True)
    # messages and collectives still point at their MPI calls after the pieces moved the rows
    iv, names = one.trace.intervals, one.vertex_table["name"].astype(str).to_numpy()
    send = one.trace.messages["send_interval"].to_numpy()
    assert all(n.startswith("MPI_") for n in names[iv["vertex"].to_numpy()[send]])
    coll = one.trace.collectives["interval"].to_numpy()
    assert all(n.startswith("MPI_") for n in names[iv["vertex"].to_numpy()[coll[coll >= 0]]])
    without = perflow.build_pag(
        dataclasses.replace(raw, sample_events={k: v[:0] for k, v in raw.sample_events.items()})
    )
    assert len(without.trace.messages) == len(one.trace.messages)
    assert without.trace.collectives["instance"].tolist() == one.trace.collectives["instance"].tolist()


def test_samples_that_cover_nothing_make_no_piece() -> None:
    tb = TraceBuilder()
    tb.enter(0, 1.0, "main")
    tb.sample(0, 1.0, ["solve"], 0.5)  # stamped at the stretch's start: nothing to cover
    tb.leave(0, 2.0)
    pag = tb.build()
    assert len(pag.trace.intervals) == 1 and pag.trace.intervals["samples"].tolist() == [0]
    m = pag.metrics.droplevel(["process", "thread"])
    assert m.loc[0, "time_exc"] == 1.0 and m["samples"].sum() == 0
