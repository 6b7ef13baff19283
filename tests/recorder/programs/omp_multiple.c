/* MPI_THREAD_MULTIPLE: both OpenMP threads of each rank exchange messages with the neighbour ranks at the
 * same time (Irecv, Isend, Waitall; thread t uses tag t), so that the recorder's request bookkeeping of two
 * threads interleaves. Usage: omp_multiple [iterations]  (prints "messages N" per thread on rank 0) */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int provided, rank, size, n = argc > 1 ? atoi(argv[1]) : 200;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num(), peer = (rank + 1) % size, from = (rank + size - 1) % size, bad = 0;
        for (int i = 0; i < n; i++) {
            int x = i, y = -1;
            MPI_Request r[2];
            MPI_Irecv(&y, 1, MPI_INT, from, t, MPI_COMM_WORLD, &r[0]);
            MPI_Isend(&x, 1, MPI_INT, peer, t, MPI_COMM_WORLD, &r[1]);
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
            bad += y != i;
        }
        if (rank == 0) printf("provided %d thread %d messages %d wrong %d\n", provided, t, n, bad);
    }
    MPI_Finalize();
    return 0;
}
