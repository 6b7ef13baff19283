"""Saving and loading PAGs: exact round trips, atomic saves, clear errors."""

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perflow
from perflow import PAG
from perflow.errors import FormatError
from perflow.pag import persist


def assert_same(a: PAG, b: PAG) -> None:
    pd.testing.assert_frame_equal(a.vertex_table, b.vertex_table)
    pd.testing.assert_frame_equal(a.metrics, b.metrics)
    assert a.metric_info == b.metric_info
    assert a.attrs == b.attrs
    assert (a.trace is None) == (b.trace is None)
    if a.trace is not None:
        for t in ("intervals", "messages", "collectives"):
            pd.testing.assert_frame_equal(getattr(a.trace, t), getattr(b.trace, t))
        assert a.trace.comm_names == b.trace.comm_names
        assert {k: v.tolist() for k, v in a.trace.comms.items()} == {k: v.tolist() for k, v in b.trace.comms.items()}


def test_trace_pag_round_trip(tmp_path):
    pag = perflow.synthetic.trace(nprocs=4, iterations=6, late_sender=0.2, seed=5)
    out = pag.save(tmp_path / "run.pag")
    assert sorted(p.name for p in out.iterdir()) == [
        "collectives.parquet",
        "intervals.parquet",
        "manifest.json",
        "messages.parquet",
        "metrics.parquet",
        "vertices.parquet",
    ]
    back = perflow.load(out)
    assert_same(pag, back)
    # the loaded PAG works like the original
    assert back.parallel.edge_table.equals(pag.parallel.edge_table)
    assert perflow.read(out).n_vertices == pag.n_vertices


@st.composite
def literal_pags(draw):
    nproc = draw(st.integers(1, 4))
    nthr = draw(st.integers(1, 2))
    n = draw(st.integers(1, 12))
    names = st.text(alphabet="abcxyz_MPI", min_size=1, max_size=6)
    vt = pd.DataFrame(
        {
            "name": [draw(names) for _ in range(n)],
            "parent": [-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)],
            "kind": [draw(st.sampled_from(["function", "loop", "mpi", "io"])) for _ in range(n)],
            "line": [draw(st.integers(-1, 500)) for _ in range(n)],
        }
    )
    rows = draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, nproc - 1), st.integers(0, nthr - 1)),
            min_size=1,
            max_size=30,
            unique=True,
        )
    )
    vals = st.floats(allow_nan=False, allow_infinity=False, width=64, min_value=-1e12, max_value=1e12)
    m = pd.DataFrame(rows, columns=["vertex", "process", "thread"])
    m["time_exc"] = [draw(vals) for _ in rows]
    m["bytes"] = [draw(st.integers(0, 2**40)) for _ in rows]
    attrs = {"source": draw(names), "nprocs": nproc, "note": draw(st.text(max_size=10))}
    return PAG.from_frames(vt, m, attrs=attrs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(literal_pags())
def test_round_trip_is_exact(tmp_path, pag):
    out = pag.save(tmp_path / "p.pag")
    assert_same(pag, perflow.load(out))


def test_interrupted_save_leaves_the_old_pag(tmp_path, monkeypatch):
    a = PAG.from_literal({"name": "a", "metrics": {"time_exc": [1.0]}})
    b = PAG.from_literal({"name": "b", "metrics": {"time_exc": [2.0]}})
    path = a.save(tmp_path / "x.pag")
    calls = {"n": 0}
    real = persist._write_parquet

    def dying(df, p):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt("killed")
        real(df, p)

    monkeypatch.setattr(persist, "_write_parquet", dying)
    with pytest.raises(KeyboardInterrupt):
        b.save(path)
    monkeypatch.undo()
    assert perflow.load(path).vertex(0).name == "a"
    assert [p.name for p in tmp_path.iterdir()] == ["x.pag"]  # no temporary left behind
    # a first save killed halfway leaves nothing at the path
    monkeypatch.setattr(persist, "_write_parquet", dying)
    calls["n"] = 0
    with pytest.raises(KeyboardInterrupt):
        b.save(tmp_path / "y.pag")
    assert not (tmp_path / "y.pag").exists()


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        perflow.load(tmp_path / "none.pag")
    d = tmp_path / "half.pag"
    d.mkdir()
    (d / "vertices.parquet").write_bytes(b"PAR1")
    with pytest.raises(FormatError, match="half.pag: not a saved PAG \\(no manifest.json"):
        perflow.load(d)
    pag = PAG.from_literal({"name": "a", "metrics": {"time_exc": [1.0]}})
    good = pag.save(tmp_path / "good.pag")
    mf = json.loads((good / "manifest.json").read_text())
    mf["version"] = 99
    (good / "manifest.json").write_text(json.dumps(mf))
    with pytest.raises(FormatError, match="format version 99 is newer"):
        perflow.load(good)
    mf["version"] = 1
    (good / "manifest.json").write_text(json.dumps(mf))
    data = (good / "metrics.parquet").read_bytes()
    (good / "metrics.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match="metrics.parquet: cannot read the table"):
        perflow.load(good)
    (good / "manifest.json").write_text("{not json")
    with pytest.raises(FormatError, match="invalid JSON"):
        perflow.load(good)


def test_refuses_to_overwrite_other_things(tmp_path):
    pag = PAG.from_literal({"name": "a", "metrics": {"time_exc": [1.0]}})
    (tmp_path / "data").mkdir()
    with pytest.raises(FormatError, match="not a saved PAG; refusing to replace it"):
        pag.save(tmp_path / "data")
    p = pag.save(tmp_path / "x.pag")
    with pytest.raises(FileExistsError):
        pag.save(p, overwrite=False)
    np.testing.assert_array_equal(perflow.load(p).metrics["time_exc"].to_numpy(), [1.0])
