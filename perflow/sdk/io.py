"""The SDK for input and output of whole data sets: reading, loading, runs, the current engine, progress.

What the ``io`` and multi-run passes build on: :func:`read` (any format,
through the current engine when a flow runs on one), :func:`load` (a saved
PAG), :mod:`synthetic` (synthetic traces and profiles), :func:`expand_runs`
and :func:`read_run_list` (the runs of a scaling study or an ensemble),
:func:`current_engine`, :func:`task` (a progress line for long work), and
:func:`cube_archive` (a PAG as the bytes of a CUBE4 file, Scalasca's metric
tree included for a trace).
"""

from __future__ import annotations

from .. import synthetic
from ..flow.engine import current_engine
from ..pag.persist import load
from ..progress import task
from ..readers import read
from ..readers.runs import expand_runs, read_run_list
from ..writers.cube import cube_archive

__all__ = ["read", "load", "synthetic", "expand_runs", "read_run_list", "current_engine", "task", "cube_archive"]
