"""Backtracking root-cause analysis on the parallel view (after PerFlow's and ScalAna's backtracking).

A *symptom* is a parallel vertex (vertex, process, thread) where time is
lost: typically an MPI call that waits, or a non-scalable vertex. From each
symptom the analysis walks the parallel view backwards, one vertex per step:

1. **Across a communication edge** when the vertex waited on a peer: among
   the ``p2p`` and ``collective`` edges into it
   (``pag.parallel.edge_table``) and, on traces with MPI one-sided or
   threaded synchronisation, the RMA and thread wait states into it (from
   the waiting call to the call it waited for: the last process at a fence,
   the late post, the last thread at a barrier, the lock holder's release),
   the one with the largest waiting time
   leads to the peer that arrived latest (the sender of a late message; the
   last arriver of a collective, since collective edges run from the last
   arriver to every other participant). The edge is followed when the
   vertex waited more than it made others wait (its incoming waiting time
   exceeds the waiting time on its outgoing communication edges); a vertex
   that was itself the late one is not a victim, and the walk stays on its
   process.
2. **Otherwise to its intra-process predecessor**, what ran just before it
   on the same process and thread:

   * with a trace (``pag.trace``): the region instance entered just before
     the vertex's instance (the previous interval in enter order on that
     location: the previous sibling's last descendant, or the parent for a
     first child), skipping repeated instances of the vertex itself; over
     all instances, the most frequent such predecessor. On a sampled run
     the computation between two MPI calls is made of sample pieces
     (:mod:`perflow.trace.pieces`), so the predecessor of an MPI call is the
     function the samples saw last before it;
   * without a trace: the vertex before it in a depth-first pre-order walk
     of the calling-context tree restricted to the vertices the process
     executed (the previous sibling's last descendant, or the parent).

The walk stops at the first *abnormal* vertex, the root cause: by default a
computation vertex (see :func:`perflow.sdk.profile.categories`) whose value on
this process exceeds ``k`` times its mean across processes (``x_p > k *
mean``, k = 1.3) by at least 5% of the waiting time the path has crossed so
far (``x_p - mean >= 0.05 * wait``: a vertex cannot explain more waiting than
its excess, so a few milliseconds of glue code between two sampled functions, or
the tail of a stretch after its last sample, is no cause of seconds of waiting); or at a vertex already on the path, a vertex without
predecessor, or after ``max_steps`` steps (then the path has no root cause).
The per-step work is constant time on arrays prepared once with numpy.
Root causes are ranked by the waiting time their path crossed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflow.sdk import PAG, WAIT_INSTANCES, ParallelVertexSet, PassError, VertexSet, pass_
from perflow.sdk.profile import (
    as_pag,
    categories,
    edge_kinds,
    edge_mask,
    grouped,
    names_of,
    resolve_metric,
    source_labels,
)
from perflow.sdk.trace import WAIT_KINDS

__all__ = ["backtrack", "predecessors", "comm_in"]

#: the default root cause explains at least this share of the waiting its path crossed (module docstring)
_MIN_EXPLAINED = 0.05

_WAITING = ("p2p", "collective", "sync")


def predecessors(pag: PAG) -> np.ndarray:
    """The intra-process predecessor (a parallel vertex id, or -1) of every parallel vertex (see the module docstring)."""
    view = pag.parallel
    n = len(view)
    pred = np.full(n, -1, dtype=np.int64)
    tr = pag.trace
    if tr is not None and tr.n_intervals:
        iv = tr.intervals
        vert = iv["vertex"].to_numpy().astype(np.int64)
        proc = iv["process"].to_numpy().astype(np.int64)
        thr = iv["thread"].to_numpy().astype(np.int64)
        m = len(iv)
        loc_start = np.r_[True, (proc[1:] != proc[:-1]) | (thr[1:] != thr[:-1])]
        new_run = loc_start | np.r_[True, vert[1:] != vert[:-1]]
        run_start = np.maximum.accumulate(np.where(new_run, np.arange(m), 0))
        prev = run_start - 1
        ok = ~loc_start[run_start]
        rows = view.rows(vert, proc, thr)
        dst = rows[ok]
        src = rows[prev[ok]]
        good = (dst >= 0) & (src >= 0) & (dst != src)
        dst, src = dst[good], src[good]
        if len(dst):
            key, counts = np.unique(dst * n + src, return_counts=True)
            d, s = key // n, key % n
            order = np.lexsort((counts, d))  # by dst, then count: the last of each dst wins
            d, s = d[order], s[order]
            last = np.r_[d[1:] != d[:-1], True]
            pred[d[last]] = s[last]
        return pred
    vf = view.vertex_frame
    pre = pag.tree_index.preorder[view.vertex_ids]
    loc = (
        vf["process"].to_numpy().astype(np.int64) * (int(vf["thread"].max()) + 1 if n else 1) + vf["thread"].to_numpy()
    )
    order = np.lexsort((pre, loc))
    same = np.r_[False, loc[order][1:] == loc[order][:-1]]
    pred[order[same]] = order[np.flatnonzero(same) - 1]
    return pred


def comm_in(pag: PAG) -> dict[str, np.ndarray]:
    """Per parallel vertex: the incoming communication edge with the most waiting time and the waiting totals.

    Returns ``best_src`` (source of that edge, -1 if none), ``best_kind``
    (its kind), ``best_wait``, ``in_wait`` (waiting time on all incoming
    p2p/collective edges and RMA/thread wait states) and ``out_wait`` (on all
    outgoing ones).
    """
    view = pag.parallel
    n = len(view)
    et = view.edge_table
    kind = edge_kinds(et)
    sel = edge_mask(et, ["p2p", "collective"])
    src, dst = et["src"].to_numpy()[sel], et["dst"].to_numpy()[sel]
    wait, kind = et["wait"].to_numpy(dtype=np.float64)[sel], kind[sel]
    ws, wd, ww, wk = _sync_wait_edges(pag)
    if len(ws):
        src, dst = np.r_[src, ws], np.r_[dst, wd]
        wait, kind = np.r_[wait, ww], np.r_[np.asarray(kind, dtype=object), wk]
    in_wait = np.bincount(dst, weights=wait, minlength=n)
    out_wait = np.bincount(src, weights=wait, minlength=n)
    best_src = np.full(n, -1, dtype=np.int64)
    best_wait = np.zeros(n)
    best_kind = np.full(n, "", dtype=object)
    if len(dst):
        order = np.lexsort((-src, wait, dst))  # per dst, the largest wait last (ties: lowest source)
        d = dst[order]
        last = np.r_[d[1:] != d[:-1], True]
        pick = order[last]
        best_src[dst[pick]] = src[pick]
        best_wait[dst[pick]] = wait[pick]
        best_kind[dst[pick]] = kind[pick]
    return {
        "best_src": best_src,
        "best_kind": best_kind,
        "best_wait": best_wait,
        "in_wait": in_wait,
        "out_wait": out_wait,
    }


#: wait-state families followed like communication edges (their waits name the call waited for)
_SYNC_FAMILIES = ("rma", "thread")


def _sync_wait_edges(pag: PAG) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """RMA and thread wait states as (cause row, waiting row, wait, kind) of the parallel view, summed per pair.

    Computed only for traces that can hold them (RMA records; several threads
    or lock events), so that other traces do not pay for the wait instances.
    """
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, dtype=object))
    tr = pag.trace
    if tr is None or not (len(tr.rma) or len(tr.locks) or (len(tr.intervals) and tr.intervals["thread"].max() > 0)):
        return empty

    w = pag.analyses.get(WAIT_INSTANCES)
    kind = w["kind"].cat  # one family lookup per kind, not per wait
    fam = np.array([WAIT_KINDS[str(k)].family for k in kind.categories] + [""], dtype=object)[kind.codes]
    keep = np.isin(fam, _SYNC_FAMILIES) & (w["interval"].to_numpy() >= 0) & (w["cause_interval"].to_numpy() >= 0)
    if not keep.any():
        return empty
    iv = tr.intervals
    vx, pr, th = (iv[c].to_numpy() for c in ("vertex", "process", "thread"))
    a, b = w["interval"].to_numpy()[keep], w["cause_interval"].to_numpy()[keep]
    view = pag.parallel
    dst, src = view.rows(vx[a], pr[a], th[a]), view.rows(vx[b], pr[b], th[b])
    df = pd.DataFrame({"src": src, "dst": dst, "kind": fam[keep], "wait": w["amount"].to_numpy()[keep]})
    df = df[(df["src"] >= 0) & (df["dst"] >= 0) & (df["src"] != df["dst"])]
    g = df.groupby(["src", "dst", "kind"], sort=True)["wait"].sum().reset_index()
    return (
        g["src"].to_numpy(np.int64),
        g["dst"].to_numpy(np.int64),
        g["wait"].to_numpy(np.float64),
        g["kind"].to_numpy(dtype=object),
    )


def _symptom_rows(
    pag: PAG, symptoms: VertexSet | ParallelVertexSet | None, n_symptoms: int, col: str, comm: dict[str, np.ndarray]
) -> np.ndarray:
    view = pag.parallel
    if isinstance(symptoms, ParallelVertexSet):
        return symptoms.ids
    x = np.asarray(pag.rows.column(col), dtype=np.float64)
    score = np.where(comm["in_wait"] > 0, comm["in_wait"], 0.0)
    if isinstance(symptoms, VertexSet):
        verts = symptoms.ids
    elif symptoms is None:
        cat = categories(pag)
        # MPI calls of the waiting categories, and any other call that waited on a peer (one-sided
        # synchronisation, OpenMP barriers and locks: their waits are RMA or thread wait states)
        mpi = np.isin(cat, _WAITING) | (np.bincount(view.vertex_ids, score, pag.n_vertices) > 0)
        per_v = np.bincount(
            view.vertex_ids, weights=np.where(mpi[view.vertex_ids], score, 0.0), minlength=pag.n_vertices
        )
        if not (per_v > 0).any():
            per_v = np.bincount(
                view.vertex_ids, weights=np.where(mpi[view.vertex_ids], x, 0.0), minlength=pag.n_vertices
            )
        verts = np.argsort(-per_v, kind="stable")[: max(int(n_symptoms), 0)]
        verts = verts[per_v[verts] > 0]
    else:
        raise PassError(f"symptoms must be a VertexSet, a ParallelVertexSet or None, not {type(symptoms).__name__}")
    rows = np.flatnonzero(np.isin(view.vertex_ids, verts))
    # per symptom vertex: the row that waited most, else the one with the largest value; ties to the lowest row
    order = np.lexsort((rows, -x[rows], -score[rows], view.vertex_ids[rows]))
    r = rows[order]
    if not len(r):
        return np.zeros(0, dtype=np.int64)
    first = np.r_[True, view.vertex_ids[r][1:] != view.vertex_ids[r][:-1]]
    chosen = r[first]
    rank = {int(v): i for i, v in enumerate(verts.tolist())}
    return np.asarray(sorted(chosen.tolist(), key=lambda i: rank.get(int(view.vertex_ids[i]), 0)), dtype=np.int64)


@pass_(
    version="3",
    tags=("trace", "profile", "root-cause"),
    outputs={"paths": pd.DataFrame, "root_causes": pd.DataFrame, "causes": ParallelVertexSet},
)
def backtrack(
    pag: PAG,
    symptoms: VertexSet | ParallelVertexSet | None = None,
    abnormal: ParallelVertexSet | None = None,
    *,
    metric: str = "time_exc",
    k: float = 1.3,
    n_symptoms: int = 3,
    max_steps: int = 10000,
) -> dict[str, object]:
    """Walk back from symptom vertices through the parallel view to their root causes.

    See the module docstring for the walk and the stopping rule.

    Parameters
    ----------
    pag : PAG
        A trace-backed PAG (instances give program order and waiting times)
        or a profile (with explicit communication edges, if any).
    symptoms : VertexSet or ParallelVertexSet, optional
        Where to start. Top-down vertices start on the process where they
        waited most (else where their metric is largest). Default: the
        ``n_symptoms`` MPI vertices (point-to-point, collective,
        synchronisation) or other waiting calls (one-sided synchronisation,
        OpenMP barriers and locks) with the most waiting time (else the MPI
        vertices with the most time).
    abnormal : ParallelVertexSet, optional
        The vertices that count as root causes (e.g. from
        :func:`perflow.passes.imbalance.outlier_vertices`); default: computation
        vertices with ``x_p > k * mean`` whose excess is at least 5% of the waiting the path crossed.
    metric : str
        Metric for the default abnormality test and symptom choice.
    k : float
        Outlier factor of the default abnormality test.
    n_symptoms : int
        Number of default symptom vertices.
    max_steps : int
        Longest path.

    Returns
    -------
    dict
        ``paths``: one row per step (``path``, ``step``, ``vertex``,
        ``process``, ``thread``, ``name``, ``call_path``, ``via`` = start, p2p,
        collective or program, ``wait`` on the edge followed, ``abnormal``);
        ``root_causes``: one row per path that found one (``path``,
        ``vertex``, ``process``, ``thread``, ``name``, ``call_path``,
        ``value``, ``mean``, ``ratio``, ``symptom_vertex``, ``symptom_process``,
        ``symptom_name``, ``steps``, ``wait``: the waiting time on the
        communication edges the path followed), the most waiting first (a
        start-up skew in MPI_Init explains little waiting, a late rank in
        every allreduce much); ``causes``: the distinct root causes as a
        ParallelVertexSet.
    """
    pag = as_pag(pag)
    for what, sel in (("symptoms", symptoms), ("abnormal", abnormal)):
        if sel is not None and getattr(sel, "pag", pag) is not pag:
            raise PassError(f"the {what} set belongs to another PAG than the one to analyse")
    col = resolve_metric(pag, metric)
    if k <= 0:
        raise PassError(f"the outlier factor k must be positive, not {k}")
    view = pag.parallel
    n = len(view)
    comm = comm_in(pag)
    pred = predecessors(pag)
    g = grouped(pag, col, "location")  # one row per parallel vertex, same order
    st = g.stats()
    mean = st["mean"][view.vertex_ids]
    x = g.value
    if abnormal is not None:
        ab = np.zeros(n, dtype=bool)
        ab[abnormal.ids] = True
    else:
        comp = categories(pag) == "computation"
        floor = 1e-9 * (float(np.abs(x).max()) if n else 0.0)
        ab = comp[view.vertex_ids] & (x > k * mean) & (x > floor)
    starts = _symptom_rows(pag, symptoms, n_symptoms, col, comm)
    vf = view.vertex_frame
    names = names_of(pag)
    paths = pag.call_paths().to_numpy()
    rec: list[tuple[int, int, int, str, float]] = []
    causes: list[tuple[int, int, int]] = []
    for pi, s in enumerate(starts.tolist()):
        cur, via, w = s, "start", 0.0
        seen = {s}
        crossed = 0.0
        for step in range(max_steps + 1):
            rec.append((pi, step, cur, via, w))
            crossed += w
            if ab[cur] and (abnormal is not None or x[cur] - mean[cur] >= _MIN_EXPLAINED * crossed):
                causes.append((pi, cur, step))
                break
            nxt = -1
            b = int(comm["best_src"][cur])
            if b >= 0 and comm["in_wait"][cur] > comm["out_wait"][cur] and b not in seen:
                nxt, via, w = b, str(comm["best_kind"][cur]), float(comm["best_wait"][cur])
            elif pred[cur] >= 0 and int(pred[cur]) not in seen:
                nxt, via, w = int(pred[cur]), "program", 0.0
            if nxt < 0:
                break
            seen.add(nxt)
            cur = nxt
    r = np.asarray([t[2] for t in rec], dtype=np.int64)
    rv = view.vertex_ids[r] if len(r) else np.zeros(0, np.int64)
    path_df = pd.DataFrame(
        {
            "path": np.asarray([t[0] for t in rec], dtype=np.int64),
            "step": np.asarray([t[1] for t in rec], dtype=np.int64),
            "vertex": rv,
            "process": vf["process"].to_numpy()[r],
            "thread": vf["thread"].to_numpy()[r],
            "name": names[rv],
            "call_path": paths[rv],
            "via": [t[3] for t in rec],
            "wait": np.asarray([t[4] for t in rec], dtype=np.float64),
            "abnormal": ab[r],
        }
    )
    # waiting time each path crossed on its way to the cause: the rows are ranked by it
    steps_wait = np.bincount(path_df["path"].to_numpy(), weights=path_df["wait"].to_numpy(), minlength=len(starts))
    c = np.asarray([t[1] for t in causes], dtype=np.int64)
    cv = view.vertex_ids[c] if len(c) else np.zeros(0, np.int64)
    sym = starts[np.asarray([t[0] for t in causes], dtype=np.int64)] if causes else np.zeros(0, np.int64)
    sv = view.vertex_ids[sym] if len(sym) else np.zeros(0, np.int64)
    cause_df = pd.DataFrame(
        {
            "path": np.asarray([t[0] for t in causes], dtype=np.int64),
            "vertex": cv,
            "process": vf["process"].to_numpy()[c],
            "thread": vf["thread"].to_numpy()[c],
            "name": names[cv],
            "call_path": paths[cv],
            "source": source_labels(pag)[cv] if len(cv) else np.zeros(0, dtype=object),
            "value": x[c],
            "mean": mean[c],
            "ratio": np.where(mean[c] > 0, x[c] / np.where(mean[c] > 0, mean[c], 1.0), np.nan),
            "symptom_vertex": sv,
            "symptom_process": vf["process"].to_numpy()[sym],
            "symptom_name": names[sv],
            "steps": np.asarray([t[2] for t in causes], dtype=np.int64),
            "wait": steps_wait[np.asarray([t[0] for t in causes], dtype=np.int64)],
        }
    )
    cause_df = cause_df.sort_values("wait", ascending=False, kind="stable").reset_index(drop=True)
    return {"paths": path_df, "root_causes": cause_df, "causes": ParallelVertexSet(pag, np.unique(c))}
