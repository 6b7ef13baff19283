"""Benchmark of the Dask engine: a 100-million-event OTF2 trace analysed on a LocalCluster of 1 and 2 workers.

The trace is written to disk in chunks by ``benchmarks/make_otf2_trace.py``
(the OTF2 C writer, per location, 2048 iterations at a time, so memory stays
bounded): 64 ranks, a ring halo exchange, partner Send/Recv, an Allreduce and
a row Bcast per iteration. Then, for each worker count, a LocalCluster of
single-threaded worker processes sharing ``--memory`` (default 24 GB):

1. ``Engine.load``: traffic pass over a prefix of every location, affinity
   partitioning, per-worker OTF2 decoding, scan, global numbering,
   finalisation, boundary exchange and message matching, metrics, collective
   waits (each phase timed);
2. the distributed analyses: imbalance of exclusive time, communication
   matrix, wait states per vertex, per-vertex sums.

It prints events/s overall and per worker, each worker's peak RSS, and the
speed-up from 1 to 2 workers. A small trace is loaded first on every
cluster so that compiling/loading the numba kernels is not timed.

Usage::

    python benchmarks/bench_dask.py                       # 1e8 events, workers 1 and 2
    python benchmarks/bench_dask.py --events 2e7 --workers 2 --trace /tmp/t20M
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _rss() -> float:
    import psutil

    return psutil.Process(os.getpid()).memory_info().rss / 1e9


class PeakRSS:
    """Poll every worker's RSS in a background thread; keep the maxima."""

    def __init__(self, client, every: float = 0.5) -> None:  # type: ignore[no-untyped-def]
        self.client, self.every, self.peak, self._stop = client, every, {}, False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                for k, v in self.client.run(_rss).items():
                    self.peak[k] = max(self.peak.get(k, 0.0), v)
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
        print(f"trace: reusing {path}")
        return
    t = time.perf_counter()
    make_trace(str(path), events, ranks)
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    print(f"trace: wrote {path} ({size / 1e9:.2f} GB) in {time.perf_counter() - t:.1f} s")


def run(path: Path, workers: int, memory: float, warm: Path) -> dict[str, float]:
    from perflow.dask import Engine

    limit = int(memory / workers)
    with Engine(n_workers=workers, threads_per_worker=1, memory_limit=limit) as eng:
        eng.load(warm).imbalance()  # loads the compiled kernels in every worker
        mon = PeakRSS(eng.client)
        t0 = time.perf_counter()
        dt = eng.load(path)
        t1 = time.perf_counter()
        imb = dt.imbalance("time_exc")
        cm = dt.comm_matrix("bytes")
        wv = dt.wait_by_vertex()
        prof = dt.profile(["time_exc", "visits"])
        t2 = time.perf_counter()
        peak = mon.stop()
        s = dt.summary()
    n = s["events"]
    print(f"\n== {workers} worker(s), memory limit {limit / 1e9:.1f} GB each")
    print(f"events {n:,}; partitions {s['parts']}, cut {s['cut']:.0f} of {dt.partitioning.total_comm:.0f} "
          f"(scouted), balance {s['imbalance']:.3f}, exchanged send records {s['exchanged_send_records']:,}")  # fmt: skip
    print("phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in s["timings"].items()))
    print(f"load {t1 - t0:.1f} s, analyses {t2 - t1:.1f} s, total {t2 - t0:.1f} s")
    tot = t2 - t0
    print(f"throughput {n / tot / 1e6:.2f} M events/s, {n / tot / workers / 1e6:.2f} M events/s per worker")
    print("peak RSS per worker: " + ", ".join(f"{v:.2f} GB" for v in peak.values()))
    top = imb.iloc[0]
    print(f"check: worst imbalance {top['name']} ({top['imbalance_time']:.4g} s), "
          f"{int((cm.to_numpy() > 0).sum())} communicating pairs, "
          f"Late Sender {wv['late_sender'].sum():.4g} s, collective wait {wv['collective_wait'].sum():.4g} s, "
          f"{len(prof)} vertices")  # fmt: skip
    return {"total": tot, "load": t1 - t0, "events": n, "peak": max(peak.values(), default=0.0)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=float, default=1e8, help="approximate number of events (default 1e8)")
    ap.add_argument("--ranks", type=int, default=64, help="MPI ranks (default 64)")
    ap.add_argument("--trace", default=os.path.join(tempfile.gettempdir(), "perflow-bench-dask"),
                    help="archive directory (written when absent)")  # fmt: skip
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to run (default 1 2)")
    ap.add_argument("--memory", type=float, default=24e9, help="memory shared by the workers, bytes (default 24e9)")
    a = ap.parse_args(argv)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    path = Path(a.trace)
    make(path, a.events, a.ranks)
    warm = Path(tempfile.mkdtemp()) / "warm"
    make(warm, 2e5, 8)
    res = {w: run(path, w, a.memory, warm) for w in a.workers}
    if 1 in res and len(res) > 1:
        print("\n== scaling")
        for w, r in res.items():
            sp = res[1]["total"] / r["total"]
            print(f"{w} worker(s): {r['total']:.1f} s, speed-up {sp:.2f}, efficiency {sp / w:.2f}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
