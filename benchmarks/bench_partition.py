"""Cross-partition traffic of the Dask engine's partitioners on synthetic communication patterns.

The Dask engine partitions a trace by whole ranks (:mod:`perflow.trace.partition`); every message whose
sender and receiver land in different partitions goes through the exchange (a boundary record to the
receiver, an acknowledgement back), and so do the wait-state, critical-path and replay records of it. This
script builds the rank-to-rank traffic of some common patterns at ``--ranks`` ranks (default 1,024), event
weights per rank (uniform, or with a few heavy ranks), and prints, for ``k`` partitions, the fraction of the
messages that cross partitions, the heaviest partition over the mean (balance) and the partitioner's time,
for the affinity partitioner against contiguous blocks and round-robin:

* ``stencil3d``: a 3-D halo exchange (6 face neighbours, periodic) on the most cubic grid of the ranks;
* ``stencil2d+diag``: a 2-D halo exchange with diagonals (8 neighbours), messages 4x heavier on faces;
* ``butterfly``: recursive doubling (partners ``r xor 2^i``), as an allreduce written with point-to-point;
* ``random``: 6 random partners per rank (no locality: a lower bound for any partitioner);
* ``ring+heavy``: a ring with 5% of the ranks carrying 4x the events (balance against locality).

Usage::

    python benchmarks/bench_partition.py                 # 1,024 ranks, k = 2..256
    python benchmarks/bench_partition.py --ranks 4096 --parts 16 64
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflow.trace.partition import partition_ranks  # noqa: E402


def _grid(n: int, dims: int) -> tuple[int, ...]:
    """The most cubic ``dims``-dimensional grid of ``n`` ranks (``n`` a product of its sides)."""
    best: tuple[int, ...] = (n,) + (1,) * (dims - 1)
    for a in range(1, n + 1):
        if n % a:
            continue
        if dims == 2:
            cand: tuple[int, ...] = (a, n // a)
        else:
            m = n // a
            b = min((b for b in range(1, m + 1) if m % b == 0), key=lambda b: abs(b - m // b))
            cand = (a, b, m // b)
        if max(cand) - min(cand) < max(best) - min(best):
            best = cand
    return best


def pattern(name: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, messages) of one pattern at ``n`` ranks, and the event weight of each rank."""
    r = np.arange(n)
    w = np.ones(n)
    if name == "stencil3d":
        X, Y, Z = _grid(n, 3)
        x, y, z = r % X, (r // X) % Y, r // (X * Y)
        dst = [((x + d) % X) + X * y + X * Y * z for d in (1, -1)]
        dst += [x + X * ((y + d) % Y) + X * Y * z for d in (1, -1)]
        dst += [x + X * y + X * Y * ((z + d) % Z) for d in (1, -1)]
        src = np.tile(r, 6)
        dst_ = np.concatenate(dst)
        m = np.full(len(src), 100.0)
    elif name == "stencil2d+diag":
        X, Y = _grid(n, 2)
        x, y = r % X, r // X
        src, dst_, m = [], [], []
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                if dx or dy:
                    src.append(r)
                    dst_.append(((x + dx) % X) + X * ((y + dy) % Y))
                    m.append(np.full(n, 400.0 if dx == 0 or dy == 0 else 100.0))
        src, dst_, m = np.concatenate(src), np.concatenate(dst_), np.concatenate(m)
    elif name == "butterfly":
        lv = int(np.log2(n))
        src = np.tile(r, lv)
        dst_ = np.concatenate([r ^ (1 << i) for i in range(lv)])
        m = np.full(len(src), 100.0)
        keep = dst_ < n
        src, dst_, m = src[keep], dst_[keep], m[keep]
    elif name == "random":
        rng = np.random.default_rng(seed)
        src = np.repeat(r, 6)
        dst_ = (src + rng.integers(1, n, len(src))) % n
        m = np.full(len(src), 100.0)
    elif name == "ring+heavy":
        src = np.r_[r, r]
        dst_ = np.r_[(r + 1) % n, (r - 1) % n]
        m = np.full(len(src), 100.0)
        rng = np.random.default_rng(seed)
        w[rng.choice(n, max(n // 20, 1), replace=False)] = 4.0
    else:
        raise ValueError(name)
    return np.asarray(src, np.int64), np.asarray(dst_, np.int64), np.asarray(m, np.float64), w * 1e5


PATTERNS = ("stencil3d", "stencil2d+diag", "butterfly", "random", "ring+heavy")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--parts", type=int, nargs="+", default=[2, 4, 8, 16, 64, 256])
    ap.add_argument("--patterns", nargs="+", default=list(PATTERNS), choices=PATTERNS)
    a = ap.parse_args(argv)
    n = a.ranks
    print(f"{n} ranks; per pattern and partitions k: messages crossing partitions (fraction of all),")
    print("heaviest partition / mean (balance), partitioning time; affinity vs block vs round-robin\n")
    print(f"{'pattern':<16}{'k':>5}  {'affinity':>22}  {'block':>15}  {'round-robin':>15}")
    for name in a.patterns:
        src, dst, m, w = pattern(name, n)
        for k in a.parts:
            row = {}
            for method in ("affinity", "block", "round_robin"):
                t = time.perf_counter()
                p = partition_ranks(np.arange(n), w, (src, dst, m), k, method=method)
                row[method] = (p.summary()["cut_fraction"], p.imbalance, time.perf_counter() - t)
            af, bl, rr = row["affinity"], row["block"], row["round_robin"]
            print(
                f"{name:<16}{k:>5}  {af[0]:>7.1%} x{af[1]:.2f} {af[2]:>5.2f} s  {bl[0]:>7.1%} x{bl[1]:.2f}  "
                f"{rr[0]:>7.1%} x{rr[1]:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
