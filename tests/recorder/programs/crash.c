/* A run that does not end well (issue 25): 200 iterations of compute + Allreduce + ring exchange;
 * at iteration CRASH_AT (argv[2], default 150) rank CRASH_RANK (argv[3], default 1) does what argv[1] says:
 *   segv   - dereferences a null pointer (SIGSEGV)
 *   abort  - calls MPI_Abort(MPI_COMM_WORLD, 3)
 *   hang   - says so on stdout, then spins forever (for --timeout and an interrupted perflow record)
 *   none   - nothing: the run ends normally. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double work(int n) {
    volatile double s = 0;
    for (int i = 0; i < n; i++) s += (double)i * 1e-9;
    return s;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *what = argc > 1 ? argv[1] : "none";
    int at = argc > 2 ? atoi(argv[2]) : 150, who = argc > 3 ? atoi(argv[3]) : 1;
    double x = 1, y;
    for (int it = 0; it < 200; it++) {
        if (it == at && rank == who) {
            if (!strcmp(what, "segv")) {
                volatile int *p = NULL;
                *p = 1;
            } else if (!strcmp(what, "abort")) {
                MPI_Abort(MPI_COMM_WORLD, 3);
            } else if (!strcmp(what, "hang")) {
                printf("rank %d hangs at iteration %d\n", rank, it); /* a test waits for this line */
                fflush(stdout);
                for (;;) work(1000000);
            }
        }
        x += work(20000);
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Sendrecv(&x, 1, MPI_DOUBLE, (rank + 1) % size, 0, &y, 1, MPI_DOUBLE, (rank + size - 1) % size, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}
