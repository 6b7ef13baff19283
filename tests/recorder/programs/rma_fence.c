/* MPI one-sided communication in fence epochs, with one rank late at every fence: each iteration every
 * rank relaxes, puts COUNT doubles into the window of the next rank and closes the epoch with
 * MPI_Win_fence; rank SLOW_RANK first runs slow_compute(), so the others wait at the fence (Scalasca's
 * Wait at Fence) for about its duration, which the program measures and prints.
 *
 * usage: rma_fence [iterations] [extra] [slow_rank]
 *   extra: inner sweeps of slow_compute() per iteration (slow rank only)
 * prints: "rma_fence: <ranks> ranks, <iterations> iterations, put <bytes> bytes per rank, slow <seconds> s"
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 2048
#define COUNT 1000

static double u[N + 2], buf[COUNT];

__attribute__((noinline)) static double relax(long sweeps) {
    double r = 0;
    for (long s = 0; s < sweeps; s++)
        for (int i = 1; i <= N; i++) r += 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
    return r;
}

__attribute__((noinline)) static double slow_compute(long sweeps) { /* SITE:fence_slow_begin */
    double r = 0;
    for (long s = 0; s < sweeps; s++)
        for (int i = 1; i <= N; i++) r += 1.0 / (1.0 + u[i] * u[i] + (double)s);
    return r;
} /* SITE:fence_slow_end */

int main(int argc, char **argv) {
    int rank, size;
    double *base, slow_time = 0, res = 0;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 8;
    long extra = argc > 2 ? atol(argv[2]) : 36000;
    int slow = argc > 3 ? atoi(argv[3]) : size - 1;
    for (int i = 0; i <= N + 1; i++) u[i] = (double)(rank * N + i) / (size * N);
    for (int i = 0; i < COUNT; i++) buf[i] = rank + i;
    MPI_Alloc_mem(COUNT * sizeof(double), MPI_INFO_NULL, &base);
    MPI_Win_create(base, COUNT * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    for (int it = 0; it < iters; it++) {
        res += relax(200);
        if (rank == slow) {
            double t = MPI_Wtime();
            res += 1e-9 * slow_compute(extra); /* SITE:fence_slow_call */
            slow_time += MPI_Wtime() - t;
        }
        MPI_Put(buf, COUNT, MPI_DOUBLE, (rank + 1) % size, 0, COUNT, MPI_DOUBLE, win); /* SITE:fence_put */
        MPI_Win_fence(0, win); /* SITE:fence_fence */
    }
    MPI_Win_free(&win);
    MPI_Free_mem(base);
    MPI_Bcast(&slow_time, 1, MPI_DOUBLE, slow, MPI_COMM_WORLD);
    if (rank == 0)
        printf("rma_fence: %d ranks, %d iterations, put %ld bytes per rank, slow %.6f s (%g)\n", size, iters,
               (long)iters * COUNT * (long)sizeof(double), slow_time, res);
    MPI_Finalize();
    return 0;
}
