/* A two-stage pipeline: rank 0 produces items and sends each to rank 1, which consumes it. Built with
 * -DFIXED the producer is four times faster: the run gets faster only until the consumer sets the pace.
 *
 * usage: whatif_pipeline [items] [produce_ms] [consume_ms] */
#include <stdlib.h>

#include "whatif.h"

__attribute__((noinline)) static double produce(double ms) { return spin(1e-3 * ms, 1e-9); }
__attribute__((noinline)) static double consume(double ms) { return spin(1e-3 * ms, 2e-9); }

int main(int argc, char **argv) {
    int rank;
    double item[128] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int n = argc > 1 ? atoi(argv[1]) : 12;
    double p = argc > 2 ? atof(argv[2]) : 40, c = argc > 3 ? atof(argv[3]) : 20;
#ifdef FIXED
    p *= 0.25;
#endif
    double t0 = whatif_start(), x = 0;
    for (int k = 0; k < n; k++) {
        if (rank == 0) {
            item[0] = produce(p);
            MPI_Send(item, 128, MPI_DOUBLE, 1, k, MPI_COMM_WORLD);
        } else if (rank == 1) {
            MPI_Recv(item, 128, MPI_DOUBLE, 0, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            x += consume(c) + item[0];
        }
    }
    whatif_stop(t0, "whatif_pipeline");
    MPI_Finalize();
    return x < 0;
}
