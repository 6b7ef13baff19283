"""Benchmark: call-path queries on a large profile, perflow against llnl-hatchet in the same run.

Builds a profile PAG (default 20,000 vertices x 64 processes), the same data
as Hatchet GraphFrames (one row per node and rank, and one row per node with
the metrics summed), and times a few queries of both dialects with perflow
(``pag.query``, ``agg="any"`` and ``"sum"``) and with Hatchet's query engine
(``multi_index_mode="any"`` on the per-rank frame, ``"off"`` on the summed
one). Asserts both select the same vertices; prints seconds and speed-ups.

    python benchmarks/bench_query.py
    python benchmarks/bench_query.py --vertices 2000 --procs 8 --no-per-rank
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from perflow import PAG
from perflow.pag.columns import per_location
from perflow.pag.frames import make_metrics

QUERIES = [
    'MATCH (".", p)->("*") WHERE p."name" STARTS WITH "MPI_"',
    'MATCH ("*")->(".", p)->("+", q) WHERE p."time (inc)" > 0.05 AND q."name" =~ "solve_[0-4]"',
    [(".", {"name": "main"}), "*", (".", {"name": "kernel_.*", "time": ">= 0.002"})],
    'MATCH (".", p)->(2)->(".", r) WHERE p."name" ENDS WITH "_7" AND r."time" < 1e-4 OR r IS LEAF',
]


def build(nv: int, np_: int, seed: int = 3) -> PAG:
    rng = np.random.default_rng(seed)
    parent = np.r_[-1, (rng.random(nv - 1) * np.arange(1, nv)).astype(np.int64)]  # a random recursive tree
    pool = np.array([f"solve_{i}" for i in range(20)] + [f"kernel_{i}" for i in range(30)] + ["MPI_Allreduce",
                    "MPI_Send", "MPI_Recv", "MPI_Wait"], dtype=object)  # fmt: skip
    names = pool[rng.integers(0, len(pool), nv)]
    names[0] = "main"
    n = nv * np_
    exc = np.repeat(rng.lognormal(-9, 1.5, nv), np_) * (0.5 + rng.random(n))
    vertex = np.repeat(np.arange(nv, dtype=np.int64), np_)
    process = np.tile(np.arange(np_, dtype=np.int64), nv)
    m = make_metrics(vertex, process, None, {"time_exc": exc}, n_vertices=nv)
    from perflow.pag.literal import complete_time_metrics

    return complete_time_metrics(PAG(pd.DataFrame({"name": names, "parent": parent}), m, attrs={"source": "bench"}))


def graphframes(pag: PAG, per_rank: bool):  # noqa: ANN201
    import hatchet as ht
    from hatchet.frame import Frame
    from hatchet.graph import Graph
    from hatchet.node import Node

    vt = pag.vertex_table
    parent, depth = vt["parent"].to_numpy(), vt["depth"].to_numpy()
    names = vt["name"].astype(str).tolist()
    nodes = [Node(Frame({"name": names[i]}), None, hnid=i, depth=int(depth[i])) for i in range(len(vt))]
    for i, p in enumerate(parent.tolist()):
        if p >= 0:
            nodes[i].parents.append(nodes[p])
            nodes[p].children.append(nodes[i])
    graph = Graph([nodes[i] for i in np.flatnonzero(parent < 0)])
    cols = {"time": "time_exc", "time (inc)": "time_inc"}
    if per_rank:
        L = len(pag.locations)
        df = pd.DataFrame({"node": np.repeat(np.array(nodes, dtype=object), L), "rank": np.tile(np.arange(L), len(nodes)),
                           "name": np.repeat(np.array(names, dtype=object), L),
                           **{h: per_location(pag, m).ravel() for h, m in cols.items()}}).set_index(["node", "rank"])  # fmt: skip
    else:
        df = pd.DataFrame({"node": nodes, "name": names, **{h: pag.aggregate(m).to_numpy() for h, m in cols.items()}})
        df = df.set_index("node")
    return ht.GraphFrame(graph, df, exc_metrics=["time"], inc_metrics=["time (inc)"])


def hatchet_query(gf, q, mode: str) -> np.ndarray:  # noqa: ANN001
    from hatchet.query import ObjectQuery, QueryEngine, parse_string_dialect

    query = ObjectQuery(q, mode) if isinstance(q, list) else parse_string_dialect(q, mode)
    return np.array(sorted(n._hatchet_nid for n in QueryEngine().apply(query, gf.graph, gf.dataframe)), dtype=np.int64)


def timed(fn):  # noqa: ANN001, ANN201
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vertices", type=int, default=20_000)
    ap.add_argument("--procs", type=int, default=64)
    ap.add_argument("--no-per-rank", action="store_true", help="skip Hatchet's per-rank frame (the slow one)")
    a = ap.parse_args()
    warnings.simplefilter("ignore")

    t, pag = timed(lambda: build(a.vertices, a.procs))
    print(
        f"PAG: {a.vertices:,} vertices x {a.procs} processes, depth {int(pag.tree_index.depth.max())} (built in {t:.1f} s)"
    )
    frames = {"off": graphframes(pag, per_rank=False)}
    if not a.no_per_rank:
        t, frames["any"] = timed(lambda: graphframes(pag, per_rank=True))
        print(f"Hatchet per-rank GraphFrame: {len(frames['any'].dataframe):,} rows (built in {t:.1f} s)")
    print(f"\n{'query':<100} {'mode':>5} {'perflow':>9} {'hatchet':>9} {'speed-up':>9} {'matched':>8}")
    for q in QUERIES:
        for mode, agg in (("off", "sum"), ("any", "any")):
            if mode not in frames:
                continue
            tp, mine = timed(lambda q=q, agg=agg: pag.query(q, agg=agg).ids)
            th, theirs = timed(lambda q=q, mode=mode: hatchet_query(frames[mode], q, mode))
            assert np.array_equal(mine, theirs), (q, mode)
            label = str(q)[:100]
            print(f"{label:<100} {agg:>5} {tp:8.3f}s {th:8.2f}s {th / tp:8.0f}x {len(mine):8,}", flush=True)


if __name__ == "__main__":
    main()
