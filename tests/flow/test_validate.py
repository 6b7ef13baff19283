"""Validation: every problem of a flow, reported together, each naming where and what."""

from __future__ import annotations

import pytest

from perflow import PAG, Flow
from perflow.errors import ValidationError

from . import helpers  # noqa: F401  (registers the t_* passes)


def problems(f: Flow, **kw) -> list[str]:
    return [str(p) for p in f.problems(**kw)]


def one(f: Flow, **kw) -> str:
    ps = problems(f, **kw)
    assert len(ps) == 1, ps
    return ps[0]


def base() -> Flow:
    f = Flow("f")
    x = f.input("x", int)
    f.step("a", "t_inc", x)
    f.output("a")
    return f


def test_valid_flow_has_no_problems():
    assert problems(base()) == []
    assert base().validate() is not None


def test_unknown_pass_suggests_the_closest_name():
    f = base()
    f.step("b", "t_ic", "a")
    assert one(f) == "steps.b.pass: unknown pass 't_ic'; did you mean 't_inc'? (see `perflow passes` for the list)"


def test_missing_and_extra_inputs():
    f = base()
    f.add_step("b", "t_add", inputs={"a": "a", "bb": "a"})
    assert problems(f) == [
        "steps.b.inputs.bb: pass 't_add' has no input 'bb'; did you mean 'b'? (inputs: a, b)",
        "steps.b.inputs: missing input 'b' (int) of pass 't_add'",
    ]


def test_optional_inputs_may_be_left_out():
    f = base()
    f.step("b", "t_opt", "a")
    assert problems(f) == []


def test_setting_problems():
    f = base()
    f.add_step("b", "t_inc", inputs={"x": "a"}, settings={"by": "two", "bye": 1})
    f.add_step("c", "t_need", inputs={"x": "a"})
    f.add_step("d", "t_opt", inputs={"x": "a"}, settings={"scale": 2, "names": ["a", 3]})
    assert problems(f) == [
        "steps.b.settings.by: setting 'by' of pass 't_inc' expects int, got str 'two'",
        "steps.b.settings.bye: pass 't_inc' has no setting 'bye'; did you mean 'by'? (settings: by)",
        "steps.c.settings: missing setting 'mode' (str) of pass 't_need'",
        "steps.d.settings.names: setting 'names' of pass 't_opt' expects tuple[str, ...], got list ['a', 3]",
    ]


def test_int_is_accepted_for_float_and_list_for_tuple():
    f = base()
    f.add_step("d", "t_opt", inputs={"x": "a"}, settings={"scale": 2, "names": ["a", "b"]})
    assert problems(f) == []
    f.output("d")
    assert f.run(x=1)["d"] == 26.0  # (2 + 10) * 2 + len(names)


def test_port_type_mismatch_names_both_ends():
    f = base()
    f.step("t", "t_frame", "a")
    f.step("b", "t_inc", "t")
    assert one(f) == "steps.b.inputs.x: type mismatch: input 'x' of pass 't_inc' expects int, but 't' gives DataFrame"


def test_flow_input_type_is_checked_against_the_port():
    f = Flow()
    p = f.input("pag", PAG)
    f.step("b", "t_inc", p)
    assert one(f) == "steps.b.inputs.x: type mismatch: input 'x' of pass 't_inc' expects int, but 'input:pag' gives PAG"


def test_cycles_are_printed():
    f = base()
    f.step("b", "t_add", "a", "d")
    f.step("c", "t_inc", "b")
    f.step("d", "t_inc", "c")
    f.step("e", "t_inc", "e")
    assert problems(f) == ["steps.b: cycle: b -> d -> c -> b", "steps.e: cycle: e -> e"]


def test_reference_problems():
    f = base()
    f.step("s", "t_split", "a")
    f.step("b", "t_inc", "aa")
    f.step("c", "t_inc", "s")
    f.step("d", "t_inc", "s.quo")
    f.step("e", "t_inc", "input:y")
    f.step("g", "t_inc", "in:x")
    f.output("o", "nope")
    assert problems(f) == [
        "steps.b.inputs.x: input 'x' refers to unknown step 'aa'; did you mean 'a'?",
        "steps.c.inputs.x: step 's' has several outputs (quot, rem); name one, e.g. 's.quot'",
        "steps.d.inputs.x: step 's' (pass 't_split') has no output 'quo'; did you mean 'quot'? (outputs: quot, rem)",
        "steps.e.inputs.x: undefined flow input 'y' (declare it under 'inputs')",
        "steps.g.inputs.x: invalid reference 'in:x': expected 'input:NAME', 'STEP' or 'STEP.OUTPUT'",
        "outputs.o: output 'o' refers to unknown step 'nope'",
    ]


def test_unused_inputs_bad_defaults_and_names():
    f = base()
    f.input("unused", int, default="three")
    f.add_step("bad name", "t_inc", inputs={"x": "a"})
    assert problems(f) == [
        "inputs.unused: flow input 'unused' is not used by any step or output",
        "inputs.unused.default: default of input 'unused' is str 'three', not int",
        "steps.bad name: invalid step name 'bad name': use letters, digits, '_' and '-', starting with a letter",
    ]


def test_a_flow_without_steps():
    assert one(Flow("empty")) == "steps: the flow has no steps"


def test_dotted_paths_need_allow_import():
    f = base()
    f.step("b", "tests.flow.helpers:plain", "a", k=3)
    assert "allow it explicitly (allow_import=True" in one(f)
    f.output("b")
    assert problems(f, allow_import=True) == []
    assert f.run(x=1, allow_import=True)["b"] == 6
    f.step("c", "tests.flow.helpers:nothing", "a")
    assert "cannot import pass 'tests.flow.helpers:nothing'" in one(f, allow_import=True)


def test_functions_are_accepted_as_targets_registered_or_not():
    f = base()
    f.step("b", helpers.plain, "a", k=5)
    f.step("c", helpers.inc, "b", by=2)
    f.output("c")
    assert problems(f) == []
    assert f.run(x=1)["c"] == 12


def test_every_problem_is_reported_together():
    f = Flow("many")
    f.input("x", int)
    f.input("spare")
    f.step("a", "t_inc", "input:x", by="one")
    f.step("b", "t_nope", "a")
    f.step("c", "t_add", "a", "zz")
    f.output("out", "c")
    with pytest.raises(ValidationError) as ei:
        f.validate()
    msg = str(ei.value)
    assert msg.startswith("flow is invalid (4 problems):")
    for part in ("settings.by", "unknown pass 't_nope'", "unknown step 'zz'", "flow input 'spare' is not used"):
        assert part in msg
    assert [p.path for p in ei.value.details] == [
        "inputs.spare",
        "steps.a.settings.by",
        "steps.b.pass",
        "steps.c.inputs.b",
    ]


def test_subflow_problems_are_prefixed_and_subflows_take_no_settings():
    inner = Flow("inner")
    x = inner.input("x", int)
    inner.step("a", "t_inc", x, by="z")
    inner.output("a")
    outer = Flow("outer")
    ox = outer.input("x", int)
    outer.step("sub", inner, x=ox)
    outer.steps["sub"].settings["a.by"] = 1
    outer.step("after", "t_inc", "sub.a")
    outer.step("wrong", "t_inc", "sub.b")
    assert problems(outer) == [
        "steps.sub.flow.steps.a.settings.by: setting 'by' of pass 't_inc' expects int, got str 'z'",
        "steps.sub.settings: a step that runs a flow takes no settings (set the sub-flow's steps instead)",
        "steps.wrong.inputs.x: step 'sub' (flow 'inner') has no output 'b' (outputs: a)",
    ]


def test_subflow_missing_input_and_self_containment():
    inner = base()
    outer = Flow("outer")
    outer.step("sub", inner)
    assert one(outer) == "steps.sub.inputs: missing input 'x' (int) of flow 'f'"
    loop = base()
    loop.step("me", loop, x="a")
    assert "contains itself" in " ".join(problems(loop))
