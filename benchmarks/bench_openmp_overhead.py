"""Recording cost per OpenMP (OMPT) event, on one rank.

Builds a small MPI+OpenMP program with clang -fopenmp (LLVM's libomp) and runs it on one rank, plain and
under ``perflow record`` (sampling off, so that only the OMPT callbacks are measured), alternating, ``--reps``
times. The program times each phase itself with the process's CPU clock (all threads) and prints how many
OMPT callbacks the phase makes:

* ``critical``: an empty critical section, one thread (mutex_acquire, _acquired, _released: 3 callbacks,
  6 records: ENTER, ACQUIRE_LOCK, ENTER sblock, LEAVE sblock, RELEASE_LOCK, LEAVE);
* ``lock``: omp_set_lock / omp_unset_lock, one thread (3 callbacks, 6 records);
* ``barrier``: an explicit barrier, one thread (sync_region begin/end: 2 callbacks, 2 records);
* ``task``: an explicit task created and run at a taskwait, one thread (task_create, 2 task_schedule,
  sync_region begin/end: 5 callbacks, 4 records);
* ``fork``: a parallel region of 2 threads doing nothing (parallel begin/end, an implicit task and the
  closing barrier on each thread: 10 callbacks, 12 records).

It prints the CPU time per iteration plain and recorded (best of the runs) and the difference per OMPT
callback. Run:  python benchmarks/bench_openmp_overhead.py [--reps 5] [--iters 200000]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = r"""
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static volatile int sink;
int main(int argc, char **argv) {
    int provided, n = argc > 1 ? atoi(argv[1]) : 100000;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    omp_lock_t lock;
    omp_init_lock(&lock);
    double t;
#pragma omp parallel num_threads(1)
    {
        t = cpu();
        for (int i = 0; i < n; i++) {
#pragma omp critical
            sink++;
        }
        printf("phase critical iterations %d callbacks 3 seconds %.9f\n", n, cpu() - t);
        t = cpu();
        for (int i = 0; i < n; i++) {
            omp_set_lock(&lock);
            sink++;
            omp_unset_lock(&lock);
        }
        printf("phase lock iterations %d callbacks 3 seconds %.9f\n", n, cpu() - t);
        t = cpu();
        for (int i = 0; i < n; i++) {
#pragma omp barrier
        }
        printf("phase barrier iterations %d callbacks 2 seconds %.9f\n", n, cpu() - t);
        t = cpu();
        for (int i = 0; i < n / 4; i++) {
#pragma omp task
            sink++;
#pragma omp taskwait
        }
        printf("phase task iterations %d callbacks 5 seconds %.9f\n", n / 4, cpu() - t);
    }
    t = cpu();
    for (int i = 0; i < n / 20; i++) {
#pragma omp parallel num_threads(2)
        sink++;
    }
    printf("phase fork iterations %d callbacks 10 seconds %.9f\n", n / 20, cpu() - t);
    omp_destroy_lock(&lock);
    MPI_Finalize();
    return 0;
}
"""

_PHASE = re.compile(r"phase (\w+) iterations (\d+) callbacks (\d+) seconds (\S+)")


def _phases(text: str) -> dict[str, tuple[int, int, float]]:
    return {m[1]: (int(m[2]), int(m[3]), float(m[4])) for m in _PHASE.finditer(text)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--iters", type=int, default=200000)
    args = ap.parse_args()
    if not shutil.which("clang"):
        print("clang is not installed (Debian packages clang and libomp-dev)", file=sys.stderr)
        return 1
    from perflow.recorder.session import launch_command, record
    from perflow.recorder.toolchain import find_toolchain

    tc = find_toolchain("openmpi")
    work = Path(tempfile.mkdtemp(prefix="bench-omp-"))
    src, exe = work / "omp_events.c", work / "omp_events"
    src.write_text(PROGRAM)
    env = dict(os.environ, OMPI_CC="clang", MPICH_CC="clang")
    subprocess.run([tc.mpicc, "-O2", "-fopenmp", "-o", str(exe), str(src)], check=True, env=env)
    plain: dict[str, list[float]] = {}
    rec: dict[str, list[float]] = {}
    calls: dict[str, tuple[int, int]] = {}
    for rep in range(args.reps):
        cmd, run_env = launch_command(tc, 1, [str(exe), str(args.iters)], {})
        out = subprocess.run(cmd, env=run_env, capture_output=True, text=True, check=True).stdout
        for k, (n, c, s) in _phases(out).items():
            plain.setdefault(k, []).append(s / n)
            calls[k] = (n, c)
        log = work / f"out-{rep}.txt"
        with open(log, "w") as f:
            res = record([str(exe), str(args.iters)], nprocs=1, sample_rate=0, outdir=work / f"rec-{rep}",
                         outputs=(), stdout=f)  # fmt: skip
        assert res.status == 0, res.notes
        for k, (n, _c, s) in _phases(log.read_text()).items():
            rec.setdefault(k, []).append(s / n)
    print(f"OpenMP recording cost on one rank, CPU time, best of {args.reps} runs ({args.iters} iterations)")
    print(f"{'phase':10s} {'callbacks':>9s} {'plain us/iter':>14s} {'recorded us/iter':>17s} {'cost ns/callback':>17s}")
    for k in plain:
        p, r = min(plain[k]), min(rec[k])
        n, c = calls[k]
        print(f"{k:10s} {c:9d} {1e6 * p:14.3f} {1e6 * r:17.3f} {1e9 * (r - p) / c:17.1f}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
