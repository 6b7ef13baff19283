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
 * Each thread also measures its waits itself and prints them, one line per rank, thread and iteration: at
 * a barrier the last arrival minus its own; at the critical section and the lock, from asking until the
 * other thread released it, when the other held it before (the time a woken thread then needs to run
 * again is the machine's, not the lock's).
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

static double maxof(const double *a) { return a[0] > a[1] ? a[0] : a[1]; }

/* thread t's wait for a lock the other thread held before it: from asking until the other's release */
static double held(const double *ask, const double *got, const double *rel, int t) {
    int o = 1 - t;
    if (got[o] > got[t]) return 0.0;
    double until = rel[o] < got[t] ? rel[o] : got[t];
    return until > ask[t] ? until - ask[t] : 0.0;
}

int main(int argc, char **argv) {
    int rank, size, provided, iters = argc > 1 ? atoi(argv[1]) : 2;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    omp_lock_t lock;
    omp_init_lock(&lock);
    /* what each thread measures itself, per iteration: the times it arrived at the barriers, asked for and
     * got the critical section and the lock (a barrier's wait is the last arrival minus its own) */
    double loop_in[2], bar_in[2], end_in[2], crit_ask[2], crit_got[2], crit_rel[2], lock_ask[2], lock_got[2],
        lock_rel[2];
    double loop_w[2], bar_w[2];
    for (int it = 0; it < iters; it++) {
#pragma omp parallel num_threads(2) /* SITE:parallel */
        {
            int t = omp_get_thread_num();
#pragma omp for schedule(static) /* SITE:for */
            for (int i = 0; i < 2; i++) {
                loop_work(BASE + i * imb(rank));
                loop_in[i] = now();
            }
            loop_w[t] = maxof(loop_in) - loop_in[t];
            crit_ask[t] = now();
#pragma omp critical /* SITE:critical */
            {
                crit_got[t] = now();
                critical_work(CRIT);
                crit_rel[t] = now();
            }
            bar_in[t] = now();
#pragma omp barrier /* SITE:barrier */
            bar_w[t] = maxof(bar_in) - bar_in[t];
            lock_ask[t] = now();
            omp_set_lock(&lock); /* SITE:set_lock */
            lock_got[t] = now();
            locked_work(LOCK);
            lock_rel[t] = now();
            omp_unset_lock(&lock); /* SITE:unset_lock */
#pragma omp single /* SITE:single */
            {
#pragma omp task /* SITE:task */
                task_work(TASK);
            }
            if (t == 1) {
                double x = rank, y = 0;
                MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE:allreduce */
            }
            end_in[t] = now();
        }
        for (int t = 0; t < 2; t++)
            printf("measured rank %d thread %d iteration %d loop %.6f critical %.6f barrier %.6f lock %.6f end %.6f\n",
                   rank, t, it, loop_w[t], held(crit_ask, crit_got, crit_rel, t), bar_w[t],
                   held(lock_ask, lock_got, lock_rel, t), maxof(end_in) - end_in[t]);
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
