/* A slow leaf in a call chain that -O2 inlines: solve() -> assemble() -> leaf_kernel(), all static and
 * inlined into main; leaf_kernel() does more work on rank SLOW. The recorder names the leaf from the
 * DWARF inline chain of the sampled addresses. usage: inlined [iterations] [work units] [extra units] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "work.h"

#define SLOW 3

static inline __attribute__((always_inline)) double leaf_kernel(double x, long units) { /* SITE:in_leaf_begin */
    double r = x;
    WORK(r, units);
    return r;
} /* SITE:in_leaf_end */

static inline __attribute__((always_inline)) double assemble(double x, long units) {
    return leaf_kernel(x, units) + 1.0;
}

static inline __attribute__((always_inline)) double solve(double x, long units) { return assemble(x, units) * 0.5; }

int main(int argc, char **argv) {
    int rank, iters = argc > 1 ? atoi(argv[1]) : 6;
    long units = argc > 2 ? atol(argv[2]) : 10, extra = argc > 3 ? atol(argv[3]) : 80;
    double r, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int it = 0; it < iters; it++) {
        r = solve((double)it, rank == SLOW ? units + extra : units);
        MPI_Allreduce(&r, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    if (rank == 0) printf("inlined: %d iterations, sum %g\n", iters, sum);
    MPI_Finalize();
    return 0;
}
