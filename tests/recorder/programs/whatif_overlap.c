/* Two ranks slow at the same time: rank 0 runs slow_a, rank 1 slow_b (shorter), both before an allreduce.
 * Built with -DFIXED, rank 0 no longer runs slow_a: the run gets faster only by the difference, since rank
 * 1's slow_b then sets the pace (subtracting slow_a's time would predict far too much).
 *
 * usage: whatif_overlap [iterations] [work_ms] [a_ms] [b_ms] */
#include <stdlib.h>

#include "whatif.h"

__attribute__((noinline)) static double work(double ms) { return spin(1e-3 * ms, 1e-9); }
__attribute__((noinline)) static double slow_a(double ms) { return spin(1e-3 * ms, 2e-9); }
__attribute__((noinline)) static double slow_b(double ms) { return spin(1e-3 * ms, 3e-9); }

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iters = argc > 1 ? atoi(argv[1]) : 10;
    double w = argc > 2 ? atof(argv[2]) : 5, a = argc > 3 ? atof(argv[3]) : 40, b = argc > 4 ? atof(argv[4]) : 25;
    double t0 = whatif_start(), x = 0, sum = 0;
    for (int it = 0; it < iters; it++) {
        x = work(w);
#ifndef FIXED
        if (rank == 0) x += slow_a(a);
#endif
        if (rank == 1) x += slow_b(b);
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    whatif_stop(t0, "whatif_overlap");
    MPI_Finalize();
    return sum < 0;
}
