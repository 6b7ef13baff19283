/* perflow recorder: the C MPI entry points (PMPI interposition). */
#include <stdlib.h>

#include "pfrec.h"

#define NSTACK 64

static int64_t sum_counts(const int *c, int n) {
    int64_t s = 0;
    for (int i = 0; c && i < n; i++) s += c[i];
    return s;
}

static int crank(MPI_Comm c) {
    int r = 0;
    PMPI_Comm_rank(c, &r);
    return r;
}

static int csize(MPI_Comm c) {
    int n = 0;
    PMPI_Comm_size(c, &n);
    return n;
}

static void recv_event(int kind, int comm, const MPI_Status *st) {
    int n = 0;
    PMPI_Get_count(st, MPI_BYTE, &n);
    pf_p2p(kind, st->MPI_SOURCE, comm, st->MPI_TAG, n == MPI_UNDEFINED ? 0 : n, -1, pf_now());
}

/* ---- setup --------------------------------------------------------------- */

int MPI_Init(int *argc, char ***argv) {
    if (!PF_BEGIN(INIT)) {
        int rc = PMPI_Init(argc, argv);
        pf_after_init();
        return rc;
    }
    int rc = PMPI_Init(argc, argv);
    pf_after_init();
    pf_end(PF_INIT);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int req, int *prov) {
    if (!PF_BEGIN(INIT_THREAD)) {
        int rc = PMPI_Init_thread(argc, argv, req, prov);
        pf_after_init();
        return rc;
    }
    int rc = PMPI_Init_thread(argc, argv, req, prov);
    pf_after_init();
    pf_end(PF_INIT_THREAD);
    return rc;
}

int MPI_Finalize(void) {
    int rec = PF_BEGIN(FINALIZE);
    pf_before_finalize();
    int rc = PMPI_Finalize();
    if (rec) {
        pf_end(PF_FINALIZE);
    }
    pf_after_finalize();
    return rc;
}

/* ---- point to point ------------------------------------------------------ */

#define SEND_WRAP(NAME, ID, KIND)                                                                       \
    int NAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {           \
        if (!PF_BEGIN(ID)) return P##NAME(buf, count, dt, dest, tag, comm);                             \
        pf_p2p(KIND, dest, pf_comm(comm), tag, pf_bytes(count, dt), -1, pf_t_enter());                  \
        int rc = P##NAME(buf, count, dt, dest, tag, comm);                                              \
        pf_end(PF_##ID);                                                                                \
        return rc;                                                                                      \
    }
SEND_WRAP(MPI_Send, SEND, P2P_SEND)
SEND_WRAP(MPI_Ssend, SSEND, P2P_SSEND)
SEND_WRAP(MPI_Bsend, BSEND, P2P_SEND)
SEND_WRAP(MPI_Rsend, RSEND, P2P_SEND)

#define ISEND_WRAP(NAME, ID)                                                                            \
    int NAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,             \
             MPI_Request *req) {                                                                        \
        if (!PF_BEGIN(ID)) return P##NAME(buf, count, dt, dest, tag, comm, req);                        \
        int rc = P##NAME(buf, count, dt, dest, tag, comm, req);                                         \
        if (rc == MPI_SUCCESS) pf_req_post(pf_req_key(*req), 0, dest, tag, pf_comm(comm), pf_bytes(count, dt)); \
        pf_end(PF_##ID);                                                                                \
        return rc;                                                                                      \
    }
ISEND_WRAP(MPI_Isend, ISEND)
ISEND_WRAP(MPI_Issend, ISSEND)
ISEND_WRAP(MPI_Ibsend, IBSEND)
ISEND_WRAP(MPI_Irsend, IRSEND)

/* persistent requests: *_init remembers the parameters, each MPI_Start posts */
#define PINIT_WRAP(NAME, ID, RECV, CONST)                                                                   \
    int NAME(CONST void *buf, int count, MPI_Datatype dt, int peer, int tag, MPI_Comm comm, MPI_Request *req) { \
        int rec = PF_BEGIN(ID);                                                                             \
        int rc = P##NAME(buf, count, dt, peer, tag, comm, req);                                             \
        if (rc == MPI_SUCCESS && pf_active)                                                                 \
            pf_persist_new(pf_req_key(*req), RECV, peer, tag, pf_comm(comm), pf_bytes(count, dt));            \
        if (rec) pf_end(PF_##ID);                                                                           \
        return rc;                                                                                          \
    }
PINIT_WRAP(MPI_Send_init, SEND_INIT, 0, const)
PINIT_WRAP(MPI_Ssend_init, SSEND_INIT, 0, const)
PINIT_WRAP(MPI_Bsend_init, BSEND_INIT, 0, const)
PINIT_WRAP(MPI_Rsend_init, RSEND_INIT, 0, const)
PINIT_WRAP(MPI_Recv_init, RECV_INIT, 1, )

int MPI_Start(MPI_Request *req) {
    if (!PF_BEGIN(START)) return PMPI_Start(req);
    int rc = PMPI_Start(req);
    if (rc == MPI_SUCCESS) pf_persist_start(pf_req_key(*req));
    pf_end(PF_START);
    return rc;
}

int MPI_Startall(int n, MPI_Request reqs[]) {
    if (!PF_BEGIN(STARTALL)) return PMPI_Startall(n, reqs);
    int rc = PMPI_Startall(n, reqs);
    for (int i = 0; rc == MPI_SUCCESS && i < n; i++) pf_persist_start(pf_req_key(reqs[i]));
    pf_end(PF_STARTALL);
    return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request *req) {
    if (!PF_BEGIN(IRECV)) return PMPI_Irecv(buf, count, dt, src, tag, comm, req);
    int rc = PMPI_Irecv(buf, count, dt, src, tag, comm, req);
    if (rc == MPI_SUCCESS)
        pf_req_post(pf_req_key(*req), 1, src, tag, pf_comm(comm), pf_bytes(count, dt));
    pf_end(PF_IRECV);
    return rc;
}

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status *st) {
    if (!PF_BEGIN(RECV)) return PMPI_Recv(buf, count, dt, src, tag, comm, st);
    MPI_Status loc;
    if (st == MPI_STATUS_IGNORE) st = &loc;
    int rc = PMPI_Recv(buf, count, dt, src, tag, comm, st);
    recv_event(P2P_RECV, pf_comm(comm), st);
    pf_end(PF_RECV);
    return rc;
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
                 MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *st) {
    if (!PF_BEGIN(SENDRECV))
        return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, st);
    MPI_Status loc;
    if (st == MPI_STATUS_IGNORE) st = &loc;
    int cid = pf_comm(comm);
    pf_p2p(P2P_SEND, dest, cid, stag, pf_bytes(scount, stype), -1, pf_t_enter());
    int rc = PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, st);
    recv_event(P2P_RECV, cid, st);
    pf_end(PF_SENDRECV);
    return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int stag, int src, int rtag,
                         MPI_Comm comm, MPI_Status *st) {
    if (!PF_BEGIN(SENDRECV_REPLACE)) return PMPI_Sendrecv_replace(buf, count, dt, dest, stag, src, rtag, comm, st);
    MPI_Status loc;
    if (st == MPI_STATUS_IGNORE) st = &loc;
    int cid = pf_comm(comm);
    pf_p2p(P2P_SEND, dest, cid, stag, pf_bytes(count, dt), -1, pf_t_enter());
    int rc = PMPI_Sendrecv_replace(buf, count, dt, dest, stag, src, rtag, comm, st);
    recv_event(P2P_RECV, cid, st);
    pf_end(PF_SENDRECV_REPLACE);
    return rc;
}

int MPI_Probe(int src, int tag, MPI_Comm comm, MPI_Status *st) {
    if (!PF_BEGIN(PROBE)) return PMPI_Probe(src, tag, comm, st);
    int rc = PMPI_Probe(src, tag, comm, st);
    pf_end(PF_PROBE);
    return rc;
}

int MPI_Iprobe(int src, int tag, MPI_Comm comm, int *flag, MPI_Status *st) {
    if (!PF_BEGIN(IPROBE)) return PMPI_Iprobe(src, tag, comm, flag, st);
    int rc = PMPI_Iprobe(src, tag, comm, flag, st);
    pf_end(PF_IPROBE);
    return rc;
}

/* ---- request completion ---------------------------------------------------- */

static void done_one(uint64_t key, const MPI_Status *st, double t) {
    pf_req *r = pf_req_find(key);
    if (r) pf_req_done(r, st, t);
}

int MPI_Wait(MPI_Request *req, MPI_Status *st) {
    if (!PF_BEGIN(WAIT)) return PMPI_Wait(req, st);
    uint64_t key = pf_req_key(*req);
    MPI_Status loc;
    if (st == MPI_STATUS_IGNORE) st = &loc;
    int rc = PMPI_Wait(req, st);
    done_one(key, st, pf_now());
    pf_end(PF_WAIT);
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st) {
    if (!PF_BEGIN(TEST)) return PMPI_Test(req, flag, st);
    uint64_t key = pf_req_key(*req);
    MPI_Status loc;
    if (st == MPI_STATUS_IGNORE) st = &loc;
    int rc = PMPI_Test(req, flag, st);
    pf_req *r = pf_req_find(key);
    if (r && *flag) pf_req_done(r, st, pf_now());
    else if (r && r->recv < 2) pf_p2p(P2P_REQUEST_TEST, r->peer, r->comm, r->tag, 0, r->id, pf_now());
    pf_end(PF_TEST);
    return rc;
}

/* Copies of the request handles and a status array for the *all/any/some calls. */
typedef struct {
    uint64_t kb[NSTACK], *keys;
    MPI_Status sb[NSTACK], *st;
    int ok;
} many_t;

static void many_open(many_t *m, int n, MPI_Request *reqs, MPI_Status **sts) {
    m->ok = 0;
    m->keys = n <= NSTACK ? m->kb : malloc(sizeof(uint64_t) * (size_t)n);
    m->st = n <= NSTACK ? m->sb : malloc(sizeof(MPI_Status) * (size_t)n);
    if (n < 0 || !m->keys || !m->st) return;
    for (int i = 0; i < n; i++) m->keys[i] = pf_req_key(reqs[i]);
    if (*sts == MPI_STATUSES_IGNORE) *sts = m->st;
    m->ok = 1;
}

static void many_close(many_t *m) {
    if (m->keys != m->kb) free(m->keys);
    if (m->st != m->sb) free(m->st);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
    if (!PF_BEGIN(WAITALL)) return PMPI_Waitall(n, reqs, sts);
    many_t m;
    many_open(&m, n, reqs, &sts);
    int rc = PMPI_Waitall(n, reqs, sts);
    double t = pf_now();
    for (int i = 0; m.ok && i < n; i++) done_one(m.keys[i], &sts[i], t);
    many_close(&m);
    pf_end(PF_WAITALL);
    return rc;
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]) {
    if (!PF_BEGIN(TESTALL)) return PMPI_Testall(n, reqs, flag, sts);
    many_t m;
    many_open(&m, n, reqs, &sts);
    int rc = PMPI_Testall(n, reqs, flag, sts);
    double t = pf_now();
    for (int i = 0; m.ok && *flag && i < n; i++) done_one(m.keys[i], &sts[i], t);
    many_close(&m);
    pf_end(PF_TESTALL);
    return rc;
}

static int any_wrap(int fn, int n, MPI_Request reqs[], int *idx, int *flag, MPI_Status *st, void *ra, void *fp) {
    int f = 1;
    if (!pf_begin(fn, ra, fp))
        return fn == PF_WAITANY ? PMPI_Waitany(n, reqs, idx, st) : PMPI_Testany(n, reqs, idx, flag, st);
    many_t m;
    MPI_Status loc, *sts = MPI_STATUSES_IGNORE;
    many_open(&m, n, reqs, &sts);
    if (st == MPI_STATUS_IGNORE) st = &loc;
    int rc = fn == PF_WAITANY ? PMPI_Waitany(n, reqs, idx, st) : PMPI_Testany(n, reqs, idx, &f, st);
    if (flag) *flag = f;
    if (m.ok && f && *idx != MPI_UNDEFINED && *idx >= 0 && *idx < n) done_one(m.keys[*idx], st, pf_now());
    many_close(&m);
    pf_end(fn);
    return rc;
}

int MPI_Waitany(int n, MPI_Request reqs[], int *idx, MPI_Status *st) {
    return any_wrap(PF_WAITANY, n, reqs, idx, NULL, st, PF_RA, PF_FP);
}

int MPI_Testany(int n, MPI_Request reqs[], int *idx, int *flag, MPI_Status *st) {
    return any_wrap(PF_TESTANY, n, reqs, idx, flag, st, PF_RA, PF_FP);
}

static int some_wrap(int fn, int n, MPI_Request reqs[], int *nout, int idx[], MPI_Status sts[], void *ra, void *fp) {
    if (!pf_begin(fn, ra, fp))
        return fn == PF_WAITSOME ? PMPI_Waitsome(n, reqs, nout, idx, sts) : PMPI_Testsome(n, reqs, nout, idx, sts);
    many_t m;
    many_open(&m, n, reqs, &sts);
    int rc = fn == PF_WAITSOME ? PMPI_Waitsome(n, reqs, nout, idx, sts) : PMPI_Testsome(n, reqs, nout, idx, sts);
    double t = pf_now();
    for (int i = 0; m.ok && *nout != MPI_UNDEFINED && i < *nout; i++)
        if (idx[i] >= 0 && idx[i] < n) done_one(m.keys[idx[i]], &sts[i], t);
    many_close(&m);
    pf_end(fn);
    return rc;
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *nout, int idx[], MPI_Status sts[]) {
    return some_wrap(PF_WAITSOME, n, reqs, nout, idx, sts, PF_RA, PF_FP);
}

int MPI_Testsome(int n, MPI_Request reqs[], int *nout, int idx[], MPI_Status sts[]) {
    return some_wrap(PF_TESTSOME, n, reqs, nout, idx, sts, PF_RA, PF_FP);
}

int MPI_Request_free(MPI_Request *req) {
    pf_req_drop(pf_req_key(*req));
    if (!PF_BEGIN(REQUEST_FREE)) return PMPI_Request_free(req);
    int rc = PMPI_Request_free(req);
    pf_end(PF_REQUEST_FREE);
    return rc;
}

int MPI_Cancel(MPI_Request *req) {
    if (!PF_BEGIN(CANCEL)) return PMPI_Cancel(req);
    int rc = PMPI_Cancel(req);
    pf_end(PF_CANCEL);
    return rc;
}

/* ---- collectives ----------------------------------------------------------
 * sent/received: the bytes this rank provides and gets, e.g. Bcast: the root
 * sends count, the others receive count; Allreduce: count both ways. */

#define COLL(ID, OP, COMM, ROOT, SENT, RECVD, CALL)                              \
    if (!PF_BEGIN(ID)) return CALL;                                              \
    int cid_ = pf_comm(COMM);                                                    \
    pf_coll(COLL_BEGIN, OP, cid_, ROOT, 0, 0, pf_t_enter());                     \
    int rc_ = CALL;                                                              \
    pf_coll(COLL_END, OP, cid_, ROOT, SENT, RECVD, pf_now());                    \
    pf_end(PF_##ID);                                                             \
    return rc_;

int MPI_Barrier(MPI_Comm c) { COLL(BARRIER, OP_BARRIER, c, -1, 0, 0, PMPI_Barrier(c)) }

int MPI_Bcast(void *buf, int n, MPI_Datatype dt, int root, MPI_Comm c) {
    int me = crank(c);
    COLL(BCAST, OP_BCAST, c, root, me == root ? pf_bytes(n, dt) : 0, me == root ? 0 : pf_bytes(n, dt),
         PMPI_Bcast(buf, n, dt, root, c))
}

int MPI_Gather(const void *sb, int sn, MPI_Datatype st, void *rb, int rn, MPI_Datatype rt, int root, MPI_Comm c) {
    int me = crank(c);
    COLL(GATHER, OP_GATHER, c, root, sb == MPI_IN_PLACE ? pf_bytes(rn, rt) : pf_bytes(sn, st),
         me == root ? pf_bytes(rn, rt) * csize(c) : 0, PMPI_Gather(sb, sn, st, rb, rn, rt, root, c))
}

int MPI_Gatherv(const void *sb, int sn, MPI_Datatype st, void *rb, const int rn[], const int displs[],
                MPI_Datatype rt, int root, MPI_Comm c) {
    int me = crank(c);
    COLL(GATHERV, OP_GATHERV, c, root,
         sb == MPI_IN_PLACE ? (me == root ? pf_bytes(rn[me], rt) : 0) : pf_bytes(sn, st),
         me == root ? sum_counts(rn, csize(c)) * pf_bytes(1, rt) : 0,
         PMPI_Gatherv(sb, sn, st, rb, rn, displs, rt, root, c))
}

int MPI_Scatter(const void *sb, int sn, MPI_Datatype st, void *rb, int rn, MPI_Datatype rt, int root, MPI_Comm c) {
    int me = crank(c);
    COLL(SCATTER, OP_SCATTER, c, root, me == root ? pf_bytes(sn, st) * csize(c) : 0,
         rb == MPI_IN_PLACE ? pf_bytes(sn, st) : pf_bytes(rn, rt), PMPI_Scatter(sb, sn, st, rb, rn, rt, root, c))
}

int MPI_Scatterv(const void *sb, const int sn[], const int displs[], MPI_Datatype st, void *rb, int rn,
                 MPI_Datatype rt, int root, MPI_Comm c) {
    int me = crank(c);
    COLL(SCATTERV, OP_SCATTERV, c, root, me == root ? sum_counts(sn, csize(c)) * pf_bytes(1, st) : 0,
         rb == MPI_IN_PLACE ? (me == root ? pf_bytes(sn[me], st) : 0) : pf_bytes(rn, rt),
         PMPI_Scatterv(sb, sn, displs, st, rb, rn, rt, root, c))
}

int MPI_Allgather(const void *sb, int sn, MPI_Datatype st, void *rb, int rn, MPI_Datatype rt, MPI_Comm c) {
    COLL(ALLGATHER, OP_ALLGATHER, c, -1, sb == MPI_IN_PLACE ? pf_bytes(rn, rt) : pf_bytes(sn, st),
         pf_bytes(rn, rt) * csize(c), PMPI_Allgather(sb, sn, st, rb, rn, rt, c))
}

int MPI_Allgatherv(const void *sb, int sn, MPI_Datatype st, void *rb, const int rn[], const int displs[],
                   MPI_Datatype rt, MPI_Comm c) {
    COLL(ALLGATHERV, OP_ALLGATHERV, c, -1, sb == MPI_IN_PLACE ? pf_bytes(rn[crank(c)], rt) : pf_bytes(sn, st),
         sum_counts(rn, csize(c)) * pf_bytes(1, rt), PMPI_Allgatherv(sb, sn, st, rb, rn, displs, rt, c))
}

int MPI_Alltoall(const void *sb, int sn, MPI_Datatype st, void *rb, int rn, MPI_Datatype rt, MPI_Comm c) {
    COLL(ALLTOALL, OP_ALLTOALL, c, -1, (sb == MPI_IN_PLACE ? pf_bytes(rn, rt) : pf_bytes(sn, st)) * csize(c),
         pf_bytes(rn, rt) * csize(c), PMPI_Alltoall(sb, sn, st, rb, rn, rt, c))
}

int MPI_Alltoallv(const void *sb, const int sn[], const int sd[], MPI_Datatype st, void *rb, const int rn[],
                  const int rd[], MPI_Datatype rt, MPI_Comm c) {
    COLL(ALLTOALLV, OP_ALLTOALLV, c, -1,
         sb == MPI_IN_PLACE ? sum_counts(rn, csize(c)) * pf_bytes(1, rt) : sum_counts(sn, csize(c)) * pf_bytes(1, st),
         sum_counts(rn, csize(c)) * pf_bytes(1, rt), PMPI_Alltoallv(sb, sn, sd, st, rb, rn, rd, rt, c))
}

int MPI_Allreduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c) {
    COLL(ALLREDUCE, OP_ALLREDUCE, c, -1, pf_bytes(n, dt), pf_bytes(n, dt), PMPI_Allreduce(sb, rb, n, dt, op, c))
}

int MPI_Reduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm c) {
    int me = crank(c);
    COLL(REDUCE, OP_REDUCE, c, root, pf_bytes(n, dt), me == root ? pf_bytes(n, dt) : 0,
         PMPI_Reduce(sb, rb, n, dt, op, root, c))
}

int MPI_Reduce_scatter(const void *sb, void *rb, const int rn[], MPI_Datatype dt, MPI_Op op, MPI_Comm c) {
    COLL(REDUCE_SCATTER, OP_REDUCE_SCATTER, c, -1, sum_counts(rn, csize(c)) * pf_bytes(1, dt),
         pf_bytes(rn[crank(c)], dt), PMPI_Reduce_scatter(sb, rb, rn, dt, op, c))
}

int MPI_Reduce_scatter_block(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c) {
    COLL(REDUCE_SCATTER_BLOCK, OP_REDUCE_SCATTER_BLOCK, c, -1, pf_bytes(n, dt) * csize(c), pf_bytes(n, dt),
         PMPI_Reduce_scatter_block(sb, rb, n, dt, op, c))
}

int MPI_Scan(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c) {
    COLL(SCAN, OP_SCAN, c, -1, pf_bytes(n, dt), pf_bytes(n, dt), PMPI_Scan(sb, rb, n, dt, op, c))
}

int MPI_Exscan(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c) {
    COLL(EXSCAN, OP_EXSCAN, c, -1, pf_bytes(n, dt), pf_bytes(n, dt), PMPI_Exscan(sb, rb, n, dt, op, c))
}

/* ---- non-blocking collectives ---------------------------------------------
 * BEGIN inside the I-call, END when Wait/Test completes the request (the
 * completion's time and region), both with the request id. */

#define ICOLL(ID, OP, COMM, ROOT, SENT, RECVD, CALL, REQ)                        \
    if (!PF_BEGIN(ID)) return CALL;                                              \
    int rc_ = CALL;                                                              \
    if (rc_ == MPI_SUCCESS) pf_icoll_post(pf_req_key(*(REQ)), OP, pf_comm(COMM), ROOT, SENT, RECVD); \
    pf_end(PF_##ID);                                                             \
    return rc_;

int MPI_Ibarrier(MPI_Comm c, MPI_Request *r) { ICOLL(IBARRIER, OP_BARRIER, c, -1, 0, 0, PMPI_Ibarrier(c, r), r) }

int MPI_Ibcast(void *buf, int n, MPI_Datatype dt, int root, MPI_Comm c, MPI_Request *r) {
    int me = crank(c);
    ICOLL(IBCAST, OP_BCAST, c, root, me == root ? pf_bytes(n, dt) : 0, me == root ? 0 : pf_bytes(n, dt),
          PMPI_Ibcast(buf, n, dt, root, c, r), r)
}

int MPI_Igather(const void *sb, int sn, MPI_Datatype st, void *rb, int rn, MPI_Datatype rt, int root, MPI_Comm c,
                MPI_Request *r) {
    int me = crank(c);
    ICOLL(IGATHER, OP_GATHER, c, root, sb == MPI_IN_PLACE ? pf_bytes(rn, rt) : pf_bytes(sn, st),
          me == root ? pf_bytes(rn, rt) * csize(c) : 0, PMPI_Igather(sb, sn, st, rb, rn, rt, root, c, r), r)
}

int MPI_Igatherv(const void *sb, int sn, MPI_Datatype st, void *rb, const int rn[], const int displs[],
                 MPI_Datatype rt, int root, MPI_Comm c, MPI_Request *r) {
    int me = crank(c);
    ICOLL(IGATHERV, OP_GATHERV, c, root,
          sb == MPI_IN_PLACE ? (me == root ? pf_bytes(rn[me], rt) : 0) : pf_bytes(sn, st),
          me == root ? sum_counts(rn, csize(c)) * pf_bytes(1, rt) : 0,
          PMPI_Igatherv(sb, sn, st, rb, rn, displs, rt, root, c, r), r)
}

int MPI_Iscatter(const void *sb, int sn, MPI_Datatype st, void *rb, int rn, MPI_Datatype rt, int root, MPI_Comm c,
                 MPI_Request *r) {
    int me = crank(c);
    ICOLL(ISCATTER, OP_SCATTER, c, root, me == root ? pf_bytes(sn, st) * csize(c) : 0,
          rb == MPI_IN_PLACE ? pf_bytes(sn, st) : pf_bytes(rn, rt), PMPI_Iscatter(sb, sn, st, rb, rn, rt, root, c, r),
          r)
}

int MPI_Iscatterv(const void *sb, const int sn[], const int displs[], MPI_Datatype st, void *rb, int rn,
                  MPI_Datatype rt, int root, MPI_Comm c, MPI_Request *r) {
    int me = crank(c);
    ICOLL(ISCATTERV, OP_SCATTERV, c, root, me == root ? sum_counts(sn, csize(c)) * pf_bytes(1, st) : 0,
          rb == MPI_IN_PLACE ? (me == root ? pf_bytes(sn[me], st) : 0) : pf_bytes(rn, rt),
          PMPI_Iscatterv(sb, sn, displs, st, rb, rn, rt, root, c, r), r)
}

int MPI_Iallgather(const void *sb, int sn, MPI_Datatype st, void *rb, int rn, MPI_Datatype rt, MPI_Comm c,
                   MPI_Request *r) {
    ICOLL(IALLGATHER, OP_ALLGATHER, c, -1, sb == MPI_IN_PLACE ? pf_bytes(rn, rt) : pf_bytes(sn, st),
          pf_bytes(rn, rt) * csize(c), PMPI_Iallgather(sb, sn, st, rb, rn, rt, c, r), r)
}

int MPI_Iallgatherv(const void *sb, int sn, MPI_Datatype st, void *rb, const int rn[], const int displs[],
                    MPI_Datatype rt, MPI_Comm c, MPI_Request *r) {
    ICOLL(IALLGATHERV, OP_ALLGATHERV, c, -1, sb == MPI_IN_PLACE ? pf_bytes(rn[crank(c)], rt) : pf_bytes(sn, st),
          sum_counts(rn, csize(c)) * pf_bytes(1, rt), PMPI_Iallgatherv(sb, sn, st, rb, rn, displs, rt, c, r), r)
}

int MPI_Ialltoall(const void *sb, int sn, MPI_Datatype st, void *rb, int rn, MPI_Datatype rt, MPI_Comm c,
                  MPI_Request *r) {
    ICOLL(IALLTOALL, OP_ALLTOALL, c, -1, (sb == MPI_IN_PLACE ? pf_bytes(rn, rt) : pf_bytes(sn, st)) * csize(c),
          pf_bytes(rn, rt) * csize(c), PMPI_Ialltoall(sb, sn, st, rb, rn, rt, c, r), r)
}

int MPI_Ialltoallv(const void *sb, const int sn[], const int sd[], MPI_Datatype st, void *rb, const int rn[],
                   const int rd[], MPI_Datatype rt, MPI_Comm c, MPI_Request *r) {
    ICOLL(IALLTOALLV, OP_ALLTOALLV, c, -1,
          sb == MPI_IN_PLACE ? sum_counts(rn, csize(c)) * pf_bytes(1, rt) : sum_counts(sn, csize(c)) * pf_bytes(1, st),
          sum_counts(rn, csize(c)) * pf_bytes(1, rt), PMPI_Ialltoallv(sb, sn, sd, st, rb, rn, rd, rt, c, r), r)
}

int MPI_Iallreduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c, MPI_Request *r) {
    ICOLL(IALLREDUCE, OP_ALLREDUCE, c, -1, pf_bytes(n, dt), pf_bytes(n, dt), PMPI_Iallreduce(sb, rb, n, dt, op, c, r),
          r)
}

int MPI_Ireduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm c, MPI_Request *r) {
    int me = crank(c);
    ICOLL(IREDUCE, OP_REDUCE, c, root, pf_bytes(n, dt), me == root ? pf_bytes(n, dt) : 0,
          PMPI_Ireduce(sb, rb, n, dt, op, root, c, r), r)
}

int MPI_Ireduce_scatter(const void *sb, void *rb, const int rn[], MPI_Datatype dt, MPI_Op op, MPI_Comm c,
                        MPI_Request *r) {
    ICOLL(IREDUCE_SCATTER, OP_REDUCE_SCATTER, c, -1, sum_counts(rn, csize(c)) * pf_bytes(1, dt),
          pf_bytes(rn[crank(c)], dt), PMPI_Ireduce_scatter(sb, rb, rn, dt, op, c, r), r)
}

int MPI_Ireduce_scatter_block(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c,
                              MPI_Request *r) {
    ICOLL(IREDUCE_SCATTER_BLOCK, OP_REDUCE_SCATTER_BLOCK, c, -1, pf_bytes(n, dt) * csize(c), pf_bytes(n, dt),
          PMPI_Ireduce_scatter_block(sb, rb, n, dt, op, c, r), r)
}

int MPI_Iscan(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c, MPI_Request *r) {
    ICOLL(ISCAN, OP_SCAN, c, -1, pf_bytes(n, dt), pf_bytes(n, dt), PMPI_Iscan(sb, rb, n, dt, op, c, r), r)
}

int MPI_Iexscan(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c, MPI_Request *r) {
    ICOLL(IEXSCAN, OP_EXSCAN, c, -1, pf_bytes(n, dt), pf_bytes(n, dt), PMPI_Iexscan(sb, rb, n, dt, op, c, r), r)
}

/* ---- MPI-IO: io regions; the bytes moved are recorded before the Leave ------ */

static int64_t io_bytes(const MPI_Status *st, int rc) {
    int n = 0;
    if (rc != MPI_SUCCESS || PMPI_Get_count(st, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED) return 0;
    return n;
}

#define FILE_RW(NAME, ID, DIR, PARAMS, ARGS)                                      \
    int NAME PARAMS {                                                            \
        if (!PF_BEGIN(ID)) return P##NAME ARGS;                                  \
        MPI_Status loc;                                                          \
        if (st == MPI_STATUS_IGNORE) st = &loc;                                  \
        int rc = P##NAME ARGS;                                                   \
        pf_io(DIR, io_bytes(st, rc), pf_now());                                  \
        pf_end(PF_##ID);                                                         \
        return rc;                                                               \
    }
#define P_RW (MPI_File fh, void *buf, int n, MPI_Datatype dt, MPI_Status *st)
#define P_WW (MPI_File fh, const void *buf, int n, MPI_Datatype dt, MPI_Status *st)
#define P_RAT (MPI_File fh, MPI_Offset off, void *buf, int n, MPI_Datatype dt, MPI_Status *st)
#define P_WAT (MPI_File fh, MPI_Offset off, const void *buf, int n, MPI_Datatype dt, MPI_Status *st)
FILE_RW(MPI_File_read, FILE_READ, 1, P_RW, (fh, buf, n, dt, st))
FILE_RW(MPI_File_read_all, FILE_READ_ALL, 1, P_RW, (fh, buf, n, dt, st))
FILE_RW(MPI_File_read_at, FILE_READ_AT, 1, P_RAT, (fh, off, buf, n, dt, st))
FILE_RW(MPI_File_read_at_all, FILE_READ_AT_ALL, 1, P_RAT, (fh, off, buf, n, dt, st))
FILE_RW(MPI_File_write, FILE_WRITE, 2, P_WW, (fh, buf, n, dt, st))
FILE_RW(MPI_File_write_all, FILE_WRITE_ALL, 2, P_WW, (fh, buf, n, dt, st))
FILE_RW(MPI_File_write_at, FILE_WRITE_AT, 2, P_WAT, (fh, off, buf, n, dt, st))
FILE_RW(MPI_File_write_at_all, FILE_WRITE_AT_ALL, 2, P_WAT, (fh, off, buf, n, dt, st))

#define PLAIN(NAME, ID, PARAMS, ARGS)                                            \
    int NAME PARAMS {                                                            \
        if (!PF_BEGIN(ID)) return P##NAME ARGS;                                  \
        int rc = P##NAME ARGS;                                                   \
        pf_end(PF_##ID);                                                         \
        return rc;                                                               \
    }
PLAIN(MPI_File_open, FILE_OPEN, (MPI_Comm c, const char *name, int mode, MPI_Info info, MPI_File *fh),
      (c, name, mode, info, fh))
PLAIN(MPI_File_close, FILE_CLOSE, (MPI_File * fh), (fh))
PLAIN(MPI_File_set_view, FILE_SET_VIEW,
      (MPI_File fh, MPI_Offset disp, MPI_Datatype et, MPI_Datatype ft, const char *rep, MPI_Info info),
      (fh, disp, et, ft, rep, info))
PLAIN(MPI_File_sync, FILE_SYNC, (MPI_File fh), (fh))
PLAIN(MPI_File_seek, FILE_SEEK, (MPI_File fh, MPI_Offset off, int whence), (fh, off, whence))

/* ---- communicators --------------------------------------------------------
 * pf_comm_new runs whether or not the call is recorded, so that every member
 * counts the same creations. */

#define NEWCOMM(ID, PARENT, NEW, SALT, CALL)            \
    int rec = PF_BEGIN(ID);                             \
    int rc = CALL;                                      \
    if (rc == MPI_SUCCESS) pf_comm_new(PARENT, *(NEW), PF_##ID, SALT); \
    if (rec) pf_end(PF_##ID);                           \
    return rc;

int MPI_Comm_dup(MPI_Comm c, MPI_Comm *n) { NEWCOMM(COMM_DUP, c, n, 0, PMPI_Comm_dup(c, n)) }

int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *n) {
    NEWCOMM(COMM_SPLIT, c, n, 0, PMPI_Comm_split(c, color, key, n))
}

int MPI_Comm_split_type(MPI_Comm c, int type, int key, MPI_Info info, MPI_Comm *n) {
    NEWCOMM(COMM_SPLIT_TYPE, c, n, 0, PMPI_Comm_split_type(c, type, key, info, n))
}

int MPI_Comm_create(MPI_Comm c, MPI_Group grp, MPI_Comm *n) {
    NEWCOMM(COMM_CREATE, c, n, 0, PMPI_Comm_create(c, grp, n))
}

int MPI_Comm_create_group(MPI_Comm c, MPI_Group grp, int tag, MPI_Comm *n) {
    NEWCOMM(COMM_CREATE_GROUP, c, n, tag + 0x10000, PMPI_Comm_create_group(c, grp, tag, n))
}

int MPI_Cart_create(MPI_Comm c, int nd, const int dims[], const int periods[], int reorder, MPI_Comm *n) {
    NEWCOMM(CART_CREATE, c, n, 0, PMPI_Cart_create(c, nd, dims, periods, reorder, n))
}

int MPI_Cart_sub(MPI_Comm c, const int remain[], MPI_Comm *n) {
    NEWCOMM(CART_SUB, c, n, 0, PMPI_Cart_sub(c, remain, n))
}

int MPI_Comm_free(MPI_Comm *c) {
    pf_comm_gone(*c);
    if (!PF_BEGIN(COMM_FREE)) return PMPI_Comm_free(c);
    int rc = PMPI_Comm_free(c);
    pf_end(PF_COMM_FREE);
    return rc;
}
