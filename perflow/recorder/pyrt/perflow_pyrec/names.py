"""The mpi4py methods the recorder wraps, and the perflow constants it records (standard library only)."""

from __future__ import annotations

SEND, ISEND, RECV, IRECV_REQUEST, SSEND = 0, 1, 3, 4, 8  # perflow.kinds.P2P
BEGIN, END = 0, 1  # perflow.kinds.CollEv

# name: (MPI function, CollectiveOp, position of root or None, size rule)
COLLECTIVES = {
    "Barrier": ("MPI_Barrier", 0, None, "none"),
    "Bcast": ("MPI_Bcast", 1, 1, "bcast"),
    "Gather": ("MPI_Gather", 2, 2, "gather"),
    "Gatherv": ("MPI_Gatherv", 3, 2, "gather"),
    "Scatter": ("MPI_Scatter", 4, 2, "scatter"),
    "Scatterv": ("MPI_Scatterv", 5, 2, "scatter"),
    "Allgather": ("MPI_Allgather", 6, None, "both"),
    "Allgatherv": ("MPI_Allgatherv", 7, None, "both"),
    "Alltoall": ("MPI_Alltoall", 8, None, "both"),
    "Alltoallv": ("MPI_Alltoallv", 9, None, "both"),
    "Allreduce": ("MPI_Allreduce", 11, None, "reduce_all"),
    "Reduce": ("MPI_Reduce", 12, 3, "reduce"),
    "Reduce_scatter": ("MPI_Reduce_scatter", 13, None, "both"),
    "Reduce_scatter_block": ("MPI_Reduce_scatter_block", 16, None, "both"),
    "Scan": ("MPI_Scan", 14, None, "reduce_all"),
    "Exscan": ("MPI_Exscan", 15, None, "reduce_all"),
    "barrier": ("MPI_Barrier", 0, None, "none"),
    "bcast": ("MPI_Bcast", 1, 1, "none"),
    "gather": ("MPI_Gather", 2, 1, "none"),
    "scatter": ("MPI_Scatter", 4, 1, "none"),
    "allgather": ("MPI_Allgather", 6, None, "none"),
    "alltoall": ("MPI_Alltoall", 8, None, "none"),
    "allreduce": ("MPI_Allreduce", 11, None, "none"),
    "reduce": ("MPI_Reduce", 12, 2, "none"),
    "scan": ("MPI_Scan", 14, None, "none"),
    "exscan": ("MPI_Exscan", 15, None, "none"),
}
# name: (MPI function, P2P kind, pickle-based)
SENDS = {
    "send": ("MPI_Send", SEND, True),
    "ssend": ("MPI_Ssend", SSEND, True),
    "bsend": ("MPI_Bsend", SEND, True),
    "Send": ("MPI_Send", SEND, False),
    "Ssend": ("MPI_Ssend", SSEND, False),
    "Bsend": ("MPI_Bsend", SEND, False),
    "Rsend": ("MPI_Rsend", SEND, False),
}
ISENDS = {
    "isend": ("MPI_Isend", True),
    "issend": ("MPI_Issend", True),
    "ibsend": ("MPI_Ibsend", True),
    "Isend": ("MPI_Isend", False),
    "Issend": ("MPI_Issend", False),
    "Ibsend": ("MPI_Ibsend", False),
    "Irsend": ("MPI_Irsend", False),
}
CREATORS = {
    "Dup": "MPI_Comm_dup",
    "Clone": "MPI_Comm_dup",
    "Split": "MPI_Comm_split",
    "Split_type": "MPI_Comm_split_type",
    "Create": "MPI_Comm_create",
    "Create_group": "MPI_Comm_create_group",
    "Create_cart": "MPI_Cart_create",
}
