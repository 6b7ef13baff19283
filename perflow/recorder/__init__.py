"""perflow's own recorder: collect traces from unmodified MPI and Python programs.

``perflow record -n 4 -- ./app args`` (or :func:`record`) runs a program with
a PMPI interposition library preloaded (MPI programs in C, C++ and Fortran) or
under a Python bootstrap (Python and mpi4py programs), samples the computation
with a CPU-time timer, and assembles what every rank recorded into a
:class:`~perflow.trace.raw.RawTrace`, an OTF2 trace and a PAG. See
``docs/recording.md``.

What runs inside recorded Python processes lives in ``pyrt/perflow_pyrec``,
a standard-library-only package imported under that top-level name, so that
the recorded program does not import perflow. This package imports nothing
heavy until :func:`record` or :func:`load_recording` is used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["record", "RecordResult", "load_recording", "save_raw", "load_raw", "summarize"]

_LAZY = {
    "record": "session",
    "RecordResult": "session",
    "load_recording": "assemble",
    "save_raw": "perflow.trace.store",
    "load_raw": "perflow.trace.store",
    "summarize": "summary",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        mod = _LAZY[name]
        return getattr(importlib.import_module(mod if "." in mod else f"{__name__}.{mod}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
