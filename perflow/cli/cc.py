"""``perflow cc``/``cxx``/``fc``: compile with function instrumentation for ``perflow record``."""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

__all__ = ["register", "run"]

_HELP = {
    "cc": ("C", "mpicc", "PERFLOW_CC"),
    "cxx": ("C++", "mpicxx", "PERFLOW_CXX"),
    "fc": ("Fortran", "mpifort", "PERFLOW_FC"),
}

_EPILOG = """\
Every compile step gets -finstrument-functions (and -g when no -g is given);
link steps are passed through unchanged: nothing extra is linked. Run the
program with `perflow record` to record each instrumented call as a
user-function region; without it the program runs as usual.

perflow's own options come before `--`; everything else goes to the compiler:
  perflow {name} -O3 -o app app.{ext}
  perflow {name} --exclude-function tiny_ --only 'solver/*' -- -O3 -c solver/kernel.{ext}
  perflow {name} --filter run1/perflow.filter -- -O3 -o app app.{ext}   # after `perflow score run1`

Not instrumented by default: functions from system headers ({dirs}), and, at
run time, calls shorter than `perflow record --min-call` (10 us) with nothing
recorded inside them.
"""


def _options(name: str) -> argparse.ArgumentParser:
    lang, wrapper, var = _HELP[name]
    from ..recorder.instrument import DEFAULT_EXCLUDED_DIRS

    p = argparse.ArgumentParser(
        prog=f"perflow {name}",
        description=f"Compile {lang} with function instrumentation for `perflow record` "
        f"(the compiler: --compiler, ${var}, or the MPI wrapper {wrapper}).",
        epilog=_EPILOG.format(
            name=name, ext={"cc": "c", "cxx": "cpp", "fc": "f90"}[name], dirs=", ".join(DEFAULT_EXCLUDED_DIRS)
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--compiler", metavar="CMD", help=f"the compiler to run (default: ${var} or {wrapper})")
    p.add_argument(
        "--exclude-file",
        action="append",
        default=[],
        metavar="SUBSTR",
        help="do not instrument functions defined in files whose path contains SUBSTR (repeatable)",
    )
    p.add_argument(
        "--exclude-function", action="append", default=[], metavar="SUBSTR",
        help="do not instrument functions whose name contains SUBSTR (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--only", action="append", default=[], metavar="GLOB",
        help="instrument only the source files matching GLOB (repeatable; default: all)",
    )  # fmt: skip
    p.add_argument(
        "--filter", metavar="FILE",
        help="do not instrument what this filter file excludes (Score-P syntax; as far as GCC's substring lists "
        "can express it, the rest applies when recorded with `perflow record --filter FILE`)",
    )  # fmt: skip
    p.add_argument("--system", action="store_true", help="instrument functions from system headers too")
    p.add_argument("--show", action="store_true", help="print the compile command instead of running it")
    return p


def register(sub: Any) -> None:
    """Add the ``cc``, ``cxx`` and ``fc`` subcommands."""
    for name, (lang, wrapper, _) in _HELP.items():
        # every argument is the wrapper's to parse (compiler flags start with "-" too)
        p = sub.add_parser(
            name,
            help=f"compile {lang} with function instrumentation for perflow record (wraps {wrapper})",
            add_help=False,
            prefix_chars="\x00",
        )
        p.add_argument("args", nargs=argparse.REMAINDER)
        p.set_defaults(func=run, wrapper=name)


def run(args: argparse.Namespace) -> int:
    """Run the compiler; return its exit status."""
    from ..errors import RecordError
    from ..recorder.instrument import InstrumentOptions, compiler_for, instrumented_argv

    argv = list(args.args)
    parser = _options(args.wrapper)
    if argv in (["-h"], ["--help"]):
        parser.print_help(sys.stdout)
        return 0
    own: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        own, argv = argv[:k], argv[k + 1 :]
    opts = parser.parse_args(own)
    if not argv:
        raise RecordError(f"nothing to compile; usage: perflow {args.wrapper} [OPTIONS --] COMPILER-ARGS...")
    flt = None
    if opts.filter:
        from ..recorder.filters import read_filter

        flt = read_filter(opts.filter)
    cmd = instrumented_argv(
        compiler_for(args.wrapper, opts.compiler),
        argv,
        InstrumentOptions(opts.exclude_file, opts.exclude_function, opts.only, opts.system, flt),
    )
    if opts.show:
        import shlex

        print(shlex.join(cmd))
        return 0
    return subprocess.call(cmd)
