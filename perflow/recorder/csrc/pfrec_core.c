/* perflow recorder core: buffers, timer sampling, communicator and request tables.
 *
 * These are the process's initial thread's buffers; OpenMP worker threads have
 * streams of their own (pfrec_thr.c), to which slot(), pf_begin/pf_end and the
 * SIGPROF handler hand over on such a thread. MPI calls of other threads pass
 * straight through. The SIGPROF handler allocates nothing and calls only
 * async-signal-safe functions (backtrace() after libgcc_s was loaded, write,
 * clock_gettime); it skips samples while the thread is inside an MPI call.
 */
#define _GNU_SOURCE
#include "pfrec.h"

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define PF_EVBUF (1 << 15)   /* event records per flush (1.5 MiB) */
#define PF_SMPBUF (1 << 16)  /* sample words per flush (512 KiB) */
#define PF_MAXDEPTH 128
#define PF_CTX_SLOTS 4096
#define PF_REQ_SLOTS (1 << 14)
#define PF_MAXCOMM 1024

volatile int pf_active;
volatile uint64_t pf_nsamples; /* samples taken so far (pfrec_inst.c keeps calls that hold one) */
static __thread int t_main __attribute__((tls_model("initial-exec")));

static struct {
    pid_t pid, tid;
    pthread_t main;
    int fd_ev, fd_smp, fd_txt;
    char base[4096];
    int nev, nsmp;
    uint64_t nregion;
    volatile sig_atomic_t in_mpi, stopping;
    volatile sig_atomic_t omp_wait; /* waiting in OpenMP (a barrier, a lock): no samples (pfrec_omp.c) */
    double t_enter, period;
    int hz, timer_kind;
    timer_t timer;
    int world_rank, world_size, comm_next, ncomms, nreq;
    int cur_fn;
    int64_t req_next, req_dropped, ctx_next, ctx_full;
    MPI_Group world_group;
} g;

static pf_rec evbuf[PF_EVBUF];
static uint64_t smpbuf[PF_SMPBUF];
static struct { uintptr_t ra, fp; int64_t id; } ctxtab[PF_CTX_SLOTS];
static pf_req reqs[PF_REQ_SLOTS];

/* ---- low-level output ---------------------------------------------------- */

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

static volatile sig_atomic_t flushing; /* a flush is writing: a crash handler must not flush again */

static void flush_ev(void) {
    if (getpid() != g.pid) return;
    flushing++;
    write_all(g.fd_ev, evbuf, sizeof(pf_rec) * (size_t)g.nev);
    g.nev = 0;
    flushing--;
}

static void flush_smp(void) {
    if (getpid() != g.pid) return;
    flushing++;
    write_all(g.fd_smp, smpbuf, sizeof(uint64_t) * (size_t)g.nsmp);
    g.nsmp = 0;
    flushing--;
}

/* for pfrec_crash.c: the text file as bytes (async-signal-safe) */
void pf_txt_raw(const char *s, size_t n) { write_all(g.fd_txt, s, n); }

void pf_txt(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) write_all(g.fd_txt, buf, (size_t)(n < (int)sizeof buf ? n : (int)sizeof buf - 1));
}
#define txt pf_txt

static void copy_maps(void) {
    char path[4200], buf[8192];
    snprintf(path, sizeof path, "%s.maps", g.base);
    int in = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ssize_t n;
    while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0) write_all(out, buf, (size_t)n);
    if (in >= 0) close(in);
    if (out >= 0) close(out);
}

/* Write both buffers and the memory map, keeping the signal handler off the
 * sample buffer meanwhile. */
static void flush_all(void) {
    sig_atomic_t was = g.in_mpi;
    g.in_mpi = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    flush_ev();
    flush_smp();
    copy_maps();
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    g.in_mpi = was;
}

/* for pfrec_crash.c: everything out now, unless a flush is already writing */
void pf_flush_now(void) {
    if (!pf_active || flushing || getpid() != g.pid) return;
    flush_all();
    pf_thr_flush_self();   /* a worker thread's own stream (a fatal signal on it) */
    pf_thr_flush_parked(); /* the streams of the worker threads asleep in the OpenMP runtime */
}

double pf_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t nwritten; /* event records so far */

static inline pf_rec *slot(void) {
    if (__builtin_expect(t_main == 2, 0)) return pf_thr_slot(); /* a worker thread: its own stream */
    if (g.nev == PF_EVBUF) flush_ev();
    if ((nwritten & 15) == 0) pf_crash_tick(pf_now()); /* periodic flush (pfrec_crash.c) */
    nwritten++;
    return &evbuf[g.nev++];
}

static inline uint64_t dbits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* ---- sampling ------------------------------------------------------------ */

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

/* Append a header and frames to the sample stream; frames after the first are
 * return addresses and are stored minus one (the call instruction). */
static void put_stack(int type, uint64_t w1, uint64_t w2, uint64_t w3, void **fr, int n, int exact_first) {
    int h = type == PF_S_USAMPLE ? 5 : 4;
    if (n > PF_MAXDEPTH) n = PF_MAXDEPTH;
    if (n < 0) n = 0;
    if (g.nsmp + h + n > PF_SMPBUF) flush_smp();
    uint64_t *w = smpbuf + g.nsmp;
    w[0] = PF_S_MAGIC | ((uint64_t)type << 32) | (uint64_t)n;
    w[1] = w1;
    w[2] = w2;
    w[3] = w3;
    if (h == 5) w[4] = pf_utop;
    for (int i = 0; i < n; i++) w[h + i] = (uint64_t)(uintptr_t)fr[i] - ((i == 0 && exact_first) ? 0 : 1);
    g.nsmp += h + n;
    if (type != PF_S_CTX) pf_nsamples++;
}

static void on_prof(int sig, siginfo_t *si, void *ucv) {
    (void)sig;
    int saved = errno;
    if (!pf_active || g.stopping) goto out;
    if (t_main == 2) { /* a worker thread's own timer */
        pf_thr_prof(si, ucv);
        goto out;
    }
    if (g.timer_kind == 2 && (pid_t)syscall(SYS_gettid) != g.tid) goto out;
    if (g.in_mpi || g.omp_wait) goto out; /* that CPU time is the MPI call's (or an OpenMP wait's) */
    /* each expiry stands for one period of the thread's CPU time (plus any
     * expiries that were merged into this signal) */
    double w = g.period * (1.0 + (g.timer_kind == 1 && si && si->si_overrun > 0 ? si->si_overrun : 0));
    void *fr[PF_MAXDEPTH + 8];
    int n = backtrace(fr, PF_MAXDEPTH + 8), s = 2;
    uintptr_t pc = uc_pc(ucv);
    for (int i = 0; i < n && i < 6; i++)
        if ((uintptr_t)fr[i] == pc) {
            s = i;
            break;
        }
    if (s > n) s = n;
    put_stack(PF_S_USAMPLE, dbits(pf_now()), dbits(w), g.nregion, fr + s, n - s, 1);
out:
    errno = saved;
}

static void start_sampling(void) {
    struct sigaction sa, old;
    if (g.hz <= 0) return;
    if (sigaction(SIGPROF, NULL, &old) == 0 && old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
        txt("warning SIGPROF already handled by the program; sampling disabled\n");
        return;
    }
    void *warm[4];
    backtrace(warm, 4); /* loads libgcc_s outside the handler */
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_prof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
    long ns = 1000000000L / g.hz;
    g.period = 1e-9 * (double)ns;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev.sigev_notify_thread_id = g.tid;
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &g.timer) == 0) {
        struct itimerspec its = {{ns / 1000000000L, ns % 1000000000L}, {ns / 1000000000L, ns % 1000000000L}};
        if (timer_settime(g.timer, 0, &its, NULL) == 0) {
            g.timer_kind = 1;
            txt("timer thread-cpu\n");
            return;
        }
        timer_delete(g.timer);
    }
    struct itimerval it = {{ns / 1000000000L, (ns % 1000000000L) / 1000}, {ns / 1000000000L, (ns % 1000000000L) / 1000}};
    if (setitimer(ITIMER_PROF, &it, NULL) == 0) {
        g.timer_kind = 2;
        txt("timer itimer-prof\n");
    }
}

static void stop_sampling(void) {
    g.stopping = 1;
    if (g.timer_kind == 1) timer_delete(g.timer);
    if (g.timer_kind == 2) {
        struct itimerval it;
        memset(&it, 0, sizeof it);
        setitimer(ITIMER_PROF, &it, NULL);
    }
    g.timer_kind = 0;
}

/* ---- call contexts ------------------------------------------------------- */

/* Context id of an MPI call: the call stack, unwound once per distinct
 * (return address, frame address) pair and cached. */
static int64_t call_ctx(void *ra, void *fp) {
    uintptr_t a = (uintptr_t)ra, f = (uintptr_t)fp;
    uint64_t h = (a * 0x9E3779B97F4A7C15ULL) ^ (f * 0xC2B2AE3D27D4EB4FULL);
    size_t i = (size_t)(h >> 40) & (PF_CTX_SLOTS - 1);
    for (int probe = 0; probe < 32; probe++, i = (i + 1) & (PF_CTX_SLOTS - 1)) {
        if (ctxtab[i].ra == a && ctxtab[i].fp == f) return ctxtab[i].id;
        if (ctxtab[i].ra == 0) {
            void *fr[PF_MAXDEPTH + 8];
            int n = backtrace(fr, PF_MAXDEPTH + 8), s = 0;
            for (int k = 0; k < n && k < 8; k++)
                if ((uintptr_t)fr[k] == a) {
                    s = k;
                    break;
                }
            ctxtab[i].ra = a;
            ctxtab[i].fp = f;
            ctxtab[i].id = g.ctx_next++;
            put_stack(PF_S_CTX, (uint64_t)ctxtab[i].id, 0, 0, fr + s, n - s, 0);
            return ctxtab[i].id;
        }
    }
    g.ctx_full++;
    return -1;
}

/* ---- events -------------------------------------------------------------- */

static void tables_done(void); /* (the tables shared by the threads, below) */

int pf_begin(int fn, void *ra, void *fp) {
    if (!pf_active) return 0;
    if (t_main != 1) {
        if (t_main == 0) t_main = pthread_equal(pthread_self(), g.main) ? 1 : 2;
        if (t_main != 1) return pf_thr_begin(fn, ra, fp); /* a worker thread records into its own stream */
    }
    if (g.in_mpi) return 0;
    g.in_mpi = 1;
    g.cur_fn = fn;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    int64_t ctx = call_ctx(ra, fp);
    double t = g.t_enter = pf_now();
    *slot() = (pf_rec){.t = t, .addr = (uint64_t)(uintptr_t)ra - 1, .n1 = ctx, .n2 = (int64_t)pf_utop, .comm = -1,
                       .type = PF_R_ENTER, .fn = (uint16_t)fn};
    g.nregion++;
    return 1;
}

void pf_end(int fn) {
    tables_done();
    if (t_main == 2) {
        pf_thr_end(fn);
        return;
    }
    *slot() = (pf_rec){.t = pf_now(), .comm = -1, .type = PF_R_LEAVE, .fn = (uint16_t)fn};
    g.nregion++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    g.in_mpi = 0;
}

double pf_t_enter(void) { return t_main == 2 ? pf_thr_t_enter() : g.t_enter; }

/* ---- for the user-function hooks (pfrec_inst.c) ---------------------------- */

int pf_user_ok(void) {
    if (!pf_active || g.stopping || g.in_mpi) return 0;
    if (t_main != 1) {
        if (t_main == 0) t_main = pthread_equal(pthread_self(), g.main) ? 1 : 2;
        if (t_main != 1) return 0;
    }
    return 1;
}

/* Append a region record stamped now; return the number of records written
 * before it. No sample is taken between the time stamp and the count (a
 * sample there would precede the record in the stream with a later time). */
uint64_t pf_region_rec(pf_rec r, double *t) {
    g.in_mpi = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint64_t mark = nwritten;
    r.t = *t = pf_now();
    *slot() = r;
    g.nregion++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    g.in_mpi = 0;
    return mark;
}

/* Take back the region record appended at `mark` if it is still the last one
 * in the buffer; the caller checked that no sample refers to it. */
int pf_region_unrec(uint64_t mark) {
    if (nwritten != mark + 1 || g.nev == 0) return 0;
    g.in_mpi = 1; /* no sample while the count goes back */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    g.nev--;
    nwritten--;
    g.nregion--;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    g.in_mpi = 0;
    return 1;
}

/* peer: as the program gave it (MPI_PROC_NULL: nothing recorded; MPI_ANY_SOURCE
 * in a posted receive is recorded as -1, whatever its value in this MPI) */
void pf_p2p(int kind, int peer, int comm, int tag, int64_t bytes, int64_t req, double t) {
    if (peer == MPI_PROC_NULL) return;
    if (peer == MPI_ANY_SOURCE) peer = -1;
    *slot() = (pf_rec){.t = t, .n1 = bytes, .n2 = req, .a = peer, .b = tag, .comm = comm, .type = PF_R_P2P,
                       .kind = (uint8_t)kind};
}

void pf_coll_req(int64_t reqid, int kind, int op, int comm, int root, int64_t sent, int64_t recvd, double t) {
    *slot() = (pf_rec){.t = t, .addr = (uint64_t)(reqid + 1), .n1 = sent, .n2 = recvd, .a = root, .comm = comm,
                       .type = PF_R_COLL, .kind = (uint8_t)kind, .fn = (uint16_t)op};
}

void pf_coll(int kind, int op, int comm, int root, int64_t sent, int64_t recvd, double t) {
    pf_coll_req(-1, kind, op, comm, root, sent, recvd, t);
}

/* bytes moved by an MPI-IO call (dir 1 read, 2 write), inside its region */
void pf_io(int dir, int64_t bytes, double t) {
    *slot() = (pf_rec){.t = t, .addr = (uint64_t)(bytes > 0 ? bytes : 0), .a = dir, .comm = -1, .type = PF_R_IO};
}

/* an RMA record (see pfrec.h), inside the region of the call it describes */
void pf_rma(int kind, int win, int remote, int group, int op, int64_t sent, int64_t got, uint64_t addr, double t) {
    *slot() = (pf_rec){.t = t, .addr = addr, .n1 = sent, .n2 = got, .a = remote, .b = win, .comm = group,
                       .type = PF_R_RMA, .kind = (uint8_t)kind, .fn = (uint16_t)op};
}

int64_t pf_bytes(int count, MPI_Datatype dt) {
    int sz = 0;
    if (count <= 0 || dt == MPI_DATATYPE_NULL || PMPI_Type_size(dt, &sz) != MPI_SUCCESS) return 0;
    return (int64_t)count * sz;
}

/* ---- the tables shared by the threads ------------------------------------ */

/* Requests, communicators and groups are process-wide. Under MPI_THREAD_MULTIPLE a thread in a recorded
 * call takes this lock at its first table operation (they all come after the PMPI call, or before a local
 * one) and gives it back in pf_end, so that the bookkeeping of calls on several threads is serialised
 * while the calls themselves run unlocked. With fewer thread levels the program serialises its calls. */
static volatile int tab_lock, multiple;
static __thread int tab_held __attribute__((tls_model("initial-exec")));

static void tables(void) {
    if (!multiple || tab_held || !(t_main == 2 ? pf_thr_in_call() : g.in_mpi)) return;
    while (__atomic_exchange_n(&tab_lock, 1, __ATOMIC_ACQUIRE))
        while (tab_lock) sched_yield();
    tab_held = 1;
}

static void tables_done(void) {
    if (!tab_held) return;
    tab_held = 0;
    __atomic_store_n(&tab_lock, 0, __ATOMIC_RELEASE);
}

/* ---- communicators ------------------------------------------------------- */

/* Communicators are identified across ranks by a 64-bit key that every member
 * computes alone, with no communication: a hash of the parent's key, the
 * number of communicators created from the parent so far (collective calls
 * on a communicator happen in the same order on all its members) and the
 * world rank of the new communicator's rank 0. */
typedef struct { MPI_Comm h; int id; int64_t key, nchild, nwin; } pf_commslot;
static pf_commslot comms[PF_MAXCOMM];

static uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

int pf_comm(MPI_Comm c) {
    if (c == MPI_COMM_WORLD) return 0;
    if (c == MPI_COMM_SELF) return 1;
    for (int i = g.ncomms - 1; i >= 2; i--)
        if (comms[i].h == c) return comms[i].id;
    return -1;
}

static pf_commslot *comm_slot(MPI_Comm c) {
    for (int i = g.ncomms - 1; i >= 0; i--)
        if (comms[i].h == c) return &comms[i];
    return NULL;
}

/* Register a communicator created from `parent` (call on every member, whether
 * or not the call itself is recorded, so that the counters stay in step). */
void pf_comm_new(MPI_Comm parent, MPI_Comm c, int fn, int salt) {
    tables();
    static const char *names[] = {
#define PF_FN(id, name) name,
#include "functions.def"
#undef PF_FN
    };
    int inter = 0, size;
    pf_commslot *p = comm_slot(parent);
    if (!pf_active || !p) return;
    uint64_t count = salt ? 0 : (uint64_t)++p->nchild; /* counted on every member, even without a new comm */
    if (c == MPI_COMM_NULL || PMPI_Comm_test_inter(c, &inter) != MPI_SUCCESS || inter) return;
    PMPI_Comm_size(c, &size);
    int *r = malloc(2 * sizeof(int) * (size_t)size);
    MPI_Group grp;
    if (!r || PMPI_Comm_group(c, &grp) != MPI_SUCCESS) {
        free(r);
        return;
    }
    for (int i = 0; i < size; i++) r[i] = i;
    PMPI_Group_translate_ranks(grp, size, r, g.world_group, r + size);
    PMPI_Group_free(&grp);
    uint64_t key = mix((uint64_t)p->key ^ mix(count ^ mix((uint64_t)r[size] ^ mix((uint64_t)salt))));
    key &= 0x7FFFFFFFFFFFFFFFULL;
    int id = g.comm_next++;
    if (g.ncomms < PF_MAXCOMM) comms[g.ncomms++] = (pf_commslot){c, id, (int64_t)key, 0, 0};
    txt("C %d %lld %s %d", id, (long long)key, names[fn], size);
    for (int i = 0; i < size; i++) txt(" %d", r[size + i]);
    txt("\n");
    free(r);
}

/* The number of windows created over `c` before this one (the same on every member: window creation is
 * collective over `c`), -1 when `c` is not known. */
int64_t pf_comm_count_win(MPI_Comm c) {
    tables();
    pf_commslot *p = comm_slot(c);
    return p ? p->nwin++ : -1;
}

/* Local id of a group, by its members' world ranks: a "G <id> <size> <world ranks>" line the first time
 * these members are seen (the last PF_GROUPS distinct groups are remembered), -1 when unknown. */
#define PF_GROUPS 64
int pf_group(MPI_Group grp) {
    tables();
    static struct { uint64_t h; int n, id; } seen[PF_GROUPS];
    static int nseen, next;
    int n = 0;
    if (grp == MPI_GROUP_NULL || PMPI_Group_size(grp, &n) != MPI_SUCCESS || n < 0) return -1;
    int *r = malloc(2 * sizeof(int) * (size_t)(n ? n : 1));
    if (!r) return -1;
    for (int i = 0; i < n; i++) r[i] = i;
    if (n) PMPI_Group_translate_ranks(grp, n, r, g.world_group, r + n);
    uint64_t h = mix((uint64_t)n);
    for (int i = 0; i < n; i++) h = mix(h ^ (uint64_t)(uint32_t)r[n + i]);
    int id = -1;
    for (int i = 0; i < nseen && i < PF_GROUPS; i++)
        if (seen[i].h == h && seen[i].n == n) id = seen[i].id;
    if (id < 0) {
        id = next++;
        seen[nseen++ % PF_GROUPS] = (typeof(seen[0])){h, n, id};
        txt("G %d %d", id, n);
        for (int i = 0; i < n; i++) txt(" %d", r[n + i]);
        txt("\n");
    }
    free(r);
    return id;
}

void pf_comm_gone(MPI_Comm c) {
    tables();
    for (int i = 2; i < g.ncomms; i++)
        if (comms[i].h == c) {
            comms[i] = comms[--g.ncomms];
            return;
        }
}

/* ---- requests (open addressing, linear probing, backward-shift delete) --- */

static inline size_t rhash(uint64_t k) { return (size_t)((k * 0x9E3779B97F4A7C15ULL) >> 50) & (PF_REQ_SLOTS - 1); }

/* Under MPI_THREAD_MULTIPLE the key also holds the calling thread's number (bits 48-59): a handle that
 * one thread's completed request frees may be given to another thread's new request before the first
 * thread's bookkeeping has seen the completion. */
#define PF_KEY_THREAD (0xFFFULL << 48)

uint64_t pf_req_key(MPI_Request r) {
    uint64_t k = 0;
    if (r == MPI_REQUEST_NULL) return 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    k &= ~(1ULL << 63);
    if (multiple && t_main == 2 && pf_thr_self()) k = (k & ~PF_KEY_THREAD) | ((uint64_t)pf_thr_self()->num << 48);
    return k;
}

static pf_req *req_lookup(uint64_t key) {
    for (size_t i = rhash(key); reqs[i].key; i = (i + 1) & (PF_REQ_SLOTS - 1))
        if (reqs[i].key == key) return &reqs[i];
    return NULL;
}

void pf_req_post(uint64_t key, int recv, int peer, int tag, int comm, int64_t bytes) {
    tables();
    if (!key || peer == MPI_PROC_NULL) return;
    if (g.nreq >= PF_REQ_SLOTS * 3 / 4) {
        g.req_dropped++;
        return;
    }
    size_t i = rhash(key);
    while (reqs[i].key && reqs[i].key != key) i = (i + 1) & (PF_REQ_SLOTS - 1);
    if (!reqs[i].key) g.nreq++;
    int64_t id = g.req_next++;
    reqs[i] = (pf_req){key, id, bytes, 0, peer, tag, comm, (uint8_t)recv};
    pf_p2p(recv ? P2P_IRECV_REQUEST : P2P_ISEND, peer, comm, tag, bytes, id, pf_t_enter());
}

/* A non-blocking collective: BEGIN now (inside the I-call), END when a
 * Wait/Test completes the request; both carry the request id. */
void pf_icoll_post(uint64_t key, int op, int comm, int root, int64_t sent, int64_t recvd) {
    tables();
    if (!key) return;
    if (g.nreq >= PF_REQ_SLOTS * 3 / 4) {
        g.req_dropped++;
        return;
    }
    size_t i = rhash(key);
    while (reqs[i].key && reqs[i].key != key) i = (i + 1) & (PF_REQ_SLOTS - 1);
    if (!reqs[i].key) g.nreq++;
    int64_t id = g.req_next++;
    reqs[i] = (pf_req){key, id, sent, recvd, root, op, comm, 2};
    pf_coll_req(id, COLL_BEGIN, op, comm, root, 0, 0, pf_t_enter());
}

/* A request-based RMA operation (MPI_Rput, ...): its local completion is the Wait/Test that completes the
 * request; returns the operation's matching id (bit 62 set, apart from the epoch-completed operations). */
int64_t pf_rma_req_post(uint64_t key, int win) {
    tables();
    int64_t id = g.req_next++, match = id | (1LL << 62);
    if (!key || g.nreq >= PF_REQ_SLOTS * 3 / 4) {
        g.req_dropped += key != 0;
        return match;
    }
    size_t i = rhash(key);
    while (reqs[i].key && reqs[i].key != key) i = (i + 1) & (PF_REQ_SLOTS - 1);
    if (!reqs[i].key) g.nreq++;
    reqs[i] = (pf_req){key, id, match, 0, win, 0, -1, 3};
    return match;
}

pf_req *pf_req_find(uint64_t key) {
    tables();
    if (!key) return NULL;
    pf_req *r = req_lookup(key);
    /* a request completed on another thread than the one that started it */
    for (int n = 0; !r && multiple && !(key >> 63) && n <= pf_thr_count(); n++)
        if ((((uint64_t)n << 48) & PF_KEY_THREAD) != (key & PF_KEY_THREAD))
            r = req_lookup((key & ~PF_KEY_THREAD) | ((uint64_t)n << 48));
    return r;
}

static void req_delete(size_t i) {
    size_t j = i;
    g.nreq--;
    for (;;) {
        reqs[i].key = 0;
        for (;;) {
            j = (j + 1) & (PF_REQ_SLOTS - 1);
            if (!reqs[j].key) return;
            size_t k = rhash(reqs[j].key);
            /* move j back to i unless its home k lies cyclically in (i, j] */
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
            break;
        }
        reqs[i] = reqs[j];
        i = j;
    }
}

void pf_req_done(pf_req *r, const MPI_Status *st, double t) {
    int cancelled = 0;
    if (r->recv == 3) {
        pf_rma(RMA_COMPLETE_NB, r->peer, -1, -1, 0xFFFF, 0, 0, (uint64_t)r->bytes, t);
        req_delete((size_t)(r - reqs));
        return;
    }
    if (r->recv == 2) {
        pf_coll_req(r->id, COLL_END, r->tag, r->comm, r->peer, r->bytes, r->bytes2, t);
        req_delete((size_t)(r - reqs));
        return;
    }
    if (st) PMPI_Test_cancelled(st, &cancelled);
    if (cancelled) {
        pf_p2p(P2P_REQUEST_CANCELLED, r->peer, r->comm, r->tag, 0, r->id, t);
    } else if (r->recv) {
        int n = MPI_UNDEFINED;
        int peer = st ? st->MPI_SOURCE : r->peer, tag = st ? st->MPI_TAG : r->tag;
        if (st) PMPI_Get_count(st, MPI_BYTE, &n);
        pf_p2p(P2P_IRECV, peer, r->comm, tag, n == MPI_UNDEFINED ? r->bytes : n, r->id, t);
    } else {
        pf_p2p(P2P_ISEND_COMPLETE, r->peer, r->comm, r->tag, r->bytes, r->id, t);
    }
    req_delete((size_t)(r - reqs));
}

void pf_req_drop(uint64_t key) {
    tables();
    pf_req *r = pf_req_find(key);
    if (r) req_delete((size_t)(r - reqs));
    pf_persist_drop(key);
}

/* ---- persistent requests: what *_init said, re-posted by each MPI_Start ----- */

#define PF_PERSIST_SLOTS 1024
static pf_req persist[PF_PERSIST_SLOTS];

static pf_req *persist_slot(uint64_t key, int add) {
    if (!(key >> 63)) key &= ~PF_KEY_THREAD; /* persistent requests: any thread may start them */
    size_t i = rhash(key) & (PF_PERSIST_SLOTS - 1);
    for (int probe = 0; probe < PF_PERSIST_SLOTS; probe++, i = (i + 1) & (PF_PERSIST_SLOTS - 1)) {
        if (persist[i].key == key) return &persist[i];
        if (add && persist[i].key <= 1) return &persist[i]; /* empty (0) or deleted (1) */
        if (!persist[i].key) return NULL;
    }
    return NULL;
}

void pf_persist_new(uint64_t key, int recv, int peer, int tag, int comm, int64_t bytes) {
    tables();
    pf_req *r = key > 1 ? persist_slot(key, 1) : NULL;
    if (r) *r = (pf_req){key >> 63 ? key : key & ~PF_KEY_THREAD, 0, bytes, 0, peer, tag, comm, (uint8_t)recv};
    else g.req_dropped++;
}

void pf_persist_start(uint64_t key) {
    tables();
    pf_req *r = key > 1 ? persist_slot(key, 0) : NULL;
    if (r) pf_req_post(key, r->recv, r->peer, r->tag, r->comm, r->bytes);
}

void pf_persist_drop(uint64_t key) {
    tables();
    pf_req *r = key > 1 ? persist_slot(key, 0) : NULL;
    if (r) r->key = 1; /* a tombstone keeps later probes going */
}

/* ---- lifecycle ----------------------------------------------------------- */

void pf_after_init(void) {
    if (!pf_active) return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &g.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &g.world_size);
    PMPI_Comm_group(MPI_COMM_WORLD, &g.world_group);
    int level = MPI_THREAD_SINGLE;
    if (PMPI_Query_thread(&level) == MPI_SUCCESS) multiple = level == MPI_THREAD_MULTIPLE;
    comms[0] = (pf_commslot){MPI_COMM_WORLD, 0, 1, 0, 0};
    comms[1] = (pf_commslot){MPI_COMM_SELF, 1, (int64_t)(mix(0x5E1FULL + (uint64_t)g.world_rank) >> 1), 0, 0};
    g.ncomms = 2;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    txt("rank %d\nsize %d\nhost %s\nW %d\nC 1 %lld MPI_COMM_SELF 1 %d\n", g.world_rank, g.world_size, host,
        g.world_size, (long long)comms[1].key, g.world_rank);
    flush_ev();
}

/* Write everything out before MPI_Finalize: when one rank exits with an error
 * status, the launcher may kill the others while they are still inside it. */
void pf_before_finalize(void) {
    if (!pf_active) return;
    txt("stats requests_untracked %lld contexts_untracked %lld\n", (long long)g.req_dropped, (long long)g.ctx_full);
    PMPI_Group_free(&g.world_group);
    pf_omp_check();
    flush_all();
    pf_thr_flush_parked();
}

void pf_after_finalize(void) {
    if (pf_active) flush_all();
}

/* ---- for the worker threads' streams (pfrec_thr.c) and OpenMP (pfrec_omp.c) ---- */

const char *pf_base(void) { return g.base; }

/* The sampling period of the initial thread's timer and its clock, 0 when worker threads cannot have timers
 * of their own (no sampling, or the process-wide ITIMER_PROF). */
long pf_sample_period_ns(int *clock) {
    if (g.timer_kind != 1 || g.hz <= 0) return 0;
    *clock = CLOCK_THREAD_CPUTIME_ID;
    return 1000000000L / g.hz;
}

void pf_mark_worker(void) { t_main = 2; }

int pf_is_initial(void) {
    if (t_main == 0) t_main = pthread_equal(pthread_self(), g.main) ? 1 : 2;
    return t_main == 1;
}

/* A record of the initial thread stamped now (unless r.t is set), region records counted, no sample
 * between the time stamp and the count; `wait` >= 0 sets whether the thread now waits in OpenMP (no
 * samples). */
void pf_main_put(pf_rec r, int wait) {
    sig_atomic_t was = g.in_mpi;
    g.in_mpi = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (r.t == 0) r.t = pf_now();
    *slot() = r;
    if (r.type == PF_R_ENTER || r.type == PF_R_LEAVE) g.nregion++;
    if (wait >= 0) g.omp_wait = wait;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    g.in_mpi = was;
}

/* The call context of an OpenMP construct met on the initial thread (as for an MPI call). */
int64_t pf_main_ctx(void *ra, void *fp) {
    sig_atomic_t was = g.in_mpi;
    g.in_mpi = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    int64_t ctx = call_ctx(ra, fp);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    g.in_mpi = was;
    return ctx;
}

static void on_fork_child(void) { pf_active = 0; }

static int rank_env(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) {
            txt("env_rank %s\n", getenv(vars[i]));
            return 1;
        }
    return 0;
}

__attribute__((constructor)) static void pf_ctor(void) {
    const char *dir = getenv("PERFLOW_RECORD_DIR"), *hz = getenv("PERFLOW_RECORD_HZ");
    char path[4200], exe[4096];
    if (!dir || !*dir) return;
    g.fd_ev = g.fd_smp = g.fd_txt = -1;
    g.pid = getpid();
    snprintf(g.base, sizeof g.base, "%s/p%d", dir, (int)g.pid);
    snprintf(path, sizeof path, "%s.txt", g.base);
    g.fd_txt = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (g.fd_txt < 0) {
        fprintf(stderr, "perflow-recorder: cannot create %s: %s\n", path, strerror(errno));
        return;
    }
    if (!rank_env() && !getenv("PERFLOW_RECORD_ALL")) {
        close(g.fd_txt);
        unlink(path);
        return;
    }
    snprintf(path, sizeof path, "%s.ev", g.base);
    g.fd_ev = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    snprintf(path, sizeof path, "%s.smp", g.base);
    g.fd_smp = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (g.fd_ev < 0 || g.fd_smp < 0) {
        fprintf(stderr, "perflow-recorder: cannot create %s: %s\n", path, strerror(errno));
        return;
    }
    g.tid = (pid_t)syscall(SYS_gettid);
    g.main = pthread_self();
    g.comm_next = 2;
    g.hz = hz ? atoi(hz) : 100;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    struct timespec m1, r, m2;
    clock_gettime(CLOCK_MONOTONIC, &m1);
    clock_gettime(CLOCK_REALTIME, &r);
    clock_gettime(CLOCK_MONOTONIC, &m2);
    double off = ((double)r.tv_sec + 1e-9 * r.tv_nsec) -
                 0.5 * ((double)m1.tv_sec + 1e-9 * m1.tv_nsec + (double)m2.tv_sec + 1e-9 * m2.tv_nsec);
    txt("version 1\nkind native\npid %d\nexe %s\nhz %d\nclock_offset %.9f\nrecsize %d\n", (int)g.pid, exe, g.hz, off,
        (int)sizeof(pf_rec));
    pthread_atfork(NULL, NULL, on_fork_child);
    t_main = 1;
    pf_active = 1;
    *slot() = (pf_rec){.t = pf_now(), .n1 = -1, .comm = -1, .type = PF_R_ENTER, .fn = PF_PROGRAM};
    g.nregion++;
    start_sampling();
    pf_crash_install(); /* flush on fatal signals and MPI_Abort (pfrec_crash.c) */
}

__attribute__((destructor)) static void pf_dtor(void) {
    if (!pf_active || getpid() != g.pid) return;
    stop_sampling();
    if (g.in_mpi) pf_end(g.cur_fn); /* exit() from inside an MPI call: close it */
    pf_inst_close();                 /* and user functions still open */
    pf_omp_check();
    pf_thr_flush_parked();           /* the worker threads' streams */
    *slot() = (pf_rec){.t = pf_now(), .comm = -1, .type = PF_R_LEAVE, .fn = PF_PROGRAM};
    g.nregion++;
    flush_ev();
    flush_smp();
    copy_maps();
    txt("end\n");
    pf_active = 0;
    close(g.fd_ev);
    close(g.fd_smp);
    close(g.fd_txt);
}
