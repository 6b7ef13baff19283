"""``perflow score RUN``: the cost of recording each function, and a filter file that removes the costly ones."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["register", "run"]

_EPILOG = """\
Like Score-P's scorep-score -r: one row per instrumented and MPI function of a
recording made with `perflow record` of a program built with `perflow cc/cxx/fc`
(visits, events and bytes a recording of every call writes, inclusive time,
time per visit, type USR/COM/MPI, the estimated overhead of recording every
call). It writes a filter file (Score-P syntax) excluding the USR functions
shorter than --threshold per visit, for the next build and recording:

  perflow cxx -O2 -o app app.cpp && perflow record -n 4 -o run1 -- ./app
  perflow score run1                                      # writes run1/perflow.filter
  perflow cxx --filter run1/perflow.filter -O2 -o app app.cpp
  perflow record -n 4 --filter run1/perflow.filter -o run2 -- ./app

With -f FILE it shows what an existing filter file excludes (column flt: '-').
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``score`` subcommand."""
    p = sub.add_parser(
        "score",
        help="estimate what recording each function costs and write a filter file (like scorep-score)",
        description="Estimate the recording cost of each function of a recorded run and write a filter file.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", metavar="RUN", help="a perflow record output directory (or its rawtrace.npz)")
    p.add_argument(
        "--threshold", type=float, default=10.0, metavar="US",
        help="exclude USR functions whose time per visit is below this many microseconds (10)",
    )  # fmt: skip
    p.add_argument("-f", "--filter", metavar="FILE", help="show what this filter file excludes instead")
    p.add_argument(
        "-g", "--write-filter", metavar="FILE",
        help="where to write the generated filter (default RUN/perflow.filter)",
    )  # fmt: skip
    p.add_argument("--top", type=int, default=40, metavar="N", help="function rows to print (40; 0: all)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the score; write the filter file."""
    from ..errors import RecordError
    from ..recorder.filters import read_filter
    from ..recorder.score import apply_filter, score, score_filter, score_text
    from ..trace.store import load_raw

    path = Path(args.run)
    npz = path / "rawtrace.npz" if path.is_dir() else path
    if not npz.is_file():
        raise RecordError(f"{path}: no rawtrace.npz (give a perflow record output directory)")
    if args.threshold < 0:
        raise RecordError(f"--threshold must be >= 0 microseconds, not {args.threshold}")
    sc = score(load_raw(npz))
    if args.filter:
        flt = read_filter(args.filter)
        apply_filter(sc, flt)
        out = None
    else:
        flt = score_filter(sc, args.threshold * 1e-6)
        apply_filter(sc, flt)
        out = (
            Path(args.write_filter)
            if args.write_filter
            else (path if path.is_dir() else path.parent) / "perflow.filter"
        )
    print(score_text(sc, top=None if args.top == 0 else args.top))
    if not (sc.table["type"] != "MPI").any():
        print("\nno instrumented function in this run: build the program with perflow cc/cxx/fc to score its functions")
    if out is not None:
        header = (
            f"perflow score {path}: USR functions shorter than {args.threshold:g} us per visit\n"
            f"(or switched off by the recorder as too short); {len(flt.names)} excluded"
        )
        out.write_text(flt.text(header), encoding="utf-8")
        print(f"\nfilter written to {out} ({len(flt.names)} functions excluded); use it with")
        print(f"  perflow cc/cxx/fc --filter {out} ...   and   perflow record --filter {out} ...")
    return 0
