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
 */
#ifndef PFREC_H
#define PFREC_H

#include <mpi.h>
#include <stdint.h>

enum pf_fn {
#define PF_FN(id, name) PF_##id,
#include "functions.def"
#undef PF_FN
    PF_NFN
};

/* record types */
enum { PF_R_ENTER = 1, PF_R_LEAVE = 2, PF_R_P2P = 3, PF_R_COLL = 4, PF_R_IO = 5 };
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

/* a tracked non-blocking request */
typedef struct pf_req {
    uint64_t key; /* handle value; Fortran handles have bit 63 set; 0 = empty */
    int64_t id, bytes, bytes2; /* bytes2: bytes received (collectives) */
    int32_t peer, tag, comm;   /* collectives: peer = root, tag = operation */
    uint8_t recv;              /* 0 send, 1 receive, 2 collective */
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

/* pfrec_inst.c: the innermost recorded user function (0 when none) */
extern uint64_t pf_utop;
extern volatile uint64_t pf_nsamples;
int pf_user_ok(void);
uint64_t pf_region_rec(pf_rec r, double *t);
int pf_region_unrec(uint64_t mark);
void pf_inst_close(void);
double pf_inst_min(void);

#define PF_RA __builtin_extract_return_addr(__builtin_return_address(0))
#define PF_FP __builtin_frame_address(0)
#define PF_BEGIN(fn) pf_begin(PF_##fn, PF_RA, PF_FP)

#endif
