"""Inputs fed by several references: a list or a mapping of references becomes a list or dict."""

from __future__ import annotations

import textwrap

import perflow
from perflow import Flow
from perflow.flow.yaml_io import loads

from . import helpers  # noqa: F401
from .helpers import CALLS


def python_flow() -> Flow:
    f = Flow("multi")
    x = f.input("x", int)
    a = f.step("a", "t_inc", x, by=1)
    b = f.step("b", "t_inc", x, by=2)
    s = f.step("s", "t_split", b)
    f.output("total", f.step("total", "t_total", [a, b, s["quot"]], scale=10))
    f.output("names", f.step("names", "t_names", named={"first": a, "second": b, "x": x}))
    return f


YAML = textwrap.dedent(
    """\
    perflow: 1
    name: multi
    inputs:
      x: {type: int}
    steps:
      a: {pass: t_inc, inputs: {x: input:x}, settings: {by: 1}}
      b: {pass: t_inc, inputs: {x: input:x}, settings: {by: 2}}
      s: {pass: t_split, inputs: {x: b}}
      total:
        pass: t_total
        inputs:
          values: [a, b, s.quot]
        settings: {scale: 10}
      names:
        pass: t_names
        inputs:
          named: {first: a, second: b, x: input:x}
    outputs: {total: total, names: names}
    """
)


def test_python_and_yaml_forms_agree_and_run():
    f = python_flow()
    assert f.steps["total"].inputs == {"values": ["a", "b", "s.quot"]}
    assert f.steps["names"].inputs == {"named": {"first": "a", "second": "b", "x": "input:x"}}
    g = loads(YAML)
    assert g == f and loads(f.to_yaml()) == f
    for jobs in (1, 3):
        r = perflow.run(g, x=4, jobs=jobs)
        assert r["total"] == 10 * (5 + 6 + 3) and r["names"] == "first=5,second=6,x=4"
    assert set(f.to_networkx().in_edges("total")) == {("a", "total"), ("b", "total"), ("s", "total")}


def test_problems_inside_lists_and_mappings_are_located():
    bad = YAML.replace("values: [a, b, s.quot]", "values: [a, bb, s.quotient]").replace(
        "named: {first: a", "named: {first: input:y"
    )
    f = loads(bad, validate=False)
    assert [str(p) for p in f.problems()] == [
        "steps.total.inputs.values[1] (line 12, column 19): input 'values[1]' refers to unknown step 'bb'; "
        "did you mean 'b'?",
        "steps.total.inputs.values[2] (line 12, column 23): step 's' (pass 't_split') has no output 'quotient'; "
        "did you mean 'quot'? (outputs: quot, rem)",
        "steps.names.inputs.named.first (line 17, column 15): undefined flow input 'y' (declare it under 'inputs')",
    ]


def test_a_list_for_a_single_value_port_is_a_type_mismatch():
    f = Flow()
    a = f.step("a", "t_const")
    f.step("b", "t_inc", [a, a])
    assert [str(p) for p in f.problems()] == [
        "steps.b.inputs.x: type mismatch: input 'x' of pass 't_inc' expects int, but a list of references gives a list"
    ]


def test_cache_keys_follow_every_element(tmp_path):
    f = python_flow()
    perflow.run(f, x=1, cache=tmp_path)
    CALLS.clear()
    r = perflow.run(f, x=1, cache=tmp_path, settings={"b.by": 3})
    assert r.steps.at["total", "status"] == "done" and r.steps.at["a", "status"] == "cached"
    assert r["total"] == 10 * (2 + 4 + 2)
    r = perflow.run(f, x=1, cache=tmp_path, settings={"b.by": 3})
    assert r.steps.at["total", "status"] == "cached" and CALLS["t_total"] == 1
