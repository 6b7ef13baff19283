"""OpenMP barrier waits and lock contention: a worked example computed by hand (see tests/otf2kit.omp_example).

The trace is written through the OTF2 C library the way Score-P writes an
OpenMP run (ThreadFork/ThreadTeamBegin, parallel/barrier/implicit barrier/
critical regions with their roles, ThreadAcquireLock/ReleaseLock and
OmpAcquireLock/ReleaseLock) and read back by both decoders.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.readers.otf2 import decode
from perflow.trace.analyses import CRITICAL_PATH, WAIT_INSTANCES
from perflow.trace.build import build_pag
from tests.otf2kit import omp_example

US = 1e-6


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    return omp_example(tmp_path_factory.mktemp("omp") / "run")


@pytest.fixture(scope="module")
def example2(tmp_path_factory):
    return omp_example(tmp_path_factory.mktemp("omp2") / "run", processes=2)


@pytest.fixture(scope="module")
def pag(example):
    return perflow.read(example)


def _rows(w: pd.DataFrame) -> list[tuple]:
    return [
        (int(r.thread), str(r.kind), round(r.start / US, 6), round(r.amount / US, 6), int(r.cause_thread),
         round(r.cause_time / US, 6))
        for r in w.itertuples()
    ]  # fmt: skip


def test_worked_example_wait_states(pag):
    w = pag.analyses.get(WAIT_INSTANCES)
    # (thread, kind, start us, amount us, caused by thread, at us), written down from the timeline by hand
    expected = [
        (0, "omp_barrier_wait", 40, 28, 2, 68),  # barrier entered at 40, 50, 68: the last arriver is thread 2
        (0, "omp_ibarrier_wait", 80, 30, 2, 110),  # implicit barrier #1 entered at 80, 95, 110
        (0, "omp_ibarrier_wait", 161, 1, 1, 162),  # implicit barrier #2 entered at 161, 162, 150
        (1, "omp_idle", 0, 10, 0, 10),  # idle while thread 0 runs outside the teams: until the first fork at 10,
        (1, "omp_barrier_wait", 50, 18, 2, 68),
        (1, "lock_contention_critical", 70, 10, 0, 80),  # entered the critical at 70, thread 0 released at 80
        (1, "omp_ibarrier_wait", 95, 15, 2, 110),
        (1, "omp_idle", 120, 20, 0, 140),  # from the join at 120 to the next fork at 140,
        (1, "lock_contention_api", 145, 15, 0, 160),  # omp_set_lock at 145, thread 0 released lock 7 at 160
        (1, "omp_idle", 180, 10, 0, 190),  # and from the last join to thread 0's end
        (2, "omp_idle", 0, 10, 0, 10),
        (2, "lock_contention_critical", 70, 25, 1, 95),  # thread 1 held it until 95
        (2, "omp_idle", 120, 20, 0, 140),
        (2, "omp_ibarrier_wait", 150, 12, 1, 162),
        (2, "omp_idle", 180, 10, 0, 190),
    ]
    assert _rows(w) == expected
    totals = (w.groupby(w["kind"].astype(str))["amount"].sum() / US).round(6).to_dict()
    assert totals == {"omp_barrier_wait": 46, "omp_ibarrier_wait": 58, "lock_contention_critical": 35,
                      "lock_contention_api": 15, "omp_idle": 80}  # fmt: skip
    # the waiting call is the barrier / critical construct / lock call, the cause the releasing or last call
    names = pag.vertex_table["name"].astype(str).to_numpy()
    iv = pag.trace.intervals
    waiting = names[iv["vertex"].to_numpy()[w["interval"].to_numpy()]]
    assert list(waiting[:3]) == ["!$omp barrier @omp.c:12", "!$omp implicit barrier @omp.c:20"] * 1 + [
        "!$omp implicit barrier @omp.c:20"
    ]
    assert names[iv["vertex"].to_numpy()[w["interval"].to_numpy()[8]]] == "omp_set_lock"
    cause = names[iv["vertex"].to_numpy()[w["cause_interval"].to_numpy()[[5, 8]]]]
    assert list(cause) == ["!$omp critical @omp.c:15", "omp_unset_lock"]


@pytest.mark.parametrize("decoder", ["fast", "bindings"])
def test_lock_table_from_both_decoders(example, decoder):
    raw = decode(example, decoder=decoder)
    assert "ThreadAcquireLock" not in raw.attrs["skipped_events"]
    assert "OmpAcquireLock" not in raw.attrs["skipped_events"]
    lk = build_pag(raw).trace.locks
    assert lk["lock"].tolist() == [1, 1, 1, 7, 7]
    assert lk["order"].tolist() == [0, 1, 2, 0, 1]
    assert lk["thread"].tolist() == [0, 1, 2, 0, 1]
    assert np.allclose(lk["acquire"] / US, [70, 80, 95, 141, 160])
    assert np.allclose(lk["release"] / US, [80, 95, 110, 160, 162])


def test_decoders_agree(example):
    from tests.readers.test_otf2_decode import assert_same_tables

    assert_same_tables(decode(example, decoder="bindings"), decode(example, decoder="fast", jobs=0))


def test_partitioned_program_equals_local(example2):
    """Two processes in two partitions (the Dask engine's program, on a local runtime) give the same table."""
    from tests.trace.partkit import partitioned_wait_instances

    raw = decode(example2)
    pag = build_pag(raw)
    local = pag.analyses.get(WAIT_INSTANCES)
    assert len(local) == 30 and set(local["process"]) == {0, 1}
    dist = partitioned_wait_instances(raw, pag, 2)
    pd.testing.assert_frame_equal(dist, local)


def test_critical_path_follows_the_thread_waits(pag):
    """Backwards from thread 0's end (190): each barrier wait hands the path to the thread waited for, the start
    of a worker's team (its parallel region, from the fork) to the forking thread; lock contention stays on the
    waiting thread (Scalasca's rule) unless ``follow_locks``."""

    def hops(**settings: object) -> list[tuple[int, float, float]]:
        cp = pag.analyses.get(CRITICAL_PATH, **settings)
        assert cp.length == pytest.approx(190 * US)
        return [(int(h.thread), round(h.start / US, 6), round(h.end / US, 6)) for h in cp.hops.itertuples()]

    assert hops() == [(0, 0, 10), (2, 10, 110), (0, 110, 140), (1, 140, 162), (0, 162, 190)]
    assert hops(follow_locks=True) == [
        (0, 0, 10), (2, 10, 68), (0, 68, 80), (1, 80, 95), (2, 95, 110), (0, 110, 160), (1, 160, 162), (0, 162, 190)
    ]  # fmt: skip


def test_breakdown_moves_thread_waits_to_wait(pag):
    from perflow.passes.breakdown import breakdown

    b = breakdown(pag, by="total").set_index("category")["value"]
    assert b["wait"] == pytest.approx(154 * US)
    # the constructs' own time beyond their waits is synchronisation (Scalasca's OMP sync), the critical
    # sections' protected code (sblock) computation: explicit barrier 52 - 46, critical 35 - 35, implicit
    # barriers 75 - 45 and 67 - 13, lock calls 20 - 15 = 95 us, and the workers' parallel regions from the fork
    # to their enter (OpenMP management: 2 + 4 + 1 + 2 = 9 us)
    assert b["sync"] == pytest.approx(104 * US)
    total = float(pag.trace.intervals.query("parent < 0").eval("leave - enter").sum())
    assert b["computation"] == pytest.approx(total - 104 * US - 154 * US)
    from perflow.passes.waitstates import waiting_time

    wt = waiting_time(pag)
    assert wt["thread_sync"].sum() == pytest.approx(154 * US)
    assert np.allclose(wt["wait"], wt[["late_sender", "late_receiver", "collective", "thread_sync"]].sum(axis=1))


def test_backtracking_crosses_thread_waits(pag):
    """From the barrier thread 0 waited in, across the barrier wait to thread 2 (the last to arrive), to its work."""
    from perflow.passes.backtrack import backtrack

    # the threads' copies of the constructs are one call path (main/!$omp parallel/...): thread 2's work, 62 us
    # against a mean of 50.7 over the 3 threads, is abnormal above k = 1.2
    r = backtrack(pag, k=1.2)
    vt = pag.vertex_table
    rc = r["root_causes"]
    # every path ends on thread 2, the last at both barriers: its work
    assert len(rc) == 3 and set(rc["thread"]) == {2}, rc
    assert set(rc["name"]) == {"work"}
    bar = r["paths"][r["paths"]["path"] == rc.loc[rc["symptom_name"] == "!$omp barrier @omp.c:12", "path"].iloc[0]]
    steps = [(str(vt["name"].iloc[v]), int(t), via) for v, t, via in zip(bar["vertex"], bar["thread"], bar["via"])]
    assert steps == [
        ("!$omp barrier @omp.c:12", 0, "start"),
        ("!$omp barrier @omp.c:12", 2, "thread"),
        ("work", 2, "program"),
    ]
    assert bar["wait"].iloc[1] == pytest.approx(28 * US)  # thread 0 waited 28 us for thread 2
    # the root causes pass the abnormality test (value > 1.3 x the mean over the vertex's rows)
    assert (rc["value"] > 1.2 * rc["mean"]).all()


def test_parallel_regions_and_locks(example2):
    from perflow.passes.openmp import lock_contention, parallel_regions

    pag = perflow.read(example2)
    r = parallel_regions(pag)
    assert len(r) == 1
    row = r.iloc[0]
    assert row["region"] == "!$omp parallel @omp.c:10"
    assert (row["team_instances"], row["threads"]) == (4, 3)  # 2 runs x 2 processes, teams of 3
    assert row["time"] == pytest.approx(2 * (110 + 40) * US)  # team spans 10..120 and 140..180
    # every thread's copy spans its team, from the fork to the join (the workers' fork time is the region's)
    assert row["thread_time"] == pytest.approx(2 * 3 * (110 + 40) * US)
    assert row["barrier_wait"] == pytest.approx(2 * 104 * US)
    assert row["lock_wait"] == pytest.approx(2 * 50 * US)
    lk = lock_contention(pag)
    crit = lk[(lk["process"] == 1) & (lk["lock"] == 1)].iloc[0]
    assert (crit["where"], crit["acquisitions"], crit["threads"], crit["contended"]) == (
        "!$omp critical @omp.c:15", 3, 3, 2)  # fmt: skip
    assert crit["wait"] == pytest.approx(35 * US) and crit["max_wait"] == pytest.approx(25 * US)
    api = lk[(lk["process"] == 0) & (lk["lock"] == 7)].iloc[0]
    assert (api["where"], api["contended"], api["wait"] / US) == ("omp_set_lock", 1, pytest.approx(15))


def test_openmp_profiler_flow(example):
    res = perflow.run("openmp_profiler", pag=str(example))
    assert res["regions"]["barrier_wait"].iloc[0] == pytest.approx(104 * US)
    kinds = res["by_kind"].set_index("kind")["amount"] / US
    assert kinds.round(6).to_dict() == {"omp_idle": 80, "omp_ibarrier_wait": 58, "omp_barrier_wait": 46,
                                        "lock_contention_critical": 35, "lock_contention_api": 15}  # fmt: skip
    assert "Parallel regions" in res["report"] and "omp_set_lock" in res["report"]


def test_locks_survive_save_and_load(pag, tmp_path):
    from perflow.pag.persist import load, save

    back = load(save(pag, tmp_path / "saved"))
    pd.testing.assert_frame_equal(back.trace.locks, pag.trace.locks)
    assert len(back.analyses.get(WAIT_INSTANCES)) == 15


def test_trace_without_roles_has_no_thread_waits():
    from perflow.synthetic import raw_trace

    pag = build_pag(raw_trace(nprocs=2, seed=1))
    w = pag.analyses.get(WAIT_INSTANCES)
    assert not w["kind"].astype(str).isin(["omp_barrier_wait", "omp_ibarrier_wait"]).any()


def test_orphaned_barriers_form_one_team_per_process(tmp_path):
    """Barriers outside every parallel region: the k-th of each thread of a process is instance k."""
    from tests.otf2kit import CArchive, openmp_process

    a = CArchive(tmp_path / "orph", resolution=10**6)
    bar = a.region("!$omp barrier", "barrier", "openmp")
    f = a.region("f")
    _, (t0, t1) = openmp_process(a, 2)
    for loc, arrive in ((t0, (5, 20)), (t1, (9, 12))):
        a.enter(loc, 0, f)
        for e in arrive:
            a.call(loc, e, 25 if e >= 12 else 10, bar)
        a.leave(loc, 30, f)
    pag = perflow.read(a.close())
    w = pag.analyses.get(WAIT_INSTANCES)
    assert _rows(w) == [(0, "omp_barrier_wait", 5, 4, 1, 9), (1, "omp_barrier_wait", 12, 8, 0, 20)]
