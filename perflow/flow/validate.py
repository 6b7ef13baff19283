"""Checking a flow before anything runs; every problem is reported together.

:func:`analyse` resolves each step's target (a registered pass, a dotted
path, a function or a sub-flow) to a :class:`Node` (its inputs, outputs and
settings), then checks names, references, input and setting completeness,
setting types and allowed values (:func:`perflow.flow.types.check_value`;
a ``Literal`` lists the allowed values), the checks of the settings classes
a pass takes (:func:`perflow.pag.settings.settings_keywords`), port types
(:func:`perflow.flow.types.is_compatible`), cycles and unused inputs.

Flow settings (``Flow.settings``, ``settings:`` at the top of a YAML flow)
reach every step of the flow and of its sub-flows whose pass has a setting of
that name; the step's own setting, or a nearer flow's flow setting, wins.
Each flow setting must be a setting of some step, and its value must fit
every step it reaches; the problem names the setting, the steps and the
allowed values. The scheduler plans from the same analysis
(:attr:`FlowCheck.settings`: each pass step's settings as given).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ValidationError
from . import loader, yaml_io  # the modules: they, validate and flow import each other (flow.py's last lines)
from .checks import FlowChecks, allowed_values, expects, quote
from .flow import NAME_RE, Flow, Ref, Step
from .parts import iter_refs
from .problems import Problem, did_you_mean, locate
from .registry import get_pass
from .spec import Port, Setting
from .types import check_value, coerce_value, is_compatible, type_label

__all__ = ["Node", "FlowCheck", "analyse", "find_problems", "validate", "Problem"]


@dataclass(frozen=True)
class Node:
    """What a step runs, seen from the flow: a pass or a sub-flow, with its ports and settings."""

    label: str
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    settings: tuple[Setting, ...] = ()
    spec: Any = None  # PassSpec
    flow: Flow | None = None
    sub: FlowCheck | None = None

    @property
    def what(self) -> str:
        """``pass 'name'`` or ``flow 'name'`` for messages."""
        return f"flow {self.label[5:]!r}" if self.flow is not None else f"pass {self.label!r}"

    def port(self, name: str) -> Port | None:
        return next((p for p in self.inputs if p.name == name), None)


@dataclass
class FlowCheck:
    """The result of :func:`analyse`: resolved steps, the flow's outputs, its problems."""

    flow: Flow
    nodes: dict[str, Node] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    output_types: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    #: per pass step, the settings given to it: its own, else the flow settings reaching it (defaults left out)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: flow settings inherited from enclosing flows that do not fit a step here: name -> [(step, pass, expectation)]
    inherited_problems: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    #: every setting name of the pass steps here and in sub-flows; None when some step could not be resolved
    setting_names: set[str] | None = None


class _Checker(FlowChecks):
    def __init__(
        self, flow: Flow, allow_import: bool, stack: tuple[int, ...], inherited: Mapping[str, Any] | None = None
    ) -> None:
        self.flow = flow
        self.allow_import = allow_import
        self.stack = stack + (id(flow),)
        self.a = FlowCheck(flow)
        #: the flow settings in force here: the enclosing flows', then this flow's own
        self.scope: dict[str, Any] = {**(inherited or {}), **flow.settings}
        self.bad_flow_settings: dict[str, list[tuple[str, str, str]]] = {}

    def problem(self, path: str, message: str) -> None:
        given_later = path.startswith("settings.") and path not in self.flow.locations  # flow.set, --set
        where = (None, None) if given_later else locate(self.flow.locations, path)
        self.a.problems.append(Problem(path, message, *where))

    # ---------------------------------------------------------------- resolution
    def node(self, step: Step) -> Node | None:
        path = f"steps.{step.name}"
        t = step.target
        if t is None:  # unreadable in the file; already reported
            return None
        if isinstance(t, str) and t.startswith("flow:"):
            try:
                t = loader.resolve_flow_ref(t[5:], yaml_io.source_dir(self.flow), allow_import=self.allow_import)
            except Exception as exc:  # missing file, refused import, unreadable flow
                self.problem(f"{path}.flow", str(exc))
                return None
        if isinstance(t, Flow):
            return self.subflow(step, t, path)
        try:
            spec = get_pass(t, allow_import=self.allow_import)
        except Exception as exc:
            self.problem(f"{path}.pass", str(exc))
            return None
        return Node(spec.name, spec.inputs, spec.outputs, spec.settings, spec=spec)

    def subflow(self, step: Step, sub: Flow, path: str) -> Node | None:
        if id(sub) in self.stack:
            self.problem(f"{path}.flow", f"flow {sub.name!r} contains itself")
            return None
        an = _Checker(sub, self.allow_import, self.stack, self.scope).run()
        for name, recs in an.inherited_problems.items():
            for step_name, what, exp in recs:
                self.flow_setting_problem(name, (f"{step.name}/{step_name}", what, exp))
        for p in an.problems:
            if sub.source and sub.source != self.flow.source:
                self.problem(f"{path}.flow", f"in flow {sub.origin or sub.name!r} ({sub.source}): {p}")
            else:
                inner = f"{path}.flow.{p.path}" if p.path else f"{path}.flow"
                if p.line is not None:
                    self.a.problems.append(Problem(inner, p.message, p.line, p.column))
                else:
                    self.problem(inner, p.message)
        ins = tuple(
            Port(i.name, i.type, required=i.required, default=None if i.required else i.default, doc=i.doc)
            for i in sub.inputs.values()
        )
        outs = tuple(Port(n, an.output_types.get(n, Any)) for n in an.outputs)
        return Node(f"flow:{sub.origin or sub.name}", ins, outs, (), flow=sub, sub=an)

    def source_type(self, ref: Ref) -> Any:
        if ref.is_input:
            return self.flow.inputs[ref.name].type if ref.name in self.flow.inputs else Any
        node = self.a.nodes.get(ref.step)
        if node is None:
            return Any
        port = next((p for p in node.outputs if p.name == ref.name), None) if ref.name else node.outputs[0]
        return port.type if port is not None else Any

    def ref(self, text: str, path: str, what: str) -> Ref | None:
        """Parse and check a reference; record problems and return it if usable."""
        try:
            r = Ref.parse(text)
        except ValueError as exc:
            self.problem(path, str(exc))
            return None
        f = self.flow
        if r.is_input:
            if r.name not in f.inputs:
                self.problem(
                    path, f"undefined flow input {r.name!r}{did_you_mean(r.name, f.inputs)} (declare it under 'inputs')"
                )
                return None
            return r
        if r.step not in f.steps:
            self.problem(path, f"{what} refers to unknown step {r.step!r}{did_you_mean(r.step, f.steps)}")
            return None
        node = self.a.nodes.get(r.step)
        if node is None:  # that step is broken; already reported
            return r
        outs = [p.name for p in node.outputs]
        if r.name is None and len(outs) != 1:
            self.problem(
                path, f"step {r.step!r} has several outputs ({', '.join(outs)}); name one, e.g. '{r.step}.{outs[0]}'"
            )
            return None
        if r.name is not None and r.name not in outs:
            self.problem(
                path,
                f"step {r.step!r} ({node.what}) has no output {r.name!r}{did_you_mean(r.name, outs)} "
                f"(outputs: {', '.join(outs)})",
            )
            return None
        return r

    # ---------------------------------------------------------------- checks
    def names(self) -> None:
        f = self.flow
        for kind, names in (("input", f.inputs), ("step", f.steps), ("output", f.outputs)):
            for n in names:
                if not isinstance(n, str) or not NAME_RE.match(n):
                    self.problem(
                        f"{kind}s.{n}",
                        f"invalid {kind} name {n!r}: use letters, digits, '_' and '-', starting with a letter",
                    )
        if not f.steps:
            self.problem("steps", "the flow has no steps")

    def step(self, step: Step, node: Node) -> None:
        path = f"steps.{step.name}"
        ports = {p.name: p for p in node.inputs}
        for port_name, value in step.inputs.items():
            ipath = f"{path}.inputs.{port_name}"
            if port_name not in ports:
                self.problem(
                    ipath,
                    f"{node.what} has no input {port_name!r}{did_you_mean(port_name, ports)} "
                    f"(inputs: {', '.join(ports) or 'none'})",
                )
                continue
            expected = ports[port_name].type
            if isinstance(value, list | dict):  # several references, given to the pass as a list or dict
                for sub, text in iter_refs(value):
                    self.ref(text, f"{ipath}{sub}", f"input {port_name + sub!r}")
                if not is_compatible(type(value), expected):
                    self.problem(
                        ipath,
                        f"type mismatch: input {port_name!r} of {node.what} expects {type_label(expected)}, "
                        f"but a {type(value).__name__} of references gives a {type(value).__name__}",
                    )
                continue
            r = self.ref(value, ipath, f"input {port_name!r}")
            if r is None or (r.step is not None and r.step not in self.a.nodes):
                continue
            produced = self.source_type(r)
            if not is_compatible(produced, expected):
                self.problem(
                    ipath,
                    f"type mismatch: input {port_name!r} of {node.what} expects {type_label(expected)}, "
                    f"but {str(r)!r} gives {type_label(produced)}",
                )
        for p in node.inputs:
            if p.required and p.name not in step.inputs:
                self.problem(f"{path}.inputs", f"missing input {p.name!r} ({type_label(p.type)}) of {node.what}")
        if node.flow is not None:
            if step.settings:
                self.problem(
                    f"{path}.settings", "a step that runs a flow takes no settings (set the sub-flow's steps instead)"
                )
            return
        sets = {s.name: s for s in node.settings}
        for k, v in step.settings.items():
            spath = f"{path}.settings.{k}"
            if k not in sets:
                self.problem(
                    spath,
                    f"{node.what} has no setting {k!r}{did_you_mean(k, sets)} (settings: {', '.join(sets) or 'none'})",
                )
            elif v is not yaml_io.INVALID and not check_value(coerce_value(v, sets[k].type), sets[k].type):
                got = quote(v) if allowed_values(sets[k].type) is not None else f"{type(v).__name__} {quote(v)}"
                self.problem(spath, f"setting {k!r} of {node.what} {expects(sets[k].type)}, got {got}")
        given: dict[str, Any] = {}
        from_flow: set[str] = set()
        for s in node.settings:
            if s.name in step.settings:
                v = step.settings[s.name]
                if v is not yaml_io.INVALID and check_value(coerce_value(v, s.type), s.type):
                    given[s.name] = v
            elif s.name in self.scope:
                v = self.scope[s.name]
                if v is yaml_io.INVALID:
                    continue
                if not check_value(coerce_value(v, s.type), s.type):
                    self.flow_setting_problem(s.name, (step.name, node.what, expects(s.type)))
                    continue
                given[s.name] = v
                from_flow.add(s.name)
            elif s.required:
                self.problem(f"{path}.settings", f"missing setting {s.name!r} ({type_label(s.type)}) of {node.what}")
        self.a.settings[step.name] = given
        self.settings_checks(step, node, given, from_flow)

    def run(self) -> FlowCheck:
        f = self.flow
        self.a.problems.extend(f.load_problems)
        if any(p.message.startswith("invalid YAML") for p in f.load_problems):
            return self.a
        self.names()
        for s in f.steps.values():
            node = self.node(s)
            if node is not None:
                self.a.nodes[s.name] = node
        for s in f.steps.values():
            if s.name in self.a.nodes:
                self.step(s, self.a.nodes[s.name])
            else:  # still check its references
                for port, value in s.inputs.items():
                    for sub, text in iter_refs(value):
                        self.ref(text, f"steps.{s.name}.inputs.{port}{sub}", f"input {port + sub!r}")
        self.collect_setting_names()
        self.flow_settings()
        self.inputs()
        self.outputs()
        self.cycles()
        seen: set[Problem] = set()
        unique = [p for p in self.a.problems if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]
        self.a.problems = sorted(unique, key=self.rank)
        return self.a

    def rank(self, p: Problem) -> tuple[int, int]:
        """Sort key: problems in the order of the flow's sections and steps."""
        head, _, rest = p.path.partition(".")
        head = head.split("[")[0]
        if head == "steps":
            step = rest.split(".")[0]
            return (2, list(self.flow.steps).index(step) if step in self.flow.steps else -1)
        return ({"inputs": 1, "settings": 1, "outputs": 3}.get(head, 0), 0)


def analyse(flow: Flow, *, allow_import: bool = False, _stack: tuple[int, ...] = ()) -> FlowCheck:
    """Resolve and check ``flow``; the problems are in ``.problems`` (empty when valid)."""
    return _Checker(flow, allow_import, _stack).run()


def find_problems(flow: Flow, *, allow_import: bool = False) -> list[Problem]:
    """Every problem of ``flow``."""
    return analyse(flow, allow_import=allow_import).problems


def validate(flow: Flow, *, allow_import: bool = False) -> FlowCheck:
    """Check ``flow``; raise :class:`~perflow.errors.ValidationError` listing every problem."""
    a = analyse(flow, allow_import=allow_import)
    if a.problems:
        err = ValidationError([str(p) for p in a.problems], flow.source)
        err.details = a.problems  # type: ignore[attr-defined]
        raise err
    return a
