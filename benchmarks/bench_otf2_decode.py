"""Benchmark OTF2 ingest against the OTF2 C library: decode, and decode + PAG build + matching.

**Reference.** ``benchmarks/otf2_count.c`` (built by ``benchmarks/_cref.py``):
the OTF2 C library reading every event of the archive, one thread, count
only, on the library perflow drives (the ``otf2`` wheel's) and, when
installed, on otf2-tools' ``libopen-trace-format2``. Its CPU seconds (user +
system, from the operating system's accounting) are the denominator of every
ratio printed.

**Ingest** (``--ingest``, the default; ``--no-ingest`` skips it): ``perflow.read``
of the trace (decode + build + matching) in a fresh process after the
compiled kernels are loaded (on a small warm-up trace), paired with a C
reader run, ``--ingest-repeat`` times; medians of CPU (user and system,
decoder workers included), wall time, peak RSS, and bytes per event at the
peak and of the built PAG (resident after the read). ``--core N`` pins both
to one core (``taskset``).

**Decoders**: each decoder runs in a fresh Python process (so peak RSS is its own). The
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

    python benchmarks/make_otf2_trace.py --events 20e6 --out /work/apps/perf/t20M
    python benchmarks/bench_otf2_decode.py /work/apps/perf/t20M
    python benchmarks/bench_otf2_decode.py /work/apps/perf/t20M --engines fast --ingest-repeat 5 --core 1
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _cref  # noqa: E402


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


def _split_cpu() -> tuple[float, float]:
    """(user, system) CPU seconds of this process and its reaped children."""
    me, ch = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + ch.ru_utime, me.ru_stime + ch.ru_stime


def warm_trace() -> str:
    """A small trace (300,000 events, 8 ranks) whose read loads every compiled kernel of the ingest path."""
    import tempfile

    out = Path(tempfile.gettempdir()) / "perflow-bench-warm-300k"
    if not (out / "traces.otf2").exists():
        from make_otf2_trace import make_trace

        make_trace(str(out), 3e5, 8)
    return str(out / "traces.otf2")


def ingest_child(path: str, warm: str) -> dict:
    """``perflow.read(path)`` in this fresh process, after a warm-up read that loads the kernels."""
    import gc

    import perflow

    t, c = time.perf_counter(), _cpu()
    perflow.read(warm)
    first = {"warm_wall": time.perf_counter() - t, "warm_cpu": _cpu() - c}
    gc.collect()
    rss0 = _rss_mb()
    peak0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    u0, s0 = _split_cpu()
    t = time.perf_counter()
    pag = perflow.read(path)
    wall = time.perf_counter() - t
    u1, s1 = _split_cpu()
    gc.collect()
    rss1 = _rss_mb()
    tr = pag.trace
    return {
        **first,
        "wall": wall,
        "user": u1 - u0,
        "sys": s1 - s0,
        "cpu": u1 - u0 + s1 - s0,
        "rss_before_mb": rss0,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_before_mb": peak0,
        "children_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "built_mb": rss1 - rss0,
        "intervals": len(tr.intervals),
        "messages": len(tr.messages),
        "metric_rows": len(pag.metrics),
    }


def references(anchor: str, core: int | None) -> list[tuple[str, dict]]:
    """One run of the C reader on each available library: (label, figures)."""
    out = [("otf2 wheel", _cref.c_reader(anchor, core))]
    tools = _cref.system_library()
    if tools:
        out.append(("otf2-tools", _cref.c_reader(anchor, core, library=tools)))
    return out


def ingest(anchor: str, events: int, repeat: int, core: int | None) -> None:
    """perflow.read paired with the C reader, ``repeat`` times; medians and ratios."""
    warm = warm_trace()
    runs, refs = [], {}
    for _ in range(repeat):
        for label, r in references(anchor, core):
            refs.setdefault(label, []).append(r)
        cmd = _cref.pinned([sys.executable, __file__, anchor, "--ingest-child", warm], core)
        env = dict(os.environ, PERFLOW_JIT="compile")  # the warm-up loads every kernel a large trace uses
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
        if p.returncode:
            print(f"perflow.read failed\n{p.stderr[-3000:]}")
            return
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    med = _cref.median
    where = f"pinned to core {core}" if core is not None else f"{os.cpu_count()} cores"
    print(f"\n== ingest: decode + build + matching, {events:,} events, {where}, medians of {repeat} paired runs")
    c_ref = None
    for label, rs in refs.items():
        cpu, user, sys_ = med([r["cpu"] for r in rs]), med([r["user"] for r in rs]), med([r["sys"] for r in rs])
        c_ref = cpu if c_ref is None else c_ref
        print(f"C reader, count only ({label:10s}): CPU {cpu:6.2f} s (user {user:.2f}, sys {sys_:.2f}), "
              f"{events / cpu / 1e6:5.1f} M events/CPU-s, peak RSS {med([r['rss_mb'] for r in rs]):.0f} MB")  # fmt: skip
    cpu, user, sys_ = med([r["cpu"] for r in runs]), med([r["user"] for r in runs]), med([r["sys"] for r in runs])
    peak = med([r["peak_mb"] - r["rss_before_mb"] for r in runs])
    built = med([r["built_mb"] for r in runs])
    print(f"perflow.read                         : CPU {cpu:6.2f} s (user {user:.2f}, sys {sys_:.2f}), "
          f"wall {med([r['wall'] for r in runs]):.2f} s, = {cpu / c_ref:.2f}x the C reader (otf2 wheel)")  # fmt: skip
    for label, rs in list(refs.items())[1:]:
        print(f"{'':37s}  = {cpu / med([r['cpu'] for r in rs]):.2f}x the C reader ({label})")
    print(f"  memory: peak {peak:,.0f} MB above the start = {peak * 2**20 / events:.0f} B/event; built PAG "
          f"{built:,.0f} MB = {built * 2**20 / events:.0f} B/event; decoder workers' peak "
          f"{med([r['children_peak_mb'] for r in runs]):,.0f} MB")  # fmt: skip
    r = runs[0]
    print(f"  {r['intervals']:,} intervals, {r['messages']:,} messages, {r['metric_rows']:,} metric rows; "
          f"loading the kernels (warm-up read) {med([x['warm_cpu'] for x in runs]):.2f} s CPU, not included")  # fmt: skip


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
    ap.add_argument("--no-ingest", action="store_true", help="skip the perflow.read figure")
    ap.add_argument("--ingest-repeat", type=int, default=3, help="paired perflow.read / C reader runs (3)")
    ap.add_argument("--core", type=int, help="pin the ingest runs (perflow and the C reader) to this core")
    ap.add_argument("--ingest-child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.trace, a.child, a.jobs, not a.no_build, a.repeat)))
        return 0
    if a.ingest_child:
        print(json.dumps(ingest_child(a.trace, a.ingest_child)))
        return 0
    from perflow.readers.otf2._paths import resolve_anchor

    anchor = str(resolve_anchor(a.trace))
    declared = _declared_events(a.trace)
    size = sum(f.stat().st_size for f in Path(a.trace).rglob("*") if f.is_file()) if Path(a.trace).is_dir() else 0
    print(f"trace {a.trace}: {declared:,} OTF2 event records declared, {size / 1e6:.1f} MB, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    if not a.no_ingest:
        ingest(anchor, declared, a.ingest_repeat, a.core)
    if not a.engines:
        return 0
    refs = [_cref.c_reader(anchor) for _ in range(3)]
    c_cpu = _cref.median([r["cpu"] for r in refs])
    print(f"\n== decoders (C reader, count only, otf2 wheel: {c_cpu:.2f} s CPU, median of 3)")
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
            print(line + f"   {cpu / c_cpu:5.2f}x C CPU")
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
