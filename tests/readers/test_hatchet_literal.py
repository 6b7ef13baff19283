"""Hatchet JSON (graph literal, GraphFrame.to_json) reader: Hatchet's own test file, round trips with perflow and Hatchet."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import perflow
from perflow.cli.main import main
from perflow.errors import FormatError
from perflow.readers import detect_format
from perflow.writers.hatchet import write_literal
from tests.conftest import import_hatchet, shared
from tests.readers.helpers import check_times, fuzz_file, value

DATA = Path(__file__).resolve().parents[1] / "data" / "hatchet"
GF_JSON = DATA / "hatchet-graph-literal.json"


@pytest.fixture(scope="module")
def gfj() -> perflow.PAG:
    return perflow.read(GF_JSON)


def test_graphframe_json_facts(gfj: perflow.PAG) -> None:
    # Hatchet's test file: 24 nodes in two graphs (roots foo = node 0 and waldo = node 20)
    assert detect_format(GF_JSON) == "hatchet"
    assert gfj.attrs["format"] == "hatchet" and gfj.attrs["hatchet_form"] == "graphframe-json"
    assert gfj.n_vertices == 24
    assert sorted(gfj.vertex_table.loc[gfj.roots, "name"]) == ["foo", "waldo"]
    # dataframe rows: {"node": 0, "name": "foo", "time (inc)": 135, "time": 0}, node 6 corge 55/10, node 20 waldo 30/10
    assert value(gfj, "foo", "time_inc") == 135 and value(gfj, "foo", "time_exc") == 0
    assert value(gfj, "foo/qux/quux/corge", "time_inc") == 55
    assert value(gfj, "foo/qux/quux/corge", "time_exc") == 10
    assert float(gfj.metrics.loc[(20, 0, 0), "time_inc"]) == 30 and value(gfj, "waldo/bar/grault", "time_exc") == 10
    assert gfj.attrs["time_unit_source"].startswith("assumed")
    check_times(gfj)


def test_time_unit(tmp_path: Path) -> None:
    pag = perflow.read(GF_JSON, time_unit="ms")
    assert value(pag, "foo", "time_inc") == pytest.approx(0.135)
    assert pag.attrs["time_unit_source"] == "given"
    with pytest.raises(ValueError, match="time_unit"):
        perflow.read(GF_JSON, time_unit="hours")


def test_perflow_writer_round_trip(tmp_path: Path) -> None:
    src = perflow.read(shared("cube", "scorep-cpi", "profile.cubex"))
    out = write_literal(src, tmp_path / "cpi.json")
    assert detect_format(out) == "hatchet"
    back = perflow.read(out)
    assert back.attrs["hatchet_form"] == "graph-literal"
    assert back.call_paths().tolist() == src.call_paths().tolist()
    for m in ("time_inc", "time_exc", "visits"):  # the literal sums over processes
        np.testing.assert_allclose(back.aggregate(m, "sum").to_numpy(), src.aggregate(m, "sum").to_numpy(), rtol=1e-12)
    assert back.vertex_table["kind"].tolist() == src.vertex_table["kind"].tolist()


@pytest.mark.hatchet
def test_read_by_hatchet_and_back(tmp_path: Path) -> None:
    ht = import_hatchet()
    src = perflow.synthetic.profile(20, 3)
    out = write_literal(src, tmp_path / "syn.json")
    gf = ht.GraphFrame.from_literal(json.loads(out.read_text()))  # Hatchet reads perflow's file
    assert len(gf.graph) == src.n_vertices
    np.testing.assert_allclose(gf.dataframe["time"].sum(), src.metrics["time_exc"].sum(), rtol=1e-12)
    # Hatchet writes its literal (with its node ids) and perflow reads it back
    lit = tmp_path / "from-hatchet.json"
    lit.write_text(json.dumps(gf.to_literal(), default=float))
    back = perflow.read(lit)
    assert sorted(back.call_paths()) == sorted(src.call_paths())
    np.testing.assert_allclose(back.metrics["time_exc"].sum(), src.metrics["time_exc"].sum(), rtol=1e-12)


@pytest.mark.hatchet
def test_hatchet_literal_of_the_graphframe_file(tmp_path: Path, gfj: perflow.PAG) -> None:
    ht = import_hatchet()
    gf = ht.GraphFrame.from_json(GF_JSON.read_text())
    lit = tmp_path / "lit.json"
    lit.write_text(json.dumps(gf.to_literal(), default=float))
    back = perflow.read(lit)
    assert sorted(back.call_paths()) == sorted(gfj.call_paths())
    assert value(back, "foo/qux/quux/corge", "time_inc") == 55


def test_dag_literal_keeps_each_node_once(tmp_path: Path) -> None:
    shared_node = {
        "frame": {"name": "C", "type": "function"},
        "metrics": {"time (inc)": 4.0, "time": 4.0, "_hatchet_nid": 2},
    }
    lit = [
        {
            "frame": {"name": "A", "type": "function"},
            "metrics": {"time (inc)": 10.0, "time": 1.0, "_hatchet_nid": 0},
            "children": [
                {
                    "frame": {"name": "B", "type": "function"},
                    "metrics": {"time (inc)": 9.0, "time": 5.0, "_hatchet_nid": 1},
                    "children": [shared_node],
                },
                shared_node,
            ],
        }
    ]
    f = tmp_path / "dag.json"
    f.write_text(json.dumps(lit))
    pag = perflow.read(f)
    assert pag.call_paths().tolist() == ["A", "A/B", "A/B/C"]
    assert pag.attrs["dropped_edges"] == 1
    assert value(pag, "A", "time_inc") == 10.0  # re-derived: 1 + 5 + 4
    assert value(pag, "A", "time_inc_hatchet") == 10.0
    assert "_hatchet_nid" not in pag.metric_names


def test_perflow_native_literal(tmp_path: Path) -> None:
    lit = [
        {
            "name": "main",
            "kind": "function",
            "metrics": {"time_exc": [1.0, 2.0]},
            "children": [{"name": "solve", "metrics": {"time_exc": [3.0, 5.0]}}],
        }
    ]
    f = tmp_path / "native.json"
    f.write_text(json.dumps(lit))
    pag = perflow.read(f)
    assert len(pag.processes) == 2
    assert value(pag, "main", "time_inc", process=1) == 7.0


def test_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"frame": {"name": "A"}, "metrics": {"time": 1.0}, "children": [')
    with pytest.raises(FormatError, match=r"bad\.json \(line 1, column \d+\): invalid JSON"):
        perflow.read(bad, format="hatchet")
    noname = tmp_path / "noname.json"
    noname.write_text('[{"frame": {"type": "function"}, "metrics": {"time": 1.0}}]')
    with pytest.raises(FormatError, match=r"noname\.json.*no name"):
        perflow.read(noname)
    notlist = tmp_path / "x.json"
    notlist.write_text('{"frame": 3, "metrics": {}}')
    with pytest.raises(FormatError, match="'frame' is not an object"):
        perflow.read(notlist, format="hatchet")


def test_fuzz(tmp_path: Path) -> None:
    out = fuzz_file(lambda p: perflow.read(p, format="hatchet"), GF_JSON, tmp_path)
    assert out["error"] >= 10


def test_cli_info(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(GF_JSON)]) == 0
    out = capsys.readouterr().out
    assert "(hatchet)" in out and "vertices    24" in out
    assert "foo/qux/quux/corge" in out


def test_cli_convert_to_literal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tau.json"
    assert main(["convert", str(shared("tau", "cpi-mpi")), str(out), "--to", "literal"]) == 0
    assert "(literal)" in capsys.readouterr().out
    src, back = perflow.read(shared("tau", "cpi-mpi")), perflow.read(out)
    assert back.call_paths().tolist() == src.call_paths().tolist()
    np.testing.assert_allclose(back.aggregate("time_exc", "sum"), src.aggregate("time_exc", "sum"), rtol=1e-12)
