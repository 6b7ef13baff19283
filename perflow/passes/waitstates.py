"""Wait-state analysis of traces (after Scalasca): instance tables and per-call-path summaries.

Passes
------
wait_states
    Every wait-state instance (point-to-point and collective): the table the
    timeline and Chrome-trace annotations draw.
p2p_wait_states
    Point-to-point instances only (Late Sender, its wrong-order and
    completion parts, Late Receiver).
late_sender
    Late Sender time per call path: where receivers wait, who they wait for.
wait_state_summary
    Any wait-state table aggregated per call path and kind, per process, or per kind.

:func:`waiting_time` is the one definition of the waiting time charged to a
call that every other consumer (``breakdown``, ``comm_summary``, the reports)
takes: per call instance, the length of the union of its idle wait-state
instances (so it never exceeds the call's duration), split over the families
Late Sender, Late Receiver and collective in that order of precedence.

The formulas are those of :mod:`perflow.trace.waits` (module docstring); in
short, with ``E``/``L`` the enter/leave of the MPI calls involved: Late Sender
``max(0, min(Es, Lr) - Er)`` (maximum over the messages a Waitall completes,
charged once; MPI_Test* completions are no waits), its completion
``max(0, Lr - Ls)``, Late Receiver ``Erq - Esc`` when ``Lsc > Erq``; in a
call that both receives and sends (MPI_Sendrecv) they partition its time.
Every pass here takes the wait-state settings of
:class:`perflow.trace.waits.WaitSettings` (``wrong_order_window``,
``late_receiver``, ``early_reduce``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, WaitSettings, pass_, settings_keywords
from perflow.sdk.render import declare_aggregates, format_value
from perflow.sdk.trace import (
    WAIT_COLUMNS,
    WAIT_KINDS,
    call_path_column,
    check_choice,
    kind_list,
    n_locations,
    name_column,
    require_trace,
    waits_for,
)

from ._waittime import WAIT_FAMILIES, charge_waits, waiting_time

__all__ = [
    "wait_states",
    "p2p_wait_states",
    "late_sender",
    "wait_state_summary",
    "instance_table",
    "waiting_time",
    "charge_waits",
    "WAIT_FAMILIES",
]

_LS_KINDS = ["late_sender", "late_sender_wrong_order_same", "late_sender_wrong_order_diff"]


def instance_table(
    pag: PAG,
    pass_name: str,
    kinds: list[str] | None,
    family: str | None,
    wait_settings: WaitSettings,
    min_amount: float,
) -> pd.DataFrame:
    """The wait-state instances of ``pag`` restricted to some kinds, with a ``name`` column (a new frame)."""
    w = waits_for(pag, pass_name, wait_settings)
    ks = kind_list(pass_name, kinds, family)
    sel = w["kind"].isin(ks).to_numpy()
    if min_amount > 0:
        sel &= w["amount"].to_numpy() >= min_amount
    out = (w if sel.all() else w[sel]).reset_index(drop=True)  # all of them: shares the columns (copy on write)
    out.insert(out.columns.get_loc("vertex") + 1, "name", name_column(pag, out["vertex"].to_numpy()))
    out.attrs = dict(w.attrs)
    return out


@pass_(version="2", tags=("trace", "wait-states"))
@settings_keywords(WaitSettings, "wait_settings")
def wait_states(
    pag: PAG, *, kinds: list[str] | None = None, min_amount: float = 0.0, wait_settings: WaitSettings
) -> pd.DataFrame:
    """Every wait-state instance of a trace, point-to-point and collective.

    One row per instance, sorted by (process, thread, start), with columns
    ``process``, ``thread``, ``start``, ``end`` (the waiting period, s),
    ``kind``, ``amount`` (s), ``vertex``, ``name`` (the waiting MPI call),
    ``interval`` (its row in ``pag.trace.intervals``), ``cause_process``,
    ``cause_thread``, ``cause_time``, ``cause_interval`` (who was waited for
    and when it entered its call), ``message`` / ``instance`` (the message
    row or collective instance). Kinds are listed in
    :data:`perflow.trace.waits.WAIT_KINDS`; completion kinds are not idle
    time. ``attrs`` counts messages left out: ``clock_violations``,
    ``unattributed_messages``, ``test_completions``.

    Parameters
    ----------
    kinds : list of str, optional
        Keep only these kinds (default: all).
    min_amount : float
        Drop instances shorter than this many seconds.
    """
    return instance_table(pag, "wait_states", kinds, None, wait_settings, min_amount)


@pass_(version="2", tags=("trace", "wait-states", "p2p"))
@settings_keywords(WaitSettings, "wait_settings")
def p2p_wait_states(pag: PAG, *, min_amount: float = 0.0, wait_settings: WaitSettings) -> pd.DataFrame:
    """Point-to-point wait-state instances: Late Sender (in and out of order), its completion, Late Receiver.

    Same columns as :func:`wait_states`.

    Parameters
    ----------
    min_amount : float
        Drop instances shorter than this many seconds.
    """
    return instance_table(pag, "p2p_wait_states", None, "p2p", wait_settings, min_amount)


@pass_(version="3", tags=("trace", "wait-states", "p2p"))
@settings_keywords(WaitSettings, "wait_settings")
def late_sender(pag: PAG, *, top_causes: int = 3, wait_settings: WaitSettings) -> pd.DataFrame:
    """Late Sender time per call path of the waiting receive, with who was waited for.

    One row per call path that waited, sorted by ``late_sender_total``:
    ``vertex``, ``name``, ``call_path``, ``late_sender`` (in-order part),
    ``wrong_order_same``, ``wrong_order_diff``, ``late_sender_total`` (the
    sum), ``completion`` (time after the late send had left), ``instances``,
    ``max_process`` / ``max_process_time`` (the process that waited most
    there) and ``waited_for`` (the sending processes that caused the most
    waiting there, as "rank:time" pairs, e.g. ``3:44.5 ms``).

    Parameters
    ----------
    top_causes : int
        How many sending processes to list in ``waited_for``.
    """
    w = waits_for(pag, "late_sender", wait_settings)
    ls = w[w["kind"].isin([*_LS_KINDS, "late_sender_completion"]).to_numpy()]
    cols = [
        "vertex",
        "name",
        "call_path",
        "late_sender",
        "wrong_order_same",
        "wrong_order_diff",
        "late_sender_total",
        "completion",
        "instances",
        "max_process",
        "max_process_time",
        "waited_for",
    ]
    if not len(ls):
        return pd.DataFrame({c: [] for c in cols})
    piv = ls.pivot_table(index="vertex", columns="kind", values="amount", aggfunc="sum", observed=True, fill_value=0.0)
    out = pd.DataFrame(index=piv.index)
    for src, dst in (
        ("late_sender", "late_sender"),
        ("late_sender_wrong_order_same", "wrong_order_same"),
        ("late_sender_wrong_order_diff", "wrong_order_diff"),
        ("late_sender_completion", "completion"),
    ):
        out[dst] = piv[src] if src in piv.columns else 0.0
    out["late_sender_total"] = out["late_sender"] + out["wrong_order_same"] + out["wrong_order_diff"]
    idle = ls[ls["kind"].isin(_LS_KINDS).to_numpy()]
    out["instances"] = idle.groupby("vertex").size().reindex(out.index, fill_value=0)
    per_proc = idle.groupby(["vertex", "process"])["amount"].sum()
    if len(per_proc):
        top = per_proc.groupby(level=0).idxmax()
        out["max_process"] = pd.Series({v: p for v, (_, p) in top.items()}).reindex(out.index).fillna(-1).astype(int)
        out["max_process_time"] = per_proc.groupby(level=0).max().reindex(out.index).fillna(0.0)
    else:
        out["max_process"] = -1
        out["max_process_time"] = 0.0
    by_cause = idle.groupby(["vertex", "cause_process"])["amount"].sum().sort_values(ascending=False)
    waited = {
        v: ", ".join(f"{int(p)}:{format_value(a, 's')}" for (_, p), a in g.head(max(int(top_causes), 0)).items())
        for v, g in by_cause.groupby(level=0, sort=False)
    }
    out["waited_for"] = pd.Series(waited).reindex(out.index).fillna("")
    out = out[out["late_sender_total"] > 0].sort_values("late_sender_total", ascending=False).reset_index()
    out.insert(1, "name", name_column(pag, out["vertex"].to_numpy()))
    out.insert(2, "call_path", call_path_column(pag, out["vertex"].to_numpy()))
    out = out[cols]
    declare_aggregates(
        out, pag, ["late_sender", "wrong_order_same", "wrong_order_diff", "late_sender_total", "completion"]
    )
    return out


def _categorical(kind: pd.Series) -> bool:
    return isinstance(kind.dtype, pd.CategoricalDtype) and not bool((kind.cat.codes.to_numpy() < 0).any())


def _kind_ranks(kind: pd.Series) -> tuple[np.ndarray | None, np.ndarray]:
    """A categorical kind column (no missing value) as each row's rank among its sorted names, and those names.

    Grouping by the ranks orders the groups as grouping by the names as text does (``astype(str)``
    of millions of rows costs ~0.5 s at 20 M events); anything else: ``(None, [])``.
    """
    if not _categorical(kind):
        return None, np.zeros(0, dtype=object)
    names = np.asarray(kind.cat.categories.astype(str), dtype=object)
    order = np.argsort(names, kind="stable")
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    return rank[kind.cat.codes.to_numpy()], names[order]


@pass_(version="3", tags=("trace", "wait-states"))
@settings_keywords(WaitSettings, "wait_settings")
def wait_state_summary(
    pag: PAG,
    waits: pd.DataFrame | None = None,
    *,
    by: str = "vertex",
    idle_only: bool = False,
    wait_settings: WaitSettings,
) -> pd.DataFrame:
    """Aggregate wait-state instances per call path and kind, per process, or per kind.

    ``by="vertex"``: one row per (call path, kind) with ``vertex``, ``name``,
    ``call_path``, ``kind``, ``amount`` (s, summed), ``instances``,
    ``processes`` (how many waited there), ``max_process`` and
    ``max_process_time`` (the process that waited most), ``percent`` (of the
    total time of all locations, span x locations). ``by="process"``: one row
    per (process, thread, kind) with ``amount``, ``instances``, ``percent``
    (of the span). ``by="kind"``: one row per kind with ``amount``,
    ``instances``, ``idle`` (whether the kind is waiting time rather than
    completion), ``description``, ``percent``. Sorted by ``amount``.

    Parameters
    ----------
    waits : pandas.DataFrame, optional
        A wait-state table (from wait_states, p2p_wait_states, collective_wait_states);
        computed with the settings below when absent.
    by : str
        "vertex", "process" or "kind".
    idle_only : bool
        Leave out the completion kinds.
    """
    check_choice("wait_state_summary", "by", by, ("vertex", "process", "kind"))
    trace = require_trace(pag, "wait_state_summary")
    w = waits if waits is not None else waits_for(pag, "wait_state_summary", wait_settings)
    missing = [c for c in ("process", "thread", "kind", "amount", "vertex") if c not in w.columns]
    if missing:
        raise PassError(
            f"pass 'wait_state_summary': the waits table lacks the columns {missing} (expected {list(WAIT_COLUMNS)})"
        )
    if idle_only:
        w = w[w["kind"].astype(str).map(lambda k: WAIT_KINDS[k].idle if k in WAIT_KINDS else True).to_numpy()]
    t0, t1 = trace.span
    span = max(t1 - t0, 1e-300)
    nloc = n_locations(pag)
    if by == "kind":
        kind = w["kind"].astype(str)
        g = w.groupby(kind)["amount"].agg(["sum", "size"]).rename(columns={"sum": "amount", "size": "instances"})
        g.index.name = "kind"
        g = g.reset_index()
        g["idle"] = g["kind"].map(lambda k: WAIT_KINDS[k].idle if k in WAIT_KINDS else True)
        g["description"] = g["kind"].map(lambda k: WAIT_KINDS[k].description if k in WAIT_KINDS else "")
        g["percent"] = 100.0 * g["amount"] / (span * nloc)
        g = g.sort_values("amount", ascending=False, kind="stable").reset_index(drop=True)
        declare_aggregates(g, pag, ["amount"])
        return g
    if by == "process":
        kind = w["kind"].astype(str)
        g = w.assign(kind=kind).groupby(["process", "thread", "kind"])["amount"].agg(["sum", "size"]).reset_index()
        g = g.rename(columns={"sum": "amount", "size": "instances"})
        g["percent"] = 100.0 * g["amount"] / span
        return g.sort_values("amount", ascending=False, kind="stable").reset_index(drop=True)
    ranks, sorted_kinds = _kind_ranks(w["kind"])
    w2 = w.assign(kind=w["kind"].astype(str) if ranks is None else ranks)
    g = (
        w2.groupby(["vertex", "kind"])["amount"]
        .agg(["sum", "size"])
        .rename(columns={"sum": "amount", "size": "instances"})
    )
    pp = w2.groupby(["vertex", "kind", "process"])["amount"].sum()
    g["processes"] = pp.groupby(level=[0, 1]).size()
    idx = pp.groupby(level=[0, 1]).idxmax()
    g["max_process"] = [t[2] for t in idx.reindex(g.index)]
    g["max_process_time"] = pp.groupby(level=[0, 1]).max()
    g = g.reset_index()
    if ranks is not None:  # the names back on the (small) result: what grouping by the strings gives
        g["kind"] = pd.array(sorted_kinds[g["kind"].to_numpy()], dtype=w["kind"].head(0).astype(str).dtype)
    v = g["vertex"].to_numpy()
    g.insert(1, "name", name_column(pag, v))
    g.insert(2, "call_path", call_path_column(pag, v))
    g["percent"] = 100.0 * g["amount"] / (span * nloc)
    g = g.sort_values("amount", ascending=False, kind="stable").reset_index(drop=True)
    declare_aggregates(g, pag, ["amount"])
    return g
