"""Backtracking root-cause analysis: the allreduce worked example, a late sender, a slow rank, profiles."""

from __future__ import annotations

import numpy as np
import pytest

import perflow
from perflow.errors import PassError
from perflow.flow.registry import get_pass
from perflow.passes.backtrack import backtrack, comm_in, predecessors
from perflow.passes.imbalance import outlier_vertices

from .profile_data import allreduce_waits_for_rank7, literal, read_shared, slow_rank_trace


@pytest.fixture(scope="module")
def worked() -> perflow.PAG:
    return allreduce_waits_for_rank7()


def test_worked_example(worked: perflow.PAG) -> None:
    res = backtrack(worked)
    rc = res["root_causes"]
    assert len(rc) >= 1
    first = rc.iloc[0]
    assert (first["vertex"], first["process"], first["name"]) == (4, 7, "compute")
    assert (first["value"], first["mean"]) == (2.0, 1.125)
    assert (first["symptom_name"], first["symptom_process"]) == ("MPI_Allreduce", 0)
    p = res["paths"]
    p0 = p[p["path"] == 0]
    # MPI_Allreduce@0 --collective (waited 1.0)--> MPI_Allreduce@7 --program--> compute@7
    assert list(zip(p0["vertex"], p0["process"], p0["via"])) == [
        (5, 0, "start"),
        (5, 7, "collective"),
        (4, 7, "program"),
    ]
    assert p0["wait"].tolist() == pytest.approx([0.0, 1.0, 0.0])
    assert p0["abnormal"].tolist() == [False, False, True]
    assert list(res["causes"]) == [(4, 7, 0)]


def test_given_symptoms(worked: perflow.PAG) -> None:
    ar = worked.vertices.filter(name="MPI_Allreduce")
    res = backtrack(worked, ar)
    assert len(res["root_causes"]) == 1 and res["root_causes"]["symptom_process"].iloc[0] == 0
    # a parallel vertex as the symptom, and an explicit set of abnormal vertices
    start = worked.parallel.vertex(5, 3)
    res = backtrack(worked, start, outlier_vertices(worked))
    assert list(res["causes"]) == [(4, 7, 0)]
    # nothing abnormal: the walk ends where it has no new predecessor, without a root cause
    none = backtrack(worked, start, worked.parallel.vertices.filter(name="nothing"))
    assert len(none["root_causes"]) == 0 and len(none["paths"]) > 2


def test_predecessors_from_trace(worked: perflow.PAG) -> None:
    pred = predecessors(worked)
    view = worked.parallel
    name = worked.vertex_table["name"].astype(str).to_numpy()

    def pr(v: int, p: int) -> str:
        r = pred[view.row(v, p)]
        return name[view._v[r]] if r >= 0 else "-"

    # program order on every rank: main, MPI_Init, init_data, iteration, compute, MPI_Allreduce, MPI_Finalize
    assert [pr(v, 2) for v in range(7)] == [
        "-",
        "main",
        "MPI_Init",
        "init_data",
        "iteration",
        "compute",
        "MPI_Allreduce",
    ]


def test_predecessors_from_profile_tree() -> None:
    pag = literal(
        [
            {"name": "a", "metrics": {"time_exc": [1.0]}, "children": [{"name": "a1", "metrics": {"time_exc": [1.0]}}]},
            {"name": "b", "metrics": {"time_exc": [1.0]}},
        ],
        nprocs=1,
    )
    # pre-order main, a, a1, b: b follows a's last descendant a1
    assert predecessors(pag).tolist() == [-1, 0, 1, 2]


def test_comm_in(worked: perflow.PAG) -> None:
    c = comm_in(worked)
    view = worked.parallel
    r0, r7 = view.row(5, 0), view.row(5, 7)
    assert c["best_src"][r0] == r7 and c["best_kind"][r0] == "collective"
    assert c["in_wait"][r0] == pytest.approx(1.0) and c["out_wait"][r7] == pytest.approx(7.0)


def test_late_sender_chain() -> None:
    # rank 1 waits in MPI_Recv for rank 0, whose compute is slow; rank 2 waits for rank 1 in a barrier
    tb = perflow.TraceBuilder()
    for p, c in ((0, 5.0), (1, 1.0), (2, 1.0), (3, 1.0)):
        tb.call(p, "compute", 0, c)
    tb.call(0, "MPI_Send", 5, 5.5, send={"to": 1, "bytes": 64})
    tb.call(1, "MPI_Recv", 1, 5.6, recv={"frm": 0, "bytes": 64})
    for p, t in ((0, 5.5), (1, 5.6), (2, 1.0), (3, 1.0)):
        tb.call(p, "MPI_Barrier", t, 5.7, coll={})
    res = backtrack(tb.build(), n_symptoms=1)
    p = res["paths"]
    assert p["name"].tolist() == ["MPI_Barrier", "MPI_Barrier", "MPI_Recv", "MPI_Send", "compute"]
    assert p["process"].tolist() == [2, 1, 1, 0, 0]
    assert p["via"].tolist() == ["start", "collective", "program", "p2p", "program"]
    rc = res["root_causes"]
    assert (rc["name"].iloc[0], rc["process"].iloc[0]) == ("compute", 0)


def test_slow_rank_synthetic() -> None:
    res = backtrack(slow_rank_trace())
    rc = res["root_causes"]
    assert len(rc) >= 2
    assert set(zip(rc["name"], rc["process"])) == {("compute", 3)}
    assert set(rc["symptom_name"]) >= {"MPI_Allreduce", "MPI_Waitall"}


def test_errors_and_registration(worked: perflow.PAG) -> None:
    spec = get_pass("backtrack")
    assert spec.multi_output and [o.name for o in spec.outputs] == ["paths", "root_causes", "causes"]
    assert [i.name for i in spec.inputs] == ["pag", "symptoms", "abnormal"]
    with pytest.raises(PassError, match="k must be positive"):
        backtrack(worked, k=-1)
    other = allreduce_waits_for_rank7()
    with pytest.raises(PassError, match="the symptoms set belongs to another PAG"):
        backtrack(worked, other.vertices.filter(name="MPI_Allreduce"))
    with pytest.raises(PassError, match="symptoms must be a VertexSet"):
        backtrack(worked, [1, 2])  # type: ignore[arg-type]


def test_profile_without_communication() -> None:
    # no trace, no edges: walk in pre-order on the process where MPI_Wait is longest
    pag = literal(
        [
            {"name": "load", "metrics": {"time_exc": [1.0, 1.0, 3.0, 1.0]}},
            {"name": "MPI_Wait", "metrics": {"time_exc": [0.1, 0.1, 0.1, 2.0]}},
        ],
        nprocs=4,
    )
    res = backtrack(pag, pag.parallel.vertex(2, 2))
    assert list(res["causes"]) == [(1, 2, 0)]  # load on rank 2: 3 > 1.3 * 1.5
    assert np.array_equal(res["paths"]["via"].to_numpy(), ["start", "program"])


def test_real_trace() -> None:
    pag = read_shared("otf2", "ping-pong", "traces.otf2")
    res = backtrack(pag)
    assert len(res["paths"]) >= 1
