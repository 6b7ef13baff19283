"""Benchmark: the profile/trace readers and the Chrome writer.

Times every shared sample (``../shared/data``, when present), then a Chrome
trace round trip of a synthetic run (``--procs`` x ``--iterations``), then a
cProfile file whose call graph is a full mesh (``--mesh`` functions each
calling every other one, one shared edge tuple as some writers emit: 14 MB
for 1,200 functions), and prints events/s, CPU seconds and peak resident
memory.

    python benchmarks/bench_readers.py
    python benchmarks/bench_readers.py --procs 32 --iterations 4000 --mesh 1200
"""

from __future__ import annotations

import argparse
import marshal
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


def full_mesh_pstats(path: Path, n: int) -> None:
    """A pstats file of ``n`` functions, each called by every other (one shared edge tuple)."""
    funcs = [(f"mod{i % 37}.py", 10 + i, f"f{i}") for i in range(n)]
    edge = (2, 2, 1e-4, 1e-3)
    stats = {
        g: (2 * (n - 1), 2 * (n - 1), 0.01, 1.0 + j * 1e-3, {f: edge for f in funcs if f != g})
        for j, g in enumerate(funcs)
    }
    path.write_bytes(marshal.dumps(stats))


def mesh(n: int) -> None:
    import logging

    logging.getLogger("perflow").setLevel(logging.ERROR)  # the truncation warning is expected
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "mesh.pstats"
        full_mesh_pstats(f, n)
        c, t = time.process_time(), time.perf_counter()
        pag = perflow.read(f, format="cprofile")
        cpu, wall = time.process_time() - c, time.perf_counter() - t
        print(f"cProfile full mesh of {n:,} functions ({f.stat().st_size / 1e6:.1f} MB, {n * (n - 1):,} edges): "
              f"{cpu:.2f} s CPU, {wall:.2f} s wall, {pag.n_vertices:,} vertices")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=int, default=16)
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--mesh", type=int, default=1200, help="functions of the full-mesh cProfile file (0: skip)")
    ap.add_argument("--mesh-only", action="store_true", help="only the full-mesh cProfile figure")
    args = ap.parse_args()
    if args.mesh:
        mesh(args.mesh)
        if args.mesh_only:
            return
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
