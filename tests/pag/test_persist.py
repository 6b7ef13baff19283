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


# ---------------------------------------------------------------------- the manifest's schema
@pytest.fixture
def saved(tmp_path):
    pag = perflow.synthetic.trace(nprocs=2, iterations=2, seed=3)
    return pag.save(tmp_path / "s.pag")


def _edit(saved, change) -> None:
    mf = json.loads((saved / "manifest.json").read_text())
    change(mf)
    (saved / "manifest.json").write_text(json.dumps(mf))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.update(version="1"), "field 'version': expected an integer >= 1, got '1'"),
        (lambda m: m.update(version=True), "field 'version': expected an integer >= 1, got True"),
        (lambda m: m.update(tables=[]), "field 'tables': expected an object, got a list"),
        (lambda m: m["tables"].pop("metrics"), "field 'tables': lists no 'metrics' table"),
        (lambda m: m["tables"].pop("intervals"), "field 'tables': lists no 'intervals' table"),
        (
            lambda m: m["tables"]["metrics"].pop("rows"),
            "field 'tables.metrics.rows': expected an integer >= 0, got None",
        ),
        (lambda m: m["tables"]["metrics"].update(rows="7"), "field 'tables.metrics.rows': expected an integer >= 0"),
        (
            lambda m: m["tables"]["metrics"].update(file="../../etc/passwd"),
            "'tables.metrics.file': '../../etc/passwd' is not a plain file name",
        ),
        (
            lambda m: m["tables"]["metrics"].update(file=3),
            "field 'tables.metrics.file': expected a string, got a number",
        ),
        (lambda m: m["tables"].update(extra={"file": "x.parquet", "rows": 1}), "field 'tables.extra': unknown table"),
        (lambda m: m.update(n_vertices=-1), "field 'n_vertices': expected an integer >= 0, got -1"),
        (lambda m: m.update(n_vertices=1), "field 'n_vertices': is 1, but the vertices table has"),
        (lambda m: m.update(metric_info=None), "field 'metric_info': expected an object, got null"),
        (
            lambda m: m["metric_info"].update(time_exc=[]),
            "field 'metric_info.time_exc': expected an object, got a list",
        ),
        (lambda m: m["metric_info"]["time_exc"].pop("name"), "field 'metric_info.time_exc': has no 'name'"),
        (lambda m: m["metric_info"]["time_exc"].update(unit=1), "field 'metric_info.time_exc.unit': expected a string"),
        (lambda m: m["metric_info"]["time_exc"].update(scale=2), "field 'metric_info.time_exc.scale': unknown field"),
        (lambda m: m.update(attrs="x"), "field 'attrs': expected an object, got a string"),
        (lambda m: m.update(has_trace="yes"), "field 'has_trace': expected a boolean, got a string"),
        (lambda m: m.update(comms={"a": [0]}), "field 'comms.a': a communicator id must be an integer"),
        (lambda m: m.update(comms={"0": [0, 2**70]}), "field 'comms.0': expected a list of 64-bit integers"),
        (lambda m: m.update(comm_names={"0": 5}), "field 'comm_names.0': expected a string, got a number"),
        (lambda m: m.update(io_handles={"x": "f"}), "field 'io_handles.x': an I/O handle id must be an integer"),
        (lambda m: m.update(io_handles={"0": None}), "field 'io_handles.0': expected a string, got null"),
        (lambda m: m.update(locations=[]), "field 'locations': expected an object, got a list"),
        (lambda m: m.update(locations={"process": [0, "a"]}), "field 'locations.process': expected a list of 32-bit"),
        (
            lambda m: m.update(locations={"process": [0, 1], "thread": [0]}),
            "field 'locations.thread': has 1 entries, the other columns 2",
        ),
        (lambda m: m.update(locations={"kind": []}), "field 'locations.kind': unknown column"),
    ],
)
def test_every_malformed_field_is_a_format_error_naming_it(saved, change, message):
    _edit(saved, change)
    with pytest.raises(FormatError) as info:
        perflow.load(saved)
    assert str(info.value).startswith(str(saved / "manifest.json") + ": ")
    assert message in str(info.value)


def test_a_manifest_that_is_not_an_object(saved):
    (saved / "manifest.json").write_text("[1, 2]")
    with pytest.raises(FormatError, match="a manifest must be a JSON object, not a list"):
        perflow.load(saved)
    assert not persist.is_saved_pag(saved)
    (saved / "manifest.json").write_text("[" * 100_000)
    with pytest.raises(FormatError, match="JSON nested deeper than the parser's limit"):
        perflow.load(saved)
    (saved / "manifest.json").write_text('{"format": ')
    with pytest.raises(FormatError, match="invalid JSON"):
        perflow.load(saved)


def test_tables_that_contradict_the_manifest(saved):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"vertex": [0, 99], "process": [0, 0], "thread": [0, 0], "t": [1.0, 2.0]}), saved / "metrics.parquet"
    )
    _edit(saved, lambda m: m["tables"]["metrics"].update(rows=2))
    with pytest.raises(FormatError, match=r"metrics.parquet: row \d+: vertex 99 is not a vertex \(ids are 0\.\."):
        perflow.load(saved)
    pq.write_table(pa.table({"vertex": [0], "t": [1.0]}), saved / "metrics.parquet")
    _edit(saved, lambda m: m["tables"]["metrics"].update(rows=1))
    with pytest.raises(FormatError, match="metrics.parquet: needs an integer column 'process'"):
        perflow.load(saved)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _fields(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _fields(v, (*prefix, k))


@pytest.fixture(scope="module")
def base_pag(tmp_path_factory):
    return perflow.synthetic.trace(nprocs=2, iterations=1, seed=1).save(tmp_path_factory.mktemp("m") / "p.pag")


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_any_manifest_edit_loads_or_is_a_format_error(base_pag, data):
    """Property: replacing or deleting any field of a real manifest never gives another exception."""
    base = base_pag
    original = json.loads((base / "manifest.json").read_text())
    mf = json.loads(json.dumps(original))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _fields(mf) if p]
        if not paths:
            break
        where = data.draw(st.sampled_from(paths))
        parent = mf
        for k in where[:-1]:
            parent = parent[k]
        if data.draw(st.booleans()):
            del parent[where[-1]]
        else:
            parent[where[-1]] = data.draw(_JSON)
    (base / "manifest.json").write_text(json.dumps(mf))
    try:
        perflow.load(base)
    except FormatError:
        pass
    finally:
        (base / "manifest.json").write_text(json.dumps(original))


def test_a_bad_manifest_is_exit_2_in_the_cli(saved, capsys):
    from perflow.cli.main import main

    _edit(saved, lambda m: m["tables"]["vertices"].update(rows="many"))
    assert main(["info", str(saved)]) == 2
    err = capsys.readouterr().err
    assert "manifest.json: field 'tables.vertices.rows': expected an integer >= 0, got 'many'" in err
    assert "Traceback" not in err
