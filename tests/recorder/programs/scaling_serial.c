/* Strong scaling with a non-scalable part, for the scalana flow.
 *
 * Every iteration each rank computes its share of a fixed amount of work
 * (compute_block: work_ms / size milliseconds, so it scales), rank 0
 * gathers one value from every rank and merges them one by one
 * (merge_results: merge_ms per rank, so its cost grows with the number of
 * processes), then broadcasts the result: the other ranks wait in
 * MPI_Bcast for rank 0's serial merge.
 *
 * The work is timed waiting (nanosleep), not arithmetic: with 8 ranks on 2
 * shared cores, computing ranks would share the cores and the parallel part
 * would not shrink with the process count; sleeping ranks behave as if each
 * had a core of its own.
 *
 * usage: scaling_serial [iterations] [work_ms] [merge_ms]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((always_inline, no_instrument_function)) static inline void spend(double ms) {
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000.0);
    ts.tv_nsec = (long)((ms - 1000.0 * (double)ts.tv_sec) * 1e6);
    while (nanosleep(&ts, &ts) != 0) {
    }
}

__attribute__((noinline)) static double compute_block(double ms, int rank) {
    spend(ms);
    return 1.0 + rank;
}

__attribute__((noinline)) static double merge_results(const double *parts, int n, double ms) { /* SITE:merge_begin */
    double acc = 0;
    for (int r = 0; r < n; r++) {
        spend(ms); /* one merge step per rank: the serial cost grows with the process count */
        acc += parts[r];
    }
    return acc;
} /* SITE:merge_end */

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 4;
    double work = argc > 2 ? atof(argv[2]) : 200.0, merge = argc > 3 ? atof(argv[3]) : 8.0;
    double *parts = malloc(sizeof(double) * (size_t)size);
    double total = 0;
    for (int it = 0; it < iters; it++) {
        double part = compute_block(work / size, rank), merged = 0;
        MPI_Gather(&part, 1, MPI_DOUBLE, parts, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (rank == 0) merged = merge_results(parts, size, merge); /* SITE:merge_call */
        MPI_Bcast(&merged, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); /* SITE:bcast */
        total += merged;
    }
    if (rank == 0) printf("scaling_serial: %d ranks, %d iterations, total %.1f\n", size, iters, total);
    free(parts);
    MPI_Finalize();
    return 0;
}
