"""Findings read off a run's tables: each known table shape gives candidate findings (see ``findings``).

A table is recognised by its columns, never by the flow that made it, so a user's flow that
outputs a wait-state summary or a root-cause table gets findings too:

=================================  ===========================================  ===========================
table (columns)                    finding                                      cost (time lost per process)
=================================  ===========================================  ===========================
root causes (vertex, cost, total,  a call path whose delays make others wait    total / locations
top_process)
off the CPU (the same and          a call path the delaying thread was off the  total / locations
off_cpu_vertex)                    CPU in, making others wait
waits per call path (vertex,       a wait state at an MPI call                  amount / locations
kind, amount, max_process)
critical-path imbalance (vertex,   a call path that keeps the critical path     cpi
cpi)                               longer than its mean
load imbalance (vertex,            a call path slower on some processes         imbalance_time
imbalance_time, max_process)
POP metrics (metric, value, unit)  an efficiency below 95%                      the seconds it stands for
scalability (call_path, loss)      a call path that does not scale              loss
scalability fits (call_path,       a call path whose time grows with the scale  predicted - last measured
slope, predicted)
slow ranges (process, start, end,  a process slow for a while (variance)        lost
lost)
backtracking roots (vertex,        a process abnormally slow in a call path     value - mean
process, value, mean,
symptom_vertex)
differences (call_path, diff,      a call path that takes longer in run b       diff / locations
value_a, value_b)
hotspots (vertex, value, share)    where the time goes (context, ranked last)   value / locations
=================================  ===========================================  ===========================

Helper tables refine these: the wait-state instances (which processes wait, for whom, the
longest wait to zoom to), the root causes per process, the critical-path segments and the
outlier processes. A ``gain [s]`` column (the what-if replay's predicted gain of fixing a row)
is carried over when a table has one; the ``what_if`` table's ``NAME=balance`` scenarios give
their gain to the findings about that function.

The candidate and the helpers are in :mod:`.reading`, one extractor per table
shape in :mod:`.shapes`; :func:`candidates` runs them over a run's values;
:mod:`.fold` says the candidates in library code of the user's code calling it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .reading import GAIN, Candidate, Helpers, has, rank_list
from .shapes import EXTRACTORS

__all__ = ["Candidate", "candidates", "rank_list", "GAIN"]


def candidates(values: Mapping[str, Any], n_locations: int) -> list[Candidate]:
    """Candidate findings of every recognised table among ``values`` (name -> value).

    One table per shape: the first one with a ``gain [s]`` column, else the first (a flow lists
    its main table first; ``critical_path``'s profile and imbalance tables have one shape).
    """
    h = Helpers(values)
    shapes: dict[Any, list[tuple[str, pd.DataFrame]]] = {}
    for name, v in values.items():
        if not isinstance(v, pd.DataFrame):
            continue
        for cols, fn in EXTRACTORS:
            if has(v, *cols):
                shapes.setdefault(fn, []).append((str(name), v))
                break
    out: list[Candidate] = []
    for _, fn in EXTRACTORS:
        tables = shapes.get(fn, [])
        if tables:
            name, v = next(((n, t) for n, t in tables if GAIN in t.columns), tables[0])
            fn(name, v, h, max(n_locations, 1), out)
    for c in out:  # a call path whose balancing the what-if table predicts
        if not math.isfinite(c.gain) and not c.context and c.kind != "wait state":
            c.gain = h.balance_gain(c.call_path)
    return out
