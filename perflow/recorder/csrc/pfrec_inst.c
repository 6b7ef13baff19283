/* perflow recorder: user-function regions from compiler instrumentation.
 *
 * Programs built with -finstrument-functions (perflow cc/cxx/fc) call
 * __cyg_profile_func_enter/exit around every instrumented function; this
 * file records them as ENTER/LEAVE records of function PF_USER whose address
 * is the function's entry (resolved to name, file and line once per address,
 * after the run). Without instrumentation nothing here is ever called.
 *
 * Runtime filter (PERFLOW_RECORD_MIN_CALL, seconds, default 1e-5): a call
 * shorter than that which recorded nothing inside it (no nested region, no
 * sample) is taken back from the buffer, and a function whose first
 * PF_PROBATION calls were all taken back is not recorded any more (its calls
 * then cost one hash lookup). Set it to 0 to keep every call.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "pfrec.h"

#define PF_USTACK 4096
#define PF_FNSLOTS 8192
#define PF_PROBATION 64

uint64_t pf_utop;

typedef struct {
    uint64_t fn, mark, nsmp, prev_top;
    double t;
    int rec;
} ustack_t;

typedef struct {
    uint64_t fn;
    uint32_t calls, dropped;
    int off;
} fnstat_t;

static ustack_t ustack[PF_USTACK];
static int udepth, uover;
static fnstat_t fnstat[PF_FNSLOTS];
static double min_call = -1.0;

__attribute__((no_instrument_function)) double pf_inst_min(void) {
    if (min_call < 0) {
        const char *e = getenv("PERFLOW_RECORD_MIN_CALL");
        min_call = e && *e ? atof(e) : 1e-5;
        if (min_call < 0) min_call = 0;
    }
    return min_call;
}

__attribute__((no_instrument_function)) static fnstat_t *stat_of(uint64_t fn) {
    size_t i = (size_t)((fn * 0x9E3779B97F4A7C15ULL) >> 40) & (PF_FNSLOTS - 1);
    for (int probe = 0; probe < 64; probe++, i = (i + 1) & (PF_FNSLOTS - 1)) {
        if (fnstat[i].fn == fn) return &fnstat[i];
        if (fnstat[i].fn == 0) {
            fnstat[i].fn = fn;
            return &fnstat[i];
        }
    }
    return NULL; /* table full: record the function, unfiltered */
}

__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void *fn, void *site) {
    (void)site;
    if (!pf_user_ok()) return;
    if (udepth >= PF_USTACK) {
        uover++;
        return;
    }
    uint64_t a = (uint64_t)(uintptr_t)fn;
    fnstat_t *st = stat_of(a);
    ustack_t *u = &ustack[udepth++];
    u->fn = a;
    u->rec = !(st && st->off);
    u->prev_top = pf_utop;
    if (!u->rec) return;
    if (st) st->calls++;
    u->nsmp = pf_nsamples;
    u->mark = pf_region_rec((pf_rec){.addr = a, .n1 = -1, .n2 = (int64_t)pf_utop, .comm = -1, .type = PF_R_ENTER,
                                     .fn = PF_USER},
                            &u->t);
    pf_utop = a;
}

__attribute__((no_instrument_function)) static void leave(ustack_t *u, double t) {
    pf_utop = u->prev_top;
    if (!u->rec) return;
    if (t - u->t < pf_inst_min() && pf_nsamples == u->nsmp && pf_region_unrec(u->mark)) {
        fnstat_t *st = stat_of(u->fn);
        if (st && ++st->dropped >= PF_PROBATION && st->dropped == st->calls) st->off = 1;
        return;
    }
    pf_region_rec((pf_rec){.comm = -1, .type = PF_R_LEAVE, .fn = PF_USER}, &t);
}

__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void *fn, void *site) {
    (void)site;
    if (!pf_user_ok()) return;
    if (uover > 0) {
        uover--;
        return;
    }
    uint64_t a = (uint64_t)(uintptr_t)fn;
    int k = udepth - 1;
    while (k >= 0 && ustack[k].fn != a) k--;
    if (k < 0) return; /* an exit without its enter (e.g. entered before recording started) */
    double t = pf_now();
    while (udepth > k) leave(&ustack[--udepth], t); /* frames skipped by longjmp leave too */
}

/* Close the user functions still open (exit() called inside them). */
__attribute__((no_instrument_function)) void pf_inst_close(void) {
    double t;
    uover = 0;
    while (udepth > 0) {
        ustack_t *u = &ustack[--udepth];
        pf_utop = u->prev_top;
        if (u->rec) pf_region_rec((pf_rec){.comm = -1, .type = PF_R_LEAVE, .fn = PF_USER}, &t);
    }
}
