"""From a validated flow to a flat list of tasks.

Sub-flows are inlined: their steps become tasks named ``outer/inner``, so
one scheduler loop runs everything and independent steps of different
sub-flows overlap. Identical cacheable tasks (same pass, version, settings
and inputs) are merged, so each result is computed once per run.

A task's inputs are :data:`Source` tuples: ``("input", name)`` for a flow
input, ``("task", index, output)`` for another task's output and
``("const", value)`` for a default, and ``("list", sources)`` or
``("dict", ((key, source), ...))`` for an input fed by several references.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import FlowError
from .flow import MISSING, Flow, FlowInput, Ref
from .registry import PassSpec
from .types import coerce_value
from .validate import FlowCheck, validate

__all__ = ["Task", "Plan", "compile_flow", "select_outputs", "Source"]

Source = tuple  # ("input", name) | ("task", index, output) | ("const", value) | ("list", (src, ...)) | ("dict", ((k, src), ...))


def source_tasks(src: Source) -> set[int]:
    """Indices of the tasks a source reads."""
    if src[0] == "task":
        return {src[1]}
    if src[0] == "list":
        return set().union(*(source_tasks(s) for s in src[1]))
    if src[0] == "dict":
        return set().union(*(source_tasks(s) for _, s in src[1]))
    return set()


@dataclass
class Task:
    """One pass invocation of a run."""

    index: int
    key: str
    spec: PassSpec
    args: list[tuple[str, Source]]
    settings: dict[str, Any]
    outputs: tuple[str, ...]
    deps: set[int] = field(default_factory=set)
    same_as: int | None = None

    @property
    def pass_name(self) -> str:
        return self.spec.name


@dataclass
class Plan:
    """Tasks in dependency order, the flow inputs they read and the flow outputs."""

    flow: Flow
    tasks: list[Task]
    inputs: dict[str, FlowInput]
    outputs: dict[str, Source]
    #: tasks no selected output needs (see :func:`select_outputs`): not run
    skip: frozenset[int] = frozenset()


class _Builder:
    def __init__(self) -> None:
        self.tasks: list[Task] = []
        self.signatures: dict[tuple, int] = {}

    def source_sig(self, src: Source) -> tuple:
        if src[0] == "const":
            from .fingerprint import fingerprint

            return ("const", fingerprint(src[1], paths="name"))
        if src[0] == "list":
            return ("list", tuple(self.source_sig(s) for s in src[1]))
        if src[0] == "dict":
            return ("dict", tuple((k, self.source_sig(s)) for k, s in src[1]))
        return src

    def add(self, key: str, spec: PassSpec, args: list[tuple[str, Source]], settings: dict[str, Any]) -> int:
        t = Task(len(self.tasks), key, spec, args, settings, tuple(p.name for p in spec.outputs))
        t.deps = set().union(*(source_tasks(s) for _, s in args))
        self.tasks.append(t)
        if spec.cacheable:
            from .fingerprint import Unfingerprintable, fingerprint

            try:
                sig = (
                    spec.name,
                    spec.version,
                    id(spec.func),
                    tuple(sorted((k, fingerprint(v, paths="name")) for k, v in settings.items())),
                    tuple((n, self.source_sig(s)) for n, s in args),
                )
            except Unfingerprintable:
                return t.index
            if sig in self.signatures:
                t.same_as = self.signatures[sig]
            else:
                self.signatures[sig] = t.index
        return t.index

    def flow(self, an: FlowCheck, prefix: str, inputs: dict[str, Source]) -> dict[str, Source]:
        f = an.flow
        produced: dict[str, dict[str, Source]] = {}

        def resolve(text: Any) -> Source:
            if isinstance(text, list):
                return ("list", tuple(resolve(v) for v in text))
            if isinstance(text, dict):
                return ("dict", tuple((k, resolve(v)) for k, v in text.items()))
            r = Ref.parse(text)
            if r.is_input:
                return inputs[r.name]
            outs = produced[r.step]
            return outs[r.name] if r.name is not None else next(iter(outs.values()))

        for name in an.order:
            step, node = f.steps[name], an.nodes[name]
            key = f"{prefix}{name}"
            if node.flow is not None:
                sub_inputs = {}
                for p in node.inputs:
                    if p.name in step.inputs:
                        sub_inputs[p.name] = resolve(step.inputs[p.name])
                    else:
                        sub_inputs[p.name] = ("const", coerce_value(p.default, p.type))
                produced[name] = self.flow(node.sub, f"{key}/", sub_inputs)  # type: ignore[arg-type]
                continue
            spec = node.spec
            connected = [i for i, p in enumerate(spec.inputs) if p.name in step.inputs]
            last = max(connected, default=-1)
            args: list[tuple[str, Source]] = []
            for p in spec.inputs[: last + 1]:
                args.append((p.name, resolve(step.inputs[p.name]) if p.name in step.inputs else ("const", p.default)))
            given = an.settings.get(name, step.settings)  # its own settings, else the flow settings reaching it
            settings = {}
            for s in spec.settings:
                if s.name in given:
                    settings[s.name] = coerce_value(given[s.name], s.type)
                elif not s.required:
                    settings[s.name] = s.default
            idx = self.add(key, spec, args, settings)
            target = self.tasks[idx].same_as if self.tasks[idx].same_as is not None else idx
            produced[name] = {o: ("task", target, o) for o in self.tasks[idx].outputs}
        return {name: resolve(text) for name, text in an.outputs.items()}


def compile_flow(flow: Flow, *, allow_import: bool = False) -> Plan:
    """Validate ``flow`` and flatten it into a :class:`Plan`."""
    an = validate(flow, allow_import=allow_import)
    b = _Builder()
    outputs = b.flow(an, "", {name: ("input", name) for name in flow.inputs})
    if not b.tasks:
        raise FlowError(f"flow {flow.name!r} has no steps to run")
    return Plan(flow, b.tasks, dict(flow.inputs), outputs)


def select_outputs(plan: Plan, names: list[str]) -> Plan:
    """The plan computing only the flow outputs ``names`` (the tasks they need; the others are skipped)."""
    unknown = [n for n in names if n not in plan.outputs]
    if unknown:
        raise FlowError(f"flow {plan.flow.name!r} has no output {', '.join(map(repr, unknown))}")
    outputs = {n: plan.outputs[n] for n in plan.outputs if n in names}
    todo = set().union(*(source_tasks(s) for s in outputs.values())) if outputs else set()
    needed: set[int] = set()
    while todo:
        i = todo.pop()
        if i in needed:
            continue
        needed.add(i)
        t = plan.tasks[i]
        todo |= set(t.deps) | ({t.same_as} if t.same_as is not None else set())
    skip = frozenset(t.index for t in plan.tasks if t.index not in needed)
    return Plan(plan.flow, plan.tasks, plan.inputs, outputs, skip)


def output_types(plan: Plan) -> dict[str, Any]:
    """Declared type of each flow output (``Any`` when not known before running)."""
    out: dict[str, Any] = {}
    for name, src in plan.outputs.items():
        tp: Any = Any
        if src[0] == "task":
            port = next((p for p in plan.tasks[src[1]].spec.outputs if p.name == src[2]), None)
            tp = port.type if port is not None else Any
        out[name] = tp
    return out


def missing_inputs(plan: Plan, given: dict[str, Any]) -> list[str]:
    """Names of required flow inputs that were not given."""
    return [n for n, i in plan.inputs.items() if i.default is MISSING and n not in given]
