"""Benchmark of the Dask engine against the local engine: one OTF2 trace read and analysed by both.

The trace is written by ``benchmarks/make_otf2_trace.py`` (64 ranks, in
chunks: memory stays flat) unless it exists. Then, each in a fresh process:

* the **local engine**: ``perflow.read`` and the passes ``wait_states``,
  ``critical_path``, ``root_cause`` (short term) and ``pop_metrics`` on the
  PAG, CPU seconds (user + system) and wall time;
* the **Dask engine** on a LocalCluster of ``W`` single-threaded worker
  processes for each ``--workers W``: ``Engine.load`` (traffic pass,
  affinity partitioning, decoding, the trace pipeline on the workers), then
  the same passes on ``dt.pag()``; wall time per phase, every worker's CPU
  seconds and peak RSS, what the client gathered, and the analyses' forms
  (``partitioned``, ``program`` or ``gathered``).

It prints the speed-up from 1 to 2 workers, the time per core (wall x
workers) against the local engine's CPU seconds, and checks that the Dask
results equal the local ones (wait-state table, critical path, delay costs,
POP). Compiled kernels are loaded on a small trace first in every process.

``--smoke`` runs a small trace (200,000 events, 8 ranks) on 2 workers and
exits non-zero unless the results are equal. The test suite runs
:func:`measure` (what the Dask child measures) on a trace of a few thousand
events against the local engine's results (``tests/dask/test_engine.py``),
so that the script keeps up with the engine's API.

Usage::

    python benchmarks/bench_dask.py --events 2e7 --trace /work/apps/perf/t20M
    python benchmarks/bench_dask.py --events 2e8 --trace /work/apps/perf/t200M --workers 2 --memory 8e9
    python benchmarks/bench_dask.py --smoke
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PASSES = ("wait_states", "critical_path", "root_cause", "pop_metrics")


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def _worker_usage() -> tuple[float, float]:
    """(CPU seconds, RSS GB) of this worker process."""
    import psutil

    p = psutil.Process(os.getpid())
    t = p.cpu_times()
    return t.user + t.system, p.memory_info().rss / 1e9


class PeakRSS:
    """Poll every worker's RSS in a background thread; keep the maxima."""

    def __init__(self, client: Any, every: float = 0.5) -> None:
        self.client, self.every, self.peak, self._stop = client, every, {}, False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                for k, (_, rss) in self.client.run(_worker_usage).items():
                    self.peak[k] = max(self.peak.get(k, 0.0), rss)
            except Exception:  # noqa: BLE001 - a worker restarting; keep polling
                pass
            time.sleep(self.every)

    def stop(self) -> dict[str, float]:
        self._stop = True
        self._t.join()
        return self.peak


def make(path: Path, events: float, ranks: int) -> None:
    from make_otf2_trace import make_trace

    if (path / "traces.otf2").exists():
        return
    t = time.perf_counter()
    make_trace(str(path), events, ranks)
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    print(f"trace: wrote {path} ({size / 1e9:.2f} GB) in {time.perf_counter() - t:.1f} s")


def _passes() -> dict[str, Any]:
    from perflow.passes.critical_path import critical_path
    from perflow.passes.delay import root_cause
    from perflow.passes.pop import pop_metrics
    from perflow.passes.waitstates import wait_states

    return {"wait_states": wait_states, "critical_path": critical_path, "root_cause": root_cause,
            "pop_metrics": pop_metrics}  # fmt: skip


def _results(out: dict[str, Any]) -> dict[str, Any]:
    """The figures compared between the engines (JSON-able)."""
    w = out["wait_states"]
    cp = out["critical_path"]
    rc = out["root_cause"]
    pop = out["pop_metrics"]

    def frame(df: Any) -> Any:
        return json.loads(df.to_json(orient="split", double_precision=15))

    return {
        "waits": frame(w.sort_values(list(w.columns)).reset_index(drop=True)) if len(w) < 200_000 else
        [len(w), float(w["amount"].sum())],
        "cp_summary": frame(cp["summary"]),
        "cp_profile": frame(cp["profile"]),
        "root_cause": {k: frame(v) for k, v in rc.items()} if isinstance(rc, dict) else frame(rc),
        "pop": frame(pop) if hasattr(pop, "to_json") else {k: frame(v) for k, v in pop.items()},
    }  # fmt: skip


def local_child(path: str, warm: str, keep: bool) -> dict[str, Any]:
    """The local engine in this fresh process."""
    import perflow

    fns = _passes()
    w = perflow.read(warm)
    for f in fns.values():
        f(w)
    out: dict[str, Any] = {"times": {}, "cpu": {}}
    t, c = time.perf_counter(), _cpu()
    pag = perflow.read(path)
    out["times"]["load"], out["cpu"]["load"] = time.perf_counter() - t, _cpu() - c
    res = {}
    for name, f in fns.items():
        t, c = time.perf_counter(), _cpu()
        res[name] = f(pag)
        out["times"][name], out["cpu"][name] = time.perf_counter() - t, _cpu() - c
    out["events"] = int(len(pag.trace.intervals))
    out["peak_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    if keep:
        out["results"] = _results(res)
    return out


def dask_child(path: str, warm: str, workers: int, memory: float, keep: bool) -> dict[str, Any]:
    """The Dask engine on a LocalCluster of ``workers`` workers, in this fresh process."""
    from perflow.dask import Engine

    fns = _passes()
    limit = int(memory / workers)
    out: dict[str, Any] = {"times": {}, "workers": workers, "limit_gb": limit / 1e9}
    with Engine(n_workers=workers, threads_per_worker=1, memory_limit=limit) as eng:
        wpag = eng.load(warm).pag()
        for f in fns.values():
            f(wpag)
        del wpag
        out.update(measure(eng, path, fns, keep))
    out["client_peak_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    return out


def measure(eng: Any, path: str, fns: dict[str, Any], keep: bool) -> dict[str, Any]:
    """Load ``path`` on the engine ``eng`` and run the passes ``fns`` on it: times, workers' CPU and peak RSS,
    what was gathered, the analyses' forms, the pipeline's phases and exchanges (and, with ``keep``, the
    results compared with the local engine's). The test suite runs it on a small trace
    (``tests/dask/test_engine.py``), so that this script keeps working."""
    out: dict[str, Any] = {"times": {}}
    cpu0 = {k: v[0] for k, v in eng.client.run(_worker_usage).items()}
    mon = PeakRSS(eng.client)
    c0, t0 = _cpu(), time.perf_counter()
    dt = eng.load(path)
    pag = dt.pag()
    out["times"]["load"] = time.perf_counter() - t0
    res = {}
    for name, f in fns.items():
        t = time.perf_counter()
        res[name] = f(pag)
        out["times"][name] = time.perf_counter() - t
    out["client_cpu"] = _cpu() - c0
    peak = mon.stop()
    cpu1 = {k: v[0] for k, v in eng.client.run(_worker_usage).items()}
    out["worker_cpu"] = [cpu1[k] - cpu0.get(k, 0.0) for k in sorted(cpu1)]
    out["peak_gb"] = [peak[k] for k in sorted(peak)]
    out["gathered"] = sorted(pag.gathered)
    out["forms"] = {k: round(v, 2) for k, v in dt.timings.items() if k.startswith("analysis ")}
    out["phases"] = {k: round(v, 2) for k, v in dt.timings.items() if not k.startswith("analysis ")}
    s = dt.summary()
    out["events"] = s["events"]
    out["exchanged"] = {k: v for k, v in s.items() if k.startswith("exchanged_")}
    out["cut"] = s.get("cut")
    out["round_trips"] = s["round_trips"]
    if keep:
        out["results"] = _results(res)
    return out


def _child(args: list[str], timeout: float, script: str = __file__) -> dict[str, Any]:
    """Run ``script`` (this benchmark, or another that uses it) with ``args`` in a fresh process; its JSON line."""
    env = dict(os.environ, PERFLOW_JIT="compile")
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=timeout, env=env)
    if p.returncode:
        raise RuntimeError(f"{' '.join(args)} failed:\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _same(a: Any, b: Any, path: str = "") -> list[str]:
    """Differences between two JSON-able results (floats to a relative 1e-9)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{path}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in _same(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _same(x, y, f"{path}[{i}]")][:5]
    if isinstance(a, float) and isinstance(b, float):
        ok = a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300) or (a != a and b != b)
        return [] if ok else [f"{path}: {a!r} vs {b!r}"]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=float, default=2e7, help="approximate number of events (default 2e7)")
    ap.add_argument("--ranks", type=int, default=64, help="MPI ranks (default 64)")
    ap.add_argument("--trace", help="archive directory (written when absent)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to run (default 1 2)")
    ap.add_argument("--memory", type=float, default=8e9, help="memory shared by the workers, bytes (default 8e9)")
    ap.add_argument("--no-local", action="store_true", help="skip the local engine")
    ap.add_argument("--check", action="store_true", help="compare the Dask results with the local engine's")
    ap.add_argument("--smoke", action="store_true", help="a small trace on 2 workers, results checked")
    ap.add_argument("--timeout", type=float, default=7200)
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        kind, path, warm, keep = a.child[0], a.child[1], a.child[2], a.child[3] == "1"
        if kind == "local":
            print(json.dumps(local_child(path, warm, keep)))
        else:
            print(json.dumps(dask_child(path, warm, int(kind), a.memory, keep)))
        return 0
    if a.smoke:
        a.events, a.ranks, a.workers, a.check, a.memory = 2e5, 8, [2], True, 4e9
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    path = Path(a.trace or os.path.join(tempfile.gettempdir(), f"perflow-bench-dask-{a.events:.0e}-{a.ranks}"))
    make(path, a.events, a.ranks)
    warm = Path(tempfile.gettempdir()) / "perflow-bench-dask-warm"
    make(warm, 1e5, 8)
    keep = "1" if a.check else "0"
    local = None if a.no_local and not a.check else _child(["--child", "local", str(path), str(warm), keep], a.timeout)
    res: dict[int, dict[str, Any]] = {}
    for w in a.workers:
        res[w] = _child(["--memory", str(a.memory), "--child", str(w), str(path), str(warm), keep], a.timeout)
        r = res[w]
        print(f"(done: {w} worker(s), wall {sum(r['times'].values()):.1f} s, workers' CPU {sum(r['worker_cpu']):.1f} s, "
              f"client CPU {r['client_cpu']:.1f} s; {r['times']})", flush=True)  # fmt: skip
    n = (local or next(iter(res.values())))["events"]
    if local:
        tot = sum(local["cpu"].values())
        wall = sum(local["times"].values())
        print(f"\n== local engine ({n:,} intervals): CPU {tot:.1f} s, wall {wall:.1f} s, peak RSS "
              f"{local['peak_gb']:.2f} GB")  # fmt: skip
        print("   " + ", ".join(f"{k} {v:.2f} s CPU" for k, v in local["cpu"].items()))
    for w, r in res.items():
        total = sum(r["times"].values())
        print(f"\n== Dask, {w} worker(s), memory limit {r['limit_gb']:.1f} GB each: wall {total:.1f} s "
              f"(x{w} cores = {total * w:.1f} core-s), workers' CPU {sum(r['worker_cpu']):.1f} s, "
              f"client CPU {r['client_cpu']:.1f} s")  # fmt: skip
        print("   " + ", ".join(f"{k} {v:.2f} s" for k, v in r["times"].items()))
        print("   phases: " + ", ".join(f"{k} {v} s" for k, v in r["phases"].items()))
        print("   analyses: " + ", ".join(f"{k[9:]} {v} s" for k, v in r["forms"].items()))
        print(f"   peak RSS per worker: {', '.join(f'{x:.2f} GB' for x in r['peak_gb'])}; client "
              f"{r['client_peak_gb']:.2f} GB; gathered to the client: {r['gathered'] or 'nothing'}; "
              f"exchanged {r['exchanged']}; the client waited {r['round_trips']} times")  # fmt: skip
        if local:
            print(f"   time per core / local CPU: {total * w / tot:.2f}  (target 1.3)")
    if 1 in res and 2 in res:
        t1, t2 = sum(res[1]["times"].values()), sum(res[2]["times"].values())
        print(f"\n== scaling: 1 worker {t1:.1f} s, 2 workers {t2:.1f} s, speed-up {t1 / t2:.2f}")
    bad = 0
    if a.check and local:
        for w, r in res.items():
            diff = _same(local["results"], r["results"])
            print(f"results of {w} worker(s) {'equal the local engine' if not diff else 'DIFFER: ' + '; '.join(diff)}")
            bad += bool(diff)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
