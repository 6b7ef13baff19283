"""Benchmark: the interactive HTML timeline (``timeline_html``) of a large synthetic trace.

Builds a synthetic trace of about ``--events`` events, its wait states and critical path (not
timed), then times ``timeline_html`` (binned summary pyramid, embedded instances, overlays, Bokeh
serialisation) and prints the size of the page. The issue-15 target for 20 M events: <= 10 s and
<= 50 MB.

    python benchmarks/bench_html_timeline.py --events 20e6
"""

from __future__ import annotations

import argparse
import resource
import time

import perflow
from perflow.passes.html_timeline import timeline_html


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=64)
    ap.add_argument("--events", type=float, default=4e6)
    ap.add_argument("--out", metavar="PATH", help="also write the page there")
    a = ap.parse_args()
    iters = perflow.synthetic.iterations_for(a.events, a.procs)
    t = time.perf_counter()
    pag = perflow.synthetic.trace(nprocs=a.procs, iterations=iters, late_sender=0.05, seed=1)
    n_events = iters * a.procs * perflow.synthetic.EVENTS_PER_ITERATION
    print(
        f"build PAG: {time.perf_counter() - t:.2f} s, {n_events / 1e6:.1f} M events, {pag.trace.n_intervals:,} intervals"
    )
    from perflow.passes.critical_path import critical_path
    from perflow.passes.waitstates import wait_states

    waits = wait_states(pag)
    path = critical_path(pag)["segments"]
    print(f"overlays: {len(waits):,} wait states, {len(path):,} path segments, {len(pag.trace.messages):,} messages")
    t = time.perf_counter()
    html = timeline_html(pag, waits, path, path=a.out)
    dt = time.perf_counter() - t
    size = len(html.encode("utf-8"))
    print(f"timeline_html: {dt:.2f} s, page {size / 2**20:.1f} MiB ({size / 1e6:.1f} MB)")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
