"""gprof2dot's DOT output (``gprof2dot -f prof|callgrind|pstats|perf|... > graph.dot``).

gprof2dot turns many profilers' output into one Graphviz call graph. Its own
layout (one ``id [attributes];`` or ``a -> b [attributes];`` statement a
line) is read line by line; any other DOT (edited by hand, re-written by
Graphviz) is parsed by ``pydot``, which is about a thousand times slower
(1.3 s for a 230-line graph). Node labels are ``[module\\n]name\\ntotal%\\n
(self%)[\\ncalls×]`` and edge labels ``[total%\\n]calls×``: percentages of the
run's total time (gprof2dot drops nodes and edges under its thresholds,
``-n``/``-e``, 0.5% and 0.1% by default, so small functions may be missing).

* The graph is a caller->callee graph: the calling-context tree is built by
  :func:`perflow.readers._callgraph.expand_call_graph` (as for gprof and
  cProfile). An edge's own time is the callee's own time times the edge's
  share of the callee's total.
* Times: the DOT holds shares of the total only. ``total_time=`` (seconds,
  e.g. gprof's ``granularity: ... of 2.62 seconds``) scales them to seconds;
  without it the run is taken to last 1 s, so ``time_inc``/``time_exc`` are
  the shares of the run (``attrs["time_unit_source"]`` says so).
* ``visits`` are the ``calls×`` numbers (absent: 0); the module line of
  callgrind/perf graphs becomes the vertex's ``module``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..kinds import classify_region
from ..pag.pag import PAG
from ._callgraph import Stats, expand_call_graph
from ._common import MetricRows, TreeBuilder, build_profile, head_bytes, reader_errors

FORMAT = "gprof2dot"
DESCRIPTION = "gprof2dot call graphs (Graphviz DOT of gprof, callgrind, perf, pstats, ... profiles)"

log = logging.getLogger(__name__)

_PCT = re.compile(r"^(\d+(?:\.\d+)?)%$")
_SELF = re.compile(r"^\((\d+(?:\.\d+)?)%\)$")
_CALLS = re.compile(r"^(\d+)\s*×$")
_ID = r'"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.]+'
_STMT = re.compile(rf"^\s*({_ID})(?:\s*->\s*({_ID}))?\s*\[(.*)\];?\s*$")
_LABEL = re.compile(r'(?:^|[\s,])label="((?:[^"\\]|\\.)*)"')
_SKIP = re.compile(
    r"^\s*(?:(?:strict\s+)?digraph\s*(?:\S+\s*)?\{|\}|(?:graph|node|edge)\s*\[.*\];?|\w+\s*=\s*(?:\"[^\"]*\"|\S+);?|)\s*$"
)


_ROUNDING = 0.01  # gprof2dot prints shares with two decimals


def detect(path: Path) -> bool:
    """A DOT ``digraph`` whose labels carry gprof2dot's ``NN.NN%`` lines."""
    if not path.is_file():
        return False
    head = head_bytes(path, 4096)
    return head.lstrip().startswith(b"digraph") and re.search(rb'label="[^"]*\\n\d+(\.\d+)?%', head) is not None


def _unquote(s: Any) -> str:
    s = str(s or "")
    if len(s) >= 2 and s[0] == s[-1] == '"':
        return s[1:-1].replace('\\"', '"')
    return s


def _statements(text: str) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]] | None:
    """(nodes [(id, label)], edges [(src, dst, label)]) of gprof2dot's own layout, or None for any other DOT."""
    nodes: list[tuple[str, str]] = []
    edges: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        m = _STMT.match(line)
        if m is None:
            if _SKIP.match(line):
                continue
            return None
        if m[1] in ("graph", "node", "edge") and m[2] is None:
            continue
        lab = _LABEL.search(m[3])
        label = lab[1] if lab else ""
        if m[2] is None:
            nodes.append((_unquote(m[1]), label))
        else:
            edges.append((_unquote(m[1]), _unquote(m[2]), label))
    return nodes, edges


def _pydot_statements(path: Path, text: str) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    import pydot

    try:
        graphs = pydot.graph_from_dot_data(text)
    except Exception as exc:  # pyparsing's ParseException and friends
        raise FormatError(path, f"not a readable DOT graph ({type(exc).__name__}: {exc})") from None
    if not graphs:
        raise FormatError(path, "not a readable DOT graph")
    g = graphs[0]
    nodes = [
        (_unquote(n.get_name()), _unquote(n.get("label")))
        for n in g.get_nodes()
        if _unquote(n.get_name()) not in ("node", "edge", "graph")
    ]
    edges = [(_unquote(e.get_source()), _unquote(e.get_destination()), _unquote(e.get("label"))) for e in g.get_edges()]
    return nodes, edges


def _label_lines(label: str) -> list[str]:
    return [p.strip() for p in label.replace("\\l", "\\n").replace("\\r", "\\n").split("\\n")]


def _parse_node(lines: list[str]) -> tuple[str, str, float, float, int]:
    """(name, module, total %, self %, calls) from a node label."""
    i = next((k for k, ln in enumerate(lines) if _PCT.match(ln)), None)
    if i is None:
        return (lines[0] if lines else ""), "", 0.0, 0.0, 0
    name = lines[i - 1] if i >= 1 else ""
    module = lines[i - 2] if i >= 2 else ""
    total = float(_PCT.match(lines[i])[1])  # type: ignore[index]
    self_pct = next((float(m[1]) for ln in lines[i + 1 :] if (m := _SELF.match(ln))), 0.0)
    calls = next((int(m[1]) for ln in lines[i + 1 :] if (m := _CALLS.match(ln))), 0)
    return name, module, total, self_pct, calls


def _parse_edge(lines: list[str]) -> tuple[float, int]:
    pct = next((float(m[1]) for ln in lines if (m := _PCT.match(ln))), 0.0)
    calls = next((int(m[1]) for ln in lines if (m := _CALLS.match(ln))), 0)
    return pct, calls


def _check_shares(path: Path, what: str, total: float, self_pct: float) -> None:
    """Shares are percentages of the run: within 0..100 %, a node's own share within its total."""
    if not (0.0 <= total <= 100.0 + _ROUNDING and 0.0 <= self_pct <= total + _ROUNDING):
        raise FormatError(path, f"{what}: impossible shares of the run ({total}% in total, {self_pct}% own)")


def read(path: Path | str, *, total_time: float | None = None, max_vertices: int = 100_000, **options: Any) -> PAG:
    """Read a gprof2dot DOT file.

    Parameters
    ----------
    path : path-like
        The ``.dot`` file.
    total_time : float, optional
        The run's total time in seconds (the DOT holds percentages of it);
        default 1.0, so times are shares of the run.
    max_vertices : int
        Stop expanding the calling-context tree after this many vertices.

    Returns
    -------
    PAG
    """
    if options:
        raise TypeError(f"the gprof2dot reader takes total_time and max_vertices only (got {', '.join(options)})")
    if total_time is not None and not total_time > 0:
        raise ValueError(f"total_time must be a positive number of seconds, not {total_time!r}")
    path = Path(path)
    with reader_errors(path, "gprof2dot DOT"):
        text = path.read_bytes().decode("utf-8")
        parsed = _statements(text)
        node_list, edge_list = parsed if parsed is not None else _pydot_statements(path, text)
        scale = (total_time if total_time is not None else 1.0) / 100.0
        nodes: dict[str, tuple[str, str, float, float, int]] = {}
        for key, label in node_list:
            nodes[key] = _parse_node(_label_lines(label)) if label else (key, "", 0.0, 0.0, 0)
            _check_shares(path, f"node {key}", nodes[key][2], nodes[key][3])
        callers: dict[str, dict[str, tuple[float, float, float, float]]] = {k: {} for k in nodes}
        labelled = any(label for _key, label in node_list)
        for src, dst, elabel in edge_list:
            for k in (src, dst):
                if k not in nodes:  # an edge to a node without a statement of its own
                    if labelled:  # gprof2dot writes a labelled statement for every node it keeps
                        raise FormatError(path, f"edge {src} -> {dst} names node {k}, which the file does not define")
                    nodes[k] = (k, "", 0.0, 0.0, 0)
                    callers[k] = {}
            pct, calls = _parse_edge(_label_lines(elabel))
            _check_shares(path, f"edge {src} -> {dst}", pct, 0.0)
            t_dst, s_dst = nodes[dst][2], nodes[dst][3]
            own = s_dst * pct / t_dst if t_dst > 0 and src != dst else 0.0
            callers[dst][src] = (float(calls), float(calls), own * scale, pct * scale if src != dst else 0.0)
        if not nodes:
            raise FormatError(path, "the graph has no nodes")
        stats: Stats = {
            k: (calls, calls, self_pct * scale, total * scale, callers[k])
            for k, (_name, _mod, total, self_pct, calls) in nodes.items()
        }

        def label(key: str) -> tuple[str, str, int, str]:
            name = nodes[key][0] or key
            return name, "", -1, classify_region(name).value

        tree, rows = TreeBuilder(), MetricRows()
        expand_call_graph(stats, tree, rows, 0, max_vertices=max_vertices, label=label, what="gprof2dot")
        modules = {nodes[k][0] or k: nodes[k][1] for k in nodes if nodes[k][1]}
        for r in tree.rows:
            r["module"] = modules.get(r["name"], "")
        how = "given" if total_time is not None else "assumed: the DOT holds shares of the total time; a 1 s run"
        attrs = {
            "nprocs": 1,
            "total_time": total_time if total_time is not None else 1.0,
            "time_unit_source": how,
            "approximation": "calling contexts derived from gprof2dot's caller->callee graph",
        }
        # inclusive times are re-derived from the exclusive ones: the tool's are rounded (and, for gprof2dot,
        # include the nodes it dropped), so they need not add up over the tree
        frame = rows.frame().drop(columns=["time_inc"])
        return build_profile(tree, frame, attrs=attrs, complete=True, source=path)
