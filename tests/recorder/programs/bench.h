/* Shared by the C test programs: a timer for benchmarks/bench_recorder_overhead.py. */
#ifndef PERFLOW_TEST_BENCH_H
#define PERFLOW_TEST_BENCH_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Benchmarks (benchmarks/bench_recorder_overhead.py) set PERFLOW_BENCH: rank 0
 * then prints the main phase's wall and CPU time, between two barriers, to stderr. */
static double bench_cpu0;

static double bench_mark(void) {
    struct timespec ts;
    if (!getenv("PERFLOW_BENCH")) return 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    bench_cpu0 = ts.tv_sec + 1e-9 * ts.tv_nsec;
    return MPI_Wtime();
}

static void bench_report(double t0) {
    int rank;
    struct timespec ts;
    if (!getenv("PERFLOW_BENCH")) return;
    double c0 = bench_cpu0, t1 = bench_mark();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) fprintf(stderr, "bench-seconds %.6f cpu %.6f\n", t1 - t0, ts.tv_sec + 1e-9 * ts.tv_nsec - c0);
}

#endif
