"""Benchmark the OTF2 decoders on a trace: events, seconds, events/s, peak RSS, bytes per event.

Each decoder runs in a fresh Python process (so peak RSS is its own). The
first fast decode in the process is reported on its own line, then the
median of ``--repeat`` more ("warm"); loading the compiled numba callbacks
(once per process) is timed separately. Wall time and CPU time (this process
plus its worker processes) are both shown: on a shared machine, events per
CPU-second is the steadier per-core figure. The bindings decoder runs only when the trace has at most
``--max-events`` events (it decodes ~0.15 M events/s). When
``perflow.trace.build.build_pag`` exists, the time to build the PAG from the
fast decoder's RawTrace is printed too: the first build in the process (it
loads the compiled kernels it uses from the cache) and the median of
``--repeat`` more, with the ratio of the warm build to the warm decode.

Usage::

    python benchmarks/make_otf2_trace.py --events 2e6 --out /tmp/otf2-2M
    python benchmarks/bench_otf2_decode.py /tmp/otf2-2M
    python benchmarks/bench_otf2_decode.py /tmp/otf2-20M --jobs 2
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _declared_events(path: str) -> int:
    import otf2

    from perflow.readers.otf2._paths import resolve_anchor

    with otf2.reader.open(resolve_anchor(path)) as tr:
        return sum(int(loc.number_of_events) for loc in tr.definitions.locations)


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its reaped children."""
    me, ch = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


def child(path: str, engine: str, jobs: int | None, build: bool, repeat: int) -> dict:
    """Decode in this (fresh) process and measure."""
    import numpy as np

    from perflow.readers.otf2 import decode

    out: dict = {"engine": engine}
    if engine == "fast":
        t = time.perf_counter()
        from perflow.readers.otf2._callbacks import callback_addresses

        callback_addresses()
        out["jit_load_s"] = time.perf_counter() - t
    rss0 = _rss_mb()
    t, c = time.perf_counter(), _cpu()
    raw = decode(path, decoder=engine, jobs=jobs)
    out["seconds"], out["cpu_seconds"] = time.perf_counter() - t, _cpu() - c
    # touch every column, so that shared pages written by the workers count in this process's RSS
    for name in ("region_events", "p2p_events", "coll_events", "metric_events", "thread_events"):
        for col in getattr(raw, name).values():
            float(np.asarray(col[:: max(1, 4096 // col.itemsize)], dtype=np.float64).sum()) if len(col) else 0
    rss1 = _rss_mb()
    rows = raw.n_events
    out["rows"] = rows
    out["records"] = (
        rows - len(raw.metric_events["value"]) + _metric_records(raw) + sum(raw.attrs["skipped_events"].values())
    )
    out["rss_before_mb"], out["rss_after_mb"] = rss0, rss1
    out["bytes_per_event"] = (rss1 - rss0) * 2**20 / max(out["records"], 1)
    if build:
        try:
            from perflow.trace.build import build_pag
        except ImportError:
            out["build_pag_s"] = None
        else:
            t = time.perf_counter()
            build_pag(raw)
            out["build_pag_s"] = time.perf_counter() - t
            walls = []
            for _ in range(repeat):
                t = time.perf_counter()
                build_pag(raw)
                walls.append(time.perf_counter() - t)
            out["build_pag_warm_s"] = float(np.median(walls)) if walls else None
    if engine == "fast" and repeat:
        del raw
        walls, cpus = [], []
        for _ in range(repeat):
            t, c = time.perf_counter(), _cpu()
            decode(path, decoder=engine, jobs=jobs)
            walls.append(time.perf_counter() - t)
            cpus.append(_cpu() - c)
        out["warm_seconds"], out["warm_cpu_seconds"] = float(np.median(walls)), float(np.median(cpus))
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["peak_rss_children_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return out


def _metric_records(raw) -> int:  # noqa: ANN001
    """Number of OTF2 Metric records behind the metric rows (rows sharing location, time and pos)."""
    import numpy as np

    m = raw.metric_events
    if not len(m["value"]):
        return 0
    key = np.stack([m["location"].astype(np.float64), m["time"], m["pos"].astype(np.float64)])
    return int(1 + np.count_nonzero(np.any(np.diff(key, axis=1) != 0, axis=0)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="OTF2 archive directory or anchor file")
    ap.add_argument("--jobs", type=int, default=None, help="worker processes of the fast decoder (default: cores)")
    ap.add_argument("--max-events", type=float, default=3e6, help="run the bindings decoder up to this many events")
    ap.add_argument("--engines", default="fast,bindings")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--no-build", action="store_true", help="do not time build_pag")
    ap.add_argument("--repeat", type=int, default=3, help="warm runs of the fast decoder (median reported)")
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.trace, a.child, a.jobs, not a.no_build, a.repeat)))
        return 0
    declared = _declared_events(a.trace)
    size = sum(f.stat().st_size for f in Path(a.trace).rglob("*") if f.is_file()) if Path(a.trace).is_dir() else 0
    print(f"trace {a.trace}: {declared:,} OTF2 event records declared, {size / 1e6:.1f} MB, {os.cpu_count()} cores")
    results = []
    for engine in a.engines.split(","):
        if engine == "bindings" and declared > a.max_events:
            print(f"{engine}: skipped ({declared:,} events > --max-events {a.max_events:,.0f})")
            continue
        cmd = [sys.executable, __file__, a.trace, "--child", engine] + (
            ["--jobs", str(a.jobs)] if a.jobs is not None else []
        )
        cmd += ["--no-build"] if a.no_build or engine != "fast" else []
        cmd += ["--repeat", str(a.repeat)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        if p.returncode:
            print(f"{engine}: failed\n{p.stderr[-2000:]}")
            continue
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    print(
        f"{'decoder':<9}{'records':>12}{'wall s':>8}{'M ev/s':>8}{'CPU s':>7}{'M ev/CPU-s':>11}"
        f"{'peak RSS MB':>12}{'workers MB':>11}{'B/event':>9}"
    )
    for r in results:
        ev = r["records"]
        runs = [("", r["seconds"], r["cpu_seconds"])]
        if r.get("warm_seconds"):
            runs.append((" warm", r["warm_seconds"], r["warm_cpu_seconds"]))
        for tag, wall, cpu in runs:
            line = (
                f"{r['engine'] + tag:<9}{ev:>12,}{wall:>8.2f}{ev / wall / 1e6:>8.2f}{cpu:>7.2f}{ev / cpu / 1e6:>11.2f}"
            )
            if not tag:
                line += f"{r['peak_rss_mb']:>12.0f}{r['peak_rss_children_mb']:>11.0f}{r['bytes_per_event']:>9.1f}"
            print(line)
    for r in results:
        if r.get("jit_load_s") is not None:
            print(f"{r['engine']}: loading the compiled callbacks took {r['jit_load_s']:.2f} s (not in 'seconds')")
        if "build_pag_s" in r:
            b = r["build_pag_s"]
            if b is None:
                print("build_pag: not available in this checkout")
                continue
            line = f"build_pag: first {b:.2f} s (loads the compiled kernels)"
            w = r.get("build_pag_warm_s")
            if w is not None:
                line += f", warm {w:.2f} s (median of {a.repeat})"
                if r.get("warm_seconds"):
                    line += f" = {w / r['warm_seconds']:.1f}x the warm decode"
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
