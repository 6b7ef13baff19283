"""Benchmark of the GPU timeline readers and the trace analyses on them: read, critical path, breakdown.

Usage::

    python benchmarks/bench_gpu.py                       # the real files, then 8 x 2 x 100,000 kernels
    python benchmarks/bench_gpu.py --kernels 10000 50000 # synthetic sizes (kernels per stream)
    python benchmarks/bench_gpu.py --no-synthetic

Every case runs in its own fresh process, twice in a row there: the *cold*
figures are the first call in the process (imports of pandas, sqlite3, numba
when a kernel is compiled, and loading the compiled kernels from the per-user
cache ``~/.cache/perflow``; a kernel not cached yet is compiled then, so run
the script twice to see the cached figures), the *warm* ones the second call
on the same input, with everything loaded. ``PERFLOW_JIT`` is left as the
user has it (``auto``: small inputs run interpreted, large ones compiled).

Real inputs: the Nsight Systems exports in ``tests/data/nsys``, the rocprof
outputs in ``tests/data/rocprof``, the Charm++ Projections logs in
``tests/data/projections``. The synthetic timeline is built with the shared
GPU builder (:func:`perflow.readers._gputrace.timeline_pag`): ``P`` processes
with one host thread and ``S`` streams each; per stream ``K`` kernels of
20-80 us, each launched by a 4 us ``cudaLaunchKernel`` (the streams take
turns); every 50 launches per stream the host calls ``cudaDeviceSynchronize``
and then an ``MPI_Barrier`` range that ends when the last process arrives;
one process (a random one per block) has 1.5 times the work,
so the critical path hops between host and streams and between processes.
Columns: instances (region instances of the trace), hops of the critical
path, the time to import perflow and the two passes (pandas, numpy: paid once
per process, before the cold read), the read (or build) time,
the critical-path pass (wait states, ideal-network replay and waiting time
included), and the breakdown pass (``by="process"``, waits separated; timed
with the PAG's analysis cache emptied, so it computes the wait states again).
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
DATA = ROOT / "tests" / "data"

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

#: the real files (label, path below tests/data)
REAL = [
    ("nsys cloverleaf-cuda", "nsys/cloverleaf-cuda.sqlite"),
    ("nsys saxpy-mpi-cuda", "nsys/saxpy-mpi-cuda.sqlite"),
    ("rocprof v1 mi200", "rocprof/v1-benchmark-mi200"),
    ("rocprof v2 vcopy", "rocprof/v2-vcopy-mi300x"),
    ("rocprof v3 two streams", "rocprof/v3-docs-two-streams"),
    ("projections hello", "projections/hello"),
    ("projections pingpong", "projections/pingpong"),
]

BLOCK = 50  # launches per stream between two synchronisations


def synthetic_timeline(processes: int = 8, streams: int = 2, kernels: int = 100_000, seed: int = 0) -> Any:
    """A :class:`~perflow.readers._gputrace.Timeline` of ``processes x streams x kernels`` kernels (see above)."""
    import numpy as np
    import pandas as pd

    from perflow.readers._gputrace import Timeline

    rng = np.random.default_rng(seed)
    P, S = processes, streams
    blocks = -(-kernels // BLOCK)
    launch_ns, gap_ns, latency_ns = 4_000, 1_000, 3_000
    host_parts: list[dict[str, np.ndarray]] = []
    gpu_parts: list[dict[str, np.ndarray]] = []
    t_host = np.full(P, 10_000.0)
    procs = np.arange(P)
    corr0 = 0
    for b in range(blocks):
        n = min(BLOCK, kernels - b * BLOCK)
        j = np.arange(n * S)  # launches of the block in host order: streams take turns
        a = t_host[:, None] + j[None, :] * (launch_ns + gap_ns)  # (P, n*S) launch starts
        corr = corr0 + procs[:, None] * 0 + j[None, :]
        corr0 += n * S
        host_parts.append(
            {
                "process": np.repeat(procs, n * S),
                "start": a.ravel(),
                "end": (a + launch_ns).ravel(),
                "name": np.full(P * n * S, "cudaLaunchKernel"),
                "paradigm": np.full(P * n * S, "cuda"),
                "corr": corr.ravel(),
                "sync": np.zeros(P * n * S, bool),
            }
        )
        # per stream, kernel k starts when launched (+ latency) and its predecessor ended
        ready = (a + launch_ns + latency_ns).reshape(P, n, S).transpose(0, 2, 1)  # (P, S, n)
        # integer nanoseconds, as Nsight Systems records them (exact sums: no overlaps from rounding)
        dur = rng.integers(20_000, 80_000, size=(P, S, n)).astype(np.float64)
        dur[rng.integers(P)] *= 1.5  # one process has more work in this block: the path moves there
        cum = np.cumsum(dur, axis=2)
        end = cum + np.maximum.accumulate(ready - (cum - dur), axis=2)
        start = end - dur
        gpu_parts.append(
            {
                "process": np.repeat(procs, S * n),
                "stream": np.tile(np.repeat(np.arange(S), n), P),
                "start": start.ravel(),
                "end": end.ravel(),
                "name": np.where(np.arange(P * S * n) % 3 == 0, "stencil", "flux"),
                "corr": corr.reshape(P, n, S).transpose(0, 2, 1).ravel(),
            }
        )
        last_launch = a[:, -1] + launch_ns
        sync_end = np.maximum(last_launch + 500, end.max(axis=(1, 2)) + 2_000)
        coll_end = sync_end.max() + 5_000
        host_parts.append(
            {
                "process": np.r_[procs, procs],
                "start": np.r_[last_launch + 100, sync_end + 200],
                "end": np.r_[sync_end, np.full(P, coll_end)],
                "name": np.r_[np.full(P, "cudaDeviceSynchronize"), np.full(P, "MPI_Barrier")],
                "paradigm": np.r_[np.full(P, "cuda"), np.full(P, "mpi")],
                "corr": np.full(2 * P, -1),
                "sync": np.r_[np.ones(P, bool), np.zeros(P, bool)],
            }
        )
        t_host = coll_end + rng.integers(5_000, 20_000, size=P)
    host = pd.DataFrame({k: np.concatenate([h[k] for h in host_parts]) for k in host_parts[0]})
    host.insert(1, "thread", 0)
    main = pd.DataFrame(
        {
            "process": procs,
            "thread": 0,
            "start": 0.0,
            "end": t_host + 1_000,
            "name": "main",
            "paradigm": "user",
            "corr": -1,
            "sync": False,
        }
    )
    host = pd.concat([main, host], ignore_index=True)
    gpu = pd.DataFrame({k: np.concatenate([g[k] for g in gpu_parts]) for k in gpu_parts[0]})
    gpu.insert(1, "device", 0)
    gpu["kind"] = "kernel"
    gpu["bytes"] = 0
    gpu = gpu[["process", "device", "stream", "start", "end", "name", "kind", "corr", "bytes"]]
    return Timeline(host, gpu, tick=1e-9, api="cuda", attrs={"source": f"synthetic {P}x{S}x{kernels}"})


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _case(spec: dict[str, Any]) -> dict[str, Any]:
    """One case in this process: read (or build) and analyse twice; the figures of both rounds."""
    t_import = time.perf_counter()
    import perflow
    from perflow.passes.breakdown import breakdown
    from perflow.passes.critical_path import critical_path

    t_import = time.perf_counter() - t_import

    rounds = []
    for _ in range(2):
        t_gen = 0.0
        t = time.perf_counter()
        if spec["kind"] == "file":
            pag = perflow.read(DATA / spec["path"])
        else:
            from perflow.readers._gputrace import timeline_pag

            tl = synthetic_timeline(8, 2, spec["kernels"])
            t_gen = time.perf_counter() - t
            t = time.perf_counter()
            pag = timeline_pag(tl)
            del tl
        t_read = time.perf_counter() - t
        t = time.perf_counter()
        out = critical_path(pag)
        t_cp = time.perf_counter() - t
        pag.__dict__.pop("analyses", None)  # the breakdown computes the wait states it needs itself
        t = time.perf_counter()
        breakdown(pag)
        t_bd = time.perf_counter() - t
        summ = out["summary"].iloc[0]
        rounds.append(
            {
                "generate": t_gen,
                "read": t_read,
                "critical_path": t_cp,
                "breakdown": t_bd,
                "instances": len(pag.trace.intervals),
                "hops": int(summ["hops"]),
                "length": float(summ["length"]),
            }
        )
        del pag, out
    return {"import": t_import, "rounds": rounds, "rss_gb": _rss_gb(), "jit": os.environ.get("PERFLOW_JIT", "auto")}


def _in_child(spec: dict[str, Any]) -> dict[str, Any]:
    res = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True, check=False
    )
    if res.returncode != 0:
        raise RuntimeError(f"case {spec} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _row(label: str, res: dict[str, Any]) -> str:
    cold, warm = res["rounds"]
    return (
        f"{label:<28} {cold['instances']:>10,} {cold['hops']:>6} {res['import']:>6.2f} "
        f"{cold['read']:>7.3f} {warm['read']:>7.3f} "
        f"{cold['critical_path']:>7.3f} {warm['critical_path']:>7.3f} "
        f"{cold['breakdown']:>7.3f} {warm['breakdown']:>7.3f} {res['rss_gb']:>6.2f}"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=float, nargs="*", default=[100_000], help="synthetic kernels per stream")
    ap.add_argument("--no-synthetic", action="store_true", help="only the real files")
    ap.add_argument("--no-real", action="store_true", help="only the synthetic timelines")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_case(json.loads(args.child))))
        return
    head = (
        f"{'input':<28} {'instances':>10} {'hops':>6} {'import':>6} {'read':>7} {'(warm)':>7} "
        f"{'cp':>7} {'(warm)':>7} {'bd':>7} {'(warm)':>7} {'RSS GB':>6}"
    )
    print(f"PERFLOW_JIT={os.environ.get('PERFLOW_JIT', 'auto')}; seconds, cold (first call) then warm")
    print(head)
    print("-" * len(head))
    if not args.no_real:
        for label, rel in REAL:
            if (DATA / rel).exists():
                print(_row(label, _in_child({"kind": "file", "path": rel})), flush=True)
    if not args.no_synthetic:
        for k in args.kernels:
            k = int(k)
            res = _in_child({"kind": "synthetic", "kernels": k})
            print(_row(f"synthetic 8x2x{k:,}", res), flush=True)
            print(f"{'':<28} (generating the timeline: {res['rounds'][0]['generate']:.2f} s)", flush=True)


if __name__ == "__main__":
    main()
