"""Recording Python programs: the bootstrap, and an mpi4py program."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from perflow.kinds import P2P, CollectiveOp, CollEv

from .conftest import PROGRAMS, count, site_line

PYRT = Path(__file__).resolve().parents[2] / "perflow" / "recorder" / "pyrt"


def _boot(tmp_path: Path, *argv: str, record: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(PYRT))
    for k in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID"):
        env.pop(k, None)
    if record:
        env.update(PERFLOW_RECORD_DIR=str(tmp_path), PERFLOW_RECORD_ALL="1")
    return subprocess.run(
        [sys.executable, "-m", "perflow_pyrec", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


def test_boot_does_not_import_perflow(tmp_path: Path) -> None:
    p = _boot(
        tmp_path, "-c", "import sys; print(sorted(m for m in ('perflow', 'numpy', 'pandas') if m in sys.modules))"
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == "[]\n"
    assert len(list(tmp_path.glob("p*.txt"))) == 1  # it did record


def test_boot_keeps_argv_file_and_status(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(
        f"import sys\nprint(sys.argv, __name__, __file__ == {str(script)!r}, sys.path[0] == {str(tmp_path)!r})\n"
        "sys.exit(7)\n"
    )
    p = _boot(tmp_path, "prog.py", "a", "-b")
    assert p.returncode == 7
    assert p.stdout == "['prog.py', 'a', '-b'] __main__ True True\n"
    q = subprocess.run([sys.executable, "prog.py", "a", "-b"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (q.returncode, q.stdout) == (p.returncode, p.stdout)


def test_boot_traceback_as_python_prints_it(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("def f():\n    raise ValueError('boom')\nf()\n")
    p = _boot(tmp_path, "bad.py")
    q = subprocess.run([sys.executable, "bad.py"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == q.returncode == 1
    assert p.stderr == q.stderr
    assert "perflow_pyrec" not in p.stderr and "runpy" not in p.stderr


@pytest.mark.parametrize("sampler", ["signal", "thread"])
def test_boot_module_mode_and_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sampler: str) -> None:
    monkeypatch.setenv("PERFLOW_RECORD_PYSAMPLER", sampler)
    (tmp_path / "spin.py").write_text(
        "def spin():\n    s = 0\n    for i in range(3_000_000):\n        s += i\n    return s\n"
        "if __name__ == '__main__':\n    print(spin())\n"
    )
    p = _boot(tmp_path, "-m", "spin")
    assert p.returncode == 0 and p.stdout == f"{sum(range(3_000_000))}\n"
    from perflow.recorder.decode import read_dir

    (proc,) = read_dir(tmp_path)
    assert proc.kind == "python" and len(proc.sample_time) > 0
    assert proc.meta["sampler"] == {"signal": "SignalSampler", "thread": "ThreadSampler"}[sampler]
    names = {proc.frames[int(f[0])][0] for f in proc.sample_frames}
    assert "spin" in names


def test_record_plain_python_without_mpi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from perflow.errors import RecordError
    from perflow.recorder import session

    def no_mpi(*args: object) -> None:
        raise RecordError("no MPI compiler wrapper found")

    monkeypatch.setattr(session, "find_toolchain", no_mpi)
    script = tmp_path / "hot.py"
    script.write_text("def hot():\n    return sum(i * i for i in range(2_000_000))\nprint(hot())\n")
    with open(tmp_path / "out", "w") as fo:
        res = session.record(["python3", str(script)], outdir=tmp_path / "rec", timeout=60, stdout=fo)
    assert res.status == 0 and (tmp_path / "out").read_text() == f"{sum(i * i for i in range(2_000_000))}\n"
    assert res.raw.attrs["mpi"] == "none" and len(res.raw.locations) == 1
    assert res.raw.regions["name"][0] == "hot.py"
    st = res.raw.stacks.merge(res.raw.regions[["name"]], left_on="region", right_index=True)
    assert "hot" in set(st["name"])
    with pytest.raises(RecordError, match="no MPI compiler wrapper"):
        session.record(["python3", str(script)], nprocs=2, outdir=tmp_path / "rec2", timeout=60)


def test_boot_usage_error(tmp_path: Path) -> None:
    p = _boot(tmp_path, "-m", record=False)
    assert p.returncode == 2 and "argument expected for -m" in p.stderr


@pytest.mark.mpi
def test_mpi4py_program(recorded, plain, mpi4py_ok: str) -> None:  # noqa: ANN001
    argv = [mpi4py_ok, str(PROGRAMS / "pyring.py")]
    run = recorded(argv, "3", "5")
    status, out = plain([*argv, "3", "5"])
    assert status == run.result.status == 5
    assert run.stdout == out == "pyring: 4 ranks, 3 steps, result 56.815280, ranks sum 6\n"
    p = run.p2p()
    for r in range(4):
        right, left = (r + 1) % 4, (r - 1) % 4
        assert count(p, rank=r, kind=P2P.ISEND, peer=right, tag=21) == 3
        assert count(p, rank=r, kind=P2P.RECV, peer=left, tag=21) == 3
        assert count(p, rank=r, kind=P2P.ISEND_COMPLETE, peer=right, tag=21) == 3
        assert count(p, rank=r, kind=P2P.ISEND, peer=right, tag=22, bytes=8000) == 3
        assert count(p, rank=r, kind=P2P.IRECV, peer=left, tag=22, bytes=8000) == 3
    pickled = p[p["tag"] == 21]
    assert (pickled["bytes"] > 0).all()  # pickled sends get the size of the matching receive
    recv = pickled[pickled["kind"] == P2P.RECV]
    assert (recv["bytes"] < 100).all()
    c = run.coll()
    ar = c[(c["op"] == CollectiveOp.ALLREDUCE) & (c["kind"] == CollEv.END)]
    assert ar.groupby("rank").size().to_dict() == {0: 2, 1: 2, 2: 2, 3: 2}
    assert set(ar[ar["sent"] > 0]["sent"]) == {8}  # Allreduce(IN_PLACE, int64[1]); allreduce() is pickled: 0
    assert not (c["op"] >= CollectiveOp.INIT).any()  # MPI_Init/Finalize: regions only
    calls = run.calls()
    assert count(calls, name="MPI_Init") == count(calls, name="MPI_Finalize") == 4
    for name, caller, tag in (
        ("MPI_Isend", "exchange", "py_isend"),
        ("MPI_Recv", "exchange", "py_recv"),
        ("MPI_Waitall", "exchange", "py_waitall"),
        ("MPI_Allreduce", "main", "py_allreduce"),
    ):
        sel = calls[(calls["name"] == name) & (calls["line"] == site_line("pyring.py", tag))]
        assert len(sel) > 0 and set(sel["caller"]) == {caller}
        assert {Path(f).name for f in sel["file"]} == {"pyring.py"}
    assert run.inclusive_weight(3, "slow_work") > 0
    assert run.inclusive_weight(0, "slow_work") == 0
