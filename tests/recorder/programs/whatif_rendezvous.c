/* A large message to a late receiver: rank 0 computes and sends 8 MiB to rank 1 each iteration; rank 1
 * computes longer (late_work) before it posts the receive, so rank 0 waits in MPI_Send (rendezvous).
 * Built with -DFIXED late_work is six times shorter: rank 0's own work then sets the pace.
 *
 * usage: whatif_rendezvous [iterations] [work_ms] [late_ms] */
#include <stdlib.h>

#include "whatif.h"

#define COUNT (1 << 20) /* doubles: 8 MiB */

__attribute__((noinline)) static double work(double ms) { return spin(1e-3 * ms, 1e-9); }
__attribute__((noinline)) static double late_work(double ms) { return spin(1e-3 * ms, 2e-9); }

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iters = argc > 1 ? atoi(argv[1]) : 10;
    double w = argc > 2 ? atof(argv[2]) : 15, late = argc > 3 ? atof(argv[3]) : 45;
#ifdef FIXED
    late /= 6;
#endif
    double *buf = calloc(COUNT, sizeof(double)), x = 0;
    double t0 = whatif_start();
    for (int it = 0; it < iters; it++) {
        if (rank == 0) {
            buf[0] = work(w);
            MPI_Send(buf, COUNT, MPI_DOUBLE, 1, it, MPI_COMM_WORLD);
        } else if (rank == 1) {
            x += late_work(late);
            MPI_Recv(buf, COUNT, MPI_DOUBLE, 0, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    whatif_stop(t0, "whatif_rendezvous");
    free(buf);
    MPI_Finalize();
    return x < 0;
}
