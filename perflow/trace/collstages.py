"""Waits over partitions: Late Sender per message, waiting time per collective participant.

The formulas are those of :mod:`perflow.pag.edges`; this module finds their
inputs when the participants are spread over partitions.

**Late Sender** (:func:`late_sender`) needs the enter time of the region that
issued the send and the enter/leave of the region that completed the receive.
The send record carries the former (``send_enter``), so a message's wait is
computed where the message row lives (the receiver's partition) with
:func:`perflow.pag.edges.message_late_sender`.

**Collective waits** need, per instance, the latest arrival over all
participants. Each partition reduces its rows to per-instance partials
(:func:`collective_partial`: latest begin, the lowest (process, thread)
arriving then, bytes moved), the partials are combined in a reduction tree
(:func:`combine_collective`), and each partition computes its rows' waits
``max(0, min(latest, L_i) - E_i)`` from the combined arrays
(:func:`collective_rows_wait`) with
:func:`perflow.pag.edges.collective_row_wait` (the last arriver is the lowest
(process, thread) among the latest).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._jit import compiled_for, njit
from ..pag.edges import collective_row_wait, message_late_sender

__all__ = ["late_sender", "collective_partial", "combine_collective", "collective_rows_wait"]


def late_sender(messages: pd.DataFrame) -> np.ndarray:
    """Late Sender waiting time of each message row (see the module docstring)."""
    if not len(messages):
        return np.zeros(0)
    ok = (
        (messages["send_interval"].to_numpy() >= 0)
        & (messages["recv_interval"].to_numpy() >= 0)
        & ~messages["clock_violation"].to_numpy()
    )
    return message_late_sender(
        ok, messages["send_enter"].to_numpy(), messages["recv_enter"].to_numpy(), messages["recv_leave"].to_numpy()
    )


def collective_partial(coll: pd.DataFrame) -> pd.DataFrame:
    """Per instance of this partition's rows: ``latest`` begin, ``proc``/``thr`` of the first latest, ``moved`` bytes."""
    if not len(coll):
        return pd.DataFrame(
            {"instance": np.zeros(0, np.int64), "latest": np.zeros(0), "proc": np.zeros(0, np.int64),
             "thr": np.zeros(0, np.int64), "moved": np.zeros(0), "members": np.zeros(0, np.int64)}
        )  # fmt: skip
    inst = coll["instance"].to_numpy().astype(np.int64)
    begin = coll["begin"].to_numpy()
    proc = coll["process"].to_numpy().astype(np.int64)
    thr = coll["thread"].to_numpy().astype(np.int64)
    moved = (coll["sent"].to_numpy() + coll["received"].to_numpy()).astype(np.float64)
    lo, hi = int(inst.min()), int(inst.max())
    if compiled_for(len(inst)) and lo >= 0 and hi < 4 * len(inst) and begin.dtype == np.float64:
        # one compiled pass over dense instance ids (the sort below picks the same rows and sums alike)
        best = np.full(hi + 1, -1, dtype=np.int64)
        sums, counts = np.zeros(hi + 1), np.zeros(hi + 1, dtype=np.int64)
        _latest_per_instance(inst, begin, proc, thr, moved, best, sums, counts)
        uniq = np.flatnonzero(counts)
        rows = best[uniq]
        return pd.DataFrame(
            {"instance": uniq, "latest": begin[rows], "proc": proc[rows], "thr": thr[rows],
             "moved": sums[uniq], "members": counts[uniq]}
        )  # fmt: skip
    # latest begin, ties to the lowest (process, thread): sort so the wanted row is first per instance
    order = np.lexsort((thr, proc, -begin, inst))
    i_s = inst[order]
    first = np.r_[True, i_s[1:] != i_s[:-1]]
    rows = order[first]
    uniq = inst[rows]
    return pd.DataFrame(
        {
            "instance": uniq,
            "latest": begin[rows],
            "proc": proc[rows],
            "thr": thr[rows],
            "moved": np.bincount(np.searchsorted(uniq, inst), weights=moved, minlength=len(uniq)),
            "members": np.bincount(np.searchsorted(uniq, inst), minlength=len(uniq)),
        }
    )


@njit
def _latest_per_instance(inst, begin, proc, thr, moved, best, sums, counts):  # noqa: ANN001, ANN202
    """Per instance id: the row of the latest begin (NaN last; ties to the lowest (process, thread), then the
    first row), the sum of ``moved`` in row order and the row count."""
    for i in range(len(inst)):
        k = inst[i]
        sums[k] += moved[i]
        counts[k] += 1
        j = best[k]
        if j < 0:
            best[k] = i
            continue
        b, bj = begin[i], begin[j]
        if np.isnan(b):
            continue
        if np.isnan(bj) or b > bj or (b == bj and (proc[i] < proc[j] or (proc[i] == proc[j] and thr[i] < thr[j]))):
            best[k] = i


def combine_collective(*parts: pd.DataFrame) -> pd.DataFrame:
    """Combine partials: maximum ``latest`` (ties to the lowest (process, thread)), summed ``moved``/``members``."""
    df = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
    if not len(df):
        return df
    inst = df["instance"].to_numpy()
    order = np.lexsort((df["thr"].to_numpy(), df["proc"].to_numpy(), -df["latest"].to_numpy(), inst))
    i_s = inst[order]
    first = order[np.r_[True, i_s[1:] != i_s[:-1]]]
    uniq = inst[first]
    pos = np.searchsorted(uniq, inst)
    return pd.DataFrame(
        {
            "instance": uniq,
            "latest": df["latest"].to_numpy()[first],
            "proc": df["proc"].to_numpy()[first],
            "thr": df["thr"].to_numpy()[first],
            "moved": np.bincount(pos, weights=df["moved"].to_numpy(), minlength=len(uniq)),
            "members": np.bincount(pos, weights=df["members"].to_numpy(), minlength=len(uniq)).astype(np.int64),
        }
    )


def collective_rows_wait(coll: pd.DataFrame, combined: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Waiting time of each collective row and whether it is its instance's last arriver."""
    if not len(coll):
        return np.zeros(0), np.zeros(0, dtype=bool)
    inst = coll["instance"].to_numpy().astype(np.int64)
    j = np.searchsorted(combined["instance"].to_numpy(), inst)
    w = collective_row_wait(
        coll["op"].to_numpy(),
        combined["latest"].to_numpy()[j],
        coll["begin"].to_numpy(),
        coll["end"].to_numpy(),
        combined["moved"].to_numpy()[j],
    )
    is_last = (coll["process"].to_numpy() == combined["proc"].to_numpy()[j]) & (
        coll["thread"].to_numpy() == combined["thr"].to_numpy()[j]
    )
    return w, is_last
