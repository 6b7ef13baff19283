"""Find the MPI implementation and build (once, cached) the interposition library.

The library is compiled with the MPI compiler wrapper of the implementation
the recorded program uses, and cached under
``<perflow's user cache>/recorder/<impl>-<hash>/libpfrec.so`` (``~/.cache/perflow``, or
``$PERFLOW_CACHE_DIR``), where the hash
covers the C sources and the wrapper's compile line (``mpicc -show``), so a
change of either rebuilds it.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .._jit import cache_root
from ..errors import RecordError

__all__ = ["Toolchain", "find_toolchain", "build_library", "program_mpi", "CSRC"]

log = logging.getLogger(__name__)

#: Directory of the recorder's C sources.
CSRC = Path(__file__).resolve().parent / "csrc"
_SOURCES = [
    "pfrec.h",
    "pfrec_f.h",
    "functions.def",
    "pfrec_core.c",
    "pfrec_inst.c",
    "pfrec_thr.c",
    "pfrec_omp.c",
    "pfrec_c.c",
    "pfrec_rma.c",
    "pfrec_f.c",
    "pfrec_rma_f.c",
    "pfrec_crash.c",
]

OPENMPI = "openmpi"
MPICH = "mpich"


@dataclass
class Toolchain:
    """An MPI implementation's compiler wrapper and launcher.

    Attributes
    ----------
    impl : str
        ``"openmpi"`` or ``"mpich"``.
    mpicc : str
        Path of the C compiler wrapper.
    launcher : list of str
        The launcher command (``mpirun`` and any options of the user's).
    launcher_kind : str
        How to pass environment variables to the ranks: ``"openmpi"`` (``-x``),
        ``"hydra"`` (``-genv``), ``"env"`` (inherited environment) or
        ``"direct"`` (no launcher: one process run as it is).
    show : str
        The wrapper's underlying compile line (``mpicc -show``).
    """

    impl: str
    mpicc: str
    launcher: list[str] = field(default_factory=list)
    launcher_kind: str = "env"
    show: str = ""


def _run(argv: list[str], timeout: float = 30) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return p.returncode, (p.stdout or "") + (p.stderr or "")


def _impl_of_wrapper(mpicc: str) -> str | None:
    name = Path(mpicc).name
    if name.endswith(".openmpi"):
        return OPENMPI
    if name.endswith(".mpich"):
        return MPICH
    rc, out = _run([mpicc, "-showme:version"])
    if rc == 0 and "Open MPI" in out:
        return OPENMPI
    rc, out = _run([mpicc, "-v"])
    if "MPICH" in out or "mpich" in out.lower():
        return MPICH
    return None


def _launcher_kind(cmd: list[str]) -> str:
    name = Path(cmd[0]).name
    if "openmpi" in name or "orterun" in name:
        return "openmpi"
    if "mpich" in name or "hydra" in name:
        return "hydra"
    if name in ("srun", "jsrun", "aprun", "flux"):
        return "env"
    rc, out = _run([cmd[0], "--version"])
    if "Open MPI" in out or "OpenRTE" in out or "Open RTE" in out:
        return "openmpi"
    if "HYDRA" in out or "hydra" in out or "MPICH" in out:
        return "hydra"
    return "env"


def _wrapper_candidates(impl: str | None) -> list[tuple[str, str | None]]:
    """(mpicc, launcher name) pairs to try, unambiguous suffixed names first."""
    env = os.environ.get("PERFLOW_MPICC")
    out: list[tuple[str, str | None]] = []
    if env:
        out.append((env, None))
    impls = [impl] if impl else [OPENMPI, MPICH]
    for i in impls:
        out.append((f"mpicc.{i}", f"mpirun.{i}" if i == OPENMPI else f"mpiexec.{i}"))
    out.append(("mpicc", None))
    return out


def find_toolchain(impl: str | None = None, mpirun: str | None = None) -> Toolchain:
    """Find an MPI compiler wrapper and launcher.

    Parameters
    ----------
    impl : {"openmpi", "mpich"}, optional
        The implementation the program uses; any (Open MPI first) when None.
    mpirun : str, optional
        The launcher command line given by the user (``--mpirun``); it also
        decides the implementation when ``impl`` is None and it names one.

    Returns
    -------
    Toolchain

    Raises
    ------
    RecordError
        When no suitable MPI compiler wrapper is found.
    """
    launcher = shlex.split(mpirun) if mpirun else None
    kind = _launcher_kind(launcher) if launcher else None
    if impl is None and kind in ("openmpi", "hydra"):
        impl = OPENMPI if kind == "openmpi" else MPICH
    for cc, run in _wrapper_candidates(impl):
        path = shutil.which(cc)
        if not path:
            continue
        found = _impl_of_wrapper(path)
        if found is None or (impl and found != impl):
            continue
        if launcher is None:
            cand = [run] if run else []
            cand += ["mpirun", "mpiexec"]
            near = [str(Path(path).with_name(c)) for c in cand if c]
            exe = next((shutil.which(c) for c in near + cand if shutil.which(c)), None)
            if not exe:
                continue
            launch = [exe]
            lkind = _launcher_kind(launch)
        else:
            launch, lkind = launcher, kind or "env"
        rc, show = _run([path, "-show"])
        return Toolchain(found, path, launch, lkind, show.strip() if rc == 0 else "")
    what = f"{impl} " if impl else ""
    raise RecordError(
        f"no {what}MPI compiler wrapper found (tried mpicc.openmpi, mpicc.mpich, mpicc and $PERFLOW_MPICC); "
        "install Open MPI (e.g. apt-get install openmpi-bin libopenmpi-dev) or MPICH"
    )


def program_mpi(path: str | os.PathLike[str]) -> str | None:
    """Guess the MPI implementation an executable is linked with, from the library names it needs."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            if m[:4] != b"\x7fELF":
                return None
            if m.find(b"libmpi.so.4") >= 0 or m.find(b"libmpi_mpifh") >= 0 or m.find(b"libopen-rte") >= 0:
                return OPENMPI
            if m.find(b"libmpich") >= 0 or m.find(b"libmpi.so.12") >= 0 or m.find(b"libmpifort") >= 0:
                return MPICH
    except (OSError, ValueError):
        return None
    return None


def _cache_root() -> Path:
    if os.environ.get("PERFLOW_RECORDER_CACHE"):
        return Path(os.environ["PERFLOW_RECORDER_CACHE"])

    return cache_root() / "recorder"


def build_library(tc: Toolchain, cache: str | os.PathLike[str] | None = None, timeout: float = 300) -> Path:
    """Return the interposition library for ``tc``, compiling it on first use.

    Parameters
    ----------
    tc : Toolchain
    cache : path, optional
        Cache root; ``$PERFLOW_RECORDER_CACHE`` if set, else
        ``$PERFLOW_RECORDER_CACHE``, else ``recorder/`` in perflow's user cache (``~/.cache/perflow/recorder``).
    timeout : float
        Seconds allowed for the compiler.

    Returns
    -------
    pathlib.Path
        The shared library to preload.

    Raises
    ------
    RecordError
        When the compiler fails (its messages are included).
    """
    h = hashlib.sha256()
    for name in _SOURCES:
        h.update(name.encode() + b"\0" + (CSRC / name).read_bytes())
    h.update(tc.impl.encode() + b"\0" + tc.show.encode())
    root = Path(cache) if cache else _cache_root()
    d = root / f"{tc.impl}-{h.hexdigest()[:16]}"
    lib = d / "libpfrec.so"
    if lib.is_file():
        return lib
    d.mkdir(parents=True, exist_ok=True)
    # (source, extra flags): under Open MPI the Fortran wrappers twice, for mpif.h/use mpi and for mpi_f08
    units = [
        ("pfrec_core.c", []),
        ("pfrec_inst.c", []),
        ("pfrec_thr.c", []),
        ("pfrec_omp.c", []),
        ("pfrec_c.c", []),
        ("pfrec_rma.c", []),
        ("pfrec_crash.c", []),
    ]
    if tc.impl == OPENMPI:
        units += [(f, fl) for f in ("pfrec_f.c", "pfrec_rma_f.c") for fl in ([], ["-DPF_F08"])]
    fd, tmp = tempfile.mkstemp(prefix=".libpfrec-", suffix=".so", dir=d)
    os.close(fd)
    log.info("building the recorder library with %s in %s", tc.mpicc, d)
    try:
        with tempfile.TemporaryDirectory(prefix=".build-", dir=d) as bdir:
            objs = []
            for k, (src, flags) in enumerate(units):
                obj = str(Path(bdir) / f"{k}-{Path(src).stem}.o")
                argv = [tc.mpicc, "-c", "-fPIC", "-O2", "-g", "-Wall", *flags, "-o", obj, str(CSRC / src)]
                _compile(tc, argv, timeout)
                objs.append(obj)
            _compile(tc, [tc.mpicc, "-shared", "-fPIC", "-o", tmp, *objs, "-lrt", "-ldl"], timeout)
    except RecordError:
        Path(tmp).unlink(missing_ok=True)
        raise
    os.replace(tmp, lib)
    return lib


def _compile(tc: Toolchain, argv: list[str], timeout: float) -> None:
    log.debug("building the recorder library: %s", shlex.join(argv))
    rc, out = _run(argv, timeout)
    if rc != 0:
        tail = "\n".join(out.strip().splitlines()[-20:])
        raise RecordError(f"building the recorder library with {tc.mpicc} failed (status {rc}):\n{tail}")
