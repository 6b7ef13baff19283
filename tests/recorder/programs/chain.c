/* Delay that propagates along a chain: rank 0 runs origin_work() and then sends to rank 1, which waits
 * for it before sending to rank 2, which waits in turn; rank 3 waits at the barrier that ends each
 * iteration. usage: chain [iterations] [work units] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "work.h"

__attribute__((noinline)) static double origin_work(long units) { /* SITE:ch_work_begin */
    double r = 4.0;
    WORK(r, units);
    return r;
} /* SITE:ch_work_end */

int main(int argc, char **argv) {
    int rank, iters = argc > 1 ? atoi(argv[1]) : 4;
    long units = argc > 2 ? atol(argv[2]) : 120;
    double x[64] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int it = 0; it < iters; it++) {
        if (rank == 0) {
            x[0] = origin_work(units);
            MPI_Send(x, 64, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD);
        } else if (rank == 1) {
            MPI_Recv(x, 64, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(x, 64, MPI_DOUBLE, 2, 2, MPI_COMM_WORLD);
        } else if (rank == 2) {
            MPI_Recv(x, 64, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 2) printf("chain: %d iterations, %g\n", iters, x[0]);
    MPI_Finalize();
    return 0;
}
