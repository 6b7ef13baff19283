"""Recording under MPICH: C and Fortran calls each recorded once (MPICH's Fortran calls the C MPI_*)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from perflow.errors import RecordError
from perflow.kinds import P2P

from .conftest import PROGRAMS, RUN_TIMEOUT, count, site_line

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def mpich(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    from perflow.recorder.toolchain import find_toolchain

    try:
        tc = find_toolchain("mpich")
    except RecordError as exc:
        pytest.skip(f"MPICH is not installed: {exc}")
    d = tmp_path_factory.mktemp("mpich")

    def record_program(source: str, *args: str) -> object:
        from perflow.recorder.session import record

        cc = tc.mpicc if source.endswith(".c") else tc.mpicc.replace("mpicc", "mpif90")
        if not shutil.which(cc):
            pytest.skip(f"no {cc}")
        exe = d / Path(source).name.replace(".", "_")
        subprocess.run(
            [cc, "-O2", "-g", "-o", str(exe), str(PROGRAMS / source)],
            check=True,
            capture_output=True,
            timeout=120,
            cwd=d,
        )
        with open(d / "out", "w") as fo:
            return record(
                [str(exe), *args],
                nprocs=2,
                outdir=d / f"out-{exe.name}",
                timeout=RUN_TIMEOUT,
                cache=d / "lib",
                outputs=(),
                stdout=fo,
            )

    return record_program


def test_mpich_wildcard_receives(mpich) -> None:  # noqa: ANN001
    res = mpich("ring.c", "3", "100")  # MPI_Irecv from MPI_ANY_SOURCE (-2 in MPICH, where -1 is MPI_PROC_NULL)
    p = res.raw.table("p2p_events")
    for loc in (0, 1):
        assert count(p, location=loc, kind=P2P.IRECV_REQUEST, peer=-1, tag=7, bytes=800) == 3
        assert count(p, location=loc, kind=P2P.IRECV, peer=1 - loc, tag=7, bytes=800) == 3


@pytest.mark.parametrize("source", ["pingpong.c", "pingpong.f90"])
def test_mpich_pingpong(mpich, source: str) -> None:  # noqa: ANN001
    res = mpich(source, "4", "128")
    assert res.status == 0 and res.raw.attrs["mpi"] == "mpich"
    p = res.raw.table("p2p_events")
    assert len(p) == 16  # not counted twice
    assert count(p, location=0, kind=P2P.SEND, peer=1, tag=10, bytes=128) == 4
    assert count(p, location=1, kind=P2P.RECV, peer=0, tag=10, bytes=128) == 4
    reg = res.raw.regions
    send = reg[reg["name"] == "MPI_Send"]
    tag = "ping_send" if source.endswith(".c") else "f_ping_send"
    assert site_line(source, tag) in set(send["line"])  # through MPICH's Fortran layer to the user's line
