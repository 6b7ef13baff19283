"""The ``perflow`` command line.

Each subcommand lives in its own module under :mod:`perflow.cli` and exposes
``register(subparsers)``, which adds an :mod:`argparse` parser whose
``func`` default takes the parsed namespace and returns an exit status.

Exit status: 0 on success, 1 when an analysis fails, 2 on usage, input or
validation errors. Errors are printed as one line on stderr; ``--debug``
prints the traceback too.

The global options (``-q``, ``-v``, ``--debug``) are accepted before or after
the subcommand. Long work shows a progress display on standard error when it
is a terminal (:mod:`perflow.progress`). Shell completion: ``perflow
completion bash|zsh|fish`` prints the script to source (argcomplete).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from ..errors import FlowError, FormatError, PAGError, PassError, PerflowError, TraceError, ValidationError
from ._term import EscapingStream, printable

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

#: Modules (under perflow.cli) that contribute subcommands, in help order.
COMMAND_MODULES = [
    "info",
    "tree",
    "run",
    "validate",
    "passes",
    "flows",
    "record",
    "view",
    "convert",
    "cc",
    "score",
    "completion",
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2
        self.print_usage(sys.stderr)
        print(f"perflow: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _global_options(parser: argparse.ArgumentParser, *, in_subcommand: bool) -> None:
    """``-q``, ``-v``, ``--debug``: on the main parser, and again on every subcommand (without defaults there,
    so that an option given before the subcommand is not reset by the subcommand's parser)."""
    g = parser.add_argument_group("global options", None if in_subcommand else "also accepted after COMMAND")
    none = {"default": argparse.SUPPRESS} if in_subcommand else {}
    g.add_argument("-q", "--quiet", action="store_true", help="only print errors and results", **none)
    g.add_argument("-v", "--verbose", action="store_true", help="more messages (debug logging, no tracebacks)", **none)
    g.add_argument("--debug", action="store_true", help="show tracebacks and debug logging", **none)
    g.add_argument(
        "--clock-correction",
        choices=("auto", "on", "off"),
        help="correct trace timestamps with the controlled logical clock: auto (default: when a trace violates "
        "the clock condition), on, off",
        **none,
    )


class _Subcommands(argparse._SubParsersAction):
    """Subparsers that accept the global options too."""

    def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser:  # type: ignore[override]
        kwargs.setdefault("conflict_handler", "resolve")  # a subcommand's own -v (say) takes precedence
        p = super().add_parser(name, **kwargs)  # type: ignore[arg-type]
        if "-" in p.prefix_chars:  # not for wrappers that pass every argument on (perflow cc ...)
            _global_options(p, in_subcommand=True)
        return p


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every available subcommand."""
    from .. import __version__

    parser = _Parser(prog="perflow", description="Programmable performance analysis of parallel programs.")
    parser.register("action", "parsers", _Subcommands)
    parser.add_argument("--version", action="version", version=f"perflow {__version__}")
    _global_options(parser, in_subcommand=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:  # a subcommand not built yet
            if exc.name and exc.name.startswith(f"{__package__}.{name}"):
                continue
            raise
        mod.register(sub)
    return parser


class _StderrHandler(logging.StreamHandler):
    """Log to whatever ``sys.stderr`` is at the time, so that messages go above a progress display."""

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:  # StreamHandler.__init__ sets it
        pass


def _usage_error(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
        return True  # a missing, unreadable or unwritable file, a full disk: the user's to fix
    if isinstance(exc, FlowError) and isinstance(getattr(exc, "error", None), OSError | FormatError | PerflowError):
        return True  # a step failed on the user's data or files
    return isinstance(exc, ValidationError | FormatError | PassError | PAGError | TraceError | FileNotFoundError) or (
        isinstance(exc, PerflowError) and not isinstance(exc, FlowError)
    )


def _one_line(exc: BaseException) -> str:
    """The error as one line: an OSError names its file first (``out/r.md: No space left on device``)."""
    if isinstance(exc, OSError) and not isinstance(exc, PerflowError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        also = f" (and {exc.filename2})" if getattr(exc, "filename2", None) else ""
        msg = f"{where}{exc.strerror}{also}"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            msg += " (while writing it: the previous outputs are kept as they were)"
        return msg
    msg = str(exc).strip() or type(exc).__name__
    if not isinstance(exc, PerflowError | FileNotFoundError):
        msg = f"{type(exc).__name__}: {msg}"
    return msg


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (also used as the console script)."""
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # a shell asks for completions (see `perflow completion`)
        from .completion import complete

        complete(parser)
    args, extra = parser.parse_known_args(argv)
    if extra:
        # argparse gives a positional list only the words before the first option: `perflow run FLOW -o DIR
        # PATH` leaves PATH over; a command that takes inputs (`run`) takes such words as inputs too
        if not getattr(args, "extra_inputs", False) or any(word.startswith("-") for word in extra):
            parser.parse_args(argv)  # argparse's own message and exit status for what is really unknown
        args.inputs = [*args.inputs, *extra]
    verbose = bool(args.debug or args.verbose)
    # other libraries' messages (Dask's "INFO distributed...", numba's) only with --verbose/--debug
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        handlers=[_StderrHandler()],
    )
    if not verbose:
        logging.getLogger("perflow").setLevel(logging.WARNING if args.quiet else logging.INFO)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from .. import progress

    progress.enable(sys.stderr, quiet=args.quiet)
    real_stdout = sys.stdout
    sys.stdout = EscapingStream(real_stdout)  # type: ignore[assignment] # names from data never drive the terminal
    try:
        from ..trace.clcmode import clock_correction

        with clock_correction(getattr(args, "clock_correction", None) or "auto"):
            status = args.func(args)
    except KeyboardInterrupt:
        print("perflow: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        print(f"perflow: error: {printable(_one_line(exc))}", file=sys.stderr)
        return EXIT_USAGE if _usage_error(exc) else EXIT_FAILED
    finally:
        sys.stdout = real_stdout
        progress.disable()
    return EXIT_OK if status is None else int(status)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
