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
 *
 * Filter file (PERFLOW_RECORD_FILTER: perflow record --filter resolved it to
 * entry offsets before the run): lines "M <module path>" each followed by the
 * hexadecimal link-time addresses of the module's excluded functions. A
 * function is looked up once, at its first call (dladdr1 gives its module
 * and load bias); an excluded one is never recorded.
 *
 * Every function's calls are counted (visits, recorded, dropped and the time
 * of the dropped ones) and written as "U" lines at exit for perflow score.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    uint64_t fn, visits;
    uint32_t calls, dropped;
    double dropped_t;
    int off; /* 1: switched off after its probation, 2: excluded by the filter file */
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

/* ---- the filter file: excluded entry offsets per module ---------------------- */

typedef struct {
    char path[PATH_MAX];
    uint64_t *off;
    size_t n;
} fmod_t;

static fmod_t *fmods;
static int nfmods = -1; /* -1: not loaded yet */
static struct { const struct link_map *lm; int mod; } lmcache[64];
static int nlm;

__attribute__((no_instrument_function)) static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

__attribute__((no_instrument_function)) static void load_filter(void) {
    nfmods = 0;
    const char *path = getenv("PERFLOW_RECORD_FILTER");
    FILE *f = path && *path ? fopen(path, "r") : NULL;
    if (!f) return;
    char line[PATH_MAX + 8];
    size_t cap = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == 'M' && line[1] == ' ') {
            fmod_t *m = realloc(fmods, sizeof(fmod_t) * (size_t)(nfmods + 1));
            if (!m) break;
            fmods = m;
            m = &fmods[nfmods++];
            memset(m, 0, sizeof *m);
            if (!realpath(line + 2, m->path)) snprintf(m->path, sizeof m->path, "%s", line + 2);
            cap = 0;
        } else if (nfmods > 0 && line[0]) {
            fmod_t *m = &fmods[nfmods - 1];
            if (m->n == cap) {
                uint64_t *o = realloc(m->off, sizeof(uint64_t) * (cap = cap ? 2 * cap : 256));
                if (!o) break;
                m->off = o;
            }
            m->off[m->n++] = strtoull(line, NULL, 16);
        }
    }
    fclose(f);
    for (int i = 0; i < nfmods; i++) qsort(fmods[i].off, fmods[i].n, sizeof(uint64_t), cmp_u64);
}

/* Whether the function entered at `fn` is excluded by the filter file. */
__attribute__((no_instrument_function)) static int filtered(uint64_t fn) {
    if (nfmods < 0) load_filter();
    if (nfmods == 0) return 0;
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1((void *)(uintptr_t)fn, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm) return 0;
    int mod = -2;
    for (int i = 0; i < nlm; i++)
        if (lmcache[i].lm == lm) mod = lmcache[i].mod;
    if (mod == -2) {
        char buf[PATH_MAX];
        const char *name = lm->l_name && lm->l_name[0] ? lm->l_name : "/proc/self/exe";
        mod = -1;
        if (realpath(name, buf))
            for (int i = 0; i < nfmods; i++)
                if (strcmp(buf, fmods[i].path) == 0) mod = i;
        if (nlm < 64) lmcache[nlm++] = (typeof(lmcache[0])){lm, mod};
    }
    if (mod < 0) return 0;
    uint64_t off = fn - (uint64_t)lm->l_addr;
    return bsearch(&off, fmods[mod].off, fmods[mod].n, sizeof(uint64_t), cmp_u64) != NULL;
}

__attribute__((no_instrument_function)) static fnstat_t *stat_of(uint64_t fn) {
    size_t i = (size_t)((fn * 0x9E3779B97F4A7C15ULL) >> 40) & (PF_FNSLOTS - 1);
    for (int probe = 0; probe < 64; probe++, i = (i + 1) & (PF_FNSLOTS - 1)) {
        if (fnstat[i].fn == fn) return &fnstat[i];
        if (fnstat[i].fn == 0) {
            fnstat[i].fn = fn;
            if (filtered(fn)) fnstat[i].off = 2;
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
    if (st) st->visits++;
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
        if (st) st->dropped_t += t - u->t;
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

/* Close the user functions still open (exit() called inside them) and write
 * every function's call counts: "U <entry> <visits> <recorded> <dropped>
 * <seconds of the dropped calls> <off>". */
__attribute__((no_instrument_function)) void pf_inst_close(void) {
    double t;
    uover = 0;
    while (udepth > 0) {
        ustack_t *u = &ustack[--udepth];
        pf_utop = u->prev_top;
        if (u->rec) pf_region_rec((pf_rec){.comm = -1, .type = PF_R_LEAVE, .fn = PF_USER}, &t);
    }
    for (size_t i = 0; i < PF_FNSLOTS; i++)
        if (fnstat[i].fn && fnstat[i].visits)
            pf_txt("U %llx %llu %u %u %.9g %d\n", (unsigned long long)fnstat[i].fn,
                   (unsigned long long)fnstat[i].visits, fnstat[i].calls, fnstat[i].dropped, fnstat[i].dropped_t,
                   fnstat[i].off);
}
