"""Selection passes: filters, ordering, set algebra, subgraphs, tree and parallel-view slices."""

from __future__ import annotations

import numpy as np
import pytest

import perflow
from perflow.errors import MetricError, PassError
from perflow.flow.registry import get_pass
from perflow.passes.select import (
    ancestors,
    backward_slice,
    descendants,
    filter_vertices,
    forward_slice,
    parallel_vertices,
    set_difference,
    set_intersection,
    set_symmetric_difference,
    set_union,
    sort_vertices,
    subgraph,
    top_vertices,
)

from .profile_data import allreduce_waits_for_rank7, literal


@pytest.fixture(scope="module")
def small() -> perflow.PAG:
    # main -> solve -> {MPI_Send [1, 3], kernel [4, 4]}, main -> MPI_Allreduce [2, 0], io -> write [1, 1]
    return literal(
        [
            {
                "name": "solve",
                "metrics": {"time_exc": [0.5, 0.5]},
                "children": [
                    {"name": "MPI_Send", "metrics": {"time_exc": [1.0, 3.0]}},
                    {"name": "kernel", "metrics": {"time_exc": [4.0, 4.0]}},
                ],
            },
            {"name": "MPI_Allreduce", "metrics": {"time_exc": [2.0, 0.0]}},
            {"name": "write", "kind": "io", "metrics": {"time_exc": [1.0, 1.0]}},
        ],
        nprocs=2,
    )


def test_registered() -> None:
    for name in (
        "filter_vertices",
        "sort_vertices",
        "top_vertices",
        "set_union",
        "subgraph",
        "ancestors",
        "descendants",
        "parallel_vertices",
        "backward_slice",
        "forward_slice",
    ):
        spec = get_pass(name)
        assert spec.doc, name
    spec = get_pass("filter_vertices")
    assert [p.name for p in spec.inputs] == ["data"]
    assert "glob" in spec.setting("name").doc.lower()


def test_filters(small: perflow.PAG) -> None:
    assert filter_vertices(small, name="MPI_*").names() == ["MPI_Send", "MPI_Allreduce"]
    assert filter_vertices(small, regex="^k").names() == ["kernel"]
    assert filter_vertices(small, kind="io").names() == ["write"]
    # sums over the 2 processes: MPI_Send 4, kernel 8, MPI_Allreduce 2
    assert filter_vertices(small, expr="time_exc >= 4").names() == ["MPI_Send", "kernel"]
    assert filter_vertices(small, expr="max(time_exc) > 1.3 * mean(time_exc)").names() == ["MPI_Send", "MPI_Allreduce"]
    # refining a set keeps the restriction
    mpi = filter_vertices(small, kind="mpi")
    assert filter_vertices(mpi, expr="time_exc > 3").names() == ["MPI_Send"]
    with pytest.raises(MetricError, match="unknown metric 'time_ex'"):
        filter_vertices(small, expr="time_ex > 1")
    with pytest.raises(perflow.PAGError, match="unknown vertex kind 'mpix'"):
        filter_vertices(small, kind="mpix")


def test_sort_and_top(small: perflow.PAG) -> None:
    assert sort_vertices(small, metric="time_exc").names()[:3] == ["kernel", "MPI_Send", "MPI_Allreduce"]
    assert sort_vertices(small, metric="time_exc", agg="max", ascending=True).names()[0] == "main"
    assert top_vertices(small, k=2).names() == ["kernel", "MPI_Send"]
    ordered = sort_vertices(filter_vertices(small, kind="mpi"), metric="time_exc", agg="min")
    assert top_vertices(ordered, k=1).names() == ["MPI_Send"]  # min: Send 1, Allreduce 0
    with pytest.raises(PassError, match="k must be >= 0"):
        top_vertices(small, k=-1)


def test_set_algebra(small: perflow.PAG) -> None:
    a = filter_vertices(small, name="MPI_*")
    b = filter_vertices(small, expr="time_exc >= 4")
    assert set_union(a, b).names() == ["MPI_Send", "kernel", "MPI_Allreduce"]
    assert set_intersection(a, b).names() == ["MPI_Send"]
    assert set_difference(a, b).names() == ["MPI_Allreduce"]
    assert set_symmetric_difference(a, b).names() == ["kernel", "MPI_Allreduce"]
    other = literal([{"name": "x", "metrics": {"time_exc": [1.0]}}], nprocs=1)
    with pytest.raises(PassError, match="two different PAGs"):
        set_union(a, other.vertices)
    with pytest.raises(PassError, match="cannot combine a VertexSet with a ParallelVertexSet"):
        set_union(a, small.parallel.vertices)


def test_tree_slices(small: perflow.PAG) -> None:
    send = filter_vertices(small, name="MPI_Send")
    assert ancestors(send).names() == ["main", "solve"]
    assert ancestors(send, include_self=True).names() == ["main", "solve", "MPI_Send"]
    root = filter_vertices(small, name="main")
    assert len(descendants(root)) == 5
    assert descendants(root, max_depth=1).names() == ["solve", "MPI_Allreduce", "write"]
    assert descendants(root, max_depth=1, include_self=True).names()[0] == "main"


def test_subgraph(small: perflow.PAG) -> None:
    sub = subgraph(filter_vertices(small, name="kernel"))
    vt = sub.vertex_table
    assert vt["name"].astype(str).tolist() == ["main", "solve", "kernel"]
    assert vt["parent"].tolist() == [-1, 0, 1]
    assert vt["orig_vertex"].tolist() == [0, 1, 3]
    assert sub.call_paths().tolist() == ["main", "main/solve", "main/solve/kernel"]
    # metric rows are copied: inclusive time of main still covers the dropped vertices
    assert sub.aggregate("time_inc").tolist() == small.aggregate("time_inc").to_numpy()[[0, 1, 3]].tolist()
    assert sub.aggregate("time_exc").tolist() == [0.0, 1.0, 8.0]
    alone = subgraph(filter_vertices(small, name="kernel"), with_ancestors=False)
    assert alone.n_vertices == 1 and alone.vertex_table["parent"].tolist() == [-1]
    with_desc = subgraph(filter_vertices(small, name="solve"), with_descendants=True)
    assert with_desc.vertex_table["name"].astype(str).tolist() == ["main", "solve", "MPI_Send", "kernel"]


def test_subgraph_keeps_communication_edges() -> None:
    pag = allreduce_waits_for_rank7()
    sub = subgraph(filter_vertices(pag, name="MPI_Allreduce"))
    assert sub.trace is None
    et = sub.parallel.edge_table
    coll = et[et["kind"].astype(str) == "collective"]
    vf = sub.parallel.vertex_frame
    assert len(coll) == 7
    assert set(vf["process"].to_numpy()[coll["src"]]) == {7}
    assert np.allclose(np.sort(coll["wait"].to_numpy()), [1.0] * 7)


def test_parallel_slices() -> None:
    pag = allreduce_waits_for_rank7()
    ar0 = parallel_vertices(pag, processes=[0], name="MPI_Allreduce")
    assert list(ar0) == [(5, 0, 0)]
    back = set(backward_slice(ar0))
    # call edges back to iteration and main on rank 0; the collective edge from the last arriver (rank 7)
    assert back == {(5, 0, 0), (3, 0, 0), (0, 0, 0), (5, 7, 0), (3, 7, 0), (0, 7, 0)}
    assert set(backward_slice(ar0, kinds=["collective"])) == {(5, 0, 0), (5, 7, 0)}
    assert set(backward_slice(ar0, max_steps=1)) == {(5, 0, 0), (3, 0, 0), (5, 7, 0)}
    ar7 = parallel_vertices(pag, processes=[7], name="MPI_Allreduce")
    fwd = forward_slice(ar7)
    assert sorted(fwd) == [(5, p, 0) for p in range(8)]
    assert list(forward_slice(ar7, max_steps=0)) == [(5, 7, 0)]
    # a top-down vertex set stands for its instances on every process
    assert len(forward_slice(filter_vertices(pag, name="iteration"), kinds=["call"])) == 8 * 3
    with pytest.raises(PassError, match="unknown edge kind 'message'"):
        backward_slice(ar0, kinds=["message"])


def test_parallel_vertices_filters() -> None:
    pag = allreduce_waits_for_rank7()
    slow = parallel_vertices(pag, name="compute", expr="time_exc > 1.5")
    assert list(slow) == [(4, 7, 0)]
    assert len(parallel_vertices(filter_vertices(pag, kind="mpi"), processes=[1, 2])) == 3 * 2
