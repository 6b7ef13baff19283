"""perflow record on MPI+OpenMP programs: every thread recorded through OMPT, read as Score-P's OpenMP traces are.

``programs/omp_hybrid.c`` (2 ranks x 2 threads, built with clang -fopenmp for LLVM's libomp) injects an
imbalanced parallel loop, a critical section, an explicit barrier, a lock, a task and an MPI call made by
a worker thread, and prints the waits each thread measured itself (last arrival minus its own at the
barriers, asked-to-got at the critical section and the lock): the recorded wait states must be those,
per rank, thread and iteration, and near what it injected. Built with GCC (libgomp, no OMPT) the
recorder says that only the initial thread is recorded. ``programs/omp_multiple.c`` exchanges messages
from both threads of each rank at once (MPI_THREAD_MULTIPLE).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.kinds import P2P, ThreadEv
from perflow.trace.analyses import CRITICAL_PATH, WAIT_INSTANCES

from .conftest import PROGRAMS, site_line
from .otf2check import otf2_print

ITERS = 2
IMB = {0: 0.2, 1: 0.3}  # thread 1's extra loop work per rank (omp_hybrid.c: imb(rank))
CRIT = LOCK = 0.08
TOL = 0.015  # recorded against measured: the OMPT callbacks run a few us from the program's clock reads,
# more when a thread is descheduled between the two (4 threads on 2 cores)


@pytest.fixture(scope="module")
def omp_build(toolchain, workdir: Path):  # noqa: ANN001, ANN201
    """compile(source, compiler) -> executable, built with the MPI wrapper driving ``compiler`` -fopenmp."""

    def compile(source: str, compiler: str = "clang") -> Path:
        if not shutil.which(compiler):
            pytest.skip(f"{compiler} is not installed (Debian packages clang and libomp-dev)")
        exe = workdir / "bin" / f"{Path(source).stem}-{compiler}"
        exe.parent.mkdir(exist_ok=True)
        env = dict(os.environ, OMPI_CC=compiler, MPICH_CC=compiler)
        argv = [toolchain.mpicc, "-O2", "-g", "-fopenmp", "-o", str(exe), str(PROGRAMS / source)]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
        if p.returncode and compiler == "clang" and re.search(r"omp\.h|-lomp|libomp", p.stderr):
            pytest.skip(f"clang has no OpenMP runtime (install libomp-dev): {p.stderr.strip()[-200:]}")
        assert p.returncode == 0, f"compiling {source} with {compiler} failed:\n{p.stderr}"
        return exe

    return compile


@pytest.fixture(scope="module")
def hybrid(omp_build, recorded):  # noqa: ANN001, ANN201
    run = recorded([str(omp_build("omp_hybrid.c"))], str(ITERS), n=2)
    assert run.result.status == 0, run.stderr
    return run


@pytest.fixture(scope="module")
def pag(hybrid):  # noqa: ANN001, ANN201
    return perflow.read(hybrid.result.outdir)


@pytest.fixture(scope="module")
def measured(hybrid) -> pd.DataFrame:  # noqa: ANN001
    """The waits the program's threads measured: one row per (rank, thread, iteration)."""
    rows = re.findall(
        r"measured rank (\d+) thread (\d+) iteration (\d+) loop (\S+) critical (\S+) barrier (\S+) lock (\S+) end (\S+)",
        hybrid.stdout,
    )
    cols = ["process", "thread", "iteration", "loop", "critical", "barrier", "lock", "end"]
    df = pd.DataFrame(rows, columns=cols).astype({c: int for c in cols[:3]} | {c: float for c in cols[3:]})
    assert len(df) == 2 * 2 * ITERS, hybrid.stdout
    return df.set_index(["process", "thread", "iteration"]).sort_index()


def _recorded_waits(pag) -> pd.DataFrame:  # noqa: ANN001
    """Recorded wait amounts per (process, thread, iteration) and construct, like ``measured``."""
    w = pag.analyses.get(WAIT_INSTANCES)
    w = w[w["interval"].to_numpy() >= 0]  # not the idle threads (omp_idle: the master's time, no call path)
    names = pag.vertex_table["name"].astype(str).to_numpy()
    iv = pag.trace.intervals
    where = names[iv["vertex"].to_numpy()[w["interval"].to_numpy()]]
    line = {k: site_line("omp_hybrid.c", k) for k in ("parallel", "for", "critical", "barrier")}
    construct = {
        f"!$omp implicit barrier @omp_hybrid.c:{line['for']}": "loop",
        f"!$omp critical @omp_hybrid.c:{line['critical']}": "critical",
        f"!$omp barrier @omp_hybrid.c:{line['barrier']}": "barrier",
        "omp_set_lock": "lock",
        f"!$omp implicit barrier @omp_hybrid.c:{line['parallel']}": "end",
    }
    # iteration: which of the process's parallel-region runs (its master's instances, in time order) holds it
    par = iv[
        (names[iv["vertex"].to_numpy()] == f"!$omp parallel @omp_hybrid.c:{line['parallel']}") & (iv["thread"] == 0)
    ]
    out = pd.DataFrame(
        0.0,
        index=pd.MultiIndex.from_product([[0, 1], [0, 1], range(ITERS)]),
        columns=list(dict.fromkeys(construct.values())),
    )
    out.index.names = ["process", "thread", "iteration"]
    for proc, thr, start, amount, wh in zip(w["process"], w["thread"], w["start"], w["amount"], where):
        if wh in construct:
            enters = np.sort(par.loc[par["process"] == proc, "enter"].to_numpy())
            it = int(np.searchsorted(enters, start, side="right")) - 1
            out.loc[(int(proc), int(thr), it), construct[wh]] += amount
    return out


def test_every_thread_is_a_location_of_its_rank(hybrid) -> None:  # noqa: ANN001
    raw = hybrid.raw
    assert list(zip(raw.locations["process"], raw.locations["thread"])) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert raw.locations["name"].tolist() == ["rank 0", "rank 0 thread 1", "rank 1", "rank 1 thread 1"]
    assert raw.attrs["openmp"].startswith("OMPT") and raw.attrs["threads"] == 2
    assert not [n for n in hybrid.result.notes if "OMPT" in n]
    ev = pd.DataFrame(raw.thread_events)
    ev["process"] = raw.locations["process"].to_numpy()[ev["location"]]
    ev["thread"] = raw.locations["thread"].to_numpy()[ev["location"]]
    per = ev.groupby(["process", "thread", "kind"]).size().unstack(fill_value=0)
    for p in (0, 1):  # the master forks and joins each team; every thread begins and ends it
        assert per.loc[(p, 0), ThreadEv.FORK] == per.loc[(p, 0), ThreadEv.JOIN] == ITERS
        assert per.loc[(p, 1), ThreadEv.FORK] == per.loc[(p, 1), ThreadEv.JOIN] == 0
        for t in (0, 1):
            assert per.loc[(p, t), ThreadEv.TEAM_BEGIN] == per.loc[(p, t), ThreadEv.TEAM_END] == ITERS
    assert (ev.loc[ev["kind"] == ThreadEv.FORK, "count"] == 2).all()
    # two locks per process (the critical section, the omp_lock_t), numbered 0 and 1; each acquired by both
    # threads in every iteration, acquisitions numbered in time order over the threads
    locks = ev[ev["kind"] == ThreadEv.ACQUIRE_LOCK]
    assert sorted(set(zip(locks["process"], locks["lock"]))) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for _, g in locks.groupby(["process", "lock"]):
        assert sorted(g["order"]) == list(range(2 * ITERS)) and g.sort_values("time")["order"].tolist() == list(
            range(2 * ITERS)
        )
        assert sorted(g["thread"].tolist()) == [0] * ITERS + [1] * ITERS


def test_regions_are_named_and_placed_as_scorep_does(hybrid, pag) -> None:  # noqa: ANN001
    reg = hybrid.raw.regions
    omp = reg[reg["paradigm"] == "openmp"].set_index("name")["role"].to_dict()
    line = {k: site_line("omp_hybrid.c", k) for k in ("parallel", "for", "critical", "barrier", "single", "task")}
    expected = {
        f"!$omp parallel @omp_hybrid.c:{line['parallel']}": "parallel",
        f"!$omp for @omp_hybrid.c:{line['for']}": "loop",
        f"!$omp implicit barrier @omp_hybrid.c:{line['for']}": "implicit_barrier",
        f"!$omp critical @omp_hybrid.c:{line['critical']}": "critical",
        f"!$omp critical sblock @omp_hybrid.c:{line['critical']}": "critical_sblock",
        f"!$omp barrier @omp_hybrid.c:{line['barrier']}": "barrier",
        "omp_set_lock": "function",
        "omp_unset_lock": "function",
        f"!$omp single @omp_hybrid.c:{line['single']}": "single",
        f"!$omp implicit barrier @omp_hybrid.c:{line['single']}": "implicit_barrier",
        f"!$omp task @omp_hybrid.c:{line['task']}": "task",
        f"!$omp implicit barrier @omp_hybrid.c:{line['parallel']}": "implicit_barrier",
    }
    assert omp == expected
    locks = reg[reg["name"].isin(["omp_set_lock", "omp_unset_lock"])]
    assert locks["line"].tolist() == [site_line("omp_hybrid.c", "set_lock"), site_line("omp_hybrid.c", "unset_lock")]
    # the parallel region lies in main (the call context of its fork, the same on every thread of the team)
    vt = pag.vertex_table
    names = vt["name"].astype(str)
    par = vt[names == f"!$omp parallel @omp_hybrid.c:{line['parallel']}"]
    assert len(par) and (names.reindex(par["parent"]).to_numpy() == "main").all()
    # the task ran for its 30 ms on one of the threads, once per iteration and rank
    iv = pag.trace.intervals
    is_task = names.to_numpy()[iv["vertex"].to_numpy()] == f"!$omp task @omp_hybrid.c:{line['task']}"
    dur = (iv["leave"] - iv["enter"]).to_numpy()[is_task]
    assert len(dur) == 2 * ITERS and np.all(dur > 0.03 - 1e-3) and np.all(dur < 0.03 + 0.2)  # (a loaded machine)


def test_barrier_and_lock_waits_are_what_the_threads_measured(pag, measured) -> None:  # noqa: ANN001
    rec = _recorded_waits(pag)
    diff = (rec - measured[rec.columns]).abs()
    assert (diff < TOL).all().all(), f"recorded - measured:\n{(rec - measured[rec.columns]).round(4)}"


def test_waits_are_the_injected_ones(pag, measured) -> None:  # noqa: ANN001
    rec = _recorded_waits(pag)
    for p in (0, 1):
        for it in range(ITERS):
            # thread 0 waits at the loop's barrier for thread 1's extra work; thread 1 does not wait there
            # (less when thread 0 was descheduled before its work began: up to tens of ms on a loaded machine)
            assert rec.loc[(p, 0, it), "loop"] == pytest.approx(IMB[p], abs=0.1)
            assert rec.loc[(p, 1, it), "loop"] < TOL
            # the second thread to ask for the critical section waits for the first's release (at most CRIT:
            # less by how much later it asked), and the first then waits about CRIT at the barrier (more by the
            # time the second needed to wake up); the same for the lock
            # (more than CRIT when the holder was descheduled inside it: then the program measured it too)
            one = rec.xs((p, it), level=("process", "iteration"))
            own = measured.xs((p, it), level=("process", "iteration"))
            assert 0.3 * CRIT < one["critical"].max() < max(CRIT, own["critical"].max()) + TOL
            assert one["critical"].min() < TOL
            assert CRIT - TOL < one["barrier"].max() < max(CRIT, own["barrier"].max()) + 0.1
            assert 0.3 * LOCK < one["lock"].max() < max(LOCK, own["lock"].max()) + TOL and one["lock"].min() < TOL
    w = pag.analyses.get(WAIT_INSTANCES)
    totals = w.groupby(w["kind"].astype(str))["amount"].sum()
    assert totals["lock_contention_critical"] == pytest.approx(measured["critical"].sum(), abs=4 * TOL)
    assert totals["lock_contention_api"] == pytest.approx(measured["lock"].sum(), abs=4 * TOL)


def test_lock_contention_and_openmp_profiler(pag, measured) -> None:  # noqa: ANN001
    res = perflow.run("openmp_profiler", pag=pag)
    regions = res["regions"]
    par = regions[regions["region"].str.startswith("!$omp parallel")]
    assert len(regions) == 1 and par["team_instances"].iloc[0] == 2 * ITERS and par["threads"].iloc[0] == 2
    locks = res["locks"].set_index(["process", "where"])
    assert len(locks) == 4 and (locks["acquisitions"] == 2 * ITERS).all() and (locks["threads"] == 2).all()
    line = site_line("omp_hybrid.c", "critical")
    for p in (0, 1):
        m = measured.xs(p, level="process")
        crit, api = locks.loc[(p, f"!$omp critical @omp_hybrid.c:{line}")], locks.loc[(p, "omp_set_lock")]
        assert crit["contended"] == api["contended"] == ITERS
        assert crit["wait"] == pytest.approx(m["critical"].sum(), abs=2 * TOL)
        assert api["wait"] == pytest.approx(m["lock"].sum(), abs=2 * TOL)
    by_thread = res["by_thread"]
    assert set(by_thread.loc[by_thread["thread"] == 1, "kind"]) >= {"lock_contention_critical", "lock_contention_api"}


def test_worker_threads_call_mpi_and_are_sampled(hybrid, pag) -> None:  # noqa: ANN001
    calls = hybrid.calls()
    thread = hybrid.raw.locations["thread"].to_numpy()[calls["location"]]
    allreduce = calls[calls["name"] == "MPI_Allreduce"]
    assert len(allreduce) == 2 * ITERS and (thread[allreduce.index] == 1).all()
    assert (allreduce["line"] == site_line("omp_hybrid.c", "allreduce")).all()
    # matched across the ranks' worker threads: rank 0's thread 1 waits for rank 1's (rank 1 works longer)
    c = pag.trace.collectives
    ar = c[c["op"] == 11]
    assert ar.groupby("instance")["process"].apply(sorted).tolist() == [[0, 1]] * ITERS
    assert (ar["thread"] == 1).all()
    w = pag.analyses.get(WAIT_INSTANCES)
    nxn = w[w["kind"].astype(str) == "wait_nxn"]
    assert len(nxn) == ITERS and (nxn["process"] == 0).all() and (nxn["thread"] == 1).all()
    assert (nxn["cause_process"] == 1).all() and (nxn["cause_thread"] == 1).all()
    assert nxn["amount"].to_numpy() == pytest.approx([IMB[1] - IMB[0]] * ITERS, abs=0.1)
    # samples on the worker threads, in the loop's work, below the construct (the outlined function dropped)
    s = hybrid.raw.table("sample_events")
    st = hybrid.raw.stacks.merge(hybrid.raw.regions[["name"]], left_on="region", right_index=True)
    first = st[st["depth"] == 0].set_index("stack")["name"]
    on_worker = hybrid.raw.locations["thread"].to_numpy()[s["location"]] == 1
    assert on_worker.any()
    assert "loop_work" in set(first.reindex(s.loc[on_worker, "stack"]).dropna())
    assert not st["name"].str.contains("omp_outlined|__kmp|start_thread").any()


def test_critical_path_runs_through_the_threads(pag) -> None:  # noqa: ANN001
    cp = pag.analyses.get(CRITICAL_PATH)
    hops = cp.hops
    on = hops.assign(d=hops["end"] - hops["start"]).groupby(["process", "thread"])["d"].sum()
    assert {(1, 0), (1, 1)} <= set(on.index)
    # the path follows the thread that works longest: rank 1's thread 1 in every loop
    assert on[(1, 1)] > ITERS * IMB[1] * 0.8
    switches = (hops[["process", "thread"]].diff().abs().sum(axis=1) > 0).sum()
    # handed between the threads at the forks and joins at least (more at barriers and locks, as the threads
    # happened to run on the loaded machine)
    assert switches >= 2 * ITERS
    # every loop: rank 1's master hands the path to its worker at the fork (the fork edge); other hand-overs
    # from the master to the worker happen where the worker won the critical section (a race of the program)
    pairs = list(zip(hops["process"], hops["thread"], strict=True))
    at = [hops["end"].iloc[i] for i in range(len(pairs) - 1) if pairs[i] == (1, 0) and pairs[i + 1] == (1, 1)]
    names = pag.vertex_table["name"].astype(str).to_numpy()
    iv = pag.trace.intervals
    own = iv[(iv["process"] == 1) & (iv["thread"] == 0)]
    forks = own.loc[[str(n).startswith("!$omp parallel") for n in names[own["vertex"].to_numpy()]], "enter"]
    assert len(forks) == ITERS
    for t in forks:
        assert any(abs(a - t) < 1e-9 for a in at), (t, at)


def test_root_cause_is_the_imbalanced_loop(pag) -> None:  # noqa: ANN001
    res = perflow.run("root_cause", pag=pag)
    by = res["by_process"]
    # the loop's extra work on thread 1 causes the most waiting. With 4 threads on 2 cores the loop's threads are
    # off the CPU for much of it (the program spins to a wall-clock deadline): that time is off_cpu below the
    # loop, never code's, so the loop's cost is its code's and the time off the CPU inside it together
    path = by["call_path"].str.replace(r"/off_cpu$", "", regex=True)
    per_thread = by.groupby([by["process"], by["thread"], path])["total"].sum()
    # ranked among the parallel region's call paths: on a loaded machine a rank descheduled while it starts
    # delays the other in MPI_Init (launch skew, off_cpu of MPI_Init_thread on thread 0: 0.38 s at load 17,
    # above either half of the loop's 0.69 s), which is no construct of the program's
    inside_parallel = per_thread[per_thread.index.get_level_values(2).str.contains("!$omp parallel", regex=False)]
    process, thread, top_path = inside_parallel.idxmax()
    assert thread == 1 and "!$omp for @" in top_path, by.head(8).to_string()
    cost = by.groupby(path)["cost"].sum()

    def inside(construct: str) -> float:
        return float(cost[cost.index.str.contains(construct, regex=False)].sum())

    loop = inside("!$omp for @")
    assert loop > inside("!$omp critical @") and loop > inside("omp_set_lock")
    top = res["causes"].iloc[0]
    assert "!$omp parallel" in top["call_path"]  # code of the parallel region, not MPI_Init or the root


def test_otf2_trace_carries_the_threads(hybrid, pag) -> None:  # noqa: ANN001
    anchor = hybrid.result.files["otf2"]
    defs = otf2_print(anchor, "-G")
    locs = re.findall(r'^LOCATION\s+\d+\s+Name: "([^"]+)".*Group: "([^"]+)"', defs, re.MULTILINE)
    assert locs == [("rank 0", "MPI Rank 0"), ("rank 0 thread 1", "MPI Rank 0"), ("rank 1", "MPI Rank 1"),
                    ("rank 1 thread 1", "MPI Rank 1")]  # fmt: skip
    events = otf2_print(anchor)
    for rec in ("THREAD_FORK", "THREAD_JOIN", "THREAD_TEAM_BEGIN", "THREAD_TEAM_END", "THREAD_ACQUIRE_LOCK"):
        assert rec in events
    back = perflow.read(anchor)
    a, b = (p.analyses.get(WAIT_INSTANCES) for p in (pag, back))
    sums = [x.groupby(x["kind"].astype(str))["amount"].sum() for x in (a, b)]
    pd.testing.assert_series_equal(sums[0], sums[1], atol=1e-6)


def test_gcc_libgomp_records_the_initial_thread_and_says_so(omp_build, recorded) -> None:  # noqa: ANN001
    run = recorded([str(omp_build("omp_hybrid.c", compiler="gcc"))], "1", n=2)
    assert run.result.status == 0
    notes = [n for n in run.result.notes if "no OMPT interface" in n]
    assert notes and "only the initial thread of each rank is recorded" in notes[0] and "libgomp" in notes[0]
    raw = run.raw
    assert (raw.locations["thread"] == 0).all() and len(raw.locations) == 2
    assert "no OMPT" in raw.attrs["openmp"] and not (raw.regions["paradigm"] == "openmp").any()


def test_thread_multiple_requests_of_two_threads(omp_build, recorded) -> None:  # noqa: ANN001
    n = 150
    run = recorded([str(omp_build("omp_multiple.c"))], str(n), n=2)
    assert run.result.status == 0 and "wrong 0" in run.stdout
    p = run.raw.table("p2p_events")
    thread = run.raw.locations["thread"].to_numpy()[p["location"]]
    counts = p.groupby(["location", "kind"]).size().unstack()
    for k in (P2P.ISEND, P2P.ISEND_COMPLETE, P2P.IRECV_REQUEST, P2P.IRECV):
        assert (counts[k] == n).all(), counts
    done = p["kind"].isin([P2P.ISEND_COMPLETE, P2P.IRECV]).to_numpy()
    assert (p["tag"].to_numpy()[done] == thread[done]).all()  # each completion is its own thread's request
    pag = perflow.read(run.result.outdir)
    assert len(pag.trace.messages) == 2 * 2 * n and not pag.attrs.get("unmatched_recvs")


# ---- a hand-made recording: one process, its initial thread and a worker thread --------------------


def _rec(**kw: object) -> np.ndarray:
    from perflow.recorder.functions import REC_DTYPE

    r = np.zeros(1, REC_DTYPE)
    r["comm"] = -1
    for k, v in kw.items():
        r[k] = v
    return r


def test_worker_streams_assembled_handmade(tmp_path: Path) -> None:
    """p<pid>.t<n>.* files become thread n of the process; thread records become thread_events (times in us)."""
    from perflow.recorder.assemble import load_recording
    from perflow.recorder.functions import FN, R_ENTER, R_LEAVE, R_THR
    from perflow.trace.build import build_pag

    us = 1e-6
    par, ibar, crit, sblock = (FN[n] for n in ("!$omp parallel", "!$omp implicit barrier", "!$omp critical",
                                              "!$omp critical sblock"))  # fmt: skip
    lock = 0x7FFF1000

    def region(t: float, fn: int, enter: bool) -> np.ndarray:
        return _rec(t=t * us, type=R_ENTER if enter else R_LEAVE, fn=fn, n1=-1)

    def thr(t: float, kind: int, **kw: object) -> np.ndarray:
        return _rec(t=t * us, type=R_THR, kind=kind, a=kw.pop("a", -1), **kw)

    def in_critical(t_ask: float, t_got: float, t_rel: float, order: int) -> list[np.ndarray]:
        return [region(t_ask, crit, True), thr(t_got, ThreadEv.ACQUIRE_LOCK, n1=lock, n2=order),
                region(t_got, sblock, True), region(t_rel, sblock, False),
                thr(t_rel, ThreadEv.RELEASE_LOCK, n1=lock, n2=order), region(t_rel, crit, False)]  # fmt: skip

    master = [region(0, 0, True), thr(10, ThreadEv.FORK, a=2), thr(10, ThreadEv.TEAM_BEGIN), region(10, par, True),
              region(40, ibar, True), region(70, ibar, False), *in_critical(70, 70, 80, 0),
              region(80, ibar, True), region(100, ibar, False), region(100, par, False),
              thr(100, ThreadEv.TEAM_END), thr(100, ThreadEv.JOIN), region(120, 0, False)]  # fmt: skip
    worker = [thr(12, ThreadEv.TEAM_BEGIN), region(12, par, True), region(70, ibar, True), region(70, ibar, False),
              *in_critical(70, 80, 95, 1), region(95, ibar, True), region(100, ibar, False),
              region(100, par, False), thr(100, ThreadEv.TEAM_END)]  # fmt: skip
    (tmp_path / "p7.ev").write_bytes(np.concatenate(master).tobytes())
    (tmp_path / "p7.t1.ev").write_bytes(np.concatenate(worker).tobytes())
    (tmp_path / "p7.txt").write_text(
        "version 1\nkind native\npid 7\nexe /x/prog\nhz 0\nclock_offset 0\nrecsize 48\nrank 0\nsize 1\nhost h\n"
        "W 1\nT 1 8\nomp_tool 14 201611 LLVM OMP\nend\n"
    )
    raw = load_recording(tmp_path)
    assert raw.locations[["process", "thread", "name"]].values.tolist() == [[0, 0, "rank 0"], [0, 1, "rank 0 thread 1"]]
    assert raw.attrs["openmp"] == "OMPT: 201611 LLVM OMP" and raw.attrs["threads"] == 2
    ev = raw.table("thread_events")
    assert ev["location"].tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert ev["kind"].tolist() == [ThreadEv.FORK, ThreadEv.TEAM_BEGIN, ThreadEv.ACQUIRE_LOCK, ThreadEv.RELEASE_LOCK,
                                   ThreadEv.TEAM_END, ThreadEv.JOIN] + [ThreadEv.TEAM_BEGIN, ThreadEv.ACQUIRE_LOCK,
                                   ThreadEv.RELEASE_LOCK, ThreadEv.TEAM_END]  # fmt: skip
    assert ev["count"].tolist() == [2] + [-1] * 9 and ev["team"].tolist() == [-1] * 10
    assert ev["lock"].tolist() == [-1, -1, 0, 0, -1, -1, -1, 0, 0, -1]  # the wait id numbered per process
    assert ev["order"].tolist() == [-1, -1, 0, 0, -1, -1, -1, 1, 1, -1]
    roles = raw.regions["role"].reindex(raw.region_events["region"]).tolist()
    assert (
        roles[:3] == ["function", "parallel", "implicit_barrier"]
        and raw.regions["paradigm"].tolist().count("openmp") == 4
    )
    pag = build_pag(raw)
    w = pag.analyses.get(WAIT_INSTANCES)
    got = sorted((int(r.thread), str(r.kind), round(r.start / us, 3), round(r.amount / us, 3)) for r in w.itertuples())
    # the worker is idle while the master runs outside the team: before the fork (0-10) and after the join (100-120)
    assert got == [(0, "omp_ibarrier_wait", 40, 30), (0, "omp_ibarrier_wait", 80, 15),
                   (1, "lock_contention_critical", 70, 10), (1, "omp_idle", 0, 10), (1, "omp_idle", 100, 20)]  # fmt: skip
