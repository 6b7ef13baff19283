"""Two call sites of one function under one parent stay apart in tables, reports, trees and set displays."""

from __future__ import annotations

import pandas as pd
import pytest

import perflow
from perflow.pag.sites import call_site_paths
from perflow.passes.breakdown import breakdown
from perflow.passes.hotspot import hotspot
from perflow.passes.report import render_table
from perflow.passes.tree import tree_dot, tree_text
from perflow.sdk.trace import call_path_column

# solve calls MPI_Send at s.c:12 and s.c:20 (and MPI_Recv once, without a file)
LITERAL = {
    "name": "main",
    "metrics": {"time_exc": [0.5, 0.5]},
    "children": [
        {
            "name": "solve",
            "file": "s.c",
            "line": 5,
            "metrics": {"time_exc": [1.0, 1.0]},
            "children": [
                {"name": "MPI_Send", "file": "s.c", "line": 12, "metrics": {"time_exc": [2.0, 1.0]}},
                {"name": "MPI_Send", "file": "s.c", "line": 20, "metrics": {"time_exc": [3.0, 1.0]}},
                {"name": "MPI_Recv", "metrics": {"time_exc": [0.25, 0.25]}},
            ],
        }
    ],
}


@pytest.fixture(scope="module")
def pag() -> perflow.PAG:
    p = perflow.PAG.from_literal(LITERAL)
    assert p.vertex_table["name"].astype(str).tolist().count("MPI_Send") == 2  # two vertices, one call path
    return p


def test_call_site_paths(pag: perflow.PAG) -> None:
    assert list(call_site_paths(pag)) == [
        "main",
        "main/solve",
        "main/solve/MPI_Send (s.c:12)",
        "main/solve/MPI_Send (s.c:20)",
        "main/solve/MPI_Recv",
    ]
    assert list(call_path_column(pag, [3, 2, -1])) == [
        "main/solve/MPI_Send (s.c:20)",
        "main/solve/MPI_Send (s.c:12)",
        "<outside regions>",
    ]


def test_same_site_without_file_gets_the_vertex_id() -> None:
    lit = {
        "name": "main",
        "metrics": {"time_exc": 1.0},
        "children": [
            {"name": "f", "line": 3, "metrics": {"time_exc": 1.0}},
            {"name": "f", "line": 3, "metrics": {"time_exc": 2.0}},
        ],
    }
    p = perflow.PAG.from_literal(lit)
    assert list(call_site_paths(p))[1:] == ["main/f (vertex 1)", "main/f (vertex 2)"]


def test_tables_and_reports(pag: perflow.PAG) -> None:
    hot = hotspot(pag, metric="time_exc")
    sends = hot[hot["name"] == "MPI_Send"]
    assert sends["call_path"].tolist() == ["main/solve/MPI_Send (s.c:20)", "main/solve/MPI_Send (s.c:12)"]
    assert sends["value"].tolist() == [4.0, 3.0]
    text = render_table(hot, columns=["call_path", "value"])
    assert "main/solve/MPI_Send (s.c:20)  4.00 s" in text and "main/solve/MPI_Send (s.c:12)  3.00 s" in text
    by_vertex = breakdown(pag, by="vertex", wide=True)
    assert set(by_vertex.loc[by_vertex["name"] == "MPI_Send", "call_path"]) == {
        "main/solve/MPI_Send (s.c:12)",
        "main/solve/MPI_Send (s.c:20)",
    }


def test_tree_and_set_display(pag: perflow.PAG) -> None:
    lines = tree_text(pag, metric="time_exc", header=False).splitlines()
    # repeated siblings show where they are called even without show_file; a lone one does not
    assert lines == [
        "1.00 s main",
        "└─ 2.00 s solve",
        "   ├─ 4.00 s MPI_Send s.c:20",
        "   ├─ 3.00 s MPI_Send s.c:12",
        "   └─ 500 ms MPI_Recv",
    ]
    dot = tree_dot(pag)
    assert 'v3 [label="MPI_Send\\n4.00 s\\ns.c:20"' in dot and 'v2 [label="MPI_Send\\n3.00 s\\ns.c:12"' in dot
    shown = repr(pag.vertices.filter(name="MPI_Send"))
    assert "s.c:12" in shown and "s.c:20" in shown
    df = pd.DataFrame({"vertex": [2, 3], "time_exc": [1.0, 2.0]})
    assert "s.c:12" in tree_text(df, pag, metric="time_exc")
