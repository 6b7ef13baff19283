"""What a recorded program links, and the warnings when a recording missed part of it.

:func:`program_binding` reads an executable's MPI language binding (C,
Fortran ``mpif.h``/``use mpi``, ``mpi_f08``); :func:`check_bindings` warns,
naming the binding, when no MPI call was recorded; :func:`check_openmp` warns
when the OpenMP runtime has no OMPT interface (only the initial thread of each
rank is recorded then). Never a silent empty trace.
"""

from __future__ import annotations

import logging
import mmap
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .session import RecordResult

__all__ = ["program_binding", "check_bindings", "check_openmp"]

log = logging.getLogger(__name__)


def check_bindings(result: RecordResult, exe: str, impl: str) -> None:
    """Warn, naming the binding, when a program's MPI calls were not seen (never a silent empty trace)."""
    raw = result.raw
    if raw is None or (raw.regions["paradigm"] == "mpi").any():
        return
    binding = program_binding(exe)
    why = {
        "mpi_f08": "the mpi_f08 Fortran module",
        "fortran": "the Fortran mpif.h/use mpi bindings",
    }.get(binding or "", "")
    if why and impl != "openmpi":
        msg = f"no MPI call was recorded: {Path(exe).name} uses {why}, which the recorder wraps under Open MPI only"
    elif why:
        msg = f"no MPI call was recorded although {Path(exe).name} uses {why}"
    else:
        msg = f"no MPI call was recorded in {Path(exe).name} (is it an MPI program, linked dynamically?)"
    log.warning("%s", msg)
    result.notes.append(msg)


def check_openmp(result: RecordResult, exe: str) -> None:
    """Warn when the program's OpenMP runtime has no OMPT interface (GCC's libgomp): only the initial thread
    of each rank is recorded then, never silently."""
    raw = result.raw
    if raw is None:
        return
    how = str(raw.attrs.get("openmp", ""))
    if how.startswith("OMPT"):
        return
    runtime = how.split(" (", 1)[0] if how else ("libgomp" if _links(exe, b"libgomp.so") else "")
    if not runtime:
        return
    msg = (
        f"{Path(exe).name} uses the OpenMP runtime {runtime}, which has no OMPT interface: only the initial "
        "thread of each rank is recorded (the worker threads' work, barriers and locks are not); build it with "
        "clang -fopenmp (LLVM's libomp, e.g. OMPI_CC=clang mpicc -fopenmp) to record every thread"
    )
    log.warning("%s", msg)
    result.notes.append(msg)


def _links(path: str | os.PathLike[str], needle: bytes) -> bool:
    """Whether an executable's bytes (its dynamic dependencies) name ``needle``."""

    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m[:4] == b"\x7fELF" and m.find(needle) >= 0
    except (OSError, ValueError):
        return False


def program_binding(path: str | os.PathLike[str]) -> str | None:
    """The MPI language binding an executable links: ``"mpi_f08"``, ``"fortran"``, ``"c"`` or None."""

    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            if m[:4] != b"\x7fELF":
                return None
            if m.find(b"libmpi_usempif08") >= 0 or m.find(b"mpi_f08") >= 0:
                return "mpi_f08"
            if m.find(b"libmpi_mpifh") >= 0 or m.find(b"libmpifort") >= 0 or m.find(b"libmpi_usempi") >= 0:
                return "fortran"
            if m.find(b"libmpi") >= 0:
                return "c"
    except (OSError, ValueError):
        return None
    return None
