"""Benchmark: the profile/trace readers and the Chrome writer.

Times every shared sample (``../shared/data``, when present), then a Chrome
trace round trip of a synthetic run (``--procs`` x ``--iterations``), and
prints events/s and peak resident memory.

    python benchmarks/bench_readers.py
    python benchmarks/bench_readers.py --procs 32 --iterations 4000
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import perflow
from perflow.writers.chrome import to_chrome

SAMPLES = [
    "cube/scorep-cpi/profile.cubex",
    "hpctoolkit/cpi-xml",
    "hpctoolkit/ping-pong-v4",
    "caliper/lulesh-json/lulesh-annotation-profile.json",
    "caliper/lulesh-cali/lulesh-annotation-profile.cali",
    "scaling/lulesh-caliper/343_cores.cali",
    "tau/cpi-mpi",
    "cprofile/cprofile-cycle.pstats",
]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=int, default=16)
    ap.add_argument("--iterations", type=int, default=2000)
    args = ap.parse_args()
    from tests.conftest import shared_data_dir

    d = shared_data_dir()
    if d is not None:
        for s in SAMPLES:
            if not (d / s).exists():
                continue
            perflow.read(d / s)  # warm up imports and compiled kernels
            t = time.perf_counter()
            pag = perflow.read(d / s)
            print(f"{s:55s} {1e3 * (time.perf_counter() - t):8.1f} ms  {pag.n_vertices} vertices")
    src = perflow.synthetic.trace(nprocs=args.procs, iterations=args.iterations, seed=1)
    n_ev = 2 * src.trace.n_intervals + 2 * len(src.trace.messages)
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "t.json"
        t = time.perf_counter()
        to_chrome(src, f)
        w = time.perf_counter() - t
        t = time.perf_counter()
        back = perflow.read(f)
        r = time.perf_counter() - t
        size = f.stat().st_size / 1e6
    print(f"to_chrome: {n_ev:,} events ({size:.0f} MB) in {w:.2f} s = {n_ev / w:,.0f} events/s")
    print(f"read chrome: {back.trace.n_intervals:,} intervals in {r:.2f} s = {n_ev / r:,.0f} events/s")
    print(f"peak RSS {rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
