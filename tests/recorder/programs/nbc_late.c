/* Non-blocking collectives with one late rank: each iteration, the last rank
 * computes DELAY seconds longer before MPI_Iallreduce; every rank then waits
 * for the result in MPI_Wait. Then an MPI_Ibarrier completed by MPI_Test in
 * a loop, and two overlapping MPI_Ibcast completed in reverse order by
 * MPI_Waitall.  usage: nbc_late [iterations] [delay_seconds] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double spin(double seconds) { /* busy work for `seconds` of wall time */
    double t0 = MPI_Wtime(), x = 0;
    while (MPI_Wtime() - t0 < seconds) x += 1e-9;
    return x;
}

int main(int argc, char **argv) {
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 3;
    double delay = argc > 2 ? atof(argv[2]) : 0.2;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double s = 0, tot = 0;
    for (int it = 0; it < iters; it++) {
        MPI_Request rq;
        s = spin(0.01 + (rank == size - 1 ? delay : 0.0));
        MPI_Iallreduce(&s, &tot, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq); /* SITE:iallreduce */
        MPI_Wait(&rq, MPI_STATUS_IGNORE);                                       /* SITE:wait */
    }
    MPI_Request rb;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &rb);
    while (!done) MPI_Test(&rb, &done, MPI_STATUS_IGNORE);
    int a = rank, b = 2 * rank;
    MPI_Request two[2];
    MPI_Ibcast(&a, 1, MPI_INT, 0, MPI_COMM_WORLD, &two[0]);
    MPI_Ibcast(&b, 1, MPI_INT, size - 1, MPI_COMM_WORLD, &two[1]);
    MPI_Request rev[2] = {two[1], two[0]};
    MPI_Waitall(2, rev, MPI_STATUSES_IGNORE);
    if (rank == 0) printf("nbc_late: %d ranks, sum %.3g, a %d b %d\n", size, tot, a, b);
    MPI_Finalize();
    return 0;
}
