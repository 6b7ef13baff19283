"""Safe metric/filter expressions: worked examples, refusals with columns, the exploit, pandas agreement."""

from __future__ import annotations

import ast
import re
import textwrap

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import perflow
from perflow import PAG
from perflow.errors import ExpressionError, MetricError, PAGError, StepError, ValidationError
from perflow.pag import expr as ex

from .test_sets import TREE

#: ids: 0 main, 1 init, 2 MPI_Init, 3 solve, 4 MPI_Send, 5 MPI_Recv, 6 kernel_a
#: time_exc summed over the two processes: 2, 4, 4, 2, 4.5, 5.5, 10; time_inc: 32, 8, 4, 22, 4.5, 5.5, 10


@pytest.fixture(scope="module")
def pag() -> PAG:
    return PAG.from_literal(TREE)


@pytest.mark.parametrize(
    ("expr", "agg", "ids"),
    [
        ("name == 'MPI_Send' or name == 'kernel_a'", "sum", [4, 6]),
        ('name in ["main", "solve"]', "sum", [0, 3]),
        ("name == ['main', 'solve']", "sum", [0, 3]),  # pandas: == with a list is 'in'
        ("name not in ['main', 'solve'] and depth == 1", "sum", [1]),
        ("kind in ['loop', 'mpi'] and depth >= 1", "sum", [2, 3, 4, 5]),
        ("1 <= depth < 2", "sum", [1, 3]),
        ("time_inc / time_exc > 4", "sum", [0, 3]),  # 32/2 = 16, 22/2 = 11
        ("max(time_exc) - min(time_exc) >= 3", "sum", [4, 5, 6]),  # 3.5, 4.5, 6 (MPI_Init: 2)
        ("~(depth > 0) | (file == 'k.c')", "sum", [0, 6]),
        ("not (time_exc > 4)", "sum", [0, 1, 2, 3]),
        ("depth == 2 & time_exc > 5", "sum", [5, 6]),  # & is 'and', with its precedence (as in pandas.eval)
        ("sqrt(time_exc) ** 2 > 9.9", "sum", [6]),
        ("-time_exc ** 2 < -50", "sum", [6]),  # -(10 ** 2); MPI_Recv: -(5.5 ** 2) = -30.25
        ("visits > 5", "sum", [3]),  # absent values count as 0
        ("time_exc > 4", "max", [5, 6]),  # max over processes: 5 and 8
        ("mean(time_exc) == time_exc / 2", "sum", [0, 1, 2, 3, 4, 5, 6]),
        ("`time_exc` >= 5.5 and True", "sum", [5, 6]),
        ("abs(time_exc - 4.5) < 0.1 or visits == 20", "sum", [3, 4]),
        ("count(time_exc) == 2 and median(time_exc) > 3", "sum", [6]),  # medians: MPI_Recv 2.75, kernel_a 5
        ("1 < 2", "sum", [0, 1, 2, 3, 4, 5, 6]),
        ("depth // 2 == 1 and depth % 2 == 0", "sum", [2, 4, 5, 6]),
        ("1e0 < time_exc < 4.25", "sum", [0, 1, 2, 3]),
        ("not True or file == 'k.c'", "sum", [6]),  # pandas.eval: ~True is -2, so every vertex
        ("~(1 < 2) | (depth == 0)", "sum", [0]),
    ],
)
def test_worked_examples(pag, expr, agg, ids):
    assert pag.vertices.filter(expr, agg=agg).ids.tolist() == ids


@pytest.mark.parametrize(
    ("expr", "message", "column"),
    [
        ("@fnmatch.os.system('touch x')", "local variables (@name) are not allowed", 1),
        ("time_exc.__class__ > 1", "attribute access is not allowed", 9),
        ("(time_exc > 0).all()", "attribute access is not allowed", 15),
        ("__import__('os') > 1", "unknown function '__import__'", 1),
        ("time_exc[0] > 1", "subscripts are not allowed", 9),
        ("lambda: 1", "'lambda' is not allowed", 1),
        ("[x for x in time_exc]", "comprehensions are not allowed", 2),
        ("open('f') > 1", "unknown function 'open'", 1),
        ("max(time_exc * 2) > 1", "max() takes one metric name", 5),
        ("`__dict__` > 1", "names starting with '__' are not allowed", 1),
        ("time_exc = 1", "assignment is not allowed; compare with ==", 10),
        ("a; b", "one expression only", 2),
        ("x if y else z", "'if' is not allowed", 3),
        ("time_exc > 1 and", "expression ends too early", 17),
        ("time_exc > 'a", "unterminated string", 12),
        ("0x1f > 1", "invalid number", 1),
        ("time_exc is None", "'is' is not supported", 10),
        ("{1: 2}", "dictionaries are not allowed", 1),
        ("sqrt(1, 2) > 1", "sqrt() takes 1 argument, not 2", 1),
        ("name > 'a'", "text can only be compared with == and !=", 6),
        ("name + 1 > 2", "'+' needs numbers, not text", 1),
        ("depth in 3", "'in' needs a list on its right", 7),
        ("time_exc and depth > 1", "'and' needs true/false values, not number", 1),
        ("tme_exc > 1", "unknown metric 'tme_exc'; did you mean 'time_exc'?", 1),
        ("time_exc > 1 and max(colour) > 1", "unknown metric 'colour'", 18),
        ("time_exc * 2", "does not give true/false per element", 1),
        ("", "empty expression", 1),
    ],
)
def test_refusals_name_the_column(pag, expr, message, column):
    with pytest.raises(ExpressionError) as info:
        pag.vertices.filter(expr)
    err = info.value
    assert message in str(err) and err.column == column
    assert isinstance(err, ValidationError) and isinstance(err, MetricError) and isinstance(err, PAGError)
    assert err.text == expr and repr(expr) in str(err)  # names the expression
    assert str(err).splitlines()[-1].index("^") - 4 == column - 1  # the caret points at it


def test_limits_on_length_and_depth(pag):
    deep = "(" * (ex.MAX_DEPTH + 1) + "time_exc > 0" + ")" * (ex.MAX_DEPTH + 1)
    with pytest.raises(ExpressionError, match="nested too deeply"):
        pag.vertices.filter(deep)
    ok = "(" * 10 + "time_exc > 0" + ")" * 10
    assert len(pag.vertices.filter(ok)) == 7
    long_chain = " + ".join(["time_exc"] * 200) + " > 0"
    with pytest.raises(ExpressionError, match="nested too deeply"):
        pag.vertices.filter(long_chain)
    with pytest.raises(ExpressionError, match="too long"):
        pag.vertices.filter("time_exc > 0 or " * 400 + "True")
    wide = " or ".join(f"time_exc > {i}" for i in range(150))  # long but flat: accepted
    assert len(pag.vertices.filter(wide)) == 7


def test_the_exploit_is_refused_and_nothing_runs(pag, tmp_path):
    target = tmp_path / "pwned"
    payloads = [
        f"@fnmatch.os.system('touch {target}')",
        f"count > 0 or @fnmatch.os.system('touch {target}') == 0",
        f"__import__('os').system('touch {target}') == 0",
        f"time_exc.__class__.__mro__[-1].__subclasses__() == 0 or touch('{target}')",
    ]
    for p in payloads:
        with pytest.raises(ExpressionError):
            pag.parallel.edges.filter(p)
        with pytest.raises(ExpressionError):
            pag.parallel.vertices.filter(p)
        with pytest.raises(ExpressionError):
            pag.vertices.filter(p)
    assert not target.exists()


def test_the_exploit_through_a_yaml_flow_is_refused(pag, tmp_path):
    target = tmp_path / "pwned"
    path = tmp_path / "evil.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            perflow: 1
            name: evil
            inputs:
              pag: {{type: PAG}}
            steps:
              sel:
                pass: filter_vertices
                inputs: {{data: input:pag}}
                settings: {{expr: "@fnmatch.os.system('touch {target}') == 0"}}
            outputs: {{sel: sel}}
            """
        )
    )
    result = perflow.load_flow(path).run(pag=pag)
    err = result.errors["sel"]
    assert isinstance(err, StepError) and isinstance(err.error, ExpressionError)
    assert "local variables (@name) are not allowed (at column 1)" in str(err)
    with pytest.raises(StepError):
        result["sel"]
    assert not target.exists()


def test_no_general_purpose_evaluator_is_used(pag, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a general-purpose evaluator was called")

    monkeypatch.setattr(pd.DataFrame, "eval", boom)
    monkeypatch.setattr(pd, "eval", boom)
    monkeypatch.setattr("builtins.eval", boom)
    assert pag.vertices.filter("max(time_exc) > 1.5 * mean(time_exc) and name != 'x'").ids.tolist() == [4, 5, 6]
    assert len(pag.parallel.vertices.filter("time_exc > 2 and process == 0")) == 3  # MPI_Init 3, MPI_Recv 5, kernel 8
    assert len(pag.parallel.edges.filter("kind == 'call'")) == len(pag.parallel.edges.filter(kind="call"))


def test_parallel_sets(pag):
    pv = pag.parallel.vertices
    assert sorted(pv.filter("process == 1 and time_exc >= 4").vertices().names()) == ["MPI_Send"]
    assert len(pv.filter("name == 'main'")) == 2
    with pytest.raises(ExpressionError, match="apply to top-down vertices, not parallel vertices"):
        pv.filter("max(time_exc) > 1")
    with pytest.raises(ExpressionError, match="unknown metric 'tme'"):
        pv.filter("tme > 1")
    with pytest.raises(ExpressionError, match="not parallel edges"):
        pag.parallel.edges.filter("max(count) > 1")
    with pytest.raises(ExpressionError, match="unknown edge attribute 'colour'"):
        pag.parallel.edges.filter("colour == 'red'")


def test_parse_tree_and_names():
    node = ex.parse("a + 2 * b > max(c) and not d in [1, 'x']")
    assert isinstance(node, ex.BoolOp) and node.op == "and"
    left = node.values[0]
    assert isinstance(left, ex.Compare) and left.ops == (">",)
    assert isinstance(left.operands[0], ex.Binary) and left.operands[0].op == "+"
    assert isinstance(left.operands[0].right, ex.Binary) and left.operands[0].right.op == "*"
    assert isinstance(node.values[1], ex.Unary) and node.values[1].op == "not"
    assert ex.names_in(node) == {"a", "b", "c", "d"}
    assert ex.parse("2 ** -1").right == ex.Unary(5, "-", ex.Num(6, 1.0))  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------ agreement with pandas
_AGG_CALL = re.compile(r"\b(sum|mean|max|min|std|median|count)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)")


def _negates_a_constant(expr: str) -> bool:
    """Whether ``not``/``~`` applies to a subexpression without columns (Python's own parser decides)."""

    def has_column(node: ast.AST) -> bool:
        funcs = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
        return any(isinstance(n, ast.Name) and id(n) not in funcs for n in ast.walk(node))

    return any(
        isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not | ast.Invert) and not has_column(n.operand)
        for n in ast.walk(ast.parse(expr, mode="eval"))
    )


def pandas_mask(pag: PAG, expr: str, agg: str) -> np.ndarray:
    """The previous implementation: aggregations rewritten to columns, then ``DataFrame.eval(engine="python")``."""
    calls: dict[str, tuple[str, str]] = {}

    def repl(m: re.Match[str]) -> str:
        col = f"agg_{m.group(1)}_{m.group(2)}"
        calls[col] = (m.group(1), m.group(2))
        return col

    if _negates_a_constant(expr):
        raise TypeError("pandas turns `not True` into `~True`, the integer -2: a pandas bug, not a reference")
    rewritten = _AGG_CALL.sub(repl, expr)
    df = pag.metric_frame(agg=agg)
    for c in ("file", "line", "module"):
        df[c] = pag.vertex_table[c]
    for col, (a, m) in calls.items():
        df[col] = pag.aggregate(m, a).to_numpy()
    res = np.asarray(df.eval(rewritten, engine="python"))
    if res.dtype != bool:  # pandas turns `not True` into `~True`, the integer -2: a pandas bug, not a reference
        raise TypeError(f"pandas gave {res.dtype}")
    return np.broadcast_to(res, (pag.n_vertices,))


_NUM_COLS = ["time_exc", "time_inc", "visits", "depth", "line"]
_AGGS = ["sum", "mean", "max", "min", "std", "median", "count"]
_NAMES = ["main", "init", "MPI_Init", "solve", "MPI_Send", "MPI_Recv", "kernel_a", "other"]
_KINDS = ["function", "loop", "mpi", "io"]

numbers = st.sampled_from(["0", "1", "2.5", "0.5", "3", "1e-3", "10", "4.5", ".25", "1_000"])
num_leaf = st.one_of(
    st.sampled_from(_NUM_COLS),
    numbers,
    st.builds(lambda a, m: f"{a}({m})", st.sampled_from(_AGGS), st.sampled_from(["time_exc", "visits"])),
)


def _num_ext(children):
    return st.one_of(
        st.builds(lambda a, op, b: f"{a} {op} {b}", children, st.sampled_from(["+", "-", "*", "/"]), children),
        st.builds(lambda a, op, b: f"({a} {op} {b})", children, st.sampled_from(["+", "-", "*", "/"]), children),
        st.builds(
            lambda a, op, k: f"{a} {op} {k}", children, st.sampled_from(["//", "%"]), st.sampled_from(["2", "3"])
        ),
        st.builds(lambda a: f"-{a}", children),
        st.builds(lambda a: f"abs({a})", children),
        st.builds(lambda f, a: f"{f}(abs({a}))", st.sampled_from(["sqrt", "log1p", "floor"]), children),
        st.builds(lambda a: f"abs({a}) ** 2", children),
    )


num_expr = st.recursive(num_leaf, _num_ext, max_leaves=5)
cmp_op = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
text_cond = st.one_of(
    st.builds(lambda op, v: f"name {op} '{v}'", st.sampled_from(["==", "!="]), st.sampled_from(_NAMES)),
    st.builds(lambda op, v: f'kind {op} "{v}"', st.sampled_from(["==", "!="]), st.sampled_from(_KINDS)),
    st.builds(
        lambda neg, vs: f"name {'not in' if neg else 'in'} [{', '.join(repr(v) for v in vs)}]",
        st.booleans(),
        st.lists(st.sampled_from(_NAMES), min_size=1, max_size=3),
    ),
    st.builds(lambda vs: f"depth in [{', '.join(vs)}]", st.lists(st.sampled_from(["0", "1", "2", "3"]), min_size=1)),
    st.sampled_from(["file == 'k.c'", "file != ''", "True", "False"]),
)
bool_leaf = st.one_of(
    st.builds(lambda a, op, b: f"{a} {op} {b}", num_expr, cmp_op, num_expr),
    st.builds(lambda a, o1, b, o2, c: f"{a} {o1} {b} {o2} {c}", num_expr, cmp_op, num_expr, cmp_op, num_expr),
    text_cond,
)


def _bool_ext(children):
    return st.one_of(
        st.builds(lambda a, op, b: f"{a} {op} {b}", children, st.sampled_from(["and", "or"]), children),
        st.builds(lambda a, op, b: f"({a}) {op} ({b})", children, st.sampled_from(["&", "|"]), children),
        st.builds(lambda a: f"not {a}", children),
        st.builds(lambda a: f"~({a})", children),
        st.builds(lambda a: f"({a})", children),
    )


bool_expr = st.recursive(bool_leaf, _bool_ext, max_leaves=6)
values = st.floats(min_value=-5, max_value=20, allow_nan=False).map(lambda x: round(x, 2))


@st.composite
def pags(draw):
    """The fixture's tree shape with drawn metric values (some vertices without visits)."""

    def node(n):
        out = {k: v for k, v in n.items() if k != "children"}
        out["metrics"] = {"time_exc": [draw(values), draw(values)]}
        if draw(st.booleans()):
            out["metrics"]["visits"] = [draw(st.integers(0, 20)), draw(st.integers(0, 20))]
        if "children" in n:
            out["children"] = [node(c) for c in n["children"]]
        return out

    return PAG.from_literal(node(TREE))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=pags(), expr=bool_expr, agg=st.sampled_from(["sum", "max", "mean"]))
def test_agrees_with_pandas_eval(p, expr, agg):
    try:
        expected = pandas_mask(p, expr, agg)
    except Exception:  # e.g. 1 / 0 between two Python scalars: pandas raises, numpy gives inf
        assume(False)
    got = p.vertices.filter(expr, agg=agg)
    assert got.ids.tolist() == np.flatnonzero(expected).tolist(), expr


def test_agrees_with_pandas_on_real_data():
    from tests.conftest import shared

    p = perflow.read(str(shared("hpctoolkit", "cpi-xml")))
    for expr in [
        "time_exc > 0.01",
        "max(time_inc) > 1.3 * mean(time_inc) and depth > 1",
        "name == 'MPI_Init' or (kind == 'mpi' and not time_exc < 0.001)",
        "1 < depth <= 4 & line >= 0",
        "std(time_exc) / (mean(time_exc) + 1e-9) > 0.5",
    ]:
        assert p.vertices.filter(expr).ids.tolist() == np.flatnonzero(pandas_mask(p, expr, "sum")).tolist(), expr
