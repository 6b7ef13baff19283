"""Recorder pieces that need no MPI: constants, decoding, assembly, storage, building, commands."""

from __future__ import annotations

import os
import re
import stat
import struct
from pathlib import Path

import numpy as np
import pytest

from perflow.errors import FormatError, RecordError
from perflow.kinds import P2P, CollectiveOp, CollEv, ThreadEv, mpi_class
from perflow.recorder.assemble import load_recording
from perflow.recorder.functions import (
    FN,
    FUNCTIONS,
    OMP_FUNCTIONS,
    R_COLL,
    R_ENTER,
    R_LEAVE,
    R_P2P,
    R_THR,
    REC_DTYPE,
    S_MAGIC,
    S_SAMPLE,
)
from perflow.recorder.regions import _trim_main
from perflow.recorder.session import is_python, python_command
from perflow.recorder.symbols import Frame
from perflow.recorder.toolchain import CSRC, Toolchain, build_library, program_mpi
from perflow.trace.store import load_raw, save_raw

HEADER = (CSRC / "pfrec.h").read_text()


def _enum(prefix: str) -> dict[str, int]:
    return {m[0]: int(m[1]) for m in re.findall(rf"\b{prefix}_(\w+) = (\d+)", HEADER)}


def test_c_constants_match_perflow_kinds() -> None:
    p2p = _enum("P2P")
    assert p2p == {k.name: int(k) for k in P2P}
    ops = _enum("OP")
    assert ops and all(int(CollectiveOp[name]) == value for name, value in ops.items())
    assert _enum("COLL") == {k.name: int(k) for k in CollEv}
    thr = _enum("THR")
    assert thr and all(int(ThreadEv[name]) == value for name, value in thr.items())
    assert re.search(r"PF_R_THR = (\d+)", HEADER)[1] == str(R_THR)
    assert REC_DTYPE.itemsize == 48 and "double t;" in HEADER


def test_function_list() -> None:
    assert FUNCTIONS[0] == "program" and FN["MPI_Send"] == 4
    omp = {FUNCTIONS[i] for i in OMP_FUNCTIONS}
    assert all(mpi_class(name) is not None for name in FUNCTIONS[1:] if name != "user function" and name not in omp)
    assert {"!$omp parallel", "!$omp implicit barrier", "omp_set_lock"} <= omp and not any(
        n.startswith("MPI_") for n in omp
    )
    assert FUNCTIONS[FN["user function"]] == "user function" and mpi_class("user function") is None
    assert len(set(FUNCTIONS)) == len(FUNCTIONS)


def test_python_command_rewriting() -> None:
    boot = ["-m", "perflow_pyrec"]
    assert python_command(["python3", "-u", "-X", "dev", "app.py", "-v"]) == [
        "python3",
        "-u",
        "-X",
        "dev",
        *boot,
        "app.py",
        "-v",
    ]
    assert python_command(["python", "-m", "pkg.mod", "x"]) == ["python", *boot, "-m", "pkg.mod", "x"]
    assert python_command(["python3.11", "-c", "print(1)"]) == ["python3.11", *boot, "-c", "print(1)"]
    assert python_command(["./app.py", "a"])[1:] == [*boot, "./app.py", "a"]
    with pytest.raises(RecordError, match="needs a script, -m MODULE or -c CODE"):
        python_command(["python", "-u"])
    assert is_python(["/usr/bin/python3.11", "x.py"]) and is_python(["run.py"]) and not is_python(["./a.out"])


# ---- a hand-made recording: two ranks, one message ---------------------------


def _rec(**kw: object) -> np.ndarray:
    r = np.zeros(1, REC_DTYPE)
    r["comm"] = -1
    for k, v in kw.items():
        r[k] = v
    return r


def _write_proc(
    d: Path, pid: int, rank: int, offset: float, events: list[np.ndarray], samples: bytes = b"", extra: str = ""
) -> None:
    (d / f"p{pid}.ev").write_bytes(np.concatenate(events).tobytes())
    (d / f"p{pid}.smp").write_bytes(samples)
    (d / f"p{pid}.txt").write_text(
        f"env_rank {rank}\nversion 1\nkind python\npid {pid}\nexe /x/prog.py\nhz 100\nclock_offset {offset}\n"
        f"recsize 48\nrank {rank}\nsize 2\nhost h\nW 2\nC 1 {77 + rank} MPI_COMM_SELF 1 {rank}\n"
        "F\t0\tmain\t/x/prog.py\t3\nS\t0\tmain\t/x/prog.py\t9\n" + extra
    )


@pytest.fixture
def handmade(tmp_path: Path) -> Path:
    send, recv = FN["MPI_Send"], FN["MPI_Recv"]
    sample = struct.pack("<QddQQ", S_MAGIC | (S_SAMPLE << 32) | 1, 100.7, 0.01, 3, 0)
    _write_proc(
        tmp_path,
        11,
        0,
        1000.0,
        [
            _rec(t=100.0, type=R_ENTER, fn=0, n1=-1),
            _rec(t=100.5, type=R_ENTER, fn=send, addr=0, n1=-1),
            _rec(t=100.5, type=R_P2P, kind=P2P.SEND, a=1, b=5, n1=100, n2=-1, comm=0),
            _rec(t=100.6, type=R_LEAVE, fn=send),
            _rec(t=101.0, type=R_LEAVE, fn=0),
        ],
        sample,
    )
    # rank 1 was killed inside MPI_Recv after the message arrived: no LEAVEs
    _write_proc(
        tmp_path,
        12,
        1,
        1000.0,
        [
            _rec(t=100.1, type=R_ENTER, fn=0, n1=-1),
            _rec(t=100.2, type=R_ENTER, fn=recv, addr=0, n1=-1),
            _rec(t=100.55, type=R_P2P, kind=P2P.RECV, a=0, b=5, n1=100, n2=-1, comm=0),
            _rec(t=100.55, type=R_COLL, kind=CollEv.END, fn=CollectiveOp.BARRIER, a=-1, comm=1),
        ],
    )
    return tmp_path


def test_assemble_handmade(handmade: Path) -> None:
    raw = load_recording(handmade)
    ev = raw.region_events
    assert ev["location"].tolist() == [0] * 6 + [1] * 4
    # rank 0's sample at 0.7 stands for 0.01 s of CPU time since the MPI_Send left at 0.6: at least 0.09 s of
    # that was off the CPU, an off_cpu instance [0.6, 0.69] below the sampled stack; the sample covers the rest
    np.testing.assert_allclose(ev["time"], [0, 0.5, 0.6, 0.6, 0.69, 1.0, 0.1, 0.2, 0.55, 0.55], atol=1e-9)
    assert ev["kind"].tolist() == [0, 0, 1, 0, 1, 1, 0, 0, 1, 1]  # rank 1's open regions closed at its last event
    names = raw.regions["name"].reindex(ev["region"]).tolist()
    assert names == [
        *("prog.py", "MPI_Send", "MPI_Send", "off_cpu", "off_cpu", "prog.py"),
        *("prog.py", "MPI_Recv", "MPI_Recv", "prog.py"),
    ]
    off = raw.regions.loc[ev["region"][3]]
    assert (off["role"], off["stack"]) == ("artificial", raw.sample_events["stack"][0])
    send_region = raw.regions.loc[ev["region"][1]]
    assert (send_region["caller"], send_region["file"], send_region["line"]) == ("main", "/x/prog.py", 9)
    p2p = raw.p2p_events
    assert p2p["pos"].tolist() == [2, 8]  # the LEAVE of each enclosing MPI call
    assert p2p["peer"].tolist() == [1, 0] and p2p["bytes"].tolist() == [100, 100]
    assert raw.coll_events["comm"].tolist() == [2]  # rank 1's COMM_SELF (global ids: world 0, self of rank 0 is 1)
    assert {k: v.tolist() for k, v in raw.comms.items()} == {0: [0, 1], 1: [0], 2: [1]}
    s = raw.sample_events
    assert s["pos"].tolist() == [5] and s["weight"].tolist() == [0.01]
    assert raw.stacks["region"].tolist() == [raw.regions.index[raw.regions["name"] == "main"][0]]
    back = load_raw(save_raw(raw, handmade / "r.npz"))
    for t in ("region_events", "p2p_events", "coll_events", "sample_events"):
        for c, a in getattr(raw, t).items():
            np.testing.assert_array_equal(getattr(back, t)[c], a)


def test_decode_errors(tmp_path: Path, handmade: Path) -> None:
    with pytest.raises(FormatError, match="no recorded process data"):
        load_recording(tmp_path / "nothing")
    bad = handmade / "p12.txt"
    good = bad.read_text()
    bad.write_text(good.replace("C 1 78 MPI_COMM_SELF 1 1", "C 1 78 MPI_COMM_SELF 3 1"))
    with pytest.raises(FormatError, match=r"p12\.txt \(line 13\): malformed line: member count does not match"):
        load_recording(handmade)
    bad.write_text(good.replace("version 1", "version 9"))
    with pytest.raises(FormatError, match=r"p12\.txt: not a perflow recorder file \(version '9'\)"):
        load_recording(handmade)
    with pytest.raises(FormatError, match="not a saved perflow raw trace"):
        load_raw(handmade / "p11.txt")


def test_truncated_streams_are_tolerated(handmade: Path) -> None:
    ev = handmade / "p11.ev"
    ev.write_bytes(ev.read_bytes() + b"\x01\x02\x03")  # a partial record
    smp = handmade / "p11.smp"
    smp.write_bytes(smp.read_bytes() + struct.pack("<QQ", S_MAGIC | (S_SAMPLE << 32) | 5, 1))  # cut-off sample
    raw = load_recording(handmade)
    assert len(raw.sample_events["pos"]) == 1 and len(raw.region_events["time"]) == 10  # with the off_cpu pair


# ---- building ---------------------------------------------------------------


def _fake_mpicc(tmp_path: Path, fail: bool = False) -> Path:
    log = tmp_path / "cc.log"
    cc = tmp_path / "fake-mpicc"
    body = f'echo "$@" >> {log}\n'
    body += (
        "echo 'pfrec_c.c:1: error: something broke' >&2; exit 1\n"
        if fail
        else ('while [ $# -gt 0 ]; do if [ "$1" = -o ]; then touch "$2"; fi; shift; done\n')
    )
    cc.write_text("#!/bin/sh\n" + body)
    cc.chmod(cc.stat().st_mode | stat.S_IEXEC)
    return cc


def test_build_library_sources_and_cache(tmp_path: Path) -> None:
    cc = _fake_mpicc(tmp_path)
    ompi = build_library(Toolchain("openmpi", str(cc), show="gcc -lmpi"), cache=tmp_path / "cache")
    mpich = build_library(Toolchain("mpich", str(cc), show="gcc -lmpich"), cache=tmp_path / "cache")
    assert ompi.is_file() and mpich.is_file() and ompi != mpich
    assert ompi.parent.name.startswith("openmpi-") and mpich.parent.name.startswith("mpich-")
    lines = (tmp_path / "cc.log").read_text().splitlines()
    # Open MPI: 11 objects (core, instrumentation hooks, worker threads, OpenMP, C, C one-sided, crash safety,
    # Fortran and Fortran one-sided for mpif.h/use mpi and for mpi_f08) and a link; MPICH (whose Fortran bindings
    # call the C ones): 7 objects and a link
    assert len(lines) == 12 + 8
    ompi_lines, mpich_lines = lines[:12], lines[12:]
    assert all("pfrec_crash.c" in "".join(x) for x in (ompi_lines, mpich_lines))
    assert all(sum(f in x for x in mpich_lines) == 1 for f in ("pfrec_thr.c", "pfrec_omp.c"))
    assert sum("pfrec_f.c" in x for x in ompi_lines) == 2 and sum("pfrec_rma_f.c" in x for x in ompi_lines) == 2
    assert sum("-DPF_F08" in x for x in ompi_lines) == 2
    assert not any("pfrec_f.c" in x or "pfrec_rma_f.c" in x for x in mpich_lines)
    assert all("pfrec_rma.c" in "".join(x) for x in (ompi_lines, mpich_lines))
    assert all("pfrec_inst.c" in "".join(x) for x in (ompi_lines, mpich_lines))
    assert "-shared" in ompi_lines[-1] and "-shared" in mpich_lines[-1]
    assert build_library(Toolchain("openmpi", str(cc), show="gcc -lmpi"), cache=tmp_path / "cache") == ompi
    assert len((tmp_path / "cc.log").read_text().splitlines()) == 20  # cached: not compiled again


def test_build_library_failure_message(tmp_path: Path) -> None:
    cc = _fake_mpicc(tmp_path, fail=True)
    with pytest.raises(
        RecordError, match=r"(?s)building the recorder library with .*fake-mpicc failed.*something broke"
    ):
        build_library(Toolchain("openmpi", str(cc)), cache=tmp_path / "cache")
    assert not list((tmp_path / "cache").rglob("*.so"))


def test_program_mpi(tmp_path: Path) -> None:
    for name, needed, impl in (("a", b"libmpi.so.40", "openmpi"), ("b", b"libmpich.so.12", "mpich"), ("c", b"", None)):
        f = tmp_path / name
        f.write_bytes(b"\x7fELF" + b"\0" * 60 + needed + b"\0")
        assert program_mpi(f) == impl
    (tmp_path / "s.sh").write_text("#!/bin/sh\n# libmpi.so.40\n")
    assert program_mpi(tmp_path / "s.sh") is None


def test_record_errors(tmp_path: Path) -> None:
    from perflow.recorder.session import record

    with pytest.raises(RecordError, match="program not found: /no/such/program"):
        record(["/no/such/program"], outdir=tmp_path / "o")
    with pytest.raises(RecordError, match="at least 1"):
        record(["true"], nprocs=0, outdir=tmp_path / "o")
    with pytest.raises(RecordError, match="no program to record"):
        record([], outdir=tmp_path / "o")
    assert os.environ.get("PERFLOW_RECORD_DIR") is None


def test_python_runtime_constants_match_perflow_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(CSRC.parent / "pyrt"))
    from perflow_pyrec import mpireq, names, recorder

    assert (names.SEND, names.ISEND, names.RECV, names.IRECV_REQUEST, names.SSEND) == (
        P2P.SEND,
        P2P.ISEND,
        P2P.RECV,
        P2P.IRECV_REQUEST,
        P2P.SSEND,
    )
    assert (mpireq.ISEND_COMPLETE, mpireq.IRECV, mpireq.REQUEST_TEST, mpireq.REQUEST_CANCELLED) == (
        P2P.ISEND_COMPLETE,
        P2P.IRECV,
        P2P.REQUEST_TEST,
        P2P.REQUEST_CANCELLED,
    )
    assert (names.BEGIN, names.END) == (CollEv.BEGIN, CollEv.END)
    for fn, op, _, _ in names.COLLECTIVES.values():
        assert CollectiveOp(op).name == fn[4:].upper()
        assert fn in FN
    assert recorder.FN == FN and recorder.MAGIC == S_MAGIC
    assert recorder._REC.size == REC_DTYPE.itemsize


def test_io_nonblocking_collectives_and_user_samples_handmade(tmp_path: Path) -> None:
    """MPI-IO records -> accumulated byte counters; I-collective BEGIN/END with request ids; 5-word samples."""
    from perflow.recorder.decode import read_process
    from perflow.recorder.functions import R_IO, S_USAMPLE
    from perflow.trace.build import build_pag

    io, ia, wait = FN["MPI_File_write"], FN["MPI_Iallreduce"], FN["MPI_Wait"]
    op = CollectiveOp.ALLREDUCE
    events = [
        _rec(t=10.0, type=R_ENTER, fn=0, n1=-1),
        _rec(t=10.1, type=R_ENTER, fn=io, n1=-1),
        _rec(t=10.2, type=R_IO, addr=800, a=2),
        _rec(t=10.3, type=R_LEAVE, fn=io),
        _rec(t=10.4, type=R_ENTER, fn=ia, n1=-1),
        _rec(t=10.4, type=R_COLL, kind=CollEv.BEGIN, fn=op, addr=5 + 1, a=-1, comm=0),
        _rec(t=10.5, type=R_LEAVE, fn=ia),
        _rec(t=10.6, type=R_ENTER, fn=wait, n1=-1),
        _rec(t=10.7, type=R_COLL, kind=CollEv.END, fn=op, addr=5 + 1, n1=8, n2=8, a=-1, comm=0),
        _rec(t=10.8, type=R_LEAVE, fn=wait),
        _rec(t=10.9, type=R_ENTER, fn=io, n1=-1),
        _rec(t=11.0, type=R_IO, addr=200, a=2),
        _rec(t=11.1, type=R_LEAVE, fn=io),
        _rec(t=12.0, type=R_LEAVE, fn=0),
    ]
    # a sample of the native layout: header, time, weight, region records before it, innermost user function, 1 frame
    sample = struct.pack("<QddQQQ", S_MAGIC | (S_USAMPLE << 32) | 1, 10.55, 0.01, 7, 0xABC, 0)
    _write_proc(tmp_path, 21, 0, 0.0, events, sample)
    p = read_process(tmp_path / "p21.txt")
    assert p.sample_utop.tolist() == [0xABC] and p.sample_nregion.tolist() == [7] and len(p.sample_frames[0]) == 1
    raw = load_recording(tmp_path)
    c = raw.table("coll_events")
    assert c["request"].tolist() == [5, 5] and c["kind"].tolist() == [CollEv.BEGIN, CollEv.END]
    m = raw.table("metric_events")
    assert m["metric"].tolist() == [1, 1, 1, 1] and m["value"].tolist() == [0, 800, 800, 1000]
    assert m["pos"].tolist() == [2, 2, 8, 8]  # right after each call's Enter, before its Leave
    np.testing.assert_allclose(m["time"], [0.1, 0.2, 0.9, 1.0], atol=1e-9)
    assert list(raw.metrics["name"]) == ["io_bytes_read", "io_bytes_written"]
    assert set(raw.regions.loc[raw.regions["name"] == "MPI_File_write", "role"]) == {"file_io"}
    pag = build_pag(raw)
    paths = pag.call_paths().to_numpy()
    written = pag.aggregate("io_bytes_written", "sum").to_numpy()
    assert written[np.flatnonzero(paths == "prog.py/MPI_File_write")[0]] == 1000  # both calls
    assert len(pag.trace.collectives) == 1 and pag.trace.collectives["begin"].iloc[0] == pytest.approx(0.4)


def test_public_names_resolve() -> None:
    """Every name perflow.recorder exports is importable (some live in other modules, loaded lazily)."""
    import perflow.recorder as rec

    for name in rec.__all__:
        assert callable(getattr(rec, name)), name


def test_sampled_stacks_stop_before_the_openmp_runtime() -> None:
    """Frames outermost first: the start-up above ``main`` goes, and so does everything from the first OpenMP
    runtime frame on, named by its library or, in the program's own module (a PLT stub), by its name."""

    def f(name: str, module: str = "/bin/prog") -> Frame:
        return Frame(name, "p.c", 1, module)

    start = [f("_start"), f("__libc_start_main", "/lib/libc.so.6"), f("main")]
    assert [x.function for x in _trim_main([*start, f("work")])] == ["main", "work"]
    assert [x.function for x in _trim_main([*start, f("__kmpc_fork_call"), f("__kmp_fork_call")])] == ["main"]
    lib = [f("__kmpc_barrier", "/usr/lib/x86_64-linux-gnu/libomp.so.5"), f("x", "/usr/lib/libomp.so.5")]
    assert [x.function for x in _trim_main([*start, f("solve"), *lib])] == ["main", "solve"]
    outlined = [*start, f("__kmp_invoke_microtask", "/usr/lib/libomp.so.5"), f(".omp_outlined."), f("loop_work")]
    assert [x.function for x in _trim_main(outlined)] == ["loop_work"]
