/* Imbalanced compute before an allreduce: the last rank works SLOW times as
 * long in compute_slow() as the others in compute() (the two differ so that
 * the compiler cannot fold them into one). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) static double compute(long n) {
    double s = 0;
    for (long i = 1; i <= n; i++) s += 1.0 / ((double)i * (double)i);
    return s;
}

__attribute__((noinline)) static double compute_slow(long n) {
    double s = 0;
    for (long i = 1; i <= n; i++) s += 1.0 / ((double)i * (double)i + 1.0);
    return s;
}

#include "bench.h"

int main(int argc, char **argv) {
    int rank, size, iter = argc > 1 ? atoi(argv[1]) : 4;
    long n = argc > 2 ? atol(argv[2]) : 5000000L, slow = argc > 3 ? atol(argv[3]) : 4;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double s = 0, tot = 0, t0 = bench_mark();
    for (int it = 0; it < iter; it++) {
        s = rank == size - 1 ? compute_slow(n * slow) : compute(n);
        MPI_Allreduce(&s, &tot, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE:allreduce */
    }
    bench_report(t0);
    if (rank == 0) printf("imbalance: %d ranks, sum %.12f\n", size, tot);
    MPI_Finalize();
    return 0;
}
