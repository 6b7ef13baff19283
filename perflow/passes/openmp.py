"""OpenMP and thread analyses of traces: parallel regions and their teams, lock contention.

Passes
------
parallel_regions
    One row per parallel construct: how often a team ran it, the team size,
    its wall time, the time its threads spent in it, and how much of that
    they waited at barriers and for locks.
lock_contention
    One row per lock (OpenMP lock, critical section, pthread mutex) and
    process: acquisitions, how many had to wait for another thread, and the
    waiting time.

The wait states are those of :mod:`perflow.trace.threadwaits` (OpenMP
barrier waits per barrier instance of a team, lock contention), taken from
the PAG's wait-state table, so the breakdown, the critical path and the
wait-state passes count the same waits.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflow.sdk import PAG, WAIT_INSTANCES, PassError, pass_
from perflow.sdk.render import declare_aggregates
from perflow.sdk.trace import parallel_teams, require_trace, vertex_roles

__all__ = ["parallel_regions", "lock_contention"]

_BARRIER = ("omp_barrier_wait", "omp_ibarrier_wait")
_LOCK = ("lock_contention_critical", "lock_contention_api")

_REGION_COLUMNS = {
    "region": "name of the parallel construct",
    "team_instances": "times a team ran it",
    "threads": "largest team",
    "time": "wall time: per team instance, first enter to last leave, summed (s)",
    "thread_time": "time of its threads in it, summed (s)",
    "barrier_wait": "waiting at its explicit and implicit barriers (s)",
    "lock_wait": "waiting for locks and critical sections in it (s)",
    "wait_percent": "barrier and lock waits, percent of thread_time",
}


def _no_roles(pass_name: str) -> None:

    raise PassError(
        f"pass {pass_name!r}: this PAG's vertices have no region roles (a trace from a source without "
        "OpenMP/thread region roles, or a PAG saved by an older perflow)"
    )


@pass_(version="1", tags=("trace", "openmp", "threads"))
def parallel_regions(pag: PAG) -> pd.DataFrame:
    """OpenMP parallel constructs: team instances, team size, time and waiting time.

    A team instance is a set of overlapping instances of the construct on
    the threads of one process (see :mod:`perflow.trace.threadwaits`).
    Columns: ``region``, ``team_instances``, ``threads``, ``time`` (s),
    ``thread_time`` (s), ``barrier_wait`` (s), ``lock_wait`` (s),
    ``wait_percent``; sorted by ``time``. A trace without parallel regions
    gives no rows.
    """
    trace = require_trace(pag, "parallel_regions")
    role, region = vertex_roles(pag)
    if role is None or region is None:
        _no_roles("parallel_regions")
    iv = trace.intervals
    rows = np.arange(len(iv))
    anc, team = parallel_teams(iv, role, region, None, rows)
    P = np.flatnonzero(team >= 0)
    cols = list(_REGION_COLUMNS)
    if not len(P):
        return pd.DataFrame({c: pd.Series(dtype=object if c == "region" else float) for c in cols})
    names = pag.vertex_table["name"].astype(str).to_numpy()
    vtx = iv["vertex"].to_numpy().astype(np.int64)
    enter, leave = iv["enter"].to_numpy(), iv["leave"].to_numpy()
    reg_of_team = pd.Series(region[vtx[P]]).groupby(team[P]).first()
    per_team = pd.DataFrame({"team": team[P], "enter": enter[P], "leave": leave[P], "dur": leave[P] - enter[P]})
    g = per_team.groupby("team").agg(enter=("enter", "min"), leave=("leave", "max"), n=("dur", "size"),
                                     thread_time=("dur", "sum"))  # fmt: skip
    g["region"] = reg_of_team.reindex(g.index).to_numpy()
    w = pag.analyses.get(WAIT_INSTANCES)
    kind = w["kind"].astype(str).to_numpy()
    sel = np.isin(kind, _BARRIER + _LOCK) & (w["interval"].to_numpy() >= 0)
    wi = w["interval"].to_numpy()[sel].astype(np.int64)
    wteam = team[np.maximum(anc[wi], 0)]
    wteam[anc[wi] < 0] = -1
    amt = w["amount"].to_numpy()[sel]
    is_bar = np.isin(kind[sel], _BARRIER)
    g["barrier_wait"] = pd.Series(amt[is_bar]).groupby(wteam[is_bar]).sum().reindex(g.index).fillna(0.0).to_numpy()
    g["lock_wait"] = pd.Series(amt[~is_bar]).groupby(wteam[~is_bar]).sum().reindex(g.index).fillna(0.0).to_numpy()
    g["span"] = g["leave"] - g["enter"]
    first_vertex = pd.Series(vtx[P]).groupby(region[vtx[P]]).first()
    out = g.groupby("region").agg(
        team_instances=("n", "size"), threads=("n", "max"), time=("span", "sum"), thread_time=("thread_time", "sum"),
        barrier_wait=("barrier_wait", "sum"), lock_wait=("lock_wait", "sum"),
    )  # fmt: skip
    out.insert(0, "name", [names[first_vertex[r]] for r in out.index])
    out = out.reset_index(drop=True).rename(columns={"name": "region"})
    out["wait_percent"] = (
        100.0 * (out["barrier_wait"] + out["lock_wait"]) / out["thread_time"].where(out["thread_time"] > 0)
    )
    out["wait_percent"] = out["wait_percent"].fillna(0.0)
    out = out[cols].sort_values("time", ascending=False, kind="stable").reset_index(drop=True)
    declare_aggregates(out, pag, ["time", "thread_time", "barrier_wait", "lock_wait"])
    return out


@pass_(version="1", tags=("trace", "openmp", "threads"))
def lock_contention(pag: PAG) -> pd.DataFrame:
    """Locks and critical sections: acquisitions, contended acquisitions and waiting time, per process.

    An acquisition is contended when the lock's previous holder was another
    thread that released it after this one started to wait (its waiting time
    is ``lock_contention_*`` in the wait-state table). Columns: ``process``,
    ``lock`` (the trace's lock id), ``where`` (the call path name of the
    first acquisition: the critical construct or the lock call),
    ``acquisitions``, ``threads``, ``contended``, ``wait`` (s), ``max_wait``
    (s); sorted by ``wait``.
    """
    trace = require_trace(pag, "lock_contention")
    lk = trace.locks
    cols = ["process", "lock", "where", "acquisitions", "threads", "contended", "wait", "max_wait"]
    if not len(lk):
        return pd.DataFrame({c: pd.Series(dtype=object if c == "where" else float) for c in cols})
    w = pag.analyses.get(WAIT_INSTANCES)
    w = w[np.isin(w["kind"].astype(str).to_numpy(), _LOCK)]
    iv_vertex = trace.intervals["vertex"].to_numpy().astype(np.int64)
    names = pag.vertex_table["name"].astype(str).to_numpy()
    li = lk["interval"].to_numpy().astype(np.int64)
    where = np.where(li >= 0, names[iv_vertex[np.maximum(li, 0)]] if len(iv_vertex) else "", "")
    key = pd.Series(w["amount"].to_numpy(), index=pd.Index(w["interval"].to_numpy(), name="interval"))
    wait_of = key.groupby(level=0).sum()
    per_acq = wait_of.reindex(li).fillna(0.0).to_numpy(copy=True) if len(wait_of) else np.zeros(len(lk))
    per_acq[li < 0] = 0.0
    df = pd.DataFrame(
        {"process": lk["process"].to_numpy(), "lock": lk["lock"].to_numpy(), "where": where,
         "thread": lk["thread"].to_numpy(), "wait": per_acq}
    )  # fmt: skip
    out = df.groupby(["process", "lock"], sort=True).agg(
        where=("where", "first"), acquisitions=("wait", "size"), threads=("thread", "nunique"),
        contended=("wait", lambda x: int((x > 0).sum())), wait=("wait", "sum"), max_wait=("wait", "max"),
    ).reset_index()  # fmt: skip
    out = out[cols].sort_values("wait", ascending=False, kind="stable").reset_index(drop=True)
    declare_aggregates(out, pag, ["wait"])
    return out
