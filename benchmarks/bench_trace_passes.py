"""Benchmark of the trace analyses on synthetic traces: per-pass times, events/s, peak RSS.

Usage::

    python benchmarks/bench_trace_passes.py            # 2 and 20 million events (synthetic)
    python benchmarks/bench_trace_passes.py --events 2e6 5e6
    python benchmarks/bench_trace_passes.py --trace /work/apps/perf/t20M --core 1

With ``--trace`` (an OTF2 archive, e.g. from ``benchmarks/make_otf2_trace.py``)
the figures are those of issue 28, each from fresh processes, CPU seconds
(user + system) from the operating system's accounting, medians of
``--repeat`` runs, printed with the OTF2 C library's count-only read of the
same archive (``benchmarks/otf2_count.c``) as the reference:

* the passes ``wait_states``, ``critical_path``, ``root_cause`` and
  ``pop_metrics`` run one after the other on one read PAG (as a flow meets
  them: what one computed, the next reuses), each pass's CPU and the sum;
* ``read + wait_states + critical_path + root_cause`` in one process pinned
  to one core (``taskset -c CORE``, one numba thread), with the C reader
  pinned to the same core;
* ``perflow run critical_path`` with and without ``--output``: what writing
  the report and the timelines adds, and the size of what is written.

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
# every kernel compiled (a large trace takes that path anyway), so that the warm-up loads them all
os.environ.setdefault("PERFLOW_JIT", "compile")
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

    from perflow.trace.collmatch import collective_event_rows, synthesised_collective_rows
    from perflow.trace.match import p2p_threaded
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


# ---------------------------------------------------------------------- OTF2 traces (issue 28's figures)
PASSES = ("wait_states", "critical_path", "root_cause", "pop_metrics")


def _cpu2() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


def _pass_fns() -> dict[str, Any]:
    from perflow.passes.critical_path import critical_path
    from perflow.passes.delay import root_cause
    from perflow.passes.pop import pop_metrics
    from perflow.passes.waitstates import wait_states

    return {"wait_states": wait_states, "critical_path": critical_path, "root_cause": root_cause,
            "pop_metrics": pop_metrics}  # fmt: skip


def _warm_trace() -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_otf2_decode import warm_trace

    return warm_trace()


def otf2_child(path: str, mode: str) -> dict[str, Any]:
    """One measurement in this fresh process (kernels loaded first on a small trace, not counted)."""
    import perflow

    fns = _pass_fns()
    warm = perflow.read(_warm_trace())
    for name in PASSES:
        fns[name](warm)
    del warm
    out: dict[str, Any] = {}
    c = _cpu2()
    pag = perflow.read(path)
    out["read"] = _cpu2() - c
    names = PASSES if mode == "passes" else PASSES[:3]
    for name in names:
        c = _cpu2()
        fns[name](pag)
        out[name] = _cpu2() - c
    return out


def _flow_cpu(path: str, output: str | None, core: int | None) -> tuple[float, int]:
    """CPU seconds of ``perflow run critical_path`` (with ``--output``: and the bytes written)."""
    import shutil

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _cref

    cmd = [sys.executable, "-m", "perflow", "-q", "run", "critical_path", "--input", path]
    if output:
        shutil.rmtree(output, ignore_errors=True)
        cmd += ["--output", output]
    r = _cref.cpu_of(cmd, core)
    size = sum(f.stat().st_size for f in Path(output).rglob("*") if f.is_file()) if output else 0
    return r["cpu"], size


def otf2_main(path: str, repeat: int, core: int | None, timeout: float, flow: bool = True) -> int:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import tempfile

    import _cref

    from perflow.readers.otf2._paths import resolve_anchor

    anchor = str(resolve_anchor(path))
    med = _cref.median
    print(f"trace {path}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")

    def child(mode: str, pin: int | None) -> dict[str, Any]:
        cmd = _cref.pinned([sys.executable, __file__, "--otf2-child", path, "--mode", mode], pin)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if p.returncode:
            raise RuntimeError(p.stderr[-3000:])
        return json.loads(p.stdout.strip().splitlines()[-1])

    cref, cpin, runs, pins, flows = [], [], [], [], []
    out_dir = os.path.join(tempfile.gettempdir(), "perflow-bench-cp-output")
    for _ in range(repeat):
        cref.append(_cref.c_reader(anchor)["cpu"])
        runs.append(child("passes", None))
        if core is not None:
            cpin.append(_cref.c_reader(anchor, core)["cpu"])
            pins.append(child("pinned", core))
        if flow:
            flows.append((_flow_cpu(path, None, None)[0], *_flow_cpu(path, out_dir, None)))
    c = med(cref)
    print(f"\nC reader (OTF2 C library, every event, count only): {c:.2f} s CPU (median of {repeat})")
    print(f"\n== the analyses on one read PAG, in flow order (CPU s, medians of {repeat} runs)")
    total = 0.0
    for name in ("read", *PASSES):
        t = med([r[name] for r in runs])
        total += t if name != "read" else 0.0
        print(f"  {name:<16s} {t:7.2f} s  {t / c:6.2f}x the C reader")
    print(f"  {'four analyses':<16s} {total:7.2f} s  {total / c:6.2f}x the C reader   (target 3 s)")
    if pins:
        tot = [r["read"] + sum(r[n] for n in PASSES[:3]) for r in pins]
        cp = med(cpin)
        print(f"\n== pinned to core {core}: read + wait_states + critical_path + root_cause (CPU s, medians)")
        for name in ("read", *PASSES[:3]):
            print(f"  {name:<16s} {med([r[name] for r in pins]):7.2f} s")
        print(f"  {'total':<16s} {med(tot):7.2f} s  = {med(tot) / cp:.2f}x the pinned C reader ({cp:.2f} s)"
              f"   (target 5 s)")  # fmt: skip
    if flows:
        without, with_, size = med([f[0] for f in flows]), med([f[1] for f in flows]), med([f[2] for f in flows])
        print(f"\n== perflow run critical_path (fresh processes, CPU s, medians of {repeat})")
        print(f"  without --output {without:7.2f} s")
        print(f"  with --output    {with_:7.2f} s  (+{with_ - without:.2f} s for the report and timelines, "
              f"{size / 1e6:.1f} MB written; target +3 s)")  # fmt: skip
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=float, nargs="*", default=[2e6, 2e7], help="trace sizes (events)")
    ap.add_argument("--nprocs", type=int, default=64)
    ap.add_argument("--one", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per size")
    ap.add_argument("--trace", help="an OTF2 archive: issue 28's figures (see above)")
    ap.add_argument("--core", type=int, help="with --trace: also the pinned run on this core")
    ap.add_argument("--repeat", type=int, default=3, help="with --trace: runs per figure (median)")
    ap.add_argument("--no-flow", action="store_true", help="with --trace: skip the perflow run figures (--output)")
    ap.add_argument("--otf2-child", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="passes", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one is not None:
        print(json.dumps(run_one(a.one, a.nprocs)))
        return 0
    if a.otf2_child:
        print(json.dumps(otf2_child(a.otf2_child, a.mode)))
        return 0
    if a.trace:
        return otf2_main(a.trace, a.repeat, a.core, a.timeout, flow=not a.no_flow)
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
