"""The PAG core on literal PAGs: construction, metrics, aggregation, lookups, immutability."""

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import perflow
from perflow import PAG, VertexKind
from perflow.errors import MetricError, PAGError

LIT = {
    "name": "main",
    "metrics": {"time_exc": [1, 1, 1, 1]},
    "children": [
        {"name": "compute", "file": "a.c", "line": 12, "metrics": {"time_exc": [4, 6, 8, 10], "visits": [2, 2, 2, 2]}},
        {
            "name": "solve",
            "metrics": {"time_exc": [0.5, 0.5, 0.5, 0.5]},
            "children": [{"name": "MPI_Allreduce", "metrics": {"time_exc": {0: 6, 1: 4, 2: 2}}}],
        },
    ],
}


@pytest.fixture
def pag() -> PAG:
    return PAG.from_literal(LIT)


def test_literal_structure_and_derived_inclusive_time(pag):
    vt = pag.vertex_table
    assert vt["name"].tolist() == ["main", "compute", "solve", "MPI_Allreduce"]
    assert vt["parent"].tolist() == [-1, 0, 0, 2]
    assert vt["depth"].tolist() == [0, 1, 1, 2]
    assert vt["kind"].tolist() == ["function", "function", "function", "mpi"]
    assert pag.vertex(1).file == "a.c" and pag.vertex(1).line == 12
    m = pag.metrics
    assert list(m.index.names) == ["vertex", "process", "thread"]
    assert pag.metric_names[:2] == ["time_inc", "time_exc"]
    # inclusive of main on rank 0 = 1 + 4 + 0.5 + 6
    assert m.loc[(0, 0, 0), "time_inc"] == pytest.approx(11.5)
    # rank 3 has no MPI_Allreduce row: solve's inclusive is just its own time
    assert m.loc[(2, 3, 0), "time_inc"] == pytest.approx(0.5)
    assert (3, 3, 0) not in m.index


def test_dense_aggregation_counts_absent_processes_as_zero(pag):
    assert pag.aggregate("time_exc", "sum").tolist() == [4, 28, 2, 12]
    assert pag.aggregate("time_exc", "mean")[3] == pytest.approx(3.0)  # (6+4+2+0)/4
    assert pag.aggregate("time_exc", "min")[3] == 0.0
    assert pag.aggregate("time_exc", "max")[1] == 10.0
    assert pag.aggregate("time_exc", "median")[1] == pytest.approx(7.0)
    assert pag.aggregate("time_exc", "median")[3] == pytest.approx(3.0)  # (2+4)/2 over 0,2,4,6
    assert pag.aggregate("time_exc", "count")[3] == 3
    assert pag.aggregate("time_exc", "std")[1] == pytest.approx(np.std([4, 6, 8, 10]))


def test_unknown_metric_and_aggregation_messages(pag):
    with pytest.raises(MetricError, match="unknown metric 'time_ex'; did you mean 'time_exc'"):
        pag.aggregate("time_ex")
    with pytest.raises(PAGError, match="unknown aggregation 'avg'"):
        pag.aggregate("time_exc", "avg")


def test_vertex_lookup_by_name_path_and_id(pag):
    assert pag.vertex("MPI_Allreduce").id == 3
    assert pag.vertex("main/solve/MPI_Allreduce").id == 3
    assert pag.vertex(2).name == "solve"
    assert pag.vertex(3).parent == pag.vertex(2)
    assert pag.vertex(3).call_path == "main/solve/MPI_Allreduce"
    assert pag.vertex(1).value("time_exc", "max") == 10
    with pytest.raises(PAGError, match="no vertex named 'nope'"):
        pag.vertex("nope")
    with pytest.raises(PAGError, match="ids are 0..3"):
        pag.vertex(9)
    assert pag.vertex(3).metrics["time_exc"].tolist() == [6, 4, 2]


def test_ambiguous_name_is_an_error():
    p = PAG.from_literal({"name": "a", "children": [{"name": "x"}, {"name": "b", "children": [{"name": "x"}]}]})
    with pytest.raises(PAGError, match="2 vertices are named 'x'"):
        p.vertex("x")


def test_pag_is_immutable_in_practice(pag):
    m = pag.metrics
    m.iloc[0, 0] = 1e9
    m["extra"] = 1.0
    vt = pag.vertex_table
    vt["name"] = "changed"
    assert pag.metrics.iloc[0, 0] != 1e9
    assert "extra" not in pag.metric_names
    assert pag.vertex(0).name == "main"
    before = pag.metrics.copy()
    q = pag.with_metrics(double=pag.metrics["time_exc"].to_numpy() * 2)
    assert "double" in q.metric_names and "double" not in pag.metric_names
    pd.testing.assert_frame_equal(before, pag.metrics)


def test_networkx_face(pag):
    g = pag.graph
    assert isinstance(g, nx.DiGraph)
    assert sorted(g.edges) == [(0, 1), (0, 2), (2, 3)]
    assert g.nodes[1]["time_exc"] == 28
    assert nx.shortest_path(g, 0, 3) == [0, 2, 3]
    assert pag.graph is g  # built once


def test_from_frames_validates_inputs():
    vt = pd.DataFrame({"name": ["a", "b"], "parent": [-1, 0]})
    good = pd.DataFrame({"vertex": [0, 1, 1], "process": [0, 0, 1], "time_exc": [1.0, 2.0, 3.0]})
    p = PAG.from_frames(vt, good)
    assert p.processes.tolist() == [0, 1]
    with pytest.raises(PAGError, match="lacks the column 'process'"):
        PAG.from_frames(vt, good.drop(columns="process"))
    with pytest.raises(PAGError, match="outside 0..1"):
        PAG.from_frames(vt, good.assign(vertex=[0, 1, 5]))
    with pytest.raises(PAGError, match="duplicate metric row for vertex 1, process 0"):
        PAG.from_frames(vt, good.assign(process=[0, 0, 0]), duplicates="error")
    summed = PAG.from_frames(vt, good.assign(process=[0, 0, 0]))
    assert summed.metrics.loc[(1, 0, 0), "time_exc"] == 5.0
    with pytest.raises(MetricError, match="not numeric"):
        PAG.from_frames(vt, good.assign(time_exc=["x", "y", "z"]))
    with pytest.raises(PAGError, match="unknown vertex kind"):
        PAG.from_frames(vt.assign(kind=["function", "banana"]), good)


def test_literal_errors():
    with pytest.raises(PAGError, match=r"literal node \[0\].children\[0\] has no name"):
        PAG.from_literal({"name": "a", "children": [{"metrics": {}}]})
    with pytest.raises(PAGError, match="metric 'time_exc'"):
        PAG.from_literal({"name": "a", "metrics": {"time_exc": "lots"}})
    # values are converted once for the whole literal; a bad one is still blamed on its node
    bad = {
        "name": "a",
        "metrics": {"time_exc": [1.0, 2.0]},
        "children": [{"name": "b", "metrics": {"time_exc": [1, "x"]}}],
    }
    with pytest.raises(PAGError, match=r"node \[0\].children\[0\] \(b\), metric 'time_exc': metric value \[1, 'x'\]"):
        PAG.from_literal(bad)
    with pytest.raises(PAGError, match=r"gives one \(process, thread\) twice"):
        PAG.from_literal({"name": "a", "metrics": {"time_exc": {0: 1.0, (0, 0): 2.0}}})


def test_literal_value_forms_give_the_same_cells():
    """Lists (one value per process), dicts by process or (process, thread), scalars and arrays, mixed."""
    lit = {
        "name": "main",
        "metrics": {"time_exc": {0: 1.0, (1, 2): 2.0}, "visits": 3},
        "children": [
            {"name": "f", "metrics": {"time_exc": np.array([1.0, 2.0])}},
            {"name": "g", "metrics": {"time_exc": (4, 5)}},
        ],
    }
    m = PAG.from_literal(lit).metrics
    assert m.loc[(0, 1, 2), "time_exc"] == 2.0 and m.loc[(0, 0, 0), "visits"] == 3.0
    assert m.loc[(0, 1, 2), "visits"] == 0.0  # a metric without that cell is 0 there
    assert m.loc[(1, 1, 0), "time_exc"] == 2.0 and m.loc[(2, 1, 0), "time_exc"] == 5.0
    # inclusive time of main on process 1, thread 0: its children's 2 + 5 (main has no own time there)
    assert m.loc[(0, 1, 0), "time_inc"] == 7.0


def test_hatchet_literal_and_round_trip(pag):
    from perflow.pag.literal import to_literal

    h = [
        {
            "frame": {"name": "foo", "type": "function"},
            "metrics": {"time (inc)": 130.0, "time": 0.0},
            "children": [{"frame": {"name": "bar"}, "metrics": {"time (inc)": 20.0, "time": 5.0}}],
        }
    ]
    p = PAG.from_literal(h)
    assert p.metrics["time_inc"].tolist() == [130.0, 20.0]
    back = PAG.from_literal(to_literal(pag))
    pd.testing.assert_frame_equal(back.metrics[pag.metric_names], pag.metrics, check_like=True)
    hl = to_literal(pag, hatchet=True)
    assert hl[0]["metrics"]["time"] == 4.0 and hl[0]["frame"]["name"] == "main"


def test_repr_and_summary(pag):
    s = pag.summary()
    assert s["vertices"] == 4 and s["processes"] == 4
    assert "PAG vertices=4, processes=4" in repr(pag)
    assert "<table>" in pag._repr_html_()


def test_kinds_enum_and_mpi_classes():
    from perflow.kinds import MPIClass, classify_region, mpi_class

    assert classify_region("MPI_Waitall") is VertexKind.MPI
    assert mpi_class("mpi_allreduce_") is MPIClass.COLLECTIVE
    assert mpi_class("MPI_Ibarrier") is MPIClass.SYNC
    assert mpi_class("MPI_Iallreduce") is MPIClass.COLLECTIVE
    assert mpi_class("PMPI_Isend") is MPIClass.P2P
    assert mpi_class("MPI_Waitsome") is MPIClass.WAIT
    assert mpi_class("MPI_File_write_all") is MPIClass.IO
    assert mpi_class("compute") is None
    assert classify_region("fopen") is VertexKind.IO
    assert classify_region("GOMP_parallel") is VertexKind.OPENMP


def test_read_dispatch_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        perflow.read(tmp_path / "missing")
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    with pytest.raises(perflow.FormatError, match="cannot tell the format"):
        perflow.read(f)
    with pytest.raises(perflow.FormatError, match="unknown format; did you mean 'otf2'"):
        perflow.read(f, format="otf3")
