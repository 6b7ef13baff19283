"""The Dask engine in flows: perflow run --engine dask, lazily gathered PAGs, distributed forms of passes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed", reason="the Dask engine needs the perflow[dask] extra (dask, distributed)")

from perflow.cli.main import main  # noqa: E402
from perflow.dask import flow as dflow  # noqa: E402
from perflow.synthetic import raw_trace  # noqa: E402
from perflow.trace.build import build_pag  # noqa: E402


@pytest.fixture(scope="module")
def engine():  # type: ignore[no-untyped-def]
    from perflow.dask import Engine

    eng = Engine(n_workers=2, processes=False)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    from perflow.readers.otf2 import fast_available, write_otf2

    if not fast_available():
        pytest.skip("the fast OTF2 decoder (numba, llvmlite, otf2 C library) is not available")
    d = tmp_path_factory.mktemp("flow") / "run"
    write_otf2(raw_trace(nprocs=8, iterations=10, late_sender=0.2, imbalance=0.3, seed=4), d)
    return d


def test_dask_pag_gathers_on_first_use(engine) -> None:  # type: ignore[no-untyped-def]
    raw = raw_trace(nprocs=6, iterations=6, imbalance=0.5, seed=2)
    ref = build_pag(raw)
    pag = engine.load(raw).pag()
    assert pag.gathered == set()
    assert pag.metric_names == ref.metric_names and pag.attrs == ref.attrs
    assert pag.metric_info == ref.metric_info
    pd.testing.assert_frame_equal(pag.vertex_table, ref.vertex_table)
    np.testing.assert_array_equal(pag.aggregate("time_exc", "max"), ref.aggregate("time_exc", "max"))
    assert pag.gathered == set()  # aggregates are combined on the workers
    pd.testing.assert_frame_equal(pag.metrics, ref.metrics)
    assert pag.gathered == {"metrics"}  # a profile pass does not bring the instance tables
    pd.testing.assert_series_equal(pag.aggregate("time_exc", "median"), ref.aggregate("time_exc", "median"))
    pd.testing.assert_frame_equal(pag.trace.messages, ref.trace.messages)
    assert pag.gathered == {"metrics", "trace"}
    assert pag.vertex("MPI_Waitall").name == "MPI_Waitall"


def test_read_uses_the_active_engine(engine, archive: Path) -> None:  # type: ignore[no-untyped-def]
    import perflow
    from perflow.dask.lazy import DaskPAG

    assert not isinstance(perflow.read(archive), DaskPAG)
    with dflow.use(engine, scout_events=100):
        pag = perflow.read(archive)
        assert isinstance(pag, DaskPAG) and dflow.active() is engine
    assert dflow.active() is None
    ref = perflow.read(archive)
    pd.testing.assert_frame_equal(pag.metrics, ref.metrics)
    assert pag.attrs == ref.attrs


def test_distributed_form_of_a_pass(engine) -> None:  # type: ignore[no-untyped-def]
    raw = raw_trace(nprocs=6, iterations=6, imbalance=0.5, seed=2)
    pag = engine.load(raw).pag()
    spec = SimpleNamespace(name="imbalance")
    got = dflow.distributed_call(spec, [pag], {"metric": "time_exc", "k": 3})
    pd.testing.assert_frame_equal(got, pag.dist.imbalance("time_exc", k=3))
    assert pag.gathered == set()
    cm = dflow.distributed_call(SimpleNamespace(name="comm_matrix"), [pag], {"metric": "count"})
    assert int(cm.to_numpy().sum()) == 6 * 6 * 2
    # no distributed form (or unsupported settings): the pass runs as usual
    assert dflow.distributed_call(SimpleNamespace(name="hotspot"), [pag], {}) is NotImplemented
    assert dflow.distributed_call(SimpleNamespace(name="comm_matrix"), [pag], {"collectives": True}) is NotImplemented
    assert dflow.distributed_call(spec, [build_pag(raw)], {}) is NotImplemented


def test_distributed_forms_equal_the_passes(engine) -> None:  # type: ignore[no-untyped-def]
    from perflow.flow.registry import get_pass, load_builtin_passes

    load_builtin_passes()
    try:
        get_pass("imbalance"), get_pass("comm_matrix")
    except Exception:  # noqa: BLE001 - the profile passes are not in this build yet
        pytest.skip("the imbalance and comm_matrix passes are not available")
    raw = raw_trace(nprocs=13, iterations=6, imbalance=0.5, slow_rank=2, seed=2)
    ref = build_pag(raw)
    pag = engine.load(raw, n_partitions=3).pag()
    cases = [
        ("imbalance", {}),
        ("imbalance", {"across": "location", "criterion": "load_balance"}),
        ("imbalance", {"metric": "visits", "k": 2}),
        ("imbalance", {"metric": "bytes_sent", "threshold": 0.1, "criterion": "imbalance"}),
        ("comm_matrix", {}),
        ("comm_matrix", {"metric": "count"}),
        ("comm_matrix", {"metric": "time"}),
    ]
    for name, settings in cases:
        spec = get_pass(name)
        exp = spec.func(ref, **settings)
        got = dflow.distributed_call(spec, [pag], settings)
        assert got.attrs == exp.attrs
        if name == "imbalance":
            # std = sqrt(E[x^2] - mean^2) is noise in both engines when max - min is at the rounding level
            scale = float(exp["max"].abs().max())
            ok = (exp["max"] - exp["min"]).to_numpy() > 1e-6 * scale
            for c, atol in (("std", 1e-7 * scale), ("normalized_std", 1e-6)):
                np.testing.assert_allclose(got[c].to_numpy()[ok], exp[c].to_numpy()[ok], rtol=1e-6, atol=atol)
            got, exp = got.drop(columns=["std", "normalized_std"]), exp.drop(columns=["std", "normalized_std"])
        pd.testing.assert_frame_equal(got, exp, rtol=1e-9, check_dtype=False)
    assert pag.gathered == set()


def test_perflow_run_engine_dask(engine, archive: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["run", "overview", "-i", str(archive)]) == 0
    local = capsys.readouterr().out
    address = engine.client.scheduler.address
    assert main(["run", "overview", "-i", str(archive), "--engine", "dask", "--scheduler", address]) == 0
    assert capsys.readouterr().out == local
    assert main(["run", "overview", "-i", str(archive), "--scheduler", address]) == 2
    assert "--scheduler and --workers need --engine dask" in capsys.readouterr().err
