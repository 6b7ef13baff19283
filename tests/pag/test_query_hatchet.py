"""Call-path queries agree with llnl-hatchet's query engine on the same trees and data.

* the matcher against Hatchet's ``QueryEngine`` on random trees and predicates
  (every quantifier sequence, including Hatchet's lazy ``"*"``);
* both dialects on real profiles: perflow's reading of the shared HPCToolkit and
  cProfile data given to Hatchet as a GraphFrame (per rank, with
  ``multi_index_mode`` any/all, and summed), and Hatchet's own HPCToolkit reader
  given to perflow (``from_hatchet``); matched call paths must be equal.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perflow
from perflow import PAG
from perflow.pag.columns import per_location
from perflow.pag.pathmatch import levels, match_paths
from perflow.pag.tree import tree_index
from tests.conftest import import_hatchet, shared

ht = import_hatchet()

from hatchet.frame import Frame  # noqa: E402
from hatchet.graph import Graph  # noqa: E402
from hatchet.node import Node  # noqa: E402
from hatchet.query import ObjectQuery, Query, QueryEngine, parse_string_dialect  # noqa: E402

from perflow.writers.hatchet import _walk, from_hatchet  # noqa: E402

pytestmark = [pytest.mark.hatchet, pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")]


def _graph(parent: np.ndarray, names: list[str]) -> tuple[Graph, list[Node]]:
    depth = tree_index(parent).depth
    nodes = [Node(Frame({"name": names[i]}), None, hnid=i, depth=int(depth[i])) for i in range(len(parent))]
    roots = []
    for i, p in enumerate(parent.tolist()):
        if p < 0:
            roots.append(nodes[i])
        else:
            nodes[i].parents.append(nodes[p])
            nodes[p].children.append(nodes[i])
    return Graph(roots), nodes  # node._hatchet_nid is the vertex id


def to_graphframe(pag: PAG, *, per_rank: bool) -> ht.GraphFrame:
    """The PAG as a GraphFrame whose node ids are vertex ids, with name, kind, file, line and the metrics
    (one row per node and location, or summed over locations)."""
    vt = pag.vertex_table
    graph, nodes = _graph(vt["parent"].to_numpy(), vt["name"].astype(str).tolist())
    attrs = {c: vt[c].astype(str).to_numpy(dtype=object) for c in ("name", "kind", "file")}
    attrs["line"] = vt["line"].to_numpy()
    if per_rank:
        n_loc = len(pag.locations)
        rows = {"node": np.repeat(np.array(nodes, dtype=object), n_loc), "rank": np.tile(np.arange(n_loc), len(nodes))}
        rows.update({c: np.repeat(v, n_loc) for c, v in attrs.items()})
        rows.update({m: per_location(pag, m).ravel() for m in pag.metric_names})
        df = pd.DataFrame(rows).set_index(["node", "rank"])
    else:
        metrics = {m: pag.aggregate(m, "sum").to_numpy() for m in pag.metric_names}
        df = pd.DataFrame({"node": nodes, **attrs, **metrics}).set_index("node")
    return ht.GraphFrame(graph, df, exc_metrics=["time_exc"], inc_metrics=["time_inc"])


def hatchet_nodes(gf: ht.GraphFrame, q: str | list, mode: str = "off") -> list:
    query = ObjectQuery(q, mode) if isinstance(q, list) else parse_string_dialect(q, mode)
    return QueryEngine().apply(query, gf.graph, gf.dataframe)


def perflow_paths(pag: PAG, ids: np.ndarray) -> Counter:
    return Counter(tuple(p.split("\x1f")) for p in pag.call_paths(sep="\x1f").to_numpy()[ids])


def hatchet_paths(nodes: list) -> Counter:
    return Counter(tuple(x.frame["name"] for x in n.path()) for n in nodes)


# ------------------------------------------------------------------------------------ the matcher
@st.composite
def trees_and_patterns(draw):
    n = draw(st.integers(1, 30))
    parent = [-1] + [draw(st.integers(-1, i - 1)) if draw(st.integers(0, 9)) else -1 for i in range(1, n)]
    perm = np.array(draw(st.permutations(range(n))))  # vertex ids need not follow the tree order
    inv = np.argsort(perm)
    parent = np.array([inv[parent[perm[i]]] if parent[perm[i]] >= 0 else -1 for i in range(n)], dtype=np.int64)
    k = draw(st.integers(1, 5))
    steps = []
    for _ in range(k):
        density = draw(st.sampled_from([0.2, 0.5, 0.8, 1.0]))
        bits = draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))
        steps.append((draw(st.sampled_from([".", "*"])), np.array(bits) < density))
    return parent, steps


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=trees_and_patterns())
def test_matcher_equals_hatchets_engine(case):
    parent, steps = case
    graph, nodes = _graph(parent, [f"n{i}" for i in range(len(parent))])
    df = pd.DataFrame({"node": nodes, "name": [f"n{i}" for i in range(len(parent))]}).set_index("node")
    q = Query()
    for i, (w, m) in enumerate(steps):
        (q.match if i == 0 else q.rel)(w, lambda row, m=m: bool(m[row.name._hatchet_nid]))
    expected = sorted(n._hatchet_nid for n in QueryEngine().apply(q, graph, df))
    got = match_paths(levels(parent, tree_index(parent).depth), steps)
    assert np.flatnonzero(got).tolist() == expected


# ------------------------------------------------------------------------------------ dialects on real data
STRING_QUERIES = [
    'MATCH (".", p)->("*") WHERE p."name" STARTS WITH "MPI_"',
    'MATCH ("*")->(".", p) WHERE p."name" = "MPI_Init"',
    'MATCH (".", p)->("+", q)->(".", r) WHERE p."name" = "PMPI_Finalize" AND q."kind" = "function" '
    'AND r."kind" = "statement"',
    'MATCH (2, p)->(".", q) WHERE p."time_inc" >= 0.2 AND q."time_exc" > 0.03',
    'MATCH (".", p)->("*", q)->(".", r) WHERE p."file" ENDS WITH "psm_exit.c" AND q."name" =~ "<unknown" AND r IS LEAF',
    'MATCH (".", p)->(".", q) WHERE p."name" CONTAINS "Init" AND NOT q."kind" = "function"',
    'MATCH ("*", p)->(".", q) WHERE p."time_inc" > 0.1 AND q."time_exc" > 0.04 OR q."name" = "psm_doinit"',
    'MATCH (".", p) WHERE p."depth" = -1',
    # (Hatchet fails on IS LEAF before other conditions of the same node: its type checks start with "and")
    'MATCH (".", p)->("*") WHERE p."depth" <= 3 AND p."depth" > 1 AND p IS NOT LEAF',
    'MATCH (".", p)->(3) WHERE p."line" <= 198 AND p."line" > 0',
    'MATCH (".", p) WHERE p."time_exc" IS NOT NAN AND p."time_inc" IS NOT INF AND p."time_exc" < 0.3',
    'MATCH ("+", p) WHERE p."time_inc" > 0.25',
    'MATCH (".", p)->("*") WHERE p."line" = 294 OR p."name" ENDS WITH "_Init"',
    'MATCH (".", p)->("*") WHERE {p."name" STARTS WITH "MPI"} XOR {p."name" STARTS WITH "PMPI_Fin"}',
    'MATCH (".", p)->(".") WHERE {p."kind" = "function"} AND {p."time_inc" > 0.2}',
]
#: Hatchet drops multi_index_mode for {MATCH ...} OP {MATCH ...} and reads depth -1 as a leaf only without
#: ranks: compared on the summed frame only
SUMMED_ONLY = [
    '{MATCH (".", p)->("*") WHERE p."name" = "MPI_Init"} OR {MATCH ("*")->(".", q) WHERE q."name" = "psm_dofinalize"}',
    '{MATCH ("*")->(".", p) WHERE p."kind" = "mpi"} AND {MATCH (".", p)->("*") WHERE p."depth" < 3}',
    [(".", {"depth": -1})],
]
OBJECT_QUERIES = [
    [(".", {"name": "MPI_.*"}), "*"],
    ["*", (".", {"name": "psm_do.*", "kind": "function"})],
    [
        (".", {"name": "main"}),
        ("+", {"time_inc": ">= 0.2"}),
        (".", {"kind": "statement", "time_exc": ["> 0.03", "<= 0.5"]}),
    ],
    [(".", {"depth": 2}), (2, {}), ("*", {"file": ".*psm.*"})],
    [(".", {"depth": "< 3", "line": "> 0"}), "+"],
    [("*", {"name": "<unknown procedure>"}), (".", {"name": "<unknown file>:0", "time_exc": "< 0.1"})],
]


@pytest.fixture(scope="module")
def cpi() -> PAG:
    return perflow.read(str(shared("hpctoolkit", "cpi-xml")))


@pytest.fixture(scope="module")
def cpi_frames(cpi: PAG) -> dict[str, ht.GraphFrame]:
    return {"per_rank": to_graphframe(cpi, per_rank=True), "summed": to_graphframe(cpi, per_rank=False)}


def _check(pag: PAG, gf: ht.GraphFrame, q: str | list, mode: str, agg: str) -> int:
    nodes = hatchet_nodes(gf, q, mode)
    got = pag.query(q, agg=agg).ids
    assert got.tolist() == sorted(n._hatchet_nid for n in nodes), (q, mode)
    assert perflow_paths(pag, got) == hatchet_paths(nodes)
    return len(got)


@pytest.mark.parametrize("q", STRING_QUERIES + OBJECT_QUERIES + SUMMED_ONLY, ids=lambda q: str(q)[:60])
def test_dialects_on_hpctoolkit_profile(cpi, cpi_frames, q):
    sizes = [_check(cpi, cpi_frames["summed"], q, "off", "sum")]
    if q not in SUMMED_ONLY:
        sizes += [_check(cpi, cpi_frames["per_rank"], q, m, m) for m in ("any", "all")]
    assert 0 < max(sizes) < cpi.n_vertices  # each query selects something, and not everything


def test_dialects_on_cprofile_profile():
    pag = perflow.read(str(shared("cprofile", "cprofile-cycle.pstats")))
    gf = to_graphframe(pag, per_rank=False)
    queries = [
        'MATCH (".", p)->("*", q) WHERE p."name" = "f" AND q."time_exc" > 0.01',
        'MATCH ("*")->(".", p) WHERE p."name" = "recursive" AND p."visits" > 1000000',
        'MATCH (".", p)->("+") WHERE p."file" CONTAINS "profiler"',
        [(".", {"kind": "python", "depth": 0}), (2, {"name": "[a-z_]+"})],
        ["*", (".", {"time_inc": "< 0.0001", "name": "<.*"})],
    ]
    for q in queries:
        assert 0 < _check(pag, gf, q, "off", "sum") < pag.n_vertices, q


def test_hatchets_own_reader_and_from_hatchet():
    """Hatchet reads the HPCToolkit database itself; perflow queries the PAG made of that GraphFrame."""
    gf = ht.GraphFrame.from_hpctoolkit(str(shared("hpctoolkit", "cpi-xml")))
    pag = from_hatchet(gf, time_unit="s")  # keep Hatchet's numbers (microseconds) as they are
    _, vid_of, dropped = _walk(gf)  # Hatchet node -> vertex, as from_hatchet numbers them
    assert dropped == 0
    queries = [
        'MATCH (".", p)->("*") WHERE p."name" =~ "[0-9]+:MPI"',
        'MATCH ("*")->(".", p) WHERE p."time" > 100000 AND p IS LEAF',
        'MATCH (".", p)->(2, q) WHERE p."time (inc)" >= 300000 AND q."time (inc)" < 400000',
        [(".", {"name": "main"}), "*", (".", {"time": ">= 200000"})],
    ]
    for q in queries:
        for mode in ("any", "all"):
            expected = sorted(vid_of[id(n)] for n in hatchet_nodes(gf, q, mode))
            got = pag.query(q, agg=mode).ids.tolist()
            assert got == expected, (q, mode)
        assert 0 < len(pag.query(q, agg="any")) < pag.n_vertices
