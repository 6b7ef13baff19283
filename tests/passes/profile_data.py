"""Small PAGs shared by the profile-analysis pass tests (built once per session, never modified)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

import perflow
from perflow.errors import FormatError
from tests.conftest import shared


@functools.cache
def slow_rank_trace() -> perflow.PAG:
    """8 ranks, 10 iterations, rank 3 computes twice as long (seed 1)."""
    return perflow.synthetic.trace(nprocs=8, iterations=10, slow_rank=3, seed=1)


@functools.cache
def ring_trace() -> perflow.PAG:
    """4 ranks, 3 iterations, no injected problem."""
    return perflow.synthetic.trace(nprocs=4, iterations=3, seed=0)


def allreduce_waits_for_rank7() -> perflow.PAG:
    """The backtracking worked example: rank 7's compute (vertex 4) takes 2, every other rank's 1.

    Vertices: 0 main, 1 MPI_Init, 2 init_data, 3 iteration, 4 compute,
    5 MPI_Allreduce, 6 MPI_Finalize. Every rank enters MPI_Allreduce when its
    compute ends (1.2, or 2.2 on rank 7) and leaves at 2.3.
    """
    tb = perflow.TraceBuilder()
    for p in range(8):
        c = 2.0 if p == 7 else 1.0
        tb.enter(p, 0.0, "main")
        tb.call(p, "MPI_Init", 0.0, 0.1, coll={"op": "init"})
        tb.call(p, "init_data", 0.1, 0.2)
        tb.enter(p, 0.2, "iteration")
        tb.call(p, "compute", 0.2, 0.2 + c)
        tb.call(p, "MPI_Allreduce", 0.2 + c, 2.3, coll={"bytes": 8})
        tb.leave(p, 2.3)
        tb.call(p, "MPI_Finalize", 2.3, 2.4, coll={"op": "finalize"})
        tb.leave(p, 2.4)
    return tb.build()


def literal(children: list[dict[str, Any]], nprocs: int, **attrs: Any) -> perflow.PAG:
    """A PAG ``main -> children`` with ``main`` at zero exclusive time on ``nprocs`` processes."""
    return perflow.PAG.from_literal(
        {"name": "main", "metrics": {"time_exc": [0.0] * nprocs}, "children": children}, attrs=attrs
    )


def read_shared(*parts: str, **options: Any) -> perflow.PAG:
    """Read a shared sample with :func:`perflow.read`, or skip when the sample or its reader is missing.

    OTF2 traces fall back to the decoder (``perflow.readers.otf2.decode``) plus
    :func:`perflow.build_pag` while the OTF2 package is not yet a registered reader.
    """
    path: Path = shared(*parts)
    try:
        return perflow.read(path, **options)
    except (FormatError, AttributeError) as exc:
        msg = str(exc)
        if path.suffix == ".otf2":
            try:
                from perflow.readers.otf2 import decode
            except ImportError:
                pass
            else:
                return perflow.build_pag(decode(path))
        if isinstance(exc, AttributeError) or any(
            s in msg for s in ("not available", "cannot tell the format", "unknown format")
        ):
            pytest.skip(f"no reader for {'/'.join(parts)} in this build yet: {msg}")
        raise
