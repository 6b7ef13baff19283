"""Flows in YAML: a safe loader that keeps line and column, the versioned schema, and the dumper.

Schema version 1 (see docs/flows.md for the full description)::

    perflow: 1
    name: hotspots
    description: The regions that take the most time.
    inputs:
      pag: {type: PAG, doc: The run to analyse.}
    settings:                    # flow settings: for every step whose pass has them
      late_receiver: blocking
    steps:
      hot:
        pass: hotspot            # or  flow: NAME-OR-PATH  (or an inline flow mapping)
        inputs: {pag: input:pag}
        settings: {metric: time_exc, k: 10}
    outputs:
      hot: hot

Only a :class:`yaml.SafeLoader` subclass reads flow files: tags that build
Python objects are refused. Reading collects every schema problem with its
YAML path, line and column instead of stopping at the first.

A flow is bounded: at most :data:`MAX_FLOW_BYTES` of text, values nested at
most :data:`MAX_FLOW_DEPTH` deep, and at most :data:`MAX_FLOW_NODES` values
once aliases are expanded (a few hundred bytes of nested aliases, a "billion
laughs", would otherwise expand to billions of values); beyond any of them,
reading stops at once with one problem.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import yaml

from ..errors import FlowError
from .flow import Flow
from .parts import INPUT_PREFIX, MISSING, NAME_RE, FlowInput, FlowOutput, Step, canon
from .problems import Problem, did_you_mean, locate
from .types import TYPE_NAMES, resolve_type, type_label

__all__ = [
    "SCHEMA_VERSION",
    "FlowLoader",
    "parse",
    "loads",
    "flow_from_data",
    "flow_to_dict",
    "dump",
    "MAX_FLOW_BYTES",
    "MAX_FLOW_NODES",
    "MAX_FLOW_DEPTH",
]

SCHEMA_VERSION = 1
TOP_KEYS = ("perflow", "name", "description", "inputs", "settings", "steps", "outputs")
STEP_KEYS = ("pass", "flow", "inputs", "settings", "doc")
INPUT_KEYS = ("type", "doc", "default")
OUTPUT_KEYS = ("from", "doc")
Locations = dict[str, tuple[int, int]]


_PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")

#: The largest flow text read (characters); real flows are a few kilobytes.
MAX_FLOW_BYTES = 2 << 20
#: The most values (mappings, lists, scalars) a flow may hold once its aliases are expanded.
MAX_FLOW_NODES = 100_000
#: The deepest nesting of mappings and lists in a flow.
MAX_FLOW_DEPTH = 64
#: Longest integer a flow may hold (digits): every count, size and setting perflow takes fits (Python refuses >4,300).
MAX_INT_DIGITS = 18


class _TooLarge(Exception):
    def __init__(self, problem: Problem) -> None:
        self.problem = problem


class _Invalid:
    """Stands for a YAML value that could not be read (already reported)."""

    def __repr__(self) -> str:
        return "<unreadable>"


INVALID = _Invalid()


class FlowLoader(yaml.SafeLoader):
    """A safe YAML loader whose :meth:`load_with_locations` records the position of every node."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        """Compose one node, refusing nesting deeper than :data:`MAX_FLOW_DEPTH` (before recursion runs out)."""
        self._depth += 1
        try:
            if self._depth > MAX_FLOW_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"values are nested more than {MAX_FLOW_DEPTH} deep", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def load_with_locations(self) -> tuple[Any, Locations, list[Problem]]:
        """Load the single document; return (data, YAML path -> (line, column), problems)."""
        locs: Locations = {}
        problems: list[Problem] = []
        node = self.get_single_node()
        if node is None:
            return None, locs, problems
        locs[""] = (node.start_mark.line + 1, node.start_mark.column + 1)
        self._budget = MAX_FLOW_NODES
        try:
            return self._convert(node, "", locs, problems, set()), locs, problems
        except _TooLarge as exc:
            return None, {}, [exc.problem]

    def _convert(self, node: yaml.Node, path: str, locs: Locations, problems: list[Problem], active: set[int]) -> Any:
        self._budget -= 1
        if self._budget < 0:
            m = node.start_mark
            raise _TooLarge(
                Problem(
                    path,
                    f"the flow holds more than {MAX_FLOW_NODES:,} values once its YAML aliases are expanded "
                    "(nested aliases multiply: an alias bomb?); refusing to read further",
                    m.line + 1,
                    m.column + 1,
                )
            )
        if id(node) in active:
            m = node.start_mark
            problems.append(Problem(path, "recursive YAML alias", m.line + 1, m.column + 1))
            return INVALID
        if isinstance(node, yaml.CollectionNode) and node.tag not in _PLAIN_TAGS:
            m = node.start_mark
            problems.append(
                Problem(path, f"the YAML tag {node.tag!r} is not allowed in a flow", m.line + 1, m.column + 1)
            )
            return INVALID
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            active.add(id(node))
            out: dict[Any, Any] = {}
            for knode, vnode in node.value:
                key = self._convert(knode, path, locs, problems, active)
                if isinstance(key, list | dict) or key is None:
                    key = str(key)
                kpath = f"{path}.{key}" if path else str(key)
                pos = (knode.start_mark.line + 1, knode.start_mark.column + 1)
                if key in out:
                    first = locs.get(kpath, ("?", "?"))
                    problems.append(Problem(kpath, f"duplicate key {key!r} (first given at line {first[0]})", *pos))
                    continue
                locs[kpath] = pos
                out[key] = self._convert(vnode, kpath, locs, problems, active)
            active.discard(id(node))
            return out
        if isinstance(node, yaml.SequenceNode):
            active.add(id(node))
            items = []
            for i, item in enumerate(node.value):
                ipath = f"{path}[{i}]"
                locs[ipath] = (item.start_mark.line + 1, item.start_mark.column + 1)
                items.append(self._convert(item, ipath, locs, problems, active))
            active.discard(id(node))
            return items
        if node.tag == "tag:yaml.org,2002:int" and sum(c.isdigit() for c in str(node.value)) > MAX_INT_DIGITS:
            m = node.start_mark
            n = sum(c.isdigit() for c in str(node.value))
            problems.append(
                Problem(
                    path,
                    f"an integer of {n} digits: flows hold integers of at most {MAX_INT_DIGITS} digits",
                    m.line + 1,
                    m.column + 1,
                )
            )
            return INVALID
        try:
            return self.construct_object(node, deep=True)
        except ValueError as exc:  # e.g. a number Python cannot convert
            m = node.start_mark
            problems.append(Problem(path, f"cannot read this value: {exc}", m.line + 1, m.column + 1))
            return INVALID
        except yaml.YAMLError as exc:
            m = node.start_mark
            problems.append(
                Problem(path, f"cannot read this value: {getattr(exc, 'problem', exc)}", m.line + 1, m.column + 1)
            )
            return INVALID


def parse(text: str) -> tuple[Any, Locations, list[Problem]]:
    """Parse YAML text safely; syntax errors become problems with their line and column."""
    if len(text) > MAX_FLOW_BYTES:
        return (
            None,
            {},
            [Problem("", f"the flow is {len(text):,} characters long, more than the {MAX_FLOW_BYTES:,} allowed")],
        )
    loader = FlowLoader(text)
    try:
        return loader.load_with_locations()
    except yaml.MarkedYAMLError as exc:
        m = exc.problem_mark or exc.context_mark
        msg = " ".join(str(x) for x in (exc.context, exc.problem) if x)
        line, col = (m.line + 1, m.column + 1) if m is not None else (None, None)
        return None, {}, [Problem("", f"invalid YAML: {msg}", line, col)]
    except yaml.YAMLError as exc:
        return None, {}, [Problem("", f"invalid YAML: {exc}")]
    finally:
        loader.dispose()


class _Reader:
    """Turns parsed data into a Flow, collecting schema problems."""

    def __init__(self, locations: Locations) -> None:
        self.locs = locations
        self.problems: list[Problem] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message, *locate(self.locs, path)))

    def mapping(self, value: Any, path: str, what: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(path, f"{what} must be a mapping, not {type(value).__name__}")
            return {}
        return value

    def keys(self, d: Mapping[str, Any], allowed: tuple[str, ...], path: str, what: str) -> None:
        for k in d:
            if k not in allowed:
                self.problem(
                    f"{path}.{k}" if path else str(k),
                    f"unknown key {k!r} in {what}{did_you_mean(k, allowed)} (allowed: {', '.join(allowed)})",
                )

    def text(self, value: Any, path: str, what: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            self.problem(path, f"{what} must be a string, not {type(value).__name__}")
            return str(value)
        return value

    def name(self, name: Any, path: str, what: str) -> str:
        if not isinstance(name, str) or not NAME_RE.match(name):
            self.problem(
                path, f"invalid {what} name {name!r}: use letters, digits, '_' and '-', starting with a letter"
            )
        return str(name)

    def flow(self, data: Any, prefix: str = "", *, top: bool = True) -> Flow:
        p = lambda k: f"{prefix}.{k}" if prefix else k  # noqa: E731
        f = Flow()
        if not isinstance(data, dict):
            self.problem(
                prefix,
                "a flow must be a mapping with the keys "
                + ", ".join(TOP_KEYS)
                + (" (the file is empty)" if data is None else ""),
            )
            return f
        self.keys(data, TOP_KEYS, prefix, "a flow")
        if top or "perflow" in data:
            v = data.get("perflow", MISSING)
            if v is MISSING:
                self.problem(prefix, f"missing 'perflow: {SCHEMA_VERSION}' (the schema version) at the top of the flow")
            elif not isinstance(v, int) or isinstance(v, bool) or v < 1:
                self.problem(p("perflow"), f"the schema version must be a positive integer, not {v!r}")
            elif v > SCHEMA_VERSION:
                self.problem(p("perflow"), f"schema version {v} is newer than this perflow reads ({SCHEMA_VERSION})")
        f.name = self.text(data.get("name", "flow"), p("name"), "name")
        f.description = self.text(data.get("description"), p("description"), "description")
        self.inputs(f, data.get("inputs"), p("inputs"))
        f.settings = {str(k): v for k, v in self.mapping(data.get("settings"), p("settings"), "'settings'").items()}
        steps = data.get("steps", MISSING)
        if steps is MISSING:
            self.problem(prefix, "missing 'steps' (a mapping of step name to step)")
        for name, st in self.mapping(None if steps is MISSING else steps, p("steps"), "'steps'").items():
            self.step(f, name, st, f"{p('steps')}.{name}")
        self.outputs(f, data.get("outputs"), p("outputs"))
        return f

    def inputs(self, f: Flow, value: Any, path: str) -> None:
        for name, spec in self.mapping(value, path, "'inputs'").items():
            ipath = f"{path}.{name}"
            self.name(name, ipath, "input")
            if spec is None or isinstance(spec, str):
                spec = {"type": spec or "any"}
            spec = self.mapping(spec, ipath, f"input {name!r}")
            self.keys(spec, INPUT_KEYS, ipath, f"input {name!r}")
            f.inputs[str(name)] = FlowInput(
                str(name),
                self.type(spec.get("type", "any"), f"{ipath}.type"),
                self.text(spec.get("doc"), f"{ipath}.doc", "doc"),
                spec.get("default", MISSING),
            )

    def type(self, value: Any, path: str) -> Any:
        if not isinstance(value, str):
            self.problem(path, f"a type must be a name such as PAG or int, not {value!r}")
            return Any
        tp = resolve_type(value)
        if isinstance(tp, str) and "." not in value and ":" not in value:
            self.problem(
                path,
                f"unknown type {value!r}{did_you_mean(value, TYPE_NAMES)} (types: {', '.join(TYPE_NAMES)}, "
                "or combinations such as 'PAG | None' and 'list[str]')",
            )
        return tp

    def step(self, f: Flow, name: Any, st: Any, path: str) -> None:
        self.name(name, path, "step")
        st = self.mapping(st, path, f"step {name!r}")
        self.keys(st, STEP_KEYS, path, f"step {name!r}")
        target: Any = None  # None: broken, already reported
        if "pass" in st and "flow" in st:
            self.problem(path, f"step {name!r} gives both 'pass' and 'flow'; a step runs one of them")
        elif "flow" in st:
            fv = st["flow"]
            if isinstance(fv, dict):
                sub = _Reader({k[len(path) + 6 :]: v for k, v in self.locs.items() if k.startswith(f"{path}.flow.")})
                target = sub.flow(fv, top=False)
                target.locations = sub.locs
                target.load_problems = sub.problems
            elif isinstance(fv, str) and fv:
                target = f"flow:{fv}"
            else:
                self.problem(f"{path}.flow", "'flow' must name a flow (shipped name or path) or hold one inline")
        elif "pass" in st:
            target = st["pass"]
            if not isinstance(target, str) or not target:
                self.problem(f"{path}.pass", f"'pass' must be a pass name, not {target!r}")
                target = None
        else:
            self.problem(path, f"step {name!r} needs 'pass: NAME' (or 'flow: NAME')")
        ins = {}
        for port, ref in self.mapping(st.get("inputs"), f"{path}.inputs", "'inputs'").items():
            ins[str(port)] = ref  # validation checks the references
        sets = {str(k): v for k, v in self.mapping(st.get("settings"), f"{path}.settings", "'settings'").items()}
        f.steps[str(name)] = Step(str(name), target, ins, sets, self.text(st.get("doc"), f"{path}.doc", "doc"))

    def outputs(self, f: Flow, value: Any, path: str) -> None:
        if isinstance(value, list):
            for i, item in enumerate(value):
                if not isinstance(item, str) or "." in item or item.startswith(INPUT_PREFIX):
                    self.problem(
                        f"{path}[{i}]", f"a list of outputs names steps; use a mapping NAME: REFERENCE for {item!r}"
                    )
                    continue
                f.outputs[item] = FlowOutput(item, item)
            return
        for name, spec in self.mapping(value, path, "'outputs'").items():
            opath = f"{path}.{name}"
            self.name(name, opath, "output")
            doc = ""
            if isinstance(spec, dict):
                self.keys(spec, OUTPUT_KEYS, opath, f"output {name!r}")
                doc = self.text(spec.get("doc"), f"{opath}.doc", "doc")
                spec = spec.get("from", str(name))
            f.outputs[str(name)] = FlowOutput(str(name), spec, doc)  # validation checks the reference


def flow_from_data(
    data: Any, *, locations: Locations | None = None, source: str | None = None, problems: list[Problem] | None = None
) -> Flow:
    """Build a flow from parsed YAML data; schema problems go to ``flow.load_problems``."""
    r = _Reader(locations or {})
    f = r.flow(data)
    if source and not (isinstance(data, dict) and "name" in data):
        f.name = os.path.splitext(os.path.basename(source))[0]
    f.source = source
    f.locations = r.locs
    f.load_problems = list(problems or []) + r.problems
    return f


def loads(text: str, *, source: str | None = None, allow_import: bool = False, validate: bool = True) -> Flow:
    """Read a flow from YAML text; with ``validate`` raise ValidationError listing every problem."""
    data, locs, problems = parse(text)
    if data is None and problems:  # unreadable YAML: nothing else can be checked
        f = Flow()
        f.source, f.load_problems = source, problems
    else:
        f = flow_from_data(data, locations=locs, source=source, problems=problems)
    if validate:
        f.validate(allow_import=allow_import)
    return f


# ---------------------------------------------------------------------- writing
def _setting_value(value: Any, where: str, strict: bool) -> Any:
    v = canon(value)
    if strict:
        try:
            yaml.safe_dump(v)
        except yaml.YAMLError:
            raise FlowError(f"{where} holds {type(value).__name__} {value!r}, which YAML cannot express") from None
    return v


def flow_to_dict(flow: Flow, *, strict: bool = True, top: bool = True) -> dict[str, Any]:
    """The flow as plain data in the YAML schema (``strict`` checks every value is YAML-safe)."""
    d: dict[str, Any] = {"perflow": SCHEMA_VERSION} if top else {}
    d["name"] = flow.name
    if flow.description:
        d["description"] = flow.description
    if flow.inputs:
        ins: dict[str, Any] = {}
        for i in flow.inputs.values():
            e: dict[str, Any] = {"type": type_label(i.type)}
            if i.doc:
                e["doc"] = i.doc
            if i.default is not MISSING:
                e["default"] = _setting_value(i.default, f"inputs.{i.name}.default", strict)
            ins[i.name] = e
        d["inputs"] = ins
    if flow.settings:
        d["settings"] = {k: _setting_value(v, f"settings.{k}", strict) for k, v in flow.settings.items()}
    steps: dict[str, Any] = {}
    for s in flow.steps.values():
        e = {}
        t = s.target
        if isinstance(t, Flow):
            e["flow"] = t.origin if t.origin else flow_to_dict(t, strict=strict, top=False)
        elif isinstance(t, str) and t.startswith("flow:"):
            e["flow"] = t[5:]
        else:
            e["pass"] = s.target_name
        if s.inputs:
            e["inputs"] = dict(s.inputs)
        if s.settings:
            e["settings"] = {
                k: _setting_value(v, f"steps.{s.name}.settings.{k}", strict) for k, v in s.settings.items()
            }
        if s.doc:
            e["doc"] = s.doc
        steps[s.name] = e
    d["steps"] = steps
    if flow.outputs:
        d["outputs"] = {
            o.name: ({"from": o.source, "doc": o.doc} if o.doc else o.source) for o in flow.outputs.values()
        }
    return d


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)  # indent list items under their key


def _str_repr(dumper: yaml.SafeDumper, s: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)


_Dumper.add_representer(str, _str_repr)


def dump(flow: Flow) -> str:
    """The flow as YAML text in schema version 1."""
    return yaml.dump(flow_to_dict(flow), Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)


def source_dir(flow: Flow) -> str:
    """The directory relative paths in ``flow:`` keys are read from (the flow file's, else the current one)."""
    return os.path.dirname(os.path.abspath(flow.source)) if flow.source else os.getcwd()
