/* A small program with a known call graph, for perflow's gprof reader tests. */
#include <stdio.h>
#include <stdlib.h>

/* WORK scales the loop lengths (not the calls): the tests build it with a small WORK to run fast. */
#ifndef WORK
#define WORK 1000
#endif

static volatile double sink;

__attribute__((noinline)) double kernel(int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)i * 1e-9;
    return s;
}

__attribute__((noinline)) double step(int i) {
    double own = 0.0;
    for (int k = 0; k < 150 * WORK; k++) own += (double)k * 1e-12;
    return own + kernel(800 * WORK + (i % 7) * WORK);
}

__attribute__((noinline)) double solve(int iters) {
    double s = 0.0;
    for (int i = 0; i < iters; i++) s += step(i);
    return s;
}

__attribute__((noinline)) double setup(void) {
    return kernel(40000 * WORK);
}

__attribute__((noinline)) long walk(int depth) {
    double own = 0.0;
    for (int k = 0; k < 2000 * WORK; k++) own += (double)k * 1e-12;
    if (depth == 0) return (long)kernel(4000 * WORK) + (long)own;
    return walk(depth - 1) + 1;
}

__attribute__((noinline)) int is_odd(int n);

__attribute__((noinline)) int is_even(int n) {
    double own = 0.0;
    for (int k = 0; k < 1000 * WORK; k++) own += (double)k * 1e-12;
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
