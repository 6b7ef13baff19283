"""Time off the CPU in recordings: sample windows, OFF records inside MPI calls, their off_cpu instances."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from perflow.kinds import OFF_CPU
from perflow.recorder import load_recording
from perflow.recorder.functions import FN, R_ENTER, R_LEAVE, R_OFF, REC_DTYPE, S_MAGIC, S_WSAMPLE
from perflow.recorder.offcpu import Placed, off_cpu_windows


def test_a_window_splits_into_time_off_and_on_the_cpu() -> None:
    reg = np.array([0.0, 4.0, 4.5])  # a region record at 0, an MPI call [4, 4.5]
    t = np.array([1.0, 2.0, 3.0, 6.0, 7.0])
    nreg = np.array([1, 1, 1, 3, 3])
    w = np.ones(5)
    start = np.array([0.0, 1.0, 2.0, 3.0, 6.0])  # the fourth window began before the MPI call
    cpu = np.array([1.0, 0.3, 0.9, 0.5, np.nan])
    o = off_cpu_windows(reg, t, nreg, w, start, cpu, period=1.0)
    # sample 1: 0.7 s of its 1 s window off the CPU; sample 2: 0.1 s, under a quarter period; sample 3: its
    # window within the stretch is [4.5, 6] (1.5 s), of which at least 1 s off; sample 4: no CPU time
    # recorded, its weight (1 s) is: nothing off
    assert o.sample.tolist() == [1, 3]
    np.testing.assert_allclose(o.start, [1.0, 4.5])
    np.testing.assert_allclose(o.end, [1.7, 5.5])
    # CPU time above the window's length (clock granularity) is no time off
    o = off_cpu_windows(reg, t[:1], nreg[:1], w[:1], start[:1], np.array([1.2]), period=1.0)
    assert len(o) == 0


def test_python_samples_have_their_window_from_the_previous_one() -> None:
    reg = np.array([0.0])
    t, nreg, w = np.array([1.0, 3.0]), np.array([1, 1]), np.array([0.5, 1.0])
    nan = np.full(2, np.nan)
    o = off_cpu_windows(reg, t, nreg, w, nan, nan, period=1.0)
    assert o.sample.tolist() == [0, 1] and o.start.tolist() == [0.0, 1.0] and o.end.tolist() == [0.5, 2.0]


def test_placed_intervals_keep_every_event_in_its_instance() -> None:
    # records: root enter 0, MPI enter 2, MPI leave 6, root leave 9; an off interval [3, 5] inside the MPI
    # call (ins 2) and one [7, 8] in the stretch after it (ins 3)
    p = Placed(
        np.array([0.0, 2.0, 6.0, 9.0]),
        np.array([0, 0, 1, 1]),
        np.array([0, 1, 1, 0]),
        np.array([3, 2]),
        np.array([7.0, 3.0]),
        np.array([8.0, 5.0]),
        np.array([5, 4]),
    )
    assert p.time.tolist() == [0.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert p.kind.tolist() == [0, 0, 0, 1, 1, 0, 1, 1] and p.region.tolist() == [0, 1, 4, 4, 1, 5, 5, 0]
    # a send at the MPI call's enter (2) stays before the interval in it, a receive at its end (6) after;
    # a sample at 8.5 comes after the second interval
    assert p.position(np.array([2, 2, 3]), np.array([2.0, 6.0, 8.5])).tolist() == [2, 4, 7]
    none = Placed(np.array([0.0]), np.array([0]), np.array([0]), *(np.zeros(0) for _ in range(4)))
    assert none.time.tolist() == [0.0] and none.position(np.array([1]), np.array([1.0])).tolist() == [1]


def _rec(**kw: object) -> np.ndarray:
    r = np.zeros(1, REC_DTYPE)
    r["comm"] = -1
    for k, v in kw.items():
        r[k] = v
    return r


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    """One process: an MPI_Barrier [1, 3] off the CPU for 1.5 s of it; a sample at 4.5 whose window from
    3 holds 0.5 s of CPU time."""
    off = np.array([1.5]).view(np.uint64)[0]
    ev = [
        _rec(t=100.0, type=R_ENTER, fn=0, n1=-1),
        _rec(t=101.0, type=R_ENTER, fn=FN["MPI_Barrier"], n1=-1),
        _rec(t=101.2, type=R_OFF, addr=off),
        _rec(t=103.0, type=R_LEAVE, fn=FN["MPI_Barrier"]),
        _rec(t=105.0, type=R_LEAVE, fn=0),
    ]
    smp = struct.pack("<QddQQddQ", S_MAGIC | (S_WSAMPLE << 32) | 1, 104.5, 0.001, 3, 0, 103.0, 0.5, 0)
    (tmp_path / "p5.ev").write_bytes(np.concatenate(ev).tobytes())
    (tmp_path / "p5.smp").write_bytes(smp)
    (tmp_path / "p5.txt").write_text(
        "env_rank 0\nversion 1\nkind python\npid 5\nexe /x/prog.py\nhz 1000\nclock_offset 0\nrecsize 48\n"
        "rank 0\nsize 1\nhost h\nW 1\nF\t0\tmain\t/x/prog.py\t3\nS\t0\tmain\t/x/prog.py\t9\n"
    )
    return tmp_path


def test_off_cpu_instances_inside_mpi_calls_and_in_stretches(recording: Path) -> None:
    raw = load_recording(recording)
    ev = raw.region_events
    names = raw.regions["name"].reindex(ev["region"]).tolist()
    assert names == ["prog.py", "MPI_Barrier", OFF_CPU, OFF_CPU, "MPI_Barrier", OFF_CPU, OFF_CPU, "prog.py"]
    np.testing.assert_allclose(ev["time"], [0.0, 1.0, 1.2, 2.7, 3.0, 3.0, 4.0, 5.0], atol=1e-9)
    assert ev["kind"].tolist() == [0, 0, 0, 1, 1, 0, 1, 1]
    inside, after = raw.regions.loc[ev["region"][2]], raw.regions.loc[ev["region"][5]]
    assert inside["stack"] == -1 and inside["role"] == "artificial"  # a child of the MPI call's instance
    assert after["stack"] == raw.sample_events["stack"][0]  # below the sampled stack
    assert raw.sample_events["pos"].tolist() == [7]
    from perflow.trace.build import build_pag

    pag = build_pag(raw)
    m = pag.metrics.droplevel(["process", "thread"])
    paths = pag.call_paths().to_numpy()
    t = {paths[v]: round(float(m.loc[v, "time_exc"]), 9) for v in m.index}
    assert t["prog.py/MPI_Barrier/off_cpu"] == 1.5 and t["prog.py/MPI_Barrier"] == 0.5
    assert t["prog.py/main/off_cpu"] == 1.0 and t["prog.py/main"] == 0.5


def _write(tmp_path: Path, ev: list[np.ndarray], smp: bytes = b"") -> Path:
    (tmp_path / "p5.ev").write_bytes(np.concatenate(ev).tobytes())
    (tmp_path / "p5.smp").write_bytes(smp)
    (tmp_path / "p5.txt").write_text(
        "env_rank 0\nversion 1\nkind python\npid 5\nexe /x/prog.py\nhz 1000\nclock_offset 0\nrecsize 48\n"
        "rank 0\nsize 1\nhost h\nW 1\nF\t0\tmain\t/x/prog.py\t3\nS\t0\tmain\t/x/prog.py\t9\n"
    )
    return tmp_path


def test_io_bytes_stay_on_a_call_with_time_off_the_cpu(tmp_path: Path) -> None:
    """An MPI_File_write_at [1, 3] off the CPU from 1.2 for 1.5 s wrote 800 bytes: the call's, not off_cpu's."""
    from perflow.recorder.functions import R_IO
    from perflow.trace.build import build_pag

    off = np.array([1.5]).view(np.uint64)[0]
    ev = [
        _rec(t=100.0, type=R_ENTER, fn=0, n1=-1),
        _rec(t=101.0, type=R_ENTER, fn=FN["MPI_File_write_at"], n1=-1),
        _rec(t=101.2, type=R_OFF, addr=off),
        _rec(t=102.9, type=R_IO, a=2, addr=800),
        _rec(t=103.0, type=R_LEAVE, fn=FN["MPI_File_write_at"]),
        _rec(t=105.0, type=R_LEAVE, fn=0),
    ]
    pag = build_pag(load_recording(_write(tmp_path, ev)))
    paths = pag.call_paths().to_numpy()
    written = pag.aggregate("io_bytes_written", "sum")
    got = {paths[v]: float(b) for v, b in written.items() if b}
    assert got == {"prog.py/MPI_File_write_at": 800.0}


def test_a_rank_that_hung_in_computation_is_closed_after_its_last_sample(tmp_path: Path) -> None:
    """The root left open (the rank was killed) and a sample at 9 after the last record at 2: closed at 9."""
    ev = [
        _rec(t=100.0, type=R_ENTER, fn=0, n1=-1),
        _rec(t=101.0, type=R_ENTER, fn=FN["MPI_Barrier"], n1=-1),
        _rec(t=102.0, type=R_LEAVE, fn=FN["MPI_Barrier"]),
    ]
    # windows from 102: [102, 109] with 3 s of CPU time, so 4 s off the CPU before the sample
    smp = struct.pack("<QddQQddQ", S_MAGIC | (S_WSAMPLE << 32) | 1, 109.0, 0.001, 3, 0, 102.0, 3.0, 0)
    raw = load_recording(_write(tmp_path, ev, smp))
    ev = raw.region_events
    assert ev["kind"].tolist() == [0, 0, 1, 0, 1, 1]  # root, barrier, the off-CPU interval, root closed
    np.testing.assert_allclose(ev["time"], [0.0, 1.0, 2.0, 2.0, 6.0, 9.0], atol=1e-9)
    assert (
        "rank 0: the process was killed without a chance to flush (SIGKILL?); recorded until 2 s"
        in (raw.attrs["incomplete"])
    )
