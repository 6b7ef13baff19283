/* A late receiver of a large message: rank 0 sends 16 MiB (far above every eager limit) to rank 1 with
 * MPI_Send, and rank 1 posts the receive only after late_recv_work(), so the send waits for it. Ranks 2
 * and 3 wait at the barrier that ends each iteration.
 * usage: late_recv [iterations] [work units] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "work.h"

#define NBYTES (16 << 20)

__attribute__((noinline)) static double late_recv_work(long units) { /* SITE:lr_work_begin */
    double r = 1.0;
    WORK(r, units);
    return r;
} /* SITE:lr_work_end */

int main(int argc, char **argv) {
    int rank, iters = argc > 1 ? atoi(argv[1]) : 4;
    long units = argc > 2 ? atol(argv[2]) : 150;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = calloc(NBYTES, 1);
    for (int it = 0; it < iters; it++) {
        if (rank == 0) {
            buf[0] = (char)it;
            MPI_Send(buf, NBYTES, MPI_BYTE, 1, 7, MPI_COMM_WORLD); /* SITE:lr_send */
        } else if (rank == 1) {
            work_sink = late_recv_work(units);
            MPI_Recv(buf, NBYTES, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 1) printf("late_recv: %d messages of %d bytes, last %d\n", iters, NBYTES, buf[0]);
    free(buf);
    MPI_Finalize();
    return 0;
}
