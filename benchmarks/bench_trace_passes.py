"""Benchmark of the trace analyses on synthetic traces: per-pass times, events/s, peak RSS.

Usage::

    python benchmarks/bench_trace_passes.py            # 2 and 20 million events
    python benchmarks/bench_trace_passes.py --events 2e6 5e6

Each size runs in its own process (so peak RSS is per size) on a trace from
``perflow.synthetic.raw_trace(nprocs=64, iterations=iterations_for(events, 64))``.
Message matching happens inside ``build_pag``; it is timed on its own by
repeating the matching step (``perflow.trace.match``) on the scanned events.
The goal: matching + all wait states + the critical path on 20 million events
in under 60 s on one core, growing linearly with the number of events.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _timed(fn: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def _warm_up() -> None:
    """Compile every numba kernel on a tiny trace so compilation is not timed."""
    import perflow.passes  # noqa: F401
    from perflow import synthetic
    from perflow.passes.critical_path import critical_path
    from perflow.passes.delay import root_cause
    from perflow.passes.pop import pop_metrics
    from perflow.passes.variance import variance

    pag = synthetic.trace(nprocs=4, iterations=3, late_sender=0.2, seed=1)
    critical_path(pag)
    root_cause(pag)
    root_cause(pag, long_term=True)
    pop_metrics(pag)
    variance(pag, slices=4)


def _matching_only(raw: Any) -> float:
    """Time message matching and collective grouping alone (the pipeline's matching steps on one partition)."""
    import numpy as np

    from perflow.trace.match import collective_event_rows, p2p_threaded, synthesised_collective_rows
    from perflow.trace.records import match_records, p2p_records
    from perflow.trace.scan import enclosing_instance, scan_regions

    ev = raw.region_events
    res = scan_regions(ev["location"], ev["kind"], ev["region"], time=ev["time"])
    inst_loc = ev["location"][res.enter].astype(np.int64)
    ginst = np.arange(len(res.enter))
    p2p_loc = raw.p2p_events["location"]
    t = time.perf_counter()
    p2p_open = enclosing_instance(res.open_after, ev["location"], p2p_loc, raw.p2p_events["pos"])
    coll_open = enclosing_instance(res.open_after, ev["location"], raw.coll_events["location"], raw.coll_events["pos"])
    sends, recvs = p2p_records(
        raw, p2p_open, res.callpath, res.cp_region, ginst, res.t_enter, res.t_leave,
        np.arange(len(p2p_loc)), threaded=p2p_threaded(raw),
    )  # fmt: skip
    match_records(recvs, [sends])
    collective_event_rows(raw, coll_open, res.t_enter)
    synthesised_collective_rows(raw, coll_open, res.callpath, res.cp_region, inst_loc, res.t_enter, res.t_leave, False)
    return time.perf_counter() - t


def run_one(events: float, nprocs: int) -> dict[str, Any]:
    """Measure one trace size in this process; return the figures."""
    _warm_up()
    from perflow import synthetic
    from perflow.passes.critical_path import critical_path
    from perflow.passes.delay import root_cause
    from perflow.passes.pop import pop_metrics
    from perflow.passes.variance import variance
    from perflow.trace.analyses import FLAT_TIMELINE, LOCATIONS, WAIT_INSTANCES, ideal_replay
    from perflow.trace.build import build_pag
    from perflow.trace.collwaits import collective_waits
    from perflow.trace.critical import critical_path as cp_core
    from perflow.trace.waits import p2p_waits

    it = synthetic.iterations_for(events, nprocs)
    raw, t_gen = _timed(lambda: synthetic.raw_trace(nprocs=nprocs, iterations=it, late_sender=0.01, seed=7))
    n = raw.n_events
    t_match = _matching_only(raw)
    t0 = time.perf_counter()
    pag = build_pag(raw)
    t_build = time.perf_counter() - t0
    del raw
    tr = pag.trace
    names = pag.vertex_table["name"].astype(str).to_numpy()
    times: dict[str, float] = {"generate": t_gen, "build_pag (incl. matching)": t_build, "matching alone": t_match}
    # each figure as a flow meets it: what it builds on is already in the PAG's analysis manager
    locs = pag.analyses.get(LOCATIONS)
    _, times["p2p wait states"] = _timed(lambda: p2p_waits(tr, names, locs=locs))
    _, times["collective wait states"] = _timed(lambda: collective_waits(tr))
    waits, times["wait_instances (all, one table)"] = _timed(lambda: pag.analyses.get(WAIT_INSTANCES))
    flat, times["flat timeline"] = _timed(lambda: pag.analyses.get(FLAT_TIMELINE))
    _, times["critical path walk"] = _timed(lambda: cp_core(tr, waits, pag.n_vertices, locs=locs, flat=flat))
    _, times["critical_path pass (tables)"] = _timed(lambda: critical_path(pag))
    _, times["root_cause short-term"] = _timed(lambda: root_cause(pag))
    _, times["root_cause long-term"] = _timed(lambda: root_cause(pag, long_term=True))
    from perflow.sdk.trace import non_useful_mask

    useful = ~non_useful_mask(pag, ("mpi", "openmp", "thread"))
    _, times["ideal-network replay (POP)"] = _timed(lambda: ideal_replay(pag, useful))
    _, times["pop_metrics"] = _timed(lambda: pop_metrics(pag))
    _, times["variance"] = _timed(lambda: variance(pag))
    # the goal: matching + every wait state (as the one sorted table the critical path uses) + the path
    goal = (
        times["matching alone"]
        + times["wait_instances (all, one table)"]
        + times["flat timeline"]
        + times["critical path walk"]
    )
    return {
        "events": n,
        "intervals": len(tr.intervals),
        "messages": len(tr.messages),
        "wait_instances": len(waits),
        "times": times,
        "goal_seconds": goal,
        "peak_rss_gb": _rss_gb(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=float, nargs="*", default=[2e6, 2e7], help="trace sizes (events)")
    ap.add_argument("--nprocs", type=int, default=64)
    ap.add_argument("--one", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per size")
    a = ap.parse_args(argv)
    if a.one is not None:
        print(json.dumps(run_one(a.one, a.nprocs)))
        return 0
    results = []
    for ev in a.events:
        p = subprocess.run(
            [sys.executable, __file__, "--one", str(ev), "--nprocs", str(a.nprocs)],
            capture_output=True,
            text=True,
            timeout=a.timeout,
            check=False,
        )
        if p.returncode:
            print(p.stderr, file=sys.stderr)
            return p.returncode
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    for r in results:
        n = r["events"]
        print(
            f"\n== {n / 1e6:.1f} M events ({r['intervals']:,} intervals, {r['messages']:,} messages, "
            f"{r['wait_instances']:,} wait instances), peak RSS {r['peak_rss_gb']:.2f} GB"
        )
        for k, t in r["times"].items():
            print(f"  {k:32s} {t:8.2f} s  {n / t / 1e6 if t > 0 else float('inf'):9.1f} M events/s")
        g = r["goal_seconds"]
        print(f"  {'matching + wait states + CP':32s} {g:8.2f} s  {n / g / 1e6:9.1f} M events/s  (goal < 60 s at 20 M)")
    if len(results) >= 2:
        a0, a1 = results[0], results[-1]
        ratio = (a1["goal_seconds"] / a0["goal_seconds"]) / (a1["events"] / a0["events"])
        print(f"\nscaling of the goal time per event, largest vs smallest trace: {ratio:.2f} (1.0 = linear)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
