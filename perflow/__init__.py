"""perflow: a programmable performance-analysis framework for parallel programs.

Load a run into a Program Abstraction Graph (:class:`PAG`), select vertices
and edges, and compose passes into analysis flows.

>>> import perflow
>>> pag = perflow.synthetic.trace(nprocs=8, iterations=20, slow_rank=3)
>>> pag.vertices.filter(kind="mpi").sort_by("time_exc", agg="max").top(5)
"""

from __future__ import annotations

from typing import Any

from . import synthetic
from .errors import (
    FlowError,
    FormatError,
    MetricError,
    PAGError,
    PassError,
    PerflowError,
    RecordError,
    StepError,
    TraceError,
    ValidationError,
)
from .flow import Flow, FlowResult, load_flow, pass_, run
from .kinds import CollectiveOp, MPIClass, VertexKind
from .pag.instances import Trace
from .pag.pag import PAG, MetricInfo
from .pag.parallel import ParallelEdgeSet, ParallelVertexSet, ParallelView
from .pag.persist import load
from .pag.sets import EdgeSet, Vertex, VertexSet
from .readers import formats, read
from .trace.build import build_pag
from .trace.builder import TraceBuilder
from .trace.raw import RawTrace

__version__ = "0.1.0"

__all__ = [
    "PAG",
    "MetricInfo",
    "Vertex",
    "VertexSet",
    "EdgeSet",
    "ParallelView",
    "ParallelVertexSet",
    "ParallelEdgeSet",
    "Trace",
    "RawTrace",
    "TraceBuilder",
    "VertexKind",
    "CollectiveOp",
    "MPIClass",
    "build_pag",
    "load",
    "read",
    "formats",
    "synthetic",
    "Flow",
    "FlowResult",
    "run",
    "load_flow",
    "pass_",
    "PerflowError",
    "FormatError",
    "PAGError",
    "MetricError",
    "TraceError",
    "FlowError",
    "ValidationError",
    "StepError",
    "PassError",
    "RecordError",
]


def __getattr__(name: str) -> Any:
    """``perflow.read_<format>(path, ...)`` reads one format explicitly."""
    if name.startswith("read_"):
        fmt = name[5:]

        def reader(path: Any, **options: Any) -> PAG:
            return read(path, format=fmt, **options)

        reader.__name__ = name
        reader.__doc__ = f"Read {fmt} data into a PAG (see perflow.readers.{fmt})."
        return reader
    raise AttributeError(f"module 'perflow' has no attribute {name!r}")
