/* Ring with a non-blocking halo exchange: each rank sends N doubles to its right
 * neighbour (tag 7) and receives from its left one (posted with MPI_ANY_SOURCE),
 * ITER times, then computes.
 * Arguments: ITER N [persistent] (the last: with MPI_Send_init/Recv_init/Startall). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double relax(double *u, int n) {
    double s = 0;
    for (int k = 0; k < 200; k++)
        for (int i = 1; i < n - 1; i++) {
            u[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
            s += u[i];
        }
    return s;
}

static void halo(double *send, double *recv, int n, int left, int right) {
    MPI_Request req[2];
    (void)left; /* only the left neighbour sends us tag 7: receive from any source */
    MPI_Irecv(recv, n, MPI_DOUBLE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &req[0]); /* SITE:halo_irecv */
    MPI_Isend(send, n, MPI_DOUBLE, right, 7, MPI_COMM_WORLD, &req[1]); /* SITE:halo_isend */
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE); /* SITE:halo_waitall */
}

#include "bench.h"

static void halo_persistent(double *send, double *recv, int n, int left, int right, int iter, double *s) {
    MPI_Request req[2];
    MPI_Recv_init(recv, n, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, &req[0]); /* SITE:recv_init */
    MPI_Send_init(send, n, MPI_DOUBLE, right, 7, MPI_COMM_WORLD, &req[1]); /* SITE:send_init */
    for (int it = 0; it < iter; it++) {
        MPI_Startall(2, req); /* SITE:startall */
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        *s += relax(recv, n);
    }
    MPI_Request_free(&req[0]);
    MPI_Request_free(&req[1]);
}

int main(int argc, char **argv) {
    int rank, size, iter = argc > 1 ? atoi(argv[1]) : 20, n = argc > 2 ? atoi(argv[2]) : 1000;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n), s = 0;
    for (int i = 0; i < n; i++) a[i] = rank + i * 1e-3;
    double t0 = bench_mark();
    if (argc > 3 && argv[3][0] == 'p') {
        halo_persistent(a, b, n, (rank + size - 1) % size, (rank + 1) % size, iter, &s);
    } else {
        for (int it = 0; it < iter; it++) {
            halo(a, b, n, (rank + size - 1) % size, (rank + 1) % size);
            s += relax(b, n);
        }
    }
    bench_report(t0);
    double tot;
    MPI_Reduce(&s, &tot, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("ring: %d ranks, %d exchanges, checksum %.6e\n", size, iter, tot);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
