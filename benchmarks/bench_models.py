"""Benchmark: Extra-P model fitting over many call paths (default 20,000 paths x 5 scales).

Times :func:`perflow.passes.models.fit_models` on synthetic measurements
whose true models are drawn from the PMNF building blocks (with 2 % noise):
the default hypothesis set (56 terms), with the shrinking terms of strong
scaling (74), and two-term models (1,540 pairs); then the whole
``scaling_models`` pass and the ``non_scalable_paths`` pass on synthetic
profile runs with as many call paths (alignment of the runs included).
Prints one line per case with the time, the time per call path, the share
of paths whose model has the true leading term, and the peak RSS.

    python benchmarks/bench_models.py
    python benchmarks/bench_models.py --paths 5000 --scales 7 --repeat 1 --no-two-terms
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

import perflow
from perflow.passes.models import _term_values, building_blocks, fit_models
from perflow.passes.scalability_models import scaling_models
from perflow.passes.scalability_scalana import non_scalable_paths


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    out = fn()  # warm-up (imports, caches)
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def measurements(n_paths: int, scales: np.ndarray, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``c0 + c1 t(p)`` with a random building block ``t`` per path, times log-normal noise; and the true blocks."""
    rng = np.random.default_rng(seed)
    blocks = building_blocks(negative=True)
    pick = rng.integers(0, len(blocks), n_paths)
    T = _term_values(scales, blocks)[pick]
    c0 = rng.uniform(0.1, 10.0, n_paths)
    c1 = 4 * c0 / np.abs(T).max(axis=1)  # the term reaches 4x the constant over the range
    Y = (c0[:, None] + c1[:, None] * T) * rng.lognormal(0.0, noise, T.shape)
    return Y, blocks[pick]


def profile_runs(n_paths: int, scales: np.ndarray, Y: np.ndarray) -> list[perflow.PAG]:
    """One flat profile per scale: ``main`` with ``n_paths`` children whose time (on one process) is a column of Y."""
    runs = []
    for j, P in enumerate(scales):
        n = n_paths + 1
        vertices = pd.DataFrame(
            {
                "name": ["main"] + [f"f{i}" for i in range(n_paths)],
                "parent": np.r_[-1, np.zeros(n_paths, dtype=np.int64)],
            }
        )
        metrics = pd.DataFrame(
            {
                "vertex": np.arange(n),
                "process": 0,
                "thread": 0,
                "time_exc": np.r_[0.0, Y[:, j]],
            }
        )
        runs.append(perflow.PAG.from_frames(vertices, metrics, attrs={"nprocs": float(P)}))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--paths", type=int, default=20000)
    ap.add_argument("--scales", type=int, default=5, help="process counts 2, 4, 8, ... (powers of two)")
    ap.add_argument("--noise", type=float, default=0.02)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-two-terms", action="store_true", help="skip the (slow) two-term search")
    args = ap.parse_args()
    scales = 2.0 ** np.arange(1, args.scales + 1)
    Y, true = measurements(args.paths, scales, args.noise, seed=0)
    print(f"{args.paths} call paths x {args.scales} scales ({scales.astype(int).tolist()}), noise {args.noise:g}")
    cases = [
        ("fit_models, PMNF terms (56)", dict(negative=False), True),
        ("fit_models, + shrinking terms (74)", dict(negative=True), True),
    ]
    if not args.no_two_terms:
        cases.append(("fit_models, two terms (74 + 2,701 pairs)", dict(negative=True, max_terms=2), False))
    for label, kw, check in cases:
        t, m = timed(lambda kw=kw: fit_models(scales, Y, **kw), 1 if kw.get("max_terms") == 2 else args.repeat)
        hit = (m.expo[:, 0, 0] == true).all(axis=1).mean()
        extra = f"true term found {hit:6.1%}" if check else ""
        print(
            f"  {label:<44} {t:8.3f} s  {1e6 * t / args.paths:7.1f} us/path  peak RSS {rss_mb():6.0f} MB  {extra}",
            flush=True,
        )
    runs = profile_runs(args.paths, scales, Y)
    for label, fn in (
        ("scaling_models pass (5 PAGs, alignment included)", lambda: scaling_models(runs, negative=True)),
        ("non_scalable_paths pass (models + losses)", lambda: non_scalable_paths(runs)),
    ):
        t, _ = timed(fn, args.repeat)
        print(
            f"  {label:<44} {t:8.3f} s  {1e6 * t / args.paths:7.1f} us/path  peak RSS {rss_mb():6.0f} MB",
            flush=True,
        )


if __name__ == "__main__":
    main()
