"""The Dask engine in flows: perflow run --engine dask, lazily gathered PAGs, passes whose analyses run on workers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed", reason="the Dask engine needs the perflow[dask] extra (dask, distributed)")

from perflow.cli.main import main  # noqa: E402
from perflow.flow.engine import current_engine, using  # noqa: E402
from perflow.synthetic import raw_trace  # noqa: E402
from perflow.trace.build import build_pag  # noqa: E402


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    from perflow.readers.otf2 import fast_available
    from perflow.writers.otf2 import write_otf2

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
    pag = perflow.read(archive, engine=engine)
    assert isinstance(pag, DaskPAG)
    with using(engine):
        assert current_engine() is engine
    assert current_engine() is None
    ref = perflow.read(archive)
    pd.testing.assert_frame_equal(pag.metrics, ref.metrics)
    assert pag.attrs == ref.attrs
    # a profile is read locally even with an engine (it declines)
    saved = ref.save(archive.parent / "saved.pag")
    assert not isinstance(perflow.read(saved, engine=engine), DaskPAG)


def test_flows_run_on_the_engine(engine, archive: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import perflow
    from perflow.dask.lazy import DaskPAG

    read = []
    real = type(engine).read

    def spy(self, path, format=None, **options):  # type: ignore[no-untyped-def]
        out = real(self, path, format, **options)
        read.append(out)
        return out

    monkeypatch.setattr(type(engine), "read", spy)
    local = perflow.run("imbalance", pag=str(archive))
    on_dask = perflow.run("imbalance", pag=str(archive), engine=engine)
    assert on_dask.ok, on_dask.errors
    assert len(read) == 1 and isinstance(read[0], DaskPAG)  # the flow's input was read on the cluster
    assert "trace" not in read[0].gathered  # profile passes gather the metrics at most, never the instance tables
    for name, value in local.outputs.items():
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(on_dask.outputs[name], value, rtol=1e-6)
        elif isinstance(value, str):
            assert on_dask.outputs[name] == value
        else:  # figures
            assert type(on_dask.outputs[name]) is type(value)


def test_passes_equal_on_both_engines_without_gathering(engine) -> None:  # type: ignore[no-untyped-def]
    from perflow.flow.registry import get_pass

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
        ("hotspot", {"k": 5}),
    ]
    for name, settings in cases:
        spec = get_pass(name)
        exp = spec.func(ref, **settings)
        got = spec.func(pag, **settings)
        assert got.attrs.keys() == exp.attrs.keys()
        for k, v in exp.attrs.items():  # totals are sums re-associated over partitions
            assert got.attrs[k] == (pytest.approx(v, rel=1e-12) if isinstance(v, float) else v), k
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
    assert "--scheduler and --workers need an engine that takes them" in capsys.readouterr().err
    assert main(["run", "overview", "-i", str(archive), "--engine", "dusk"]) == 2
    assert "unknown engine 'dusk'; did you mean 'dask'?" in capsys.readouterr().err


def test_a_trace_of_collectives_only(engine, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Three ranks and a barrier, no message: the partitioner has no edge to cut; the flow runs as locally."""
    from perflow.readers.otf2 import fast_available
    from perflow.trace.builder import TraceBuilder
    from perflow.writers.otf2 import write_otf2

    if not fast_available():
        pytest.skip("the fast OTF2 decoder (numba, llvmlite, otf2 C library) is not available")
    tb = TraceBuilder(nprocs=3)
    for p in range(3):
        with tb.region(p, "main", 0.0, 2.0):
            tb.call(p, "MPI_Barrier", 0.5 + 0.2 * p, 1.5, coll={"op": "barrier"})
    write_otf2(tb.raw(), tmp_path / "barrier")
    address = engine.client.scheduler.address
    assert main(["run", "wait_states", "-i", str(tmp_path / "barrier")]) == 0
    local = capsys.readouterr().out
    assert (
        main(["run", "wait_states", "-i", str(tmp_path / "barrier"), "--engine", "dask", "--scheduler", address]) == 0
    )
    assert capsys.readouterr().out == local
    assert "wait_barrier" in local


def _stable(page: str) -> str:
    """The page with Bokeh's per-render ids (UUIDs, ``p1234`` model ids) numbered in order of appearance."""
    import re

    seen: dict[str, str] = {}

    def number(m: re.Match[str]) -> str:
        return seen.setdefault(m.group(0), f"<id{len(seen)}>")

    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\bp\d{3,}\b", number, page)


def test_the_report_page_is_the_same_on_both_engines(engine) -> None:  # type: ignore[no-untyped-def]
    import perflow
    from perflow.flow.outputs import input_pag, run_page

    raw = raw_trace(nprocs=4, iterations=4, late_sender=0.2, seed=3)
    local = build_pag(raw)
    dist = engine.load(raw, n_partitions=2).pag()
    pages = []
    for pag in (local, dist):
        res = perflow.run("wait_states", pag=pag, jobs=1)
        assert input_pag(res) is pag  # an engine's PAG is the run's input PAG too
        pages.append(_stable(run_page(res.outputs, pag, title="t", subtitle="s")))
    assert 'id="pf-timeline"' in pages[0] and 'id="pf-panes"' in pages[0]  # the timeline and the profile panes
    assert pages[1] == pages[0]


def test_the_engine_says_why_it_declines(engine, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    import logging

    prof = tmp_path / "profile.cubex"
    prof.write_bytes(b"")
    with caplog.at_level(logging.INFO, logger="perflow.dask.engine"):
        assert engine.read(prof, "cube") is None
        assert engine.read(tmp_path, None) is None
    said = [r.getMessage() for r in caplog.records if r.name == "perflow.dask.engine"]
    assert said == [
        f"the Dask engine declines to read {prof}: it reads OTF2 traces, not cube data; reading it here",
        f"the Dask engine declines to read {tmp_path}: not an OTF2 archive; reading it here",
    ]
