"""The SDK for input and output of whole data sets: reading, loading, runs, the current engine, progress.

What the ``io`` and multi-run passes build on: :func:`read` (any format,
through the current engine when a flow runs on one), :func:`load` (a saved
PAG), :mod:`synthetic` (synthetic traces and profiles), :func:`expand_runs`
and :func:`read_run_list` (the runs of a scaling study or an ensemble),
:func:`current_engine`, :func:`in_flow_run` (whether a flow run runs the calling pass), :func:`task` (a
progress line for long work), and
:func:`cube_archive` (a PAG as the bytes of a CUBE4 file, Scalasca's metric
tree included for a trace).
"""

from __future__ import annotations

from .. import synthetic
from ..flow.engine import current_engine
from ..flow.writes import current_write_policy
from ..pag.persist import load
from ..progress import task
from ..readers import read
from ..readers.runs import expand_runs, read_run_list
from ..writers.cube import cube_archive

__all__ = [
    "read", "load", "synthetic", "expand_runs", "read_run_list", "current_engine", "in_flow_run", "task", "cube_archive",
]  # fmt: skip


def in_flow_run() -> bool:
    """Whether the calling pass runs inside a flow run (with its write policy in place), so that what it keeps
    for the run's other outputs (a figure's data for the run's page, say) has a reader."""
    return current_write_policy() is not None
