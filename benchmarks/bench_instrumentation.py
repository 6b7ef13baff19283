"""Overhead of compiler instrumentation (``perflow cc``) against sampling only, on the same programs.

Each program is built twice (plain, and with what ``perflow cc/cxx/fc``
adds) and run five ways, alternating, ``--reps`` times:

* ``plain``: plain build, no recorder;
* ``inst-off``: instrumented build, no recorder (glibc's empty hooks);
* ``sampled``: plain build under ``perflow record`` (100 Hz sampling + MPI tracing);
* ``inst``: instrumented build under ``perflow record`` (default runtime filter, 10 us);
* ``inst-all``: the same with ``--min-call 0`` (every call of every instrumented function).

Printed: the fastest wall time of the launched run (launcher and MPI start-up
included, so compare the differences) and the overhead against ``plain``,
plus the number of user-function region events recorded per rank.

Usage::

    python benchmarks/bench_instrumentation.py [--ranks 4] [--reps 3] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from perflow.recorder.instrument import instrumented_argv  # noqa: E402
from perflow.recorder.session import launch_command, record  # noqa: E402
from perflow.recorder.toolchain import build_library, find_toolchain  # noqa: E402

PROGRAMS = REPO / "tests" / "recorder" / "programs"

#: name, source, compile flags, arguments, what it stresses
CASES = [
    ("halo-c", "halo_slow.c", ["-O2"], ["40", "1000", "10000"], "halo + allreduce, 4 functions per step"),
    ("halo-cxx", "halo_slow.cpp", ["-O3"], ["40", "1000", "10000"], "C++ -O3: inlined methods, still instrumented"),
    ("halo-f08", "halo_slow_f08.f90", ["-O2"], ["40", "1000", "10000"], "Fortran mpi_f08 module procedures"),
    ("tiny-calls", "tiny_calls.c", ["-O2"], ["3000000"], "3 M calls of a 2-instruction function (worst case)"),
]


def _compiler(source: str, mpicc: str) -> str:
    if source.endswith(".cpp"):
        return mpicc.replace("mpicc", "mpicxx")
    if source.endswith(".f90"):
        return mpicc.replace("mpicc", "mpifort")
    return mpicc


def _build(source: str, flags: list[str], out: Path, mpicc: str, instrument: bool) -> str:
    argv = [_compiler(source, mpicc), *flags, "-g", "-o", str(out), str(PROGRAMS / source)]
    if instrument:
        argv = instrumented_argv(argv[:1], argv[1:])
    subprocess.run(argv, check=True, timeout=300, cwd=out.parent, capture_output=True)
    return str(out)


def _plain_run(tc, n: int, argv: list[str]) -> float:  # noqa: ANN001
    cmd, env = launch_command(tc, n, argv, {})
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=900)
    return time.perf_counter() - t


def _per_call(tc, tmpd: Path, reps: int) -> None:  # noqa: ANN001
    """CPU cost of the hooks per instrumented call (one rank, 3 M calls of a trivial function, best of reps)."""
    import re

    plain = _build("tiny_calls.c", ["-O2"], tmpd / "pc-plain", tc.mpicc, False)
    inst = _build("tiny_calls.c", ["-O2"], tmpd / "pc-inst", tc.mpicc, True)
    n = "3000000"

    def ns(text: str) -> float:
        return float(re.search(r"tiny-ns-per-call ([0-9.]+)", text).group(1))

    res: dict[str, list[float]] = {m: [] for m in ("plain", "inst-off", "inst", "inst-all")}
    for rep in range(reps):
        for mode, exe in (("plain", plain), ("inst-off", inst)):
            cmd, env = launch_command(tc, 1, [exe, n], {})
            res[mode].append(ns(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stderr))
        for mode, min_call in (("inst", None), ("inst-all", 0.0)):
            err = tmpd / f"pc-{mode}-{rep}.err"
            with open(err, "w") as fe, open(os.devnull, "w") as fo:
                record([inst, n], nprocs=1, min_call=min_call, outdir=tmpd / f"pc-{mode}-{rep}", outputs=(),
                       stdout=fo, stderr=fe, timeout=900)  # fmt: skip
            res[mode].append(ns(err.read_text()))
    base = min(res["plain"])
    print(f"\nper-call cost (one rank, CPU ns per call of a trivial function, best of {reps}): plain {base:.1f} ns;")
    for mode, what in (
        ("inst-off", "instrumented, not recorded (glibc's empty hooks)"),
        ("inst", "recorded, default filter (calls dropped, then the function switched off)"),
        ("inst-all", "recorded, --min-call 0 (an Enter and a Leave record per call)"),
    ):
        print(f"  {mode:<9} {min(res[mode]):7.1f} ns  (+{min(res[mode]) - base:.1f} ns per call)  {what}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="case names to run")
    args = ap.parse_args()
    for k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "OMPI_MCA_rmaps_base_oversubscribe"):
        os.environ.setdefault(k, "1")
    tc = find_toolchain("openmpi")
    build_library(tc)
    print(
        f"{args.ranks} ranks on {os.cpu_count()} cores, best of {args.reps} alternating runs; load {os.getloadavg()[0]:.2f}"
    )
    modes = ("plain", "inst-off", "sampled", "inst", "inst-all")
    head = f"{'program':<11}" + "".join(f"{m:>10}" for m in modes) + f"{'user events/rank':>18}  what"
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory(prefix="perflow-inst-") as tmp:
        tmpd = Path(tmp)
        for name, source, flags, pargs, what in CASES:
            if args.only and name not in args.only:
                continue
            plain = _build(source, flags, tmpd / f"{name}-plain", tc.mpicc, False)
            inst = _build(source, flags, tmpd / f"{name}-inst", tc.mpicc, True)
            _plain_run(tc, args.ranks, [plain, *pargs])  # warm-up (page cache, MPI start-up)
            times: dict[str, list[float]] = {m: [] for m in modes}
            nuser: dict[str, list[float]] = {"inst": [], "inst-all": []}
            for rep in range(args.reps):
                times["plain"].append(_plain_run(tc, args.ranks, [plain, *pargs]))
                times["inst-off"].append(_plain_run(tc, args.ranks, [inst, *pargs]))
                for mode, exe, min_call in (("sampled", plain, None), ("inst", inst, None), ("inst-all", inst, 0.0)):
                    with open(os.devnull, "w") as dn:
                        res = record(
                            [exe, *pargs],
                            nprocs=args.ranks,
                            min_call=min_call,
                            outdir=tmpd / f"{name}-{mode}-{rep}",
                            outputs=(),
                            timeout=900,
                            stdout=dn,
                            stderr=dn,
                        )
                    times[mode].append(res.elapsed)
                    if mode in nuser:
                        raw = res.raw
                        user = raw.regions["paradigm"].to_numpy()[raw.region_events["region"]] == "user"
                        nuser[mode].append(float(user.sum()) / args.ranks)
            base = min(times["plain"])
            cells = "".join(
                f"{min(times[m]):7.2f} s " if m == "plain" else f"{100 * (min(times[m]) / base - 1):+8.0f}% "
                for m in modes
            )
            ev = f"{statistics.median(nuser['inst']):,.0f} / {statistics.median(nuser['inst-all']):,.0f}"
            print(f"{name:<11}{cells}{ev:>18}  {what}")
        if not args.only or "per-call" in args.only:
            _per_call(tc, tmpd, args.reps)
    print("\nplain: wall time of the whole launched run; the others: overhead against it (fastest runs compared).")
    print("user events/rank: user-function Enter+Leave records per rank with the default filter / with --min-call 0.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
