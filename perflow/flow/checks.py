"""The checks of a flow as a whole: its flow settings, its inputs and outputs, cycles, the settings classes.

:class:`FlowChecks` is a base of :mod:`perflow.flow.validate`'s checker (which
resolves each step and checks its references, inputs and settings):

* ``settings_checks``: the checks of the settings classes a pass takes, on the
  settings it gets (a failure the flow settings cause is reported by them);
* ``flow_settings`` and ``collect_setting_names``: each flow setting is a
  setting of some step, and fits every step it reaches;
* ``inputs``: every flow input is used, its default of its type;
* ``outputs``: the flow's outputs (declared, else every unconsumed step output);
* ``cycles``: the steps in dependency order, every cycle reported once.

:func:`quote`, :func:`allowed_values` and :func:`expects` write values and allowed
values for messages.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import TYPE_CHECKING, Any, get_args, get_origin

from ..pag.settings import SettingsError, settings_of
from .parts import MISSING, NAME_RE, Ref, iter_refs
from .problems import did_you_mean
from .types import coerce_value, shallow_check, type_label

if TYPE_CHECKING:  # pragma: no cover
    from .flow import Step
    from .validate import Node

__all__ = ["FlowChecks", "quote", "allowed_values", "expects"]


def quote(value: Any) -> str:
    r = repr(value)
    return r if len(r) <= 40 else r[:37] + "..."


def allowed_values(tp: Any) -> tuple[Any, ...] | None:
    """The allowed values of a ``Literal`` annotation (also inside ``X | None``), else None."""
    if get_origin(tp) is typing.Literal:
        return get_args(tp)
    if get_origin(tp) is not None:
        lits = [a for a in get_args(tp) if get_origin(a) is typing.Literal]
        if len(lits) == 1:
            return get_args(lits[0]) + ((None,) if type(None) in get_args(tp) else ())
    return None


def expects(tp: Any) -> str:
    """What a setting of type ``tp`` takes, for messages: its allowed values, or its type."""
    choices = allowed_values(tp)
    if choices is not None:
        return f"must be one of {', '.join(map(repr, choices))}"
    return f"expects {type_label(tp)}"


class FlowChecks:
    """The whole-flow checks of the validation's checker (see the module docstring)."""

    def settings_checks(self, step: Step, node: Node, given: dict[str, Any], from_flow: set[str]) -> None:
        """The checks of the settings classes the pass takes, on the settings it gets."""
        types = {s.name: s.type for s in node.settings}
        for cls in settings_of(node.spec.func) if node.spec is not None else ():
            fields = {f.name for f in dataclasses.fields(cls)}
            vals = {k: coerce_value(v, types[k]) for k, v in given.items() if k in fields}
            try:
                cls.of(None, **vals)
            except SettingsError as e:
                own = {k: v for k, v in vals.items() if k not in from_flow}
                try:
                    cls.of(None, **own)
                except SettingsError:
                    self.problem(f"steps.{step.name}.settings", f"{node.what}: {e}")
                else:  # the flow settings make it fail
                    for k in sorted(set(vals) - set(own)):
                        self.flow_setting_problem(k, (step.name, node.what, str(e)))

    def flow_setting_problem(self, name: str, rec: tuple[str, str, str]) -> None:
        """A flow setting that does not fit a step: reported by the flow that gives it."""
        if name in self.flow.settings:
            self.bad_flow_settings.setdefault(name, []).append(rec)
        else:
            self.a.inherited_problems.setdefault(name, []).append(rec)

    def flow_settings(self) -> None:
        """Each flow setting is a setting of some step, and fits every step it reaches."""
        names = self.a.setting_names
        for name, value in self.flow.settings.items():
            path = f"settings.{name}"
            if not isinstance(name, str) or not NAME_RE.match(name):
                self.problem(path, f"invalid setting name {name!r}")
            elif names is not None and name not in names:
                self.problem(
                    path,
                    f"flow setting {name!r} is not a setting of any step{did_you_mean(name, names)} "
                    f"(settings of the steps: {', '.join(sorted(names)) or 'none'})",
                )
            by_exp: dict[str, list[str]] = {}
            order = {n: i for i, n in enumerate(self.flow.steps)}
            recs = sorted(self.bad_flow_settings.get(name, []), key=lambda r: order.get(r[0].split("/")[0], -1))
            for step_name, what, exp in recs:
                by_exp.setdefault(exp, []).append(f"step {step_name!r} ({what})")
            for exp, steps in by_exp.items():
                how = exp if exp.startswith(("must be", "expects")) else f"is refused: {exp}"
                self.problem(path, f"flow setting {name}={quote(value)} {how} (it reaches {', '.join(steps)})")

    def collect_setting_names(self) -> None:
        names: set[str] | None = set()
        for s in self.flow.steps.values():
            node = self.a.nodes.get(s.name)
            if node is None:
                names = None
                break
            if node.sub is not None:
                if node.sub.setting_names is None:
                    names = None
                    break
                names |= node.sub.setting_names
            else:
                names |= {x.name for x in node.settings}
        self.a.setting_names = names

    def inputs(self) -> None:
        used = set()
        for s in self.flow.steps.values():
            used.update(
                t[6:] for _, t in iter_refs(list(s.inputs.values())) if isinstance(t, str) and t.startswith("input:")
            )
        used.update(
            o.source[6:]
            for o in self.flow.outputs.values()
            if isinstance(o.source, str) and o.source.startswith("input:")
        )
        for i in self.flow.inputs.values():
            if i.name not in used:
                self.problem(f"inputs.{i.name}", f"flow input {i.name!r} is not used by any step or output")
            if i.default is not MISSING and not shallow_check(coerce_value(i.default, i.type), i.type):
                self.problem(
                    f"inputs.{i.name}.default",
                    f"default of input {i.name!r} is {type(i.default).__name__} "
                    f"{quote(i.default)}, not {type_label(i.type)}",
                )

    def outputs(self) -> None:
        f = self.flow
        if f.outputs:
            for o in f.outputs.values():
                r = self.ref(o.source, f"outputs.{o.name}", f"output {o.name!r}")
                if r is not None:
                    self.a.outputs[o.name] = str(r)
                    self.a.output_types[o.name] = self.source_type(r)
            return
        consumed = set()
        for s in f.steps.values():
            for _, t in iter_refs(list(s.inputs.values())):
                try:
                    r = Ref.parse(t)
                except ValueError:
                    continue
                consumed.add((r.step, r.name))
                consumed.add((r.step, None))
        for name, node in self.a.nodes.items():
            if (name, None) in consumed:
                continue
            if len(node.outputs) == 1:
                self.a.outputs[name] = name
                self.a.output_types[name] = node.outputs[0].type
            else:
                for p in node.outputs:
                    self.a.outputs[f"{name}.{p.name}"] = f"{name}.{p.name}"
                    self.a.output_types[f"{name}.{p.name}"] = p.type

    def cycles(self) -> None:
        deps: dict[str, list[str]] = {}
        for s in self.flow.steps.values():
            ds = []
            for _, t in iter_refs(list(s.inputs.values())):
                try:
                    r = Ref.parse(t)
                except ValueError:
                    continue
                if r.step in self.flow.steps:
                    ds.append(r.step)
            deps[s.name] = ds
        state: dict[str, int] = {}
        order: list[str] = []
        seen_cycles: set[frozenset[str]] = set()
        for start in deps:
            if start in state:
                continue
            stack: list[tuple[str, int]] = [(start, 0)]
            path: list[str] = [start]
            state[start] = 1
            while stack:
                name, i = stack[-1]
                if i < len(deps[name]):
                    stack[-1] = (name, i + 1)
                    d = deps[name][i]
                    if state.get(d) == 1:
                        cyc = path[path.index(d) :]
                        if frozenset(cyc) not in seen_cycles:
                            seen_cycles.add(frozenset(cyc))
                            self.problem(f"steps.{d}", "cycle: " + " -> ".join([*cyc, d]))
                    elif d not in state:
                        state[d] = 1
                        stack.append((d, 0))
                        path.append(d)
                else:
                    state[name] = 2
                    order.append(name)
                    stack.pop()
                    path.pop()
        self.a.order = order if not seen_cycles else []
