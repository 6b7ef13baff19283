/* perflow recorder: keep what was recorded when the run does not end well.
 *
 * Score-P flushes its buffers when a program aborts; so does this:
 *   - periodically: pf_crash_tick() (called as events are recorded) writes the
 *     buffers out at least every PF_FLUSH_PERIOD seconds, so a rank killed
 *     with SIGKILL loses at most the last period;
 *   - on fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) and on the
 *     signals a launcher stops the other ranks with (SIGTERM, SIGINT, SIGHUP,
 *     SIGXCPU): the handler (on its own stack, so a stack overflow is caught
 *     too) notes "died <signal> <time>" in the text file, flushes, and lets
 *     the signal take its course (default action, re-raised);
 *   - in MPI_Abort: notes "abort <code> <time>" and flushes before aborting.
 * The handler uses only async-signal-safe calls (write, clock_gettime,
 * sigaction, raise); a signal that arrives while a flush is writing does not
 * flush again (the stream would repeat records).
 */
#define _GNU_SOURCE
#include "pfrec.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PF_FLUSH_PERIOD 0.5

static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGHUP, SIGXCPU, SIGQUIT};
#define NFATAL (int)(sizeof fatal / sizeof fatal[0])
static struct sigaction previous[NFATAL];
static double next_flush;
static volatile sig_atomic_t dying;
static char altstack[1 << 16];

/* "died 11 1234.567890123\n" without stdio (async-signal-safe) */
static size_t fmt_u64(char *p, unsigned long long v) {
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) p[i] = tmp[n - 1 - i];
    return n;
}

static void note(const char *what, long long code) {
    char buf[96];
    size_t n = strlen(what);
    memcpy(buf, what, n);
    buf[n++] = ' ';
    if (code < 0) {
        buf[n++] = '-';
        code = -code;
    }
    n += fmt_u64(buf + n, (unsigned long long)code);
    buf[n++] = ' ';
    double t = pf_now();
    unsigned long long s = (unsigned long long)t;
    n += fmt_u64(buf + n, s);
    buf[n++] = '.';
    unsigned long long frac = (unsigned long long)((t - (double)s) * 1e9);
    char f[9];
    for (int i = 8; i >= 0; i--) {
        f[i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    memcpy(buf + n, f, 9);
    n += 9;
    buf[n++] = '\n';
    pf_txt_raw(buf, n);
}

void pf_crash_tick(double now) {
    if (now < next_flush) return;
    next_flush = now + PF_FLUSH_PERIOD;
    pf_flush_now();
}

static void on_fatal(int sig, siginfo_t *si, void *uc) {
    (void)si;
    (void)uc;
    if (!dying && pf_active) {
        dying = 1;
        note("died", sig);
        pf_flush_now();
    }
    for (int i = 0; i < NFATAL; i++) /* let the signal do what it did before us */
        if (fatal[i] == sig) sigaction(sig, &previous[i], NULL);
    raise(sig);
}

void pf_crash_install(void) {
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NFATAL; i++) {
        struct sigaction old;
        if (sigaction(fatal[i], NULL, &old) != 0) continue;
        previous[i] = old;
        /* a handler the program (or its runtime) installed itself stays: we only take the default ones */
        if (old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO)) sigaction(fatal[i], &sa, NULL);
    }
    next_flush = pf_now() + PF_FLUSH_PERIOD;
}

int MPI_Abort(MPI_Comm comm, int code) {
    if (pf_active && !dying) {
        dying = 1;
        note("abort", code);
        pf_flush_now();
    }
    return PMPI_Abort(comm, code);
}
