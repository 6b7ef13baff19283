"""Session fixtures of the recorder tests: an MPI toolchain, compiled test programs, recorded runs.

Registered once for the whole suite by ``tests/conftest.py`` (the recorder,
invariants and Dask tests share them). Programs are compiled once per session
with the MPI wrappers found, the recorder's interposition library is built
once, and each distinct run is recorded once and shared by the tests that look
at it. Every run has a time limit. Tests skip with the reason when no MPI
compiler (or no Fortran compiler, or no mpi4py) is available.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perflow.errors import RecordError

from .conftest import PROGRAMS, RUN_TIMEOUT, Run
from .otf2check import check_otf2

# Open MPI refuses to run as root, and more ranks than cores, without these.
for _k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "OMPI_MCA_rmaps_base_oversubscribe"):
    os.environ.setdefault(_k, "1")


@pytest.fixture(scope="session")
def toolchain():  # noqa: ANN201
    """An MPI toolchain (Open MPI preferred: MPICH busy-polls when ranks exceed cores)."""
    from perflow.recorder.toolchain import find_toolchain

    for impl in ("openmpi", None):
        try:
            return find_toolchain(impl)
        except RecordError as exc:
            reason = str(exc)
    pytest.skip(f"no MPI compiler wrapper: {reason}")


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("recorder")


def _fortran_wrapper(mpicc: str) -> str | None:
    p = Path(mpicc)
    for name in ("mpifort", "mpif90"):
        cand = p.with_name(p.name.replace("mpicc", name))
        if cand.is_file():
            return str(cand)
    return None


@pytest.fixture(scope="session")
def build(toolchain, workdir: Path):  # noqa: ANN001, ANN201
    """compile(source, *flags) -> path of the executable (cached per session)."""
    cache: dict[tuple, Path] = {}

    def compile(source: str, *flags: str, instrument: bool = False) -> Path:
        key = (source, flags, instrument)
        if key in cache:
            return cache[key]
        if source.endswith((".f90", ".f")):
            cc = _fortran_wrapper(toolchain.mpicc)
            if cc is None or not shutil.which("gfortran"):
                pytest.skip(f"no Fortran MPI compiler next to {toolchain.mpicc}")
        elif source.endswith(".cpp"):
            cc = toolchain.mpicc.replace("mpicc", "mpicxx")
        else:
            cc = toolchain.mpicc
        exe = workdir / "bin" / f"{Path(source).stem}{''.join(f.strip('-') for f in flags)}-{len(cache)}"
        exe.parent.mkdir(exist_ok=True)
        argv = [cc, "-O2", "-g", *flags, "-o", str(exe), str(PROGRAMS / source)]
        if instrument:  # what `perflow cc/cxx/fc` runs
            from perflow.recorder.instrument import instrumented_argv

            argv = instrumented_argv([cc], argv[1:])
        p = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=exe.parent,
        )
        assert p.returncode == 0, f"compiling {source} failed:\n{p.stderr}"
        cache[key] = exe
        return exe

    return compile


@pytest.fixture(scope="session")
def recorded(toolchain, build, workdir: Path):  # noqa: ANN001, ANN201
    """record(source_or_argv, *args, n=4, **kw) -> Run, cached per session."""
    from perflow.recorder.session import record

    cache: dict[tuple, Run] = {}
    serial = itertools.count()

    def run(
        program: str | list[str], *args: str, n: int = 4, flags: tuple = (), instrument: bool = False, **kw: object
    ) -> Run:
        key = (str(program), args, n, flags, instrument, tuple(sorted(kw.items())))
        if key not in cache:
            argv = list(program) if isinstance(program, list) else [str(build(program, *flags, instrument=instrument))]
            out = workdir / f"run-{next(serial)}"
            out.mkdir()
            with open(out / "stdout", "w+") as fo, open(out / "stderr", "w+") as fe:
                res = record(
                    [*argv, *args],
                    nprocs=n,
                    outdir=out,
                    timeout=kw.pop("timeout", RUN_TIMEOUT),
                    cache=workdir / "libcache",
                    stdout=fo,
                    stderr=fe,
                    **kw,
                )
            cache[key] = Run(res, (out / "stdout").read_text(), (out / "stderr").read_text())
            if "otf2" in res.files:  # every OTF2 trace the recorder writes must be valid for other tools
                check_otf2(res.files["otf2"], need_print=False)  # test_otf2_output.py needs otf2-print itself
        return cache[key]

    return run


@pytest.fixture(scope="session")
def plain(toolchain):  # noqa: ANN001, ANN201
    """plain(argv, n) -> (status, stdout): the program run by the launcher without the recorder."""
    from perflow.recorder.session import launch_command

    def run(argv: list[str], n: int = 4) -> tuple[int, str]:
        cmd, env = launch_command(toolchain, n, [str(a) for a in argv], {})
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        return p.returncode, p.stdout

    return run


@pytest.fixture(scope="session")
def mpi4py_ok(toolchain) -> str:  # noqa: ANN001
    """The Python that has mpi4py (built against an MPI whose launcher we have)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py is not installed (pip install mpi4py after installing libopenmpi-dev)")
    from perflow.recorder.launch import python_mpi

    impl = python_mpi()
    if impl and impl != toolchain.impl:
        pytest.skip(f"mpi4py is built against {impl}, the test toolchain is {toolchain.impl}")
    return sys.executable
