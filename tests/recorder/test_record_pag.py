"""Recorded traces through the trace->PAG builder: every message and collective matches."""

from __future__ import annotations

import pytest

from perflow.kinds import CollectiveOp

from .conftest import PROGRAMS

pytestmark = pytest.mark.mpi

build_pag = pytest.importorskip("perflow.trace.build").build_pag


@pytest.mark.parametrize(
    ("program", "args", "n", "messages"),
    [
        ("ring.c", ("6", "500"), 4, 24),
        ("subcomm.c", (), 4, 2),
        ("ring.f90", ("5",), 4, 20),
        ("cxx_ring.cpp", ("3",), 4, 12),
    ],
)
def test_messages_match(recorded, program: str, args: tuple, n: int, messages: int) -> None:  # noqa: ANN001
    pag = build_pag(recorded(program, *args, n=n).raw)
    assert (pag.attrs["unmatched_sends"], pag.attrs["unmatched_recvs"], pag.attrs["clock_violations"]) == (0, 0, 0)
    assert len(pag.trace.messages) == messages


def test_late_sender_in_the_pag(recorded) -> None:  # noqa: ANN001
    delay = 0.1
    pag = build_pag(recorded("late_sender.c", "3", str(delay), n=2).raw)
    iv, msg = pag.trace.intervals, pag.trace.messages
    assert len(msg) == 3 and set(msg["tag"]) == {3}
    lag = iv["enter"].to_numpy()[msg["send_interval"]] - iv["enter"].to_numpy()[msg["recv_interval"]]
    assert (lag > 0.8 * delay).all() and (lag < delay + 0.5).all()


def test_collectives_grouped(recorded) -> None:  # noqa: ANN001
    pag = build_pag(recorded("imbalance.c", "4", "20000000", "4").raw)
    coll = pag.trace.collectives
    per_op = coll.groupby("op")["instance"].nunique().to_dict()
    assert per_op[int(CollectiveOp.ALLREDUCE)] == 4
    assert per_op[int(CollectiveOp.INIT)] == per_op[int(CollectiveOp.FINALIZE)] == 1
    assert coll.groupby("instance").size().eq(4).all()  # every instance has all four ranks


def test_saved_pag_and_python(recorded, mpi4py_ok: str) -> None:  # noqa: ANN001
    import perflow

    run = recorded([mpi4py_ok, str(PROGRAMS / "pyring.py")], "3", "5")
    pag = perflow.load(run.result.files["pag"])
    assert (pag.attrs["unmatched_sends"], pag.attrs["unmatched_recvs"]) == (0, 0)
    assert len(pag.trace.messages) == 24


def test_otf2_trace_written_and_read_back(recorded) -> None:  # noqa: ANN001
    pytest.importorskip("perflow.writers.otf2")
    import perflow

    run = recorded("ring.c", "6", "500")
    anchor = run.result.files["otf2"]
    assert anchor.name == "traces.otf2" and anchor.is_file()
    pag = perflow.read(anchor)
    assert (pag.attrs["unmatched_sends"], pag.attrs["unmatched_recvs"]) == (0, 0)
    assert len(pag.trace.messages) == 24
    assert sorted(pag.trace.messages["bytes"].unique()) == [4000]
