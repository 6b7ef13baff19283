"""What the framework knows about a pass: its :class:`PassSpec`, read from the function's signature and docstring.

Positional parameters are the pass's data inputs (:class:`Port`), keyword-only
parameters its settings (:class:`Setting`), the return annotation its single
output (or ``outputs={...}`` for several); the parameter descriptions come from
the numpydoc ``Parameters`` section. :func:`make_spec` builds the spec and
checks a role's signature (:mod:`perflow.flow.roles`); registering it is
:mod:`perflow.flow.registry`'s job.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import PassError
from .roles import role_problem

__all__ = ["Port", "Setting", "PassSpec", "make_spec"]


@dataclass(frozen=True)
class Port:
    """A data input or output of a pass."""

    name: str
    type: Any = Any
    required: bool = True
    default: Any = None
    doc: str = ""


@dataclass(frozen=True)
class Setting:
    """A keyword-only setting of a pass."""

    name: str
    type: Any = Any
    default: Any = inspect.Parameter.empty
    doc: str = ""

    @property
    def required(self) -> bool:
        """A setting without a default must be given."""
        return self.default is inspect.Parameter.empty


@dataclass(frozen=True)
class PassSpec:
    """Everything the framework knows about a pass."""

    name: str
    func: Callable[..., Any]
    version: str = "1"
    inputs: tuple[Port, ...] = ()
    outputs: tuple[Port, ...] = ()
    settings: tuple[Setting, ...] = ()
    doc: str = ""
    module: str = ""
    multi_output: bool = False
    cacheable: bool = True
    tags: tuple[str, ...] = field(default_factory=tuple)
    #: the role the pass fills for the framework (:mod:`perflow.flow.roles`), if any
    role: str | None = None

    @property
    def summary(self) -> str:
        """First line of the documentation."""
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""

    def input(self, name: str) -> Port:
        """The input port called ``name``."""
        for p in self.inputs:
            if p.name == name:
                return p
        raise PassError(
            f"pass {self.name!r} has no input {name!r}; inputs are {', '.join(p.name for p in self.inputs) or 'none'}"
        )

    def output(self, name: str) -> Port:
        """The output port called ``name``."""
        for p in self.outputs:
            if p.name == name:
                return p
        raise PassError(
            f"pass {self.name!r} has no output {name!r}; outputs are {', '.join(p.name for p in self.outputs)}"
        )

    def setting(self, name: str) -> Setting:
        """The setting called ``name``."""
        for s in self.settings:
            if s.name == name:
                return s
        from difflib import get_close_matches

        close = get_close_matches(name, [s.name for s in self.settings], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise PassError(f"pass {self.name!r} has no setting {name!r}{hint}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)


def _param_docs(doc: str) -> dict[str, str]:
    """Parameter descriptions from a numpydoc ``Parameters`` section."""
    out: dict[str, str] = {}
    lines = inspect.cleandoc(doc or "").splitlines()
    in_params = False
    current = None
    for i, line in enumerate(lines):
        if (
            line.strip() in ("Parameters", "Settings", "Inputs")
            and i + 1 < len(lines)
            and set(lines[i + 1].strip()) == {"-"}
        ):
            in_params = True
            continue
        if in_params and i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"} and line.strip():
            in_params = False
        if not in_params or set(line.strip()) == {"-"}:
            continue
        if line and not line.startswith(" "):
            names = line.split(":")[0]
            current = [n.strip() for n in names.split(",")]
            for n in current:
                out[n] = ""
        elif current and line.strip():
            for n in current:
                out[n] = (out[n] + " " + line.strip()).strip()
    return out


def make_spec(
    f: Callable[..., Any],
    *,
    name: str | None = None,
    version: str = "1",
    output: str = "result",
    outputs: Mapping[str, Any] | None = None,
    cacheable: bool = True,
    tags: tuple[str, ...] = (),
    role: str | None = None,
) -> PassSpec:
    """Build a :class:`PassSpec` from a function's signature and docstring (its role checked)."""
    sig = inspect.signature(f)
    try:
        hints = typing.get_type_hints(f)
    except Exception:  # unresolved forward references: fall back to raw annotations
        hints = {k: v.annotation for k, v in sig.parameters.items() if v.annotation is not inspect.Parameter.empty}
    pdoc = _param_docs(f.__doc__ or "")
    inputs, settings = [], []
    for p in sig.parameters.values():
        ann = hints.get(p.name, Any)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            has_default = p.default is not p.empty
            inputs.append(
                Port(
                    p.name,
                    ann,
                    required=not has_default,
                    default=p.default if has_default else None,
                    doc=pdoc.get(p.name, ""),
                )
            )
        elif p.kind is p.KEYWORD_ONLY:
            settings.append(Setting(p.name, ann, p.default, pdoc.get(p.name, "")))
        else:
            raise PassError(f"pass {f.__name__!r}: *args and **kwargs are not allowed in a pass signature")
    if outputs:
        outs = tuple(Port(k, v) for k, v in outputs.items())
        multi = True
    else:
        outs = (Port(output, hints.get("return", Any)),)
        multi = False
    if role is not None:
        problem = role_problem(role, name or f.__name__, tuple(inputs), tuple(settings))
        if problem:
            raise PassError(problem)
    return PassSpec(
        name=name or f.__name__,
        func=f,
        version=str(version),
        inputs=tuple(inputs),
        outputs=outs,
        settings=tuple(settings),
        doc=inspect.getdoc(f) or "",
        module=getattr(f, "__module__", ""),
        multi_output=multi,
        cacheable=cacheable,
        tags=tuple(tags),
        role=role,
    )
