"""Roles: what the framework asks a pass library for, without naming a pass.

The flow layer presents a run (``index.html``, a notebook's display, the
findings that open both) but never names a pass that does it: a pass
library registers a pass *for a role* (``@pass_(role="page")``) and the
framework asks the registry for the role
(:func:`perflow.flow.registry.role_pass`). perflow's own pass library
provides every role; a third-party library's pass for a role replaces the
built-in one (two third-party passes for one role are an error naming both).

=============  ==================================================================  =======================
role           what the pass returns                                               called as
=============  ==================================================================  =======================
``page``       the self-contained HTML page of a run (``index.html``)             ``(outputs, pag, steps,
                                                                                   findings, *, title,
                                                                                   subtitle, folder)``
``findings``   the run's findings, a table ranked by cost (opens the page)        ``(outputs, pag)``
``fragment``   one value as an HTML fragment for a notebook                        ``(value, *, name,
                                                                                   max_rows)``
=============  ==================================================================  =======================

A pass registered for a role must take the role's inputs, in that order, as
its first parameters and the role's settings as keyword-only parameters (it
may have more of both, with defaults); registration checks it. The pass
index records each pass's role, so asking for a role imports only the
module of the pass that fills it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

__all__ = ["Role", "ROLES", "role_problem"]


@dataclass(frozen=True)
class Role:
    """A role a pass can fill: its name, what it makes, and how the framework calls it."""

    name: str
    doc: str
    inputs: tuple[str, ...]  # positional, in this order
    settings: tuple[str, ...] = ()  # keyword-only


ROLES: dict[str, Role] = {
    r.name: r
    for r in (
        Role(
            "page",
            "the self-contained HTML page of a run",
            ("outputs", "pag", "steps", "findings"),
            ("title", "subtitle", "folder"),
        ),  # fmt: skip
        Role("findings", "a run's findings, ranked by cost", ("outputs", "pag")),
        Role("fragment", "one value as an HTML fragment for a notebook", ("value",), ("name", "max_rows")),
    )
}


def role_problem(role: str, name: str, inputs: tuple[Any, ...], settings: tuple[Any, ...]) -> str | None:
    """Why pass ``name`` (with these input ports and settings) cannot fill ``role``; None when it can."""
    r = ROLES.get(role)
    if r is None:
        return f"pass {name!r}: unknown role {role!r} (roles: {', '.join(ROLES)})"
    have = tuple(p.name for p in inputs[: len(r.inputs)])
    if have != r.inputs:
        return (
            f"pass {name!r} cannot fill the role {role!r}: its first inputs must be "
            f"({', '.join(r.inputs)}), not ({', '.join(have)})"
        )
    extra = [p.name for p in inputs[len(r.inputs) :] if p.required]
    if extra:
        return f"pass {name!r} cannot fill the role {role!r}: its inputs {', '.join(extra)} need defaults"
    missing = [s for s in r.settings if s not in {x.name for x in settings}]
    if missing:
        return f"pass {name!r} cannot fill the role {role!r}: it has no setting {', '.join(map(repr, missing))}"
    required = [s.name for s in settings if s.name not in r.settings and s.default is inspect.Parameter.empty]
    if required:
        return f"pass {name!r} cannot fill the role {role!r}: its settings {', '.join(required)} need defaults"
    return None
