"""VertexSet / EdgeSet: filters, ordering, set algebra, navigation, display."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perflow import PAG, VertexSet
from perflow.errors import MetricError, PAGError

TREE = {
    "name": "main",
    "metrics": {"time_exc": [1, 1]},
    "children": [
        {
            "name": "init",
            "metrics": {"time_exc": [2, 2]},
            "children": [{"name": "MPI_Init", "metrics": {"time_exc": [3, 1]}}],
        },
        {
            "name": "solve",
            "kind": "loop",
            "metrics": {"time_exc": [1, 1], "visits": [10, 10]},
            "children": [
                {"name": "MPI_Send", "metrics": {"time_exc": [0.5, 4]}},
                {"name": "MPI_Recv", "metrics": {"time_exc": [5, 0.5]}},
                {"name": "kernel_a", "file": "k.c", "metrics": {"time_exc": [8, 2]}},
            ],
        },
    ],
}
#: ids: 0 main, 1 init, 2 MPI_Init, 3 solve, 4 MPI_Send, 5 MPI_Recv, 6 kernel_a


@pytest.fixture(scope="module")
def pag() -> PAG:
    return PAG.from_literal(TREE)


def test_filters(pag):
    vs = pag.vertices
    assert vs.filter(name="MPI_*").names() == ["MPI_Init", "MPI_Send", "MPI_Recv"]
    assert vs.filter(name=["init", "kernel*"]).ids.tolist() == [1, 6]
    assert vs.filter(regex=r"^MPI_(Send|Recv)$").ids.tolist() == [4, 5]
    assert vs.filter(kind="mpi").ids.tolist() == [2, 4, 5]
    assert vs.filter(kind=["loop", "mpi"]).ids.tolist() == [2, 3, 4, 5]
    assert vs.filter(file="k.c").names() == ["kernel_a"]
    assert vs.filter("time_exc > 5").names() == ["MPI_Recv", "kernel_a"]  # sums 5.5 and 10 (MPI_Send 4.5)
    assert vs.filter("time_exc > 4", agg="max").names() == ["MPI_Recv", "kernel_a"]
    assert vs.filter("time_exc >= 4", agg="max").names() == ["MPI_Send", "MPI_Recv", "kernel_a"]
    # explicit aggregations in expressions
    assert vs.filter("max(time_exc) > 1.5 * mean(time_exc)").names() == ["MPI_Send", "MPI_Recv", "kernel_a"]
    assert vs.filter(lambda df: df["depth"] == 1).names() == ["init", "solve"]
    assert vs.filter(kind="mpi", name="*Send").names() == ["MPI_Send"]


def test_filter_errors(pag):
    with pytest.raises(MetricError, match="unknown metric 'tme_exc'"):
        pag.vertices.filter("tme_exc > 1")
    with pytest.raises(PAGError, match="unknown vertex kind 'mpii'"):
        pag.vertices.filter(kind="mpii")
    with pytest.raises(PAGError, match="does not give true/false"):
        pag.vertices.filter("time_exc * 2")
    with pytest.raises(PAGError, match="unknown vertex attribute 'colour'"):
        pag.vertices.filter(colour="red")


def test_sort_and_top(pag):
    by_sum = pag.vertices.sort_by("time_exc")
    assert by_sum.names()[:3] == ["kernel_a", "MPI_Recv", "MPI_Send"]  # 10, 5.5, 4.5
    assert pag.vertices.sort_by("time_exc", agg="max").top(2).names() == ["kernel_a", "MPI_Recv"]
    assert pag.vertices.sort_by("time_exc", ascending=True).names()[0] in ("main", "solve")
    assert pag.vertices.top(1).names() == ["kernel_a"]
    assert pag.vertices.filter(kind="mpi").top(1, by="time_exc", agg="min").names() == ["MPI_Init"]
    # set algebra forgets the order
    assert (by_sum.top(2) | by_sum.top(1)).ids.tolist() == [5, 6]


def test_navigation(pag):
    mpi = pag.vertices.filter(kind="mpi")
    assert mpi.parents().names() == ["init", "solve"]
    assert mpi.ancestors().names() == ["main", "init", "solve"]
    assert pag.vertices.filter(name="solve").children().names() == ["MPI_Send", "MPI_Recv", "kernel_a"]
    assert pag.vertices.filter(name="init").descendants().names() == ["MPI_Init"]
    assert pag.vertices.filter(name="init").descendants(include_self=True).names() == ["init", "MPI_Init"]
    assert pag.vertices.leaves().names() == ["MPI_Init", "MPI_Send", "MPI_Recv", "kernel_a"]
    e = pag.vertices.filter(name="solve").out_edges()
    assert [(a.name, b.name) for a, b in e] == [("solve", "MPI_Send"), ("solve", "MPI_Recv"), ("solve", "kernel_a")]
    assert e.sources().names() == ["solve"]
    assert pag.vertices.filter(name="MPI_Send").in_edges().to_frame()["src_name"].tolist() == ["solve"]
    assert len(pag.vertices.filter(name="main").in_edges()) == 0


def test_frames_and_display(pag):
    df = pag.vertices.filter(kind="mpi").to_frame(["time_exc"], agg="max")
    assert df["time_exc"].tolist() == [3, 4, 5]
    pp = pag.vertices.filter(name="MPI_Send").to_frame(["time_exc"], per_process=True)
    assert pp["time_exc"].tolist() == [0.5, 4]
    r = repr(pag.vertices.filter(kind="mpi"))
    assert r.startswith("<VertexSet: 3 vertices; metrics: sum over 2 processes>") and "MPI_Recv" in r
    # a set sorted by the maximum shows the maximum, and says so
    top = pag.vertices.filter(kind="mpi").sort_by("time_exc", agg="max")
    shown = repr(top).splitlines()
    assert shown[0] == "<VertexSet: 3 vertices; metrics: max over 2 processes>"
    assert shown[3].split()[:6] == ["5", "MPI_Recv", "mpi", "5.00", "s", "5.00"]  # max 5 s, not the sum 5.5 s
    assert top.head(2).to_frame(["time_exc"])["time_exc"].tolist() == [5, 4]  # max, not the sum (5.5, 4.5)
    assert top.to_frame(["time_exc"]).attrs["aggregates"] == {"time_exc": "max over 2 processes"}
    assert "<table" in pag.vertices._repr_html_()
    assert repr(pag.vertices.filter(name="zzz")) == "<VertexSet: empty>"
    assert [v.name for v in pag.vertices.filter(kind="loop")] == ["solve"]
    assert pag.vertex(4) in pag.vertices.filter(kind="mpi")


def test_sets_of_different_pags_do_not_mix(pag):
    other = PAG.from_literal(TREE)
    with pytest.raises(PAGError, match="two different PAGs"):
        _ = pag.vertices | other.vertices
    with pytest.raises(PAGError, match="cannot combine a VertexSet with a EdgeSet"):
        _ = pag.vertices & pag.vertices.out_edges()


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(0, 6), max_size=7),
    st.lists(st.integers(0, 6), max_size=7),
    st.lists(st.integers(0, 6), max_size=7),
)
def test_set_algebra_matches_python_sets(a, b, c):
    pag = _PAG
    A, B, C = (VertexSet(pag, np.array(x, dtype=np.int64)) for x in (a, b, c))
    sa, sb = set(a), set(b)
    assert set((A | B).ids.tolist()) == sa | sb
    assert set((A & B).ids.tolist()) == sa & sb
    assert set((A - B).ids.tolist()) == sa - sb
    assert set((A ^ B).ids.tolist()) == sa ^ sb
    # laws
    assert (A | (B & C)) == ((A | B) & (A | C))
    assert (A - (B | C)) == ((A - B) & (A - C))
    assert (A ^ A) == VertexSet(pag, np.array([], dtype=np.int64))
    assert len(A | B) == len(sa | sb)
    assert (A | B).ids.tolist() == sorted(sa | sb)


_PAG = PAG.from_literal(TREE)
