/* One function made slow on one rank every third iteration: every rank runs step_work() and an
 * allreduce; rank SLOW also runs spiky_work() when the iteration is a multiple of three.
 * usage: every_third [iterations] [work units] [extra units] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "work.h"

#define SLOW 1

__attribute__((noinline)) static double step_work(long units) {
    double r = 2.0;
    WORK(r, units);
    return r;
}

__attribute__((noinline)) static double spiky_work(long units) { /* SITE:et_spiky_begin */
    double r = 3.0;
    WORK(r, units);
    return r;
} /* SITE:et_spiky_end */

int main(int argc, char **argv) {
    int rank, iters = argc > 1 ? atoi(argv[1]) : 9;
    long units = argc > 2 ? atol(argv[2]) : 10, extra = argc > 3 ? atol(argv[3]) : 120;
    double r, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int it = 0; it < iters; it++) {
        r = step_work(units);
        if (rank == SLOW && it % 3 == 0) r += spiky_work(extra);
        MPI_Allreduce(&r, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    if (rank == 0) printf("every_third: %d iterations, sum %g\n", iters, sum);
    MPI_Finalize();
    return 0;
}
