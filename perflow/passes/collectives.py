"""Collective wait states (after Scalasca): Wait at Barrier / N x N and their completion,
Late Broadcast, Early Reduce, Early Scan.

With ``E_i``/``L_i`` the enter/leave of participant ``i``'s MPI call in one
collective instance:

* Wait at Barrier / Wait at N x N: ``max(0, min(max_j E_j, L_i) - E_i)``;
* Barrier / N x N completion: ``max(0, L_i - max(min_j L_j, min(max_j E_j, L_i)))``;
* Late Broadcast (1-to-N): ``max(0, min(E_root, L_i) - E_i)`` for non-roots;
* Early Reduce (N-to-1): ``max(0, min(max_{j != root} E_j, L_root) - E_root)`` for the root;
* Early Scan: ``max(0, min(max_{j < k} E_j, L_k) - E_k)`` for communicator rank ``k``.

A data collective that moves zero bytes over all participants is no
synchronisation point; barriers always are, and MPI_Init / MPI_Finalize count
as world barriers.
"""

from __future__ import annotations

import pandas as pd

from perflow.sdk import PAG, WaitSettings, pass_, settings_keywords
from perflow.sdk.trace import call_path_column, name_column, waits_for

from .waitstates import instance_table

__all__ = ["collective_wait_states", "collective_waits_by_operation"]


@pass_(version="1", tags=("trace", "wait-states", "collective"))
@settings_keywords(WaitSettings, "wait_settings")
def collective_wait_states(pag: PAG, *, min_amount: float = 0.0, wait_settings: WaitSettings) -> pd.DataFrame:
    """Collective wait-state instances, one row per waiting participant and kind.

    Same columns as ``wait_states``: ``process``, ``thread``, ``start``,
    ``end``, ``kind``, ``amount``, ``vertex``, ``name``, ``interval``,
    ``cause_process``/``cause_thread``/``cause_time``/``cause_interval`` (the
    last to arrive, the root, or the latest sender), ``instance``.

    Parameters
    ----------
    min_amount : float
        Drop instances shorter than this many seconds.
    """
    return instance_table(pag, "collective_wait_states", None, "collective", wait_settings, min_amount)


@pass_(version="1", tags=("trace", "wait-states", "collective"))
@settings_keywords(WaitSettings, "wait_settings")
def collective_waits_by_operation(pag: PAG, *, wait_settings: WaitSettings) -> pd.DataFrame:
    """Collective waiting time per call path of the collective call, with the process most waited for.

    One row per (call path, kind): ``vertex``, ``name``, ``call_path``,
    ``kind``, ``amount`` (s), ``instances`` (collective instances with
    waiting), ``max_wait`` (longest single wait), ``last_arriver`` (the
    process that most often arrived last, i.e. was waited for) and
    ``last_arriver_share`` (the share of the waiting it caused). Sorted by
    ``amount``.
    """
    w = waits_for(pag, "collective_waits_by_operation", wait_settings)
    cw = w[(w["instance"].to_numpy() >= 0) & (w["cause_process"].to_numpy() >= 0)].assign(
        kind=lambda d: d["kind"].astype(str)
    )
    cols = [
        "vertex",
        "name",
        "call_path",
        "kind",
        "amount",
        "instances",
        "max_wait",
        "last_arriver",
        "last_arriver_share",
    ]
    if not len(cw):
        return pd.DataFrame({c: [] for c in cols})
    g = cw.groupby(["vertex", "kind"]).agg(
        amount=("amount", "sum"), instances=("instance", "nunique"), max_wait=("amount", "max")
    )
    by_cause = cw.groupby(["vertex", "kind", "cause_process"])["amount"].sum()
    top = by_cause.groupby(level=[0, 1]).idxmax().reindex(g.index)
    g["last_arriver"] = [t[2] for t in top]
    g["last_arriver_share"] = (by_cause.groupby(level=[0, 1]).max() / g["amount"]).reindex(g.index)
    g = g.reset_index()
    v = g["vertex"].to_numpy()
    g.insert(1, "name", name_column(pag, v))
    g.insert(2, "call_path", call_path_column(pag, v))
    return g[cols].sort_values("amount", ascending=False, kind="stable").reset_index(drop=True)
