/* MPI + OpenMP, 2 threads per rank, with injected OpenMP waits (perflow record's OpenMP test program).
 *
 * Each of ITERS iterations runs one parallel region of 2 threads:
 *   a loop of 2 iterations (schedule static: one per thread) where thread 1 of rank r works IMB(r) more
 *     than thread 0: thread 0 waits IMB(r) at the loop's implicit barrier (omp_ibarrier_wait);
 *   a critical section each thread holds CRIT: the second to ask waits about CRIT
 *     (lock_contention_critical), and the first then waits about CRIT at the explicit barrier after it;
 *   an omp_set_lock / omp_unset_lock pair each holds LOCK: the second waits about LOCK
 *     (lock_contention_api), the first about LOCK at the region's closing implicit barrier;
 *   an explicit task of TASK seconds made by one thread (single), run by either;
 *   thread 1 calls MPI_Allreduce (MPI_THREAD_SERIALIZED: one thread per rank calls MPI);
 * then an MPI_Barrier on the initial thread: rank 0 waits IMB(1) - IMB(0) for rank 1.
 * Work is spinning on the monotonic clock until a deadline, so its length holds on a loaded machine.
 * The program prints what it injected.  Usage: omp_hybrid [iters]
 */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BASE 0.05
#define CRIT 0.08
#define LOCK 0.08
#define TASK 0.03
static double imb(int rank) { return 0.2 + 0.1 * rank; }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile double sink;

__attribute__((noinline)) static void spin(double seconds) {
    double end = now() + seconds, x = 0;
    while (now() < end)
        for (int i = 0; i < 1000; i++) x += 1e-9 * i;
    sink = x;
}

/* (each does something after spin: no tail call, so that samples see it) */
__attribute__((noinline)) static void loop_work(double seconds) { spin(seconds); sink += 1; }
__attribute__((noinline)) static void critical_work(double seconds) { spin(seconds); sink += 1; }
__attribute__((noinline)) static void locked_work(double seconds) { spin(seconds); sink += 1; }
__attribute__((noinline)) static void task_work(double seconds) { spin(seconds); sink += 1; }

int main(int argc, char **argv) {
    int rank, size, provided, iters = argc > 1 ? atoi(argv[1]) : 2;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    omp_lock_t lock;
    omp_init_lock(&lock);
    for (int it = 0; it < iters; it++) {
#pragma omp parallel num_threads(2)
        { /* SITE:parallel */
#pragma omp for schedule(static)
            for (int i = 0; i < 2; i++) loop_work(BASE + i * imb(rank)); /* SITE:loop */
#pragma omp critical
            { critical_work(CRIT); } /* SITE:critical */
#pragma omp barrier
            omp_set_lock(&lock); /* SITE:set_lock */
            locked_work(LOCK);
            omp_unset_lock(&lock); /* SITE:unset_lock */
#pragma omp single
            {
#pragma omp task
                task_work(TASK); /* SITE:task */
            }
            if (omp_get_thread_num() == 1) {
                double x = rank, y = 0;
                MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE:allreduce */
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    omp_destroy_lock(&lock);
    if (rank == 0)
        printf("injected: iterations %d threads 2 provided %d loop_imbalance %.3f %.3f critical %.3f lock %.3f "
               "task %.3f barrier_rank0 %.3f\n",
               iters, provided, imb(0), size > 1 ? imb(1) : imb(0), CRIT, LOCK, TASK,
               size > 1 ? imb(1) - imb(0) : 0.0);
    MPI_Finalize();
    return 0;
}
