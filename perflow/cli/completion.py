"""``perflow completion SHELL``: shell completion of subcommands, options, flow names and pass names.

Completion is argcomplete's: the script printed here makes the shell run
``perflow`` with the words typed so far (in environment variables) on each
TAB; :func:`complete` answers and exits before anything else runs. Flow and
pass names come from the flow library and the pass index, without importing
any pass module.

    eval "$(perflow completion bash)"            # in ~/.bashrc
    eval "$(perflow completion zsh)"             # in ~/.zshrc
    perflow completion fish | source             # in ~/.config/fish/config.fish
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register", "run", "complete", "flow_names", "pass_names", "SHELLS"]

SHELLS = ("bash", "zsh", "fish")


def register(sub: Any) -> None:
    """Add the ``completion`` subcommand."""
    p = sub.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print the script that completes perflow's subcommands, options, flow names and pass names "
        "in SHELL. Load it from your shell's start-up file: "
        'eval "$(perflow completion bash)" (bash, zsh), perflow completion fish | source (fish).',
    )
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the completion script for ``args.shell``."""
    import argcomplete

    sys.stdout.write(argcomplete.shellcode(["perflow"], shell=args.shell))
    return 0


def flow_names(prefix: str = "", **_: Any) -> list[str]:
    """Shipped flow names starting with ``prefix`` (an argcomplete completer)."""
    from ..flow.library import flow_names as names

    return [n for n in names() if n.startswith(prefix)]


def flow_or_file(prefix: str = "", **kwargs: Any) -> list[str]:
    """Shipped flow names and flow files (``.yaml``, ``.yml``, ``.py``) starting with ``prefix``."""
    from argcomplete.completers import FilesCompleter

    files = FilesCompleter(("yaml", "yml", "py"))(prefix, **kwargs)
    return flow_names(prefix) + list(files)


def engine_names(prefix: str = "", **_: Any) -> list[str]:
    """Engine names (``local`` and the ``perflow.engines`` entry points) starting with ``prefix``."""
    from ..flow.engine import engine_names as names

    return [n for n in names() if n.startswith(prefix)]


def pass_names(prefix: str = "", **_: Any) -> list[str]:
    """Pass names starting with ``prefix``, from the pass index (no pass module is imported)."""
    from ..flow.registry import pass_infos

    return [n for n in pass_infos() if n.startswith(prefix)]


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer a completion request from the shell (``_ARGCOMPLETE`` is set) and exit."""
    import argcomplete

    argcomplete.autocomplete(parser, always_complete_options=False)
