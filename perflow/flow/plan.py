"""From a validated flow to a flat list of tasks.

Sub-flows are inlined: their steps become tasks named ``outer/inner``, so
one scheduler loop runs everything and independent steps of different
sub-flows overlap. Identical cacheable tasks (same pass, version, settings
and inputs) are merged, so each result is computed once per run.

Where a task's input comes from is a :data:`Source`, one small class per
kind: :class:`FromInput` (a flow input), :class:`FromTask` (another task's
output), :class:`Const` (a default), and :class:`ListOf` / :class:`DictOf`
(an input fed by several references). Each answers the questions the planner
and the scheduler ask (which tasks it reads, its value in a run, its
signature for merging identical tasks, its part of a cache key) itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import FlowError
from .fingerprint import Unfingerprintable, digest_of, fingerprint
from .flow import MISSING, Flow, FlowInput, Ref
from .spec import PassSpec
from .types import coerce_value
from .validate import FlowCheck, validate

__all__ = [
    "Task",
    "Plan",
    "compile_flow",
    "select_outputs",
    "Source",
    "FromInput",
    "FromTask",
    "Const",
    "ListOf",
    "DictOf",
    "Values",
]


class Values(Protocol):
    """What a source reads its value from (:meth:`get`): the flow inputs and the outputs of finished tasks."""

    values: Mapping[str, Any]
    data: Mapping[int, Mapping[str, Any]]


#: ``part(source)``: a cache-key part of a leaf source (a flow input or a constant), or None (not cacheable)
LeafKey = Callable[["FromInput | Const"], "str | None"]


@dataclass(frozen=True)
class FromInput:
    """A flow input, by name."""

    name: str

    def tasks(self) -> set[int]:
        return set()

    def get(self, run: Values) -> Any:
        return run.values[self.name]

    def signature(self) -> Any:
        return self

    def key(self, task_key: Callable[[int], str | None], leaf: LeafKey) -> str | None:
        return leaf(self)


@dataclass(frozen=True)
class FromTask:
    """Output ``output`` of task ``task``."""

    task: int
    output: str

    def tasks(self) -> set[int]:
        return {self.task}

    def get(self, run: Values) -> Any:
        return run.data[self.task][self.output]

    def signature(self) -> Any:
        return self

    def key(self, task_key: Callable[[int], str | None], leaf: LeafKey) -> str | None:
        k = task_key(self.task)
        return None if k is None else f"task:{k}:{self.output}"


@dataclass(frozen=True, eq=False)
class Const:
    """A value fixed when the flow was compiled (a port's default)."""

    value: Any

    def tasks(self) -> set[int]:
        return set()

    def get(self, run: Values) -> Any:
        return self.value

    def signature(self) -> Any:
        return ("const", fingerprint(self.value, paths="name"))

    def key(self, task_key: Callable[[int], str | None], leaf: LeafKey) -> str | None:
        return leaf(self)


@dataclass(frozen=True)
class ListOf:
    """A list input: one value per source."""

    items: tuple[Source, ...]

    def tasks(self) -> set[int]:
        return set().union(*(s.tasks() for s in self.items))

    def get(self, run: Values) -> Any:
        return [s.get(run) for s in self.items]

    def signature(self) -> Any:
        return ("list", tuple(s.signature() for s in self.items))

    def key(self, task_key: Callable[[int], str | None], leaf: LeafKey) -> str | None:
        parts = [(str(k), s.key(task_key, leaf)) for k, s in enumerate(self.items)]
        return None if any(p is None for _, p in parts) else digest_of("list", *(f"{k}={p}" for k, p in parts))


@dataclass(frozen=True)
class DictOf:
    """A dict input: one value per key."""

    items: tuple[tuple[str, Source], ...]

    def tasks(self) -> set[int]:
        return set().union(*(s.tasks() for _, s in self.items))

    def get(self, run: Values) -> Any:
        return {k: s.get(run) for k, s in self.items}

    def signature(self) -> Any:
        return ("dict", tuple((k, s.signature()) for k, s in self.items))

    def key(self, task_key: Callable[[int], str | None], leaf: LeafKey) -> str | None:
        parts = [(str(k), s.key(task_key, leaf)) for k, s in self.items]
        return None if any(p is None for _, p in parts) else digest_of("dict", *(f"{k}={p}" for k, p in parts))


Source = FromInput | FromTask | Const | ListOf | DictOf


def source_tasks(src: Source) -> set[int]:
    """Indices of the tasks a source reads."""
    return src.tasks()


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

    def add(self, key: str, spec: PassSpec, args: list[tuple[str, Source]], settings: dict[str, Any]) -> int:
        t = Task(len(self.tasks), key, spec, args, settings, tuple(p.name for p in spec.outputs))
        t.deps = set().union(*(s.tasks() for _, s in args))
        self.tasks.append(t)
        if spec.cacheable:
            try:
                sig = (
                    spec.name,
                    spec.version,
                    id(spec.func),
                    tuple(sorted((k, fingerprint(v, paths="name")) for k, v in settings.items())),
                    tuple((n, s.signature()) for n, s in args),
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
                return ListOf(tuple(resolve(v) for v in text))
            if isinstance(text, dict):
                return DictOf(tuple((k, resolve(v)) for k, v in text.items()))
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
                        sub_inputs[p.name] = Const(coerce_value(p.default, p.type))
                produced[name] = self.flow(node.sub, f"{key}/", sub_inputs)  # type: ignore[arg-type]
                continue
            spec = node.spec
            connected = [i for i, p in enumerate(spec.inputs) if p.name in step.inputs]
            last = max(connected, default=-1)
            args: list[tuple[str, Source]] = []
            for p in spec.inputs[: last + 1]:
                args.append((p.name, resolve(step.inputs[p.name]) if p.name in step.inputs else Const(p.default)))
            given = an.settings.get(name, step.settings)  # its own settings, else the flow settings reaching it
            settings = {}
            for s in spec.settings:
                if s.name in given:
                    settings[s.name] = coerce_value(given[s.name], s.type)
                elif not s.required:
                    settings[s.name] = s.default
            idx = self.add(key, spec, args, settings)
            target = self.tasks[idx].same_as if self.tasks[idx].same_as is not None else idx
            produced[name] = {o: FromTask(target, o) for o in self.tasks[idx].outputs}
        return {name: resolve(text) for name, text in an.outputs.items()}


def compile_flow(flow: Flow, *, allow_import: bool = False) -> Plan:
    """Validate ``flow`` and flatten it into a :class:`Plan`."""
    an = validate(flow, allow_import=allow_import)
    b = _Builder()
    outputs = b.flow(an, "", {name: FromInput(name) for name in flow.inputs})
    if not b.tasks:
        raise FlowError(f"flow {flow.name!r} has no steps to run")
    return Plan(flow, b.tasks, dict(flow.inputs), outputs)


def select_outputs(plan: Plan, names: list[str]) -> Plan:
    """The plan computing only the flow outputs ``names`` (the tasks they need; the others are skipped)."""
    unknown = [n for n in names if n not in plan.outputs]
    if unknown:
        raise FlowError(f"flow {plan.flow.name!r} has no output {', '.join(map(repr, unknown))}")
    outputs = {n: plan.outputs[n] for n in plan.outputs if n in names}
    todo = set().union(*(s.tasks() for s in outputs.values())) if outputs else set()
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
        if isinstance(src, FromTask):
            port = next((p for p in plan.tasks[src.task].spec.outputs if p.name == src.output), None)
            tp = port.type if port is not None else Any
        out[name] = tp
    return out


def missing_inputs(plan: Plan, given: dict[str, Any]) -> list[str]:
    """Names of required flow inputs that were not given."""
    return [n for n, i in plan.inputs.items() if i.default is MISSING and n not in given]
