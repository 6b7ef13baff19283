"""The parallel view: vertices per process, flow and communication edges, navigation, networkx."""

import networkx as nx
import pandas as pd
import pytest

import perflow
from perflow import TraceBuilder
from perflow.errors import PAGError


@pytest.fixture(scope="module")
def pag():
    tb = TraceBuilder()
    for p in range(3):
        with tb.region(p, "main", 0, 10):
            tb.call(p, "compute", 0, 1 + p)
            if p == 0:
                tb.call(0, "MPI_Send", 1, 2, send={"to": 1, "bytes": 64})
            if p == 1:
                tb.call(1, "MPI_Recv", 2, 3, recv={"frm": 0, "bytes": 64})
            tb.call(p, "MPI_Allreduce", 3 + p, 6, coll={"bytes": 8})
    return tb.build()


def test_vertices_are_metric_rows(pag):
    pv = pag.parallel.vertices
    assert len(pv) == len(pag.metrics)
    main = pag.vertex("main").id
    r = pag.parallel.row(main, 2)
    assert list(pv.filter(vertex=[main], process=2)) == [(main, 2, 0)]
    assert pv.filter(vertex=[main], process=2).ids.tolist() == [r]
    assert pag.parallel.rows([main, main], [0, 9]).tolist()[1] == -1
    with pytest.raises(PAGError, match="has no data on process 7"):
        pag.parallel.row(main, 7)


def test_edges(pag):
    et = pag.parallel.edges.to_frame()
    assert set(et["kind"].astype(str)) == {"call", "p2p", "collective"}
    p2p = et[et["kind"] == "p2p"]
    assert p2p[["src_name", "src_process", "dst_name", "dst_process", "bytes"]].values.tolist() == [
        ["MPI_Send", 0, "MPI_Recv", 1, 64]
    ]
    coll = et[et["kind"] == "collective"].sort_values("dst_process")
    assert coll["src_process"].tolist() == [2, 2] and coll["dst_process"].tolist() == [0, 1]
    assert coll["wait"].tolist() == [2.0, 1.0]
    calls = et[et["kind"] == "call"]
    assert len(calls) == len(pag.metrics) - 3  # every non-root row has its parent on its process


def test_navigation(pag):
    ar = pag.parallel.vertices.filter(name="MPI_Allreduce")
    assert len(ar) == 3
    on0 = ar.filter(process=0)
    assert [t[1] for t in on0.predecessors(kinds=["collective"])] == [2]
    assert sorted(t[1] for t in on0.peers()) == [2]
    assert [pag.vertex(t[0]).name for t in on0.predecessors(kinds=["call"])] == ["main"]
    assert on0.vertices().names() == ["MPI_Allreduce"]
    assert ar.processes().tolist() == [0, 1, 2]
    assert ar.sort_by("time_exc").top(1).to_frame()["process"].tolist() == [0]
    assert ar.filter("time_exc > 2").processes().tolist() == [0]
    assert pag.parallel.edges.filter(kind="p2p").sort_by("bytes").top(1).to_frame()["bytes"].tolist() == [64]
    with pytest.raises(PAGError, match="unknown edge kind 'pp'"):
        pag.parallel.edges.filter(kind="pp")


def test_networkx_face(pag):
    g = pag.parallel.graph
    assert isinstance(g, nx.DiGraph)
    send, recv = pag.vertex("MPI_Send").id, pag.vertex("MPI_Recv").id
    assert g.edges[(send, 0, 0), (recv, 1, 0)]["kind"] == "p2p"
    assert nx.has_path(g, (pag.vertex("main").id, 0, 0), (recv, 1, 0))


def test_explicit_communication_edges_without_trace():
    lit = {
        "name": "main",
        "metrics": {"time_exc": [1, 1]},
        "children": [
            {"name": "MPI_Send", "metrics": {"time_exc": [1, 0]}},
            {"name": "MPI_Recv", "metrics": {"time_exc": [0, 2]}},
        ],
    }
    base = perflow.PAG.from_literal(lit)
    comm = pd.DataFrame({"src_vertex": [1], "src_process": [0], "dst_vertex": [2], "dst_process": [1], "bytes": [10]})
    pag = perflow.PAG(base._vertices, base._metrics, comm=comm)
    e = pag.parallel.edges.filter(kind="p2p").to_frame()
    assert e[["src_process", "dst_process", "bytes"]].values.tolist() == [[0, 1, 10]]
    bad = comm.assign(dst_process=[5])
    with pytest.raises(PAGError, match="without data"):
        _ = perflow.PAG(base._vertices, base._metrics, comm=bad).parallel.edge_table
