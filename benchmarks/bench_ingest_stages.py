"""Where ``perflow.read`` of an OTF2 trace spends CPU and memory, stage by stage.

For each stage of the read (decode, value checks, the build pipeline's scan,
merge, finalize, match, metric rows and collectives, then the assembly of the
PAG) it prints the CPU seconds (user and system, from ``getrusage``: this
process, its threads and its reaped decoder workers), the minor page faults,
the resident size after the stage and the peak resident size reached inside
it (``VmHWM``, reset at each stage boundary through ``/proc/self/clear_refs``;
Linux only). The stage boundaries are taken by wrapping
``perflow.readers.otf2.decode``, ``perflow.readers._common.check_trace``,
``perflow.trace.build.build``/``assemble`` and the pipeline's stage laps; a
warm-up read of a small trace loads the compiled kernels first.

Usage::

    python benchmarks/bench_ingest_stages.py /work/bench-data/otf2-20M-v2
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_otf2_decode import warm_trace  # noqa: E402

import perflow  # noqa: E402
import perflow.readers._common as common  # noqa: E402
import perflow.readers.otf2 as otf2  # noqa: E402
import perflow.trace.build as build  # noqa: E402
import perflow.trace.pipeline as pipeline  # noqa: E402

#: the laps of perflow.trace.pipeline.build, in order (the first call starts the clock)
LAPS = ("", "scan", "merge", "finalize", "match", "metrics", "collectives")


def _usage() -> tuple[float, float, int]:
    me, ch = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + ch.ru_utime, me.ru_stime + ch.ru_stime, me.ru_minflt + ch.ru_minflt


def _memory() -> tuple[float, float]:
    """Resident and peak resident MB since the last call (the peak is reset)."""
    got = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                got[line.split(":")[0]] = int(line.split()[1]) / 1024
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return got.get("VmRSS", float("nan")), got.get("VmHWM", float("nan"))


class Marks:
    def __init__(self) -> None:
        self.rows: list[tuple[str, tuple[float, float, int], tuple[float, float]]] = []
        self.laps = iter(())

    def mark(self, name: str) -> None:
        self.rows.append((name, _usage(), _memory()))

    def perf_counter(self) -> float:  # stands in for pipeline.time.perf_counter: each lap is a stage
        name = next(self.laps, None)
        if name is not None:
            self.mark(name)
        return time.perf_counter()


def main(path: str) -> None:
    perflow.read(warm_trace())
    m = Marks()
    decode, check, run, assemble = otf2.decode, common.check_trace, build.build, build.assemble

    def w_decode(*a, **k):
        m.mark("start")
        out = decode(*a, **k)
        m.mark("decode")
        return out

    def w_check(*a, **k):
        out = check(*a, **k)
        m.mark("checks")
        return out

    def w_build(*a, **k):
        m.laps = iter(LAPS)
        return run(*a, **k)

    def w_assemble(*a, **k):
        out = assemble(*a, **k)
        m.mark("assemble")
        return out

    otf2.decode, common.check_trace, build.build, build.assemble = w_decode, w_check, w_build, w_assemble
    pipeline.time = m  # type: ignore[assignment]
    try:
        pag = perflow.read(path)
        m.mark("end")
    finally:
        otf2.decode, common.check_trace, build.build, build.assemble = decode, check, run, assemble
        pipeline.time = time
    print(f"{'stage':<12} {'user':>6} {'sys':>6} {'faults':>8} {'RSS MB':>8} {'peak MB':>8}")
    prev = m.rows[0][1]
    for name, use, (rss, peak) in m.rows[1:]:
        if name:
            d = [b - a for a, b in zip(prev, use)]
            print(f"{name:<12} {d[0]:6.2f} {d[1]:6.2f} {int(d[2]):8d} {rss:8.0f} {peak:8.0f}")
        prev = use
    u0, s0, _ = m.rows[0][1]
    u1, s1, _ = m.rows[-1][1]
    n = int(pag.attrs.get("n_events", 0)) or None
    print(
        f"total: CPU {u1 - u0 + s1 - s0:.2f} s (user {u1 - u0:.2f}, sys {s1 - s0:.2f})"
        + (f", {n:,} events" if n else "")
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])
