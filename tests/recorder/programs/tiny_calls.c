/* Many tiny calls and a few long ones, for the instrumentation's runtime
 * filter: tiny() is called N times, medium() five times (about 5 ms each).
 * Prints the CPU time per tiny() call to stderr (for benchmarks/bench_instrumentation.py).
 * usage: tiny_calls [n] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) int tiny(int x) { return x * 3 + 1; }

__attribute__((noinline)) double medium(void) {
    double t0 = MPI_Wtime(), s = 0;
    while (MPI_Wtime() - t0 < 0.005) s += 1e-9;
    return s;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    long acc = 0;
    double m = 0;
    struct timespec t0, t1;
    MPI_Init(&argc, &argv);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    for (int i = 0; i < n; i++) acc += tiny(i);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    fprintf(stderr, "tiny-ns-per-call %.2f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (n > 0 ? n : 1));
    for (int i = 0; i < 5; i++) m += medium();
    printf("tiny_calls: %ld %.3g\n", acc, m);
    MPI_Finalize();
    return 0;
}
