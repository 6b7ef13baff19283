"""The Flow model: building in Python (handles and explicit form), references, settings, copies."""

from __future__ import annotations

import pytest

from perflow import PAG, Flow
from perflow.errors import FlowError
from perflow.flow import Ref

from . import helpers


def handle_flow() -> Flow:
    f = Flow("demo", "Adds things.")
    x = f.input("x", int, doc="a number")
    one = f.step("one", "t_const", value=1)
    s = f.step("sum", "t_add", x, one, offset=3)
    parts = f.step("parts", helpers.split, s, d=4)
    f.output("quot", parts["quot"])
    f.output("sum", s, doc="x + 1 + 3")
    return f


def explicit_flow() -> Flow:
    return (
        Flow("demo", "Adds things.")
        .add_input("x", type=int, doc="a number")
        .add_step("one", "t_const", settings={"value": 1})
        .add_step("sum", "t_add", inputs={"a": "input:x", "b": "one"}, settings={"offset": 3})
        .add_step("parts", "t_split", settings={"d": 4})
        .connect("sum", "parts.x")
        .add_output("quot", "parts.quot")
        .add_output("sum", "sum", doc="x + 1 + 3")
    )


def test_handle_and_explicit_forms_build_equal_flows():
    a, b = handle_flow(), explicit_flow()
    assert a == b
    assert a.steps["sum"].inputs == {"a": "input:x", "b": "one"}
    assert a.steps["sum"].settings == {"offset": 3}
    assert a.steps["parts"].inputs == {"x": "sum"}
    assert a.outputs["quot"].source == "parts.quot"
    a.validate()


def test_flow_runs_and_passes_still_work_as_plain_functions():
    assert helpers.add(1, 2, offset=3) == 6
    assert helpers.split(9, d=4) == {"quot": 2, "rem": 1}
    r = handle_flow().run(x=10, jobs=1)
    assert r["sum"] == 14 and r["quot"] == 3


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("input:pag", Ref(None, "pag")),
        ("hot", Ref("hot")),
        ("hot.table", Ref("hot", "table")),
        ("a-b.c_d", Ref("a-b", "c_d")),
    ],
)
def test_reference_syntax(text, ref):
    assert Ref.parse(text) == ref
    assert str(ref) == text


@pytest.mark.parametrize("text", ["", "input:", "in:pag", "a.b.c", "1abc", "hot.", ".x", "input:a.b"])
def test_invalid_references(text):
    with pytest.raises(ValueError, match="invalid reference|expected"):
        Ref.parse(text)


def test_ref_picks_outputs_only_from_whole_steps():
    assert Ref("s")["a"] == Ref("s", "a")
    with pytest.raises(FlowError, match="only a step reference"):
        Ref(None, "x")["a"]


def test_keyword_arguments_split_into_inputs_and_settings_by_the_pass_signature():
    f = Flow()
    x = f.input("x", int)
    f.step("a", "t_opt", x, y="input:x", scale=2.0)
    assert f.steps["a"].inputs == {"x": "input:x", "y": "input:x"}
    assert f.steps["a"].settings == {"scale": 2.0}


def test_unknown_pass_still_builds_and_validation_reports_it():
    f = Flow()
    x = f.input("x", int)
    f.step("a", "no_such_pass", pag=x, k=3)
    assert f.steps["a"].inputs == {"pag": "input:x"} and f.steps["a"].settings == {"k": 3}
    assert any("unknown pass 'no_such_pass'" in str(p) for p in f.problems())


def test_building_mistakes_that_cannot_be_represented_raise_at_once():
    f = Flow("f")
    f.step("a", "t_const")
    with pytest.raises(FlowError, match="already has a step 'a'"):
        f.step("a", "t_const")
    with pytest.raises(FlowError, match="takes 1 data inputs, 2 given"):
        f.step("b", "t_inc", "a", "a")
    with pytest.raises(FlowError, match="input 'x' given twice"):
        f.step("c", "t_inc", "a", x="a")
    with pytest.raises(FlowError, match="'STEP.INPUT' naming an existing step.*did you mean 'a'"):
        f.connect("a", "aa.x")
    f.input("x")
    with pytest.raises(FlowError, match="already has an input 'x'"):
        f.input("x")
    f.output("a")
    with pytest.raises(FlowError, match="already has an output 'a'"):
        f.output("a")


def test_set_and_with_settings():
    f = handle_flow()
    g = f.with_settings({"sum.offset": 0, "parts.d": 3})
    assert f.steps["sum"].settings == {"offset": 3} and g.steps["sum"].settings == {"offset": 0}
    assert g.run(x=10)["quot"] == 3  # (10 + 1 + 0) // 3
    with pytest.raises(FlowError, match="no step 'sun'; did you mean 'sum'"):
        f.set("sun.offset", 1)
    with pytest.raises(FlowError, match="'STEP.SETTING'"):
        f.set("sum.", 1)
    assert f.set("offset", 1).settings == {"offset": 1}  # a flow setting, for every step that has it


def test_set_reaches_into_subflows_without_changing_the_original():
    inner = handle_flow()
    outer = Flow("outer")
    x = outer.input("x", int)
    sub = outer.step("sub", inner, x=x)
    outer.output("q", sub["quot"])
    changed = outer.with_settings({"sub.parts.d": 1})
    assert inner.steps["parts"].settings == {"d": 4}
    assert changed.run(x=0)["q"] == 4 and outer.run(x=0)["q"] == 1


def test_networkx_view_and_display():
    f = handle_flow()
    g = f.to_networkx()
    assert set(g.edges) == {("one", "sum"), ("sum", "parts")}
    assert g.edges["sum", "parts"]["port"] == "x"
    assert "demo" in repr(f) and "3 steps" in repr(f)
    html = f._repr_html_()
    assert "t_split" in html and "parts" in html
    assert len(f) == 3 and "sum" in f and f["sum"].target == "t_add"
    with pytest.raises(KeyError, match="no step 'nope'"):
        f["nope"]


def test_flow_types_accept_python_types_and_names():
    f = Flow()
    f.input("pag", PAG)
    f.input("n", "int")
    assert f.inputs["pag"].type is PAG and f.inputs["n"].type is int and f.inputs["n"].required
