"""perflow: a programmable performance-analysis framework for parallel programs.

Load a run into a Program Abstraction Graph (:class:`PAG`), select vertices
and edges, and compose passes into analysis flows.

>>> import perflow
>>> pag = perflow.synthetic.trace(nprocs=8, iterations=20, slow_rank=3)
>>> pag.vertices.filter(kind="mpi").sort_by("time_exc", agg="max").top(5)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _jit
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

if TYPE_CHECKING:  # the names below are imported on first use (see __getattr__)
    from . import synthetic
    from .flow import Flow, FlowResult, load_flow, pass_, run
    from .kinds import CollectiveOp, MPIClass, VertexKind
    from .pag.ensemble import Ensemble
    from .pag.instances import Trace
    from .pag.pag import PAG, MetricInfo
    from .pag.parallel import ParallelEdgeSet, ParallelVertexSet, ParallelView
    from .pag.persist import load
    from .pag.sets import EdgeSet, Vertex, VertexSet
    from .readers import formats, read
    from .readers.runs import read_ensemble, read_runs
    from .trace.build import build_pag
    from .trace.builder import TraceBuilder
    from .trace.raw import RawTrace

_jit.configure()  # compiled kernels are cached per user, never inside the package

#: public name -> module it lives in (imported when the name is first used: ``import perflow`` stays cheap)
_LAZY = {
    "synthetic": ".synthetic",
    "Flow": ".flow",
    "FlowResult": ".flow",
    "load_flow": ".flow",
    "pass_": ".flow",
    "run": ".flow",
    "CollectiveOp": ".kinds",
    "MPIClass": ".kinds",
    "VertexKind": ".kinds",
    "PAG": ".pag.pag",
    "MetricInfo": ".pag.pag",
    "ParallelEdgeSet": ".pag.parallel",
    "ParallelVertexSet": ".pag.parallel",
    "ParallelView": ".pag.parallel",
    "load": ".pag.persist",
    "EdgeSet": ".pag.sets",
    "Vertex": ".pag.sets",
    "VertexSet": ".pag.sets",
    "formats": ".readers",
    "read": ".readers",
    "build_pag": ".trace.build",
    "clock_correction": ".trace.clc",
    "TraceBuilder": ".trace.builder",
    "RawTrace": ".trace.raw",
    "Trace": ".pag.instances",
    "Ensemble": ".readers.runs",
    "read_runs": ".readers.runs",
    "read_ensemble": ".readers.runs",
}

__version__ = "0.1.0"

__all__ = [
    "PAG",
    "Ensemble",
    "read_runs",
    "read_ensemble",
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
    "clock_correction",
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
    """Public names on first use; ``perflow.read_<format>(path, ...)`` reads one format explicitly."""
    target = _LAZY.get(name)
    if target is not None:
        import importlib

        mod = importlib.import_module(target, __name__)
        value = mod if name == "synthetic" else getattr(mod, name)
        globals()[name] = value
        return value
    if name.startswith("read_"):
        fmt = name[5:]
        read = __getattr__("read")

        def reader(path: Any, **options: Any) -> PAG:
            return read(path, format=fmt, **options)

        reader.__name__ = name
        reader.__doc__ = f"Read {fmt} data into a PAG (see perflow.readers.{fmt})."
        return reader
    raise AttributeError(f"module 'perflow' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
