"""Constants shared with the C library: function ids, record layout, stream tags.

The function list is read from ``csrc/functions.def`` so that the C and Python
sides cannot disagree; the record layout mirrors ``struct pf_rec`` in
``csrc/pfrec.h``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..kinds import COLLECTIVE_NAMES, CollectiveOp, MPIClass, mpi_class

__all__ = [
    "FUNCTIONS",
    "FN",
    "REC_DTYPE",
    "R_ENTER",
    "R_LEAVE",
    "R_P2P",
    "R_COLL",
    "R_IO",
    "R_RMA",
    "R_THR",
    "OMP_FUNCTIONS",
    "omp_role",
    "S_SAMPLE",
    "S_USAMPLE",
    "S_CTX",
    "S_MAGIC",
    "region_role",
    "USER",
]

_DEF = Path(__file__).resolve().parent / "csrc" / "functions.def"

#: Function names by id (id 0 is the program's root region).
FUNCTIONS: list[str] = re.findall(r'^PF_FN\(\w+,\s*"([^"]+)"\)', _DEF.read_text(), re.MULTILINE)
#: Function id by name.
FN: dict[str, int] = {name: i for i, name in enumerate(FUNCTIONS)}
USER = FN["user function"]

#: One event record, as written by the C library and by the Python recorder.
REC_DTYPE = np.dtype(
    [
        ("t", "<f8"),
        ("addr", "<u8"),
        ("n1", "<i8"),
        ("n2", "<i8"),
        ("a", "<i4"),
        ("b", "<i4"),
        ("comm", "<i4"),
        ("type", "u1"),
        ("kind", "u1"),
        ("fn", "<u2"),
    ]
)
assert REC_DTYPE.itemsize == 48

R_ENTER, R_LEAVE, R_P2P, R_COLL, R_IO, R_RMA = 1, 2, 3, 4, 5, 6
R_THR = 8  # thread events (pfrec_omp.c): kind is perflow.kinds.ThreadEv
S_SAMPLE, S_CTX, S_USAMPLE = 1, 2, 3

S_MAGIC = 0xFFFF000000000000


#: OTF2 region roles of the OpenMP constructs the recorder records (``csrc/pfrec_omp.c``), by name
_OMP_ROLES = {
    "!$omp parallel": "parallel",
    "!$omp barrier": "barrier",
    "!$omp implicit barrier": "implicit_barrier",
    "!$omp taskwait": "task_wait",
    "!$omp taskgroup": "task_wait",
    "!$omp for": "loop",
    "!$omp sections": "sections",
    "!$omp single": "single",
    "!$omp workshare": "workshare",
    "!$omp taskloop": "loop",
    "!$omp master": "master",
    "!$omp critical": "critical",
    "!$omp critical sblock": "critical_sblock",
    "!$omp ordered": "ordered",
    "!$omp ordered sblock": "ordered_sblock",
    "!$omp task": "task",
}
#: Function ids of the OpenMP constructs and lock calls (paradigm ``openmp``).
OMP_FUNCTIONS: frozenset[int] = frozenset(i for i, n in enumerate(FUNCTIONS) if n.startswith(("!$omp ", "omp_")))


def omp_role(name: str) -> str:
    """OTF2 region role of a recorded OpenMP construct (``"function"`` for the lock calls)."""
    return _OMP_ROLES.get(name, "function")


def region_role(name: str) -> str:
    """OTF2-style region role of an MPI function (``"point2point"``, ``"barrier"``, ...)."""
    cls = mpi_class(name)
    if cls in (MPIClass.P2P, MPIClass.WAIT):
        return "point2point"
    if cls is MPIClass.SYNC:
        return "barrier"
    if cls is MPIClass.IO:
        return "file_io"
    if cls is MPIClass.RMA:
        return "rma"
    if cls is MPIClass.COLLECTIVE:
        pattern = COLLECTIVE_NAMES.get(name, CollectiveOp.ALLREDUCE).pattern
        return {"one2n": "coll_one2all", "n2one": "coll_all2one", "n2n": "coll_all2all"}.get(pattern, "coll_other")
    return "function"
