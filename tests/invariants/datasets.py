"""Every dataset the tests have, by id: shared real data, shipped samples, GPU/runtime timelines, synthetic runs,
recorded programs.

Each loader returns a PAG (read once per session) or skips the calling test
when its input is missing here. Recorded programs are read through the
``recorded_pag`` fixture (see conftest.py): recording is slow, so there is one.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from pathlib import Path

import pytest

import perflow
from tests.conftest import REPO, shared

#: Shared real data: (id, path parts) of every run in ../shared/data.
SHARED = {
    "otf2/ping-pong": ("otf2", "ping-pong", "traces.otf2"),
    "otf2/ping-pong-papi": ("otf2", "ping-pong-papi", "traces.otf2"),
    "hpctoolkit/cpi-xml": ("hpctoolkit", "cpi-xml"),
    "hpctoolkit/ping-pong-v4": ("hpctoolkit", "ping-pong-v4"),
    "caliper/cpi-json": ("caliper", "cpi-json", "cpi-callpath-profile.json"),
    "caliper/lulesh-json": ("caliper", "lulesh-json", "lulesh-annotation-profile.json"),
    "caliper/lulesh-cali": ("caliper", "lulesh-cali", "lulesh-annotation-profile.cali"),
    "cube/scorep-cpi": ("cube", "scorep-cpi", "profile.cubex"),
    "tau/cpi-mpi": ("tau", "cpi-mpi"),
    "cprofile/cycle": ("cprofile", "cprofile-cycle.pstats"),
    "scorep/ping-pong-experiment": ("otf2", "ping-pong"),  # the Score-P experiment directory (trace + scorep.cfg)
    "scaling/lulesh-27": ("scaling", "lulesh-caliper", "27_cores.cali"),
    "scaling/lulesh-343": ("scaling", "lulesh-caliper", "343_cores.cali"),
}
#: The samples shipped in examples/data.
SAMPLES = {
    "sample/ring8.otf2": REPO / "examples" / "data" / "ring8" / "traces.otf2",
    "sample/ring8.pag": REPO / "examples" / "data" / "ring8.pag",
    # CPU profiles of other tools (tests/data: how each was made, and licences, in the README beside it)
    "hatchet/graphframe-json": REPO / "tests" / "data" / "hatchet" / "hatchet-graph-literal.json",
    "pyinstrument/json": REPO / "tests" / "data" / "pyinstrument" / "work.pyinstrument.json",
    "pyinstrument/session": REPO / "tests" / "data" / "pyinstrument" / "work.pyisession",
    "pyinstrument/hatchet": REPO / "tests" / "data" / "pyinstrument" / "pyinstrument-hatchet-profile.json",
    "gprof/cg": REPO / "tests" / "data" / "gprof" / "cg.gprof.txt",
    "gprof2dot/cg": REPO / "tests" / "data" / "gprof2dot" / "cg.dot",
    "gprof2dot/callgrind": REPO / "tests" / "data" / "gprof2dot" / "callgrind-cpi.dot",
    "timemory/wall": REPO / "tests" / "data" / "timemory" / "wall.tree.json",
}
#: Real GPU and runtime timelines kept in tests/data (see the README beside each).
TIMELINES = {
    "nsys/saxpy-mpi-cuda": REPO / "tests" / "data" / "nsys" / "saxpy-mpi-cuda.sqlite",
    "nsys/cloverleaf-cuda": REPO / "tests" / "data" / "nsys" / "cloverleaf-cuda.sqlite",
    "rocprof/v1-benchmark-mi200": REPO / "tests" / "data" / "rocprof" / "v1-benchmark-mi200" / "timestamps.csv",
    "rocprof/v3-docs-two-streams": REPO / "tests" / "data" / "rocprof" / "v3-docs-two-streams",
    "projections/pingpong": REPO / "tests" / "data" / "projections" / "pingpong",
    "projections/hello": REPO / "tests" / "data" / "projections" / "hello",
}


def _gpu_example() -> perflow.PAG:
    from tests.readers.test_gputrace import example, timeline_pag

    return timeline_pag(example(copy=True))


#: Synthetic runs: fixed seeds plus one drawn per session (printed in its id, so a failure can be replayed).
_SESSION_SEED = random.SystemRandom().randrange(1_000_000)
SYNTHETIC: dict[str, Callable[[], perflow.PAG]] = {
    "synthetic/trace-seed0": lambda: perflow.synthetic.trace(nprocs=8, iterations=10, seed=0),
    "synthetic/trace-late-seed3": lambda: perflow.synthetic.trace(nprocs=6, iterations=8, seed=3, late_sender=0.5),
    "synthetic/trace-slow-seed7": lambda: perflow.synthetic.trace(
        nprocs=5, iterations=6, seed=7, slow_rank=2, imbalance=1.0
    ),
    f"synthetic/trace-seed{_SESSION_SEED}": lambda: perflow.synthetic.trace(
        nprocs=2 + _SESSION_SEED % 7, iterations=1 + _SESSION_SEED % 9, seed=_SESSION_SEED, late_sender=0.3
    ),
    "synthetic/profile": lambda: perflow.synthetic.profile(30, 4),
    "otf2kit/openmp-2x3": lambda: _openmp_example(),  # Score-P-like OpenMP trace: barriers, critical, locks
    "synthetic/gpu-timeline": _gpu_example,
    "otf2kit/rma-3": lambda: _rma_example(),  # Score-P-like MPI one-sided trace: fences, puts/gets, post/start
}


def _openmp_example() -> perflow.PAG:
    import tempfile

    from tests.otf2kit import omp_example

    return perflow.read(omp_example(Path(tempfile.mkdtemp(prefix="perflow-omp-")) / "run", processes=2))


def _rma_example() -> perflow.PAG:
    import tempfile

    from tests.otf2kit import rma_example

    return perflow.read(rma_example(Path(tempfile.mkdtemp(prefix="perflow-rma-")) / "run"))


#: Recorded programs (perflow record; the recorder tests' programs): id -> (source, arguments), 4 ranks each.
RECORDED = {
    "recorded/ring.c": ("ring.c", ("6", "500")),  # non-blocking halo exchange, a reduction
    "recorded/imbalance.c": ("imbalance.c", ("3", "3000000", "4")),  # the last rank computes 4x, allreduce
    "recorded/scaling_serial.c": ("scaling_serial.c", ("2", "40", "2")),  # gather, serial merge on rank 0, bcast
    "recorded/rma_fence.c": ("rma_fence.c", ("6", "36000")),  # MPI one-sided: puts in fence epochs, a late rank
    "recorded/rma_pscw.c": ("rma_pscw.c", ("6", "36000")),  # MPI one-sided: post/start/complete/wait, a late post
}

IDS = [*SHARED, *SAMPLES, *TIMELINES, *SYNTHETIC, *RECORDED]


@functools.cache
def _load(dataset: str) -> perflow.PAG:
    if dataset in SHARED:
        return perflow.read(str(shared(*SHARED[dataset])))
    if dataset in SAMPLES:
        path: Path = SAMPLES[dataset]
        return perflow.load(path) if path.suffix == ".pag" else perflow.read(str(path))
    if dataset in TIMELINES:
        return perflow.read(str(TIMELINES[dataset]))
    return SYNTHETIC[dataset]()


def load(dataset: str, request: pytest.FixtureRequest) -> perflow.PAG:
    """The PAG of a dataset id (skips when its input is not available here)."""
    if dataset in RECORDED:
        return request.getfixturevalue("recorded_pag")(*RECORDED[dataset])
    return _load(dataset)
