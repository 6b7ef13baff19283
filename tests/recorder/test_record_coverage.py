"""Coverage: non-blocking collectives, MPI-IO, the binding check, mpi4py's MPI."""

from __future__ import annotations

import stat
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from perflow.kinds import CollectiveOp, CollEv

from .conftest import site_line

DELAY = 0.2


def test_nonblocking_collectives(recorded) -> None:  # noqa: ANN001
    run = recorded("nbc_late.c", "3", str(DELAY), n=4)
    assert run.result.status == 0, run.stderr
    c = run.coll()
    nb = c[c["request"] >= 0]
    # per rank: 3 Iallreduce + 1 Ibarrier + 2 Ibcast, each a BEGIN (in the I-call) and an END (in the completion)
    for kind in (CollEv.BEGIN, CollEv.END):
        assert nb[nb["kind"] == kind].groupby("rank").size().to_dict() == {r: 6 for r in range(4)}
    ends = nb[nb["kind"] == CollEv.END]
    assert ends.groupby("op").size().to_dict() == {
        CollectiveOp.ALLREDUCE: 12,
        CollectiveOp.BARRIER: 4,
        CollectiveOp.BCAST: 8,
    }
    assert set(ends.loc[ends["op"] == CollectiveOp.ALLREDUCE, "sent"]) == {8}
    # each END lies in the call that completed it: MPI_Wait, MPI_Test, MPI_Waitall
    reg = run.raw.regions
    ev = run.raw.region_events
    before = ends["pos"].to_numpy() - 1
    off = reg["name"].to_numpy()[ev["region"][before]] == "off_cpu"
    before[off] -= 2  # time off the CPU inside the call (an off_cpu instance) came first
    inside = reg["name"].to_numpy()[ev["region"][before]]
    assert Counter(inside) == {"MPI_Wait": 12, "MPI_Test": 4, "MPI_Waitall": 8}
    begins = nb[nb["kind"] == CollEv.BEGIN]
    inside = reg["name"].to_numpy()[ev["region"][begins["pos"].to_numpy() - 1]]
    assert Counter(inside) == {"MPI_Iallreduce": 12, "MPI_Ibarrier": 4, "MPI_Ibcast": 8}
    # no undefined operations in the trace
    assert not (c["op"] >= CollectiveOp.INIT).any()


def test_nonblocking_collective_instances_and_waits(recorded) -> None:  # noqa: ANN001
    from perflow.trace.build import build_pag
    from perflow.trace.collwaits import collective_waits

    run = recorded("nbc_late.c", "3", str(DELAY), n=4)
    pag = build_pag(run.raw)
    coll = pag.trace.collectives
    per_op = coll.groupby("op")["instance"].nunique().to_dict()
    assert per_op[int(CollectiveOp.ALLREDUCE)] == 3 and per_op[int(CollectiveOp.BARRIER)] == 1
    assert per_op[int(CollectiveOp.BCAST)] == 2  # completed in reverse order, still two instances of 4 ranks
    assert coll.groupby("instance").size().eq(4).all()
    bc = coll[coll["op"] == int(CollectiveOp.BCAST)]
    assert sorted(bc.groupby("instance")["root"].first().tolist()) == [0, 3]
    # the late rank (3) makes the others wait in MPI_Wait, about DELAY per iteration
    w = collective_waits(pag.trace)
    nxn = w[w["kind"] == "wait_nxn"]
    paths = pag.call_paths()
    by_rank = nxn.groupby("process")["amount"].sum()
    for r in range(3):
        assert 3 * DELAY * 0.7 <= by_rank.get(r, 0.0) <= 3 * DELAY + 0.5, by_rank.to_dict()
    assert by_rank.get(3, 0.0) < 0.2 * 3 * DELAY
    in_wait = nxn[pd.Series(paths.to_numpy()[nxn["vertex"].to_numpy()]).str.endswith("/main/MPI_Wait").to_numpy()]
    assert in_wait["amount"].sum() >= 0.9 * nxn[nxn["process"] < 3]["amount"].sum() - 0.05
    assert (in_wait["cause_process"] == 3).all()


def test_mpi_io_regions_and_bytes(recorded, workdir: Path) -> None:  # noqa: ANN001
    from perflow.trace.build import build_pag

    n = 1000
    run = recorded("mpiio.c", str(workdir / "mpiio.dat"), str(n), n=4)
    assert run.result.status == 0, run.stderr
    raw = run.raw
    reg = raw.regions
    io = reg[reg["name"].str.startswith("MPI_File_")]
    assert set(io["role"]) == {"file_io"}
    wr = io[io["name"] == "MPI_File_write_at_all"]
    assert set(wr["line"]) == {site_line("mpiio.c", "write_at_all")}
    assert list(raw.metrics["name"]) == ["io_bytes_read", "io_bytes_written"]
    pag = build_pag(raw)
    paths = pag.call_paths().to_numpy()
    for metric, call, per_rank in (
        ("io_bytes_written", "MPI_File_write_at_all", 8 * n),
        ("io_bytes_read", "MPI_File_read_at", 8 * n // 2),
    ):
        v = np.flatnonzero(pd.Series(paths).str.endswith(f"/main/{call}").to_numpy())
        assert len(v) == 1
        got = pag.aggregate(metric, "sum").to_numpy()[v[0]]
        assert got == 4 * per_rank
    written = pag.aggregate("io_bytes_written", "sum").to_numpy()
    assert (
        written[np.flatnonzero(pd.Series(paths).str.endswith("/main/MPI_File_write").to_numpy())[0]] == 80
    )  # last rank only, 10 doubles


def test_no_mpi_recorded_is_a_warning_naming_the_binding(tmp_path: Path) -> None:
    from perflow.recorder.binding import check_bindings, program_binding
    from perflow.recorder.session import RecordResult
    from perflow.trace.raw import RawTrace

    for name, needed, binding in (
        ("f08", b"libmpi_usempif08.so.40\0libmpi.so.40", "mpi_f08"),
        ("fh", b"libmpi_mpifh.so.40\0libmpi.so.40", "fortran"),
        ("c", b"libmpi.so.40", "c"),
    ):
        f = tmp_path / name
        f.write_bytes(b"\x7fELF" + b"\0" * 60 + needed + b"\0")
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
        assert program_binding(f) == binding
    empty = RawTrace(
        locations=pd.DataFrame({"process": [0]}),
        regions=pd.DataFrame({"name": ["prog"], "paradigm": ["user"]}),
        region_events={"location": [0, 0], "time": [0.0, 1.0], "kind": [0, 1], "region": [0, 0]},
    )
    res = RecordResult(status=0, outdir=tmp_path, raw=empty)
    check_bindings(res, str(tmp_path / "f08"), "mpich")
    assert res.notes == [
        "no MPI call was recorded: f08 uses the mpi_f08 Fortran module, which the recorder wraps under Open MPI only"
    ]


def test_mpi4py_library_is_asked_of_mpi4py(tmp_path: Path) -> None:
    from perflow.recorder.launch import python_mpi

    for version, impl in (
        ("Open MPI v4.1.4, package: Debian OpenMPI", "openmpi"),
        ("MPICH Version:      4.0.2", "mpich"),
    ):
        py = tmp_path / "python"
        py.write_text(f"#!/bin/sh\necho '{version}'\necho /x/MPI.so\n")
        py.chmod(py.stat().st_mode | stat.S_IEXEC)
        assert python_mpi(str(py)) == impl
    py.write_text("#!/bin/sh\nexit 1\n")
    assert python_mpi(str(py)) is None


def test_mpi4py_choice_matches_the_loaded_library(mpi4py_ok: str) -> None:
    import subprocess
    import sys

    from perflow.recorder.launch import MPI4PY_PROBE, python_mpi

    out = subprocess.run([sys.executable, "-c", MPI4PY_PROBE], capture_output=True, text=True, check=True).stdout
    so = out.splitlines()[1]
    assert python_mpi() == ("openmpi" if "Open MPI" in out.splitlines()[0] else "mpich")
    assert Path(so).name.startswith("MPI")
