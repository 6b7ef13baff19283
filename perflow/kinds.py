"""Enumerations shared by every layer: vertex kinds, event kinds, MPI operations, library modules.

The numeric values of :class:`CollectiveOp` are those of OTF2's
``OTF2_CollectiveOp`` so that OTF2 readers and writers can pass them through
unchanged.
"""

from __future__ import annotations

import enum
import re

__all__ = [
    "VertexKind",
    "CollectiveOp",
    "P2P",
    "CollEv",
    "ThreadEv",
    "IoEv",
    "IoMode",
    "RmaEv",
    "MPIClass",
    "classify_region",
    "mpi_class",
    "COLLECTIVE_NAMES",
    "GPU_IDLE",
    "IDLE_REGIONS",
    "OFF_CPU",
    "is_gpu_api",
    "MPI_MODULE",
    "SYSTEM_DIRS",
    "is_library_module",
]


class VertexKind(enum.StrEnum):
    """What a top-down vertex (a code region in a calling context) is."""

    ROOT = "root"
    FUNCTION = "function"
    LOOP = "loop"
    CALL_SITE = "callsite"
    STATEMENT = "statement"
    MPI = "mpi"
    OPENMP = "openmp"
    THREAD = "thread"
    IO = "io"
    MEMORY = "memory"
    GPU = "gpu"
    PYTHON = "python"
    MEASUREMENT = "measurement"
    UNKNOWN = "unknown"


class CollectiveOp(enum.IntEnum):
    """Collective operations, numbered as in OTF2."""

    BARRIER = 0
    BCAST = 1
    GATHER = 2
    GATHERV = 3
    SCATTER = 4
    SCATTERV = 5
    ALLGATHER = 6
    ALLGATHERV = 7
    ALLTOALL = 8
    ALLTOALLV = 9
    ALLTOALLW = 10
    ALLREDUCE = 11
    REDUCE = 12
    REDUCE_SCATTER = 13
    SCAN = 14
    EXSCAN = 15
    REDUCE_SCATTER_BLOCK = 16
    CREATE_HANDLE = 17
    DESTROY_HANDLE = 18
    ALLOCATE = 19
    DEALLOCATE = 20
    CREATE_HANDLE_AND_ALLOCATE = 21
    DESTROY_HANDLE_AND_DEALLOCATE = 22
    # Not OTF2 operations: perflow marks MPI_Init/MPI_Finalize as world barriers.
    INIT = 100
    FINALIZE = 101

    @property
    def pattern(self) -> str:
        """The synchronisation pattern: ``"n2n"``, ``"one2n"``, ``"n2one"``, ``"scan"``, ``"barrier"``."""
        return _PATTERN.get(self, "n2n")


_PATTERN = {
    CollectiveOp.BARRIER: "barrier",
    CollectiveOp.INIT: "barrier",
    CollectiveOp.FINALIZE: "barrier",
    CollectiveOp.BCAST: "one2n",
    CollectiveOp.SCATTER: "one2n",
    CollectiveOp.SCATTERV: "one2n",
    CollectiveOp.GATHER: "n2one",
    CollectiveOp.GATHERV: "n2one",
    CollectiveOp.REDUCE: "n2one",
    CollectiveOp.SCAN: "scan",
    CollectiveOp.EXSCAN: "scan",
}


class P2P(enum.IntEnum):
    """Kinds of point-to-point events in a raw trace (see :mod:`perflow.trace.raw`)."""

    SEND = 0  # blocking send issued (inside MPI_Send/Ssend/Bsend/Rsend)
    ISEND = 1  # non-blocking send posted; completed by ISEND_COMPLETE with the same request
    ISEND_COMPLETE = 2
    RECV = 3  # blocking receive completed (peer = actual source)
    IRECV_REQUEST = 4  # non-blocking receive posted (peer/tag may be wildcards)
    IRECV = 5  # non-blocking receive completed (peer = actual source)
    REQUEST_TEST = 6  # a request tested without completion
    REQUEST_CANCELLED = 7
    SSEND = 8  # synchronous blocking send (MPI_Ssend): completes only once matched


class CollEv(enum.IntEnum):
    """Collective event kinds in a raw trace."""

    BEGIN = 0
    END = 1


class ThreadEv(enum.IntEnum):
    """Threading event kinds in a raw trace (OTF2's thread fork/join, team, create/wait and lock events)."""

    FORK = 0
    JOIN = 1
    TEAM_BEGIN = 2
    TEAM_END = 3
    CREATE = 4
    BEGIN = 5
    WAIT = 6
    END = 7
    ACQUIRE_LOCK = 8  # ``lock`` acquired (``order``: its acquisition number, counted over all threads)
    RELEASE_LOCK = 9  # ``lock`` released (``order``: the acquisition it ends)


class IoEv(enum.IntEnum):
    """I/O event kinds in a raw trace (OTF2's IoOperationBegin / IoOperationComplete)."""

    BEGIN = 0
    COMPLETE = 1


class IoMode(enum.IntEnum):
    """I/O operation modes, numbered as OTF2's ``OTF2_IoOperationMode``."""

    READ = 0
    WRITE = 1
    FLUSH = 2


class RmaEv(enum.IntEnum):
    """RMA (one-sided communication) event kinds in a raw trace, one per OTF2 ``Rma*`` record."""

    WIN_CREATE = 0
    WIN_DESTROY = 1
    COLLECTIVE_BEGIN = 2
    COLLECTIVE_END = 3  # ``op`` the collective operation (fence: barrier), ``level`` the sync level, ``remote`` root
    GROUP_SYNC = 4  # post/start/complete/wait: ``group`` the epoch's group, ``level`` the sync level
    REQUEST_LOCK = 5  # ``remote`` the target, ``matching`` the lock id, ``op`` the lock type (0 exclusive, 1 shared)
    ACQUIRE_LOCK = 6
    TRY_LOCK = 7
    RELEASE_LOCK = 8
    SYNC = 9  # ``op`` the sync type
    WAIT_CHANGE = 10
    PUT = 11  # ``remote`` the target, ``bytes`` put, ``matching`` the operation's id
    GET = 12  # ``received`` the bytes got
    ATOMIC = 13  # ``op`` the atomic type, ``bytes`` sent, ``received`` got
    OP_COMPLETE_BLOCKING = 14
    OP_COMPLETE_NON_BLOCKING = 15
    OP_TEST = 16
    OP_COMPLETE_REMOTE = 17


class MPIClass(enum.StrEnum):
    """Coarse class of an MPI call, used by breakdowns and wait-state analyses."""

    P2P = "p2p"
    COLLECTIVE = "collective"
    SYNC = "sync"
    WAIT = "wait"
    IO = "io"
    SETUP = "setup"
    RMA = "rma"
    OTHER = "other"


COLLECTIVE_NAMES: dict[str, CollectiveOp] = {
    "MPI_Barrier": CollectiveOp.BARRIER,
    "MPI_Ibarrier": CollectiveOp.BARRIER,
    "MPI_Bcast": CollectiveOp.BCAST,
    "MPI_Gather": CollectiveOp.GATHER,
    "MPI_Gatherv": CollectiveOp.GATHERV,
    "MPI_Scatter": CollectiveOp.SCATTER,
    "MPI_Scatterv": CollectiveOp.SCATTERV,
    "MPI_Allgather": CollectiveOp.ALLGATHER,
    "MPI_Allgatherv": CollectiveOp.ALLGATHERV,
    "MPI_Alltoall": CollectiveOp.ALLTOALL,
    "MPI_Alltoallv": CollectiveOp.ALLTOALLV,
    "MPI_Alltoallw": CollectiveOp.ALLTOALLW,
    "MPI_Allreduce": CollectiveOp.ALLREDUCE,
    "MPI_Reduce": CollectiveOp.REDUCE,
    "MPI_Reduce_scatter": CollectiveOp.REDUCE_SCATTER,
    "MPI_Reduce_scatter_block": CollectiveOp.REDUCE_SCATTER_BLOCK,
    "MPI_Scan": CollectiveOp.SCAN,
    "MPI_Exscan": CollectiveOp.EXSCAN,
    "MPI_Init": CollectiveOp.INIT,
    "MPI_Init_thread": CollectiveOp.INIT,
    "MPI_Finalize": CollectiveOp.FINALIZE,
}

_P2P_RE = re.compile(
    r"^MPI_(I?[bsr]?send|I?recv|Sendrecv(_replace)?|I?[bsr]?send_init|Recv_init|Start(all)?|"
    r"I?m?probe|I?mrecv)$",
    re.IGNORECASE,
)
_WAIT_RE = re.compile(r"^MPI_(Wait|Test)(all|any|some)?$", re.IGNORECASE)
_IO_RE = re.compile(r"^MPI_File_", re.IGNORECASE)
_RMA_RE = re.compile(
    r"^MPI_(Put|Get|Accumulate|Get_accumulate|Fetch_and_op|Compare_and_swap|Win_\w+|R(put|get|accumulate|get_accumulate))$",
    re.IGNORECASE,
)
_SETUP_RE = re.compile(
    r"^MPI_(Init(_thread)?|Finalize|Comm_\w+|Group_\w+|Cart_\w+|Type_\w+|Op_\w+|Dims_create|"
    r"Get_\w+|Initialized|Finalized|Wtime|Wtick|Abort|Info_\w+|Error_\w+|Errhandler_\w+)$",
    re.IGNORECASE,
)


_LEADING_IDENT = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)")


def mpi_class(name: str) -> MPIClass | None:
    """Classify an MPI function name, or return ``None`` for a non-MPI name.

    Parameters
    ----------
    name : str
        A region name such as ``"MPI_Allreduce"`` (Fortran spellings such as
        ``"mpi_allreduce_"`` and the ``PMPI_`` prefix are accepted).

    Returns
    -------
    MPIClass or None
        ``SYNC`` for barriers, ``COLLECTIVE`` for data collectives, ``P2P`` for
        point-to-point calls, ``WAIT`` for request completion, and so on.
    """
    m = _LEADING_IDENT.match(name)  # TAU and others append "()" or a signature: "MPI_Send()"
    n = m.group(1) if m else name.strip()
    if n[:5].upper() == "PMPI_":
        n = n[1:]
    if n[:4].upper() != "MPI_" or len(n) < 5:
        return None
    rest = n[4:].rstrip("_").lower()
    n = "MPI_" + rest[:1].upper() + rest[1:]
    if n in ("MPI_Barrier", "MPI_Ibarrier"):
        return MPIClass.SYNC
    blocking = "MPI_" + rest[1:2].upper() + rest[2:] if rest.startswith("i") else n
    for cand in (n, blocking):
        if cand in COLLECTIVE_NAMES and COLLECTIVE_NAMES[cand] not in (CollectiveOp.INIT, CollectiveOp.FINALIZE):
            return MPIClass.COLLECTIVE
    if _WAIT_RE.match(n):
        return MPIClass.WAIT
    if _P2P_RE.match(n):
        return MPIClass.P2P
    if _IO_RE.match(n):
        return MPIClass.IO
    if _RMA_RE.match(n):
        return MPIClass.RMA
    if _SETUP_RE.match(n):
        return MPIClass.SETUP
    return MPIClass.OTHER


_IO_NAMES = re.compile(
    r"^(f?open(64)?|f?close|f?read|f?write|pread(64)?|pwrite(64)?|fsync|lseek(64)?|fflush|"
    r"H5\w+|nc_\w+|ncmpi_\w+|POSIX_\w+)$"
)
_OMP_RE = re.compile(r"^(!\$omp|#pragma omp|omp_|GOMP_|__kmpc_)", re.IGNORECASE)
_PTHREAD_RE = re.compile(r"^pthread_")


def classify_region(name: str, hint: str | None = None) -> VertexKind:
    """Guess the :class:`VertexKind` of a region from its name.

    Parameters
    ----------
    name : str
        Region or function name.
    hint : str, optional
        A kind reported by the data source (``"loop"``, ``"function"``, ...),
        used when the name itself says nothing more specific.

    Returns
    -------
    VertexKind
    """
    if mpi_class(name) is not None:
        return VertexKind.MPI
    if _OMP_RE.match(name):
        return VertexKind.OPENMP
    if _PTHREAD_RE.match(name):
        return VertexKind.THREAD
    if _IO_NAMES.match(name):
        return VertexKind.IO
    if hint:
        try:
            return VertexKind(hint.lower())
        except ValueError:
            pass
        h = hint.lower()
        if "loop" in h:
            return VertexKind.LOOP
        if "call" in h:
            return VertexKind.CALL_SITE
        if h in ("stmt", "line", "statement"):
            return VertexKind.STATEMENT
    if name.startswith("Loop@") or name.lower().startswith("loop at "):
        return VertexKind.LOOP
    return VertexKind.FUNCTION


#: The region a GPU stream is in while it runs nothing (readers of GPU timelines write it).
GPU_IDLE = "GPU idle"
#: The region of time a recorded thread spent off the CPU outside MPI calls (descheduled, or blocked in a
#: system call): ``perflow record`` writes its instances (role "artificial"), below the sampled code.
OFF_CPU = "off_cpu"
#: Regions that are a location's idle time: a GPU stream's (perflow's readers, Score-P) and a Charm++ PE's.
IDLE_REGIONS = frozenset({GPU_IDLE, "DEVICE IDLE", "COMPUTE IDLE", "Idle"})

_GPU_API_RE = re.compile(r"^((cuda|cu|hip|cl|nvtx|roctx)[A-Z_]|hsa_)")


def is_gpu_api(name: str) -> bool:
    """Whether a region name is a host-side GPU runtime or driver API call (CUDA, HIP, HSA, OpenCL, NVTX, ROCTx).

    ``cudaLaunchKernel``, ``cuMemcpyHtoDAsync_v2``, ``hipMemcpy``,
    ``hsa_signal_wait_scacquire``, ``clEnqueueNDRangeKernel`` are; a kernel
    name such as ``saxpy`` or ``void gemm<float>(...)``, or a copy such as
    ``[CUDA memcpy Host-to-Device]``, is not. Regions of the GPU paradigms
    that are not API calls are work the device did.
    """
    return bool(_GPU_API_RE.match(name))


#: Modules of the MPI library and its transports, perflow's own preload library and HPCToolkit's (by file name).
MPI_MODULE = re.compile(
    r"^(\.?libpfrec|libmpi|libmpich|libmpifort|libopen-(pal|rte)|libpmpi|libpmix|libucp|libucs|libuct|libfabric|"
    r"libhwloc|libevent|libpsm2|libpsm_infinipath|libibverbs|librdmacm|libmlx[45]|libxpmem|libknem|libcxi|"
    r"libhpcrun|libmonitor)"
)
#: Directories of the system's libraries.
SYSTEM_DIRS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/local/lib/")
#: System libraries by file name (``libc.so.6``, ``libm-2.31.so``, ``ld-linux-x86-64.so.2``): the C, math and
#: thread libraries, the dynamic loader, the compilers' and the OpenMP runtimes.
_SYSTEM_LIB = re.compile(
    r"^(ld-linux[\w.-]*|ld64|ld-musl[\w.-]*|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libcrypt|"
    r"libgcc_s|libstdc\+\+|libc\+\+|libc\+\+abi|libunwind|libgfortran|libquadmath|libgomp|libomp|libiomp5|libatomic|"
    r"libnuma|libz)(-[\d.]+)?\.so(\.|$)"
)


def is_library_module(module: str) -> bool:
    """Whether a code module (a file name or path, as a PAG's ``module`` column holds it) is not the user's code.

    Such modules are the system's libraries (a path under :data:`SYSTEM_DIRS`, or a
    system library's file name), the kernel's pseudo-modules (``[vdso]``, ``[vsyscall]``),
    the MPI library and perflow's recorder (:data:`MPI_MODULE`). An empty module (a
    source that names none) is the user's.
    """
    if not module:
        return False
    name = module.rsplit("/", 1)[-1]
    if name.startswith("[") and name.endswith("]"):
        return True
    return module.startswith(SYSTEM_DIRS) or bool(MPI_MODULE.match(name) or _SYSTEM_LIB.match(name))
