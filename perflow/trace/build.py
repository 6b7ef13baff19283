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

import logging

import numpy as np

from ..pag.pag import PAG
from ..pag.partitioned import LocalRuntime
from .parts import assemble, pag_attrs
from .pipeline import BuildOptions, build
from .raw import RawTrace
from .scan import enclosing_instance
from .split import definitions_only
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


def build_pag(
    raw: RawTrace, *, close_open: bool = False, validate: bool = True, infer_collectives: bool = False
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

    Returns
    -------
    PAG
        With ``time_inc``, ``time_exc``, ``visits``, byte counts and any
        trace metric, and a :class:`~perflow.pag.instances.Trace`.
    """
    processes = np.unique(raw.locations["process"].to_numpy(dtype=np.int64))
    built = build(
        LocalRuntime(1),
        [raw],
        definitions_only(raw),
        processes,
        np.zeros(len(processes), dtype=np.int64),
        BuildOptions(close_open, validate, infer_collectives),
    )
    attrs = pag_attrs(built)
    if attrs["unmatched_sends"] or attrs["unmatched_recvs"]:
        src = raw.attrs.get("source", "trace")
        log.warning(
            "%s: %d sends and %d receives found no partner", src, attrs["unmatched_sends"], attrs["unmatched_recvs"]
        )
    return assemble(built)
