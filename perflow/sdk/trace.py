"""The SDK for trace analyses: trace requirements, wait states, the critical path, the replay, trace columns.

Helpers of the trace-analysis passes (wait states, critical path, delay,
POP, variance), and from the trace layer what such a pass builds on: the
wait-state kinds (:data:`WAIT_KINDS`, :data:`IDLE_KINDS`,
:data:`WAIT_COLUMNS` of the instance table), the cached analyses
(:data:`REPLAY_PLAN` with :class:`ReplaySettings` and :func:`ideal_replay`;
the others are in :mod:`perflow.sdk`), :class:`CriticalPath`, the replay
engine (:class:`Plan`, :class:`Rates`, :func:`run_plan`, :func:`run_many`,
:func:`replay_path`, :func:`vertex_time`), performance snippets
(:func:`snippet_table`, :func:`performance_matrix`,
:func:`normalised_performance`, :class:`Matrix`), OpenMP teams
(:func:`parallel_teams`), region roles (:func:`vertex_roles`), the RMA
transfer kinds (:data:`TRANSFERS`), the display name of a wait-state kind
(:func:`wait_label`: ``late_sender`` -> ``Late Sender``), and the analysis
under Scalasca's metric names (:func:`scalasca_metrics`, its metric tree
:data:`SCALASCA_METRICS` and :class:`ScalascaSettings`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd

from ..errors import PassError
from ..kinds import IDLE_REGIONS
from ..pag.instances import Trace
from ..pag.pag import PAG
from ..pag.sites import call_site_paths, source_labels
from ..pag.tree import descendants_mask
from ..trace.analyses import (
    CRITICAL_PATH,
    EXCLUSIVE_BY_VERTEX,
    LOCATION_KEYS,
    REPLAY_PLAN,
    VERTEX_SPANS,
    WAIT_INSTANCES,
    CriticalSettings,
    ReplaySettings,
    ideal_replay,
    vertex_roles,
)
from ..trace.binning import bin_exclusive, stack_pixels
from ..trace.critical import CriticalPath
from ..trace.cubemetrics import METRICS as SCALASCA_METRICS
from ..trace.cubemetrics import ScalascaSettings, scalasca_metrics
from ..trace.groupsums import covered_to, dense_groups, group_sums, sorted_groups
from ..trace.replay import Plan, Rates, ReplayPath, Run, replay_path, run_many, run_plan
from ..trace.replaydeps import ReplayMode
from ..trace.replaykernels import vertex_time
from ..trace.rma import TRANSFERS
from ..trace.snippets import Matrix, normalised_performance, performance_matrix, snippet_table
from ..trace.threadwaits import parallel_teams
from ..trace.waits import IDLE_KINDS, WAIT_COLUMNS, WAIT_KINDS, WaitSettings

__all__ = [
    "covered_to",
    "dense_groups",
    "group_sums",
    "sorted_groups",
    "bin_exclusive",
    "stack_pixels",
    "CriticalSettings",
    "WAIT_KINDS",
    "WAIT_COLUMNS",
    "WaitSettings",
    "REPLAY_PLAN",
    "VERTEX_SPANS",
    "ReplaySettings",
    "ReplayMode",
    "ideal_replay",
    "vertex_roles",
    "CriticalPath",
    "Plan",
    "Rates",
    "Run",
    "ReplayPath",
    "run_plan",
    "run_many",
    "replay_path",
    "vertex_time",
    "TRANSFERS",
    "Matrix",
    "normalised_performance",
    "performance_matrix",
    "snippet_table",
    "parallel_teams",
    "require_trace",
    "waits_for",
    "cp_for",
    "name_column",
    "call_path_column",
    "source_column",
    "check_choice",
    "mpi_vertex_mask",
    "non_useful_mask",
    "exclusive_by_vertex",
    "OUTSIDE",
]

#: Label of time spent outside every region (vertex -1).
OUTSIDE = "<outside regions>"


def require_trace(pag: Any, pass_name: str) -> Trace:
    """The trace of ``pag``, or a :class:`PassError` naming the pass when there is none."""
    if not isinstance(pag, PAG):
        raise PassError(f"pass {pass_name!r} needs a PAG as input, got {type(pag).__name__}")
    if pag.trace is None:
        src = pag.attrs.get("source")
        where = f" (from {src})" if src else ""
        raise PassError(
            f"pass {pass_name!r} needs a trace-backed PAG with event data, but this PAG{where} has no trace; "
            "read a trace (OTF2, Chrome trace, perflow recording) rather than a profile"
        )
    return pag.trace


def check_choice(pass_name: str, setting: str, value: Any, choices: tuple[Any, ...]) -> None:
    """Raise a :class:`PassError` when a setting is not one of ``choices``."""
    if value not in choices:
        raise PassError(
            f"pass {pass_name!r}: setting {setting}={value!r} is not one of {', '.join(map(repr, choices))}"
        )


def _names(pag: PAG) -> np.ndarray:
    return pag.vertex_table["name"].astype(str).to_numpy()


def waits_for(pag: PAG, pass_name: str, waits: WaitSettings | None = None) -> pd.DataFrame:
    """The wait-state instance table of a PAG (computed once per PAG and settings; shared: do not modify)."""
    require_trace(pag, pass_name)
    return pag.analyses.get(WAIT_INSTANCES, waits or WaitSettings(), owner=f"pass {pass_name!r}")


def cp_for(pag: PAG, pass_name: str, settings: WaitSettings | None = None) -> tuple[CriticalPath, pd.DataFrame]:
    """The critical path of a PAG and the wait table it was computed from (both computed once).

    ``settings`` are :class:`~perflow.trace.analyses.CriticalSettings` (or only wait settings: the path's
    own settings at their defaults).
    """
    cs = settings if isinstance(settings, CriticalSettings) else CriticalSettings(**asdict(settings or WaitSettings()))
    w = waits_for(pag, pass_name, cs.waits())
    return pag.analyses.get(CRITICAL_PATH, cs, owner=f"pass {pass_name!r}"), w


def name_column(pag: PAG, vertex: np.ndarray) -> pd.Categorical:
    """Vertex names of ``vertex`` ids as a categorical (``OUTSIDE`` for -1), without a string per row."""
    cat = pag.vertex_table["name"]
    cats = list(cat.cat.categories.astype(str))
    codes = np.asarray(cat.cat.codes.to_numpy(), dtype=np.int64)
    out_code = len(cats)
    v = np.asarray(vertex, dtype=np.int64)
    c = np.where(v >= 0, codes[np.maximum(v, 0)] if len(codes) else 0, out_code)
    return pd.Categorical.from_codes(c.astype(np.int32), categories=[*cats, OUTSIDE]).remove_unused_categories()


def call_path_column(pag: PAG, vertex: np.ndarray) -> np.ndarray:
    """Call paths (``main/solve/MPI_Send``) of ``vertex`` ids (``OUTSIDE`` for -1): for short tables.

    Two call sites with one call path get their ``file:line`` (:func:`perflow.pag.sites.call_site_paths`).
    """
    cps = call_site_paths(pag)
    v = np.asarray(vertex, dtype=np.int64)
    return np.where(v >= 0, cps[np.maximum(v, 0)] if len(cps) else "", OUTSIDE).astype(object)


def source_column(pag: PAG, vertex: np.ndarray) -> np.ndarray:
    """``file:line`` (base name) of ``vertex`` ids, ``""`` when unknown or for -1."""
    src = source_labels(pag)
    v = np.asarray(vertex, dtype=np.int64)
    return np.where(v >= 0, src[np.maximum(v, 0)] if len(src) else "", "").astype(object)


def mpi_vertex_mask(pag: PAG) -> np.ndarray:
    """Per vertex: is it an MPI call or inside one (the MPI library's own functions, as sampled call paths show)."""
    return non_useful_mask(pag, ("mpi",))


def non_useful_mask(pag: PAG, kinds: tuple[str, ...] | list[str]) -> np.ndarray:
    """Per vertex: its kind is in ``kinds``, or it lies below an MPI vertex (time inside an MPI call is MPI time).

    Only MPI calls extend to their callees: an OpenMP construct or a threading call
    contains user code. An explicit idle region (:data:`perflow.kinds.IDLE_REGIONS`:
    a GPU stream's or a Charm++ PE's idle time) is never useful.
    """
    vt = pag.vertex_table
    kind = vt["kind"].astype(str).to_numpy()
    mask = np.isin(kind, list(kinds)) | np.isin(vt["name"].astype(str).to_numpy(), list(IDLE_REGIONS))
    if "mpi" in kinds:
        mpi = np.flatnonzero(kind == "mpi")
        if len(mpi):
            mask |= descendants_mask(pag.tree_index, mpi)
    return mask


def exclusive_by_vertex(pag: PAG, pass_name: str) -> tuple[np.ndarray, float]:
    """Exclusive time per vertex summed over all locations, from the trace; plus the time outside regions."""
    require_trace(pag, pass_name)
    return pag.analyses.get(EXCLUSIVE_BY_VERTEX)  # type: ignore[no-any-return]


def n_locations(pag: PAG) -> int:
    """Number of (process, thread) locations of a trace-backed PAG."""
    return max(len(pag.analyses.get(LOCATION_KEYS)), 1) if pag.trace is not None else max(len(pag.locations), 1)


def kind_list(pass_name: str, kinds: list[str] | None, family: str | None = None) -> list[str]:
    """Validate a list of wait-state kinds (default: all of ``family``)."""
    allowed = [k for k, w in WAIT_KINDS.items() if family is None or w.family == family]
    if kinds is None:
        return allowed
    bad = [k for k in kinds if k not in allowed]
    if bad:
        raise PassError(f"pass {pass_name!r}: unknown wait-state kind(s) {bad}; choose from {', '.join(allowed)}")
    return list(kinds)


_WAIT_LABELS = {
    "late_sender": "Late Sender",
    "late_sender_wrong_order_same": "Late Sender, wrong order (same source)",
    "late_sender_wrong_order_diff": "Late Sender, wrong order (different sources)",
    "late_sender_completion": "Late Sender completion",
    "late_receiver": "Late Receiver",
    "wait_barrier": "Wait at Barrier",
    "barrier_completion": "Barrier completion",
    "wait_nxn": "Wait at N\u00d7N",
    "nxn_completion": "N\u00d7N completion",
    "late_broadcast": "Late Broadcast",
    "early_reduce": "Early Reduce",
    "early_scan": "Early Scan",
    "omp_barrier_wait": "OpenMP barrier wait",
    "omp_ibarrier_wait": "OpenMP implicit barrier wait",
    "lock_contention_critical": "critical-section contention",
    "lock_contention_api": "lock contention",
    "rma_wait_at_fence": "RMA Wait at Fence",
    "rma_wait_at_create": "RMA Wait at Create",
    "rma_wait_at_free": "RMA Wait at Free",
    "rma_late_post": "RMA Late Post",
    "rma_early_wait": "RMA Early Wait",
}


def wait_label(kind: str) -> str:
    """Scalasca's name of a wait-state kind: ``late_sender`` -> ``Late Sender``."""
    return _WAIT_LABELS.get(str(kind), str(kind).replace("_", " "))


__all__ += ["n_locations", "kind_list", "IDLE_KINDS", "wait_label", "scalasca_metrics", "SCALASCA_METRICS",
            "ScalascaSettings"]  # fmt: skip
