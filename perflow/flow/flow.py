"""The flow model: a DAG of pass invocations, built in Python or loaded from YAML.

A :class:`Flow` has named **inputs** (values given when it runs), named
**steps** (each invokes a pass, or another flow, on inputs taken from flow
inputs or other steps' outputs, with settings), named **outputs** (values
the run returns) and **flow settings**: a setting given once for the flow
(``flow.set("late_receiver", "blocking")``, ``settings:`` at the top of a
YAML flow) reaches every step of it, and of its sub-flows, whose pass has a
setting of that name; a step's own setting, or a sub-flow's own flow
setting, overrides it. References between them are strings:

``"input:pag"``
    the flow input ``pag``;
``"hot"``
    the output of step ``hot`` (which must have exactly one output);
``"hot.table"``
    the output ``table`` of step ``hot``.

Two equivalent ways to build a flow::

    # handles: step() returns a reference to pass on, like calling the pass
    f = Flow("hotspots")
    pag = f.input("pag", PAG)
    hot = f.step("hot", "hotspot", pag, metric="time_exc")
    f.output("hot", hot)

    # explicit: string references, chainable
    f = (Flow("hotspots")
         .add_input("pag", type=PAG)
         .add_step("hot", "hotspot", inputs={"pag": "input:pag"}, settings={"metric": "time_exc"})
         .add_output("hot", "hot"))

Building never fails on a mistake in the graph (except a duplicate name):
:meth:`Flow.validate` reports every problem at once.
"""

from __future__ import annotations

import copy as _copy
import html
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .._atomic import write_text
from ..errors import FlowError
from .parts import (
    INPUT_PREFIX,
    MISSING,
    NAME_RE,
    FlowInput,
    FlowOutput,
    Ref,
    Step,
    SubFlow,
    iter_refs,
    looks_like_refs,
    ref_text,
)
from .registry import get_pass
from .types import resolve_type, type_label

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

    from .problems import Problem
    from .result import FlowResult

__all__ = ["Flow", "Step", "FlowInput", "FlowOutput", "Ref", "MISSING", "NAME_RE", "INPUT_PREFIX"]


class Flow(SubFlow):
    """An analysis flow: inputs, steps (pass invocations) and outputs.

    Parameters
    ----------
    name : str
        Short name, used in listings and reports.
    description : str
        What the flow computes (the first line is its summary).
    """

    def __init__(self, name: str = "flow", description: str = "") -> None:
        self.name = name
        self.description = description
        self.inputs: dict[str, FlowInput] = {}
        self.steps: dict[str, Step] = {}
        self.outputs: dict[str, FlowOutput] = {}
        #: Flow settings: name -> value, for every step (and sub-flow step) whose pass has that setting.
        self.settings: dict[str, Any] = {}
        #: The file the flow was read from, if any.
        self.source: str | None = None
        #: How the flow was referred to when loaded (a shipped name or a path), for YAML ``flow:`` keys.
        self.origin: str | None = None
        #: YAML path (``steps.hot.settings.k``) -> (line, column), 1-based, for flows read from YAML.
        self.locations: dict[str, tuple[int, int]] = {}
        #: Problems found while reading the flow (reported by validate() with the others).
        self.load_problems: list[Problem] = []

    # ------------------------------------------------------------------ building: handles
    def input(self, name: str, type: Any = Any, *, doc: str = "", default: Any = MISSING) -> Ref:  # noqa: A002
        """Declare a flow input and return a reference to it."""
        self.add_input(name, type=type, doc=doc, default=default)
        return Ref(None, name)

    def step(self, name: str, target: Any, *inputs: Any, doc: str = "", **kwargs: Any) -> Ref:
        """Add a step and return a reference to its output(s).

        Positional arguments are the pass's data inputs in order; keyword
        arguments are inputs or settings by name, as in a direct call of the
        pass. Inputs are references (a :class:`Ref` or a string such as
        ``"input:pag"`` or ``"hot.table"``).
        """
        ins, sets = self._split(target, inputs, kwargs)
        self.add_step(name, target, inputs=ins, settings=sets, doc=doc)
        return Ref(name)

    def _split(self, target: Any, positional: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict, dict]:
        ports: list[str] | None
        settings: set[str] = set()
        if isinstance(target, Flow):
            ports = list(target.inputs)
        else:
            try:  # code that builds a flow in Python may import; running it still needs allow_import
                spec = get_pass(target, allow_import=True)
            except Exception:  # unknown pass: validate() reports it
                spec = None
            ports = [p.name for p in spec.inputs] if spec else None
            settings = {s.name for s in spec.settings} if spec else set()
        ins: dict[str, Any] = {}
        if positional:
            if ports is None:
                ports = [f"_{i}" for i in range(len(positional))]
            if len(positional) > len(ports):
                raise FlowError(f"step {target!r} takes {len(ports)} data inputs, {len(positional)} given")
            ins.update(zip(ports, positional))
        sets: dict[str, Any] = {}
        for k, v in kwargs.items():
            if k in ins:
                raise FlowError(f"input {k!r} given twice")
            if (ports is not None and k in ports) or (k not in settings and looks_like_refs(v)):
                ins[k] = v
            else:
                sets[k] = v
        return ins, sets

    # ------------------------------------------------------------------ building: explicit
    def add_input(self, name: str, *, type: Any = Any, doc: str = "", default: Any = MISSING) -> Flow:  # noqa: A002
        """Declare a flow input; return the flow (for chaining)."""
        if name in self.inputs:
            raise FlowError(f"flow {self.name!r} already has an input {name!r}")
        if isinstance(type, str):
            type = resolve_type(type)  # noqa: A001
        self.inputs[name] = FlowInput(name, type, doc, default)
        self.origin = None
        return self

    def add_step(
        self,
        name: str,
        target: Any,
        *,
        inputs: Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
        doc: str = "",
    ) -> Flow:
        """Add a step running ``target`` (pass name, dotted path, function or Flow); return the flow."""
        if name in self.steps:
            raise FlowError(f"flow {self.name!r} already has a step {name!r}")
        self.steps[name] = Step(
            name, target, {k: ref_text(v) for k, v in (inputs or {}).items()}, dict(settings or {}), doc
        )
        self.origin = None
        return self

    def connect(self, source: Any, target: str) -> Flow:
        """Feed ``source`` (a reference) into ``target`` = ``"STEP.INPUT"``; return the flow."""
        step, dot, port = target.partition(".")
        if not dot or step not in self.steps:
            from difflib import get_close_matches

            close = get_close_matches(step, list(self.steps), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise FlowError(f"connect target must be 'STEP.INPUT' naming an existing step, got {target!r}{hint}")
        self.steps[step].inputs[port] = ref_text(source)
        self.origin = None
        return self

    def output(self, name: str, source: Any = None, *, doc: str = "") -> Flow:
        """Declare a flow output fed by ``source`` (default: the step called ``name``); return the flow."""
        if name in self.outputs:
            raise FlowError(f"flow {self.name!r} already has an output {name!r}")
        self.outputs[name] = FlowOutput(name, ref_text(source) if source is not None else name, doc)
        self.origin = None
        return self

    add_output = output

    def set(self, path: str, value: Any) -> Flow:
        """Change one setting in place: ``flow.set("hot.k", 5)`` (``"sub.inner.k"`` reaches into sub-flows).

        A name without a step (``flow.set("late_receiver", "blocking")``) is a
        flow setting: every step whose pass has that setting takes it, unless
        the step sets it itself; ``"sub.NAME"`` on a step running a flow sets
        that sub-flow's flow setting.
        """
        step, dot, rest = path.partition(".")
        if not step or (dot and not rest):
            raise FlowError(f"a setting is named 'SETTING' (for the whole flow) or 'STEP.SETTING', got {path!r}")
        if not dot:
            self.settings[step] = value
            self.locations.pop(f"settings.{step}", None)  # no longer from the file
            self.origin = None
            return self
        if step not in self.steps:
            from difflib import get_close_matches

            close = get_close_matches(step, list(self.steps), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise FlowError(f"cannot set {path!r}: flow {self.name!r} has no step {step!r}{hint}")
        st = self.steps[step]
        if isinstance(st.target, str) and st.target.startswith("flow:"):
            try:
                st.target = loader.resolve_flow_ref(st.target[5:], yaml_io.source_dir(self))
            except Exception as exc:
                raise FlowError(f"cannot set {path!r}: the sub-flow of step {step!r} cannot be read: {exc}") from None
        if isinstance(st.target, Flow):
            st.target = st.target.copy()
            st.target.set(rest, value)
        else:
            st.settings[rest] = value
            self.locations.pop(f"steps.{step}.settings.{rest}", None)  # no longer from the file
        self.origin = None
        return self

    def with_settings(self, settings: Mapping[str, Any]) -> Flow:
        """A copy with settings changed (keys ``"STEP.SETTING"``, or ``"SETTING"`` for the whole flow)."""
        f = self.copy()
        for k, v in settings.items():
            f.set(k, v)
        return f

    def copy(self) -> Flow:
        """A copy that can be changed without touching this flow (sub-flows are shared until set)."""
        f = Flow(self.name, self.description)
        f.inputs = {k: _copy.copy(v) for k, v in self.inputs.items()}
        f.steps = {k: Step(s.name, s.target, dict(s.inputs), dict(s.settings), s.doc) for k, s in self.steps.items()}
        f.outputs = {k: _copy.copy(v) for k, v in self.outputs.items()}
        f.settings = dict(self.settings)
        f.source, f.origin, f.locations = self.source, self.origin, dict(self.locations)
        f.load_problems = list(self.load_problems)
        return f

    # ------------------------------------------------------------------ checking and running
    def problems(self, *, allow_import: bool = False) -> list[Problem]:
        """Every problem of the flow (empty when it is valid); see :mod:`perflow.flow.validate`."""
        return validate_.find_problems(self, allow_import=allow_import)

    def validate(self, *, allow_import: bool = False) -> Flow:
        """Raise :class:`~perflow.errors.ValidationError` listing every problem; return the flow if valid."""
        validate_.validate(self, allow_import=allow_import)
        return self

    def run(self, inputs: Mapping[str, Any] | None = None, /, **kwargs: Any) -> FlowResult:
        """Run the flow: shorthand for :func:`perflow.flow.run` (``jobs=``, ``cache=`` ... accepted)."""
        from .api import run

        return run(self, inputs, **kwargs)

    # ------------------------------------------------------------------ conversion
    def to_dict(self) -> dict[str, Any]:
        """The flow as plain data in the YAML schema.

        A sub-flow loaded by name or path (``origin``) is written as that
        reference; one built in Python is embedded.
        """
        return yaml_io.flow_to_dict(self)

    def to_yaml(self) -> str:
        """The flow as YAML text (``perflow.load_flow`` reads it back to an equal flow)."""
        return yaml_io.dump(self)

    @classmethod
    def from_yaml(cls, text: str, *, source: str | None = None, allow_import: bool = False) -> Flow:
        """Read a flow from YAML text and validate it."""
        return yaml_io.loads(text, source=source, allow_import=allow_import)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, allow_import: bool = False) -> Flow:
        """Build a flow from plain data in the YAML schema and validate it."""
        f = yaml_io.flow_from_data(data, allow_import=allow_import)
        f.validate(allow_import=allow_import)
        return f

    def save(self, path: Any) -> None:
        """Write the flow as YAML to ``path`` (atomically)."""

        write_text(path, self.to_yaml())

    def to_networkx(self) -> nx.DiGraph:
        """The step graph: nodes are steps (attribute ``target``), edges carry ``port`` and ``source``."""
        import networkx as nx

        g = nx.DiGraph()
        for s in self.steps.values():
            g.add_node(s.name, target=s.target_name)
        for s in self.steps.values():
            for port, value in s.inputs.items():
                for sub, text in iter_refs(value):
                    try:
                        r = Ref.parse(text)
                    except ValueError:
                        continue
                    if r.step in self.steps:
                        g.add_edge(r.step, s.name, port=f"{port}{sub}", source=text)
        return g

    # ------------------------------------------------------------------ protocol
    def _canonical(self) -> dict[str, Any]:
        return yaml_io.flow_to_dict(self, strict=False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Flow):
            return NotImplemented
        return self._canonical() == other._canonical()

    __hash__ = None  # type: ignore[assignment] # mutable

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps.values())

    def __contains__(self, name: object) -> bool:
        return name in self.steps

    def __getitem__(self, name: str) -> Step:
        try:
            return self.steps[name]
        except KeyError:
            raise KeyError(f"flow {self.name!r} has no step {name!r}") from None

    @property
    def summary(self) -> str:
        """The first sentence of the description (its first paragraph, lines joined): never cut mid-sentence."""
        para = self.description.strip().split("\n\n", 1)[0]
        text = " ".join(line.strip() for line in para.splitlines() if line.strip())
        m = re.match(r"(.+?[.!?])(\s|$)", text)
        return m.group(1) if m else text

    def __repr__(self) -> str:
        return (
            f"<Flow {self.name!r}: inputs [{', '.join(self.inputs)}], {len(self.steps)} steps, "
            f"outputs [{', '.join(self.outputs)}]>"
        )

    def _repr_html_(self) -> str:

        e = html.escape
        rows = []
        for s in self.steps.values():
            ins = ", ".join(f"{e(k)}={e(v)}" for k, v in s.inputs.items())
            sets = ", ".join(f"{e(k)}={e(repr(v))}" for k, v in s.settings.items())
            rows.append(f"<tr><td><b>{e(s.name)}</b></td><td>{e(s.target_name)}</td><td>{ins}</td><td>{sets}</td></tr>")
        inputs = ", ".join(f"{e(i.name)}: {e(type_label(i.type))}" for i in self.inputs.values())
        outputs = ", ".join(f"{e(o.name)} &larr; {e(o.source)}" for o in self.outputs.values())
        return (
            f"<b>Flow {e(self.name)}</b> {e(self.summary)}<br>inputs: {inputs or '&mdash;'}<br>"
            "<table><tr><th>step</th><th>pass</th><th>inputs</th><th>settings</th></tr>"
            + "".join(rows)
            + f"</table>outputs: {outputs or '&mdash;'}"
        )


# Reading, writing and checking flows build on the Flow class (they import it
# at their top): the modules, not their names, are imported here, last, so
# that either can be imported first. Running (perflow.flow.api: the readers,
# pandas) is imported by Flow.run only, so that building, loading and
# validating a flow stay free of pandas and numpy.
from . import loader, yaml_io  # noqa: E402
from . import validate as validate_  # noqa: E402
