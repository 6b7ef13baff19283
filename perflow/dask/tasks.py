"""Functions that run inside Dask tasks on the workers (module-level, so they pickle by reference).

Each wraps the plain numpy/pandas code of :mod:`.local`, :mod:`.match`,
:mod:`.aggregate` and :mod:`.waitstates`; objects they return stay on the
worker that computed them until a later task needs them elsewhere.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from ..errors import FormatError
from ..trace.raw import RawTrace
from . import aggregate as agg
from .local import PartState, PartTables, finalize, scan_part, summarize
from .match import match_records, outbox
from .merge import merge_summaries
from .split import EVENT_TABLES
from .waitstates import collective_partial, collective_rows_wait, combine_collective, late_sender

F = TypeVar("F", bound=Callable[..., Any])


def _nbytes(obj: Any) -> int:
    """Bytes held by the numpy arrays and pandas frames among an object's attributes (one level deep)."""
    total = 0
    for v in vars(obj).values():
        if isinstance(v, np.ndarray):
            total += v.nbytes
        elif isinstance(v, pd.DataFrame):
            total += int(v.memory_usage(index=False, deep=False).sum())
        elif isinstance(v, dict):
            for a in v.values():
                if isinstance(a, np.ndarray):
                    total += a.nbytes
                elif isinstance(a, tuple):
                    total += sum(x.nbytes for x in a if isinstance(x, np.ndarray))
        elif isinstance(v, RawTrace):
            total += _nbytes_raw(v)
    return total


def _nbytes_raw(raw: RawTrace) -> int:
    return sum(a.nbytes for t in EVENT_TABLES for a in getattr(raw, t).values())


try:  # tell Dask's memory manager what the partition objects weigh (sys.getsizeof would say ~100 bytes)
    from dask.sizeof import sizeof as _sizeof

    _sizeof.register(PartState)(_nbytes)
    _sizeof.register(PartTables)(_nbytes)
    _sizeof.register(RawTrace)(_nbytes_raw)
except ImportError:  # pragma: no cover - dask absent: nothing to register
    pass


class RemoteFormatError(Exception):
    """A :class:`~perflow.errors.FormatError` in transit from a worker (its parts pickle; it does not)."""

    def __init__(self, path: str, reason: str, where: str | None) -> None:
        super().__init__(path, reason, where)

    def restore(self) -> FormatError:
        """The original error."""
        return FormatError(*self.args)


def remote(fn: F) -> F:
    """Make a task's FormatError survive the trip to the client."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FormatError as e:
            raise RemoteFormatError(e.path, e.reason, e.where) from None

    return wrapper  # type: ignore[return-value]


@remote
def t_scan(pid: int, raw: Any, close_open: bool, validate: bool, infer: bool) -> PartState:
    """Step 1 on one partition."""
    return scan_part(pid, raw, close_open=close_open, validate=validate, infer=infer)


def t_summary(st: PartState) -> dict[str, Any]:
    """The summary of step 1 (small)."""
    return summarize(st)


def t_merge(n_locations: int, *summaries: dict[str, Any]) -> dict[str, Any]:
    """Merge all summaries into the global numbering (runs on one worker)."""
    return merge_summaries(list(summaries), n_locations)


def t_tree(merged: dict[str, Any]) -> dict[str, Any]:
    """The part of the merge the client needs: the calling-context tree and table sizes."""
    keys = ("cp_parent", "cp_region", "n_intervals", "n_instances", "threaded", "p2p_off")
    return {k: merged[k] for k in keys}


def t_finalize(st: PartState, merged: dict[str, Any]) -> PartTables:
    """Step 2 on one partition (the partition's raw events are released afterwards)."""
    maps = {
        "cp_map": merged["cp_maps"][st.pid],
        "inst_off": merged["inst_off"],
        "p2p_off": merged["p2p_off"],
        "coll_keys": merged["coll_keys"],
        "coll_ids": merged["coll_ids"],
        "threaded": merged["threaded"],
    }
    return finalize(st, maps)


def _part_of(processes: np.ndarray, assign: np.ndarray, proc: np.ndarray) -> np.ndarray:
    if not len(processes):
        return np.full(len(proc), -1, dtype=np.int64)
    i = np.clip(np.searchsorted(processes, proc), 0, len(processes) - 1)
    return np.where(processes[i] == proc, assign[i], -1)


def t_outbox(t: PartTables, processes: np.ndarray, assign: np.ndarray, n_parts: int) -> list[pd.DataFrame]:
    """This partition's send records, one frame per destination partition."""
    return outbox(t.sends, _part_of(processes, assign, t.sends["dst"].to_numpy()), n_parts)


def t_sizes(box: list[pd.DataFrame]) -> list[int]:
    """Rows per destination of an outbox."""
    return [len(x) for x in box]


def t_pick(box: list[pd.DataFrame], j: int) -> pd.DataFrame:
    """One destination's frame of an outbox (runs where the outbox is)."""
    return box[j]


def t_match(
    t: PartTables, processes: np.ndarray, assign: np.ndarray, n_parts: int, *inbound: pd.DataFrame
) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """Match this partition's receives; return its message rows (with Late Sender wait) and acks per sender partition."""
    m = match_records(t.recvs, list(inbound))
    m["late_sender_wait"] = late_sender(m)
    spart = _part_of(processes, assign, m["send_process"].to_numpy().astype(np.int64))
    acks = []
    for j in range(n_parts):
        sel = (spart == j) & (j != t.pid)
        acks.append(
            pd.DataFrame({"send_interval": m["send_interval"].to_numpy()[sel], "bytes": m["bytes"].to_numpy()[sel]})
        )
    return m, acks


def t_strip(t: PartTables, matched: Any) -> PartTables:
    """A copy of the tables without the send/receive records (consumed by the matching), keeping their counts."""
    return dataclasses.replace(
        t, sends=t.sends.iloc[:0], recvs=t.recvs.iloc[:0], n_sends=len(t.sends), n_recvs=len(t.recvs)
    )


def t_first(x: tuple[Any, ...]) -> Any:
    """Element 0 of a tuple result."""
    return x[0]


def t_second(x: tuple[Any, ...]) -> Any:
    """Element 1 of a tuple result."""
    return x[1]


def t_rows(
    t: PartTables, messages: pd.DataFrame, loc_proc: np.ndarray, loc_thr: np.ndarray, *acks: pd.DataFrame
) -> tuple[pd.DataFrame, dict[str, Any], bool]:
    """This partition's final metric rows (see :func:`.aggregate.metric_rows`)."""
    return agg.metric_rows(t, messages, list(acks), loc_proc, loc_thr)


def t_coll_partial(t: PartTables) -> pd.DataFrame:
    """Per-instance partial of this partition's collective rows."""
    return collective_partial(t.coll)


def t_coll_combine(*parts: pd.DataFrame) -> pd.DataFrame:
    """One level of the collective reduction tree."""
    return combine_collective(*parts)


def t_coll_wait(t: PartTables, combined: pd.DataFrame) -> pd.DataFrame:
    """This partition's collective rows with ``wait`` and ``last`` columns."""
    c = t.coll.copy() if len(t.coll) else t.coll
    if len(c):
        w, last = collective_rows_wait(c, combined)
        c["wait"] = w
        c["last"] = last
    return c


def t_stats(rows: tuple[pd.DataFrame, Any, bool], metric: str, across: str, n_vertices: int) -> dict[str, np.ndarray]:
    """Per-vertex partial statistics of one metric."""
    return agg.partial_stats(rows[0], metric, across, n_vertices)


def t_combine_stats(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One level of the statistics reduction tree."""
    return agg.combine_stats(list(parts))


def t_comm(messages: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per (sender, receiver) sums of this partition's messages."""
    return agg.comm_partial(messages, metric)


def t_concat(*frames: pd.DataFrame) -> pd.DataFrame:
    """Concatenate frames (a reduction-tree level for sparse partials)."""
    fr = [f for f in frames if len(f)]
    return pd.concat(fr, ignore_index=True) if fr else frames[0]


def t_comm_combine(*frames: pd.DataFrame) -> pd.DataFrame:
    """Sum (src, dst) partials."""
    df = t_concat(*frames)
    return df.groupby(["src", "dst"], sort=True)["w"].sum().reset_index() if len(df) else df


def t_wait_by_vertex(
    t: PartTables, messages: pd.DataFrame, coll: pd.DataFrame, n_vertices: int
) -> dict[str, np.ndarray]:
    """Per-vertex Late Sender (receiving vertex) and collective waiting time of this partition."""
    vx = t.intervals["vertex"].to_numpy().astype(np.int64)

    def vert(g: np.ndarray) -> np.ndarray:
        i = np.clip(np.searchsorted(t.ginst, g), 0, max(len(t.ginst) - 1, 0))
        ok = (g >= 0) & (len(t.ginst) > 0)
        ok &= t.ginst[i] == g if len(t.ginst) else ok
        return np.where(ok, vx[i] if len(vx) else -1, -1)

    out = {}
    for name, g, w in (
        ("late_sender", messages["recv_interval"].to_numpy() if len(messages) else np.zeros(0, np.int64),
         messages["late_sender_wait"].to_numpy() if len(messages) else np.zeros(0)),
        ("collective_wait", coll["interval"].to_numpy() if len(coll) else np.zeros(0, np.int64),
         coll["wait"].to_numpy() if len(coll) else np.zeros(0)),
    ):  # fmt: skip
        v = vert(np.asarray(g, dtype=np.int64))
        ok = v >= 0
        out[name] = np.bincount(v[ok], weights=np.asarray(w)[ok], minlength=n_vertices)
    return out


def t_add(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Sum dicts of arrays."""
    return {k: sum(p[k] for p in parts) for k in parts[0]}


def t_gather_part(t: PartTables, messages: pd.DataFrame, coll: pd.DataFrame) -> dict[str, Any]:
    """The instance tables of one partition, for the gathered Trace."""
    return {"intervals": t.intervals, "ginst": t.ginst, "messages": messages, "coll": coll}


def t_info(t: PartTables, rows: tuple[pd.DataFrame, Any, bool], messages: pd.DataFrame) -> dict[str, Any]:
    """Small facts about one built partition (metric columns, counts) for the client."""
    return {
        "columns": list(rows[0].columns),
        "has_sent": rows[2],
        "metric_info": rows[1],
        "n_rows": len(rows[0]),
        "n_sends": t.n_sends,
        "n_recvs": t.n_recvs,
        "n_messages": len(messages),
        "clock_violations": int(messages["clock_violation"].sum()) if len(messages) else 0,
        "n_closed": t.n_closed,
    }


def t_counts(st: Any) -> np.ndarray:
    """The per-group counts of a sender state."""
    return st.counts


def t_span(t: PartTables) -> tuple[float, float] | None:
    """(first enter, last leave) of this partition's intervals, or None."""
    iv = t.intervals
    if not len(iv):
        return None
    return float(iv["enter"].min()), float(iv["leave"].max())


def t_len(x: Any) -> int:
    """len() of a remote object."""
    return len(x)
