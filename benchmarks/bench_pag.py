"""Benchmark: a large profile PAG (default 100,000 vertices x 1,024 processes, ~100 M metric cells).

Builds the PAG, then times filter, sort_by and aggregation across processes,
save and load, and prints peak resident memory.

    python benchmarks/bench_pag.py                      # the full size (needs ~10 GB)
    python benchmarks/bench_pag.py --vertices 10000 --procs 256
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from perflow import PAG, load
from perflow.pag.frames import make_metrics


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


class Timer:
    def __init__(self, label: str, rows: int | None = None) -> None:
        self.label, self.rows = label, rows

    def __enter__(self) -> Timer:
        self.t = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        dt = time.perf_counter() - self.t
        rate = f"  {self.rows / dt / 1e6:8.1f} M rows/s" if self.rows else ""
        print(f"{self.label:<42} {dt:8.3f} s{rate}   peak RSS {rss_gb():6.2f} GB", flush=True)


def inputs(nv: int, np_: int, seed: int) -> tuple[pd.DataFrame, tuple]:
    rng = np.random.default_rng(seed)
    parent = np.r_[-1, (np.arange(1, nv) - 1) // 8]
    names = np.char.add("func_", (np.arange(nv) % 5000).astype(str)).astype(object)
    mpi = rng.random(nv) < 0.05
    names[mpi] = "MPI_Allreduce"
    vt = pd.DataFrame({"name": names, "parent": parent, "kind": np.where(mpi, "mpi", "function")})
    n = nv * np_
    vertex = np.repeat(np.arange(nv, dtype=np.int64), np_)
    process = np.tile(np.arange(np_, dtype=np.int64), nv)
    base = rng.lognormal(-6, 1.0, nv)
    exc = np.repeat(base, np_) * (1.0 + 0.2 * rng.random(n))
    inc = exc * 1.5
    visits = np.repeat(rng.integers(1, 1000, nv).astype(np.float64), np_)
    return vt, (vertex, process, {"time_inc": inc, "time_exc": exc, "visits": visits})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vertices", type=int, default=100_000)
    ap.add_argument("--procs", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", default=None, help="where to save (default: a temporary directory)")
    a = ap.parse_args()
    rows = a.vertices * a.procs
    print(f"PAG of {a.vertices:,} vertices x {a.procs:,} processes = {rows:,} metric rows (3 metrics)")
    with Timer("generate input arrays (not perflow)", rows):
        vt, (vertex, process, cols) = inputs(a.vertices, a.procs, a.seed)
    with Timer("build PAG (metrics index + vertex table)", rows):
        pag = PAG(vt, make_metrics(vertex, process, None, cols, n_vertices=a.vertices), attrs={"source": "bench"})
    del vertex, process, cols
    print(f"  metrics table: {pag.metrics.memory_usage(deep=False).sum() / 1e9:.2f} GB")
    with Timer("aggregate time_exc sum", rows):
        pag.aggregate("time_exc", "sum")
    for agg in ("mean", "max", "min", "std"):
        with Timer(f"aggregate time_exc {agg}", rows):
            pag.aggregate("time_exc", agg)
    with Timer("filter(name='MPI_*')"):
        mpi = pag.vertices.filter(name="MPI_*")
    print(f"  -> {len(mpi)} vertices")
    with Timer("filter('max(time_exc) > 1.15*mean(time_exc)')", rows):
        imb = pag.vertices.filter("max(time_exc) > 1.15 * mean(time_exc)")
    print(f"  -> {len(imb)} vertices")
    with Timer("sort_by(time_exc, agg=max).top(20)", rows):
        pag.vertices.sort_by("time_exc", agg="max").top(20)
    with Timer("descendants of 100 vertices"):
        pag.vertices.head(100).descendants()
    tmp = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="perflow-bench-"))
    path = tmp / "big.pag"
    with Timer("save (Parquet, snappy)", rows):
        pag.save(path)
    size = sum(f.stat().st_size for f in path.iterdir())
    print(f"  on disk: {size / 1e9:.2f} GB")
    del pag, mpi, imb
    with Timer("load", rows):
        back = load(path)
    with Timer("aggregate after load (sum)", rows):
        back.aggregate("time_exc", "sum")
    if not a.dir:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"peak RSS {rss_gb():.2f} GB")


if __name__ == "__main__":
    main()
