"""Crash-safe recording (issue 25): a crashed, aborted, timed-out or killed run keeps what it recorded.

Before, a rank that segfaulted, called MPI_Abort or was killed at iteration
150 of 200 left a recording with only MPI_Init (4 region instances of 873),
``perflow info`` gave no warning, and after ``--timeout``, Ctrl-C or a SIGKILL
of ``perflow record`` the folder held only ``raw/`` (unreadable) while, after
a SIGKILL, mpirun and the ranks kept running. The program (``crash.c``): 200
iterations of compute + Allreduce + ring Sendrecv on 2 ranks; rank 1 misbehaves
at iteration 150.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import perflow
from perflow.errors import RecordError

from .conftest import RUN_TIMEOUT

ITERS, AT = 200, 150


@pytest.fixture(scope="module")
def crash_exe(build) -> Path:  # noqa: ANN001
    return build("crash.c")


def _record(exe: Path, what: str, out: Path, **kw: object):  # type: ignore[no-untyped-def]
    from perflow.recorder.session import record

    out.mkdir(parents=True, exist_ok=True)
    with open(out / "stdout", "w") as fo, open(out / "stderr", "w") as fe:
        return record([str(exe), what, str(AT), "1"], nprocs=2, outdir=out, stdout=fo, stderr=fe, **kw)


def _per_rank_collectives(pag: perflow.PAG) -> list[int]:
    c = pag.trace.collectives
    return [int((c["process"] == r).sum()) for r in (0, 1)]


@pytest.mark.timeout(RUN_TIMEOUT)
@pytest.mark.parametrize(
    ("what", "note"),
    [("segv", "rank 1: the process died of SIGSEGV"), ("abort", "rank 1: called MPI_Abort (error code 3)")],
)
def test_crashed_rank_keeps_its_data_on_every_rank(
    crash_exe: Path, tmp_path: Path, what: str, note: str, capsys: pytest.CaptureFixture[str]
) -> None:
    res = _record(crash_exe, what, tmp_path / what, timeout=RUN_TIMEOUT)
    assert res.status != 0
    pag = perflow.read(tmp_path / what)
    # every rank recorded up to the crash: MPI_Init's barrier and the 150 Allreduces before iteration 150
    assert all(n >= AT for n in _per_rank_collectives(pag)), _per_rank_collectives(pag)
    assert all(n <= ITERS + 2 for n in _per_rank_collectives(pag))
    assert len(pag.trace.messages) >= 2 * AT
    assert note in pag.attrs["incomplete"]
    assert "rank 0:" in pag.attrs["incomplete"]  # the rank the launcher stopped says so too
    from perflow.cli.main import main

    assert main(["info", str(tmp_path / what)]) == 0
    out = capsys.readouterr().out
    assert f"incomplete  {note}" in out


@pytest.mark.timeout(RUN_TIMEOUT)
def test_timeout_keeps_a_readable_folder(crash_exe: Path, tmp_path: Path) -> None:
    with pytest.raises(RecordError, match=r"did not finish within 4 s and was killed; what it recorded until then"):
        _record(crash_exe, "hang", tmp_path / "t", timeout=4.0)
    pag = perflow.read(tmp_path / "t")
    assert "did not finish within 4 s" in pag.attrs["stopped"]
    assert all(n >= AT for n in _per_rank_collectives(pag)), (_per_rank_collectives(pag), pag.attrs.get("incomplete"))


def _wait_for_the_hang(stdout: Path, limit: float = 120.0) -> None:
    """Until the program says rank 1 hangs at iteration 150: every rank has recorded the 150 iterations before.

    Not a fixed time after the ranks start: on a loaded machine (4 busy-polling ranks' worth of work per
    core) the 150 iterations took longer than that, and the interrupted recording held fewer.
    """
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if f"rank 1 hangs at iteration {AT}" in stdout.read_text(errors="replace"):
            time.sleep(0.6)  # past a periodic flush (PF_FLUSH_PERIOD) of what the ranks recorded last
            return
        time.sleep(0.2)
    raise AssertionError(f"the program did not reach its hang at iteration {AT}: {stdout.read_text()[-500:]!r}")


def _ranks_of(out: Path) -> list[int]:
    """Processes still running with the recorder writing into ``out``."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
        except OSError:
            continue
        if f"PERFLOW_RECORD_DIR={(out / 'raw').resolve()}".encode() in env:
            pids.append(int(d.name))
    return pids


@pytest.mark.timeout(2 * RUN_TIMEOUT)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "sigkill"])
def test_interrupted_perflow_record(crash_exe: Path, tmp_path: Path, sig: int) -> None:
    out = tmp_path / f"rec-{sig}"
    env = {**os.environ, "PYTHONPATH": str(Path(perflow.__file__).parents[1])}
    cmd = [
        sys.executable,
        "-m",
        "perflow",
        "record",
        "-n",
        "2",
        "-o",
        str(out),
        "--",
        str(crash_exe),
        "hang",
        "150",
        "1",
    ]
    stdout = tmp_path / "stdout"
    with open(stdout, "wb") as fo:
        p = subprocess.Popen(cmd, env=env, stdout=fo, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _wait_for_the_hang(stdout)
        assert _ranks_of(out), "no rank found running"
        os.kill(p.pid, sig)
        _, err = p.communicate(timeout=60)
        if sig == signal.SIGINT:
            assert p.returncode == 130, err
            assert b"interrupted" in err
        t0 = time.monotonic()
        while _ranks_of(out) and time.monotonic() - t0 < 30:
            time.sleep(0.2)
        assert not _ranks_of(out), "ranks kept running after perflow record stopped"
        # the folder is readable: assembled by perflow record, or by its watchdog after a SIGKILL
        t0 = time.monotonic()
        while not (out / "run.pag").exists() and time.monotonic() - t0 < 60:
            time.sleep(0.5)
        pag = perflow.read(out)
        assert pag.attrs.get("stopped"), pag.attrs
        assert all(n >= AT for n in _per_rank_collectives(pag)), (
            _per_rank_collectives(pag),
            pag.attrs.get("incomplete"),
        )
    finally:
        if p.poll() is None:
            p.kill()
        for pid in _ranks_of(out):
            os.kill(pid, signal.SIGKILL)


def test_incomplete_notes_unit() -> None:
    from perflow.recorder.decode import ProcessData
    from perflow.recorder.incomplete import missing

    def proc(rank: int, meta: dict) -> ProcessData:
        ev = np.zeros(2, dtype=[("t", "<f8")])
        ev["t"] = [10.0, 12.5]
        return ProcessData(0, {"size": "4", **meta}, rank, ev, *(np.zeros(0),) * 3, [], {})  # type: ignore[arg-type]

    notes = missing([proc(0, {"end": ""}), proc(1, {"died": "11 12.5"}), proc(2, {})], np.zeros(3), 10.0)
    assert notes[0] == "rank 1: the process died of SIGSEGV at 2.5 s; recorded until 2.5 s"
    assert notes[1].startswith("rank 2: the process was killed without a chance to flush")
    assert notes[2] == "ranks 3: no data at all (1 of 4 ranks)"
