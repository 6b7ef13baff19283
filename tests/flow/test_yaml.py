"""YAML flows: the schema, problems with YAML path, line and column, safe loading, round trips."""

from __future__ import annotations

import textwrap

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perflow
from perflow import Flow
from perflow.errors import FlowError, ValidationError
from perflow.flow.yaml_io import dump, loads

from . import helpers  # noqa: F401
from .test_model import handle_flow

GOOD = textwrap.dedent(
    """\
    perflow: 1
    name: demo
    description: Adds things.
    inputs:
      x:
        type: int
        doc: a number
    steps:
      one:
        pass: t_const
        settings: {value: 1}
      sum:
        pass: t_add
        inputs: {a: input:x, b: one}
        settings:
          offset: 3
      parts:
        pass: t_split
        inputs:
          x: sum
        settings:
          d: 4
    outputs:
      quot: parts.quot
      sum: {from: sum, doc: x + 1 + 3}
    """
)


def problems_of(text: str) -> list[str]:
    with pytest.raises(ValidationError) as ei:
        loads(textwrap.dedent(text), source="f.yaml")
    assert ei.value.source == "f.yaml"
    return ei.value.problems


def test_yaml_flow_equals_the_python_flow():
    f = loads(GOOD)
    assert f == handle_flow()
    assert f.run(x=10)["sum"] == 14
    assert f.locations["steps.sum.settings.offset"] == (16, 7)


def test_round_trip_of_a_handwritten_flow():
    f = loads(GOOD)
    assert loads(f.to_yaml()) == f
    assert yaml.safe_load(f.to_yaml())["perflow"] == 1


def test_problems_carry_yaml_path_line_and_column():
    ps = problems_of(
        """\
        perflow: 1
        inputs:
          x: int
        steps:
          a:
            pass: t_inc
            inputs: {x: input:x}
            settings:
              by: two
          b:
            pass: t_inc
            inputs: {x: aa}
        """
    )
    assert ps == [
        "steps.a.settings.by (line 9, column 7): setting 'by' of pass 't_inc' expects int, got str 'two'",
        "steps.b.inputs.x (line 12, column 14): input 'x' refers to unknown step 'aa'; did you mean 'a'?",
    ]


def test_schema_problems_are_all_collected():
    ps = problems_of(
        """\
        perflow: 1
        nmae: oops
        inputs:
          x: {type: PAGG, dok: typo}
        steps:
          a:
            pass: t_inc
            flow: other.yaml
            inputs: [x]
          b: {}
          c:
            pass: t_inc
            inputs: {x: 5}
            setings: {}
        outputs: [a, a.b]
        """
    )
    assert ps == [
        "nmae (line 2, column 1): unknown key 'nmae' in a flow; did you mean 'name'? (allowed: perflow, name, "
        "description, inputs, settings, steps, outputs)",
        "inputs.x.dok (line 4, column 19): unknown key 'dok' in input 'x'; did you mean 'doc'? (allowed: type, doc, default)",
        "inputs.x.type (line 4, column 7): unknown type 'PAGG'; did you mean 'PAG'? (types: any, PAG, Ensemble, VertexSet, "
        "EdgeSet, ParallelVertexSet, ParallelEdgeSet, Trace, DataFrame, Series, Figure, path, str, int, float, bool, "
        "list, tuple, set, dict, None, or combinations such as 'PAG | None' and 'list[str]')",
        "inputs.x (line 4, column 3): flow input 'x' is not used by any step or output",
        "steps.a (line 6, column 3): step 'a' gives both 'pass' and 'flow'; a step runs one of them",
        "steps.a.inputs (line 9, column 5): 'inputs' must be a mapping, not list",
        "steps.b (line 10, column 3): step 'b' needs 'pass: NAME' (or 'flow: NAME')",
        "steps.c.setings (line 14, column 5): unknown key 'setings' in step 'c'; did you mean 'settings'? "
        "(allowed: pass, flow, inputs, settings, doc)",
        "steps.c.inputs.x (line 13, column 14): a reference must be a string like 'input:pag' or 'step.output', not 5",
        "outputs[1] (line 15, column 14): a list of outputs names steps; use a mapping NAME: REFERENCE for 'a.b'",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("steps: {}\n", "missing 'perflow: 1' (the schema version) at the top of the flow"),
        (
            "perflow: 2\nsteps: {a: {pass: t_const}}\n",
            "perflow (line 1, column 1): schema version 2 is newer than this perflow reads (1)",
        ),
        (
            "perflow: yes\nsteps: {a: {pass: t_const}}\n",
            "perflow (line 1, column 1): the schema version must be a positive integer, not True",
        ),
        (
            "",
            "a flow must be a mapping with the keys perflow, name, description, inputs, settings, steps, outputs (the file is empty)",
        ),
        ("- 1\n- 2\n", "line 1, column 1: a flow must be a mapping"),
        ("perflow: 1\n", "missing 'steps' (a mapping of step name to step)"),
        ("perflow: 1\nsteps: [a]\n", "steps (line 2, column 1): 'steps' must be a mapping, not list"),
        (
            "perflow: 1\nsteps:\n  a: {pass: t_const}\n  a: {pass: t_const}\n",
            "steps.a (line 4, column 3): duplicate key 'a' (first given at line 3)",
        ),
        (
            "perflow: 1\nsteps:\n  a: {pass: [t_const}\n",
            "line 3, column 21: invalid YAML: while parsing a flow sequence",
        ),
        ("perflow: 1\nsteps:\n\ta: 1\n", "line 3, column 1: invalid YAML"),
        ("perflow: 1\nsteps: {a: {pass: t_const, settings: {value: &x [*x]}}}\n", "recursive YAML alias"),
    ],
)
def test_schema_errors(text, message):
    ps = problems_of(text)
    assert any(message in p for p in ps), ps


def test_yaml_never_builds_python_objects(tmp_path):
    marker = tmp_path / "pwned"
    text = f"perflow: 1\nsteps:\n  a:\n    pass: t_const\n    settings: {{value: !!python/object/apply:os.system ['touch {marker}']}}\n"
    assert problems_of(text) == [
        "steps.a.settings.value (line 5, column 23): the YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' "
        "is not allowed in a flow"
    ]
    scalar = "perflow: 1\nsteps:\n  a: {pass: t_const, settings: {value: !!python/name:os.system }}\n"
    assert problems_of(scalar) == [
        "steps.a.settings.value (line 3, column 40): cannot read this value: could not determine a constructor "
        "for the tag 'tag:yaml.org,2002:python/name:os.system'"
    ]
    assert not marker.exists()


def test_composite_type_names_round_trip():
    f = loads(
        "perflow: 1\ninputs:\n  a: {type: PAG | None}\n  b: {type: 'list[str | int]'}\n  c: {type: 'tuple[float, ...]'}\n"
        "steps:\n  s: {pass: t_const}\noutputs: {a: input:a, b: input:b, c: input:c}\n"
    )
    assert f.inputs["a"].type == (perflow.PAG | None) and f.inputs["b"].type == list[str | int]
    assert f.inputs["c"].type == tuple[float, ...]
    assert loads(f.to_yaml()) == f and "type: PAG | None" in f.to_yaml()


def test_anchors_and_merge_keys_work():
    f = loads(
        "perflow: 1\nsteps:\n  a: &base {pass: t_const, settings: {value: 2}}\n  b: {<<: *base}\noutputs: [a, b]\n"
    )
    assert f.steps["b"].settings == {"value": 2} and f.run()["b"] == 2


def test_outputs_in_list_form_and_default_outputs():
    f = loads("perflow: 1\nsteps:\n  a: {pass: t_const}\n  s: {pass: t_split, inputs: {x: a}}\n")
    r = f.run()
    assert list(r) == ["s.quot", "s.rem"] and r["s.quot"] == 0 and r["s.rem"] == 1


def test_to_yaml_refuses_values_yaml_cannot_express():
    f = Flow()
    f.step("a", "t_const", value=object())
    with pytest.raises(FlowError, match=r"steps.a.settings.value holds object"):
        f.to_yaml()


def test_load_flow_from_file_name_and_shipped_name(tmp_path):
    p = tmp_path / "adder.yaml"
    p.write_text(GOOD.replace("name: demo\n", ""))
    f = perflow.load_flow(p)
    assert f.name == "adder" and f.source == str(p)
    conv = perflow.load_flow("convert")
    assert conv.origin == "convert" and "path" in conv.steps["read"].inputs
    with pytest.raises(FileNotFoundError, match="no shipped flow of that name; did you mean 'convert'"):
        perflow.load_flow("convrt")


def test_subflows_by_file_inline_and_shipped(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "inc.yaml").write_text(
        "perflow: 1\ninputs: {x: int}\nsteps:\n  a: {pass: t_inc, inputs: {x: input:x}, settings: {by: 5}}\noutputs: {y: a}\n"
    )
    main = tmp_path / "main.yaml"
    main.write_text(
        textwrap.dedent(
            """\
            perflow: 1
            steps:
              c: {pass: t_const, settings: {value: 1}}
              s1:
                flow: sub/inc.yaml
                inputs: {x: c}
              s2:
                flow:
                  inputs: {v: int}
                  steps:
                    d: {pass: t_add, inputs: {a: input:v, b: input:v}}
                  outputs: {w: d}
                inputs: {v: s1.y}
            outputs: {out: s2.w}
            """
        )
    )
    f = perflow.load_flow(main)
    r = f.run()
    assert r["out"] == 12
    assert list(r.steps.index) == ["c", "s1/a", "s2/d"]
    again = loads(f.to_yaml(), source=str(main))
    assert again == f and "flow: sub/inc.yaml" in f.to_yaml()
    changed = f.with_settings({"s1.a.by": 0, "s2.d.offset": 1})
    assert changed.run()["out"] == 3 and f.run()["out"] == 12  # 1 + 0 = 1; 1 + 1 + 1
    assert "flow: sub/inc.yaml" not in changed.to_yaml()  # the changed sub-flow is written inline


def test_subflow_problems_point_into_the_right_file(tmp_path):
    (tmp_path / "bad.yaml").write_text("perflow: 1\nsteps:\n  a: {pass: t_const, settings: {value: x}}\n")
    (tmp_path / "main.yaml").write_text(
        "perflow: 1\nsteps:\n  s: {flow: bad.yaml}\n  t:\n    flow:\n      steps:\n        b: {pass: t_inc}\n"
    )
    with pytest.raises(ValidationError) as ei:
        perflow.load_flow(tmp_path / "main.yaml")
    assert ei.value.problems == [
        f"steps.s.flow (line 3, column 7): in flow 'bad.yaml' ({tmp_path / 'bad.yaml'}): steps.a.settings.value "
        "(line 3, column 33): setting 'value' of pass 't_const' expects int, got str 'x'",
        "steps.t.flow.steps.b.inputs (line 7, column 9): missing input 'x' (int) of pass 't_inc'",
    ]


def test_missing_subflows_and_include_cycles(tmp_path):
    (tmp_path / "a.yaml").write_text("perflow: 1\nsteps:\n  s: {flow: b.yaml}\n")
    (tmp_path / "b.yaml").write_text("perflow: 1\nsteps:\n  s: {flow: a.yaml}\n")
    (tmp_path / "c.yaml").write_text("perflow: 1\nsteps:\n  s: {flow: nope.yaml}\n  t: {flow: nothing}\n")
    with pytest.raises(ValidationError, match="contains itself"):
        perflow.load_flow(tmp_path / "a.yaml")
    with pytest.raises(ValidationError) as ei:
        perflow.load_flow(tmp_path / "c.yaml")
    assert "steps.s.flow (line 3, column 7): flow file 'nope.yaml' not found" in ei.value.problems[0]
    assert "steps.t.flow (line 4, column 7): unknown flow 'nothing'" in ei.value.problems[1]


def test_python_flow_files_and_the_import_rule(tmp_path):
    py = tmp_path / "pyflow.py"
    py.write_text(
        '"""A flow in Python."""\nfrom perflow import Flow\n\n'
        "def flow():\n    f = Flow('pyflow')\n    f.output('a', f.step('a', 't_const', value=7))\n    return f\n"
    )
    f = perflow.load_flow(py)
    assert f.description == "A flow in Python." and f.run()["a"] == 7
    (tmp_path / "uses.yaml").write_text("perflow: 1\nsteps:\n  s: {flow: pyflow.py}\n")
    with pytest.raises(ValidationError, match="is Python code; allow importing code"):
        perflow.load_flow(tmp_path / "uses.yaml")
    assert perflow.run(tmp_path / "uses.yaml", allow_import=True)["s"] == 7
    (tmp_path / "noflow.py").write_text("x = 1\n")
    with pytest.raises(FlowError, match="defines no flow"):
        perflow.load_flow(tmp_path / "noflow.py")


# ---------------------------------------------------------------------- property test
names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), max_size=30)
scalars = st.one_of(st.integers(-(10**6), 10**6), st.booleans(), texts, st.floats(allow_nan=False, width=32), st.none())


@st.composite
def flows(draw) -> Flow:
    f = Flow(draw(names), draw(st.one_of(st.just(""), texts, texts.map(lambda t: t + "\nsecond line"))))
    n_inputs = draw(st.integers(0, 2))
    values: list[str] = []
    for i in range(n_inputs):
        default = draw(st.one_of(st.just(perflow.flow.MISSING), st.integers(0, 5)))
        values.append(str(f.input(f"in{i}", int, doc=draw(texts), default=default)))
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["const", "inc", "add", "split", "opt", "total"] if values else ["const"]))
        name = f"s{i}_{draw(names)}"
        if kind == "const":
            f.step(name, "t_const", value=draw(st.integers(-100, 100)), doc=draw(texts))
            values.append(name)
        elif kind == "inc":
            f.step(name, "t_inc", draw(st.sampled_from(values)), by=draw(st.integers(-(10**18) + 1, 10**18 - 1)))
            values.append(name)
        elif kind == "add":
            f.step(name, "t_add", draw(st.sampled_from(values)), draw(st.sampled_from(values)))
            values.append(name)
        elif kind == "split":
            f.step(name, "t_split", draw(st.sampled_from(values)), d=draw(st.integers(1, 9)))
            values += [f"{name}.quot", f"{name}.rem"]
        elif kind == "total":
            f.step(name, "t_total", draw(st.lists(st.sampled_from(values), min_size=1, max_size=3)))
            values.append(name)
        else:
            f.step(
                name,
                "t_opt",
                draw(st.sampled_from(values)),
                scale=draw(st.floats(allow_nan=False, allow_infinity=True)),
                names=tuple(draw(st.lists(texts, max_size=3))),
            )
            values.append(name)
    for j, src in enumerate(draw(st.lists(st.sampled_from(values), max_size=3))):
        f.output(f"o{j}", src, doc=draw(st.one_of(st.just(""), texts)))
    return f


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flows(), st.dictionaries(names, scalars, max_size=3))
def test_yaml_round_trip_property(f, extra):
    f.steps[next(iter(f.steps))].doc = "multi\nline doc\n"
    text = dump(f)
    g = loads(text, validate=False)
    assert g == f, text
    assert dump(g) == text
    assert g.load_problems == []
    # arbitrary YAML scalars survive as settings too (validation would reject them, reading does not)
    h = f.copy()
    h.steps[next(iter(h.steps))].settings.update(extra)
    assert loads(dump(h), validate=False) == h
