"""Benchmark: PAG arithmetic and ensembles (default 20,000 vertices x 64 processes), against llnl-hatchet.

Two synthetic profiles of the same tree shape whose call paths partly differ
(their MPI vertices are drawn at random), so the alignment takes the union of
two trees. Times ``b - a`` (per (call path, process)), ``b.sub(a,
by="vertex")``, ``b / a`` and ``a * 2``, the difference as a table
(``differential``), an ensemble of five such runs (alignment, statistics, the
(vertex, run) frame), and, when llnl-hatchet is installed, hatchet's
``GraphFrame`` subtraction ``gf_b - gf_a`` of the same per-rank profiles in
the same process (its union of graphs included, as ours). Checks that both
give the same per-call-path totals on a small case first (hatchet keeps the
left value where the right graph lacks a node, and gives NaN where the left
lacks it; perflow's ``fill`` makes that choice explicit). Prints one line per
operation: best time of ``--repeat`` runs and peak RSS.

    python benchmarks/bench_ensemble.py
    python benchmarks/bench_ensemble.py --vertices 5000 --procs 16 --repeat 1 --no-hatchet
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
from perflow.passes.differential import differential


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(label: str, fn: Callable[[], Any], repeat: int, warm: bool = True) -> float:
    if warm:
        fn()
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    print(f"  {label:<52} {best:8.3f} s   peak RSS {rss_mb():7.0f} MB", flush=True)
    return best


def hatchet_frame(pag: perflow.PAG) -> Any:
    """The PAG as a hatchet GraphFrame indexed by (node, rank), nodes identified by name and type only."""
    import hatchet as ht
    from hatchet.frame import Frame
    from hatchet.graph import Graph
    from hatchet.node import Node

    vt = pag.vertex_table
    names, kinds = vt["name"].astype(str).tolist(), vt["kind"].astype(str).tolist()
    nodes: list[Any] = []
    roots = []
    for i, p in enumerate(vt["parent"].tolist()):
        n = Node(Frame({"name": names[i], "type": kinds[i]}), nodes[p] if p >= 0 else None)
        nodes.append(n)
        (roots.append(n) if p < 0 else nodes[p].add_child(n))
    graph = Graph(roots)
    graph.enumerate_traverse()
    m = pag.metrics.reset_index()
    col = np.empty(len(m), dtype=object)
    col[:] = [nodes[v] for v in m["vertex"].tolist()]
    df = pd.DataFrame(
        {
            "time": m["time_exc"].to_numpy(),
            "time (inc)": m["time_inc"].to_numpy(),
            "name": np.asarray(names)[m["vertex"]],
        },
        index=pd.MultiIndex.from_arrays([col, m["process"].to_numpy()], names=["node", "rank"]),
    )
    return ht.GraphFrame(graph, df, exc_metrics=["time"], inc_metrics=["time (inc)"], default_metric="time")


def path_totals_hatchet(gf: Any) -> pd.Series:
    """Per call path, the sum of ``time`` over ranks (NaN when every value is: a node of one graph only)."""
    df = gf.dataframe.reset_index()
    paths = {n: "/".join(str(f.frame["name"]) for f in n.path()) for n in gf.graph.traverse()}
    return df.assign(path=df["node"].map(paths)).groupby("path")["time"].sum(min_count=1)


def cross_check() -> None:
    """hatchet and perflow agree on b - a per call path (small profiles); how each treats one-sided paths.

    hatchet keeps siblings of the same name apart where perflow adds them up
    (one call path): call paths under such siblings are left out here.
    """
    a = perflow.synthetic.profile(300, 4, seed=0)
    b = perflow.synthetic.profile(300, 4, seed=1)
    d = b - a
    ours = pd.Series(d.aggregate("time_exc").to_numpy(), index=d.call_paths().to_numpy())
    status = pd.Series(d.vertex_table["status"].to_numpy(), index=ours.index)
    dup = set()
    for p in (a, b):
        cp = p.call_paths()
        dup |= set(cp[cp.duplicated()])
    keep = [x for x in ours.index if not any(x == q or x.startswith(q + "/") for q in dup)]
    theirs = path_totals_hatchet(hatchet_frame(b) - hatchet_frame(a)).reindex(keep)
    ours, status = ours.reindex(keep), status.reindex(keep)
    both, only_b, only_a = (status == "both"), (status == "only_left"), (status == "only_right")
    err = float(np.abs(ours[both | only_b] - theirs[both | only_b]).max())
    print(
        f"  cross-check on 300 vertices x 4 ranks, {len(keep)} call paths: {int(both.sum())} in both and "
        f"{int(only_b.sum())} in b only agree (largest difference {err:.1e} s); of the {int(only_a.sum())} in a only, "
        f"hatchet gives {int(theirs[only_a].isna().sum())} NaN, perflow -a (fill=0) or NaN (fill=nan), as chosen"
    )
    if err > 1e-9 or not theirs[only_a].isna().all():
        raise SystemExit("perflow and hatchet disagree on b - a")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vertices", type=int, default=20000)
    ap.add_argument("--procs", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-hatchet", action="store_true")
    a = ap.parse_args()
    t = time.perf_counter()
    pa = perflow.synthetic.profile(a.vertices, a.procs, seed=0)
    pb = perflow.synthetic.profile(a.vertices, a.procs, seed=1)
    print(f"synthetic profiles built in {time.perf_counter() - t:.1f} s: {pa}")
    u = len(set(pa.call_paths()) | set(pb.call_paths()))
    print(
        f"\nPAG arithmetic ({a.vertices} vertices x {a.procs} processes = {len(pa.metrics):,} rows each; union {u:,} paths)"
    )
    timed("b - a (per call path, process, thread)", lambda: pb - pa, a.repeat)
    timed("b.sub(a, by='vertex') (sums over processes first)", lambda: pb.sub(pa, by="vertex"), a.repeat)
    timed("b / a", lambda: pb / pa, a.repeat)
    timed("a * 2", lambda: pa * 2, a.repeat)
    timed("a + 1 (every (vertex, process) row)", lambda: pa + 1, a.repeat)
    timed("differential(a, b) (the table)", lambda: differential(pa, pb), a.repeat)
    runs = [perflow.synthetic.profile(a.vertices, a.procs, seed=s) for s in range(a.runs)]
    print(f"\nensemble of {a.runs} such runs")
    timed("Ensemble(runs) + alignment", lambda: perflow.Ensemble(runs).alignment, a.repeat, warm=False)
    ens = perflow.Ensemble(runs)
    _ = ens.alignment  # built once, as a session would
    timed("ens.stats('time_exc', 'sum')", lambda: ens.stats("time_exc", "sum"), a.repeat)
    timed("ens.frame() ((vertex, run) view, 3 metrics)", lambda: ens.frame(), a.repeat)
    if a.no_hatchet:
        return
    try:
        import hatchet  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - optional
        print(f"\nllnl-hatchet not available ({type(exc).__name__}: {exc}); skipped")
        return
    warnings.simplefilter("ignore")
    print(f"\nllnl-hatchet {hatchet.__version__} on the same profiles (GraphFrames indexed by (node, rank))")
    cross_check()
    t = time.perf_counter()
    ga, gb = hatchet_frame(pa), hatchet_frame(pb)
    print(f"  {'(build both GraphFrames)':<52} {time.perf_counter() - t:8.3f} s")
    timed("hatchet gf_b - gf_a (union of graphs included)", lambda: gb - ga, 1, warm=False)


if __name__ == "__main__":
    main()
