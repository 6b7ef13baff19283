"""``perflow record``: run an MPI or Python program and record a trace of it."""

from __future__ import annotations

import argparse
import logging
import shlex
import sys

__all__ = ["register"]

log = logging.getLogger(__name__)

_EPILOG = """\
examples:
  perflow record -n 4 -- ./solver input.dat
  perflow record -n 4 --sample-rate 200 -o run1 -- python train.py --epochs 2
  perflow record -n 8 --mpirun "mpirun.mpich -ppn 4" -- ./a.out
  perflow cc -O2 -o solver solver.c && perflow record -n 4 -- ./solver   # with user-function regions
  perflow score DIR && perflow record -n 4 --filter DIR/perflow.filter -- ./solver   # cheaper the second time

The program's output and exit status are passed through unchanged. Results go
to DIR: rawtrace.npz, an OTF2 trace (trace/), a saved PAG (run.pag) and raw/;
`perflow info DIR` and `perflow run FLOW DIR` read the folder.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``record`` subcommand."""
    p = subparsers.add_parser(
        "record",
        help="run an MPI or Python program and record a trace of it",
        description="Run an unmodified MPI (C, C++, Fortran) or Python/mpi4py program under the perflow "
        "recorder: MPI calls are traced and the computation is sampled.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-n", "--np", dest="nprocs", type=int, default=1, metavar="N", help="number of MPI ranks (1)")
    p.add_argument("--mpirun", metavar="CMD", help="launcher command line (default: the MPI implementation's mpirun)")
    p.add_argument(
        "--sample-rate",
        type=int,
        default=None,
        metavar="HZ",
        help="samples per second, 0 to disable (500)",
    )
    p.add_argument(
        "--sample-clock",
        choices=("wall", "cpu"),
        default="wall",
        help="native programs: sample on wall-clock time, measuring time off the CPU where it happens (wall, the "
        "default), or on the thread's CPU time, which never interrupts a blocked thread (cpu; at most the kernel's "
        "tick rate)",
    )
    p.add_argument(
        "--min-call",
        type=float,
        metavar="SECONDS",
        help="programs built with perflow cc/cxx/fc: drop instrumented calls shorter than this with nothing "
        "recorded inside (1e-5; 0 keeps every call)",
    )
    p.add_argument(
        "--filter",
        metavar="FILE",
        help="programs built with perflow cc/cxx/fc: do not record the functions this filter file excludes "
        "(Score-P syntax; `perflow score RUN` writes one)",
    )
    p.add_argument("-o", "--output", metavar="DIR", help="output directory (perflow-<program>-<date-time>)")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="kill the run after this many seconds")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]", help="the command to run")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Record the program; return its exit status."""
    from ..errors import RecordError
    from ..recorder.session import DEFAULT_SAMPLE_RATE, record
    from ..recorder.summary import summarize

    program = list(args.program)
    if program and program[0] == "--":
        program = program[1:]
    if not program:
        raise RecordError("no program given; usage: perflow record [-n N] [options] -- PROGRAM [ARGS...]")
    rate = DEFAULT_SAMPLE_RATE if args.sample_rate is None else args.sample_rate
    if rate < 0:
        raise RecordError(f"--sample-rate must be >= 0, not {rate}")
    if args.filter:
        from ..recorder.filters import read_filter

        read_filter(args.filter)  # a bad filter file fails before anything runs
    res = record(
        program,
        filter=args.filter,
        nprocs=args.nprocs,
        mpirun=args.mpirun,
        sample_rate=rate,
        sample_clock=args.sample_clock,
        min_call=args.min_call,
        outdir=args.output,
        timeout=args.timeout,
    )
    err = sys.stderr
    for note in res.notes:
        log.info("%s", note)
    if res.raw is not None and not args.quiet:
        print(f"\nperflow record: {shlex.join(program)} -> {res.outdir}/", file=err)
        print(summarize(res.raw).text(), file=err)
        out = shlex.quote(str(res.outdir))
        report = shlex.quote(f"{str(res.outdir).rstrip('/')}-report")
        print(f"analyse further: perflow info {out}; perflow run root_cause {out} -o {report}", file=err)
    if res.status != 0:
        print(f"perflow record: the program exited with status {res.status}", file=err)
    return res.status
