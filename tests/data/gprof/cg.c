/* A small program with a known call graph, for perflow's gprof reader tests. */
#include <stdio.h>
#include <stdlib.h>

static volatile double sink;

__attribute__((noinline)) double kernel(int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)i * 1e-9;
    return s;
}

__attribute__((noinline)) double step(int i) {
    double own = 0.0;
    for (int k = 0; k < 150000; k++) own += (double)k * 1e-12;
    return own + kernel(800000 + (i % 7) * 1000);
}

__attribute__((noinline)) double solve(int iters) {
    double s = 0.0;
    for (int i = 0; i < iters; i++) s += step(i);
    return s;
}

__attribute__((noinline)) double setup(void) {
    return kernel(40000000);
}

__attribute__((noinline)) long walk(int depth) {
    double own = 0.0;
    for (int k = 0; k < 2000000; k++) own += (double)k * 1e-12;
    if (depth == 0) return (long)kernel(4000000) + (long)own;
    return walk(depth - 1) + 1;
}

__attribute__((noinline)) int is_odd(int n);

__attribute__((noinline)) int is_even(int n) {
    double own = 0.0;
    for (int k = 0; k < 1000000; k++) own += (double)k * 1e-12;
    return n == 0 ? 1 + (int)own : is_odd(n - 1);
}

__attribute__((noinline)) int is_odd(int n) {
    return n == 0 ? 0 : is_even(n - 1);
}

int main(void) {
    double s = setup();
    for (int r = 0; r < 3; r++) s += solve(400);
    for (int r = 0; r < 5; r++) s += (double)walk(9);
    for (int r = 0; r < 2; r++) s += is_even(20);
    sink = s;
    printf("%g\n", s);
    return 0;
}
