"""The critical path over partitions (the Dask engine's form) equals the critical path of the whole trace."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perflow.pag.partitioned import LocalRuntime
from perflow.trace.analyses import CRITICAL_PATH, EXCLUSIVE_BY_VERTEX, VERTEX_SPANS, WAIT_INSTANCES, vertex_roles
from perflow.trace.build import build_pag
from perflow.trace.criticalparts import program
from perflow.trace.partfacts import exclusive_program, spans_program
from perflow.trace.pipeline import BuildOptions, build
from perflow.trace.split import definitions_only, location_parts, split_raw
from tests.conftest import shared


def _built(raw, n_parts: int):  # noqa: ANN001, ANN202
    """``raw`` built on ``n_parts`` partitions of interleaved processes (rank r in partition r % n_parts)."""
    procs = np.unique(raw.locations["process"].to_numpy())
    assign = np.arange(len(procs)) % n_parts
    parts = split_raw(raw, location_parts(raw, assign, procs), n_parts)
    rt = LocalRuntime(n_parts, jobs=1)
    return rt, build(rt, parts, definitions_only(raw), procs, assign, BuildOptions(False, True, False))


def _check(raw, ref, n_parts: int, settings: list[dict]) -> None:  # noqa: ANN001
    rt, b = _built(raw, n_parts)
    try:
        roles, regions = vertex_roles(ref)
        names = ref.vertex_table["name"].astype(str).to_numpy()
        for s in settings:
            exp = ref.analyses.get(CRITICAL_PATH, **s)
            ws = {k: v for k, v in s.items() if k not in ("path_ends", "follow_locks")}
            w = ref.analyses.get(WAIT_INSTANCES, **ws)
            got = program(b, w, ref.n_vertices, path_ends=s.get("path_ends", "finalize"),
                          follow_locks=s.get("follow_locks", False), names=names, roles=roles, regions=regions)  # fmt: skip
            pd.testing.assert_frame_equal(got.segments, exp.segments, check_exact=True)
            pd.testing.assert_frame_equal(got.hops, exp.hops, check_exact=True)
            assert np.array_equal(got.cp_time, exp.cp_time)
            assert (got.outside, got.start, got.end) == (exp.outside, exp.start, exp.end)
            assert len(exp.hops) > 1  # the path crosses locations
        xv, xo = ref.analyses.get(EXCLUSIVE_BY_VERTEX)
        gv, go = exclusive_program(b, ref.n_vertices)
        np.testing.assert_allclose(gv, xv, rtol=1e-12)
        assert go == pytest.approx(xo, rel=1e-12)
        pd.testing.assert_frame_equal(spans_program(b, ref.n_vertices), ref.analyses.get(VERTEX_SPANS))
    finally:
        rt.close()


@pytest.mark.parametrize("name", ["omp_imbalance", "late_sender"])
def test_scorep_critical_path_over_partitions(name: str) -> None:
    """Real traces: OpenMP forks (a worker's team begins at its fork) and Scalasca's MPI_Init/Finalize ends."""
    from perflow.readers.otf2 import decode

    raw = decode(shared("scorep-scalasca", name, "traces.otf2"))
    ref = build_pag(raw, clock_correction="off")
    _check(raw, ref, 2, [{}, {"follow_locks": True}])
