/* perflow recorder: the event streams of the threads other than the initial one.
 *
 * OpenMP worker threads (registered by pfrec_omp.c at OMPT's thread_begin) record into streams of their
 * own, in the layout of the initial thread's files: p<pid>.t<n>.ev (48-byte records) and p<pid>.t<n>.smp
 * (samples and call contexts), n = 1, 2, ... in the order the threads began. Each thread has its own
 * buffers (malloc'd when it begins, bounded like the initial thread's) and writes them out when they fill.
 *
 * No lock on the hot path: a stream is written only by its thread while the thread *owns* it (state 1,
 * from its first record in a parallel region on); the thread gives it back (state 0, "parked") when its
 * implicit task ends or it waits in the barrier that ends a parallel region. A parked stream may be taken
 * (state 2, by compare-and-swap) and written out by another thread: the initial thread does so at
 * MPI_Finalize and at exit, so that nothing a sleeping worker recorded is lost. A thread that wakes while
 * its stream is being written out waits until it is given back.
 *
 * Sampling: each thread has a POSIX timer of its own (SIGEV_THREAD_ID) on the clock of the initial
 * thread's timer; the process's SIGPROF handler (pfrec_core.c) hands a worker's signals to pf_thr_prof,
 * which records the stack (async-signal-safe: backtrace, write) only while the thread owns its stream
 * and is not waiting (in an MPI call, an OpenMP barrier, a lock).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "pfrec.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define PF_TMAXDEPTH 128
#define PF_MAXTHR 4096
#define PF_TFLUSH 0.5 /* a thread writes its buffers out when they are older than this (s), as pfrec_crash.c */

static pf_thr *threads[PF_MAXTHR];
static int nthreads; /* threads registered so far (their numbers are 1..nthreads) */
static __thread pf_thr *T __attribute__((tls_model("initial-exec")));

pf_thr *pf_thr_self(void) { return T; }

static void write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0 && fd >= 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        c += w;
        n -= (size_t)w;
    }
}

static void flush_ev(pf_thr *t) {
    if (getpid() != t->pid) return;
    write_all(t->fd_ev, t->ev, sizeof(pf_rec) * (size_t)t->nev);
    t->nev = 0;
}

static void flush_smp(pf_thr *t) {
    if (getpid() != t->pid) return;
    write_all(t->fd_smp, t->smp, sizeof(uint64_t) * (size_t)t->nsmp);
    t->nsmp = 0;
}

/* both buffers, the signal handler kept off the sample buffer meanwhile */
static void flush_both(pf_thr *t) {
    t->quiet++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    flush_ev(t);
    flush_smp(t);
    t->last_flush = pf_now();
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->quiet--;
}

/* ---- ownership ----------------------------------------------------------- */

void pf_thr_own(pf_thr *t) {
    if (t->state == 1) return; /* only the thread itself sets 1 */
    int z = 0;
    while (!__atomic_compare_exchange_n(&t->state, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        z = 0;
        sched_yield(); /* another thread is writing the parked stream out */
    }
}

void pf_thr_park(pf_thr *t) {
    if (t->state != 1) return;
    if (t->nev + t->nsmp > 0 && pf_now() - t->last_flush > PF_TFLUSH) flush_both(t);
    __atomic_store_n(&t->state, 0, __ATOMIC_RELEASE);
}

/* ---- records ------------------------------------------------------------- */

static pf_rec scratch; /* for a record of a thread without a stream (never read) */

pf_rec *pf_thr_slot(void) {
    pf_thr *t = T;
    if (!t) return &scratch;
    if (t->nev == PF_TEVBUF) flush_ev(t);
    return &t->ev[t->nev++];
}

/* Append a record of the calling worker stamped now (if r->t is 0), counting region records; no sample is
 * taken between the time stamp and the count. Returns the time stamp. */
double pf_thr_put(pf_thr *t, pf_rec r) {
    t->quiet++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (r.t == 0) r.t = pf_now();
    if (t->nev == PF_TEVBUF) flush_ev(t);
    t->ev[t->nev++] = r;
    if (r.type == PF_R_ENTER || r.type == PF_R_LEAVE) t->nregion++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->quiet--;
    if (r.t - t->last_flush > PF_TFLUSH && t == T) flush_both(t); /* a killed process loses little */
    return r.t;
}

/* ---- samples and call contexts --------------------------------------------- */

/* Append a header and frames to the thread's sample stream (the layout of put_stack in pfrec_core.c). */
static void put_stack(pf_thr *t, int type, uint64_t w1, uint64_t w2, uint64_t w3, void **fr, int n, int exact) {
    int h = type == PF_S_USAMPLE ? 5 : 4;
    if (n > PF_TMAXDEPTH) n = PF_TMAXDEPTH;
    if (n < 0) n = 0;
    if (t->nsmp + h + n > PF_TSMPBUF) flush_smp(t);
    uint64_t *w = t->smp + t->nsmp;
    w[0] = PF_S_MAGIC | ((uint64_t)type << 32) | (uint64_t)n;
    w[1] = w1;
    w[2] = w2;
    w[3] = w3;
    if (h == 5) w[4] = 0; /* no user-function instrumentation on worker threads */
    for (int i = 0; i < n; i++) w[h + i] = (uint64_t)(uintptr_t)fr[i] - ((i == 0 && exact) ? 0 : 1);
    t->nsmp += h + n;
}

static inline uint64_t dbits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static uintptr_t uc_pc(void *ucv) {
    ucontext_t *uc = ucv;
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

/* SIGPROF on a worker thread (called by the core's handler). */
void pf_thr_prof(void *siv, void *ucv) {
    pf_thr *t = T;
    siginfo_t *si = siv;
    if (!t || !t->timer_on || t->state != 1 || t->quiet || t->wait) return;
    double w = t->period * (1.0 + (si && si->si_overrun > 0 ? si->si_overrun : 0));
    void *fr[PF_TMAXDEPTH + 8];
    int n = backtrace(fr, PF_TMAXDEPTH + 8), s = 2;
    uintptr_t pc = uc_pc(ucv);
    for (int i = 0; i < n && i < 6; i++)
        if ((uintptr_t)fr[i] == pc) {
            s = i;
            break;
        }
    if (s > n) s = n;
    put_stack(t, PF_S_USAMPLE, dbits(pf_now()), dbits(w), t->nregion, fr + s, n - s, 1);
}

/* Context id of a call made on this thread: its stack, unwound once per (return address, frame address) and
 * written to the thread's sample stream; ids are (thread number << 40) + k, unique in the process. */
int64_t pf_thr_ctx(pf_thr *t, void *ra, void *fp) {
    uintptr_t a = (uintptr_t)ra, f = (uintptr_t)fp;
    uint64_t h = (a * 0x9E3779B97F4A7C15ULL) ^ (f * 0xC2B2AE3D27D4EB4FULL);
    size_t i = (size_t)(h >> 40) & (PF_TCTX - 1);
    for (int probe = 0; probe < 8; probe++, i = (i + 1) & (PF_TCTX - 1)) {
        if (t->ctx[i].id && t->ctx[i].ra == a && t->ctx[i].fp == f) return t->ctx[i].id;
        if (!t->ctx[i].id) {
            void *fr[PF_TMAXDEPTH + 8];
            int n = backtrace(fr, PF_TMAXDEPTH + 8), s = 0;
            while (s < n && (uintptr_t)fr[s] != a) s++;
            if (s == n) s = n > 2 ? 2 : 0; /* the caller's address not seen: skip this function and its caller */
            t->ctx[i].ra = a;
            t->ctx[i].fp = f;
            t->ctx[i].id = ((int64_t)t->num << 40) + (++t->ctx_next);
            put_stack(t, PF_S_CTX, (uint64_t)t->ctx[i].id, 0, 0, fr + s, n - s, 0);
            return t->ctx[i].id;
        }
    }
    return -1; /* table full around this slot: no context */
}

/* ---- MPI calls of a worker thread (pf_begin/pf_end hand them over) ---------- */

int pf_thr_begin(int fn, void *ra, void *fp) {
    pf_thr *t = T;
    if (!t || t->in_mpi || t->fd_ev < 0) return 0;
    pf_thr_own(t);
    t->in_mpi = 1;
    t->quiet++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    int64_t ctx = pf_thr_ctx(t, ra, fp);
    double now = t->t_enter = pf_now();
    *pf_thr_slot() = (pf_rec){.t = now, .addr = (uint64_t)(uintptr_t)ra - 1, .n1 = ctx, .comm = -1,
                              .type = PF_R_ENTER, .fn = (uint16_t)fn};
    t->nregion++;
    return 1;
}

void pf_thr_end(int fn) {
    pf_thr *t = T;
    if (!t) return;
    *pf_thr_slot() = (pf_rec){.t = pf_now(), .comm = -1, .type = PF_R_LEAVE, .fn = (uint16_t)fn};
    t->nregion++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->quiet--;
    t->in_mpi = 0;
}

/* The calling worker's own stream, written out now if it owns it (pf_flush_now: periodically, on fatal
 * signals; async-signal-safe). */
void pf_thr_flush_self(void) {
    pf_thr *t = T;
    if (!t || t->state != 1 || t->fd_ev < 0) return;
    t->quiet++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    flush_ev(t);
    flush_smp(t);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->quiet--;
}

double pf_thr_t_enter(void) { return T ? T->t_enter : pf_now(); }

int pf_thr_in_call(void) { return T && T->in_mpi; }

/* ---- life cycle ------------------------------------------------------------ */

static int open_stream(pf_thr *t) {
    char path[4200];
    snprintf(path, sizeof path, "%s.t%d.ev", pf_base(), t->num);
    t->fd_ev = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    snprintf(path, sizeof path, "%s.t%d.smp", pf_base(), t->num);
    t->fd_smp = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (t->fd_ev < 0 || t->fd_smp < 0) {
        fprintf(stderr, "perflow-recorder: cannot create %s: %s\n", path, strerror(errno));
        return 0;
    }
    return 1;
}

static void start_timer(pf_thr *t) {
    int clock = -1;
    long ns = pf_sample_period_ns(&clock);
    if (ns <= 0) return;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev.sigev_notify_thread_id = t->tid;
    if (timer_create((clockid_t)clock, &sev, &t->timer) != 0) return;
    struct itimerspec its = {{ns / 1000000000L, ns % 1000000000L}, {ns / 1000000000L, ns % 1000000000L}};
    if (timer_settime(t->timer, 0, &its, NULL) != 0) {
        timer_delete(t->timer);
        return;
    }
    t->period = 1e-9 * (double)ns;
    t->timer_on = 1;
}

/* Register the calling thread (a worker of the OpenMP runtime); returns its stream or NULL. */
pf_thr *pf_thr_start(void) {
    if (!pf_active || T) return T;
    int num = __atomic_add_fetch(&nthreads, 1, __ATOMIC_RELAXED);
    if (num >= PF_MAXTHR) return NULL;
    pf_thr *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->num = num;
    t->pid = getpid();
    t->tid = (pid_t)syscall(SYS_gettid);
    t->state = 1;
    t->last_flush = pf_now();
    if (!open_stream(t)) {
        free(t);
        return NULL;
    }
    pf_mark_worker();
    T = t;
    pf_txt("T %d %d\n", num, (int)t->tid);
    start_timer(t);
    __atomic_store_n(&threads[num], t, __ATOMIC_RELEASE);
    return t;
}

/* The thread ends (OMPT thread_end): close what it left open, write everything out. */
void pf_thr_stop(void) {
    pf_thr *t = T;
    if (!t) return;
    pf_thr_own(t);
    if (t->timer_on) {
        t->timer_on = 0;
        timer_delete(t->timer);
    }
    pf_omp_settle(t);
    flush_both(t);
    t->quiet++;
    close(t->fd_ev);
    close(t->fd_smp);
    t->fd_ev = t->fd_smp = -1;
    __atomic_store_n(&t->state, 0, __ATOMIC_RELEASE);
}

/* Write out every parked stream (the initial thread, at MPI_Finalize and at exit); closes what a parked
 * thread left open when `settle` (its pending end of a parallel region). */
void pf_thr_flush_parked(void) {
    int n = __atomic_load_n(&nthreads, __ATOMIC_RELAXED);
    for (int i = 1; i <= n && i < PF_MAXTHR; i++) {
        pf_thr *t = __atomic_load_n(&threads[i], __ATOMIC_ACQUIRE);
        int z = 0;
        if (!t || t->fd_ev < 0 || !__atomic_compare_exchange_n(&t->state, &z, 2, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue;
        pf_omp_settle(t);
        write_all(t->fd_ev, t->ev, sizeof(pf_rec) * (size_t)t->nev);
        t->nev = 0;
        write_all(t->fd_smp, t->smp, sizeof(uint64_t) * (size_t)t->nsmp);
        t->nsmp = 0;
        __atomic_store_n(&t->state, 0, __ATOMIC_RELEASE);
    }
}

int pf_thr_count(void) { return __atomic_load_n(&nthreads, __ATOMIC_RELAXED); }
