"""The parts of a flow: references, inputs, outputs and steps (see :mod:`perflow.flow.flow`)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import FlowError

if TYPE_CHECKING:  # pragma: no cover
    from .flow import Flow

__all__ = [
    "Ref",
    "FlowInput",
    "FlowOutput",
    "Step",
    "MISSING",
    "NAME_RE",
    "INPUT_PREFIX",
    "ref_text",
    "iter_refs",
    "looks_like_refs",
    "canon",
    "SubFlow",
]

INPUT_PREFIX = "input:"
#: Names of steps, inputs, outputs and settings.
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        return "MISSING"


#: Marks a flow input without a default.
MISSING: Any = _Missing()


@dataclass(frozen=True)
class Ref:
    """A reference to a flow input (``step is None``) or to a step's output.

    ``flow.input()`` and ``flow.step()`` return these; ``ref["name"]`` picks a
    named output of a step with several outputs.
    """

    step: str | None
    name: str | None = None

    @classmethod
    def parse(cls, text: str) -> Ref:
        """Parse ``"input:NAME"``, ``"STEP"`` or ``"STEP.OUTPUT"`` (raises ValueError)."""
        if not isinstance(text, str):
            raise ValueError(f"a reference must be a string like 'input:pag' or 'step.output', not {text!r}")
        if text.startswith(INPUT_PREFIX):
            name = text[len(INPUT_PREFIX) :]
            if not NAME_RE.match(name):
                raise ValueError(f"invalid reference {text!r}: {name!r} is not a valid input name")
            return cls(None, name)
        step, dot, out = text.partition(".")
        if not NAME_RE.match(step) or (dot and not NAME_RE.match(out)):
            raise ValueError(f"invalid reference {text!r}: expected 'input:NAME', 'STEP' or 'STEP.OUTPUT'")
        return cls(step, out or None)

    @property
    def is_input(self) -> bool:
        """Whether this refers to a flow input."""
        return self.step is None

    def __getitem__(self, output: str) -> Ref:
        if self.step is None or self.name is not None:
            raise FlowError(f"{self} already names one value; only a step reference can pick an output")
        return Ref(self.step, output)

    def __str__(self) -> str:
        if self.step is None:
            return f"{INPUT_PREFIX}{self.name}"
        return self.step if self.name is None else f"{self.step}.{self.name}"


def ref_text(value: Any) -> Any:
    """The string form of a reference (:class:`Ref` or string), or a list or dict of them."""
    if isinstance(value, Ref):
        return str(value)
    if isinstance(value, list | tuple):
        return [ref_text(v) for v in value]
    if isinstance(value, dict):
        return {str(k): ref_text(v) for k, v in value.items()}
    return value


def iter_refs(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(sub-path, reference)`` for a step input: one reference, or a list or dict of them.

    A pass input fed from several steps (a report's sections) is written as a
    list (``[hot, imb]``, sub-paths ``[0]``, ``[1]``) or a mapping
    (``{Hotspots: hot}``, sub-path ``.Hotspots``) of references.
    """
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from iter_refs(v, f"{path}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from iter_refs(v, f"{path}.{k}")
    else:
        yield path, value


def looks_like_refs(value: Any) -> bool:
    """Whether a keyword value is a reference (a Ref, ``"input:..."``) or a non-empty list or dict of Refs."""
    if isinstance(value, Ref) or (isinstance(value, str) and value.startswith(INPUT_PREFIX)):
        return True
    if isinstance(value, list | tuple | dict) and value:
        return all(isinstance(v, Ref) for _, v in iter_refs(value))
    return False


class SubFlow:
    """The base of :class:`~perflow.flow.flow.Flow`: what a :class:`Step` knows of a flow it runs.

    A step tells a sub-flow from a pass by this class, so that this module
    (which the flow module is built on) never imports the flow module.
    """

    name: str
    origin: str | None


@dataclass
class FlowInput:
    """A value the flow takes when it runs."""

    name: str
    type: Any = Any
    doc: str = ""
    default: Any = MISSING

    @property
    def required(self) -> bool:
        """An input without a default must be given."""
        return self.default is MISSING


@dataclass
class FlowOutput:
    """A value the flow returns: a reference to a step output (or a flow input)."""

    name: str
    source: str
    doc: str = ""


@dataclass
class Step:
    """One invocation of a pass (or of another flow) inside a flow.

    Attributes
    ----------
    name : str
    target : str, callable or Flow
        A registered pass name, a dotted path ``module:function``, a pass
        function, or a :class:`Flow` run as a sub-flow.
    inputs : dict of str to str (or list or dict of str)
        Input port -> reference (``"input:pag"``, ``"step"``, ``"step.out"``),
        or a list or mapping of references, given to the pass as a list or dict.
    settings : dict of str to object
    doc : str
    """

    name: str
    target: str | Callable[..., Any] | Flow | None
    inputs: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    doc: str = ""

    @property
    def is_flow(self) -> bool:
        """Whether the step runs a sub-flow."""
        return isinstance(self.target, SubFlow)

    @property
    def target_name(self) -> str:
        """The pass name (or ``flow:NAME``) for listings and YAML."""
        t = self.target
        if t is None:
            return "?"
        if isinstance(t, SubFlow):
            return f"flow:{t.origin or t.name}"
        if isinstance(t, str):
            return t
        spec = getattr(t, "__perflow_pass__", None)
        if spec is not None:
            return spec.name
        return f"{getattr(t, '__module__', '?')}:{getattr(t, '__qualname__', repr(t))}"


def canon(value: Any) -> Any:
    """Settings and defaults in the form YAML round-trips (tuples and sets as lists, paths as str)."""
    if isinstance(value, tuple | list):
        return [canon(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((canon(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {k: canon(v) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value
