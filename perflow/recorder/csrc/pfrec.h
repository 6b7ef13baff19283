/* perflow recorder: shared declarations of the PMPI interposition library.
 *
 * Data layout (read by perflow/recorder/decode.py; keep the two in step):
 *   p<pid>.ev   fixed 48-byte event records (pf_rec), in stream order
 *   p<pid>.smp  64-bit words: headers with the top 16 bits set, each followed
 *               by `depth` frame words (samples and MPI call contexts); a
 *               header is 4 words, 5 for PF_S_USAMPLE (the fifth: the entry
 *               address of the innermost recorded user function, or 0)
 *   p<pid>.txt  text: metadata and communicator definitions
 *   p<pid>.maps a copy of /proc/self/maps taken at MPI_Finalize and at exit
 *   p<pid>.t<n>.ev, p<pid>.t<n>.smp  the same streams of worker thread n (pfrec_thr.c)
 */
#ifndef PFREC_H
#define PFREC_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum pf_fn {
#define PF_FN(id, name) PF_##id,
#include "functions.def"
#undef PF_FN
    PF_NFN
};

/* record types */
enum { PF_R_ENTER = 1, PF_R_LEAVE = 2, PF_R_P2P = 3, PF_R_COLL = 4, PF_R_IO = 5, PF_R_RMA = 6, PF_R_THR = 8 }; /* (7: reserved) */
/* sample-stream header types */
enum { PF_S_SAMPLE = 1, PF_S_CTX = 2, PF_S_USAMPLE = 3 };
#define PF_S_MAGIC 0xFFFF000000000000ULL

/* perflow.kinds.P2P */
enum { P2P_SEND = 0, P2P_ISEND = 1, P2P_ISEND_COMPLETE = 2, P2P_RECV = 3, P2P_IRECV_REQUEST = 4,
       P2P_IRECV = 5, P2P_REQUEST_TEST = 6, P2P_REQUEST_CANCELLED = 7, P2P_SSEND = 8 };
/* perflow.kinds.CollEv and CollectiveOp */
enum { COLL_BEGIN = 0, COLL_END = 1 };
enum { OP_BARRIER = 0, OP_BCAST = 1, OP_GATHER = 2, OP_GATHERV = 3, OP_SCATTER = 4, OP_SCATTERV = 5,
       OP_ALLGATHER = 6, OP_ALLGATHERV = 7, OP_ALLTOALL = 8, OP_ALLTOALLV = 9, OP_ALLREDUCE = 11,
       OP_REDUCE = 12, OP_REDUCE_SCATTER = 13, OP_SCAN = 14, OP_EXSCAN = 15, OP_REDUCE_SCATTER_BLOCK = 16 };
/* perflow.kinds.RmaEv (the OTF2 Rma* records) */
enum { RMA_WIN_CREATE = 0, RMA_WIN_DESTROY = 1, RMA_COLL_BEGIN = 2, RMA_COLL_END = 3, RMA_GROUP_SYNC = 4,
       RMA_REQUEST_LOCK = 5, RMA_RELEASE_LOCK = 8, RMA_PUT = 11, RMA_GET = 12, RMA_ATOMIC = 13,
       RMA_COMPLETE_NB = 15 };
/* OTF2 collective ops of window collectives, atomic types, lock types, sync level */
enum { WOP_FENCE = 0, WOP_CREATE = 17, WOP_DESTROY = 18, WOP_CREATE_ALLOC = 21, WOP_DESTROY_DEALLOC = 22 };
enum { AT_ACCUMULATE = 0, AT_COMPARE_AND_SWAP = 3, AT_FETCH_AND_OP = 5, AT_FETCH_ACCUMULATE = 8 };
enum { LOCK_EXCLUSIVE = 0, LOCK_SHARED = 1 };
#define RMA_LEVEL 3 /* OTF2_RMA_SYNC_LEVEL_PROCESS | MEMORY */
/* MPI_Init/MPI_Finalize carry no collective records: the trace builder makes
 * them world barriers from their region names. */

typedef struct pf_rec {
    double t;      /* CLOCK_MONOTONIC seconds */
    uint64_t addr; /* ENTER of an MPI call: call instruction address (return address - 1);
                      ENTER of a user function: its entry address; COLL: request id + 1, 0 when blocking;
                      IO: bytes */
    int64_t n1;    /* ENTER: call context id; P2P: bytes; COLL: bytes sent */
    int64_t n2;    /* ENTER: entry address of the innermost recorded user function (0: none);
                      P2P: request id or -1; COLL: bytes received */
    int32_t a;     /* P2P: peer (communicator rank); COLL: root or -1; IO: 1 read, 2 write */
    int32_t b;     /* P2P: tag */
    int32_t comm;  /* local communicator id (see the "C" lines of p<pid>.txt), -1 unknown */
    uint8_t type;  /* PF_R_* */
    uint8_t kind;  /* P2P or CollEv kind */
    uint16_t fn;   /* ENTER/LEAVE: enum pf_fn; COLL: collective op */
} pf_rec;
/* RMA records (type PF_R_RMA, kind RMA_*): b the local window id (an "R" line of p<pid>.txt; -1 none),
 * a the target rank in the window's communicator (-1 none), comm the local group id of a GROUP_SYNC (a "G"
 * line) and -1 elsewhere, fn the collective op / atomic type / lock type (0xFFFF none), n1 bytes put or
 * sent, n2 bytes got, addr the matching id (transfers and completions), the lock id (lock records) or
 * the sync level (COLL_END, GROUP_SYNC). */

/* a tracked non-blocking request */
typedef struct pf_req {
    uint64_t key; /* handle value; Fortran handles have bit 63 set; 0 = empty */
    int64_t id, bytes, bytes2; /* bytes2: bytes received (collectives) */
    int32_t peer, tag, comm;   /* collectives: peer = root, tag = operation */
    uint8_t recv;              /* 0 send, 1 receive, 2 collective, 3 RMA (peer = window, bytes = matching) */
} pf_req;

/* pfrec_core.c */
extern volatile int pf_active;
int pf_begin(int fn, void *ra, void *fp);
void pf_end(int fn);
double pf_t_enter(void);
double pf_now(void);
void pf_p2p(int kind, int peer, int comm, int tag, int64_t bytes, int64_t req, double t);
void pf_coll(int kind, int op, int comm, int root, int64_t sent, int64_t recvd, double t);
void pf_coll_req(int64_t reqid, int kind, int op, int comm, int root, int64_t sent, int64_t recvd, double t);
void pf_icoll_post(uint64_t key, int op, int comm, int root, int64_t sent, int64_t recvd);
void pf_io(int dir, int64_t bytes, double t);
int pf_comm(MPI_Comm c);
void pf_comm_new(MPI_Comm parent, MPI_Comm c, int fn, int salt);
void pf_comm_gone(MPI_Comm c);
void pf_after_init(void);
void pf_before_finalize(void);
void pf_after_finalize(void);
int64_t pf_bytes(int count, MPI_Datatype dt);
void pf_req_post(uint64_t key, int recv, int peer, int tag, int comm, int64_t bytes);
pf_req *pf_req_find(uint64_t key);
void pf_req_done(pf_req *r, const MPI_Status *st, double t);
void pf_req_drop(uint64_t key);
void pf_persist_new(uint64_t key, int recv, int peer, int tag, int comm, int64_t bytes);
void pf_persist_start(uint64_t key);
void pf_persist_drop(uint64_t key);
uint64_t pf_req_key(MPI_Request r);
void pf_rma(int kind, int win, int remote, int group, int op, int64_t sent, int64_t got, uint64_t addr, double t);
int64_t pf_rma_req_post(uint64_t key, int win);
int pf_group(MPI_Group grp);
int64_t pf_comm_count_win(MPI_Comm c);
void pf_txt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* crash safety (pfrec_crash.c): periodic and fatal-signal flushes */
void pf_txt_raw(const char *s, size_t n);
void pf_flush_now(void);
void pf_crash_tick(double now);
void pf_crash_install(void);

/* pfrec_rma.c: windows (for the Fortran wrappers too) */
int pf_win_new(MPI_Comm c, MPI_Win h, int alloc);
void pf_win_created(MPI_Comm c, MPI_Win h, int alloc);
void pf_win_coll_begin(void);
int pf_win_id(MPI_Win h);
int pf_win_alloc(MPI_Win h);
void pf_win_free_end(MPI_Win h, int id, int alloc);
void pf_win_gone(MPI_Win h);
void pf_win_fence_end(MPI_Win h);
void pf_win_sync(MPI_Win h, int role, MPI_Group grp, int level);
void pf_win_lock(MPI_Win h, int kind, int target, int type);
void pf_win_flush(MPI_Win h, int target);
void pf_win_transfer(MPI_Win h, int kind, int target, int op, int64_t sent, int64_t got, uint64_t key);

/* pfrec_inst.c: the innermost recorded user function (0 when none) */
extern uint64_t pf_utop;
extern volatile uint64_t pf_nsamples;
int pf_user_ok(void);
uint64_t pf_region_rec(pf_rec r, double *t);
int pf_region_unrec(uint64_t mark);
void pf_inst_close(void);
double pf_inst_min(void);

/* Thread records (type PF_R_THR, kind perflow.kinds.ThreadEv; pfrec_omp.c): a the requested team size of
 * a FORK (-1 elsewhere), n1 the lock (OMPT wait id) and n2 its acquisition number of ACQUIRE/RELEASE_LOCK.
 * ENTERs of OpenMP regions (fn PF_OMP_*): addr the construct's code address, n1 a call context or -1. */
enum { THR_FORK = 0, THR_JOIN = 1, THR_TEAM_BEGIN = 2, THR_TEAM_END = 3, THR_ACQUIRE_LOCK = 8, THR_RELEASE_LOCK = 9 };

/* pfrec_core.c, for the thread streams */
const char *pf_base(void);
long pf_sample_period_ns(int *clock);
void pf_mark_worker(void);
int pf_is_initial(void);
void pf_main_put(pf_rec r, int wait);
int64_t pf_main_ctx(void *ra, void *fp);

/* pfrec_thr.c: a worker thread's stream */
#define PF_TEVBUF (1 << 14)  /* event records per flush of a worker thread (768 KiB) */
#define PF_TSMPBUF (1 << 15) /* sample words per flush (256 KiB) */
#define PF_TCTX 512          /* call contexts cached per worker thread */
typedef struct pf_thr {
    int num;                      /* thread number in the process: 1, 2, ... */
    int pid, tid;
    int fd_ev, fd_smp;
    volatile int state;           /* 0 parked, 1 owned by the thread, 2 being written out by another */
    volatile int quiet;           /* > 0: no samples (recording, in an MPI call) */
    volatile int wait;            /* waiting in OpenMP (a barrier, a lock): no samples */
    int in_mpi, timer_on, nev, nsmp;
    double t_enter, last_flush, period;
    uint64_t nregion;             /* region records so far */
    int64_t ctx_next;
    timer_t timer;
    void *omp;                    /* the thread's OpenMP state (pfrec_omp.c) */
    struct { uintptr_t ra, fp; int64_t id; } ctx[PF_TCTX];
    pf_rec ev[PF_TEVBUF];
    uint64_t smp[PF_TSMPBUF];
} pf_thr;
pf_thr *pf_thr_self(void);
pf_thr *pf_thr_start(void);
void pf_thr_stop(void);
void pf_thr_own(pf_thr *t);
void pf_thr_park(pf_thr *t);
double pf_thr_put(pf_thr *t, pf_rec r);
pf_rec *pf_thr_slot(void);
int64_t pf_thr_ctx(pf_thr *t, void *ra, void *fp);
int pf_thr_begin(int fn, void *ra, void *fp);
void pf_thr_end(int fn);
double pf_thr_t_enter(void);
int pf_thr_in_call(void);
void pf_thr_prof(void *si, void *uc);
void pf_thr_flush_parked(void);
void pf_thr_flush_self(void);
int pf_thr_count(void);
/* pfrec_omp.c */
void pf_omp_settle(pf_thr *t);
void pf_omp_check(void);

#define PF_RA __builtin_extract_return_addr(__builtin_return_address(0))
#define PF_FP __builtin_frame_address(0)
#define PF_BEGIN(fn) pf_begin(PF_##fn, PF_RA, PF_FP)

#endif
