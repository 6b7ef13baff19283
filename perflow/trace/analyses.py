"""The trace analyses a PAG caches: locations, flat timeline, wait states, sync points, critical path, delay costs.

Each is an :class:`~perflow.pag.analysis.Analysis` computed once per PAG and
settings (``pag.analyses.get(WAIT_INSTANCES, late_receiver="blocking")``);
passes ask for them instead of recomputing, so the wait-state table that the
``wait_states``, ``critical_path`` and ``root_cause`` passes of one flow use
is computed once. :class:`~perflow.trace.waits.WaitSettings` declares the
wait-state settings (choices, defaults, checks) in one place.

The wait-state instances, the critical path and the replay plan have partitioned forms
(:func:`perflow.trace.waitparts.program`, :func:`perflow.trace.criticalparts.program`,
:func:`perflow.trace.replayparts.program`; for a trace past its runtime's
``stream_replay_above`` events the plan stays on the partitions and its runs
are streamed, :mod:`perflow.trace.replaystream`) that an engine runs where the
trace's partitions live; the others run on the gathered trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..errors import PAGError
from ..pag.analysis import Analysis, Settings
from ..pag.base import off_cpu_flags
from ..pag.instances import Trace
from ..pag.settings import SettingsError
from . import criticalparts, partfacts, replaystream, waitparts
from .critical import CriticalPath, critical_path
from .delays import DelayResult, delay_costs, off_cpu_children
from .flat import FlatTimeline, Locations, flat_timeline, locations, subtree_sizes
from .replay import replay
from .replaydeps import ReplayMode
from .replayplan import build_plan
from .syncpoints import SyncPoints, sync_points
from .waits import WaitSettings, wait_instances

__all__ = [
    "WaitSettings",
    "CriticalSettings",
    "DelaySettings",
    "trace_of",
    "LOCATIONS",
    "LOCATION_KEYS",
    "VERTEX_SPANS",
    "FLAT_TIMELINE",
    "SUBTREE_SIZES",
    "WAIT_INSTANCES",
    "SYNC_POINTS",
    "CRITICAL_PATH",
    "DELAY_COSTS",
    "EXCLUSIVE_BY_VERTEX",
    "ReplaySettings",
    "REPLAY_PLAN",
    "ideal_replay",
]

_TRACE = frozenset({"trace"})
_TRACE_V = frozenset({"trace", "vertices"})


def _wait_part(s: WaitSettings) -> WaitSettings:
    return WaitSettings(s.wrong_order_window, s.late_receiver, s.early_reduce, s.collective_span)


@dataclass(frozen=True)
class CriticalSettings(WaitSettings):
    """Settings of the critical path: the wait-state settings, and where the path ends and starts.

    Attributes
    ----------
    wrong_order_window, late_receiver, early_reduce, collective_span
        Those of :class:`~perflow.trace.waits.WaitSettings`.
    path_ends : {"finalize", "trace"}
        From the MPI_Init enter to the last MPI_Finalize enter (Scalasca's
        rule), or from the first to the last event of the trace
        (:mod:`perflow.trace.critical`).
    follow_locks : bool
        Lock contention moves the path to the thread that held the lock
        (False: it stays on the waiting thread, as in Scalasca).
    """

    path_ends: Literal["finalize", "trace"] = "finalize"
    follow_locks: bool = False

    def waits(self) -> WaitSettings:
        """The wait-state part."""
        return _wait_part(self)


@dataclass(frozen=True)
class DelaySettings(WaitSettings):
    """Settings of the delay-cost analysis: the wait-state settings, and the long-term costs.

    Attributes
    ----------
    wrong_order_window, late_receiver, early_reduce, collective_span
        Those of :class:`~perflow.trace.waits.WaitSettings`.
    long_term : bool
        Propagate waiting caused by waiting back to its root causes (long-term costs).
    long_term_kind : {"caused", "first"}
        File a long-term cost under the kind of the wait state it finally causes
        (Scalasca's rule) or of the wait state whose delays it lands on
        (:mod:`perflow.trace.delays`).
    """

    long_term: bool = False
    long_term_kind: Literal["caused", "first"] = "caused"

    def waits(self) -> WaitSettings:
        """The wait-state part."""
        return _wait_part(self)


def trace_of(pag: Any) -> Trace:
    """The instance tables of a trace-backed PAG (a :class:`~perflow.errors.PAGError` for a profile)."""
    if pag.trace is None:
        src = pag.attrs.get("source")
        raise PAGError(f"this PAG{f' (from {src})' if src else ''} has no trace: read a trace rather than a profile")
    return pag.trace


def _names(pag: Any) -> np.ndarray:
    return pag.vertex_table["name"].astype(str).to_numpy()


def _locations(pag: Any, s: Settings) -> Locations:
    return locations(trace_of(pag))


def _flat(pag: Any, s: Settings) -> FlatTimeline:
    return flat_timeline(trace_of(pag), pag.analyses.get(LOCATIONS))


def _sizes(pag: Any, s: Settings) -> np.ndarray:
    return subtree_sizes(trace_of(pag), pag.analyses.get(LOCATIONS))


def vertex_roles(pag: Any) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The region role (str) and region id of each vertex of a trace's PAG, or (None, None) without roles."""
    vt = pag.vertex_table
    if "role" not in vt.columns or "region" not in vt.columns:
        return None, None
    return vt["role"].astype(str).to_numpy(dtype=object), vt["region"].to_numpy(dtype=np.int64)


def _waits(pag: Any, s: WaitSettings) -> pd.DataFrame:
    roles, regions = vertex_roles(pag)
    return wait_instances(
        trace_of(pag),
        _names(pag),
        window=s.wrong_order_window,
        late_receiver=s.late_receiver,
        early_reduce=s.early_reduce,
        collective_span=s.collective_span,
        locs=pag.analyses.get(LOCATIONS),
        roles=roles,
        regions=regions,
    )


def _waits_program(built: Any, pag: Any, s: WaitSettings) -> pd.DataFrame:
    """The program form (``program(built, pag, settings)``, see :mod:`perflow.pag.analysis`)."""
    roles, regions = vertex_roles(pag)
    return waitparts.program(
        built,
        _names(pag),
        window=s.wrong_order_window,
        late_receiver=s.late_receiver,
        early_reduce=s.early_reduce,
        collective_span=s.collective_span,
        roles=roles,
        regions=regions,
    )


def _sync(pag: Any, s: WaitSettings) -> SyncPoints:
    roles, regions = vertex_roles(pag)
    w = pag.analyses.get(WAIT_INSTANCES, _wait_part(s))
    return sync_points(trace_of(pag), w, pag.analyses.get(LOCATIONS), roles, regions)


def _critical(pag: Any, s: CriticalSettings) -> CriticalPath:
    w = pag.analyses.get(WAIT_INSTANCES, s.waits())
    roles, regions = vertex_roles(pag)
    return critical_path(
        trace_of(pag),
        w,
        pag.n_vertices,
        locs=pag.analyses.get(LOCATIONS),
        flat=pag.analyses.get(FLAT_TIMELINE),
        path_ends=s.path_ends,
        follow_locks=s.follow_locks,
        names=_names(pag),
        roles=roles,
        regions=regions,
    )


def _critical_program(built: Any, pag: Any, s: CriticalSettings) -> CriticalPath:
    """The program form (``program(built, pag, settings)``, see :mod:`perflow.pag.analysis`)."""
    w = pag.analyses.get(WAIT_INSTANCES, s.waits())
    roles, regions = vertex_roles(pag)
    return criticalparts.program(
        built,
        w,
        pag.n_vertices,
        path_ends=s.path_ends,
        follow_locks=s.follow_locks,
        names=_names(pag),
        roles=roles,
        regions=regions,
    )


def _delays(pag: Any, s: DelaySettings) -> DelayResult:
    w = pag.analyses.get(WAIT_INSTANCES, s.waits())
    roles, regions = vertex_roles(pag)
    vt = pag.vertex_table
    return delay_costs(
        trace_of(pag),
        w,
        pag.n_vertices,
        long_term=s.long_term,
        long_term_kind=s.long_term_kind,
        locs=pag.analyses.get(LOCATIONS),
        flat=pag.analyses.get(FLAT_TIMELINE),
        roles=roles,
        regions=regions,
        sync=pag.analyses.get(SYNC_POINTS, s.waits()),
        off_cpu=off_cpu_children(vt["parent"].to_numpy(), off_cpu_flags(_names(pag), roles)),
    )


def _exclusive(pag: Any, s: Settings) -> tuple[np.ndarray, float]:
    return partfacts.exclusive_time(pag.analyses.get(FLAT_TIMELINE), pag.n_vertices)


def _exclusive_program(built: Any, pag: Any, s: Settings) -> tuple[np.ndarray, float]:
    return partfacts.exclusive_program(built, pag.n_vertices)


def _spans(pag: Any, s: Settings) -> pd.DataFrame:
    iv = trace_of(pag).intervals
    sp = partfacts.vertex_spans(iv["vertex"].to_numpy(), iv["enter"].to_numpy(), iv["leave"].to_numpy(), pag.n_vertices)
    return partfacts.finish_spans(sp)


def _spans_program(built: Any, pag: Any, s: Settings) -> pd.DataFrame:
    return partfacts.spans_program(built, pag.n_vertices)


def _location_keys(pag: Any, s: Settings) -> pd.DataFrame:
    locs = pag.analyses.get(LOCATIONS)
    return pd.DataFrame({"process": locs.process, "thread": locs.thread})


def _location_keys_program(built: Any, pag: Any, s: Settings) -> pd.DataFrame:
    return partfacts.location_keys_program(built)


LOCATIONS = Analysis(
    "trace.locations", compute=_locations, uses=_TRACE, doc="the (process, thread) streams and their intervals"
)
FLAT_TIMELINE = Analysis(
    "trace.flat_timeline", compute=_flat, uses=_TRACE, doc="per location, the innermost interval between events"
)
LOCATION_KEYS = Analysis(
    "trace.location_keys",
    compute=_location_keys,
    program=_location_keys_program,
    uses=_TRACE,
    doc="the (process, thread) streams with intervals, sorted (a frame)",
)
VERTEX_SPANS = Analysis(
    "trace.vertex_spans",
    compute=_spans,
    program=_spans_program,
    uses=_TRACE_V,
    doc="per vertex: first and last enter and leave of its intervals, and their number",
)
SUBTREE_SIZES = Analysis("trace.subtree_sizes", compute=_sizes, uses=_TRACE, doc="intervals in each interval's subtree")
WAIT_INSTANCES = Analysis(
    "trace.wait_instances",
    compute=_waits,
    program=_waits_program,
    settings=WaitSettings,
    uses=_TRACE_V,
    doc="every wait-state instance (perflow.trace.waits.WAIT_COLUMNS)",
)
SYNC_POINTS = Analysis(
    "trace.sync_points",
    compute=_sync,
    settings=WaitSettings,
    uses=_TRACE_V,
    doc="the synchronisation points of the delay analysis, on the wait table of these settings",
)
CRITICAL_PATH = Analysis(
    "trace.critical_path",
    compute=_critical,
    program=_critical_program,
    settings=CriticalSettings,
    uses=_TRACE_V,
    doc="the critical path",
)
DELAY_COSTS = Analysis(
    "trace.delay_costs", compute=_delays, settings=DelaySettings, uses=_TRACE_V, doc="delay costs of the wait states"
)
EXCLUSIVE_BY_VERTEX = Analysis(
    "trace.exclusive_by_vertex",
    compute=_exclusive,
    program=_exclusive_program,
    uses=_TRACE_V,
    doc="exclusive time per vertex over all locations, and the time outside every region",
)


@dataclass(frozen=True)
class ReplaySettings(Settings):
    """Settings of the replay plan (:func:`perflow.trace.replayplan.build_plan`), and so of every replay: the
    ideal network of the POP metrics, the critical path's ideal runtime and the what-if predictions.

    Attributes
    ----------
    late_receiver : {"auto", "blocking", "synchronous", "none"}
        Sends that wait for their receive to be posted in the replay: "auto"
        (synchronous ones, and standard or non-blocking ones of a size the
        trace shows to use the rendezvous protocol: the replay asks which
        sends would wait if the receiver were later, not which did),
        "blocking", "synchronous" or "none" (as the wait states count Late Receiver).
    early_reduce : {"latest", "earliest"}
        The root of an N-to-1 collective waits for the "latest" sender, or the "earliest".
    eager_limit : int
        With "auto": bytes above which a send whose size the trace says nothing about is rendezvous.
    """

    late_receiver: ReplayMode = "auto"
    early_reduce: Literal["latest", "earliest"] = "latest"
    eager_limit: int = 65536

    def check(self) -> None:
        if self.eager_limit < 0:
            raise SettingsError(f"setting eager_limit must be >= 0, got {self.eager_limit}")


def _replay_plan(pag: Any, s: ReplaySettings) -> Any:

    roles, regions = vertex_roles(pag)
    return build_plan(
        trace_of(pag),
        names=_names(pag),
        late_receiver=s.late_receiver,
        early_reduce=s.early_reduce,
        eager_limit=s.eager_limit,
        roles=roles,
        regions=regions,
        locs=pag.analyses.get(LOCATIONS),
        flat=pag.analyses.get(FLAT_TIMELINE),
    )


def _replay_plan_program(built: Any, pag: Any, s: ReplaySettings) -> Any:
    """The program form (``program(built, pag, settings)``, see :mod:`perflow.pag.analysis`)."""
    roles, regions = vertex_roles(pag)
    return replaystream.program(built, _names(pag), s, roles=roles, regions=regions)


REPLAY_PLAN = Analysis(
    "trace.replay_plan",
    compute=_replay_plan,
    program=_replay_plan_program,
    settings=ReplaySettings,
    uses=_TRACE_V,
    doc="the replay's dependency points and the work between them (perflow.trace.replay.Plan)",
)


def ideal_replay(
    pag: Any,
    useful_vertex: np.ndarray,
    *,
    window: tuple[float, float] | None = None,
    late_receiver: str = ReplaySettings.late_receiver,
    settings: ReplaySettings | None = None,
) -> Any:
    """:func:`perflow.trace.replay.replay` of a PAG's trace, on the plan the PAG caches (``settings``, else
    the default ones with ``late_receiver``)."""

    s = settings if settings is not None else ReplaySettings(late_receiver=late_receiver)
    return replay(
        trace_of(pag),
        useful_vertex,
        window=window,
        late_receiver=s.late_receiver,
        plan=pag.analyses.get(REPLAY_PLAN, s),
    )
