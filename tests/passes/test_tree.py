"""Tests of the top-down tree passes (perflow/passes/tree.py): text, DOT and HTML."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pandas as pd
import pytest

import perflow
from perflow.errors import PassError
from perflow.passes.tree import tree_dot, tree_html, tree_text

# main 0.1 s exclusive, solve 0.2, MPI_Allreduce 0.4, io 0.3 (two processes, half each):
# inclusive main 1.0, solve 0.6, MPI_Allreduce 0.4, io 0.3
LITERAL = {
    "name": "main",
    "file": "app.c",
    "line": 3,
    "metrics": {"time_exc": [0.05, 0.05]},
    "children": [
        {
            "name": "solve",
            "file": "solve.c",
            "line": 10,
            "metrics": {"time_exc": [0.1, 0.1]},
            "children": [{"name": "MPI_Allreduce", "metrics": {"time_exc": [0.25, 0.15]}}],
        },
        {"name": "io", "metrics": {"time_exc": [0.15, 0.15]}},
    ],
}


@pytest.fixture(scope="module")
def pag() -> perflow.PAG:
    return perflow.PAG.from_literal(LITERAL)


def body(text: str, header: str = "time_inc (sum over 2 processes)") -> list[str]:
    """The lines of a tree after its first line, which says what the values are and how they aggregate."""
    lines = text.splitlines()
    assert lines[0] == header
    return lines[1:]


def test_text_exact_lines(pag: perflow.PAG) -> None:
    assert body(tree_text(pag)) == [
        "1.00 s main",
        "├─ 600 ms solve",
        "│  └─ 400 ms MPI_Allreduce",
        "└─ 300 ms io",
    ]


def test_text_plain_numbers_ascii_files(pag: perflow.PAG) -> None:
    assert body(tree_text(pag, units=False, precision=2, ascii=True, show_file=True)) == [
        "1.00 main app.c:3",
        "|- 0.60 solve solve.c:10",
        "|  `- 0.40 MPI_Allreduce",
        "`- 0.30 io",
    ]


def test_text_agg_and_sort(pag: perflow.PAG) -> None:
    # max over processes of exclusive time: main 0.05, solve 0.1, MPI_Allreduce 0.25, io 0.15
    assert body(tree_text(pag, metric="time_exc", agg="max", sort=False), "time_exc (max over 2 processes)") == [
        "50.0 ms main",
        "├─ 100 ms solve",
        "│  └─ 250 ms MPI_Allreduce",
        "└─ 150 ms io",
    ]


def test_depth_threshold_expand_collapse(pag: perflow.PAG) -> None:
    assert body(tree_text(pag, depth=0)) == ["1.00 s main"]
    # depth 1 hides MPI_Allreduce unless expanded (by glob or by call path)
    assert len(body(tree_text(pag, depth=1))) == 3
    assert tree_text(pag, depth=0, header=False).splitlines() == ["1.00 s main"]
    assert "MPI_Allreduce" in tree_text(pag, depth=1, expand=["MPI_*"])
    assert "MPI_Allreduce" in tree_text(pag, depth=1, expand=["main/solve"])
    # threshold 0.5 of the largest (1.0 s): main and solve stay, io (0.3) and MPI_Allreduce (0.4) go
    assert body(tree_text(pag, threshold=0.5)) == ["1.00 s main", "└─ 600 ms solve"]
    # exclusive time with threshold: a hot leaf keeps its (cold) ancestors
    assert body(tree_text(pag, metric="time_exc", threshold=0.9), "time_exc (sum over 2 processes)") == [
        "100 ms main",
        "└─ 200 ms solve",
        "   └─ 400 ms MPI_Allreduce",
    ]
    assert body(tree_text(pag, collapse=["solve"])) == ["1.00 s main", "├─ 600 ms solve [+1]", "└─ 300 ms io"]


def test_ansi_colours(pag: perflow.PAG, tmp_path) -> None:
    out = tree_text(pag, color=True, path=str(tmp_path / "t.txt"))
    lines = body(out)
    assert lines[0] == "\x1b[1;31m1.00 s\x1b[0m main"  # 100%: bold red
    assert lines[1] == "├─ \x1b[33m600 ms\x1b[0m solve"  # 60%: yellow
    assert lines[2] == "│  └─ \x1b[32m400 ms\x1b[0m MPI_Allreduce"  # 40%: green
    # the file gets the plain text
    assert (tmp_path / "t.txt").read_text() == tree_text(pag)


def test_max_lines(pag: perflow.PAG) -> None:
    assert body(tree_text(pag, max_lines=2)) == ["1.00 s main", "├─ 600 ms solve", "... 2 more vertices"]


def test_vertex_set_and_table_inputs(pag: perflow.PAG) -> None:
    # a set shows its vertices with their ancestors
    assert body(tree_text(pag.vertices.filter(name="MPI_*"))) == [
        "1.00 s main",
        "└─ 600 ms solve",
        "   └─ 400 ms MPI_Allreduce",
    ]
    # an analysis table (vertex column) with the PAG
    hot = pd.DataFrame({"vertex": [3], "time_exc": [0.3]})
    assert body(tree_text(hot, pag)) == ["1.00 s main", "└─ 300 ms io"]
    # a stand-alone table with vertex/parent/name/metric
    df = pd.DataFrame(
        {"vertex": [10, 11, 12], "parent": [-1, 10, 10], "name": ["a", "b", "c"], "time": [3.0, 1.0, 2.0]}
    )
    assert tree_text(df, metric="time").splitlines() == ["3.00 s a", "├─ 2.00 s c", "└─ 1.00 s b"]
    assert tree_text(df, metric="time", collapse=["a/c"]).splitlines()[1] == "├─ 2.00 s c"


def test_synthetic_trace_tree() -> None:
    p = perflow.synthetic.trace(nprocs=2, iterations=2, seed=0)
    lines = body(tree_text(p, show_file=True), "time_inc (sum over 2 processes)")
    assert len(lines) == p.n_vertices
    assert lines[0].endswith("main synthetic.c:10")
    assert lines[1].startswith("├─ ") and " timestep synthetic.c:40" in lines[1]


def test_errors(pag: perflow.PAG) -> None:
    with pytest.raises(PassError, match="tree_text: unknown metric 'time'"):
        tree_text(pag, metric="time")
    with pytest.raises(PassError, match="no column 'parent'"):
        tree_text(pd.DataFrame({"name": ["a"], "time_inc": [1.0]}))
    with pytest.raises(PassError, match="no column 'wait' \\(setting metric='wait'\\)"):
        tree_text(pd.DataFrame({"parent": [-1], "name": ["a"]}), metric="wait")
    with pytest.raises(PassError, match="needs the PAG as second input"):
        tree_text(pd.DataFrame({"vertex": [1]}))
    with pytest.raises(PassError, match="expected a PAG, a VertexSet or a DataFrame"):
        tree_text([1, 2])


# ---------------------------------------------------------------------- DOT
STATEMENT = re.compile(
    r'^\s*(v\d+ \[.*\];|v\d+ -> v\d+;|rankdir=\w+;|node \[.*\];|edge \[.*\];|digraph ".*" \{|\}|label=".*"; labelloc=t;)$'
)


def test_dot(pag: perflow.PAG, tmp_path) -> None:
    out = tree_dot(pag, show_file=True, path=str(tmp_path / "t.dot"))
    assert (tmp_path / "t.dot").read_text() == out
    assert out.count("{") == out.count("}") == 1
    lines = out.splitlines()
    assert lines[0] == 'digraph "pag" {' and lines[-1] == "}"
    for ln in lines:
        assert STATEMENT.match(ln), ln
    assert '  label="time_inc (sum over 2 processes)"; labelloc=t;' in lines  # the graph says how values aggregate
    labels = dict(re.findall(r'^\s*v(\d+) \[label="([^"]*)"', out, re.M))
    assert labels == {
        "0": "main\\n1.00 s\\napp.c:3",
        "1": "solve\\n600 ms\\nsolve.c:10",
        "2": "MPI_Allreduce\\n400 ms",
        "3": "io\\n300 ms",
    }
    assert set(re.findall(r"v(\d+) -> v(\d+);", out)) == {("0", "1"), ("1", "2"), ("0", "3")}
    sizes = [float(x) for x in re.findall(r"fontsize=([\d.]+)", out)]
    assert sizes[0] == 22.0 and sizes == sorted(sizes, reverse=True)


def test_dot_escapes_and_prunes() -> None:
    p = perflow.PAG.from_literal(
        {"name": 'op"x\\', "metrics": {"time_exc": 1.0}, "children": [{"name": "tiny", "metrics": {"time_exc": 0.001}}]}
    )
    out = tree_dot(p, threshold=0.5)
    assert 'label="op\\"x\\\\\\n1.00 s"' in out
    assert "tiny" not in out and "->" not in out


# ---------------------------------------------------------------------- HTML
class Tree(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.details = 0
        self.open = 0
        self.leaves = 0
        self.names: list[tuple[str, int]] = []  # (name, nesting depth in <details>)
        self.external: list[str] = []
        self._in_name = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "details":
            self.details += 1
            self.open += "open" in a
        if tag == "div" and a.get("class") == "leaf":
            self.leaves += 1
        if tag in ("script", "link", "img") and ("src" in a or "href" in a):
            self.external.append(tag)
        self._in_name = tag == "span" and a.get("class") == "name"
        if tag not in ("meta", "br", "img"):
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}> in {self.stack}"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self._in_name:
            self.names.append((data, self.stack.count("details")))
            self._in_name = False


def test_html(pag: perflow.PAG, tmp_path) -> None:
    out = tree_html(pag, open_depth=1, path=str(tmp_path / "t.html"))
    assert (tmp_path / "t.html").read_text() == out
    t = Tree()
    t.feed(out)
    t.close()
    assert t.stack == []  # every element closed
    assert t.details == 2 and t.leaves == 2  # main and solve have children
    assert t.open == 1  # only depth 0 starts unfolded
    # names in pre-order; the nesting in <details> mirrors the tree
    assert t.names == [("main", 1), ("solve", 2), ("MPI_Allreduce", 2), ("io", 1)]
    assert t.external == []  # self-contained
    assert "<style>" in out and "app.c:3" in out and "600 ms" in out
    assert out.count('<p class="pf-head">time_inc (sum over 2 processes)</p>') == 1  # what the values are


def test_html_fragment_and_escaping() -> None:
    p = perflow.PAG.from_literal({"name": "<b>", "metrics": {"time_exc": 1.0}})
    out = tree_html(p, fragment=True)
    assert out.startswith("<style>") and "<html" not in out
    assert '<p class="pf-head">time_inc (sum over 1 process)</p>' in out
    assert "&lt;b&gt;" in out and "<b>" not in out


def test_pag_tree_like_hatchet(pag: perflow.PAG, capsys) -> None:
    """``pag.tree()`` is the tree as text (the tree index is ``pag.tree_index``); ``perflow tree`` prints it."""
    assert pag.tree() == tree_text(pag) and repr(pag.tree()) == str(pag.tree())  # shows as itself at a prompt
    assert pag.tree_index.depth.tolist() == [0, 1, 2, 1]
    lines = pag.tree(["time_inc", "time_exc"]).splitlines()
    assert lines == [
        "time_inc  time_exc  call path  (sum over 2 processes)",
        "  1.00 s    100 ms  main",
        "  600 ms    200 ms  ├─ solve",
        "  400 ms    400 ms  │  └─ MPI_Allreduce",
        "  300 ms    300 ms  └─ io",
    ]
    assert body(pag.tree(process=0), "time_inc (process 0)")[:3] == [
        "550 ms main",
        "├─ 350 ms solve",
        "│  └─ 250 ms MPI_Allreduce",
    ]
    with pytest.raises(PassError, match="no process 9 in the PAG"):
        pag.tree(process=9)
    from perflow.cli.main import main

    path = "tests/data/hatchet/hatchet-graph-literal.json"
    assert main(["tree", path, "--depth", "1", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert out == perflow.read(path).tree(depth=1)


def test_tree_colours_but_escapes_names(tmp_path, capsys) -> None:
    """``perflow tree --color``: its own colours, and a name's control characters shown escaped."""
    from perflow.cli.main import main

    lit = {
        "name": "main",
        "metrics": {"time_exc": [1.0]},
        "children": [{"name": "evil\x1b]0;x\x07", "metrics": {"time_exc": [2.0]}}],
    }
    perflow.PAG.from_literal(lit).save(tmp_path / "p.pag")
    assert main(["tree", str(tmp_path / "p.pag"), "--color", "always"]) == 0
    out = capsys.readouterr().out
    assert "└─ \x1b[33m2.00 s\x1b[0m evil\\x1b]0;x\\x07" in out and "\x07" not in out
