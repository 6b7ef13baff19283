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
    causes = _vertex_table(pag, per(["vertex"], code_only=True), bp, c, total)
    causes.insert(
        causes.columns.get_loc("percent") + 1,
        GAIN,
        balance_gains(pag, causes["vertex"].to_numpy(), None, pass_name, rows=gains),
    )
    if sort == "gain":
        causes = causes.sort_values(GAIN, ascending=False, kind="stable", na_position="last").reset_index(drop=True)
    off = _off_cpu_table(pag, direct[~code[0]], prop[~code[1]], bp, c, total)
    bp["percent"] = 100.0 * bp["total"] / total
    bp = bp.reset_index()
    v = bp["vertex"].to_numpy()
    bp.insert(3, "name", name_column(pag, v))
    bp.insert(4, "call_path", call_path_column(pag, v))
    bp.insert(5, "source", source_column(pag, v))
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


def _vertex_table(pag: PAG, by_vertex: pd.DataFrame, bp: pd.DataFrame, c: pd.DataFrame, total: float) -> pd.DataFrame:
    """One row per vertex of ``by_vertex`` (indexed by vertex) with its names, top process and wait kinds caused."""
    by_vertex = by_vertex.copy()
    if len(by_vertex):
        top = bp["total"].groupby(level="vertex").idxmax()
        by_vertex["top_process"] = [t[0] for t in top.reindex(by_vertex.index)]
        by_vertex["top_process_cost"] = bp["total"].groupby(level="vertex").max().reindex(by_vertex.index)
        cv = c[c["vertex"].isin(by_vertex.index)]
        kinds = cv.assign(wait_kind=cv["wait_kind"].astype(str)).groupby(["vertex", "wait_kind"])["cost"].sum()
        kinds = kinds[kinds > 0].sort_values(ascending=False)
        by_vertex["causes"] = (
            pd.Series(
                {
                    v: ", ".join(f"{k}:{a:.3g}" for (_, k), a in g.items())
                    for v, g in kinds.groupby(level=0, sort=False)
                },
                dtype=object,
            )
            .reindex(by_vertex.index)
            .fillna("")
        )
    else:
        by_vertex["top_process"] = pd.Series(dtype=np.int64)
        by_vertex["top_process_cost"] = pd.Series(dtype=np.float64)
        by_vertex["causes"] = pd.Series(dtype=object)
    by_vertex["percent"] = 100.0 * by_vertex["total"] / total
    out = by_vertex.reset_index()
    v = out["vertex"].to_numpy()
    out.insert(1, "name", name_column(pag, v))
    out.insert(2, "call_path", call_path_column(pag, v))
    out.insert(3, "source", source_column(pag, v))
    out = out[[*_COLS, "top_process", "top_process_cost", "causes"]]
    return out.sort_values("total", ascending=False, kind="stable").reset_index(drop=True)


def _off_cpu_table(
    pag: PAG, direct: pd.DataFrame, prop: pd.DataFrame, bp: pd.DataFrame, c: pd.DataFrame, total: float
) -> pd.DataFrame:
    """The waiting caused while the delaying threads were off the CPU, per call path they were off it in.

    An ``off_cpu`` vertex sits below the frames that were waiting for the CPU (or blocked outside
    MPI); its row is that code's, ``vertex`` the code's vertex and ``off_cpu_vertex`` its own.
    """
    by_off = _sums(direct, prop, ["vertex"])
    table = _vertex_table(pag, by_off, bp, c, total)
    ov = table["vertex"].to_numpy(dtype=np.int64)
    parent = pag.vertex_table["parent"].to_numpy()[ov] if len(ov) else np.zeros(0, np.int64)
    code = np.where(parent >= 0, parent, ov)
    table.insert(1, "off_cpu_vertex", ov)
    table["vertex"] = code
    table["name"] = name_column(pag, code)
    table["call_path"] = call_path_column(pag, code)
    table["source"] = source_column(pag, code)
    return table


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
