"""The trace pipeline, written once over partitions: raw events in, a PAG (or its partitions) out.

Stages, each a plain function of one partition (a raw trace of whole
processes) except the small merges:

1. **split** (:mod:`.split`): cut the raw trace into partitions by process
   (a whole trace is one partition);
2. **scan** (:func:`.stages.scan_part`): Enter/Leave pairing, call paths,
   call stacks and samples, enclosing instances; a small summary;
3. **number** (:func:`.numbering.merge_summaries`): global call-path ids,
   interval and event offsets, collective instance ids (one task);
4. **finalize** (:func:`.stages.finalize`): intervals, metric sums, metric
   deltas, send/receive records and collective rows in global numbering;
5. **match** (:mod:`.records`): send records travel to the receiver's
   partition, FIFO matching there, acknowledgements back to the senders;
6. **rows** (:func:`.rows.metric_rows`): the final metric rows, bytes included;
7. **collectives** (:mod:`.collstages`): per-instance partials reduced in a
   tree, each row's wait and last arriver.

:func:`build` runs them on a :class:`~perflow.pag.partitioned.Runtime`:
:func:`perflow.trace.build.build_pag` is the one-partition run in this
process, and the Dask engine runs the same stages on its workers, where the
results stay (:class:`Built` holds references to them). :mod:`.parts` turns
the results into a PAG, or into partitions for partitioned analyses.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..pag.partitioned import Each, LocalRuntime, Runtime
from . import rows as R
from .collstages import collective_partial, collective_rows_wait, combine_collective, late_sender
from .numbering import merge_summaries
from .partrows import SharedRows
from .raw import RawTrace
from .records import match_records, outbox
from .stages import PartState, PartTables, finalize, scan_part, summarize

__all__ = ["Built", "BuildOptions", "build", "part_of"]


@dataclass(frozen=True)
class BuildOptions:
    """How raw events become a PAG (the options of :func:`perflow.trace.build.build_pag`).

    Attributes
    ----------
    close_open : bool
        Close region instances left open at the end of a location (a
        truncated trace) at that location's last event, instead of failing.
    validate : bool
        Check the raw trace's ordering contract first.
    infer_collectives : bool
        Treat every call to a collective operation as an instance on
        MPI_COMM_WORLD (sources that record no collective events).
    release_events : bool
        The partitions' raw traces are the build's own (a run in this
        process whose caller gave the events up): finalisation drops each
        event table once consumed.
    """

    close_open: bool = False
    validate: bool = True
    infer_collectives: bool = False
    release_events: bool = False


@dataclass
class Built:
    """A trace built on a runtime: small facts here, per-partition results as the runtime's references.

    Attributes
    ----------
    runtime : Runtime
    defs : RawTrace
        The trace's definitions (no events).
    processes, assign : numpy.ndarray
        Sorted world ranks and the partition of each.
    tables, messages, rows, coll : list
        Per partition: :class:`~perflow.trace.stages.PartTables` (without the
        matched records), message rows received there (with
        ``late_sender_wait``, ``send_row``, ``send_enter``, ``recv_enter``,
        ``recv_leave``), ``(metric rows, metric info, has bytes)`` and
        collective rows (with ``wait`` and ``last``).
    tree : dict
        The global calling-context tree (``cp_parent``, ``cp_region``) and
        sizes (``n_intervals``, ``n_instances``, ``threaded``, ``p2p_off``).
    info : list of dict
        Small facts per partition (metric columns, counts).
    """

    runtime: Any
    defs: RawTrace
    processes: np.ndarray
    assign: np.ndarray
    tables: list[Any]
    messages: list[Any]
    rows: list[Any]
    coll: list[Any]
    tree: dict[str, Any]
    info: list[dict[str, Any]]
    n_events: int
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def n_parts(self) -> int:
        """Number of partitions."""
        return len(self.tables)


def part_of(processes: np.ndarray, assign: np.ndarray, proc: np.ndarray) -> np.ndarray:
    """Partition of each process in ``proc`` (-1 for processes no partition holds)."""
    proc = np.asarray(proc, dtype=np.int64)
    if not len(processes):
        return np.full(len(proc), -1, dtype=np.int64)
    i = np.clip(np.searchsorted(processes, proc), 0, len(processes) - 1)
    return np.where(processes[i] == proc, assign[i], -1)


# ----------------------------------------------------------------------- per-partition tasks
def t_scan(pid: int, raw: RawTrace, close_open: bool, validate: bool, infer: bool) -> PartState:
    """Stage 2 on one partition."""
    return scan_part(pid, raw, close_open=close_open, validate=validate, infer=infer)


def t_merge(n_locations: int, *summaries: dict[str, Any]) -> dict[str, Any]:
    """Stage 3: merge every partition's summary into the global numbering."""
    return merge_summaries(list(summaries), n_locations)


def t_tree(merged: dict[str, Any]) -> dict[str, Any]:
    """The part of the numbering the client keeps: the calling-context tree and table sizes."""
    keys = ("cp_parent", "cp_region", "n_intervals", "n_instances", "threaded", "p2p_off", "n_real")
    return {k: merged[k] for k in keys}


def t_finalize(st: PartState, merged: dict[str, Any]) -> PartTables:
    """Stage 4 on one partition (its raw events are released afterwards)."""
    maps = {k: merged[k] for k in ("inst_off", "p2p_off", "coll_keys", "coll_ids", "threaded", "sampled", "omp_teams")}
    maps["cp_map"] = merged["cp_maps"][st.pid]
    maps["shared_rows"] = merged.get("shared_rows")
    maps["release"] = merged.get("release", False)
    maps["release_events"] = merged.get("release_events", False)
    return finalize(st, maps)


def t_outbox(t: PartTables, processes: np.ndarray, assign: np.ndarray, n_parts: int) -> list[pd.DataFrame]:
    """This partition's send records, one frame per destination partition."""
    return outbox(t.sends, part_of(processes, assign, t.sends["dst"].to_numpy()), n_parts)


def t_match(
    t: PartTables, processes: np.ndarray, assign: np.ndarray, n_parts: int, inbound: list[pd.DataFrame]
) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """Stage 5: match this partition's receives; its message rows (with Late Sender) and acks per sender partition."""
    m = match_records(t.recvs, list(inbound))
    m["late_sender_wait"] = late_sender(m)
    spart = part_of(processes, assign, m["send_process"].to_numpy())
    acks = []
    for j in range(n_parts):
        sel = (spart == j) & (j != t.pid)
        acks.append(
            pd.DataFrame({"send_interval": m["send_interval"].to_numpy()[sel], "bytes": m["bytes"].to_numpy()[sel]})
        )
    return m, acks


def t_strip(t: PartTables) -> PartTables:
    """The tables without the send/receive records (consumed by the matching), keeping their counts."""
    # copies of the empty slices: a slice is a view that would keep every record's columns alive
    return dataclasses.replace(
        t, sends=t.sends.iloc[:0].copy(), recvs=t.recvs.iloc[:0].copy(), n_sends=len(t.sends), n_recvs=len(t.recvs)
    )


def t_first(x: tuple[Any, ...]) -> Any:
    """Element 0 of a pair."""
    return x[0]


def t_second(x: tuple[Any, ...]) -> Any:
    """Element 1 of a pair."""
    return x[1]


def t_rows(
    t: PartTables, messages: pd.DataFrame, loc_proc: np.ndarray, loc_thr: np.ndarray, acks: list[pd.DataFrame]
) -> tuple[pd.DataFrame, dict[str, Any], bool]:
    """Stage 6: this partition's final metric rows."""
    return R.metric_rows(t, messages, list(acks), loc_proc, loc_thr)


def t_coll_partial(t: PartTables) -> pd.DataFrame:
    """Stage 7a: per-instance partial of this partition's collective rows."""
    return collective_partial(t.coll)


def t_coll_combine(*parts: pd.DataFrame) -> pd.DataFrame:
    """Stage 7b: one level of the collective reduction tree."""
    return combine_collective(*parts)


def t_coll_wait(t: PartTables, combined: pd.DataFrame) -> pd.DataFrame:
    """Stage 7c: this partition's collective rows with ``wait`` and ``last``."""
    c = t.coll.copy(deep=False) if len(t.coll) else t.coll  # two new columns: the others are shared, not copied
    if len(c):
        c["wait"], c["last"] = collective_rows_wait(c, combined)
    else:
        c = c.assign(wait=np.zeros(0), last=np.zeros(0, dtype=bool))
    return c


def t_info(t: PartTables, rows: tuple[pd.DataFrame, Any, bool], messages: pd.DataFrame) -> dict[str, Any]:
    """Small facts about one built partition (metric columns, counts)."""
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
        "span": (float(t.intervals["enter"].min()), float(t.intervals["leave"].max())) if len(t.intervals) else None,
    }


def t_n_events(summary: dict[str, Any]) -> int:
    """Events of one partition."""
    return int(summary["n_events"])


# ----------------------------------------------------------------------- the program
def build(
    rt: Runtime,
    raws: list[Any],
    defs: RawTrace,
    processes: np.ndarray,
    assign: np.ndarray,
    options: BuildOptions = BuildOptions(),  # noqa: B008 - frozen
) -> Built:
    """Run the pipeline's stages on ``rt``'s partitions.

    Parameters
    ----------
    rt : Runtime
        Where the stages run (``rt.n_parts`` partitions).
    raws : list
        Per partition, the runtime's reference to its raw trace (global
        location ids, local ``pos``; see :func:`.split.split_raw`).
    defs : RawTrace
        The trace's definitions (events are not read).
    processes, assign : numpy.ndarray
        Sorted world ranks and the partition holding each.
    options : BuildOptions
    """
    n = len(raws)
    nloc = len(defs.locations)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t0
        t1 = time.perf_counter()
        timings[name] = timings.get(name, 0.0) + t1 - t0
        t0 = t1

    o = options
    states = rt.map(t_scan, Each(range(n)), Each(raws), o.close_open, o.validate, o.infer_collectives)
    summ = rt.map(summarize, Each(states))
    n_events = int(sum(rt.gather(rt.map(t_n_events, Each(summ)))))
    lap("scan")
    merged = rt.submit(t_merge, nloc, *summ)
    tree = rt.gather([rt.submit(t_tree, merged)])[0]
    if isinstance(rt, LocalRuntime) and n > 1:  # partitions in this process write one set of interval columns
        merged = {**merged, "shared_rows": SharedRows(int(tree["n_intervals"]))}
    if isinstance(rt, LocalRuntime):  # the scan states are dropped after finalisation: it may free them early
        merged = {**merged, "release": True, "release_events": o.release_events}
    lap("merge")
    tables = rt.map(t_finalize, Each(states), merged)
    del states, summ
    lap("finalize")
    boxes = rt.map(t_outbox, Each(tables), processes, assign, n)
    inbound = rt.exchange(boxes, "send_records")
    matched = rt.map(t_match, Each(tables), processes, assign, n, Each(inbound))
    messages = rt.map(t_first, Each(matched))
    tables = rt.map(t_strip, Each(tables))  # the records are consumed
    acks = rt.exchange(rt.map(t_second, Each(matched)), "acks")
    del matched, inbound, boxes
    lap("match")
    lp = defs.locations["process"].to_numpy(dtype=np.int64)
    lt = defs.locations["thread"].to_numpy(dtype=np.int64)
    rows = rt.map(t_rows, Each(tables), Each(messages), lp, lt, Each(acks))
    lap("metrics")
    combined = rt.reduce(t_coll_combine, rt.map(t_coll_partial, Each(tables)))
    coll = rt.map(t_coll_wait, Each(tables), combined)
    info = rt.gather(rt.map(t_info, Each(tables), Each(rows), Each(messages)))
    lap("collectives")
    return Built(rt, defs, processes, assign, tables, messages, rows, coll, tree, info, n_events, timings)
