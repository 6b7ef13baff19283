"""Root-cause (delay) analysis of wait states, after Scalasca's delay costs.

Every idle wait state (Late Sender, Late Receiver, collective waits) is
traced to the process that caused it and, on that process, to the call paths
that took longer than on the waiting process since the previous
synchronisation point the two share. The wait is distributed over those
delays in proportion to their size (short-term cost); waiting time the
delaying process spent itself in that interval is a *propagating* delay, which
the long-term variant passes back to the causes of those earlier waits. The
formulas are in :mod:`perflow.trace.delays`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import DELAY_COSTS, PAG, DelaySettings, PassError, pass_, settings_keywords
from perflow.sdk.profile import off_cpu_mask
from perflow.sdk.trace import call_path_column, check_choice, name_column, require_trace, source_column

from ._gains import balance_gains
from .whatif import GAIN

__all__ = ["root_cause", "delay_tables"]


def delay_tables(
    pag: PAG, pass_name: str, delay_settings: DelaySettings | None = None, *, gains: int = 20, sort: str = "total"
) -> dict[str, Any]:
    """``causes``, ``by_process``, ``summary`` and ``off_cpu`` tables (see :func:`root_cause`)."""
    require_trace(pag, pass_name)
    check_choice(pass_name, "sort", sort, ("total", "gain"))
    if isinstance(gains, bool) or not isinstance(gains, int) or gains < -1:
        raise PassError(f"pass {pass_name!r}: gains={gains!r} must be a number of rows (-1: all, 0: none)")
    ds = delay_settings or DelaySettings()
    long_term = ds.long_term
    res = pag.analyses.get(DELAY_COSTS, ds, owner=f"pass {pass_name!r}")
    total = res.total_wait if res.total_wait > 0 else 1.0
    c = res.costs[res.costs["cost"].to_numpy() > 1e-12 * total]  # drop rounding noise
    cv = c["vertex"].to_numpy()
    gone = np.where(cv >= 0, off_cpu_mask(pag)[np.maximum(cv, 0)], False)  # time off the CPU is no code's
    off_cpu = float(c["cost"].to_numpy()[gone].sum())
    direct = c[~c["propagating"].to_numpy()]
    prop = c[c["propagating"].to_numpy()]
    code = ~gone[~c["propagating"].to_numpy()], ~gone[c["propagating"].to_numpy()]

    def per(keys: list[str], code_only: bool = False) -> pd.DataFrame:
        return _sums(direct[code[0]], prop[code[1]], keys) if code_only else _sums(direct, prop, keys)

    bp = per(["process", "thread", "vertex"])
    top = _top_processes(bp)
    causes = _vertex_table(pag, per(["vertex"], code_only=True), top, c, total)
    causes.insert(
        causes.columns.get_loc("percent") + 1,
        GAIN,
        balance_gains(pag, causes["vertex"].to_numpy(), None, pass_name, rows=gains),
    )
    if sort == "gain":
        causes = causes.sort_values(GAIN, ascending=False, kind="stable", na_position="last").reset_index(drop=True)
    off = _off_cpu_table(pag, direct[~code[0]], prop[~code[1]], top, c, total)
    bp["percent"] = 100.0 * bp["total"] / total
    bp = bp.reset_index()
    _named(pag, bp, bp["vertex"].to_numpy(), 3)
    bp = bp.sort_values("total", ascending=False, kind="stable").reset_index(drop=True)
    summary = pd.DataFrame(
        {
            "mode": ["long-term" if long_term else "short-term"],
            "total_wait": [res.total_wait],
            "attributed": [float(c["cost"].to_numpy()[~gone].sum())],
            "propagating": [float(prop["cost"].sum())],
            "unattributed": [res.unattributed],
            "off_cpu": [off_cpu],
            "lost": [res.lost],
        }
    )
    return {"causes": causes, "by_process": bp, "summary": summary, "off_cpu": off}


#: Columns of the per-call-path tables (``causes`` adds ``gain [s]`` after ``percent``).
_COLS = ["vertex", "name", "call_path", "source", "cost", "propagating", "total", "percent"]


def _sums(direct: pd.DataFrame, prop: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``cost``, ``propagating`` and ``total`` per ``keys`` of the direct and propagating delay costs."""
    d = direct.groupby(keys)["cost"].sum().rename("cost")
    p = prop.groupby(keys)["cost"].sum().rename("propagating")
    out = pd.concat([d, p], axis=1).fillna(0.0)
    out["total"] = out["cost"] + out["propagating"]
    return out


def _named(pag: PAG, df: pd.DataFrame, v: np.ndarray, at: int) -> None:
    """Insert ``name``, ``call_path`` and ``source`` of vertices ``v`` (one per row) at column ``at``."""
    df.insert(at, "name", name_column(pag, v))
    df.insert(at + 1, "call_path", call_path_column(pag, v))
    df.insert(at + 2, "source", source_column(pag, v))


def _top_processes(bp: pd.DataFrame) -> pd.DataFrame:
    """Per vertex of ``by_process`` (indexed by process, thread, vertex): the delaying process with the largest
    share, ``top_process``, and that share, ``top_process_cost``."""
    per = bp["total"].groupby(level="vertex")
    top = per.idxmax()
    return pd.DataFrame(
        {"top_process": np.array([t[0] for t in top], dtype=np.int64), "top_process_cost": per.max().to_numpy()},
        index=top.index,
    )


def _vertex_table(
    pag: PAG, by_vertex: pd.DataFrame, top: pd.DataFrame, c: pd.DataFrame, total: float, code: np.ndarray | None = None
) -> pd.DataFrame:
    """One row per vertex of ``by_vertex`` (indexed by vertex) with its names, top process and wait kinds caused.

    With ``code`` (per row of the result, the vertex whose code it is), ``vertex`` and the names are that
    code's, and the row's own vertex moves to ``off_cpu_vertex``.
    """
    by_vertex = by_vertex.join(top, how="left")
    if len(by_vertex):
        cv = c[c["vertex"].isin(by_vertex.index)]
        kinds = cv.assign(wait_kind=cv["wait_kind"].astype(str)).groupby(["vertex", "wait_kind"])["cost"].sum()
        kinds = kinds[kinds > 0].sort_values(ascending=False)
        caused = {
            v: ", ".join(f"{k}:{a:.3g}" for (_, k), a in g.items()) for v, g in kinds.groupby(level=0, sort=False)
        }
        by_vertex["causes"] = pd.Series(caused, dtype=object).reindex(by_vertex.index).fillna("")
    else:
        by_vertex["causes"] = pd.Series(dtype=object)
    by_vertex["percent"] = 100.0 * by_vertex["total"] / total
    out = by_vertex.sort_values("total", ascending=False, kind="stable").reset_index()
    cols = [*_COLS, "top_process", "top_process_cost", "causes"]
    if code is not None:
        own = out["vertex"].to_numpy(dtype=np.int64)
        out["vertex"] = code(own)
        out.insert(1, "off_cpu_vertex", own)
        cols.insert(1, "off_cpu_vertex")
    _named(pag, out, out["vertex"].to_numpy(), 1)  # (``cols`` puts every column in its place)
    return out[cols]


def _off_cpu_table(
    pag: PAG, direct: pd.DataFrame, prop: pd.DataFrame, top: pd.DataFrame, c: pd.DataFrame, total: float
) -> pd.DataFrame:
    """The waiting caused while the delaying threads were off the CPU, per call path they were off it in.

    An ``off_cpu`` vertex sits below the frames that were waiting for the CPU (or blocked in a system
    call); its row is that code's: ``vertex`` the code's vertex and ``off_cpu_vertex`` its own.
    """
    parent = pag.vertex_table["parent"].to_numpy()

    def code(ov: np.ndarray) -> np.ndarray:
        return np.where(parent[ov] >= 0, parent[ov], ov) if len(ov) else ov

    return _vertex_table(pag, _sums(direct, prop, ["vertex"]), top, c, total, code=code)


@pass_(
    version="4",
    tags=("trace", "root-cause", "delay"),
    outputs={"causes": pd.DataFrame, "by_process": pd.DataFrame, "summary": pd.DataFrame, "off_cpu": pd.DataFrame},
)
@settings_keywords(DelaySettings, "delay_settings")
def root_cause(
    pag: PAG, *, gains: int = 20, sort: str = "total", delay_settings: DelaySettings
) -> dict[str, pd.DataFrame]:
    """The call paths that cause the waiting: delay costs of every idle wait state.

    For each wait state, the call paths on the delaying process that took
    longer than on the waiting process since the previous synchronisation
    point the two share get the wait in proportion to their excess time
    (short-term cost); the delaying process's own waiting in that interval is
    a propagating delay, which ``long_term=True`` passes back to the causes of
    those earlier waits so that all the cost lands on real work.

    Outputs
    -------
    causes
        One row per call path that delayed others, sorted by ``total``:
        ``vertex``, ``name``, ``call_path``, ``cost`` (direct delay cost, s),
        ``propagating`` (cost through its own waiting; 0 with long-term
        costs), ``total``, ``percent`` (of all waiting time analysed),
        ``gain [s]`` (the predicted saving in runtime if the call path's
        work were balanced over the locations: the what-if replay,
        :mod:`perflow.passes.whatif`; NaN beyond the first ``gains`` rows),
        ``top_process`` / ``top_process_cost`` (the delaying process with the
        largest share), ``causes`` (the wait kinds it caused, "kind:seconds";
        with long-term costs, the kind of the first wait of each chain).
    by_process
        The same per (``process``, ``thread``, ``vertex``) of the delaying side.
    summary
        One row: ``mode``, ``total_wait``, ``attributed``, ``propagating``,
        ``unattributed`` (waits with no positive delay), ``off_cpu`` (waiting
        caused by time the delaying processes spent off the CPU, descheduled or
        blocked outside MPI: a recorded run's ``off_cpu`` call paths, which are
        no code's: left out of ``causes``, kept in ``by_process`` to say who it
        was), ``lost`` (long-term shares with no later wait to go to).
    off_cpu
        The waiting caused off the CPU, per call path the delaying threads were
        off the CPU in (descheduled, as on an oversubscribed node, or blocked in
        a system call): the columns of ``causes`` without ``gain [s]``, with
        ``vertex`` the code's call path and ``off_cpu_vertex`` the ``off_cpu``
        vertex below it. Its ``total`` sums to the summary's ``off_cpu``.

    Parameters
    ----------
    gains : int
        Causes (from the top) whose gain is predicted (-1: all, 0: none).
    sort : str
        Order of ``causes``: by "total" cost or by predicted "gain".
    """
    return delay_tables(pag, "root_cause", delay_settings, gains=gains, sort=sort)
