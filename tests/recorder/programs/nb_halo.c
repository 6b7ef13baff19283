/* A non-blocking halo exchange (Isend/Irecv/Waitall with both neighbours of a ring), an allreduce and a
 * broadcast on a sub-communicator (even and odd ranks), where rank SLOW computes three times longer in
 * compute(). usage: nb_halo [iterations] [work units] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "work.h"

#define SLOW 2
#define H 1024

static double halo_out[2][H], halo_in[2][H];

__attribute__((noinline)) static double compute(long units) { /* SITE:nb_compute_begin */
    double r = halo_in[0][0] + 1.0;
    WORK(r, units);
    return r;
} /* SITE:nb_compute_end */

__attribute__((noinline)) static void exchange(int left, int right) {
    MPI_Request rq[4];
    MPI_Irecv(halo_in[0], H, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &rq[0]);
    MPI_Irecv(halo_in[1], H, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &rq[1]);
    MPI_Isend(halo_out[1], H, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &rq[2]);
    MPI_Isend(halo_out[0], H, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &rq[3]);
    MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
}

int main(int argc, char **argv) {
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 6;
    long units = argc > 2 ? atol(argv[2]) : 40;
    double r, sum = 0, b = 0;
    MPI_Comm half;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    for (int it = 0; it < iters; it++) {
        exchange(left, right);
        r = compute(rank == SLOW ? 3 * units : units);
        MPI_Allreduce(&r, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        b = sum;
        MPI_Bcast(&b, 1, MPI_DOUBLE, 0, half);
        halo_out[0][0] = halo_out[1][0] = b * 1e-9;
    }
    if (rank == 0) printf("nb_halo: %d iterations, sum %g\n", iters, b);
    MPI_Comm_free(&half);
    MPI_Finalize();
    return 0;
}
