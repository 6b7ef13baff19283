/* perflow recorder: OpenMP threads through OMPT (the OpenMP tools interface of OpenMP 5).
 *
 * The preloaded library defines ompt_start_tool, which an OpenMP runtime that implements OMPT (LLVM's
 * libomp, Intel's) calls when it starts; the callbacks registered then record, on the thread they run on
 * (the initial thread's stream in pfrec_core.c, a worker's in pfrec_thr.c), what Score-P's OpenMP
 * adapter records:
 *
 *   fork and join      THR_FORK (the requested team size) before the master's ENTER of the parallel
 *                      region, THR_JOIN after its LEAVE (parallel_begin / parallel_end);
 *   the team           on every thread of the team THR_TEAM_BEGIN and ENTER of the parallel region at its
 *                      implicit task's begin, LEAVE and THR_TEAM_END at its end. LLVM reports a worker's
 *                      end of the barrier that closes a parallel region (and of its implicit task) only
 *                      when the worker wakes up for the next region: the worker's LEAVEs are stamped with
 *                      the time the barrier completed, when the master left it (the team's join time);
 *   barriers           ENTER/LEAVE of "!$omp barrier" (explicit) and "!$omp implicit barrier" (sync_region),
 *                      "!$omp taskwait", "!$omp taskgroup";
 *   critical sections  ENTER "!$omp critical" when the thread asks for it, THR_ACQUIRE_LOCK and ENTER
 *                      "!$omp critical sblock" when it gets it, LEAVE, THR_RELEASE_LOCK, LEAVE on release;
 *   locks              omp_set_lock / omp_set_nest_lock as regions from the call to the acquisition
 *                      (THR_ACQUIRE_LOCK at its end), omp_unset_lock / omp_unset_nest_lock around
 *                      THR_RELEASE_LOCK; omp_test_lock when it succeeded; nested re-acquisitions of a nest
 *                      lock as regions without lock records. The lock is the OMPT wait id and the
 *                      acquisition number counts the acquisitions of that lock over all threads;
 *   worksharing        "!$omp for", "!$omp sections", "!$omp single", "!$omp workshare",
 *                      "!$omp taskloop", "!$omp master"/masked, "!$omp ordered" (sync regions, no locks);
 *   explicit tasks     "!$omp task" from the switch to a task to its completion on the thread that runs
 *                      it (a tied task suspended at a scheduling point stays open while the tasks run there
 *                      nest inside it).
 *
 * A region's ENTER carries the construct's code address (OMPT's codeptr_ra minus one, resolved to file and
 * line after the run); a parallel region's carries also the master's call context, the same on every
 * thread of the team. Samples are not taken while a thread waits (a barrier, a lock or critical section it
 * asks for) unless it runs a task meanwhile.
 *
 * The OMPT declarations below are written from the OpenMP 5.1 specification (only what is used), so the
 * library builds with any C compiler, without the runtime's omp-tools.h.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfrec.h"

/* ---- OMPT (OpenMP 5.1, chapter 4) --------------------------------------------- */

typedef union ompt_data_t {
    uint64_t value;
    void *ptr;
} ompt_data_t;
typedef struct ompt_frame_t {
    ompt_data_t exit_frame, enter_frame;
    int exit_frame_flags, enter_frame_flags;
} ompt_frame_t;
typedef void (*ompt_callback_t)(void);
typedef void (*ompt_interface_fn_t)(void);
typedef ompt_interface_fn_t (*ompt_function_lookup_t)(const char *name);
typedef int (*ompt_set_callback_t)(int event, ompt_callback_t callback);
typedef int (*ompt_initialize_t)(ompt_function_lookup_t lookup, int initial_device_num, ompt_data_t *tool_data);
typedef void (*ompt_finalize_t)(ompt_data_t *tool_data);
typedef struct ompt_start_tool_result_t {
    ompt_initialize_t initialize;
    ompt_finalize_t finalize;
    ompt_data_t tool_data;
} ompt_start_tool_result_t;

enum {
    ompt_callback_thread_begin = 1, ompt_callback_thread_end = 2, ompt_callback_parallel_begin = 3,
    ompt_callback_parallel_end = 4, ompt_callback_task_create = 5, ompt_callback_task_schedule = 6,
    ompt_callback_implicit_task = 7, ompt_callback_mutex_released = 17, ompt_callback_work = 20,
    ompt_callback_masked = 21, ompt_callback_sync_region = 23, ompt_callback_mutex_acquire = 26,
    ompt_callback_mutex_acquired = 27, ompt_callback_nest_lock = 28
};
enum { ompt_thread_initial = 1, ompt_thread_worker = 2 };
enum { ompt_scope_begin = 1, ompt_scope_end = 2 };
enum { ompt_set_never = 1, ompt_set_always = 5 };
enum {
    ompt_sync_region_barrier = 1, ompt_sync_region_barrier_implicit = 2, ompt_sync_region_barrier_explicit = 3,
    ompt_sync_region_barrier_implementation = 4, ompt_sync_region_taskwait = 5, ompt_sync_region_taskgroup = 6,
    ompt_sync_region_reduction = 7, ompt_sync_region_barrier_implicit_workshare = 8,
    ompt_sync_region_barrier_implicit_parallel = 9, ompt_sync_region_barrier_teams = 10
};
enum {
    ompt_work_loop = 1, ompt_work_sections = 2, ompt_work_single_executor = 3, ompt_work_single_other = 4,
    ompt_work_workshare = 5, ompt_work_distribute = 6, ompt_work_taskloop = 7, ompt_work_scope = 8
};
enum {
    ompt_mutex_lock = 1, ompt_mutex_test_lock = 2, ompt_mutex_nest_lock = 3, ompt_mutex_test_nest_lock = 4,
    ompt_mutex_critical = 5, ompt_mutex_atomic = 6, ompt_mutex_ordered = 7
};
enum { ompt_task_initial = 0x1, ompt_task_implicit = 0x2, ompt_task_explicit = 0x4 };
enum {
    ompt_task_complete = 1, ompt_task_yield = 2, ompt_task_cancel = 3, ompt_task_detach = 4,
    ompt_task_early_fulfill = 5, ompt_task_late_fulfill = 6, ompt_task_switch = 7
};

/* ---- state ------------------------------------------------------------------ */

#define PF_NEST 16   /* teams a thread is in at once (nested parallel regions) */
#define PF_HELD 32   /* locks and critical sections a thread holds at once */
#define PF_TASKS 64  /* explicit tasks open on a thread at once (tied tasks nest) */
#define PF_LOCKS 4096
#define TASK_MARK (1ULL << 62)
#define TASK_STARTED (1ULL << 61)
#define TASK_ADDR ((1ULL << 56) - 1)

/* one team instance (a run of a parallel region), shared by its threads */
typedef struct pf_team {
    uint64_t code; /* the parallel construct's code address */
    int64_t ctx;   /* the master's call context at the fork */
    double join;   /* when the barrier ending the region completed (the master left it), 0 before */
    int refs;      /* the master's fork and each implicit task hold it */
} pf_team;

typedef struct omp_state {
    int ready, initial;
    pf_thr *t;     /* the worker's stream; NULL on the initial thread */
    int wait;      /* > 0: waiting (barrier, asking for a lock): no samples */
    double last;   /* the last time stamp written */
    int nteam;
    struct { pf_team *team; int master; } teams[PF_NEST];
    pf_team *pend;    /* a worker waiting in the barrier that ends its team's region (LLVM: until woken) */
    pf_team *settled; /* ... whose LEAVEs another thread wrote meanwhile (pf_omp_settle) */
    uint16_t pend_fn;
    int nheld;
    struct { uint64_t id; int64_t order; } held[PF_HELD];
    int ntask;
    int task_wait[PF_TASKS]; /* the wait depth a task's start interrupted */
    int lockcalls;           /* omp_set_lock / omp_set_nest_lock regions open (asked, not yet acquired) */
} omp_state;

static __thread omp_state S __attribute__((tls_model("initial-exec")));
static volatile int ompt_on;
static char runtime[128];
static struct {
    uint64_t id;
    int64_t n;
} lock_tab[PF_LOCKS];

/* The calling thread's state, registering a worker thread on first use. */
static omp_state *me(void) {
    if (__builtin_expect(S.ready, 1)) return pf_active ? &S : NULL;
    if (!pf_active) return NULL;
    if (pf_is_initial()) {
        S.initial = 1;
    } else {
        S.t = pf_thr_start();
        if (!S.t) return NULL;
        S.t->omp = &S;
    }
    S.ready = 1;
    return &S;
}

/* Append a record to the thread's stream (stamped now when t is 0; never before the last one). */
static double put(omp_state *s, int type, int kind, uint16_t fn, uint64_t addr, int64_t n1, int64_t n2, int a,
                  double t) {
    if (t > 0 && t < s->last) t = s->last;
    pf_rec r = {.t = t, .addr = addr, .n1 = n1, .n2 = n2, .a = a, .comm = -1, .type = (uint8_t)type,
                .kind = (uint8_t)kind, .fn = fn};
    if (s->t) {
        pf_thr_own(s->t);
        t = pf_thr_put(s->t, r);
        s->t->wait = s->wait > 0;
    } else {
        if (r.t == 0) r.t = pf_now();
        t = r.t;
        pf_main_put(r, s->wait > 0);
    }
    return s->last = t;
}
#define ENTER(s, fn, addr, ctx) put(s, PF_R_ENTER, 0, PF_##fn, addr, ctx, 0, 0, 0)
#define LEAVE(s, fn) put(s, PF_R_LEAVE, 0, PF_##fn, 0, 0, 0, 0, 0)
#define THR(s, kind, a, lock, order) put(s, PF_R_THR, kind, 0, 0, lock, order, a, 0)

static inline double join_of(pf_team *tm) {
    double t;
    __atomic_load(&tm->join, &t, __ATOMIC_ACQUIRE);
    return t;
}

static inline uint64_t code(const void *ra) { return ra ? (uint64_t)(uintptr_t)ra - 1 : 0; }

/* the acquisition number of the next acquisition of lock `id` (counted over all threads of the process) */
static int64_t lock_order(uint64_t id) {
    size_t i = (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 40) & (PF_LOCKS - 1);
    for (int probe = 0; probe < PF_LOCKS; probe++, i = (i + 1) & (PF_LOCKS - 1)) {
        uint64_t cur = __atomic_load_n(&lock_tab[i].id, __ATOMIC_ACQUIRE);
        if (cur == 0) {
            uint64_t z = 0;
            if (__atomic_compare_exchange_n(&lock_tab[i].id, &z, id, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) cur = id;
            else cur = z;
        }
        if (cur == id) return __atomic_fetch_add(&lock_tab[i].n, 1, __ATOMIC_RELAXED);
    }
    return -1;
}

static void hold(omp_state *s, uint64_t id, int64_t order) {
    if (s->nheld < PF_HELD) s->held[s->nheld++] = (typeof(s->held[0])){id, order};
}

static int64_t unhold(omp_state *s, uint64_t id) {
    for (int k = s->nheld - 1; k >= 0; k--)
        if (s->held[k].id == id) {
            int64_t o = s->held[k].order;
            s->held[k] = s->held[--s->nheld];
            return o;
        }
    return -1;
}

static void team_drop(pf_team *tm) {
    if (tm && __atomic_sub_fetch(&tm->refs, 1, __ATOMIC_ACQ_REL) == 0) free(tm);
}

/* ---- parallel regions --------------------------------------------------------- */

static void on_parallel_begin(ompt_data_t *task, const ompt_frame_t *frame, ompt_data_t *par, unsigned int req,
                              int flags, const void *ra) {
    (void)task;
    (void)flags;
    omp_state *s = me();
    par->ptr = NULL;
    if (!s) return;
    pf_team *tm = calloc(1, sizeof *tm);
    if (!tm) return;
    tm->code = code(ra);
    tm->refs = 1;
    void *fp = frame ? frame->enter_frame.ptr : NULL;
    tm->ctx = ra ? (s->t ? pf_thr_ctx(s->t, (void *)ra, fp) : pf_main_ctx((void *)ra, fp)) : -1;
    par->ptr = tm;
    THR(s, THR_FORK, (int)req, 0, 0);
}

static void on_parallel_end(ompt_data_t *par, ompt_data_t *task, int flags, const void *ra) {
    (void)task;
    (void)flags;
    (void)ra;
    omp_state *s = me();
    pf_team *tm = par->ptr;
    if (!tm) return;
    if (s) THR(s, THR_JOIN, -1, 0, 0);
    team_drop(tm);
}

static void on_implicit_task(int endpoint, ompt_data_t *par, ompt_data_t *task, unsigned int n, unsigned int index,
                             int flags) {
    (void)task;
    (void)n;
    if (flags & ompt_task_initial) return;
    omp_state *s = me();
    if (!s) return;
    if (endpoint == ompt_scope_begin) {
        pf_team *tm = par ? par->ptr : NULL;
        if (!tm || s->nteam >= PF_NEST) return;
        __atomic_add_fetch(&tm->refs, 1, __ATOMIC_RELAXED);
        s->teams[s->nteam].team = tm;
        s->teams[s->nteam++].master = index == 0;
        THR(s, THR_TEAM_BEGIN, -1, 0, 0);
        ENTER(s, OMP_PARALLEL, tm->code, tm->ctx);
        return;
    }
    if (s->nteam == 0) return;
    s->nteam--;
    pf_team *tm = s->teams[s->nteam].team;
    int master = s->teams[s->nteam].master;
    double t = 0;
    if (!master) t = join_of(tm);
    if (s->settled == tm) {
        s->settled = NULL; /* pf_omp_settle wrote the LEAVEs */
    } else {
        if (s->pend == tm) {
            s->pend = NULL;
            s->wait--;
            put(s, PF_R_LEAVE, 0, s->pend_fn, 0, 0, 0, 0, t);
        }
        put(s, PF_R_LEAVE, 0, PF_OMP_PARALLEL, 0, 0, 0, 0, t);
        put(s, PF_R_THR, THR_TEAM_END, 0, 0, 0, 0, -1, t);
    }
    team_drop(tm);
    if (s->t && s->nteam == 0) pf_thr_park(s->t);
}

/* Write the LEAVEs of a parked worker's pending end of a parallel region (the caller owns its stream). */
void pf_omp_settle(pf_thr *t) {
    omp_state *s = t->omp;
    if (!s || !s->pend || s->nteam == 0) return;
    pf_team *tm = s->pend;
    double join = join_of(tm);
    if (join <= 0) return; /* the master has not left the barrier yet */
    if (join < s->last) join = s->last;
    pf_rec r = {.t = join, .comm = -1, .type = PF_R_LEAVE, .fn = s->pend_fn};
    pf_thr_put(t, r);
    r.fn = PF_OMP_PARALLEL;
    pf_thr_put(t, r);
    r = (pf_rec){.t = join, .a = -1, .comm = -1, .type = PF_R_THR, .kind = THR_TEAM_END};
    pf_thr_put(t, r);
    s->last = join;
    s->settled = tm;
    s->pend = NULL;
    s->wait--;
}

/* ---- barriers and other synchronisation regions ------------------------------- */

static void on_sync_region(int kind, int endpoint, ompt_data_t *par, ompt_data_t *task, const void *ra) {
    (void)par;
    (void)task;
    omp_state *s = me();
    if (!s) return;
    uint16_t fn;
    switch (kind) {
    case ompt_sync_region_barrier_explicit: fn = PF_OMP_BARRIER; break;
    case ompt_sync_region_taskwait: fn = PF_OMP_TASKWAIT; break;
    case ompt_sync_region_taskgroup: fn = PF_OMP_TASKGROUP; break;
    case ompt_sync_region_reduction: return;
    default: fn = PF_OMP_IBARRIER;
    }
    pf_team *tm = s->nteam ? s->teams[s->nteam - 1].team : NULL;
    int master = s->nteam ? s->teams[s->nteam - 1].master : 1;
    /* the barrier that ends the region: LLVM gives the master the parallel construct's address and the
     * workers none (runtimes of OMPT 5.1: kind barrier_implicit_parallel) */
    int ends = tm && (kind == ompt_sync_region_barrier_implicit_parallel ||
                      ((kind == ompt_sync_region_barrier_implicit || kind == ompt_sync_region_barrier) &&
                       (!ra || code(ra) == tm->code)));
    int late = ends && !master && s->t; /* a worker: its end is reported when it wakes for the next region */
    if (endpoint == ompt_scope_begin) {
        s->wait++;
        put(s, PF_R_ENTER, 0, fn, ra ? code(ra) : tm ? tm->code : 0, -1, 0, 0, 0);
        if (late) {
            s->pend = tm;
            s->pend_fn = fn;
            pf_thr_park(s->t); /* it may sleep here until the next region: its stream can be written out */
        }
        return;
    }
    if (late) {
        if (s->pend == tm) {
            s->pend = NULL;
            s->wait--;
            put(s, PF_R_LEAVE, 0, fn, 0, 0, 0, 0, join_of(tm));
        }
        return; /* (or pf_omp_settle wrote it) */
    }
    s->wait--;
    double t = put(s, PF_R_LEAVE, 0, fn, 0, 0, 0, 0, 0);
    if (ends) __atomic_store(&tm->join, &t, __ATOMIC_RELEASE);
}

/* ---- worksharing, master ------------------------------------------------------- */

static void on_work(int wstype, int endpoint, ompt_data_t *par, ompt_data_t *task, uint64_t count, const void *ra) {
    (void)par;
    (void)task;
    (void)count;
    omp_state *s = me();
    if (!s) return;
    uint16_t fn;
    switch (wstype) {
    case ompt_work_loop: fn = PF_OMP_LOOP; break;
    case ompt_work_sections: fn = PF_OMP_SECTIONS; break;
    case ompt_work_single_executor:
    case ompt_work_single_other: fn = PF_OMP_SINGLE; break;
    case ompt_work_workshare: fn = PF_OMP_WORKSHARE; break;
    case ompt_work_taskloop: fn = PF_OMP_TASKLOOP; break;
    default: return; /* distribute, scope */
    }
    if (endpoint == ompt_scope_begin) put(s, PF_R_ENTER, 0, fn, code(ra), -1, 0, 0, 0);
    else put(s, PF_R_LEAVE, 0, fn, 0, 0, 0, 0, 0);
}

static void on_masked(int endpoint, ompt_data_t *par, ompt_data_t *task, const void *ra) {
    (void)par;
    (void)task;
    omp_state *s = me();
    if (!s) return;
    if (endpoint == ompt_scope_begin) ENTER(s, OMP_MASTER, code(ra), -1);
    else LEAVE(s, OMP_MASTER);
}

/* ---- locks and critical sections ------------------------------------------------- */

static void on_mutex_acquire(int kind, unsigned int hint, unsigned int impl, uint64_t wait_id, const void *ra) {
    (void)hint;
    (void)impl;
    (void)wait_id;
    omp_state *s = me();
    if (!s) return;
    switch (kind) {
    case ompt_mutex_lock:
    case ompt_mutex_nest_lock:
        s->wait++;
        s->lockcalls++;
        put(s, PF_R_ENTER, 0, kind == ompt_mutex_lock ? PF_OMP_SET_LOCK : PF_OMP_SET_NEST_LOCK, code(ra), -1, 0, 0, 0);
        break;
    case ompt_mutex_critical:
        s->wait++;
        ENTER(s, OMP_CRITICAL, code(ra), -1);
        break;
    case ompt_mutex_ordered:
        s->wait++;
        ENTER(s, OMP_ORDERED, code(ra), -1);
        break;
    default: break; /* test locks: recorded when they succeed; atomics: not recorded */
    }
}

static void on_mutex_acquired(int kind, uint64_t wait_id, const void *ra) {
    omp_state *s = me();
    if (!s) return;
    int64_t order;
    switch (kind) {
    case ompt_mutex_lock:
    case ompt_mutex_nest_lock:
        order = lock_order(wait_id);
        hold(s, wait_id, order);
        THR(s, THR_ACQUIRE_LOCK, -1, (int64_t)wait_id, order);
        if (s->lockcalls > 0) {
            s->lockcalls--;
            s->wait--;
            put(s, PF_R_LEAVE, 0, kind == ompt_mutex_lock ? PF_OMP_SET_LOCK : PF_OMP_SET_NEST_LOCK, 0, 0, 0, 0, 0);
        }
        break;
    case ompt_mutex_test_lock:
    case ompt_mutex_test_nest_lock: {
        uint16_t fn = kind == ompt_mutex_test_lock ? PF_OMP_TEST_LOCK : PF_OMP_TEST_NEST_LOCK;
        put(s, PF_R_ENTER, 0, fn, code(ra), -1, 0, 0, 0);
        order = lock_order(wait_id);
        hold(s, wait_id, order);
        THR(s, THR_ACQUIRE_LOCK, -1, (int64_t)wait_id, order);
        put(s, PF_R_LEAVE, 0, fn, 0, 0, 0, 0, 0);
        break;
    }
    case ompt_mutex_critical:
        order = lock_order(wait_id);
        hold(s, wait_id, order);
        s->wait--;
        THR(s, THR_ACQUIRE_LOCK, -1, (int64_t)wait_id, order);
        ENTER(s, OMP_CRITICAL_SBLOCK, code(ra), -1);
        break;
    case ompt_mutex_ordered:
        s->wait--;
        ENTER(s, OMP_ORDERED_SBLOCK, code(ra), -1);
        break;
    default: break;
    }
}

static void on_mutex_released(int kind, uint64_t wait_id, const void *ra) {
    omp_state *s = me();
    if (!s) return;
    switch (kind) {
    case ompt_mutex_lock:
    case ompt_mutex_test_lock:
    case ompt_mutex_nest_lock:
    case ompt_mutex_test_nest_lock: {
        int nest = kind == ompt_mutex_nest_lock || kind == ompt_mutex_test_nest_lock;
        put(s, PF_R_ENTER, 0, nest ? PF_OMP_UNSET_NEST_LOCK : PF_OMP_UNSET_LOCK, code(ra), -1, 0, 0, 0);
        THR(s, THR_RELEASE_LOCK, -1, (int64_t)wait_id, unhold(s, wait_id));
        put(s, PF_R_LEAVE, 0, nest ? PF_OMP_UNSET_NEST_LOCK : PF_OMP_UNSET_LOCK, 0, 0, 0, 0, 0);
        break;
    }
    case ompt_mutex_critical:
        LEAVE(s, OMP_CRITICAL_SBLOCK);
        THR(s, THR_RELEASE_LOCK, -1, (int64_t)wait_id, unhold(s, wait_id));
        LEAVE(s, OMP_CRITICAL);
        break;
    case ompt_mutex_ordered:
        LEAVE(s, OMP_ORDERED_SBLOCK);
        LEAVE(s, OMP_ORDERED);
        break;
    default: break;
    }
}

/* a nest lock acquired again (or released, not for the last time) by the thread that holds it */
static void on_nest_lock(int endpoint, uint64_t wait_id, const void *ra) {
    (void)wait_id;
    omp_state *s = me();
    if (!s) return;
    if (endpoint == ompt_scope_begin) {
        if (s->lockcalls > 0) { /* omp_set_nest_lock: its region opened when it asked */
            s->lockcalls--;
            s->wait--;
            LEAVE(s, OMP_SET_NEST_LOCK);
        } else {
            ENTER(s, OMP_TEST_NEST_LOCK, code(ra), -1);
            LEAVE(s, OMP_TEST_NEST_LOCK);
        }
    } else {
        ENTER(s, OMP_UNSET_NEST_LOCK, code(ra), -1);
        LEAVE(s, OMP_UNSET_NEST_LOCK);
    }
}

/* ---- explicit tasks ---------------------------------------------------------------- */

static void on_task_create(ompt_data_t *task, const ompt_frame_t *frame, ompt_data_t *new_task, int flags, int deps,
                           const void *ra) {
    (void)task;
    (void)frame;
    (void)deps;
    if (new_task) new_task->value = (flags & ompt_task_explicit) ? TASK_MARK | (code(ra) & TASK_ADDR) : 0;
}

static void on_task_schedule(ompt_data_t *prior, int status, ompt_data_t *next) {
    omp_state *s = me();
    if (!s) return;
    if (prior && (prior->value & TASK_MARK) && (prior->value & TASK_STARTED) && status != ompt_task_yield &&
        status != ompt_task_switch) { /* it completed (or was cancelled, or its body ended: detach) */
        prior->value &= ~TASK_STARTED;
        if (s->ntask > 0) s->wait = s->task_wait[--s->ntask];
        LEAVE(s, OMP_TASK);
        if (s->pend && s->t && s->ntask == 0) pf_thr_park(s->t); /* back to waiting at the region's end */
    }
    if (next && (next->value & TASK_MARK) && !(next->value & TASK_STARTED)) { /* (a resumed task is open) */
        next->value |= TASK_STARTED;
        if (s->ntask < PF_TASKS) s->task_wait[s->ntask++] = s->wait;
        s->wait = 0; /* a task run while waiting is work: sampled */
        ENTER(s, OMP_TASK, next->value & TASK_ADDR, -1);
    }
}

/* ---- threads and registration -------------------------------------------------------- */

static void on_thread_begin(int type, ompt_data_t *data) {
    (void)type;
    (void)data;
    me();
}

static void on_thread_end(ompt_data_t *data) {
    (void)data;
    if (S.t) pf_thr_stop();
}

static int initialize(ompt_function_lookup_t lookup, int device, ompt_data_t *tool) {
    (void)device;
    (void)tool;
    ompt_set_callback_t set = (ompt_set_callback_t)lookup("ompt_set_callback");
    if (!set) return 0;
    static const struct {
        int event;
        ompt_callback_t fn;
    } cb[] = {
        {ompt_callback_thread_begin, (ompt_callback_t)on_thread_begin},
        {ompt_callback_thread_end, (ompt_callback_t)on_thread_end},
        {ompt_callback_parallel_begin, (ompt_callback_t)on_parallel_begin},
        {ompt_callback_parallel_end, (ompt_callback_t)on_parallel_end},
        {ompt_callback_implicit_task, (ompt_callback_t)on_implicit_task},
        {ompt_callback_sync_region, (ompt_callback_t)on_sync_region},
        {ompt_callback_work, (ompt_callback_t)on_work},
        {ompt_callback_masked, (ompt_callback_t)on_masked},
        {ompt_callback_mutex_acquire, (ompt_callback_t)on_mutex_acquire},
        {ompt_callback_mutex_acquired, (ompt_callback_t)on_mutex_acquired},
        {ompt_callback_mutex_released, (ompt_callback_t)on_mutex_released},
        {ompt_callback_nest_lock, (ompt_callback_t)on_nest_lock},
        {ompt_callback_task_create, (ompt_callback_t)on_task_create},
        {ompt_callback_task_schedule, (ompt_callback_t)on_task_schedule},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof cb / sizeof cb[0]; i++) n += set(cb[i].event, cb[i].fn) != ompt_set_never;
    ompt_on = n;
    return 1;
}

static void finalize(ompt_data_t *tool) { (void)tool; }

/* Called by the OpenMP runtime when it starts (OpenMP 5.1, 4.2.1); active only under perflow record. */
ompt_start_tool_result_t *ompt_start_tool(unsigned int omp_version, const char *runtime_version) {
    static ompt_start_tool_result_t result = {initialize, finalize, {0}};
    const char *dir = getenv("PERFLOW_RECORD_DIR");
    if (!dir || !*dir) return NULL;
    snprintf(runtime, sizeof runtime, "%u %s", omp_version, runtime_version ? runtime_version : "");
    for (char *c = runtime; *c; c++)
        if (*c == '\n') *c = ' ';
    return &result;
}

/* Note in p<pid>.txt how OpenMP threads were recorded (at MPI_Finalize and at exit, once): "omp_tool" with
 * the runtime's OMPT version when it took the tool, else "omp_runtime" naming an OpenMP runtime found in
 * the process that did not (GCC's libgomp has no OMPT): then only the initial thread is recorded. */
void pf_omp_check(void) {
    static int done;
    if (done || !pf_active) return;
    done = 1;
    if (ompt_on) {
        pf_txt("omp_tool %d %s\n", ompt_on, runtime);
        pf_txt("omp_threads %d\n", pf_thr_count());
        return;
    }
    void *sym = dlsym(RTLD_DEFAULT, "omp_get_num_threads");
    Dl_info info;
    if (!sym) return;
    const char *lib = dladdr(sym, &info) && info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
    pf_txt("omp_runtime %s\n", lib ? lib + 1 : info.dli_fname ? info.dli_fname : "unknown");
}
