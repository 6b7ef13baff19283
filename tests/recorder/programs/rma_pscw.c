/* General active target synchronisation with a late post: rank 0 exposes its window to all other ranks
 * (MPI_Win_post ... MPI_Win_wait) after running slow_compute() each iteration; the other ranks open an
 * access epoch to rank 0 at once (MPI_Win_start), put COUNT ints and close it (MPI_Win_complete), so
 * they wait for the post (Scalasca's Late Post) for about slow_compute's duration, which the program
 * measures and prints.
 *
 * usage: rma_pscw [iterations] [extra]
 * prints: "rma_pscw: <ranks> ranks, <iterations> iterations, put <bytes> bytes per origin, slow <seconds> s"
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 2048
#define COUNT 512

static double u[N + 2];
static int buf[COUNT];

__attribute__((noinline)) static double slow_compute(long sweeps) { /* SITE:pscw_slow_begin */
    double r = 0;
    for (long s = 0; s < sweeps; s++)
        for (int i = 1; i <= N; i++) r += 1.0 / (1.0 + u[i] * u[i] + (double)s);
    return r;
} /* SITE:pscw_slow_end */

int main(int argc, char **argv) {
    int rank, size, zero = 0;
    double slow_time = 0, res = 0;
    MPI_Win win;
    MPI_Group world, target, origins;
    int *base;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 8;
    long extra = argc > 2 ? atol(argv[2]) : 36000;
    for (int i = 0; i <= N + 1; i++) u[i] = (double)i / N;
    for (int i = 0; i < COUNT; i++) buf[i] = rank * i;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &zero, &target);
    MPI_Group_excl(world, 1, &zero, &origins);
    MPI_Win_allocate((MPI_Aint)(size * COUNT * sizeof(int)), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                     &win);
    for (int it = 0; it < iters; it++) {
        if (rank == 0) {
            double t = MPI_Wtime();
            res += 1e-9 * slow_compute(extra); /* SITE:pscw_slow_call */
            slow_time += MPI_Wtime() - t;
            MPI_Win_post(origins, 0, win); /* SITE:pscw_post */
            MPI_Win_wait(win);
        } else {
            MPI_Win_start(target, 0, win); /* SITE:pscw_start */
            MPI_Put(buf, COUNT, MPI_INT, 0, (MPI_Aint)rank * COUNT, COUNT, MPI_INT, win);
            MPI_Win_complete(win); /* SITE:pscw_complete */
        }
    }
    MPI_Win_free(&win);
    MPI_Group_free(&origins);
    MPI_Group_free(&target);
    MPI_Group_free(&world);
    if (rank == 0)
        printf("rma_pscw: %d ranks, %d iterations, put %ld bytes per origin, slow %.6f s (%g)\n", size, iters,
               (long)iters * COUNT * (long)sizeof(int), slow_time, res);
    MPI_Finalize();
    return 0;
}
