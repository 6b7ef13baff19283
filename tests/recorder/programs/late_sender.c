/* A deliberate late sender: rank 0 computes DELAY seconds before each send to
 * rank 1, which posts its receive at once (tag 3, 8 ints). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

__attribute__((noinline)) static double delay(double sec) {
    volatile double x = 0;
    double t0 = now();
    while (now() - t0 < sec) x += 1.0;
    return x;
}

int main(int argc, char **argv) {
    int rank, data[8] = {0}, iter = argc > 1 ? atoi(argv[1]) : 3;
    double d = argc > 2 ? atof(argv[2]) : 0.05;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < iter; it++) {
        if (rank == 0) {
            delay(d);
            data[0] = it;
            MPI_Send(data, 8, MPI_INT, 1, 3, MPI_COMM_WORLD); /* SITE:late_send */
        } else if (rank == 1) {
            MPI_Recv(data, 8, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* SITE:early_recv */
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 1) printf("late_sender: received %d messages, last %d\n", iter, data[0]);
    MPI_Finalize();
    return 0;
}
