"""``perflow validate FLOW``: check a flow without running it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``validate`` subcommand."""
    p = sub.add_parser(
        "validate",
        help="check a flow without running it",
        description="Check FLOW (file or shipped flow name) and list every problem with its YAML path, line and column.",
    )
    p.add_argument("flow", metavar="FLOW", help="flow file or shipped flow name")
    p.add_argument("--allow-import", action="store_true", help="let the flow import the Python code it names")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate and print a one-line summary (problems raise ValidationError: exit status 2)."""
    from ..flow.loader import load_flow
    from ..flow.plan import compile_flow
    from ..flow.types import type_label

    flow = load_flow(args.flow, allow_import=args.allow_import, validate=False)
    plan = compile_flow(flow, allow_import=args.allow_import)
    ins = ", ".join(f"{i.name} ({type_label(i.type)})" for i in flow.inputs.values()) or "none"
    outs = ", ".join(plan.outputs) or "none"
    print(
        f"{flow.source or args.flow}: valid flow {flow.name!r}: {_n(len(flow.steps), 'step')} ({_n(len(plan.tasks), 'task')}); "
        f"inputs: {ins}; outputs: {outs}",
        file=sys.stdout,
    )
    return 0


def _n(k: int, word: str) -> str:
    return f"{k} {word}{'' if k == 1 else 's'}"
