"""``perflow passes [NAME]``: list the available passes, or describe one."""

from __future__ import annotations

import argparse
import inspect
import sys
from typing import Any

__all__ = ["register", "run", "describe_pass"]


def register(sub: Any) -> None:
    """Add the ``passes`` subcommand."""
    p = sub.add_parser(
        "passes",
        help="list analysis passes, or describe one",
        description="Without NAME, list every pass (built-in, entry points). With NAME, show its inputs, "
        "outputs and settings.",
    )
    from .completion import pass_names

    p.add_argument("name", nargs="?", metavar="NAME", help="a pass to describe").completer = pass_names  # type: ignore[attr-defined]
    p.add_argument("--tag", help="list only passes with this tag (io, profile, trace, plot, ...)")
    p.set_defaults(func=run)


def describe_pass(spec: Any) -> str:
    """A plain-text description of a pass: ports, settings, documentation."""
    from ..flow.types import type_label

    lines = [f"{spec.name} (version {spec.version})" + (f"  [{', '.join(spec.tags)}]" if spec.tags else "")]
    if spec.summary:
        lines.append(f"  {spec.summary}")
    lines.append(f"  defined in {spec.module}.{spec.func.__qualname__}")
    lines.append("")
    lines.append("inputs:" if spec.inputs else "inputs: none")
    for p in spec.inputs:
        opt = "" if p.required else f" = {p.default!r}"
        lines.append(f"  {p.name}: {type_label(p.type)}{opt}" + (f"  -- {p.doc}" if p.doc else ""))
    lines.append("outputs:")
    for p in spec.outputs:
        lines.append(f"  {p.name}: {type_label(p.type)}" + (f"  -- {p.doc}" if p.doc else ""))
    lines.append("settings:" if spec.settings else "settings: none")
    for s in spec.settings:
        default = "(required)" if s.default is inspect.Parameter.empty else f"= {s.default!r}"
        lines.append(f"  {s.name}: {type_label(s.type)} {default}" + (f"  -- {s.doc}" if s.doc else ""))
    if not spec.cacheable:
        lines.append("not cached across runs (has side effects)")
    rest = _without_parameters(spec.doc.strip().split("\n", 1)[1] if "\n" in spec.doc.strip() else "")
    if rest:
        lines += ["", rest]
    return "\n".join(lines)


def _without_parameters(doc: str) -> str:
    """The docstring body without its numpydoc Parameters/Settings/Inputs sections (shown above)."""
    lines = inspect.cleandoc(doc).splitlines() if doc.strip() else []
    out, skip = [], False
    for i, line in enumerate(lines):
        underline = i + 1 < len(lines) and lines[i + 1].strip() and set(lines[i + 1].strip()) == {"-"}
        if underline:
            skip = line.strip() in ("Parameters", "Settings", "Inputs")
        if not skip:
            out.append(line)
    return "\n".join(out).strip()


def run(args: argparse.Namespace) -> int:
    """List or describe passes."""
    from ..flow.registry import get_pass, pass_infos

    if args.name:
        print(describe_pass(get_pass(args.name)), file=sys.stdout)
        return 0
    # from the pass index: listing imports no pass module
    specs = [s for s in pass_infos().values() if not args.tag or args.tag in s.tags]
    if not specs:
        print("no passes" + (f" tagged {args.tag!r}" if args.tag else ""), file=sys.stderr)
        return 0
    width = max(len(s.name) for s in specs)
    for s in specs:
        print(f"{s.name:<{width}}  {s.summary}", file=sys.stdout)
    return 0
