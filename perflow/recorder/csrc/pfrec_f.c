/* perflow recorder: Fortran (mpif.h / use mpi, and mpi_f08) entry points, for Open MPI only.
 *
 * Open MPI's Fortran bindings call PMPI_* directly, so the C wrappers never see
 * Fortran calls; these wrappers record them and call the Fortran profiling
 * entry points (pmpi_*_), which do the handle conversions. Under MPICH the
 * Fortran bindings call the C MPI_* functions, so this file is not built there
 * (each call would be recorded twice). The pmpi_*_ symbols are weak: a program
 * without Fortran never calls these wrappers.
 */
#include <stdlib.h>

#include "pfrec_f.h"

static uint64_t fkey(F r) {
    static F null = -12345;
    if (null == -12345) null = PMPI_Request_c2f(MPI_REQUEST_NULL);
    return r == null ? 0 : ((uint64_t)(uint32_t)r | (3ULL << 62));
}

static int64_t fbytes(F *count, F *dt) { return pf_bytes(*count, PMPI_Type_f2c(*dt)); }
static int fcomm(F *c) { return pf_comm(PMPI_Comm_f2c(*c)); }

static void frecv_event(int comm, F *fst) {
    MPI_Status st;
    int n = 0;
    PMPI_Status_f2c(fst, &st);
    PMPI_Get_count(&st, MPI_BYTE, &n);
    pf_p2p(P2P_RECV, st.MPI_SOURCE, comm, st.MPI_TAG, n == MPI_UNDEFINED ? 0 : n, -1, pf_now());
}

static void fdone(uint64_t key, F *fst, double t) {
    pf_req *r = pf_req_find(key);
    if (!r) return;
    MPI_Status st;
    PMPI_Status_f2c(fst, &st);
    pf_req_done(r, &st, t);
}

/* ---- setup --------------------------------------------------------------- */

#define P_INIT (F * ierr)
PMPI(mpi_init, P_INIT)
void F_NAME(mpi_init) P_INIT {
    int rec = PF_BEGIN(INIT);
    F_NAME(pmpi_init)(ierr);
    pf_after_init();
    if (rec) {
        pf_end(PF_INIT);
    }
}
ALIASES(mpi_init, MPI_INIT, P_INIT)

#define P_INIT_THREAD (F * req, F *prov, F *ierr)
PMPI(mpi_init_thread, P_INIT_THREAD)
void F_NAME(mpi_init_thread) P_INIT_THREAD {
    int rec = PF_BEGIN(INIT_THREAD);
    F_NAME(pmpi_init_thread)(req, prov, ierr);
    pf_after_init();
    if (rec) {
        pf_end(PF_INIT_THREAD);
    }
}
ALIASES(mpi_init_thread, MPI_INIT_THREAD, P_INIT_THREAD)

PMPI(mpi_finalize, P_INIT)
void F_NAME(mpi_finalize) P_INIT {
    int rec = PF_BEGIN(FINALIZE);
    pf_before_finalize();
    F_NAME(pmpi_finalize)(ierr);
    if (rec) {
        pf_end(PF_FINALIZE);
    }
    pf_after_finalize();
}
ALIASES(mpi_finalize, MPI_FINALIZE, P_INIT)

/* ---- point to point ------------------------------------------------------ */

#define P_SEND (void *buf, F *n, F *dt, F *peer, F *tag, F *comm, F *ierr)
#define FSEND(lc, UC, ID, KIND)                                                          \
    PMPI(lc, P_SEND)                                                                     \
    void F_NAME(lc) P_SEND {                                                                  \
        if (!PF_BEGIN(ID)) { F_NAME(p##lc)(buf, n, dt, peer, tag, comm, ierr); return; }           \
        pf_p2p(KIND, *peer, fcomm(comm), *tag, fbytes(n, dt), -1, pf_t_enter());         \
        F_NAME(p##lc)(buf, n, dt, peer, tag, comm, ierr);                                     \
        pf_end(PF_##ID);                                                                 \
    }                                                                                    \
    ALIASES(lc, UC, P_SEND)
FSEND(mpi_send, MPI_SEND, SEND, P2P_SEND)
FSEND(mpi_ssend, MPI_SSEND, SSEND, P2P_SSEND)
FSEND(mpi_bsend, MPI_BSEND, BSEND, P2P_SEND)
FSEND(mpi_rsend, MPI_RSEND, RSEND, P2P_SEND)

#define P_ISEND (void *buf, F *n, F *dt, F *peer, F *tag, F *comm, F *req, F *ierr)
#define FISEND(lc, UC, ID, RECV)                                                         \
    PMPI(lc, P_ISEND)                                                                    \
    void F_NAME(lc) P_ISEND {                                                                 \
        if (!PF_BEGIN(ID)) { F_NAME(p##lc)(buf, n, dt, peer, tag, comm, req, ierr); return; }      \
        F_NAME(p##lc)(buf, n, dt, peer, tag, comm, req, ierr);                                \
        if (IERR_OK)                                                        \
            pf_req_post(fkey(*req), RECV, *peer, *tag, fcomm(comm), fbytes(n, dt));     \
        pf_end(PF_##ID);                                                                 \
    }                                                                                    \
    ALIASES(lc, UC, P_ISEND)
FISEND(mpi_isend, MPI_ISEND, ISEND, 0)
FISEND(mpi_issend, MPI_ISSEND, ISSEND, 0)
FISEND(mpi_ibsend, MPI_IBSEND, IBSEND, 0)
FISEND(mpi_irsend, MPI_IRSEND, IRSEND, 0)
FISEND(mpi_irecv, MPI_IRECV, IRECV, 1)

#define P_RECV (void *buf, F *n, F *dt, F *src, F *tag, F *comm, F *st, F *ierr)
PMPI(mpi_recv, P_RECV)
void F_NAME(mpi_recv) P_RECV {
    if (!PF_BEGIN(RECV)) { F_NAME(pmpi_recv)(buf, n, dt, src, tag, comm, st, ierr); return; }
    F loc[FSTAT + 2];
    if (st == MPI_F_STATUS_IGNORE) st = loc;
    F_NAME(pmpi_recv)(buf, n, dt, src, tag, comm, st, ierr);
    frecv_event(fcomm(comm), st);
    pf_end(PF_RECV);
}
ALIASES(mpi_recv, MPI_RECV, P_RECV)

#define P_SENDRECV \
    (void *sb, F *sn, F *sdt, F *dest, F *stag, void *rb, F *rn, F *rdt, F *src, F *rtag, F *comm, F *st, F *ierr)
PMPI(mpi_sendrecv, P_SENDRECV)
void F_NAME(mpi_sendrecv) P_SENDRECV {
    if (!PF_BEGIN(SENDRECV)) {
        F_NAME(pmpi_sendrecv)(sb, sn, sdt, dest, stag, rb, rn, rdt, src, rtag, comm, st, ierr);
        return;
    }
    F loc[FSTAT + 2];
    if (st == MPI_F_STATUS_IGNORE) st = loc;
    int cid = fcomm(comm);
    pf_p2p(P2P_SEND, *dest, cid, *stag, fbytes(sn, sdt), -1, pf_t_enter());
    F_NAME(pmpi_sendrecv)(sb, sn, sdt, dest, stag, rb, rn, rdt, src, rtag, comm, st, ierr);
    frecv_event(cid, st);
    pf_end(PF_SENDRECV);
}
ALIASES(mpi_sendrecv, MPI_SENDRECV, P_SENDRECV)

/* ---- request completion ---------------------------------------------------- */

#define P_WAIT (F * req, F *st, F *ierr)
PMPI(mpi_wait, P_WAIT)
void F_NAME(mpi_wait) P_WAIT {
    if (!PF_BEGIN(WAIT)) { F_NAME(pmpi_wait)(req, st, ierr); return; }
    uint64_t key = fkey(*req);
    F loc[FSTAT + 2];
    if (st == MPI_F_STATUS_IGNORE) st = loc;
    F_NAME(pmpi_wait)(req, st, ierr);
    fdone(key, st, pf_now());
    pf_end(PF_WAIT);
}
ALIASES(mpi_wait, MPI_WAIT, P_WAIT)

#define P_TEST (F * req, F *flag, F *st, F *ierr)
PMPI(mpi_test, P_TEST)
void F_NAME(mpi_test) P_TEST {
    if (!PF_BEGIN(TEST)) { F_NAME(pmpi_test)(req, flag, st, ierr); return; }
    uint64_t key = fkey(*req);
    F loc[FSTAT + 2];
    if (st == MPI_F_STATUS_IGNORE) st = loc;
    F_NAME(pmpi_test)(req, flag, st, ierr);
    pf_req *r = pf_req_find(key);
    if (r && *flag) fdone(key, st, pf_now());
    else if (r && r->recv < 2) pf_p2p(P2P_REQUEST_TEST, r->peer, r->comm, r->tag, 0, r->id, pf_now());
    pf_end(PF_TEST);
}
ALIASES(mpi_test, MPI_TEST, P_TEST)

/* keys of n Fortran requests, and a status array when the caller ignores them */
static int fmany(int n, F *reqs, F **sts, uint64_t **keys) {
    *keys = malloc(sizeof(uint64_t) * (size_t)(n > 0 ? n : 1));
    if (!*keys) return 0;
    for (int i = 0; i < n; i++) (*keys)[i] = fkey(reqs[i]);
    if (*sts == MPI_F_STATUSES_IGNORE) {
        *sts = malloc(sizeof(F) * FSTAT * (size_t)(n > 0 ? n : 1));
        if (!*sts) return free(*keys), 0;
        return 2;
    }
    return 1;
}

#define P_WAITALL (F * n, F *reqs, F *sts, F *ierr)
PMPI(mpi_waitall, P_WAITALL)
void F_NAME(mpi_waitall) P_WAITALL {
    if (!PF_BEGIN(WAITALL)) { F_NAME(pmpi_waitall)(n, reqs, sts, ierr); return; }
    uint64_t *keys;
    F *s = sts;
    int ok = fmany(*n, reqs, &s, &keys);
    F_NAME(pmpi_waitall)(n, reqs, ok ? s : sts, ierr);
    double t = pf_now();
    for (int i = 0; ok && i < *n; i++) fdone(keys[i], s + FSTAT * i, t);
    if (ok) free(keys);
    if (ok == 2) free(s);
    pf_end(PF_WAITALL);
}
ALIASES(mpi_waitall, MPI_WAITALL, P_WAITALL)

#define P_TESTALL (F * n, F *reqs, F *flag, F *sts, F *ierr)
PMPI(mpi_testall, P_TESTALL)
void F_NAME(mpi_testall) P_TESTALL {
    if (!PF_BEGIN(TESTALL)) { F_NAME(pmpi_testall)(n, reqs, flag, sts, ierr); return; }
    uint64_t *keys;
    F *s = sts;
    int ok = fmany(*n, reqs, &s, &keys);
    F_NAME(pmpi_testall)(n, reqs, flag, ok ? s : sts, ierr);
    double t = pf_now();
    for (int i = 0; ok && *flag && i < *n; i++) fdone(keys[i], s + FSTAT * i, t);
    if (ok) free(keys);
    if (ok == 2) free(s);
    pf_end(PF_TESTALL);
}
ALIASES(mpi_testall, MPI_TESTALL, P_TESTALL)

#define P_WAITANY (F * n, F *reqs, F *idx, F *st, F *ierr)
PMPI(mpi_waitany, P_WAITANY)
void F_NAME(mpi_waitany) P_WAITANY {
    if (!PF_BEGIN(WAITANY)) { F_NAME(pmpi_waitany)(n, reqs, idx, st, ierr); return; }
    uint64_t *keys;
    F *none = MPI_F_STATUSES_IGNORE, loc[FSTAT + 2];
    int ok = fmany(*n, reqs, &none, &keys);
    if (ok == 2) free(none);
    if (st == MPI_F_STATUS_IGNORE) st = loc;
    F_NAME(pmpi_waitany)(n, reqs, idx, st, ierr);
    if (ok && *idx != MPI_UNDEFINED && *idx >= 1 && *idx <= *n) fdone(keys[*idx - 1], st, pf_now());
    if (ok) free(keys);
    pf_end(PF_WAITANY);
}
ALIASES(mpi_waitany, MPI_WAITANY, P_WAITANY)

/* ---- collectives --------------------------------------------------------- */

#define FCOLL(ID, OP, COMM, ROOT, SENT, RECVD, CALL)                 \
    if (!PF_BEGIN(ID)) { CALL; return; }                            \
    int cid_ = fcomm(COMM);                                          \
    pf_coll(COLL_BEGIN, OP, cid_, ROOT, 0, 0, pf_t_enter());         \
    CALL;                                                            \
    pf_coll(COLL_END, OP, cid_, ROOT, SENT, RECVD, pf_now());        \
    pf_end(PF_##ID);

static int frank(F *c) {
    int r = 0;
    PMPI_Comm_rank(PMPI_Comm_f2c(*c), &r);
    return r;
}

static int fsize(F *c) {
    int r = 0;
    PMPI_Comm_size(PMPI_Comm_f2c(*c), &r);
    return r;
}

#define P_BARRIER (F * comm, F *ierr)
PMPI(mpi_barrier, P_BARRIER)
void F_NAME(mpi_barrier) P_BARRIER { FCOLL(BARRIER, OP_BARRIER, comm, -1, 0, 0, F_NAME(pmpi_barrier)(comm, ierr)) }
ALIASES(mpi_barrier, MPI_BARRIER, P_BARRIER)

#define P_BCAST (void *buf, F *n, F *dt, F *root, F *comm, F *ierr)
PMPI(mpi_bcast, P_BCAST)
void F_NAME(mpi_bcast) P_BCAST {
    int me = frank(comm);
    FCOLL(BCAST, OP_BCAST, comm, *root, me == *root ? fbytes(n, dt) : 0, me == *root ? 0 : fbytes(n, dt),
          F_NAME(pmpi_bcast)(buf, n, dt, root, comm, ierr))
}
ALIASES(mpi_bcast, MPI_BCAST, P_BCAST)

#define P_ALLREDUCE (void *sb, void *rb, F *n, F *dt, F *op, F *comm, F *ierr)
PMPI(mpi_allreduce, P_ALLREDUCE)
void F_NAME(mpi_allreduce) P_ALLREDUCE {
    FCOLL(ALLREDUCE, OP_ALLREDUCE, comm, -1, fbytes(n, dt), fbytes(n, dt), F_NAME(pmpi_allreduce)(sb, rb, n, dt, op, comm, ierr))
}
ALIASES(mpi_allreduce, MPI_ALLREDUCE, P_ALLREDUCE)

PMPI(mpi_scan, P_ALLREDUCE)
void F_NAME(mpi_scan) P_ALLREDUCE {
    FCOLL(SCAN, OP_SCAN, comm, -1, fbytes(n, dt), fbytes(n, dt), F_NAME(pmpi_scan)(sb, rb, n, dt, op, comm, ierr))
}
ALIASES(mpi_scan, MPI_SCAN, P_ALLREDUCE)

#define P_REDUCE (void *sb, void *rb, F *n, F *dt, F *op, F *root, F *comm, F *ierr)
PMPI(mpi_reduce, P_REDUCE)
void F_NAME(mpi_reduce) P_REDUCE {
    int me = frank(comm);
    FCOLL(REDUCE, OP_REDUCE, comm, *root, fbytes(n, dt), me == *root ? fbytes(n, dt) : 0,
          F_NAME(pmpi_reduce)(sb, rb, n, dt, op, root, comm, ierr))
}
ALIASES(mpi_reduce, MPI_REDUCE, P_REDUCE)

#define P_GATHER (void *sb, F *sn, F *sdt, void *rb, F *rn, F *rdt, F *root, F *comm, F *ierr)
PMPI(mpi_gather, P_GATHER)
void F_NAME(mpi_gather) P_GATHER {
    int me = frank(comm);
    FCOLL(GATHER, OP_GATHER, comm, *root, fbytes(sn, sdt), me == *root ? fbytes(rn, rdt) * fsize(comm) : 0,
          F_NAME(pmpi_gather)(sb, sn, sdt, rb, rn, rdt, root, comm, ierr))
}
ALIASES(mpi_gather, MPI_GATHER, P_GATHER)

PMPI(mpi_scatter, P_GATHER)
void F_NAME(mpi_scatter) P_GATHER {
    int me = frank(comm);
    FCOLL(SCATTER, OP_SCATTER, comm, *root, me == *root ? fbytes(sn, sdt) * fsize(comm) : 0, fbytes(rn, rdt),
          F_NAME(pmpi_scatter)(sb, sn, sdt, rb, rn, rdt, root, comm, ierr))
}
ALIASES(mpi_scatter, MPI_SCATTER, P_GATHER)

#define P_ALLGATHER (void *sb, F *sn, F *sdt, void *rb, F *rn, F *rdt, F *comm, F *ierr)
PMPI(mpi_allgather, P_ALLGATHER)
void F_NAME(mpi_allgather) P_ALLGATHER {
    FCOLL(ALLGATHER, OP_ALLGATHER, comm, -1, fbytes(sn, sdt), fbytes(rn, rdt) * fsize(comm),
          F_NAME(pmpi_allgather)(sb, sn, sdt, rb, rn, rdt, comm, ierr))
}
ALIASES(mpi_allgather, MPI_ALLGATHER, P_ALLGATHER)

PMPI(mpi_alltoall, P_ALLGATHER)
void F_NAME(mpi_alltoall) P_ALLGATHER {
    FCOLL(ALLTOALL, OP_ALLTOALL, comm, -1, fbytes(sn, sdt) * fsize(comm), fbytes(rn, rdt) * fsize(comm),
          F_NAME(pmpi_alltoall)(sb, sn, sdt, rb, rn, rdt, comm, ierr))
}
ALIASES(mpi_alltoall, MPI_ALLTOALL, P_ALLGATHER)

/* ---- non-blocking collectives -------------------------------------------- */

#define P_IALLREDUCE (void *sb, void *rb, F *n, F *dt, F *op, F *comm, F *req, F *ierr)
PMPI(mpi_iallreduce, P_IALLREDUCE)
void F_NAME(mpi_iallreduce) P_IALLREDUCE {
    if (!PF_BEGIN(IALLREDUCE)) {
        F_NAME(pmpi_iallreduce)(sb, rb, n, dt, op, comm, req, ierr);
        return;
    }
    F_NAME(pmpi_iallreduce)(sb, rb, n, dt, op, comm, req, ierr);
    if (IERR_OK) pf_icoll_post(fkey(*req), OP_ALLREDUCE, fcomm(comm), -1, fbytes(n, dt), fbytes(n, dt));
    pf_end(PF_IALLREDUCE);
}
ALIASES(mpi_iallreduce, MPI_IALLREDUCE, P_IALLREDUCE)

#define P_IBARRIER (F * comm, F *req, F *ierr)
PMPI(mpi_ibarrier, P_IBARRIER)
void F_NAME(mpi_ibarrier) P_IBARRIER {
    if (!PF_BEGIN(IBARRIER)) {
        F_NAME(pmpi_ibarrier)(comm, req, ierr);
        return;
    }
    F_NAME(pmpi_ibarrier)(comm, req, ierr);
    if (IERR_OK) pf_icoll_post(fkey(*req), OP_BARRIER, fcomm(comm), -1, 0, 0);
    pf_end(PF_IBARRIER);
}
ALIASES(mpi_ibarrier, MPI_IBARRIER, P_IBARRIER)

/* ---- communicators ------------------------------------------------------- */

#define FNEWCOMM(ID, PARENT, NEW, CALL)                                                     \
    int rec = PF_BEGIN(ID);                                                                 \
    CALL;                                                                                   \
    if (IERR_OK) pf_comm_new(PMPI_Comm_f2c(*PARENT), PMPI_Comm_f2c(*NEW), PF_##ID, 0); \
    if (rec) pf_end(PF_##ID);

#define P_DUP (F * comm, F *newc, F *ierr)
PMPI(mpi_comm_dup, P_DUP)
void F_NAME(mpi_comm_dup) P_DUP { FNEWCOMM(COMM_DUP, comm, newc, F_NAME(pmpi_comm_dup)(comm, newc, ierr)) }
ALIASES(mpi_comm_dup, MPI_COMM_DUP, P_DUP)

#define P_SPLIT (F * comm, F *color, F *key, F *newc, F *ierr)
PMPI(mpi_comm_split, P_SPLIT)
void F_NAME(mpi_comm_split) P_SPLIT { FNEWCOMM(COMM_SPLIT, comm, newc, F_NAME(pmpi_comm_split)(comm, color, key, newc, ierr)) }
ALIASES(mpi_comm_split, MPI_COMM_SPLIT, P_SPLIT)

#define P_CREATE (F * comm, F *grp, F *newc, F *ierr)
PMPI(mpi_comm_create, P_CREATE)
void F_NAME(mpi_comm_create) P_CREATE { FNEWCOMM(COMM_CREATE, comm, newc, F_NAME(pmpi_comm_create)(comm, grp, newc, ierr)) }
ALIASES(mpi_comm_create, MPI_COMM_CREATE, P_CREATE)

#define P_CART (F * comm, F *nd, F *dims, F *periods, F *reorder, F *newc, F *ierr)
PMPI(mpi_cart_create, P_CART)
void F_NAME(mpi_cart_create) P_CART {
    FNEWCOMM(CART_CREATE, comm, newc, F_NAME(pmpi_cart_create)(comm, nd, dims, periods, reorder, newc, ierr))
}
ALIASES(mpi_cart_create, MPI_CART_CREATE, P_CART)

#define P_FREE (F * comm, F *ierr)
PMPI(mpi_comm_free, P_FREE)
void F_NAME(mpi_comm_free) P_FREE {
    pf_comm_gone(PMPI_Comm_f2c(*comm));
    int rec = PF_BEGIN(COMM_FREE);
    F_NAME(pmpi_comm_free)(comm, ierr);
    if (rec) pf_end(PF_COMM_FREE);
}
ALIASES(mpi_comm_free, MPI_COMM_FREE, P_FREE)
