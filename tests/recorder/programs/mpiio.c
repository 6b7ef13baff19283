/* MPI-IO: each rank writes BLOCK doubles at its offset (collectively), reads
 * them back independently, and the last rank also writes with
 * MPI_File_write.  usage: mpiio FILE [block] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, n = argc > 2 ? atoi(argv[2]) : 1000;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double *buf = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) buf[i] = rank + i;
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    MPI_Offset off = (MPI_Offset)rank * n * sizeof(double);
    MPI_File_write_at_all(fh, off, buf, n, MPI_DOUBLE, MPI_STATUS_IGNORE); /* SITE:write_at_all */
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_read_at(fh, off, buf, n / 2, MPI_DOUBLE, MPI_STATUS_IGNORE); /* SITE:read_at */
    if (rank == size - 1) {
        MPI_File_seek(fh, (MPI_Offset)size * n * sizeof(double), MPI_SEEK_SET);
        MPI_File_write(fh, buf, 10, MPI_DOUBLE, MPI_STATUS_IGNORE);
    }
    MPI_File_close(&fh);
    if (rank == 0) printf("mpiio: %d ranks wrote %d doubles each\n", size, n);
    free(buf);
    MPI_Finalize();
    return 0;
}
