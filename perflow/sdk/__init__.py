"""The pass SDK: everything an out-of-tree pass needs, from one import.

>>> from perflow.sdk import PAG, pass_, render_table, vertex_columns, vertex_stats_of
>>> @pass_(version="1", tags=("profile",))
... def busiest(pag: PAG, *, metric: str = "time_exc", k: int = 5) -> str:
...     '''The k vertices with the largest maximum over processes.'''
...     st = vertex_stats_of(pag, metric)               # cached per PAG, partitioned on engines
...     ids = st["max"].argsort()[::-1][:k]
...     table = vertex_columns(pag, ids)
...     table["max"] = st["max"][ids]
...     return render_table(table, format="text")

The names below are public and documented (``docs/architecture.md``,
"Writing a pass"); passes use them instead of the PAG's private members, so
a pass written against them keeps working as perflow's internals change.
perflow's own passes use nothing else: everything they need from outside
the pass library is here or in the SDK's modules,

=======================  ===========================================================
:mod:`perflow.sdk`       registering, the PAG and its sets, analyses and settings,
                         kinds, tables, figures, files (this page)
:mod:`.profile`          per-vertex groupings, categories, metric names, alignment,
                         imbalance measures, ensembles, tree masks, call sites,
                         how a metric combines, the top-down tree as text
:mod:`.trace`            trace requirements, wait states and their names, the
                         critical path, the replay, snippets, thread teams, trace
                         columns, Scalasca's metrics
:mod:`.render`           units and formatting, tables in every format, text cut to
                         a width, figures as PNG, files
:mod:`.figures`          figures without pyplot, colours, axes, per-process data
:mod:`.io`               reading, loading, runs, the current engine, progress,
                         CUBE4 archives
:mod:`.readers`          what a reader needs: profile tables, trace builders
=======================  ===========================================================

and importing the SDK registers nothing and imports no pass.

Registering
    :func:`pass_` (positional parameters are inputs, keyword-only ones
    settings), :func:`get_pass`, :class:`PassError` for bad inputs and
    settings, :class:`FormatError` for bad files.
The PAG
    :class:`PAG`: ``vertex_table`` and ``metrics`` (shallow copies),
    ``rows`` (:class:`MetricRows`: read-only, zero-copy arrays of the
    metrics table), ``check_metric``, ``aggregate``, ``call_paths``,
    ``subgraph``, ``parallel`` (``vertex_ids``, ``edge_table``), ``trace``
    (:class:`Trace`: intervals, messages, collectives), ``analyses``;
    :class:`VertexSet`, :class:`EdgeSet`, :class:`ParallelVertexSet`,
    :class:`ParallelEdgeSet` (all :class:`Selection`); kinds:
    :class:`VertexKind`, :class:`MPIClass`, :class:`CollectiveOp`,
    :func:`mpi_class`, :func:`is_gpu_api`, :data:`IDLE_REGIONS`.
Analyses (cached per PAG, computed where the data live on an engine)
    :class:`Analysis`, :class:`Settings`, :class:`NoSettings`,
    :class:`SettingsError`, :func:`settings_keywords` (a pass's keyword
    settings from a Settings class), :func:`settings_dict`,
    :class:`Partition` (what a partitioned form sees), :class:`Executor`
    (where analyses run); :class:`Grouped` and :func:`grouped` (one value
    per vertex and process or location); the built-in ones: :data:`VERTEX_STATS` (:func:`vertex_stats_of`),
    :data:`WAIT_INSTANCES`, :data:`CRITICAL_PATH`, :data:`DELAY_COSTS`,
    :data:`LOCATIONS`, :data:`FLAT_TIMELINE`, :data:`EXCLUSIVE_BY_VERTEX`,
    with :class:`WaitSettings` and :class:`DelaySettings`.
Trace requirements
    :func:`require_trace` (a clear error for a profile).
Tables
    :func:`vertex_columns` (vertex, name, kind, call path), :func:`render_table`
    (text, Markdown, HTML, CSV with units; the ``render_table`` pass without
    its ``path``), :func:`format_value` (the one formatter of times, bytes
    and percentages).
Figures
    :func:`new_figure` (no pyplot; shows itself in notebooks),
    :func:`save_figure`, :data:`Figure` (for annotations; imports matplotlib
    only when checked).
Files
    :func:`write_text` and :func:`save_figure` write a ``path`` setting's
    file atomically, inside the running flow's output folder
    (:func:`output_path`: the path a setting names, checked against the
    run's write policy; see ``docs/security.md``).
"""

from __future__ import annotations

from typing import Any

from ..errors import FormatError, PassError
from ..flow.registry import get_pass, pass_
from ..flow.types import Figure
from ..flow.writes import output_path
from ..kinds import IDLE_REGIONS, CollectiveOp, MPIClass, VertexKind, is_gpu_api, mpi_class
from ..pag.analysis import Analysis, NoSettings, Settings, SettingsError
from ..pag.faces import MetricRows
from ..pag.instances import Trace
from ..pag.pag import PAG, MetricInfo
from ..pag.parallel import ParallelEdgeSet, ParallelVertexSet
from ..pag.partitioned import Executor, Partition
from ..pag.selection import Selection
from ..pag.sets import EdgeSet, VertexSet
from ..pag.settings import settings_dict, settings_keywords
from ..pag.stats import VERTEX_STATS, Grouped, StatsSettings, grouped
from ..trace.analyses import (
    CRITICAL_PATH,
    DELAY_COSTS,
    EXCLUSIVE_BY_VERTEX,
    FLAT_TIMELINE,
    LOCATIONS,
    WAIT_INSTANCES,
    DelaySettings,
)
from ..trace.waits import WaitSettings
from .figures import new_figure, save_figure
from .profile import vertex_columns
from .render import format_value, render_table, write_text
from .trace import require_trace

__all__ = [
    "pass_",
    "get_pass",
    "PassError",
    "FormatError",
    "PAG",
    "MetricInfo",
    "MetricRows",
    "Trace",
    "Selection",
    "VertexSet",
    "EdgeSet",
    "ParallelVertexSet",
    "ParallelEdgeSet",
    "VertexKind",
    "MPIClass",
    "CollectiveOp",
    "mpi_class",
    "is_gpu_api",
    "IDLE_REGIONS",
    "Analysis",
    "Settings",
    "NoSettings",
    "SettingsError",
    "settings_keywords",
    "settings_dict",
    "Partition",
    "Executor",
    "Grouped",
    "grouped",
    "VERTEX_STATS",
    "StatsSettings",
    "vertex_stats_of",
    "WAIT_INSTANCES",
    "CRITICAL_PATH",
    "DELAY_COSTS",
    "LOCATIONS",
    "FLAT_TIMELINE",
    "EXCLUSIVE_BY_VERTEX",
    "WaitSettings",
    "DelaySettings",
    "require_trace",
    "vertex_columns",
    "render_table",
    "format_value",
    "new_figure",
    "save_figure",
    "Figure",
    "write_text",
    "output_path",
]


def vertex_stats_of(pag: PAG, metric: str, across: str = "process", *, owner: str | None = None) -> dict[str, Any]:
    """Per-vertex ``sum``, ``mean``, ``max``, ``min``, ``std``, ``count``, ``argmax_process`` of a metric.

    Dense semantics (a process without a row counts 0); computed once per PAG
    (:data:`VERTEX_STATS`), and on an engine from the partitions' partials.
    ``owner`` (a pass name) is named in errors.
    """
    return pag.analyses.get(VERTEX_STATS, owner=owner, metric=metric, across=across)  # type: ignore[no-any-return]
