/* Shared by the injected-problem test programs: a fixed amount of floating-point work (not a fixed
 * time, so that a rank that is descheduled does the same work, only later). A macro, so that the work
 * is the code of the function that uses it (its samples name that function, not a helper). */
#ifndef PERFLOW_TEST_WORK_H
#define PERFLOW_TEST_WORK_H

/* WORK_UNIT_ITERS iterations take about 1 ms of CPU time on the development machine. */
#define WORK_UNIT_ITERS 480000L
#define WORK(r, units)                                                         \
    for (long work_i_ = 0; work_i_ < (units) * WORK_UNIT_ITERS; work_i_++) \
        (r) = (r) * 0.999999 + 1.0 / (1.0 + (double)(work_i_ & 1023))

static volatile double work_sink;
#endif
