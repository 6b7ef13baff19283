"""The analyses find the problems injected into the project's MPI programs, recorded by `perflow record`."""

from __future__ import annotations

import pytest

from perflow.kinds import CollectiveOp

pytestmark = pytest.mark.mpi

build_pag = pytest.importorskip("perflow.trace.build").build_pag


def test_late_sender_is_found_and_blamed_on_the_sender(recorded) -> None:  # noqa: ANN001
    from perflow.passes.delay import root_cause
    from perflow.passes.waitstates import late_sender, wait_states

    delay, iters = 0.1, 3
    pag = build_pag(recorded("late_sender.c", str(iters), str(delay), n=2).raw)
    ws = wait_states(pag)
    ls = ws[ws["kind"] == "late_sender"]
    on_recv = ls[ls["process"] == 1]
    # rank 1 posts its receive at once and waits about `delay` for each of the three messages
    assert len(on_recv) == iters
    assert on_recv["amount"].sum() == pytest.approx(iters * delay, rel=0.35)
    assert set(on_recv["name"]) == {"MPI_Recv"} and (ls["process"] == 1).all()
    per_vertex = late_sender(pag).set_index("name")
    assert per_vertex.loc["MPI_Recv", "late_sender"] == pytest.approx(on_recv["amount"].sum())
    # the delay analysis charges the waiting to rank 0, the sender
    by_process = root_cause(pag)["by_process"]
    blamed = by_process.groupby("process")["cost"].sum()
    assert blamed.idxmax() == 0 and blamed[0] == pytest.approx(iters * delay, rel=0.35)


def test_imbalance_before_the_allreduce_is_found(recorded) -> None:  # noqa: ANN001
    from perflow.passes.breakdown import breakdown
    from perflow.passes.collectives import collective_wait_states

    pag = build_pag(recorded("imbalance.c", "4", "20000000", "4", n=4).raw)
    # the last rank computes four times as long: the others wait for it in every allreduce
    cw = collective_wait_states(pag)
    allred = cw[cw["op"] == int(CollectiveOp.ALLREDUCE)] if "op" in cw.columns else cw[cw["name"] == "MPI_Allreduce"]
    wait = allred.groupby("process")["amount"].sum().reindex(range(4), fill_value=0.0)
    assert wait[[0, 1, 2]].min() > 5 * max(wait[3], 1e-6)
    # the breakdown shows the waiting ranks' time as waiting, the slow rank's as computation
    b = breakdown(pag, by="process", wide=True).set_index("process")
    assert b.loc[3, "wait"] < 0.2 * b.loc[[0, 1, 2], "wait"].min()
    assert b["wait"].idxmax() != 3
