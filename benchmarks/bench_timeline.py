"""Benchmark: rendering a timeline of a large synthetic trace (default about 1 M region instances).

Times building the PAG, then the ``plot_timeline`` pass (aggregated mode), drawing the
figure to PNG, and prints peak resident memory.

    python benchmarks/bench_timeline.py                         # 64 processes, ~1 M intervals
    python benchmarks/bench_timeline.py --procs 256 --intervals 4e6
"""

from __future__ import annotations

import argparse
import io
import resource
import time

import perflow
from perflow.passes.timeline import plot_timeline


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=64)
    ap.add_argument("--intervals", type=float, default=1e6)
    ap.add_argument("--messages", action="store_true", help="also draw (subsampled) message arrows")
    a = ap.parse_args()
    iters = max(1, int(a.intervals / a.procs / 9))
    t = time.perf_counter()
    pag = perflow.synthetic.trace(nprocs=a.procs, iterations=iters, late_sender=0.05, seed=1)
    print(f"build PAG: {time.perf_counter() - t:.2f} s, {pag.trace.n_intervals:,} intervals, {a.procs} processes")
    t = time.perf_counter()
    fig = plot_timeline(pag, messages=a.messages)
    t_pass = time.perf_counter() - t
    t = time.perf_counter()
    fig.savefig(io.BytesIO(), format="png")
    t_draw = time.perf_counter() - t
    info = fig.perflow_timeline
    print(f"plot_timeline: {t_pass:.2f} s ({info['mode']}, {info['bars']:,} bars); savefig png: {t_draw:.2f} s")
    print(f"intervals/s through the pass: {pag.trace.n_intervals / t_pass:,.0f}")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
