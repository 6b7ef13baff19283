"""How ``perflow record`` launches a program: Python command lines, the MPI mpi4py loads, the launcher's command line.

* :func:`is_python`, :func:`python_command`: a Python program runs under
  ``python -m perflow_pyrec`` (the recorder's Python runtime);
* :func:`python_mpi`: the MPI implementation mpi4py loads in an interpreter
  (asked of mpi4py itself, :data:`MPI4PY_PROBE`), to pick the toolchain;
* :func:`launch_command`: the MPI launcher's command line and environment
  (variables for the ranks only: ``-x`` for Open MPI, ``-genv`` for Hydra).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

from ..errors import RecordError
from .toolchain import Toolchain, program_mpi

__all__ = ["is_python", "python_command", "python_mpi", "launch_command", "MPI4PY_PROBE"]

log = logging.getLogger(__name__)
_PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?$")


def is_python(argv: list[str]) -> bool:
    """Whether the command runs a Python program (``python ...`` or a ``.py`` file)."""
    return bool(argv) and (bool(_PYTHON.match(Path(argv[0]).name)) or argv[0].endswith(".py"))


def python_command(argv: list[str], python: str | None = None) -> list[str]:
    """Rewrite a Python command line so that the program runs under ``python -m perflow_pyrec``."""

    if argv[0].endswith(".py"):
        return [python or sys.executable, "-m", "perflow_pyrec", *argv]
    out, i = [argv[0]], 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-m", "-c", "-"):
        out.append(argv[i])
        if argv[i] in ("-W", "-X") and i + 1 < len(argv):
            out.append(argv[i + 1])
            i += 1
        i += 1
    if i >= len(argv) or argv[i] == "-":
        raise RecordError("a Python program needs a script, -m MODULE or -c CODE (reading stdin is not supported)")
    return out + ["-m", "perflow_pyrec", *argv[i:]]


MPI4PY_PROBE = """\
import mpi4py
mpi4py.rc.initialize = False
mpi4py.rc.finalize = False
from mpi4py import MPI
print(MPI.Get_library_version().splitlines()[0])
print(MPI.__file__)
"""


def python_mpi(python: str | None = None) -> str | None:
    """The MPI implementation that mpi4py loads in ``python`` (this interpreter by default).

    mpi4py 4.x ships builds for several MPIs in one wheel and picks one when
    imported (``$MPI4PY_MPIABI``, else the first that loads), so the choice
    is asked of mpi4py itself, in a child interpreter that imports
    ``mpi4py.MPI`` without initialising MPI; the answer is
    ``MPI.Get_library_version()``. Falls back to the library names of the
    extension modules when that fails.
    """

    try:
        p = subprocess.run(
            [python or sys.executable, "-c", MPI4PY_PROBE],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        version = p.stdout.splitlines()[0] if p.returncode == 0 and p.stdout else ""
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    if version:
        low = version.lower()
        if "open mpi" in low:
            return "openmpi"
        if "mpich" in low or "intel(r) mpi" in low or "mvapich" in low:
            return "mpich"
        log.warning("mpi4py loads an MPI perflow does not know: %s", version)
    if python:
        return None
    spec = importlib.util.find_spec("mpi4py")
    if spec is None or not spec.submodule_search_locations:
        return None
    impls = {program_mpi(so) for d in spec.submodule_search_locations for so in Path(d).glob("MPI*.so")} - {None}
    return impls.pop() if len(impls) == 1 else None


def launch_command(tc: Toolchain, nprocs: int, program: list[str], ranks_env: dict[str, str]) -> tuple[list[str], dict]:
    """The launcher command line and its environment.

    Variables in ``ranks_env`` reach the ranks only (``-x`` for Open MPI,
    ``-genv`` for MPICH's Hydra); other launchers inherit them. A toolchain
    of kind ``"direct"`` runs the program itself, without a launcher.
    """
    env = dict(os.environ)
    if tc.launcher_kind == "direct":
        env.update(ranks_env)
        return list(program), env
    argv = [*tc.launcher, "-n", str(nprocs)]
    for k, v in ranks_env.items():
        if tc.launcher_kind == "openmpi":
            argv += ["-x", f"{k}={v}"]
        elif tc.launcher_kind == "hydra":
            argv += ["-genv", k, v]
        else:
            env[k] = v
    if tc.launcher_kind == "openmpi":
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        if nprocs > (os.cpu_count() or 1):
            env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    return argv + list(program), env
