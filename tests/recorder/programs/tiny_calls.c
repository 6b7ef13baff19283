/* Many tiny calls and a few long ones, for the instrumentation's runtime
 * filter: tiny() is called N times, medium() five times (about 5 ms each).
 * usage: tiny_calls [n] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

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
    MPI_Init(&argc, &argv);
    for (int i = 0; i < n; i++) acc += tiny(i);
    for (int i = 0; i < 5; i++) m += medium();
    printf("tiny_calls: %ld %.3g\n", acc, m);
    MPI_Finalize();
    return 0;
}
