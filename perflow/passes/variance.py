"""Performance variance detection from fixed-workload snippets (after vSensor and Vapro).

Snippets whose work is the same every time (the code between the same pair of
communication call sites with the same region visits; one MPI call with the
same bytes; optionally instruction counts within 2 %) are grouped; groups
with at least ``min_instances`` instances are kept and every instance gets
the normalised performance ``t_min / t`` of its group. A process x
time-slice matrix of the overlap-weighted mean performance shows where and
when the machine ran slow: cells below ``threshold`` are slow, and runs of
slow slices on one process are reported with whether computation or
communication snippets slowed down, and which code: the call path with the
most exclusive time in the slow snippets (an instrumented function, or on a
sampled run the function the samples ran in), with file and line. Sample
pieces do not change a snippet's identity (they say what ran, not what was
called, and vary with the sampling). Details: :mod:`perflow.trace.snippets`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import FLAT_TIMELINE, LOCATIONS, PAG, PassError, WaitSettings, pass_, settings_keywords
from perflow.sdk.trace import (
    Matrix,
    normalised_performance,
    performance_matrix,
    require_trace,
    snippet_table,
    waits_for,
)

__all__ = ["variance", "normalised_performance", "slow_regions"]

_COUNTER_GUESSES = ("PAPI_TOT_INS", "instructions", "INSTRUCTIONS")


def slow_regions(total: Matrix, comp: Matrix, comm: Matrix, threshold: float) -> pd.DataFrame:
    """Runs of slow slices (``total`` below ``threshold``) per process, with their cause.

    Columns: ``process``, ``start``, ``end``, ``slices``, ``perf`` (weighted
    mean over the run), ``lost`` (``(end - start) * (1 - perf)``: the time lost
    against the fastest instances; the sort key, largest first),
    ``computation``, ``communication`` (the same for each
    kind of snippet, NaN when absent), ``kind`` ("computation",
    "communication" or "both": which kind is below the threshold, else the
    slower one), ``share_of_processes`` (mean fraction of processes slow in
    those slices: near 1 means the whole machine slowed down).
    """
    cols = [
        "process",
        "start",
        "end",
        "slices",
        "perf",
        "lost",
        "computation",
        "communication",
        "kind",
        "share_of_processes",
    ]
    slow = np.nan_to_num(total.values, nan=np.inf) < threshold
    P, S = slow.shape
    if not slow.any():
        return pd.DataFrame({c: [] for c in cols})
    frac = slow.mean(axis=0)
    pad = np.zeros((P, 1), dtype=bool)
    d = np.diff(np.hstack([pad, slow, pad]).astype(np.int8), axis=1)
    rs, ss = np.nonzero(d == 1)
    re_, se = np.nonzero(d == -1)
    o1, o2 = np.lexsort((ss, rs)), np.lexsort((se, re_))
    rs, ss, se = rs[o1], ss[o1], se[o2]

    def run_mean(m: Matrix) -> np.ndarray:
        num = np.nan_to_num(m.values * m.weight)
        cn = np.hstack([np.zeros((P, 1)), np.cumsum(num, axis=1)])
        cd = np.hstack([np.zeros((P, 1)), np.cumsum(m.weight, axis=1)])
        with np.errstate(invalid="ignore", divide="ignore"):
            dd = cd[rs, se] - cd[rs, ss]
            return np.where(dd > 0, (cn[rs, se] - cn[rs, ss]) / dd, np.nan)

    perf, pc, pm = run_mean(total), run_mean(comp), run_mean(comm)
    c_low = np.nan_to_num(pc, nan=np.inf) < threshold
    m_low = np.nan_to_num(pm, nan=np.inf) < threshold
    slower = np.where(np.nan_to_num(pc, nan=np.inf) <= np.nan_to_num(pm, nan=np.inf), "computation", "communication")
    kind = np.where(c_low & m_low, "both", np.where(c_low, "computation", np.where(m_low, "communication", slower)))
    cf = np.r_[0.0, np.cumsum(frac)]
    out = pd.DataFrame(
        {
            "process": total.processes[rs],
            "start": total.edges[ss],
            "end": total.edges[se],
            "slices": se - ss,
            "perf": perf,
            "lost": (total.edges[se] - total.edges[ss]) * (1.0 - perf),
            "computation": pc,
            "communication": pm,
            "kind": kind,
            "share_of_processes": (cf[se] - cf[ss]) / (se - ss),
        }
    )
    return out.sort_values(["lost", "process", "start"], ascending=[False, True, True], kind="stable").reset_index(
        drop=True
    )


def _site_labels(inst: pd.DataFrame, names: np.ndarray, comm: np.ndarray) -> pd.Categorical:
    """ "A -> B" (computation) or the call's name (communication), built once per group (a group has one site)."""
    g = inst["group"].to_numpy()
    if not len(g):
        return pd.Categorical([])
    ng = int(g.max()) + 1
    first = np.full(ng, len(g), dtype=np.int64)
    np.minimum.at(first, g, np.arange(len(g)))
    fv, tv = inst["from_vertex"].to_numpy()[first], inst["to_vertex"].to_numpy()[first]
    labels = [str(names[f]) if c else f"{names[f]} -> {names[t]}" for f, t, c in zip(fv, tv, comm[first])]
    cats, lcode = np.unique(np.asarray(labels, dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(lcode.ravel()[g], categories=[str(c) for c in cats])


@pass_(
    version="2",
    tags=("trace", "variance"),
    outputs={"instances": pd.DataFrame, "matrix": pd.DataFrame, "slow": pd.DataFrame, "groups": pd.DataFrame},
)
@settings_keywords(WaitSettings, "wait_settings")
def variance(
    pag: PAG,
    *,
    slices: int = 50,
    threshold: float = 0.8,
    min_instances: int = 5,
    counter: str | None = None,
    tolerance: float = 0.02,
    per_process: bool = False,
    exclude_waits: bool = True,
    wait_settings: WaitSettings,
) -> dict[str, Any]:
    """Find slow processes and time ranges from the normalised performance of fixed-workload snippets.

    Outputs
    -------
    instances
        One row per snippet instance: ``process``, ``thread``, ``start``,
        ``end``, ``kind`` ("computation"/"communication"), ``group``,
        ``from_vertex`` / ``to_vertex`` and ``site`` (the call sites around
        it: "A -> B", or the MPI call), ``code_vertex`` and ``code`` (the call
        path with the most exclusive time inside a computation snippet, as
        ``name (file:line)``: an instrumented function or, on a sampled run,
        the function its samples ran in; the call itself for communication),
        ``time`` (s), ``perf`` (``t_min / t`` in its group), ``slow``
        (``perf < threshold``).
    matrix
        Processes (index) x time slices (columns: slice start times, s): the
        overlap-weighted mean ``perf``; NaN where no snippet ran.
    slow
        Runs of slow slices per process: ``process``, ``start``, ``end``,
        ``slices``, ``perf``, ``lost`` (``(end - start) * (1 - perf)``, s),
        ``computation``, ``communication``, ``kind`` (which kind of snippet
        slowed down), ``code`` (the code of the slow snippets that lost the
        most time there), ``share_of_processes`` (near 1: the whole machine
        was slow then). Most time lost first.
    groups
        One row per fixed-workload group: ``group``, ``kind``, ``site``,
        ``code`` (the code holding most of the group's time), ``instances``, ``t_min``, ``t_median``, ``t_max`` (s), ``slow`` (instances below
        the threshold).

    Parameters
    ----------
    slices : int
        Number of equal time slices over the trace span.
    threshold : float
        Performance below which an instance or a matrix cell counts as slow.
    min_instances : int
        Smallest group of same-workload snippets to use.
    counter : str, optional
        Column of ``pag.trace.intervals`` with per-instance instruction counts
        (default: PAPI_TOT_INS or instructions when present); groups are split
        so counts agree within ``tolerance``.
    tolerance : float
        Relative tolerance on instruction counts within a group.
    per_process : bool
        Compare instances only within one process (hides slow processes, keeps
        slow phases; use when the work differs between processes).
    exclude_waits : bool
        Time communication calls without their wait-state time, completion
        parts included (waiting caused by other processes is not slow
        communication).
    """
    trace = require_trace(pag, "variance")
    if slices < 1:
        raise PassError(f"pass 'variance': slices must be >= 1, got {slices}")
    if min_instances < 2:
        raise PassError(f"pass 'variance': min_instances must be >= 2, got {min_instances}")
    if not 0 < threshold <= 1:
        raise PassError(f"pass 'variance': threshold must be in (0, 1], got {threshold}")
    ivcols = list(trace.intervals.columns)
    if counter is None:
        counter = next((c for c in _COUNTER_GUESSES if c in ivcols), None)
    elif counter not in ivcols:
        raise PassError(
            f"pass 'variance': the trace intervals have no counter column {counter!r} (columns: {', '.join(ivcols)})"
        )
    vt = pag.vertex_table
    names = vt["name"].astype(str).to_numpy()
    w = waits_for(pag, "variance", wait_settings) if exclude_waits else None
    inst = snippet_table(
        trace,
        names,
        vt["kind"].astype(str).to_numpy(),
        waits=w,
        locs=pag.analyses.get(LOCATIONS),
        flat=pag.analyses.get(FLAT_TIMELINE),
        counter=counter,
        tolerance=tolerance,
        min_instances=int(min_instances),
        per_process=per_process,
    )
    comm = (inst["kind"] == "communication").to_numpy()
    inst.insert(inst.columns.get_loc("to_vertex") + 1, "site", _site_labels(inst, names, comm))
    used, code_of = np.unique(inst["code_vertex"].to_numpy(), return_inverse=True)
    labels = np.append(code_labels(pag, used[used >= 0]), "")[np.where(used >= 0, np.arange(len(used)), -1)]
    inst.insert(inst.columns.get_loc("code_vertex") + 1, "code", labels[code_of.ravel()] if len(used) else [])
    inst["slow"] = inst["perf"].to_numpy() < threshold
    t0, t1 = trace.span
    procs = np.unique(trace.intervals["process"].to_numpy())
    p, a, b, x = (inst[c].to_numpy() for c in ("process", "start", "end", "perf"))
    mcomp = performance_matrix(p[~comm], a[~comm], b[~comm], x[~comm], t0, t1, slices, procs)
    mcomm = performance_matrix(p[comm], a[comm], b[comm], x[comm], t0, t1, slices, procs)
    total = mcomp + mcomm
    matrix = pd.DataFrame(
        total.values, index=pd.Index(procs, name="process"), columns=pd.Index(total.edges[:-1], name="time")
    )
    matrix.attrs["edges"] = total.edges.tolist()
    groups = (
        inst.groupby("group")
        .agg(
            kind=("kind", "first"),
            site=("site", "first"),
            instances=("time", "size"),
            t_min=("time", "min"),
            t_median=("time", "median"),
            t_max=("time", "max"),
            slow=("slow", "sum"),
        )
        .reset_index()
    )
    groups.insert(
        groups.columns.get_loc("site") + 1,
        "code",
        _dominant(inst, "group", inst["time"]).reindex(groups["group"]).fillna("").to_numpy(),
    )
    slow = slow_regions(total, mcomp, mcomm, threshold)
    slow.insert(slow.columns.get_loc("kind") + 1, "code", _slow_code(slow, inst))
    return {"instances": inst, "matrix": matrix, "slow": slow, "groups": groups}


def code_labels(pag: PAG, vertices: np.ndarray) -> np.ndarray:
    """``name (file:line)`` of some vertices (just the name without a file and line): the code a snippet ran."""
    vt = pag.vertex_table
    ids = np.asarray(vertices, dtype=np.int64)
    names = vt["name"].astype(str).to_numpy()[ids]
    files = vt["file"].astype(str).to_numpy()[ids] if "file" in vt.columns else np.full(len(ids), "")
    lines = pd.to_numeric(vt["line"], errors="coerce").fillna(0).to_numpy()[ids] if "line" in vt.columns else 0 * ids
    out = np.empty(len(ids), dtype=object)
    for i, (n, f, ln) in enumerate(zip(names, files, lines)):
        base = f.rsplit("/", 1)[-1] if f and f not in ("nan", "None") else ""
        out[i] = f"{n} ({base}:{int(ln)})" if base and int(ln) > 0 else n
    return out


def _dominant(inst: pd.DataFrame, by: str, weight: pd.Series) -> pd.Series:
    """Per value of ``by``, the code label with the largest summed ``weight`` (labels "" left out)."""
    d = pd.DataFrame({by: inst[by].to_numpy(), "code": inst["code"].to_numpy(), "w": weight.to_numpy()})
    d = d[d["code"] != ""]
    t = d.groupby([by, "code"], sort=True)["w"].sum().reset_index()
    t = t.sort_values([by, "w"], kind="stable")  # the largest weight last (ties: the label sorting last)
    return t.groupby(by)["code"].last()


def _slow_code(slow: pd.DataFrame, inst: pd.DataFrame) -> np.ndarray:
    """Per slow run, the code of the slow snippets that lost it the most time (overlap x (1 - perf))."""
    out = np.full(len(slow), "", dtype=object)
    if not len(slow) or not len(inst):
        return out
    sl = inst[inst["slow"].to_numpy()]
    by_proc = {p: g for p, g in sl.groupby("process", sort=False)}
    for i, (p, a, b) in enumerate(zip(slow["process"], slow["start"], slow["end"])):
        g = by_proc.get(p)
        if g is None:
            continue
        ov = np.minimum(g["end"].to_numpy(), b) - np.maximum(g["start"].to_numpy(), a)
        lost = np.clip(ov, 0.0, None) * (1.0 - g["perf"].to_numpy())
        best = _dominant(g.assign(run=0), "run", pd.Series(lost, index=g.index))
        out[i] = best.iloc[0] if len(best) else ""
    return out
