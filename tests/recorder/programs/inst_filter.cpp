// Compiler instrumentation and filters (tests/recorder/test_instrument_filter.py):
// a std:: container loop (std:: code is never instrumented), an accessor
// inlined from a header (Field::at, its own file and line), recursion
// (descend: no second main below main), a short hot function (tiny: what
// `perflow score` filters out) and a function that calls MPI (exchange: COM).
//
// usage: inst_filter [steps] [tiny calls per step]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "inst_filter.h"

__attribute__((noinline)) double tiny(double x) { return x * 0.999 + 1e-3; }  // SITE:tiny

__attribute__((noinline)) double sweep(Field &f, long reps) {
    double s = 0;
    for (long r = 0; r < reps; r++) {
        for (int i = 0; i < (int)f.v.size(); i++) f.at(i) = 0.5 * f.at(i) + 1.0;
        std::sort(f.v.begin(), f.v.end());
        s += std::accumulate(f.v.begin(), f.v.end(), 0.0);
    }
    return s;
}

__attribute__((noinline)) double descend(Field &f, int depth) {  // SITE:descend
    if (depth == 0) return sweep(f, 20);
    return descend(f, depth - 1) + 1.0;
}

__attribute__((noinline)) double exchange(double x) {
    double y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);  // SITE:exchange
    return y;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    long calls = argc > 2 ? atol(argv[2]) : 20000;
    Field f(2000);
    double acc = 0;
    for (int s = 0; s < steps; s++) {
        for (long k = 0; k < calls; k++) acc = tiny(acc);
        acc += descend(f, 4);
        acc = exchange(acc) * 1e-9;
    }
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) printf("result %g\n", acc);
    MPI_Finalize();
    return 0;
}
