"""Call-path queries: worked examples in both dialects, modes, errors with positions, the pass in a YAML flow."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import perflow
from perflow import PAG
from perflow.errors import ExpressionError, PAGError, ValidationError
from perflow.pag.cypher import parse_cypher
from perflow.pag.query import CompoundQuery, Query, parse_query
from perflow.passes.select import query_vertices

from .test_sets import TREE

#: ids: 0 main, 1 init, 2 MPI_Init, 3 solve (loop), 4 MPI_Send, 5 MPI_Recv, 6 kernel_a (k.c)
#: time_exc per process: main [1, 1], init [2, 2], MPI_Init [3, 1], solve [1, 1], MPI_Send [0.5, 4],
#: MPI_Recv [5, 0.5], kernel_a [8, 2]; summed: 2, 4, 4, 2, 4.5, 5.5, 10; time_inc summed: 32, 8, 4, 22, ...


@pytest.fixture(scope="module")
def pag() -> PAG:
    return PAG.from_literal(TREE)


@pytest.mark.parametrize(
    ("q", "ids"),
    [
        ('MATCH (".", p)->("*") WHERE p."name" = "solve"', [3, 4, 5, 6]),
        ('MATCH ("*")->(".", p) WHERE p."name" STARTS WITH "MPI_"', [0, 1, 2, 3, 4, 5]),
        # "+" = "." then a lazy "*": main, then solve (not a leaf), then the leaves below
        ('MATCH ("+", p)->(".", q) WHERE p."time_inc" > 10 AND q IS LEAF', [0, 3, 4, 5, 6]),
        ('MATCH (2)->(".", q) WHERE q."file" = "k.c"', [0, 3, 6]),
        (
            'MATCH (".", p)->(".", q) WHERE p."kind" = "loop" AND q."time_exc" >= 5 AND q."name" ENDS WITH "a" '
            'OR q."name" =~ "MPI_S"',
            [3, 4, 6],
        ),  # fmt: skip
        ('MATCH (".", p) WHERE NOT p."name" CONTAINS "_" AND p IS NOT LEAF', [0, 1, 3]),
        ('MATCH (".", p) WHERE p."depth" = -1', [2, 4, 5, 6]),  # Hatchet: depth -1 means a leaf
        ('MATCH (".", p) WHERE p."time_exc" IS NOT NAN AND p."time_inc" IS INF', []),
        ('MATCH (".", p) WHERE p."name" = "init" OR p."name" = "solve" AND p."depth" = 2', [1]),
        ('MATCH (".", p) WHERE (p."name" = "init" OR p."name" = "solve") AND p."depth" = 1', [1, 3]),
        ('{MATCH (".", p) WHERE p."name" = "init"} OR {MATCH (".", p) WHERE p."name" = "solve"}', [1, 3]),
        ('MATCH (".", p)->("*") WHERE {p."name" = "solve"} XOR {p."kind" = "loop" OR p."name" = "init"}', [1, 2]),
        ('MATCH (".", p)->("*") WHERE {p."name" = "solve"} AND {p."kind" = "loop"}', [3, 4, 5, 6]),
        ('match (".", p)->(".", q) where p."name" = "init" and q."time (inc)" = 4', [1, 2]),  # any case; Hatchet names
        ([(".", {"name": "main"}), "*", (".", {"time_exc": ">= 5"})], [0, 3, 5, 6]),
        ([(".", {"name": ["MPI_.*", ".*Send"]})], [4]),  # a list of values: all must hold
        ([(".", {"name": "MPI_S|init"})], [1, 4]),  # as in Hatchet: re.match(pattern + "\Z")
        (["*", (".", "max(time_exc) > 1.5 * mean(time_exc)")], [0, 3, 4, 5, 6]),
        ([(".", lambda df: df["depth"] == 1), "+"], [1, 2, 3, 4, 5, 6]),
        ([(".", {"depth": -1, "time": "< 5"})], [2, 4]),
        ([(".", {"depth": "<= 1"}), (".", {})], [0, 1, 2, 3, 4, 5, 6]),
        ([(0, {"name": "x"}), (".", {"node_id": 6})], [6]),
        ([[".", {"kind": "mpi", "time_exc": "!= 4.5"}]], [2, 5]),  # a pair written as a list (YAML)
    ],
)
def test_worked_examples(pag, q, ids):
    assert pag.query(q).ids.tolist() == sorted(ids)


@pytest.mark.parametrize(
    ("agg", "ids"),
    [
        ("sum", [5, 6]),  # sums 2, 4, 4, 2, 4.5, 5.5, 10
        ("mean", [6]),  # means 1, 2, 2, 1, 2.25, 2.75, 5
        ("max", [5, 6]),  # maxima 1, 2, 3, 1, 4, 5, 8
        ("any", [5, 6]),  # some process above 4.5: the maxima
        ("all", []),  # every process above 4.5: none
    ],
)
def test_modes(pag, agg, ids):
    assert pag.query([(".", {"time_exc": "> 4.5"})], agg=agg).ids.tolist() == ids


def test_any_and_all_apply_per_condition_as_in_hatchet(pag):
    # all locations > 0.9: main, init, MPI_Init, solve, kernel_a (MPI_Send has 0.5, MPI_Recv 0.5)
    assert pag.query('MATCH (".", p) WHERE p."time_exc" > 0.9', agg="all").ids.tolist() == [0, 1, 2, 3, 6]
    # each condition is reduced on its own: some location > 3.5 and some location < 1 (MPI_Send, MPI_Recv)
    q = 'MATCH (".", p) WHERE p."time_exc" > 3.5 AND p."time_exc" < 1'
    assert pag.query(q, agg="any").ids.tolist() == [4, 5]
    assert pag.query(q, agg="sum").ids.tolist() == []
    assert pag.query([(".", "time_exc > 3.5 and time_exc < 1")], agg="any").ids.tolist() == []  # one location
    assert pag.query(q, agg="all").ids.tolist() == []


def test_parsed_structure():
    q = parse_query('MATCH (".", p)->("+", q)->(3)->("*") WHERE p."name" = "a" AND q."x" < 2 OR q."x" > 5')
    assert isinstance(q, Query) and [n.quantifier for n in q.nodes] == [".", "+", 3, "*"]
    assert q.nodes[2].predicate is None and q.nodes[3].predicate is None
    assert q.nodes[1].predicate.op == "or"  # type: ignore[union-attr]
    c = parse_cypher('{MATCH (".", p) WHERE p."a" = 1} AND {MATCH ("*")} OR {MATCH (2)}')
    assert isinstance(c, CompoundQuery) and c.op == "or" and c.parts[0].op == "and"  # type: ignore[union-attr]
    assert parse_cypher("MATCH (0, p)").nodes[0].quantifier == "."  # type: ignore[union-attr]  # Hatchet's reading


@pytest.mark.parametrize(
    ("q", "message", "column"),
    [
        ('MATCH (".", p)->("*") WHERE p."name" STARTS WTIH "MPI_"', "expected WITH after STARTS, found 'WTIH'", 45),
        ('MATCH (".", p) WHERE q."name" = "x"', "variable 'q' is not in the MATCH clause (variables: p)", 22),
        ('MATCH ("?", p)', 'quantifiers are ".", "*", "+" or a count', 8),
        ('MATCH (".", p) WHERE p."nme" = "x"', "unknown metric 'nme'; did you mean 'name'?", 24),
        ('MATCH (".", p) WHERE p."time_exc" STARTS WITH "x"', "STARTS WITH needs a text attribute, not number", 35),
        ('MATCH (".", p) WHERE p."name" = 3', "cannot compare text with number", 31),
        ('MATCH (".", p) WHERE p."name" = "x" XOR p."name" = "y"', "XOR combines {...} groups", 37),
        ('MATCH (".", p) WHERE p."name" =~ "("', "invalid regular expression '('", 31),
        ('MATCH (".", p), (".", q)', "unexpected ','", 15),
        ('MATCH (".", p)->(".", p)', "variable 'p' names two query nodes", 17),
        ('MATCH (".", p) WHERE p.("a", "b") = 1', "multi-level column names", 24),
        ('MATCH (".", p) WHERE (p."name" = "a" OR q."name" = "b")', "must all be on one variable", 22),
        ('MATCH (".", p) WHERE p."name" = "x', "unterminated string", 33),
        ("", "empty query", 1),
        ([(".", {"nme": "x"})], "unknown metric 'nme'", 8),
        ([("?", {})], "a quantifier is '.', '*', '+' or a count, not '?'", 1),
        ([(".", {"time_exc": ">= abc"})], "needs a number or a comparison such as '>= 1.0', not '>= abc'", 8),
        ([(".", {"name": 3})], "text attribute 'name' needs a regular expression, not 3", 8),
        ([(1, 2, 3)], "a pair is (quantifier, predicate), not 3 items", 1),
        ([], "a query needs at least one query node", 1),
        ([(".", "time_exc >")], "expression ends too early", 11),
        ([(".", lambda df: df["depth"])], "must return one true/false per vertex", 1),
    ],
)
def test_errors_name_the_position(pag, q, message, column):
    with pytest.raises(ExpressionError) as info:
        pag.query(q)
    assert message in str(info.value), str(info.value)
    assert info.value.column == column and isinstance(info.value, ValidationError)


def test_no_code_runs_from_a_query(pag, tmp_path):
    target = tmp_path / "pwned"
    # Hatchet evaluates these comparison strings with eval(); perflow parses them
    for q in [
        [(".", {"time_exc": f"> 0 or __import__('os').system('touch {target}')"})],
        [(".", {"depth": f"< 2 or open('{target}', 'w')"})],
        f'MATCH (".", p) WHERE p."name" = "x" AND p.__class__ = "{target}"',
        [(".", f"@os.system('touch {target}') == 0")],
    ]:
        with pytest.raises(ExpressionError):
            pag.query(q)
    assert not target.exists()


def test_bad_arguments(pag):
    with pytest.raises(PAGError, match="agg must be one of"):
        pag.query("MATCH (p)", agg="avg")
    with pytest.raises(PAGError, match="a query is a string"):
        pag.query(42)  # type: ignore[arg-type]
    with pytest.raises(ExpressionError, match="no query nodes"):
        pag.query([(0, {})])


def test_pass_and_yaml_flow(pag, tmp_path):
    q = 'MATCH (".", p)->("*") WHERE p."name" = "solve"'
    assert query_vertices(pag, query=q).ids.tolist() == [3, 4, 5, 6]
    assert query_vertices(pag.vertices.filter(kind="mpi"), query=q).ids.tolist() == [4, 5]
    assert query_vertices(pag).ids.tolist() == list(range(pag.n_vertices))  # default MATCH ("*"): every path
    path = tmp_path / "q.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            perflow: 1
            name: mpi-under-solve
            inputs:
              pag: {type: PAG}
            steps:
              text:
                pass: query_vertices
                inputs: {data: input:pag}
                settings: {query: 'MATCH (".", p)->("*") WHERE p."name" = "solve"'}
              objects:
                pass: query_vertices
                inputs: {data: input:pag}
                settings:
                  query: [[".", {name: solve}], "*", [".", {kind: mpi}]]
                  agg: max
            outputs: {text: text, objects: objects}
            """
        )
    )
    r = perflow.load_flow(path).run(pag=pag)
    assert r["text"].ids.tolist() == [3, 4, 5, 6]
    assert r["objects"].ids.tolist() == [3, 4, 5]


def test_larger_tree_uses_no_python_loop_per_vertex():
    """A deep and wide tree: the matcher's cost is per level, and the results are right."""
    n = 20_000
    parent = np.r_[-1, (np.arange(1, n) - 1) // 3]  # a ternary tree, depth ~9
    names = np.where(np.arange(n) % 7 == 0, "MPI_Wait", "work")
    import pandas as pd

    from perflow.pag.frames import make_metrics

    vt = pd.DataFrame({"name": names, "parent": parent})
    m = make_metrics(np.arange(n), np.zeros(n, np.int64), None, {"time_exc": np.ones(n)}, n_vertices=n)
    big = PAG(vt, m)
    res = big.query('MATCH ("*")->(".", p) WHERE p."name" = "MPI_Wait" AND p IS LEAF')
    leaves = np.flatnonzero(~np.isin(np.arange(n), parent))
    wait_leaves = leaves[names[leaves] == "MPI_Wait"]
    from perflow.pag.tree import ancestors_mask

    assert res.ids.tolist() == np.flatnonzero(ancestors_mask(parent, wait_leaves, include_self=True)).tolist()
