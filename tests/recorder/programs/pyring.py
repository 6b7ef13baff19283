"""mpi4py test program: a ring exchange (pickled and buffer), an allreduce and a compute kernel.

Arguments: ITER [EXIT_STATUS [WORK]]. Rank r sends ``{"from": r, "step": i}`` to rank r+1 (tag 21) with isend/recv,
then a 1000-float64 buffer with Isend/Irecv/Waitall (tag 22), ITER times, each followed by
WORK (20000) iterations of compute; then the last rank computes longer in ``slow_work`` before a final allreduce.
"""

import os
import sys
import time

import numpy as np
from mpi4py import MPI


def work(n):
    s = 0.0
    for i in range(1, n):
        s += 1.0 / (i * i)
    return s


def slow_work(n):
    s = 0.0
    for i in range(1, n):
        s += 1.0 / (i * i + 1.0)
    return s


def exchange(comm, step):
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    req = comm.isend({"from": rank, "step": step}, dest=right, tag=21)  # SITE:py_isend
    msg = comm.recv(source=left, tag=21)  # SITE:py_recv
    req.wait()
    out = np.full(1000, float(rank))
    inp = np.empty(1000)
    reqs = [comm.Irecv(inp, source=left, tag=22), comm.Isend(out, dest=right, tag=22)]  # SITE:py_Isend
    MPI.Request.Waitall(reqs)  # SITE:py_waitall
    return msg["from"] + inp[0]


def main():
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    size_of_work = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    total = 0.0
    bench = os.environ.get("PERFLOW_BENCH")  # benchmarks: time the main phase on rank 0
    if bench:
        comm.Barrier()
        t0, c0 = MPI.Wtime(), time.process_time()
    for step in range(iters):
        total += exchange(comm, step)
        total += work(size_of_work)
    if rank == size - 1:
        total += slow_work(400000)
    if bench:
        comm.Barrier()
        if rank == 0:
            print(f"bench-seconds {MPI.Wtime() - t0:.6f} cpu {time.process_time() - c0:.6f}", file=sys.stderr)
    result = comm.allreduce(total, op=MPI.SUM)  # SITE:py_allreduce
    buf = np.array([rank], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, buf)
    if rank == 0:
        print(f"pyring: {size} ranks, {iters} steps, result {result:.6f}, ranks sum {int(buf[0])}")
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)


if __name__ == "__main__":
    main()
