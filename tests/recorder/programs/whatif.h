/* Shared by the what-if test programs: work that lasts a given wall-clock time, and the elapsed time.
 *
 * spin() computes until `seconds` of wall-clock time have passed, so a rank that the machine deschedules
 * still ends its work on time; it is inlined into each caller, so samples land in the calling function
 * (each caller passes its own `salt`: identical functions would be folded into one by the compiler).
 * Built with -DSLEEP it sleeps instead (for instrumented builds on a loaded machine: the durations then
 * do not depend on getting a core). */
#ifndef PERFLOW_TEST_WHATIF_H
#define PERFLOW_TEST_WHATIF_H
#include <mpi.h>
#include <stdio.h>
#include <time.h>

static inline __attribute__((always_inline)) double spin(double seconds, double salt) {
#ifdef SLEEP
    struct timespec d = {(time_t)seconds, (long)(1e9 * (seconds - (double)(time_t)seconds))};
    while (nanosleep(&d, &d) != 0) {
    }
    return seconds + salt;
#endif
    struct timespec a, b;
    double x = 1.0, t;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        for (int i = 0; i < 4000; i++) x = x * 1.0000001 + salt;
        clock_gettime(CLOCK_MONOTONIC, &b);
        t = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    } while (t < seconds);
    return x;
}

/* Rank 0 prints the wall time between two barriers: after MPI_Init and before MPI_Finalize. */
static double whatif_start(void) {
    MPI_Barrier(MPI_COMM_WORLD);
    return MPI_Wtime();
}

static void whatif_stop(double t0, const char *name) {
    int rank;
    MPI_Barrier(MPI_COMM_WORLD);
    double t1 = MPI_Wtime();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) printf("%s elapsed %.6f\n", name, t1 - t0);
}

#endif
