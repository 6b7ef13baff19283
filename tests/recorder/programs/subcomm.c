/* A sub-communicator: split the world into even and odd ranks; in each half,
 * rank 1 broadcasts, everyone allreduces, and rank 0 sends to rank 1 (tag 5).
 * Exits with status EXIT (argument 1, default 0) after MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int wrank, wsize, rank, size, code = argc > 1 ? atoi(argv[1]) : 0;
    MPI_Comm half;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half); /* SITE:split */
    MPI_Comm_rank(half, &rank);
    MPI_Comm_size(half, &size);
    int v = wrank * 10, sum = 0;
    MPI_Bcast(&v, 1, MPI_INT, 1 % size, half); /* SITE:bcast */
    MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, half); /* SITE:sub_allreduce */
    if (size > 1 && rank == 0) MPI_Send(&sum, 1, MPI_INT, 1, 5, half); /* SITE:sub_send */
    if (size > 1 && rank == 1) MPI_Recv(&v, 1, MPI_INT, 0, 5, half, MPI_STATUS_IGNORE);
    MPI_Comm_free(&half);
    if (wrank < 2) printf("subcomm: world rank %d, half %d of %d, sum %d\n", wrank, rank, size, sum);
    fflush(stdout); /* before MPI_Finalize: with a non-zero exit status the launcher may kill the others */
    MPI_Finalize();
    return code;
}
