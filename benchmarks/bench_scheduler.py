"""Benchmark: flow scheduler overhead, and a cached re-run of a realistic flow.

1. A flow of 1,000 trivial steps (chains and fan-ins of integer additions):
   time to build, to validate and plan, and to run with one thread and with a
   thread pool; the run time per step is the scheduler's overhead (target
   below 1 ms per step).
2. A realistic flow: a synthetic trace (64 ranks by default) read by several
   passes (hotspots, load imbalance, message statistics, wait states, a
   text summary). Cold run with an empty cache, then the same run again:
   the cached re-run loads only the final outputs (target at least 50 times
   faster).

    python benchmarks/bench_scheduler.py
    python benchmarks/bench_scheduler.py --steps 5000 --procs 128 --iterations 400
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time

import numpy as np
import pandas as pd

import perflow
from perflow import PAG, Flow, pass_
from perflow.flow.plan import compile_flow


@pass_(name="bench_add")
def add(a: int, b: int = 0, *, offset: int = 0) -> int:
    """a + b + offset."""
    return a + b + offset


@pass_(name="bench_hotspots")
def hotspots(pag: PAG, *, metric: str = "time_exc", k: int = 20) -> pd.DataFrame:
    """The k call paths with the most ``metric`` summed over processes."""
    df = pag.metric_frame([metric])
    df["path"] = pag.call_paths()
    return df.nlargest(k, metric)


@pass_(name="bench_imbalance")
def imbalance(pag: PAG, *, metric: str = "time_exc", min_share: float = 0.01) -> pd.DataFrame:
    """max / mean of ``metric`` across processes for vertices above ``min_share`` of the total."""
    mx, mean, tot = (pag.aggregate(metric, a) for a in ("max", "mean", "sum"))
    df = pd.DataFrame({"max": mx, "mean": mean, "sum": tot})
    df = df[df["sum"] >= min_share * df["sum"].sum()]
    df["imbalance"] = df["max"] / df["mean"].where(df["mean"] > 0)
    return df.sort_values("imbalance", ascending=False)


@pass_(name="bench_messages")
def messages(pag: PAG) -> pd.DataFrame:
    """Message count, bytes and mean latency per (sender, receiver)."""
    m = pag.trace.messages
    m = m.assign(latency=m["recv_time"] - m["send_time"])
    return m.groupby(["send_process", "recv_process"]).agg(
        count=("bytes", "size"), bytes=("bytes", "sum"), latency=("latency", "mean")
    )


@pass_(name="bench_waits")
def waits(pag: PAG) -> pd.DataFrame:
    """Time per process in MPI regions (a crude wait-state profile)."""
    iv = pag.trace.intervals
    names = pag.vertex_table["name"].astype(str).to_numpy()[iv["vertex"].to_numpy()]
    mpi = np.char.startswith(names.astype(str), "MPI_")
    d = (iv["leave"] - iv["enter"])[mpi]
    return d.groupby(iv["process"][mpi]).sum().to_frame("mpi_time")


@pass_(name="bench_summary")
def summary(hot: pd.DataFrame, imb: pd.DataFrame, msgs: pd.DataFrame, wait: pd.DataFrame) -> str:
    """A text report from the other passes."""
    return (
        f"top region {hot['path'].iloc[0]} ({hot.iloc[0, -2]:.3g} s); "
        f"most imbalanced vertex {imb.index[0]} ({imb['imbalance'].iloc[0]:.2f}); "
        f"{int(msgs['count'].sum())} messages; max MPI time {wait['mpi_time'].max():.3g} s"
    )


def big_flow(steps: int) -> Flow:
    """About ``steps`` trivial steps: chains of 10 additions, joined pairwise (width and depth)."""
    f = Flow("big")
    x = f.input("x", int)
    ends = []
    for c in range(max(1, (steps + 1) // 11)):
        r = x
        for k in range(10):
            r = f.step(f"c{c}_{k}", "bench_add", r, offset=c + 1)  # distinct, so none are merged
        ends.append(r)
    j = 0
    while len(ends) > 1:
        a, b = ends.pop(0), ends.pop(0)
        ends.append(f.step(f"join{j}", "bench_add", a, b))
        j += 1
    f.output("total", ends[0])
    return f


def realistic_flow(nprocs: int, iterations: int) -> Flow:
    """A synthetic trace read by four analyses and a summary of them."""
    f = Flow("realistic")
    pag = f.step("trace", "synthetic", nprocs=nprocs, iterations=iterations, imbalance=0.3, late_sender=0.02)
    hot = f.step("hot", "bench_hotspots", pag)
    imb = f.step("imb", "bench_imbalance", pag)
    msg = f.step("msgs", "bench_messages", pag)
    wt = f.step("waits", "bench_waits", pag)
    f.output("summary", f.step("summary", "bench_summary", hot, imb, msg, wt))
    f.output("hot", hot)
    f.output("imbalance", imb)
    return f


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(label: str, fn, per: int | None = None):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    extra = f"   {dt / per * 1e3:7.3f} ms/step" if per else ""
    print(f"{label:<48} {dt:8.3f} s{extra}   peak RSS {rss_mb():7.0f} MB", flush=True)
    return out, dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--procs", type=int, default=64)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()

    print(f"== scheduler overhead: {a.steps} trivial steps")
    f, _ = timed("build the flow", lambda: big_flow(a.steps))
    n = len(f.steps)
    compile_flow(big_flow(22))  # import the pass library outside the timings
    timed("validate + plan", lambda: compile_flow(f), per=n)
    r, _ = timed("run, jobs=1 (validate + plan + run)", lambda: perflow.run(f, x=0, jobs=1), per=n)
    r2, _ = timed(f"run, jobs={a.jobs} (thread pool)", lambda: perflow.run(f, x=0, jobs=a.jobs), per=n)
    chains = (n + 1) // 11
    assert r.ok and r2.ok and r["total"] == r2["total"] == 10 * chains * (chains + 1) // 2
    assert (r.steps["status"] == "done").all()
    with tempfile.TemporaryDirectory() as d:
        timed("run with a cache, cold (writes every result)", lambda: perflow.run(f, x=0, jobs=1, cache=d), per=n)
        w, _ = timed("run with a cache, warm", lambda: perflow.run(f, x=0, jobs=1, cache=d), per=n)
        assert len(perflow.flow.Cache(d)) == n and w.steps["status"].value_counts().to_dict() == {
            "unneeded": n - 1,
            "cached": 1,
        }

    print(f"\n== realistic flow: synthetic trace of {a.procs} ranks x {a.iterations} iterations -> 5 passes")
    rf = realistic_flow(a.procs, a.iterations)
    perflow.synthetic.trace(nprocs=2, iterations=2)  # compile the numba kernels outside the timings
    timed("no cache", lambda: perflow.run(rf, jobs=a.jobs))
    d = tempfile.mkdtemp(prefix="perflow-bench-cache-")
    try:
        cold, t_cold = timed("cold (empty cache; results are written)", lambda: perflow.run(rf, jobs=a.jobs, cache=d))
        warm, t_warm = timed("warm (same flow, same cache)", lambda: perflow.run(rf, jobs=a.jobs, cache=d))
        assert warm["summary"] == cold["summary"], (warm["summary"], cold["summary"])
        print(f"   statuses: {dict(warm.steps['status'])}")
        print(f"   cached re-run is {t_cold / t_warm:.0f}x faster than the cold run")
        changed, _ = timed(
            "one setting changed (imb.min_share)",
            lambda: perflow.run(rf, jobs=a.jobs, cache=d, settings={"imb.min_share": 0.05}),
        )
        print(f"   statuses: {dict(changed.steps['status'])}")
        print(f"   summary: {cold['summary']}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
