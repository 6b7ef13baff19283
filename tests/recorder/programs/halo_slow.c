/* A 1-D halo exchange followed by an allreduce, with one function made slow
 * on one rank: every rank runs relax() each iteration; rank SLOW_RANK also
 * runs slow_compute(), whose extra work is an argument (so the smallest
 * imbalance an analysis still finds can be measured).
 *
 * usage: halo_slow [iterations] [work] [extra] [slow_rank]
 *   work:  inner sweeps of relax() per iteration (all ranks)
 *   extra: inner sweeps of slow_compute() per iteration (slow rank only)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 2048

static double u[N + 2], v[N + 2];

__attribute__((noinline)) static void halo(int left, int right) {
    MPI_Request rq[4];
    MPI_Irecv(&u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &rq[0]);
    MPI_Irecv(&u[N + 1], 1, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &rq[1]);
    MPI_Isend(&u[1], 1, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &rq[2]);
    MPI_Isend(&u[N], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &rq[3]);
    MPI_Waitall(4, rq, MPI_STATUSES_IGNORE); /* SITE:c_waitall */
}

__attribute__((noinline)) static double relax(long sweeps) {
    double r = 0;
    for (long s = 0; s < sweeps; s++) {
        for (int i = 1; i <= N; i++) v[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
        for (int i = 1; i <= N; i++) r += v[i] - u[i];
    }
    return r;
}

__attribute__((noinline)) static double slow_compute(long sweeps) { /* SITE:c_slow_begin */
    double r = 0;
    for (long s = 0; s < sweeps; s++)
        for (int i = 1; i <= N; i++) r += 1.0 / (1.0 + u[i] * u[i] + (double)s);
    return r;
} /* SITE:c_slow_end */

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 10;
    long work = argc > 2 ? atol(argv[2]) : 1000, extra = argc > 3 ? atol(argv[3]) : 40000;
    int slow = argc > 4 ? atoi(argv[4]) : size - 1;
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    for (int i = 0; i <= N + 1; i++) u[i] = (double)(rank * N + i) / (size * N);
    double res = 0, tot = 0;
    for (int it = 0; it < iters; it++) {
        halo(left, right);
        res = relax(work);
        if (rank == slow) res += 1e-9 * slow_compute(extra); /* SITE:c_slow_call */
        MPI_Allreduce(&res, &tot, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE:c_allreduce */
    }
    if (rank == 0) printf("halo_slow: %d ranks, %d iterations, residual %.6e\n", size, iters, tot);
    MPI_Finalize();
    return 0;
}
