/* perflow recorder: Fortran entry points of MPI one-sided communication (Open MPI only; see pfrec_f.c).
 *
 * Windows, epochs and transfers as in pfrec_rma.c, whose helpers take the C
 * handles; the request-based calls (MPI_Rput, ...) are recorded from C only.
 */
#include "pfrec_f.h"

#define WIN(w) PMPI_Win_f2c(*(w))

static int64_t fbytes(F *count, F *dt) { return pf_bytes(*count, PMPI_Type_f2c(*dt)); }

/* ---- window creation and destruction --------------------------------------- */

#define FWCREATE(ID, ALLOC, COMM, WINP, CALL)                                         \
    if (!PF_BEGIN(ID)) {                                                              \
        CALL;                                                                         \
        if (IERR_OK) pf_win_new(PMPI_Comm_f2c(*(COMM)), WIN(WINP), ALLOC);            \
        return;                                                                       \
    }                                                                                 \
    pf_win_coll_begin();                                                              \
    CALL;                                                                             \
    if (IERR_OK) pf_win_created(PMPI_Comm_f2c(*(COMM)), WIN(WINP), ALLOC);            \
    pf_end(PF_##ID);

#define P_WCREATE (void *base, void *size, F *unit, F *info, F *comm, F *win, F *ierr)
PMPI(mpi_win_create, P_WCREATE)
void F_NAME(mpi_win_create) P_WCREATE {
    FWCREATE(WIN_CREATE, 0, comm, win, F_NAME(pmpi_win_create)(base, size, unit, info, comm, win, ierr))
}
ALIASES(mpi_win_create, MPI_WIN_CREATE, P_WCREATE)

#define P_WALLOC (void *size, F *unit, F *info, F *comm, void *base, F *win, F *ierr)
PMPI(mpi_win_allocate, P_WALLOC)
void F_NAME(mpi_win_allocate) P_WALLOC {
    FWCREATE(WIN_ALLOCATE, 1, comm, win, F_NAME(pmpi_win_allocate)(size, unit, info, comm, base, win, ierr))
}
ALIASES(mpi_win_allocate, MPI_WIN_ALLOCATE, P_WALLOC)

#define P_WIN (F * win, F *ierr)
PMPI(mpi_win_free, P_WIN)
void F_NAME(mpi_win_free) P_WIN {
    MPI_Win h = WIN(win);
    if (!PF_BEGIN(WIN_FREE)) {
        F_NAME(pmpi_win_free)(win, ierr);
        pf_win_gone(h);
        return;
    }
    int alloc = pf_win_alloc(h), id = pf_win_id(h);
    pf_win_coll_begin();
    F_NAME(pmpi_win_free)(win, ierr);
    pf_win_free_end(h, id, alloc);
    pf_end(PF_WIN_FREE);
}
ALIASES(mpi_win_free, MPI_WIN_FREE, P_WIN)

/* ---- synchronisation ------------------------------------------------------- */

#define P_FENCE (F * assert, F *win, F *ierr)
PMPI(mpi_win_fence, P_FENCE)
void F_NAME(mpi_win_fence) P_FENCE {
    if (!PF_BEGIN(WIN_FENCE)) {
        F_NAME(pmpi_win_fence)(assert, win, ierr);
        return;
    }
    pf_win_coll_begin();
    F_NAME(pmpi_win_fence)(assert, win, ierr);
    pf_win_fence_end(WIN(win));
    pf_end(PF_WIN_FENCE);
}
ALIASES(mpi_win_fence, MPI_WIN_FENCE, P_FENCE)

#define FGSYNC(ID, ROLE, GRP, CALL)           \
    if (!PF_BEGIN(ID)) {                      \
        CALL;                                 \
        return;                               \
    }                                         \
    CALL;                                     \
    pf_win_sync(WIN(win), ROLE, GRP, RMA_LEVEL); \
    pf_end(PF_##ID);

#define P_PS (F * grp, F *assert, F *win, F *ierr)
PMPI(mpi_win_post, P_PS)
void F_NAME(mpi_win_post) P_PS {
    FGSYNC(WIN_POST, 'P', PMPI_Group_f2c(*grp), F_NAME(pmpi_win_post)(grp, assert, win, ierr))
}
ALIASES(mpi_win_post, MPI_WIN_POST, P_PS)

PMPI(mpi_win_start, P_PS)
void F_NAME(mpi_win_start) P_PS {
    FGSYNC(WIN_START, 'S', PMPI_Group_f2c(*grp), F_NAME(pmpi_win_start)(grp, assert, win, ierr))
}
ALIASES(mpi_win_start, MPI_WIN_START, P_PS)

PMPI(mpi_win_complete, P_WIN)
void F_NAME(mpi_win_complete) P_WIN { FGSYNC(WIN_COMPLETE, 'C', MPI_GROUP_NULL, F_NAME(pmpi_win_complete)(win, ierr)) }
ALIASES(mpi_win_complete, MPI_WIN_COMPLETE, P_WIN)

PMPI(mpi_win_wait, P_WIN)
void F_NAME(mpi_win_wait) P_WIN { FGSYNC(WIN_WAIT, 'W', MPI_GROUP_NULL, F_NAME(pmpi_win_wait)(win, ierr)) }
ALIASES(mpi_win_wait, MPI_WIN_WAIT, P_WIN)

#define FLOCK(ID, KIND, TARGET, TYPE, CALL)          \
    if (!PF_BEGIN(ID)) {                             \
        CALL;                                        \
        return;                                      \
    }                                                \
    CALL;                                            \
    pf_win_lock(WIN(win), KIND, TARGET, TYPE);       \
    pf_end(PF_##ID);

#define P_LOCK (F * type, F *rank, F *assert, F *win, F *ierr)
PMPI(mpi_win_lock, P_LOCK)
void F_NAME(mpi_win_lock) P_LOCK {
    FLOCK(WIN_LOCK, RMA_REQUEST_LOCK, *rank, *type == MPI_LOCK_SHARED ? LOCK_SHARED : LOCK_EXCLUSIVE,
          F_NAME(pmpi_win_lock)(type, rank, assert, win, ierr))
}
ALIASES(mpi_win_lock, MPI_WIN_LOCK, P_LOCK)

#define P_RANKWIN (F * rank, F *win, F *ierr)
PMPI(mpi_win_unlock, P_RANKWIN)
void F_NAME(mpi_win_unlock) P_RANKWIN {
    FLOCK(WIN_UNLOCK, RMA_RELEASE_LOCK, *rank, 0xFFFF, F_NAME(pmpi_win_unlock)(rank, win, ierr))
}
ALIASES(mpi_win_unlock, MPI_WIN_UNLOCK, P_RANKWIN)

PMPI(mpi_win_lock_all, P_FENCE)
void F_NAME(mpi_win_lock_all) P_FENCE {
    FLOCK(WIN_LOCK_ALL, RMA_REQUEST_LOCK, -1, LOCK_SHARED, F_NAME(pmpi_win_lock_all)(assert, win, ierr))
}
ALIASES(mpi_win_lock_all, MPI_WIN_LOCK_ALL, P_FENCE)

PMPI(mpi_win_unlock_all, P_WIN)
void F_NAME(mpi_win_unlock_all) P_WIN {
    FLOCK(WIN_UNLOCK_ALL, RMA_RELEASE_LOCK, -1, 0xFFFF, F_NAME(pmpi_win_unlock_all)(win, ierr))
}
ALIASES(mpi_win_unlock_all, MPI_WIN_UNLOCK_ALL, P_WIN)

#define FFLUSH(ID, TARGET, CALL) \
    if (!PF_BEGIN(ID)) {         \
        CALL;                    \
        return;                  \
    }                            \
    CALL;                        \
    pf_win_flush(WIN(win), TARGET); \
    pf_end(PF_##ID);

PMPI(mpi_win_flush, P_RANKWIN)
void F_NAME(mpi_win_flush) P_RANKWIN { FFLUSH(WIN_FLUSH, *rank, F_NAME(pmpi_win_flush)(rank, win, ierr)) }
ALIASES(mpi_win_flush, MPI_WIN_FLUSH, P_RANKWIN)

PMPI(mpi_win_flush_all, P_WIN)
void F_NAME(mpi_win_flush_all) P_WIN { FFLUSH(WIN_FLUSH_ALL, -1, F_NAME(pmpi_win_flush_all)(win, ierr)) }
ALIASES(mpi_win_flush_all, MPI_WIN_FLUSH_ALL, P_WIN)

/* ---- transfers --------------------------------------------------------------- */

#define FXFER(ID, KIND, OP, SENT, GOT, CALL)                                   \
    if (!PF_BEGIN(ID)) {                                                       \
        CALL;                                                                  \
        return;                                                                \
    }                                                                          \
    CALL;                                                                      \
    if (IERR_OK) pf_win_transfer(WIN(win), KIND, *target, OP, SENT, GOT, 0);   \
    pf_end(PF_##ID);

#define P_PUT (void *ob, F *on, F *ot, F *target, void *disp, F *tn, F *tt, F *win, F *ierr)
PMPI(mpi_put, P_PUT)
void F_NAME(mpi_put) P_PUT {
    FXFER(PUT, RMA_PUT, 0xFFFF, fbytes(on, ot), 0, F_NAME(pmpi_put)(ob, on, ot, target, disp, tn, tt, win, ierr))
}
ALIASES(mpi_put, MPI_PUT, P_PUT)

PMPI(mpi_get, P_PUT)
void F_NAME(mpi_get) P_PUT {
    FXFER(GET, RMA_GET, 0xFFFF, 0, fbytes(on, ot), F_NAME(pmpi_get)(ob, on, ot, target, disp, tn, tt, win, ierr))
}
ALIASES(mpi_get, MPI_GET, P_PUT)

#define P_ACC (void *ob, F *on, F *ot, F *target, void *disp, F *tn, F *tt, F *op, F *win, F *ierr)
PMPI(mpi_accumulate, P_ACC)
void F_NAME(mpi_accumulate) P_ACC {
    FXFER(ACCUMULATE, RMA_ATOMIC, AT_ACCUMULATE, fbytes(on, ot), 0,
          F_NAME(pmpi_accumulate)(ob, on, ot, target, disp, tn, tt, op, win, ierr))
}
ALIASES(mpi_accumulate, MPI_ACCUMULATE, P_ACC)
