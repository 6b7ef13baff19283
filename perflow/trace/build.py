"""Build a PAG from a :class:`~perflow.trace.raw.RawTrace`: the one-partition run of the trace pipeline.

:func:`build_pag` runs the stages of :mod:`perflow.trace.pipeline` (scan,
numbering, finalisation, matching, metric rows, collective waits) on one
partition holding the whole trace, in this process; the Dask engine runs the
same stages on many partitions. What the steps compute:

1. :func:`~perflow.trace.scan.scan_regions` pairs Enter/Leave events, links
   each region instance to its enclosing one and assigns call paths.
2. Inclusive time per instance is ``leave - enter``; exclusive time subtracts
   the children's inclusive time (one ``bincount``). Both, and visits, are
   summed per (call path, process, thread).
3. Samples and region call stacks extend the calling-context tree below the
   instance they belong to (:mod:`perflow.trace.contexts`).
4. Metric events give per-instance deltas of accumulated metrics.
5. :mod:`perflow.trace.match` and :mod:`perflow.trace.records` match
   messages; collectives are grouped into instances.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable

import numpy as np

from .._arrays import release_free_heap, unique
from ..pag.pag import PAG
from ..pag.partitioned import LocalRuntime
from . import clc
from .parts import assemble, pag_attrs
from .pipeline import BuildOptions, build
from .raw import RawTrace
from .scan import enclosing_instance
from .split import definitions_only, split_blocks
from .tally import align_rows, dense_keys, exclusive_time, last_time_per_location, metric_deltas, region_kinds

__all__ = [
    "build_pag",
    "enclosing_instance",
    "region_kinds",
    "dense_keys",
    "exclusive_time",
    "last_time_per_location",
    "metric_deltas",
    "align_rows",
]

log = logging.getLogger(__name__)

#: traces with more events than this are built in several partitions at once by default
PARALLEL_EVENTS = 1_000_000


def build_pag(
    raw: RawTrace,
    *,
    close_open: bool = False,
    validate: bool = True,
    infer_collectives: bool = False,
    jobs: int | None = None,
    clock_correction: str | None = None,
    reread: Callable[[], RawTrace] | None = None,
) -> PAG:
    """Turn decoded events into a trace-backed PAG.

    Parameters
    ----------
    raw : RawTrace
        Decoded events and definitions.
    close_open : bool
        Close region instances left open at the end of a location (a
        truncated trace) at that location's last event time, instead of
        raising :class:`~perflow.errors.TraceError`.
    validate : bool
        Check the raw trace's ordering contract first.
    infer_collectives : bool
        For sources that record MPI calls but no collective events (Chrome
        traces, HPCToolkit traces): treat every call to a collective
        operation as an instance on MPI_COMM_WORLD, the k-th call of an
        operation on each process being the k-th instance. MPI_Init and
        MPI_Finalize are always world barriers.
    jobs : int, optional
        Threads: a large trace is cut into this many partitions of
        consecutive processes (views, no copies) whose stages run at the same
        time; the result does not depend on it. Default: the number of CPU
        cores for traces of more than a million events, else 1.
    clock_correction : {"auto", "on", "off"}, optional
        Correct the timestamps with the controlled logical clock
        (:mod:`perflow.trace.clc`): "auto" when the trace violates the clock
        condition (messages received before sent, collectives left before the
        last enter), "on" always, "off" never. Default: the mode of
        :func:`perflow.trace.clc.clock_correction` ("auto"). What was done is
        in ``pag.attrs["clock_correction"]``.
    reread : callable, optional
        Given, the caller gives ``raw``'s events up: the build drops each
        event column as soon as it has consumed it (``raw`` keeps only its
        definitions afterwards), which lowers the peak memory of a read, and
        ``reread()`` returns the trace again when the clock correction needs
        it after the build ("auto" mode, violations found). Without it
        ``raw`` is left as it was.

    Returns
    -------
    PAG
        With ``time_inc``, ``time_exc``, ``visits``, byte counts and any
        trace metric, and a :class:`~perflow.pag.instances.Trace`.
    """
    how = clc.mode(clock_correction)
    n_events = raw.n_events
    if how == "on":
        pag = _corrected(raw, close_open, validate, infer_collectives, jobs, None)
    else:
        pag = _build(raw, close_open, validate, infer_collectives, jobs, release=reread is not None)
        if how == "auto" and pag.trace is not None:
            n = clc.built_violations(pag.trace)
            if n:
                if reread is not None:  # the events were dropped by the build: read them again
                    raw = reread()
                    validate = False  # the caller checked them the first time
                pag = _corrected(raw, close_open, validate, infer_collectives, jobs, n)
    if n_events > PARALLEL_EVENTS:  # the build's temporaries are freed: their pages go back to the system
        release_free_heap()
    return pag


def _corrected(
    raw: RawTrace, close_open: bool, validate: bool, infer: bool, jobs: int | None, found: int | None
) -> PAG:
    """Build from the timestamps the controlled logical clock corrected (``found``: violations the build saw)."""
    if validate:
        raw.validate()
    fixed, rep = clc.correct(raw)
    src = raw.attrs.get("source", "trace")
    if rep.violations:
        log.warning(
            "%s: corrected %d clock-condition violations (%d messages, %d collectives) with the controlled logical "
            "clock; largest shift %.3g s%s",
            src, rep.violations, rep.messages, rep.collectives, rep.max_shift,
            f", {rep.remaining} left" if rep.remaining else "",
        )  # fmt: skip
    pag = _build(fixed, close_open, False, infer, jobs)
    pag.attrs["clock_correction"] = {**rep.as_dict(), "found_by_build": found}
    return pag


def _take_events(raw: RawTrace) -> RawTrace:
    """A shallow copy of ``raw`` that takes its event tables: ``raw`` is left with empty ones (its definitions only)."""
    own = copy.copy(raw)
    raw.drop_events()
    return own


def _build(
    raw: RawTrace, close_open: bool, validate: bool, infer_collectives: bool, jobs: int | None, release: bool = False
) -> PAG:
    """The one-partition (or one-process) run; with ``release`` ``raw``'s events are dropped as the build consumes them."""
    options = BuildOptions(close_open, validate, infer_collectives, release_events=release)
    if release:
        raw = _take_events(raw)
    if jobs is None:
        jobs = (os.cpu_count() or 1) if raw.n_events > PARALLEL_EVENTS else 1
    blocks = split_blocks(raw, jobs) if jobs > 1 else None
    if blocks is not None and len(blocks[0]) > 1:
        parts, processes, assign = blocks
    else:
        processes = unique(raw.locations["process"].to_numpy(dtype=np.int64))
        parts, assign = [raw], np.zeros(len(processes), dtype=np.int64)
    defs = definitions_only(raw)
    src = raw.attrs.get("source", "trace")
    if release:  # only the partitions hold the events now (views, or raw itself)
        if parts[0] is not raw:
            raw.drop_events()  # the partitions' views now hold the columns
        del raw
    rt = LocalRuntime(len(parts), jobs=jobs)
    try:
        built = build(rt, parts, defs, processes, assign, options)
        del parts
        attrs = pag_attrs(built)
        if attrs["unmatched_sends"] or attrs["unmatched_recvs"]:
            log.warning(
                "%s: %d sends and %d receives found no partner", src, attrs["unmatched_sends"], attrs["unmatched_recvs"]
            )
        return assemble(built)
    finally:
        rt.close()
