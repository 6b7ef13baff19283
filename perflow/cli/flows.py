"""``perflow flows [NAME]``: list the flows shipped with perflow, or show one."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``flows`` subcommand."""
    p = sub.add_parser(
        "flows",
        help="list the shipped analysis flows, or show one",
        description="Without NAME, list the flows shipped with perflow (run one with `perflow run NAME`). "
        "With NAME, print it as YAML (a starting point for your own flow).",
    )
    from .completion import flow_names

    p.add_argument("name", nargs="?", metavar="NAME", help="a shipped flow to print").completer = flow_names  # type: ignore[attr-defined]
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """List or print shipped flows."""
    from ..flow.library import describe_flows, find_flow, flow_names, flow_path

    if args.name:
        if args.name not in flow_names():
            from ..flow.problems import did_you_mean

            raise FileNotFoundError(f"no shipped flow {args.name!r}{did_you_mean(args.name, flow_names())}")
        path = flow_path(args.name)
        if path is not None and path.suffix in (".yaml", ".yml"):
            text = path.read_text(encoding="utf-8")
        else:
            text = find_flow(args.name).to_yaml()
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return 0
    desc = describe_flows()
    if not desc:
        print("no shipped flows", file=sys.stderr)
        return 0
    import shutil
    import textwrap

    width = max(len(n) for n in desc)
    cols = max(shutil.get_terminal_size((100, 40)).columns, width + 30)
    for name, summary in desc.items():  # whole sentences, wrapped under their column
        lines = textwrap.wrap(summary, cols - width - 2) or [""]
        print(f"{name:<{width}}  {lines[0]}", file=sys.stdout)
        for more in lines[1:]:
            print(f"{'':<{width}}  {more}", file=sys.stdout)
    return 0
