"""``perflow tree DATA``: the calling-context tree with metrics, like Hatchet's ``GraphFrame.tree()``."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``tree`` subcommand."""
    p = sub.add_parser(
        "tree",
        help="print the call tree of a trace, profile or saved PAG with its metrics",
        description="Read DATA (any supported format, or a saved PAG) and print its calling-context tree, "
        "one call path per line with its value (time_inc summed over processes by default).",
    )
    p.add_argument("path", metavar="DATA", help="file or directory to read")
    p.add_argument("--format", help="force the input format instead of detecting it")
    p.add_argument(
        "-m",
        "--metric",
        action="append",
        default=[],
        metavar="NAME",
        help="metric to show (repeatable: several show as columns; default time_inc)",
    )
    p.add_argument("--agg", default="sum", help="aggregation over processes: sum, mean, max, min, std, median, count")
    p.add_argument("--process", type=int, metavar="RANK", help="show one process's values instead")
    p.add_argument("-d", "--depth", type=int, metavar="N", help="deepest level shown (roots are 0)")
    p.add_argument(
        "-t",
        "--threshold",
        type=float,
        default=0.0,
        metavar="F",
        help="hide call paths below this fraction of the largest value (their ancestors stay), e.g. 0.01",
    )
    p.add_argument("--expand", action="append", metavar="PATTERN", help="show this subtree whole (repeatable)")
    p.add_argument("--collapse", action="append", metavar="PATTERN", help="fold this subtree (repeatable)")
    p.add_argument("--file", action="store_true", help="append file:line to every call path")
    p.add_argument("--ascii", action="store_true", help="ASCII lines instead of box-drawing characters")
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour values by magnitude (auto: on a terminal)",
    )
    p.add_argument("--max-lines", type=int, default=2000, metavar="N", help="at most N call paths (default 2000)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read the data and print its tree."""
    from ..readers import read

    pag = read(args.path, format=args.format)
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    text = pag.tree(
        args.metric or "time_inc",
        agg=args.agg,
        process=args.process,
        depth=args.depth,
        threshold=args.threshold,
        expand=args.expand,
        collapse=args.collapse,
        show_file=args.file,
        color=color,
        ascii=args.ascii,
        max_lines=args.max_lines,
    )
    if color:  # the value's colours are ours; anything else a name brings is shown escaped
        from ._term import printable

        out = getattr(sys.stdout, "_stream", sys.stdout)  # past the escaping stream of perflow.cli.main
        out.write("".join(p if _SGR.fullmatch(p) else printable(p) for p in _SGR.split(text)))
    else:
        sys.stdout.write(text)
    return 0


_SGR = re.compile(r"(\x1b\[[0-9;]*m)")  # a colour (Select Graphic Rendition): nothing but colours
