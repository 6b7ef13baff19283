"""The synchronisation points computed on the partitions equal the whole trace's, the trace never gathered."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed", reason="the Dask engine needs the perflow[dask] extra (dask, distributed)")

from perflow import read  # noqa: E402
from perflow.synthetic import raw_trace  # noqa: E402
from perflow.trace.analyses import SYNC_POINTS, WAIT_INSTANCES, vertex_roles  # noqa: E402
from perflow.trace.build import build_pag  # noqa: E402
from perflow.trace.syncparts import program  # noqa: E402
from perflow.trace.syncpoints import SyncPoints  # noqa: E402

from .test_waits import _no_gather, _wait_kinds_trace  # noqa: E402

_DATA = Path("/work/shared/data")
_RING8 = Path(__file__).resolve().parents[2] / "examples" / "data" / "ring8"
#: the sample traces and a partition count each (2..8 over the set: every rank of a sample in its own at 4 or 8)
_SAMPLES = [
    (_DATA / "scorep-scalasca" / "late_sender", 4),
    (_DATA / "scorep-scalasca" / "barrier_imbalance", 8),
    (_DATA / "scorep-scalasca" / "allreduce_imbalance", 3),
    (_DATA / "scorep-scalasca" / "omp_imbalance", 2),
    (_DATA / "otf2" / "ping-pong", 2),
]


def _assert_same(got: SyncPoints, exp: SyncPoints) -> None:
    for f in SyncPoints.__dataclass_fields__:
        a, b = getattr(got, f), getattr(exp, f)
        assert a.dtype == b.dtype and np.array_equal(a, b), f


def _dist_sync(pag, **settings) -> SyncPoints:  # type: ignore[no-untyped-def]
    """The partitioned sync points (not wired into the engine yet: slower than the gathered form while the
    delay costs still gather the trace)."""
    roles, regions = vertex_roles(pag)
    return program(pag.dist.built, pag.analyses.get(WAIT_INSTANCES, **settings), roles, regions)


def _check(engine, ref, source, parts, monkeypatch, settings=({},)) -> None:  # type: ignore[no-untyped-def]
    for n in parts:
        pag = engine.load(source, n_partitions=n).pag()
        for s in settings:
            exp = ref.analyses.get(SYNC_POINTS, **s)
            assert len(exp.time)  # the example has points to compare
            with monkeypatch.context() as m:
                _no_gather(m)
                _assert_same(_dist_sync(pag, **s), exp)
        assert "trace" not in pag.gathered


def test_sync_points_synthetic(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    raw = raw_trace(nprocs=10, iterations=12, slow_rank=4, late_sender=0.3, imbalance=0.3, seed=7)
    ref = build_pag(raw)
    _check(engine, ref, raw, (3,), monkeypatch, ({}, {"late_receiver": "synchronous", "early_reduce": "earliest"}))


def test_sync_points_ring8(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    src = str(_RING8)
    _check(engine, read(src), src, (2, 8), monkeypatch)


@pytest.mark.parametrize(("path", "n"), _SAMPLES, ids=[p.name for p, _ in _SAMPLES])
def test_sync_points_otf2_samples(engine, monkeypatch, path, n) -> None:  # type: ignore[no-untyped-def]
    src = path / "traces.otf2"
    if not src.exists():
        pytest.skip(f"{src} not available")
    _check(engine, read(str(src)), str(src), (n,), monkeypatch)


def test_sync_points_of_every_wait_kind(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Late Sender (a Waitall completing two late messages: two points at one call), wrong order, Late
    Receiver, late broadcast, early reduce, a barrier; every rank in its own partition."""
    raw = _wait_kinds_trace().raw()
    ref = build_pag(raw, clock_correction="off")  # the engine does not correct clocks
    exp = ref.analyses.get(SYNC_POINTS)
    assert (exp.partner >= 0).sum() >= 8 and (exp.group >= 0).sum() >= 12
    for load in ({"partition": "round_robin", "n_partitions": 6},):
        pag = engine.load(raw, **load).pag()
        for settings in ({}, {"late_receiver": "synchronous", "early_reduce": "earliest"}):
            with monkeypatch.context() as m:
                _no_gather(m)
                got = _dist_sync(pag, **settings)
            _assert_same(got, ref.analyses.get(SYNC_POINTS, **settings))
            w = pag.analyses.get(WAIT_INSTANCES, **settings)
            assert np.all(got.wid < len(w))
