"""Benchmark: the static timeline (PNG) of a large synthetic trace, with wait states and the critical path.

Builds a synthetic trace of about ``--events`` events (``perflow.synthetic``: 28 events per process
and iteration, 9 region instances), computes its wait states and critical path (the overlays the
``critical_path`` flow draws; not timed as drawing), then times the ``plot_timeline`` pass and
saving its figure as PNG, and prints peak resident memory.

    python benchmarks/bench_timeline.py                          # 64 processes, 4 M events
    python benchmarks/bench_timeline.py --events 20e6            # the issue-15 target: <= 5 s
    python benchmarks/bench_timeline.py --events 4e6 --no-overlays
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
    ap.add_argument("--events", type=float, default=4e6)
    ap.add_argument("--messages", action="store_true", help="also draw (subsampled) message arrows")
    ap.add_argument("--no-overlays", action="store_true", help="no wait states or critical path")
    ap.add_argument("--png", metavar="PATH", help="also write the PNG there, to look at")
    a = ap.parse_args()
    iters = perflow.synthetic.iterations_for(a.events, a.procs)
    t = time.perf_counter()
    pag = perflow.synthetic.trace(nprocs=a.procs, iterations=iters, late_sender=0.05, seed=1)
    n_events = iters * a.procs * perflow.synthetic.EVENTS_PER_ITERATION
    print(
        f"build PAG: {time.perf_counter() - t:.2f} s, {n_events / 1e6:.1f} M events, "
        f"{pag.trace.n_intervals:,} intervals, {a.procs} processes"
    )
    waits = path = None
    if not a.no_overlays:
        from perflow.passes.critical_path import critical_path
        from perflow.passes.waitstates import wait_states

        t = time.perf_counter()
        waits = wait_states(pag)
        path = critical_path(pag)["segments"]
        print(
            f"wait states + critical path: {time.perf_counter() - t:.2f} s ({len(waits):,} waits, {len(path):,} segments)"
        )
    t = time.perf_counter()
    fig = plot_timeline(pag, waits, path, messages=a.messages)
    t_pass = time.perf_counter() - t
    t = time.perf_counter()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=150, bbox_inches="tight")
    t_draw = time.perf_counter() - t
    if a.png:
        with open(a.png, "wb") as f:
            f.write(buf.getvalue())
    info = fig.perflow_timeline
    print(f"plot_timeline: {t_pass:.2f} s ({info['mode']}, {info['bars']:,} bars); savefig png: {t_draw:.2f} s")
    print(f"static timeline total: {t_pass + t_draw:.2f} s, PNG {buf.tell() / 1024:.0f} KiB")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
