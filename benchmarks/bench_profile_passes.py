"""Benchmark: the profile-analysis passes on a synthetic profile (default 20,000 vertices x 64 processes).

Times every pass of the profile library (best of ``--repeat`` runs, after one
warm-up run that also fills the PAG's lazy caches: call paths, parallel-view
edge table), the communication and trace passes on a synthetic trace, and,
when llnl-hatchet is installed, hatchet's figures for the same operations on
the same data: aggregation across ranks, filter + squash, and a call-path
query. Prints one line per operation with the time and peak RSS.

**Construction** (first section; ``--construction-only`` stops after it):
the same profile (the tree, and per-(vertex, rank) exclusive and inclusive
time) built by perflow and by hatchet, CPU seconds, best of ``--repeat``,
with the ratio to hatchet's: perflow from tables (``PAG.from_frames``), from
tables with only exclusive time (inclusive derived), from a literal
(``PAG.from_literal``, one value per rank); hatchet's GraphFrame from its
literal tree and a per-(node, rank) DataFrame, and with only exclusive time
(``update_inclusive_columns``).

    python benchmarks/bench_profile_passes.py
    python benchmarks/bench_profile_passes.py --construction-only
    python benchmarks/bench_profile_passes.py --vertices 5000 --procs 32 --repeat 1 --no-hatchet
"""

from __future__ import annotations

import argparse
import resource
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

import perflow
from perflow.passes.backtrack import backtrack
from perflow.passes.breakdown import breakdown
from perflow.passes.comm import comm_matrix, comm_over_time, comm_pattern, comm_summary, message_sizes
from perflow.passes.contention import contention, trace_contention
from perflow.passes.differential import differential
from perflow.passes.hotspot import hotspot, hotspot_set
from perflow.passes.imbalance import imbalance, imbalance_outliers, imbalanced_vertices
from perflow.passes.scalability import scalability
from perflow.passes.select import (
    backward_slice,
    descendants,
    filter_vertices,
    forward_slice,
    parallel_vertices,
    sort_vertices,
    subgraph,
    top_vertices,
)
from perflow.passes.similarity import process_similarity


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(label: str, fn: Callable[[], Any], repeat: int, note: str = "", warm: bool = True) -> float:
    if warm:
        fn()  # warm-up (and lazy caches of the PAG)
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    print(f"  {label:<46} {best:8.3f} s   peak RSS {rss_mb():7.0f} MB  {note}", flush=True)
    return best


def profile_passes(pag: perflow.PAG, other: perflow.PAG, runs: list[perflow.PAG], repeat: int) -> dict[str, float]:
    thr = float(np.quantile(pag.aggregate("time_exc").to_numpy(), 0.9))
    mpi_rows = parallel_vertices(pag, name="MPI_Wait", processes=[0])
    out: dict[str, float] = {}
    cases: list[tuple[str, Callable[[], Any]]] = [
        (
            "aggregate across ranks (mean, max)",
            lambda: (pag.aggregate("time_exc", "mean"), pag.aggregate("time_exc", "max")),
        ),
        ("filter_vertices (glob)", lambda: filter_vertices(pag, name="MPI_*")),
        ("filter_vertices (max > 1.3 mean)", lambda: filter_vertices(pag, expr="max(time_exc) > 1.3 * mean(time_exc)")),
        ("sort_vertices + top_vertices(10)", lambda: top_vertices(sort_vertices(pag, agg="max"), k=10)),
        ("filter (time > q90) + subgraph", lambda: subgraph(filter_vertices(pag, expr=f"time_exc > {thr}"))),
        ("query: MPI_* and descendants", lambda: descendants(filter_vertices(pag, regex="^MPI_"), include_self=True)),
        ("backward_slice (MPI_Wait on rank 0)", lambda: backward_slice(mpi_rows)),
        ("forward_slice (MPI_Wait on rank 0)", lambda: forward_slice(mpi_rows)),
        ("hotspot (exclusive, sum)", lambda: hotspot(pag)),
        ("hotspot (inclusive, max)", lambda: hotspot(pag, mode="inclusive", agg="max")),
        ("hotspot_set", lambda: hotspot_set(pag, k=20)),
        ("imbalance (all vertices)", lambda: imbalance(pag)),
        ("imbalanced_vertices", lambda: imbalanced_vertices(pag)),
        ("imbalance_outliers", lambda: imbalance_outliers(pag)),
        ("breakdown (per process)", lambda: breakdown(pag)),
        ("breakdown (per vertex and process)", lambda: breakdown(pag, by="vertex_process")),
        ("differential (two runs)", lambda: differential(pag, other)),
        (f"scalability ({len(runs)} runs)", lambda: scalability(runs, all_vertices=True)),
        (f"contention ({len(runs)} runs)", lambda: contention(runs, all_vertices=True)),
        ("backtrack (profile, 3 symptoms)", lambda: backtrack(pag)),
        ("process_similarity", lambda: process_similarity(pag)),
    ]
    for label, fn in cases:
        out[label] = timed(label, fn, repeat)
    return out


def trace_passes(tr: perflow.PAG, repeat: int) -> None:
    for label, fn in [
        ("comm_matrix (bytes, with collectives)", lambda: comm_matrix(tr, collectives=True)),
        ("comm_pattern", lambda: comm_pattern(tr)),
        ("message_sizes", lambda: message_sizes(tr)),
        ("comm_over_time (100 bins)", lambda: comm_over_time(tr, bins=100)),
        ("comm_summary", lambda: comm_summary(tr)),
        ("breakdown with waiting time", lambda: breakdown(tr)),
        ("backtrack (trace)", lambda: backtrack(tr)),
        ("trace_contention", lambda: trace_contention(tr, all_vertices=True)),
    ]:
        timed(label, fn, repeat)


# ---------------------------------------------------------------------- hatchet
def hatchet_graphframe(pag: perflow.PAG) -> Any:
    """The same profile as a hatchet GraphFrame with one row per (node, rank)."""
    import hatchet as ht

    vt = pag.vertex_table
    names = vt["name"].astype(str).tolist()
    kinds = vt["kind"].astype(str).tolist()
    nodes: list[dict[str, Any]] = [
        {"frame": {"name": n, "type": k, "vid": i}, "metrics": {"time": 0.0, "time (inc)": 0.0}}
        for i, (n, k) in enumerate(zip(names, kinds))
    ]
    roots = []
    for i, p in enumerate(vt["parent"].tolist()):
        (roots if p < 0 else nodes[p].setdefault("children", [])).append(nodes[i])
    gf = ht.GraphFrame.from_literal(roots)
    by_vid = {n.frame["vid"]: n for n in gf.graph.traverse()}
    vf = pag.parallel.vertex_frame
    node_col = np.empty(len(vf), dtype=object)
    node_col[:] = [by_vid[v] for v in vf["vertex"].tolist()]
    idx = pd.MultiIndex.from_arrays(
        [node_col, vf["rank"] if "rank" in vf else vf["process"].to_numpy()], names=["node", "rank"]
    )
    m = pag.metrics
    df = pd.DataFrame(
        {
            "time": m["time_exc"].to_numpy(),
            "time (inc)": m["time_inc"].to_numpy(),
            "name": np.asarray(names, dtype=object)[vf["vertex"].to_numpy()],
        },
        index=idx,
    )
    return ht.GraphFrame(gf.graph, df, exc_metrics=["time"], inc_metrics=["time (inc)"], default_metric="time")


def hatchet_ops(pag: perflow.PAG) -> None:
    """Hatchet's operations, each timed once (some take minutes at full size)."""
    repeat = 1
    try:
        import hatchet  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means: skip
        print(f"  llnl-hatchet not available ({type(exc).__name__}: {exc}); skipped")
        return
    warnings.simplefilter("ignore")
    try:
        t = time.perf_counter()
        gf = hatchet_graphframe(pag)
        print(f"  {'(build the per-rank GraphFrame)':<46} {time.perf_counter() - t:8.3f} s")
        thr = float(np.quantile(pag.aggregate("time_exc", "mean").to_numpy(), 0.9))
        agg = gf.deepcopy()
        agg.drop_index_levels(function=np.mean)

        def aggregate() -> None:
            g = gf.deepcopy()
            g.drop_index_levels(function=np.mean)

        timed("hatchet drop_index_levels (mean over ranks)", aggregate, repeat, "(includes a deepcopy)", warm=False)
        timed("hatchet deepcopy alone", lambda: gf.deepcopy(), repeat, warm=False)
        timed(
            "hatchet filter (time > q90) + squash",
            lambda: agg.filter(lambda r: r["time"] > thr, squash=True, num_procs=1),
            repeat,
            "(rank-aggregated frame)",
            warm=False,
        )
        # num_procs=1: hatchet's multi-process filter breaks (and hangs) with pandas 3
        timed(
            "hatchet query: MPI_* and descendants",
            lambda: agg.filter([{"name": "MPI_.*"}, "*"], squash=True, num_procs=1),
            repeat,
            "(rank-aggregated frame)",
            warm=False,
        )
    except Exception as exc:  # noqa: BLE001 - report and go on: hatchet is optional
        print(f"  hatchet failed: {type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------- construction
def _best_cpu(fn: Callable[[], Any], repeat: int) -> float:
    best = np.inf
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


#: hatchet's inclusive derivation (``update_inclusive_columns``) is timed up to this many rows only
HATCHET_INCLUSIVE_ROWS = 200_000


def construction(pag: perflow.PAG, repeat: int, with_hatchet: bool) -> None:
    """Building the same profile with perflow and with hatchet (see the module docstring)."""
    from perflow.pag.literal import complete_time_metrics, to_literal
    from perflow.pag.pag import PAG

    vt = pag.vertex_table[["name", "kind", "parent", "file", "line"]].copy()
    vt["name"], vt["kind"] = vt["name"].astype(str), vt["kind"].astype(str)
    m = pag.metrics.reset_index()
    both = m[["vertex", "process", "time_exc", "time_inc", "visits"]].copy()
    exc_only = m[["vertex", "process", "time_exc", "visits"]].copy()
    lit = to_literal(pag)
    n = len(m)
    print(f"\nconstruction of a {pag.n_vertices:,}-vertex x {pag.n_processes}-rank profile ({n:,} rows), CPU s, "
          f"best of {repeat}")  # fmt: skip
    ours = {
        "perflow from tables (PAG.from_frames)": lambda: PAG.from_frames(vt, both),
        "perflow from tables, inclusive derived": lambda: complete_time_metrics(PAG.from_frames(vt, exc_only)),
        "perflow from a literal (PAG.from_literal)": lambda: PAG.from_literal(lit),
    }
    mine = {k: _best_cpu(f, repeat) for k, f in ours.items()}
    ref: dict[str, float] = {}
    if with_hatchet:
        try:
            import hatchet  # noqa: F401

            warnings.simplefilter("ignore")
            ref["hatchet GraphFrame (literal tree + frame)"] = _best_cpu(lambda: hatchet_graphframe(pag), repeat)

            def exc() -> None:
                gf = hatchet_graphframe(pag)
                gf.dataframe["time (inc)"] = gf.dataframe["time"]
                gf.update_inclusive_columns()

            if n <= HATCHET_INCLUSIVE_ROWS:
                ref["hatchet, inclusive derived"] = _best_cpu(exc, repeat)
            else:  # update_inclusive_columns did not finish in an hour on 1.28 M rows (2 loaded cores)
                print(f"  hatchet, inclusive derived: skipped above {HATCHET_INCLUSIVE_ROWS:,} rows (over an hour)")
        except Exception as e:  # noqa: BLE001 - hatchet is optional
            print(f"  hatchet unavailable or failed ({type(e).__name__}: {e})")
    base = ref.get("hatchet GraphFrame (literal tree + frame)")
    for k, t in {**mine, **ref}.items():
        ratio = f"{t / base:6.2f}x hatchet" if base else ""
        if k == "perflow from tables, inclusive derived" and "hatchet, inclusive derived" in ref:
            ratio = f"{t / ref['hatchet, inclusive derived']:6.2f}x hatchet (inclusive derived)"
        print(f"  {k:<46} {t:8.3f} s  {ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vertices", type=int, default=20000)
    ap.add_argument("--procs", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trace-iterations", type=int, default=100)
    ap.add_argument("--no-hatchet", action="store_true")
    ap.add_argument("--construction-only", action="store_true", help="stop after the construction figures")
    a = ap.parse_args()
    t = time.perf_counter()
    pag = perflow.synthetic.profile(a.vertices, a.procs, seed=0)
    construction(pag, a.repeat, not a.no_hatchet)
    if a.construction_only:
        return
    other = perflow.synthetic.profile(a.vertices, a.procs, seed=1)
    scales = [max(a.procs // 8, 1), max(a.procs // 4, 2), max(a.procs // 2, 3), a.procs]
    runs = [perflow.synthetic.profile(a.vertices, p, seed=0) for p in scales]
    for r, p in zip(runs, scales):
        r.attrs["nprocs"] = p
    print(f"synthetic profiles built in {time.perf_counter() - t:.1f} s: {pag}")
    print(f"\nprofile passes ({a.vertices} vertices x {a.procs} processes = {len(pag.metrics):,} metric rows)")
    profile_passes(pag, other, runs, a.repeat)
    t = time.perf_counter()
    tr = perflow.synthetic.trace(nprocs=a.procs, iterations=a.trace_iterations, slow_rank=1, late_sender=0.05, seed=0)
    print(f"\ntrace passes (synthetic trace built in {time.perf_counter() - t:.1f} s: {tr})")
    trace_passes(tr, a.repeat)
    if not a.no_hatchet:
        print(f"\nllnl-hatchet on the same profile ({a.vertices} nodes x {a.procs} ranks)")
        hatchet_ops(pag)


if __name__ == "__main__":
    main()
