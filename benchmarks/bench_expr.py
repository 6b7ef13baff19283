"""Benchmark: metric/filter expressions, perflow's safe evaluator against the former pandas path.

Builds a profile PAG (default 200,000 vertices x 64 processes, 12.8 M metric
rows) and times ``pag.vertices.filter(expr)`` for a few expressions, next to
the former implementation (the referenced columns gathered into a DataFrame,
then ``DataFrame.eval(engine="python")``) on the same PAG. Then times the bare
evaluation of one expression over 10 M-row columns both ways. Prints figures;
asserts the two give the same vertices.

    python benchmarks/bench_expr.py
    python benchmarks/bench_expr.py --vertices 20000 --procs 16 --rows 1000000
"""

from __future__ import annotations

import argparse
import re
import time

import numpy as np
import pandas as pd

from perflow import PAG
from perflow.pag.columns import VertexColumns
from perflow.pag.expr_eval import eval_mask, text_of
from perflow.pag.frames import make_metrics

EXPRS = [
    "time_exc > 0.5",
    "max(time_exc) > 1.3 * mean(time_exc)",
    "name == 'MPI_Allreduce' and time_inc > 2 * time_exc",
    "(time_exc > 0.2 | visits < 100) & ~(depth < 3)",
    "sqrt(abs(time_inc - time_exc)) / (visits + 1) > 1e-3 and kind in ['mpi', 'loop']",
]
_AGG = re.compile(r"\b(sum|mean|max|min|std|median|count)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def build(nv: int, np_: int, seed: int = 1) -> PAG:
    rng = np.random.default_rng(seed)
    parent = np.r_[-1, (np.arange(1, nv) - 1) // 8]
    names = np.char.add("func_", (np.arange(nv) % 5000).astype(str)).astype(object)
    mpi = rng.random(nv) < 0.05
    names[mpi] = "MPI_Allreduce"
    vt = pd.DataFrame({"name": names, "parent": parent, "kind": np.where(mpi, "mpi", "function")})
    n = nv * np_
    imbalance = np.repeat(rng.random(nv), np_)  # per vertex: how much processes differ
    exc = np.repeat(rng.lognormal(-6, 1.0, nv), np_) * (1.0 + imbalance * rng.random(n))
    inc = exc * np.repeat(1.0 + 2 * rng.random(nv), np_)
    cols = {"time_inc": inc, "time_exc": exc, "visits": np.repeat(rng.integers(1, 1000, nv) * 1.0, np_)}
    vertex = np.repeat(np.arange(nv, dtype=np.int64), np_)
    process = np.tile(np.arange(np_, dtype=np.int64), nv)
    return PAG(vt, make_metrics(vertex, process, None, cols, n_vertices=nv), attrs={"source": "bench"})


def legacy(pag: PAG, expr: str, agg: str = "sum") -> np.ndarray:
    """The former VertexSet.filter(expr): columns into a DataFrame, then DataFrame.eval(engine="python")."""
    calls: dict[str, tuple[str, str]] = {}

    def repl(m: re.Match[str]) -> str:
        col = f"__{m.group(1)}__{m.group(2)}"
        calls[col] = (m.group(1), m.group(2))
        return col

    rewritten = _AGG.sub(repl, expr)
    names = {t for t in _IDENT.findall(rewritten) if t not in calls and t not in ("and", "or", "not", "in")}
    vt, ids = pag.vertex_table, np.arange(pag.n_vertices)
    cols = {}
    for n in names:
        if n in vt.columns:
            cols[n] = vt[n].to_numpy()[ids]
        elif n in pag.metric_names:
            cols[n] = pag.aggregate(n, agg).to_numpy()[ids]
    for col, (a, m) in calls.items():
        cols[col] = pag.aggregate(m, a).to_numpy()[ids]
    return np.asarray(pd.DataFrame(cols, index=ids).eval(rewritten, engine="python"), dtype=bool)


def interleaved(fns, repeat: int) -> list[tuple[float, object]]:
    """Best time of each function, the functions run in turn (so a load spike hits all of them alike)."""
    best, outs = [float("inf")] * len(fns), [None] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            outs[i] = fn()
            best[i] = min(best[i], time.perf_counter() - t)
    return list(zip(best, outs))


class Cols:
    def __init__(self, df: pd.DataFrame) -> None:
        self.df = df

    def __len__(self) -> int:
        return len(self.df)

    def column(self, name: str):
        s = self.df[name]
        return text_of(s.array) if isinstance(s.dtype, pd.CategoricalDtype) else s.to_numpy(dtype=np.float64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vertices", type=int, default=200_000)
    ap.add_argument("--procs", type=int, default=64)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()

    t = time.perf_counter()
    pag = build(a.vertices, a.procs)
    print(f"PAG: {a.vertices:,} vertices x {a.procs} processes = {a.vertices * a.procs:,} metric rows "
          f"(built in {time.perf_counter() - t:.1f} s); best of {a.repeat}")  # fmt: skip
    print("columns: perflow's evaluator (columns + evaluation), the former pandas path, pag.vertices.filter(expr)")
    print(f"{'expression':<86} {'perflow':>9} {'pandas':>9} {'speed-up':>8} {'filter':>9}")
    ids = np.arange(pag.n_vertices)
    for e in EXPRS:
        (tn, new), (to, old), (tf, sel) = interleaved(
            [
                lambda e=e: eval_mask(e, VertexColumns(pag, ids)),
                lambda e=e: legacy(pag, e),
                lambda e=e: pag.vertices.filter(e),
            ],
            a.repeat,
        )
        assert np.array_equal(new, old) and np.array_equal(sel.ids, np.flatnonzero(new)), e
        print(f"{e:<86} {tn * 1e3:7.1f}ms {to * 1e3:7.1f}ms {to / tn:7.2f}x {tf * 1e3:7.1f}ms  ({len(sel):,} vertices)")

    rng = np.random.default_rng(2)
    df = pd.DataFrame(
        {
            "a": rng.random(a.rows),
            "b": rng.random(a.rows),
            "c": pd.Categorical.from_codes(rng.integers(0, 100, a.rows), [f"n{i}" for i in range(100)]),
        }
    )
    e = "(a * 2 + b > 1.5) & ~(c == 'n7') | (b < 0.01)"
    (tn, new), (to, old) = interleaved(
        [lambda: eval_mask(e, Cols(df)), lambda: np.asarray(df.eval(e, engine="python"), dtype=bool)], a.repeat
    )
    assert np.array_equal(new, old)
    print(f"\nbare evaluation over {a.rows:,} rows: {e!r}")
    print(f"  perflow {tn * 1e3:8.1f} ms   pandas eval (python engine) {to * 1e3:8.1f} ms   {to / tn:.2f}x")


if __name__ == "__main__":
    main()
