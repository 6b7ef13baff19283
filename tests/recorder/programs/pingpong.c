/* Ping-pong between ranks 0 and 1: ITER round trips of BYTES bytes (tags 10 and 11). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

static void ping_pong(int rank, int iter, int bytes, char *buf) {
    for (int i = 0; i < iter; i++) {
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_CHAR, 1, 10, MPI_COMM_WORLD); /* SITE:ping_send */
            MPI_Recv(buf, bytes, MPI_CHAR, 1, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* SITE:ping_recv */
        } else if (rank == 1) {
            MPI_Recv(buf, bytes, MPI_CHAR, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* SITE:pong_recv */
            buf[0]++;
            MPI_Send(buf, bytes, MPI_CHAR, 0, 11, MPI_COMM_WORLD); /* SITE:pong_send */
        }
    }
}

#include "bench.h"

int main(int argc, char **argv) {
    int rank, iter = argc > 1 ? atoi(argv[1]) : 10, bytes = argc > 2 ? atoi(argv[2]) : 1024;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = calloc((size_t)bytes + 1, 1);
    double t0 = bench_mark();
    ping_pong(rank, iter, bytes, buf);
    bench_report(t0);
    if (rank == 0) printf("pingpong: %d round trips of %d bytes, counter %d\n", iter, bytes, buf[0]);
    free(buf);
    MPI_Finalize();
    return 0;
}
