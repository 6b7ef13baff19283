"""Overhead of ``perflow record`` on the project's own MPI test programs.

Runs each program plain and recorded (sampling at the recorder's default rate
plus communication tracing), alternating, and compares the main phase's wall time, which the
programs print on rank 0 when ``PERFLOW_BENCH`` is set (between two barriers,
so MPI start-up and the launcher are excluded), and rank 0's CPU time over the
same phase, which is much less sensitive to other load on the machine. Also prints the recorder's
events per rank and second, its data per rank, and the time and peak memory of
the post-processing (assembly, raw trace, PAG).

Usage::

    python benchmarks/bench_recorder_overhead.py [--ranks 4] [--reps 5] [--only NAME ...]

Needs an MPI compiler wrapper (Open MPI preferred) and, for the Python
program, mpi4py. Run it on an otherwise idle machine; it takes a few minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from perflow.recorder.session import DEFAULT_SAMPLE_RATE, launch_command, record  # noqa: E402
from perflow.recorder.toolchain import build_library, find_toolchain  # noqa: E402

PROGRAMS = REPO / "tests" / "recorder" / "programs"

#: name, source, arguments, what it stresses
CASES = [
    ("imbalance", "imbalance.c", ["40", "5000000", "2"], "compute, one allreduce per step (communication-light)"),
    ("ring", "ring.c", ["400", "1000"], "halo exchange (Irecv/Isend/Waitall) every ~0.5 ms of compute"),
    ("pingpong", "pingpong.c", ["20000", "64"], "back-to-back 64-byte messages (communication-bound)"),
    ("pyring", "pyring.py", ["60", "0", "150000"], "mpi4py: ring exchange (6 calls) per ~10 ms of Python compute"),
    ("pyring-busy", "pyring.py", ["300", "0", "20000"], "mpi4py: the same every ~1.5 ms (communication-heavy)"),
]


def _bench_seconds(text: str, what: str) -> tuple[float, float]:
    """(wall, CPU) seconds of the main phase on rank 0."""
    m = re.search(r"bench-seconds ([0-9.]+) cpu ([0-9.]+)", text)
    if not m:
        raise RuntimeError(f"{what}: no bench-seconds line in its output:\n{text[-2000:]}")
    return float(m.group(1)), float(m.group(2))


#: one rank sends to itself: Irecv + Send + Wait, N times; prints CPU ns per iteration
_CALLS_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200000, a = 1, b = 0;
    struct timespec t0, t1;
    MPI_Request r;
    MPI_Init(&argc, &argv);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    for (int i = 0; i < n; i++) {
        MPI_Irecv(&b, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r);
        MPI_Send(&a, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    fprintf(stderr, "per-iteration-ns %.1f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
    MPI_Finalize();
    return 0;
}
"""
#: one rank puts into its own window and flushes, N times, in a lock_all epoch; prints CPU ns per iteration
_CALLS_RMA_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200000, a = 1, *base;
    struct timespec t0, t1;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_lock_all(0, win);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    for (int i = 0; i < n; i++) {
        MPI_Put(&a, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
        MPI_Win_flush(0, win);
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    fprintf(stderr, "per-iteration-ns %.1f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
"""
_CALLS_PY = """
import sys, time
import numpy as np
from mpi4py import MPI
comm, a, b, n = MPI.COMM_WORLD, np.zeros(1), np.zeros(1), int(sys.argv[1])
c = time.process_time()
for _ in range(n):
    r = comm.Irecv(b, source=0, tag=1)
    comm.Send(a, dest=0, tag=1)
    r.Wait()
print(f"per-iteration-ns {(time.process_time() - c) / n * 1e9:.1f}", file=sys.stderr)
"""


def _call_costs(tc, tmpd: Path, reps: int) -> None:  # noqa: ANN001
    """Per-call cost of the recorder: one rank, two or three MPI calls per iteration, best of ``reps``."""
    for name, text in (("calls", _CALLS_C), ("rma", _CALLS_RMA_C)):
        src = tmpd / f"{name}.c"
        src.write_text(text)
        subprocess.run([tc.mpicc, "-O2", "-o", str(tmpd / name), str(src)], check=True, timeout=120)
    (tmpd / "calls.py").write_text(_CALLS_PY)
    # name, command, MPI calls per iteration, what they are
    cases = [
        ("C", [str(tmpd / "calls"), "200000"], 3, "Irecv+Send+Wait to itself"),
        ("C one-sided", [str(tmpd / "rma"), "200000"], 2, "Put+Win_flush to itself in a lock_all epoch"),
    ]
    try:
        import mpi4py  # noqa: F401

        cases.append(("Python", [sys.executable, str(tmpd / "calls.py"), "20000"], 3, "Irecv+Send+Wait to itself"))
    except ImportError:
        pass
    for lang, argv, ncalls, what in cases:
        plain, rec = [], []
        for rep in range(reps):
            cmd, env = launch_command(tc, 1, argv, {})
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            plain.append(float(re.search(r"per-iteration-ns ([0-9.]+)", p.stderr).group(1)))
            err = tmpd / f"calls-{lang.replace(' ', '-')}-{rep}.err"
            with open(err, "w") as fe, open(os.devnull, "w") as fo:
                record(
                    argv,
                    nprocs=1,
                    outdir=tmpd / f"calls-{lang.replace(' ', '-')}-{rep}",
                    timeout=600,
                    outputs=(),
                    stdout=fo,
                    stderr=fe,
                )
            rec.append(float(re.search(r"per-iteration-ns ([0-9.]+)", err.read_text()).group(1)))
        extra = (min(rec) - min(plain)) / ncalls
        print(
            f"per-call cost ({lang}): {extra / 1000:.2f} us CPU per MPI call (best of {reps}: "
            f"{min(plain) / ncalls / 1000:.2f} us plain, {min(rec) / ncalls / 1000:.2f} us recorded; {what})"
        )


#: one rank computes in a call chain DEPTH deep; prints its CPU time
_SPIN_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static volatile double sink;
__attribute__((noinline)) static double chain(int d, long n) {
    double r = 0;
    if (d > 0) return chain(d - 1, n) * 0.5 + sink;
    for (long i = 0; i < n; i++) r = r * 0.999999 + 1.0 / (1.0 + (double)(i & 1023));
    return r;
}
int main(int argc, char **argv) {
    struct timespec t0, t1;
    MPI_Init(&argc, &argv);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    sink = chain(atoi(argv[1]), atol(argv[2]));
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    fprintf(stderr, "cpu-seconds %.6f\n", (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
    MPI_Finalize();
    return 0;
}
"""


def _sample_costs(tc, tmpd: Path, reps: int) -> None:  # noqa: ANN001
    """CPU cost of one timer sample: one rank computing 1 s in a chain of 12 frames, unsampled and sampled."""
    src = tmpd / "spin.c"
    src.write_text(_SPIN_C)
    exe = tmpd / "spin"
    subprocess.run([tc.mpicc, "-O2", "-g", "-o", str(exe), str(src)], check=True, timeout=120)
    argv = [str(exe), "12", "480000000"]
    for clock, rate in (("wall", DEFAULT_SAMPLE_RATE), ("wall", 1000), ("wall", 4000), ("cpu", 1000)):
        cpu: dict[int, list[float]] = {0: [], rate: []}
        nsmp = []
        for rep in range(reps):
            for hz in (0, rate):
                out = tmpd / f"spin-{clock}-{hz}-{rep}"
                err = out.with_suffix(".err")
                with open(err, "w") as fe, open(os.devnull, "w") as fo:
                    res = record(
                        argv, nprocs=1, sample_rate=hz, sample_clock=clock, outdir=out, timeout=600,
                        outputs=(), stdout=fo, stderr=fe,
                    )  # fmt: skip
                cpu[hz].append(float(re.search(r"cpu-seconds ([0-9.]+)", err.read_text()).group(1)))
                if hz:
                    nsmp.append(len(res.raw.sample_events["time"]) / max(cpu[hz][-1], 1e-9))
        extra = min(cpu[rate]) - min(cpu[0])
        per = extra / (statistics.median(nsmp) * min(cpu[rate])) if nsmp else float("nan")
        print(
            f"sampling {rate} Hz on the {clock} clock: {statistics.median(nsmp):.0f} samples per CPU second, "
            f"{per * 1e6:.1f} us CPU per sample, {100 * extra / min(cpu[0]):+.2f}% CPU (best of {reps}: "
            f"{min(cpu[0]):.3f} s unsampled, {min(cpu[rate]):.3f} s sampled; 12 frames deep)"
        )


def _pct(a: float, b: float) -> str:
    return f"{100 * (a / b - 1):6.1f}%"


def _fmt(xs: list[float]) -> str:
    return ", ".join(f"{x:.3f}" for x in xs)


def _argv(source: str, exe_dir: Path, tc) -> list[str]:  # noqa: ANN001
    if source.endswith(".py"):
        return [sys.executable, str(PROGRAMS / source)]
    exe = exe_dir / Path(source).stem
    subprocess.run([tc.mpicc, "-O2", "-g", "-o", str(exe), str(PROGRAMS / source)], check=True, timeout=120)
    return [str(exe)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument(
        "--rate", type=int, default=DEFAULT_SAMPLE_RATE, help=f"sampling rate in Hz ({DEFAULT_SAMPLE_RATE})"
    )
    ap.add_argument("--only", nargs="*", help="case names to run")
    args = ap.parse_args()

    for k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "OMPI_MCA_rmaps_base_oversubscribe"):
        os.environ.setdefault(k, "1")
    os.environ["PERFLOW_BENCH"] = "1"
    tc = find_toolchain("openmpi")
    t = time.perf_counter()
    lib = build_library(tc)
    print(f"MPI: {tc.impl} ({tc.mpicc}); recorder library {lib} ({time.perf_counter() - t:.2f} s to build or find)")
    print(f"{args.ranks} ranks on {os.cpu_count()} cores, {args.reps} alternating runs each, sampling {args.rate} Hz\n")
    header = (
        f"{'program':<10} {'plain s':>8} {'recorded s':>10} {'wall':>7} {'CPU':>7} {'(median)':>8} "
        f"{'events/rank/s':>14} {'data/rank':>10} {'post s':>7}  what"
    )
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory(prefix="perflow-bench-") as tmp:
        tmpd = Path(tmp)
        for name, source, pargs, what in CASES:
            if args.only and name not in args.only:
                continue
            if source.endswith(".py"):
                try:
                    import mpi4py  # noqa: F401
                except ImportError:
                    print(f"{name:<10} skipped: mpi4py is not installed")
                    continue
            argv = _argv(source, tmpd, tc) + pargs
            plain, rec, post, events, size = [], [], [], [], []
            for rep in range(args.reps):
                cmd, env = launch_command(tc, args.ranks, argv, {})
                p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
                plain.append(_bench_seconds(p.stderr, f"{name} (plain)"))
                out = tmpd / f"{name}-{rep}"
                err = out.with_suffix(".err")
                t0 = time.perf_counter()
                with open(err, "w") as fe, open(os.devnull, "w") as fo:
                    res = record(
                        argv,
                        nprocs=args.ranks,
                        sample_rate=args.rate,
                        outdir=out,
                        timeout=600,
                        outputs=("otf2", "pag"),
                        stdout=fo,
                        stderr=fe,
                    )
                total = time.perf_counter() - t0
                rec.append(_bench_seconds(err.read_text(), f"{name} (recorded)"))
                post.append(total - res.elapsed)
                raw = res.raw
                events.append(raw.n_events / args.ranks / max(rec[-1][0], 1e-9))
                size.append(sum(f.stat().st_size for f in (out / "raw").iterdir()) / args.ranks)
            wp, wr = [x[0] for x in plain], [x[0] for x in rec]
            cp, cr = [x[1] for x in plain], [x[1] for x in rec]
            print(
                f"{name:<10} {min(wp):8.3f} {min(wr):10.3f} {_pct(min(wr), min(wp))} {_pct(min(cr), min(cp))} "
                f"{_pct(statistics.median(wr), statistics.median(wp))} {statistics.median(events):14,.0f} "
                f"{statistics.median(size) / 1024:7.0f} KiB {statistics.median(post):7.2f}  {what}"
            )
            print(f"{'':<10} wall plain {_fmt(wp)}; recorded {_fmt(wr)}")
            print(f"{'':<10} CPU  plain {_fmt(cp)}; recorded {_fmt(cr)}")
        if not args.only or "calls" in args.only:
            print()
            _call_costs(tc, tmpd, args.reps)
        if not args.only or "samples" in args.only:
            print()
            _sample_costs(tc, tmpd, args.reps)
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"\npeak RSS: post-processing (this process) {me:.0f} MiB; largest child process {kids:.0f} MiB")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("plain s / recorded s: fastest main-phase wall time (rank 0, between barriers) of the runs;")
    print("wall, CPU: fastest recorded / fastest plain - 1, of the wall time and of rank 0's CPU time (busy-polling")
    print("MPI waits count as CPU); (median): median recorded / median plain - 1 of the wall time. The fastest run is")
    print("the one least disturbed by other load; on a busy machine the medians are noise.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
