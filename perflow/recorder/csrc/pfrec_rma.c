/* perflow recorder: MPI one-sided communication (windows, epochs, transfers).
 *
 * Each call is a region, and writes the RMA records Score-P writes (see
 * pfrec.h for their layout): window collectives (create, allocate, fence,
 * free) a COLL_BEGIN at the enter and a COLL_END at the leave (create: after
 * a WIN_CREATE; free: after a WIN_DESTROY); post/start/complete/wait/test a
 * GROUP_SYNC naming the epoch's group; lock/unlock REQUEST_LOCK/RELEASE_LOCK;
 * put/get/accumulate/... a PUT/GET/ATOMIC with the target's rank and the
 * bytes. A transfer is completed locally by the next fence, complete,
 * unlock or flush that covers its target (one COMPLETE record per transfer,
 * with the same matching id: the target's rank plus the window size times
 * the number of completions of that target so far), a request-based one
 * (MPI_Rput, ...) by the Wait/Test of its request.
 *
 * Windows get local ids; an "R <id> <local comm> <ordinal>" line of
 * p<pid>.txt gives the communicator and the number of windows created over
 * it before, which identify the window across its members.
 */
#include <stdlib.h>

#include "pfrec.h"

#define PF_MAXWIN 256

typedef struct {
    MPI_Win h;
    int id, size, alloc, access, exposure; /* access/exposure: the group of the open epoch */
    int64_t npend, *pend, *seq;            /* per target: pending transfers, completions so far */
} pf_win;

static pf_win wins[PF_MAXWIN];
static int nwins, win_next;

static pf_win *win_find(MPI_Win h) {
    for (int i = nwins - 1; i >= 0; i--)
        if (wins[i].h == h) return &wins[i];
    return NULL;
}

static int win_id(MPI_Win h) {
    pf_win *w = win_find(h);
    return w ? w->id : -1;
}

/* Register a window created over `c` (on every member, recorded or not, so that the ordinals agree). */
int pf_win_new(MPI_Comm c, MPI_Win h, int alloc) {
    int size = 0;
    if (!pf_active || h == MPI_WIN_NULL) return -1;
    int64_t ord = pf_comm_count_win(c);
    int id = win_next++;
    pf_txt("R %d %d %lld\n", id, pf_comm(c), (long long)ord);
    PMPI_Comm_size(c, &size);
    if (nwins == PF_MAXWIN) return id;
    int64_t *a = calloc(2 * (size_t)(size > 0 ? size : 1), sizeof(int64_t));
    wins[nwins++] = (pf_win){h, id, a ? size : 0, alloc, -1, -1, 0, a, a ? a + size : NULL};
    return id;
}

void pf_win_gone(MPI_Win h) {
    pf_win *w = win_find(h);
    if (!w) return;
    free(w->pend);
    *w = wins[--nwins];
}

/* Local completion of the pending transfers to `target` (-1: to every target). */
static void complete(pf_win *w, int target, double t) {
    if (!w || !w->npend) return;
    int lo = target < 0 ? 0 : target, hi = target < 0 ? w->size : target + 1;
    for (int r = lo; r < hi && r < w->size; r++) {
        if (!w->pend[r]) continue;
        uint64_t m = (uint64_t)(w->seq[r] * w->size + r);
        for (int64_t k = 0; k < w->pend[r]; k++) pf_rma(RMA_COMPLETE_NB, w->id, -1, -1, 0xFFFF, 0, 0, m, t);
        w->npend -= w->pend[r];
        w->pend[r] = 0;
        w->seq[r]++;
    }
}

/* A transfer to `target`; `key` the request of a request-based one (0 none). */
void pf_win_transfer(MPI_Win h, int kind, int target, int op, int64_t sent, int64_t got, uint64_t key) {
    pf_win *w = win_find(h);
    if (target == MPI_PROC_NULL) return;
    uint64_t m;
    if (key) {
        m = (uint64_t)pf_rma_req_post(key, w ? w->id : -1);
    } else if (w && target >= 0 && target < w->size) {
        m = (uint64_t)(w->seq[target] * w->size + target);
        w->pend[target]++;
        w->npend++;
    } else {
        m = (uint64_t)-1;
    }
    pf_rma(kind, w ? w->id : -1, target, -1, op, sent, got, m, pf_t_enter());
}

void pf_win_coll_begin(void) { pf_rma(RMA_COLL_BEGIN, -1, -1, -1, 0xFFFF, 0, 0, 0, pf_t_enter()); }

static void coll_end(int id, int op, double t) { pf_rma(RMA_COLL_END, id, -1, -1, op, 0, 0, RMA_LEVEL, t); }

/* ---- window creation and destruction --------------------------------------- */

/* a window created inside a recorded call: registered, then WIN_CREATE and COLL_END */
void pf_win_created(MPI_Comm c, MPI_Win h, int alloc) {
    int id = pf_win_new(c, h, alloc);
    double t = pf_now();
    pf_rma(RMA_WIN_CREATE, id, -1, -1, 0xFFFF, 0, 0, 0, t);
    coll_end(id, alloc ? WOP_CREATE_ALLOC : WOP_CREATE, t);
}

#define WCREATE(ID, ALLOC, COMM, WIN, CALL)                      \
    if (!PF_BEGIN(ID)) {                                         \
        int rc_ = CALL;                                          \
        if (rc_ == MPI_SUCCESS) pf_win_new(COMM, *(WIN), ALLOC); \
        return rc_;                                              \
    }                                                            \
    pf_win_coll_begin();                                         \
    int rc_ = CALL;                                              \
    if (rc_ == MPI_SUCCESS) pf_win_created(COMM, *(WIN), ALLOC); \
    pf_end(PF_##ID);                                             \
    return rc_;

int MPI_Win_create(void *base, MPI_Aint size, int unit, MPI_Info info, MPI_Comm c, MPI_Win *win) {
    WCREATE(WIN_CREATE, 0, c, win, PMPI_Win_create(base, size, unit, info, c, win))
}

int MPI_Win_allocate(MPI_Aint size, int unit, MPI_Info info, MPI_Comm c, void *base, MPI_Win *win) {
    WCREATE(WIN_ALLOCATE, 1, c, win, PMPI_Win_allocate(size, unit, info, c, base, win))
}

int MPI_Win_allocate_shared(MPI_Aint size, int unit, MPI_Info info, MPI_Comm c, void *base, MPI_Win *win) {
    WCREATE(WIN_ALLOCATE_SHARED, 1, c, win, PMPI_Win_allocate_shared(size, unit, info, c, base, win))
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm c, MPI_Win *win) {
    WCREATE(WIN_CREATE_DYNAMIC, 0, c, win, PMPI_Win_create_dynamic(info, c, win))
}

/* after the free: WIN_DESTROY and COLL_END of the window that was `h` (`id`, allocated or not) */
void pf_win_free_end(MPI_Win h, int id, int alloc) {
    double t = pf_now();
    pf_rma(RMA_WIN_DESTROY, id, -1, -1, 0xFFFF, 0, 0, 0, t);
    coll_end(id, alloc ? WOP_DESTROY_DEALLOC : WOP_DESTROY, t);
    pf_win_gone(h);
}

int pf_win_id(MPI_Win h) { return win_id(h); }

int pf_win_alloc(MPI_Win h) {
    pf_win *w = win_find(h);
    return w ? w->alloc : 0;
}

int MPI_Win_free(MPI_Win *win) {
    MPI_Win h = *win;
    if (!PF_BEGIN(WIN_FREE)) {
        pf_win_gone(h);
        return PMPI_Win_free(win);
    }
    int alloc = pf_win_alloc(h), id = win_id(h);
    pf_win_coll_begin();
    int rc = PMPI_Win_free(win);
    pf_win_free_end(h, id, alloc);
    pf_end(PF_WIN_FREE);
    return rc;
}

/* ---- synchronisation ------------------------------------------------------- */

void pf_win_fence_end(MPI_Win h) {
    double t = pf_now();
    complete(win_find(h), -1, t);
    coll_end(win_id(h), WOP_FENCE, t);
}

int MPI_Win_fence(int assert, MPI_Win win) {
    if (!PF_BEGIN(WIN_FENCE)) return PMPI_Win_fence(assert, win);
    pf_win_coll_begin();
    int rc = PMPI_Win_fence(assert, win);
    pf_win_fence_end(win);
    pf_end(PF_WIN_FENCE);
    return rc;
}

/* A group sync at the leave of post (role 'P'), start ('S'), complete ('C'), wait and test ('W'). */
void pf_win_sync(MPI_Win h, int role, MPI_Group grp, int level) {
    pf_win *w = win_find(h);
    double t = pf_now();
    int gid = -1;
    if (role == 'P' || role == 'S') gid = pf_group(grp);
    if (w && role == 'P') w->exposure = gid;
    if (w && role == 'S') w->access = gid;
    if (w && role == 'C') gid = w->access;
    if (w && role == 'W') gid = w->exposure;
    if (role == 'C') complete(w, -1, t);
    pf_rma(RMA_GROUP_SYNC, w ? w->id : -1, -1, gid, 0xFFFF, 0, 0, (uint64_t)level, t);
}

#define GSYNC(ID, ROLE, GRP, WIN, LEVEL, CALL) \
    if (!PF_BEGIN(ID)) return CALL;            \
    int rc_ = CALL;                            \
    pf_win_sync(WIN, ROLE, GRP, LEVEL);        \
    pf_end(PF_##ID);                           \
    return rc_;

int MPI_Win_post(MPI_Group grp, int assert, MPI_Win win) {
    GSYNC(WIN_POST, 'P', grp, win, RMA_LEVEL, PMPI_Win_post(grp, assert, win))
}

int MPI_Win_start(MPI_Group grp, int assert, MPI_Win win) {
    GSYNC(WIN_START, 'S', grp, win, RMA_LEVEL, PMPI_Win_start(grp, assert, win))
}

int MPI_Win_complete(MPI_Win win) { GSYNC(WIN_COMPLETE, 'C', MPI_GROUP_NULL, win, RMA_LEVEL, PMPI_Win_complete(win)) }

int MPI_Win_wait(MPI_Win win) { GSYNC(WIN_WAIT, 'W', MPI_GROUP_NULL, win, RMA_LEVEL, PMPI_Win_wait(win)) }

int MPI_Win_test(MPI_Win win, int *flag) {
    if (!PF_BEGIN(WIN_TEST)) return PMPI_Win_test(win, flag);
    int rc = PMPI_Win_test(win, flag);
    pf_win_sync(win, 'W', MPI_GROUP_NULL, rc == MPI_SUCCESS && *flag ? RMA_LEVEL : 0);
    pf_end(PF_WIN_TEST);
    return rc;
}

/* Lock records: the lock id is the target's rank (-1: all targets, MPI_Win_lock_all). */
void pf_win_lock(MPI_Win h, int kind, int target, int type) {
    pf_win *w = win_find(h);
    if (kind == RMA_RELEASE_LOCK) complete(w, target, pf_now());
    pf_rma(kind, w ? w->id : -1, target, -1, type, 0, 0, (uint64_t)(int64_t)target,
           kind == RMA_RELEASE_LOCK ? pf_now() : pf_t_enter());
}

#define LOCKCALL(ID, WIN, KIND, TARGET, TYPE, CALL) \
    if (!PF_BEGIN(ID)) return CALL;                 \
    int rc_ = CALL;                                 \
    pf_win_lock(WIN, KIND, TARGET, TYPE);           \
    pf_end(PF_##ID);                                \
    return rc_;

int MPI_Win_lock(int type, int rank, int assert, MPI_Win win) {
    LOCKCALL(WIN_LOCK, win, RMA_REQUEST_LOCK, rank, type == MPI_LOCK_SHARED ? LOCK_SHARED : LOCK_EXCLUSIVE,
             PMPI_Win_lock(type, rank, assert, win))
}

int MPI_Win_unlock(int rank, MPI_Win win) {
    LOCKCALL(WIN_UNLOCK, win, RMA_RELEASE_LOCK, rank, 0xFFFF, PMPI_Win_unlock(rank, win))
}

int MPI_Win_lock_all(int assert, MPI_Win win) {
    LOCKCALL(WIN_LOCK_ALL, win, RMA_REQUEST_LOCK, -1, LOCK_SHARED, PMPI_Win_lock_all(assert, win))
}

int MPI_Win_unlock_all(MPI_Win win) {
    LOCKCALL(WIN_UNLOCK_ALL, win, RMA_RELEASE_LOCK, -1, 0xFFFF, PMPI_Win_unlock_all(win))
}

/* flushes: local completion of the transfers to one target (-1: all) */
void pf_win_flush(MPI_Win h, int target) { complete(win_find(h), target, pf_now()); }

#define FLUSH(ID, WIN, TARGET, CALL) \
    if (!PF_BEGIN(ID)) return CALL;  \
    int rc_ = CALL;                  \
    pf_win_flush(WIN, TARGET);       \
    pf_end(PF_##ID);                 \
    return rc_;

int MPI_Win_flush(int rank, MPI_Win win) { FLUSH(WIN_FLUSH, win, rank, PMPI_Win_flush(rank, win)) }
int MPI_Win_flush_all(MPI_Win win) { FLUSH(WIN_FLUSH_ALL, win, -1, PMPI_Win_flush_all(win)) }
int MPI_Win_flush_local(int rank, MPI_Win win) { FLUSH(WIN_FLUSH_LOCAL, win, rank, PMPI_Win_flush_local(rank, win)) }
int MPI_Win_flush_local_all(MPI_Win win) { FLUSH(WIN_FLUSH_LOCAL_ALL, win, -1, PMPI_Win_flush_local_all(win)) }

/* ---- transfers --------------------------------------------------------------- */

#define XFER(ID, WIN, KIND, TARGET, OP, SENT, GOT, CALL, REQ)                                  \
    if (!PF_BEGIN(ID)) return CALL;                                                            \
    int rc_ = CALL;                                                                            \
    if (rc_ == MPI_SUCCESS) pf_win_transfer(WIN, KIND, TARGET, OP, SENT, GOT, REQ);                   \
    pf_end(PF_##ID);                                                                           \
    return rc_;

int MPI_Put(const void *ob, int on, MPI_Datatype ot, int target, MPI_Aint disp, int tn, MPI_Datatype tt,
            MPI_Win win) {
    XFER(PUT, win, RMA_PUT, target, 0xFFFF, pf_bytes(on, ot), 0, PMPI_Put(ob, on, ot, target, disp, tn, tt, win), 0)
}

int MPI_Get(void *ob, int on, MPI_Datatype ot, int target, MPI_Aint disp, int tn, MPI_Datatype tt, MPI_Win win) {
    XFER(GET, win, RMA_GET, target, 0xFFFF, 0, pf_bytes(on, ot), PMPI_Get(ob, on, ot, target, disp, tn, tt, win), 0)
}

int MPI_Accumulate(const void *ob, int on, MPI_Datatype ot, int target, MPI_Aint disp, int tn, MPI_Datatype tt,
                   MPI_Op op, MPI_Win win) {
    XFER(ACCUMULATE, win, RMA_ATOMIC, target, AT_ACCUMULATE, pf_bytes(on, ot), 0,
         PMPI_Accumulate(ob, on, ot, target, disp, tn, tt, op, win), 0)
}

int MPI_Get_accumulate(const void *ob, int on, MPI_Datatype ot, void *rb, int rn, MPI_Datatype rt, int target,
                       MPI_Aint disp, int tn, MPI_Datatype tt, MPI_Op op, MPI_Win win) {
    XFER(GET_ACCUMULATE, win, RMA_ATOMIC, target, AT_FETCH_ACCUMULATE, op == MPI_NO_OP ? 0 : pf_bytes(on, ot),
         pf_bytes(rn, rt), PMPI_Get_accumulate(ob, on, ot, rb, rn, rt, target, disp, tn, tt, op, win), 0)
}

int MPI_Fetch_and_op(const void *ob, void *rb, MPI_Datatype dt, int target, MPI_Aint disp, MPI_Op op, MPI_Win win) {
    XFER(FETCH_AND_OP, win, RMA_ATOMIC, target, AT_FETCH_AND_OP, op == MPI_NO_OP ? 0 : pf_bytes(1, dt),
         pf_bytes(1, dt), PMPI_Fetch_and_op(ob, rb, dt, target, disp, op, win), 0)
}

int MPI_Compare_and_swap(const void *ob, const void *cb, void *rb, MPI_Datatype dt, int target, MPI_Aint disp,
                         MPI_Win win) {
    XFER(COMPARE_AND_SWAP, win, RMA_ATOMIC, target, AT_COMPARE_AND_SWAP, pf_bytes(1, dt), pf_bytes(1, dt),
         PMPI_Compare_and_swap(ob, cb, rb, dt, target, disp, win), 0)
}

int MPI_Rput(const void *ob, int on, MPI_Datatype ot, int target, MPI_Aint disp, int tn, MPI_Datatype tt,
             MPI_Win win, MPI_Request *req) {
    XFER(RPUT, win, RMA_PUT, target, 0xFFFF, pf_bytes(on, ot), 0,
         PMPI_Rput(ob, on, ot, target, disp, tn, tt, win, req), pf_req_key(*req))
}

int MPI_Rget(void *ob, int on, MPI_Datatype ot, int target, MPI_Aint disp, int tn, MPI_Datatype tt, MPI_Win win,
             MPI_Request *req) {
    XFER(RGET, win, RMA_GET, target, 0xFFFF, 0, pf_bytes(on, ot),
         PMPI_Rget(ob, on, ot, target, disp, tn, tt, win, req), pf_req_key(*req))
}

int MPI_Raccumulate(const void *ob, int on, MPI_Datatype ot, int target, MPI_Aint disp, int tn, MPI_Datatype tt,
                    MPI_Op op, MPI_Win win, MPI_Request *req) {
    XFER(RACCUMULATE, win, RMA_ATOMIC, target, AT_ACCUMULATE, pf_bytes(on, ot), 0,
         PMPI_Raccumulate(ob, on, ot, target, disp, tn, tt, op, win, req), pf_req_key(*req))
}

int MPI_Rget_accumulate(const void *ob, int on, MPI_Datatype ot, void *rb, int rn, MPI_Datatype rt, int target,
                        MPI_Aint disp, int tn, MPI_Datatype tt, MPI_Op op, MPI_Win win, MPI_Request *req) {
    XFER(RGET_ACCUMULATE, win, RMA_ATOMIC, target, AT_FETCH_ACCUMULATE, op == MPI_NO_OP ? 0 : pf_bytes(on, ot),
         pf_bytes(rn, rt), PMPI_Rget_accumulate(ob, on, ot, rb, rn, rt, target, disp, tn, tt, op, win, req),
         pf_req_key(*req))
}
