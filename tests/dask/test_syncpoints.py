"""The synchronisation points computed on the partitions equal the whole trace's, the trace never gathered."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed", reason="the Dask engine needs the perflow[dask] extra (dask, distributed)")

from perflow import read  # noqa: E402
from perflow.synthetic import raw_trace  # noqa: E402
from perflow.trace.analyses import SYNC_POINTS, WAIT_INSTANCES  # noqa: E402
from perflow.trace.build import build_pag  # noqa: E402
from perflow.trace.syncpoints import SyncPoints  # noqa: E402

from .test_waits import _no_gather, _wait_kinds_trace  # noqa: E402

_DATA = Path("/work/shared/data")
_RING8 = Path(__file__).resolve().parents[2] / "examples" / "data" / "ring8"
_SAMPLES = [
    _DATA / "scorep-scalasca" / "late_sender",
    _DATA / "scorep-scalasca" / "barrier_imbalance",
    _DATA / "scorep-scalasca" / "allreduce_imbalance",
    _DATA / "scorep-scalasca" / "omp_imbalance",
    _DATA / "otf2" / "ping-pong",
]


def _assert_same(got: SyncPoints, exp: SyncPoints) -> None:
    for f in SyncPoints.__dataclass_fields__:
        a, b = getattr(got, f), getattr(exp, f)
        assert a.dtype == b.dtype and np.array_equal(a, b), f


def _check(engine, ref, source, parts, monkeypatch, **settings) -> None:  # type: ignore[no-untyped-def]
    exp = ref.analyses.get(SYNC_POINTS, **settings)
    assert len(exp.time)  # the example has points to compare
    for n in parts:
        pag = engine.load(source, n_partitions=n).pag()
        with monkeypatch.context() as m:
            _no_gather(m)
            _assert_same(pag.analyses.get(SYNC_POINTS, **settings), exp)
        assert "trace.sync_points (program)" in " ".join(pag.dist.timings)
        assert "trace" not in pag.gathered


def test_sync_points_synthetic(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    raw = raw_trace(nprocs=10, iterations=12, slow_rank=4, late_sender=0.3, imbalance=0.3, seed=7)
    ref = build_pag(raw)
    _check(engine, ref, raw, (2, 3, 7), monkeypatch)
    _check(engine, ref, raw, (3,), monkeypatch, late_receiver="synchronous", early_reduce="earliest")


def test_sync_points_ring8(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    src = str(_RING8)
    _check(engine, read(src), src, (2, 5, 8), monkeypatch)


@pytest.mark.parametrize("path", _SAMPLES, ids=lambda p: p.name)
def test_sync_points_otf2_samples(engine, monkeypatch, path) -> None:  # type: ignore[no-untyped-def]
    src = path / "traces.otf2"
    if not src.exists():
        pytest.skip(f"{src} not available")
    _check(engine, read(str(src)), str(src), (2, 4, 8), monkeypatch)


def test_sync_points_of_every_wait_kind(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Late Sender (a Waitall completing two late messages: two points at one call), wrong order, Late
    Receiver, late broadcast, early reduce, a barrier; every rank in its own partition, then 3."""
    raw = _wait_kinds_trace().raw()
    ref = build_pag(raw, clock_correction="off")  # the engine does not correct clocks
    exp = ref.analyses.get(SYNC_POINTS)
    assert (exp.partner >= 0).sum() >= 8 and (exp.group >= 0).sum() >= 12
    for load in ({"partition": "round_robin", "n_partitions": 6}, {"partition": "round_robin", "n_partitions": 3}):
        pag = engine.load(raw, **load).pag()
        for settings in ({}, {"late_receiver": "synchronous", "early_reduce": "earliest"}):
            with monkeypatch.context() as m:
                _no_gather(m)
                got = pag.analyses.get(SYNC_POINTS, **settings)
            _assert_same(got, ref.analyses.get(SYNC_POINTS, **settings))
            w = pag.analyses.get(WAIT_INSTANCES, **settings)
            assert np.all(got.wid < len(w))
